"""strobe serve driven by unmodified snappi on a lab veth pair: flows with every OTG field
pattern, exact counts on both ports, frames decoded field by field with scapy, metrics while
a flow runs, latency only when asked for."""
import contextlib
import ipaddress
import os
import subprocess
import tempfile
import threading
import time

import pytest
import requests
import snappi

from scapy.all import IP, IPv6, TCP, UDP, Ether, rdpcap
from scapy.layers.vxlan import VXLAN

from otg_helpers import (add_flow, as_dict, base_config, capture, flow_metrics, port_metrics,
                         read_capture, run_to_end, transmit, wait_stopped)


def captured(lab, run, kind):
    """Frames of layer `kind` the rx end received while `run()` ran; every frame received is
    of that layer (strobe sends nothing but the configured frames)."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "rx.pcap")
        proc = lab.capture(path)
        try:
            result = run()
            time.sleep(0.3)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
        if os.environ.get("KEEP_CAPTURES"):
            subprocess.run(["cp", path, f"/tmp/otg-{kind.__name__}.pcap"], check=False)
        frames = rdpcap(path)
        foreign = [p.summary() for p in frames if not p.haslayer(kind)]
        assert not foreign, f"{len(foreign)} frames nobody configured: {foreign[:3]}"
        return result, list(frames)


def test_udp_flow_counts_exactly_and_every_pattern_is_on_the_wire(api, lab):
    cfg = base_config(api, lab)
    f = add_flow(cfg, "udp", packets=2000, pps=10000)
    eth, ip, udp = f.packet.ethernet().ipv4().udp()
    ip.src.values = ["198.18.0.1", "198.18.0.2", "198.18.0.3"]
    ip.dst.decrement.start = "198.18.1.100"
    ip.dst.decrement.step = "0.0.0.1"
    ip.dst.decrement.count = 5
    ip.time_to_live.value = 33
    udp.src_port.random.min = 1024
    udp.src_port.random.max = 2047
    udp.src_port.random.seed = 7
    udp.src_port.random.count = 0
    udp.dst_port.increment.start = 2000
    udp.dst_port.increment.step = 3
    udp.dst_port.increment.count = 10
    assert as_dict(api.set_config(cfg)).get("warnings", []) == []
    assert api.get_config().flows[0].name == "udp"

    m, frames = captured(lab, lambda: run_to_end(api, ["udp"]), UDP)
    assert m["udp"].frames_tx == 2000 and m["udp"].frames_rx == 2000, m
    assert m["udp"].bytes_tx == 2000 * 128 and m["udp"].bytes_rx == 2000 * 128, m
    assert m["udp"].loss == 0
    ports = port_metrics(api)
    assert ports["tx"].frames_tx == 2000 and ports["rx"].frames_rx == 2000, ports
    assert ports["tx"].transmit == "stopped"

    assert len(frames) == 2000
    sports = set()
    for j, p in enumerate(frames):
        # OTG sizes include the FCS, which a veth does not carry.
        assert len(p) == 124
        assert p[IP].src == ["198.18.0.1", "198.18.0.2", "198.18.0.3"][j % 3]
        assert p[IP].dst == str(ipaddress.IPv4Address("198.18.1.100") - j % 5)
        assert p[IP].ttl == 33
        assert p[UDP].dport == 2000 + 3 * (j % 10)
        assert 1024 <= p[UDP].sport <= 2047
        sports.add(p[UDP].sport)
        # Checksums as scapy computes them.
        rebuilt = p[IP].copy()
        del rebuilt.chksum
        del rebuilt[UDP].chksum
        rebuilt = IP(bytes(rebuilt))
        assert (p[IP].chksum, p[UDP].chksum) == (rebuilt.chksum, rebuilt[UDP].chksum), j
    assert len(sports) > 500, "random source ports repeat too much"


def test_ipv6_tcp_flow(api, lab):
    cfg = base_config(api, lab)
    f = add_flow(cfg, "v6", packets=1000)
    eth, ip6, tcp = f.packet.ethernet().ipv6().tcp()
    ip6.src.increment.start = "2001:2::1"
    ip6.src.increment.step = "::1"
    ip6.src.increment.count = 4
    ip6.dst.value = "2001:2:0:1::1"
    ip6.flow_label.random.min = 1
    ip6.flow_label.random.max = 1000
    ip6.flow_label.random.count = 0
    tcp.src_port.values = [40000, 40001]
    tcp.dst_port.value = 80
    tcp.ctl_syn.value = 1
    api.set_config(cfg)
    m, frames = captured(lab, lambda: run_to_end(api, ["v6"]), TCP)
    assert (m["v6"].frames_tx, m["v6"].frames_rx) == (1000, 1000), m
    assert len(frames) == 1000
    for j, p in enumerate(frames):
        assert p[IPv6].src == str(ipaddress.IPv6Address("2001:2::1") + j % 4)
        assert p[IPv6].dst == "2001:2:0:1::1"
        assert 1 <= p[IPv6].fl <= 1000
        assert p[TCP].sport == [40000, 40001][j % 2] and p[TCP].dport == 80
        assert p[TCP].flags == "S"


def test_vxlan_flow(api, lab):
    cfg = base_config(api, lab)
    f = add_flow(cfg, "vx", packets=500, size=256)
    eth, ip, udp, vx, ieth, iip, iudp = (
        f.packet.ethernet().ipv4().udp().vxlan().ethernet().ipv4().udp())
    ip.src.value, ip.dst.value = "198.18.0.1", "198.18.1.1"
    udp.dst_port.value = 4789
    vx.vni.increment.start = 100
    vx.vni.increment.step = 1
    vx.vni.increment.count = 3
    ieth.src.value, ieth.dst.value = "02:00:00:00:10:01", "02:00:00:00:10:02"
    iip.src.value, iip.dst.value = "198.19.0.1", "198.19.0.2"
    iudp.dst_port.value = 5000
    api.set_config(cfg)
    m, frames = captured(lab, lambda: run_to_end(api, ["vx"]), VXLAN)
    assert (m["vx"].frames_tx, m["vx"].frames_rx) == (500, 500), m
    assert len(frames) == 500
    for j, p in enumerate(frames):
        assert len(p) == 252
        assert p[VXLAN].vni == 100 + j % 3
        inner = p[VXLAN].payload
        assert inner[Ether].src == "02:00:00:00:10:01"
        assert inner[IP].src == "198.19.0.1" and inner[UDP].dport == 5000


def test_metrics_while_a_continuous_flow_runs(api, lab):
    cfg = base_config(api, lab)
    f = add_flow(cfg, "steady", pps=5000)
    f.packet.ethernet().ipv4().udp()
    f.metrics.latency.enable = True
    api.set_config(cfg)
    transmit(api, "start")
    seen, latencies = [], []
    for _ in range(4):
        time.sleep(0.5)
        m = flow_metrics(api)["steady"]
        seen.append(m.frames_tx)
        assert m.transmit == "started"
        latencies.append(as_dict(m).get("latency"))
    assert seen == sorted(seen) and seen[-1] > seen[0], seen
    # Latency so far, while the flow runs: present from the second poll on (the receiver
    # publishes every few hundred frames or few ms), ordered, microseconds on a veth pair.
    for latency in latencies[1:]:
        assert latency, latencies
        assert 0 < latency["minimum_ns"] <= latency["average_ns"] <= latency["maximum_ns"], latency
        assert latency["maximum_ns"] < 1e9, latency
    # Generous: the live rate is over the watcher's last 100 ms.
    assert 0.6 * 5000 < flow_metrics(api)["steady"].frames_tx_rate < 1.4 * 5000
    assert port_metrics(api)["tx"].transmit == "started"
    transmit(api, "stop")
    m = flow_metrics(api)["steady"]
    assert m.transmit == "stopped"
    assert m.frames_tx >= seen[-1] and m.frames_rx == m.frames_tx, m
    assert m.loss == 0
    # Start clears the counters.
    transmit(api, "start")
    time.sleep(0.3)
    assert flow_metrics(api)["steady"].frames_tx < m.frames_tx
    transmit(api, "stop")


def test_latency_is_reported_only_when_asked_for(api, lab, server):
    cfg = base_config(api, lab)
    timed = add_flow(cfg, "timed", packets=1000)
    timed.packet.ethernet().ipv4().udp()
    timed.metrics.latency.enable = True
    plain = add_flow(cfg, "plain", packets=1000)
    plain.packet.ethernet().ipv4().udp()
    api.set_config(cfg)
    m = run_to_end(api, ["timed", "plain"])
    latency = as_dict(m["timed"]).get("latency")
    assert latency, as_dict(m["timed"])
    assert 0 < latency["minimum_ns"] <= latency["average_ns"] <= latency["maximum_ns"], latency
    # A veth pair and two AF_PACKET sockets: microseconds, not seconds.
    assert latency["maximum_ns"] < 1e9
    assert "latency" not in as_dict(m["plain"])
    assert m["plain"].frames_rx == 1000
    # strobe's extension, read from the raw reply (snappi drops keys it does not know): the
    # same run's percentiles to p99.9999, every frame measured, where the stamps were taken.
    raw = requests.post(f"{server.url}/monitor/metrics",
                        json={"choice": "flow", "flow": {"flow_names": ["timed", "plain"]}},
                        timeout=10).json()
    detail = {f["name"]: f.get("x_strobe") for f in raw["flow_metrics"]}
    timed_detail = detail["timed"]
    assert timed_detail["frames_rx_unique"] == "1000" and timed_detail["duplicates"] == "0"
    p = timed_detail["latency"]["percentiles"]
    assert latency["minimum_ns"] <= p["p50_ns"] <= p["p99_ns"] <= p["p99_9999_ns"], p
    assert p["p99_9999_ns"] <= latency["maximum_ns"] * 1.001, (p, latency)
    assert timed_detail["latency"]["frames"] == "1000"
    assert "kernel" in timed_detail["latency"]["sources"]["rx"] or \
        "user space" in timed_detail["latency"]["sources"]["rx"], timed_detail
    assert "latency" not in detail["plain"], detail["plain"]
    # Left out for gosnappi (Go's HTTP client), which refuses fields the model does not name.
    go = requests.post(f"{server.url}/monitor/metrics",
                       json={"choice": "flow", "flow": {"flow_names": ["timed"]}},
                       headers={"User-Agent": "Go-http-client/1.1"}, timeout=10).json()
    assert "x_strobe" not in go["flow_metrics"][0] and "latency" in go["flow_metrics"][0], go


def test_starting_some_flows_leaves_the_others_at_zero(api, lab):
    cfg = base_config(api, lab)
    for name in ("a", "b"):
        add_flow(cfg, name, packets=300).packet.ethernet().ipv4().udp()
    api.set_config(cfg)
    m = run_to_end(api, ["b"])
    assert m["b"].frames_rx == 300
    assert flow_metrics(api)["a"].frames_tx == 0


def test_flows_start_and_stop_apart_while_others_go_on(api, lab):
    cfg = base_config(api, lab)
    for name in ("a", "b"):
        add_flow(cfg, name, pps=4000).packet.ethernet().ipv4().udp()
    api.set_config(cfg)
    # Started in two requests: two runs side by side on the same ports.
    transmit(api, "start", ["a"])
    time.sleep(0.4)
    transmit(api, "start", ["b"])
    time.sleep(0.4)
    m = flow_metrics(api)
    assert m["a"].transmit == m["b"].transmit == "started", m
    assert m["a"].frames_tx > m["b"].frames_tx > 0, m
    with pytest.raises(Exception, match="still sending"):
        transmit(api, "start", ["a"])
    # Pausing b alone holds b; a goes on.
    transmit(api, "pause", ["b"])
    time.sleep(0.3)
    held = flow_metrics(api)
    assert held["b"].transmit == "paused" and held["a"].transmit == "started", held
    transmit(api, "resume", ["b"])
    # Stopping a alone ends a; b goes on.
    transmit(api, "stop", ["a"])
    stopped = flow_metrics(api)
    assert stopped["a"].transmit == "stopped" and stopped["b"].transmit == "started", stopped
    time.sleep(0.4)
    later = flow_metrics(api)
    assert later["a"].frames_tx == stopped["a"].frames_tx, (later, stopped)
    assert later["b"].frames_tx > stopped["b"].frames_tx, (later, stopped)
    # Each run counts its own flows exactly, beside the other's frames.
    assert later["a"].frames_rx == later["a"].frames_tx and later["a"].loss == 0, later["a"]
    transmit(api, "stop")
    m = flow_metrics(api)
    assert m["b"].transmit == "stopped" and m["b"].frames_rx == m["b"].frames_tx, m["b"]
    # Port counters add both runs' flows.
    ports = port_metrics(api)
    assert int(ports["tx"].frames_tx) == m["a"].frames_tx + m["b"].frames_tx, ports


def test_one_flow_of_a_run_stops_while_the_others_go_on(api, lab):
    cfg = base_config(api, lab)
    add_flow(cfg, "a", pps=4000).packet.ethernet().ipv4().udp()
    add_flow(cfg, "b", pps=4000).packet.ethernet().ipv4().udp()
    api.set_config(cfg)
    transmit(api, "start")
    time.sleep(0.4)
    transmit(api, "stop", ["a"])
    time.sleep(0.2)  # the hand-over in progress, and the watcher's next copy
    stopped = flow_metrics(api)
    assert stopped["a"].transmit == "stopped" and stopped["b"].transmit == "started", stopped
    time.sleep(0.4)
    later = flow_metrics(api)
    assert later["a"].frames_tx == stopped["a"].frames_tx > 0, (later, stopped)
    assert later["b"].frames_tx > stopped["b"].frames_tx, (later, stopped)
    # Flows started together pause together: naming one is refused, with the others named.
    with pytest.raises(Exception, match="pause together"):
        transmit(api, "pause", ["b"])
    # Starting a again, in a run of its own, leaves b's run going.
    transmit(api, "start", ["a"])
    time.sleep(0.3)
    again = flow_metrics(api)
    assert again["a"].transmit == again["b"].transmit == "started", again
    assert again["b"].frames_tx > later["b"].frames_tx, (again, later)
    transmit(api, "stop", ["a"])
    transmit(api, "stop", ["b"])
    m = wait_stopped(api, ["a", "b"])
    transmit(api, "stop")
    m = flow_metrics(api)
    for name in ("a", "b"):
        assert m[name].frames_rx == m[name].frames_tx > 0 and m[name].loss == 0, m[name]


def test_pause_holds_the_flows_and_resume_goes_on(api, lab):
    cfg = base_config(api, lab)
    add_flow(cfg, "steady", pps=5000).packet.ethernet().ipv4().udp()
    add_flow(cfg, "counted", packets=4000, pps=5000).packet.ethernet().ipv4().udp()
    api.set_config(cfg)
    transmit(api, "start")
    time.sleep(0.4)
    transmit(api, "pause")
    time.sleep(0.3)  # the watcher's last copy of the counters is after the pause
    held = flow_metrics(api)
    assert all(m.transmit == "paused" for m in held.values()), held
    assert port_metrics(api)["tx"].transmit == "stopped"
    time.sleep(0.6)
    still = flow_metrics(api)
    for name in ("steady", "counted"):
        assert still[name].frames_tx == held[name].frames_tx > 0, (name, still, held)
    transmit(api, "resume")
    time.sleep(0.4)
    going = flow_metrics(api)
    assert going["steady"].transmit == "started"
    assert going["steady"].frames_tx > held["steady"].frames_tx
    m = wait_stopped(api, ["counted"])
    transmit(api, "stop")
    m = flow_metrics(api)
    # The counted flow sends all its frames: the pause delayed them, it dropped none.
    assert (m["counted"].frames_tx, m["counted"].frames_rx) == (4000, 4000), m
    assert m["steady"].frames_rx == m["steady"].frames_tx, m


def test_a_capture_on_the_rx_port_holds_only_the_flows_frames_from_its_first(api, lab):
    """The issue's reproduction: a paced 20-frame flow at 50 pps, captured through OTG on the
    receiving port (start_capture, start_transmit, get_capture). Every captured frame is the
    flow's, from captured frame 0 on: no probe or learning frame of strobe's own."""
    import io
    import struct

    from scapy.all import PcapReader

    for run in range(2):  # the second starts from the floor the first remembered
        cfg = base_config(api, lab)
        f = add_flow(cfg, "few", packets=20, pps=50)
        eth, ip, udp = f.packet.ethernet().ipv4().udp()
        eth.src.value = "02:00:00:00:00:0a"
        ip.src.value, ip.dst.value = "198.18.0.1", "198.18.1.1"
        udp.src_port.value, udp.dst_port.value = 1234, 5678
        cap = cfg.captures.capture(name="c")[-1]
        cap.port_names = ["rx"]
        api.set_config(cfg)
        capture(api, "start")
        m = run_to_end(api, ["few"])
        assert m["few"].frames_tx == 20 and m["few"].frames_rx == 20, m
        capture(api, "stop")
        frames = list(PcapReader(io.BytesIO(read_capture(api))))
        assert len(frames) == 20, (run, len(frames), [p.summary() for p in frames[:3]])
        for j, p in enumerate(frames):
            raw = bytes(p)
            assert len(raw) == 128, (run, j, len(raw))
            assert p[Ether].src == "02:00:00:00:00:0a", (run, j)
            assert p[IP].src == "198.18.0.1" and p[IP].dst == "198.18.1.1", (run, j)
            assert p[UDP].sport == 1234 and p[UDP].dport == 5678, (run, j)
            # The trailer (the 16 bytes before the FCS): marker 'S', sequence at 4..8.
            trailer = raw[-20:-4]
            assert trailer[0:1] == b"S", (run, j, trailer)
            assert struct.unpack(">I", trailer[4:8])[0] == j, (run, j)


def test_port_captures_hold_every_frame_with_its_fcs(api, lab):
    import io
    import zlib

    from scapy.all import PcapNgReader, PcapReader

    for fmt in ("pcap", "pcapng"):
        cfg = base_config(api, lab)
        f = add_flow(cfg, "cap", packets=500)
        eth, ip, udp = f.packet.ethernet().ipv4().udp()
        ip.src.increment.start, ip.src.increment.count = "198.18.0.10", 7
        ip.dst.value = "198.18.1.1"
        udp.dst_port.values = [7, 9]
        cap = cfg.captures.capture(name="c")[-1]
        cap.port_names = ["rx"]
        cap.format = fmt
        api.set_config(cfg)
        capture(api, "start")
        assert port_metrics(api)["rx"].capture == "started"
        m = run_to_end(api, ["cap"])
        assert m["cap"].frames_rx == 500
        capture(api, "stop")
        data = read_capture(api)
        reader = PcapNgReader if fmt == "pcapng" else PcapReader
        frames = [p for p in reader(io.BytesIO(data)) if p.haslayer(UDP)]
        assert len(frames) == 500, (fmt, len(frames))
        for j, p in enumerate(frames):
            raw = bytes(p)
            # OTG: a 128-byte frame is 128 bytes in the capture, FCS included.
            assert len(raw) == 128, (fmt, len(raw))
            assert raw[-4:] == zlib.crc32(raw[:-4]).to_bytes(4, "little"), j
            assert p[IP].src == str(ipaddress.IPv4Address("198.18.0.10") + j % 7)
            assert p[UDP].dport == [7, 9][j % 2]


def test_an_empty_config_clears_and_a_finished_flow_starts_again(api, lab):
    api.set_config(api.config())
    assert flow_metrics(api) == {}
    cfg = base_config(api, lab)
    f = add_flow(cfg, "again", packets=500)
    f.packet.ethernet().ipv4().udp()
    f.metrics.timestamps = True
    api.set_config(cfg)
    for _ in range(2):
        # Start as soon as the flow reports stopped (its receivers may still be draining).
        transmit(api, "start")
        wait_stopped(api, ["again"])
    transmit(api, "stop")
    m = flow_metrics(api)["again"]
    assert (m.frames_tx, m.frames_rx) == (500, 500), m
    ts = as_dict(m).get("timestamps")
    assert ts, as_dict(m)
    assert 0 < ts["first_timestamp_ns"] < ts["last_timestamp_ns"], ts
    assert abs(ts["first_timestamp_ns"] / 1e9 - time.time()) < 60, ts


@contextlib.contextmanager
def veth_aside(lab, name):
    """A veth pair NAME0/NAME1 of the test's own in the rx namespace, both ends up, which no
    flow reaches; yields the `ip link` command prefix there and removes the pair after (also
    when the test fails or already removed it)."""
    ip = ["ip", "-n", lab.rx_netns, "link"]
    subprocess.run(ip + ["add", f"{name}0", "type", "veth", "peer", "name", f"{name}1"],
                   check=True)
    try:
        for end in (f"{name}0", f"{name}1"):
            subprocess.run(ip + ["set", end, "up"], check=True)
        yield ip
    finally:
        subprocess.run(ip + ["del", f"{name}0"], check=False)


def test_a_run_that_lost_everything_says_so_once_when_stopped(api, lab):
    # The receive port is one end of a veth pair of its own in the rx namespace, which the
    # flow never reaches.
    with veth_aside(lab, "otgaside"):
        cfg = base_config(api, lab, rx_location=f"{lab.rx_netns}/otgaside0")
        add_flow(cfg, "lost", packets=200).packet.ethernet().ipv4().udp()
        api.set_config(cfg)
        transmit(api, "start")
        wait_stopped(api, ["lost"])
        reply = transmit(api, "stop")
        assert any("100 % loss" in w for w in reply.warnings), reply.warnings
        assert flow_metrics(api)["lost"].loss == 100
        assert not transmit(api, "stop").warnings
        api.set_config(api.config())


def test_a_receive_port_that_goes_away_stops_the_run_and_says_why(api, lab):
    # The receive port is one end of a veth pair of its own in the rx namespace, deleted
    # while the flow runs.
    with veth_aside(lab, "otgrxf") as ip:
        cfg = base_config(api, lab, rx_location=f"{lab.rx_netns}/otgrxf0")
        add_flow(cfg, "orphan", packets=1_000_000, pps=1000).packet.ethernet().ipv4().udp()
        api.set_config(cfg)
        transmit(api, "start")
        time.sleep(0.5)
        subprocess.run(ip + ["del", "otgrxf0"], check=True)
        # A schedule of 1000 s ends this soon only because nothing receives any more.
        wait_stopped(api, ["orphan"], timeout=30)
        reply = transmit(api, "stop")
        said = [w for w in reply.warnings if "stopped receiving" in w]
        assert said and all("otgrxf0" in w and "went away" in w for w in said), reply.warnings
        assert any("results are incomplete" in w for w in said), reply.warnings
        assert flow_metrics(api)["orphan"].frames_tx > 0
        api.set_config(api.config())


def test_link_down_and_up_on_the_labs_own_port(api, lab):
    cfg = base_config(api, lab)
    add_flow(cfg, "f", packets=10).packet.ethernet().ipv4().udp()
    api.set_config(cfg)
    cs = api.control_state()
    cs.choice = cs.PORT
    cs.port.choice = cs.port.LINK
    cs.port.link.port_names = ["tx"]

    def admin_up():
        out = subprocess.run(["ip", "-n", lab.tx_netns, "-o", "link", "show", lab.tx_iface],
                             capture_output=True, text=True, check=True).stdout
        flags = out.split("<", 1)[1].split(">", 1)[0].split(",")
        return "UP" in flags

    try:
        cs.port.link.state = cs.port.link.DOWN
        api.set_control_state(cs)
        assert not admin_up()
        assert port_metrics(api)["tx"].link == "down"
    finally:
        cs.port.link.state = cs.port.link.UP
        api.set_control_state(cs)
    assert admin_up()
    assert port_metrics(api)["tx"].link == "up"
    # Links of interfaces that are not the lab's are left to `ip link`.
    cs.port.link.port_names = ["rx"]
    with pytest.raises(Exception) as info:
        api.set_control_state(cs)
    assert "lab's ends" in " ".join(api.from_exception(info.value).errors)


def test_metrics_answer_while_a_stop_waits_for_the_drain(lab):
    # A server of its own with a long drain: the stop request waits 2 s for frames in flight.
    from conftest import Server
    s = Server(lab, drain="2s")
    try:
        api = snappi.api(location=s.url, verify=False)
        cfg = base_config(api, lab)
        add_flow(cfg, "f", pps=2000).packet.ethernet().ipv4().udp()
        api.set_config(cfg)
        transmit(api, "start")
        time.sleep(0.3)
        body = {"choice": "traffic",
                "traffic": {"choice": "flow_transmit", "flow_transmit": {"state": "stop"}}}
        stopper = threading.Thread(
            target=lambda: requests.post(f"{s.url}/control/state", json=body, timeout=30))
        stopper.start()
        time.sleep(0.3)
        began = time.time()
        reply = requests.post(f"{s.url}/monitor/metrics",
                              json={"choice": "flow", "flow": {"flow_names": ["f"]}}, timeout=30)
        took = time.time() - began
        draining = stopper.is_alive()
        stopper.join()
        assert reply.status_code == 200, reply.text
        # The stop was still draining when the metrics came back, well before its end.
        assert draining and took < 1.0, (draining, took)
        assert reply.json()["flow_metrics"][0]["transmit"] == "stopped"
    finally:
        s.stop()


def test_a_burst_duration_is_measured_as_a_convoy_of_trains(api, lab, server):
    cfg = base_config(api, lab)
    f = add_flow(cfg, "convoy", size=512)
    f.packet.ethernet().ipv4().udp()
    f.rate.percentage = 100
    f.duration.burst.bursts = 8
    f.duration.burst.packets = 25
    f.duration.burst.inter_burst_gap.nanoseconds = 2_000_000
    f.metrics.latency.enable = True
    api.set_config(cfg)
    m = run_to_end(api, ["convoy"])
    assert (m["convoy"].frames_tx, m["convoy"].frames_rx) == (200, 200), m["convoy"]
    raw = requests.post(f"{server.url}/monitor/metrics",
                        json={"choice": "flow", "flow": {"flow_names": ["convoy"]}},
                        timeout=10).json()
    convoy = raw["flow_metrics"][0]["x_strobe"]["convoy"]
    assert convoy["trains"] == 8 and convoy["frames_sent"] == "200", convoy
    assert convoy["frames_lost"] == "0" and convoy["loss_ratio"] == 0, convoy
    head = convoy["head_latency_ns"]
    assert head["trains"] == 8 and 0 < head["min"] <= head["mean"] <= head["max"] < 1e9, head
    l2 = convoy["l2_bps"]
    # Back to back on a veth pair: far above nothing, below any real line rate here.
    assert l2["trains"] == 8 and 1e6 < l2["mean"] < 1e12, l2
    lo, hi = l2["ci95"]
    assert lo <= l2["mean"] <= hi, l2


def test_the_trains_experiments_run_through_the_server(api, lab, server):
    # strobe's own endpoint beside OTG's: a train-length sweep on the lab, its report as
    # `strobe trains --json` writes it.
    body = {"experiment": "lengths", "lengths": [4, 16], "size": 256, "trains": 6,
            "gap": "500us", "link": "10g",
            "rx": f"afpacket:{lab.rx_netns}/{lab.rx_iface}"}
    reply = requests.post(f"{server.url}/strobe/trains", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    report = reply.json()
    assert report["experiment"] == {"kind": "train_lengths", "values": [4, 16]}, report
    steps = report["steps"]
    assert [s["step"]["frames_per_train"] for s in steps] == [4, 16]
    for s in steps:
        convoy = s["convoy"]
        n = s["step"]["frames_per_train"]
        assert convoy["frames_sent"] == 6 * n and convoy["frames_lost"] == 0, convoy
        assert len(convoy["trains"]) == 6 and convoy["head_latency_ns"]["trains"] == 6
        # The link's ground truth beside the measurement: 256-byte frames on 10 GbE.
        assert abs(s["expected"]["l2_bps"] - 10e9 * 256 / 276) < 1, s["expected"]
    # What is wrong with a request is said, as OTG errors are.
    bad = requests.post(f"{server.url}/strobe/trains", json={"trainz": 1}, timeout=10)
    assert bad.status_code == 400 and "trainz" in bad.text, bad.text
    bad = requests.post(f"{server.url}/strobe/trains", json={"link": "fast"}, timeout=10)
    assert bad.status_code == 400 and "link `fast`" in bad.text, bad.text


def test_rfc2544_runs_through_the_server(api, lab, server):
    # strobe's own endpoint beside OTG's: RFC 2544's benchmarks on the lab (a cable: it
    # forwards everything up to the highest rate given), the report as `strobe rfc2544
    # --json` writes it.
    body = {"tests": ["latency"], "sizes": ["512"], "max_rate": "20kpps", "trial": "300ms",
            "wait": "100ms", "settle": "0s", "learning": 4, "latency_loads_pct": [50],
            "rx": f"afpacket:{lab.rx_netns}/{lab.rx_iface}"}
    reply = requests.post(f"{server.url}/strobe/rfc2544", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    report = reply.json()
    # The latency needs the throughput: it was searched, and is reported.
    assert report["tests"] == ["throughput", "latency"], report
    t = report["throughput"][0]
    assert t["max_source"] == "given" and t["max_pps"] == 20000, t
    ndr = t["outcomes"][0]["rate"]
    assert ndr["pps"] == 20000 and len(t["trials"]) == 1, t
    # 512-byte frames at 20 kpps: 81.92 Mbit/s at layer 2, 85.12 at layer 1.
    assert abs(ndr["l2_bps"] - 81.92e6) < 1 and abs(ndr["l1_bps"] - 85.12e6) < 1, ndr
    point = report["latency"][0]["points"][0]
    assert point["load_pct"] == 50 and point["rate"]["pps"] == 10000, point
    assert point["latency"]["count"] == point["frames_tx"] - point["frames_lost"] > 2000
    assert report["trials"] == 2 and report["interrupted"] is False
    bad = requests.post(f"{server.url}/strobe/rfc2544", json={"test": ["x"]}, timeout=10)
    assert bad.status_code == 400 and "unknown field `test`" in bad.text, bad.text
    bad = requests.post(f"{server.url}/strobe/rfc2544", json={"trial": "0s"}, timeout=10)
    assert bad.status_code == 400 and "trial `0s`" in bad.text, bad.text


def test_y1564_runs_through_the_server(api, lab, server):
    # Y.1564 on the lab (a cable: every step up to CIR + EIR comes through, so the policing
    # step fails — nothing polices — and says so).
    body = {"tests": ["configuration"], "step": "300ms", "wait": "100ms", "settle": "0s",
            "steps_pct": [50, 100],
            "services": [{"name": "data", "size": "512", "cir": "20mbit", "eir": "10mbit",
                          "max_ftd": "50ms", "max_fdv": "50ms"}],
            "rx": f"afpacket:{lab.rx_netns}/{lab.rx_iface}"}
    reply = requests.post(f"{server.url}/strobe/y1564", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    report = reply.json()
    service = report["services"][0]
    steps = service["configuration"]
    assert [s["step"]["kind"] for s in steps] == ["cir", "cir", "cir_eir", "policing"], steps
    assert [s["verdict"]["pass"] for s in steps] == [True, True, True, False], steps
    failed = steps[3]["verdict"]["failed"][0]
    assert failed["kind"] == "not_policed" and "not policed" in failed["text"], steps[3]
    # 50 % of the CIR is 10 Mbit/s at layer 1, and it came through.
    assert steps[0]["measured"]["offered_bps"] == 10e6
    assert abs(steps[0]["measured"]["ir_bps"] / 10e6 - 1) < 0.02, steps[0]
    assert service["configuration_pass"] is False and report["pass"] is False
    bad = requests.post(f"{server.url}/strobe/y1564", json={"services": []}, timeout=10)
    assert bad.status_code == 400 and "at least one service" in bad.text, bad.text


def test_a_port_counted_in_the_kernel_counts_exactly_and_its_capture_sees_every_frame(
        api, lab, server):
    """An rx port at `lab:rx@xdp-count`: an XDP program counts every frame in the kernel, with
    its latency; the config has a capture on that port, so the program passes the frames it
    counted on and the capture holds every one."""
    import io

    from scapy.all import PcapReader

    cfg = base_config(api, lab, rx_location="lab:rx@xdp-count")
    f = add_flow(cfg, "counted", packets=2000, pps=20000)
    f.packet.ethernet().ipv4().udp()
    f.metrics.latency.enable = True
    cap = cfg.captures.capture(name="c")[-1]
    cap.port_names = ["rx"]
    api.set_config(cfg)
    capture(api, "start")
    m = run_to_end(api, ["counted"])
    assert m["counted"].frames_tx == 2000 and m["counted"].frames_rx == 2000, as_dict(m["counted"])
    raw = requests.post(f"{server.url}/monitor/metrics",
                        json={"choice": "flow", "flow": {"flow_names": ["counted"]}},
                        timeout=10).json()
    detail = raw["flow_metrics"][0]["x_strobe"]
    assert detail["frames_rx_unique"] == "2000" and detail["latency"]["frames"] == "2000", detail
    assert "XDP counting program" in detail["latency"]["sources"]["rx"], detail
    capture(api, "stop")
    frames = list(PcapReader(io.BytesIO(read_capture(api))))
    assert len(frames) == 2000, len(frames)
