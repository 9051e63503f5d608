#!/usr/bin/env python3
"""bench/run serve: strobe driven through `strobe serve` (unmodified snappi) beside the same
run from the command line, on the bench lab.

  servelib.py round  --strobe BIN --lab PREFIX --url URL --round N --seconds S --out FILE
  servelib.py startup --strobe BIN --lab PREFIX --url URL --round N --out FILE
  servelib.py summarize RAW.jsonl SUMMARY.json
  servelib.py markdown SUMMARY.json

Runs with the Python of the OTG test virtualenv (snappi pinned in tests/otg/requirements.txt).
"""
import argparse
import io
import json
import statistics
import subprocess
import sys
import tempfile
import time

import os

import requests
import snappi
from scapy.all import UDP, PcapReader

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "otg"))
from otg_helpers import transmit as control  # noqa: E402  (the OTG tests' own helper)

SRC, DST = "198.18.0.1", "198.18.1.1"


def flows_config(api, flows, seconds=None, rate_pct=None, pps=None, capture=False):
    cfg = api.config()
    cfg.ports.port(name="tx", location="lab:tx").port(name="rx", location="lab:rx")
    for k in range(flows):
        f = cfg.flows.flow(name=f"f{k}")[-1]
        f.tx_rx.port.tx_name, f.tx_rx.port.rx_names = "tx", ["rx"]
        eth, ip, udp = f.packet.ethernet().ipv4().udp()
        ip.src.value, ip.dst.value = SRC, DST
        udp.src_port.value, udp.dst_port.value = 1000 + k, 2000
        f.size.fixed = 64
        if rate_pct is not None:
            f.rate.percentage = rate_pct
        else:
            f.rate.pps = pps
        if seconds:
            f.duration.fixed_seconds.seconds = seconds
        else:
            f.duration.fixed_packets.packets = 100
        f.metrics.enable = True
    if capture:
        c = cfg.captures.capture(name="c")[-1]
        c.port_names = ["rx"]
    return cfg


def cli_rate(args):
    """The command line's run: 64-byte frames asked at line rate, more than the path carries,
    so the sender goes as fast as it can, paced; frames sent over the run's elapsed time."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([args.strobe, "gen", "-q", "--lab", args.lab, "--port", "lab:tx",
                        "--rx", "lab:rx", "--udp", f"{SRC}:1000-{DST}:2000", "--size", "64",
                        "--rate", "100%", "--count", str(args.frames), "--json", out.name],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        report = json.load(open(out.name))
    port = report["ports"][0]
    return port["frames_tx"] * 1e9 / port["elapsed_ns"]


def server_rate(args, api):
    """The same run through the server: the rate over a window in the middle of the run
    (frames_tx read at its ends), with metrics polled every 50 ms meanwhile (their reply
    times are the server's cost to a watching script)."""
    cfg = flows_config(api, 1, pps=1, rate_pct=100)
    cfg.flows[0].duration.fixed_packets.packets = args.frames
    api.set_config(cfg)
    control(api, "start")
    req = api.metrics_request()
    req.flow.flow_names = ["f0"]
    replies_ms, raw_ms, prom_ms, window = [], [], [], []
    body = json.dumps({"choice": "flow", "flow": {"flow_names": ["f0"]}})
    session = requests.Session()
    started = time.perf_counter()
    while True:
        # The server's own reply time (plain HTTP), then snappi's (which adds building and
        # checking its objects in Python).
        t = time.perf_counter()
        session.post(args.url + "/monitor/metrics", data=body,
                     headers={"Content-Type": "application/json"}).raise_for_status()
        raw_ms.append((time.perf_counter() - t) * 1e3)
        # A Prometheus scrape of GET /metrics too, as a scraper would (every poll here).
        t = time.perf_counter()
        session.get(args.url + "/metrics").raise_for_status()
        prom_ms.append((time.perf_counter() - t) * 1e3)
        t = time.perf_counter()
        m = api.get_metrics(req).flow_metrics[0]
        done = time.perf_counter()
        replies_ms.append((done - t) * 1e3)
        # The window: from 1 s in until 1 s before the expected end, by the watcher's copy.
        if 1.0 <= t - started and (not window or done - window[0][0] < args.window):
            window.append(((t + done) / 2, m.frames_tx))
        if m.transmit == "stopped":
            break
        time.sleep(0.05)
    control(api, "stop")
    (t0, f0), (t1, f1) = window[0], window[-1]
    return (f1 - f0) / (t1 - t0), replies_ms, raw_ms, prom_ms


def cmd_round(args):
    api = snappi.api(location=args.url, verify=False)
    # Alternate which goes first, round by round.
    if args.round % 2:
        cli = cli_rate(args)
        served, replies, raw, prom = server_rate(args, api)
    else:
        served, replies, raw, prom = server_rate(args, api)
        cli = cli_rate(args)
    row = {"kind": "rate", "round": args.round, "cli_pps": cli, "serve_pps": served,
           "metrics_reply_ms": replies, "metrics_http_ms": raw, "prometheus_ms": prom}
    with open(args.out, "a") as f:
        f.write(json.dumps(row) + "\n")
    print(f"round {args.round}: cli {cli:,.0f} pps, serve {served:,.0f} pps "
          f"({served / cli:.3f}x); metrics replies median "
          f"{statistics.median(replies):.2f} ms, max {max(replies):.2f} ms", file=sys.stderr)


def first_flow_frame_ns(pcap_bytes):
    for p in PcapReader(io.BytesIO(pcap_bytes)):
        if p.haslayer(UDP) and p[UDP].dport == 2000:
            return int(p.time * 1_000_000_000)
    return None


def cmd_startup(args):
    """set_config of 2 ports and 10 flows, then start: time from the set_config request (and
    from the start request) to the first flow frame the rx port captured (CLOCK_REALTIME on
    both sides)."""
    api = snappi.api(location=args.url, verify=False)
    cfg = flows_config(api, 10, pps=10_000, capture=True)
    cs = api.control_state()
    cs.choice = cs.PORT
    cs.port.choice = cs.port.CAPTURE
    cs.port.capture.port_names = ["rx"]
    t_config = time.time_ns()
    api.set_config(cfg)
    cs.port.capture.state = cs.port.capture.START
    api.set_control_state(cs)
    t_start = time.time_ns()
    control(api, "start")
    time.sleep(0.3)
    control(api, "stop")
    cs.port.capture.state = cs.port.capture.STOP
    api.set_control_state(cs)
    req = api.capture_request()
    req.port_name = "rx"
    first = first_flow_frame_ns(api.get_capture(req).read())
    row = {"kind": "startup", "round": args.round,
           "config_to_first_frame_ms": (first - t_config) / 1e6 if first else None,
           "start_to_first_frame_ms": (first - t_start) / 1e6 if first else None}
    with open(args.out, "a") as f:
        f.write(json.dumps(row) + "\n")
    print(f"startup round {args.round}: {row}", file=sys.stderr)


def cmd_summarize(args):
    rows = [json.loads(line) for line in open(args.raw)]
    rates = [r for r in rows if r["kind"] == "rate"]
    starts = [r for r in rows if r["kind"] == "startup"]
    replies = sorted(ms for r in rates for ms in r["metrics_reply_ms"])
    raw = sorted(ms for r in rates for ms in r.get("metrics_http_ms", []))
    prom = sorted(ms for r in rates for ms in r.get("prometheus_ms", []))
    ratios = [r["serve_pps"] / r["cli_pps"] for r in rates]
    cfg_first = [r["config_to_first_frame_ms"] for r in starts if r["config_to_first_frame_ms"]]
    start_first = [r["start_to_first_frame_ms"] for r in starts if r["start_to_first_frame_ms"]]
    summary = {
        "rounds": len(rates),
        "cli_pps_median": statistics.median(r["cli_pps"] for r in rates),
        "serve_pps_median": statistics.median(r["serve_pps"] for r in rates),
        "ratio_median": statistics.median(ratios),
        "ratios": ratios,
        "metrics_reply_ms": {
            "n": len(replies),
            "median": statistics.median(replies),
            "p99": replies[min(len(replies) - 1, int(0.99 * len(replies)))],
            "max": replies[-1],
        },
        "metrics_http_ms": {
            "n": len(raw),
            "median": statistics.median(raw) if raw else None,
            "p99": raw[min(len(raw) - 1, int(0.99 * len(raw)))] if raw else None,
            "max": raw[-1] if raw else None,
        },
        "prometheus_ms": {
            "n": len(prom),
            "median": statistics.median(prom) if prom else None,
            "p99": prom[min(len(prom) - 1, int(0.99 * len(prom)))] if prom else None,
            "max": prom[-1] if prom else None,
        },
        "config_to_first_frame_ms_median": statistics.median(cfg_first) if cfg_first else None,
        "start_to_first_frame_ms_median": statistics.median(start_first) if start_first else None,
        "startup_rounds": len(starts),
    }
    json.dump(summary, open(args.summary, "w"), indent=2)


def cmd_markdown(args):
    s = json.load(open(args.summary))
    m = s["metrics_reply_ms"]
    print("| measure | value |")
    print("| --- | --- |")
    print(f"| 64 B at line rate asked (more than the path carries), CLI `strobe gen` (median of {s['rounds']}) | {s['cli_pps_median']:,.0f} pps |")
    print(f"| the same through `strobe serve` | {s['serve_pps_median']:,.0f} pps |")
    print(f"| serve / CLI (median of per-round ratios) | {s['ratio_median']:.3f}× "
          f"({', '.join(f'{r:.3f}' for r in s['ratios'])}) |")
    h = s["metrics_http_ms"]
    print(f"| metrics reply while that run sends, plain HTTP (n={h['n']}) | median "
          f"{h['median']:.2f} ms, p99 {h['p99']:.2f} ms, max {h['max']:.2f} ms |")
    print(f"| the same through snappi's get_metrics (n={m['n']}) | median {m['median']:.2f} ms, "
          f"p99 {m['p99']:.2f} ms, max {m['max']:.2f} ms |")
    p = s.get("prometheus_ms") or {}
    if p.get("n"):
        print(f"| a Prometheus scrape (`GET /metrics`) in the same polls (n={p['n']}) | median "
              f"{p['median']:.2f} ms, p99 {p['p99']:.2f} ms, max {p['max']:.2f} ms |")
    print(f"| set_config (2 ports, 10 flows) to first frame (median of {s['startup_rounds']}) | "
          f"{s['config_to_first_frame_ms_median']:.1f} ms |")
    print(f"| start request to first frame | {s['start_to_first_frame_ms_median']:.1f} ms |")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("round", "startup"):
        p = sub.add_parser(name)
        p.add_argument("--strobe", required=True)
        p.add_argument("--lab", required=True)
        p.add_argument("--url", required=True)
        p.add_argument("--round", type=int, required=True)
        p.add_argument("--frames", type=int, default=3_000_000)
        p.add_argument("--window", type=float, default=2.0)
        p.add_argument("--out", required=True)
    p = sub.add_parser("summarize")
    p.add_argument("raw")
    p.add_argument("summary")
    p = sub.add_parser("markdown")
    p.add_argument("summary")
    args = ap.parse_args()
    {"round": cmd_round, "startup": cmd_startup, "summarize": cmd_summarize,
     "markdown": cmd_markdown}[args.cmd](args)


if __name__ == "__main__":
    main()
