#!/usr/bin/env python3
"""bench/run study: summarises rounds of `strobe study forwarders` (their terminal
reports). Each percentile of each DUT under each load is given as the median of the rounds
with the rounds' range, and each DUT's loss as the rounds' total.

  studylib.py ROUND.txt... --meta JSON --built-from REV --out SUMMARY.json  (Markdown on stdout)
"""
import argparse
import json
import re
import statistics

ROWS = ["p50", "p90", "p99", "p99.9", "p99.99", "max"]
LOAD = re.compile(r"^== (\w+) load at ([\d.]+ \w+): latency in µs")
RUN = re.compile(r"dut=(\S+) load=(\w+) rate=([\d.]+ \w+): (\d+) sent, (\d+) lost")


def parse(text):
    """{(load, rate, dut): {row: value or None}} and {(load, rate, dut): (sent, lost)}."""
    tables, losses = {}, {}
    load, duts = None, []
    for line in text.splitlines():
        m = LOAD.match(line)
        if m:
            load, duts = (m.group(1), m.group(2)), []
            continue
        if load and line.startswith("µs"):
            duts = line.split()[1:]
            continue
        words = line.split()
        if load and duts and words and words[0] in ROWS and len(words) == len(duts) + 1:
            for dut, value in zip(duts, words[1:]):
                cell = tables.setdefault((load[0], load[1], dut), {})
                cell[words[0]] = None if value == "-" else float(value)
        m = RUN.search(line)
        if m:
            dut, arrivals, rate, sent, lost = m.groups()
            losses[(arrivals, rate, dut)] = (int(sent), int(lost))
    return tables, losses


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rounds", nargs="+")
    ap.add_argument("--meta", required=True)
    ap.add_argument("--built-from", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    parsed = [parse(open(path, encoding="utf-8").read()) for path in a.rounds]
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
