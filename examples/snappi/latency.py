"""Latency of a flow through the device under test, with snappi and `strobe serve`.

OTG reports minimum, average and maximum; strobe measures every frame and adds its
percentiles (to p99.9999) under the `x_strobe` key of each flow metric, which snappi's
objects do not carry: read them from the raw reply (below, with requests).

    strobe lab up                       # a Linux router as the DUT
    strobe serve &
    .venv/bin/python latency.py [http://127.0.0.1:8443]
"""
import json
import sys

import requests
import snappi

from helpers import lab_flow, run_to_end

url = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8443"
api = snappi.api(location=url, verify=False)
cfg, flow = lab_flow(api, "timed")   # the lab's two ports, a flow from one to the other
eth, ip, udp = flow.packet.ethernet().ipv4().udp()
ip.src.value, ip.dst.value = "198.18.0.1", "198.18.1.1"
flow.rate.pps = 50_000
flow.duration.fixed_packets.packets = 100_000
flow.metrics.enable = True
flow.metrics.latency.enable = True
api.set_config(cfg)
m = run_to_end(api, "timed", poll_seconds=0.2)   # after the receivers' drain: final figures

print(f"OTG: min {m.latency.minimum_ns:.0f} ns, avg {m.latency.average_ns:.0f} ns, "
      f"max {m.latency.maximum_ns:.0f} ns over {m.frames_rx} frames")
raw = requests.post(f"{url}/monitor/metrics", json={"choice": "flow", "flow": {"flow_names": ["timed"]}})
detail = raw.json()["flow_metrics"][0].get("x_strobe", {})
print("strobe:", json.dumps(detail.get("latency", {}), indent=2))
