//! Latency outputs of `strobe gen`: the HTML report with log-scale CCDFs, the CDF/CCDF CSV,
//! the HdrHistogram interval log, and the latency-vs-load sweep (`--rates`).

use std::path::{Path, PathBuf};

use clap::Args;
use strobe_analyze::latency::{
    write_cdf_csv, write_encoded_interval_log, write_load_sweep_csv, EncodedInterval, LatencyStats,
    LoadPoint,
};
use strobe_analyze::plot::{html_report, load_sweep_svg, FlowLatency};
use strobe_engine::RunReport;
use strobe_model::Scenario;

use crate::outputs::{write_file, WriteFailures};
use crate::results::{timestamp_sources, Correction};
use crate::Failure;

/// Where to write latency distributions, besides the summary.
#[derive(Args, Clone, Debug, Default)]
pub struct LatencyOutputs {
    /// A self-contained HTML report: statistics and log-scale CCDF per flow.
    #[arg(long, value_name = "FILE", help_heading = "Latency")]
    pub latency_html: Option<PathBuf>,
    /// The CDF and CCDF of every flow as CSV (one row per histogram bucket).
    #[arg(long, value_name = "FILE", help_heading = "Latency")]
    pub latency_csv: Option<PathBuf>,
    /// An HdrHistogram interval log (per flow, one histogram per --hdr-interval, tagged
    /// with the flow name; values in ns), readable by HdrHistogram's own tools.
    #[arg(long, value_name = "FILE", help_heading = "Latency")]
    pub hdr_log: Option<PathBuf>,
    /// Interval length of --hdr-log, e.g. 1s, 100ms.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "1s",
        help_heading = "Latency",
        allow_hyphen_values = true, value_parser = crate::values::positive_text
    )]
    pub hdr_interval: String,
}

/// The flows that have a latency distribution, with their histogram.
fn measured<'a>(
    scenario: &'a Scenario,
    r: &'a RunReport,
) -> Vec<(
    &'a strobe_model::FlowSpec,
    &'a strobe_engine::latency::FlowLatency,
)> {
    scenario
        .flows
        .iter()
        .filter_map(|f| {
            let l = r.rx_flows.get(f.id as usize)?.as_ref()?.latency.as_ref()?;
            (!l.histogram().is_empty()).then_some((f, l))
        })
        .collect()
}

/// A flow name as an interval-log tag (which may hold no comma, space or line break).
fn tag(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c == ',' || c.is_whitespace() {
                '_'
            } else {
                c
            }
        })
        .collect()
}

/// One run's intervals for the HdrHistogram log, tagged with the flow name and `label`.
pub fn intervals<'a>(
    scenario: &Scenario,
    r: &'a RunReport,
    label: &str,
) -> Vec<EncodedInterval<'a>> {
    r.latency_intervals
        .iter()
        .map(|i| EncodedInterval {
            tag: tag(&format!(
                "{}{label}",
                scenario
                    .flows
                    .get(i.flow_id as usize)
                    .map_or("flow", |f| f.name.as_str())
            )),
            start_unix_s: i.start_ns as f64 / 1e9,
            duration_s: i.duration_ns as f64 / 1e9,
            encoded: &i.encoded,
        })
        .collect()
}

/// Writes an interval log (it starts at its earliest interval).
pub fn write_hdr_log(path: &Path, intervals: &[EncodedInterval<'_>]) -> Result<(), Failure> {
    let mut out = Vec::new();
    write_encoded_interval_log(&mut out, intervals)
        .map_err(|e| Failure::Runtime(format!("{}: {e}", path.display())))?;
    write_file(path, &out)
}

/// Writes every output `outs` asks for, for one run; a failed one is noted in `failures`
/// and the others are still written.
pub fn write_outputs(
    outs: &LatencyOutputs,
    scenario: &Scenario,
    r: &RunReport,
    correction: Option<&Correction>,
    failures: &mut WriteFailures,
) {
    let flows = measured(scenario, r);
    if let Some(path) = &outs.latency_html {
        let report: Vec<FlowLatency<'_>> = flows
            .iter()
            .filter_map(|(f, l)| {
                let (tx, rx) = timestamp_sources(r, f);
                Some(FlowLatency {
                    name: f.name.clone(),
                    stats: LatencyStats::from_histogram(l.histogram())?,
                    hist: l.histogram(),
                    sources: format!("tx: {tx}; rx: {rx}"),
                    correction_ns: correction.map(|c| c.offset_ns),
                })
            })
            .collect();
        failures.note(write_file(
            path,
            html_report("strobe latency", &report).as_bytes(),
        ));
    }
    if let Some(path) = &outs.latency_csv {
        let hists: Vec<_> = flows
            .iter()
            .map(|(f, l)| (f.name.as_str(), l.histogram()))
            .collect();
        let mut out = Vec::new();
        failures.note(
            write_cdf_csv(&mut out, &hists)
                .map_err(|e| Failure::Runtime(format!("{}: {e}", path.display())))
                .and_then(|()| write_file(path, &out)),
        );
    }
    if let Some(path) = &outs.hdr_log {
        failures.note(write_hdr_log(path, &intervals(scenario, r, "")));
    }
}

/// One step of a latency-vs-load sweep: what was offered, what came back, and the latency
/// of the (first) flow.
pub fn load_point(scenario: &Scenario, r: &RunReport) -> Option<LoadPoint> {
    let (f, l) = measured(scenario, r).into_iter().next()?;
    let s = LatencyStats::from_histogram(l.histogram())?;
    let rx = r.rx_flows.get(f.id as usize)?.as_ref()?;
    let elapsed_s = r.ports.iter().map(|p| p.elapsed_ns).max()? as f64 / 1e9;
    // Offered: what the flow asked for. A sender that could not keep up sent less than that
    // (sent_pps), which is not loss: loss is what the receiver missed of what was sent.
    let offered_pps = f.schedule.rate.packets_per_sec(f.size.mean());
    let sent: u64 = r
        .ports
        .iter()
        .flat_map(|p| &p.flows)
        .filter(|t| t.id == f.id)
        .map(|t| t.frames)
        .sum();
    let lost = rx.lost.unwrap_or(0);
    (elapsed_s > 0.0).then(|| LoadPoint {
        offered_pps,
        sent_pps: sent as f64 / elapsed_s,
        received_pps: rx.counters.unique as f64 / elapsed_s,
        loss_pct: if sent == 0 {
            0.0
        } else {
            lost as f64 * 100.0 / sent as f64
        },
        p50_ns: s.p50_ns,
        p99_ns: s.p99_ns,
        p9999_ns: s.p99_99_ns,
    })
}

/// Writes a finished sweep as CSV and/or SVG; a failed one is noted in `failures`.
pub fn write_sweep(
    points: &[LoadPoint],
    csv: Option<&Path>,
    svg: Option<&Path>,
    failures: &mut WriteFailures,
) {
    if let Some(path) = csv {
        let mut out = Vec::new();
        failures.note(
            write_load_sweep_csv(&mut out, points)
                .map_err(|e| Failure::Runtime(format!("{}: {e}", path.display())))
                .and_then(|()| write_file(path, &out)),
        );
    }
    if let Some(path) = svg {
        failures.note(write_file(path, load_sweep_svg(points).as_bytes()));
    }
}
