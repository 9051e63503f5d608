#!/usr/bin/env python3
"""bench/run dashboard: what the web dashboard costs the data path. The same line-rate run
(64-byte frames, as fast as the lab's path takes them, every frame's latency measured)
through `strobe serve`, alternately with nobody watching and with the dashboard open in
headless chromium on this same machine, pinned off strobe's transmit core (polling metrics
and latency every second, redrawing its three charts). The rate is frames_tx over a window in
the middle of the run, read with two plain metrics requests.

Over the same window, the CPU time of each of the server's threads (schedstat: ns on a core) is
read, so that what the page costs is split where it lands: the data path's own threads (tx-*,
rx-*: CPU ns per frame, which only interference inside strobe would raise; time they lose to
other programs is not in it), the server's other threads (answering the page's requests, as a
share of one core), and everything else on the machine (the browser). On this 2-core VM the
rates themselves swing ±25 % between identical runs.

Each round runs three ways, in rotating order: nobody watching; the page's requests replayed
(what the dashboard asks the server for, at its cadence, from a thread of this process: the
server's side of a dashboard viewed from another machine); the dashboard open in chromium here.

  dashboardlib.py round --url URL --pid SERVER_PID [--lab-rx PORT] --round N --seconds S --out RAW.jsonl
  dashboardlib.py poll-cost --url URL --pid SERVER_PID [--lab-rx PORT] --seconds S --out POLLS.json
  dashboardlib.py summarize RAW.jsonl SUMMARY.json META_JSON [POLLS.json]
  dashboardlib.py markdown SUMMARY.json

Runs with the Python of the OTG test virtualenv (selenium pinned in tests/otg/requirements.txt).
"""
import argparse
import json
import os
import statistics
import sys
import threading
import time

import requests
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

WINDOW_START_S = 1.5


def config(lab_rx, seconds):
    return {"ports": [{"name": "tx", "location": "lab:tx"}, {"name": "rx", "location": lab_rx}],
            "flows": [{"name": "f0",
                       "tx_rx": {"choice": "port", "port": {"tx_name": "tx", "rx_names": ["rx"]}},
                       "size": {"choice": "fixed", "fixed": 64},
                       "rate": {"choice": "percentage", "percentage": 100},
                       "duration": {"choice": "fixed_seconds", "fixed_seconds": {"seconds": seconds}},
                       "metrics": {"enable": True, "latency": {"enable": True, "mode": "store_forward"}},
                       "packet": [{"choice": "ethernet"}, {"choice": "ipv4"}, {"choice": "udp"}]}]}


def frames_tx(session, url):
    body = {"choice": "flow", "flow": {"flow_names": ["f0"]}}
    m = session.post(url + "/monitor/metrics", json=body, timeout=10)
    m.raise_for_status()
    f = m.json()["flow_metrics"][0]
    return time.perf_counter(), int(f["frames_tx"]), f["transmit"]


def thread_cpu_ns(pid):
    """{thread name: ns on a core so far} of process `pid` (summed over threads of a name)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                ns = int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue  # a thread that ended meanwhile
        out[name] = out.get(name, 0) + ns
    return out


def machine_busy_ns():
    """ns all cores spent busy so far (/proc/stat: everything but idle and iowait)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    ticks = sum(fields[:8]) - fields[3] - fields[4]
    return ticks * 1e9 / os.sysconf("SC_CLK_TCK")


def split_cpu(before, after):
    """CPU ns in the window: the data path's threads (tx-*, rx-*) and the server's others."""
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    tx = sum(v for k, v in delta.items() if k.startswith("tx-"))
    rx = sum(v for k, v in delta.items() if k.startswith("rx-"))
    return tx, rx, sum(delta.values()) - tx - rx


def transmit(session, url, state):
    session.post(url + "/control/state", json={
        "choice": "traffic", "traffic": {"choice": "flow_transmit", "flow_transmit": {"state": state}}},
        timeout=30).raise_for_status()


def one_run(url, pid, lab_rx, seconds):
    """The run's rate in the window and where the CPU went meanwhile."""
    session = requests.Session()
    session.post(url + "/config", json=config(lab_rx, seconds), timeout=30).raise_for_status()
    transmit(session, url, "start")
    time.sleep(WINDOW_START_S)
    t0, f0, _ = frames_tx(session, url)
    cpu0, busy0 = thread_cpu_ns(pid), machine_busy_ns()
    time.sleep(max(0.5, seconds - WINDOW_START_S))
    t1, f1, _ = frames_tx(session, url)
    cpu1, busy1 = thread_cpu_ns(pid), machine_busy_ns()
    # At 100 % of the line rate the flow's planned frames take far longer than `seconds` on
    # this path: the window is over, so the run is stopped here.
    transmit(session, url, "stop")
    tx, rx, server = split_cpu(cpu0, cpu1)
    window_ns = (t1 - t0) * 1e9
    frames = f1 - f0
    return {"pps": frames / (t1 - t0), "tx_ns_per_frame": tx / frames,
            "rx_ns_per_frame": rx / frames, "server_core_pct": 100 * server / window_ns,
            "others_core_pct": 100 * (busy1 - busy0 - tx - rx - server) / window_ns,
            "window": [t0, t1]}


def browser(url):
    """Chromium on the dashboard, once the page is polling and drawing (its start-up is not
    part of the measurement)."""
    options = Options()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.get(url + "/")
    deadline = time.time() + 30
    while int(driver.find_element("id", "chart-rate").get_attribute("data-updates") or 0) < 3:
        if time.time() > deadline:
            sys.exit("the dashboard did not start drawing")
        time.sleep(0.2)
    return driver


POLL_S = 1.0  # web/app.js POLL_MS


class Replay:
    """The dashboard's polling without a browser: both metrics requests and the latency
    intervals since a few intervals back, every POLL_S, until stopped."""

    def __init__(self, url, period_s=POLL_S):
        self.url, self.period_s, self.stop, self.polls = url, period_s, threading.Event(), 0
        self.times = []  # when each poll ended (perf_counter)
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        session, newest = requests.Session(), 0
        while not self.stop.wait(self.period_s):
            session.post(self.url + "/monitor/metrics",
                         json={"choice": "flow", "flow": {"flow_names": []}}, timeout=10)
            session.post(self.url + "/monitor/metrics",
                         json={"choice": "port", "port": {"port_names": []}}, timeout=10)
            since = max(0, newest - 4 * 500_000_000) if newest else 0
            reply = session.get(self.url + f"/strobe/latency?since={since}", timeout=10).json()
            newest = max([newest] + [i["start_ns"] for i in reply["intervals"]])
            self.polls += 1
            self.times.append(time.perf_counter())

    def quit(self):
        self.stop.set()
        self.thread.join()


MODES = ["alone", "replay", "dashboard"]


def cmd_round(a):
    # This process, and so chromedriver and chromium, on the cores given (default 0): off
    # the core strobe transmits from, as a browser on another machine would be entirely.
    os.sched_setaffinity(0, {int(c) for c in a.browser_cpus.split(",")})
    runs = {}
    order = MODES[a.round % 3:] + MODES[:a.round % 3]
    for mode in order:
        driver = browser(a.url) if mode == "dashboard" else None
        replay = Replay(a.url) if mode == "replay" else None
        try:
            runs[mode] = one_run(a.url, a.pid, a.lab_rx, a.seconds)
            if driver is not None:
                updates = int(driver.find_element("id", "chart-rate").get_attribute("data-updates") or 0)
                latency_points = int(driver.find_element("id", "chart-latency").get_attribute("data-points") or 0)
        finally:
            if driver is not None:
                driver.quit()
            if replay is not None:
                replay.quit()
                polls = replay.polls
        time.sleep(2)  # let a browser's shutdown pass before the next run
    row = {"round": a.round, **runs, "chart_updates": updates, "latency_points": latency_points,
           "replayed_polls": polls}
    with open(a.out, "a") as f:
        f.write(json.dumps(row) + "\n")
    print(f"round {a.round}: " + "; ".join(
        f"{mode} {runs[mode]['pps']:,.0f} pps, tx {runs[mode]['tx_ns_per_frame']:.0f} ns/frame, "
        f"server {runs[mode]['server_core_pct']:.2f} % of a core" for mode in MODES)
        + f" (the page redrew {updates} times, {polls} polls replayed)", file=sys.stderr)


FIELDS = ("pps", "tx_ns_per_frame", "rx_ns_per_frame", "server_core_pct", "others_core_pct")


POLL_COST_PAIRS = 3
POLL_COST_PERIOD_S = 0.02


def cmd_poll_cost(a):
    """The server's CPU per dashboard poll, resolved by polling 50 times as often as the page
    does: pairs of runs without and with the fast replay, the difference in the server's
    other threads' CPU time divided by the polls made."""
    os.sched_setaffinity(0, {int(c) for c in a.browser_cpus.split(",")})
    pairs = []
    for _ in range(POLL_COST_PAIRS):
        alone = one_run(a.url, a.pid, a.lab_rx, a.seconds)
        replay = Replay(a.url, POLL_COST_PERIOD_S)
        try:
            fast = one_run(a.url, a.pid, a.lab_rx, a.seconds)
        finally:
            replay.quit()
        t0, t1 = fast["window"]
        polls_in_window = sum(1 for t in replay.times if t0 <= t <= t1)
        extra_ns = (fast["server_core_pct"] - alone["server_core_pct"]) / 100 * (t1 - t0) * 1e9
        pairs.append({"alone": alone, "fast_replay": fast, "polls": polls_in_window,
                      "server_ns_per_poll": extra_ns / max(1, polls_in_window)})
        print(f"poll cost: server {alone['server_core_pct']:.2f} % of a core alone, "
              f"{fast['server_core_pct']:.2f} % with {polls_in_window} polls in the window "
              f"(≈ {pairs[-1]['server_ns_per_poll'] / 1e3:.0f} µs of CPU per poll)", file=sys.stderr)
        time.sleep(2)
    with open(a.out, "w") as f:
        json.dump({"period_s": POLL_COST_PERIOD_S, "pairs": pairs,
                   "server_ns_per_poll_median":
                       statistics.median(p["server_ns_per_poll"] for p in pairs)}, f, indent=2)


def cmd_summarize(a):
    rows = [json.loads(line) for line in open(a.raw)]
    summary = {"meta": json.loads(a.meta), "rounds": len(rows), "rows": rows, "median": {}}
    if a.polls:
        summary["poll_cost"] = json.load(open(a.polls))
    for mode in MODES:
        summary["median"][mode] = {k: statistics.median(r[mode][k] for r in rows) for k in FIELDS}
    # Per-round ratios (watched / alone): each round's runs ran back to back, so slow drifts
    # cancel.
    for mode in ("replay", "dashboard"):
        summary["median"][mode + "_ratio"] = {
            k: statistics.median(r[mode][k] / r["alone"][k] for r in rows)
            for k in ("pps", "tx_ns_per_frame", "rx_ns_per_frame")}
    with open(a.summary, "w") as f:
        json.dump(summary, f, indent=2)


def cells(run):
    return (f"{run['pps'] / 1e6:.3f} | {run['tx_ns_per_frame']:.0f} | {run['rx_ns_per_frame']:.0f} "
            f"| {run['server_core_pct']:.2f} | {run['others_core_pct']:.1f}")


def cmd_markdown(a):
    s = json.load(open(a.summary))
    print(f"{s['rounds']} alternating rounds, strobe {s['meta'].get('strobe_git')}; per run: Mpps, "
          "the data path's CPU ns per frame (tx, rx), the server's other threads and everything "
          "else on the machine in % of one core:\n")
    print("| round | watched by | Mpps | tx ns/frame | rx ns/frame | server % | others % | polls |")
    print("|---|---|---|---|---|---|---|---|")
    for r in s["rows"]:
        print(f"| {r['round']} | nobody | {cells(r['alone'])} | |")
        print(f"| | replayed requests | {cells(r['replay'])} | {r['replayed_polls']} |")
        print(f"| | chromium here | {cells(r['dashboard'])} | {r['chart_updates']} |")
    m = s["median"]
    print(f"| **median** | nobody | {cells(m['alone'])} | |")
    print(f"| | replayed requests | {cells(m['replay'])} | |")
    print(f"| | chromium here | {cells(m['dashboard'])} | |")
    for mode, label in (("replay", "replayed / nobody"), ("dashboard", "chromium / nobody")):
        ratio = m[mode + "_ratio"]
        print(f"| **median ratio** | {label} | {ratio['pps']:.3f} | {ratio['tx_ns_per_frame']:.3f} "
              f"| {ratio['rx_ns_per_frame']:.3f} | | | |")
    if "poll_cost" in s:
        p = s["poll_cost"]
        per_poll = p["server_ns_per_poll_median"]
        print(f"\nThe server's CPU per dashboard poll (both metrics requests and the latency "
              f"intervals), polled every {p['period_s'] * 1e3:.0f} ms in {len(p['pairs'])} pairs of runs: "
              f"median {per_poll / 1e3:.0f} µs, i.e. {per_poll / 1e9 / POLL_S * 100:.3f} % of one core "
              f"at the page's one poll per second "
              f"(pairs: {', '.join('%.0f' % (q['server_ns_per_poll'] / 1e3) for q in p['pairs'])} µs).")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("round")
    r.add_argument("--url", required=True)
    r.add_argument("--pid", type=int, required=True, help="strobe serve's process")
    r.add_argument("--lab-rx", default="lab:rx")
    r.add_argument("--browser-cpus", default="0")
    r.add_argument("--round", type=int, required=True)
    r.add_argument("--seconds", type=int, required=True)
    r.add_argument("--out", required=True)
    s = sub.add_parser("summarize")
    s.add_argument("raw")
    s.add_argument("summary")
    s.add_argument("meta")
    s.add_argument("polls", nargs="?")
    c = sub.add_parser("poll-cost")
    c.add_argument("--url", required=True)
    c.add_argument("--pid", type=int, required=True)
    c.add_argument("--lab-rx", default="lab:rx")
    c.add_argument("--browser-cpus", default="0")
    c.add_argument("--seconds", type=int, required=True)
    c.add_argument("--out", required=True)
    m = sub.add_parser("markdown")
    m.add_argument("summary")
    a = p.parse_args()
    {"round": cmd_round, "poll-cost": cmd_poll_cost, "summarize": cmd_summarize,
     "markdown": cmd_markdown}[a.cmd](a)


if __name__ == "__main__":
    main()
