// strobe serve's dashboard: the OTG API (config, control, metrics) and strobe's own
// endpoints (/strobe/latency, /strobe/runs) drawn with uPlot. No build step, no framework.
"use strict";

const POLL_MS = 1000;
const KEEP_POINTS = 600; // ten minutes of one-second samples per chart
const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
                 "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"];

// A token given as #token=… in the address (servers bound beyond loopback ask for one);
// a browser that signed in with basic authentication sends that by itself.
const token = (() => {
  const m = location.hash.match(/token=([A-Za-z0-9._~-]+)/);
  if (m) sessionStorage.setItem("strobe-token", m[1]);
  return sessionStorage.getItem("strobe-token");
})();

async function api(path, { method = "GET", body, type = "application/json" } = {}) {
  const headers = {};
  if (token) headers["Authorization"] = "Bearer " + token;
  if (body !== undefined) headers["Content-Type"] = type;
  // From the origin: a page opened as http://user:token@host/ resolves relative addresses
  // with those credentials, which fetch refuses.
  const reply = await fetch(location.origin + "/" + path, { method, headers, body, credentials: "same-origin" });
  const text = await reply.text();
  let value = null;
  try { value = text ? JSON.parse(text) : null; } catch (_) { value = text; }
  if (!reply.ok) {
    const errors = value && value.errors ? value.errors.join("\n") : String(value);
    throw new Error(`${reply.status}: ${errors}`);
  }
  return value;
}

const $ = (id) => document.getElementById(id);
const fmt = (v, digits = 0) => (v === null || v === undefined || Number.isNaN(v)) ? "-" :
  Number(v).toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
const us = (ns) => (ns === null || ns === undefined) ? "-" : fmt(ns / 1e3, 3);

function message(el, text, kind) {
  el.textContent = text;
  el.className = "message " + (kind || "");
}

function cell(row, text, cls) {
  const td = row.insertCell();
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

// ---- charts ---------------------------------------------------------------------------

// The time axis of a live chart: the samples' span, or a second either side of one sample.
// uPlot pads a single x value by "a day" before asking this function (a day in
// milliseconds, which on an axis in seconds is 2.7 years), so the span is taken from the
// data whenever its samples are less than a second apart.
function timeRange(u, min, max) {
  const xs = u.data && u.data[0];
  if (xs && xs.length > 0 && xs[xs.length - 1] - xs[0] < 1) {
    return [xs[0] - 1, xs[xs.length - 1] + 1];
  }
  if (min == null || max == null) return [min, max];
  return max - min < 1 ? [min - 1, max + 1] : [min, max];
}

// A chart whose series follow the data: rebuilt when the set of series changes.
class LiveChart {
  constructor(el, { yLog = false, yLabel = "" } = {}) {
    this.el = el;
    this.yLog = yLog;
    this.yLabel = yLabel;
    this.names = [];
    this.plot = null;
    this.updates = 0;
  }

  draw(names, data) {
    if (typeof uPlot === "undefined") return;
    if (this.plot === null || names.join("\n") !== this.names.join("\n")) {
      if (this.plot) this.plot.destroy();
      this.names = names.slice();
      const series = [{}].concat(names.map((n, k) => ({
        label: n, stroke: PALETTE[k % PALETTE.length], width: 1.5, spanGaps: false,
      })));
      this.plot = new uPlot({
        width: Math.max(this.el.clientWidth, 300), height: 240, series,
        // One sample (a short run's one latency interval) would make uPlot pad the time
        // axis by years: a second either side instead.
        scales: { x: { time: true, range: timeRange }, y: this.yLog ? { distr: 3 } : {} },
        axes: [{}, { label: this.yLabel, size: 70 }],
        legend: { live: false },
      }, data, this.el);
    } else {
      this.plot.setData(data);
    }
    this.updates += 1;
    this.el.dataset.updates = String(this.updates);
    this.el.dataset.points = String(data[0].length);
  }
}

const charts = {
  rate: new LiveChart($("chart-rate"), { yLabel: "frames/s" }),
  loss: new LiveChart($("chart-loss"), { yLabel: "%" }),
  latency: new LiveChart($("chart-latency"), { yLog: true, yLabel: "µs" }),
};

// Samples of the metrics polls: time (s) and per flow its values.
const samples = { t: [], byFlow: new Map() };

function remember(store, t, values) {
  store.t.push(t);
  const n = store.t.length;
  for (const [name, v] of Object.entries(values)) {
    if (!store.byFlow.has(name)) store.byFlow.set(name, new Array(n - 1).fill(null));
    store.byFlow.get(name).push(v);
  }
  for (const [name, list] of store.byFlow) {
    if (list.length < n) list.push(null);
  }
  if (n > KEEP_POINTS) {
    store.t.shift();
    for (const list of store.byFlow.values()) list.shift();
  }
}

function chartData(store, pick) {
  const names = [];
  const data = [store.t.slice()];
  for (const [key, list] of store.byFlow) {
    const label = pick(key);
    if (label === null) continue;
    names.push(label);
    data.push(list.map((v) => (v === null ? null : v)));
  }
  return { names, data };
}

// ---- traffic ---------------------------------------------------------------------------

// Whether the server has a config: without one it has no metrics, and asking for them every
// second would fill the browser's console with 400s, so the page asks for the config instead
// until there is one.
let haveConfig = false;

async function pollMetrics() {
  if (!haveConfig) {
    const config = await api("config");
    if (!config || !Object.keys(config).length) throw new Error("no config");
    haveConfig = true;
  }
  const [flows, ports] = await Promise.all([
    api("monitor/metrics", { method: "POST", body: JSON.stringify({ choice: "flow", flow: { flow_names: [] } }) }),
    api("monitor/metrics", { method: "POST", body: JSON.stringify({ choice: "port", port: { port_names: [] } }) }),
  ]);
  const flowList = flows.flow_metrics || [];
  const portList = ports.port_metrics || [];
  const running = flowList.some((f) => f.transmit === "started");
  const badge = $("server-state");
  badge.textContent = running ? "traffic running" : "idle";
  badge.className = "badge" + (running ? " running" : "");

  const pt = $("ports").tBodies[0];
  pt.replaceChildren();
  for (const p of portList) {
    const r = pt.insertRow();
    cell(r, p.name);
    cell(r, p.location || "", "text");
    cell(r, p.transmit || "");
    cell(r, fmt(p.frames_tx));
    cell(r, fmt(p.frames_rx));
    cell(r, fmt(p.frames_tx_rate));
    cell(r, fmt(p.frames_rx_rate));
  }
  const ft = $("flows").tBodies[0];
  ft.replaceChildren();
  for (const f of flowList) {
    const r = ft.insertRow();
    cell(r, f.name);
    cell(r, f.transmit || "");
    cell(r, fmt(f.frames_tx));
    cell(r, fmt(f.frames_rx));
    cell(r, fmt(f.frames_tx_rate));
    cell(r, fmt(f.frames_rx_rate));
    cell(r, f.loss === undefined || f.loss === null ? "-" : fmt(f.loss, 4));
    const l = f.latency;
    cell(r, l ? `${us(l.minimum_ns)} / ${us(l.average_ns)} / ${us(l.maximum_ns)}` : "-");
  }

  const t = Date.now() / 1000;
  const values = {};
  for (const f of flowList) {
    values[f.name + " tx"] = Number(f.frames_tx_rate || 0);
    values[f.name + " rx"] = Number(f.frames_rx_rate || 0);
    values[f.name + " loss"] = f.loss === undefined || f.loss === null ? null : Number(f.loss);
  }
  remember(samples, t, values);
  const rate = chartData(samples, (k) => (k.endsWith(" loss") ? null : k));
  charts.rate.draw(rate.names, rate.data);
  const loss = chartData(samples, (k) => (k.endsWith(" loss") ? k.slice(0, -5) : null));
  charts.loss.draw(loss.names, loss.data);
}

// Latency per interval: by interval start (s), each series' value; intervals are asked
// for again from a few intervals back (a run whose receivers lag publishes late), and an
// interval seen twice simply overwrites itself.
const latency = { byTime: new Map(), names: new Set(), newestNs: 0 };

async function pollLatency() {
  const since = latency.newestNs ? latency.newestNs - 4 * 500e6 : 0;
  const reply = await api("strobe/latency?since=" + since);
  for (const i of reply.intervals) {
    latency.newestNs = Math.max(latency.newestNs, i.start_ns);
    const t = (i.start_ns + i.duration_ns / 2) / 1e9;
    if (!latency.byTime.has(t)) latency.byTime.set(t, {});
    const at = latency.byTime.get(t);
    for (const [stat, key] of [["p50", "p50_ns"], ["p99", "p99_ns"], ["max", "max_ns"]]) {
      const name = `${i.flow} ${stat}`;
      latency.names.add(name);
      at[name] = i[key] / 1e3;
    }
  }
  const times = [...latency.byTime.keys()].sort((a, b) => a - b);
  for (const t of times.slice(0, Math.max(0, times.length - KEEP_POINTS))) latency.byTime.delete(t);
  const kept = times.slice(-KEEP_POINTS);
  const names = [...latency.names].sort();
  const data = [kept].concat(names.map((n) => kept.map((t) => {
    const v = latency.byTime.get(t)[n];
    return v === undefined ? null : v;
  })));
  charts.latency.draw(names, data);
}

async function poll() {
  try {
    await pollMetrics();
  } catch (e) {
    const badge = $("server-state");
    // A server without a config has no metrics yet: that is a state, not a fault.
    const noConfig = e.message.includes("no config");
    if (noConfig) haveConfig = false;
    badge.textContent = noConfig ? "no config" : "server unreachable";
    badge.className = "badge" + (noConfig ? "" : " error");
    badge.title = e.message;
  }
  try {
    await pollLatency();
  } catch (_) {
    // Shown by the state badge already.
  }
  setTimeout(poll, POLL_MS);
}

async function loadConfig() {
  try {
    const config = await api("config");
    if (config && config.x_strobe_toml !== undefined) {
      $("config-format").value = "toml";
      $("config-text").value = config.x_strobe_toml;
    } else if (config && Object.keys(config).length) {
      $("config-format").value = "otg";
      $("config-text").value = JSON.stringify(config, null, 2);
    }
  } catch (_) {
    // No config yet: the editor stays empty.
  }
}

async function applyConfig() {
  const text = $("config-text").value;
  const toml = $("config-format").value === "toml";
  const out = $("config-message");
  try {
    if (!toml) {
      try { JSON.parse(text); } catch (e) { throw new Error("not JSON: " + e.message); }
    }
    const reply = toml
      ? await api("strobe/config-toml", { method: "POST", body: text, type: "application/toml" })
      : await api("config", { method: "POST", body: text });
    const warnings = (reply && reply.warnings) || [];
    message(out, warnings.length ? "config set; warnings:\n" + warnings.join("\n") : "config set", "ok");
  } catch (e) {
    message(out, e.message, "error");
  }
}

async function transmit(state) {
  const out = $("config-message");
  try {
    const reply = await api("control/state", {
      method: "POST",
      body: JSON.stringify({ choice: "traffic", traffic: { choice: "flow_transmit", flow_transmit: { state, flow_names: [] } } }),
    });
    const warnings = (reply && reply.warnings) || [];
    const done = state === "start" ? "started" : "stopped";
    message(out, done + (warnings.length ? "; " + warnings.join("; ") : ""), "ok");
  } catch (e) {
    message(out, e.message, "error");
  }
}

$("config-file").addEventListener("change", async (ev) => {
  const file = ev.target.files[0];
  if (!file) return;
  $("config-text").value = await file.text();
  $("config-format").value = file.name.endsWith(".toml") ? "toml" : "otg";
});
$("config-apply").addEventListener("click", applyConfig);
$("traffic-start").addEventListener("click", () => transmit("start"));
$("traffic-stop").addEventListener("click", () => transmit("stop"));

// ---- history ---------------------------------------------------------------------------

async function loadRuns() {
  const params = new URLSearchParams({ limit: "200" });
  if ($("filter-kind").value) params.set("kind", $("filter-kind").value);
  if ($("filter-text").value) params.set("grep", $("filter-text").value);
  if ($("filter-since").value) params.set("since", $("filter-since").value);
  const out = $("history-message");
  let rows;
  try {
    rows = await api("strobe/runs?" + params);
  } catch (e) {
    message(out, e.message, "error");
    return;
  }
  message(out, `${rows.length} runs`, "");
  const body = $("runs").tBodies[0];
  body.replaceChildren();
  for (const r of rows.slice().reverse()) {
    const tr = body.insertRow();
    tr.dataset.id = r.id;
    const pick = tr.insertCell();
    const box = document.createElement("input");
    box.type = "checkbox";
    box.value = r.id;
    box.addEventListener("click", (ev) => ev.stopPropagation());
    pick.appendChild(box);
    const s = r.summary;
    cell(tr, String(r.id));
    cell(tr, new Date(r.started_unix_ns / 1e6).toISOString().slice(0, 19).replace("T", " "));
    cell(tr, r.kind);
    cell(tr, r.origin);
    cell(tr, fmt(s.frames_tx));
    cell(tr, fmt(s.frames_rx));
    cell(tr, s.frames_tx ? fmt(100 * (s.frames_lost || 0) / s.frames_tx, 4) : "-");
    cell(tr, us(s.p50_ns));
    cell(tr, us(s.p99_ns));
    cell(tr, r.outcome + (r.label ? ` [${r.label}]` : ""), "text");
    cell(tr, r.command, "command");
    tr.addEventListener("click", () => showRun(r.id));
  }
}

async function showRun(id) {
  for (const tr of $("runs").tBodies[0].rows) tr.classList.toggle("chosen", tr.dataset.id === String(id));
  const card = $("run-report");
  card.replaceChildren();
  const h = document.createElement("h2");
  h.textContent = `Run ${id}`;
  card.appendChild(h);
  let run;
  try {
    run = await api("strobe/runs/" + id);
  } catch (e) {
    const p = document.createElement("p");
    p.className = "message error";
    p.textContent = e.message;
    card.appendChild(p);
    return;
  }
  const facts = [
    ["kind", `${run.kind} (${run.origin}), ${run.outcome}`],
    ["started", new Date(run.started_unix_ns / 1e6).toISOString() +
      `, took ${((run.finished_unix_ns - run.started_unix_ns) / 1e9).toFixed(1)} s`],
    ["command", run.command],
    ["host", `${run.host} (user ${run.user})`],
    ["strobe", run.strobe_version + (run.strobe_commit ? ` (commit ${run.strobe_commit})` : "")],
  ];
  if (run.label) facts.push(["label", run.label]);
  const table = document.createElement("table");
  for (const [k, v] of facts) {
    const tr = table.insertRow();
    cell(tr, k);
    cell(tr, v, "text");
  }
  card.appendChild(table);
  // A note on the run ("irqbalance off"), kept in the history.
  const labelRow = document.createElement("div");
  labelRow.className = "controls";
  const labelInput = document.createElement("input");
  labelInput.id = "run-label";
  labelInput.placeholder = "label this run…";
  labelInput.value = run.label || "";
  const labelSave = document.createElement("button");
  labelSave.id = "run-label-save";
  labelSave.textContent = "Save label";
  labelSave.addEventListener("click", async () => {
    try {
      await api(`strobe/runs/${id}/label`, { method: "PUT", body: JSON.stringify({ label: labelInput.value }) });
      await loadRuns();
      for (const tr of $("runs").tBodies[0].rows) tr.classList.toggle("chosen", tr.dataset.id === String(id));
    } catch (e) {
      message($("history-message"), e.message, "error");
    }
  });
  labelRow.append(labelInput, labelSave);
  card.appendChild(labelRow);
  const flows = run.results && run.results.flows;
  if (Array.isArray(flows)) {
    const ft = document.createElement("table");
    ft.id = "run-flows";
    const head = ft.createTHead().insertRow();
    for (const c of ["flow", "frames tx", "frames rx", "lost", "min µs", "p50 µs", "p99 µs", "p99.99 µs", "max µs"]) {
      const th = document.createElement("th");
      th.textContent = c;
      head.appendChild(th);
    }
    const body = ft.createTBody();
    for (const f of flows) {
      const tr = body.insertRow();
      const l = f.latency && f.latency.raw;
      cell(tr, f.name);
      cell(tr, fmt(f.frames_tx));
      cell(tr, fmt(f.frames_rx));
      cell(tr, fmt(f.loss));
      cell(tr, l ? us(l.min_ns) : "-");
      cell(tr, l ? us(l.p50_ns) : "-");
      cell(tr, l ? us(l.p99_ns) : "-");
      cell(tr, l ? us(l.p99_99_ns) : "-");
      cell(tr, l ? us(l.max_ns) : "-");
    }
    card.appendChild(ft);
    for (const w of run.results.warnings || []) {
      const p = document.createElement("p");
      p.className = "message error";
      // Typed warnings carry their words as `text`; runs stored earlier, plain words.
      p.textContent = "warning: " + (typeof w === "string" ? w : w.text);
      card.appendChild(p);
    }
  } else {
    const pre = document.createElement("pre");
    pre.textContent = JSON.stringify(run.results, null, 2).slice(0, 20000);
    card.appendChild(pre);
  }
}

let ccdfPlot = null;

async function compareSelected() {
  const ids = [...document.querySelectorAll("#runs tbody input:checked")].map((b) => b.value);
  const out = $("history-message");
  if (!ids.length) {
    message(out, "tick the runs to compare first", "error");
    return;
  }
  let cmp;
  try {
    cmp = await api("strobe/runs/compare?ids=" + ids.join(","));
  } catch (e) {
    message(out, e.message, "error");
    return;
  }
  message(out, `compared: ${cmp.runs.join("; ")}`, "");
  // One x axis for all curves (uPlot's model): the union of their latencies; each curve is
  // a staircase from its first bucket to its last (a fraction of 0 is off a log scale).
  const xs = [...new Set(cmp.series.flatMap((s) => s.ccdf.map((p) => p[0] / 1e3)))].sort((a, b) => a - b);
  const data = [xs];
  for (const s of cmp.series) {
    const ys = new Array(xs.length).fill(null);
    let k = 0;
    let current = null;
    let before = null; // the fraction before the current step
    const first = s.ccdf[0][0] / 1e3;
    const last = s.ccdf[s.ccdf.length - 1][0] / 1e3;
    xs.forEach((x, i) => {
      while (k < s.ccdf.length && s.ccdf[k][0] / 1e3 <= x) {
        before = current;
        current = s.ccdf[k][1];
        k += 1;
      }
      // At its maximum the fraction drops to 0, off a log scale: the curve ends there at
      // the level it had, so the last step (the slowest frames) is drawn to the maximum.
      if (x >= first && x < last && current > 0) ys[i] = current;
      else if (x === last) ys[i] = before !== null ? before : 1;
    });
    data.push(ys);
  }
  const maxCount = Math.max(...cmp.series.map((s) => s.stats.count));
  const el = $("chart-ccdf");
  if (ccdfPlot) ccdfPlot.destroy();
  if (typeof uPlot !== "undefined") {
    ccdfPlot = new uPlot({
      width: Math.max(el.clientWidth, 300), height: 320,
      // Down to one frame in the largest run (below 1e-6 for runs of more than a million).
      scales: { x: { time: false, distr: 3 }, y: { distr: 3, range: [Math.min(1e-6, 1 / maxCount), 1] } },
      axes: [{ label: "latency (µs)" }, {
        label: "fraction of frames slower", size: 70,
        // A log axis hands over the ticks it leaves unlabelled as null.
        values: (u, ticks) => ticks.map((v) => (v == null ? null : v >= 0.01 ? String(v) : v.toExponential(0))),
      }],
      // Names only: a live legend would show "--" beside each until the cursor is over the chart.
      legend: { live: false },
      series: [{ label: "µs" }].concat(cmp.series.map((s, k) => ({
        label: s.name, stroke: PALETTE[k % PALETTE.length], width: 1.5,
        paths: uPlot.paths.stepped({ align: 1 }),
      }))),
    }, data, el);
  }
  el.dataset.series = String(cmp.series.length);
  const table = $("compare-table");
  table.replaceChildren();
  const head = table.createTHead().insertRow();
  for (const c of ["µs"].concat(cmp.series.map((s) => s.name))) {
    const th = document.createElement("th");
    th.textContent = c;
    head.appendChild(th);
  }
  const rows = [["frames", "count"], ["min", "min_ns"], ["p50", "p50_ns"], ["p90", "p90_ns"], ["p99", "p99_ns"],
                ["p99.9", "p99_9_ns"], ["p99.99", "p99_99_ns"], ["max", "max_ns"]];
  const body = table.createTBody();
  for (const [label, key] of rows) {
    const tr = body.insertRow();
    cell(tr, label);
    for (const s of cmp.series) cell(tr, key === "count" ? fmt(s.stats.count) : us(s.stats[key]));
  }
}

$("filter-apply").addEventListener("click", loadRuns);
$("compare-selected").addEventListener("click", compareSelected);

// ---- tabs ------------------------------------------------------------------------------

for (const tab of document.querySelectorAll(".tab")) {
  tab.addEventListener("click", () => {
    for (const t of document.querySelectorAll(".tab")) t.classList.toggle("active", t === tab);
    $("traffic").hidden = tab.dataset.tab !== "traffic";
    $("history").hidden = tab.dataset.tab !== "history";
    if (tab.dataset.tab === "history") loadRuns();
  });
}

loadConfig();
poll();
