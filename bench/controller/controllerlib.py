#!/usr/bin/env python3
"""bench/run controller: a strobe controller (`strobe serve --agent …`) over strobe agents on
one host, in plain OTG JSON over HTTP (no snappi: its object building would be in the
times).

  controllerlib.py agents   --controller URL --out FILE
  controllerlib.py scale    --controller URL --agents "URL…" --ns NS --tag TAG --flows N
                            --pps P --packets K --polls Q --out RAW
  controllerlib.py datapath --controller URL --agents "URL…" --ns NS --tag TAG --pps P
                            --seconds S --round R --out RAW
  controllerlib.py skew     --controller URL --agents "URL…" --ns NS --tag TAG --senders N
                            --starts S --lead LEAD --out RAW
  controllerlib.py summarize RAW META SUMMARY.json
  controllerlib.py markdown SUMMARY.json

The topology (bench/sections/controller.sh): in namespace NS, port i is TAG p i (MAC
02:c7:00:00:00:i) on a bridge with static forwarding entries; TAG d0–TAG d1 a direct veth pair.
Agent i (the i-th URL) holds port i when driven through the controller.
"""
import argparse
import http.client
import json
import statistics
import subprocess
import sys
import time
import urllib.parse

DP_MACS = ("02:c7:00:00:01:00", "02:c7:00:00:01:01")


def port_mac(i):
    return f"02:c7:00:00:00:{i:02x}"


def drops(ns):
    """Frames the kernel dropped: each link of the namespace (rx and tx `dropped`, by link)
    and every CPU's input backlog (/proc/net/softnet_stat's second column: the whole host's,
    other work's too)."""
    links = {}
    try:
        out = subprocess.run(["ip", "-n", ns, "-s", "-j", "link", "show"], capture_output=True,
                             text=True, check=True).stdout
        for link in json.loads(out):
            st = link.get("stats64") or {}
            links[link["ifname"]] = ((st.get("rx") or {}).get("dropped", 0)
                                     + (st.get("tx") or {}).get("dropped", 0))
    except (OSError, subprocess.CalledProcessError, ValueError):
        pass
    backlog = 0
    try:
        with open("/proc/net/softnet_stat") as f:
            backlog = sum(int(line.split()[1], 16) for line in f)
    except (OSError, ValueError, IndexError):
        pass
    return {"links": links, "backlog": backlog}


def drops_since(ns, before):
    now = drops(ns)
    links = {k: v - before["links"].get(k, 0) for k, v in now["links"].items()
             if v - before["links"].get(k, 0)}
    return {"links": links, "links_total": sum(links.values()),
            "backlog": now["backlog"] - before["backlog"]}


class Client:
    """One keep-alive HTTP connection to a strobe server; each request's time in ms."""

    def __init__(self, url, timeout=60):
        u = urllib.parse.urlsplit(url)
        self.url, self.host, self.port, self.timeout = url, u.hostname, u.port, timeout
        self.conn = None

    def _request(self, method, path, body):
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                t = time.perf_counter()
                self.conn.request(method, path, body=data, headers=headers)
                resp = self.conn.getresponse()
                raw = resp.read()
                ms = (time.perf_counter() - t) * 1e3
                break
            except (http.client.HTTPException, ConnectionError, BrokenPipeError):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
        if resp.status >= 300:
            raise RuntimeError(f"{method} {self.url}{path}: HTTP {resp.status}: {raw[:2000]!r}")
        return ms, (json.loads(raw) if raw else None), len(raw)

    def post(self, path, body):
        return self._request("POST", path, body)

    def get(self, path):
        return self._request("GET", path, None)


def flow(name, tx, rx, src_mac, dst_mac, src_ip, dst_ip, sport, size, pps, packets):
    return {
        "name": name,
        "tx_rx": {"choice": "port", "port": {"tx_name": tx, "rx_names": [rx]}},
        "packet": [
            {"choice": "ethernet", "ethernet": {
                "src": {"choice": "value", "value": src_mac},
                "dst": {"choice": "value", "value": dst_mac}}},
            {"choice": "ipv4", "ipv4": {
                "src": {"choice": "value", "value": src_ip},
                "dst": {"choice": "value", "value": dst_ip}}},
            {"choice": "udp", "udp": {
                "src_port": {"choice": "value", "value": sport},
                "dst_port": {"choice": "value", "value": 2000}}},
        ],
        "size": {"choice": "fixed", "fixed": size},
        "rate": {"choice": "pps", "pps": str(pps)},
        "duration": {"choice": "fixed_packets", "fixed_packets": {"packets": packets}},
        "metrics": {"enable": True, "loss": True, "timestamps": True,
                    "latency": {"enable": True}},
    }


def ring_config(args, n, flows_per, pps, packets, through_controller, size=128):
    """n ports (port i on agent i through the controller, all on one agent otherwise), flows
    from port i to port i+1 (mod n), each addressed to its receiving port's MAC."""
    ports, flows = [], []
    for i in range(n):
        where = f"afpacket:{args.ns}/{args.tag}p{i}"
        ports.append({"name": f"p{i}", "location": f"a{i}/{where}" if through_controller else where})
    for i in range(n):
        j = (i + 1) % n
        for k in range(flows_per):
            flows.append(flow(f"f{i}_{k}", f"p{i}", f"p{j}", port_mac(i), port_mac(j),
                              f"198.18.{i}.1", f"198.18.{j}.1", 1000 + k, size, pps, packets))
    return {"ports": ports, "flows": flows}


def start_body(state="start"):
    return {"choice": "traffic", "traffic": {"choice": "flow_transmit",
                                             "flow_transmit": {"state": state}}}


ALL_FLOWS = {"choice": "flow", "flow": {"flow_names": []}}


def n(v):
    return int(v) if isinstance(v, str) else (v or 0)


def append(out, row):
    with open(out, "a") as f:
        f.write(json.dumps(row) + "\n")


def final(flows):
    """Every flow's counts final. A flow's `transmit` is `stopped` once it has sent its
    frames, while its receivers may still drain (one strobe; a flow sent and received on one
    agent under a controller): its `loss` is given only once its run is over. (A flow across
    agents is `stopped` only once its receivers' counts are final, and has `loss` then.)"""
    return bool(flows) and all(f["transmit"] == "stopped" and "loss" in f for f in flows)


def wait_stopped(client, deadline_s=120, pause=0.1):
    end = time.monotonic() + deadline_s
    while True:
        _, m, _ = client.post("/monitor/metrics", ALL_FLOWS)
        flows = m["flow_metrics"]
        if final(flows):
            return flows
        if time.monotonic() > end:
            states = {}
            for f in flows:
                states[f["transmit"]] = states.get(f["transmit"], 0) + 1
            raise RuntimeError(f"{client.url}: flows not stopped after {deadline_s} s: {states}")
        time.sleep(pause)


def exactness(flows, packets):
    def detail(f):
        # Where the missing frames were: the first frame's arrival after the sender's first
        # hand-over, and the last arrival after it (one host: one clock).
        x, ts = f.get("x_strobe") or {}, f.get("timestamps") or {}
        went = (x.get("tx_start") or {}).get("first_handover_ns")
        first, last = ts.get("first_timestamp_ns"), ts.get("last_timestamp_ns")
        return {"name": f["name"], "frames_tx": n(f.get("frames_tx")),
                "frames_rx": n(f.get("frames_rx")),
                "first_rx_after_first_tx_ms": (first - went) / 1e6 if first and went else None,
                "last_rx_after_first_tx_ms": (last - went) / 1e6 if last and went else None,
                "start_error_ns": (x.get("start") or {}).get("error_ns"),
                "agents": x.get("agents")}
    bad = [detail(f) for f in flows
           if n(f.get("frames_tx")) != packets or n(f.get("frames_rx")) != packets]
    by_port = {}
    for b in bad:
        port = b["name"].split("_")[0]
        by_port[port] = by_port.get(port, 0) + 1
    return {"flows": len(flows), "exact": len(flows) - len(bad), "mismatches": bad[:20],
            "inexact_by_sender": by_port}


# ------------------------------------------------------------------------------------------

def cmd_agents(args):
    c = Client(args.controller)
    _, reply, _ = c.get("/strobe/agents")
    with open(args.out, "w") as f:
        json.dump(reply, f, indent=1)
    rtts = [a.get("round_trip_ms") for a in reply["agents"]]
    down = [a["name"] for a in reply["agents"] if not a.get("reachable")]
    print(f"agents: {len(rtts)}, round trips {rtts} ms, unreachable {down}", file=sys.stderr)
    if down:
        raise SystemExit(f"agents unreachable: {down}")


def scale_run(args, mode, target, flows_per, packets, side=None):
    """One run of the ring's flows on `target` (the controller, or one agent alone): the
    set_config and start times, flow metrics of all flows timed while it runs and
    args.polls times after, and whether every flow's counts are exact. `side`: an agent
    asked the same while the controller runs (its own reply time)."""
    n_ports = len(args.agent_urls)
    cfg = ring_config(args, n_ports, flows_per, args.pps, packets, mode == "controller")
    cfg_ms, reply, _ = target.post("/config", cfg)
    warnings = (reply or {}).get("warnings", [])
    before = drops(args.ns)
    t0 = time.perf_counter()
    start_ms, _, _ = target.post("/control/state", start_body())
    running, side_running, sizes = [], [], []
    stopped_at = None
    while True:
        ms, m, size = target.post("/monitor/metrics", ALL_FLOWS)
        running.append(ms)
        sizes.append(size)
        flows = m["flow_metrics"]
        if side is not None:
            side_running.append(side.post("/monitor/metrics", ALL_FLOWS)[0])
        if final(flows):
            stopped_at = time.perf_counter()
            dropped = drops_since(args.ns, before)
            break
        if time.perf_counter() - t0 > 120:
            raise RuntimeError(f"{mode}: flows not stopped after 120 s")
        time.sleep(0.02)
    after, side_after = [], []
    for _ in range(args.polls):
        ms, m, size = target.post("/monitor/metrics", ALL_FLOWS)
        after.append(ms)
        sizes.append(size)
        if side is not None:
            side_after.append(side.post("/monitor/metrics", ALL_FLOWS)[0])
    last = m["flow_metrics"]
    check = exactness(last, packets)
    start_reply = target.get("/strobe/start")[1] if mode == "controller" else None
    row = {"kind": "scale", "mode": mode, "start_reply": start_reply, "ports": n_ports, "flows": len(cfg["flows"]),
           "pps": args.pps, "packets": packets, "set_config_ms": cfg_ms, "start_ms": start_ms,
           "start_to_final_s": stopped_at - t0, "metrics_running_ms": running,
           "metrics_after_ms": after, "reply_bytes": max(sizes), "check": check,
           "warnings": warnings, "kernel_drops": dropped}
    if side is not None:
        row["agent_metrics_running_ms"] = side_running
        row["agent_metrics_after_ms"] = side_after
    print(f"scale {mode}: {len(cfg['flows'])} flows, set_config {cfg_ms:.1f} ms, start "
          f"{start_ms:.1f} ms, metrics running median {statistics.median(running):.1f} ms "
          f"(n={len(running)}), after median {statistics.median(after):.1f} ms, final after "
          f"{stopped_at - t0:.2f} s; exact {check['exact']}/{check['flows']}", file=sys.stderr)
    if check["mismatches"]:
        print(f"  NOT EXACT: {check['mismatches'][:5]}; kernel drops {dropped}", file=sys.stderr)
    return row


def cmd_scale(args):
    controller = Client(args.controller)
    agent0 = Client(args.agent_urls[0])
    # One agent holding every port and flow alone (driven directly), then the controller
    # over every agent, one port each (agent 0's own reply timed beside the controller's).
    append(args.out, scale_run(args, "alone", agent0, args.flows, args.packets))
    append(args.out, scale_run(args, "controller", controller, args.flows, args.packets,
                               side=Client(args.agent_urls[0])))


def dp_config(args, mode, pps, packets):
    tx, rx = f"afpacket:{args.ns}/{args.tag}d0", f"afpacket:{args.ns}/{args.tag}d1"
    if mode == "controller":
        tx, rx = f"a0/{tx}", f"a0/{rx}"
    elif mode == "controller-split":
        tx, rx = f"a0/{tx}", f"a1/{rx}"
    return {"ports": [{"name": "tx", "location": tx}, {"name": "rx", "location": rx}],
            "flows": [flow("dp", "tx", "rx", DP_MACS[0], DP_MACS[1], "198.18.200.1",
                           "198.18.200.2", 1000, 64, pps, packets)]}


def cmd_datapath(args):
    """One flow, 64-byte frames at --pps for --seconds on the direct cable: agent 0 alone
    (driven directly), agent 0 under the controller (the flow sent and received there), and
    sent by agent 0, received by agent 1 (both under the controller); the order rotates
    round by round."""
    modes = ["alone", "controller", "controller-split"]
    k = (args.round - 1) % len(modes)
    order = modes[k:] + modes[:k]
    packets = args.pps * args.seconds
    for mode in order:
        target = Client(args.agent_urls[0] if mode == "alone" else args.controller)
        target.post("/config", dp_config(args, mode, args.pps, packets))
        before = drops(args.ns)
        t0 = time.perf_counter()
        target.post("/control/state", start_body())
        time.sleep(max(0.0, args.seconds - 0.5))
        f = wait_stopped(target, pause=0.1)[0]
        wall = time.perf_counter() - t0
        x = f.get("x_strobe") or {}
        ts = f.get("timestamps") or {}
        first_rx, last_rx = ts.get("first_timestamp_ns"), ts.get("last_timestamp_ns")
        first_tx = (x.get("tx_start") or {}).get("first_handover_ns")
        tx, rx = n(f.get("frames_tx")), n(f.get("frames_rx"))
        pct = ((x.get("latency") or {}).get("percentiles") or {})
        row = {"kind": "datapath", "mode": mode, "round": args.round, "pps_asked": args.pps,
               "frames_tx": tx, "frames_rx": rx,
               "frames_rx_unique": n(x.get("frames_rx_unique")),
               # Sent over the time from its first frame's hand-over to the last frame's
               # arrival (one clock: one host).
               "tx_pps": tx * 1e9 / (last_rx - first_tx) if first_tx and last_rx else None,
               "rx_pps": (rx - 1) * 1e9 / (last_rx - first_rx) if first_rx and last_rx and rx > 1 else None,
               "p50_ns": pct.get("p50_ns"), "p99_ns": pct.get("p99_ns"),
               "p99_9_ns": pct.get("p99_9_ns"),
               "start_error_ns": (x.get("start") or {}).get("error_ns"),
               "wall_s": wall, "kernel_drops": drops_since(args.ns, before)}
        append(args.out, row)
        print(f"datapath round {args.round} {mode}: tx {tx} rx {rx}, "
              f"{(row['tx_pps'] or 0):,.0f} pps, p50 {row['p50_ns']} ns, p99.9 "
              f"{row['p99_9_ns']} ns; kernel drops {row['kernel_drops']}", file=sys.stderr)


def cmd_skew(args):
    """N senders (agents 0..N-1, one port each, one flow each to the next), --starts
    synchronized starts; after each, GET /strobe/start: each sender's error and the skew."""
    controller = Client(args.controller)
    packets, pps = 200, 1000
    agent_urls = args.agent_urls[: args.senders]
    sub = argparse.Namespace(**{**vars(args), "agent_urls": agent_urls})
    controller.post("/config", ring_config(sub, args.senders, 1, pps, packets, True))
    for s in range(1, args.starts + 1):
        before = drops(args.ns)
        t0 = time.perf_counter()
        start_ms, started, _ = controller.post("/control/state", start_body())
        flows = wait_stopped(controller, pause=0.05)
        done_s = time.perf_counter() - t0
        _, st, _ = controller.get("/strobe/start")
        errors = [x.get("error_ns") for x in st.get("senders", [])]
        row = {"kind": "skew", "lead": args.lead, "senders": args.senders, "start": s,
               "skew_ns": st.get("skew_ns"), "errors_ns": errors, "start_ms": start_ms,
               "start_to_final_s": done_s, "check": exactness(flows, packets),
               "start_reply": st, "start_warnings": (started or {}).get("warnings"), "kernel_drops": drops_since(args.ns, before)}
        append(args.out, row)
        print(f"skew lead {args.lead} senders {args.senders} start {s}: skew "
              f"{st.get('skew_ns')} ns, errors {errors}, exact {row['check']['exact']}/"
              f"{row['check']['flows']}; kernel drops {row['kernel_drops']}", file=sys.stderr)


# ------------------------------------------------------------------------------------------

def dist(values):
    v = sorted(x for x in values if x is not None)
    if not v:
        return None
    rank = lambda q: v[min(len(v) - 1, max(0, int(round(q * len(v) + 0.5)) - 1))]
    return {"n": len(v), "median": statistics.median(v), "p90": rank(0.9), "max": v[-1],
            "min": v[0]}


def cmd_summarize(args):
    rows = [json.loads(line) for line in open(args.raw)]
    meta = json.load(open(args.meta))
    summary = {"meta": meta, "scale": {}, "datapath": {}, "skew": []}
    for r in (r for r in rows if r["kind"] == "scale"):
        s = {"flows": r["flows"], "ports": r["ports"], "set_config_ms": r["set_config_ms"],
             "start_ms": r["start_ms"], "start_to_final_s": r["start_to_final_s"],
             "reply_bytes": r["reply_bytes"],
             "metrics_running_ms": dist(r["metrics_running_ms"]),
             "metrics_after_ms": dist(r["metrics_after_ms"]), "check": r["check"],
             "kernel_drops": r.get("kernel_drops"),
             "start_skew_ns": (r.get("start_reply") or {}).get("skew_ns"),
             "start_errors_ns": [x.get("error_ns") for x in
                                 (r.get("start_reply") or {}).get("senders", [])]}
        if "agent_metrics_running_ms" in r:
            s["agent_metrics_running_ms"] = dist(r["agent_metrics_running_ms"])
            s["agent_metrics_after_ms"] = dist(r["agent_metrics_after_ms"])
        summary["scale"][r["mode"]] = s
    if {"alone", "controller"} <= summary["scale"].keys():
        a, c = summary["scale"]["alone"], summary["scale"]["controller"]
        summary["scale"]["metrics_after_ratio"] = (
            c["metrics_after_ms"]["median"] / a["metrics_after_ms"]["median"])
    dp = [r for r in rows if r["kind"] == "datapath"]
    for mode in ("alone", "controller", "controller-split"):
        mine = [r for r in dp if r["mode"] == mode]
        if not mine:
            continue
        summary["datapath"][mode] = {
            "rounds": len(mine),
            "tx_pps": dist(r["tx_pps"] for r in mine),
            "rx_pps": dist(r["rx_pps"] for r in mine),
            "p50_ns": dist(r["p50_ns"] for r in mine),
            "p99_9_ns": dist(r["p99_9_ns"] for r in mine),
            "lost": sum(r["frames_tx"] - r["frames_rx"] for r in mine),
            "kernel_link_drops": sum(r.get("kernel_drops", {}).get("links_total", 0) for r in mine),
            "frames_tx": [r["frames_tx"] for r in mine],
        }
    alone = {r["round"]: r for r in dp if r["mode"] == "alone"}
    for mode in ("controller", "controller-split"):
        ratios = {}
        for key in ("tx_pps", "p50_ns", "p99_9_ns"):
            rs = [r[key] / alone[r["round"]][key] for r in dp
                  if r["mode"] == mode and r["round"] in alone and r[key] and alone[r["round"]][key]]
            ratios[key] = {"median": statistics.median(rs) if rs else None, "each": rs}
        if mode in summary["datapath"]:
            summary["datapath"][mode]["ratio_to_alone"] = ratios
    sk = [r for r in rows if r["kind"] == "skew"]
    for lead in dict.fromkeys(r["lead"] for r in sk):
        for senders in dict.fromkeys(r["senders"] for r in sk if r["lead"] == lead):
            mine = [r for r in sk if r["lead"] == lead and r["senders"] == senders]
            errors = [e for r in mine for e in r["errors_ns"] if e is not None]
            summary["skew"].append({
                "lead": lead, "senders": senders, "starts": len(mine),
                "skew_ns": dist(r["skew_ns"] for r in mine),
                "error_ns": dist(errors),
                "abs_error_ns": dist(abs(e) for e in errors),
                "missing_errors": sum(1 for r in mine for e in r["errors_ns"] if e is None),
                "start_ms": dist(r["start_ms"] for r in mine),
                "start_to_final_s": dist(r["start_to_final_s"] for r in mine),
                "inexact_starts": sum(1 for r in mine if r["check"]["exact"] != r["check"]["flows"]),
                "late_starts": sum(1 for r in mine if any(e is not None and e > 1_000_000
                                                          for e in r["errors_ns"])),
                "frames_lost": sum(m["frames_tx"] - m["frames_rx"] for r in mine
                                   for m in r["check"]["mismatches"]),
                "kernel_link_drops": sum(r.get("kernel_drops", {}).get("links_total", 0)
                                         for r in mine),
                "inexact": [{"start": r["start"], "errors_ns": r["errors_ns"],
                             "start_ms": r["start_ms"], "kernel_drops": r.get("kernel_drops"),
                             "mismatches": r["check"]["mismatches"]}
                            for r in mine if r["check"]["mismatches"]],
            })
    with open(args.summary, "w") as f:
        json.dump(summary, f, indent=1)


def cmd_markdown(args):
    s = json.load(open(args.summary))
    meta = s["meta"]
    st = meta["settings"]
    out = []
    p = out.append
    f1 = lambda v: "–" if v is None else f"{v:.1f}"
    us = lambda v: "–" if v is None else f"{v / 1e3:,.1f}"
    p(f"strobe {st.get('strobe_built_from')}, {meta['nproc']} × {meta['cpu_model']}, kernel "
      f"{meta['kernel']}, {meta['date_utc']}.")
    p("")
    sc = s["scale"]
    if "controller" in sc:
        c = sc["controller"]
        p(f"**Scale**: {c['ports']} agents, one port each on a bridge, {c['flows']} flows "
          f"({c['flows'] // c['ports']} per agent, each from agent i's port to agent i+1's), "
          f"{st['pps']} pps and {st['packets']} frames each; flow metrics of every flow "
          f"(`POST /monitor/metrics`, `{{\"choice\":\"flow\"}}`) asked back to back (20 ms "
          f"apart) while the flows run, then {st['polls']} times once they are final. "
          "*alone*: one agent holding all the ports and flows, driven directly.")
        p("")
        p("| | set_config ms | start ms | start → final s | metrics while running: median / p90 / max ms (n) | after: median / p90 / max ms | reply KB | flows exact |")
        p("|---|---|---|---|---|---|---|---|")
        for mode, label in (("alone", "one agent alone"), ("controller", "controller")):
            if mode not in sc:
                continue
            r = sc[mode]
            mr, ma = r["metrics_running_ms"], r["metrics_after_ms"]
            p(f"| {label} | {r['set_config_ms']:.1f} | {r['start_ms']:.1f} | "
              f"{r['start_to_final_s']:.2f} | {mr['median']:.1f} / {mr['p90']:.1f} / "
              f"{mr['max']:.1f} ({mr['n']}) | {ma['median']:.1f} / {ma['p90']:.1f} / "
              f"{ma['max']:.1f} | {r['reply_bytes'] / 1024:.0f} | "
              f"{r['check']['exact']}/{r['check']['flows']} |")
            if mode == "controller" and "agent_metrics_after_ms" in r:
                ar, aa = r["agent_metrics_running_ms"], r["agent_metrics_after_ms"]
                p(f"| agent a0 under it (asked directly) | | | | {ar['median']:.1f} / "
                  f"{ar['p90']:.1f} / {ar['max']:.1f} ({ar['n']}) | {aa['median']:.1f} / "
                  f"{aa['p90']:.1f} / {aa['max']:.1f} | | |")
        p("")
        if c.get("start_skew_ns") is not None:
            errs = [e for e in c["start_errors_ns"] if e is not None]
            p(f"The controller's start of the {c['flows']} flows: skew {us(c['start_skew_ns'])} µs, "
              f"senders' errors {us(min(errs))} to {us(max(errs))} µs.")
            p("")
        for mode in ("alone", "controller"):
            if mode in sc and sc[mode]["check"]["mismatches"]:
                p(f"Inexact flows ({mode}): {sc[mode]['check']['mismatches'][:8]}")
                p("")
    dp = s["datapath"]
    if dp:
        p(f"**Data path**: one flow of 64-byte frames asked at {st['dp_pps']} pps for "
          f"{st['dp_seconds']} s on a direct veth pair (AF_PACKET), {st['rounds']} rounds, "
          "the order rotating. *alone*: agent a0 driven directly; *controller*: a0 through "
          "the controller (sent and received on a0); *split*: sent by a0, received by a1. "
          "pps: frames sent over the time from the first frame's hand-over to the last "
          "frame's arrival; latency: strobe's percentiles (`x_strobe`).")
        p("")
        p("| | pps (median) | p50 µs | p99.9 µs | lost | pps ratio to alone | p50 ratio | p99.9 ratio |")
        p("|---|---|---|---|---|---|---|---|")
        for mode, label in (("alone", "alone"), ("controller", "controller"),
                            ("controller-split", "controller, split")):
            if mode not in dp:
                continue
            r = dp[mode]
            ratio = r.get("ratio_to_alone", {})
            rt = lambda k: "–" if not ratio.get(k, {}).get("median") else f"{ratio[k]['median']:.3f}"
            med = lambda k: (r.get(k) or {}).get("median")
            pps = "–" if med("tx_pps") is None else f"{med('tx_pps'):,.0f}"
            p(f"| {label} | {pps} | {us(med('p50_ns'))} | {us(med('p99_9_ns'))} | "
              f"{r['lost']} | {rt('tx_pps')} | {rt('p50_ns')} | {rt('p99_9_ns')} |")
        p("")
    if s["skew"]:
        p(f"**Start skew**: N senders (one flow each, 1000 pps, 200 frames), {st['starts']} "
          "synchronized starts per case; after each, `GET /strobe/start`: the skew (largest "
          "sender error less the smallest) and each sender's error (its first frame against "
          "its deadline from the agreed time).")
        p("")
        p("| --start-lead | senders | starts | skew median µs | skew max µs | error median µs | largest error µs | start request median ms | starts > 1 ms late | starts with frames lost (frames) |")
        p("|---|---|---|---|---|---|---|---|---|---|")
        for r in s["skew"]:
            sk, er, ae, sm = r["skew_ns"], r["error_ns"], r["abs_error_ns"], r["start_ms"]
            p(f"| {r['lead']} | {r['senders']} | {r['starts']} | "
              f"{us(sk['median'] if sk else None)} | {us(sk['max'] if sk else None)} | "
              f"{us(er['median'] if er else None)} | {us(ae['max'] if ae else None)} | "
              f"{f1(sm['median'] if sm else None)} | {r['late_starts']} | "
              f"{r['inexact_starts']} ({r['frames_lost']}) |")
        p("")
    knobs = " ".join(f"CONTROLLER_{k.upper()}={v}" if " " not in str(v) else f"CONTROLLER_{k.upper()}='{v}'"
                     for k, v in (("agents", st["agents"]), ("flows", st["flows_per_agent"]),
                                  ("pps", st["pps"]), ("packets", st["packets"]),
                                  ("polls", st["polls"]), ("dp_pps", st["dp_pps"]),
                                  ("dp_seconds", st["dp_seconds"]), ("rounds", st["rounds"]),
                                  ("starts", st["starts"]), ("leads", st["leads"])))
    p(f"Reproduce: `sudo {knobs} bench/run controller`")
    print("\n".join(out))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)

    def common(sp):
        sp.add_argument("--controller", required=True)
        sp.add_argument("--agents", required=True, help="the agents' URLs, space-separated")
        sp.add_argument("--ns", required=True)
        sp.add_argument("--tag", required=True)
        sp.add_argument("--out", required=True)

    sp = sub.add_parser("agents")
    sp.add_argument("--controller", required=True)
    sp.add_argument("--out", required=True)
    sp = sub.add_parser("scale")
    common(sp)
    for k in ("--flows", "--pps", "--packets", "--polls"):
        sp.add_argument(k, type=int, required=True)
    sp = sub.add_parser("datapath")
    common(sp)
    for k in ("--pps", "--seconds", "--round"):
        sp.add_argument(k, type=int, required=True)
    sp = sub.add_parser("skew")
    common(sp)
    sp.add_argument("--senders", type=int, required=True)
    sp.add_argument("--starts", type=int, required=True)
    sp.add_argument("--lead", required=True)
    sp = sub.add_parser("summarize")
    sp.add_argument("raw")
    sp.add_argument("meta")
    sp.add_argument("summary")
    sp = sub.add_parser("markdown")
    sp.add_argument("summary")
    args = ap.parse_args()
    if hasattr(args, "agents") and isinstance(args.agents, str):
        args.agent_urls = args.agents.split()
    {"agents": cmd_agents, "scale": cmd_scale, "datapath": cmd_datapath, "skew": cmd_skew,
     "summarize": cmd_summarize, "markdown": cmd_markdown}[args.cmd](args)


if __name__ == "__main__":
    main()
