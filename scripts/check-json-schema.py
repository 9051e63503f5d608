#!/usr/bin/env python3
"""Validates real `--json` documents (gen, gen --rates, analyze, and through a lab rfc2544,
y1564 and trains) against the published JSON Schemas (docs/schema/*.schema.json) with an
independent validator (Python's jsonschema).

Usage: check-json-schema.py STROBE_BINARY

Runs on the null and pcap: backends (no root needed) and, as root, through a virtual lab
(receive side, loss and latency filled in). Also checks that a document missing a required
field is refused, so that the check itself can fail. Exits non-zero on any failure.
"""

import json
import os
import subprocess
import sys
import tempfile

import jsonschema

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def schema(kind):
    with open(os.path.join(ROOT, "docs", "schema", f"{kind}.schema.json")) as f:
        return json.load(f)


def strobe(binary, scratch, args, allowed=(0,)):
    """Runs strobe with its history and state under the scratch folder; returns stdout.
    `allowed`: the exit codes that are not a failure (3: a failed verdict, still a document)."""
    env = dict(os.environ, STROBE_DB=os.path.join(scratch, "runs.db"),
               STROBE_STATE_DIR=os.path.join(scratch, "state"))
    out = subprocess.run([binary, *args], cwd=scratch, env=env, capture_output=True, text=True)
    if out.returncode not in allowed:
        sys.exit(f"strobe {' '.join(args)} failed ({out.returncode}):\n{out.stderr}")
    return out.stdout


def validate(kind, document, what):
    validator = jsonschema.Draft202012Validator(schema(kind))
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.path))
    if errors:
        for e in errors[:10]:
            print(f"{what}: {'/'.join(map(str, e.path))}: {e.message}", file=sys.stderr)
        sys.exit(f"{what}: {len(errors)} schema violation(s) against docs/schema/{kind}.schema.json")
    print(f"ok: {what} matches docs/schema/{kind}.schema.json")


def main():
    binary = os.path.abspath(sys.argv[1])
    udp = ["--udp", "198.18.0.1:1000-198.18.1.1:2000"]
    with tempfile.TemporaryDirectory(prefix="strobe-schema-") as scratch:
        runs = {
            "null backend": ["gen", "--port", "null", *udp, "--count", "2000", "--rate",
                             "100kpps", "-q", "--json", "-"],
            "pcap: backend": ["gen", "--port", "pcap:trace.pcap", *udp, "--size", "imix",
                              "--count", "500", "--rate", "10kpps", "-q", "--json", "-"],
        }
        for what, args in runs.items():
            document = json.loads(strobe(binary, scratch, args))
            validate("gen", document, what)
            if what == "null backend":
                broken = dict(document)
                del broken["schema_version"]
                try:
                    jsonschema.validate(broken, schema("gen"))
                except jsonschema.ValidationError:
                    print("ok: a document without schema_version is refused")
                else:
                    sys.exit("the schema accepted a document without schema_version")
        # A flow with metric tags: its `tagged` results.
        with open(os.path.join(scratch, "tagged.toml"), "w") as f:
            f.write('[[ports]]\nname = "p"\nlocation = "null"\n[[flows]]\nname = "t"\n'
                    'tx = "p"\nduration = { fixed_packets = { packets = 300 } }\n'
                    '[[flows.packet]]\nethernet = { src = "02:00:00:00:00:01", dst = "02:00:00:00:00:02" }\n'
                    '[[flows.packet]]\nipv4 = {}\n'
                    '[[flows.packet]]\nudp = { src_port = { values = [1, 2, 3], '
                    'metric_tags = [{ name = "sport" }] } }\n')
        document = json.loads(strobe(binary, scratch, ["gen", "tagged.toml", "-q", "--json", "-"]))
        if len(document["flows"][0].get("tagged") or []) != 3:
            sys.exit("the tagged flow's document has no 3 tag values")
        validate("gen", document, "a flow with metric tags")
        sweep = ["gen", "--port", "null", *udp, "--rates", "10kpps,20kpps", "--count", "300",
                 "-q", "--json", "-"]
        validate("gen-rates", json.loads(strobe(binary, scratch, sweep)), "a --rates sweep")
        analyze = ["analyze", "trace.pcap", "--json", "-"]
        validate("analyze", json.loads(strobe(binary, scratch, analyze)), "analyze of a pcap")
        # The history these runs were recorded in (the scratch folder's own).
        listed = json.loads(strobe(binary, scratch, ["runs", "list", "--json", "-"]))
        if not listed["runs"]:
            sys.exit("runs list is empty: the runs above were not recorded")
        validate("runs-list", listed, "runs list")
        newest = listed["runs"][-1]["id"]
        shown = strobe(binary, scratch, ["runs", "show", str(newest), "--json", "-"])
        validate("runs-show", json.loads(shown), "runs show")
        if os.geteuid() == 0:
            prefix = f"sc{os.getpid() % 100000}"
            strobe(binary, scratch, ["lab", "up", "--prefix", prefix, "--dut", "bridge"])
            try:
                lab = ["gen", "--lab", prefix, "--port", "lab:tx", "--rx", "lab:rx", *udp,
                       "--count", "2000", "--rate", "20kpps", "-q", "--json", "-"]
                document = json.loads(strobe(binary, scratch, lab))
                if not document["flows"][0].get("latency"):
                    sys.exit("the lab run measured no latency: nothing to validate there")
                validate("gen", document, "a lab run (receive side and latency)")
                # A reflector on the lab's far end sends back a round trip's frames.
                reflector = subprocess.Popen(
                    [binary, "reflect", "lab:rx", "--lab", prefix, "--count", "500", "--json",
                     "-"], cwd=scratch, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    text=True, env=dict(os.environ, STROBE_DB=os.path.join(scratch, "runs.db")))
                try:
                    # It says so on stderr once it reflects.
                    started = reflector.stderr.readline()
                    if "reflecting on" not in started:
                        sys.exit(f"the reflector did not start: {started}")
                    strobe(binary, scratch, ["gen", "--lab", prefix, "--port", "lab:tx", "--rx",
                                             "lab:tx", *udp, "--count", "500", "--rate",
                                             "5kpps", "-q"])
                    out, _ = reflector.communicate(timeout=60)
                finally:
                    if reflector.poll() is None:
                        reflector.kill()
                        reflector.wait()
                document = json.loads(out)
                if document["reflected"] != 500:
                    sys.exit(f"the reflector sent back {document['reflected']} of 500 frames")
                validate("reflect", document, "a reflector's run")
                # The methodologies on short profiles (their figures are not the point here).
                quick = ["--lab", prefix, "--quiet", "--wait", "100ms", "--settle", "100ms",
                         "--json", "-"]
                methodologies = {
                    "rfc2544": ["rfc2544", "throughput", "--sizes", "128", "--max-rate",
                                "20kpps", "--trial", "500ms", *quick],
                    "y1564": ["y1564", "--service",
                              "name=s,udp=198.18.0.1:1000-198.18.1.1:2000,cir=5mbit",
                              "--step", "500ms", "--performance", "1s", *quick],
                    "trains": ["trains", "convoy", "--size", "1000", "--frames", "20",
                               "--trains", "5", "--gap", "2ms", "--lab", prefix, "--quiet",
                               "--json", "-"],
                }
                # Nothing polices on a bridge: Y.1564's policing step fails (exit code 3).
                for kind, args in methodologies.items():
                    document = json.loads(strobe(binary, scratch, args, allowed=(0, 3)))
                    validate(kind, document, f"a {kind} run")
                    # Each names the lab's DUT it measured, as a run's results do.
                    dut = document.get("device_under_test") or {}
                    if (dut.get("kind"), dut.get("lab")) != ("bridge", prefix):
                        sys.exit(f"the {kind} document names no bridge DUT on lab {prefix}: "
                                 f"{dut}")
            finally:
                strobe(binary, scratch, ["lab", "down", "--prefix", prefix])
            # The forwarder study builds (and removes) a lab of its own under the prefix.
            study = ["study", "forwarders", "--duts", "router", "--loads", "constant,poisson",
                     "--rates", "20kpps", "--frames", "2000", "--lab", prefix, "--quiet",
                     "--json", "-"]
            try:
                document = json.loads(strobe(binary, scratch, study))
            finally:
                strobe(binary, scratch, ["lab", "down", "--prefix", prefix])
            if [run["latency"] is not None for run in document["runs"]] != [True, True]:
                sys.exit(f"the study's two runs measured no latency: {document['runs']}")
            validate("study", document, "a forwarder study")
        else:
            print("note: not root, the lab run (receive side, latency) is left out")


if __name__ == "__main__":
    main()
