"""`GET /metrics` on strobe serve: Prometheus' text exposition, read with the official
Python client's parser while a run goes and after it, its counters checked against snappi's
own metrics replies."""
import subprocess
import time

import requests
from prometheus_client.parser import text_string_to_metric_families

from otg_helpers import add_flow, base_config, flow_metrics, port_metrics, transmit, wait_stopped


def scrape(server):
    reply = requests.get(server.url + "/metrics", timeout=10)
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"].startswith("text/plain; version=0.0.4"), reply.headers
    # Prometheus' own linter (Debian's prometheus package) takes it as it is.
    lint = subprocess.run(["promtool", "check", "metrics"], input=reply.text, text=True,
                          capture_output=True)
    assert lint.returncode == 0 and not lint.stdout.strip(), lint.stdout + lint.stderr
    samples = {}
    types = {}
    for family in text_string_to_metric_families(reply.text):
        types[family.name] = family.type
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples, types


def value(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))))


def test_metrics_are_scrapeable_during_and_after_a_run(api, lab, server):
    samples, types = scrape(server)
    assert types["strobe_runs_started"] == "counter", types

    cfg = base_config(api, lab)
    add_flow(cfg, "p", packets=30000, pps=10000, size=128)
    f = cfg.flows[0]
    f.packet.ethernet().ipv4().udp()
    f.metrics.latency.enable = True
    f.metrics.latency.mode = f.metrics.latency.STORE_FORWARD
    api.set_config(cfg)
    started = value(scrape(server)[0], "strobe_runs_started_total")

    transmit(api, "start", ["p"])
    # While it runs: the state says so and the counters move.
    deadline = time.time() + 10
    seen = []
    while time.time() < deadline:
        samples, types = scrape(server)
        tx = value(samples, "strobe_flow_frames_tx_total", flow="p", tx_port="tx")
        if value(samples, "strobe_run_state", state="running") == 1 and tx and tx > 0:
            seen.append(tx)
            if len(seen) >= 2 and seen[-1] > seen[0]:
                break
        time.sleep(0.3)
    assert len(seen) >= 2 and seen[-1] > seen[0], f"counters did not move while running: {seen}"
    assert 0 < value(samples, "strobe_flow_frames_tx_rate", flow="p", tx_port="tx") < 20000
    assert value(samples, "strobe_flow_transmitting", flow="p", tx_port="tx") == 1
    assert types["strobe_flow_frames_tx"] == "counter"

    wait_stopped(api, ["p"])
    transmit(api, "stop")
    m = flow_metrics(api, ["p"])["p"]
    ports = port_metrics(api)
    samples, types = scrape(server)
    assert value(samples, "strobe_runs_started_total") == started + 1
    assert value(samples, "strobe_run_state", state="finished") == 1
    assert value(samples, "strobe_flow_frames_tx_total", flow="p", tx_port="tx") == m.frames_tx == 30000
    assert value(samples, "strobe_flow_frames_rx_total", flow="p", tx_port="tx") == m.frames_rx == 30000
    assert value(samples, "strobe_flow_bytes_tx_total", flow="p", tx_port="tx") == m.bytes_tx
    assert value(samples, "strobe_flow_loss_ratio", flow="p", tx_port="tx") == 0
    assert value(samples, "strobe_port_frames_tx_total", port="tx") == ports["tx"].frames_tx
    assert value(samples, "strobe_port_frames_rx_total", port="rx") == ports["rx"].frames_rx
    # The finished run's latency: a summary over every frame, in seconds.
    assert types["strobe_flow_latency_seconds"] == "summary"
    count = value(samples, "strobe_flow_latency_seconds_count", flow="p", tx_port="tx")
    assert count == 30000, count
    p50 = value(samples, "strobe_flow_latency_seconds", flow="p", tx_port="tx", quantile="0.5")
    p99 = value(samples, "strobe_flow_latency_seconds", flow="p", tx_port="tx", quantile="0.99")
    lo = value(samples, "strobe_flow_latency_min_seconds", flow="p", tx_port="tx")
    hi = value(samples, "strobe_flow_latency_max_seconds", flow="p", tx_port="tx")
    assert 0 < lo <= p50 <= p99 <= hi < 1, (lo, p50, p99, hi)
    # OTG's reply carries the same minimum and maximum, in ns.
    assert abs(m.latency.minimum_ns / 1e9 - lo) < 1e-9 and abs(m.latency.maximum_ns / 1e9 - hi) < 1e-9
