"""strobe serve as a controller of agents, driven by unmodified snappi: one `strobe serve`
per host namespace (the agents), and one in the root namespace given them with `--agent
NAME=URL` (the controller), to which a config names each port AGENT/LOCATION.

What it must do: a flow sent from one agent's port and received on another's is counted
exactly at both ends and timed, merged under the flow's name; every port of every agent has
its metrics; a capture of any agent's port comes back through the controller; flows start
and stop by name across agents; transmit reports "stopped" only once the counts are final;
and a config naming an agent that is unknown, or down, is refused naming it.

The same checks pass today through one `strobe serve` opening the hosts' interfaces by
namespace (test_topology.py), so a failure here is the controller's."""
import subprocess
import time

import pytest
import snappi

from multihost_helpers import (MIXED_FLOWS, FlowSpec, Server, ServerExited, add_flow, as_dict,
                               free_port,
                               controller_args, errors_of, flow_metrics, make_certificates,
                               make_self_signed, new_config, new_token, port_metrics, run_mixed_flows,
                               run_remote_capture, run_subset, transmit, via_controller,
                               wait_stopped)
from topology import http_get

# The controller's promise: counts are final once transmit reports stopped.
FINAL_WHEN_STOPPED = True


def test_flows_between_agents_are_counted_exactly_and_timed(api, hosts):
    # a -> b, b -> c (bursts), c -> a: IPv4 UDP; a -> c: IPv6 UDP. All started at once, each
    # sent by one agent and received by another, through the router.
    m, ports = run_mixed_flows(api, hosts, via_controller, FINAL_WHEN_STOPPED)
    # Each flow under its own name once: the two agents' halves merged, not listed twice.
    assert sorted(m) == sorted(s.name for s in MIXED_FLOWS), list(m)
    # Counts are final, not merely the last poll's: they stay as they are.
    again = flow_metrics(api)
    for spec in MIXED_FLOWS:
        assert int(again[spec.name].frames_rx) == spec.frames, as_dict(again[spec.name])


def test_a_capture_of_a_remote_agents_port_comes_back_through_the_controller(api, hosts):
    # hostc's eth1, captured by hostc's agent, fetched from the controller, decoded by tshark.
    run_remote_capture(api, hosts, via_controller, FINAL_WHEN_STOPPED)


def test_starting_one_flow_leaves_the_others_idle(api, hosts):
    run_subset(api, hosts, via_controller, FINAL_WHEN_STOPPED)


def test_update_config_changes_a_flow_live_on_the_agent_that_sends_it(api, hosts):
    """snappi's update_config through the controller: the sending agent changes the running
    flow's rate and size without a stop, the receiving agent counts every frame, and the
    controller's config says so."""
    spec = FlowSpec("live", "hosta", "hostb", pps=1000, udp_dst=(5009,))
    cfg = new_config(api, hosts, via_controller)
    add_flow(cfg, hosts, spec, latency=False)
    api.set_config(cfg)
    transmit(api, "start", ["live"])
    time.sleep(1.0)
    upd = api.config_update()
    upd.flows.property_names = ["rate", "size"]
    g = upd.flows.flows.flow(name="live")[-1]
    g.tx_rx.port.tx_name, g.tx_rx.port.rx_names = spec.tx_port, [spec.rx_port]
    g.rate.pps, g.size.fixed = 3000, 256
    api.update_config(upd)
    before, t1 = flow_metrics(api, ["live"])["live"], time.time()
    assert before.transmit == "started", as_dict(before)
    time.sleep(1.5)
    after, t2 = flow_metrics(api, ["live"])["live"], time.time()
    transmit(api, "stop")
    rate = (int(after.frames_tx) - int(before.frames_tx)) / (t2 - t1)
    assert 2200 < rate < 3600, rate
    per_frame = (int(after.bytes_tx) - int(before.bytes_tx)) / (
        int(after.frames_tx) - int(before.frames_tx))
    assert abs(per_frame - 256) < 2, per_frame
    final = flow_metrics(api, ["live"])["live"]
    assert int(final.frames_rx) == int(final.frames_tx) > 0, as_dict(final)
    got = as_dict(api.get_config())["flows"][0]
    assert int(got["rate"]["pps"]) == 3000 and got["size"]["fixed"] == 256, got
    # A flow the config does not have is refused, naming it.
    g.name = "ghost"
    with pytest.raises(Exception) as refused:
        api.update_config(upd)
    assert "no flow `ghost`" in errors_of(api, refused.value), refused.value


def test_tagged_metrics_of_a_flow_between_agents_are_merged_per_tag(api, hosts):
    """metric_tags on a flow sent by hosta and received by hostb: each tag value's frames
    sent (the sender's count) and received (the receiver's), merged by the controller."""
    spec = FlowSpec("tagged", "hosta", "hostb", packets=900, pps=3000, udp_dst=(5011, 5012, 5013))
    cfg = new_config(api, hosts, via_controller)
    f = add_flow(cfg, hosts, spec, latency=True)
    f.packet[2].dst_port.metric_tags.metrictag(name="dport")
    api.set_config(cfg)
    transmit(api, "start", ["tagged"])
    m = wait_stopped(api, ["tagged"])["tagged"]
    assert int(m.frames_tx) == int(m.frames_rx) == 900, as_dict(m)
    got = sorted((t.tags[0].value.hex, int(t.frames_tx), int(t.frames_rx), t.loss)
                 for t in m.tagged_metrics)
    assert got == [(hex(p), 300, 300, 0) for p in spec.udp_dst], got
    for t in m.tagged_metrics:
        assert t.latency.maximum_ns > 0, as_dict(m)


def test_the_controller_serves_otg_over_grpc_too(hosts, agents):
    """--grpc-listen on a controller: snappi's gRPC transport sets a config across agents,
    runs a flow from one agent to another and reads its exact counts, and an error comes
    back as an OTG error."""
    grpc_port = free_port()
    c = Server("controller-grpc", [*controller_args(agents.values()), "--grpc-listen",
                                   f"127.0.0.1:{grpc_port}"])
    try:
        g = snappi.api(location=f"127.0.0.1:{grpc_port}", transport=snappi.Transport.GRPC)
        spec = FlowSpec("over-grpc", "hostb", "hostc", packets=2000, pps=5000, udp_dst=(5015,))
        cfg = new_config(g, hosts, via_controller)
        add_flow(cfg, hosts, spec, latency=True)
        g.set_config(cfg)
        assert [f.name for f in g.get_config().flows] == ["over-grpc"]
        transmit(g, "start", ["over-grpc"])
        m = wait_stopped(g, ["over-grpc"])["over-grpc"]
        assert int(m.frames_tx) == int(m.frames_rx) == 2000, m
        assert m.latency.maximum_ns > 0, m
        req = g.metrics_request()
        req.flow.flow_names = ["ghost"]
        with pytest.raises(Exception) as refused:
            g.get_metrics(req)
        assert "ghost" in errors_of(g, refused.value), refused.value
        g.close()
    finally:
        c.stop()


def test_a_port_on_an_unknown_agent_is_refused_naming_the_agent(api, hosts):
    cfg = new_config(api, hosts, via_controller)
    cfg.ports.port(name="z", location="hostz/afpacket:eth1")
    f = add_flow(cfg, hosts, FlowSpec("a_to_z", "hosta", "hostb", packets=10))
    f.tx_rx.port.rx_names = ["z"]
    with pytest.raises(Exception) as info:
        api.set_config(cfg)
    said = errors_of(api, info.value)
    assert "hostz" in said, said
    # The controller goes on: a config of known agents is taken.
    api.set_config(new_config(api, hosts, via_controller))
    assert sorted(p.name for p in api.get_config().ports) == ["a", "b", "c"]


def test_an_agent_that_is_down_at_set_config_is_named(hosts, agents):
    # A controller of its own, with hosta's agent and a spare agent in hostc (another port),
    # which crashes (kill -9) before the config comes.
    spare = hosts.start_agent("hostc", new_token("spare"), port=8444, name="spare")
    controller = None
    try:
        controller = Server("controller-spare",
                            controller_args([agents["hosta"], spare]))
        hosts.kill_agent(spare)
        api = snappi.api(location=controller.url, verify=False)
        cfg = api.config()
        cfg.ports.port(name="a", location=via_controller(hosts["hosta"]))
        cfg.ports.port(name="c", location="spare/afpacket:eth1")
        add_flow(cfg, hosts, FlowSpec("a_to_c", "hosta", "hostc", packets=10))
        with pytest.raises(Exception) as info:
            api.set_config(cfg)
        said = errors_of(api, info.value)
        assert "spare" in said, said
        assert controller.alive(), controller.output()
    finally:
        hosts.stop_agent(spare)
        if controller:
            controller.stop()


@pytest.mark.parametrize("given_as,signed", [("flags", "by a CA"), ("file", "by a CA"),
                                             ("flags", "self")])
def test_agents_over_https_given_by_flags_or_by_file(hosts, tmp_path, given_as, signed):
    """HTTPS agents whose certificate a CA of the test's own signed, or a self-signed one:
    the controller trusts it with `--agent-ca FILE` (the CA, or the certificate itself), or
    the `ca` of each agent's table in `--agents FILE`."""
    ips = [h.mgmt_ip for h in hosts]
    if signed == "self":
        cert, key = make_self_signed(tmp_path, ips)
        ca = cert
    else:
        ca, cert, key = make_certificates(tmp_path, ips)
    tls_agents = []
    controller = None
    try:
        for name in ("hostb", "hostc"):
            tls_agents.append(hosts.start_agent(name, new_token(name), port=8445,
                                                tls=(cert, key)))
        if given_as == "flags":
            args = controller_args(tls_agents, ca=ca)
        else:
            path = tmp_path / "agents.toml"
            path.write_text("".join(
                f'[{a.name}]\nurl = "{a.bare_url}"\ntoken = "{a.token}"\nca = "{ca}"\n\n'
                for a in tls_agents))
            args = ["--agents", str(path)]
        controller = Server(f"controller-tls-{given_as}", args)
        for agent in tls_agents:
            # The agents' certificate, as the controller has to check it, is good.
            status, body = http_get(agent.bare_url + "/capabilities/version", agent.token,
                                    cafile=ca)
            assert status == 200, (agent, status, body)
        api = snappi.api(location=controller.url, verify=False)
        spec = FlowSpec("b_to_c", "hostb", "hostc", packets=2000, pps=10000)
        cfg = api.config()
        for h in (hosts["hostb"], hosts["hostc"]):
            cfg.ports.port(name=h.name[-1], location=via_controller(h))
        add_flow(cfg, hosts, spec)
        api.set_config(cfg)
        transmit(api, "start")
        m = wait_stopped(api, [spec.name])
        assert (int(m[spec.name].frames_tx), int(m[spec.name].frames_rx)) == (2000, 2000), \
            as_dict(m[spec.name])
        ports = port_metrics(api)
        assert (int(ports["b"].frames_tx), int(ports["c"].frames_rx)) == (2000, 2000), ports
        transmit(api, "stop")
    finally:
        for agent in tls_agents:
            hosts.stop_agent(agent)
        if controller:
            controller.stop()


def test_an_agent_with_a_certificate_nobody_signed_is_refused(hosts, tmp_path):
    """Without --agent-ca, an agent's self-signed certificate is not trusted: the controller
    says which agent it could not reach (at start, or at the config that needs it)."""
    cert, key = tmp_path / "self.pem", tmp_path / "self-key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=untrusted", "-keyout", str(key), "-out", str(cert),
                    "-addext", f"subjectAltName=IP:{hosts['hostb'].mgmt_ip}"],
                   check=True, capture_output=True)
    agent = hosts.start_agent("hostb", new_token("untrusted"), port=8446, tls=(cert, key),
                              name="untrusted")
    controller = None
    try:
        try:
            controller = Server("controller-untrusted", controller_args([agent]))
        except ServerExited as refused:
            # Refused at start: fine, if it is this refusal and names the agent.
            assert "untrusted" in refused.output, refused
            assert "unexpected argument" not in refused.output, refused
            return
        api = snappi.api(location=controller.url, verify=False)
        cfg = api.config()
        cfg.ports.port(name="b", location="untrusted/afpacket:eth1")
        with pytest.raises(Exception) as info:
            api.set_config(cfg)
        said = errors_of(api, info.value)
        assert "untrusted" in said, said
    finally:
        hosts.stop_agent(agent)
        if controller:
            controller.stop()
