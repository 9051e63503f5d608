//! What the methodology commands (`trains`, `rfc2544`, `y1564`) share: the ports they send
//! from and measure on, how they run each step on the terminal, and their output files.

use std::path::PathBuf;

use clap::Args;
use strobe_control::history::{Recorder, TrialHistograms};
use strobe_control::model::Scenario;
use strobe_control::rfc2544::{TrialRun, TrialRunner};
use strobe_control::PlanOptions;

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

/// The one UDP flow a methodology sends (rfc2544, trains), and the ports it goes between.
#[derive(Args)]
pub struct MethodFlow {
    #[command(flatten)]
    pub ports: MethodPorts,
    /// UDP flow SRC:PORT-DST:PORT (default: the lab's generator to its sink).
    #[arg(long, default_value = "198.18.0.1:1000-198.18.1.1:2000")]
    pub udp: String,
}

/// The files a methodology writes, and whether it shows a status line.
#[derive(Args)]
pub struct MethodOutputs {
    /// Write the results as JSON to FILE: every step or trial, and the summary.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the steps as CSV to FILE: one row per trial (rfc2544), per step and service
    /// (y1564), per train (trains).
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Write an HTML report to FILE: the method's figures and tables (rfc2544: throughput,
    /// latency and loss against frame size and load; y1564: the steps with pass/fail;
    /// trains: per-train latency and bandwidth, convergence, a sweep's IDI).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// No status line while a step runs.
    #[arg(short, long)]
    pub quiet: bool,
}

impl MethodOutputs {
    /// Refuses, before anything runs, a file that could not be written.
    pub fn check(&self) -> Result<(), Failure> {
        crate::outputs::check_all(&[
            ("--json", self.json.as_deref()),
            ("--csv", self.csv.as_deref()),
            ("--html", self.html.as_deref()),
        ])
    }

    /// Writes each asked-for file, its text made only then.
    pub fn write(
        &self,
        json: &dyn Fn() -> String,
        csv: &dyn Fn() -> String,
        html: &dyn Fn() -> String,
    ) -> WriteFailures {
        let mut failures = WriteFailures::default();
        for (path, text) in [(&self.json, json), (&self.csv, csv), (&self.html, html)] {
            if let Some(path) = path {
                failures.note(write_file(path, text().as_bytes()));
            }
        }
        failures
    }
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

    /// Records the methodology's whole report with these trials' histograms (see
    /// `record_report`), prints it with `print`, then the line that says where it was
    /// recorded.
    pub fn record_and_print<R: serde::Serialize>(
        &mut self,
        recorder: &mut Recorder,
        kind: &str,
        report: &R,
        outcome: String,
        print: fn(&R),
    ) {
        let recorded = record_report(recorder, kind, report, outcome, &mut self.histograms);
        print(report);
        if let Some(line) = recorded {
            println!("{line}");
        }
    }
}

impl TrialRunner for Terminal {
    type Error = Failure;

    fn run(&mut self, trial: TrialRun) -> Result<(Scenario, strobe_control::RunReport), Failure> {
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
