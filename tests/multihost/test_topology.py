"""The topology itself, checked with what strobe has today (no controller): the management
network reaches every agent from the root namespace, the data links are silent when idle,
the router forwards exactly the frames one agent sends (IPv4 and IPv6, counted by tcpdump in
the receiving host's namespace), and one `strobe serve` opening every host's interface by
its namespace runs the controller tests' own checks through the router."""
import json
import os
import shutil
import subprocess
import time

import pytest

from multihost_helpers import (FRAME_SIZE, FlowSpec, add_flow, as_dict, make_certificates,
                               make_self_signed, new_token, run_mixed_flows,
                               run_remote_capture, run_subset, transmit, via_netns,
                               wait_stopped)
from topology import STROBE, capturing, http_get, sh

IDLE_SECONDS = 5


def test_the_management_net_reaches_every_agent_from_the_root_namespace(
        hosts, agents, agent_client):
    for agent in agents.values():
        # Routed out of the root namespace's one veth end, nothing else.
        route = json.loads(sh("ip", "-j", "route", "get", agent.host.mgmt_ip).stdout)[0]
        assert route["dev"] == hosts.root_iface, route
        status, body = http_get(agent.bare_url + "/capabilities/version", agent.token)
        assert status == 200 and "api_spec_version" in body, (agent, status, body)
        status, body = http_get(agent.bare_url + "/capabilities/version", "not-the-token-x")
        assert status == 401, (agent, status, body)
        if shutil.which("curl"):
            out = sh("curl", "-s", "-m", "5", "-u", f"strobe:{agent.token}",
                     agent.bare_url + "/capabilities/version").stdout
            assert "api_spec_version" in out, out
        # Unmodified snappi, the token in its location, the version check on.
        api = agent_client(agent)
        api.set_config(api.config())
        assert len(api.get_config().ports) == 0


def test_the_data_links_are_silent_when_idle(hosts, agents, tmp_path):
    """No ARP, ND, DAD, router solicitations, MLD or anything else crosses a data link when no
    test sends: only the tests' frames will."""
    dumps = []
    for h in hosts:
        dumps.append(hosts.tcpdump(h.netns, h.iface, tmp_path / f"{h.name}.pcap"))
        dumps.append(hosts.tcpdump(h.router_netns, h.router_iface,
                                   tmp_path / f"router-{h.router_iface}.pcap"))
    with capturing(dumps):
        time.sleep(IDLE_SECONDS)
    seen = {f"{d.netns}/{d.iface}": d.count() for d in dumps}
    print(f"frames on the data links in {IDLE_SECONDS} s idle: {seen}")
    assert all(n == 0 for n in seen.values()), (seen, [d.summary() for d in dumps if d.count()])


@pytest.mark.parametrize("signed", ["by a CA", "self"])
def test_an_https_agent_answers_with_the_tests_certificates(hosts, tmp_path, signed):
    """The certificates the controller's HTTPS tests give agents pass a client's check of the
    agent's management address (OpenSSL's, here), with the CA or the certificate itself."""
    ips = [h.mgmt_ip for h in hosts]
    if signed == "self":
        cert, key = make_self_signed(tmp_path, ips)
        ca = cert
    else:
        ca, cert, key = make_certificates(tmp_path, ips)
    agent = hosts.start_agent("hostc", new_token("tls"), port=8447, tls=(cert, key),
                              name="tls")
    try:
        status, body = http_get(agent.bare_url + "/capabilities/version", agent.token,
                                cafile=ca)
        assert status == 200 and "api_spec_version" in body, (status, body)
        # Checked, not merely encrypted: another CA's trust is refused.
        other = tmp_path / "other"
        other.mkdir()
        other_ca, _, _ = make_certificates(other, ips)
        status, body = http_get(agent.bare_url + "/capabilities/version", agent.token,
                                cafile=other_ca)
        assert status is None and "CERTIFICATE_VERIFY_FAILED" in body, (status, body)
    finally:
        hosts.stop_agent(agent)


def _one_agent_through_the_router(hosts, agent_client, agents, spec, tmp_path):
    """`spec` sent by the source host's agent alone (no receive port); tcpdump counts what
    arrives at every host's eth1 (incoming only)."""
    src = hosts[spec.src]
    api = agent_client(agents[spec.src])
    cfg = api.config()
    cfg.ports.port(name=spec.tx_port, location=f"afpacket:{src.iface}")
    f = add_flow(cfg, hosts, spec, latency=False)
    f.tx_rx.port.rx_names = []
    api.set_config(cfg)
    dumps = {h.name: hosts.tcpdump(h.netns, h.iface, tmp_path / f"{spec.name}-{h.name}.pcap",
                                   direction="in") for h in hosts}
    with capturing(list(dumps.values())):
        transmit(api, "start")
        m = wait_stopped(api, [spec.name])
        transmit(api, "stop")
    assert int(m[spec.name].frames_tx) == spec.frames, as_dict(m[spec.name])
    return dumps


@pytest.mark.parametrize("spec", [
    FlowSpec("a_to_b", "hosta", "hostb", packets=20000, pps=20000, udp_dst=(5001,)),
    FlowSpec("a_to_c_v6", "hosta", "hostc", ipv6=True, packets=10000, pps=10000,
             udp_dst=(5004,)),
], ids=lambda s: s.name)
def test_the_router_forwards_exactly_the_frames_one_agent_sends(
        hosts, agents, agent_client, spec, tmp_path):
    dumps = _one_agent_through_the_router(hosts, agent_client, agents, spec, tmp_path)
    dst = hosts[spec.dst]
    if spec.ipv6:
        fields = ("ipv6.src", "ipv6.dst", "ipv6.hlim", "udp.dstport", "frame.len")
        want = (hosts[spec.src].ip6, dst.ip6, "63", str(spec.udp_dst[0]), str(FRAME_SIZE - 4))
    else:
        fields = ("ip.src", "ip.dst", "ip.ttl", "udp.dstport", "frame.len")
        want = (hosts[spec.src].ip4, dst.ip4, "63", str(spec.udp_dst[0]), str(FRAME_SIZE - 4))
    arrived = dumps[spec.dst].fields(*fields)
    print(f"{spec.name}: {spec.frames} sent; tcpdump (incoming) counted "
          f"{ {name: d.count() for name, d in dumps.items()} }")
    # Exactly the frames sent, each routed once (TTL/hop limit 64 - 1), 124 bytes on a veth
    # (OTG's 128 count the FCS, which a veth does not carry); nothing else.
    assert len(arrived) == spec.frames, (len(arrived), dumps[spec.dst].summary())
    wrong = [a for a in arrived if a != want]
    assert not wrong, (len(wrong), wrong[:3], want)
    # The router's other links and the sender's own link carry nothing towards the hosts.
    for name, d in dumps.items():
        if name != spec.dst:
            assert d.count() == 0, (name, d.summary())


def test_strobe_gen_in_a_host_namespace_counts_every_frame_through_the_router(
        hosts, tmp_path):
    a, b = hosts["hosta"], hosts["hostb"]
    out = tmp_path / "gen.json"
    run = subprocess.run(
        ["ip", "netns", "exec", a.netns, STROBE, "gen", "--port", f"afpacket:{a.iface}",
         "--rx", f"afpacket:{b.netns}/{b.iface}", "--udp", f"{a.ip4}:4000-{b.ip4}:5000",
         "--src-mac", a.mac, "--dst-mac", a.router_mac, "--size", str(FRAME_SIZE),
         "--rate", "10kpps", "--count", "10000", "--drain", "300ms", "--json", str(out),
         "--db", "none", "--quiet"],
        capture_output=True, text=True, timeout=120,
        env=dict(os.environ, STROBE_STATE_DIR=str(tmp_path / "state")))
    assert run.returncode == 0, run.stderr
    flow = json.loads(out.read_text())["flows"][0]
    assert (flow["frames_tx"], flow["frames_rx"], flow["loss"]) == (10000, 10000, 0), flow
    assert flow["duplicates"] == flow["reordered"] == 0, flow
    assert 0 < flow["latency"]["raw"]["min_ns"] <= flow["latency"]["raw"]["max_ns"], flow


# The controller tests' own checks, through one plain `strobe serve` that opens the hosts'
# interfaces by namespace: they hold today, so a controller test that fails fails on the
# controller. (One server counts a run's frames final after its stop request's drain.)
def test_one_server_runs_the_mixed_flows_through_the_router(single_api, hosts):
    run_mixed_flows(single_api, hosts, via_netns, final_when_stopped=False)


def test_one_server_captures_hostc_while_a_flow_comes_in(single_api, hosts):
    run_remote_capture(single_api, hosts, via_netns, final_when_stopped=False)


def test_one_server_starts_and_stops_a_subset(single_api, hosts):
    run_subset(single_api, hosts, via_netns, final_when_stopped=False)
