#!/usr/bin/env python3
"""bench/run pacing: rows and tables for low-rate pacing on a noisy host (issue #27).

null-row: strobe's report on the null port beside cyclictest's histogram taken on the
same core at the same time; cbr-row: strobe's CBR on a veth judged from a capture
(strobe analyze --expect cbr:RATE); summarize: medians per case as Markdown.
"""
import argparse
import json
import re
import statistics
import sys


def read_json(path):
    with open(path) as f:
        return json.load(f)


def cyclictest_histogram(path):
    """Per-µs counts (index = latency µs), overflows, and the summary lines' numbers."""
    counts, overflows, summary = [], 0, {}
    with open(path) as f:
        for line in f:
            m = re.match(r"^(\d+)\s+(\d+)\s*$", line)
            if m:
                us, n = int(m.group(1)), int(m.group(2))
                if us >= len(counts):
                    counts.extend([0] * (us + 1 - len(counts)))
                counts[us] += n
                continue
            m = re.match(r"^# (Total|Min Latencies|Avg Latencies|Max Latencies|Histogram Overflows):\s+(\d+)", line)
            if m:
                summary[m.group(1)] = int(m.group(2))
                if m.group(1) == "Histogram Overflows":
                    overflows = int(m.group(2))
    return counts, overflows, summary


def port_of(report):
    ports = read_json(report)["ports"]
    if len(ports) != 1:
        sys.exit(f"{report}: expected one transmit port, found {len(ports)}")
    return ports[0]


def strobe_fields(p):
    stalls = p.get("host_stalls") or {}
    sched = p.get("scheduling") or {}
    frames = p["frames_tx"]
    return {
        "frames": frames,
        "late_frames": p["late_frames"],
        "late_share": p["late_frames"] / frames if frames else 0.0,
        # Absent from builds before late frames were told apart by cause.
        "late_host_frames": p.get("late_host_frames"),
        "max_late_ns": p["max_late_ns"],
        # Absent from builds before the learned margin (main's code spins a fixed 150 µs).
        "spin_margin_ns": p.get("spin_margin_ns", 150_000),
        "learned": "spin_margin_ns" in p,
        "policy": sched.get("policy", "SCHED_OTHER (not reported)"),
        "policy_note": sched.get("note"),
        "host_stalls": stalls.get("count"),
        "host_stall_worst_ns": stalls.get("worst_ns"),
        "handover_p99_ns": (p.get("handover_error") or {}).get("p99_ns"),
    }


def as_spun(row, rate):
    """The margin spun before each deadline: a learned one is cut to half of gaps over
    300 µs (strobe's effective_margin_ns); main's fixed 150 µs is not."""
    if row["learned"]:
        row["spin_margin_ns"] = min(row["spin_margin_ns"], max(10**9 // rate // 2, 150_000))


def null_row(args):
    p = port_of(args.strobe_report)
    row = {"kind": "null", "build": args.build, "round": args.round, "rate": args.rate}
    row.update(strobe_fields(p))
    as_spun(row, args.rate)
    counts, overflows, summary = cyclictest_histogram(args.cyclictest)
    total = sum(counts) + overflows
    margin_us = row["spin_margin_ns"] // 1000
    beyond = sum(counts[margin_us + 1:]) + overflows
    row.update({
        "cyclictest_wakeups": total,
        "cyclictest_avg_us": summary.get("Avg Latencies"),
        "cyclictest_max_us": summary.get("Max Latencies"),
        "cyclictest_beyond_margin": beyond,
        "cyclictest_beyond_margin_share": beyond / total if total else 0.0,
    })
    print(json.dumps(row))


def cbr_row(args):
    p = port_of(args.strobe_report)
    a = read_json(args.analysis)
    row = {"kind": "cbr", "build": args.build, "round": args.round, "rate": args.rate}
    row.update(strobe_fields(p))
    as_spun(row, args.rate)
    row.update({
        "captured": int(a["packets"]),
        "within_1us": float(a["precision"]["share_within_1us"]),
        "max_gap_ns": a["gaps"].get("max_gap_ns"),
    })
    print(json.dumps(row))


def log_row(_args):
    r = json.loads(sys.stdin.read())
    head = f"{r['build']:<7} {r['kind']:<4} {r['rate'] / 1e3:>6.0f} kpps r{r['round']}"
    late = f"late {r['late_frames']}/{r['frames']} ({100 * r['late_share']:.3f} %)"
    if r.get("late_host_frames") is not None:
        late += f", {r['late_host_frames']} the host's"
    stalls = f"host stalls {r['host_stalls']} (worst {r['host_stall_worst_ns']} ns)"
    tail = f"{r['policy']}, margin {r['spin_margin_ns'] / 1e3:.0f} µs"
    if r["kind"] == "null":
        extra = (f"cyclictest avg {r['cyclictest_avg_us']} µs max {r['cyclictest_max_us']} µs, "
                 f"{r['cyclictest_beyond_margin']}/{r['cyclictest_wakeups']} beyond margin")
    else:
        extra = f"{100 * r['within_1us']:.2f} % gaps within ±1 µs"
    print(f"{head}  {late}  {stalls}  {tail}  {extra}")


def summarize(args):
    rows = [json.loads(l) for l in open(args.raw) if l.strip()]
    meta = json.loads(args.meta) if args.meta else {}
    out = ["| build | case | rate | late frames (share) | of them the host's | strobe's own (share) | worst late | host stalls (worst) | policy | spin margin (as spun) | cyclictest avg / max | cyclictest wake-ups beyond margin | gaps within ±1 µs |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        stalls = "—" if r["host_stalls"] is None else f"{r['host_stalls']} ({r['host_stall_worst_ns'] / 1e3:.0f} µs)"
        ct = "—" if r["kind"] != "null" else f"{r['cyclictest_avg_us']} / {r['cyclictest_max_us']} µs"
        beyond = "—" if r["kind"] != "null" else (
            f"{r['cyclictest_beyond_margin']} of {r['cyclictest_wakeups']} "
            f"({100 * r['cyclictest_beyond_margin_share']:.2f} %)")
        within = "—" if r["kind"] != "cbr" else f"{100 * r['within_1us']:.2f} %"
        goal = "≤ 0.1 %" if r["kind"] == "null" else ""
        host = r.get("late_host_frames")
        if host is None:
            host_col, own_col = "not told", "—"
        else:
            own = r["late_frames"] - host
            host_col = str(host)
            own_col = f"{own} ({100 * own / r['frames'] if r['frames'] else 0:.3f} %)"
        out.append(
            f"| {r['build']} r{r['round']} | {'null port' if r['kind'] == 'null' else 'veth CBR'} | "
            f"{r['rate'] / 1e3:.0f} kpps | {r['late_frames']} of {r['frames']} "
            f"({100 * r['late_share']:.3f} %{', goal ' + goal if goal else ''}) | "
            f"{host_col} | {own_col} | "
            f"{r['max_late_ns'] / 1e3:.0f} µs | {stalls} | {r['policy']} | "
            f"{r['spin_margin_ns'] / 1e3:.0f} µs | {ct} | {beyond} | {within} |")
    summary = {"meta": meta, "rows": rows}
    with open(args.summary, "w") as f:
        json.dump(summary, f, indent=2)
    print("\n".join(out))
    if meta:
        print("\n" + ", ".join(f"{k}: {v}" for k, v in meta.items()))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name, fn in (("null-row", null_row), ("cbr-row", cbr_row)):
        s = sub.add_parser(name)
        s.add_argument("strobe_report")
        s.add_argument("--build", required=True)
        s.add_argument("--round", type=int, required=True)
        s.add_argument("--rate", type=int, required=True)
        if name == "null-row":
            s.add_argument("--cyclictest", required=True)
        else:
            s.add_argument("--analysis", required=True)
        s.set_defaults(fn=fn)
    s = sub.add_parser("log")
    s.set_defaults(fn=log_row)
    s = sub.add_parser("summarize")
    s.add_argument("raw")
    s.add_argument("summary")
    s.add_argument("--meta")
    s.set_defaults(fn=summarize)
    args = ap.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()
