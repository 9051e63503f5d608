use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use clap::{Args, Parser};
use strobe_control::{Pacing, PlanOptions};
use strobe_engine::{ClockSource, LatePolicy};
use strobe_model::{quick, Resources, Scenario};

use crate::calibrate_cmd::load_calibration;
use crate::lab_cmd::{lab_failure, lab_up_command, rx_port_forms, TX_PORT_HELP};
use crate::latency_out::{self, LatencyOutputs};
use crate::outputs::{self, write_file, WriteFailures};
use crate::results::{
    port_failures, print_latency, print_summary, print_verdicts, to_csv, to_json, worst_loss,
    Correction, Status,
};
use crate::{signals, Failure};

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
    /// Timing: cbr | poisson | burst:PACKETS/GAP | on_off:ON/OFF.
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
    /// one hand-over costs and how closely frames handed over together leave. Default: each
    /// paced port measures it before the run with a few hundred probe frames (their
    /// trailer marker cleared, so no strobe receiver counts them; a device under test does).
    #[arg(long, value_name = "HANDOVER/SPACING")]
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
    /// Transmit workers (cores) per transmit port: constant-rate flows stay whole on one
    /// worker, Poisson flows are split over all of them (independent Poisson sub-flows).
    /// At most 256; more workers than usable cores share them (a warning says so).
    #[arg(long, default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..=strobe_model::MAX_CORES as u64))]
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
    /// Write per-flow results as CSV to FILE.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Do not measure latency (frames keep their trailer for loss counting).
    #[arg(long, help_heading = "Latency")]
    no_latency: bool,
    /// Receive workers never yield their core: on AF_XDP, whose receive timestamps are taken
    /// in user space, a worker's wake-up would otherwise add to the latency.
    #[arg(long, help_heading = "Latency")]
    rx_busy_poll: bool,
    /// Receive with the NIC's hardware timestamps (AF_PACKET on a NIC that stamps every
    /// frame; see `strobe ports`), mapped to the transmit clock by a clock sync.
    #[arg(long, help_heading = "Latency")]
    hw_timestamps: bool,
    /// Subtract the measurement path's own latency, from a `strobe calibrate` file; results
    /// show raw and corrected values.
    #[arg(long, value_name = "FILE", help_heading = "Latency")]
    calibration: Option<PathBuf>,
    #[command(flatten)]
    outputs: LatencyOutputs,
    /// Latency against load: run once per rate (one-flow options), e.g. 10kpps,50kpps,100kpps.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        help_heading = "Latency",
        allow_hyphen_values = true, value_parser = crate::values::positive_text
    )]
    rates: Vec<String>,
    /// Write the sweep (offered, sent and received rate, loss, p50, p99, p99.99 per step) as CSV.
    #[arg(
        long,
        value_name = "FILE",
        help_heading = "Latency",
        requires = "rates"
    )]
    sweep_csv: Option<PathBuf>,
    /// Plot the sweep (p50, p99, p99.99 against offered load) as SVG.
    #[arg(
        long,
        value_name = "FILE",
        help_heading = "Latency",
        requires = "rates"
    )]
    sweep_svg: Option<PathBuf>,
}

/// `GenArgs` on their own, for commands that run a generator with arguments they build.
#[derive(Parser)]
#[command(no_binary_name = true)]
struct GenCommandLine {
    #[command(flatten)]
    args: GenArgs,
}

/// Parses `strobe gen` arguments (without the `gen`).
pub fn parse_gen_args(argv: &[String]) -> Result<GenArgs, Failure> {
    GenCommandLine::try_parse_from(argv)
        .map(|c| c.args)
        .map_err(|e| Failure::BadInput(e.to_string()))
}

/// Reads files a scenario refers to, relative to the scenario's folder.
pub struct FileResources {
    base: PathBuf,
}

impl FileResources {
    /// Resolves paths against the current directory (command-line flows).
    pub fn cwd() -> Self {
        FileResources {
            base: PathBuf::from("."),
        }
    }

    fn resolve(&self, path: &str) -> PathBuf {
        let p = Path::new(path);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.base.join(p)
        }
    }
}

impl Resources for FileResources {
    fn read_text(&self, path: &str) -> Result<String, String> {
        let full = self.resolve(path);
        std::fs::read_to_string(&full).map_err(|e| format!("cannot read {}: {e}", full.display()))
    }
    fn read_capture_timestamps(&self, path: &str) -> Result<Vec<u64>, String> {
        let full = self.resolve(path);
        let mut ts = Vec::new();
        strobe_io::read_capture(&full.to_string_lossy(), false, |f| ts.push(f.ts_ns))
            .map_err(|e| e.to_string())?;
        Ok(ts)
    }
}

fn load(
    args: &GenArgs,
    unpaced: &mut bool,
    time_limit_ns: &mut Option<u64>,
) -> Result<Scenario, Failure> {
    let bad = |e: strobe_model::ModelError| Failure::BadInput(e.to_string());
    if let Some(path) = &args.scenario {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Failure::BadInput(format!("cannot read scenario {}: {e}", path.display()))
        })?;
        let res = FileResources {
            base: path.parent().map(Path::to_path_buf).unwrap_or_default(),
        };
        return strobe_model::load_scenario(&text, &path.to_string_lossy(), &res).map_err(bad);
    }
    let Some(port) = args.port.clone() else {
        return Err(Failure::BadInput(
            "nothing to send: give a scenario file (strobe gen scenario.toml) or a port and a flow \
             (strobe gen --port pcap:out.pcap --udp 198.18.0.1:1000-198.18.1.1:2000 --count 1000)"
                .into(),
        ));
    };
    let mut q = quick::QuickArgs {
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
    };
    if let Some(side) = q.port.strip_prefix("lab:") {
        // On the lab, frames go from the endpoint's MAC to its next hop unless told otherwise.
        let lab = strobe_lab::status(&args.lab)
            .map_err(lab_failure)?
            .ok_or_else(|| {
                Failure::BadInput(format!(
                    "--port {}: no lab `{}` is up: run `{}` first",
                    q.port,
                    args.lab,
                    lab_up_command(&args.lab)
                ))
            })?;
        let e = if side.starts_with("rx") {
            &lab.rx
        } else {
            &lab.tx
        };
        let hex = |m: [u8; 6]| {
            m.iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(":")
        };
        q.src_mac.get_or_insert_with(|| hex(e.mac));
        q.dst_mac.get_or_insert_with(|| hex(e.next_hop_mac));
    }
    if args.rate.eq_ignore_ascii_case("max") {
        // As fast as the engine goes: a schedule far above any reachable rate, deadlines
        // ignored, and a real-time limit instead of a scheduled one.
        *unpaced = true;
        q.unbounded = true;
        q.rate = "1000000000000".into();
        if let Some(d) = q.duration.take() {
            *time_limit_ns = Some(
                strobe_timing::parse_duration_ns(&d)
                    .map_err(|e| Failure::BadInput(format!("--duration {d}: {e}")))?,
            );
        }
    }
    let mut scenario = quick::build(&q, &FileResources::cwd()).map_err(bad)?;
    if let Some(rx) = &args.rx {
        let speed_bps = scenario
            .ports
            .first()
            .map_or(10_000_000_000, |p| p.speed_bps);
        scenario.ports.push(strobe_model::PortSpec {
            name: "rx".into(),
            location: rx.clone(),
            speed_bps,
            cores: None,
        });
        for f in &mut scenario.flows {
            f.rx_ports = vec!["rx".into()];
        }
    }
    Ok(scenario)
}

pub fn run(args: GenArgs) -> Result<(), Failure> {
    let correction = args
        .calibration
        .as_deref()
        .map(load_calibration)
        .transpose()?;
    check_outputs(&args)?;
    if !args.rates.is_empty() {
        return sweep(&args, correction.as_ref());
    }
    let (scenario, report) = execute(&args)?;
    // Files first: after a SIGHUP the terminal may be gone, and printing fails.
    let mut failures = WriteFailures::default();
    latency_out::write_outputs(
        &args.outputs,
        &scenario,
        &report,
        correction.as_ref(),
        &mut failures,
    );
    if let Some(path) = &args.json {
        let value = to_json(&scenario, &report, correction.as_ref());
        let text = serde_json::to_string_pretty(&value).unwrap_or_default();
        failures.note(write_file(path, text.as_bytes()));
    }
    if let Some(path) = &args.csv {
        failures.note(write_file(path, to_csv(&scenario, &report).as_bytes()));
    }
    print_summary(&scenario, &report);
    print_latency(&scenario, &report, correction.as_ref());
    print_verdicts(&scenario, &report);
    for failure in port_failures(&report) {
        failures.note(Err(Failure::Runtime(failure)));
    }
    failures.note(check_excess(&scenario, &report));
    let signals = signals::install()?;
    if max_loss_applies(args.max_loss, signals) {
        failures.note(check_max_loss(args.max_loss, &scenario, &report));
    }
    failures.outcome(signals.outcome())
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
        ("--latency-html", args.outputs.latency_html.as_deref()),
        ("--latency-csv", args.outputs.latency_csv.as_deref()),
        ("--hdr-log", args.outputs.hdr_log.as_deref()),
        ("--sweep-csv", args.sweep_csv.as_deref()),
        ("--sweep-svg", args.sweep_svg.as_deref()),
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

/// Exit status 1 when a flow's or the run's loss exceeds `--max-loss` (results are written
/// by then).
fn check_max_loss(
    max_loss: Option<f64>,
    scenario: &Scenario,
    report: &strobe_engine::RunReport,
) -> Result<(), Failure> {
    let Some(max) = max_loss else {
        return Ok(());
    };
    match worst_loss(scenario, report) {
        Some((what, loss)) if loss > max => Err(Failure::Runtime(format!(
            "{what} lost {loss:.4} % of its frames, more than --max-loss {max} %"
        ))),
        _ => Ok(()),
    }
}

/// `--rates`: one run per rate, then latency against load.
fn sweep(args: &GenArgs, correction: Option<&Correction>) -> Result<(), Failure> {
    if args.scenario.is_some() {
        return Err(Failure::BadInput(
            "--rates sweeps the one-flow options' --rate; for a scenario file, run it once per rate".into(),
        ));
    }
    if args.outputs.latency_html.is_some()
        || args.outputs.latency_csv.is_some()
        || args.csv.is_some()
    {
        return Err(Failure::BadInput(
            "with --rates, write results with --json, --hdr-log, --sweep-csv and --sweep-svg"
                .into(),
        ));
    }
    let mut runs = Vec::new();
    let mut step_failures = Vec::new();
    let signals = signals::install()?;
    for rate in &args.rates {
        if signals.stop.load(Ordering::Relaxed) {
            break;
        }
        let step = GenArgs {
            rate: rate.clone(),
            ..args.clone()
        };
        println!("== offered load {rate}");
        let (scenario, report) = execute(&step)?;
        print_latency(&scenario, &report, correction);
        print_verdicts(&scenario, &report);
        step_failures.extend(port_failures(&report));
        runs.push((rate.clone(), scenario, report));
    }
    if signals.stop.load(Ordering::Relaxed) {
        eprintln!(
            "interrupted: the sweep ends after {} of {} steps",
            runs.len(),
            args.rates.len()
        );
    }
    let steps: Vec<_> = runs
        .iter()
        .map(|(rate, s, r)| (rate, latency_out::load_point(s, r)))
        .collect();
    let points: Vec<_> = steps.iter().filter_map(|(_, p)| *p).collect();
    // Files first: after a SIGHUP the terminal may be gone, and printing fails.
    let mut failures = WriteFailures::default();
    latency_out::write_sweep(
        &points,
        args.sweep_csv.as_deref(),
        args.sweep_svg.as_deref(),
        &mut failures,
    );
    if let Some(path) = &args.outputs.hdr_log {
        let intervals: Vec<_> = runs
            .iter()
            .flat_map(|(rate, s, r)| latency_out::intervals(s, r, &format!("@{rate}")))
            .collect();
        failures.note(latency_out::write_hdr_log(path, &intervals));
    }
    if let Some(path) = &args.json {
        let steps: Vec<_> = runs
            .iter()
            .map(|(rate, s, r)| serde_json::json!({"rate": rate, "result": to_json(s, r, correction)}))
            .collect();
        let text = serde_json::to_string_pretty(&steps).unwrap_or_default();
        failures.note(write_file(path, text.as_bytes()));
    }
    println!("latency against load (raw values; loss in % of the frames sent):");
    println!(
        "  {:>12} {:>12} {:>12} {:>12} {:>8} {:>10} {:>10} {:>10}",
        "rate", "offered pps", "sent pps", "rcvd pps", "loss %", "p50 µs", "p99 µs", "p99.99 µs"
    );
    for (rate, point) in &steps {
        match point {
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
    for failure in step_failures {
        failures.note(Err(Failure::Runtime(failure)));
    }
    let judge_loss = max_loss_applies(args.max_loss, signals);
    for (rate, scenario, report) in &runs {
        let at_rate = |result: Result<(), Failure>| {
            result.map_err(|e| match e {
                Failure::Runtime(m) => Failure::Runtime(format!("at {rate}: {m}")),
                other => other,
            })
        };
        failures.note(at_rate(check_excess(scenario, report)));
        if judge_loss {
            failures.note(at_rate(check_max_loss(args.max_loss, scenario, report)));
        }
    }
    failures.outcome(signals.outcome())
}

/// Fails the run when a flow received more unique frames than it sent: frames with this
/// run's tag came from somewhere else, so none of its counts can be trusted.
fn check_excess(scenario: &Scenario, report: &strobe_engine::RunReport) -> Result<(), Failure> {
    let suspects: Vec<String> = scenario
        .flows
        .iter()
        .filter_map(|f| {
            let rx = report.rx_flows.get(f.id as usize)?.as_ref()?;
            (rx.excess > 0).then(|| format!("`{}` ({} more)", f.name, rx.excess))
        })
        .collect();
    if suspects.is_empty() {
        return Ok(());
    }
    Err(Failure::Runtime(format!(
        "flow {} received more unique frames than it sent: another sender used this run's tag \
         (0x{:02x}), so loss and latency are not trustworthy; run again (each run draws a new \
         tag), or if you set --run-tag, give each generator its own",
        suspects.join(", "),
        report.run_tag
    )))
}

/// Runs the generator as `args` say (status line included) and returns what it did.
pub fn execute(args: &GenArgs) -> Result<(Scenario, strobe_engine::RunReport), Failure> {
    let mut unpaced = args.unpaced;
    let mut time_limit_ns = None;
    let scenario = load(args, &mut unpaced, &mut time_limit_ns)?;
    let bad_flag =
        |flag: &str, text: &str, e: String| Failure::BadInput(format!("{flag} {text}: {e}"));
    let parse_ns = |flag: &str, text: &str| {
        strobe_timing::parse_duration_ns(text).map_err(|e| bad_flag(flag, text, e.to_string()))
    };
    let floor = args
        .floor
        .as_deref()
        .map(|text| {
            text.parse::<strobe_timing::PathFloor>()
                .map_err(|e| bad_flag("--floor", text, e.to_string()))
        })
        .transpose()?;
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
            strobe_timing::parse_duration_ns(&args.outputs.hdr_interval)
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
        pacing: if unpaced {
            Pacing::Unpaced { time_limit_ns }
        } else {
            Pacing::Scheduled
        },
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
        rx_busy_poll: args.rx_busy_poll,
        run_tag: args.run_tag,
        seq_start: args.seq_start,
        measure_latency: !args.no_latency,
        latency_interval_ns,
    };
    let plan = strobe_control::prepare(scenario, &options)?;
    if args.max_loss.is_some() && plan.scenario.flows.iter().all(|f| f.rx_ports.is_empty()) {
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
    let mut status = Status::new(&plan.scenario, args.verbose, args.quiet, time_limit_ns);
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
