"""A first snappi script against `strobe serve`: two ports, one UDP flow, read the metrics.

    strobe lab up --dut cable               # as root (or sudo); or use your own interfaces below
    strobe serve &                          # http://127.0.0.1:8443
    bash setup.sh && .venv/bin/python first_flow.py [http://127.0.0.1:8443]

Written as for any OTG traffic generator: only the URL and the port locations are strobe's.
helpers.py beside it holds the plumbing the examples share: the two ports and a flow between
them, starting and stopping the flows, reading a flow's metrics.
"""
import sys
import time

import snappi

from helpers import flow_metrics, lab_flow, set_transmit

api = snappi.api(location=sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8443",
                 verify=False)
cfg, flow = lab_flow(api, "udp")   # ports p1 (lab:tx) and p2 (lab:rx), a flow from p1 to p2
eth, ip, udp = flow.packet.ethernet().ipv4().udp()   # lab ports fill in the MACs
ip.src.value, ip.dst.value = "198.18.0.1", "198.18.1.1"
udp.src_port.value = 1000
udp.dst_port.increment.start, udp.dst_port.increment.count = 2000, 100
flow.size.fixed = 128
flow.rate.pps = 100_000
flow.duration.fixed_packets.packets = 200_000
flow.metrics.enable = True
api.set_config(cfg)

set_transmit(api, "start")
while True:
    m = flow_metrics(api, "udp")
    print(f"{m.transmit:8} tx {m.frames_tx:>8} rx {m.frames_rx:>8} ({m.frames_tx_rate:,.0f} pps)")
    if m.transmit == "stopped":
        break
    time.sleep(0.5)

set_transmit(api, "stop")           # waits for the receivers' drain: counts are final
m = flow_metrics(api, "udp")
print(f"final: sent {m.frames_tx}, received {m.frames_rx}, loss {m.loss:.4f} %")
