#!/usr/bin/env python3
"""bench/run trains: summarise the convoy runs and the iperf3 runs through the same shapers.

  trainslib.py summarize RAW.jsonl SUMMARY.json META_JSON
  trainslib.py markdown SUMMARY.json
  trainslib.py figures RUN_DIR OUT_DIR   (round 1's report figures as standalone SVG files)

Every bandwidth is converted to what the shaper counts (tbf: frames without FCS), so that
each tool's figure is compared with the configured rate in the same bytes:
- strobe: its layer-2 figure (frames with FCS) x (F - 4) / F;
- iperf3 UDP: its payload rate x (F - 4) / (F - 46) (Ethernet 14 + IPv4 20 + UDP 8 bytes);
- iperf3 TCP: its goodput x 1514 / 1448 (full-size segments with the timestamp option).
strobe's figure is its bandwidth past each train's burst, in arrival order (the frames after
a token bucket's first burst; robust to trains that overflowed the shaper and lost their
tails), the median of the trains' (one disturbed train — the sender or the
receiver preempted mid-train on this shared VM — moves the mean by up to 1.5 %; the mean
is listed beside it). "Time to reach" is when a tool's running figure (strobe: the median of the trains so far;
iperf3: its average since the start, interval by interval) came within the bound and
stayed there.
"""

import json
import statistics
import sys

TCP_FRAME_PER_PAYLOAD = 1514 / 1448


def load(path):
    with open(path) as f:
        return json.load(f)


def settle_time(points, target, bound):
    """points: (time, running figure) in time order; the first time after which every
    figure is within bound (a fraction) of target, or None."""
    settled = None
    for t, value in points:
        if abs(value / target - 1) < bound:
            if settled is None:
                settled = t
        else:
            settled = None
    return settled


def convoy_row(rec):
    frame = rec["frame_bytes"]
    rate = rec["rate_bps"]
    r = load(rec["base"] + ".convoy.json")
    step = r["steps"][0]
    c = step["convoy"]
    scale = (frame - 4) / frame
    gap_s = step["step"]["gap_ns"] / 1e9
    running, values = [], []
    # Reports from before the estimate past the burst have only the second halves.
    key = "after_burst_l2_bps" if c.get("after_burst_l2_bps") else "second_half_l2_bps"
    for t in c["trains"]:
        v = t.get(key)
        if v is None:
            continue
        values.append(v * scale)
        running.append(((t["train"] + 1) * gap_s, statistics.median(values)))
    head = c["head_latency_ns"]
    base = (step.get("baseline") or {}).get("latency") or {}
    every = step.get("every_frame_latency") or {}
    return {
        "whole_err_pct": (c["l2_bps"]["median"] * scale / rate - 1) * 100,
        "half_err_pct": (c[key]["median"] * scale / rate - 1) * 100,
        "half_mean_err_pct": (c[key]["mean"] * scale / rate - 1) * 100,
        "half_ci_pct": [(x * scale / rate - 1) * 100 for x in c[key]["ci95"]],
        "half_idi_bps": c[key]["idi"],
        "loss": c["frames_lost"],
        "frames": step["step"]["frames_per_train"],
        "tail_loss_trains": (c.get("tail_loss") or {}).get("trains", 0),
        "convoy_s": len(c["trains"]) * gap_s,
        "settle_05_s": settle_time(running, rate, 0.005),
        "settle_2_s": settle_time(running, rate, 0.02),
        "head_p50_us": head["median"] / 1e3,
        "baseline_p50_us": base.get("p50_ns", float("nan")) / 1e3,
        "every_mean_us": every.get("mean_ns", float("nan")) / 1e3,
        "every_p99_us": every.get("p99_ns", float("nan")) / 1e3,
    }


def iperf_row(path, rate, scale):
    r = load(path)
    intervals = r.get("intervals", [])
    running, bits, seconds = [], 0.0, 0.0
    for i in intervals:
        s = i["sum"]
        bits += s["bits_per_second"] * s["seconds"]
        seconds += s["seconds"]
        if seconds > 0:
            running.append((seconds, bits / seconds * scale))
    end = r.get("end", {})
    total = (end.get("sum_received") or end.get("sum") or {}).get("bits_per_second")
    if total is None and running:
        total = running[-1][1] / scale
    return {
        "raw_err_pct": (total / rate - 1) * 100 if total else None,
        "err_pct": (total * scale / rate - 1) * 100 if total else None,
        "seconds": seconds,
        "settle_05_s": settle_time(running, rate, 0.005),
        "settle_2_s": settle_time(running, rate, 0.02),
    }


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarize(raw_path, out_path, meta):
    with open(raw_path) as f:
        records = [json.loads(line) for line in f if line.strip()]
    shapers, cable = {}, {}
    for rec in records:
        if rec["kind"] == "shaper":
            frame = rec["frame_bytes"]
            row = {
                "strobe": convoy_row(rec),
                "iperf3_udp": iperf_row(rec["base"] + ".iperf3-udp.json", rec["rate_bps"],
                                        (frame - 4) / (frame - 46)),
                "iperf3_tcp": iperf_row(rec["base"] + ".iperf3-tcp.json", rec["rate_bps"],
                                        TCP_FRAME_PER_PAYLOAD),
            }
            probe = rec.get("probe", False)
            key = (rec["rate_bps"], frame, rec["frames"], probe)
            # frames 0: strobe chose the train length (its default): read it from the report.
            frames = rec["frames"] or row["strobe"]["frames"]
            shapers.setdefault(key, {"rate_bps": rec["rate_bps"], "frame_bytes": frame,
                                     "frames": frames, "defaults": not rec["frames"],
                                     "probe": probe, "rounds": []})["rounds"].append(row)
        else:
            r = load(rec["base"] + ".lengths.json")
            for step in r["steps"]:
                n = step["step"]["frames_per_train"]
                c = step["convoy"]
                cable.setdefault(n, []).append({
                    "head_p50_us": c["head_latency_ns"]["median"] / 1e3,
                    "baseline_p50_us": step["baseline"]["latency"]["p50_ns"] / 1e3,
                    "every_mean_us": step["every_frame_latency"]["mean_ns"] / 1e3,
                    "every_p99_us": step["every_frame_latency"]["p99_ns"] / 1e3,
                })
    summary = {"meta": json.loads(meta), "shapers": [], "cable": []}
    for key in sorted(shapers):
        s = shapers[key]
        rounds = s["rounds"]
        pick = lambda tool, field: med([r[tool][field] for r in rounds])  # noqa: E731
        s["median"] = {
            tool: {field: pick(tool, field) for field in rounds[0][tool] if field != "half_ci_pct"}
            for tool in ("strobe", "iperf3_udp", "iperf3_tcp")
        }
        summary["shapers"].append(s)
    for n in sorted(cable):
        rows = cable[n]
        summary["cable"].append({"frames": n, "rounds": rows,
                                 "median": {k: med([r[k] for r in rows]) for k in rows[0]}})
    with open(out_path, "w") as f:
        json.dump(summary, f, indent=1)


def fmt(v, spec="{:+.2f}", none="–"):
    return none if v is None else spec.format(v)


def secs(v):
    if v is None:
        return "not within it"
    return "%.1f ms" % (v * 1e3) if v < 1 else "%.2f s" % v


def markdown(path):
    s = load(path)
    rounds = len(s["shapers"][0]["rounds"]) if s["shapers"] else 0
    print("Bandwidth through the lab's tbf shaper, in what the shaper counts (frames without FCS); "
          "error against its configured rate, median of %d rounds; time until the running figure "
          "came within 0.5 %% (2 %%) and stayed:\n" % rounds)
    print("| shaper | strobe convoy, past the burst: median of the trains (mean) | strobe, whole trains (median) | frames lost (trains with tail loss) | strobe reached ±0.5 % (±2 %) "
          "| iperf3 UDP (payload → shaper bytes) | iperf3 UDP reached ±0.5 % (±2 %) | iperf3 TCP | iperf3 TCP reached ±2 % |")
    print("|---|---|---|---|---|---|---|---|---|")
    for sh in s["shapers"]:
        m = sh["median"]
        st, udp, tcp = m["strobe"], m["iperf3_udp"], m["iperf3_tcp"]
        print("| %g Mbit/s, %d × %d B trains%s | %s %% (%s %%) | %s %% | %d (%d) | %s (%s) after %s of convoy | %s %% → %s %% | %s (%s) | %s %% | %s |" % (
            sh["rate_bps"] / 1e6, sh["frames"], sh["frame_bytes"],
            (" (--shaper alone: strobe measured the buffer first)" if sh.get("probe")
             else " (strobe's defaults)" if sh.get("defaults") else ""),
            fmt(st["half_err_pct"], "{:+.3f}"), fmt(st["half_mean_err_pct"], "{:+.3f}"),
            fmt(st["whole_err_pct"]), st["loss"], st["tail_loss_trains"],
            secs(st["settle_05_s"]), secs(st["settle_2_s"]), secs(st["convoy_s"]),
            fmt(udp["raw_err_pct"]), fmt(udp["err_pct"]), secs(udp["settle_05_s"]), secs(udp["settle_2_s"]),
            fmt(tcp["err_pct"]), secs(tcp["settle_2_s"])))
    print("\nLatency of the same convoys (medians, µs): the heads, a constant-rate flow at the "
          "heads' rate, and every frame (the naive method: the frames behind each head queued):\n")
    print("| path | heads p50 | constant-rate p50 | every frame mean | every frame p99 |")
    print("|---|---|---|---|---|")
    for sh in s["shapers"]:
        st = sh["median"]["strobe"]
        print("| tbf %g Mbit/s, %d × %d B | %.1f | %.1f | %.0f | %.0f |" % (
            sh["rate_bps"] / 1e6, sh["frames"], sh["frame_bytes"], st["head_p50_us"],
            st["baseline_p50_us"], st["every_mean_us"], st["every_p99_us"]))
    for c in s["cable"]:
        m = c["median"]
        print("| cable, %d × 1000 B | %.2f | %.2f | %.1f | %.1f |" % (
            c["frames"], m["head_p50_us"], m["baseline_p50_us"], m["every_mean_us"], m["every_p99_us"]))


def figures(run_dir, out_dir):
    """Each round-1 HTML report's figures as OUT_DIR/<report>-<n>.svg (n from 1, in the
    report's order), with the SVG namespace a standalone file needs."""
    import glob
    import os
    import re
    os.makedirs(out_dir, exist_ok=True)
    for path in sorted(glob.glob(os.path.join(run_dir, "*-r1.*.html"))):
        with open(path) as f:
            svgs = re.findall(r"<svg.*?</svg>", f.read(), re.S)
        name = os.path.basename(path)[: -len(".html")].replace("-r1", "")
        for n, svg in enumerate(svgs, 1):
            svg = svg.replace("<svg", '<svg xmlns="http://www.w3.org/2000/svg"', 1)
            with open(os.path.join(out_dir, "%s-%d.svg" % (name, n)), "w") as f:
                f.write(svg + "\n")


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "summarize" and len(sys.argv) == 5:
        summarize(sys.argv[2], sys.argv[3], sys.argv[4])
    elif len(sys.argv) == 3 and sys.argv[1] == "markdown":
        markdown(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "figures":
        figures(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
