//! `strobe study forwarders`: the forwarder study's front end. The study itself (labs,
//! loads, runs, history, report) is `strobe_control::study`; this reads the options, shows
//! progress and writes the report.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use strobe_control::lab::Dut;
use strobe_control::study::{
    run_study, Arrivals, StudyEvent, StudyRequest, StudyStop, STUDY_LAB_PREFIX,
};
use strobe_control::timing::Rate;

use crate::failure::Failure;
use crate::runs_cmd::HistoryArgs;
use crate::signals;

#[derive(Args)]
pub struct StudyArgs {
    #[command(subcommand)]
    command: StudyCommand,
}

#[derive(Subcommand)]
enum StudyCommand {
    /// Software forwarders side by side, after the Killer-Microsecond study: the same
    /// constant-rate and Poisson loads through each lab DUT in turn, every run recorded in
    /// the history with its DUT in its label, and one report with the DUTs' latency CCDFs
    /// overlaid per load and their percentiles side by side.
    Forwarders(ForwardersArgs),
}

#[derive(Args)]
struct ForwardersArgs {
    /// The DUTs to compare, as `strobe lab up --dut` takes them, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "router,xdp,testpmd")]
    duts: Vec<String>,
    /// The arrival processes: constant, poisson (seeded: every DUT gets the same gaps).
    #[arg(long, value_delimiter = ',', default_value = "constant,poisson")]
    loads: Vec<String>,
    /// The rates of the loads, in packets per second (e.g. 20kpps), below every DUT's
    /// throughput: the study compares latency, not loss.
    #[arg(long, value_delimiter = ',', default_value = "20kpps,50kpps")]
    rates: Vec<String>,
    /// Frames per run.
    #[arg(long, default_value_t = 200_000)]
    frames: u64,
    /// Frame size in bytes with the FCS.
    #[arg(long, default_value_t = 64)]
    size: u32,
    /// The prefix of the labs the study builds one after the other and removes at its end
    /// (not the default lab's, which stays as it is).
    #[arg(long, default_value = STUDY_LAB_PREFIX)]
    lab: String,
    /// The report as a self-contained HTML page: CCDFs overlaid per load, percentiles side
    /// by side, every run with its DUT's software and cores.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Only the report at the end, no progress lines.
    #[arg(long, short)]
    quiet: bool,
    #[command(flatten)]
    history: HistoryArgs,
}

pub fn run(args: StudyArgs) -> Result<(), Failure> {
    let StudyCommand::Forwarders(a) = args.command;
    let request = request(&a)?;
    request
        .check()
        .map_err(|e| Failure::BadInput(e.to_string()))?;
    if let Some(path) = &a.html {
        crate::outputs::check_writable("--html", path)?;
    }
    let mut recorder = a.history.recorder()?;
    let signals = signals::install()?;
    let provenance = crate::runs_cmd::provenance("study");
    let quiet = a.quiet;
    let describe = || match signals.signal() {
        Some(s) => format!("stopped by {}", signals::name(s)),
        None => "stopped".to_string(),
    };
    let stop = StudyStop {
        stop: &signals.stop,
        abort_drain: Some(signals.abort_drain.clone()),
        describe: &describe,
    };
    let study = run_study(&request, &provenance, &mut recorder, &stop, &mut |event| {
        if quiet {
            return;
        }
        match event {
            StudyEvent::LabUp(dut) => println!("lab up with {dut} ({})", dut.name()),
            StudyEvent::Starting {
                index,
                total,
                label,
            } => println!("run {index}/{total}: {label}"),
            StudyEvent::Finished(run) => {
                if let Some(id) = run.history_id {
                    println!("  recorded as run {id}");
                }
            }
        }
    })
    .map_err(|e| match e {
        strobe_control::ControlError::BadInput(m) => Failure::BadInput(m),
        e => Failure::Runtime(e.to_string()),
    })?;
    // Files first: after a SIGHUP the terminal may be gone.
    if let Some(path) = &a.html {
        crate::outputs::write_file(path, study.html().as_bytes())?;
    }
    print!("{}", study.text());
    if let Some(path) = &a.html {
        println!("wrote the report: {}", path.display());
    }
    for w in &study.warnings {
        eprintln!("warning: {w}");
    }
    if study.stopped {
        eprintln!(
            "interrupted: {} of {} runs ran",
            study.runs.len(),
            request.runs()
        );
    }
    if let Some(failure) = &study.failure {
        return Err(Failure::Runtime(format!(
            "the study ended after {} of {} runs: {failure}",
            study.runs.len(),
            request.runs()
        )));
    }
    signals.outcome()
}

fn request(a: &ForwardersArgs) -> Result<StudyRequest, Failure> {
    let duts = a
        .duts
        .iter()
        .map(|d| {
            d.parse::<Dut>()
                .map_err(|e| Failure::BadInput(format!("--duts {d}: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let arrivals = a
        .loads
        .iter()
        .map(|l| {
            l.parse::<Arrivals>()
                .map_err(|e| Failure::BadInput(format!("--loads: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let rates_pps = a
        .rates
        .iter()
        .map(|r| match strobe_control::timing::parse_rate(r) {
            Ok(Rate::Pps(pps)) if pps >= 1.0 => Ok(pps.round() as u64),
            Ok(Rate::Pps(_)) => Err(Failure::BadInput(format!(
                "--rates {r}: the study's rates are at least 1 packet per second"
            ))),
            Ok(_) => Err(Failure::BadInput(format!(
                "--rates {r}: give packets per second (e.g. 20kpps): the study sets frame \
                 rates, not bit rates"
            ))),
            Err(e) => Err(Failure::BadInput(format!("--rates {r}: {e}"))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(StudyRequest {
        duts,
        arrivals,
        rates_pps,
        frames: a.frames,
        size: a.size,
        lab_prefix: a.lab.clone(),
    })
}
