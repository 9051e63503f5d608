"""strobe serve started with options: over HTTPS (a self-signed certificate, as snappi's
verify=False takes it), and without strobe's extension in the metrics."""
import subprocess

import pytest
import snappi

from conftest import Server
from otg_helpers import add_flow, base_config, run_to_end


@pytest.fixture
def tls_server(lab, tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    s = Server(lab, ["--tls-cert", str(cert), "--tls-key", str(key)], scheme="https")
    try:
        yield s
    finally:
        s.stop()


def test_a_flow_runs_over_https(tls_server, lab):
    api = snappi.api(location=tls_server.url, verify=False, version_check=True)
    cfg = base_config(api, lab)
    add_flow(cfg, "f", packets=200).packet.ethernet().ipv4().udp()
    api.set_config(cfg)
    m = run_to_end(api, ["f"])
    assert (m["f"].frames_tx, m["f"].frames_rx) == (200, 200)


def test_a_bad_certificate_is_a_clear_error(lab, tmp_path):
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate")
    out = subprocess.run(
        [__import__("conftest").STROBE, "serve", "--listen", "127.0.0.1:0",
         "--tls-cert", str(bad), "--tls-key", str(bad)],
        capture_output=True, text=True, timeout=30)
    assert out.returncode == 2, out
    assert "--tls-cert" in out.stderr and "panicked" not in out.stderr, out.stderr


def test_no_extensions_leaves_strobes_detail_out(lab):
    import requests

    s = Server(lab, ["--no-extensions"])
    try:
        api = snappi.api(location=s.url, verify=False)
        cfg = base_config(api, lab)
        add_flow(cfg, "f", packets=100).packet.ethernet().ipv4().udp()
        api.set_config(cfg)
        run_to_end(api, ["f"])
        raw = requests.post(s.url + "/monitor/metrics",
                            json={"choice": "flow", "flow": {"flow_names": []}}).json()
        flow = raw["flow_metrics"][0]
        assert flow["frames_rx"] == "100" and "x_strobe" not in flow, flow
    finally:
        s.stop()
