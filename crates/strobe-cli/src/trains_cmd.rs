//! `strobe trains`: the convoy-of-packet-trains study's experiments, one command each; the
//! experiments themselves are `strobe_control::trains`.

use std::sync::atomic::Ordering;

use clap::{Args, Subcommand};
use strobe_control::analyze::trains::{Bottleneck, Counted, Summary};
use strobe_control::rfc2544::{TrialRun, TrialRunner};
use strobe_control::text::{bps_text, duration_text};
use strobe_control::trains::{
    run_experiment, Experiment, ExperimentKind, StepResult, TrainsReport, TrainsSpec,
};

use crate::display::summary_text;
use crate::failure::Failure;
use crate::methodology::{MethodFlow, MethodOutputs, Terminal};
use crate::signals;

#[derive(Args)]
pub struct TrainsArgs {
    #[command(subcommand)]
    command: TrainsCommand,
}

#[derive(Subcommand)]
enum TrainsCommand {
    /// One convoy: each train's head latency, its bandwidth from the dispersion of its
    /// frames, and loss; across trains mean, 95 % CI, IDI and convergence.
    Convoy(ConvoyArgs),
    /// One convoy per frame size: how the spread (IDI) of latency and bandwidth depends on
    /// the frame size.
    Sizes(SizesArgs),
    /// One convoy per train length: how many frames a train needs for a steady bandwidth.
    Lengths(LengthsArgs),
}

#[derive(Args)]
struct ConvoyArgs {
    /// Frame size, FCS included.
    #[arg(long, default_value_t = 1518)]
    size: u32,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Args)]
struct SizesArgs {
    /// Frame sizes, FCS included (default 64,128,256,512,1024,1518).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    sizes: Vec<u32>,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Args)]
struct LengthsArgs {
    /// Frames per train, one convoy each (default 10,20,50,100,200,500).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    lengths: Vec<u64>,
    /// Frame size, FCS included.
    #[arg(long, default_value_t = 1518)]
    size: u32,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Args)]
struct CommonArgs {
    #[command(flatten)]
    flow: MethodFlow,
    #[command(flatten)]
    history: crate::runs_cmd::HistoryArgs,
    /// Trains per convoy.
    #[arg(long, default_value_t = 100, value_name = "N")]
    trains: u64,
    /// Frames per train (the convoy and frame-size experiments). Default: as many as the
    /// known bottleneck's buffer holds (the lab's tbf, --shaper with --buffer), at most 100;
    /// with --shaper or --link but no --buffer, a first convoy of 5 trains of 100 frames
    /// measures the buffer (from the tails it loses). A longer train loses its tail, which
    /// the result reports.
    #[arg(long, value_name = "N")]
    frames: Option<u64>,
    /// Between a train's last frame and the next one's first, e.g. 1ms. Default: twice the
    /// time a train takes through the known bottleneck (--link, --shaper, the lab's tbf),
    /// at least 1 ms.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = crate::values::positive_text)]
    gap: Option<String>,
    /// The path's bottleneck is a link of this line rate (layer 1), e.g. 10g: its expected
    /// bandwidth is shown beside the measured one.
    #[arg(long, value_name = "RATE", conflicts_with = "shaper")]
    link: Option<String>,
    /// The path's bottleneck is a shaper of this rate counting frames without their FCS (as
    /// Linux tbf and htb count), e.g. 50mbit. A lab with a tbf DUT is known without it.
    #[arg(long, value_name = "RATE")]
    shaper: Option<String>,
    /// The shaper's buffer (queue limit plus bucket), as bytes (68750, 64k) or a time at
    /// its rate (10ms): trains are made to fit it.
    #[arg(long, value_name = "SIZE", requires = "shaper")]
    buffer: Option<String>,
    /// After each convoy, send a constant-rate flow of the same frames at the heads' rate
    /// (one frame per train and gap) and show its latency beside the heads'.
    #[arg(long)]
    baseline: bool,
    /// How long the receiver keeps counting after the last frame, e.g. 500ms.
    #[arg(long, default_value = "500ms", allow_hyphen_values = true, value_parser = crate::values::positive_text)]
    drain: String,
    #[command(flatten)]
    outputs: MethodOutputs,
}

pub fn run(args: TrainsArgs) -> Result<(), Failure> {
    let (spec, common) = match args.command {
        TrainsCommand::Convoy(a) => (
            TrainsSpec {
                experiment: ExperimentKind::Convoy,
                size: a.size,
                ..a.common.spec()
            },
            a.common,
        ),
        TrainsCommand::Sizes(a) => (
            TrainsSpec {
                experiment: ExperimentKind::Sizes,
                sizes: a.sizes,
                ..a.common.spec()
            },
            a.common,
        ),
        TrainsCommand::Lengths(a) => (
            TrainsSpec {
                experiment: ExperimentKind::Lengths,
                lengths: a.lengths,
                size: a.size,
                ..a.common.spec()
            },
            a.common,
        ),
    };
    common.outputs.check()?;
    let request = spec.request(&common.flow.ports.lab)?;
    let mut recorder = common.history.recorder()?;
    let drain_ns = strobe_control::timing::parse_duration_ns(&common.drain)
        .map_err(|e| Failure::BadInput(format!("--drain {}: {e}", common.drain)))?;
    let mut terminal = Terminal::new(&common.flow.ports.lab, common.outputs.quiet);
    let signals = signals::install()?;
    let report = run_experiment(&request, &signals.stop, |label, scenario, pacing| {
        terminal.run(TrialRun {
            what: label.to_string(),
            progress: String::new(),
            scenario,
            pacing,
            drain_ns,
            learning: false,
        })
    })?;
    // Files first: after a SIGHUP the terminal may be gone, and printing fails.
    let mut failures = common.outputs.write(
        &|| crate::outputs::document("trains", &report),
        &|| report.trains_csv(),
        &|| {
            let title = format!("strobe trains: {}", experiment_name(&report.experiment));
            strobe_control::analyze::trains_plot::html_report(&title, &report_figures(&report))
        },
    );
    let probe_failures = report.buffer_probe.iter().flat_map(|p| {
        p.failures
            .iter()
            .map(|f| format!("measuring the buffer: {f}"))
    });
    let step_failures: Vec<String> = probe_failures
        .chain(report.steps.iter().flat_map(|s| {
            s.failures
                .iter()
                .map(|f| format!("{}: {f}", s.step.label()))
        }))
        .collect();
    let outcome = crate::runs_cmd::outcome(signals.signal(), &step_failures);
    terminal.record_and_print(&mut recorder, "trains", &report, outcome, print_report);
    if let Some(p) = &report.buffer_probe {
        for w in &p.warnings {
            eprintln!("warning: measuring the buffer: {w}");
        }
        for f in &p.failures {
            failures.note(Err(Failure::Runtime(format!("measuring the buffer: {f}"))));
        }
    }
    for s in &report.steps {
        for w in &s.warnings {
            eprintln!("warning: {}: {w}", s.step.label());
        }
        for f in &s.failures {
            failures.note(Err(Failure::Runtime(format!("{}: {f}", s.step.label()))));
        }
    }
    if signals.stop.load(Ordering::Relaxed) && report.steps.len() < report.steps_asked {
        eprintln!(
            "interrupted: {} of {} steps ran",
            report.steps.len(),
            report.steps_asked
        );
    }
    failures.outcome(signals.outcome())
}

impl CommonArgs {
    /// The options every experiment shares, as the run-control layer takes them.
    fn spec(&self) -> TrainsSpec {
        TrainsSpec {
            port: self.flow.ports.port.clone(),
            rx: self.flow.ports.rx.clone(),
            udp: self.flow.udp.clone(),
            src_mac: self.flow.ports.src_mac.clone(),
            dst_mac: self.flow.ports.dst_mac.clone(),
            trains: self.trains,
            frames: self.frames,
            gap: self.gap.clone(),
            link: self.link.clone(),
            shaper: self.shaper.clone(),
            buffer: self.buffer.clone(),
            baseline: self.baseline,
            ..TrainsSpec::default()
        }
    }
}

fn experiment_name(e: &Experiment) -> &'static str {
    match e {
        Experiment::Convoy => "convoy",
        Experiment::FrameSizes(_) => "frame-size sweep",
        Experiment::TrainLengths(_) => "train-length sweep",
    }
}

fn print_report(r: &TrainsReport) {
    if let Some(d) = &r.device_under_test {
        println!("device under test: {}", d.described());
    }
    if let Some(b) = &r.bottleneck {
        println!("bottleneck: {}", b.source);
    }
    if let Some(p) = &r.buffer_probe {
        println!("buffer: {}", p.finding);
    }
    for s in &r.steps {
        print_step(s, r.bottleneck.as_ref());
    }
    if r.steps.len() > 1 {
        print_sweep(r);
    }
}

fn print_step(s: &StepResult, bottleneck: Option<&Bottleneck>) {
    let st = &s.step;
    let Some(c) = &s.convoy else {
        println!(
            "{}: no train arrived to be counted (is the receive port on the flow's path?)",
            st.label()
        );
        return;
    };
    println!(
        "{}, {} trains {} apart: {} of {} frames lost ({:.4} %)",
        st.label(),
        st.trains,
        duration_text(st.gap_ns),
        c.frames_lost,
        c.frames_sent,
        c.loss_ratio * 100.0
    );
    if !s.train_length.is_empty() {
        println!("  train length: {}", s.train_length);
    }
    let line = |what: &str, s: &Option<Summary>, unit: f64, name: &str| match s {
        Some(s) => println!("  {what:<24} {}", summary_text(s, unit, name)),
        None => println!("  {what:<24} -"),
    };
    line("head latency", &c.head_latency_ns, 1e3, "µs");
    if let Some(l) = &s.every_frame_latency {
        println!(
            "  {:<24} mean {:.3}, p50 {:.3}, p99 {:.3}, max {:.3} µs (the frames behind each \
             head queued in the sender: what timestamping every frame reads)",
            "every frame (naive)",
            l.mean_ns / 1e3,
            l.p50_ns / 1e3,
            l.p99_ns / 1e3,
            l.max_ns / 1e3
        );
    }
    if let Some(b) = &s.baseline {
        match &b.latency {
            Some(l) => println!(
                "  {:<24} mean {:.3}, p50 {:.3}, p99 {:.3} µs ({} of {} frames at {:.0} pps){}",
                "constant-rate baseline",
                l.mean_ns / 1e3,
                l.p50_ns / 1e3,
                l.p99_ns / 1e3,
                b.frames_rx,
                b.frames_tx,
                b.rate_pps,
                c.head_latency_ns.map_or(String::new(), |h| format!(
                    "; heads − baseline {:+.3} µs",
                    (h.mean - l.mean_ns) / 1e3
                ))
            ),
            None => println!("  constant-rate baseline   - (nothing came back)"),
        }
    }
    line("bandwidth, layer 2", &c.l2_bps, 1e6, "Mbit/s");
    line("bandwidth, layer 1", &c.l1_bps, 1e6, "Mbit/s");
    line("  second halves, L2", &c.second_half_l2_bps, 1e6, "Mbit/s");
    line("  past the burst, L2", &c.after_burst_l2_bps, 1e6, "Mbit/s");
    if let Some(t) = &c.tail_loss {
        println!(
            "  tail loss: {} trains lost their tails; {} frames ({} bytes; fewest {}) got \
             through back to back from the head: trains longer than that overflow the path",
            t.trains, t.fits_frames, t.buffer_bytes, t.frames_through_min
        );
    }
    if let (Some(e), Some(b)) = (&s.expected, bottleneck) {
        let (expected, counted) = match b.counts {
            Counted::Wire => (e.l1_bps, "layer 1"),
            Counted::WithFcs => (e.l2_bps, "layer 2"),
            Counted::WithoutFcs => (e.l2_without_fcs_bps, "layer 2 without FCS"),
        };
        // The measured figure in the bytes the bottleneck counts.
        let scale = b.counts.bytes(st.frame_bytes) / f64::from(st.frame_bytes);
        let ratio = |m: &Option<Summary>| {
            m.map_or("-".into(), |m| {
                format!(
                    "{} ({:+.2} %)",
                    bps_text(m.mean * scale),
                    (m.mean * scale / expected - 1.0) * 100.0
                )
            })
        };
        let median = c.after_burst_l2_bps.map(|m| Summary {
            mean: m.median,
            ..m
        });
        // The report's page shows bandwidth at layer 2 with FCS: say that figure beside.
        let with_fcs = match b.counts {
            Counted::WithFcs => String::new(),
            _ => format!(
                " (layer 2 with FCS, as the HTML report shows it: {})",
                bps_text(e.l2_bps)
            ),
        };
        println!(
            "  expected, {counted}: {}{with_fcs}; measured past the burst {} (median of the \
             trains {}), whole trains {}, second halves {}",
            bps_text(expected),
            ratio(&c.after_burst_l2_bps),
            ratio(&median),
            ratio(&c.l2_bps),
            ratio(&c.second_half_l2_bps),
        );
    }
    let needed = |points: &[strobe_control::analyze::trains::ConvergencePoint],
                  mean: Option<f64>| {
        let mean = mean?;
        points
            .iter()
            .find(|p| p.stddev_of_mean <= 0.01 * mean.abs())
            .map(|p| p.trains)
    };
    // How many trains it took for each mean to be known to 1 %, or that this convoy's were
    // too few.
    let converged = |what: &str, n: Option<usize>| match n {
        Some(n) => format!("{what} after {n} trains"),
        None => format!("{what} not within these {} trains", c.trains.len()),
    };
    println!(
        "  convergence (the mean known to within 1 %, its standard deviation below 1 % of it): \
         {}; {}",
        converged(
            "latency",
            needed(&c.latency_convergence, c.head_latency_ns.map(|s| s.mean))
        ),
        converged(
            "bandwidth",
            needed(&c.bandwidth_convergence, c.l2_bps.map(|s| s.mean))
        ),
    );
}

fn print_sweep(r: &TrainsReport) {
    println!(
        "{} (latency of the heads; bandwidth at layer 2 with FCS; IDI = variance / mean):",
        experiment_name(&r.experiment)
    );
    println!(
        "  {:>7} {:>7} {:>8} {:>12} {:>12} {:>14} {:>14} {:>14}",
        "frame B", "frames", "loss %", "head µs", "IDI µs", "L2 Mbit/s", "IDI Mbit/s", "expected"
    );
    for s in &r.steps {
        let c = s.convoy.as_ref();
        let lat = c.and_then(|c| c.head_latency_ns);
        let bw = c.and_then(|c| c.l2_bps);
        let f = |v: Option<f64>, unit: f64| v.map_or("-".into(), |v| format!("{:.3}", v / unit));
        println!(
            "  {:>7} {:>7} {:>8} {:>12} {:>12} {:>14} {:>14} {:>14}",
            s.step.frame_bytes,
            s.step.frames_per_train,
            c.map_or("-".into(), |c| format!("{:.4}", c.loss_ratio * 100.0)),
            f(lat.map(|s| s.mean), 1e3),
            f(lat.and_then(|s| s.idi), 1e3),
            f(bw.map(|s| s.mean), 1e6),
            f(bw.and_then(|s| s.idi), 1e6),
            f(s.expected.map(|e| e.l2_bps), 1e6),
        );
    }
}

/// The report's figures, step by step.
fn report_figures(r: &TrainsReport) -> strobe_control::analyze::trains_plot::TrainsFigures {
    use strobe_control::analyze::trains_plot::{StepFigures, TrainsFigures};
    TrainsFigures {
        bottleneck: r.bottleneck.as_ref().map(|b| b.source.clone()),
        sweep: match &r.experiment {
            Experiment::Convoy => None,
            Experiment::FrameSizes(_) => Some("frame size (bytes, FCS included)".into()),
            Experiment::TrainLengths(_) => Some("train length (frames)".into()),
        },
        steps: r
            .steps
            .iter()
            .filter_map(|s| {
                Some(StepFigures {
                    label: s.step.label(),
                    swept_value: match &r.experiment {
                        Experiment::TrainLengths(_) => s.step.frames_per_train as f64,
                        _ => f64::from(s.step.frame_bytes),
                    },
                    convoy: s.convoy.clone()?,
                    expected_l2_bps: s.expected.map(|e| e.l2_bps),
                    every_frame_latency: s.every_frame_latency,
                    baseline_latency: s.baseline.as_ref().and_then(|b| b.latency),
                })
            })
            .collect(),
    }
}
