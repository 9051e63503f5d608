//! `strobe study forwarders`: the forwarder study's front end. The study itself (labs,
//! loads, runs, history, report) is `strobe_control::study`; this reads the options, shows
//! progress and writes the report.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use strobe_control::study::{run_study, StudyEvent, StudySpec, StudyStop, STUDY_LAB_PREFIX};

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
    /// The report as JSON (`-`: the standard output): every run with its DUT, load, loss,
    /// latency percentiles and run id (docs/schema/study.schema.json).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Only the report at the end, no progress lines.
    #[arg(long, short)]
    quiet: bool,
    #[command(flatten)]
    history: HistoryArgs,
}

impl ForwardersArgs {
    /// The study in the words the server's `POST /strobe/study` takes too.
    fn spec(&self) -> StudySpec {
        StudySpec {
            duts: self.duts.clone(),
            loads: self.loads.clone(),
            rates: self.rates.clone(),
            frames: self.frames,
            size: self.size,
            lab: self.lab.clone(),
        }
    }
}

pub fn run(args: StudyArgs) -> Result<(), Failure> {
    let StudyCommand::Forwarders(a) = args.command;
    let request = a
        .spec()
        .request()
        .and_then(|r| r.check().map(|()| r))
        .map_err(|e| Failure::BadInput(e.to_string()))?;
    crate::outputs::check_all(&[("--html", a.html.as_deref()), ("--json", a.json.as_deref())])?;
    let mut recorder = a.history.recorder()?;
    let signals = signals::install()?;
    signals::on_exit_say(format!(
        "the study's lab may be left up: remove it with strobe lab down --prefix {}",
        request.lab_prefix
    ));
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
    // Files first: after a SIGHUP the terminal may be gone. One that cannot be written
    // does not keep the other from being written.
    let mut written = crate::outputs::WriteFailures::default();
    if let Some(path) = &a.html {
        written.note(crate::outputs::write_file(path, study.html().as_bytes()));
    }
    if let Some(path) = &a.json {
        let document = crate::outputs::document("study", &study.report(&request));
        written.note(crate::outputs::write_file(path, document.as_bytes()));
    }
    print!("{}", study.text());
    if let Some(path) = a.html.as_ref().filter(|p| !crate::outputs::is_stdout(p)) {
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
    let outcome = match &study.failure {
        Some(failure) => Err(Failure::Runtime(format!(
            "the study ended after {} of {} runs: {failure}",
            study.runs.len(),
            request.runs()
        ))),
        None => signals.outcome(),
    };
    written.outcome(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Options {
        #[command(flatten)]
        forwarders: ForwardersArgs,
    }

    #[test]
    fn the_command_lines_defaults_are_the_apis() {
        let given = Options::try_parse_from(["forwarders"]).unwrap();
        assert_eq!(given.forwarders.spec(), StudySpec::default());
    }
}
