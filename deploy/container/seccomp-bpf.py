#!/usr/bin/env python3
"""Writes the container engine's default seccomp profile with bpf() allowed to a container
that holds CAP_BPF (the default allows it only with CAP_SYS_ADMIN and answers EPERM
otherwise, so AF_XDP receive ports and xdp-live ports fail inside the agent container with
"cannot create the XSKMAP ... Operation not permitted").

    python3 seccomp-bpf.py [DEFAULT_PROFILE] > /etc/strobe/seccomp.json
    podman run --security-opt seccomp=/etc/strobe/seccomp.json ...

DEFAULT_PROFILE: /usr/share/containers/seccomp.json (podman's, Debian's containers-common)
unless given; docker's is moby's profiles/seccomp/default.json. Nothing else is changed.
"""
import json
import sys

path = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/containers/seccomp.json"
with open(path) as f:
    profile = json.load(f)

rules = []
for rule in profile["syscalls"]:
    names = rule["names"]
    excludes = rule.get("excludes") or {}
    # The rule that refuses bpf() to containers without CAP_SYS_ADMIN: bpf leaves it.
    if "bpf" in names and rule.get("action") == "SCMP_ACT_ERRNO" and \
            "CAP_SYS_ADMIN" in excludes.get("caps", []):
        names = [n for n in names if n != "bpf"]
        if not names:
            continue
        rule = dict(rule, names=names)
    rules.append(rule)
rules.append({"names": ["bpf"], "action": "SCMP_ACT_ALLOW",
              "includes": {"caps": ["CAP_BPF"]}, "excludes": {"caps": ["CAP_SYS_ADMIN"]}})
rules.append({"names": ["bpf"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
              "excludes": {"caps": ["CAP_SYS_ADMIN", "CAP_BPF"]}})
profile["syscalls"] = rules
json.dump(profile, sys.stdout, indent=1)
sys.stdout.write("\n")
