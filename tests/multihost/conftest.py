"""Fixtures for the multi-host tests:

- `hosts`: the topology (tests/multihost/topology.py): hosta, hostb, hostc and the router in
  namespaces of their own, a management network from the root namespace;
- `agents`: one `strobe serve` per host namespace on its management address, each with its
  own token (`agents["hosta"].url` is http://strobe:TOKEN@198.18.250.1:8443);
- `controller`: `strobe serve` in the root namespace on 127.0.0.1 with `--agent NAME=URL` for
  the three agents; `api`: a fresh unmodified snappi client of it per test;
- `single_server`: one plain `strobe serve` (no agents) in the root namespace, which opens the
  hosts' interfaces by namespace: what checks the topology and the tests' own checks today.

Everything started here is stopped by PID and the topology is removed, also when a test
fails, on Ctrl-C, on SIGTERM, and at exit."""
import os
import shutil
import signal
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from multihost_helpers import Server, controller_args, new_token, transmit  # noqa: E402
from topology import STROBE, Topology  # noqa: E402

import snappi  # noqa: E402  (pip install snappi==1.62.0: tests/otg/requirements.txt)


def pytest_configure(config):
    # SIGTERM ends the session as Ctrl-C does: the fixtures' teardown runs (and atexit).
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        def _interrupt(signum, frame):
            raise KeyboardInterrupt(f"signal {signum}")
        signal.signal(signal.SIGTERM, _interrupt)


@pytest.fixture(scope="session")
def hosts():
    if os.geteuid() != 0:
        pytest.skip("the multi-host topology needs root (network namespaces)")
    for tool in ("ip", "tcpdump", "tshark", "sysctl"):
        if not shutil.which(tool):
            pytest.skip(f"`{tool}` is missing (apt-get install iproute2 tcpdump tshark procps)")
    if not os.access(STROBE, os.X_OK):
        pytest.skip(f"no strobe binary at {STROBE} (cargo build -p strobe-cli, or STROBE_BIN)")
    topo = Topology()
    try:
        topo.up()
        for warning in topo.warnings:
            print("topology:", warning, file=sys.stderr)
        yield topo
    finally:
        topo.down()


@pytest.fixture(scope="session")
def agents(hosts):
    """name -> Agent: `strobe serve` in each host namespace, reachable from the root
    namespace only through the management network."""
    started = {}
    try:
        for h in hosts:
            started[h.name] = hosts.start_agent(h, new_token(h.name))
        yield started
    finally:
        for agent in started.values():
            hosts.stop_agent(agent)


@pytest.fixture(scope="session")
def controller(agents):
    c = Server("controller", controller_args(agents.values()))
    try:
        yield c
    finally:
        c.stop()


def _client(url):
    # As a careful script has it: snappi's version check on.
    return snappi.api(location=url, verify=False, version_check=True)


def _leave_idle(api):
    try:
        transmit(api, "stop")
    except Exception:
        pass


@pytest.fixture
def api(controller, agents):
    """A fresh snappi client of the controller; after the test nothing runs any more, and the
    controller and every agent are still alive."""
    a = _client(controller.url)
    yield a
    _leave_idle(a)
    assert controller.alive(), controller.output()
    for agent in agents.values():
        assert agent.alive(), f"{agent.name} died: {agent.output()}"


@pytest.fixture(scope="session")
def single_server(hosts):
    s = Server("single")
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def single_api(single_server):
    a = _client(single_server.url)
    yield a
    _leave_idle(a)
    assert single_server.alive(), single_server.output()


@pytest.fixture
def agent_client():
    """agent_client(agent): a snappi client of one agent, straight over the management net."""
    made = []

    def make(agent):
        a = _client(agent.url)
        made.append(a)
        return a
    yield make
    for a in made:
        _leave_idle(a)


def pytest_collection_modifyitems(session, config, items):
    # The topology's own checks first: when they fail, the controller's failures say little.
    items.sort(key=lambda item: 0 if item.fspath.basename == "test_topology.py" else 1)
