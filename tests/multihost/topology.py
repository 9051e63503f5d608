#!/usr/bin/env python3
"""A multi-host strobe topology in network namespaces: three hosts, a router between them
(the device under test), and a management network from the root namespace to every host.

                              root namespace: the controller (127.0.0.1)
                                   | PREFIX-mgmt 198.18.250.254/24
     PREFIX-m: bridge br0 ---------+---------------------------+
        |                     |                                |
   mgmt0 .250.1          mgmt0 .250.2                    mgmt0 .250.3
   PREFIX-a (hosta)      PREFIX-b (hostb)                PREFIX-c (hostc)
   eth1 198.18.1.2       eth1 198.18.2.2                 eth1 198.18.3.2
        2001:2:0:1::2         2001:2:0:2::2                   2001:2:0:3::2
        |                     |                                |
   eth1 198.18.1.1       eth2 198.18.2.1                 eth3 198.18.3.1
        2001:2:0:1::1         2001:2:0:2::1                   2001:2:0:3::1
                 PREFIX-r: a Linux router (IPv4 and IPv6 forwarding)

Nothing but the tests' frames crosses a data link: the router knows every host by a static
neighbour entry, no namespace runs IPv6 duplicate address detection, router solicitations or
advertisements, ICMP errors are never sent, and the hosts have no route off their own
subnets. The management bridge lives in a namespace of its own (never in the root namespace),
so the root namespace's firewall and br_netfilter never see bridged management traffic; the
root namespace gets one veth end with an address on the management subnet, nothing else.

As a library (pytest fixture): `Topology(prefix).up()`, `.start_agent(host, token)`,
`.down()`. By hand: `python3 tests/multihost/topology.py up|down PREFIX`.

Everything it creates is named after PREFIX (which includes the PID by default), removed on
`down()` and at exit, also after a failure; it stops only the processes it started, by PID.
"""
import argparse
import atexit
import contextlib
import fcntl
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STROBE = os.environ.get("STROBE_BIN", os.path.join(REPO, "target", "debug", "strobe"))

# Management subnets tried in turn: the first that no route in the root namespace covers
# (another run's, or anything else's) is taken, under a lock so parallel runs don't race.
MGMT_SUBNETS = [f"198.18.{n}.0/24" for n in range(250, 255)]
LOCK_PATH = "/tmp/strobe-multihost.lock"
STATE_DIR = "/tmp"

# Per-namespace settings, written before any link exists there so every interface inherits
# the `default` values. The same list as `strobe lab up` (crates/strobe-lab/src/rtnl.rs).
QUIET_SYSCTLS = [
    # No DAD, router solicitations or advertisements: no NDP frames of the kernel's own.
    *[f"net.ipv6.conf.{s}.{k}={v}" for s in ("all", "default")
      for k, v in (("accept_dad", 0), ("dad_transmits", 0), ("router_solicitations", 0),
                   ("accept_ra", 0),
                   # MLD reports can't be switched off; their repeats follow at once (1 ms)
                   # instead of over the next second, so all are sent while `up` runs.
                   ("mldv1_unsolicited_report_interval", 1),
                   ("mldv2_unsolicited_report_interval", 1))],
    # Flows may vary source addresses.
    "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0",
    # No IGMP reports for the 224.0.0.x groups the stack joins on its own.
    "net.ipv4.igmp_link_local_mcast_reports=0",
    # No ICMP errors (port unreachable from a host, anything from the router): error types
    # in the rate mask and a budget that never allows one.
    "net.ipv4.icmp_ratemask=6168", "net.ipv4.icmp_ratelimit=60000",
    "net.ipv6.icmp.ratelimit=60000",
]
QUIET_SYSCTLS_IF_PRESENT = [
    "net.ipv6.icmp.ratemask=0-1,3-127", "net.ipv4.icmp_msgs_per_sec=0",
    "net.ipv4.icmp_msgs_burst=0",
]

AGENT_PORT = 8443


def sh(*args, check=True, capture=True, timeout=60):
    out = subprocess.run([str(a) for a in args], capture_output=capture, text=True,
                         timeout=timeout)
    if check and out.returncode != 0:
        raise RuntimeError(f"`{' '.join(map(str, args))}` failed ({out.returncode}): "
                           f"{(out.stderr or '').strip()}")
    return out


def in_ns(netns, *args, **kw):
    return sh("ip", "netns", "exec", netns, *args, **kw)


class Host:
    """One host namespace: its data interface `eth1` to the router, its management address."""

    def __init__(self, topo, letter, index, mgmt_ip):
        self.letter = letter                   # a, b, c
        self.index = index                     # 1, 2, 3: the data subnet's third byte
        self.name = f"host{letter}"            # the agent's name too: hosta, hostb, hostc
        self.netns = f"{topo.prefix}-{letter}"
        self.iface = "eth1"                    # the data interface, in self.netns
        self.mac = f"02:00:c6:12:{index:02x}:02"
        self.ip4 = f"198.18.{index}.2"
        self.ip6 = f"2001:2:0:{index}::2"
        self.mgmt_ip = mgmt_ip
        # The router's side of this host's link.
        self.router_netns = topo.router_netns
        self.router_iface = f"eth{index}"
        self.router_mac = f"02:00:c6:12:{index:02x}:01"
        self.router_ip4 = f"198.18.{index}.1"
        self.router_ip6 = f"2001:2:0:{index}::1"

    def __repr__(self):
        return f"<{self.name} {self.netns}/{self.iface} {self.ip4} mgmt {self.mgmt_ip}>"


class Agent:
    """A `strobe serve` started in a host namespace, listening on its management address."""

    def __init__(self, host, name, token, port, proc, log_path, scheme, db, state):
        self.host, self.name, self.token, self.port = host, name, token, port
        self.proc, self.pid, self.log_path, self.scheme = proc, proc.pid, log_path, scheme
        self.db, self.state = db, state
        self.address = f"{host.mgmt_ip}:{port}"
        self.url = f"{scheme}://strobe:{token}@{self.address}"   # as snappi takes it
        self.bare_url = f"{scheme}://{self.address}"

    def alive(self):
        return self.proc.poll() is None

    def output(self):
        try:
            with open(self.log_path) as f:
                return f.read()
        except OSError:
            return ""

    def __repr__(self):
        return f"<agent {self.name} pid {self.pid} {self.bare_url}>"


class Topology:
    HOST_LETTERS = ("a", "b", "c")

    def __init__(self, prefix=None, strobe=STROBE):
        self.prefix = prefix or f"mh{os.getpid()}"
        # The root namespace's veth end is the longest name: at most 15 characters.
        if len(self.prefix) > 10 or not self.prefix.replace("-", "").isalnum():
            raise ValueError(f"prefix `{self.prefix}`: at most 10 of [A-Za-z0-9-]")
        self.strobe = strobe
        self.router_netns = f"{self.prefix}-r"
        self.mgmt_netns = f"{self.prefix}-m"
        self.root_iface = f"{self.prefix}-mgmt"
        self.state_path = os.path.join(STATE_DIR, f"strobe-multihost-{self.prefix}.json")
        self.mgmt_subnet = None
        self.mgmt_root_ip = None
        self.hosts = {}
        self.agents = []          # every agent this object started, stopped or not
        self.created = []         # namespaces created, for down()
        self._root_iface_made = False
        self.warnings = []

    # -- names ------------------------------------------------------------------------
    def __getitem__(self, name):
        return self.hosts[name]

    def __iter__(self):
        return iter(self.hosts.values())

    def namespaces(self):
        return [f"{self.prefix}-{x}" for x in (*self.HOST_LETTERS, "r", "m")]

    def _set_mgmt(self, subnet):
        net = ipaddress.ip_network(subnet)
        self.mgmt_subnet = str(net)
        self.mgmt_root_ip = str(net.network_address + 254)
        self.hosts = {}
        for i, letter in enumerate(self.HOST_LETTERS, start=1):
            h = Host(self, letter, i, str(net.network_address + i))
            self.hosts[h.name] = h

    # -- up / down ---------------------------------------------------------------------
    def up(self):
        """Creates everything; on any failure removes what it made and raises."""
        atexit.register(self.down)
        try:
            self._up()
        except BaseException:
            self.down()
            raise
        return self

    def _up(self):
        taken = [ns for ns in self.namespaces() if ns in self._existing_namespaces()]
        if sh("ip", "link", "show", self.root_iface, check=False).returncode == 0:
            taken.append(self.root_iface)
        if taken:
            raise RuntimeError(f"{', '.join(taken)} exist already (`topology.py down "
                               f"{self.prefix}` removes them)")
        self._check_root_firewall()
        for ns in self.namespaces():
            sh("ip", "netns", "add", ns)
            self.created.append(ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        for ns in [*(f"{self.prefix}-{x}" for x in self.HOST_LETTERS), self.router_netns]:
            in_ns(ns, "sysctl", "-q", "-w", *QUIET_SYSCTLS)
            in_ns(ns, "sysctl", "-q", "-e", "-w", *QUIET_SYSCTLS_IF_PRESENT, check=False)
        # The router forwards; nobody else does.
        in_ns(self.router_netns, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1",
              "net.ipv6.conf.all.forwarding=1")
        # The management namespace: a bridge, no IPv6 (no link-local, no MLD), and should a
        # firewall ever be loaded there, bridged frames are not handed to it.
        m = self.mgmt_netns
        in_ns(m, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1",
              "net.ipv6.conf.default.disable_ipv6=1")
        in_ns(m, "sysctl", "-q", "-e", "-w", "net.bridge.bridge-nf-call-iptables=0",
              "net.bridge.bridge-nf-call-ip6tables=0", "net.bridge.bridge-nf-call-arptables=0",
              check=False)
        sh("ip", "-n", m, "link", "add", "br0", "type", "bridge", "stp_state", "0")
        sh("ip", "-n", m, "link", "set", "br0", "up")

        with self._mgmt_lock():
            self._set_mgmt(self._free_mgmt_subnet())
            # The root namespace's end: created straight with its peer in the management
            # namespace, IPv6 off on it, one address.
            sh("ip", "link", "add", self.root_iface, "type", "veth",
               "peer", "name", "to-root", "netns", m)
            self._root_iface_made = True
            self._write_state()
            sh("sysctl", "-q", "-w", f"net.ipv6.conf.{self.root_iface}.disable_ipv6=1")
            if shutil.which("nmcli"):
                sh("nmcli", "device", "set", self.root_iface, "managed", "no", check=False)
            sh("ip", "addr", "add", f"{self.mgmt_root_ip}/24", "dev", self.root_iface)
            sh("ip", "-n", m, "link", "set", "to-root", "master", "br0", "up")
            sh("ip", "link", "set", self.root_iface, "up")

        r = self.router_netns
        for h in self:
            # Management: host mgmt0 <-> to-X on the bridge (no link ever in the root ns).
            sh("ip", "link", "add", "mgmt0", "netns", h.netns, "type", "veth",
               "peer", "name", f"to-{h.letter}", "netns", m)
            sh("ip", "-n", m, "link", "set", f"to-{h.letter}", "master", "br0", "up")
            in_ns(h.netns, "sysctl", "-q", "-w", "net.ipv6.conf.mgmt0.disable_ipv6=1")
            sh("ip", "-n", h.netns, "addr", "add", f"{h.mgmt_ip}/24", "dev", "mgmt0")
            sh("ip", "-n", h.netns, "link", "set", "mgmt0", "up")
            # Data: host eth1 <-> router ethN, fixed MACs.
            sh("ip", "link", "add", h.iface, "netns", h.netns, "address", h.mac,
               "type", "veth", "peer", "name", h.router_iface, "netns", r,
               "address", h.router_mac)
            for ns, iface, ip4, ip6 in ((h.netns, h.iface, h.ip4, h.ip6),
                                        (r, h.router_iface, h.router_ip4, h.router_ip6)):
                sh("ip", "-n", ns, "addr", "add", f"{ip4}/24", "dev", iface)
                sh("ip", "-n", ns, "-6", "addr", "add", f"{ip6}/64", "dev", iface, "nodad")
            # Static neighbours both ways: nobody ever asks (ARP, ND) on a data link.
            for ns, iface, ips, mac in ((r, h.router_iface, (h.ip4, h.ip6), h.mac),
                                        (h.netns, h.iface, (h.router_ip4, h.router_ip6),
                                         h.router_mac)):
                for ip in ips:
                    sh("ip", "-n", ns, "neigh", "replace", ip, "lladdr", mac, "dev", iface,
                       "nud", "permanent")
            sh("ip", "-n", r, "link", "set", h.router_iface, "up")
            sh("ip", "-n", h.netns, "link", "set", h.iface, "up")
        self._wait_links_up()
        # The multicast listener reports a new link sends (repeats 1 ms apart) are over.
        time.sleep(0.5)

    def _wait_links_up(self, timeout=10):
        want = [(h.netns, h.iface) for h in self] + [(h.netns, "mgmt0") for h in self]
        want += [(self.router_netns, h.router_iface) for h in self]
        want += [(None, self.root_iface)]
        deadline = time.time() + timeout
        while True:
            down = []
            for ns, iface in want:
                args = (["-n", ns] if ns else []) + ["-j", "link", "show", iface]
                state = json.loads(sh("ip", *args).stdout)[0].get("operstate")
                if state != "UP":
                    down.append(f"{ns or 'root'}/{iface}: {state}")
            if not down:
                return
            if time.time() > deadline:
                raise RuntimeError(f"links not up after {timeout} s: {down}")
            time.sleep(0.05)

    def down(self):
        """Stops the agents it started (by PID) and removes every namespace and link it
        made. Safe to call twice, and after a failed `up`."""
        for agent in self.agents:
            self._stop_process(agent.proc, kill=False)
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(agent.db + suffix)
            shutil.rmtree(agent.state, ignore_errors=True)
        self.agents = []
        # Only what this object made: never another run's namespaces of the same name.
        remove_namespaces(self.created, self.root_iface if self._root_iface_made else None,
                          self.state_path if self._root_iface_made else None)
        self.created = []
        self._root_iface_made = False

    # -- helpers for tests -------------------------------------------------------------
    def start_agent(self, host, token, port=AGENT_PORT, drain="300ms", tls=None, extra=(),
                    name=None, timeout=30, env=None):
        """`strobe serve` in `host`'s namespace on its management address; waits until its
        /capabilities/version answers from the root namespace through the management net.
        `tls`: (cert, key) paths for HTTPS. `name`: the agent's name (default the host's:
        hosta, hostb, hostc). `env`: more environment for it."""
        host = self.hosts[host] if isinstance(host, str) else host
        name = name or host.name
        tag = f"{self.prefix}-{name}-{port}"
        log_path = f"/tmp/strobe-agent-{tag}.log"
        db = f"/tmp/strobe-agent-{tag}.db"
        state = f"/tmp/strobe-agent-{tag}-state"
        cmd = ["ip", "netns", "exec", host.netns, self.strobe, "serve",
               "--listen", f"{host.mgmt_ip}:{port}", "--token", token, "--drain", drain]
        scheme = "http"
        if tls:
            cmd += ["--tls-cert", str(tls[0]), "--tls-key", str(tls[1])]
            scheme = "https"
        cmd += list(extra)
        with open(log_path, "w") as log:
            # `ip netns exec` enters the namespace and execs strobe: the PID is strobe's.
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL,
                                    env=dict(os.environ, STROBE_DB=db,
                                             STROBE_STATE_DIR=state, **(env or {})))
        agent = Agent(host, name, token, port, proc, log_path, scheme, db, state)
        self.agents.append(agent)
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            if not agent.alive():
                raise RuntimeError(f"agent {agent.name} exited ({proc.returncode}): "
                                   f"{agent.output()}")
            status, last = http_get(agent.bare_url + "/capabilities/version", token)
            if status == 200:
                return agent
            time.sleep(0.1)
        raise RuntimeError(f"agent {agent.name} did not answer on {agent.bare_url} within "
                           f"{timeout} s (last: {last}): {agent.output()}")

    def stop_agent(self, agent):
        self._stop_process(agent.proc, kill=False)

    def kill_agent(self, agent):
        """kill -9, as a crash would."""
        self._stop_process(agent.proc, kill=True)

    @staticmethod
    def _stop_process(proc, kill):
        if proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL if kill else signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait()

    def tcpdump(self, netns, iface, path, direction=None, bpf=()):
        """A tcpdump in `netns` on `iface` writing `path`, as a context manager: it listens
        when the `with` starts, and stops (by its PID) when it ends; then `.fields()` and
        `.count()` read what it caught. `direction`: "in" or "out" (tcpdump -Q)."""
        return Tcpdump(netns, iface, path, direction, bpf)

    # -- internals ---------------------------------------------------------------------
    @staticmethod
    def _existing_namespaces():
        out = sh("ip", "-j", "netns", "list", check=False).stdout.strip()
        return {n["name"] for n in json.loads(out)} if out else set()

    @contextlib.contextmanager
    def _mgmt_lock(self):
        with open(LOCK_PATH, "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def _free_mgmt_subnet(self):
        routes = json.loads(sh("ip", "-j", "-4", "route", "show", "table", "all").stdout or "[]")
        taken = []
        for r in routes:
            dst = r.get("dst")
            if dst and dst != "default":
                with contextlib.suppress(ValueError):
                    taken.append(ipaddress.ip_network(dst, strict=False))
        for subnet in MGMT_SUBNETS:
            net = ipaddress.ip_network(subnet)
            if not any(net.overlaps(t) for t in taken if t.prefixlen > 0):
                return subnet
        raise RuntimeError(f"every management subnet ({MGMT_SUBNETS}) is in use in the root "
                           f"namespace: another run's, or `topology.py down PREFIX` leftovers")

    def _write_state(self):
        with open(self.state_path, "w") as f:
            json.dump({"prefix": self.prefix, "root_iface": self.root_iface,
                       "mgmt_subnet": self.mgmt_subnet, "pid": os.getpid()}, f)

    def _check_root_firewall(self):
        """The management traffic is routed, not bridged, in the root namespace: only its
        input/output filter could touch it. Says so when such a chain drops by default."""
        if not shutil.which("nft"):
            return
        out = sh("nft", "-j", "list", "chains", check=False).stdout
        with contextlib.suppress(ValueError):
            for item in json.loads(out or "{}").get("nftables", []):
                chain = item.get("chain")
                if chain and chain.get("hook") in ("input", "output") and \
                        chain.get("policy") == "drop":
                    self.warnings.append(
                        f"the root namespace's nftables chain {chain['family']} "
                        f"{chain['table']} {chain['name']} drops by default: the controller "
                        f"may not reach the agents on {self.root_iface}")

    def describe(self):
        lines = [f"topology {self.prefix}: management {self.mgmt_subnet}, root end "
                 f"{self.root_iface} {self.mgmt_root_ip}, bridge br0 in {self.mgmt_netns}"]
        for h in self:
            lines.append(f"  {h.name}: netns {h.netns}, mgmt0 {h.mgmt_ip}, {h.iface} {h.mac} "
                         f"{h.ip4}/24 {h.ip6}/64 <-> {h.router_netns}/{h.router_iface} "
                         f"{h.router_mac} {h.router_ip4} {h.router_ip6}")
        return "\n".join(lines)


class Tcpdump:
    """tcpdump writing a pcap; a count it gives is exact: stopping raises if the kernel
    dropped any frame before tcpdump read it."""

    def __init__(self, netns, iface, path, direction=None, bpf=()):
        self.netns, self.iface, self.path = netns, iface, str(path)
        self.cmd = ["ip", "netns", "exec", netns, "tcpdump", "-i", iface, "-w", self.path,
                    "-n", "-s", "0", "-B", "65536",
                    *(["-Q", direction] if direction else []), *bpf]
        self.proc = None
        self.stats = ""

    def __enter__(self):
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        _TCPDUMPS.add(self.proc)
        deadline = time.time() + 10
        line = b""
        while b"listening" not in line:
            line = self.proc.stderr.readline()
            if (not line and self.proc.poll() is not None) or time.time() > deadline:
                self._stop()
                raise RuntimeError(f"tcpdump in {self.netns} on {self.iface} did not "
                                   f"start: {line.decode()}{self.stats}")
        return self

    def __exit__(self, kind, value, tb):
        self.stop(check=kind is None)
        return False

    # Frames still in flight through the router, and tcpdump's ring: libpcap hands a block
    # over when it is full or after its 1 s timeout, and frames in a block not yet handed
    # over when tcpdump stops are counted as received but never written.
    SETTLE = 1.5

    def stop(self, check=True, settle=True):
        if settle:
            time.sleep(self.SETTLE)
        self._stop()
        if check:
            stats = {}
            for line in self.stats.splitlines():
                words = line.split()
                if len(words) > 2 and words[0].isdigit() and words[1] == "packets":
                    stats[" ".join(words[2:])] = int(words[0])
            dropped = stats.get("dropped by kernel", 0)
            written, received = stats.get("captured"), stats.get("received by filter")
            if dropped or written is None or written != received:
                raise AssertionError(f"tcpdump in {self.netns} on {self.iface} did not write "
                                     f"every frame it saw (its count would be no count): "
                                     f"{self.stats}")

    def _stop(self):
        proc = self.proc
        if proc.poll() is None:
            # SIGTERM: tcpdump flushes its file and prints its statistics.
            os.kill(proc.pid, signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            _, err = proc.communicate()
        _TCPDUMPS.discard(proc)
        self.stats = err.decode(errors="replace")

    def fields(self, *fields, display_filter=None):
        return pcap_fields(self.path, *fields, display_filter=display_filter)

    def count(self, display_filter=None):
        return len(self.fields("frame.number", display_filter=display_filter))

    def summary(self, limit=5):
        out = sh("tcpdump", "-r", self.path, "-n", "-e", "-c", limit, check=False).stdout
        return out.strip()


@contextlib.contextmanager
def capturing(dumps):
    """Every tcpdump of `dumps` listening for the `with` block, stopped together after it
    (one settling wait for all); raises if any did not write every frame it saw."""
    started = []
    try:
        for d in dumps:
            d.__enter__()
            started.append(d)
        yield dumps
    except BaseException:
        for d in started:
            d.stop(check=False, settle=False)
        raise
    time.sleep(Tcpdump.SETTLE)
    for d in started:
        d.stop(settle=False)


def pcap_fields(path, *fields, display_filter=None):
    """One tuple of strings per frame of the pcap at `path`, as tshark decodes it."""
    cmd = ["tshark", "-r", str(path), "-T", "fields", "-E", "separator=\t"]
    for f in fields:
        cmd += ["-e", f]
    if display_filter:
        cmd += ["-Y", display_filter]
    out = sh(*cmd, timeout=120).stdout
    return [tuple(line.split("\t")) for line in out.splitlines()]


_TCPDUMPS = set()


@atexit.register
def _stop_tcpdumps():
    for proc in list(_TCPDUMPS):
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)


def remove_namespaces(namespaces, root_iface=None, state_path=None):
    """Deletes the namespaces (and so every link in them), the root namespace's veth end
    (a veth end goes with its peer's namespace, unless a stray process keeps that alive: it
    is deleted by name as well) and the state file."""
    existing = Topology._existing_namespaces()
    for ns in namespaces:
        if ns not in existing:
            continue
        pids = sh("ip", "netns", "pids", ns, check=False).stdout.split()
        if pids:
            print(f"topology: processes still in {ns} (not started here, left alone; the "
                  f"namespace lives on until they end): {' '.join(pids)}", file=sys.stderr)
        sh("ip", "netns", "del", ns, check=False)
    if root_iface and sh("ip", "link", "show", root_iface, check=False).returncode == 0:
        sh("ip", "link", "del", root_iface, check=False)
    if state_path:
        with contextlib.suppress(FileNotFoundError):
            os.remove(state_path)


def http_get(url, token, timeout=2, cafile=None):
    """(status, body or error) of a GET with the token, from this (the root) namespace."""
    import ssl
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    ctx = None
    if url.startswith("https"):
        ctx = ssl.create_default_context(cafile=cafile) if cafile else \
            ssl._create_unverified_context()
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=ctx) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except (urllib.error.URLError, OSError) as e:
        return None, str(e)


def _main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=["up", "down"])
    p.add_argument("prefix", help="names: PREFIX-a, -b, -c (hosts), -r (router), -m "
                                  "(management bridge), PREFIX-mgmt in the root namespace")
    args = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("topology.py needs root (network namespaces)")
    if args.action == "up":
        topo = Topology(args.prefix)
        try:
            topo.up()
        except RuntimeError as e:
            sys.exit(f"topology.py up: {e}")
        atexit.unregister(topo.down)   # by hand: it stays until `down`
        for w in topo.warnings:
            print("warning:", w, file=sys.stderr)
        print(topo.describe())
        print(f"an agent: ip netns exec {topo['hosta'].netns} {STROBE} serve --listen "
              f"{topo['hosta'].mgmt_ip}:{AGENT_PORT} --token TOKEN --drain 300ms")
    else:
        t = Topology(args.prefix)
        root_iface = t.root_iface
        with contextlib.suppress(OSError, ValueError):
            with open(t.state_path) as f:
                root_iface = json.load(f).get("root_iface", root_iface)
        remove_namespaces(t.namespaces(), root_iface, t.state_path)


if __name__ == "__main__":
    _main()
