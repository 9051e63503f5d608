#!/usr/bin/env python3
"""The rxcount section of bench/run: receivers counting xdp-live's top rate (issue #32).

  rxcountlib.py row REPORT --receiver R --round N [--dropped N]
                                                    one JSON line from a strobe --json report
  rxcountlib.py markdown RAW [--cost COST.jsonl]    the tables for BENCHMARKS.md
"""
import argparse
import json
import statistics
import sys


def row(report_path, receiver, rnd, dropped=None):
    """`dropped`: frames a bare drop program took (the reference receiver, which strobe
    does not see; its report's own receive port then received nothing)."""
    with open(report_path, encoding="utf-8") as f:
        r = json.load(f)
    flow = r["flows"][0]
    port = r["rx_ports"][0] if r["rx_ports"] else {}
    tx_span = (flow["last_tx_ns"] or 0) - (flow["first_tx_ns"] or 0)
    rx_span = (flow["last_rx_ns"] or 0) - (flow["first_rx_ns"] or 0)
    latency = (flow.get("latency") or {}).get("raw") or {}
    frames_rx = flow["frames_rx"] if dropped is None else dropped
    return {
        "receiver": receiver,
        "round": rnd,
        "frames_tx": flow["frames_tx"],
        "frames_rx": frames_rx,
        "counted": frames_rx / flow["frames_tx"] if flow["frames_tx"] else 0.0,
        "tx_mpps": flow["frames_tx"] / tx_span * 1e3 if tx_span > 0 else None,
        "rx_mpps": flow["frames_rx"] / rx_span * 1e3 if rx_span > 0 and dropped is None else None,
        "latency_frames": latency.get("count", 0),
        "p50_ns": latency.get("p50_ns"),
        "p99_9_ns": latency.get("p99_9_ns"),
        "kernel_drops": port.get("kernel_drops"),
        "interface_drops": port.get("interface_drops"),
    }


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v, spec):
    return "–" if v is None else format(v, spec)


def markdown(raw, cost):
    rows = [json.loads(line) for line in open(raw, encoding="utf-8") if line.strip()]
    receivers = list(dict.fromkeys(r["receiver"] for r in rows))
    out = [
        "| receiver | sender Mpps (median) | / into a bare drop (median of rounds) | "
        "frames counted (median, min) | counted Mpps | frames with latency | p50 / p99.9 µs |",
        "|---|---|---|---|---|---|---|",
    ]
    # The sender's rate into the bare drop program of the same round: what the receiver's
    # work costs the sender (on a veth both run on the sending CPU).
    drop_rate = {r["round"]: r["tx_mpps"] for r in rows if r["receiver"] == "drop"}
    for rec in receivers:
        mine = [r for r in rows if r["receiver"] == rec]
        counted = [r["counted"] for r in mine]
        p50, p999 = median([r["p50_ns"] for r in mine]), median([r["p99_9_ns"] for r in mine])
        lat = median([r["latency_frames"] / r["frames_tx"] for r in mine if r["frames_tx"]])
        ratio = median(
            [
                r["tx_mpps"] / drop_rate[r["round"]]
                for r in mine
                if r["tx_mpps"] and drop_rate.get(r["round"])
            ]
        )
        out.append(
            f"| {rec} | {fmt(median([r['tx_mpps'] for r in mine]), '.3f')} | "
            f"{fmt(ratio, '.2f')}× | "
            f"{100 * median(counted):.2f} %, {100 * min(counted):.2f} % | "
            f"{fmt(median([r['rx_mpps'] for r in mine]), '.3f')} | "
            f"{fmt(None if lat is None else 100 * lat, '.2f')} % | "
            f"{fmt(None if p50 is None else p50 / 1e3, '.2f')} / "
            f"{fmt(None if p999 is None else p999 / 1e3, '.2f')} |"
        )
    if cost:
        lines = [json.loads(line) for line in open(cost, encoding="utf-8") if line.strip()]
        bare = median([c["bare_drop_ns"] for c in lines])
        counting = median([c["counting_ns"] for c in lines])
        out += [
            "",
            "| program, BPF_PROG_RUN on one 64-byte frame | ns per frame (median of rounds) |",
            "|---|---|",
            f"| bare `return XDP_DROP;` | {bare:.1f} |",
            f"| strobe's counting program | {counting:.1f} |",
            f"| counting's own cost | {counting - bare:.1f} |",
        ]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("row")
    r.add_argument("report")
    r.add_argument("--receiver", required=True)
    r.add_argument("--round", type=int, required=True)
    r.add_argument("--dropped", type=int, help="frames the bare drop program took")
    m = sub.add_parser("markdown")
    m.add_argument("raw")
    m.add_argument("--cost")
    a = ap.parse_args()
    if a.cmd == "row":
        print(json.dumps(row(a.report, a.receiver, a.round, a.dropped)))
    else:
        print(markdown(a.raw, a.cost))


if __name__ == "__main__":
    sys.exit(main())
