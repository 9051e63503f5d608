//! `GET /metrics`: the server's runs in the Prometheus text exposition format (0.0.4),
//! scrapeable while traffic runs. Built from the same snapshot as OTG's metrics replies
//! (the run-control watcher's copy of the counters, so a scrape never touches the data
//! path), encoded by the `prometheus` crate from metric families made per scrape.
//!
//! Counters start again at 0 with each run that sends a flow (Prometheus takes that as a
//! counter reset). Latency: minimum, mean and maximum while a run goes (what the watcher
//! keeps), and once it is finished a summary with the percentiles strobe measured over
//! every frame.

use std::sync::Arc;

use prometheus::proto::{
    Counter, Gauge, LabelPair, Metric, MetricFamily, MetricType, Quantile, Summary,
};
use prometheus::{Encoder, TextEncoder};
use strobe_control::model::Scenario;
use strobe_control::run::Counters;
use strobe_control::{RunHandle, RunState};

use strobe_control::session::Latest;

/// The content type of the exposition.
pub const CONTENT_TYPE: &str = prometheus::TEXT_FORMAT;

/// Quantiles of the latency summary, as strobe's results keep them.
const QUANTILES: [f64; 7] = [0.5, 0.9, 0.99, 0.999, 0.9999, 0.99999, 0.999999];

/// One metric family being filled.
struct Family {
    family: MetricFamily,
}

impl Family {
    fn new(name: &str, help: &str, kind: MetricType) -> Family {
        let mut family = MetricFamily::default();
        family.set_name(name.to_string());
        family.set_help(help.to_string());
        family.set_field_type(kind);
        Family { family }
    }

    fn sample(&mut self, labels: &[(&str, &str)], fill: impl FnOnce(&mut Metric)) {
        let mut metric = Metric::default();
        metric.set_label(
            labels
                .iter()
                .map(|(name, value)| {
                    let mut pair = LabelPair::default();
                    pair.set_name(name.to_string());
                    pair.set_value(value.to_string());
                    pair
                })
                .collect(),
        );
        fill(&mut metric);
        self.family.mut_metric().push(metric);
    }

    fn gauge(&mut self, labels: &[(&str, &str)], value: f64) {
        self.sample(labels, |m| {
            let mut g = Gauge::default();
            g.set_value(value);
            m.set_gauge(g);
        });
    }

    fn counter(&mut self, labels: &[(&str, &str)], value: u64) {
        self.sample(labels, |m| {
            let mut c = Counter::default();
            c.set_value(value as f64);
            m.set_counter(c);
        });
    }
}

/// The exposition of the server's state: its config (if any) and the runs it started.
pub fn exposition(scenario: Option<&Scenario>, runs: &[Arc<RunHandle>]) -> String {
    let mut families = Vec::new();
    let newest = runs.last().map(|r| r.metrics().state);
    let mut state = Family::new(
        "strobe_run_state",
        "The newest run's state (1 for the state it is in); none before the first run.",
        MetricType::GAUGE,
    );
    for (name, s) in [
        ("starting", RunState::Starting),
        ("running", RunState::Running),
        ("draining", RunState::Draining),
        ("finished", RunState::Finished),
        ("failed", RunState::Failed),
    ] {
        state.gauge(&[("state", name)], f64::from(newest == Some(s)));
    }
    families.push(state.family);
    let mut started = Family::new(
        "strobe_runs_started_total",
        "Runs this server started.",
        MetricType::COUNTER,
    );
    started.counter(&[], runs.len() as u64);
    families.push(started.family);

    if let Some(scenario) = scenario {
        // One snapshot for ports and flows alike, so that one scrape agrees with itself.
        let latest = Latest::of(scenario, runs);
        port_families(scenario, &latest, &mut families);
        flow_families(&latest, runs, &mut families);
    }
    // Families without a sample (no ports yet) are not written: the format has no empty
    // family.
    families.retain(|f| !f.get_metric().is_empty());
    let mut out = Vec::new();
    // Encoding into memory fails only on a family without samples or a name (none here).
    if TextEncoder::new().encode(&families, &mut out).is_err() {
        return String::new();
    }
    String::from_utf8(out).unwrap_or_default()
}

/// A port's or a flow's labels and counters (None: it has none yet).
type Labelled<'a> = (Vec<(&'a str, &'a str)>, Option<&'a Counters>);

/// The four counters every port and flow has, a family each, one sample per labelled
/// item (None: zeros); `kind` is "port" or "flow", `subject` names whose the counters are
/// in the help text ("the port", "of the flow").
fn counter_families(
    kind: &str,
    subject: &str,
    items: &[Labelled<'_>],
    out: &mut Vec<MetricFamily>,
) {
    type Get = fn(&Counters) -> u64;
    let counters: [(&str, &str, Get); 4] = [
        (
            "frames_tx_total",
            "Frames {} sent in its newest run.",
            |c| c.frames_tx,
        ),
        (
            "frames_rx_total",
            "Frames {} received in its newest run.",
            |c| c.frames_rx,
        ),
        (
            "bytes_tx_total",
            "Bytes {} sent (frame sizes with FCS).",
            |c| c.bytes_tx,
        ),
        (
            "bytes_rx_total",
            "Bytes {} received (frame sizes with FCS).",
            |c| c.bytes_rx,
        ),
    ];
    for (name, help, get) in counters {
        let mut f = Family::new(
            &format!("strobe_{kind}_{name}"),
            &help.replace("{}", subject),
            MetricType::COUNTER,
        );
        for (labels, counters) in items {
            f.counter(labels, counters.map_or(0, get));
        }
        out.push(f.family);
    }
}

fn port_families(scenario: &Scenario, latest: &Latest, out: &mut Vec<MetricFamily>) {
    let ports = latest.ports(scenario);
    let items: Vec<_> = scenario
        .ports
        .iter()
        .map(|port| {
            let m = ports.iter().find(|p| p.name == port.name);
            (vec![("port", port.name.as_str())], m.map(|m| &m.counters))
        })
        .collect();
    counter_families("port", "the port", &items, out);
    type Rate = fn(&strobe_control::PortMetrics) -> f64;
    let rates: [(&str, &str, Rate); 2] = [
        (
            "strobe_port_frames_tx_rate",
            "Frames per second the port sends now.",
            |m| m.counters.frames_tx_rate,
        ),
        (
            "strobe_port_frames_rx_rate",
            "Frames per second the port receives now.",
            |m| m.counters.frames_rx_rate,
        ),
    ];
    for (name, help, get) in rates {
        let mut f = Family::new(name, help, MetricType::GAUGE);
        for port in &scenario.ports {
            let m = ports.iter().find(|p| p.name == port.name);
            f.gauge(&[("port", &port.name)], m.map_or(0.0, get));
        }
        out.push(f.family);
    }
}

fn flow_families(latest: &Latest, runs: &[Arc<RunHandle>], out: &mut Vec<MetricFamily>) {
    let flows: Vec<_> = latest.flows.iter().map(|(m, run)| (m, *run)).collect();
    let labels = |m: &strobe_control::FlowMetrics| (m.name.clone(), m.tx_port.clone());
    let items: Vec<_> = flows
        .iter()
        .map(|(m, _)| {
            (
                vec![("flow", m.name.as_str()), ("tx_port", m.tx_port.as_str())],
                Some(&m.counters),
            )
        })
        .collect();
    counter_families("flow", "of the flow", &items, out);
    let mut tx_rate = Family::new(
        "strobe_flow_frames_tx_rate",
        "Frames per second the flow sends now.",
        MetricType::GAUGE,
    );
    let mut rx_rate = Family::new(
        "strobe_flow_frames_rx_rate",
        "Frames per second of the flow arriving now.",
        MetricType::GAUGE,
    );
    let mut loss = Family::new(
        "strobe_flow_loss_ratio",
        "Share of the flow's frames sent that did not arrive (unique frames), 0 to 1; final after the run's drain.",
        MetricType::GAUGE,
    );
    let mut transmitting = Family::new(
        "strobe_flow_transmitting",
        "1 while the flow sends, else 0.",
        MetricType::GAUGE,
    );
    let mut live_latency = [
        Family::new(
            "strobe_flow_latency_min_seconds",
            "Smallest latency of the flow's frames so far.",
            MetricType::GAUGE,
        ),
        Family::new(
            "strobe_flow_latency_mean_seconds",
            "Mean latency of the flow's frames so far.",
            MetricType::GAUGE,
        ),
        Family::new(
            "strobe_flow_latency_max_seconds",
            "Largest latency of the flow's frames so far.",
            MetricType::GAUGE,
        ),
    ];
    let mut summary = Family::new(
        "strobe_flow_latency_seconds",
        "Latency of every instrumented frame of the flow's finished run (no sampling).",
        MetricType::SUMMARY,
    );
    for (m, run) in &flows {
        let (flow, port) = labels(m);
        let l: [(&str, &str); 2] = [("flow", &flow), ("tx_port", &port)];
        tx_rate.gauge(&l, m.counters.frames_tx_rate);
        rx_rate.gauge(&l, m.counters.frames_rx_rate);
        if let Some(pct) = m.loss_pct {
            loss.gauge(&l, pct / 100.0);
        }
        transmitting.gauge(
            &l,
            f64::from(m.transmit == strobe_control::Transmit::Started),
        );
        if let Some(lat) = &m.latency {
            for (family, ns) in
                live_latency
                    .iter_mut()
                    .zip([lat.minimum_ns, lat.average_ns, lat.maximum_ns])
            {
                family.gauge(&l, ns / 1e9);
            }
        }
        let results = run.and_then(|i| runs.get(i)).and_then(|r| r.results());
        let raw = results
            .as_deref()
            .and_then(|r| r.flow(&m.name))
            .and_then(|f| f.latency.as_ref())
            .map(|l| l.raw);
        if let Some(raw) = raw {
            let values = [
                raw.p50_ns,
                raw.p90_ns,
                raw.p99_ns,
                raw.p99_9_ns,
                raw.p99_99_ns,
                raw.p99_999_ns,
                raw.p99_9999_ns,
            ];
            summary.sample(&l, |metric| {
                let mut s = Summary::default();
                s.set_sample_count(raw.count);
                s.set_sample_sum(raw.mean_ns * raw.count as f64 / 1e9);
                s.set_quantile(
                    QUANTILES
                        .iter()
                        .zip(values)
                        .map(|(&q, ns)| {
                            let mut quantile = Quantile::default();
                            quantile.set_quantile(q);
                            quantile.set_value(ns / 1e9);
                            quantile
                        })
                        .collect(),
                );
                metric.set_summary(s);
            });
        }
    }
    out.extend([tx_rate, rx_rate, loss, transmitting].map(|f| f.family));
    out.extend(live_latency.map(|f| f.family));
    out.push(summary.family);
}
