"""An RFC 2544-style throughput search written with snappi alone: the highest rate at
which the device under test loses no frame, by binary search over trials.

    strobe lab up --dut tbf:50mbit      # a DUT with a known limit
    strobe serve &
    .venv/bin/python rate_search.py [http://127.0.0.1:8443 [LOW_PPS HIGH_PPS]]

This shows the OTG API is enough to write one; strobe's own RFC 2544 methodology (aimed
search, NDR and PDR at once, every trial kept) is `rfc2544.py` beside it.
"""
import sys

import snappi

from helpers import lab_flow, run_to_end

url = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8443"
api = snappi.api(location=url, verify=False)
SIZE, TRIAL_SECONDS, RESOLUTION = 128, 2, 0.01
LOW, HIGH = (int(x) for x in (sys.argv[2:4] if len(sys.argv) > 3 else (1_000, 200_000)))


def trial(pps):
    cfg, flow = lab_flow(api, "trial")   # the lab's two ports, a flow from one to the other
    eth, ip, udp = flow.packet.ethernet().ipv4().udp()
    ip.src.value, ip.dst.value = "198.18.0.1", "198.18.1.1"
    flow.size.fixed = SIZE
    flow.rate.pps = int(pps)
    flow.duration.fixed_packets.packets = int(pps * TRIAL_SECONDS)
    flow.metrics.enable = True
    api.set_config(cfg)
    m = run_to_end(api, "trial", poll_seconds=0.1)
    return m.frames_tx, m.frames_rx


low, high = LOW, HIGH
while (high - low) / high > RESOLUTION:
    rate = (low + high) / 2
    sent, received = trial(rate)
    ok = sent == received
    print(f"{rate:>10.0f} pps: sent {sent}, received {received} -> {'pass' if ok else 'loss'}")
    low, high = (rate, high) if ok else (low, rate)
print(f"throughput: {low:.0f} pps of {SIZE}-byte frames "
      f"({low * (SIZE + 20) * 8 / 1e6:.1f} Mbit/s on the wire)")
