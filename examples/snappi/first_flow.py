"""A first snappi script against `strobe serve`: two ports, one UDP flow, read the metrics.

    strobe lab up --dut cable               # as root (or sudo); or use your own interfaces below
    strobe serve &                          # http://127.0.0.1:8443
    bash setup.sh && .venv/bin/python first_flow.py [http://127.0.0.1:8443]

Written as for any OTG traffic generator: only the URL and the port locations are strobe's.
"""
import sys
import time

import snappi

api = snappi.api(location=sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8443",
                 verify=False)
cfg = api.config()
# Locations: lab:tx / lab:rx (the lab's ends), an interface (eth1, NETNS/IFACE), or
# afxdp:IFACE@QUEUE for AF_XDP.
cfg.ports.port(name="p1", location="lab:tx").port(name="p2", location="lab:rx")

flow = cfg.flows.flow(name="udp")[-1]
flow.tx_rx.port.tx_name, flow.tx_rx.port.rx_names = "p1", ["p2"]
eth, ip, udp = flow.packet.ethernet().ipv4().udp()   # lab ports fill in the MACs
ip.src.value, ip.dst.value = "198.18.0.1", "198.18.1.1"
udp.src_port.value = 1000
udp.dst_port.increment.start, udp.dst_port.increment.count = 2000, 100
flow.size.fixed = 128
flow.rate.pps = 100_000
flow.duration.fixed_packets.packets = 200_000
flow.metrics.enable = True
api.set_config(cfg)

cs = api.control_state()
cs.choice = cs.TRAFFIC
cs.traffic.choice = cs.traffic.FLOW_TRANSMIT
cs.traffic.flow_transmit.state = cs.traffic.flow_transmit.START
api.set_control_state(cs)

req = api.metrics_request()
req.flow.flow_names = ["udp"]
while True:
    m = api.get_metrics(req).flow_metrics[0]
    print(f"{m.transmit:8} tx {m.frames_tx:>8} rx {m.frames_rx:>8} ({m.frames_tx_rate:,.0f} pps)")
    if m.transmit == "stopped":
        break
    time.sleep(0.5)

cs.traffic.flow_transmit.state = cs.traffic.flow_transmit.STOP
api.set_control_state(cs)           # waits for the receivers' drain: counts are final
m = api.get_metrics(req).flow_metrics[0]
print(f"final: sent {m.frames_tx}, received {m.frames_rx}, loss {m.loss:.4f} %")
