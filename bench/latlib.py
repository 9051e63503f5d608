#!/usr/bin/env python3
"""Measurements and summaries of bench/run's latency sections (rtt, latcost, truth).

rtt compares strobe's round trip (gen + reflect) with sockperf ping-pong; latcost reads
the throughput of `strobe gen --json` runs with and without latency measurement; truth
decodes tcpdump captures with tshark and compares strobe's latency distribution with the
captures' per-frame ground truth. Each measurement becomes one JSON line in the section's
raw.jsonl, as in benchlib.py and livelib.py, whose helpers this module shares. Standard
library only.
"""

import argparse
import json
import math
import re
import signal
import statistics
import subprocess
import sys

# Importing the sibling modules must not leave a __pycache__ in the source tree.
sys.dont_write_bytecode = True
from benchlib import load_raw, run_command  # noqa: E402
from livelib import read_json, write_json  # noqa: E402

# The percentiles every latency table reports, as (JSON key suffix, quantile, label).
PERCENTILES = (
    ("p50", 0.5, "p50"),
    ("p90", 0.9, "p90"),
    ("p99", 0.99, "p99"),
    ("p99_9", 0.999, "p99.9"),
    ("p99_99", 0.9999, "p99.99"),
    ("p99_999", 0.99999, "p99.999"),
    ("max", 1.0, "max"),
)
RTT_KEYS = ("p50", "p99", "p99_9", "p99_99", "max")
LABELS = {key: label for key, _, label in PERCENTILES}


def fail(message):
    print(f"latlib: {message}", file=sys.stderr)
    sys.exit(1)


def flow_latency(report, path):
    """(flow 0, its latency object) of a `strobe gen --json` report, or a clear failure."""
    try:
        flow = report["flows"][0]
        latency = flow["latency"]
    except (LookupError, TypeError) as e:
        fail(f"{path}: expected flows[0].latency in a strobe gen --json report ({e!r})")
    if not latency or not latency.get("raw"):
        fail(f"{path}: flows[0] has no latency; was the run made with --rx and without --no-latency?")
    return flow, latency


def hdr_stats(stats, path):
    """{p50: ns, …, max: ns} from a strobe latency statistics object (raw or corrected)."""
    try:
        return {key: float(stats["max_ns" if key == "max" else f"{key}_ns"]) for key, _, _ in PERCENTILES}
    except (LookupError, TypeError, ValueError) as e:
        fail(f"{path}: latency statistics without {e!r}")


# ---------------------------------------------------------------------------------------
# rtt


def preempted(path):
    """Involuntary context switches of one tool, from GNU time's `-f %c -o FILE`."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [line.strip() for line in f if line.strip()]
    except OSError as e:
        fail(f"cannot read {path}: {e}")
    # time prefixes a note such as "Command exited with non-zero status 1"; the count is last.
    if not lines or not lines[-1].isdigit():
        fail(f"{path}: expected GNU time's involuntary context switch count, got {lines[-1:]}")
    return int(lines[-1])


def preemption_counts(args):
    return {"server": preempted(args.server_preempted), "client": preempted(args.client_preempted)}


def rtt_strobe(args):
    """One strobe round trip run: gen's latency (raw: no calibration) plus the reflector."""
    report = read_json(args.report)
    flow, latency = flow_latency(report, args.report)
    stats = hdr_stats(latency["raw"], args.report)
    reflector = read_json(args.reflector)
    row = {
        "case": args.case,
        "round": args.round,
        "tool": "strobe",
        "frames_tx": int(flow["frames_tx"]),
        "observations": int(latency["raw"]["count"]),
        "lost": int(flow["loss"]),
        "negative": int(latency.get("negative", 0)),
        "rtt_ns": {key: stats[key] for key in RTT_KEYS},
        "mean_ns": float(latency["raw"]["mean_ns"]),
        "timestamps": latency.get("timestamps"),
        "reflector": {key: reflector.get(key) for key in
                      ("receiver", "received", "reflected", "tx_dropped", "rx_ring_full")},
        "preempted": preemption_counts(args),
    }
    print(json.dumps(row))


ANSI = re.compile(r"\x1b\[[0-9;]*m")
SOCKPERF_PERCENTILE = re.compile(r"---> percentile\s+([0-9.]+)\s*=\s*([0-9.]+)")
SOCKPERF_MAX = re.compile(r"---> <MAX> observation\s*=\s*([0-9.]+)")
SOCKPERF_COUNT = re.compile(r"Total (\d+) observations")
SOCKPERF_SUMMARY = re.compile(r"Summary: (Round trip|Latency) is ([0-9.]+) usec")
SOCKPERF_DROPPED = re.compile(r"# dropped messages = (\d+)")


def rtt_sockperf(args):
    """One sockperf ping-pong run from its text output (values in µs, with --full-rtt)."""
    try:
        with open(args.log, encoding="utf-8", errors="replace") as f:
            text = ANSI.sub("", f.read())
    except OSError as e:
        fail(f"cannot read {args.log}: {e}")
    summary = SOCKPERF_SUMMARY.search(text)
    if not summary:
        fail(f"{args.log}: no 'Summary: … usec' line; did sockperf ping-pong finish? (see the log)")
    # sockperf reports half the round trip unless --full-rtt is given; only full round
    # trips compare with strobe's.
    if summary.group(1) != "Round trip":
        fail(f"{args.log}: sockperf reported one-way latency (RTT/2); run it with --full-rtt")
    pct = {float(q): float(v) * 1e3 for q, v in SOCKPERF_PERCENTILE.findall(text)}
    mx = SOCKPERF_MAX.search(text)
    count = SOCKPERF_COUNT.search(text)
    dropped = SOCKPERF_DROPPED.search(text)
    try:
        rtt = {"p50": pct[50.0], "p99": pct[99.0], "p99_9": pct[99.9], "p99_99": pct[99.99],
               "max": float(mx.group(1)) * 1e3}
    except (KeyError, AttributeError) as e:
        fail(f"{args.log}: missing percentile {e} in sockperf's output")
    row = {
        "case": args.case,
        "round": args.round,
        "tool": "sockperf",
        "observations": int(count.group(1)) if count else None,
        "lost": int(dropped.group(1)) if dropped else None,
        "rtt_ns": rtt,
        "mean_ns": float(summary.group(2)) * 1e3,
        "preempted": preemption_counts(args),
    }
    print(json.dumps(row))


def by_case_round(rows):
    out = {}
    for r in rows:
        out.setdefault(r["case"], {})[r["round"]] = r
    return out


def summarize_rtt(args):
    rows = load_raw(args.raw)
    cases = by_case_round(rows)
    strobe_cases = [c for c in cases if cases[c][next(iter(cases[c]))]["tool"] == "strobe"]
    peer_cases = [c for c in cases if c not in strobe_cases]
    if args.target_peer not in peer_cases or not strobe_cases:
        fail(f"{args.raw} needs strobe rounds and rounds of {args.target_peer}")
    rounds = sorted(set.intersection(*(set(r) for r in cases.values())))
    if not rounds:
        fail("no round has every case in it")
    medians = {c: {k: statistics.median(cases[c][n]["rtt_ns"][k] for n in rounds) for k in RTT_KEYS}
               for c in cases}

    print()
    print("== round-trip latency over the cable, one message in flight (µs) ==")
    print(f"{'round':>5} {'case':<16}" + "".join(f" {LABELS[k]:>9}" for k in RTT_KEYS) + f" {'count':>8} {'lost':>6}")
    for n in rounds:
        for c in cases:
            r = cases[c][n]
            print(f"{n:>5} {c:<16}" + "".join(f" {r['rtt_ns'][k] / 1e3:>9.2f}" for k in RTT_KEYS)
                  + f" {r['observations']:>8} {r['lost'] if r['lost'] is not None else '-':>6}")
    for c in cases:
        print(f"{'med':>5} {c:<16}" + "".join(f" {medians[c][k] / 1e3:>9.2f}" for k in RTT_KEYS))

    comparisons = []
    for s in strobe_cases:
        for p in peer_cases:
            cmp = {"strobe": s, "peer": p}
            for key, target in (("p50", args.max_median_ratio), ("p99_9", args.max_p999_ratio)):
                ratio = medians[s][key] / medians[p][key]
                per_round = [cases[s][n]["rtt_ns"][key] / cases[p][n]["rtt_ns"][key] for n in rounds]
                cmp[key] = {"ratio": ratio, "per_round": per_round, "target": target,
                            "meets_target": ratio <= target}
            cmp["is_target_peer"] = p == args.target_peer
            comparisons.append(cmp)
            print(f"{s}/{p}: median {cmp['p50']['ratio']:.3f} (target <= {args.max_median_ratio}: "
                  f"{'meets' if cmp['p50']['meets_target'] else 'misses'}), p99.9 "
                  f"{cmp['p99_9']['ratio']:.3f} (target <= {args.max_p999_ratio}: "
                  f"{'meets' if cmp['p99_9']['meets_target'] else 'misses'})")
    write_json(args.out, {
        "meta": json.loads(args.meta),
        "cases": list(cases),
        "strobe_cases": strobe_cases,
        "peer_cases": peer_cases,
        "rounds": rounds,
        "median_rtt_ns": medians,
        "comparisons": comparisons,
        "raw": rows,
    })


def markdown_rtt(args):
    d = read_json(args.summary)
    rows = {(r["case"], r["round"]): r for r in d["raw"]}
    head = "| " + " | ".join(LABELS[k] for k in RTT_KEYS) + " |"
    out = ["Every round (µs, full round trip; preempted: involuntary context switches of the "
           "server / reflector and of the client / gen):", "",
           "| round | case " + head + " observations | lost | preempted |",
           "|---:|---" + "|---:" * (len(RTT_KEYS) + 3) + "|"]
    for n in d["rounds"]:
        for c in d["cases"]:
            r = rows[(c, n)]
            lost = "–" if r["lost"] is None else str(r["lost"])
            out.append(f"| {n} | {c} | " + " | ".join(f"{r['rtt_ns'][k] / 1e3:.2f}" for k in RTT_KEYS)
                       + f" | {r['observations']} | {lost} | "
                       f"{r['preempted']['server']} / {r['preempted']['client']} |")
    out += ["", f"Medians of {len(d['rounds'])} rounds (µs):", "",
            "| case " + head, "|---" + "|---:" * len(RTT_KEYS) + "|"]
    for c in d["cases"]:
        out.append(f"| {c} | " + " | ".join(f"**{d['median_rtt_ns'][c][k] / 1e3:.2f}**" for k in RTT_KEYS) + " |")
    out += ["", "| strobe / peer | median ratio (per round) | target | p99.9 ratio (per round) | target |",
            "|---|---:|---|---:|---|"]
    for cmp in d["comparisons"]:
        cells = []
        for key in ("p50", "p99_9"):
            c = cmp[key]
            verdict = ("**met**" if c["meets_target"] else "**missed**") if cmp["is_target_peer"] else "(context)"
            cells.append(f"{c['ratio']:.3f} ({min(c['per_round']):.2f}–{max(c['per_round']):.2f}) "
                         f"| ≤ {c['target']}: {verdict}")
        out.append(f"| {cmp['strobe']} / {cmp['peer']} | " + " | ".join(cells) + " |")
    print("\n".join(out))


# ---------------------------------------------------------------------------------------
# latcost


def latcost_row(args):
    """Throughput of one `strobe gen --rx` run: frames sent and frames received per second."""
    report = read_json(args.report)
    try:
        port = report["ports"][0]
        flow = report["flows"][0]
        elapsed = int(port["elapsed_ns"])
        frames_tx = int(port["frames_tx"])
        rx_unique = int(flow["frames_rx_unique"])
        lost = int(flow["loss"])
    except (LookupError, TypeError, ValueError) as e:
        fail(f"{args.report}: expected ports[0].elapsed_ns/frames_tx and flows[0].frames_rx_unique/loss ({e!r})")
    if elapsed <= 0 or frames_tx <= 0:
        fail(f"{args.report}: {frames_tx} frames in {elapsed} ns; nothing to measure")
    latency = flow.get("latency")
    measured = args.latency == "on"
    if measured and not (latency and latency.get("raw")):
        fail(f"{args.report}: run with latency on but flows[0].latency is empty")
    if not measured and latency:
        fail(f"{args.report}: run with --no-latency but flows[0].latency is filled")
    row = {
        "case": args.case,
        "round": args.round,
        "backend": args.backend,
        "latency": measured,
        "frames_tx": frames_tx,
        "frames_rx_unique": rx_unique,
        "lost": lost,
        "loss_pct": 100 * lost / frames_tx,
        "elapsed_ns": elapsed,
        "tx_mpps": frames_tx / elapsed * 1e3,
        "rx_mpps": rx_unique / elapsed * 1e3,
        "kernel_drops": sum(int(p.get("kernel_drops") or 0) for p in report.get("rx_ports", [])),
        "latency_p50_ns": latency["raw"]["p50_ns"] if latency else None,
        "latency_p99_ns": latency["raw"]["p99_ns"] if latency else None,
    }
    print(json.dumps(row))


LATCOST_METRICS = ("tx_mpps", "rx_mpps", "loss_pct")


def summarize_latcost(args):
    rows = load_raw(args.raw)
    cases = by_case_round(rows)
    backends = list(dict.fromkeys(r["backend"] for r in rows))
    rounds = sorted(set.intersection(*(set(r) for r in cases.values())))
    if not rounds:
        fail(f"{args.raw}: no round has every case in it")
    medians = {c: {m: statistics.median(cases[c][n][m] for n in rounds) for m in LATCOST_METRICS}
               for c in cases}

    print()
    print("== throughput with and without latency measurement (medians of rounds) ==")
    print(f"{'case':<24} {'tx Mpps':>8} {'rx Mpps':>8} {'loss %':>8}")
    for c in cases:
        m = medians[c]
        print(f"{c:<24} {m['tx_mpps']:>8.3f} {m['rx_mpps']:>8.3f} {m['loss_pct']:>8.3f}")
    verdicts = {}
    for b in backends:
        on = next(c for c in cases if cases[c][rounds[0]]["backend"] == b and cases[c][rounds[0]]["latency"])
        off = next(c for c in cases if cases[c][rounds[0]]["backend"] == b and not cases[c][rounds[0]]["latency"])
        v = {
            "with": on,
            "without": off,
            "tx_ratio": medians[on]["tx_mpps"] / medians[off]["tx_mpps"],
            "rx_ratio": medians[on]["rx_mpps"] / medians[off]["rx_mpps"],
            "rx_ratio_per_round": [cases[on][n]["rx_mpps"] / cases[off][n]["rx_mpps"] for n in rounds],
            "rx_mpps_with": medians[on]["rx_mpps"],
        }
        v["rate_ok"] = v["rx_mpps_with"] >= args.min_mpps
        v["cost_ok"] = v["rx_ratio"] >= 1 - args.max_cost
        verdicts[b] = v
        print(f"{b}: measured {v['rx_mpps_with']:.3f} Mpps with latency (target >= {args.min_mpps}: "
              f"{'meets' if v['rate_ok'] else 'misses'}); with/without received {v['rx_ratio']:.3f}, "
              f"sent {v['tx_ratio']:.3f} (target >= {1 - args.max_cost:.2f}: {'meets' if v['cost_ok'] else 'misses'})")
    write_json(args.out, {
        "meta": json.loads(args.meta),
        "cases": list(cases),
        "rounds": rounds,
        "medians": medians,
        "targets": {"min_mpps": args.min_mpps, "max_cost": args.max_cost},
        "verdicts": verdicts,
        "raw": rows,
    })


def markdown_latcost(args):
    d = read_json(args.summary)
    rows = {(r["case"], r["round"]): r for r in d["raw"]}
    out = ["| round | case | sent Mpps | received Mpps | lost | loss % | kernel drops | latency p50 / p99 |",
           "|---:|---|---:|---:|---:|---:|---:|---:|"]
    for n in d["rounds"]:
        for c in d["cases"]:
            r = rows[(c, n)]
            lat = (f"{r['latency_p50_ns'] / 1e3:.0f} / {r['latency_p99_ns'] / 1e3:.0f} µs"
                   if r["latency_p50_ns"] is not None else "–")
            out.append(f"| {n} | {c} | {r['tx_mpps']:.3f} | {r['rx_mpps']:.3f} | {r['lost']} | "
                       f"{r['loss_pct']:.3f} | {r['kernel_drops']} | {lat} |")
    out += ["", f"Medians of {len(d['rounds'])} rounds:", "",
            "| case | sent Mpps | received Mpps | loss % |", "|---|---:|---:|---:|"]
    for c in d["cases"]:
        m = d["medians"][c]
        out.append(f"| {c} | **{m['tx_mpps']:.3f}** | **{m['rx_mpps']:.3f}** | {m['loss_pct']:.3f} |")
    out.append("")
    t = d["targets"]
    for b, v in d["verdicts"].items():
        out.append(f"- {b}: received with / without latency **{v['rx_ratio']:.3f}** (per round "
                   f"{min(v['rx_ratio_per_round']):.3f}–{max(v['rx_ratio_per_round']):.3f}), sent "
                   f"{v['tx_ratio']:.3f}; cost ≤ {t['max_cost']:.0%}: **{'met' if v['cost_ok'] else 'missed'}**; "
                   f"latency measured at {v['rx_mpps_with']:.3f} Mpps, ≥ {t['min_mpps']} Mpps: "
                   f"**{'met' if v['rate_ok'] else 'missed'}**")
    print("\n".join(out))


# ---------------------------------------------------------------------------------------
# truth


# Byte 0 of the trailer: 'S' as the generator sent it, 'R' as a strobe reflector sent it
# back; byte 1 is the run's tag (random per run), so only the marker identifies the trailer.
TRAILER_MARKERS = (0x53, 0x52)


def tshark_start(pcap):
    cmd = ["tshark", "-r", pcap, "-T", "fields", "-e", "frame.time_epoch", "-e", "udp.dstport",
           "-e", "data.data"]
    try:
        return cmd, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as e:
        fail(f"cannot run tshark: {e} (install it: apt-get install tshark)")


def epoch_ns(text):
    """Nanoseconds since the epoch from tshark's frame.time_epoch, exactly (a float would
    round away the nanoseconds)."""
    seconds, _, fraction = text.partition(".")
    return int(seconds) * 1_000_000_000 + int(fraction.ljust(9, "0")[:9])


def tshark_frames(cmd, proc, dst_port):
    """{sequence: (capture time ns, trailer tx timestamp ns)} of one capture's flow frames.

    The trailer is the last 16 bytes of the UDP payload: marker, run tag, flow id, sequence
    number, transmit timestamp, all big-endian. A sequence seen twice would make the match
    ambiguous, so it is an error (the runs send fewer than 2^32 frames).
    """
    out, err = proc.communicate()
    if proc.returncode != 0:
        fail(f"{' '.join(cmd)} failed: {err.strip()[:300]}")
    frames = {}
    for n, line in enumerate(out.splitlines(), 1):
        fields = line.split("\t")
        if len(fields) != 3 or not fields[2]:
            continue
        time_text, port, data = fields
        if port != str(dst_port):
            continue
        payload = bytes.fromhex(data.replace(":", ""))
        if len(payload) < 16 or payload[-16] not in TRAILER_MARKERS:
            fail(f"{cmd[2]}: frame {n} to port {dst_port} carries no strobe trailer")
        trailer = payload[-16:]
        seq = int.from_bytes(trailer[4:8], "big")
        if seq in frames:
            fail(f"{cmd[2]}: sequence number {seq} captured twice; cannot match frames")
        frames[seq] = (epoch_ns(time_text), int.from_bytes(trailer[8:16], "big"))
    if not frames:
        fail(f"{cmd[2]}: no frame of the flow (UDP port {dst_port}) in the capture")
    return frames


def nearest_rank(sorted_values, q):
    """The value at rank ceil(q·n), as HdrHistogram reports percentiles (up to its bucket width)."""
    return sorted_values[max(0, math.ceil(q * len(sorted_values)) - 1)]


def distribution(values):
    values = sorted(values)
    return {key: float(nearest_rank(values, q)) for key, q, _ in PERCENTILES}


def tcpdump_drops(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            m = re.search(r"(\d+) packets? dropped by kernel", f.read())
    except OSError as e:
        fail(f"cannot read {path}: {e}")
    if not m:
        fail(f"{path}: no 'dropped by kernel' count; did tcpdump end cleanly?")
    return int(m.group(1))


def truth_row(args):
    """Ground truth from three captures of the same frames versus strobe's report.

    ingress: dut0 (frames entering the DUT), egress: dut1 (leaving it), sink: rx0 (where
    strobe receives). Per frame: DUT latency = egress − ingress; end to end from the
    captures = sink − trailer timestamp, the same difference strobe takes.
    """
    # The three decodes are independent; run them side by side.
    started = {name: tshark_start(path) for name, path in
               (("ingress", args.ingress), ("egress", args.egress), ("sink", args.sink))}
    frames = {name: tshark_frames(cmd, proc, args.dst_port) for name, (cmd, proc) in started.items()}
    ingress, egress, sink = frames["ingress"], frames["egress"], frames["sink"]
    through = [s for s in ingress if s in egress]
    if not through:
        fail("no frame appears in both the ingress and the egress capture")
    truth = [egress[s][0] - ingress[s][0] for s in through]
    end_to_end = [t - tx for t, tx in sink.values()]
    first_hop = [t - tx for t, tx in ingress.values()]
    second_hop = [sink[s][0] - egress[s][0] for s in through if s in sink]

    report = read_json(args.strobe_report)
    flow, latency = flow_latency(report, args.strobe_report)
    if not latency.get("corrected"):
        fail(f"{args.strobe_report}: no corrected latency; the run needs --calibration")
    row = {
        "case": "truth",
        "round": args.round,
        "frames_tx": int(flow["frames_tx"]),
        "strobe_observations": int(latency["raw"]["count"]),
        "strobe_lost": int(flow["loss"]),
        "captured": {name: len(f) for name, f in frames.items()},
        "matched_through_dut": len(through),
        "tcpdump_dropped": {name: tcpdump_drops(path) for name, path in
                            (("ingress", args.ingress_log), ("egress", args.egress_log),
                             ("sink", args.sink_log))},
        "calibration_offset_ns": float((latency.get("calibration") or {}).get("offset_ns", 0.0)),
        "truth_ns": distribution(truth),
        "capture_end_to_end_ns": distribution(end_to_end),
        "strobe_raw_ns": hdr_stats(latency["raw"], args.strobe_report),
        "strobe_corrected_ns": hdr_stats(latency["corrected"], args.strobe_report),
        "first_hop_ns": distribution(first_hop),
        "second_hop_ns": distribution(second_hop),
    }
    print(json.dumps(row))


TRUTH_COLUMNS = ("truth_ns", "strobe_raw_ns", "strobe_corrected_ns", "capture_end_to_end_ns",
                 "first_hop_ns", "second_hop_ns")


def within_until(errors, limit_ns):
    """The highest percentile label up to which every |error| stays within limit_ns."""
    last = None
    for key, _, label in PERCENTILES:
        if errors[key] > limit_ns:
            break
        last = label
    return last


def summarize_truth(args):
    rows = sorted(load_raw(args.raw), key=lambda r: r["round"])
    if not rows:
        fail(f"{args.raw} holds no measurement")
    medians = {col: {key: statistics.median(r[col][key] for r in rows) for key, _, _ in PERCENTILES}
               for col in TRUTH_COLUMNS}
    # Differences are taken within a round (the same frames), then the median over rounds;
    # differences of medians would mix one round's tail with another's.
    per_round_error = [{k: abs(r["strobe_corrected_ns"][k] - r["truth_ns"][k]) for k, _, _ in PERCENTILES}
                       for r in rows]
    error = {k: statistics.median(e[k] for e in per_round_error) for k, _, _ in PERCENTILES}
    raw_vs_capture = {k: statistics.median(r["strobe_raw_ns"][k] - r["capture_end_to_end_ns"][k] for r in rows)
                      for k, _, _ in PERCENTILES}
    per_round_within = [within_until(e, args.limit_ns) for e in per_round_error]
    print()
    print("== strobe's latency against the captures' ground truth (µs, medians of rounds) ==")
    print(f"{'':>8}" + "".join(f" {c[:-3]:>22}" for c in TRUTH_COLUMNS) + f" {'|corr - truth|':>15}")
    for key, _, label in PERCENTILES:
        print(f"{label:>8}" + "".join(f" {medians[c][key] / 1e3:>22.3f}" for c in TRUTH_COLUMNS)
              + f" {error[key] / 1e3:>15.3f}")
    within = within_until(error, args.limit_ns)
    print(f"corrected within {args.limit_ns / 1e3:g} µs of the ground truth up to: {within or 'none'} "
          f"(per round: {', '.join(w or 'none' for w in per_round_within)})")
    write_json(args.out, {
        "meta": json.loads(args.meta),
        "rounds": [r["round"] for r in rows],
        "medians": medians,
        "corrected_error_ns": error,
        "raw_minus_capture_ns": raw_vs_capture,
        "limit_ns": args.limit_ns,
        "within_limit_up_to": within,
        "within_limit_up_to_per_round": per_round_within,
        "raw": rows,
    })


def markdown_truth(args):
    d = read_json(args.summary)
    names = {"truth_ns": "ground truth (dut1 − dut0)", "strobe_raw_ns": "strobe raw",
             "strobe_corrected_ns": "strobe corrected", "capture_end_to_end_ns": "capture end to end (rx0 − tx stamp)"}
    out = [f"Medians of {len(d['rounds'])} rounds (µs; the two differences are taken within each "
           "round, then the median):", "",
           "| percentile | " + " | ".join(names.values()) + " | \\|corrected − truth\\| | strobe raw − capture |",
           "|---|" + "---:|" * (len(names) + 2)]
    for key, _, label in PERCENTILES:
        out.append(f"| {label} | " + " | ".join(f"{d['medians'][c][key] / 1e3:.3f}" for c in names)
                   + f" | **{d['corrected_error_ns'][key] / 1e3:.3f}** | {d['raw_minus_capture_ns'][key] / 1e3:+.3f} |")
    out += ["", "The two veth hops from the captures (µs, medians of rounds): first = dut0 capture − "
            "trailer tx stamp, second = rx0 capture − dut1 capture:", "",
            "| hop | " + " | ".join(label for _, _, label in PERCENTILES) + " |",
            "|---|" + "---:|" * len(PERCENTILES)]
    for col, name in (("first_hop_ns", "first (tx0 → dut0, incl. strobe's send call)"),
                      ("second_hop_ns", "second (dut1 → rx0)")):
        out.append(f"| {name} | " + " | ".join(f"{d['medians'][col][k] / 1e3:.3f}" for k, _, _ in PERCENTILES) + " |")
    out += ["", "Every round (µs): ground truth / strobe corrected / |difference|:", "",
            "| round | frames (tx / dut0 / dut1 / rx0 / strobe) | calibration | "
            + " | ".join(label for _, _, label in PERCENTILES) + " |",
            "|---:|---|---:|" + "---:|" * len(PERCENTILES)]
    for r in d["raw"]:
        c = r["captured"]
        cells = [f"{r['truth_ns'][k] / 1e3:.2f} / {r['strobe_corrected_ns'][k] / 1e3:.2f} / "
                 f"{abs(r['strobe_corrected_ns'][k] - r['truth_ns'][k]) / 1e3:.2f}" for k, _, _ in PERCENTILES]
        out.append(f"| {r['round']} | {r['frames_tx']} / {c['ingress']} / {c['egress']} / {c['sink']} / "
                   f"{r['strobe_observations']} | {r['calibration_offset_ns'] / 1e3:.3f} | " + " | ".join(cells) + " |")
    out += ["", f"- strobe corrected stays within {d['limit_ns'] / 1e3:g} µs of the ground truth up to "
            f"**{d['within_limit_up_to'] or 'no percentile'}** (medians of rounds; per round: "
            f"{', '.join(w or 'none' for w in d['within_limit_up_to_per_round'])})"]
    print("\n".join(out))


# ---------------------------------------------------------------------------------------


def main():
    # bench/run may stop this with SIGINT from its cleanup; end quietly on it.
    signal.signal(signal.SIGINT, lambda *_: sys.exit(130))
    ap = argparse.ArgumentParser(description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("rtt-strobe", help="one strobe gen + reflect round trip run as a JSON line")
    p.add_argument("report", help="strobe gen --json output")
    p.add_argument("--reflector", required=True, help="strobe reflect --json output")
    p.add_argument("--case", required=True)
    p.add_argument("--round", type=int, required=True)
    p.add_argument("--server-preempted", required=True, help="GNU time -f %%c output of the reflector")
    p.add_argument("--client-preempted", required=True, help="GNU time -f %%c output of gen")

    p = sub.add_parser("rtt-sockperf", help="one sockperf ping-pong run as a JSON line")
    p.add_argument("log", help="sockperf ping-pong --full-rtt output")
    p.add_argument("--case", required=True)
    p.add_argument("--round", type=int, required=True)
    p.add_argument("--server-preempted", required=True, help="GNU time -f %%c output of the server")
    p.add_argument("--client-preempted", required=True, help="GNU time -f %%c output of ping-pong")

    p = sub.add_parser("summarize-rtt", help="tables and summary JSON of the rtt section")
    p.add_argument("raw")
    p.add_argument("out")
    p.add_argument("--target-peer", required=True, help="the peer case the targets refer to")
    p.add_argument("--max-median-ratio", type=float, required=True)
    p.add_argument("--max-p999-ratio", type=float, required=True)
    p.add_argument("--meta", default="{}")

    p = sub.add_parser("markdown-rtt", help="the rtt summary as Markdown")
    p.add_argument("summary")

    p = sub.add_parser("latcost-row", help="one throughput run as a JSON line")
    p.add_argument("report", help="strobe gen --json output")
    p.add_argument("--case", required=True)
    p.add_argument("--round", type=int, required=True)
    p.add_argument("--backend", required=True)
    p.add_argument("--latency", choices=("on", "off"), required=True,
                   help="whether the run measured latency")

    p = sub.add_parser("summarize-latcost", help="tables and summary JSON of the latcost section")
    p.add_argument("raw")
    p.add_argument("out")
    p.add_argument("--min-mpps", type=float, required=True)
    p.add_argument("--max-cost", type=float, required=True, help="largest share of throughput lost, e.g. 0.1")
    p.add_argument("--meta", default="{}")

    p = sub.add_parser("markdown-latcost", help="the latcost summary as Markdown")
    p.add_argument("summary")

    p = sub.add_parser("truth-row", help="captures versus strobe's report, as a JSON line")
    p.add_argument("--ingress", required=True, help="capture of the frames entering the DUT (dut0)")
    p.add_argument("--egress", required=True, help="capture of the frames leaving the DUT (dut1)")
    p.add_argument("--sink", required=True, help="capture at strobe's receiving port (rx0)")
    p.add_argument("--ingress-log", required=True)
    p.add_argument("--egress-log", required=True)
    p.add_argument("--sink-log", required=True)
    p.add_argument("--dst-port", type=int, required=True, help="the flow's UDP destination port")
    p.add_argument("--strobe-report", required=True, help="strobe gen --calibration … --json output")
    p.add_argument("--round", type=int, required=True)

    p = sub.add_parser("summarize-truth", help="tables and summary JSON of the truth section")
    p.add_argument("raw")
    p.add_argument("out")
    p.add_argument("--limit-ns", type=float, default=1000.0)
    p.add_argument("--meta", default="{}")

    p = sub.add_parser("markdown-truth", help="the truth summary as Markdown")
    p.add_argument("summary")

    run_command(
        ap,
        {
            "rtt-strobe": rtt_strobe,
            "rtt-sockperf": rtt_sockperf,
            "summarize-rtt": summarize_rtt,
            "markdown-rtt": markdown_rtt,
            "latcost-row": latcost_row,
            "summarize-latcost": summarize_latcost,
            "markdown-latcost": markdown_latcost,
            "truth-row": truth_row,
            "summarize-truth": summarize_truth,
            "markdown-truth": markdown_truth,
        },
    )


if __name__ == "__main__":
    main()
