#!/usr/bin/env python3
"""Measurements and summaries of bench/run's live sections (afxdp, afpacket, precision, wire).

The throughput sections count frames where every tool's frames end up: the receive
counters of the lab's sink interface, read over netlink (`ip -n NS -s -j link show`).
The precision section reads `strobe analyze --json` reports of independent tcpdump
captures. Each measurement becomes one JSON line in the section's raw.jsonl, as in
benchlib.py, whose helpers this module shares. Standard library only.
"""

import argparse
import bisect
import json
import math
import re
import signal
import statistics
import struct
import subprocess
import sys
import time

# Importing benchlib must not leave a __pycache__ in the source tree.
sys.dont_write_bytecode = True
from benchlib import fail, load_raw, run_command  # noqa: E402

# ---------------------------------------------------------------------------------------
# Receive counters


def read_rx(netns, dev):
    """(rx packets, rx bytes, monotonic seconds) of DEV in NETNS.

    The time is the midpoint of the netlink round trip, which is what the counters
    were read closest to.
    """
    cmd = ["ip", "-n", netns, "-s", "-j", "link", "show", "dev", dev]
    before = time.monotonic()
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    except OSError as e:
        fail(f"cannot run {' '.join(cmd)}: {e}")
    except subprocess.CalledProcessError as e:
        fail(f"{' '.join(cmd)} failed: {e.stderr.strip()} (is the lab up? `strobe lab status`)")
    after = time.monotonic()
    try:
        rx = json.loads(out)[0]["stats64"]["rx"]
        return int(rx["packets"]), int(rx["bytes"]), (before + after) / 2
    except (ValueError, LookupError, TypeError) as e:
        fail(f"unexpected output of {' '.join(cmd)} ({e!r}): {out[:200]}")


def alive(pid):
    """True while PID runs (a zombie, i.e. exited but not yet reaped, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def rx_window(args):
    """Receive rate over a fixed window while a tool sends, as one JSON line.

    Waits until the counter moves (the tool has started sending), lets the tool run
    for the warm-up, then reads the counter at both ends of the window. The tool must
    still be running at the end, or the window would include idle time.
    """
    start_packets, _, _ = read_rx(args.netns, args.dev)
    deadline = time.monotonic() + args.start_timeout
    while True:
        if not alive(args.pid):
            fail(f"{args.case}: the tool (PID {args.pid}) exited before the measurement window; see its log")
        if read_rx(args.netns, args.dev)[0] > start_packets:
            break
        if time.monotonic() > deadline:
            fail(f"{args.case}: nothing arrived at {args.dev} within {args.start_timeout} s; see the tool's log")
        time.sleep(0.05)
    time.sleep(args.warmup)
    p0, b0, t0 = read_rx(args.netns, args.dev)
    time.sleep(args.seconds)
    p1, b1, t1 = read_rx(args.netns, args.dev)
    if not alive(args.pid):
        fail(f"{args.case}: the tool (PID {args.pid}) stopped inside the measurement window; "
             "give it a longer run time")
    packets, seconds = p1 - p0, t1 - t0
    if packets <= 0:
        fail(f"{args.case}: no frame arrived at {args.dev} during the {seconds:.1f} s window")
    frame_bytes = (b1 - b0) / packets
    # Every tool is set up to send the same 60-byte frame (64 with the FCS); anything
    # else means the comparison is not like for like.
    if abs(frame_bytes - args.frame_bytes) > 0.5:
        fail(f"{args.case}: frames at {args.dev} average {frame_bytes:.1f} bytes, expected "
             f"{args.frame_bytes}; the tool sends a different frame than the others")
    print(json.dumps({
        "case": args.case,
        "round": args.round,
        "rx_packets": packets,
        "rx_bytes": b1 - b0,
        "seconds": seconds,
        "frame_bytes": frame_bytes,
        "mpps": packets / seconds / 1e6,
    }))


def strobe_own_rate(path):
    """strobe's own count of a run (frames handed to the kernel per second), for the record."""
    try:
        with open(path, encoding="utf-8") as f:
            port = json.load(f)["ports"][0]
        return int(port["frames_tx"]) / int(port["elapsed_ns"]) * 1e3
    except (OSError, ValueError, LookupError, TypeError, ZeroDivisionError) as e:
        fail(f"cannot read ports[0].frames_tx/elapsed_ns from {path}: {e!r}")


def annotate(args):
    """Add strobe's own rate to the last raw line (which rx-window just wrote)."""
    try:
        with open(args.raw, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        fail(f"cannot read {args.raw}: {e}")
    if not lines:
        fail(f"{args.raw} is empty; nothing to annotate")
    row = json.loads(lines[-1])
    row["strobe_report_mpps"] = strobe_own_rate(args.strobe_report)
    lines[-1] = json.dumps(row)
    with open(args.raw, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


# ---------------------------------------------------------------------------------------
# Throughput summary (afxdp, afpacket)


def parse_peer(spec):
    """CASE=TARGET, e.g. testpmd-afxdp=1.0."""
    case, _, target = spec.partition("=")
    try:
        return case, float(target)
    except ValueError:
        fail(f"--peer takes CASE=TARGET_RATIO, e.g. testpmd-afxdp=1.0; got {spec!r}")


def summarize_rate(args):
    rows = load_raw(args.raw)
    by_case = {}
    for r in rows:
        by_case.setdefault(r["case"], {})[r["round"]] = r
    peers = [parse_peer(p) for p in args.peer]
    cases = [args.reference] + [c for c, _ in peers]
    for c in cases:
        if c not in by_case:
            fail(f"no rounds of {c} in {args.raw}")
    rounds = sorted(set.intersection(*(set(by_case[c]) for c in cases)))
    if not rounds:
        fail("no round has every tool in it")

    print()
    print(f"== {args.title} ==")
    head = f"{'round':>6}" + "".join(f" {c:>18}" for c in cases)
    head += "".join(f" {args.reference + '/' + c:>30}" for c, _ in peers)
    print(head + "   (Mpps at the receiver)")
    per_round = {c: [] for c, _ in peers}
    for n in rounds:
        line = f"{n:>6}" + "".join(f" {by_case[c][n]['mpps']:>18.3f}" for c in cases)
        for c, _ in peers:
            ratio = by_case[args.reference][n]["mpps"] / by_case[c][n]["mpps"]
            per_round[c].append(ratio)
            line += f" {ratio:>30.3f}"
        print(line)
    medians = {c: statistics.median(by_case[c][n]["mpps"] for n in rounds) for c in cases}
    line = f"{'median':>6}" + "".join(f" {medians[c]:>18.3f}" for c in cases)
    comparisons = {}
    for c, target in peers:
        ratio = medians[args.reference] / medians[c]
        line += f" {ratio:>30.3f}"
        comparisons[c] = {
            "ratio": ratio,
            "per_round_ratios": per_round[c],
            "target": target,
            "meets_target": ratio >= target,
        }
    print(line)
    for c, cmp in comparisons.items():
        verdict = "meets" if cmp["meets_target"] else "misses"
        print(f"{args.reference}/{c} = {cmp['ratio']:.3f} (ratio of medians; per-round "
              f"{min(cmp['per_round_ratios']):.3f}-{max(cmp['per_round_ratios']):.3f}); "
              f"target >= {cmp['target']}: {verdict}")
    summary = {
        "meta": json.loads(args.meta),
        "title": args.title,
        "reference": args.reference,
        "cases": cases,
        "rounds": rounds,
        "median_mpps": medians,
        "comparisons": comparisons,
        "raw": rows,
    }
    write_json(args.out, summary)


def markdown_rate(args):
    d = read_json(args.summary)
    ref, cases, rounds = d["reference"], d["cases"], d["rounds"]
    peers = [c for c in cases if c != ref]
    rows = {(r["case"], r["round"]): r for r in d["raw"]}
    out = ["| round | " + " | ".join(f"{c} Mpps" for c in cases) + " | "
           + " | ".join(f"{ref}/{c}" for c in peers) + " |"]
    out.append("|---:" * (1 + len(cases) + len(peers)) + "|")
    for n in rounds:
        cells = [f"{rows[(c, n)]['mpps']:.3f}" for c in cases]
        cells += [f"{d['comparisons'][c]['per_round_ratios'][rounds.index(n)]:.3f}" for c in peers]
        out.append(f"| {n} | " + " | ".join(cells) + " |")
    cells = [f"**{d['median_mpps'][c]:.3f}**" for c in cases]
    cells += [f"**{d['comparisons'][c]['ratio']:.3f}**" for c in peers]
    out.append("| **median** | " + " | ".join(cells) + " |")
    out.append("")
    for c in peers:
        cmp = d["comparisons"][c]
        verdict = "met" if cmp["meets_target"] else "missed"
        out.append(f"- {ref} vs {c}: **{cmp['ratio']:.2f}×** (per round "
                   f"{min(cmp['per_round_ratios']):.2f}–{max(cmp['per_round_ratios']):.2f}×), "
                   f"target ≥ {cmp['target']}×: **{verdict}**")
    own = [r["strobe_report_mpps"] for r in d["raw"]
           if r["case"] == ref and "strobe_report_mpps" in r]
    if own:
        out.append(f"- strobe's own count (frames handed to the kernel per second of its run), "
                   f"median {statistics.median(own):.3f} Mpps")
    print("\n".join(out))


# ---------------------------------------------------------------------------------------
# Precision


TCPDUMP_COUNTS = {
    "captured": re.compile(r"(\d+) packets? captured"),
    "received_by_filter": re.compile(r"(\d+) packets? received by filter"),
    "dropped_by_kernel": re.compile(r"(\d+) packets? dropped by kernel"),
}


def precision_row(args):
    """One precision measurement: the analysis of a capture plus what the tool said."""
    a = read_json(args.analysis)
    try:
        prec = a["precision"]
        row = {
            "case": args.case,
            "round": args.round,
            "target_pps": args.rate,
            "frames": int(a["packets"]),
            "achieved_pps": float(a["achieved_pps"]),
            "rate_error_pct": float(a["target"]["rate_error_pct"]),
            "within_1us": float(prec["share_within_1us"]),
            "within_100ns": float(prec["share_within_100ns"]),
            "mse_ns2": float(prec["mse_ns2"]),
            "gap_p50_ns": a["gaps"]["percentiles"].get("p50_ns"),
            "gap_p99_ns": a["gaps"]["percentiles"].get("p99_ns"),
            "max_gap_ns": a["gaps"].get("max_gap_ns"),
        }
    except (LookupError, TypeError, ValueError) as e:
        fail(f"{args.analysis}: not a `strobe analyze --json` report with a target ({e!r})")
    row.update(tcpdump_counts(args.tcpdump_log))
    if args.strobe_report:
        report = read_json(args.strobe_report)
        try:
            port = report["ports"][0]
            row["frames_sent"] = int(port["frames_tx"])
            row["late_frames"] = int(port["late_frames"])
            row["shifted_ns"] = int(port["shifted_ns"])
            he = port["handover_error"] or {}
            row["handover_p50_ns"] = he.get("p50_ns")
            row["handover_p99_ns"] = he.get("p99_ns")
            row["handover_within_1us"] = he.get("within_1us")
        except (LookupError, TypeError, ValueError) as e:
            fail(f"{args.strobe_report}: expected ports[0] with frames_tx, late_frames, "
                 f"shifted_ns, handover_error ({e!r})")
    if args.sent is not None:
        row["frames_sent"] = args.sent
    print(json.dumps(row))


PRECISION_METRICS = ("achieved_pps", "rate_error_pct", "within_1us", "within_100ns", "mse_ns2")
HANDOVER_METRICS = ("handover_p50_ns", "handover_p99_ns")


def precision_medians(rows):
    """{(target_pps, case): {metric: median over rounds}} in first-seen order."""
    groups = {}
    for r in rows:
        groups.setdefault((r["target_pps"], r["case"]), []).append(r)
    out = {}
    for key, rs in groups.items():
        m = {"rounds": len(rs)}
        for metric in PRECISION_METRICS + HANDOVER_METRICS + ("frames",):
            values = [r[metric] for r in rs if r.get(metric) is not None]
            m[metric] = statistics.median(values) if values else None
        out[key] = m
    return out


def summarize_precision(args):
    rows = load_raw(args.raw)
    if not rows:
        fail(f"{args.raw} holds no measurement")
    medians = precision_medians(rows)
    targets = {}
    for (rate, case), m in medians.items():
        if rate != args.target_rate or not case.startswith("strobe"):
            continue
        targets[case] = {
            "rate_error_pct": m["rate_error_pct"],
            "within_1us": m["within_1us"],
            "rate_error_ok": abs(m["rate_error_pct"]) < args.max_rate_error_pct,
            "within_1us_ok": m["within_1us"] >= args.min_within_1us,
        }
    print()
    print("== rate precision at the receiving veth (tcpdump, ns timestamps; medians of rounds) ==")
    print(f"{'target':>8} {'case':<16} {'kpps':>9} {'error %':>9} {'±1µs':>7} {'±100ns':>7} "
          f"{'MSE ns²':>12} {'hand-over p50/p99 ns':>21}")
    for (rate, case), m in medians.items():
        ho = (f"{m['handover_p50_ns']:.0f}/{m['handover_p99_ns']:.0f}"
              if m["handover_p50_ns"] is not None else "-")
        print(f"{rate / 1e3:>6.0f}k {case:<16} {m['achieved_pps'] / 1e3:>9.3f} "
              f"{m['rate_error_pct']:>+9.4f} {m['within_1us']:>7.2%} {m['within_100ns']:>7.2%} "
              f"{m['mse_ns2']:>12.4g} {ho:>21}")
    for case, t in targets.items():
        print(f"{case} at {args.target_rate / 1e3:.0f} kpps: rate error {t['rate_error_pct']:+.4f} % "
              f"(target |error| < {args.max_rate_error_pct} %: "
              f"{'meets' if t['rate_error_ok'] else 'misses'}), "
              f"{t['within_1us']:.2%} of gaps within ±1 µs (target ≥ {args.min_within_1us:.0%}: "
              f"{'meets' if t['within_1us_ok'] else 'misses'})")
    summary = {
        "meta": json.loads(args.meta),
        "medians": [{"target_pps": rate, "case": case, **m} for (rate, case), m in medians.items()],
        "targets": {
            "rate_pps": args.target_rate,
            "max_rate_error_pct": args.max_rate_error_pct,
            "min_within_1us": args.min_within_1us,
            "verdicts": targets,
        },
        "raw": rows,
    }
    write_json(args.out, summary)


def markdown_precision(args):
    d = read_json(args.summary)
    out = []
    rates = list(dict.fromkeys(m["target_pps"] for m in d["medians"]))
    for rate in rates:
        out.append(f"Target {rate / 1e3:.0f} kpps, medians of {max(m['rounds'] for m in d['medians'] if m['target_pps'] == rate)} rounds:")
        out.append("")
        out.append("| tool | achieved kpps | rate error % | gaps within ±1 µs | within ±100 ns | MSE (ns²) | strobe hand-over p50 / p99 |")
        out.append("|---|---:|---:|---:|---:|---:|---:|")
        for m in d["medians"]:
            if m["target_pps"] != rate:
                continue
            ho = (f"{m['handover_p50_ns']:.0f} ns / {m['handover_p99_ns']:.0f} ns"
                  if m["handover_p50_ns"] is not None else "–")
            out.append(f"| {m['case']} | {m['achieved_pps'] / 1e3:.3f} | {m['rate_error_pct']:+.4f} | "
                       f"{m['within_1us']:.2%} | {m['within_100ns']:.2%} | {m['mse_ns2']:.3g} | {ho} |")
        out.append("")
    out.append("Every round:")
    out.append("")
    out.append("| target | tool | round | frames | kpps | error % | ±1 µs | ±100 ns | MSE (ns²) | max gap | hand-over p50 / p99 | late / shifted |")
    out.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in sorted(d["raw"], key=lambda r: (r["target_pps"], r["case"], r["round"])):
        ho = (f"{r['handover_p50_ns']} / {r['handover_p99_ns']} ns"
              if r.get("handover_p50_ns") is not None else "–")
        late = (f"{r['late_frames']} / {r['shifted_ns'] / 1e6:.1f} ms"
                if r.get("late_frames") is not None else "–")
        out.append(f"| {r['target_pps'] / 1e3:.0f}k | {r['case']} | {r['round']} | {r['frames']} | "
                   f"{r['achieved_pps'] / 1e3:.3f} | {r['rate_error_pct']:+.4f} | {r['within_1us']:.2%} | "
                   f"{r['within_100ns']:.2%} | {r['mse_ns2']:.3g} | {r['max_gap_ns'] / 1e3:.0f} µs | {ho} | {late} |")
    t = d["targets"]
    if t["verdicts"]:
        out.append("")
    for case, v in t["verdicts"].items():
        out.append(f"- {case} at {t['rate_pps'] / 1e3:.0f} kpps: rate error {v['rate_error_pct']:+.4f} % "
                   f"(target < {t['max_rate_error_pct']} %: **{'met' if v['rate_error_ok'] else 'missed'}**), "
                   f"{v['within_1us']:.2%} of gaps within ±1 µs (target ≥ {t['min_within_1us']:.0%}: "
                   f"**{'met' if v['within_1us_ok'] else 'missed'}**)")
    print("\n".join(out))


# ---------------------------------------------------------------------------------------
# Wire (issue #15: timing on the wire)

# Gaps within this much of the path's floor (the 0.1 % gap quantile) count as "at the floor".
FLOOR_BAND_NS = 250

PCAP_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", 1000),  # µs timestamps, little endian
    b"\xa1\xb2\xc3\xd4": (">", 1000),
    b"\x4d\x3c\xb2\xa1": ("<", 1),  # ns timestamps
    b"\xa1\xb2\x3c\x4d": (">", 1),
}


def pcap_gaps(path):
    """Gaps (ns) between consecutive frames of a classic pcap file, in capture order."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        fail(f"cannot read {path}: {e}")
    if len(data) < 24 or data[:4] not in PCAP_MAGICS:
        fail(f"{path}: not a classic pcap file (tcpdump -w writes one)")
    endian, scale = PCAP_MAGICS[data[:4]]
    record = struct.Struct(endian + "IIII")
    stamps, offset = [], 24
    while offset + 16 <= len(data):
        sec, frac, caplen, _ = record.unpack_from(data, offset)
        stamps.append(sec * 1_000_000_000 + frac * scale)
        offset += 16 + caplen
    return [b - a for a, b in zip(stamps, stamps[1:])]


def tcpdump_counts(log_path):
    """tcpdump's closing counts (received, dropped by the kernel, …) from its log."""
    try:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError as e:
        fail(f"cannot read {log_path}: {e}")
    counts = {}
    for key, pattern in TCPDUMP_COUNTS.items():
        m = pattern.search(text)
        counts[f"tcpdump_{key}"] = int(m.group(1)) if m else None
    return counts


def quantile(sorted_values, q):
    """The q-quantile (nearest rank) of already sorted values, or None when empty."""
    if not sorted_values:
        return None
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def find_floor(obj, depth=0):
    """A path floor (a dict naming a hand-over cost and a spacing) anywhere in a report.

    Neither strobe gen nor strobe analyze promise its place or key names yet, so any dict
    holding a key that mentions "handover" (not the hand-over error distribution) and one
    that mentions "spacing" is taken, the shallowest first.
    """
    if depth > 4:
        return None
    if isinstance(obj, dict):
        keys = [k for k in obj if isinstance(k, str)]
        if any("spacing" in k for k in keys) and any("handover" in k and "error" not in k for k in keys):
            return {k: v for k, v in obj.items() if not isinstance(v, (dict, list))}
        for k, v in obj.items():
            if isinstance(v, dict) and k != "handover_error":
                found = find_floor(v, depth + 1)
                if found:
                    return found
    return None


def fit_verdicts(analysis):
    """The Poisson fits of an analysis beyond the plain one: every KS p-value, statistic and
    verdict under the poisson report's sub-objects or a top-level key that mentions floor,
    as {"path.to.key": value}. Empty before analyze has floor-aware fits."""
    out = {}

    def walk(obj, path):
        if isinstance(obj, dict):
            for k, v in obj.items():
                walk(v, f"{path}.{k}" if path else str(k))
        elif isinstance(obj, (bool, int, float, str)) or obj is None:
            leaf = path.rsplit(".", 1)[-1]
            if leaf.startswith(("ks_", "consistent", "verdict", "model", "d_", "p_")):
                out[path] = obj

    poisson = analysis.get("poisson") or {}
    for k, v in poisson.items():
        if isinstance(v, dict):
            walk(v, f"poisson.{k}")
    for k, v in analysis.items():
        if "floor" in k and k != "poisson":
            walk(v, k)
    return out


def floor_fit_summary(analysis):
    """strobe analyze's floor-aware fit (`floor_fit`), compacted: the floor it judged
    through, the share of gaps at it in the capture and in each model, and each model's KS
    statistic, p-value and verdict."""
    fit = analysis.get("floor_fit")
    if not isinstance(fit, dict):
        return None
    out = {k: fit.get(k) for k in ("handover_ns", "spacing_ns", "band_ns", "share_at_floor", "verdict")}
    for m in fit.get("fits") or []:
        name = m.get("model")
        out[name] = {k: m.get(k) for k in ("ks_d", "ks_p", "consistent", "share_at_floor")}
    return out


def strobe_run_fields(path):
    """What strobe's own report says about a run, read defensively (the floor is new)."""
    report = read_json(path)
    try:
        port = report["ports"][0]
        row = {
            "frames_sent": int(port["frames_tx"]),
            "batch": port.get("batch"),
            "late_frames": port.get("late_frames"),
            "elapsed_ns": port.get("elapsed_ns"),
            "planned_ns": port.get("planned_ns"),
            "backend_text": port.get("backend"),
        }
    except (LookupError, TypeError, ValueError) as e:
        fail(f"{path}: expected ports[0] with frames_tx ({e!r})")
    he = port.get("handover_error") or {}
    row["handover_p50_ns"] = he.get("p50_ns")
    row["handover_p99_ns"] = he.get("p99_ns")
    floor = find_floor(port) or find_floor(report)
    if floor:
        row["strobe_floor"] = floor
    if row["elapsed_ns"] and row["planned_ns"]:
        row["elapsed_over_planned"] = row["elapsed_ns"] / row["planned_ns"]
    return row


def floor_number(floor, word):
    """The first number in FLOOR whose key mentions WORD (e.g. handover, spacing)."""
    for k, v in (floor or {}).items():
        if word in k and "error" not in k and isinstance(v, (int, float)) and not isinstance(v, bool):
            return v
    return None


def rate_value(text):
    """The asked rate as pps when it is a plain number, else strobe's text (e.g. 10mpps)."""
    try:
        return float(text)
    except ValueError:
        return text


def rate_label(rate):
    if rate is None:
        return "max"
    return f"{rate / 1e3:.0f}k" if isinstance(rate, (int, float)) else str(rate)


def wire_row(args):
    args.rate = rate_value(args.rate)
    a = read_json(args.analysis)
    try:
        gaps = a["gaps"]
        row = {
            "kind": args.kind,
            "case": args.case,
            "backend": args.backend,
            "round": args.round,
            "target_pps": args.rate,
            "frames": int(a["packets"]),
            "frame_bytes": a["bytes"] / a["packets"],
            "achieved_pps": float(a["achieved_pps"]),
            "min_gap_ns": gaps.get("min_gap_ns"),
            "p1_gap_ns": gaps["percentiles"].get("p1_ns"),
            "p50_gap_ns": gaps["percentiles"].get("p50_ns"),
            "max_gap_ns": gaps.get("max_gap_ns"),
        }
        target = a.get("target")
        row["rate_error_pct"] = float(target["rate_error_pct"]) if target else None
    except (LookupError, TypeError, ValueError, ZeroDivisionError) as e:
        fail(f"{args.analysis}: not a `strobe analyze --json` report ({e!r})")
    row.update(tcpdump_counts(args.tcpdump_log))
    if args.strobe_report:
        row.update(strobe_run_fields(args.strobe_report))
    if args.sent is not None:
        row["frames_sent"] = args.sent
    if args.wall_ns is not None:
        row["wall_ns"] = args.wall_ns
    if args.ceiling_fraction is not None:
        row["ceiling_fraction"] = args.ceiling_fraction
    if args.asked_seconds is not None and args.wall_ns is not None:
        # The whole process (start-up, opening ports, the drain, writing results) past the
        # sending time asked.
        row["wall_over_asked_s"] = args.wall_ns / 1e9 - args.asked_seconds

    if args.kind == "poisson":
        p = a.get("poisson") or {}
        row["ks_d"] = p.get("ks_d_vs_target")
        row["ks_p"] = p.get("ks_p_vs_target")
        row["poisson_ok"] = p.get("consistent_with_poisson")
        row["cv"] = p.get("coefficient_of_variation")
        row["floor_fits"] = fit_verdicts(a)
        analyze_floor = find_floor(a)
        if analyze_floor:
            row["analyze_floor"] = analyze_floor
        fit = floor_fit_summary(a)
        if fit:
            row["fit"] = fit
        g = sorted(pcap_gaps(args.pcap))
        if g:
            rate = args.rate / 1e9  # per ns
            floor = quantile(g, 0.001)
            edge = floor + FLOOR_BAND_NS
            row["floor_ns"] = floor
            row["at_floor"] = bisect.bisect_right(g, edge) / len(g)
            # What exponential gaps at the asked rate put in [floor, floor + band] and below
            # the floor: a pile-up shows as at_floor well above the first, a path that cannot
            # go below its floor as the second.
            row["exp_at_floor"] = math.exp(-rate * floor) - math.exp(-rate * edge)
            row["exp_below_floor"] = 1 - math.exp(-rate * floor)
            handover = floor_number(row.get("strobe_floor") or row.get("analyze_floor"), "handover")
            if handover:
                row["below_handover"] = bisect.bisect_left(g, handover) / len(g)
                row["exp_below_handover"] = 1 - math.exp(-rate * handover)
    elif args.kind == "cbr":
        prec = a.get("precision") or {}
        row["within_1us"] = prec.get("share_within_1us")
        row["within_100ns"] = prec.get("share_within_100ns")
    elif args.kind == "burst":
        b = a.get("bursts") or {}
        row["bursts"] = b.get("burst_count")
        row["mean_train"] = b.get("mean_burst_len_packets")
        row["max_train"] = b.get("max_burst_len_packets")
        row["in_trains"] = b.get("share_packets_in_bursts")
        gaps_ns = pcap_gaps(args.pcap)
        trains, inter, run = [], [], 1
        for gap in gaps_ns:
            if gap <= args.burst_gap_ns:
                run += 1
            else:
                trains.append(run)
                inter.append(gap)
                run = 1
        trains.append(run)
        inter.sort()
        row["trains"] = len(trains)
        row["train_median"] = statistics.median(trains)
        counts = {}
        for t in trains:
            counts[t] = counts.get(t, 0) + 1
        top = sorted(counts.items(), key=lambda kv: -kv[1])[:8]
        row["train_lengths"] = {str(k): v for k, v in top}
        row["inter_train_p1_ns"] = quantile(inter, 0.01)
        row["inter_train_p50_ns"] = quantile(inter, 0.5)
        row["inter_train_p99_ns"] = quantile(inter, 0.99)
    print(json.dumps(row))


def wire_unpaced_row(args):
    run = strobe_run_fields(args.strobe_report)
    elapsed = run.get("elapsed_ns")
    if not elapsed:
        fail(f"{args.strobe_report}: no elapsed_ns; cannot tell the unpaced rate")
    row = {
        "kind": "unpaced",
        "case": f"strobe-{args.backend}",
        "backend": args.backend,
        "round": args.round,
        "target_pps": None,
        "rx_frames": args.rx_frames,
        "achieved_pps": args.rx_frames / elapsed * 1e9,
        "own_pps": run["frames_sent"] / elapsed * 1e9,
        **run,
    }
    if args.tcpdump_log:
        row.update(tcpdump_counts(args.tcpdump_log))
    print(json.dumps(row))


def fmt(value, spec, none="–"):
    return none if value is None else format(value, spec)


def wire_log(_args):
    r = json.loads(sys.stdin.read().strip().splitlines()[-1])
    head = f"{r['kind']:<8} {r['case']:<24} {rate_label(r['target_pps']):>7} r{r['round']}"
    line = f"{head}  {r['achieved_pps'] / 1e3:10.3f} kpps"
    if r.get("rate_error_pct") is not None:
        line += f"  error {r['rate_error_pct']:+8.4f} %"
    if r["kind"] == "poisson":
        line += (f"  min/p1 gap {fmt(r['min_gap_ns'], 'd')}/{fmt(r['p1_gap_ns'], 'd')} ns"
                 f"  at floor {fmt(r.get('at_floor'), '.2%')} (exp {fmt(r.get('exp_at_floor'), '.2%')})"
                 f"  KS p {fmt(r['ks_p'], '.3g')} {'ok' if r['poisson_ok'] else 'REJECT'}")
    elif r["kind"] == "cbr":
        line += (f"  ±1µs {fmt(r['within_1us'], '.2%')}"
                 f"  run {fmt(r.get('elapsed_over_planned'), '.2f')}× asked  batch {r.get('batch')}")
        if r.get("wall_over_asked_s") is not None:
            line += f"  wall {r['wall_over_asked_s']:+.3f} s past asked"
    elif r["kind"] == "burst":
        line += (f"  trains {r['trains']} median {r['train_median']} (analyze mean {fmt(r['mean_train'], '.1f')})"
                 f"  inter-train p50 {fmt(r['inter_train_p50_ns'], 'd')} ns")
    elif r["kind"] == "unpaced":
        line += f" at rx0 ({r['own_pps'] / 1e3:.3f} kpps handed over, batch {r.get('batch')})"
    if r.get("tcpdump_dropped_by_kernel"):
        line += f"  tcpdump dropped {r['tcpdump_dropped_by_kernel']}"
    print(line)


WIRE_NUMBERS = (
    "frames", "frame_bytes", "achieved_pps", "rate_error_pct", "min_gap_ns", "p1_gap_ns",
    "p50_gap_ns", "ks_d", "ks_p", "cv", "floor_ns", "at_floor", "exp_at_floor",
    "exp_below_floor", "below_handover", "exp_below_handover", "within_1us", "within_100ns",
    "elapsed_over_planned", "wall_ns", "planned_ns", "elapsed_ns", "late_frames",
    "handover_p50_ns", "handover_p99_ns", "trains", "train_median", "mean_train", "max_train",
    "in_trains", "inter_train_p1_ns", "inter_train_p50_ns", "inter_train_p99_ns", "own_pps",
    "tcpdump_dropped_by_kernel", "frames_sent", "wall_over_asked_s", "target_pps_asked",
)
# Kept from the first round as they are (verdicts, floors, settings).
WIRE_AS_IS = ("backend", "batch", "poisson_ok", "floor_fits", "strobe_floor", "analyze_floor",
              "train_lengths", "fit")


def summarize_wire(args):
    rows = load_raw(args.raw)
    if not rows:
        fail(f"{args.raw} holds no measurement")
    groups = {}
    for r in rows:
        # Runs near each round's own ceiling ask a rate of their round's: grouped by the
        # fraction, their asked rate kept as a figure.
        if r.get("ceiling_fraction") is not None:
            r["target_pps_asked"] = r["target_pps"]
            r["target_pps"] = None
        groups.setdefault((r["kind"], r["target_pps"], r["case"]), []).append(r)
    medians = []
    for (kind, rate, case), rs in groups.items():
        m = {"kind": kind, "target_pps": rate, "case": case, "rounds": len(rs),
             "ceiling_fraction": rs[0].get("ceiling_fraction")}
        for key in WIRE_NUMBERS:
            values = [r[key] for r in rs if isinstance(r.get(key), (int, float)) and not isinstance(r.get(key), bool)]
            m[key] = statistics.median(values) if values else None
        for key in WIRE_AS_IS:
            m[key] = rs[0].get(key)
        # The wire's span of the run's frames against the span its own deadlines planned:
        # the rate error of the sender, free of the sample mean of a seeded random model
        # (300 000 exponential gaps have a mean within ±0.18 % of the model's, one sigma).
        spans = [(r["frames"] - 1) / r["achieved_pps"] * 1e9 / r["planned_ns"] - 1
                 for r in rs if r.get("planned_ns") and r.get("achieved_pps") and r.get("frames")]
        m["wire_vs_planned_pct"] = statistics.median(spans) * 100 if spans else None
        # Every round's plain verdict, not only the first.
        if kind == "poisson":
            m["poisson_ok_rounds"] = sum(1 for r in rs if r.get("poisson_ok"))
        medians.append(m)
    unpaced = {m["backend"]: m["achieved_pps"] for m in medians if m["kind"] == "unpaced"}
    ditg = {m["target_pps"]: m for m in medians if m["kind"] == "poisson" and m["case"] == "d-itg"}
    for m in medians:
        if m["kind"] == "cbr" and unpaced.get(m["backend"]):
            m["paced_over_unpaced"] = m["achieved_pps"] / unpaced[m["backend"]]
        if m["kind"] == "poisson" and m["case"] != "d-itg" and m["target_pps"] in ditg:
            peer = ditg[m["target_pps"]]
            m["vs_ditg"] = {
                "achieved_ratio": m["achieved_pps"] / peer["achieved_pps"],
                "ks_d_ratio": (m["ks_d"] / peer["ks_d"]) if m["ks_d"] is not None and peer["ks_d"] else None,
            }
    summary = {
        "meta": json.loads(args.meta),
        "burst": {"pattern": args.burst_pattern, "rate": args.burst_rate},
        "floor_band_ns": FLOOR_BAND_NS,
        "medians": medians,
        "raw": rows,
    }
    print()
    print("== timing on the wire (tcpdump at rx0, ns timestamps; medians of rounds) ==")
    for m in medians:
        print(json.dumps({k: v for k, v in m.items() if v is not None and k not in ("raw",)}))
    write_json(args.out, summary)


def markdown_wire(args):
    d = read_json(args.summary)
    meds = d["medians"]
    out = []
    un = [m for m in meds if m["kind"] == "unpaced"]
    if un:
        out += ["Unpaced (`--rate max`, capture running as in the paced runs), frames counted at rx0 "
                "over strobe's transmit time:", "",
                "| path | kpps at rx0 | kpps handed over | batch | tcpdump drops |", "|---|---:|---:|---:|---:|"]
        for m in un:
            out.append(f"| {m['backend']} | {m['achieved_pps'] / 1e3:.1f} | {fmt(m['own_pps'] and m['own_pps'] / 1e3, '.1f')} | "
                       f"{m['batch']} | {fmt(m['tcpdump_dropped_by_kernel'], '.0f', '0')} |")
        out.append("")
    po = [m for m in meds if m["kind"] == "poisson"]
    if po:
        out += [f"Poisson, {fmt(po[0]['frames'], '.0f')} frames per run (medians of {max(m['rounds'] for m in po)} rounds); "
                f"\"at floor\": gaps within {d['floor_band_ns']} ns of the 0.1 % gap quantile, beside what "
                "exponential gaps at the asked rate put there:", "",
                "| target | tool | kpps | rate error % | wire span vs own schedule % | min gap | p1 gap | floor (p0.1) | at floor (exp.) | exp. below floor | KS D / p (plain) | floor-aware (analyze): floor H/S, ±δ; at floor capture / perfect sender / plain; KS D / p vs perfect sender and vs plain | strobe floor (H/S) | vs D-ITG: rate, KS D |",
                "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|"]
        for m in sorted(po, key=lambda m: (m["target_pps"], m["case"])):
            fit = m.get("fit")
            fit_text = "–"
            if fit and fit.get("perfect_sender") and fit.get("plain"):
                ps, pl = fit["perfect_sender"], fit["plain"]
                fit_text = (f"{fmt(fit['handover_ns'], '.0f')}/{fmt(fit['spacing_ns'], '.0f')} ns, ±{fmt(fit['band_ns'], '.0f')} ns; "
                            f"{fmt(fit['share_at_floor'], '.2%')} / {fmt(ps['share_at_floor'], '.2%')} / {fmt(pl['share_at_floor'], '.2%')}; "
                            f"{fmt(ps['ks_d'], '.4f')} / {fmt(ps['ks_p'], '.2g')} {'ok' if ps['consistent'] else 'REJECT'}, "
                            f"{fmt(pl['ks_d'], '.4f')} / {fmt(pl['ks_p'], '.2g')} {'ok' if pl['consistent'] else 'REJECT'}")
            fl = m.get("strobe_floor")
            fl_text = (f"{fmt(floor_number(fl, 'handover'), '.0f')} / {fmt(floor_number(fl, 'spacing'), '.0f')} ns"
                       if fl else "–")
            vs = m.get("vs_ditg")
            vs_text = (f"{vs['achieved_ratio']:.2f}×, {fmt(vs['ks_d_ratio'], '.2f')}×" if vs else "–")
            verdict = "ok" if m["poisson_ok_rounds"] == m["rounds"] else f"rejected in {m['rounds'] - m['poisson_ok_rounds']}/{m['rounds']}"
            out.append(
                f"| {rate_label(m['target_pps'])} | {m['case']} | {m['achieved_pps'] / 1e3:.3f} | {fmt(m['rate_error_pct'], '+.3f')} | "
                f"{fmt(m.get('wire_vs_planned_pct'), '+.4f')} | {fmt(m['min_gap_ns'], '.0f')} ns | {fmt(m['p1_gap_ns'], '.0f')} ns | {fmt(m['floor_ns'], '.0f')} ns | "
                f"{fmt(m['at_floor'], '.2%')} ({fmt(m['exp_at_floor'], '.2%')}) | {fmt(m['exp_below_floor'], '.2%')} | "
                f"{fmt(m['ks_d'], '.4f')} / {fmt(m['ks_p'], '.2g')} {verdict} | {fit_text} | {fl_text} | {vs_text} |")
        out.append("")
    near = [m for m in meds if m["kind"] == "cbr" and m.get("ceiling_fraction")]
    if near:
        out += ["CBR near the path's ceiling: asked a fraction of the unpaced rate the same round measured "
                "on the same path (targets: rate within ±0.01 %, the whole run within the time asked + 0.1 s):", "",
                "| path | fraction | asked kpps | kpps at rx0 | rate error % | wire span vs own schedule % | run time / asked | wall time past asked (process, start-up included) | late frames |",
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for m in near:
            out.append(
                f"| {m['backend']} | {m['ceiling_fraction']:.2f} | {fmt(m['target_pps_asked'] and m['target_pps_asked'] / 1e3, '.1f')} | "
                f"{m['achieved_pps'] / 1e3:.1f} | {fmt(m['rate_error_pct'], '+.4f')} | {fmt(m.get('wire_vs_planned_pct'), '+.4f')} | "
                f"{fmt(m['elapsed_over_planned'], '.3f')}× | {fmt(m['wall_over_asked_s'], '+.3f')} s | {fmt(m['late_frames'], '.0f')} |")
        out.append("")
    cb = [m for m in meds if m["kind"] == "cbr" and not m.get("ceiling_fraction")]
    if cb:
        out += ["CBR, default batch against `--batch 1` (one frame per call):", "",
                "| target | case | batch | kpps at rx0 | rate error % | within ±1 µs | paced / unpaced | run time / asked | late frames | tcpdump drops |",
                "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for m in sorted(cb, key=lambda m: (m["target_pps"], m["case"])):
            out.append(
                f"| {rate_label(m['target_pps'])} | {m['case']} | {m['batch']} | {m['achieved_pps'] / 1e3:.1f} | "
                f"{fmt(m['rate_error_pct'], '+.3f')} | {fmt(m['within_1us'], '.2%')} | {fmt(m.get('paced_over_unpaced'), '.2f')} | "
                f"{fmt(m['elapsed_over_planned'], '.2f')}× | {fmt(m['late_frames'], '.0f')} | {fmt(m['tcpdump_dropped_by_kernel'], '.0f', '0')} |")
        out.append("")
    bu = [m for m in meds if m["kind"] == "burst"]
    if bu:
        out += [f"Trains: `--pattern {d['burst']['pattern']} --rate {d['burst']['rate']}`; at rx0 a train is a run of "
                f"gaps at or below {d['meta'].get('settings', {}).get('burst_gap_ns', '?')} ns:", "",
                "| case | kpps at rx0 | trains | median train | analyze mean / max train | commonest lengths (count) | inter-train gap p1 / p50 / p99 |",
                "|---|---:|---:|---:|---:|---|---:|"]
        for m in bu:
            lengths = ", ".join(f"{k} ({v})" for k, v in list((m.get("train_lengths") or {}).items())[:4])
            out.append(
                f"| {m['case']} | {m['achieved_pps'] / 1e3:.1f} | {fmt(m['trains'], '.0f')} | {fmt(m['train_median'], 'g')} | "
                f"{fmt(m['mean_train'], '.1f')} / {fmt(m['max_train'], '.0f')} | {lengths} | "
                f"{fmt(m['inter_train_p1_ns'], '.0f')} / {fmt(m['inter_train_p50_ns'], '.0f')} / {fmt(m['inter_train_p99_ns'], '.0f')} ns |")
        out.append("")
    print("\n".join(out))


# ---------------------------------------------------------------------------------------


def read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        fail(f"cannot read JSON from {path}: {e}")


def write_json(path, data):
    try:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2)
            f.write("\n")
    except OSError as e:
        fail(f"cannot write {path}: {e}")
    print()
    print(f"results: {path}")


def main():
    # bench/run starts this in the background, where SIGINT arrives ignored; its cleanup
    # stops a measurement with SIGINT, so end quietly on it.
    signal.signal(signal.SIGINT, lambda *_: sys.exit(130))
    ap = argparse.ArgumentParser(description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)

    w = sub.add_parser("rx-window", help="receive rate at DEV while PID sends, as a JSON line")
    w.add_argument("--netns", required=True)
    w.add_argument("--dev", required=True)
    w.add_argument("--pid", type=int, required=True, help="the sending tool")
    w.add_argument("--warmup", type=float, default=1.0, help="seconds after the first frame")
    w.add_argument("--seconds", type=float, required=True, help="length of the window")
    w.add_argument("--start-timeout", type=float, default=30.0)
    w.add_argument("--frame-bytes", type=float, default=60,
                   help="expected (mean) frame size without FCS")
    w.add_argument("--case", required=True)
    w.add_argument("--round", type=int, required=True)

    a = sub.add_parser("annotate-strobe", help="add strobe's own rate to the last raw line")
    a.add_argument("raw")
    a.add_argument("strobe_report")

    s = sub.add_parser("summarize-rate", help="tables and summary JSON of a throughput section")
    s.add_argument("raw")
    s.add_argument("out")
    s.add_argument("--title", required=True)
    s.add_argument("--reference", required=True, help="the case the others are compared with")
    s.add_argument("--peer", action="append", required=True, help="CASE=TARGET_RATIO")
    s.add_argument("--meta", default="{}")

    m = sub.add_parser("markdown-rate", help="a throughput summary as Markdown")
    m.add_argument("summary")

    p = sub.add_parser("precision-row", help="one precision measurement as a JSON line")
    p.add_argument("analysis", help="strobe analyze --json output")
    p.add_argument("--case", required=True)
    p.add_argument("--round", type=int, required=True)
    p.add_argument("--rate", type=float, required=True, help="target packets per second")
    p.add_argument("--tcpdump-log", required=True, help="tcpdump's stderr")
    p.add_argument("--strobe-report", help="strobe gen --json output of the run")
    p.add_argument("--sent", type=int, help="frames the tool says it sent")

    ps = sub.add_parser("summarize-precision", help="tables and summary JSON of the precision section")
    ps.add_argument("raw")
    ps.add_argument("out")
    ps.add_argument("--target-rate", type=float, required=True)
    ps.add_argument("--max-rate-error-pct", type=float, required=True)
    ps.add_argument("--min-within-1us", type=float, required=True)
    ps.add_argument("--meta", default="{}")

    pm = sub.add_parser("markdown-precision", help="the precision summary as Markdown")
    pm.add_argument("summary")

    wr = sub.add_parser("wire-row", help="one wire measurement as a JSON line")
    wr.add_argument("analysis", help="strobe analyze --json output")
    wr.add_argument("--kind", required=True, choices=("poisson", "cbr", "burst"))
    wr.add_argument("--case", required=True)
    wr.add_argument("--backend", required=True)
    wr.add_argument("--round", type=int, required=True)
    wr.add_argument("--rate", required=True, help="asked rate (pps, or strobe's rate text for trains)")
    wr.add_argument("--pcap", required=True, help="the capture the analysis read")
    wr.add_argument("--tcpdump-log", required=True, help="tcpdump's stderr")
    wr.add_argument("--burst-gap-ns", type=int, default=5000)
    wr.add_argument("--strobe-report", help="strobe gen --json output of the run")
    wr.add_argument("--sent", type=int, help="frames the tool says it sent")
    wr.add_argument("--wall-ns", type=int, help="wall time of the tool's run")
    wr.add_argument("--ceiling-fraction", type=float,
                    help="the asked rate is this fraction of the path's unpaced rate in the round")
    wr.add_argument("--asked-seconds", type=float, help="the run's asked duration")

    wu = sub.add_parser("wire-unpaced-row", help="a path's unpaced rate as a JSON line")
    wu.add_argument("strobe_report")
    wu.add_argument("--backend", required=True)
    wu.add_argument("--round", type=int, required=True)
    wu.add_argument("--rx-frames", type=int, required=True, help="frames rx0 counted during the run")
    wu.add_argument("--tcpdump-log", help="stderr of the capture that ran alongside")

    sub.add_parser("wire-log", help="one line for the log from the JSON row on stdin")

    ws = sub.add_parser("summarize-wire", help="summary JSON of the wire section")
    ws.add_argument("raw")
    ws.add_argument("out")
    ws.add_argument("--burst-pattern", required=True)
    ws.add_argument("--burst-rate", required=True)
    ws.add_argument("--meta", default="{}")

    wm = sub.add_parser("markdown-wire", help="the wire summary as Markdown")
    wm.add_argument("summary")

    run_command(
        ap,
        {
            "wire-row": wire_row,
            "wire-unpaced-row": wire_unpaced_row,
            "wire-log": wire_log,
            "summarize-wire": summarize_wire,
            "markdown-wire": markdown_wire,
            "rx-window": rx_window,
            "annotate-strobe": annotate,
            "summarize-rate": summarize_rate,
            "markdown-rate": markdown_rate,
            "precision-row": precision_row,
            "summarize-precision": summarize_precision,
            "markdown-precision": markdown_precision,
        },
    )


if __name__ == "__main__":
    main()
