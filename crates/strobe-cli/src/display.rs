//! How a run is shown on the terminal: a status line while it runs, then a summary table of
//! its [`Results`] (the schema `--json` and `--csv` write comes from the run-control layer).

use std::fmt::Write as _;
use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};
use strobe_control::analyze::latency::{self, LatencyStats};
use strobe_control::model::Scenario;
use strobe_control::results::{PacingResult, TimingError};
use strobe_control::text::{duration_text, pps_text};
use strobe_control::FlowSnapshot;
use strobe_control::Results;
use strobe_control::Tick;

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
fn expected_frames(f: &strobe_control::model::FlowSpec) -> Option<u64> {
    match f.schedule.duration {
        strobe_control::timing::Duration::Packets(n) => Some(n),
        strobe_control::timing::Duration::Seconds(s) => {
            Some((f.schedule.rate.packets_per_sec(f.size.mean()) * s).ceil() as u64)
        }
        strobe_control::timing::Duration::Bursts {
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
        for w in t.warnings {
            match &self.bar {
                Some(bar) => bar.suspend(|| eprintln!("warning: {w}")),
                None => eprintln!("warning: {w}"),
            }
        }
        if let Some(pacings) = t.ready {
            for p in pacings {
                if !self.quiet {
                    eprintln!("{}", pacing_line(&PacingResult::from(p)));
                }
                if let Some(w) = p.warning() {
                    eprintln!("warning: {w}");
                }
            }
            return;
        }
        if self.quiet || t.started || t.warnings_only() {
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
        // Both sides count frames without their FCS; the L2 and L1 figures add it back.
        let (rx_l2, rx_l1) = l2_l1_bits(
            now.rx_frames - before.rx_frames,
            now.rx_bytes - before.rx_bytes,
        );
        let (_, tx_l1) = l2_l1_bits(
            now.tx_frames - before.tx_frames,
            now.tx_bytes - before.tx_bytes,
        );
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

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// The host's stalls a paced worker saw, said apart from its own lateness.
fn host_stalls_line(h: &strobe_control::results::HostStallsResult) -> String {
    if h.count == 0 {
        return "host stalls while waiting: none (the worker never lost its CPU for long)"
            .to_string();
    }
    format!(
        "host stalls while waiting: {} (worst {}, {} in all): the host took the CPU from \
         the worker (hypervisor, other processes); late frames at those times are the \
         host's, not the sender's",
        h.count,
        duration_text(h.worst_ns),
        duration_text(h.total_ns)
    )
}

/// The final summary on stdout.
pub fn print_summary(r: &Results) {
    println!(
        "clock: {} at {:.3} MHz; run tag 0x{:02x}",
        r.clock,
        r.ticks_per_sec / 1e6,
        r.run_tag
    );
    for p in &r.ports {
        println!("tx port {}: {}", p.name, p.backend);
        let secs = p.elapsed_ns as f64 / 1e9;
        if p.scheduled_time {
            println!(
                "  {} frames, {} bytes (scheduled time, batch {})",
                p.frames_tx, p.bytes_tx, p.batch
            );
        } else {
            let mpps = if secs > 0.0 {
                p.frames_tx as f64 / secs / 1e6
            } else {
                0.0
            };
            let ns_per = if p.frames_tx > 0 {
                p.elapsed_ns as f64 / p.frames_tx as f64
            } else {
                0.0
            };
            println!(
                "  {} frames, {} bytes in {:.3} s: {:.3} Mpps, {:.2} ns/frame ({}{})",
                p.frames_tx,
                p.bytes_tx,
                secs,
                mpps,
                ns_per,
                if p.in_kernel {
                    "generated in the kernel".to_string()
                } else {
                    format!("batch {}", p.batch)
                },
                p.core.map(|c| format!(", core {c}")).unwrap_or_default()
            );
            println!(
                "  late frames: {}{} (worst {}, schedule still shifted at the end {})",
                p.late_frames,
                late_cause_text(p.late_frames, p.host_stalls.map(|_| p.late_host_frames)),
                duration_text(p.max_late_ns),
                duration_text(p.shifted_ns)
            );
            if let Some(stalls) = &p.host_stalls {
                println!("  {}", host_stalls_line(stalls));
            }
            if let Some(sched) = &p.scheduling {
                println!(
                    "  waiting: {}{}, spin margin learned {} (gaps over 300 µs spin at most half)",
                    sched.policy,
                    sched
                        .note
                        .as_ref()
                        .map(|n| format!(" ({n})"))
                        .unwrap_or_default(),
                    p.spin_margin_ns.map(duration_text).unwrap_or_default()
                );
            }
            if let Some(generation) = &p.generation {
                println!("  frames: {generation}");
            }
            if let Some(refused) = p.xmit_errors {
                println!("  refused by the driver after the hand-over: {refused} frames");
            }
            if let Some(s) = &p.tx_metadata_stamps {
                // Signed: a NIC's stamp mapped through a clock sync can come out early.
                let ns = |v: Option<f64>| match v {
                    None => "-".to_string(),
                    Some(v) if v < 0.0 => format!("−{}", duration_text(-v as u64)),
                    Some(v) => duration_text(v as u64),
                };
                println!(
                    "  transmit stamps from TX metadata: {} frames stamped, {} not; left {} / {} / {} (min / mean / max) after their trailer stamp",
                    s.stamped,
                    s.unstamped,
                    ns(s.handover_min_ns.map(|v| v as f64)),
                    ns(s.handover_mean_ns),
                    ns(s.handover_max_ns.map(|v| v as f64)),
                );
            }
            if let Some(seg) = &p.segmentation {
                println!(
                    "  UDP segmentation: {} superframes carried {} of {} frames{}",
                    seg.superframes,
                    seg.frames,
                    p.frames_tx,
                    if seg.superframes == 0 && p.frames_tx > 1 {
                        " (none formed: a run needs a batch of 2 or more and IPv4/UDP frames \
                         whose IP identification counts up, e.g. \
                         --vary ip.identification=inc:0/1/65536)"
                    } else {
                        ""
                    }
                );
            }
            if let Some(h) = &p.handover_error {
                println!("  hand-over after deadline: {}", error_text(h));
            }
            if let Some(k) = &p.kernel_lateness {
                let decades: Vec<String> = k
                    .decades()
                    .iter()
                    .map(|(name, n)| format!("{name} {:.2} %", pct(*n, p.frames_tx)))
                    .collect();
                println!(
                    "  sent by the kernel's program after the deadline (its clock when it \
                     decided): {}",
                    decades.join(", ")
                );
            }
            if let Some(pacing) = &p.pacing {
                println!("  {}", pacing_line(pacing));
                if let Some(handover) = pacing.observed_handover_ns {
                    println!(
                        "  floor as the run's hand-overs {} it: {} per hand-over, {}",
                        if pacing.floor_source == "learned" {
                            "learned"
                        } else {
                            "refined"
                        },
                        duration_text(handover),
                        match pacing.observed_spacing_ns {
                            Some(spacing) => format!("{} back to back", duration_text(spacing)),
                            None => "no hand-over of several frames to time the spacing".into(),
                        }
                    );
                }
                println!(
                    "  hand-overs: {}; {} frames ({:.2} %) left coalesced with others",
                    p.handovers,
                    p.coalesced_frames,
                    pct(p.coalesced_frames, p.frames_tx)
                );
            }
            if let Some(d) = &p.departure_error {
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
        if p.paused_ns > 0 {
            println!("  held paused for {}", duration_text(p.paused_ns));
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
            "rx port {}: {} — {} frames, timestamps: {}; not strobe's: {}, another run's tag (stale or foreign): {}, unknown flow: {}, stamped outside the run: {}, truncated: {}, dropped by the kernel: {}{}",
            p.name,
            p.receiver,
            p.frames_rx,
            p.timestamps,
            p.not_instrumented,
            p.foreign,
            p.unknown_flow,
            p.out_of_window,
            p.truncated,
            p.kernel_drops,
            p.interface_drops
                .map(|n| format!(", dropped by the interface before any socket: {n}"))
                .unwrap_or_default()
        );
        if let Some(sync) = &p.hardware_clock {
            println!("  hardware timestamps mapped to CLOCK_REALTIME by a clock sync: {sync}");
        }
        if let Some(failure) = &p.failure {
            println!("  stopped receiving by an error: {failure}");
        }
    }
    println!(
        "  {:<20} {:>12} {:>12} {:>10} {:>8} {:>9} {:>6} {:>6} {:>7}",
        "flow", "tx frames", "rx frames", "lost", "loss %", "reorder", "dup", "late", "trailer"
    );
    for f in &r.flows {
        let tx = f.frames_tx.unwrap_or(0);
        let trailer = if f.instrumented == Some(true) {
            "yes"
        } else {
            "no"
        };
        match (f.frames_rx, f.loss) {
            (Some(frames_rx), lost) => {
                let lost = lost.unwrap_or(0);
                println!(
                    "  {:<20} {:>12} {:>12} {:>10} {:>8.4} {:>9} {:>6} {:>6} {:>7}",
                    f.name,
                    tx,
                    frames_rx,
                    lost,
                    pct(lost, tx),
                    f.reordered.unwrap_or(0),
                    f.duplicates.unwrap_or(0),
                    f.late.unwrap_or(0),
                    trailer
                );
            }
            (None, _) => println!(
                "  {:<20} {:>12} {:>12} {:>10} {:>8} {:>9} {:>6} {:>6} {:>7}",
                f.name, tx, "-", "-", "-", "-", "-", "-", trailer
            ),
        }
    }
    if let Some(failed) = r.rx_ports.iter().find(|p| p.failure.is_some()) {
        println!(
            "  (loss is not final: rx port {} stopped receiving before the end, so frames sent \
             after count as lost)",
            failed.name
        );
    } else if !r.rx_ports.is_empty() {
        println!(
            "  (loss is final: receivers drained for {} ms after the last frame)",
            r.drain_ns / 1_000_000
        );
    }
    for f in r.flows.iter().filter(|f| f.suspect) {
        println!(
            "  SUSPECT: flow {} received {} more unique frames than it sent: frames with this run's tag came from elsewhere; its counts and latency are not trustworthy",
            f.name,
            f.excess_rx.unwrap_or(0)
        );
    }
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
pub fn print_latency(r: &Results) {
    let measured: Vec<_> = r
        .flows
        .iter()
        .filter_map(|f| f.latency.as_ref().map(|l| (f, l)))
        .collect();
    let Some((_, first)) = measured.first() else {
        return;
    };
    println!("latency in µs, every instrumented frame (no sampling):");
    let mut header = format!("  {:<20} {:>10}", "flow", "frames");
    for (label, _) in first.raw.rows() {
        let _ = write!(header, " {label:>9}");
    }
    let _ = write!(header, " {:>9}", "jitter");
    println!("{header}");
    for (f, l) in &measured {
        println!("{}", latency_row(&f.name, &l.raw, Some(l.jitter_ns)));
        if let (Some(corrected), Some(c)) = (&l.corrected, &l.calibration) {
            println!(
                "{}",
                latency_row(&format!("  − {} µs", us(c.offset_ns)), corrected, None)
            );
        }
    }
    if let Some(c) = &first.calibration {
        println!(
            "  (second rows: corrected by the calibration in {}, the measurement path's own median latency)",
            c.file
        );
    }
    println!("  (\"-\": too few frames to resolve that percentile; jitter: RFC 3550 interarrival jitter)");
    let mut sources: Vec<_> = measured.iter().map(|(_, l)| &l.timestamps).collect();
    sources.dedup();
    for s in sources {
        println!("  timestamps: tx {}; rx {}", s.tx, s.rx);
    }
}

/// Each convoy of trains: head latency, bandwidth from the trains' dispersion and loss,
/// across trains (mean with its 95 % confidence interval, spread, IDI).
pub fn print_convoys(r: &Results) {
    for f in &r.flows {
        let Some(c) = &f.convoy else { continue };
        let per_train = c.trains.first().map_or(0, |t| t.frames_sent);
        println!(
            "convoy `{}`: {} trains of {} frames; {} of {} frames lost ({:.4} %)",
            f.name,
            c.trains.len(),
            per_train,
            c.frames_lost,
            c.frames_sent,
            c.loss_ratio * 100.0
        );
        let row = |what: &str,
                   s: &Option<strobe_control::analyze::trains::Summary>,
                   unit: f64,
                   name: &str| {
            match s {
                Some(s) => println!("  {what:<22} {}", summary_text(s, unit, name)),
                None => println!("  {what:<22} -"),
            }
        };
        row("head latency", &c.head_latency_ns, 1e3, "µs");
        row("bandwidth, layer 2", &c.l2_bps, 1e6, "Mbit/s");
        row("bandwidth, layer 1", &c.l1_bps, 1e6, "Mbit/s");
        row("  second halves, L2", &c.second_half_l2_bps, 1e6, "Mbit/s");
        row("  second halves, L1", &c.second_half_l1_bps, 1e6, "Mbit/s");
        row("  past the burst, L2", &c.after_burst_l2_bps, 1e6, "Mbit/s");
        if let Some(t) = &c.tail_loss {
            println!(
                "  tail loss: {} trains lost their tails; {} frames ({} bytes) got through \
                 back to back from the head: trains longer than that overflow the path",
                t.trains, t.fits_frames, t.buffer_bytes
            );
        }
        println!(
            "  (latency of each train's head only: the frames behind it queued in the sender; \
             bandwidth: the bits of a train's frames after its first over the time from its \
             first to its last arrival, and the same over each train's second half, which a \
             shaper's bucket or a queue's first burst no longer shortens, and over the frames \
             that arrived after that burst, in arrival order; layer 2 counts \
             frames with their FCS, layer 1 adds 20 bytes a frame)"
        );
    }
}

/// A figure across trains in `unit`s named `name`: `mean 23.412 (95 % CI 23.1 to 23.7),
/// median …, stddev …, min …, max … µs; IDI … µs (N trains)`.
pub fn summary_text(s: &strobe_control::analyze::trains::Summary, unit: f64, name: &str) -> String {
    format!(
        "mean {:.3}{}, median {:.3}, stddev {:.3}, min {:.3}, max {:.3} {name}; IDI {} ({} trains)",
        s.mean / unit,
        s.ci95.map_or(String::new(), |(lo, hi)| format!(
            " (95 % CI {:.3} to {:.3})",
            lo / unit,
            hi / unit
        )),
        s.median / unit,
        s.stddev / unit,
        s.min / unit,
        s.max / unit,
        s.idi
            .map_or("-".into(), |i| format!("{:.4} {name}", i / unit)),
        s.trains
    )
}

/// One line: the estimated departure gaps judged through the floor, then the verdict.
fn departure_fit_text(fit: &strobe_control::analyze::FloorFit) -> String {
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

fn error_text(h: &TimingError) -> String {
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

/// One line on a paced port's floor: what one hand-over costs, how closely frames handed
/// over together leave, and the highest rate that paces, or that the run learns it.
pub fn pacing_line(p: &PacingResult) -> String {
    let asked = match p.asked_pps {
        Some(asked) => format!("; asked {}", pps_text(asked)),
        None => String::new(),
    };
    match (p.handover_ns, p.spacing_ns, p.ceiling_pps) {
        (Some(handover), Some(spacing), Some(ceiling)) => format!(
            "tx port {}: floor {} per hand-over, {} back to back ({}); paces up to {} with up \
             to {} frames per hand-over{asked}",
            p.port,
            duration_text(handover),
            duration_text(spacing),
            p.floor_source,
            pps_text(ceiling),
            p.max_batch,
        ),
        _ => format!(
            "tx port {}: floor learned from the run's own first hand-overs, up to {} frames \
             per hand-over{asked}",
            p.port, p.max_batch,
        ),
    }
}

/// The run's warnings (ports that missed their rate, flows that lost every frame, frames
/// from elsewhere, clocks that disagree), on stderr.
pub fn print_verdicts(r: &Results) {
    for line in &r.warnings {
        eprintln!("warning: {line}");
    }
}

/// The run in one line, as the demo ends each of its parts: what was sent against what was
/// asked, what arrived, the latency, and whether the schedule was kept.
pub fn verdict_line(r: &Results) -> String {
    let live: Vec<_> = r.ports.iter().filter(|p| !p.scheduled_time).collect();
    let sent: u64 = r.ports.iter().map(|p| p.frames_tx).sum();
    let mut parts = Vec::new();
    // The achieved rate as a paced sender keeps it: frames after the first over the span.
    let achieved: f64 = live
        .iter()
        .filter(|p| p.frames_tx > 1 && p.elapsed_ns > 0)
        .map(|p| (p.frames_tx - 1) as f64 * 1e9 / p.elapsed_ns as f64)
        .sum();
    let asked: Option<f64> = live
        .iter()
        .map(|p| p.pacing.as_ref().and_then(|c| c.asked_pps))
        .sum();
    parts.push(match (asked, achieved > 0.0) {
        (Some(asked), true) if asked > 0.0 => format!(
            "{sent} frames sent at {} ({:+.3} % of the {} asked)",
            pps_text(achieved),
            (achieved / asked - 1.0) * 100.0,
            pps_text(asked)
        ),
        (_, true) => format!("{sent} frames sent at {}", pps_text(achieved)),
        _ => format!("{sent} frames sent"),
    });
    let received: Vec<_> = r.flows.iter().filter(|f| !f.rx_ports.is_empty()).collect();
    if received.is_empty() {
        parts.push("no receive port, so no loss or latency measured (--rx PORT)".into());
    } else {
        let tx: u64 = received.iter().filter_map(|f| f.frames_tx).sum();
        let lost: u64 = received.iter().filter_map(|f| f.loss).sum();
        parts.push(if lost == 0 {
            "every frame arrived".into()
        } else {
            format!("{lost} lost ({:.4} %)", pct(lost, tx))
        });
        let slowest = received
            .iter()
            .filter_map(|f| Some((f.name.as_str(), &f.latency.as_ref()?.raw)))
            .max_by(|a, b| a.1.p99_ns.total_cmp(&b.1.p99_ns));
        if let Some((name, l)) = slowest {
            let whose = if received.len() > 1 {
                format!(" (slowest flow, {name})")
            } else {
                String::new()
            };
            parts.push(format!(
                "latency p50 {} / p99 {}{whose}",
                duration_text(l.p50_ns as u64),
                duration_text(l.p99_ns as u64)
            ));
        }
    }
    let paced: Vec<_> = live.iter().filter(|p| p.pacing.is_some()).collect();
    if !paced.is_empty() {
        let late: u64 = paced.iter().map(|p| p.late_frames).sum();
        let host: u64 = paced.iter().map(|p| p.late_host_frames).sum();
        parts.push(if late == 0 {
            "every frame on schedule (within 1 µs)".into()
        } else {
            format!(
                "{late} frames late ({:.3} %; {host} of them the host's)",
                pct(late, sent)
            )
        });
    }
    if !r.warnings.is_empty() {
        parts.push(format!(
            "{} warning{} above",
            r.warnings.len(),
            if r.warnings.len() == 1 { "" } else { "s" }
        ));
    }
    format!("verdict: {}", parts.join("; "))
}

/// Says how many of a port's late frames the host made late (it took the worker's CPU across
/// their deadline, or woke it after it) and how many were strobe's own.
/// (`host` is None where the engine's paced worker did not wait: unpaced, in the kernel.)
fn late_cause_text(late: u64, host: Option<u64>) -> String {
    match host {
        Some(host) if late > 0 => format!(
            ", {host} by the host taking the CPU across the deadline, {} strobe's own",
            late - host.min(late)
        ),
        _ => String::new(),
    }
}
