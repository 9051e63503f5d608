#!/usr/bin/env python3
"""bench/run dashboard: what the web dashboard costs the data path. The same line-rate run
(64-byte frames, as fast as the lab's path takes them, every frame's latency measured)
through `strobe serve`, alternately with nobody watching and with the dashboard open in
headless chromium on this same machine, pinned off strobe's transmit core (polling metrics
and latency every second, redrawing its three charts). The rate is frames_tx over a window in the middle of the run, read with
two plain metrics requests.

  dashboardlib.py round --url URL [--lab-rx PORT] --round N --seconds S --out RAW.jsonl
  dashboardlib.py summarize RAW.jsonl SUMMARY.json META_JSON
  dashboardlib.py markdown SUMMARY.json

Runs with the Python of the OTG test virtualenv (selenium pinned in tests/otg/requirements.txt).
"""
import argparse
import json
import os
import statistics
import sys
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


def transmit(session, url, state):
    session.post(url + "/control/state", json={
        "choice": "traffic", "traffic": {"choice": "flow_transmit", "flow_transmit": {"state": state}}},
        timeout=30).raise_for_status()


def one_run(url, lab_rx, seconds):
    session = requests.Session()
    session.post(url + "/config", json=config(lab_rx, seconds), timeout=30).raise_for_status()
    transmit(session, url, "start")
    started = time.perf_counter()
    time.sleep(WINDOW_START_S)
    t0, f0, _ = frames_tx(session, url)
    time.sleep(max(0.5, seconds - 2 * WINDOW_START_S))
    t1, f1, _ = frames_tx(session, url)
    while frames_tx(session, url)[2] != "stopped" and time.perf_counter() - started < seconds + 30:
        time.sleep(0.2)
    transmit(session, url, "stop")
    return (f1 - f0) / (t1 - t0)


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


def cmd_round(a):
    # This process, and so chromedriver and chromium, on the cores given (default 0): off
    # the core strobe transmits from, as a browser on another machine would be entirely.
    os.sched_setaffinity(0, {int(c) for c in a.browser_cpus.split(",")})
    rates = {}
    order = ["alone", "dashboard"] if a.round % 2 else ["dashboard", "alone"]
    for mode in order:
        driver = browser(a.url) if mode == "dashboard" else None
        try:
            rates[mode] = one_run(a.url, a.lab_rx, a.seconds)
            if driver is not None:
                updates = int(driver.find_element("id", "chart-rate").get_attribute("data-updates") or 0)
                latency_points = int(driver.find_element("id", "chart-latency").get_attribute("data-points") or 0)
        finally:
            if driver is not None:
                driver.quit()
        time.sleep(2)  # let a browser's shutdown pass before the next run
    row = {"round": a.round, "alone_pps": rates["alone"], "dashboard_pps": rates["dashboard"],
           "chart_updates": updates, "latency_points": latency_points}
    with open(a.out, "a") as f:
        f.write(json.dumps(row) + "\n")
    print(f"round {a.round}: alone {rates['alone']:,.0f} pps, dashboard open {rates['dashboard']:,.0f} pps "
          f"({rates['dashboard'] / rates['alone']:.3f}x; the page redrew {updates} times)", file=sys.stderr)


def cmd_summarize(a):
    rows = [json.loads(line) for line in open(a.raw)]
    ratios = [r["dashboard_pps"] / r["alone_pps"] for r in rows]
    summary = {"meta": json.loads(a.meta), "rounds": len(rows), "rows": rows,
               "alone_pps_median": statistics.median(r["alone_pps"] for r in rows),
               "dashboard_pps_median": statistics.median(r["dashboard_pps"] for r in rows),
               "ratio_median": statistics.median(ratios), "ratios": ratios}
    with open(a.summary, "w") as f:
        json.dump(summary, f, indent=2)


def cmd_markdown(a):
    s = json.load(open(a.summary))
    print(f"{s['rounds']} alternating rounds, strobe {s['meta'].get('strobe_git')}:\n")
    print("| round | nobody watching | dashboard open | ratio | page redraws during the run |")
    print("|---|---|---|---|---|")
    for r in s["rows"]:
        print(f"| {r['round']} | {r['alone_pps'] / 1e6:.3f} Mpps | {r['dashboard_pps'] / 1e6:.3f} Mpps "
              f"| {r['dashboard_pps'] / r['alone_pps']:.3f} | {r['chart_updates']} |")
    print(f"| **median** | **{s['alone_pps_median'] / 1e6:.3f} Mpps** | **{s['dashboard_pps_median'] / 1e6:.3f} Mpps** "
          f"| **{s['ratio_median']:.3f}** | |")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("round")
    r.add_argument("--url", required=True)
    r.add_argument("--lab-rx", default="lab:rx")
    r.add_argument("--browser-cpus", default="0")
    r.add_argument("--round", type=int, required=True)
    r.add_argument("--seconds", type=int, required=True)
    r.add_argument("--out", required=True)
    s = sub.add_parser("summarize")
    s.add_argument("raw")
    s.add_argument("summary")
    s.add_argument("meta")
    m = sub.add_parser("markdown")
    m.add_argument("summary")
    a = p.parse_args()
    {"round": cmd_round, "summarize": cmd_summarize, "markdown": cmd_markdown}[a.cmd](a)


if __name__ == "__main__":
    main()
