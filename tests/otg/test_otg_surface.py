"""The rest of the OTG surface a suite uses, driven by unmodified snappi on a lab veth pair:
update_config (a running flow's rate and size changed live), control/action and
monitor/states answered with what strobe supports, metric_names / column_names, port rates,
flow timestamps and tagged metrics, capture filters and packet_size."""
import io
import os
from ipaddress import IPv4Address
import tempfile
import time

import pytest
import requests
from scapy.all import IP, UDP, PcapNgReader, PcapReader, rdpcap

from otg_helpers import (add_flow, as_dict, base_config, capture, flow_metrics, otg_error,
                         port_metrics, read_capture, run_to_end, transmit, wait_stopped)


def udp_flow(cfg, name, **kw):
    f = add_flow(cfg, name, **kw)
    eth, ip, udp = f.packet.ethernet().ipv4().udp()
    ip.src.value, ip.dst.value = "198.18.0.1", "198.18.1.1"
    udp.src_port.value, udp.dst_port.value = 1234, 5678
    return f


def test_update_config_changes_a_running_flows_rate_and_size_without_stopping(api, lab):
    cfg = base_config(api, lab)
    udp_flow(cfg, "live", pps=1000, size=128)
    api.set_config(cfg)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "rx.pcap")
        proc = lab.capture(path)
        try:
            transmit(api, "start", ["live"])
            t0 = time.time()
            time.sleep(1.5)
            before, t1 = flow_metrics(api)["live"], time.time()
            upd = api.config_update()
            upd.flows.property_names = ["rate", "size"]
            f = upd.flows.flows.flow(name="live")[-1]
            f.tx_rx.port.tx_name = "tx"
            f.tx_rx.port.rx_names = ["rx"]
            f.rate.pps = 4000
            f.size.fixed = 256
            api.update_config(upd)
            t_change = time.time()
            # Still sending: the update did not stop the flow.
            assert flow_metrics(api)["live"].transmit == "started"
            time.sleep(1.5)
            after, t2 = flow_metrics(api)["live"], time.time()
            transmit(api, "stop")
            time.sleep(0.3)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
        frames = rdpcap(path)
    # Rates from the live counters (published every 100 ms): generous bounds.
    rate_before = before.frames_tx / (t1 - t0)
    rate_after = (after.frames_tx - before.frames_tx) / (t2 - t1)
    assert 700 < rate_before < 1300, rate_before
    # t1..t2 includes the update request itself (at most a few ms at 1000 pps).
    assert 3000 < rate_after < 4600, (rate_after, t_change - t1)
    final = flow_metrics(api)["live"]
    assert final.frames_rx == final.frames_tx, final
    # On the wire: frames of 128 bytes (124 without the FCS), then only of 256 (252); the
    # byte counter agrees with the split.
    ours = [len(bytes(p)) for p in frames if p.haslayer(UDP) and p[UDP].dport == 5678]
    assert len(ours) == final.frames_tx, (len(ours), final.frames_tx)
    small = ours.index(252)
    assert set(ours[:small]) == {124} and set(ours[small:]) == {252}, ours[small - 3:small + 3]
    assert final.bytes_tx == 128 * small + 256 * (len(ours) - small)
    # Frames after the change went at ~4000 pps, before it at ~1000.
    assert 0.7 * 1000 * (t1 - t0) < small < 1.3 * 1000 * (t_change - t0) + 50, small
    # The stored config says so.
    got = as_dict(api.get_config())["flows"][0]
    assert int(got["rate"]["pps"]) == 4000 and got["size"]["fixed"] == 256, got


def test_update_config_of_a_stopped_flow_applies_from_its_next_start(api, lab):
    cfg = base_config(api, lab)
    udp_flow(cfg, "later", packets=100, pps=1000, size=128)
    api.set_config(cfg)
    upd = api.config_update()
    upd.flows.property_names = ["size"]
    f = upd.flows.flows.flow(name="later")[-1]
    f.tx_rx.port.tx_name = "tx"
    f.size.fixed = 300
    api.update_config(upd)
    m = run_to_end(api, ["later"])["later"]
    assert (m.frames_tx, m.frames_rx, m.bytes_tx) == (100, 100, 100 * 300), m


def test_update_config_refuses_what_it_cannot_change_with_the_reason(api, lab, server):
    cfg = base_config(api, lab)
    f = udp_flow(cfg, "bursty", pps=1000)
    f.duration.burst.packets = 5
    f.duration.burst.gap = 12
    udp_flow(cfg, "steady", pps=1000)
    api.set_config(cfg)
    transmit(api, "start", ["bursty"])
    try:
        upd = api.config_update()
        upd.flows.property_names = ["rate"]
        f = upd.flows.flows.flow(name="bursty")[-1]
        f.tx_rx.port.tx_name = "tx"
        f.rate.pps = 2000
        err = otg_error(api, lambda: api.update_config(upd))
        assert "bursty" in err.errors[0] and "rate cannot change while it runs" in err.errors[0]
        # A live size change takes a fixed size.
        upd = api.config_update()
        upd.flows.property_names = ["size"]
        f = upd.flows.flows.flow(name="bursty")[-1]
        f.tx_rx.port.tx_name = "tx"
        f.size.increment.start = 64
        err = otg_error(api, lambda: api.update_config(upd))
        assert "fixed size" in err.errors[0], err.errors
        # Unknown flows, other properties, protocols (the raw API: snappi checks enums itself).
        for body, says in [
            ({"choice": "flows", "flows": {"property_names": ["rate"], "flows": [{"name": "x"}]}},
             "no flow `x`"),
            ({"choice": "flows", "flows": {"property_names": ["packet"], "flows": [{"name": "steady"}]}},
             "`packet`"),
            ({"choice": "protocols"}, "emulates no protocols"),
        ]:
            r = requests.patch(server.url + "/config", json=body)
            assert r.status_code == 400, r.text
            assert says in r.json()["errors"][0], r.json()
        # Nothing was changed by the refusals.
        got = as_dict(api.get_config())["flows"]
        assert [int(g["rate"]["pps"]) for g in got] == [1000, 1000], got
    finally:
        transmit(api, "stop")


def test_control_action_and_monitor_states_say_what_strobe_supports(api, lab):
    api.set_config(base_config(api, lab))
    action = api.control_action()
    action.protocol.ipv4.ping.requests.pingrequest(src_name="d", dst_ip="198.18.0.1")
    err = otg_error(api, lambda: api.set_control_action(action))
    assert err.code == 400, err
    assert "stateless traffic generator" in err.errors[0] and "protocol ipv4" in err.errors[0]
    assert "flow_transmit" in err.errors[0]
    req = api.states_request()
    req.ipv4_neighbors.ethernet_names = ["e"]
    err = api.from_exception(pytest.raises(Exception, api.get_states, req).value)
    assert "`ipv4_neighbors`" in err.errors[0] and "monitor/metrics" in err.errors[0], err


def test_port_rates_and_chosen_columns(api, lab, server):
    cfg = base_config(api, lab)
    udp_flow(cfg, "steady", pps=2000, size=200)
    api.set_config(cfg)
    transmit(api, "start", ["steady"])
    try:
        time.sleep(1.0)
        ports = port_metrics(api)
        tx, rx = ports["tx"], ports["rx"]
        # Over the last 100 ms of the live counters: generous bounds around 2000 pps.
        assert 1400 < tx.frames_tx_rate < 2600, tx
        assert 1400 < rx.frames_rx_rate < 2600, rx
        # Bytes with the FCS: 200 a frame, exactly as the frame rates say.
        assert abs(tx.bytes_tx_rate - 200 * tx.frames_tx_rate) < 1, tx
        assert abs(rx.bytes_rx_rate - 200 * rx.frames_rx_rate) < 1, rx
        assert tx.bytes_rx_rate == 0 and rx.bytes_tx_rate == 0
        # Only the columns asked for (and the name), in raw JSON.
        r = requests.post(server.url + "/monitor/metrics", json={
            "choice": "port", "port": {"port_names": ["rx"],
                                       "column_names": ["frames_rx", "bytes_rx_rate"]}})
        assert r.status_code == 200, r.text
        assert [sorted(m) for m in r.json()["port_metrics"]] == [
            ["bytes_rx_rate", "frames_rx", "name"]], r.json()
        req = api.metrics_request()
        req.flow.flow_names = ["steady"]
        req.flow.metric_names = ["frames_tx"]
        r = requests.post(server.url + "/monitor/metrics", json=as_dict(req))
        got = r.json()["flow_metrics"][0]
        assert "frames_tx" in got and "frames_rx" not in got and "transmit" not in got, got
        assert got["name"] == "steady" and got["port_tx"] == "tx", got
        # snappi reads the filtered reply too.
        assert api.get_metrics(req).flow_metrics[0].frames_tx > 0
        # An unknown column is refused naming it.
        r = requests.post(server.url + "/monitor/metrics", json={
            "choice": "port", "port": {"column_names": ["loss"]}})
        assert r.status_code == 400 and "`loss`" in r.json()["errors"][0], r.text
    finally:
        transmit(api, "stop")
    # Stopped: the rates are 0.
    tx = port_metrics(api)["tx"]
    assert (tx.frames_tx_rate, tx.bytes_tx_rate) == (0, 0), tx


def test_flow_timestamps_are_the_first_and_last_frames_received(api, lab):
    cfg = base_config(api, lab)
    f = udp_flow(cfg, "stamped", packets=50, pps=100)
    f.metrics.timestamps = True
    api.set_config(cfg)
    before = time.time_ns()
    m = run_to_end(api, ["stamped"])["stamped"]
    after = time.time_ns()
    assert m.frames_rx == 50, m
    first, last = m.timestamps.first_timestamp_ns, m.timestamps.last_timestamp_ns
    assert before < first < last < after, (before, first, last, after)
    # 50 frames at 100 pps: 49 gaps of 10 ms.
    assert 0.4e9 < last - first < 0.6e9, last - first


def test_capture_filters_and_packet_size_keep_only_the_matching_frames_cut_short(api, lab):
    """OTG capture filters as a header stack (ethernet, ipv4, then a custom field after the
    IPv4 header: the UDP destination port), AND-ed, one of them negated; packet_size cuts
    every kept frame to 64 bytes while the capture keeps its length of 128 (scapy reads
    both)."""
    for fmt, negate in (("pcap", False), ("pcapng", True)):
        cfg = base_config(api, lab)
        f = add_flow(cfg, "cap", packets=500)
        eth, ip, udp = f.packet.ethernet().ipv4().udp()
        ip.src.increment.start, ip.src.increment.count = "198.18.0.10", 7
        ip.dst.value = "198.18.1.1"
        udp.dst_port.values = [7, 9]
        cap = cfg.captures.capture(name="c")[-1]
        cap.port_names = ["rx"]
        cap.format = fmt
        cap.packet_size = 64
        f_eth, f_ip, f_udp = cap.filters.ethernet().ipv4().custom()
        f_eth.ether_type.value = "0800"
        f_ip.src.value = "c612000a"  # 198.18.0.10
        f_ip.src.negate = negate
        # The custom filter's offset counts from the end of the IPv4 header: 16 bits in is
        # the UDP destination port.
        f_udp.offset, f_udp.bit_length, f_udp.value = 16, 16, "0007"
        api.set_config(cfg)
        capture(api, "start")
        assert run_to_end(api, ["cap"])["cap"].frames_rx == 500
        capture(api, "stop")
        reader = PcapNgReader if fmt == "pcapng" else PcapReader
        frames = list(reader(io.BytesIO(read_capture(api))))
        # Frame j has source 198.18.0.(10 + j % 7) and destination port 7 when j is even.
        wanted = [j for j in range(500) if j % 2 == 0 and (j % 7 == 0) != negate]
        assert len(frames) == len(wanted), (fmt, negate, len(frames), len(wanted))
        for j, p in zip(wanted, frames):
            assert (len(bytes(p)), p.wirelen) == (64, 128), (fmt, j)
            assert p[IP].src == str(IPv4Address("198.18.0.10") + j % 7), (fmt, j)
            assert p[UDP].dport == 7
    # A filter strobe cannot apply is refused, naming the field.
    cfg = base_config(api, lab)
    cap = cfg.captures.capture(name="c")[-1]
    cap.port_names = ["rx"]
    cap.filters.ethernet().vlan()[-1].id.value = "1fff"
    err = otg_error(api, lambda: api.set_config(cfg))
    assert err.code == 400 and err.kind == "validation", err
    assert any("captures[0].filters[1].vlan.id.value" in e and "12 bits" in e
               for e in err.errors), err.errors


def _tags(t):
    return tuple((tag.name, tag.value.hex) for tag in t.tags)


def test_tagged_metrics_count_each_tag_combination_exactly(api, lab):
    """metric_tags on udp.src_port (3 values) and on the last byte of ipv4.dst (2 values): 6
    combinations, each counted as a flow of its own, live and final; the request's
    tagged_metrics filter (include, include_empty_metrics, metric_names, filters) applied."""
    cfg = base_config(api, lab)
    f = udp_flow(cfg, "tagged", packets=1200, pps=1500)
    f.metrics.latency.enable = True
    ip, udp = f.packet[1], f.packet[2]
    ip.dst.increment.start, ip.dst.increment.step, ip.dst.increment.count = \
        "198.18.1.1", "0.0.0.1", 2
    ip.dst.metric_tags.metrictag(name="dst", offset=24, length=8)
    udp.src_port.values = [1000, 1001, 1002]
    udp.src_port.metric_tags.metrictag(name="sport")
    idle = udp_flow(cfg, "idle", packets=10)
    idle.packet[2].src_port.metric_tags.metrictag(name="port")
    api.set_config(cfg)
    combos = {(("dst", hex(1 + j % 2)), ("sport", hex(1000 + j % 3))) for j in range(6)}

    transmit(api, "start", ["tagged"])
    time.sleep(0.4)
    live = flow_metrics(api, ["tagged"])["tagged"]
    # One sample of the counters: the combinations add up to the flow.
    assert live.transmit == "started"
    assert {_tags(t) for t in live.tagged_metrics} == combos
    assert sum(t.frames_tx for t in live.tagged_metrics) == live.frames_tx > 0
    wait_stopped(api, ["tagged"])
    transmit(api, "stop")

    m = flow_metrics(api, ["tagged", "idle"])
    final = m["tagged"]
    assert final.frames_tx == final.frames_rx == 1200, final
    assert len(final.tagged_metrics) == 6
    for t in final.tagged_metrics:
        assert (t.frames_tx, t.frames_rx, t.loss) == (200, 200, 0), t
        assert t.bytes_tx == t.bytes_rx == 200 * 128, t
        assert 0 < t.latency.minimum_ns <= t.latency.average_ns <= t.latency.maximum_ns, t
    # A flow that sent nothing: its combinations are empty, left out unless asked for.
    assert len(m["idle"].tagged_metrics) == 0

    req = api.metrics_request()
    req.flow.flow_names = ["idle"]
    req.flow.tagged_metrics.include_empty_metrics = True
    empty = api.get_metrics(req).flow_metrics[0].tagged_metrics
    assert [(_tags(t), t.frames_tx) for t in empty] == [((("port", "0x4d2"),), 0)]

    req = api.metrics_request()
    req.flow.flow_names = ["tagged"]
    req.flow.tagged_metrics.filters.filter(name="sport", values=["0x3e9"])
    req.flow.tagged_metrics.metric_names = ["frames_rx"]
    kept = api.get_metrics(req).flow_metrics[0].tagged_metrics
    assert sorted(_tags(t) for t in kept) == [
        (("dst", "0x1"), ("sport", "0x3e9")), (("dst", "0x2"), ("sport", "0x3e9"))]
    for t in kept:
        assert t.frames_rx == 200 and t.frames_tx is None, t

    req = api.metrics_request()
    req.flow.flow_names = ["tagged"]
    req.flow.tagged_metrics.include = False
    assert len(api.get_metrics(req).flow_metrics[0].tagged_metrics) == 0

    req = api.metrics_request()
    req.flow.tagged_metrics.filters.filter(name="nosuch", values=["0x1"])
    err = otg_error(api, lambda: api.get_metrics(req))
    assert "no metric tag `nosuch`" in " ".join(err.errors), err


def test_metric_tags_that_cannot_be_counted_are_refused_by_name(api, lab):
    cfg = base_config(api, lab)
    f = udp_flow(cfg, "endless")
    f.packet[2].src_port.random.min, f.packet[2].src_port.random.max = 1, 60000
    f.packet[2].src_port.random.count = 0
    f.packet[2].src_port.metric_tags.metrictag(name="sport")
    err = otg_error(api, lambda: api.set_config(cfg))
    text = " ".join(err.errors)
    assert "metric tag `sport`" in text and "at most 1024" in text, text
