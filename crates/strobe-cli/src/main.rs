//! `strobe`: the command-line front end.

mod analyze_cmd;
mod calc_cmd;
mod calibrate_cmd;
mod clocks_cmd;
mod demo_cmd;
mod display;
mod docs_cmd;
mod failure;
mod gen_cmd;
mod lab_cmd;
mod latency_out;
mod methodology;
mod outputs;
mod ports_cmd;
mod reflect_cmd;
mod rfc2544_cmd;
mod runs_cmd;
mod schema_cmd;
mod serve_cmd;
mod signals;
mod study_cmd;
mod trains_cmd;
mod values;
mod y1564_cmd;

use std::io::Write as _;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use failure::Failure;

/// The exit codes, as docs/results.md#exit-codes lists them.
const EXIT_CODES: &str =
    "Exit codes: 0 success; 1 strobe itself failed (a port, an output, an I/O \
error); 2 bad input or a missing privilege; 3 a failed verdict (--max-loss, a suspect flow, \
Y.1564 FAIL); 128 + N stopped by signal N (130 SIGINT, 143 SIGTERM, 129 SIGHUP). JSON to \
stdout: --json - (tables then go to stderr).";

/// A precise, scriptable software packet generator and latency meter.
#[derive(Parser)]
#[command(
    name = "strobe",
    version,
    about,
    propagate_version = true,
    after_help = EXIT_CODES
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate traffic from a scenario file or a one-flow command line.
    Gen(Box<gen_cmd::GenArgs>),
    /// Precision analysis (Mind the Gap) of any pcap/pcapng capture.
    Analyze(analyze_cmd::AnalyzeArgs),
    /// The embedded virtual lab: network namespaces and veth pairs around a device under test.
    Lab(lab_cmd::LabArgs),
    /// A first result with nothing to set up: builds its own virtual lab, sends a throughput
    /// run and a constant-rate + Poisson run through the DUT, shows counts and latency.
    Demo(demo_cmd::DemoArgs),
    /// Calculators for the physical ground truth: `calc latency` for a fibre loop.
    Calc(calc_cmd::CalcArgs),
    /// Interfaces and their timestamping: software/hardware, PHC, the latency source used.
    Ports(ports_cmd::PortsArgs),
    /// System and PTP hardware clocks; `--sync A B` measures B's offset and drift against A.
    Clocks(clocks_cmd::ClocksArgs),
    /// Send instrumented frames straight back (addresses swapped) for round-trip latency.
    Reflect(reflect_cmd::ReflectArgs),
    /// Measure strobe's own latency over a direct cable and store it for --calibration.
    Calibrate(calibrate_cmd::CalibrateArgs),
    /// An Open Traffic Generator REST server: drive strobe with snappi scripts.
    Serve(serve_cmd::ServeArgs),
    /// Convoys of packet trains: head latency, bandwidth and loss in one measurement, and
    /// sweeps over frame size and train length (IDI, convergence, expected vs measured).
    Trains(trains_cmd::TrainsArgs),
    /// RFC 2544 benchmarks per frame size: throughput (NDR and PDR in one search), latency
    /// of every frame at and below it, and the frame loss rate curve.
    Rfc2544(rfc2544_cmd::Rfc2544Args),
    /// ITU-T Y.1564 service activation: per service the configuration steps up to its CIR,
    /// CIR + EIR and a policing step, then all services at once; pass/fail per step.
    Y1564(y1564_cmd::Y1564Args),
    /// Studies of several DUTs under the same loads: `study forwarders` compares software
    /// forwarders' latency on the lab, as the Killer-Microsecond study does.
    Study(study_cmd::StudyArgs),
    /// The run history: every run recorded (list, show, compare latency distributions,
    /// export, import, label, delete).
    Runs(runs_cmd::RunsArgs),
    /// The JSON Schema of a `--json` document (docs/schema/), generated from the code.
    #[command(hide = true)]
    Schema(schema_cmd::SchemaArgs),
    /// Write the man pages and shell completions (for packagers: scripts/package.sh).
    #[command(hide = true)]
    GenerateDocs(docs_cmd::DocsArgs),
}

fn main() -> ExitCode {
    outputs::mark_start();
    // Like other Unix tools, end quietly when the reader of our output goes away
    // (`strobe analyze x.pcap | head`): Rust ignores SIGPIPE by default, which turns a
    // closed pipe into a panic in println!.
    // SAFETY: setting a signal's disposition to its default before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("STROBE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    // `--json -`: the standard output carries the JSON document alone.
    let args: Vec<String> = std::env::args().collect();
    if outputs::json_goes_to_stdout(&args) {
        if let Err(e) = outputs::claim_stdout_for_json() {
            eprintln!("error: cannot keep the standard output for --json -: {e}");
            return ExitCode::from(1);
        }
    }
    // Long-running commands catch SIGINT/SIGTERM/SIGHUP from the start, so a signal that
    // comes while they load and check their input still ends them the documented way.
    let long_running = matches!(
        cli.command,
        Command::Gen(_)
            | Command::Demo(_)
            | Command::Reflect(_)
            | Command::Calibrate(_)
            | Command::Serve(_)
            | Command::Trains(_)
            | Command::Rfc2544(_)
            | Command::Y1564(_)
            | Command::Study(_)
    );
    let installed = if long_running {
        signals::install().map(|_| ())
    } else {
        Ok(())
    };
    if long_running {
        // The engine's clock calibrates while the command reads its input and opens ports.
        strobe_control::calibrate_clock_soon();
    }
    let result = installed.and_then(|()| match cli.command {
        Command::Gen(args) => gen_cmd::run(*args),
        Command::Analyze(args) => analyze_cmd::run(args),
        Command::Lab(args) => lab_cmd::run(args),
        Command::Demo(args) => demo_cmd::run_demo(args),
        Command::Calc(args) => calc_cmd::run(args),
        Command::Ports(args) => ports_cmd::run(args),
        Command::Clocks(args) => clocks_cmd::run(args),
        Command::Reflect(args) => reflect_cmd::run(args),
        Command::Calibrate(args) => calibrate_cmd::run(args),
        Command::Serve(args) => serve_cmd::run(args),
        Command::Trains(args) => trains_cmd::run(args),
        Command::Rfc2544(args) => rfc2544_cmd::run(args),
        Command::Y1564(args) => y1564_cmd::run(args),
        Command::Study(args) => study_cmd::run(args),
        Command::Runs(args) => runs_cmd::run(args),
        Command::Schema(args) => schema_cmd::run(args),
        Command::GenerateDocs(args) => docs_cmd::run(args),
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::BadInput(msg)) => {
            eprintln!("error: {msg}");
            ExitCode::from(2)
        }
        Err(Failure::Runtime(msg)) => {
            eprintln!("error: {msg}");
            ExitCode::from(1)
        }
        Err(Failure::Verdict(msg)) => {
            eprintln!("verdict: {msg}");
            ExitCode::from(failure::VERDICT_EXIT)
        }
        Err(Failure::Interrupted(signal)) => {
            // The terminal may be gone (SIGHUP): the exit status still tells.
            let _ = writeln!(
                std::io::stderr(),
                "stopped by {}: the results cover the part that ran",
                signals::name(signal)
            );
            ExitCode::from(128u8.saturating_add(signal as u8))
        }
    }
}
