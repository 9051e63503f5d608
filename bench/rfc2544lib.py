#!/usr/bin/env python3
"""bench/run rfc2544: summarise the throughput searches run side by side.

  rfc2544lib.py summarize RAW.jsonl SUMMARY.json META_JSON
  rfc2544lib.py markdown SUMMARY.json

Each raw line names a `strobe rfc2544 throughput --json` report, the DUT, the search method
and the round. Per DUT, frame size and method: the median over rounds of the trials one
search took, its wall time, and the NDR found against the shaper's rate in frames per
second (tbf counts frames without their FCS); then the aimed search's trials and time as a
share of the plain binary search's to the same resolution.
"""

import json
import statistics
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def summarize(raw_path, out_path, meta):
    rows = {}
    with open(raw_path) as f:
        for line in f:
            run = json.loads(line)
            report = load(run["report"])
            for t in report["throughput"]:
                size = t["size"]["size"]
                ndr = t["outcomes"][0]["rate"]
                key = (run["dut"], size, run["method"])
                entry = rows.setdefault(key, {"dut": run["dut"], "size": size,
                                              "method": run["method"], "rounds": []})
                shaper = run.get("shaper_bps")
                expected = shaper / ((float(size) - 4) * 8) if shaper else None
                entry["rounds"].append({
                    "round": run["round"],
                    "trials": len(t["trials"]),
                    "seconds": t["elapsed_ns"] / 1e9,
                    "ndr_pps": ndr["pps"] if ndr else None,
                    "ndr_error_pct": (ndr["pps"] / expected - 1) * 100 if ndr and expected else None,
                    "resolved": t["outcomes"][0]["resolved"],
                    "max_source": t["max_source"],
                })
    summary = {"meta": json.loads(meta), "cases": []}
    for key in sorted(rows, key=lambda k: (k[0], float(k[1]) if k[1].isdigit() else 0, k[2])):
        e = rows[key]
        rs = e["rounds"]
        med = lambda name: statistics.median(r[name] for r in rs if r[name] is not None) \
            if any(r[name] is not None for r in rs) else None
        e["median_trials"] = med("trials")
        e["median_seconds"] = med("seconds")
        e["median_ndr_pps"] = med("ndr_pps")
        e["median_ndr_error_pct"] = med("ndr_error_pct")
        e["all_resolved"] = all(r["resolved"] for r in rs)
        summary["cases"].append(e)
    by = {(c["dut"], c["size"], c["method"]): c for c in summary["cases"]}
    for c in summary["cases"]:
        binary = by.get((c["dut"], c["size"], "binary"))
        if c["method"] == "aimed" and binary:
            c["trials_vs_binary"] = c["median_trials"] / binary["median_trials"]
            c["time_vs_binary"] = c["median_seconds"] / binary["median_seconds"]
    with open(out_path, "w") as f:
        json.dump(summary, f, indent=1)


def markdown(path):
    s = load(path)
    print("| DUT | frame | search | trials (median) | time (median) | NDR found | vs shaper | aimed / binary: trials, time |")
    print("|---|---|---|---|---|---|---|---|")
    fmt = lambda v, f: "-" if v is None else f.format(v)
    for c in s["cases"]:
        ratio = ""
        if "trials_vs_binary" in c:
            ratio = f"{c['trials_vs_binary']:.2f}, {c['time_vs_binary']:.2f}"
        print(f"| {c['dut']} | {c['size']} B | {c['method']} | {fmt(c['median_trials'], '{:.0f}')} "
              f"| {fmt(c['median_seconds'], '{:.1f} s')} | {fmt(c['median_ndr_pps'], '{:.0f} pps')} "
              f"| {fmt(c['median_ndr_error_pct'], '{:+.2f} %')} | {ratio} |")


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "summarize" and len(sys.argv) == 5:
        summarize(*sys.argv[2:5])
    elif cmd == "markdown" and len(sys.argv) == 3:
        markdown(sys.argv[2])
    else:
        sys.exit(__doc__)
