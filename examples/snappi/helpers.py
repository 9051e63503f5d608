"""The plumbing the snappi examples beside this file share: the lab's two ports with one flow
between them, starting and stopping the flows, and reading a flow's metrics. Plain OTG, as
for any traffic generator; only the port locations are strobe's."""
import time


def lab_flow(api, name):
    """A new config of two ports, p1 and p2, and one flow `name` from p1 to p2: (config, flow)."""
    cfg = api.config()
    # Locations: lab:tx / lab:rx (the lab's ends), an interface (eth1, NETNS/IFACE), or
    # afxdp:IFACE@QUEUE for AF_XDP.
    cfg.ports.port(name="p1", location="lab:tx").port(name="p2", location="lab:rx")
    flow = cfg.flows.flow(name=name)[-1]
    flow.tx_rx.port.tx_name, flow.tx_rx.port.rx_names = "p1", ["p2"]
    return cfg, flow


def set_transmit(api, state):
    """Starts ("start") or stops ("stop") every flow. Stopping returns once the receivers have
    drained: the counts read after it are final."""
    cs = api.control_state()
    cs.choice = cs.TRAFFIC
    cs.traffic.choice = cs.traffic.FLOW_TRANSMIT
    cs.traffic.flow_transmit.state = state
    api.set_control_state(cs)


def flow_metrics(api, name):
    """The metrics of flow `name` as they stand."""
    req = api.metrics_request()
    req.flow.flow_names = [name]
    return api.get_metrics(req).flow_metrics[0]


def run_to_end(api, name, poll_seconds):
    """Starts the flows, waits until flow `name` has sent all it was to send, stops them and
    returns the flow's final metrics."""
    set_transmit(api, "start")
    while flow_metrics(api, name).transmit != "stopped":
        time.sleep(poll_seconds)
    set_transmit(api, "stop")
    return flow_metrics(api, name)
