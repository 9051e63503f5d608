"""What the multi-host tests share: strobe servers started by PID (the controller in the root
namespace, or a single server), snappi helpers (snappi itself is used unmodified), the
flows the tests send through the router and the checks made on their results.

The checks take the port locations as a function of the host, so the same checks run through
the controller (`hosta/afpacket:eth1`) and, today already, through one `strobe serve` that
opens every host's interface by its namespace (`afpacket:PREFIX-a/eth1`)."""
import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from topology import STROBE, pcap_fields

FRAME_SIZE = 128


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerExited(RuntimeError):
    """`strobe serve` exited before it listened; `.output` is what it said."""

    def __init__(self, message, output):
        super().__init__(message)
        self.output = output


class Server:
    """`strobe serve` in the root namespace on 127.0.0.1 (the controller when given agents),
    its history and state of its own, its output in /tmp/strobe-<name>-PORT.log."""

    def __init__(self, name, args=(), drain="300ms", timeout=30):
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        tag = f"{name}-{self.port}"
        self.log_path = f"/tmp/strobe-{tag}.log"
        self.db = f"/tmp/strobe-{tag}.db"
        self.state = f"/tmp/strobe-{tag}-state"
        self.args = [STROBE, "serve", "--listen", f"127.0.0.1:{self.port}", "--drain", drain,
                     *map(str, args)]
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL,
                                         env=dict(os.environ, STROBE_DB=self.db,
                                                  STROBE_STATE_DIR=self.state))
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    out = self.output()
                    self.stop()
                    raise ServerExited(f"`{' '.join(self.args)}` exited "
                                       f"({self.proc.returncode}): {out}", out)
                time.sleep(0.05)
        out = self.output()
        self.stop()
        raise RuntimeError(f"{name} did not listen on {self.url} within {timeout} s: {out}")

    def alive(self):
        return self.proc.poll() is None

    def output(self):
        try:
            with open(self.log_path) as f:
                return f.read()
        except OSError:
            return ""

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.db + suffix)
        shutil.rmtree(self.state, ignore_errors=True)


def new_token(name):
    """An agent's token: at least 16 characters of [A-Za-z0-9._~-] (it travels in URLs)."""
    return f"mh-{name}-{secrets.token_hex(8)}"


def controller_args(agents, ca=None):
    """`--agent NAME=URL` for each agent (the token in the URL, as snappi clients give it)."""
    args = []
    for agent in agents:
        args += ["--agent", f"{agent.name}={agent.url}"]
    if ca:
        args += ["--agent-ca", str(ca)]
    return args


# -- snappi: the OTG tests' helpers, and a longer default wait for runs across hosts ---------
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "otg"))
from otg_helpers import (as_dict, capture, flow_metrics, port_metrics,  # noqa: E402,F401
                         transmit)
from otg_helpers import wait_stopped as _wait_stopped  # noqa: E402


def wait_stopped(api, names, timeout=120):
    """Polls flow metrics until every flow in `names` reports transmit stopped."""
    return _wait_stopped(api, names, timeout)


def errors_of(api, exc):
    """Everything a refused request said: snappi's exception text and the OTG errors."""
    said = [str(exc)]
    with contextlib.suppress(Exception):
        said += list(api.from_exception(exc).errors)
    return " ".join(said)


# -- the flows ----------------------------------------------------------------------------
@dataclass
class FlowSpec:
    """A UDP flow from one host's eth1 through the router to another host's address."""
    name: str
    src: str              # host names: hosta, hostb, hostc
    dst: str
    ipv6: bool = False
    packets: int = 0      # fixed_packets (0 with burst, or for continuous)
    pps: int = 20000
    burst: tuple = None   # (bursts, packets per burst, inter-burst gap in ns)
    udp_dst: tuple = (5000,)

    @property
    def frames(self):
        if self.burst:
            return self.burst[0] * self.burst[1]
        return self.packets

    @property
    def tx_port(self):
        return self.src[-1]     # port names: a, b, c (one port per host: its eth1)

    @property
    def rx_port(self):
        return self.dst[-1]


# The traffic the controller tests send: a ring of IPv4 flows across the three hosts and an
# IPv6 flow, constant rate and bursts, started together.
MIXED_FLOWS = [
    FlowSpec("a_to_b", "hosta", "hostb", packets=20000, pps=20000, udp_dst=(5001,)),
    # 25 bursts of 200 frames at 100 kpps, 5 ms apart: 5000 frames.
    FlowSpec("b_to_c", "hostb", "hostc", pps=100000, burst=(25, 200, 5_000_000),
             udp_dst=(5002,)),
    FlowSpec("c_to_a", "hostc", "hosta", packets=20000, pps=20000, udp_dst=(5003,)),
    FlowSpec("a_to_c_v6", "hosta", "hostc", ipv6=True, packets=10000, pps=10000,
             udp_dst=(5004,)),
]


def port_name(host):
    return host.name[-1]


def new_config(api, hosts, location):
    """A config with one port per host (`a`, `b`, `c`: its eth1) at `location(host)`."""
    cfg = api.config()
    for h in hosts:
        cfg.ports.port(name=port_name(h), location=location(h))
    return cfg


def add_flow(cfg, hosts, spec, latency=True):
    src, dst = hosts[spec.src], hosts[spec.dst]
    f = cfg.flows.flow(name=spec.name)[-1]
    f.tx_rx.port.tx_name = spec.tx_port
    f.tx_rx.port.rx_names = [spec.rx_port]
    f.size.fixed = FRAME_SIZE
    f.rate.pps = spec.pps
    if spec.burst:
        bursts, packets, gap_ns = spec.burst
        f.duration.burst.bursts = bursts
        f.duration.burst.packets = packets
        f.duration.burst.inter_burst_gap.nanoseconds = gap_ns
    elif spec.packets:
        f.duration.fixed_packets.packets = spec.packets
    else:
        f.duration.choice = f.duration.CONTINUOUS
    # Into the router: the source host's MAC, the router's on that link.
    if spec.ipv6:
        eth, ip, udp = f.packet.ethernet().ipv6().udp()
        ip.src.value, ip.dst.value = src.ip6, dst.ip6
    else:
        eth, ip, udp = f.packet.ethernet().ipv4().udp()
        ip.src.value, ip.dst.value = src.ip4, dst.ip4
    eth.src.value, eth.dst.value = src.mac, src.router_mac
    udp.src_port.value = 4000
    if len(spec.udp_dst) == 1:
        udp.dst_port.value = spec.udp_dst[0]
    else:
        udp.dst_port.values = list(spec.udp_dst)
    f.metrics.enable = True
    f.metrics.latency.enable = latency
    return f


# -- the checks ---------------------------------------------------------------------------
def run_mixed_flows(api, hosts, location, final_when_stopped=True, flows=MIXED_FLOWS):
    """Every flow of `flows` started at once; once all report transmit stopped, each flow's
    frames counted exactly at both ends, its latency, and every port's counters the sum of
    its flows'. `final_when_stopped`: the counts are final as soon as every flow reports
    stopped (what the controller promises); else a stop request (its drain) makes them so."""
    cfg = new_config(api, hosts, location)
    for spec in flows:
        add_flow(cfg, hosts, spec)
    # (Its warnings may say that workers share this machine's cores: not the point here.)
    api.set_config(cfg)
    names = [s.name for s in flows]
    transmit(api, "start")
    m = wait_stopped(api, names)
    if not final_when_stopped:
        transmit(api, "stop")
        m = flow_metrics(api)
    for spec in flows:
        f = m[spec.name]
        assert (int(f.frames_tx), int(f.frames_rx)) == (spec.frames, spec.frames), \
            (spec.name, as_dict(f))
        assert int(f.bytes_tx) == int(f.bytes_rx) == spec.frames * FRAME_SIZE, as_dict(f)
        assert f.loss == 0, as_dict(f)
        assert (f.port_tx, f.port_rx) == (spec.tx_port, spec.rx_port), as_dict(f)
        latency = as_dict(f).get("latency")
        assert latency, (spec.name, as_dict(f))
        assert 0 < latency["minimum_ns"] <= latency["average_ns"] <= latency["maximum_ns"], \
            (spec.name, latency)
        # Through a Linux router on one machine: microseconds to milliseconds, never seconds.
        assert latency["maximum_ns"] < 1e9, (spec.name, latency)
    ports = port_metrics(api)
    assert set(ports) == {"a", "b", "c"}, ports
    for name, p in ports.items():
        sent = sum(int(m[s.name].frames_tx) for s in flows if s.tx_port == name)
        received = sum(int(m[s.name].frames_rx) for s in flows if s.rx_port == name)
        assert (int(p.frames_tx), int(p.frames_rx)) == (sent, received), (name, as_dict(p))
        assert int(p.bytes_tx) == sent * FRAME_SIZE, (name, as_dict(p))
        assert p.transmit == "stopped", (name, as_dict(p))
    return m, ports


def run_remote_capture(api, hosts, location, final_when_stopped=True):
    """A capture of hostc's port while a flow from hosta comes in through the router: the
    pcap fetched with get_capture holds exactly the flow's frames, as tshark decodes them."""
    spec = FlowSpec("a_to_c", "hosta", "hostc", packets=600, pps=10000,
                    udp_dst=(7000, 7001, 7002))
    cfg = new_config(api, hosts, location)
    add_flow(cfg, hosts, spec, latency=False)
    cap = cfg.captures.capture(name="at_c")[-1]
    cap.port_names = ["c"]
    cap.format = cap.PCAP
    api.set_config(cfg)
    capture(api, "start", ["c"])
    assert port_metrics(api, ["c"])["c"].capture == "started"
    transmit(api, "start")
    m = wait_stopped(api, [spec.name])
    if not final_when_stopped:
        transmit(api, "stop")
        m = flow_metrics(api)
    assert int(m[spec.name].frames_rx) == spec.frames, as_dict(m[spec.name])
    capture(api, "stop", ["c"])
    req = api.capture_request()
    req.port_name = "c"
    data = api.get_capture(req).read()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "c.pcap")
        with open(path, "wb") as f:
            f.write(data)
        decoded = pcap_fields(path, "ip.src", "ip.dst", "udp.dstport", "ip.ttl", "frame.len")
    assert len(decoded) == spec.frames, (len(decoded), decoded[:3])
    src, dst = hosts[spec.src], hosts[spec.dst]
    for j, (ip_src, ip_dst, dport, ttl, length) in enumerate(decoded):
        # Routed once (TTL 64 - 1), the dst ports in turn, 128 bytes with the FCS.
        assert (ip_src, ip_dst, ttl) == (src.ip4, dst.ip4, "63"), (j, decoded[j])
        assert int(dport) == spec.udp_dst[j % 3], (j, decoded[j])
        assert int(length) == FRAME_SIZE, (j, decoded[j])
    return decoded


def run_subset(api, hosts, location, final_when_stopped=True):
    """Starting one flow leaves the others at zero; a continuous flow started and stopped by
    name alone is counted exactly, and the others still stay at zero."""
    fixed = FlowSpec("a_to_b", "hosta", "hostb", packets=3000, pps=10000)
    steady = FlowSpec("b_to_c", "hostb", "hostc", pps=5000)          # continuous
    idle = FlowSpec("c_to_a", "hostc", "hosta", packets=3000, pps=10000)
    cfg = new_config(api, hosts, location)
    for spec in (fixed, steady, idle):
        add_flow(cfg, hosts, spec)
    api.set_config(cfg)

    transmit(api, "start", [fixed.name])
    wait_stopped(api, [fixed.name])
    if not final_when_stopped:
        transmit(api, "stop", [fixed.name])
    m = flow_metrics(api)
    assert (int(m[fixed.name].frames_tx), int(m[fixed.name].frames_rx)) == (3000, 3000), \
        as_dict(m[fixed.name])
    for other in (steady.name, idle.name):
        assert (int(m[other].frames_tx), int(m[other].frames_rx)) == (0, 0), as_dict(m[other])
        assert m[other].transmit == "stopped", as_dict(m[other])
    ports = port_metrics(api)
    assert int(ports["b"].frames_tx) == int(ports["c"].frames_tx) == 0, ports
    assert int(ports["c"].frames_rx) == int(ports["a"].frames_rx) == 0, ports

    transmit(api, "start", [steady.name])
    # Sending (a controller starts its senders a moment after the request: --start-lead).
    deadline = time.time() + 15
    while True:
        running = flow_metrics(api)
        if int(running[steady.name].frames_tx) > 0 or time.time() > deadline:
            break
        time.sleep(0.2)
    assert running[steady.name].transmit == "started", as_dict(running[steady.name])
    assert int(running[steady.name].frames_tx) > 0, as_dict(running[steady.name])
    time.sleep(0.5)
    assert running[idle.name].transmit == "stopped", as_dict(running[idle.name])
    transmit(api, "stop", [steady.name])
    m = flow_metrics(api)
    s = m[steady.name]
    assert s.transmit == "stopped", as_dict(s)
    # 5000 pps for half a second or more, every frame of it received.
    assert 1000 < int(s.frames_tx) == int(s.frames_rx), as_dict(s)
    assert int(m[fixed.name].frames_tx) == 3000, as_dict(m[fixed.name])
    assert (int(m[idle.name].frames_tx), int(m[idle.name].frames_rx)) == (0, 0), \
        as_dict(m[idle.name])
    return m


# -- where a port is ----------------------------------------------------------------------
def via_controller(host):
    """A port as the controller's config names it: AGENT/LOCATION, the location as that
    agent opens it in its own namespace."""
    return f"{host.name}/afpacket:{host.iface}"


def via_netns(host):
    """A port as one `strobe serve` in the root namespace opens it: by its namespace."""
    return f"afpacket:{host.netns}/{host.iface}"


# -- TLS ----------------------------------------------------------------------------------
def make_certificates(directory, ips):
    """A CA and an agent certificate it signed for the management addresses `ips` (as a
    client checking the agents' certificates needs them: the end certificate not a CA, the
    addresses as IP subject alternative names). Returns (ca, cert, key) paths."""
    d = str(directory)
    ca_key, ca = os.path.join(d, "ca-key.pem"), os.path.join(d, "ca.pem")
    key, csr, cert = (os.path.join(d, n) for n in ("agent-key.pem", "agent.csr", "agent.pem"))
    ext = os.path.join(d, "agent.ext")

    def openssl(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True)
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-subj", "/CN=strobe multihost test CA", "-keyout", ca_key, "-out", ca,
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=strobe agent",
            "-keyout", key, "-out", csr)
    with open(ext, "w") as f:
        f.write("basicConstraints=critical,CA:FALSE\n"
                "keyUsage=critical,digitalSignature,keyEncipherment\n"
                "extendedKeyUsage=serverAuth\n"
                f"subjectAltName={','.join('IP:' + ip for ip in ips)}\n")
    openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
            "-days", "1", "-out", cert, "-extfile", ext)
    return ca, cert, key


def make_self_signed(directory, ips):
    """A self-signed agent certificate for `ips` (not a CA: it is its own trust anchor, as
    `--agent-ca` takes it). Returns (cert, key) paths."""
    d = str(directory)
    key, cert = os.path.join(d, "self-key.pem"), os.path.join(d, "self.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=strobe agent (self-signed)", "-keyout", key, "-out", cert,
                    "-addext", "basicConstraints=critical,CA:FALSE",
                    "-addext", f"subjectAltName={','.join('IP:' + ip for ip in ips)}"],
                   check=True, capture_output=True)
    return cert, key
