//! How a run is shown: a status line while it runs, then a summary table, JSON and CSV.

use std::fmt::Write as _;
use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;
use strobe_analyze::latency::{self, LatencyStats};
use strobe_engine::latency::FlowLatency;
use strobe_engine::live::FlowSnapshot;
use strobe_engine::{ClockSource, PortReport, RunReport, Tick};
use strobe_model::Scenario;

pub fn clock_name(c: ClockSource) -> &'static str {
    match c {
        ClockSource::Tsc => "invariant TSC",
        ClockSource::Monotonic => "CLOCK_MONOTONIC (TSC not invariant)",
    }
}

/// Bits a frame of `bytes` (without FCS, as counted on veth) costs at layer 2 and layer 1.
fn l2_l1_bits(frames: u64, bytes: u64) -> (f64, f64) {
    let l2 = (bytes + 4 * frames) as f64 * 8.0;
    (l2, l2 + (20 * frames) as f64 * 8.0)
}

/// How far a run has come, for the progress bar: frames against the frames its flows will
/// send, or (an unpaced run with a time limit) time against the limit.
#[derive(Clone, Copy)]
enum Progress {
    Frames(u64),
    TimeNs(u64),
}

/// Frames a flow will send, when its schedule says: a count, or its rate over its duration.
fn expected_frames(f: &strobe_model::FlowSpec) -> Option<u64> {
    match f.schedule.duration {
        strobe_timing::Duration::Packets(n) => Some(n),
        strobe_timing::Duration::Seconds(s) => {
            Some((f.schedule.rate.packets_per_sec(f.size.mean()) * s).ceil() as u64)
        }
        strobe_timing::Duration::Bursts {
            bursts, packets, ..
        } if bursts > 0 => Some(bursts.saturating_mul(packets)),
        _ => None,
    }
}

/// The one-line status printed every second, and the progress bar on a terminal.
pub struct Status {
    bar: Option<ProgressBar>,
    progress: Option<Progress>,
    verbose: bool,
    quiet: bool,
    last: Vec<FlowSnapshot>,
    last_ns: u64,
    names: Vec<String>,
}

impl Status {
    /// `time_limit_ns`: the real-time limit of an unpaced run, if it has one.
    pub fn new(
        scenario: &Scenario,
        verbose: bool,
        quiet: bool,
        time_limit_ns: Option<u64>,
    ) -> Self {
        let total_frames: Option<u64> = scenario
            .flows
            .iter()
            .map(expected_frames)
            .try_fold(0u64, |sum, n| n.map(|n| sum.saturating_add(n)));
        let progress = match (time_limit_ns, total_frames) {
            (Some(ns), _) => Some(Progress::TimeNs(ns)),
            (None, Some(n)) if n > 0 => Some(Progress::Frames(n)),
            _ => None,
        };
        // Only on a terminal: a bar in a log file or a pipe is noise.
        let terminal = std::io::stderr().is_terminal() && std::io::stdout().is_terminal();
        let bar = (!quiet && terminal).then(|| {
            let bar = match progress {
                Some(p) => {
                    let len = match p {
                        Progress::Frames(n) => n,
                        Progress::TimeNs(ns) => ns,
                    };
                    ProgressBar::new(len).with_style(
                        ProgressStyle::with_template("{bar:30} {percent:>3}% {eta} left  {msg}")
                            .unwrap_or_else(|_| ProgressStyle::default_bar()),
                    )
                }
                None => ProgressBar::new_spinner(),
            };
            bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            bar
        });
        Status {
            bar,
            progress,
            verbose,
            quiet,
            last: vec![FlowSnapshot::default(); scenario.flows.len()],
            last_ns: 0,
            names: scenario.flows.iter().map(|f| f.name.clone()).collect(),
        }
    }

    pub fn tick(&mut self, t: &Tick<'_>) {
        if let Some(pacings) = t.ready {
            for p in pacings {
                if !self.quiet {
                    eprintln!("{}", crate::results::pacing_line(p));
                }
                if let Some(w) = p.warning() {
                    eprintln!("warning: {w}");
                }
            }
            return;
        }
        if self.quiet || t.started {
            return;
        }
        let dt = (t.elapsed_ns - self.last_ns).max(1) as f64 / 1e9;
        let sum = |v: &[FlowSnapshot]| {
            v.iter().fold(FlowSnapshot::default(), |mut a, f| {
                a.add(f);
                a
            })
        };
        let (now, before) = (sum(t.flows), sum(&self.last));
        let tx_pps = (now.tx_frames - before.tx_frames) as f64 / dt;
        let rx_pps = (now.rx_frames - before.rx_frames) as f64 / dt;
        // TX bytes are frame sizes incl. FCS; RX bytes are as received (no FCS on veth).
        let (rx_l2, rx_l1) = l2_l1_bits(
            now.rx_frames - before.rx_frames,
            now.rx_bytes - before.rx_bytes,
        );
        let tx_l1 = ((now.tx_bytes - before.tx_bytes) + 20 * (now.tx_frames - before.tx_frames))
            as f64
            * 8.0;
        let lost = now.tx_frames.saturating_sub(now.rx_unique);
        let mut line = format!(
            "{:>6.1}s  tx {:>10.0} pps {:>7.3} Gbit/s L1 | rx {:>10.0} pps {:>7.3} Gbit/s L1 {:>7.3} L2 | not yet received {}",
            t.elapsed_ns as f64 / 1e9,
            tx_pps,
            tx_l1 / dt / 1e9,
            rx_pps,
            rx_l1 / dt / 1e9,
            rx_l2 / dt / 1e9,
            lost
        );
        if self.verbose {
            for (i, (f, b)) in t.flows.iter().zip(&self.last).enumerate() {
                let _ = write!(
                    line,
                    "\n          {:<20} tx {:>10.0} pps  rx {:>10.0} pps  outstanding {}",
                    self.names.get(i).map(String::as_str).unwrap_or("?"),
                    (f.tx_frames - b.tx_frames) as f64 / dt,
                    (f.rx_frames - b.rx_frames) as f64 / dt,
                    f.tx_frames.saturating_sub(f.rx_unique)
                );
            }
        }
        match &self.bar {
            Some(bar) => {
                // An estimate may fall short of what is sent: the bar stops at 100 %.
                match self.progress {
                    Some(Progress::Frames(n)) => bar.set_position(now.tx_frames.min(n)),
                    Some(Progress::TimeNs(ns)) => bar.set_position(t.elapsed_ns.min(ns)),
                    None => {}
                }
                bar.set_message(line.lines().next().unwrap_or_default().to_string());
                if self.verbose {
                    bar.println(line);
                }
            }
            None => eprintln!("{line}"),
        }
        self.last = t.flows.to_vec();
        self.last_ns = t.elapsed_ns;
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// A flow's transmit totals over every worker that sent part of it.
#[derive(Default)]
struct TxTotals {
    frames: u64,
    bytes: u64,
    first_ns: Option<u64>,
    last_ns: Option<u64>,
    instrumented: bool,
    seen: bool,
}

fn tx_totals(r: &RunReport, id: u16) -> TxTotals {
    let mut t = TxTotals::default();
    for p in &r.ports {
        for f in p.flows.iter().filter(|f| f.id == id) {
            t.seen = true;
            t.frames += f.frames;
            t.bytes += f.bytes;
            // On CLOCK_REALTIME, as receive timestamps are (trace times stay the trace's).
            let on_clock = |ns: Option<u64>| ns.map(|ns| ns + p.t0_unix_ns.unwrap_or(0));
            t.first_ns = match (t.first_ns, on_clock(f.first_ns)) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            t.last_ns = t.last_ns.max(on_clock(f.last_ns));
            t.instrumented |= f.instrumented;
        }
    }
    t
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// The final summary on stdout.
pub fn print_summary(scenario: &Scenario, r: &RunReport) {
    println!(
        "clock: {} at {:.3} MHz; run tag 0x{:02x}",
        clock_name(r.clock),
        r.ticks_per_sec / 1e6,
        r.run_tag
    );
    for p in &r.ports {
        println!("tx port {}: {}", p.name, p.backend);
        let secs = p.elapsed_ns as f64 / 1e9;
        if p.scheduled_time {
            println!(
                "  {} frames, {} bytes (scheduled time, batch {})",
                p.frames, p.bytes, p.batch
            );
        } else {
            let mpps = if secs > 0.0 {
                p.frames as f64 / secs / 1e6
            } else {
                0.0
            };
            let ns_per = if p.frames > 0 {
                p.elapsed_ns as f64 / p.frames as f64
            } else {
                0.0
            };
            println!(
                "  {} frames, {} bytes in {:.3} s: {:.3} Mpps, {:.2} ns/frame (batch {}{})",
                p.frames,
                p.bytes,
                secs,
                mpps,
                ns_per,
                p.batch,
                p.core.map(|c| format!(", core {c}")).unwrap_or_default()
            );
            println!(
                "  late frames: {} (worst {}, schedule still shifted at the end {})",
                p.late_frames,
                duration_text(p.max_late_ns),
                duration_text(p.shifted_ns)
            );
            if let Some(seg) = &p.segmentation {
                println!(
                    "  UDP segmentation: {} superframes carried {} of {} frames{}",
                    seg.superframes,
                    seg.frames,
                    p.frames,
                    if seg.superframes == 0 && p.frames > 1 {
                        " (none formed: a run needs a batch of 2 or more and IPv4/UDP frames \
                         whose IP identification counts up, e.g. \
                         --vary ip.identification=inc:0/1/65536)"
                    } else {
                        ""
                    }
                );
            }
            if let Some(h) = &p.handover {
                println!("  hand-over after deadline: {}", error_text(h));
            }
            if let Some(pacing) = &p.pacing {
                println!("  {}", pacing_line(pacing));
                if let Some(f) = pacing.observed {
                    println!(
                        "  floor as the run's hand-overs refined it: {} per hand-over, {} back \
                         to back",
                        duration_text(f.handover_ns),
                        duration_text(f.spacing_ns)
                    );
                }
                println!(
                    "  hand-overs: {}; {} frames ({:.2} %) left coalesced with others",
                    p.handovers,
                    p.coalesced_frames,
                    pct(p.coalesced_frames, p.frames)
                );
            }
            if let Some(d) = &p.departure {
                println!(
                    "  estimated departure vs deadline (frame k of a hand-over k spacings after \
                     it; early or late): {}",
                    error_text(d)
                );
            }
            if let Some(fit) = &p.departure_fit {
                println!("  {}", departure_fit_text(fit));
            }
        }
        if p.stopped_early {
            println!("  stopped before the end of the schedule");
        }
        if let Some(failure) = &p.failure {
            println!("  stopped by an error: {failure}");
        }
    }
    for p in &r.rx_ports {
        println!(
            "rx port {}: {} — {} frames, timestamps: {}; not strobe's: {}, another run's tag (stale or foreign): {}, unknown flow: {}, stamped outside the run: {}, truncated: {}, dropped by the kernel: {}",
            p.name,
            p.receiver,
            p.frames,
            p.timestamps,
            p.other.not_instrumented,
            p.other.foreign,
            p.other.unknown_flow,
            p.other.out_of_window,
            p.other.truncated,
            p.drops.ring_full
        );
        if let Some(sync) = &p.hardware_clock {
            println!("  hardware timestamps mapped to CLOCK_REALTIME by a clock sync: {sync}");
        }
    }
    println!(
        "  {:<20} {:>12} {:>12} {:>10} {:>8} {:>9} {:>6} {:>6} {:>7}",
        "flow", "tx frames", "rx frames", "lost", "loss %", "reorder", "dup", "late", "trailer"
    );
    for f in &scenario.flows {
        let totals = tx_totals(r, f.id);
        let (tx, instrumented) = (totals.frames, totals.instrumented);
        match r.rx_flows.get(f.id as usize).and_then(Option::as_ref) {
            Some(rx) => {
                let lost = rx.lost.unwrap_or(0);
                println!(
                    "  {:<20} {:>12} {:>12} {:>10} {:>8.4} {:>9} {:>6} {:>6} {:>7}",
                    f.name,
                    tx,
                    rx.counters.frames,
                    lost,
                    pct(lost, tx),
                    rx.counters.reordered,
                    rx.counters.duplicates,
                    rx.counters.late,
                    if instrumented { "yes" } else { "no" }
                );
            }
            None => println!(
                "  {:<20} {:>12} {:>12} {:>10} {:>8} {:>9} {:>6} {:>6} {:>7}",
                f.name,
                tx,
                "-",
                "-",
                "-",
                "-",
                "-",
                "-",
                if instrumented { "yes" } else { "no" }
            ),
        }
    }
    if !r.rx_ports.is_empty() {
        println!(
            "  (loss is final: receivers drained for {} ms after the last frame)",
            r.drain_ns / 1_000_000
        );
    }
    for f in &scenario.flows {
        if let Some(rx) = r.rx_flows.get(f.id as usize).and_then(Option::as_ref) {
            if rx.excess > 0 {
                println!(
                    "  SUSPECT: flow {} received {} more unique frames than it sent: frames with this run's tag came from elsewhere; its counts and latency are not trustworthy",
                    f.name, rx.excess
                );
            }
        }
    }
}

/// Per-flow results as JSON (OTG-style names where OTG has them).
pub fn to_json(
    scenario: &Scenario,
    r: &RunReport,
    correction: Option<&Correction>,
) -> serde_json::Value {
    let flows: Vec<_> = scenario
        .flows
        .iter()
        .map(|f| {
            let t = tx_totals(r, f.id);
            let tx = t.seen.then_some(&t);
            let rx = r.rx_flows.get(f.id as usize).and_then(Option::as_ref);
            json!({
                "name": f.name,
                "id": f.id,
                "tx_port": f.tx_port,
                "rx_ports": f.rx_ports,
                "frames_tx": tx.map(|t| t.frames),
                "bytes_tx": tx.map(|t| t.bytes),
                "first_tx_ns": tx.and_then(|t| t.first_ns),
                "last_tx_ns": tx.and_then(|t| t.last_ns),
                "instrumented": tx.map(|t| t.instrumented),
                "frames_rx": rx.map(|x| x.counters.frames),
                "bytes_rx": rx.map(|x| x.counters.bytes),
                "frames_rx_unique": rx.map(|x| x.counters.unique),
                "loss": rx.and_then(|x| x.lost),
                "excess_rx": rx.map(|x| x.excess),
                "suspect": rx.is_some_and(|x| x.excess > 0),
                "reordered": rx.map(|x| x.counters.reordered),
                "duplicates": rx.map(|x| x.counters.duplicates),
                "late": rx.map(|x| x.counters.late),
                "first_rx_ns": rx.and_then(|x| x.counters.first_rx_ns),
                "last_rx_ns": rx.and_then(|x| x.counters.last_rx_ns),
                "latency": latency_json(r, f, correction),
            })
        })
        .collect();
    json!({
        "run_tag": r.run_tag,
        "clock": clock_name(r.clock),
        "ticks_per_sec": r.ticks_per_sec,
        "drain_ns": r.drain_ns,
        "ports": r.ports.iter().map(|p| json!({
            "name": p.name,
            "backend": p.backend,
            "scheduled_time": p.scheduled_time,
            "batch": p.batch,
            "core": p.core,
            "segmentation": p.segmentation.map(|s| json!({
                "superframes": s.superframes,
                "frames": s.frames,
            })),
            "frames_tx": p.frames,
            "bytes_tx": p.bytes,
            "late_frames": p.late_frames,
            "max_late_ns": p.max_late_ns,
            "shifted_ns": p.shifted_ns,
            "handover_error": p.handover.as_ref().map(error_json),
            "pacing": p.pacing.as_ref().map(|c| json!({
                "handover_ns": c.floor.handover_ns,
                "spacing_ns": c.floor.spacing_ns,
                "floor_source": c.source.name(),
                "probe_frames": c.probe_frames,
                "max_batch": c.max_batch,
                "ceiling_pps": c.ceiling_pps,
                "asked_pps": c.asked_pps,
                "observed_handover_ns": c.observed.map(|f| f.handover_ns),
                "observed_spacing_ns": c.observed.map(|f| f.spacing_ns),
            })),
            "handovers": p.handovers,
            "coalesced_frames": p.coalesced_frames,
            "departure_error": p.departure.as_ref().map(error_json),
            "departure_fit": p.departure_fit.as_ref().and_then(|f| serde_json::to_value(f).ok()),
            "elapsed_ns": p.elapsed_ns,
            "planned_ns": p.planned_ns,
            "t0_unix_ns": p.t0_unix_ns,
            "shortfall": shortfall(p),
            "stopped_early": p.stopped_early,
            "failure": p.failure,
            "flows": p.flows.iter().map(|f| json!({
                "name": f.name,
                "id": f.id,
                "frames_tx": f.frames,
                "bytes_tx": f.bytes,
                "first_ns": f.first_ns,
                "last_ns": f.last_ns,
                "instrumented": f.instrumented,
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "rx_ports": r.rx_ports.iter().map(|p| json!({
            "name": p.name,
            "receiver": p.receiver,
            "frames_rx": p.frames,
            "timestamps": p.timestamps,
            "timestamp_counts": {
                "kernel": p.timestamp_counts.kernel,
                "user": p.timestamp_counts.user,
                "hardware": p.timestamp_counts.hardware,
            },
            "not_instrumented": p.other.not_instrumented,
            "unknown_flow": p.other.unknown_flow,
            "foreign": p.other.foreign,
            "out_of_window": p.other.out_of_window,
            "truncated": p.other.truncated,
            "kernel_drops": p.drops.ring_full,
            "hardware_clock": p.hardware_clock,
        })).collect::<Vec<_>>(),
        "flows": flows,
    })
}

/// The transmit ports an error stopped, as messages (the results cover what went before).
pub fn port_failures(r: &RunReport) -> Vec<String> {
    r.ports
        .iter()
        .filter_map(|p| {
            p.failure
                .as_ref()
                .map(|f| format!("port `{}` stopped before its end: {f}", p.name))
        })
        .collect()
}

/// Per-flow results as CSV, one row per flow.
pub fn to_csv(scenario: &Scenario, r: &RunReport) -> String {
    let mut out = String::from(
        "flow,id,tx_port,frames_tx,bytes_tx,frames_rx,bytes_rx,frames_rx_unique,loss,loss_pct,reordered,duplicates,late,\
latency_min_ns,latency_p50_ns,latency_p99_ns,latency_p99_9_ns,latency_p99_99_ns,latency_max_ns,latency_mean_ns,latency_jitter_ns\n",
    );
    for f in &scenario.flows {
        let t = tx_totals(r, f.id);
        let (frames_tx, bytes_tx) = (t.frames, t.bytes);
        let rx = r.rx_flows.get(f.id as usize).and_then(Option::as_ref);
        let cell = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_default();
        let loss = rx.and_then(|x| x.lost);
        let lat = latency_stats(r, f.id)
            .map(|(s, l)| {
                format!(
                    "{},{},{},{},{},{},{:.1},{:.1}",
                    s.min_ns,
                    s.p50_ns,
                    s.p99_ns,
                    s.p99_9_ns,
                    s.p99_99_ns,
                    s.max_ns,
                    s.mean_ns,
                    l.jitter_ns()
                )
            })
            .unwrap_or_else(|| ",,,,,,,".into());
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{lat}",
            csv_field(&f.name),
            f.id,
            csv_field(&f.tx_port),
            frames_tx,
            bytes_tx,
            cell(rx.map(|x| x.counters.frames)),
            cell(rx.map(|x| x.counters.bytes)),
            cell(rx.map(|x| x.counters.unique)),
            cell(loss),
            loss.map(|l| format!("{:.6}", pct(l, frames_tx)))
                .unwrap_or_default(),
            cell(rx.map(|x| x.counters.reordered)),
            cell(rx.map(|x| x.counters.duplicates)),
            cell(rx.map(|x| x.counters.late)),
        );
    }
    out
}

/// Quotes a CSV field when it needs it (RFC 4180).
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A calibration in use: the measurement path's own latency, subtracted from every flow's.
#[derive(Clone, Debug)]
pub struct Correction {
    /// Where it came from (a `strobe calibrate` file).
    pub source: String,
    pub offset_ns: f64,
}

/// Which clock stamped a flow's frames on each side, in words.
pub fn timestamp_sources(r: &RunReport, flow: &strobe_model::FlowSpec) -> (String, String) {
    let tx = match r.ports.iter().find(|p| p.name == flow.tx_port || p.name.starts_with(&format!("{}#", flow.tx_port))) {
        Some(p) if p.scheduled_time => "scheduled departure time (trace)".to_string(),
        Some(_) => format!(
            "user space: CLOCK_REALTIME (TSC re-anchored every ms; kernel clocksource {}) taken just before the hand-over to the backend",
            strobe_engine::clock::kernel_clocksource()
        ),
        None => "none".to_string(),
    };
    let mut rx: Vec<String> =
        r.rx_ports
            .iter()
            .filter(|p| flow.rx_ports.contains(&p.name))
            .map(|p| match p.timestamps {
                "kernel" => "kernel software receive timestamp (CLOCK_REALTIME)".to_string(),
                "user" => "user space: CLOCK_REALTIME right after taking the frame off the ring"
                    .to_string(),
                "hardware" => "NIC hardware receive timestamp (PTP hardware clock)".to_string(),
                "mixed" => {
                    let c = &p.timestamp_counts;
                    format!(
                        "mixed: {} frames NIC hardware, {} kernel software, {} user space",
                        c.hardware, c.kernel, c.user
                    )
                }
                _ => "none".to_string(),
            })
            .collect();
    rx.dedup();
    (
        tx,
        if rx.is_empty() {
            "none".into()
        } else {
            rx.join("; ")
        },
    )
}

fn latency_stats(r: &RunReport, id: u16) -> Option<(LatencyStats, &FlowLatency)> {
    let l = r.rx_flows.get(id as usize)?.as_ref()?.latency.as_ref()?;
    Some((LatencyStats::from_histogram(l.histogram())?, l))
}

fn us(ns: f64) -> String {
    format!("{:.3}", ns / 1e3)
}

fn latency_row(name: &str, s: &LatencyStats, jitter_ns: Option<f64>) -> String {
    let mut line = format!("  {name:<20} {:>10}", s.count);
    for (label, v) in s.rows() {
        let q = latency::PERCENTILES
            .iter()
            .find(|(l, _)| *l == label)
            .map(|&(_, q)| q);
        if q.is_some_and(|q| !s.resolves(q)) {
            let _ = write!(line, " {:>9}", "-");
        } else {
            let _ = write!(line, " {:>9}", us(v));
        }
    }
    let _ = write!(
        line,
        " {:>9}",
        jitter_ns.map(us).unwrap_or_else(|| "-".into())
    );
    line
}

/// The latency table: every instrumented frame's latency per flow, with the timestamp source
/// of each side, and calibration-corrected values when a calibration is in use.
pub fn print_latency(scenario: &Scenario, r: &RunReport, correction: Option<&Correction>) {
    let measured: Vec<_> = scenario
        .flows
        .iter()
        .filter_map(|f| latency_stats(r, f.id).map(|s| (f, s)))
        .collect();
    if measured.is_empty() {
        return;
    }
    println!("latency in µs, every instrumented frame (no sampling):");
    let mut header = format!("  {:<20} {:>10}", "flow", "frames");
    for (label, _) in measured[0].1 .0.rows() {
        let _ = write!(header, " {label:>9}");
    }
    let _ = write!(header, " {:>9}", "jitter");
    println!("{header}");
    for (f, (s, l)) in &measured {
        println!("{}", latency_row(&f.name, s, Some(l.jitter_ns())));
        if let Some(c) = correction {
            println!(
                "{}",
                latency_row(
                    &format!("  − {} µs", us(c.offset_ns)),
                    &s.subtract(c.offset_ns),
                    None
                )
            );
        }
        if l.negative() > 0 {
            println!(
                "    warning: {} frames arrived before they were sent by the timestamps: the two sides' clocks disagree",
                l.negative()
            );
        }
    }
    if let Some(c) = correction {
        println!(
            "  (second rows: corrected by the calibration in {}, the measurement path's own median latency)",
            c.source
        );
    }
    println!("  (\"-\": too few frames to resolve that percentile; jitter: RFC 3550 interarrival jitter)");
    let mut sources: Vec<(String, String)> = measured
        .iter()
        .map(|(f, _)| timestamp_sources(r, f))
        .collect();
    sources.dedup();
    for (tx, rx) in sources {
        println!("  timestamps: tx {tx}; rx {rx}");
    }
}

/// One flow's latency as JSON (null when not measured).
pub fn latency_json(
    r: &RunReport,
    flow: &strobe_model::FlowSpec,
    correction: Option<&Correction>,
) -> serde_json::Value {
    let Some((s, l)) = latency_stats(r, flow.id) else {
        return serde_json::Value::Null;
    };
    let (tx, rx) = timestamp_sources(r, flow);
    json!({
        "mode": flow.metrics.latency.map(|m| m.name()),
        "timestamps": {"tx": tx, "rx": rx},
        "raw": s,
        "jitter_ns": l.jitter_ns(),
        "negative": l.negative(),
        "clamped": l.clamped(),
        "corrected": correction.map(|c| s.subtract(c.offset_ns)),
        "calibration": correction.map(|c| json!({"file": c.source, "offset_ns": c.offset_ns})),
    })
}

/// Per flow with a receiver: (name, frames sent, frames lost), for loss verdicts.
fn flow_losses<'a>(scenario: &'a Scenario, r: &RunReport) -> Vec<(&'a str, u64, u64)> {
    scenario
        .flows
        .iter()
        .filter_map(|f| {
            let rx = r.rx_flows.get(f.id as usize)?.as_ref()?;
            Some((f.name.as_str(), tx_totals(r, f.id).frames, rx.lost?))
        })
        .collect()
}

/// One line when flows lost every frame they sent (the run "worked" but measured nothing):
/// what was lost, the likely causes, and what to check.
pub fn total_loss_warning(scenario: &Scenario, r: &RunReport) -> Option<String> {
    let losses = flow_losses(scenario, r);
    let all_lost: Vec<&str> = losses
        .iter()
        .filter(|&&(_, tx, lost)| tx > 0 && lost >= tx)
        .map(|&(name, _, _)| name)
        .collect();
    if all_lost.is_empty() {
        return None;
    }
    let what = if all_lost.len() == losses.len() {
        let sent: u64 = losses.iter().map(|l| l.1).sum();
        format!("100 % loss: none of the {sent} frames sent was received")
    } else {
        let mut names = all_lost
            .iter()
            .take(5)
            .copied()
            .collect::<Vec<_>>()
            .join(", ");
        if all_lost.len() > 5 {
            let _ = write!(names, " and {} more", all_lost.len() - 5);
        }
        format!(
            "100 % loss on {} of {} flows ({names})",
            all_lost.len(),
            losses.len()
        )
    };
    Some(format!(
        "{what} — likely the frames do not reach the receiver: wrong destination MAC (the DUT \
         drops frames not addressed to it), wrong IP addresses or no route on the DUT, or the \
         receive port is not where the DUT sends; check the flows' MACs and addresses against \
         the DUT's (`strobe lab status` on the lab) and the rx port"
    ))
}

/// The worst loss in percent of sent frames: per flow, and over the run (all flows with a
/// receiver together). None when no flow has a receiver.
pub fn worst_loss(scenario: &Scenario, r: &RunReport) -> Option<(String, f64)> {
    let losses = flow_losses(scenario, r);
    if losses.is_empty() {
        return None;
    }
    let (sent, lost) = losses
        .iter()
        .fold((0, 0), |(s, l), &(_, tx, lo)| (s + tx, l + lo));
    let run = ("the run".to_string(), pct(lost, sent));
    losses
        .iter()
        .map(|&(name, tx, lost)| (format!("flow `{name}`"), pct(lost, tx)))
        .chain(std::iter::once(run))
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// Beyond this share (and [`SHORTFALL_MIN_NS`]), a paced port that took longer than its
/// schedule planned is said to have missed the asked rate.
const SHORTFALL_SHARE: f64 = 0.01;
const SHORTFALL_MIN_NS: u64 = 1_000_000;

/// One line when a paced port sent slower than asked (its frames took more than ~1 % longer
/// than the schedule planned): achieved against requested, why, and what to do.
pub fn shortfall(p: &PortReport) -> Option<String> {
    if p.scheduled_time || p.stopped_early || p.planned_ns == 0 || p.frames < 2 {
        return None;
    }
    let behind_ns = p.elapsed_ns.saturating_sub(p.planned_ns);
    if behind_ns <= SHORTFALL_MIN_NS || (behind_ns as f64) <= p.planned_ns as f64 * SHORTFALL_SHARE
    {
        return None;
    }
    let rate = |span_ns: u64| (p.frames - 1) as f64 / (span_ns as f64 / 1e9);
    let why = if p.late_frames > 0 {
        format!(
            "{} frames were handed over late (worst {}): the sender could not keep up",
            p.late_frames,
            duration_text(p.max_late_ns)
        )
    } else {
        "the backend could not take the frames as fast as asked".to_string()
    };
    // The floor as the run's own hand-overs measured it says what the path paces.
    let why = match p
        .pacing
        .as_ref()
        .and_then(|c| c.observed.map(|f| (f, c.max_batch)))
    {
        Some((floor, batch)) => format!(
            "{why}; the path's floor as the run measured it ({} per hand-over, {} back to \
             back) paces at most {}",
            duration_text(floor.handover_ns),
            duration_text(floor.spacing_ns),
            pps_text(floor.ceiling_pps(batch))
        ),
        None => why,
    };
    Some(format!(
        "tx port {}: sent {} frames at {} in {}, {:.1} % of the asked {} over {}; {why} — lower \
         the rate, give strobe more cores (--cores N, 2 or more CPUs), use afxdp:, or run on a \
         quieter machine",
        p.name,
        p.frames,
        pps_text(rate(p.elapsed_ns)),
        duration_text(p.elapsed_ns),
        p.planned_ns as f64 * 100.0 / p.elapsed_ns as f64,
        pps_text(rate(p.planned_ns)),
        duration_text(p.planned_ns),
    ))
}

/// One line: the estimated departure gaps judged through the floor, then the verdict.
fn departure_fit_text(fit: &strobe_analyze::FloorFit) -> String {
    let d = |name: &str| {
        fit.fits.iter().find(|m| m.model == name).map_or_else(
            || "-".to_string(),
            |m| format!("D = {:.4} (p {:.2})", m.ks_d, m.ks_p),
        )
    };
    format!(
        "estimated departure gaps (KS against {} model gaps, each allowed ±{}): perfect sender \
         on the refined floor {}, plain model {} — {}",
        fit.model_gaps,
        duration_text(fit.band_ns),
        d("perfect_sender"),
        d("plain"),
        fit.verdict
    )
}

fn error_text(h: &strobe_engine::HandoverError) -> String {
    format!(
        "p50 {}, p99 {}, p99.9 {}, p99.99 {}, max {}; {:.2} % within 100 ns, {:.2} % within 1 µs",
        duration_text(h.p50_ns),
        duration_text(h.p99_ns),
        duration_text(h.p99_9_ns),
        duration_text(h.p99_99_ns),
        duration_text(h.max_ns),
        h.within_100ns * 100.0,
        h.within_1us * 100.0
    )
}

fn error_json(h: &strobe_engine::HandoverError) -> serde_json::Value {
    json!({
        "samples": h.samples,
        "p50_ns": h.p50_ns,
        "p90_ns": h.p90_ns,
        "p99_ns": h.p99_ns,
        "p99_9_ns": h.p99_9_ns,
        "p99_99_ns": h.p99_99_ns,
        "max_ns": h.max_ns,
        "within_100ns": h.within_100ns,
        "within_1us": h.within_1us,
    })
}

/// One line on a paced port's floor: what one hand-over costs, how closely frames handed
/// over together leave, and the highest rate that paces.
pub fn pacing_line(p: &strobe_engine::PortPacing) -> String {
    format!(
        "tx port {}: floor {} per hand-over, {} back to back ({}{}); paces up to {} with up to \
         {} frames per hand-over{}",
        p.port,
        duration_text(p.floor.handover_ns),
        duration_text(p.floor.spacing_ns),
        p.source.name(),
        match p.probe_frames {
            0 => String::new(),
            n => format!(" with {n} probe frames"),
        },
        pps_text(p.ceiling_pps),
        p.max_batch,
        match p.asked_pps {
            Some(asked) => format!("; asked {}", pps_text(asked)),
            None => String::new(),
        }
    )
}

/// A packet rate with a unit that keeps it readable.
fn pps_text(pps: f64) -> String {
    if pps >= 1e6 {
        format!("{:.3} Mpps", pps / 1e6)
    } else if pps >= 1e3 {
        format!("{:.2} kpps", pps / 1e3)
    } else {
        format!("{pps:.1} pps")
    }
}

/// How every time is printed in prose: three decimals of µs below 1 ms (ns resolution), of
/// ms below 1 s, of s above, always with the unit. Tables give µs and say so in the header.
pub fn duration_text(ns: u64) -> String {
    duration_text_f64(ns as f64)
}

/// [`duration_text`] for fractional (or negative) nanoseconds.
pub fn duration_text_f64(ns: f64) -> String {
    if ns.abs() >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if ns.abs() >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else {
        format!("{:.3} µs", ns / 1e3)
    }
}

/// Warnings about a finished run, on stderr: ports that missed their rate, flows that lost
/// every frame.
pub fn print_verdicts(scenario: &Scenario, r: &RunReport) {
    for line in r.ports.iter().filter_map(shortfall) {
        eprintln!("warning: {line}");
    }
    if let Some(line) = total_loss_warning(scenario, r) {
        eprintln!("warning: {line}");
    }
}
