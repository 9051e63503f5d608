"""Drives a strobe agent as a controller does, with nothing but the standard library: OTG's
JSON over HTTPS with the agent's token (what snappi sends), one flow of COUNT frames from TX
to RX, and checks the exact counts.

    python3 otg_check.py URL TOKEN TX_LOCATION RX_LOCATION [COUNT]

URL is https://ADDRESS:PORT or http://…; a self-signed certificate is accepted. Checks that
a request without the token gets 401 first. Exits 0 when every frame was sent and received,
1 otherwise (saying what the agent answered).
"""
import json
import ssl
import sys
import time
import urllib.error
import urllib.request

CONTEXT = ssl.create_default_context()
CONTEXT.check_hostname = False
CONTEXT.verify_mode = ssl.CERT_NONE  # the test certificate is self-signed


def call(url, token, method, path, body=None):
    """(status, decoded JSON or text) of one request."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url + path, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, context=CONTEXT, timeout=30) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw.decode(errors="replace")


def value(v):
    return {"choice": "value", "value": v}


def main():
    url, token, tx, rx = sys.argv[1:5]
    count = int(sys.argv[5]) if len(sys.argv) > 5 else 1000

    status, _ = call(url, None, "GET", "/capabilities/version")
    if status != 401:
        print(f"otg_check: without the token the agent answered {status}, not 401",
              file=sys.stderr)
        return 1
    status, version = call(url, token, "GET", "/capabilities/version")
    if status != 200:
        print(f"otg_check: GET /capabilities/version: {status} {version}", file=sys.stderr)
        return 1

    config = {
        "ports": [{"name": "p1", "location": tx}, {"name": "p2", "location": rx}],
        "flows": [{
            "name": "f1",
            "tx_rx": {"choice": "port", "port": {"tx_name": "p1", "rx_names": ["p2"]}},
            "packet": [
                {"choice": "ethernet", "ethernet": {"src": value("02:00:00:00:00:01"),
                                                    "dst": value("02:00:00:00:00:02")}},
                {"choice": "ipv4", "ipv4": {"src": value("198.18.0.1"),
                                            "dst": value("198.18.0.2")}},
                {"choice": "udp", "udp": {"src_port": value(1000), "dst_port": value(2000)}},
            ],
            "size": {"choice": "fixed", "fixed": 128},
            "rate": {"choice": "pps", "pps": 10000},
            "duration": {"choice": "fixed_packets", "fixed_packets": {"packets": count}},
            "metrics": {"enable": True, "latency": {"enable": True}},
        }],
    }
    status, answer = call(url, token, "POST", "/config", config)
    if status != 200:
        print(f"otg_check: POST /config: {status} {answer}", file=sys.stderr)
        return 1

    def transmit(state):
        body = {"choice": "traffic", "traffic": {"choice": "flow_transmit",
                                                  "flow_transmit": {"state": state}}}
        return call(url, token, "POST", "/control/state", body)

    def metrics():
        status, answer = call(url, token, "POST", "/monitor/metrics",
                              {"choice": "flow", "flow": {"flow_names": ["f1"]}})
        if status != 200:
            raise RuntimeError(f"POST /monitor/metrics: {status} {answer}")
        return answer["flow_metrics"][0]

    status, answer = transmit("start")
    if status != 200:
        print(f"otg_check: start: {status} {answer}", file=sys.stderr)
        return 1
    deadline = time.time() + 30
    while metrics().get("transmit") != "stopped":
        if time.time() > deadline:
            print("otg_check: the flow did not stop within 30 s", file=sys.stderr)
            return 1
        time.sleep(0.2)
    transmit("stop")  # waits for the receivers' drain: counts are final
    m = metrics()
    # OTG's JSON carries 64-bit counters as strings.
    sent, received = int(m.get("frames_tx", -1)), int(m.get("frames_rx", -1))
    latency = (m.get("latency") or {}).get("average_ns")
    print(f"otg_check: {version.get('app_version')}: {tx} -> {rx}: sent {sent}, "
          f"received {received}, latency avg {latency} ns")
    if sent != count or received != count:
        print(f"otg_check: expected {count} sent and received: {m}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
