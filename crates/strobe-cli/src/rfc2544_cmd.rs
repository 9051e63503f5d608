//! `strobe rfc2544`: RFC 2544's throughput, latency and frame loss benchmarks per frame size;
//! the benchmarks themselves are `strobe_control::rfc2544`.

use std::sync::atomic::Ordering;

use clap::{Args, ValueEnum};
use strobe_control::analyze::search::SearchMethod;
use strobe_control::model::Scenario;
use strobe_control::rfc2544::{
    run_benchmarks, Benchmark, LatencyResult, LossCurve, MaxSource, Rfc2544Report, Rfc2544Spec,
    ThroughputResult, TrialResult, TrialRun, TrialRunner,
};
use strobe_control::text::{bps_text, duration_text, pps_text};

use crate::failure::Failure;
use crate::methodology::{MethodFlow, MethodOutputs, Terminal};
use crate::signals;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Which {
    /// The highest rate without loss (NDR) and with at most --pdr loss, per frame size.
    Throughput,
    /// Every frame's latency at the throughput and at shares of it (searches the
    /// throughput first).
    Latency,
    /// The frame loss rate from the highest rate down in steps.
    Loss,
    /// The longest burst at the highest rate forwarded without loss, and the DUT buffer it
    /// implies (RFC 9004).
    BackToBack,
    /// System recovery: 110 % of the throughput, then 50 %; the time until frames stop
    /// being lost (searches the throughput first).
    Recovery,
    /// All of them.
    All,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum SearchArg {
    Aimed,
    Binary,
}

#[derive(Args)]
pub struct Rfc2544Args {
    /// The benchmark to run.
    #[arg(value_enum)]
    which: Which,
    #[command(flatten)]
    flow: MethodFlow,
    #[command(flatten)]
    history: crate::runs_cmd::HistoryArgs,
    /// Frame sizes, FCS included, or imix (default 64,128,256,512,1024,1280,1518).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    sizes: Vec<String>,
    /// The link's line rate (layer 1): 100 % of each size's rate.
    #[arg(long, default_value = "10g", value_name = "RATE")]
    link: String,
    /// The highest rate to try, when below the line rate (e.g. 500kpps, 2g). Default: the
    /// line rate, or what the generator offers on the port when that is less.
    #[arg(long, value_name = "RATE")]
    max_rate: Option<String>,
    /// Traffic time of each trial (RFC 2544 asks for 60s for the throughput).
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = crate::values::positive_text)]
    trial: String,
    /// How long the receiver keeps counting after a trial's last frame.
    #[arg(long, default_value = "2s", value_name = "DURATION")]
    wait: String,
    /// Pause after each trial for the DUT to settle.
    #[arg(long, default_value = "1s", value_name = "DURATION")]
    settle: String,
    /// Learning frames sent from the receive port before each trial (0: none).
    #[arg(long, default_value_t = 16, value_name = "N")]
    learning: u64,
    /// The search ends when its passing and failing rates are this close, in percent.
    #[arg(long, default_value_t = 0.5, value_name = "PCT")]
    resolution: f64,
    /// Also find the partial-drop rate with at most this loss, in percent, in the same
    /// search; 0: the no-drop rate alone.
    #[arg(long, default_value_t = 0.5, value_name = "PCT")]
    pdr: f64,
    /// At most this many trials per throughput search.
    #[arg(long, default_value_t = 30, value_name = "N")]
    max_trials: usize,
    /// How the throughput search picks its next rate: aimed at what the DUT forwarded, or
    /// binary (halving every trial, for comparison).
    #[arg(long, value_enum, default_value = "aimed")]
    search: SearchArg,
    /// Latency loads in percent of the throughput (default 100,90,50,10).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    latency_loads: Vec<f64>,
    /// Trials per latency load; their frames are merged into one distribution.
    #[arg(long, default_value_t = 1, value_name = "N")]
    latency_trials: u32,
    /// The loss curve's step, in percent of the highest rate.
    #[arg(long, default_value_t = 10.0, value_name = "PCT")]
    loss_step: f64,
    /// Back-to-back: searches for the longest burst, averaged (RFC 2544 asks for 50).
    #[arg(long, default_value_t = 3, value_name = "N")]
    b2b_searches: u32,
    /// Back-to-back: the longest burst tried, as the time it lasts at the highest rate.
    #[arg(long, default_value = "2s", value_name = "DURATION", value_parser = crate::values::positive_text)]
    b2b_max: String,
    /// System recovery: how long the overload at 110 % of the throughput lasts (the RFC asks
    /// for 60s or more).
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = crate::values::positive_text)]
    recovery_overload: String,
    /// System recovery: how long the 50 % load after it is watched for loss.
    #[arg(long, default_value = "2s", value_name = "DURATION", value_parser = crate::values::positive_text)]
    recovery_window: String,
    /// System recovery: the window's slices (the recovery time's resolution).
    #[arg(long, default_value = "20ms", value_name = "DURATION", value_parser = crate::values::positive_text)]
    recovery_slice: String,
    #[command(flatten)]
    outputs: MethodOutputs,
}

impl Rfc2544Args {
    fn spec(&self) -> Rfc2544Spec {
        Rfc2544Spec {
            tests: match self.which {
                Which::Throughput => vec![Benchmark::Throughput],
                Which::Latency => vec![Benchmark::Latency],
                Which::Loss => vec![Benchmark::Loss],
                Which::BackToBack => vec![Benchmark::BackToBack],
                Which::Recovery => vec![Benchmark::Recovery],
                Which::All => Benchmark::ALL.to_vec(),
            },
            port: self.flow.ports.port.clone(),
            rx: self.flow.ports.rx.clone(),
            udp: self.flow.udp.clone(),
            src_mac: self.flow.ports.src_mac.clone(),
            dst_mac: self.flow.ports.dst_mac.clone(),
            sizes: self.sizes.clone(),
            link: self.link.clone(),
            max_rate: self.max_rate.clone(),
            trial: self.trial.clone(),
            wait: self.wait.clone(),
            settle: self.settle.clone(),
            learning: self.learning,
            resolution_pct: self.resolution,
            pdr_pct: (self.pdr > 0.0).then_some(self.pdr),
            max_trials: self.max_trials,
            search: match self.search {
                SearchArg::Aimed => SearchMethod::Aimed,
                SearchArg::Binary => SearchMethod::Binary,
            },
            latency_loads_pct: self.latency_loads.clone(),
            latency_trials: self.latency_trials,
            loss_step_pct: self.loss_step,
            b2b_searches: self.b2b_searches,
            b2b_max: self.b2b_max.clone(),
            recovery_overload: self.recovery_overload.clone(),
            recovery_window: self.recovery_window.clone(),
            recovery_slice: self.recovery_slice.clone(),
        }
    }
}

/// The terminal's runner, printing each trial's outcome.
struct Trials(Terminal);

impl TrialRunner for Trials {
    type Error = Failure;

    fn run(&mut self, trial: TrialRun) -> Result<(Scenario, strobe_control::RunReport), Failure> {
        self.0.run(trial)
    }

    fn finished(&mut self, t: &TrialResult) {
        println!("   {}", trial_text(t));
    }
}

fn trial_text(t: &TrialResult) -> String {
    let latency = t.latency.map_or(String::new(), |l| {
        format!(
            "; latency p50 {:.3}, p99 {:.3}, max {:.3} µs",
            l.p50_ns / 1e3,
            l.p99_ns / 1e3,
            l.max_ns / 1e3
        )
    });
    let asked = match t.asked_pps {
        Some(a) if !t.offered_as_asked() => format!(" of {} asked", pps_text(a)),
        _ => String::new(),
    };
    format!(
        "offered {}{asked}: {} of {} frames lost ({:.4} %){}{latency}{}",
        pps_text(t.offered_pps),
        t.frames_lost,
        t.frames_tx,
        t.loss_ratio * 100.0,
        if t.reordered + t.duplicates > 0 {
            format!(", {} reordered, {} duplicated", t.reordered, t.duplicates)
        } else {
            String::new()
        },
        if t.interrupted { " (interrupted)" } else { "" }
    )
}

pub fn run(args: Rfc2544Args) -> Result<(), Failure> {
    args.outputs.check()?;
    let request = args.spec().request(&args.flow.ports.lab)?;
    let mut recorder = args.history.recorder()?;
    let mut trials = Trials(Terminal::new(&args.flow.ports.lab, args.outputs.quiet));
    let signals = signals::install()?;
    let report = run_benchmarks(&request, &signals.stop, &mut trials)?;
    // Files first: after a SIGHUP the terminal may be gone, and printing fails.
    let mut failures = args.outputs.write(
        &|| crate::outputs::document("rfc2544", &report),
        &|| report.trials_csv(),
        &|| strobe_control::analyze::rfc2544_plot::html_report("strobe rfc2544", &report.figures()),
    );
    let outcome = crate::runs_cmd::outcome(signals.signal(), report.failure.as_slice());
    let recorded = crate::methodology::record_report(
        &mut recorder,
        "rfc2544",
        &report,
        outcome,
        &mut trials.0.histograms,
    );
    print_report(&report);
    if let Some(f) = &report.failure {
        failures.note(Err(Failure::Runtime(f.clone())));
    }
    if signals.stop.load(Ordering::Relaxed) {
        eprintln!(
            "interrupted after {} trials: the results above are from the trials that ran",
            report.trials
        );
    }
    if let Some(line) = recorded {
        println!("{line}");
    }
    failures.outcome(signals.outcome())
}

fn print_report(r: &Rfc2544Report) {
    if let Some(d) = &r.device_under_test {
        println!("device under test: {}", d.described());
    }
    println!(
        "RFC 2544 on a {} link: {} trials in {}, each {} of traffic, {} wait, {} settle, {} \
         learning frames",
        bps_text(r.settings.link_bps),
        r.trials,
        duration_text(r.elapsed_ns),
        duration_text(r.settings.trial_ns),
        duration_text(r.settings.wait_ns),
        duration_text(r.settings.settle_ns),
        r.settings.learning_frames
    );
    if !r.throughput.is_empty() {
        print_throughput(r);
    }
    for l in &r.latency {
        print_latency(l);
    }
    if !r.latency.is_empty() {
        println!("  (latency: {})", r.latency_method);
    }
    for c in &r.loss {
        print_loss(c);
    }
    if !r.back_to_back.is_empty() {
        print_back_to_back(r);
    }
    for c in &r.recovery {
        println!("system recovery {} B: {}", c.size.size, c.summary());
    }
}

fn print_back_to_back(r: &Rfc2544Report) {
    println!(
        "back-to-back (the longest burst forwarded without loss, mean of the searches; buffer \
         time = the burst at its rate (RFC 9004's implied DUT buffer time); held = the burst less \
         what the DUT forwarded meanwhile at its throughput, and the time that takes to leave):"
    );
    println!(
        "  {:>6} {:>13} {:>22} {:>12} {:>13} {:>10} {:>12}",
        "size", "burst rate", "longest bursts", "mean", "buffer time", "held", "held drains"
    );
    for b in &r.back_to_back {
        let each: Vec<String> = b
            .searches
            .iter()
            .map(|s| match (s.frames, s.lowest_failed) {
                (Some(f), None) => format!("≥{f}"),
                (Some(f), Some(_)) => f.to_string(),
                (None, _) => "none".into(),
            })
            .collect();
        let f = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1}"));
        let t = |v: Option<f64>| v.map_or("-".into(), |ns| duration_text(ns as u64));
        println!(
            "  {:>6} {:>13} {:>22} {:>12} {:>13} {:>10} {:>12}",
            b.size.size,
            pps_text(b.burst_pps),
            each.join(", "),
            f(b.mean_frames),
            t(b.implied_buffer_ns),
            f(b.buffered_frames),
            t(b.buffer_drain_ns)
        );
    }
}

fn max_text(max_pps: f64, source: MaxSource) -> String {
    format!("{} ({})", pps_text(max_pps), source.describe())
}

fn print_throughput(r: &Rfc2544Report) {
    let pdr = r.settings.tolerances.get(1);
    println!(
        "throughput (NDR: no frame lost{}; resolution {:.2} %; {} search):",
        pdr.map_or(String::new(), |t| format!(
            "; PDR: at most {:.3} % lost",
            t * 100.0
        )),
        r.settings.relative_resolution * 100.0,
        match r.settings.search {
            SearchMethod::Aimed => "aimed",
            SearchMethod::Binary => "binary",
        }
    );
    println!(
        "  {:>6} {:>13} {:>15} {:>8} {:>13} {:>7} {:>10}  highest rate",
        "size", "NDR", "NDR, layer 1", "% line", "PDR", "trials", "time"
    );
    for t in &r.throughput {
        print_throughput_row(t);
    }
}

fn print_throughput_row(t: &ThroughputResult) {
    let outcome = |i: usize| t.outcomes.get(i);
    let rate = |i: usize| {
        outcome(i).map_or("-".to_string(), |o| match o.rate {
            Some(f) => format!(
                "{}{}",
                if o.lowest_failed_pps.is_none() {
                    "≥ "
                } else {
                    ""
                },
                pps_text(f.pps)
            ),
            None => "none".into(),
        })
    };
    let ndr = outcome(0).and_then(|o| o.rate);
    println!(
        "  {:>6} {:>13} {:>15} {:>8} {:>13} {:>7} {:>10}  {}{}",
        t.size.size,
        rate(0),
        ndr.map_or("-".into(), |f| bps_text(f.l1_bps)),
        ndr.map_or("-".into(), |f| format!("{:.2}", f.line_pct)),
        rate(1),
        t.trials.len(),
        duration_text(t.elapsed_ns),
        max_text(t.max_pps, t.max_source),
        if t.outcomes.iter().any(|o| !o.resolved) {
            " — not resolved (stopped, or the trial limit)"
        } else {
            ""
        }
    );
}

fn print_latency(l: &LatencyResult) {
    if let Some(note) = &l.note {
        println!("latency {} B: {note}", l.size.size);
        return;
    }
    println!(
        "latency {} B (loads in % of the throughput, {}):",
        l.size.size,
        l.throughput_pps.map_or("-".into(), pps_text)
    );
    println!(
        "  {:>6} {:>13} {:>10} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "load %", "rate", "frames", "lost", "min µs", "p50 µs", "p99 µs", "p99.9 µs", "max µs"
    );
    for p in &l.points {
        let f = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.3}", v / 1e3));
        let [min, _mean, p50, p99, p99_9, max] =
            strobe_control::rfc2544::latency_columns(p.latency).map(f);
        println!(
            "  {:>6.0} {:>13} {:>10} {:>8} {min:>10} {p50:>10} {p99:>10} {p99_9:>10} {max:>10}",
            p.load_pct,
            pps_text(p.rate.pps),
            p.frames_tx,
            p.frames_lost,
        );
    }
}

fn print_loss(c: &LossCurve) {
    println!(
        "frame loss rate {} B (loads in % of {}):",
        c.size.size,
        max_text(c.max_pps, c.max_source)
    );
    for p in &c.points {
        println!(
            "  {:>6.0} % {:>13}: {:.4} % lost",
            p.load_pct,
            pps_text(p.rate.pps),
            p.loss_ratio * 100.0
        );
    }
}
