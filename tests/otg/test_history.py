"""Runs started through `strobe serve` land in the run history: a snappi traffic run (with its
OTG config, its results and every flow's latency histogram, decoded here by HdrHistogram's
Python implementation and checked against snappi's own metrics), a run the server's shutdown
stops, and a methodology run through strobe's endpoint."""
import json
import subprocess
import threading
import time

import requests
import snappi
from hdrh.histogram import HdrHistogram

from conftest import STROBE, Server
from otg_helpers import add_flow, base_config, flow_metrics, run_to_end, transmit


def runs(db, *args):
    out = subprocess.run([STROBE, "runs", "--db", db, *args], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


def listed_runs(db):
    """`strobe runs list --json`'s rows (its document is {version, schema, ..., runs})."""
    return json.loads(runs(db, "list", "--json", "--limit", "0"))["runs"]


def shown_run(db, run_id):
    """`strobe runs show ID --json`'s run (its document is {version, schema, ..., run})."""
    return json.loads(runs(db, "show", str(run_id), "--json"))["run"]


def wait_for_runs(db, n, timeout=20):
    """The history's runs once there are `n` (a run is recorded by its watcher once over)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        rows = listed_runs(db)
        if len(rows) >= n:
            return rows
        time.sleep(0.2)
    raise AssertionError(f"{n} runs expected in the history, found {rows}")


def test_server_runs_are_recorded_with_config_results_and_histograms(lab, tmp_path):
    db = str(tmp_path / "runs.db")
    server = Server(lab, extra=("--db", db))
    try:
        api = snappi.api(location=server.url, verify=False)
        cfg = base_config(api, lab)
        f = add_flow(cfg, "timed", packets=3000, pps=10000, size=256)
        f.packet.ethernet().ipv4().udp()
        f.metrics.latency.enable = True
        f.metrics.latency.mode = f.metrics.latency.STORE_FORWARD
        api.set_config(cfg)
        final = run_to_end(api, ["timed"])["timed"]
        assert final.frames_rx == 3000, final

        rows = wait_for_runs(db, 1)
        row = rows[0]
        assert (row["kind"], row["origin"]) == ("otg", "api"), row
        assert row["command"] == "POST /control/state flow_transmit start timed", row
        # Every frame left before the stop request (which only ended the drain): completed.
        assert row["outcome"] == "completed", row
        assert row["summary"]["frames_tx"] == 3000 and row["summary"]["frames_rx"] == 3000, row
        run = shown_run(db, row["id"])
        # The config as the client sent it, and the results' schema of `strobe gen --json`.
        assert run["config"]["flows"][0]["name"] == "timed", run["config"]
        assert run["config"]["flows"][0]["duration"]["fixed_packets"]["packets"] == 3000
        assert run["results"]["flows"][0]["frames_rx"] == 3000
        assert "kernel" in run["timestamp_sources"]["timed"]["rx"], run["timestamp_sources"]
        # The stored histogram, decoded independently, holds every frame, and its extremes
        # are snappi's latency figures within the histogram's precision (3 digits).
        [hist] = run["histograms"]
        h = HdrHistogram.decode(hist["encoded"])
        assert h.get_total_count() == 3000
        lat = final.latency
        assert abs(h.get_max_value() - lat.maximum_ns) <= lat.maximum_ns * 1e-3 + 1, (
            h.get_max_value(), lat.maximum_ns)
        assert abs(h.get_min_value() - lat.minimum_ns) <= lat.minimum_ns * 1e-3 + 1, (
            h.get_min_value(), lat.minimum_ns)
        assert abs(h.get_mean_value() - lat.average_ns) <= lat.average_ns * 2e-3 + 1

        # The same history over HTTP (strobe's endpoints beside OTG's), as the CLI has it.
        listed = requests.get(f"{server.url}/strobe/runs", params={"limit": 0}, timeout=10)
        assert listed.status_code == 200, listed.text
        assert listed.json() == listed_runs(db)
        one = requests.get(f"{server.url}/strobe/runs/{row['id']}", timeout=10).json()
        assert one == run
        cmp = requests.get(f"{server.url}/strobe/runs/compare",
                           params={"ids": f"{row['id']},{row['id']}"}, timeout=10).json()
        assert [s["name"] for s in cmp["series"]] == [f"#{row['id']} timed"] * 2, cmp
        series = cmp["series"][0]
        assert series["stats"]["count"] == 3000
        assert series["stats"]["p50_ns"] == h.get_value_at_percentile(50)
        # CCDF points: latency rising, the fraction slower falling to 0 at the maximum.
        xs = [p[0] for p in series["ccdf"]]
        ys = [p[1] for p in series["ccdf"]]
        assert xs == sorted(xs) and ys == sorted(ys, reverse=True) and ys[-1] == 0
        assert xs[-1] == h.get_max_value()
        # A label over HTTP, as `strobe runs label` sets it; then removed.
        url = f"{server.url}/strobe/runs/{row['id']}/label"
        assert requests.put(url, json={"label": "baseline"}, timeout=10).status_code == 200
        assert shown_run(db, row["id"])["label"] == "baseline"
        assert requests.put(url, json={"label": None}, timeout=10).status_code == 200
        assert shown_run(db, row["id"])["label"] is None
        for body in ({"label": 5}, {"text": "x"}, {"label": "x" * 1001}):
            bad = requests.put(url, json=body, timeout=10)
            assert bad.status_code == 400 and "label" in bad.text, (body, bad.text)
        assert requests.put(f"{server.url}/strobe/runs/999/label", json={"label": "x"},
                            timeout=10).status_code == 404
        for path, code, text in [("/strobe/runs/999", 404, "no run 999"),
                                 ("/strobe/runs/abc", 400, "not a run id"),
                                 ("/strobe/runs?limit=many", 400, "limit `many`"),
                                 ("/strobe/runs?colour=red", 400, "colour"),
                                 ("/strobe/runs/compare", 400, "ids=1,2")]:
            bad = requests.get(server.url + path, timeout=10)
            assert bad.status_code == code and text in bad.text, (path, bad.text)
            assert bad.json()["kind"] == "validation"

        # A run without an end, still going when the server is told to stop: recorded as
        # stopped, with what it sent.
        cfg = base_config(api, lab)
        f = add_flow(cfg, "endless", pps=5000, size=128)
        f.packet.ethernet().ipv4().udp()
        api.set_config(cfg)
        transmit(api, "start", ["endless"])
        deadline = time.time() + 10
        while flow_metrics(api, ["endless"])["endless"].frames_tx < 1000:
            assert time.time() < deadline, "the endless flow did not send"
            time.sleep(0.1)
    finally:
        server.stop()
    assert server.proc.returncode == 0, server.output()
    rows = wait_for_runs(db, 2, timeout=1)
    assert rows[1]["outcome"] == "stopped", rows[1]
    assert rows[1]["summary"]["frames_tx"] >= 1000, rows[1]


def test_a_methodology_through_the_server_is_recorded(lab, tmp_path):
    db = str(tmp_path / "runs.db")
    server = Server(lab, extra=("--db", db))
    try:
        body = {"experiment": "convoy", "size": 256, "trains": 4, "frames": 8, "gap": "2ms",
                "rx": f"afpacket:{lab.rx_netns}/{lab.rx_iface}"}
        reply = requests.post(f"{server.url}/strobe/trains", json=body, timeout=60)
        assert reply.status_code == 200, reply.text
        [row] = wait_for_runs(db, 1)
        assert (row["kind"], row["origin"], row["outcome"]) == ("trains", "api", "completed")
        run = shown_run(db, row["id"])
        assert run["config"] == body
        assert run["results"] == reply.json()
        # The convoy's trial keeps its latency histogram, named by the trial; it holds
        # every frame the report counted.
        [hist] = run["histograms"]
        assert hist["flow"].startswith("trial 1: 256 B × 8 frames, 4 trains 2.000 ms apart: "), hist["flow"]
        decoded = HdrHistogram.decode(hist["encoded"])
        assert decoded.get_total_count() == 4 * 8, decoded.get_total_count()
        # Deleted over HTTP: gone from the list.
        gone = requests.delete(f"{server.url}/strobe/runs/{row['id']}", timeout=10)
        assert gone.status_code == 200, gone.text
        assert requests.get(f"{server.url}/strobe/runs", timeout=10).json() == []
    finally:
        server.stop()


def _loss_curve(lab, sizes=("64", "128", "256", "512", "1024")):
    """An RFC 2544 loss-curve request: two 2 s trials per size on the cable."""
    return {"tests": ["loss"], "sizes": list(sizes), "max_rate": "5kpps", "trial": "2s",
            "wait": "100ms", "settle": "0s", "learning": 0,
            "rx": f"afpacket:{lab.rx_netns}/{lab.rx_iface}"}


def _start_loss_curve(server, lab):
    """A long RFC 2544 loss-curve request (five sizes, 2 s trials) in a thread; its reply
    and how long it took land in the returned dict."""
    body = _loss_curve(lab)
    out = {}

    def post():
        began = time.monotonic()
        try:
            out["reply"] = requests.post(f"{server.url}/strobe/rfc2544", json=body, timeout=120)
        finally:
            out["seconds"] = time.monotonic() - began

    thread = threading.Thread(target=post)
    thread.start()
    time.sleep(3)
    return thread, out


def test_a_methodology_ends_early_on_a_stop_request_and_on_shutdown(lab, tmp_path):
    # The loss curve would take 5 sizes × 2 trials × 2.1 s ≈ 21 s: both stops end it within
    # a trial and keep the trials done, and the history says it was stopped.
    db = str(tmp_path / "runs.db")
    server = Server(lab, extra=("--db", db))
    try:
        thread, out = _start_loss_curve(server, lab)
        # snappi's traffic stop (no traffic config is set: the stop is for the method).
        api = snappi.api(location=server.url, verify=False)
        cs = api.control_state()
        cs.choice = cs.TRAFFIC
        cs.traffic.choice = cs.traffic.FLOW_TRANSMIT
        cs.traffic.flow_transmit.state = cs.traffic.flow_transmit.STOP
        api.set_control_state(cs)
        thread.join(timeout=30)
        assert out["reply"].status_code == 200, out["reply"].text
        report = out["reply"].json()
        assert report["interrupted"] is True and 1 <= report["trials"] < 10, report
        assert out["seconds"] < 12, out
        [row] = wait_for_runs(db, 1)
        assert (row["kind"], row["outcome"]) == ("rfc2544", "stopped"), row

        # The server's shutdown (SIGTERM) ends the next one the same way, and the server
        # exits soon after instead of waiting for the method's end.
        thread, out = _start_loss_curve(server, lab)
        server.proc.terminate()
        server.proc.wait(timeout=15)
        thread.join(timeout=30)
        assert out["reply"].status_code == 200, out["reply"].text
        assert out["reply"].json()["interrupted"] is True, out["reply"].text
        assert out["seconds"] < 12, out
        rows = listed_runs(db)
        assert sorted(r["outcome"] for r in rows) == ["stopped", "stopped"], rows
    finally:
        server.stop()


def test_a_client_that_hangs_up_leaves_its_methodology_in_charge(lab, tmp_path):
    # The client gives up waiting; the method runs on (≈ 8 s) and keeps the server's
    # control: a config sent meanwhile is taken only once the method has ended and been
    # recorded, never while the method's trials still use the ports.
    db = str(tmp_path / "runs.db")
    server = Server(lab, extra=("--db", db))
    try:
        try:
            requests.post(f"{server.url}/strobe/rfc2544", json=_loss_curve(lab, ("64", "128")),
                          timeout=1.5)
            raise AssertionError("the loss curve answered within 1.5 s")
        except requests.exceptions.ReadTimeout:
            pass
        api = snappi.api(location=server.url, verify=False)
        cfg = base_config(api, lab)
        add_flow(cfg, "f1", packets=100).packet.ethernet().ipv4().udp()
        api.set_config(cfg)
        rows = listed_runs(db)
        assert [(r["kind"], r["outcome"]) for r in rows] == [("rfc2544", "completed")], rows
    finally:
        server.stop()
