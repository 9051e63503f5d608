//! OTG replies: JSON bodies with their Content-Type, the OTG `Error` object, and metrics in
//! OTG's shapes (plus strobe's own detail under `x_strobe`, which OTG clients ignore).

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};
use std::sync::Arc;

use strobe_control::model::Scenario;
use strobe_control::session::Latest;
use strobe_control::{Results, RunHandle, Transmit};

/// Capture bytes, as OTG clients read them.
pub fn octets(bytes: Vec<u8>) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/octet-stream")],
        bytes,
    )
        .into_response()
}

/// A JSON reply.
pub fn ok_json(body: Value) -> Response {
    json_reply(StatusCode::OK, &body)
}

fn json_reply(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// The OTG `Error` object: `kind` is `validation` (the request is wrong, 4xx) or
/// `internal` (5xx); `errors` name the offending field and what is accepted.
#[derive(Debug)]
pub struct OtgError {
    code: u16,
    kind: &'static str,
    errors: Vec<String>,
}

impl IntoResponse for OtgError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        json_reply(
            status,
            &json!({ "code": status.as_u16(), "kind": self.kind, "errors": self.errors }),
        )
    }
}

pub fn error(code: u16, kind: &'static str, errors: Vec<String>) -> OtgError {
    OtgError { code, kind, errors }
}

pub fn validation(errors: Vec<String>) -> OtgError {
    error(400, "validation", errors)
}

pub fn internal(errors: Vec<String>) -> OtgError {
    error(500, "internal", errors)
}

/// A float as OTG clients read it: snappi parses replies with a YAML reader, which takes
/// `1e-7` or `1e+16` for strings, so floats are rounded to thousandths and kept below
/// 10^15, where JSON writers print them with a decimal point.
fn num(x: f64) -> Value {
    let x = if x.is_finite() { x } else { 0.0 };
    let x = (x * 1000.0).round() / 1000.0;
    Value::from(x.clamp(-1e15, 1e15))
}

/// OTG's 64-bit counters travel as strings.
fn count(n: u64) -> Value {
    Value::String(n.to_string())
}

fn transmit(t: Transmit) -> &'static str {
    match t {
        Transmit::Started => "started",
        Transmit::Stopped => "stopped",
        Transmit::Paused => "paused",
    }
}

fn unknown(what: &str, name: &str, known: impl Iterator<Item = String>) -> String {
    format!(
        "{what}: no `{name}` in the config (known: {})",
        known.collect::<Vec<_>>().join(", ")
    )
}

/// `{"choice": "flow_metrics", ...}` for the flows named (all when none are), with
/// strobe's detail when `extensions` says so.
pub fn flow_metrics(
    scenario: &Scenario,
    runs: &[Arc<RunHandle>],
    wanted: &[String],
    extensions: bool,
) -> Result<Value, String> {
    if let Some(n) = wanted
        .iter()
        .find(|n| !scenario.flows.iter().any(|f| &f.name == *n))
    {
        return Err(unknown(
            "flow.flow_names",
            n,
            scenario.flows.iter().map(|f| f.name.clone()),
        ));
    }
    let latest = Latest::of(scenario, runs);
    let mut out = Vec::new();
    for (spec, (m, run)) in scenario.flows.iter().zip(&latest.flows) {
        if !wanted.is_empty() && !wanted.contains(&m.name) {
            continue;
        }
        let mut flow = Map::new();
        flow.insert("name".into(), json!(m.name));
        flow.insert("port_tx".into(), json!(m.tx_port));
        if let Some(rx) = m.rx_ports.first() {
            flow.insert("port_rx".into(), json!(rx));
        }
        flow.insert("transmit".into(), json!(transmit(m.transmit)));
        flow.insert("frames_tx".into(), count(m.counters.frames_tx));
        flow.insert("frames_rx".into(), count(m.counters.frames_rx));
        flow.insert("bytes_tx".into(), count(m.counters.bytes_tx));
        flow.insert("bytes_rx".into(), count(m.counters.bytes_rx));
        flow.insert("frames_tx_rate".into(), num(m.counters.frames_tx_rate));
        flow.insert("frames_rx_rate".into(), num(m.counters.frames_rx_rate));
        if let Some(loss) = m.loss_pct {
            flow.insert("loss".into(), num(loss));
        }
        // Latency only when the flow's metrics ask for it, as OTG has it.
        if spec.metrics.latency.is_some() {
            if let Some(l) = m.latency {
                flow.insert(
                    "latency".into(),
                    json!({
                        "minimum_ns": num(l.minimum_ns),
                        "maximum_ns": num(l.maximum_ns),
                        "average_ns": num(l.average_ns),
                    }),
                );
            }
        }
        // Timestamps as integers: epoch nanoseconds are beyond what a float writes without
        // an exponent (which snappi's YAML reader takes for a string).
        if spec.metrics.timestamps {
            if let (Some(first), Some(last)) = (m.first_rx_ns, m.last_rx_ns) {
                flow.insert(
                    "timestamps".into(),
                    json!({ "first_timestamp_ns": first, "last_timestamp_ns": last }),
                );
            }
        }
        if !m.tagged.is_empty() {
            let tagged: Vec<Value> = m
                .tagged
                .iter()
                .map(|t| tagged_metric(spec, t, extensions))
                .collect();
            flow.insert("tagged_metrics".into(), Value::Array(tagged));
        }
        let results = run
            .filter(|_| extensions)
            .and_then(|i| runs.get(i))
            .and_then(|r| r.results());
        if let Some(detail) = results.as_deref().and_then(|r| strobe_detail(r, &m.name)) {
            flow.insert("x_strobe".into(), detail);
        }
        out.push(Value::Object(flow));
    }
    Ok(json!({ "choice": "flow_metrics", "flow_metrics": out }))
}

/// One OTG `Flow.TaggedMetric`: the tag values (in hex) and their frames' counters, with
/// loss, latency and timestamps as the flow's metrics ask.
fn tagged_metric(
    spec: &strobe_control::model::FlowSpec,
    t: &strobe_control::TaggedMetrics,
    extensions: bool,
) -> Value {
    let mut m = Map::new();
    let tags: Vec<Value> = t
        .tags
        .iter()
        .map(|tag| json!({"name": tag.name, "value": {"choice": "hex", "hex": tag.value}}))
        .collect();
    m.insert("tags".into(), Value::Array(tags));
    m.insert("frames_tx".into(), count(t.counters.frames_tx));
    m.insert("frames_rx".into(), count(t.counters.frames_rx));
    m.insert("bytes_tx".into(), count(t.counters.bytes_tx));
    m.insert("bytes_rx".into(), count(t.counters.bytes_rx));
    m.insert("frames_tx_rate".into(), num(t.counters.frames_tx_rate));
    m.insert("frames_rx_rate".into(), num(t.counters.frames_rx_rate));
    if let Some(loss) = t.loss_pct {
        m.insert("loss".into(), num(loss));
    }
    if let (Some(l), true) = (t.latency, spec.metrics.latency.is_some()) {
        m.insert(
            "latency".into(),
            json!({
                "minimum_ns": num(l.minimum_ns),
                "maximum_ns": num(l.maximum_ns),
                "average_ns": num(l.average_ns),
            }),
        );
    }
    if let (Some(first), Some(last), true) = (t.first_rx_ns, t.last_rx_ns, spec.metrics.timestamps)
    {
        m.insert(
            "timestamps".into(),
            json!({ "first_timestamp_ns": first, "last_timestamp_ns": last }),
        );
    }
    // Once final, as for the flow: what a controller needs for the loss across agents.
    if let (Some(unique), true) = (t.frames_rx_unique, extensions) {
        m.insert(
            "x_strobe".into(),
            json!({ "frames_rx_unique": count(unique) }),
        );
    }
    Value::Object(m)
}

/// strobe's detail on a finished flow, from the run's [`Results`] (the schema of the
/// command line's `--json`): receive counters OTG has no place for, latency percentiles down
/// to p99.9999, and where the timestamps were taken.
fn strobe_detail(results: &Results, name: &str) -> Option<Value> {
    let flow = results.flow(name)?;
    let mut detail = json!({});
    if let Some(unique) = flow.frames_rx_unique {
        detail = json!({
            "frames_rx_unique": count(unique),
            "duplicates": count(flow.duplicates.unwrap_or(0)),
            "reordered": count(flow.reordered.unwrap_or(0)),
            "late": count(flow.late.unwrap_or(0)),
            "timestamps": results
                .rx_ports
                .iter()
                .filter(|p| flow.rx_ports.contains(&p.name))
                .map(|p| p.timestamps.as_str())
                .collect::<Vec<_>>(),
        });
    }
    // When its port's first frame went and was due (a multi-host start's skew); a port
    // sent by several workers: the earliest.
    let worker_of = |p: &str| {
        p == flow.tx_port
            || p.strip_prefix(&flow.tx_port)
                .is_some_and(|k| k.starts_with('#'))
    };
    let sent_by = results.ports.iter().filter(|p| worker_of(&p.name));
    let first = sent_by
        .clone()
        .filter_map(|p| p.first_handover_unix_ns)
        .min();
    let due = sent_by.clone().filter_map(|p| p.first_due_unix_ns).min();
    let t0 = sent_by.filter_map(|p| p.t0_unix_ns).min();
    if let (Some(first), Some(due), Some(t0)) = (first, due, t0) {
        detail["tx_start"] =
            json!({ "t0_ns": t0, "first_due_ns": due, "first_handover_ns": first });
    }
    if detail.as_object().is_some_and(|d| d.is_empty()) {
        return None;
    }
    if let Some(latency) = &flow.latency {
        let s = &latency.raw;
        let mut percentiles = Map::new();
        for (label, v) in [
            ("p50", s.p50_ns),
            ("p90", s.p90_ns),
            ("p99", s.p99_ns),
            ("p99_9", s.p99_9_ns),
            ("p99_99", s.p99_99_ns),
            ("p99_999", s.p99_999_ns),
            ("p99_9999", s.p99_9999_ns),
        ] {
            percentiles.insert(format!("{label}_ns"), num(v));
        }
        detail["latency"] = json!({
            "frames": count(s.count),
            "percentiles": percentiles,
            "jitter_ns": num(latency.jitter_ns),
            "mode": latency.mode,
            "sources": { "tx": latency.timestamps.tx, "rx": latency.timestamps.rx },
        });
    }
    // A flow sent as a convoy of trains (OTG's burst duration with a burst count): its
    // figures across trains (the per-train rows are in `strobe gen --trains-csv`).
    if let Some(c) = &flow.convoy {
        let summary = |s: &Option<strobe_control::results::TrainSummary>| match s {
            Some(s) => json!({
                "trains": s.trains,
                "mean": num(s.mean),
                "median": num(s.median),
                "stddev": num(s.stddev),
                "min": num(s.min),
                "max": num(s.max),
                "ci95": s.ci95.map(|(lo, hi)| [num(lo), num(hi)]),
                "idi": s.idi.map(num),
            }),
            None => Value::Null,
        };
        detail["convoy"] = json!({
            "trains": c.trains.len(),
            "frames_sent": count(c.frames_sent),
            "frames_lost": count(c.frames_lost),
            "loss_ratio": num(c.loss_ratio),
            "head_latency_ns": summary(&c.head_latency_ns),
            "l2_bps": summary(&c.l2_bps),
            "l1_bps": summary(&c.l1_bps),
            "second_half_l2_bps": summary(&c.second_half_l2_bps),
            "second_half_l1_bps": summary(&c.second_half_l1_bps),
            "after_burst_l2_bps": summary(&c.after_burst_l2_bps),
            "after_burst_l1_bps": summary(&c.after_burst_l1_bps),
            "tail_loss": c.tail_loss,
        });
    }
    Some(detail)
}

/// `{"choice": "port_metrics", ...}` for the ports named (all when none are).
pub fn port_metrics(
    scenario: &Scenario,
    runs: &[Arc<RunHandle>],
    wanted: &[String],
    capturing: &[&str],
    links_down: &[&str],
) -> Result<Value, String> {
    if let Some(n) = wanted
        .iter()
        .find(|n| !scenario.ports.iter().any(|p| &p.name == *n))
    {
        return Err(unknown(
            "port.port_names",
            n,
            scenario.ports.iter().map(|p| p.name.clone()),
        ));
    }
    let ports = Latest::of(scenario, runs).ports(scenario);
    let mut out = Vec::new();
    for port in &scenario.ports {
        if !wanted.is_empty() && !wanted.contains(&port.name) {
            continue;
        }
        let m = ports.iter().find(|p| p.name == port.name);
        let get = |f: fn(&strobe_control::PortMetrics) -> u64| m.map_or(0, f);
        out.push(json!({
            "name": port.name,
            "location": port.location,
            "link": if links_down.contains(&port.location.to_string().as_str()) { "down" } else { "up" },
            "capture": if capturing.contains(&port.name.as_str()) { "started" } else { "stopped" },
            // OTG's port transmit state has no "paused".
            "transmit": if m.is_some_and(|m| m.transmit == Transmit::Started) { "started" } else { "stopped" },
            "frames_tx": count(get(|m| m.counters.frames_tx)),
            "frames_rx": count(get(|m| m.counters.frames_rx)),
            "bytes_tx": count(get(|m| m.counters.bytes_tx)),
            "bytes_rx": count(get(|m| m.counters.bytes_rx)),
            "frames_tx_rate": num(m.map_or(0.0, |m| m.counters.frames_tx_rate)),
            "frames_rx_rate": num(m.map_or(0.0, |m| m.counters.frames_rx_rate)),
            "bytes_tx_rate": num(m.map_or(0.0, |m| m.counters.bytes_tx_rate)),
            "bytes_rx_rate": num(m.map_or(0.0, |m| m.counters.bytes_rx_rate)),
        }));
    }
    Ok(json!({ "choice": "port_metrics", "port_metrics": out }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_are_written_with_a_decimal_point() {
        for (x, text) in [
            (1e-7, "0.0"),
            (1e16, "1000000000000000.0"),
            (1234.56789, "1234.568"),
            (f64::NAN, "0.0"),
            (f64::INFINITY, "0.0"),
        ] {
            assert_eq!(num(x).to_string(), text, "{x}");
        }
    }
}
