//! What the methodology commands (`trains`, `rfc2544`, `y1564`) share: the ports they send
//! from and measure on, how they run each step on the terminal, and their output files.

use std::path::Path;

use clap::Args;
use strobe_control::history::{Recorder, TrialHistograms};
use strobe_control::rfc2544::{TrialRun, TrialRunner};
use strobe_control::PlanOptions;
use strobe_model::Scenario;

use crate::failure::Failure;
use crate::gen_cmd::{run_on_terminal, StatusView};
use crate::lab_cmd::TX_PORT_HELP;
use crate::outputs::{write_file, WriteFailures};

/// Where a methodology sends and measures.
#[derive(Args)]
pub struct MethodPorts {
    #[arg(long, help = TX_PORT_HELP, value_name = "PORT", default_value = "lab:tx")]
    pub port: String,
    /// Where the frames arrive and are measured.
    #[arg(long, value_name = "PORT", default_value = "lab:rx")]
    pub rx: String,
    /// Source MAC (on a lab port: the lab endpoint's own).
    #[arg(long, value_name = "MAC")]
    pub src_mac: Option<String>,
    /// Destination MAC (on a lab port: its next hop's).
    #[arg(long, value_name = "MAC")]
    pub dst_mac: Option<String>,
    /// Prefix of the lab that `lab:tx` / `lab:rx` ports refer to.
    #[arg(long, default_value = "strobe", value_name = "PREFIX")]
    pub lab: String,
}

/// Runs each step of a methodology as `strobe gen` runs a scenario: its label, then the
/// status line (none for learning frames), warnings on stderr.
pub struct Terminal {
    options: PlanOptions,
    quiet: bool,
    /// Each trial's latency histograms, for the run history.
    pub histograms: TrialHistograms,
}

impl Terminal {
    pub fn new(lab: &str, quiet: bool) -> Terminal {
        Terminal {
            options: PlanOptions {
                lab_prefix: lab.to_string(),
                ..PlanOptions::default()
            },
            quiet,
            histograms: TrialHistograms::default(),
        }
    }
}

impl TrialRunner for Terminal {
    type Error = Failure;

    fn run(&mut self, trial: TrialRun) -> Result<(Scenario, strobe_engine::RunReport), Failure> {
        if !trial.learning {
            println!("== {}", trial.status());
        }
        let options = PlanOptions {
            pacing: trial.pacing,
            drain_ns: trial.drain_ns,
            ..self.options.clone()
        };
        let view = StatusView {
            verbose: false,
            quiet: self.quiet || trial.learning,
        };
        let (scenario, report) = run_on_terminal(trial.scenario, &options, view, false)?;
        if !trial.learning {
            self.histograms.add(&trial.what, &scenario, &report);
        }
        Ok((scenario, report))
    }
}

/// A report's file and the text that goes into it, made only when the file is asked for.
pub type Output<'a> = (Option<&'a Path>, &'a dyn Fn() -> String);

/// Writes each asked-for file; what failed is collected for the exit status.
pub fn write_outputs(files: &[Output<'_>]) -> WriteFailures {
    let mut failures = WriteFailures::default();
    for (path, text) in files {
        if let Some(path) = path {
            failures.note(write_file(path, text().as_bytes()));
        }
    }
    failures
}

/// Records a methodology's whole report in the run history (config: its command line);
/// returns the line that says where, for the end of the output.
pub fn record_report(
    recorder: &mut Recorder,
    kind: &str,
    report: &impl serde::Serialize,
    outcome: String,
    trials: &mut TrialHistograms,
) -> Option<String> {
    // Started when the method's trials were set up, not now that it has ended.
    let provenance = strobe_control::history::Provenance {
        started_unix_ns: trials.started_unix_ns(),
        ..crate::runs_cmd::provenance(kind)
    };
    let record = strobe_control::history::method_record(
        &provenance,
        &outcome,
        serde_json::json!({ "args": std::env::args().skip(1).collect::<Vec<_>>() }),
        serde_json::to_value(report).unwrap_or_default(),
        trials.summary(),
        trials.take(),
    );
    crate::runs_cmd::keep(recorder, &record)
}
