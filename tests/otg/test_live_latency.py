"""GET /strobe/latency: each flow's latency per 500 ms interval while a run goes (for live
charts), its intervals adding up to every frame measured once the run is over."""
import time

import requests

from otg_helpers import add_flow, base_config, flow_metrics, transmit, wait_stopped


def test_latency_per_interval_is_live_and_adds_up_to_every_frame(api, lab, server):
    cfg = base_config(api, lab)
    f = add_flow(cfg, "live", packets=40000, pps=10000, size=128)
    f.packet.ethernet().ipv4().udp()
    f.metrics.latency.enable = True
    f.metrics.latency.mode = f.metrics.latency.STORE_FORWARD
    api.set_config(cfg)
    started_ns = time.time_ns()
    transmit(api, "start", ["live"])
    seen_live = []
    cursor = started_ns - 10**9
    deadline = time.time() + 15
    while time.time() < deadline:
        reply = requests.get(f"{server.url}/strobe/latency", params={"since": cursor}, timeout=10)
        assert reply.status_code == 200, reply.text
        body = reply.json()
        assert body["interval_ns"] == 500_000_000
        fresh = [i for i in body["intervals"] if i["flow"] == "live"]
        if fresh:
            cursor = max(i["start_ns"] for i in fresh)
            if flow_metrics(api, ["live"])["live"].transmit == "started":
                seen_live.extend(fresh)
        # The first interval is a partial one (intervals start on multiples of 500 ms, the
        # run anywhere in one): two whole ones wanted.
        if len([i for i in seen_live if i["index"] > 0]) >= 2:
            break
        time.sleep(0.25)
    # Intervals came while the flow was still sending, each a 500 ms slice at 10 kpps,
    # on whole multiples of 500 ms (so that overlapping runs share their boundaries).
    whole = [i for i in seen_live if i["index"] > 0]
    assert len(whole) >= 2, seen_live
    for i in seen_live:
        assert i["duration_ns"] == 500_000_000 and i["start_ns"] % 500_000_000 == 0, i
    for i in whole:
        assert 4000 <= i["frames"] <= 6000, i
        assert 0 < i["min_ns"] <= i["p50_ns"] <= i["p90_ns"] <= i["p99_ns"] <= i["p99_9_ns"] <= i["max_ns"]
    wait_stopped(api, ["live"])
    transmit(api, "stop")
    final = flow_metrics(api, ["live"])["live"]
    everything = requests.get(f"{server.url}/strobe/latency",
                              params={"since": started_ns - 10**9}, timeout=10).json()["intervals"]
    ours = [i for i in everything if i["flow"] == "live"]
    assert sum(i["frames"] for i in ours) == final.frames_rx == 40000, (len(ours), final)
    starts = [i["start_ns"] for i in ours]
    assert starts == sorted(starts) and len(set(starts)) == len(starts)
    bad = requests.get(f"{server.url}/strobe/latency", params={"since": "soon"}, timeout=10)
    assert bad.status_code == 400 and "since" in bad.text
