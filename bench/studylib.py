#!/usr/bin/env python3
"""bench/run study: summarises rounds of `strobe study forwarders` (their `--json`
documents). Each percentile of each DUT under each load is given as the median of the rounds
with the rounds' range, and each DUT's loss as the rounds' total.

  studylib.py ROUND.json... --meta JSON --built-from REV --out SUMMARY.json  (Markdown on stdout)
"""
import argparse
import json
import statistics

# The table's rows, the fields of a run's `latency` (ns) they come from, and their quantile
# (a percentile a run has too few frames to resolve is left out, as strobe's table does).
ROWS = {"p50": ("p50_ns", 0.5), "p90": ("p90_ns", 0.9), "p99": ("p99_ns", 0.99),
        "p99.9": ("p99_9_ns", 0.999), "p99.99": ("p99_99_ns", 0.9999), "max": ("max_ns", 0.0)}


def rate_text(pps):
    """A rate as the study's report words it, e.g. 20.00 kpps."""
    return f"{pps / 1000:.2f} kpps" if pps >= 1000 else f"{pps} pps"


def parse(document):
    """{(load, rate, dut): {row: µs}} of the runs compared (complete, with latency) and
    {(load, rate, dut): (sent, lost)} of every run."""
    tables, losses = {}, {}
    for run in document["runs"]:
        key = (run["load"], rate_text(run["rate_pps"]), run["device_under_test"]["kind"])
        losses[key] = (run["frames_tx"] or 0, run["frames_lost"] or 0)
        latency = run["latency"]
        if run["complete"] and latency:
            tables[key] = {row: latency[field] / 1000 for row, (field, q) in ROWS.items()
                           if latency["count"] * (1 - q) >= 1 - 1e-9}
    return tables, losses


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rounds", nargs="+")
    ap.add_argument("--meta", required=True)
    ap.add_argument("--built-from", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    parsed = []
    for path in a.rounds:
        with open(path, encoding="utf-8") as f:
            parsed.append(parse(json.load(f)))
    keys = []
    for tables, _ in parsed:
        keys += [k for k in tables if k not in keys]
    summary = {"meta": json.loads(a.meta), "built_from": a.built_from,
               "rounds": len(parsed), "cases": []}
    for key in keys:
        case = {"load": key[0], "rate": key[1], "dut": key[2], "percentiles_us": {}}
        for row in ROWS:
            values = [t[key][row] for t, _ in parsed if key in t and t[key].get(row) is not None]
            if values:
                case["percentiles_us"][row] = {"median": statistics.median(values),
                                               "min": min(values), "max": max(values)}
        sent = sum(l[key][0] for _, l in parsed if key in l)
        lost = sum(l[key][1] for _, l in parsed if key in l)
        case["sent"], case["lost"] = sent, lost
        summary["cases"].append(case)
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
    print(f"{len(parsed)} rounds; each cell: median of the rounds (their range), µs\n")
    print("| load | DUT | " + " | ".join(ROWS) + " | lost |")
    print("|---|---|" + "---|" * len(ROWS) + "---|")
    for case in summary["cases"]:
        cells = []
        for row in ROWS:
            p = case["percentiles_us"].get(row)
            cells.append("–" if p is None else
                         f"{p['median']:.1f} ({p['min']:.1f}–{p['max']:.1f})")
        print(f"| {case['load']} {case['rate']} | `{case['dut']}` | " + " | ".join(cells) +
              f" | {case['lost']} of {case['sent']} |")


if __name__ == "__main__":
    main()
