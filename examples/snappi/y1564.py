"""ITU-T Y.1564 service activation from a script: strobe's own endpoint beside OTG's (POST
/strobe/y1564, the same fields as `strobe y1564`'s options), next to a snappi session on
the same server.

    strobe lab up --dut tbf:50mbit      # a DUT with a known limit
    strobe serve &
    .venv/bin/python y1564.py [http://127.0.0.1:8443 [CIR EIR]]
"""
import json
import sys
import urllib.request

import snappi

url = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8443"
cir, eir = sys.argv[2:4] if len(sys.argv) > 3 else ("40mbit", "20mbit")
api = snappi.api(location=url, verify=False)
print("server:", api.get_version().app_version)

request = {
    "tests": ["configuration"],
    "step": "1s", "wait": "200ms", "settle": "100ms",
    "services": [{"name": "data", "size": "1518", "cir": cir, "eir": eir,
                  "max_flr_pct": 0, "max_ftd": "20ms", "max_fdv": "20ms"}],
}
post = urllib.request.Request(f"{url}/strobe/y1564", data=json.dumps(request).encode(),
                              headers={"Content-Type": "application/json"})
with urllib.request.urlopen(post, timeout=600) as reply:
    report = json.load(reply)

for service in report["services"]:
    print(f"service {service['service']['name']}:")
    for step in service["configuration"]:
        kind = step["step"]["kind"]
        name = f"{step['step']['pct']:.0f} % of CIR" if kind == "cir" else kind
        m, v = step["measured"], step["verdict"]
        print(f"  {name:>14}: offered {m['offered_bps'] / 1e6:7.2f} Mbit/s, IR "
              f"{m['ir_bps'] / 1e6:7.2f} Mbit/s, FLR {m['flr'] * 100:.4f} % -> "
              f"{'PASS' if v['pass'] else 'FAIL ' + '; '.join(f['text'] for f in v['failed'])}")
print("Y.1564:", "PASS" if report["pass"] else "FAIL")
