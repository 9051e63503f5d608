"""Small snappi helpers shared by the tests (snappi itself is used unmodified)."""
import json
import time

import pytest


def transmit(api, state, names=None):
    cs = api.control_state()
    cs.choice = cs.TRAFFIC
    cs.traffic.choice = cs.traffic.FLOW_TRANSMIT
    cs.traffic.flow_transmit.state = state
    if names:
        cs.traffic.flow_transmit.flow_names = names
    return api.set_control_state(cs)


def otg_error(api, call):
    """The OTG Error object snappi raised for `call()`."""
    with pytest.raises(Exception) as info:
        call()
    err = api.from_exception(info.value)
    assert err is not None, str(info.value)
    return err


def capture(api, state, ports=("rx",)):
    """Starts or stops (`state` "start" / "stop") the captures of `ports`."""
    cs = api.control_state()
    cs.choice = cs.PORT
    cs.port.choice = cs.port.CAPTURE
    cs.port.capture.port_names = list(ports)
    cs.port.capture.state = state
    return api.set_control_state(cs)


def read_capture(api, port="rx"):
    """The bytes of `port`'s capture (pcap or pcapng, as its config says)."""
    req = api.capture_request()
    req.port_name = port
    return api.get_capture(req).read()


def flow_metrics(api, names=None):
    req = api.metrics_request()
    req.flow.flow_names = names or []
    return {m.name: m for m in api.get_metrics(req).flow_metrics}


def port_metrics(api, names=None):
    req = api.metrics_request()
    req.port.port_names = names or []
    return {m.name: m for m in api.get_metrics(req).port_metrics}


def wait_stopped(api, names, timeout=30):
    """Polls flow metrics until every flow in `names` reports transmit stopped."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = flow_metrics(api, names)
        if all(m[n].transmit == "stopped" for n in names):
            return m
        time.sleep(0.1)
    raise AssertionError(f"flows {names} did not stop: {m}")


def run_to_end(api, names):
    """Starts the flows, waits until their last frame left, stops (drains) and returns the
    final flow metrics."""
    transmit(api, "start", names)
    wait_stopped(api, names)
    transmit(api, "stop")
    return flow_metrics(api, names)


def as_dict(obj):
    return json.loads(obj.serialize())


def base_config(api, lab, rx_location=None):
    """Two ports on the lab: tx by its lab name, rx by NETNS/IFACE (a bare interface)."""
    cfg = api.config()
    cfg.ports.port(name="tx", location="lab:tx")
    cfg.ports.port(name="rx", location=rx_location or f"{lab.rx_netns}/{lab.rx_iface}")
    return cfg


def add_flow(cfg, name, packets=None, pps=10000, size=128):
    f = cfg.flows.flow(name=name)[-1]
    f.tx_rx.port.tx_name = "tx"
    f.tx_rx.port.rx_names = ["rx"]
    f.size.fixed = size
    f.rate.pps = pps
    if packets:
        f.duration.fixed_packets.packets = packets
    f.metrics.enable = True
    return f
