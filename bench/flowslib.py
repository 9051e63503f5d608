#!/usr/bin/env python3
"""The flows section of bench/run: many flows on one null port (issue #29 item 3).

  flowslib.py scenario N FRAMES OUT [--variant plain|varying|tagged]
                                      a scenario of N UDP flows on one null port, FRAMES
                                      frames in all (at least one per flow), every flow at
                                      the same rate so their deadlines interleave; varying:
                                      each flow's source port takes 4 values, tagged: the
                                      same with a metric tag on it (4 tag positions a flow)
  flowslib.py row REPORT --build B --flows N --round R --wall-s S
                                      one JSON line from a strobe --json report
  flowslib.py markdown RAW            the table for BENCHMARKS.md
"""
import argparse
import json
import statistics
import sys


def scenario(n, frames, out, variant="plain"):
    per_flow = max(1, frames // n)
    parts = ['[[ports]]\nname = "tx"\nlocation = "null"\n']
    for i in range(n):
        parts.append(
            f'[[flows]]\nname = "f{i}"\ntx = "tx"\nsize = 64\n'
            f"rate = {{ pps = 10 }}\n"
            f"duration = {{ fixed_packets = {{ packets = {per_flow} }} }}\n"
            '[[flows.packet]]\nethernet = { src = "02:00:00:00:00:01", dst = "02:00:00:00:00:02" }\n'
            '[[flows.packet]]\nipv4 = { src = "198.18.0.1", dst = "198.18.1.1" }\n'
            f"[[flows.packet]]\nudp = {{ src_port = {src_port(i, variant)}, dst_port = {2000 + i // 60000} }}\n"
        )
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(parts))


def src_port(i, variant):
    port = 1024 + i % 60000
    if variant == "plain":
        return str(port)
    values = f"values = [{port}, {port + 1}, {port + 2}, {port + 3}]"
    if variant == "tagged":
        return f'{{ {values}, metric_tags = [{{ name = "sport" }}] }}'
    return f"{{ {values} }}"


def row(report, build, flows, rnd, wall_s):
    with open(report, encoding="utf-8") as f:
        r = json.load(f)
    port = r["ports"][0]
    frames, elapsed = int(port["frames_tx"]), int(port["elapsed_ns"])
    return {"build": build, "flows": flows, "round": rnd, "frames_tx": frames,
            "elapsed_ns": elapsed, "mpps": frames / elapsed * 1e3, "wall_s": wall_s}


def markdown(raw):
    with open(raw, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    order = ["before", "after", "varying", "tagged"]
    builds = sorted({r["build"] for r in rows}, key=lambda b: order.index(b) if b in order else 9)
    counts = sorted({r["flows"] for r in rows})
    med = lambda xs: statistics.median(xs) if xs else None  # noqa: E731
    head = "| flows on the port |"
    for b in builds:
        head += f" {b}: Mpps (median) | {b}: wall time, load included |"
    if "before" in builds and "after" in builds:
        head += " after / before |"
    if "varying" in builds and "tagged" in builds:
        head += " tagged / varying |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for n in counts:
        line = f"| {n} |"
        mpps = {}
        for b in builds:
            sel = [r for r in rows if r["build"] == b and r["flows"] == n]
            mpps[b] = med([r["mpps"] for r in sel])
            wall = med([r["wall_s"] for r in sel])
            line += " %s | %s |" % ("–" if mpps[b] is None else "%.3f" % mpps[b],
                                    "–" if wall is None else "%.2f s" % wall)
        for top, bottom in (("after", "before"), ("tagged", "varying")):
            if top in builds and bottom in builds:
                a, b = mpps.get(top), mpps.get(bottom)
                line += " %s |" % ("%.2fx" % (a / b) if a and b else "–")
        print(line)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("scenario")
    s.add_argument("n", type=int)
    s.add_argument("frames", type=int)
    s.add_argument("out")
    s.add_argument("--variant", choices=["plain", "varying", "tagged"], default="plain")
    r = sub.add_parser("row")
    r.add_argument("report")
    r.add_argument("--build", required=True)
    r.add_argument("--flows", type=int, required=True)
    r.add_argument("--round", type=int, required=True)
    r.add_argument("--wall-s", type=float, required=True)
    m = sub.add_parser("markdown")
    m.add_argument("raw")
    a = p.parse_args()
    if a.cmd == "scenario":
        scenario(a.n, a.frames, a.out, a.variant)
    elif a.cmd == "row":
        print(json.dumps(row(a.report, a.build, a.flows, a.round, a.wall_s)))
    else:
        markdown(a.raw)


if __name__ == "__main__":
    sys.exit(main())
