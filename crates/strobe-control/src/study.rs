//! The forwarder study (`strobe study forwarders`), after the Killer-Microsecond study of
//! software forwarders' tail latency: the same loads, constant-rate and Poisson at a few
//! rates, through each of several lab DUTs in turn, every run recorded in the history with
//! its DUT in its label, and one report setting the DUTs side by side per load: their
//! latency CCDFs overlaid and a percentile table.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use strobe_analyze::latency::LatencyStats;
use strobe_history::compare::{escape, page_start, Comparison, Series};
use strobe_lab::{Dut, LabConfig};
use strobe_model::DeviceUnderTest;

use crate::history::{run_record, Provenance, Recorder};
use crate::plan::{prepare, PlanOptions};
use crate::results::Results;
use crate::source::FileResources;
use crate::ControlError;

/// The lab prefix the study builds its labs under unless told: not the user's own lab.
pub const STUDY_LAB_PREFIX: &str = "strobe-st";

/// The arrival process of a load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Arrivals {
    /// Frames evenly spaced at the rate.
    Constant,
    /// Exponential gaps of the rate's mean (seeded, so every DUT gets the same gaps).
    Poisson,
}

impl Arrivals {
    pub fn name(self) -> &'static str {
        match self {
            Arrivals::Constant => "constant",
            Arrivals::Poisson => "poisson",
        }
    }
}

impl std::str::FromStr for Arrivals {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "constant" | "cbr" => Ok(Arrivals::Constant),
            "poisson" => Ok(Arrivals::Poisson),
            other => Err(format!(
                "`{other}` is no load: the study knows constant and poisson"
            )),
        }
    }
}

/// The study as a user asks for it, in words: the command line's options, the server's
/// request body (`POST /strobe/study`); [`StudySpec::request`] reads it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct StudySpec {
    /// The DUTs to compare, as `strobe lab up --dut` takes them, e.g. `router`, `xdp`,
    /// `testpmd@1`, `nft:100`, `ovs`.
    pub duts: Vec<String>,
    /// The arrival processes: `constant`, `poisson`.
    pub loads: Vec<String>,
    /// The loads' rates in packets per second, e.g. `20kpps`.
    pub rates: Vec<String>,
    /// Frames per run.
    pub frames: u64,
    /// Frame size in bytes with the FCS.
    pub size: u32,
    /// The prefix of the labs the study builds one after the other and removes at its end.
    pub lab: String,
}

impl Default for StudySpec {
    fn default() -> Self {
        StudySpec {
            duts: ["router", "xdp", "testpmd"].map(String::from).to_vec(),
            loads: ["constant", "poisson"].map(String::from).to_vec(),
            rates: ["20kpps", "50kpps"].map(String::from).to_vec(),
            frames: 200_000,
            size: 64,
            lab: STUDY_LAB_PREFIX.to_string(),
        }
    }
}

impl StudySpec {
    /// The study these words ask for, or what in them is wrong (named as the option or
    /// field: `--duts`/`duts` …); [`StudyRequest::check`] is left to the caller.
    pub fn request(&self) -> Result<StudyRequest, ControlError> {
        let bad = |m: String| ControlError::BadInput(m);
        let duts = self
            .duts
            .iter()
            .map(|d| {
                d.parse::<Dut>()
                    .map_err(|e| bad(format!("--duts {d}: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let arrivals = self
            .loads
            .iter()
            .map(|l| {
                l.parse::<Arrivals>()
                    .map_err(|e| bad(format!("--loads: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let rates_pps = self
            .rates
            .iter()
            .map(|r| match strobe_timing::parse_rate(r) {
                Ok(strobe_timing::Rate::Pps(pps)) if pps >= 1.0 && pps.is_finite() => {
                    Ok(pps.round() as u64)
                }
                Ok(strobe_timing::Rate::Pps(_)) => Err(bad(format!(
                    "--rates {r}: the study's rates are at least 1 packet per second"
                ))),
                Ok(_) => Err(bad(format!(
                    "--rates {r}: give packets per second (e.g. 20kpps): the study sets frame \
                     rates, not bit rates"
                ))),
                Err(e) => Err(bad(format!("--rates {r}: {e}"))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(StudyRequest {
            duts,
            arrivals,
            rates_pps,
            frames: self.frames,
            size: self.size,
            lab_prefix: self.lab.clone(),
        })
    }
}

/// What the study runs: every load through every DUT.
#[derive(Clone, Debug)]
pub struct StudyRequest {
    pub duts: Vec<Dut>,
    pub arrivals: Vec<Arrivals>,
    /// Frames per second of each load.
    pub rates_pps: Vec<u64>,
    /// Frames per run.
    pub frames: u64,
    /// Frame size with FCS, bytes.
    pub size: u32,
    /// The prefix of the labs the study builds (and removes at its end).
    pub lab_prefix: String,
}

impl StudyRequest {
    /// Refuses a study that cannot run, naming what to change.
    pub fn check(&self) -> Result<(), ControlError> {
        let bad = |m: &str| Err(ControlError::BadInput(m.to_string()));
        if self.duts.is_empty() {
            return bad("the study needs at least one DUT (--duts router,xdp,testpmd)");
        }
        if self.arrivals.is_empty() {
            return bad("the study needs at least one load (--loads constant,poisson)");
        }
        if self.rates_pps.is_empty() || self.rates_pps.contains(&0) {
            return bad("the study needs rates above 0 (--rates 20kpps,50kpps)");
        }
        if self.frames == 0 {
            return bad("each run needs at least one frame (--frames)");
        }
        if !(64..=1518).contains(&self.size) {
            return bad("the frame size must be 64 to 1518 bytes (--size)");
        }
        let mut names: Vec<String> = self.duts.iter().map(Dut::to_string).collect();
        names.sort();
        names.dedup();
        if names.len() < self.duts.len() {
            return bad("a DUT is named twice (--duts): each is compared once");
        }
        let (mut rates, mut loads) = (self.rates_pps.clone(), self.arrivals.clone());
        rates.sort_unstable();
        rates.dedup();
        loads.sort_by_key(|a| a.name());
        loads.dedup();
        if rates.len() < self.rates_pps.len() || loads.len() < self.arrivals.len() {
            return bad("a rate or a load is named twice (--rates, --loads)");
        }
        for dut in &self.duts {
            dut.validate()
                .map_err(|e| ControlError::BadInput(format!("--duts: {e}")))?;
            if let Some(missing) = dut.missing_software() {
                return Err(ControlError::BadInput(format!(
                    "--duts names {dut}, but {missing}"
                )));
            }
        }
        Ok(())
    }

    /// How many runs the study makes.
    pub fn runs(&self) -> usize {
        self.duts.len() * self.arrivals.len() * self.rates_pps.len()
    }

    /// The one-flow scenario of a load: lab:tx to lab:rx, UDP, MACs from the lab.
    fn scenario_text(&self, arrivals: Arrivals, rate_pps: u64) -> String {
        let timing = match arrivals {
            Arrivals::Constant => String::new(),
            Arrivals::Poisson => "timing = { pattern = \"poisson\", seed = 2026 }\n".to_string(),
        };
        format!(
            "[[ports]]\nname = \"tx\"\nlocation = \"lab:tx\"\n\n[[ports]]\nname = \"rx\"\n\
             location = \"lab:rx\"\n\n[[flows]]\nname = \"udp\"\ntx = \"tx\"\nrx = \"rx\"\n\
             size = {}\nrate = {{ pps = {rate_pps} }}\n\
             duration = {{ fixed_packets = {{ packets = {} }} }}\n{timing}\n\
             [[flows.packet]]\nethernet = {{}}\n[[flows.packet]]\n\
             ipv4 = {{ src = \"198.18.0.1\", dst = \"198.18.1.1\" }}\n[[flows.packet]]\n\
             udp = {{ src_port = 1000, dst_port = 2000 }}\n",
            self.size, self.frames
        )
    }
}

/// One run of the study: a load through a DUT.
pub struct StudyRun {
    pub dut: DeviceUnderTest,
    pub arrivals: Arrivals,
    pub rate_pps: u64,
    pub results: Results,
    /// Every frame's latency.
    pub histogram: Option<Histogram<u64>>,
    /// Its id in the run history, when recorded.
    pub history_id: Option<i64>,
    /// Its label there.
    pub label: String,
    /// As recorded: `completed`, `failed: …`, or how it was stopped.
    pub outcome: String,
    /// It sent every frame and no port failed: only such runs are compared.
    pub complete: bool,
}

/// What the study found, in the order run.
pub struct Study {
    pub runs: Vec<StudyRun>,
    /// Set when a stop cut the study short.
    pub stopped: bool,
    /// What ended the study before its last run, if anything did.
    pub failure: Option<String>,
    /// What the user should know but did not end it (a run not recorded).
    pub warnings: Vec<String>,
}

/// The study as a JSON document (`strobe study forwarders --json`, the reply of
/// `POST /strobe/study`): what ran, and every run with its DUT, load, loss and latency.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StudyReport {
    /// Which study: `forwarders`.
    pub study: String,
    /// The DUTs as asked, in the order run.
    pub duts: Vec<String>,
    pub loads: Vec<Arrivals>,
    pub rates_pps: Vec<u64>,
    /// Frames per run.
    pub frames: u64,
    /// Frame size with FCS, bytes.
    pub size: u32,
    /// The prefix of the labs the study built (removed at its end).
    pub lab: String,
    /// The runs in the order run: for each DUT, each load at each rate.
    pub runs: Vec<StudyRunReport>,
    /// A stop (signal, API stop, the server's shutdown) cut the study short.
    pub stopped: bool,
    /// What ended the study before its last run, if anything did.
    pub failure: Option<String>,
    /// What the user should know but did not end it (a run not recorded).
    pub warnings: Vec<String>,
}

/// One run of the study in its report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StudyRunReport {
    /// Its id in the run history (absent when not recorded).
    pub run_id: Option<i64>,
    /// Its label there, e.g. `study forwarders: dut=xdp load=poisson rate=20.00 kpps`.
    pub label: String,
    /// The DUT it ran through: kind, software and version, cores.
    pub device_under_test: DeviceUnderTest,
    pub load: Arrivals,
    pub rate_pps: u64,
    pub frames_tx: Option<u64>,
    pub frames_lost: Option<u64>,
    /// `completed`, `failed: …`, or how it was stopped.
    pub outcome: String,
    /// It sent every frame and no port failed: only such runs are compared.
    pub complete: bool,
    /// Every received frame's latency (absent when none was received).
    pub latency: Option<LatencyStats>,
}

/// What the study is doing, for a front end to show.
pub enum StudyEvent<'a> {
    /// A DUT's lab is being built.
    LabUp(&'a Dut),
    /// A run is about to start (1-based index of `total`).
    Starting {
        index: usize,
        total: usize,
        label: &'a str,
    },
    Finished(&'a StudyRun),
}

/// How the study's runs are stopped and told so: the flag a signal sets, the one a second
/// signal sets to end a drain at once, and the words a stopped run is recorded with.
pub struct StudyStop<'a> {
    pub stop: &'a Arc<AtomicBool>,
    pub abort_drain: Option<Arc<AtomicBool>>,
    /// E.g. `stopped by SIGINT`.
    pub describe: &'a dyn Fn() -> String,
}

/// Runs the study: for each DUT, builds its lab, runs every load through it, records each
/// run, and removes the lab at the end (also on failure). A stop cuts the run in progress
/// short (it is recorded as stopped and left out of the comparisons) and ends the study.
/// Only a request that cannot start is an `Err`; a failure on the way ends the study with
/// the runs before it kept and the failure in [`Study::failure`].
pub fn run_study(
    request: &StudyRequest,
    provenance: &Provenance,
    recorder: &mut Recorder,
    stop: &StudyStop<'_>,
    on_event: &mut dyn FnMut(StudyEvent<'_>),
) -> Result<Study, ControlError> {
    request.check()?;
    // The study removes its lab at the end: a lab already there under its prefix is
    // someone's, and stays theirs.
    match strobe_lab::status(&request.lab_prefix) {
        Ok(None) => {}
        Ok(Some(_)) | Err(strobe_lab::LabError::Broken { .. }) => {
            return Err(ControlError::BadInput(format!(
                "a lab with prefix `{0}` exists: the study builds and removes labs of its own; \
                 give --lab another prefix, or remove that lab (strobe lab down --prefix {0})",
                request.lab_prefix
            )))
        }
        Err(e) => return Err(e.into()),
    }
    let mut study = Study {
        runs: Vec::with_capacity(request.runs()),
        stopped: false,
        failure: None,
        warnings: Vec::new(),
    };
    let _lab = StudyLab(request.lab_prefix.clone());
    if let Err(e) = run_all(request, provenance, recorder, stop, on_event, &mut study) {
        study.failure = Some(e.to_string());
    }
    study.stopped = stop.stop.load(Ordering::Relaxed);
    Ok(study)
}

fn run_all(
    request: &StudyRequest,
    provenance: &Provenance,
    recorder: &mut Recorder,
    stop: &StudyStop<'_>,
    on_event: &mut dyn FnMut(StudyEvent<'_>),
    study: &mut Study,
) -> Result<(), ControlError> {
    let stopped = || stop.stop.load(Ordering::Relaxed);
    let total = request.runs();
    for dut in &request.duts {
        if stopped() {
            return Ok(());
        }
        on_event(StudyEvent::LabUp(dut));
        let lab = strobe_lab::up(&LabConfig {
            prefix: request.lab_prefix.clone(),
            receive_steering: dut.steers_receive_by_default(),
            dut: dut.clone(),
        })?;
        for &arrivals in &request.arrivals {
            for &rate_pps in &request.rates_pps {
                if stopped() {
                    return Ok(());
                }
                let label = format!(
                    "study forwarders: dut={} load={} rate={}",
                    lab.dut,
                    arrivals.name(),
                    crate::text::pps_text(rate_pps as f64)
                );
                on_event(StudyEvent::Starting {
                    index: study.runs.len() + 1,
                    total,
                    label: &label,
                });
                // Each run is recorded with its own start, not the study's.
                let provenance = Provenance {
                    started_unix_ns: crate::history::now_unix_ns(),
                    ..provenance.clone()
                };
                let text = request.scenario_text(arrivals, rate_pps);
                let scenario =
                    strobe_model::load_scenario(&text, "the study's load", &FileResources::cwd())
                        .map_err(|e| ControlError::Runtime(format!("the study's load: {e}")))?;
                let mut plan = prepare(
                    scenario,
                    &PlanOptions {
                        lab_prefix: request.lab_prefix.clone(),
                        ..PlanOptions::default()
                    },
                )?;
                plan.options.drain_abort = stop.abort_drain.clone();
                let report =
                    crate::run::run_blocking(&plan, Arc::clone(stop.stop), u64::MAX, &mut |_| {})?;
                let results = Results::new(&plan.scenario, &report, None);
                let sent = results.flows.first().and_then(|f| f.frames_tx).unwrap_or(0);
                let complete = sent == request.frames && results.failures.is_empty();
                let outcome = match results.failures.first() {
                    Some(f) => format!("failed: {f}"),
                    None if !complete => format!(
                        "{} ({sent} of {} frames sent)",
                        (stop.describe)(),
                        request.frames
                    ),
                    None => "completed".to_string(),
                };
                let histogram = report
                    .rx_flows
                    .first()
                    .and_then(|f| f.as_ref()?.latency.as_ref())
                    .map(|l| l.histogram().clone());
                let mut record = run_record(
                    &provenance,
                    &outcome,
                    serde_json::json!({ "study": "forwarders", "scenario": text }),
                    &plan.scenario,
                    &report,
                    &results,
                );
                record.label = Some(label.clone());
                // The run's figures are in the report either way: a history that cannot be
                // written costs only the record, as for every other command.
                let history_id = match recorder.record(&record) {
                    Ok(kept) => kept.map(|(id, _)| id),
                    Err(e) => {
                        study
                            .warnings
                            .push(format!("{label}: not recorded in the history: {e}"));
                        None
                    }
                };
                let run = StudyRun {
                    dut: report
                        .device_under_test
                        .clone()
                        .unwrap_or_else(|| crate::run::device_under_test(&lab)),
                    arrivals,
                    rate_pps,
                    results,
                    histogram,
                    history_id,
                    label,
                    outcome,
                    complete,
                };
                on_event(StudyEvent::Finished(&run));
                study.runs.push(run);
                if strobe_lab::process_running(&lab) == Some(false) {
                    let log = strobe_lab::process_log(&lab).unwrap_or_default();
                    return Err(ControlError::Runtime(format!(
                        "the {} DUT's process stopped during the last run (its log: {})",
                        lab.dut,
                        log.display()
                    )));
                }
            }
        }
    }
    Ok(())
}

/// Removes the study's lab when the study ends, however it ends.
struct StudyLab(String);

impl Drop for StudyLab {
    fn drop(&mut self) {
        // Best effort: an error here must not hide the study's own.
        let _ = strobe_lab::down(&self.0);
    }
}

impl Study {
    /// The study as its JSON document, for `request`.
    pub fn report(&self, request: &StudyRequest) -> StudyReport {
        StudyReport {
            study: "forwarders".into(),
            duts: request.duts.iter().map(Dut::to_string).collect(),
            loads: request.arrivals.clone(),
            rates_pps: request.rates_pps.clone(),
            frames: request.frames,
            size: request.size,
            lab: request.lab_prefix.clone(),
            runs: self
                .runs
                .iter()
                .map(|run| {
                    let flow = run.results.flows.first();
                    StudyRunReport {
                        run_id: run.history_id,
                        label: run.label.clone(),
                        device_under_test: run.dut.clone(),
                        load: run.arrivals,
                        rate_pps: run.rate_pps,
                        frames_tx: flow.and_then(|f| f.frames_tx),
                        frames_lost: flow.and_then(|f| f.loss),
                        outcome: run.outcome.clone(),
                        complete: run.complete,
                        latency: run
                            .histogram
                            .as_ref()
                            .and_then(LatencyStats::from_histogram),
                    }
                })
                .collect(),
            stopped: self.stopped,
            failure: self.failure.clone(),
            warnings: self.warnings.clone(),
        }
    }

    /// The loads in the order run, each once.
    fn loads(&self) -> Vec<(Arrivals, u64)> {
        let mut loads: Vec<(Arrivals, u64)> = Vec::new();
        for run in &self.runs {
            if !loads.contains(&(run.arrivals, run.rate_pps)) {
                loads.push((run.arrivals, run.rate_pps));
            }
        }
        loads
    }

    /// One load's runs, a DUT each, as a comparison (DUTs without latency left out).
    pub fn comparison(&self, arrivals: Arrivals, rate_pps: u64) -> Comparison {
        let mut series = Vec::new();
        let mut lines = Vec::new();
        for run in self
            .runs
            .iter()
            .filter(|r| r.arrivals == arrivals && r.rate_pps == rate_pps)
        {
            lines.push(format!(
                "{}{}: {} ({}; {}){}",
                run.history_id
                    .map(|id| format!("#{id} "))
                    .unwrap_or_default(),
                run.dut.kind,
                run.dut.name,
                run.dut.software,
                run.dut.runs_on,
                if run.complete {
                    String::new()
                } else {
                    format!(", not compared: {}", run.outcome)
                }
            ));
            // A run cut short or failed measured another load than the others.
            if !run.complete {
                continue;
            }
            let Some(hist) = &run.histogram else { continue };
            let Some(stats) = LatencyStats::from_histogram(hist) else {
                continue;
            };
            series.push(Series {
                run_id: run.history_id.unwrap_or(0),
                flow: "udp".into(),
                name: run.dut.kind.clone(),
                hist: hist.clone(),
                stats,
            });
        }
        Comparison {
            series,
            runs: lines,
        }
    }

    /// The study as text: per load, the DUTs' percentiles side by side, then each run's
    /// loss.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for (arrivals, rate) in self.loads() {
            let _ = writeln!(
                out,
                "== {} load at {}: latency in µs, every frame",
                arrivals.name(),
                crate::text::pps_text(rate as f64)
            );
            out += &self.comparison(arrivals, rate).table();
        }
        out += "runs:\n";
        for run in &self.runs {
            let f = run.results.flows.first();
            let _ = writeln!(
                out,
                "  {}{}: {} sent, {} lost",
                run.history_id
                    .map(|id| format!("#{id} "))
                    .unwrap_or_default(),
                run.label,
                f.and_then(|f| f.frames_tx).unwrap_or(0),
                f.and_then(|f| f.loss).unwrap_or(0)
            );
        }
        out
    }

    /// A self-contained page: per load, the DUTs' CCDFs overlaid and their percentiles side
    /// by side; then every run with its DUT's software and cores and its loss.
    pub fn html(&self) -> String {
        let mut out = page_start("forwarder study", "Forwarder study");
        out += "<p>The same loads through each device under test on strobe's lab; latency of \
                every frame (HdrHistogram, 3 significant digits), in µs. \"-\": too few frames \
                to resolve that percentile.</p>\n";
        for (arrivals, rate) in self.loads() {
            let c = self.comparison(arrivals, rate);
            let _ = writeln!(
                out,
                "<h2>{} load at {}</h2>",
                arrivals.name(),
                crate::text::pps_text(rate as f64)
            );
            out += &c.html_table();
            out += &c.svg();
            out += "\n";
        }
        out += "<h2>Runs</h2>\n<table><tr><th>run</th><th>DUT</th><th>software</th>\
                <th>cores</th><th>load</th><th>sent</th><th>lost</th><th>outcome</th></tr>\n";
        for run in &self.runs {
            let f = run.results.flows.first();
            let cores = if run.dut.cores.is_empty() {
                "kernel (any)".to_string()
            } else {
                run.dut
                    .cores
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            };
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} at {}</td><td>{}</td>\
                 <td>{}</td><td>{}</td></tr>",
                run.history_id
                    .map(|id| format!("#{id}"))
                    .unwrap_or_default(),
                escape(&run.dut.kind),
                escape(&run.dut.software),
                cores,
                run.arrivals.name(),
                crate::text::pps_text(run.rate_pps as f64),
                f.and_then(|f| f.frames_tx).unwrap_or(0),
                f.and_then(|f| f.loss).unwrap_or(0),
                escape(&run.outcome)
            );
        }
        out += "</table>\n</body></html>\n";
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_load_is_a_lab_flow_at_the_rate_with_its_arrivals() {
        let request = StudyRequest {
            duts: vec![Dut::Router],
            arrivals: vec![Arrivals::Poisson],
            rates_pps: vec![20_000],
            frames: 5_000,
            size: 64,
            lab_prefix: "p".into(),
        };
        request.check().unwrap();
        for arrivals in [Arrivals::Constant, Arrivals::Poisson] {
            let text = request.scenario_text(arrivals, 20_000);
            let s = strobe_model::load_scenario(&text, "t", &FileResources::cwd()).unwrap();
            assert_eq!(s.flows.len(), 1);
            let schedule = format!("{:?}", s.flows[0].schedule);
            assert!(schedule.contains("20000"), "{schedule}");
            assert_eq!(
                schedule.contains("Poisson"),
                arrivals == Arrivals::Poisson,
                "{schedule}"
            );
        }
    }

    #[test]
    fn a_study_in_words_reads_as_the_command_line_and_the_api_give_it() {
        let spec: StudySpec = serde_json::from_str(
            r#"{"duts": ["router", "testpmd@1", "nft:100"], "rates": ["20kpps", "1500"],
                "loads": ["Poisson"], "frames": 10, "lab": "sx"}"#,
        )
        .unwrap();
        let request = spec.request().unwrap();
        request.check().unwrap();
        assert_eq!(request.duts.len(), 3);
        assert_eq!(request.duts[1].to_string(), "testpmd@1");
        assert_eq!(request.rates_pps, vec![20_000, 1_500]);
        assert_eq!(request.arrivals, vec![Arrivals::Poisson]);
        assert_eq!((request.frames, request.size), (10, 64));
        assert_eq!(request.lab_prefix, "sx");
        // Fields left out take the defaults (the command line's: see study_cmd's test).
        let default: StudySpec = serde_json::from_str("{}").unwrap();
        assert_eq!(default, StudySpec::default());
        assert_eq!(default.request().unwrap().runs(), 3 * 2 * 2);
        // What is wrong is named with the option (the field of the same name).
        let spoilt = |json: &str| {
            serde_json::from_str::<StudySpec>(json)
                .map_err(|e| e.to_string())
                .and_then(|s| s.request().map_err(|e| e.to_string()))
                .unwrap_err()
        };
        assert!(spoilt(r#"{"dutz": []}"#).contains("dutz"));
        assert!(spoilt(r#"{"duts": ["toaster"]}"#).contains("--duts toaster"));
        assert!(spoilt(r#"{"loads": ["bursty"]}"#).contains("--loads"));
        assert!(spoilt(r#"{"rates": ["10mbps"]}"#).contains("not bit rates"));
        assert!(spoilt(r#"{"rates": ["0.5"]}"#).contains("at least 1 packet"));
        assert!(spoilt(r#"{"rates": ["fast"]}"#).contains("--rates fast"));
    }

    #[test]
    fn a_study_that_cannot_run_is_refused_with_the_option_to_change() {
        let ok = StudyRequest {
            duts: vec![Dut::Router],
            arrivals: vec![Arrivals::Constant],
            rates_pps: vec![1_000],
            frames: 10,
            size: 64,
            lab_prefix: "p".into(),
        };
        type Spoil = fn(&mut StudyRequest);
        let cases: [(&str, Spoil); 4] = [
            ("--duts", |r| r.duts.clear()),
            ("--loads", |r| r.arrivals.clear()),
            ("--rates", |r| r.rates_pps = vec![0]),
            ("--size", |r| r.size = 9000),
        ];
        for (flag, spoil) in cases {
            let mut r = ok.clone();
            spoil(&mut r);
            let e = r.check().unwrap_err().to_string();
            assert!(e.contains(flag), "{flag}: {e}");
        }
        assert_eq!("Poisson".parse::<Arrivals>(), Ok(Arrivals::Poisson));
        assert!("bursty".parse::<Arrivals>().is_err());
    }
}
