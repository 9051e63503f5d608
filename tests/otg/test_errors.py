"""Bad configs and malformed requests get OTG errors naming what is wrong; the server keeps
serving and a running flow keeps its counts."""
import json
import random
import time

import pytest
import requests

from otg_helpers import add_flow, base_config, flow_metrics, otg_error, transmit


def one_flow(api, lab, **kw):
    cfg = base_config(api, lab, **kw)
    add_flow(cfg, "f", packets=10).packet.ethernet().ipv4().udp()
    return cfg


@pytest.mark.parametrize("case", ["location", "rate", "header", "devices", "port_name", "pcap"])
def test_configs_that_cannot_run_are_refused_at_set_config(api, lab, case):
    cfg = one_flow(api, lab)
    needle = {
        "location": "nosuchif0",
        "rate": "line rate",
        "header": "rsvp",
        "devices": "devices",
        "port_name": "nowhere",
        "pcap": "pcap: ports are not offered",
    }[case]
    if case == "location":
        cfg = one_flow(api, lab, rx_location="nosuchif0")
    elif case == "rate":
        cfg.flows[0].rate.pps = 100_000_000
    elif case == "header":
        cfg.flows[0].packet.rsvp()
    elif case == "devices":
        d = cfg.devices.device(name="d1")[-1]
        e = d.ethernets.ethernet(name="e1", mac="02:00:00:00:00:09")[-1]
        e.connection.port_name = "tx"
    elif case == "pcap":
        cfg = one_flow(api, lab, rx_location="pcap:/tmp/strobe-should-not-exist.pcap")
    elif case == "port_name":
        cfg.flows[0].tx_rx.port.tx_name = "nowhere"
    err = otg_error(api, lambda: api.set_config(cfg))
    assert err.kind == "validation" and err.code == 400, err
    text = " ".join(err.errors)
    assert needle in text, text


def test_control_requests_that_cannot_be_done_are_refused(api, lab):
    api.set_config(one_flow(api, lab))
    err = otg_error(api, lambda: transmit(api, "start", ["nosuchflow"]))
    assert "nosuchflow" in " ".join(err.errors)
    cs = api.control_state()
    cs.choice = cs.PORT
    cs.port.choice = cs.port.CAPTURE
    cs.port.capture.state = cs.port.capture.START
    cs.port.capture.port_names = ["rx"]
    err = otg_error(api, lambda: api.set_control_state(cs))
    assert "no capture in the config" in " ".join(err.errors)
    cs.port.choice = cs.port.LINK
    cs.port.link.state = cs.port.link.DOWN
    err = otg_error(api, lambda: api.set_control_state(cs))
    assert "link" in " ".join(err.errors)
    req = api.capture_request()
    req.port_name = "rx"
    err = otg_error(api, lambda: api.get_capture(req))
    assert "no capture of port `rx`" in " ".join(err.errors)
    req = api.metrics_request()
    req.flow.flow_names = ["nosuchflow"]
    err = otg_error(api, lambda: api.get_metrics(req))
    assert "nosuchflow" in " ".join(err.errors)


def random_json(rng, depth=0):
    kind = rng.randrange(9 if depth < 4 else 5)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, -1, 2**63, 2**64 + 5, rng.randrange(-10**9, 10**9)])
    if kind == 3:
        return rng.choice([1.5, -0.0, 1e308, rng.random()])
    if kind == 4:
        return rng.choice(["", "start", "flow", "ports", "x" * rng.randrange(100), "\u00e9\u0000"])
    if kind in (5, 6):
        keys = ["choice", "ports", "flows", "traffic", "flow_transmit", "state", "flow",
                "port", "name", "location", "packet", "rate", "pps", "flow_names", "tx_rx"]
        return {rng.choice(keys): random_json(rng, depth + 1) for _ in range(rng.randrange(5))}
    if kind == 7:
        return [random_json(rng, depth + 1) for _ in range(rng.randrange(5))]
    return list(range(rng.randrange(10_000, 100_000)))


def test_a_thousand_malformed_bodies_leave_a_running_flow_alone(api, lab, server):
    cfg = base_config(api, lab)
    add_flow(cfg, "steady", pps=2000).packet.ethernet().ipv4().udp()
    api.set_config(cfg)
    transmit(api, "start")
    time.sleep(0.3)
    before = flow_metrics(api)["steady"].frames_tx
    rng = random.Random(1)
    # /config is left out: a config, even one refused, is the client's to send.
    paths = ["/control/state", "/monitor/metrics", "/capabilities/version", "/no/such"]
    with requests.Session() as s:
        for i in range(1000):
            path = rng.choice(paths)
            if i % 10 == 0:
                body = bytes(rng.randrange(256) for _ in range(rng.randrange(64)))
            else:
                body = json.dumps(random_json(rng)).encode()
            r = s.post(server.url + path, data=body,
                       headers={"Content-Type": "application/json"}, timeout=10)
            assert r.headers.get("Content-Type", "").startswith("application/json"), (path, r)
            if r.status_code >= 400:
                e = r.json()
                assert e["code"] == r.status_code and e["kind"] in ("validation", "internal")
                assert e["errors"] and all(isinstance(x, str) for x in e["errors"]), e
    assert api.get_version().api_spec_version
    m = flow_metrics(api)["steady"]
    assert m.transmit == "started" and m.frames_tx > before
    transmit(api, "stop")
    m = flow_metrics(api)["steady"]
    assert m.frames_rx == m.frames_tx and m.loss == 0, m


def test_bad_bodies_to_set_config_are_validation_errors(server):
    for body in [b"", b"{", b"[]", b"null", b'{"ports": 5}', b'{"flows": [{}]}',
                 json.dumps({"ports": [{"name": "p", "location": "null"}] * 3}).encode()]:
        r = requests.post(server.url + "/config", data=body, timeout=10)
        assert r.status_code == 400, (body, r.text)
        assert r.json()["kind"] == "validation", r.text
