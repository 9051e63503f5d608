"""The forwarder study through `strobe serve` (POST /strobe/study): it builds its own labs one
DUT after the other, replies the report `strobe study forwarders --json` writes, records each
run in the server's history on its own, removes its labs, refuses a bad request with the
field it names, and a stop request ends it with the runs done."""
import json
import os
import subprocess
import threading
import time

import requests
import snappi

from conftest import STROBE, Server
from otg_helpers import transmit


def _history(db):
    out = subprocess.run([STROBE, "runs", "--db", db, "list", "--json", "--limit", "0"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["runs"]


def _namespaces(prefix):
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in listed.splitlines() if line.startswith(f"{prefix}-")]


class StudyLab:
    """The prefix of the labs a study builds in this test, removed again at the end however
    the test ends (the study removes them itself; this is for a study that did not)."""

    def __init__(self, tag):
        self.prefix = f"{tag}{os.getpid() % 10000}"

    def __enter__(self):
        return self.prefix

    def __exit__(self, *exc):
        subprocess.run([STROBE, "lab", "down", "--prefix", self.prefix], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_the_study_through_the_server_replies_its_report_and_records_each_run(lab, tmp_path):
    db = str(tmp_path / "runs.db")
    server = Server(lab, extra=("--db", db))
    try:
        with StudyLab("sa") as prefix:
            body = {"duts": ["router", "xdp"], "loads": ["constant", "poisson"],
                    "rates": ["20kpps"], "frames": 3000, "lab": prefix}
            reply = requests.post(f"{server.url}/strobe/study", json=body, timeout=300)
            assert reply.status_code == 200, reply.text
            report = reply.json()
            assert (report["study"], report["duts"], report["loads"], report["rates_pps"]) == \
                ("forwarders", ["router", "xdp"], ["constant", "poisson"], [20000]), report
            assert report["failure"] is None and report["stopped"] is False, report
            runs = report["runs"]
            assert [(r["device_under_test"]["kind"], r["load"]) for r in runs] == [
                ("router", "constant"), ("router", "poisson"),
                ("xdp", "constant"), ("xdp", "poisson")], runs
            for r in runs:
                assert r["complete"] is True and r["outcome"] == "completed", r
                assert r["frames_tx"] == 3000, r
                # Far below either DUT's throughput: at most a frame in a hundred lost, and
                # every frame that arrived has its latency.
                assert r["frames_lost"] <= 30, r
                latency = r["latency"]
                assert latency["count"] == r["frames_tx"] - r["frames_lost"], r
                assert 0 < latency["p50_ns"] <= latency["p99_9_ns"] <= latency["max_ns"], r
                dut = r["device_under_test"]
                assert dut["lab"] == prefix and dut["software"] and dut["runs_on"], dut
            # The labs are gone.
            assert _namespaces(prefix) == [], _namespaces(prefix)

            # Each run recorded on its own, with its label and its own start.
            rows = sorted(_history(db), key=lambda row: row["id"])
            assert [row["id"] for row in rows] == [r["run_id"] for r in runs], (rows, runs)
            assert [row["label"] for row in rows] == [r["label"] for r in runs], rows
            assert all((row["kind"], row["origin"]) == ("study", "api") for row in rows), rows
            assert "dut=xdp load=poisson rate=20.00 kpps" in rows[-1]["label"], rows[-1]
            starts = [row["started_unix_ns"] for row in rows]
            assert starts == sorted(starts) and len(set(starts)) == len(starts), starts

            # A bad request: the field and what is wrong with it, and nothing runs.
            for bad, words in [({"dutz": ["router"]}, "dutz"),
                               ({"duts": ["toaster"]}, "toaster"),
                               ({"rates": ["10mbps"]}, "not bit rates"),
                               ({"duts": ["router", "router"]}, "twice"),
                               ({"frames": 0}, "--frames")]:
                refused = requests.post(f"{server.url}/strobe/study", json=bad, timeout=30)
                assert refused.status_code == 400, (bad, refused.text)
                assert words in refused.text, (bad, refused.text)
            assert len(_history(db)) == len(runs)

            # A lab already there under the study's prefix is someone's: refused, kept.
            subprocess.run([STROBE, "lab", "up", "--prefix", prefix, "--dut", "cable"],
                           check=True, stdout=subprocess.DEVNULL)
            taken = requests.post(f"{server.url}/strobe/study",
                                  json={**body, "duts": ["router"]}, timeout=30)
            assert taken.status_code == 400, taken.text
            assert f"strobe lab down --prefix {prefix}" in taken.text, taken.text
            assert sorted(_namespaces(prefix)) == [f"{prefix}-rx", f"{prefix}-tx"]
    finally:
        server.stop()


def test_a_stop_request_ends_the_study_with_the_runs_done(lab, tmp_path):
    # Two DUTs, 10 s a run: the stop after 4 s cuts the first run short, which is recorded
    # as stopped and not compared, and the study goes no further.
    db = str(tmp_path / "runs.db")
    server = Server(lab, extra=("--db", db))
    try:
        with StudyLab("sb") as prefix:
            body = {"duts": ["router", "xdp"], "loads": ["constant"], "rates": ["20kpps"],
                    "frames": 200000, "lab": prefix}
            out = {}

            def post():
                began = time.monotonic()
                out["reply"] = requests.post(f"{server.url}/strobe/study", json=body,
                                             timeout=120)
                out["seconds"] = time.monotonic() - began

            thread = threading.Thread(target=post)
            thread.start()
            time.sleep(4)
            # snappi's traffic stop (no traffic config is set: the stop is for the study).
            api = snappi.api(location=server.url, verify=False)
            transmit(api, "stop")
            thread.join(timeout=60)
            assert out["reply"].status_code == 200, out["reply"].text
            report = out["reply"].json()
            assert report["stopped"] is True, report
            [run] = report["runs"]
            assert run["complete"] is False and run["outcome"].startswith("stopped"), run
            assert 0 < run["frames_tx"] < 200000, run
            assert out["seconds"] < 20, out
            [row] = _history(db)
            assert row["outcome"].startswith("stopped"), row
            assert _namespaces(prefix) == [], _namespaces(prefix)
    finally:
        server.stop()
