"""The dashboard at `/` in a real browser (Debian's chromium, headless, driven by Selenium and
chromedriver): load it, set a config, start a lab run, watch the live charts update, stop it,
find the run in the history, open its report and the comparison of two runs. Screenshots go
to target/dashboard-screenshots/ (test artefacts)."""
import json
import os
import time

import pytest
import requests
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from conftest import Server

SHOTS = os.path.join(os.path.dirname(__file__), "..", "..", "target", "dashboard-screenshots")


@pytest.fixture
def browser():
    options = Options()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,1800"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def shot(driver, name):
    os.makedirs(SHOTS, exist_ok=True)
    driver.save_screenshot(os.path.join(SHOTS, name + ".png"))


def wait(driver, condition, timeout=20, what=""):
    try:
        # The page rebuilds its tables on every poll: an element read as it is replaced is
        # read again at the next poll.
        return WebDriverWait(driver, timeout, poll_frequency=0.2,
                             ignored_exceptions=[StaleElementReferenceException]).until(
            lambda d: condition(d))
    except Exception:
        shot(driver, "failed-" + what.replace(" ", "-"))
        raise AssertionError(f"the dashboard did not show {what} within {timeout} s; "
                             f"browser log: {driver.get_log('browser')}")


# Counts, per series of a uPlot chart in the element `chart_id`, the canvas pixels drawn in
# that series' colour (within a small tolerance for anti-aliasing): a chart whose drawing
# failed keeps an empty canvas however much data it holds.
PIXELS_PER_SERIES = """
const plot = arguments[0] === 'chart-ccdf' ? ccdfPlot : charts[arguments[1]].plot;
const canvas = document.querySelector('#' + arguments[0] + ' canvas');
if (!plot || !canvas) return null;
const px = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
return plot.series.slice(1).map((s) => {
  const hex = s.stroke();
  const want = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
  let n = 0;
  for (let i = 0; i < px.length; i += 4) {
    if (px[i + 3] > 200 && Math.abs(px[i] - want[0]) < 40 && Math.abs(px[i + 1] - want[1]) < 40
        && Math.abs(px[i + 2] - want[2]) < 40) n++;
  }
  return n;
});
"""


def drawn_pixels(driver, chart_id, chart=None):
    return driver.execute_script(PIXELS_PER_SERIES, chart_id, chart)


def script_errors(driver):
    """The page's own errors since the last call (failed requests are the server's replies,
    checked where they matter)."""
    return [e for e in driver.get_log("browser")
            if e["level"] == "SEVERE" and e.get("source") != "network"]


def otg_config(lab, name, packets=None, pps=5000):
    flow = {"name": name, "tx_rx": {"choice": "port", "port": {"tx_name": "tx", "rx_names": ["rx"]}},
            "size": {"choice": "fixed", "fixed": 128}, "rate": {"choice": "pps", "pps": pps},
            "metrics": {"enable": True, "latency": {"enable": True, "mode": "store_forward"}},
            "packet": [{"choice": "ethernet"}, {"choice": "ipv4"}, {"choice": "udp"}]}
    if packets:
        flow["duration"] = {"choice": "fixed_packets", "fixed_packets": {"packets": packets}}
    return {"ports": [{"name": "tx", "location": "lab:tx"},
                      {"name": "rx", "location": f"{lab.rx_netns}/{lab.rx_iface}"}],
            "flows": [flow]}


def set_editor(driver, text):
    # The editor's value set as a paste would, without typing thousands of keys.
    driver.execute_script("document.getElementById('config-text').value = arguments[0];", text)


def test_the_dashboard_runs_watches_and_compares_in_a_browser(lab, tmp_path, browser):
    db = str(tmp_path / "runs.db")
    server = Server(lab, extra=("--db", db))
    try:
        browser.get(server.url + "/")
        assert browser.title == "strobe"
        wait(browser, lambda d: d.find_element(By.ID, "server-state").text == "no config",
             what="the server's state")
        assert browser.execute_script("return typeof window.uPlot") == "function", \
            "the embedded chart library did not load"
        # Idle without a config, the page polls without failing requests: no 400s pile up in
        # the console (metrics are asked for once there is a config).
        time.sleep(2.5)
        failed = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert failed == [], failed

        # A config with a mistake: the server's own OTG error, shown beside the editor.
        bad = otg_config(lab, "live")
        bad["flows"][0]["rate"] = {"choice": "pps", "pps": -5}
        set_editor(browser, json.dumps(bad))
        browser.find_element(By.ID, "config-apply").click()
        msg = browser.find_element(By.ID, "config-message")
        wait(browser, lambda d: "error" in msg.get_attribute("class") and "rate" in msg.text,
             what="the config's error")
        reply = requests.post(server.url + "/config", json=bad, timeout=10)
        assert reply.status_code == 400 and reply.json()["errors"][0] in msg.text, (reply.text, msg.text)

        # A good one, started from the page: the flow table and the three charts move.
        set_editor(browser, json.dumps(otg_config(lab, "live")))
        browser.find_element(By.ID, "config-apply").click()
        wait(browser, lambda d: msg.text.startswith("config set"), what="the config accepted")
        browser.find_element(By.ID, "traffic-start").click()
        wait(browser, lambda d: d.find_element(By.ID, "server-state").text == "traffic running",
             what="traffic running")
        rate = browser.find_element(By.ID, "chart-rate")
        first = int(rate.get_attribute("data-updates") or 0)
        wait(browser, lambda d: int(rate.get_attribute("data-updates") or 0) >= first + 3,
             what="the rate chart updating")
        # Latency intervals drawn with values (p50 <= p99 <= max of one interval).
        wait(browser, lambda d: d.execute_script(
            "const p = charts.latency.plot; if (!p) return 0;"
            "return p.data[1].filter(v => v !== null).length;") >= 3,
             what="latency intervals on the chart")
        names, last = browser.execute_script(
            "const p = charts.latency.plot; const i = p.data[0].length - 1;"
            "return [charts.latency.names, p.data.slice(1).map(s => s[i])];")
        assert names == ["live max", "live p50", "live p99"], names
        assert 0 < last[1] <= last[2] <= last[0], (names, last)
        # Lines drawn on the canvases: every latency statistic's; of the rates, whose sent
        # and received lines lie on each other, at least one.
        wait(browser, lambda d: all(n >= 20 for n in drawn_pixels(d, "chart-latency", "latency") or [0]),
             what="the latency chart's lines drawn")
        wait(browser, lambda d: any(n >= 20 for n in drawn_pixels(d, "chart-rate", "rate") or [0]),
             what="the rate chart's lines drawn")
        # The chart draws what the server measured: its last rate sample near 5 kpps.
        rates = browser.execute_script(
            "return charts.rate.plot.data.slice(1).map(s => s[s.length - 1]);")
        assert any(4000 <= r <= 6000 for r in rates), rates
        wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#flows tbody tr td").text == "live",
             what="the flow in the table")
        shot(browser, "1-traffic-running")

        browser.find_element(By.ID, "traffic-stop").click()
        wait(browser, lambda d: d.find_element(By.ID, "server-state").text == "idle", what="traffic stopped")
        # A second, short run from the API, to compare with.
        requests.post(server.url + "/config", json=otg_config(lab, "short", packets=3000, pps=10000),
                      timeout=10).raise_for_status()
        api_reply = requests.post(server.url + "/control/state", json={
            "choice": "traffic", "traffic": {"choice": "flow_transmit",
                                             "flow_transmit": {"state": "start"}}}, timeout=10)
        api_reply.raise_for_status()
        deadline = time.time() + 20
        while len(requests.get(server.url + "/strobe/runs", timeout=10).json()) < 2:
            assert time.time() < deadline, "the two runs were not recorded"
            time.sleep(0.2)

        # The history: both runs; one opened; both compared.
        browser.find_element(By.ID, "tab-history").click()
        wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#runs tbody tr")) == 2,
             what="two runs in the history")
        runs = browser.find_elements(By.CSS_SELECTOR, "#runs tbody tr")
        commands = [r.find_elements(By.TAG_NAME, "td")[-1].text for r in runs]
        assert all("flow_transmit start" in c for c in commands), commands
        runs[-1].click()  # the oldest: the run started from the page
        wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#run-flows tbody tr"),
             what="the run's report")
        report = browser.find_element(By.ID, "run-report").text
        assert "live" in report and "stopped" in report, report
        # A label typed in the report lands in the history and in the list.
        browser.find_element(By.ID, "run-label").send_keys("irqbalance off")
        browser.find_element(By.ID, "run-label-save").click()
        wait(browser, lambda d: any("[irqbalance off]" in r.text
                                    for r in d.find_elements(By.CSS_SELECTOR, "#runs tbody tr")),
             what="the label in the list")
        labelled = [r for r in requests.get(server.url + "/strobe/runs", timeout=10).json() if r["label"]]
        assert [r["label"] for r in labelled] == ["irqbalance off"], labelled
        shot(browser, "2-history-report")
        for box in browser.find_elements(By.CSS_SELECTOR, "#runs tbody input[type=checkbox]"):
            box.click()
        assert script_errors(browser) == []
        browser.find_element(By.ID, "compare-selected").click()
        ccdf = browser.find_element(By.ID, "chart-ccdf")
        wait(browser, lambda d: ccdf.get_attribute("data-series") == "2", what="the comparison")
        assert ccdf.find_elements(By.TAG_NAME, "canvas"), "no chart drawn"
        # Both curves are on the canvas (the drawing once failed in the axis labels, leaving
        # a legend over an empty box), and the page raised nothing.
        wait(browser, lambda d: all(n >= 20 for n in drawn_pixels(d, "chart-ccdf") or [0]),
             what="both comparison curves drawn")
        assert script_errors(browser) == []
        table = browser.find_element(By.ID, "compare-table").text
        assert "live (irqbalance off)" in table and "short" in table and "p99" in table, table
        # Its numbers are the server's comparison of the stored histograms.
        ids = sorted(r["id"] for r in requests.get(server.url + "/strobe/runs", timeout=10).json())
        cmp = requests.get(server.url + "/strobe/runs/compare",
                           params={"ids": ",".join(map(str, reversed(ids)))}, timeout=10).json()
        short = next(s for s in cmp["series"] if s["flow"] == "short")
        assert f"{short['stats']['count']:,}" in table, table
        # Each curve runs to its run's slowest frame (the last step is drawn).
        ends = browser.execute_script(
            "return ccdfPlot.data.slice(1).map(ys => {"
            "  let i = ys.length - 1; while (i >= 0 && ys[i] === null) i--;"
            "  return [ccdfPlot.data[0][i], ys[i]]; });")
        for series, (x, y) in zip(cmp["series"], ends):
            assert abs(x - series["ccdf"][-1][0] / 1e3) < 1e-9, (x, series["ccdf"][-1])
            assert y == series["ccdf"][-2][1] > 0, (y, series["ccdf"][-2:])
        shot(browser, "3-comparison")

        # A filter that matches nothing empties the list; a bad one says why.
        browser.find_element(By.ID, "filter-text").send_keys("no-such-run")
        browser.find_element(By.ID, "filter-apply").click()
        wait(browser, lambda d: not d.find_elements(By.CSS_SELECTOR, "#runs tbody tr"), what="an empty list")
        browser.find_element(By.ID, "filter-since").send_keys("yesterday-ish")
        browser.find_element(By.ID, "filter-apply").click()
        wait(browser, lambda d: "since" in d.find_element(By.ID, "history-message").text,
             what="the filter's error")
    finally:
        transmit_safely(server)
        server.stop()


def transmit_safely(server):
    try:
        requests.post(server.url + "/control/state", json={
            "choice": "traffic", "traffic": {"choice": "flow_transmit",
                                             "flow_transmit": {"state": "stop"}}}, timeout=10)
    except requests.RequestException:
        pass


def test_a_short_runs_charts_keep_to_its_seconds(lab, browser):
    """A run of 451 frames makes one latency interval: its chart once spanned two years."""
    server = Server(lab)
    try:
        requests.post(server.url + "/config", json=otg_config(lab, "tiny", packets=451, pps=1000),
                      timeout=10).raise_for_status()
        browser.get(server.url + "/")
        wait(browser, lambda d: d.find_element(By.ID, "server-state").text == "idle",
             what="the server idle with a config")
        requests.post(server.url + "/control/state", json={
            "choice": "traffic", "traffic": {"choice": "flow_transmit",
                                             "flow_transmit": {"state": "start"}}},
                      timeout=10).raise_for_status()
        wait(browser, lambda d: d.execute_script(
            "const p = charts.latency.plot; return p ? p.data[0].length : 0;") >= 1,
             what="the run's latency on the chart")
        now = time.time()
        for name in ("latency", "rate"):
            # Drawn again with its first sample only, twice: uPlot pads one x value by a "day"
            # in milliseconds when new data comes to a chart it has drawn, which the polls
            # make only when the run's one interval is seen twice.
            for redrawn in (False, True):
                if redrawn:
                    browser.execute_script(
                        "const c = charts[arguments[0]];"
                        "const first = c.plot.data.map((column) => column.slice(0, 1));"
                        "c.draw(c.names, first); c.draw(c.names, first);", name)
                lo, hi = browser.execute_script(
                    "const s = charts[arguments[0]].plot.scales.x; return [s.min, s.max];", name)
                assert hi - lo < 120 and now - 3600 < lo <= hi < now + 3600, \
                    (name, redrawn, lo, hi, now)
        wait(browser, lambda d: all(n >= 1 for n in drawn_pixels(d, "chart-latency", "latency") or [0]),
             what="the latency chart's points drawn")
        assert script_errors(browser) == []
    finally:
        transmit_safely(server)
        server.stop()


def test_the_dashboard_needs_the_token_like_the_api(lab, browser):
    server = Server(lab, extra=("--token", "dashboard-test-token-0123"))
    try:
        assert requests.get(server.url + "/", timeout=10).status_code == 401
        # With the token in the address's fragment (never sent to the server, kept for the
        # page's own requests).
        browser.get(server.url.replace("http://", "http://strobe:dashboard-test-token-0123@") +
                    "/#token=dashboard-test-token-0123")
        wait(browser, lambda d: d.find_element(By.ID, "server-state").text == "no config",
             what="the server's state with the token")
    finally:
        server.stop()


TOML = """
[[ports]]
name = "west"
location = "lab:tx"

[[ports]]
name = "east"
location = "lab:rx"

[[flows]]
name = "west-to-east"
tx = "west"
rx = "east"
size = 128
rate = { pps = 10000 }
duration = { fixed_packets = { packets = 2000 } }

[[flows.packet]]
ethernet = {}
[[flows.packet]]
ipv4 = { src = "198.18.0.1", dst = "198.18.1.1" }
[[flows.packet]]
udp = { src_port = 1000, dst_port = 2000 }
"""


def test_a_toml_scenario_is_a_config_from_the_page(lab, browser):
    server = Server(lab)
    try:
        browser.get(server.url + "/")
        wait(browser, lambda d: d.find_element(By.ID, "server-state").text == "no config",
             what="the server's state")
        browser.find_element(By.CSS_SELECTOR, "#config-format option[value=toml]").click()
        # A mistake first: the scenario loader's message, with its line.
        set_editor(browser, TOML.replace("size = 128", "size = 12"))
        browser.find_element(By.ID, "config-apply").click()
        msg = browser.find_element(By.ID, "config-message")
        wait(browser, lambda d: "error" in msg.get_attribute("class") and "size" in msg.text,
             what="the TOML error")
        assert "scenario.toml:14:8" in msg.text, msg.text
        set_editor(browser, TOML)
        browser.find_element(By.ID, "config-apply").click()
        wait(browser, lambda d: msg.text.startswith("config set"), what="the TOML config accepted")
        assert requests.get(server.url + "/config", timeout=10).json() == {"x_strobe_toml": TOML}
        browser.find_element(By.ID, "traffic-start").click()
        wait(browser, lambda d: any(
            r.find_elements(By.TAG_NAME, "td")[3].text == "2,000"
            for r in d.find_elements(By.CSS_SELECTOR, "#flows tbody tr")), what="2000 frames received")
    finally:
        transmit_safely(server)
        server.stop()
