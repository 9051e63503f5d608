"""The controller when something goes wrong, and what it knows of the agents' clocks.

Each test starts agents of its own (on another port than the session's) and a controller of
them, so that killing an agent or shifting its clock disturbs no other test:

- an agent killed mid-run: the next request that needs it is refused naming it, the other
  agents' runs are stopped (long before their flows would end), their counts kept, and the
  controller refuses to start anything until the config is set again;
- a clock offset injected into one agent (a debug build's test-only switch): the
  controller's own offset check finds it within 1 µs, and the one-way latency of every flow
  between that agent and another is withheld, naming the reason, while the counts stand;
- ptp4l between two host namespaces (software timestamping, the slave unable to set the
  clock): each agent reports linuxptp's state, which the controller shows.
"""
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request

import pytest
import snappi

from multihost_helpers import (FlowSpec, Server, add_flow, controller_args, errors_of,
                               new_config, new_token, transmit, via_controller)

# Agents of these tests listen here (the session's listen on 8443).
PORT = 8453


def raw(url, path, body=None):
    """A request to the controller as JSON (strobe's detail, `x_strobe`, which snappi's
    objects leave out)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as reply:
        return json.loads(reply.read())


def flows_of(url):
    reply = raw(url, "/monitor/metrics", {"choice": "flow", "flow": {"flow_names": []}})
    return {f["name"]: f for f in reply["flow_metrics"]}


@contextlib.contextmanager
def cluster(hosts, env=None, extra=None):
    """Agents on hosta, hostb and hostc (`env`/`extra`: per agent name) and their
    controller; all stopped at the end."""
    env, extra = env or {}, extra or {}
    agents = {}
    controller = None
    try:
        for h in hosts:
            agents[h.name] = hosts.start_agent(h, new_token(h.name), port=PORT,
                                               env=env.get(h.name), extra=extra.get(h.name, ()))
        controller = Server("faults", controller_args(agents.values()))
        yield agents, controller, snappi.api(location=controller.url, verify=False)
    finally:
        if controller:
            controller.stop()
        for agent in agents.values():
            if agent.alive():
                hosts.stop_agent(agent)


def long_flows(api, hosts):
    cfg = new_config(api, hosts, via_controller)
    for spec in (FlowSpec("a_to_b", "hosta", "hostb", pps=2000, udp_dst=(5101,)),
                 FlowSpec("c_to_a", "hostc", "hosta", pps=2000, udp_dst=(5102,))):
        # 60 s: only a stop can end them within the test.
        f = add_flow(cfg, hosts, spec)
        f.duration.choice = f.duration.FIXED_SECONDS
        f.duration.fixed_seconds.seconds = 60
    return cfg


def test_an_agent_killed_mid_run_is_named_and_the_others_stop_keeping_their_counts(hosts):
    with cluster(hosts) as (agents, controller, api):
        api.set_config(long_flows(api, hosts))
        transmit(api, "start")
        time.sleep(1.5)
        hosts.kill_agent(agents["hostb"])
        killed = time.time()
        # The first request that needs hostb says it is gone; later ones answer with what
        # every agent measured, the lost one's as last seen.
        named = None
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                m = flows_of(controller.url)
            except urllib.error.HTTPError as e:
                named = e.read().decode()
                continue
            if all(f["transmit"] == "stopped" for f in m.values()):
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"the flows never stopped after hostb died: {m}")
        stopped_after = time.time() - killed
        assert stopped_after < 15, stopped_after
        if named is not None:
            assert "agent `hostb`" in named, named
        # What the others measured is kept: c_to_a was sent by hostc and counted by hosta.
        c_to_a = m["c_to_a"]
        assert int(c_to_a["frames_tx"]) > 0 and int(c_to_a["frames_rx"]) > 0, c_to_a
        assert int(c_to_a["frames_tx"]) < 60 * 2000, c_to_a
        a_to_b = m["a_to_b"]
        assert "hostb" in a_to_b["x_strobe"]["agent_lost"], a_to_b
        # Its receiver's counts are as last seen: no loss is claimed between them.
        assert "loss" not in a_to_b, a_to_b
        # hosta's own run stopped (not merely the controller's view): ask it directly.
        agent = agents["hosta"]
        request = urllib.request.Request(
            agent.bare_url + "/monitor/metrics",
            data=json.dumps({"choice": "flow"}).encode(),
            headers={"Content-Type": "application/json",
                     "Authorization": f"Bearer {agent.token}"})
        with urllib.request.urlopen(request, timeout=10) as reply:
            direct = {f["name"]: f for f in json.loads(reply.read())["flow_metrics"]}
        assert direct["a_to_b"]["transmit"] == "stopped", direct
        # No start until the config is set again, and the refusal names the agent.
        with pytest.raises(Exception) as info:
            transmit(api, "start")
        assert "hostb" in errors_of(api, info.value)


def test_an_offset_injected_into_one_agent_is_found_and_one_way_latency_withheld(hosts):
    injected = 37_000
    env = {"hostb": {"STROBE_TEST_ONLY_CLOCK_OFFSET_NS": str(injected)}}
    with cluster(hosts, env=env) as (agents, controller, api):
        cfg = new_config(api, hosts, via_controller)
        for spec in (FlowSpec("a_to_b", "hosta", "hostb", packets=2000, pps=10000,
                              udp_dst=(5111,)),
                     FlowSpec("c_to_a", "hostc", "hosta", packets=2000, pps=10000,
                              udp_dst=(5112,))):
            add_flow(cfg, hosts, spec)
        api.set_config(cfg)
        checks = {a["name"]: a["clock_check"] for a in raw(controller.url, "/strobe/agents")["agents"]}
        found = checks["hostb"]["offset_ns"] - checks["hosta"]["offset_ns"]
        assert abs(found - injected) < 1000, checks
        assert abs(checks["hostc"]["offset_ns"] - checks["hosta"]["offset_ns"]) < 1000, checks
        transmit(api, "start")
        deadline = time.time() + 30
        while time.time() < deadline:
            m = flows_of(controller.url)
            if all(f["transmit"] == "stopped" for f in m.values()):
                break
            time.sleep(0.2)
        # Counted exactly either way.
        for name in ("a_to_b", "c_to_a"):
            assert m[name]["frames_tx"] == m[name]["frames_rx"] == "2000", m[name]
        # a -> b crosses the shifted clock: its one-way latency is withheld, and says why.
        a_to_b = m["a_to_b"]
        assert "latency" not in a_to_b, a_to_b
        withheld = a_to_b["x_strobe"]["one_way_latency"]["withheld"]
        assert "offset check" in withheld and "hostb" in withheld, withheld
        assert "strobe reflect" in a_to_b["x_strobe"]["one_way_latency"]["instead"]
        # c -> a does not: one machine's clock, checked to agree.
        c_to_a = m["c_to_a"]
        assert c_to_a["latency"]["minimum_ns"] > 0, c_to_a
        assert c_to_a["x_strobe"]["clock"]["bound_ns"] == 0, c_to_a


@contextlib.contextmanager
def ptp_between(hosts, master, slave):
    """ptp4l on the management links of two host namespaces (layer 2, software time
    stamps): `master` a grandmaster that never adjusts a clock, `slave` a slave whose servo
    runs but cannot set the clock (CAP_SYS_TIME dropped: the namespaces share the machine's
    one clock, which a test must never adjust). Yields each one's management socket."""
    if not shutil.which("ptp4l") or not shutil.which("setpriv"):
        pytest.skip("ptp4l or setpriv is missing (apt-get install linuxptp util-linux)")
    work = tempfile.mkdtemp(prefix="mh-ptp-")
    procs = []
    try:
        sockets = {}
        for host, role in ((master, "master"), (slave, "slave")):
            uds = os.path.join(work, f"ptp4l-{host}")
            conf = os.path.join(work, f"{host}.conf")
            with open(conf, "w") as f:
                f.write("[global]\n"
                        f"uds_address {uds}\n"
                        "logSyncInterval -3\nlogAnnounceInterval -2\nlogMinDelayReqInterval -3\n"
                        "announceReceiptTimeout 3\n"
                        # Fast convergence: both PI gains set (ptp4l ignores one alone).
                        "pi_proportional_const 0.1\npi_integral_const 0.064\n"
                        f"priority1 {100 if role == 'master' else 200}\n"
                        f"free_running {1 if role == 'master' else 0}\n")
            cmd = ["ip", "netns", "exec", hosts[host].netns, "setpriv", "--bounding-set",
                   "-sys_time", "--inh-caps=-sys_time", "--", "ptp4l", "-2", "-S", "-m",
                   "-i", "mgmt0", "-f", conf]
            log = open(os.path.join(work, f"{host}.log"), "w")
            procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL))
            sockets[host] = uds
        yield sockets, work
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(work, ignore_errors=True)


def test_each_agent_reports_linuxptps_state(hosts):
    with ptp_between(hosts, "hosta", "hostb") as (sockets, work):
        extra = {h: ["--ptp4l-socket", s] for h, s in sockets.items()}
        with cluster(hosts, extra=extra) as (agents, controller, api):
            deadline = time.time() + 60
            states = {}
            while time.time() < deadline:
                reply = raw(controller.url, "/strobe/agents")["agents"]
                states = {a["name"]: a["clock"]["sync"] for a in reply}
                slave = states["hostb"]["source"]
                if slave.get("kind") == "ptp" and slave.get("port_state") == "SLAVE":
                    break
                time.sleep(1)
            else:
                logs = {f: open(os.path.join(work, f)).read()[-800:]
                        for f in os.listdir(work) if f.endswith(".log")}
                pytest.fail(f"hostb's ptp4l never became SLAVE: {states} {logs}")
            master = states["hosta"]["source"]
            assert master["kind"] == "ptp" and master["port_state"] == "MASTER", master
            assert states["hosta"]["error_bound_ns"] == 0, states["hosta"]
            slave = states["hostb"]["source"]
            assert slave["gm_identity"] == master["gm_identity"], states
            assert states["hostb"]["error_bound_ns"] is not None, states["hostb"]
            # hostc runs no ptp4l: it says what it found instead.
            assert states["hostc"]["source"]["kind"] != "ptp", states["hostc"]
