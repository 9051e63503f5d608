"""Fixtures: a lab veth pair (strobe's own lab, a cable between its ends) and `strobe serve`
on a free localhost port, driven by the unmodified snappi client.

Everything started here is stopped by PID and every lab is removed, also when a test fails.
"""
import os
import shutil
import socket
import subprocess
import time

import pytest
import snappi
from scapy.config import conf as scapy_conf
from scapy.layers.l2 import Ether

# strobe's pcap captures mark the frames' FCS in the link type (libpcap's FCS-length bits:
# 0x24000001 is Ethernet with a 4-byte FCS), which Wireshark and tshark decode; scapy 2.6 does
# not know those bits, so it is told the type is Ethernet (the FCS then reads as padding).
scapy_conf.l2types.register(0x24000001, Ether)

STROBE = os.environ.get("STROBE_BIN", "target/debug/strobe")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    """The lab `prefix`: its tx end sends into a cable, its rx end receives."""

    def __init__(self, prefix):
        self.prefix = prefix
        self.rx_netns, self.rx_iface = f"{prefix}-rx", "rx0"
        self.tx_netns, self.tx_iface = f"{prefix}-tx", "tx0"

    def capture(self, path, count=None):
        """tcpdump on the rx end, writing `path` (pcap); returns the process."""
        cmd = ["ip", "netns", "exec", self.rx_netns, "tcpdump", "-i", self.rx_iface,
               "-w", path, "-U", "-n", "-s", "0", "-B", "32768",
               "--immediate-mode"]
        if count:
            cmd += ["-c", str(count)]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # tcpdump says "listening on" once its socket is open.
        deadline = time.time() + 10
        line = b""
        while time.time() < deadline and b"listening" not in line:
            line = proc.stderr.readline()
        return proc


@pytest.fixture(scope="session")
def lab():
    prefix = f"otg{os.getpid() % 10000}"
    subprocess.run([STROBE, "lab", "up", "--prefix", prefix, "--dut", "cable"],
                   check=True, stdout=subprocess.DEVNULL)
    # No IPv6 neighbour discovery or router solicitations on the lab's ends: only the
    # tests' frames cross the cable.
    for ns in (f"{prefix}-tx", f"{prefix}-rx"):
        subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw",
                        "net.ipv6.conf.all.disable_ipv6=1"], check=False)
    try:
        yield Lab(prefix)
    finally:
        subprocess.run([STROBE, "lab", "down", "--prefix", prefix], check=False,
                       stdout=subprocess.DEVNULL)


class Server:
    def __init__(self, lab, extra=(), scheme="http", drain="300ms"):
        self.port = _free_port()
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        self.log = open(f"/tmp/strobe-serve-{self.port}.log", "w+")
        # Its runs are recorded in a history of its own (never the user's); --db overrides.
        self.db = f"/tmp/strobe-serve-{self.port}.db"
        # Remembered floors in a state directory of its own too (removed with the server).
        self.state = f"/tmp/strobe-serve-{self.port}-state"
        self.proc = subprocess.Popen(
            [STROBE, "serve", "--listen", f"127.0.0.1:{self.port}", "--lab", lab.prefix,
             "--drain", drain, *extra],
            stdout=self.log, stderr=subprocess.STDOUT,
            env=dict(os.environ, STROBE_DB=self.db, STROBE_STATE_DIR=self.state))
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                assert self.proc.poll() is None, self.output()
                time.sleep(0.05)
        raise AssertionError("strobe serve did not start listening: " + self.output())

    def output(self):
        self.log.seek(0)
        return self.log.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        for suffix in ("", "-wal", "-shm"):
            try:
                os.remove(self.db + suffix)
            except FileNotFoundError:
                pass
        shutil.rmtree(self.state, ignore_errors=True)


@pytest.fixture(scope="session")
def server(lab):
    s = Server(lab)
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def api(server):
    """A fresh snappi client per test (its version check on, as a careful script has it)."""
    a = snappi.api(location=server.url, verify=False, version_check=True)
    yield a
    # Leave nothing running for the next test.
    cs = a.control_state()
    cs.choice = cs.TRAFFIC
    cs.traffic.choice = cs.traffic.FLOW_TRANSMIT
    cs.traffic.flow_transmit.state = cs.traffic.flow_transmit.STOP
    try:
        a.set_control_state(cs)
    except Exception:
        pass
    assert server.proc.poll() is None, server.output()
