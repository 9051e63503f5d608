"""Every REST reply strobe gives, checked against the OTG spec's own response schemas.

The hand-written OTG model in strobe must answer in the shape the spec's `openapi.yaml`
(OTG 1.61.0, MIT; a copy in tests/otg/spec) describes. Replies from real runs on the lab are validated with an independent OpenAPI 3.0
validator (openapi-schema-validator, on jsonschema), status codes included: a reply whose
code the spec does not list for its path fails.
"""
import copy
import pathlib
import time

import pytest
import requests
import yaml
from openapi_schema_validator import OAS30Validator, oas30_format_checker

from otg_helpers import add_flow, base_config

HERE = pathlib.Path(__file__).resolve().parent
SPEC_PATH = HERE / "spec" / "openapi.yaml"


def _allow_proto_json_integers(node):
    """64-bit integers may also be decimal strings, as the proto3 JSON mapping writes them:
    OTG's own clients send them so (snappi, gosnappi's protojson) and ixia-c answers so."""
    if isinstance(node, dict):
        for value in node.values():
            _allow_proto_json_integers(value)
        if node.get("type") == "integer" and node.get("format") in ("int64", "uint64"):
            number = dict(node)
            node.clear()
            node["anyOf"] = [number, {"type": "string", "pattern": "^-?[0-9]+$"}]
    elif isinstance(node, list):
        for value in node:
            _allow_proto_json_integers(value)


@pytest.fixture(scope="module")
def spec():
    with open(SPEC_PATH) as f:
        spec = yaml.safe_load(f)
    _allow_proto_json_integers(spec["components"])
    return spec


def _resolve(spec, node):
    while isinstance(node, dict) and "$ref" in node:
        target = spec
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part]
        node = target
    return node


def check_reply(spec, method, path, reply):
    """Validates `reply` (a requests.Response) against the spec's response for its code."""
    operation = spec["paths"][path][method.lower()]
    responses = operation["responses"]
    code = str(reply.status_code)
    assert code in responses or "default" in responses, \
        f"{method} {path} answered {code}, which the spec does not list"
    response = _resolve(spec, responses.get(code, responses.get("default")))
    content = response.get("content", {})
    if "application/json" not in content:
        return None
    schema = _resolve(spec, content["application/json"]["schema"])
    body = reply.json()
    # The schema's references point into the spec: give the validator the spec's components.
    root = {"allOf": [copy.deepcopy(schema)], "components": spec["components"]}
    validator = OAS30Validator(root, format_checker=oas30_format_checker)
    problems = sorted(validator.iter_errors(body), key=lambda e: list(e.absolute_path))
    assert not problems, f"{method} {path} ({code}) does not match the spec: " + "; ".join(
        f"at {'/'.join(map(str, p.absolute_path)) or '(root)'}: {p.message}" for p in problems[:5])
    return body


def _config(api, lab):
    cfg = base_config(api, lab)
    add_flow(cfg, "fixed", packets=3000, pps=20000, size=256)
    f = add_flow(cfg, "burst", packets=2000, pps=20000, size=128)
    f.size.choice = f.size.INCREMENT
    f.size.increment.start, f.size.increment.end, f.size.increment.step = 100, 300, 4
    for flow in cfg.flows:
        eth, ip, udp = flow.packet.ethernet().ipv4().udp()
        eth.src.value, eth.dst.value = "02:00:00:00:00:01", "02:00:00:00:00:02"
        ip.src.value, ip.dst.value = "198.18.0.1", "198.18.0.2"
        udp.src_port.value, udp.dst_port.value = 4000, 5000
        flow.metrics.latency.enable = True
    # Tagged metrics in the replies too: two source ports, each counted on its own.
    udp = cfg.flows[0].packet[2]
    udp.src_port.values = [4000, 4001]
    udp.src_port.metric_tags.metrictag(name="sport")
    return cfg.serialize()


def _state(url, state):
    return requests.post(url + "/control/state", timeout=30, json={
        "choice": "traffic",
        "traffic": {"choice": "flow_transmit", "flow_transmit": {"state": state}}})


def test_every_reply_of_a_run_matches_the_spec(spec, api, lab, server):
    url = server.url
    check_reply(spec, "GET", "/capabilities/version",
                requests.get(url + "/capabilities/version", timeout=10))

    body = _config(api, lab)
    reply = requests.post(url + "/config", data=body, timeout=30,
                          headers={"Content-Type": "application/json"})
    assert reply.status_code == 200, reply.text
    check_reply(spec, "POST", "/config", reply)
    config = check_reply(spec, "GET", "/config", requests.get(url + "/config", timeout=10))
    assert [f["name"] for f in config["flows"]] == ["fixed", "burst"]

    reply = _state(url, "start")
    assert reply.status_code == 200, reply.text
    check_reply(spec, "POST", "/control/state", reply)

    requests_to_check = [
        {"choice": "port", "port": {"port_names": []}},
        {"choice": "flow", "flow": {"flow_names": []}},
        {"choice": "flow", "flow": {"flow_names": ["fixed"]}},
    ]
    # While running and after the end: both shapes the metrics take.
    for _ in range(3):
        for request in requests_to_check:
            check_reply(spec, "POST", "/monitor/metrics",
                        requests.post(url + "/monitor/metrics", json=request, timeout=10))
        time.sleep(0.05)
    deadline = time.time() + 30
    while time.time() < deadline:
        flows = check_reply(spec, "POST", "/monitor/metrics", requests.post(
            url + "/monitor/metrics", json=requests_to_check[1], timeout=10))["flow_metrics"]
        if all(f["transmit"] == "stopped" for f in flows):
            break
        time.sleep(0.1)
    reply = _state(url, "stop")
    assert reply.status_code == 200, reply.text
    check_reply(spec, "POST", "/control/state", reply)
    flows = check_reply(spec, "POST", "/monitor/metrics", requests.post(
        url + "/monitor/metrics", json=requests_to_check[1], timeout=10))["flow_metrics"]
    by_name = {f["name"]: f for f in flows}
    # The replies carry the counts, not just the right shape.
    assert int(by_name["fixed"]["frames_rx"]) == 3000
    assert int(by_name["burst"]["frames_rx"]) == 2000
    assert "latency" in by_name["fixed"]
    tagged = by_name["fixed"]["tagged_metrics"]
    assert sorted((t["tags"][0]["value"]["hex"], int(t["frames_rx"])) for t in tagged) == \
        [("0xfa0", 1500), ("0xfa1", 1500)], tagged
    for request in requests_to_check[:1]:
        check_reply(spec, "POST", "/monitor/metrics",
                    requests.post(url + "/monitor/metrics", json=request, timeout=10))


def test_every_error_strobe_gives_matches_the_spec(spec, server):
    url = server.url
    cases = [
        ("POST", "/config", {"data": b"{not json", "headers": {"Content-Type": "application/json"}}),
        ("POST", "/config", {"json": {"ports": [{"name": "p", "location": "no-such-iface-9"}],
                                      "flows": [{"name": "f", "tx_rx": {"choice": "port",
                                                 "port": {"tx_name": "q"}}}]}}),
        ("POST", "/control/state", {"json": {"choice": "traffic", "traffic": {
            "choice": "flow_transmit", "flow_transmit": {"state": "dance"}}}}),
        ("POST", "/monitor/metrics", {"json": {"choice": "bgpv4"}}),
        ("POST", "/monitor/capture", {"json": {"port_name": "no-such-port"}}),
    ]
    for method, path, kwargs in cases:
        reply = requests.request(method, url + path, timeout=10, **kwargs)
        assert reply.status_code >= 400, f"{method} {path} accepted a bad request: {reply.text}"
        error = check_reply(spec, method, path, reply)
        assert error["errors"] and all(e.strip() for e in error["errors"]), error
