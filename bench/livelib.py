#!/usr/bin/env python3
"""Measurements and summaries of bench/run's live sections (afxdp, afpacket, precision).

The throughput sections count frames where every tool's frames end up: the receive
counters of the lab's sink interface, read over netlink (`ip -n NS -s -j link show`).
The precision section reads `strobe analyze --json` reports of independent tcpdump
captures. Each measurement becomes one JSON line in the section's raw.jsonl, as in
benchlib.py, whose helpers this module shares. Standard library only.
"""

import argparse
import json
import re
import signal
import statistics
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
    try:
        with open(args.tcpdump_log, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError as e:
        fail(f"cannot read {args.tcpdump_log}: {e}")
    for key, pattern in TCPDUMP_COUNTS.items():
        m = pattern.search(text)
        row[f"tcpdump_{key}"] = int(m.group(1)) if m else None
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
    w.add_argument("--frame-bytes", type=int, default=60, help="expected frame size without FCS")
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

    run_command(
        ap,
        {
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
