#!/usr/bin/env python3
"""bench/run history: the run history at scale. One real run is recorded (a lab run with
every frame's latency), the database is filled to N runs by copying it row for row (SQL,
histograms included), then `strobe runs` commands are timed as a user runs them (a new
process each time, output read in full).

  historylib.py measure --strobe BIN --db DB --runs N --rounds R --out SUMMARY.json --meta JSON
  historylib.py markdown SUMMARY.json
"""
import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import time


def fill(db, runs):
    """Copies run 1 (and its histograms) until the database holds `runs` runs."""
    con = sqlite3.connect(db)
    cols = [r[1] for r in con.execute("PRAGMA table_info(runs)") if r[1] != "id"]
    have = con.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    with con:
        for k in range(have, runs):
            cur = con.execute(
                f"INSERT INTO runs ({', '.join(cols)}) SELECT {', '.join(cols)} FROM runs WHERE id = 1")
            con.execute(
                "INSERT INTO histograms (run_id, flow, encoding, data) "
                "SELECT ?, flow, encoding, data FROM histograms WHERE run_id = 1", (cur.lastrowid,))
    n = con.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    con.close()
    return n


def timed(cmd, rounds):
    """Wall time of `cmd` (ms) in each round, and the size of its output."""
    times, size = [], 0
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True)
        times.append((time.perf_counter() - t0) * 1e3)
        if out.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed: {out.stderr.decode()}")
        size = len(out.stdout)
    return {"ms": times, "median_ms": statistics.median(times), "output_bytes": size}


def measure(a):
    n = fill(a.db, a.runs)
    runs = [a.strobe, "runs", "--db", a.db]
    cases = {
        "list (newest 50)": runs + ["list"],
        f"list --limit 0 (all {n})": runs + ["list", "--limit", "0"],
        f"list --json --limit 0 (all {n})": runs + ["list", "--json", "--limit", "0"],
        "list --kind gen --grep rate --limit 0": runs + ["list", "--kind", "gen", "--grep", "rate", "--limit", "0"],
        "show (one run)": runs + ["show", str(n)],
        "compare (two runs: table and HTML)": runs + ["compare", "1", str(n), "--html", a.db + ".compare.html"],
        "--version (process start alone)": [a.strobe, "--version"],
    }
    results = {name: timed(cmd, a.rounds) for name, cmd in cases.items()}
    summary = {"meta": json.loads(a.meta), "runs": n, "rounds": a.rounds,
               "db_bytes": os.path.getsize(a.db), "cases": results}
    with open(a.out, "w") as f:
        json.dump(summary, f, indent=2)


def markdown(path):
    s = json.load(open(path))
    print(f"{s['runs']} runs in the database ({s['db_bytes'] / 1e6:.1f} MB), {s['rounds']} rounds, "
          f"strobe {s['meta'].get('strobe_git')}:\n")
    print("| command | median | min–max | output |")
    print("|---|---|---|---|")
    for name, c in s["cases"].items():
        command = f"strobe {name}" if name.startswith("--") else f"strobe runs {name}"
        spread = f"{min(c['ms']):.1f}–{max(c['ms']):.1f} ms"
        print(f"| `{command}` | {c['median_ms']:.1f} ms | {spread} | {c['output_bytes'] / 1e3:.0f} kB |")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--strobe", required=True)
    m.add_argument("--db", required=True)
    m.add_argument("--runs", type=int, required=True)
    m.add_argument("--rounds", type=int, required=True)
    m.add_argument("--out", required=True)
    m.add_argument("--meta", required=True)
    md = sub.add_parser("markdown")
    md.add_argument("summary")
    a = p.parse_args()
    if a.cmd == "measure":
        measure(a)
    else:
        markdown(a.summary)


if __name__ == "__main__":
    main()
