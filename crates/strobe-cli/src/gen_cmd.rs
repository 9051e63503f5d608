use std::path::PathBuf;
use std::sync::atomic::Ordering;

use clap::Args;
use strobe_control::model::{quick, Scenario};
use strobe_control::source::OneFlow;
use strobe_control::sweep::Sweep;
use strobe_control::{ClockSource, LatePolicy};
use strobe_control::{Pacing, PlanOptions, Results};

use crate::display::{print_convoys, print_latency, print_summary, print_verdicts, Status};
use crate::failure::Failure;
use crate::lab_cmd::{rx_port_forms, TX_PORT_HELP};
use crate::latency_out::{self, LatencyOutputs, LoadSweep};
use crate::outputs::{self, write_file, WriteFailures};
use crate::runs_cmd;
use crate::signals;
use strobe_control::calibration::Correction;
use strobe_control::history::{Provenance, Recorder};

/// Flows up to which `--latency-html` alone collects latency over time (see `execute`).
const HTML_OVER_TIME_MAX_FLOWS: usize = 64;

#[derive(Args, Clone)]
pub struct GenArgs {
    /// Scenario file (TOML, OTG names). Without it, the one-flow options below describe the run.
    scenario: Option<PathBuf>,

    #[arg(long, help = TX_PORT_HELP, value_name = "PORT", help_heading = "One-flow options")]
    port: Option<String>,
    /// UDP flow SRC:PORT-DST:PORT, e.g. 198.18.0.1:1000-198.18.1.1:2000 ([v6]:port for IPv6).
    #[arg(long, help_heading = "One-flow options")]
    udp: Option<String>,
    /// TCP flow SRC:PORT-DST:PORT.
    #[arg(long, help_heading = "One-flow options")]
    tcp: Option<String>,
    /// ICMP echo flow SRC-DST.
    #[arg(long, help_heading = "One-flow options")]
    icmp: Option<String>,
    /// Source MAC, e.g. 02:00:00:00:00:01 (on a lab port: the lab endpoint's own MAC).
    #[arg(long, value_name = "MAC", help_heading = "One-flow options")]
    src_mac: Option<String>,
    /// Destination MAC, e.g. 02:00:00:00:00:02 (on a lab port: the next hop's MAC, the DUT's
    /// near interface for the router).
    #[arg(long, value_name = "MAC", help_heading = "One-flow options")]
    dst_mac: Option<String>,
    /// VLAN id; give twice for QinQ (outer first).
    #[arg(long, help_heading = "One-flow options")]
    vlan: Vec<u16>,
    /// Frame size incl. FCS: 128 | imix | 64-1518 | 64-1518/64 | random:64-1518.
    #[arg(long, default_value = "64", help_heading = "One-flow options")]
    size: String,
    /// Rate: 1000 (pps), 100kpps, 1.5mpps, 10gbps (layer 1), or max (unpaced).
    #[arg(long, default_value = "1000", help_heading = "One-flow options", allow_hyphen_values = true, value_parser = crate::values::positive_text)]
    rate: String,
    /// Timing: cbr | poisson | burst:PACKETS/GAP | on_off:ON/OFF | train:TRAINSxFRAMES/GAP
    /// (a convoy: trains of frames back to back at line rate, GAP apart, counted train by
    /// train).
    #[arg(long, default_value = "cbr", help_heading = "One-flow options")]
    pattern: String,
    /// Number of frames to send.
    #[arg(long, help_heading = "One-flow options", allow_hyphen_values = true, value_parser = crate::values::count)]
    count: Option<u64>,
    /// How long to send, e.g. 10s, 500ms.
    #[arg(long, help_heading = "One-flow options", allow_hyphen_values = true, value_parser = crate::values::positive_text)]
    duration: Option<String>,
    /// Vary a field: LAYER.FIELD=inc:START/STEP/COUNT | dec:… | rand:MIN-MAX[/SEED] | values:A,B | VALUE.
    #[arg(long, help_heading = "One-flow options")]
    vary: Vec<String>,
    /// Seed for random fields, sizes and timing.
    #[arg(long, default_value_t = 1, help_heading = "One-flow options")]
    seed: u64,
    /// Do not write the instrumentation trailer.
    #[arg(long, help_heading = "One-flow options")]
    no_trailer: bool,

    /// Paced: most frames one hand-over may carry (default 256; frames join a hand-over only
    /// when their deadlines are closer than the port's floor allows; 1 = every frame alone).
    /// Unpaced: frames per hand-over (32 when latency is measured, else the backend's
    /// fastest batch: 256 on AF_PACKET and AF_XDP copy mode).
    #[arg(long)]
    batch: Option<usize>,
    /// The transmit path's floor for paced ports, HANDOVER/SPACING (e.g. 2.3us/0.9us): what
    /// one hand-over costs and how closely frames handed over together leave. Default
    /// (`remembered`): the floor the last paced run on the port's path measured (`strobe
    /// ports` lists it), else learned from the run's own first hand-overs; `learn`
    /// ignores what is remembered. No frame but the flows' own is ever sent to measure it.
    #[arg(long, value_name = "HANDOVER/SPACING|learn|remembered")]
    floor: Option<String>,
    /// When falling behind: smooth (shift at the stall, then shorten later gaps by at most
    /// 1/50 until on time again: keeps the asked rate and gaps), shift (keep gaps, the rate
    /// dips) or catch-up (burst until on time).
    #[arg(long, default_value = "smooth", value_parser = ["smooth", "shift", "catch-up"])]
    late: String,
    /// Lateness beyond which a frame counts as late, e.g. 1us.
    #[arg(long, default_value = "1us", allow_hyphen_values = true, value_parser = crate::values::positive_text)]
    late_tolerance: String,
    /// Ignore deadlines and send as fast as possible.
    #[arg(long)]
    unpaced: bool,
    /// Write every frame in strobe's engine, even where the port could generate the flow
    /// itself (xdp-live's kernel program does for one flow, unpaced or paced at a constant
    /// rate or in bursts, and for up to 8 such paced flows on a port): for comparing the two.
    #[arg(long)]
    engine_frames: bool,
    /// xdp-count: receive ports pass the frames they counted on to the stack instead of
    /// dropping them, so that a capture on the interface (tcpdump, Wireshark) sees them.
    #[arg(long)]
    pass_counted: bool,
    /// Transmit workers (cores) per transmit port: constant-rate flows stay whole on one
    /// worker, Poisson flows are split over all of them (independent Poisson sub-flows).
    /// At most 256; more workers than usable cores share them (a warning says so).
    #[arg(long, default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..=strobe_control::model::MAX_CORES as u64))]
    cores: u64,
    #[arg(
        long,
        value_name = "PORT",
        help = concat!("Receive on this port too and count the flow there, one of:", rx_port_forms!()),
        help_heading = "One-flow options"
    )]
    rx: Option<String>,
    /// Prefix of the lab that `lab:tx` / `lab:rx` ports refer to.
    #[arg(long, default_value = "strobe", value_name = "PREFIX")]
    lab: String,
    /// How long receivers keep counting after the last frame was sent, e.g. 500ms.
    #[arg(long, default_value = "500ms", allow_hyphen_values = true, value_parser = crate::values::positive_text)]
    drain: String,
    /// The run tag every trailer carries, 0-255 but 84; receivers count frames with another
    /// tag apart. Default: random per run (derived from the seeds when writing a pcap trace).
    #[arg(long, value_name = "N")]
    run_tag: Option<u8>,
    /// First sequence number of every flow, e.g. 4294967000 to cross the 2^32 wrap early.
    #[arg(long, value_name = "N", default_value_t = 0)]
    seq_start: u32,
    /// Per-flow status lines.
    #[arg(short, long)]
    verbose: bool,
    /// No status line while running.
    #[arg(short, long)]
    quiet: bool,
    /// Fail the run (exit status 1, after printing and writing the results) when a flow's
    /// or the whole run's loss exceeds PERCENT of the frames sent, e.g. 0, 0.01 or 5%.
    #[arg(long, value_name = "PERCENT", value_parser = parse_percent, allow_hyphen_values = true)]
    max_loss: Option<f64>,
    /// Write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    #[command(flatten)]
    history: crate::runs_cmd::HistoryArgs,
    /// Write per-flow results as CSV to FILE.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Write every convoy's trains (`--pattern train:…`, or a scenario's burst count) as CSV,
    /// one row per train.
    #[arg(long, value_name = "FILE")]
    trains_csv: Option<PathBuf>,
    /// Do not measure latency (frames keep their trailer for loss counting).
    #[arg(long, help_heading = "Latency")]
    no_latency: bool,
    /// Receive workers never yield their core: on AF_XDP, whose receive timestamps are taken
    /// in user space, a worker's wake-up would otherwise add to the latency.
    #[arg(long, help_heading = "Latency")]
    rx_busy_poll: bool,
    /// Receive with the NIC's hardware timestamps (AF_PACKET, or xdp-count through the
    /// driver's XDP RX metadata, on a NIC that stamps every frame; see `strobe ports`),
    /// mapped to the transmit clock by a clock sync.
    #[arg(long, help_heading = "Latency")]
    hw_timestamps: bool,
    /// Where latency starts: `strobe` (the stamp in each frame's trailer, taken just before
    /// the hand-over) or `metadata` (the time the frame left, as the NIC stamps it through
    /// AF_XDP TX metadata: afxdp: transmit ports in zero-copy on a driver that stamps, see
    /// `strobe ports` column xsk-tx-ts).
    #[arg(long, value_name = "SOURCE", default_value = "strobe", value_parser = ["strobe", "metadata"], help_heading = "Latency")]
    tx_timestamps: String,
    /// Subtract the measurement path's own latency, from a `strobe calibrate` file; results
    /// show raw and corrected values.
    #[arg(long, value_name = "FILE", help_heading = "Latency")]
    calibration: Option<PathBuf>,
    #[command(flatten)]
    outputs: LatencyOutputs,
    // Last: its heading (Latency) carries on to any option declared after it.
    #[command(flatten)]
    sweep: LoadSweep,
}

/// The scenario the arguments describe (a file, or the one-flow options) and its pacing.
fn load(args: &GenArgs) -> Result<(Scenario, Pacing), Failure> {
    if let Some(path) = &args.scenario {
        let scenario = strobe_control::source::scenario_file(path)?;
        // --unpaced makes any scenario unpaced; the file's `[run] pacing` may too.
        let pacing = match args.unpaced {
            true => Pacing::Unpaced {
                time_limit_ns: None,
            },
            false => scenario.pacing,
        };
        return Ok((scenario, pacing));
    }
    Ok(one_flow(args)?.scenario(&args.lab, args.unpaced)?)
}

/// The one-flow options as the run-control layer takes them.
fn one_flow(args: &GenArgs) -> Result<OneFlow, Failure> {
    let Some(port) = args.port.clone() else {
        return Err(Failure::BadInput(
            "nothing to send: give a scenario file (strobe gen scenario.toml) or a port and a flow \
             (strobe gen --port pcap:out.pcap --udp 198.18.0.1:1000-198.18.1.1:2000 --count 1000)"
                .into(),
        ));
    };
    Ok(OneFlow {
        flow: quick::QuickArgs {
            port,
            udp: args.udp.clone(),
            tcp: args.tcp.clone(),
            icmp: args.icmp.clone(),
            src_mac: args.src_mac.clone(),
            dst_mac: args.dst_mac.clone(),
            vlan: args.vlan.clone(),
            size: args.size.clone(),
            rate: args.rate.clone(),
            pattern: args.pattern.clone(),
            count: args.count,
            duration: args.duration.clone(),
            vary: args.vary.clone(),
            seed: args.seed,
            no_trailer: args.no_trailer,
            unbounded: false,
        },
        rx: args.rx.clone(),
    })
}

pub fn run(args: GenArgs) -> Result<(), Failure> {
    let correction = args
        .calibration
        .as_deref()
        .map(strobe_control::calibration::load)
        .transpose()?;
    check_outputs(&args)?;
    let mut recorder = args.history.recorder()?;
    let provenance = runs_cmd::provenance("gen");
    if !args.sweep.rates.is_empty() {
        return sweep(&args, correction.as_ref(), &mut recorder, &provenance);
    }
    let (scenario, pacing) = load(&args)?;
    let (scenario, report) = execute(&args, scenario, pacing)?;
    let results = Results::new(&scenario, &report, correction.as_ref());
    // Files first: after a SIGHUP the terminal may be gone, and printing fails.
    let mut failures = WriteFailures::default();
    latency_out::write_outputs(&args.outputs, &scenario, &report, &results, &mut failures);
    if let Some(path) = &args.json {
        let text = crate::outputs::document("gen", &results);
        failures.note(write_file(path, text.as_bytes()));
    }
    if let Some(path) = &args.csv {
        failures.note(write_file(path, results.to_csv().as_bytes()));
    }
    if let Some(path) = &args.trains_csv {
        failures.note(write_file(path, results.trains_csv().as_bytes()));
    }
    let signal = signals::install()?.signal();
    let recorded = runs_cmd::record_engine_run(
        &mut recorder,
        &provenance,
        signal,
        config(&args, None),
        &scenario,
        &report,
        &results,
    );
    print_summary(&results);
    print_latency(&results);
    print_convoys(&results);
    print_verdicts(&results);
    println!("{}", crate::display::verdict_line(&results));
    if let Some(line) = recorded {
        println!("{line}");
    }
    for failure in &results.failures {
        failures.note(Err(Failure::Runtime(failure.to_string())));
    }
    failures.note(check_excess(&results));
    let signals = signals::install()?;
    if max_loss_applies(args.max_loss, signals) {
        failures.note(check_max_loss(args.max_loss, &results));
    }
    failures.outcome(signals.outcome())
}

/// What the history records as a run's config: the command line's arguments, and the
/// scenario file's text as it was when the run started (and the rate of a sweep's step).
fn config(args: &GenArgs, sweep_rate: Option<&str>) -> serde_json::Value {
    let file = args.scenario.as_ref().map(|path| {
        serde_json::json!({
            "path": path,
            "text": std::fs::read_to_string(path).ok(),
        })
    });
    serde_json::json!({
        "args": std::env::args().skip(1).collect::<Vec<_>>(),
        "scenario_file": file,
        "sweep_rate": sweep_rate,
    })
}

/// `--max-loss` judges finished runs only: a run a signal stopped lost the frames still in
/// flight, so its loss is not final (it exits 128 + the signal instead).
fn max_loss_applies(max_loss: Option<f64>, signals: &signals::Interruption) -> bool {
    match (max_loss, signals.signal()) {
        (Some(_), Some(signal)) => {
            eprintln!(
                "--max-loss not checked: {} stopped the run, so its loss is not final",
                signals::name(signal)
            );
            false
        }
        (max_loss, _) => max_loss.is_some(),
    }
}

/// Every output file the arguments name, checked before anything is sent.
fn check_outputs(args: &GenArgs) -> Result<(), Failure> {
    outputs::check_all(&[
        ("--json", args.json.as_deref()),
        ("--csv", args.csv.as_deref()),
        ("--trains-csv", args.trains_csv.as_deref()),
        ("--latency-html", args.outputs.latency_html.as_deref()),
        ("--latency-csv", args.outputs.latency_csv.as_deref()),
        ("--hdr-log", args.outputs.hdr_log.as_deref()),
        ("--sweep-csv", args.sweep.sweep_csv.as_deref()),
        ("--sweep-svg", args.sweep.sweep_svg.as_deref()),
    ])
}

/// `--max-loss`: a loss of PERCENT, e.g. `0.5` or `0.5%`, from 0 to 100.
fn parse_percent(text: &str) -> Result<f64, String> {
    let number = text.trim().trim_end_matches('%').trim();
    match number.parse::<f64>() {
        Ok(p) if (0.0..=100.0).contains(&p) => Ok(p),
        _ => Err(format!(
            "`{text}` is not a loss percentage — give a number from 0 to 100, e.g. 0, 0.01 or 5%"
        )),
    }
}

/// Exit status 3 (a failed verdict) when a flow's or the run's loss exceeds `--max-loss` (results are written
/// by then).
fn check_max_loss(max_loss: Option<f64>, results: &Results) -> Result<(), Failure> {
    let Some(max) = max_loss else {
        return Ok(());
    };
    match results.worst_loss() {
        Some((what, loss)) if loss > max => Err(Failure::Verdict(format!(
            "{what} lost {loss:.4} % of its frames, more than --max-loss {max} %"
        ))),
        _ => Ok(()),
    }
}

/// `--rates`: one run per rate, then latency against load.
fn sweep(
    args: &GenArgs,
    correction: Option<&Correction>,
    recorder: &mut Recorder,
    provenance: &Provenance,
) -> Result<(), Failure> {
    if args.scenario.is_some() {
        return Err(Failure::BadInput(
            "--rates sweeps the one-flow options' --rate; for a scenario file, run it once per rate".into(),
        ));
    }
    if args.outputs.latency_html.is_some()
        || args.outputs.latency_csv.is_some()
        || args.csv.is_some()
        || args.trains_csv.is_some()
    {
        return Err(Failure::BadInput(
            "with --rates, write results with --json, --hdr-log, --sweep-csv and --sweep-svg"
                .into(),
        ));
    }
    let base = one_flow(args)?;
    let signals = signals::install()?;
    let sweep = Sweep {
        base: &base,
        rates: &args.sweep.rates,
        lab_prefix: &args.lab,
        unpaced: args.unpaced,
        correction,
    };
    let runs = sweep.run(
        &signals.stop,
        |rate, scenario, pacing| {
            println!("== offered load {rate}");
            execute(args, scenario, pacing)
        },
        |step| {
            // Each rate is a run of its own in the history, its rate in its config.
            let recorded = runs_cmd::record_engine_run(
                recorder,
                &Provenance {
                    started_unix_ns: step.started_unix_ns,
                    ..provenance.clone()
                },
                signals.signal(),
                config(args, Some(&step.rate)),
                &step.scenario,
                &step.report,
                &step.results,
            );
            print_latency(&step.results);
            print_verdicts(&step.results);
            if let Some(line) = recorded {
                println!("{line}");
            }
        },
    )?;
    if signals.stop.load(Ordering::Relaxed) {
        eprintln!(
            "interrupted: the sweep ends after {} of {} steps",
            runs.len(),
            args.sweep.rates.len()
        );
    }
    let points: Vec<_> = runs.iter().filter_map(|s| s.point).collect();
    // Files first: after a SIGHUP the terminal may be gone, and printing fails.
    let mut failures = WriteFailures::default();
    latency_out::write_sweep(&points, &args.sweep, &mut failures);
    if let Some(path) = &args.outputs.hdr_log {
        let intervals: Vec<_> = runs
            .iter()
            .flat_map(|s| latency_out::intervals(&s.scenario, &s.report, &format!("@{}", s.rate)))
            .collect();
        failures.note(latency_out::write_hdr_log(path, &intervals));
    }
    if let Some(path) = &args.json {
        let sweep = strobe_control::results::RateSweep {
            steps: runs
                .iter()
                .map(|s| strobe_control::results::RateStep {
                    rate: s.rate.clone(),
                    result: s.results.clone(),
                })
                .collect(),
        };
        let text = crate::outputs::document("gen-rates", &sweep);
        failures.note(write_file(path, text.as_bytes()));
    }
    println!("latency against load (raw values; loss in % of the frames sent):");
    println!(
        "  {:>12} {:>12} {:>12} {:>12} {:>8} {:>10} {:>10} {:>10}",
        "rate", "offered pps", "sent pps", "rcvd pps", "loss %", "p50 µs", "p99 µs", "p99.99 µs"
    );
    for s in &runs {
        let rate = &s.rate;
        match s.point {
            Some(p) => println!(
                "  {rate:>12} {:>12.0} {:>12.0} {:>12.0} {:>8.4} {:>10.3} {:>10.3} {:>10.3}",
                p.offered_pps,
                p.sent_pps,
                p.received_pps,
                p.loss_pct,
                p.p50_ns / 1e3,
                p.p99_ns / 1e3,
                p.p9999_ns / 1e3
            ),
            None => println!("  {rate:>12}  (nothing received: no latency)"),
        }
    }
    let judge_loss = max_loss_applies(args.max_loss, signals);
    for s in &runs {
        let at_rate = |result: Result<(), Failure>| {
            result.map_err(|e| match e {
                Failure::Runtime(m) => Failure::Runtime(format!("at {}: {m}", s.rate)),
                Failure::Verdict(m) => Failure::Verdict(format!("at {}: {m}", s.rate)),
                other => other,
            })
        };
        for failure in &s.results.failures {
            failures.note(at_rate(Err(Failure::Runtime(failure.to_string()))));
        }
        failures.note(at_rate(check_excess(&s.results)));
        if judge_loss {
            failures.note(at_rate(check_max_loss(args.max_loss, &s.results)));
        }
    }
    failures.outcome(signals.outcome())
}

/// Fails the run when a flow received more unique frames than it sent: frames with this
/// run's tag came from somewhere else, so none of its counts can be trusted.
fn check_excess(results: &Results) -> Result<(), Failure> {
    let suspects: Vec<String> = results
        .flows
        .iter()
        .filter(|f| f.suspect)
        .map(|f| format!("`{}` ({} more)", f.name, f.excess_rx.unwrap_or(0)))
        .collect();
    if suspects.is_empty() {
        return Ok(());
    }
    Err(Failure::Verdict(format!(
        "flow {} received more unique frames than it sent: another sender used this run's tag \
         (0x{:02x}), so loss and latency are not trustworthy; run again (each run draws a new \
         tag), or if you set --run-tag, give each generator its own",
        suspects.join(", "),
        results.run_tag
    )))
}

/// Runs `scenario` as `args` say (status line included) and returns what it did.
fn execute(
    args: &GenArgs,
    scenario: Scenario,
    pacing: Pacing,
) -> Result<(Scenario, strobe_control::RunReport), Failure> {
    let bad_flag =
        |flag: &str, text: &str, e: String| Failure::BadInput(format!("{flag} {text}: {e}"));
    let parse_ns = |flag: &str, text: &str| {
        strobe_control::timing::parse_duration_ns(text)
            .map_err(|e| bad_flag(flag, text, e.to_string()))
    };
    let floor = args
        .floor
        .as_deref()
        .map(|text| {
            text.parse::<strobe_control::floor_memory::FloorChoice>()
                .map_err(|e| {
                    bad_flag(
                        "--floor",
                        text,
                        format!("{e} (or `learn`, or `remembered`, the default)"),
                    )
                })
        })
        .transpose()?
        .unwrap_or_default();
    // The HTML report draws latency over time from the same intervals as the log. Each
    // interval copies every active flow's histogram (about 229 KB) inside the receive loop,
    // so for the report alone that is done only for a few flows.
    let html_over_time =
        args.outputs.latency_html.is_some() && scenario.flows.len() <= HTML_OVER_TIME_MAX_FLOWS;
    let wants_intervals = args.outputs.hdr_log.is_some() || html_over_time;
    if args.outputs.latency_html.is_some() && !wants_intervals {
        eprintln!(
            "note: the HTML report leaves out latency over time for more than \
             {HTML_OVER_TIME_MAX_FLOWS} flows (add --hdr-log FILE to collect it anyway)"
        );
    }
    let latency_interval_ns = match wants_intervals {
        true => Some(
            strobe_control::timing::parse_duration_ns(&args.outputs.hdr_interval)
                .ok()
                .filter(|&ns| ns >= 100_000_000)
                .ok_or_else(|| {
                    Failure::BadInput(format!(
                        "--hdr-interval {}: give a duration of at least 100ms, e.g. 1s or 100ms \
                         (each interval copies every flow's histogram, and AF_PACKET hands \
                         frames over in blocks of up to 2 ms)",
                        args.outputs.hdr_interval
                    ))
                })?,
        ),
        false => None,
    };
    if args.batch == Some(0) {
        return Err(Failure::BadInput("--batch must be at least 1".into()));
    }
    let options = PlanOptions {
        lab_prefix: args.lab.clone(),
        pacing,
        batch: args.batch,
        floor,
        late_policy: match args.late.as_str() {
            "catch-up" => LatePolicy::CatchUp,
            "smooth" => LatePolicy::Smooth,
            _ => LatePolicy::Shift,
        },
        late_tolerance_ns: parse_ns("--late-tolerance", &args.late_tolerance)?,
        drain_ns: parse_ns("--drain", &args.drain)?,
        tx_workers: args.cores as usize,
        hardware_timestamps: args.hw_timestamps,
        tx_metadata_stamps: args.tx_timestamps == "metadata",
        rx_busy_poll: args.rx_busy_poll,
        run_tag: args.run_tag,
        seq_start: args.seq_start,
        measure_latency: !args.no_latency,
        latency_interval_ns,
        live_latency: false,
        engine_frames: args.engine_frames,
        pass_counted: args.pass_counted,
        start_gate: None,
    };
    let view = StatusView {
        verbose: args.verbose,
        quiet: args.quiet,
    };
    run_on_terminal(scenario, &options, view, args.max_loss.is_some())
}

/// How much a run shows while it runs.
#[derive(Clone, Copy)]
pub struct StatusView {
    pub verbose: bool,
    pub quiet: bool,
}

/// Prepares and runs `scenario` with a status line, signals stopping it (a second one ends
/// the drain); `needs_rx` refuses a plan no port receives.
pub fn run_on_terminal(
    scenario: Scenario,
    options: &PlanOptions,
    view: StatusView,
    needs_rx: bool,
) -> Result<(Scenario, strobe_control::RunReport), Failure> {
    let plan = strobe_control::prepare(scenario, options)?;
    if needs_rx && plan.scenario.flows.iter().all(|f| f.rx_ports.is_empty()) {
        return Err(Failure::BadInput(
            "--max-loss needs a port that receives to measure loss: add --rx PORT (or rx ports \
             to the scenario's flows)"
                .into(),
        ));
    }
    for w in &plan.warnings {
        eprintln!("warning: {w}");
    }
    let signals = signals::install()?;
    if let Some(signal) = signals.signal() {
        return Err(Failure::Interrupted(signal));
    }
    let mut plan = plan;
    plan.options.drain_abort = Some(signals.abort_drain.clone());
    let time_limit_ns = match plan.pacing {
        Pacing::Unpaced { time_limit_ns } => time_limit_ns,
        Pacing::Scheduled => None,
    };
    let mut status = Status::new(&plan.scenario, view.verbose, view.quiet, time_limit_ns);
    let report =
        strobe_control::run::run_blocking(&plan, signals.stop.clone(), 1_000_000_000, &mut |t| {
            status.tick(t)
        });
    status.finish();
    let report = report?;
    if signals.drain_cut_short() && !report.rx_ports.is_empty() {
        eprintln!(
            "note: the drain ended after {} ms (second signal): frames still in flight then count as lost",
            report.drain_ns / 1_000_000
        );
    }
    if report.clock == ClockSource::Monotonic {
        eprintln!(
            "warning: this CPU's time-stamp counter is not invariant (no constant_tsc/nonstop_tsc \
             flags), so pacing used CLOCK_MONOTONIC: expect coarser gaps than on an invariant TSC"
        );
    }
    Ok((plan.scenario, report))
}
