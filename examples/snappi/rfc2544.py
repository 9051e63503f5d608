"""RFC 2544 throughput, latency and loss curve from a script: strobe's own endpoint beside
OTG's (POST /strobe/rfc2544, the same fields as `strobe rfc2544`'s options), next to a
snappi session on the same server.

    strobe lab up --dut tbf:50mbit      # a DUT with a known limit
    strobe serve &
    .venv/bin/python rfc2544.py [http://127.0.0.1:8443 [SIZE,SIZE,...]]
"""
import json
import sys
import urllib.request

import snappi

url = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8443"
sizes = sys.argv[2].split(",") if len(sys.argv) > 2 else ["256", "1518"]
api = snappi.api(location=url, verify=False)
print("server:", api.get_version().app_version)

request = {
    "tests": ["throughput", "latency"],
    "sizes": sizes,
    "trial": "1s", "wait": "200ms", "settle": "100ms",
    "latency_loads_pct": [100, 50],
}
post = urllib.request.Request(f"{url}/strobe/rfc2544", data=json.dumps(request).encode(),
                              headers={"Content-Type": "application/json"})
with urllib.request.urlopen(post, timeout=600) as reply:
    report = json.load(reply)

for t in report["throughput"]:
    ndr = t["outcomes"][0]["rate"]
    print(f"{t['size']['size']:>6} B: NDR {ndr['pps']:.0f} pps, {ndr['l1_bps'] / 1e6:.3f} Mbit/s"
          f" at layer 1, after {len(t['trials'])} trials")
for lat in report["latency"]:
    for p in lat["points"]:
        s = p["latency"]
        print(f"{lat['size']['size']:>6} B at {p['load_pct']:.0f} %: latency p50 "
              f"{s['p50_ns'] / 1e3:.1f} µs, p99 {s['p99_ns'] / 1e3:.1f} µs over {s['count']} frames")
print(f"{report['trials']} trials in {report['elapsed_ns'] / 1e9:.1f} s")
