//! Latency outputs of `strobe gen`: the HTML report with log-scale CCDFs, the CDF/CCDF CSV,
//! the HdrHistogram interval log, and the latency-vs-load sweep (`--rates`).

use std::path::{Path, PathBuf};

use clap::Args;
use strobe_control::analyze::latency::{
    decode_histogram, write_cdf_csv, write_encoded_interval_log, write_load_sweep_csv,
    EncodedInterval, LatencyStats, LoadPoint,
};
use strobe_control::analyze::plot::{
    html_report, load_sweep_svg, FlowLatency, FlowTraffic, IntervalLatency, RunContext,
};
use strobe_control::model::Scenario;
use strobe_control::RunReport;

use crate::failure::Failure;
use crate::outputs::{write_file, WriteFailures};
use strobe_control::text::clock_name;
use strobe_control::Results;

/// Where to write latency distributions, besides the summary.
#[derive(Args, Clone, Debug, Default)]
pub struct LatencyOutputs {
    /// A self-contained HTML report: the run's context (date, command, ports, DUT, traffic,
    /// timestamp sources), statistics, and per flow a log-scale CCDF beside the latency over
    /// time (per --hdr-interval).
    #[arg(long, value_name = "FILE", help_heading = "Latency")]
    pub latency_html: Option<PathBuf>,
    /// The CDF and CCDF of every flow as CSV (one row per histogram bucket).
    #[arg(long, value_name = "FILE", help_heading = "Latency")]
    pub latency_csv: Option<PathBuf>,
    /// An HdrHistogram interval log (per flow, one histogram per --hdr-interval, tagged
    /// with the flow name; values in ns), readable by HdrHistogram's own tools.
    #[arg(long, value_name = "FILE", help_heading = "Latency")]
    pub hdr_log: Option<PathBuf>,
    /// Interval length of --hdr-log and of the --latency-html latency over time, e.g. 1s, 100ms.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "1s",
        help_heading = "Latency",
        allow_hyphen_values = true, value_parser = crate::values::positive_text
    )]
    pub hdr_interval: String,
}

/// Latency against load (`--rates`): the rates to run at, and where to write the curve.
#[derive(Args, Clone, Debug, Default)]
#[command(next_help_heading = "Latency")]
pub struct LoadSweep {
    /// Latency against load: run once per rate (one-flow options), e.g. 10kpps,50kpps,100kpps.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        allow_hyphen_values = true, value_parser = crate::values::positive_text
    )]
    pub rates: Vec<String>,
    /// Write the sweep (offered, sent and received rate, loss, p50, p99, p99.99 per step) as CSV.
    #[arg(long, value_name = "FILE", requires = "rates")]
    pub sweep_csv: Option<PathBuf>,
    /// Plot the sweep (p50, p99, p99.99 against offered load) as SVG.
    #[arg(long, value_name = "FILE", requires = "rates")]
    pub sweep_svg: Option<PathBuf>,
}

/// The flows that have a latency distribution, with their histogram.
fn measured<'a>(
    scenario: &'a Scenario,
    r: &'a RunReport,
) -> Vec<(
    &'a strobe_control::model::FlowSpec,
    &'a strobe_control::FlowLatency,
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
    results: &Results,
    failures: &mut WriteFailures,
) {
    let flows = measured(scenario, r);
    if let Some(path) = &outs.latency_html {
        let report: Vec<FlowLatency<'_>> = flows
            .iter()
            .filter_map(|(f, l)| {
                let measured = results.flow(&f.name)?.latency.as_ref()?;
                let (tx, rx) = (&measured.timestamps.tx, &measured.timestamps.rx);
                Some(FlowLatency {
                    name: f.name.clone(),
                    stats: LatencyStats::from_histogram(l.histogram())?,
                    hist: l.histogram(),
                    sources: format!("tx: {tx}\nrx: {rx}"),
                    correction_ns: measured.calibration.as_ref().map(|c| c.offset_ns),
                    traffic: Some(traffic(f, r)),
                    over_time: over_time(r, f.id),
                })
            })
            .collect();
        let context = run_context(scenario, r, &report);
        failures.note(write_file(
            path,
            html_report("strobe latency", &context, &report).as_bytes(),
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

/// Writes a finished sweep as the CSV and/or SVG `sweep` asks for; a failed one is noted in
/// `failures`.
pub fn write_sweep(points: &[LoadPoint], sweep: &LoadSweep, failures: &mut WriteFailures) {
    if let Some(path) = &sweep.sweep_csv {
        let mut out = Vec::new();
        failures.note(
            write_load_sweep_csv(&mut out, points)
                .map_err(|e| Failure::Runtime(format!("{}: {e}", path.display())))
                .and_then(|()| write_file(path, &out)),
        );
    }
    if let Some(path) = &sweep.sweep_svg {
        failures.note(write_file(path, load_sweep_svg(points).as_bytes()));
    }
}

/// A rate as people write it: `20 kpps`, `1.5 Mpps`, `10 Gbit/s (layer 1)`.
fn rate_text(rate: &strobe_control::timing::Rate) -> String {
    let si = |v: f64, unit: &str| {
        let (scale, prefix) = [(1e9, "G"), (1e6, "M"), (1e3, "k")]
            .into_iter()
            .find(|&(scale, _)| v >= scale)
            .unwrap_or((1.0, ""));
        let text = format!("{:.3}", v / scale);
        format!(
            "{} {prefix}{unit}",
            text.trim_end_matches('0').trim_end_matches('.')
        )
    };
    match *rate {
        // The one-flow `--rate max` schedule: far above any reachable rate, sent unpaced.
        strobe_control::timing::Rate::Pps(v) if v >= 1e12 => "as fast as possible".into(),
        strobe_control::timing::Rate::Pps(v) => si(v, "pps"),
        strobe_control::timing::Rate::L1BitsPerSec(v) => format!("{} (layer 1)", si(v, "bit/s")),
    }
}

/// What a flow was asked to send: rate, timing, sizes and length.
fn offered(f: &strobe_control::model::FlowSpec) -> String {
    use strobe_control::model::SizeSpec;
    use strobe_control::timing::Duration;
    let pattern = f.schedule.pattern.describe();
    let size = match &f.size {
        SizeSpec::Fixed(n) => format!("{n} B"),
        SizeSpec::Increment { start, end, step } => format!("{start}–{end} B in steps of {step}"),
        SizeSpec::Random { min, max } => format!("random {min}–{max} B"),
        SizeSpec::WeightPairs(pairs) => format!(
            "a mix of {} B",
            pairs
                .iter()
                .map(|(size, _)| size.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let length = match &f.schedule.duration {
        Duration::Continuous => "until stopped".to_string(),
        Duration::Packets(n) => format!("{n} frames"),
        Duration::Seconds(s) => format!("{s} s"),
        Duration::Bursts { .. } => "bursts".to_string(),
    };
    format!(
        "{}, {pattern}; frames of {size} (FCS included); {length}",
        rate_text(&f.schedule.rate)
    )
}

/// What a flow sent and what came back.
fn traffic(f: &strobe_control::model::FlowSpec, r: &RunReport) -> FlowTraffic {
    let rx = r.rx_flows.get(f.id as usize).and_then(Option::as_ref);
    FlowTraffic {
        offered: offered(f),
        tx_frames: r.frames_sent(f.id),
        rx_frames: rx.map_or(0, |x| x.counters.unique),
        lost: rx.and_then(|x| x.lost),
        jitter_ns: rx
            .and_then(|x| x.latency.as_ref())
            .map_or(0.0, |l| l.jitter_ns()),
    }
}

/// A flow's latency per interval, timed from the run's first interval.
fn over_time(r: &RunReport, flow_id: u16) -> Vec<IntervalLatency> {
    let Some(origin_ns) = r.latency_intervals.iter().map(|i| i.start_ns).min() else {
        return Vec::new();
    };
    let mut points: Vec<IntervalLatency> = r
        .latency_intervals
        .iter()
        .filter(|i| i.flow_id == flow_id)
        .filter_map(|i| {
            let stats = LatencyStats::from_histogram(&decode_histogram(&i.encoded)?)?;
            Some(IntervalLatency {
                start_s: (i.start_ns - origin_ns) as f64 / 1e9,
                duration_s: i.duration_ns as f64 / 1e9,
                stats,
            })
        })
        .collect();
    points.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
    points
}

/// The process's command line, each word quoted for a POSIX shell where it needs it.
fn command_line() -> String {
    std::env::args()
        .enumerate()
        .map(|(k, arg)| {
            // The program by its name, not the path it was started from.
            if k == 0 {
                return "strobe".to_string();
            }
            let plain = !arg.is_empty()
                && arg
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:@,=+%[]".contains(c));
            if plain {
                arg
            } else {
                format!("'{}'", arg.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The lab whose namespaces a port location names, if any (found by asking the lab it
/// would belong to; ports outside a lab find none).
fn lab_of(location: &strobe_control::model::PortLocation) -> Option<strobe_control::lab::Lab> {
    let netns = location.resolved()?.interface()?.0?;
    let prefix = netns
        .strip_suffix("-tx")
        .or_else(|| netns.strip_suffix("-rx"))?;
    let lab = strobe_control::lab::status(prefix).ok()??;
    (lab.tx.netns == netns || lab.rx.netns == netns).then_some(lab)
}

fn describe_dut(lab: &strobe_control::lab::Lab) -> String {
    format!("{}, in strobe's virtual lab {}", lab.dut.name(), lab.prefix)
}

/// The report's context block: when, how, where, through what, with which clocks.
fn run_context(scenario: &Scenario, r: &RunReport, flows: &[FlowLatency<'_>]) -> RunContext {
    let mut rows = vec![
        (
            "date".to_string(),
            format!(
                "{} (UTC, when the report was written)",
                humantime::format_rfc3339_seconds(std::time::SystemTime::now())
            ),
        ),
        ("command".to_string(), command_line()),
    ];
    let mut ports: Vec<String> = r
        .ports
        .iter()
        .map(|p| format!("transmit {}: {}", p.name, p.backend))
        .collect();
    ports.extend(
        r.rx_ports
            .iter()
            .map(|p| format!("receive {}: {}", p.name, p.receiver)),
    );
    rows.push(("ports".to_string(), ports.join("\n")));
    let dut = scenario
        .ports
        .iter()
        .find_map(|p| lab_of(&p.location))
        .map_or_else(
            || "not strobe's lab: whatever lies between the ports".to_string(),
            |lab| describe_dut(&lab),
        );
    rows.push(("device under test".to_string(), dut));
    let traffic: Vec<String> = scenario
        .flows
        .iter()
        .map(|f| format!("{}: {}", f.name, offered(f)))
        .collect();
    rows.push(("traffic".to_string(), traffic.join("\n")));
    let results: Vec<String> = flows
        .iter()
        .filter_map(|f| {
            let t = f.traffic.as_ref()?;
            Some(format!(
                "{}: tx {} frames, rx {}, lost {}, jitter {:.3} µs",
                f.name,
                t.tx_frames,
                t.rx_frames,
                t.lost.map_or_else(
                    || "unknown".to_string(),
                    |l| format!(
                        "{l} ({:.4} %)",
                        l as f64 * 100.0 / t.tx_frames.max(1) as f64
                    )
                ),
                t.jitter_ns / 1e3
            ))
        })
        .collect();
    rows.push(("results".to_string(), results.join("\n")));
    // Each distinct source once, in the order the flows name them (tx before rx).
    let mut sources: Vec<&str> = Vec::new();
    for line in flows.iter().flat_map(|f| f.sources.lines()) {
        if !sources.contains(&line) {
            sources.push(line);
        }
    }
    rows.push(("timestamps".to_string(), sources.join("\n")));
    rows.push((
        "clock".to_string(),
        format!(
            "{} at {:.3} MHz; receivers drained {} ms after the last frame",
            clock_name(r.clock),
            r.ticks_per_sec / 1e6,
            r.drain_ns / 1_000_000
        ),
    ));
    if !scenario.warnings.is_empty() {
        rows.push((
            "warnings".to_string(),
            strobe_control::warning_texts(&scenario.warnings).join("\n"),
        ));
    }
    // The scenario as it was run (one-flow runs are all in the command line).
    let scenario_file = (scenario.source != "command line")
        .then(|| std::fs::read_to_string(&scenario.source).ok())
        .flatten()
        .map(|text| (scenario.source.clone(), text));
    RunContext {
        rows,
        scenario: scenario_file,
    }
}
