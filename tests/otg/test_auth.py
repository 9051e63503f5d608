"""The server's token: with one, every request without it is refused (401, an OTG error,
WWW-Authenticate), and unmodified snappi gets in with the token in its location URL; a
server listening beyond loopback makes one up and prints it."""
import re
import subprocess
import time

import pytest
import requests
import snappi

from conftest import STROBE, Server
from otg_helpers import add_flow, base_config, run_to_end

TOKEN = "0123456789abcdef-test-token"


@pytest.fixture
def token_server(lab):
    s = Server(lab, ["--token", TOKEN])
    try:
        yield s
    finally:
        s.stop()


def test_requests_without_the_token_are_refused(token_server):
    for path in ["/capabilities/version", "/metrics", "/config"]:
        r = requests.get(token_server.url + path, timeout=10)
        assert r.status_code == 401, (path, r.text)
        assert r.headers["www-authenticate"].startswith("Basic"), r.headers
        body = r.json()
        assert body["code"] == 401 and "token" in body["errors"][0], body
        wrong = requests.get(token_server.url + path, timeout=10,
                             headers={"Authorization": "Bearer " + TOKEN[:-1] + "x"})
        assert wrong.status_code == 401, path
    ok = requests.get(token_server.url + "/metrics", timeout=10,
                      headers={"Authorization": "Bearer " + TOKEN})
    assert ok.status_code == 200 and "strobe_runs_started_total" in ok.text


def test_snappi_gets_in_with_the_token_in_its_location(token_server, lab):
    without = snappi.api(location=token_server.url, verify=False)
    with pytest.raises(Exception) as refused:
        without.get_config()
    assert "401" in str(refused.value) or "token" in str(refused.value)
    url = token_server.url.replace("http://", f"http://strobe:{TOKEN}@")
    api = snappi.api(location=url, verify=False, version_check=True)
    cfg = base_config(api, lab)
    add_flow(cfg, "f", packets=100).packet.ethernet().ipv4().udp()
    api.set_config(cfg)
    m = run_to_end(api, ["f"])
    assert (m["f"].frames_tx, m["f"].frames_rx) == (100, 100)


def test_beyond_loopback_a_token_is_made_up_and_required(lab):
    # Inside the lab's rx namespace, on rx0's address: reachable only from that namespace.
    address = subprocess.run(
        ["ip", "netns", "exec", lab.rx_netns, "ip", "-4", "-o", "addr", "show", lab.rx_iface],
        capture_output=True, text=True, check=True).stdout.split()[3].split("/")[0]
    proc = subprocess.Popen(
        ["ip", "netns", "exec", lab.rx_netns, STROBE, "serve", "--listen", f"{address}:18543",
         "--lab", lab.prefix], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        line = proc.stderr.readline()
        found = re.search(r"the token ([0-9a-f]{32})", line)
        assert found, line
        token = found.group(1)

        def status(headers):
            probe = ("import sys, urllib.request, urllib.error\n"
                     f"req = urllib.request.Request('http://{address}:18543/capabilities/version',"
                     f" headers={headers!r})\n"
                     "try:\n print(urllib.request.urlopen(req, timeout=10).status)\n"
                     "except urllib.error.HTTPError as e:\n print(e.code)\n")
            out = subprocess.run(["ip", "netns", "exec", lab.rx_netns, "python3", "-c", probe],
                                 capture_output=True, text=True, timeout=30)
            return out.stdout.strip() or out.stderr

        deadline = time.time() + 10
        while status({}) not in ("401", "200") and time.time() < deadline:
            time.sleep(0.1)
        assert status({}) == "401"
        assert status({"Authorization": "Bearer " + token}) == "200"
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_a_token_that_cannot_travel_is_refused():
    for bad in ["short", "with@and/in-a-url-0123", "nön-ascii-token-0123"]:
        out = subprocess.run([STROBE, "serve", "--listen", "127.0.0.1:0", "--token", bad],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode != 0 and "at least 16 characters" in out.stderr, (bad, out.stderr)
