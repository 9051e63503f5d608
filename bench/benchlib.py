#!/usr/bin/env python3
"""Parsers and summaries for bench/run.

Each measurement becomes one JSON object (one line) in a section's raw.jsonl; the
summary commands read that file, print the tables and write the section's summary JSON.
Only the standard library is used so the benchmark needs nothing beyond python3.
"""

import argparse
import json
import re
import statistics
import sys

STATS_BLOCK = re.compile(r"TX-packets:\s+(\d+)\s+TX-errors.*?Tx-pps:\s+(\d+)", re.S)
FINAL_TX = re.compile(r"Accumulated forward statistics.*?TX-packets:\s+(\d+)", re.S)


def fail(message):
    print(f"benchlib: {message}", file=sys.stderr)
    sys.exit(1)


def run_command(ap, handlers):
    """Parses the command line with `ap` and runs the chosen subcommand's handler; every
    subcommand's --meta must be JSON."""
    args = ap.parse_args()
    if "meta" in args:
        try:
            json.loads(args.meta)
        except ValueError as e:
            fail(f"--meta is not JSON: {e}")
    handlers[args.cmd](args)


def parse_testpmd(path, skip):
    """Packet rate of a testpmd txonly run from its periodic port statistics.

    Each block gives the port's TX-packets so far and Tx-pps since the previous block.
    The first block is printed as forwarding starts (rate 0, nothing to compare with)
    and `skip` blocks in total are dropped so the start-up second does not count. The
    blocks are not evenly spaced (testpmd's stats loop sleeps a whole second between
    checks, so the period drifts to about 2 s), hence the rate is total packets over
    total time of the kept intervals, each interval's time being its packets / Tx-pps.
    """
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError as e:
        fail(f"cannot read testpmd log {path}: {e}")
    blocks = [(int(tx), int(pps)) for tx, pps in STATS_BLOCK.findall(text)]
    skip = max(skip, 1)  # the first interval needs a previous block
    packets = 0
    seconds = 0.0
    for (prev_tx, _), (tx, pps) in zip(blocks[skip - 1 :], blocks[skip:]):
        if pps <= 0:
            fail(f"{path}: a stats block after start-up reports Tx-pps 0")
        packets += tx - prev_tx
        seconds += (tx - prev_tx) / pps
    if packets <= 0:
        fail(
            f"{path}: found {len(blocks)} port statistics blocks, need more than {skip} "
            "(did testpmd start forwarding? see the log)"
        )
    final = FINAL_TX.search(text)
    pps = packets / seconds
    return {
        "tool": "testpmd",
        "blocks": [{"tx_packets": tx, "tx_pps": p} for tx, p in blocks],
        "steady_packets": packets,
        "steady_seconds": seconds,
        "tx_packets_total": int(final.group(1)) if final else None,
        "mpps": pps / 1e6,
        "ns_per_packet": 1e9 / pps,
    }


def parse_strobe(path):
    """Packet rate of one `strobe gen --json` run (first port)."""
    try:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"cannot read strobe report {path}: {e}")
    try:
        port = report["ports"][0]
        frames = int(port["frames_tx"])
        elapsed = int(port["elapsed_ns"])
    except (KeyError, IndexError, TypeError, ValueError) as e:
        fail(f"{path}: expected ports[0].frames_tx and ports[0].elapsed_ns ({e!r})")
    if frames <= 0 or elapsed <= 0:
        fail(f"{path}: strobe sent {frames} frames in {elapsed} ns; nothing to measure")
    return {
        "tool": "strobe",
        "frames_tx": frames,
        "elapsed_ns": elapsed,
        "batch": port.get("batch"),
        "mpps": frames / elapsed * 1e3,
        "ns_per_packet": elapsed / frames,
    }


def load_raw(path):
    rows = []
    try:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if line:
                    try:
                        rows.append(json.loads(line))
                    except ValueError as e:
                        fail(f"{path}:{n}: not JSON ({e})")
    except OSError as e:
        fail(f"cannot read {path}: {e}")
    return rows


def slope(points):
    """Least-squares slope of (x, y) points; None with fewer than two distinct x."""
    xs = [x for x, _ in points]
    if len(set(xs)) < 2:
        return None
    mx = statistics.fmean(xs)
    my = statistics.fmean(y for _, y in points)
    num = sum((x - mx) * (y - my) for x, y in points)
    den = sum((x - mx) ** 2 for x in xs)
    return num / den


def summarize_null(raw_path, out_path, meta):
    rows = load_raw(raw_path)
    by_case = {}
    for r in rows:
        by_case.setdefault(r["case"], []).append(r)

    def median_of(case, key):
        values = [r[key] for r in by_case.get(case, [])]
        return statistics.median(values) if values else None

    summary = {"meta": meta, "raw": rows}

    # Side by side: alternating rounds of strobe and testpmd.
    strobe_rounds = by_case.get("strobe", [])
    peer_rounds = by_case.get("testpmd", [])
    if not strobe_rounds or not peer_rounds:
        fail("need at least one strobe round and one testpmd round")
    print()
    print("== null backend, 64-byte UDP, one core: strobe vs dpdk-testpmd txonly ==")
    print(f"{'round':>5}  {'strobe Mpps':>11} {'ns/pkt':>7}  {'testpmd Mpps':>12} {'ns/pkt':>7}  {'ratio':>6}")
    pairs = []
    for s, p in zip(strobe_rounds, peer_rounds):
        ratio = s["mpps"] / p["mpps"]
        pairs.append(ratio)
        print(
            f"{s['round']:>5}  {s['mpps']:>11.2f} {s['ns_per_packet']:>7.2f}  "
            f"{p['mpps']:>12.2f} {p['ns_per_packet']:>7.2f}  {ratio:>6.3f}"
        )
    s_med = median_of("strobe", "mpps")
    p_med = median_of("testpmd", "mpps")
    ratio_med = s_med / p_med
    print(
        f"{'median':>5}  {s_med:>11.2f} {1e3 / s_med:>7.2f}  "
        f"{p_med:>12.2f} {1e3 / p_med:>7.2f}  {ratio_med:>6.3f}"
    )
    verdict = "meets" if ratio_med >= 1.0 else "misses"
    print(f"strobe/testpmd = {ratio_med:.3f} (median of medians; per-round median "
          f"{statistics.median(pairs):.3f}); target >= 1.0: {verdict}")
    summary["comparison"] = {
        "strobe_median_mpps": s_med,
        "testpmd_median_mpps": p_med,
        "ratio": ratio_med,
        "per_round_ratios": pairs,
        "per_round_ratio_median": statistics.median(pairs),
        "target": 1.0,
        "meets_target": ratio_med >= 1.0,
    }

    # Batch sizes.
    batch_cases = sorted(
        (c for c in by_case if c.startswith("batch-")), key=lambda c: int(c.split("-", 1)[1])
    )
    if batch_cases:
        print()
        print("== batch size (same command, --batch N) ==")
        print(f"{'batch':>6} {'Mpps':>8} {'ns/pkt':>8}")
        summary["batch"] = {}
        # The side-by-side runs leave the batch to strobe; the size it chose is the default.
        default = strobe_rounds[0].get("batch")
        for c in batch_cases:
            mpps = median_of(c, "mpps")
            size = int(c.split("-", 1)[1])
            summary["batch"][size] = {"mpps": mpps, "ns_per_packet": 1e3 / mpps}
            mark = "  (default)" if size == default else ""
            print(f"{size:>6} {mpps:>8.2f} {1e3 / mpps:>8.2f}{mark}")
        best = max(summary["batch"], key=lambda b: summary["batch"][b]["mpps"])
        if default in summary["batch"]:
            gain = summary["batch"][best]["mpps"] / summary["batch"][default]["mpps"] - 1
            print(f"best: batch {best}, {gain:+.1%} Mpps against the default ({default})")
            summary["batch_best"] = {"batch": best, "gain_over_default": gain, "default": default}

    # Marginal cost per varying field (MoonGen paper, Table 2 style).
    field_cases = [c for c in by_case if c.startswith(("counter-", "random-"))]
    if field_cases:
        print()
        print("== marginal cost of varying fields (ns/packet, median of rounds) ==")
        base = median_of("fields-0", "ns_per_packet")
        summary["fields"] = {"base_ns": base}
        counts = sorted({int(c.split("-", 1)[1]) for c in field_cases})
        print(f"{'fields':>6} {'counter':>9} {'random':>9}")
        print(f"{0:>6} {base:>9.2f} {base:>9.2f}")
        for n in counts:
            cells = []
            for kind in ("counter", "random"):
                v = median_of(f"{kind}-{n}", "ns_per_packet")
                cells.append(f"{v:>9.2f}" if v is not None else f"{'-':>9}")
            print(f"{n:>6} {cells[0]} {cells[1]}")
        for kind in ("counter", "random"):
            points = [(0, r["ns_per_packet"]) for r in by_case.get("fields-0", [])]
            for n in counts:
                points += [(n, r["ns_per_packet"]) for r in by_case.get(f"{kind}-{n}", [])]
            s = slope(points)
            summary["fields"][kind] = {
                "ns_by_fields": {n: median_of(f"{kind}-{n}", "ns_per_packet") for n in counts},
                "slope_ns_per_field": s,
            }
            if s is not None:
                print(f"{kind}: {s:+.2f} ns per added field (least-squares slope over all runs)")
        if "no-trailer" in by_case:
            nt = median_of("no-trailer", "ns_per_packet")
            summary["fields"]["no_trailer_ns"] = nt
            print(f"trailer: {base - nt:+.2f} ns/packet (base {base:.2f} with trailer, "
                  f"{nt:.2f} with --no-trailer)")

    try:
        with open(out_path, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=2)
            f.write("\n")
    except OSError as e:
        fail(f"cannot write {out_path}: {e}")
    print()
    print(f"results: {out_path}")


def markdown_null(summary_path):
    """The null section's tables as Markdown, ready for BENCHMARKS.md."""
    try:
        with open(summary_path, encoding="utf-8") as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"cannot read {summary_path}: {e}")
    rows = d["raw"]
    out = []
    out.append("| round | strobe Mpps | strobe ns/pkt | testpmd Mpps | testpmd ns/pkt | strobe/testpmd |")
    out.append("|---:|---:|---:|---:|---:|---:|")
    strobe = [r for r in rows if r["case"] == "strobe"]
    peer = [r for r in rows if r["case"] == "testpmd"]
    for s_row, p_row in zip(strobe, peer):
        out.append(
            f"| {s_row['round']} | {s_row['mpps']:.2f} | {s_row['ns_per_packet']:.2f} | "
            f"{p_row['mpps']:.2f} | {p_row['ns_per_packet']:.2f} | {s_row['mpps'] / p_row['mpps']:.3f} |"
        )
    c = d["comparison"]
    sm, pm = c["strobe_median_mpps"], c["testpmd_median_mpps"]
    out.append(
        f"| **median** | **{sm:.2f}** | **{1e3 / sm:.2f}** | **{pm:.2f}** | "
        f"**{1e3 / pm:.2f}** | **{c['ratio']:.3f}** |"
    )
    if "batch" in d:
        default = d.get("batch_best", {}).get("default")
        out.append("")
        out.append("| batch | Mpps | ns/pkt |")
        out.append("|---:|---:|---:|")
        for b, v in sorted(d["batch"].items(), key=lambda kv: int(kv[0])):
            mark = " (default)" if default is not None and int(b) == default else ""
            out.append(f"| {b}{mark} | {v['mpps']:.2f} | {v['ns_per_packet']:.2f} |")
    if "fields" in d:
        fl = d["fields"]
        out.append("")
        out.append("| varying fields | counter ns/pkt | random ns/pkt |")
        out.append("|---:|---:|---:|")
        out.append(f"| 0 | {fl['base_ns']:.2f} | {fl['base_ns']:.2f} |")
        for n in fl["counter"]["ns_by_fields"]:
            cn = fl["counter"]["ns_by_fields"][n]
            rn = fl["random"]["ns_by_fields"].get(n)
            out.append(f"| {n} | {cn:.2f} | {rn:.2f} |")
        out.append(
            f"| **slope, ns per added field** | **{fl['counter']['slope_ns_per_field']:+.2f}** | "
            f"**{fl['random']['slope_ns_per_field']:+.2f}** |"
        )
        if "no_trailer_ns" in fl:
            out.append("")
            out.append(
                f"Trailer: {fl['base_ns']:.2f} ns/pkt with it, {fl['no_trailer_ns']:.2f} without "
                f"(`--no-trailer`): {fl['base_ns'] - fl['no_trailer_ns']:+.2f} ns/pkt."
            )
    print("\n".join(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("testpmd", help="parse a testpmd log into one JSON line")
    t.add_argument("log")
    t.add_argument("--skip", type=int, default=2, help="stats blocks to ignore at the start")
    s = sub.add_parser("strobe", help="parse a strobe --json report into one JSON line")
    s.add_argument("report")
    for p in (t, s):
        p.add_argument("--case", required=True)
        p.add_argument("--round", type=int, required=True)
    n = sub.add_parser("summarize-null", help="tables and summary JSON of the null section")
    n.add_argument("raw")
    n.add_argument("out")
    n.add_argument("--meta", default="{}", help="JSON object stored with the summary")
    m = sub.add_parser("markdown-null", help="the null section's summary as Markdown tables")
    m.add_argument("summary")
    args = ap.parse_args()

    if args.cmd in ("testpmd", "strobe"):
        row = parse_testpmd(args.log, args.skip) if args.cmd == "testpmd" else parse_strobe(args.report)
        row = {"case": args.case, "round": args.round, **row}
        print(json.dumps(row))
    elif args.cmd == "summarize-null":
        try:
            meta = json.loads(args.meta)
        except ValueError as e:
            fail(f"--meta is not JSON: {e}")
        summarize_null(args.raw, args.out, meta)
    elif args.cmd == "markdown-null":
        markdown_null(args.summary)


if __name__ == "__main__":
    main()
