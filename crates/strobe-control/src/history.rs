//! Runs as the run history records them: a finished run's [`RunRecord`] from its scenario,
//! report and results (histograms encoded, summary over its flows), a methodology's from its
//! report, and [`Recorder`], the database a front end opened before the run.

use std::path::{Path, PathBuf};

use strobe_engine::RunReport;
use strobe_model::Scenario;

use crate::results::Results;

// The history database itself, for the front ends' `runs` commands and API.
pub use strobe_history::*;

/// What a record says about where a run came from, beyond what it measured.
#[derive(Clone, Debug)]
pub struct Provenance {
    /// `gen`, `trains`, `rfc2544`, `y1564`, `otg` (traffic through `strobe serve`).
    pub kind: String,
    /// `cli` or `api`.
    pub origin: String,
    /// The command line, or the API call.
    pub command: String,
    pub started_unix_ns: i64,
    pub strobe_version: String,
    pub strobe_commit: Option<String>,
}

impl Provenance {
    /// A run started now from the command line `args` (the program name first).
    pub fn command_line(kind: &str, args: impl IntoIterator<Item = String>, build: &Build) -> Self {
        Provenance {
            kind: kind.into(),
            origin: "cli".into(),
            command: shell_words(args),
            started_unix_ns: strobe_history::now_unix_ns(),
            strobe_version: build.version.clone(),
            strobe_commit: build.commit.clone(),
        }
    }
}

/// The strobe that ran: its version and the commit it was built from (when built from a
/// git checkout).
#[derive(Clone, Debug, Default)]
pub struct Build {
    pub version: String,
    pub commit: Option<String>,
}

/// A finished engine run's record: the results' JSON, every flow's histogram, where its
/// stamps were taken and the calibration that corrected them.
pub fn run_record(
    provenance: &Provenance,
    outcome: &str,
    config: serde_json::Value,
    scenario: &Scenario,
    report: &RunReport,
    results: &Results,
) -> RunRecord {
    let histograms = flow_histograms(scenario, report, "");
    let sources: serde_json::Map<String, serde_json::Value> = results
        .flows
        .iter()
        .filter_map(|f| {
            let l = f.latency.as_ref()?;
            Some((f.name.clone(), serde_json::to_value(&l.timestamps).ok()?))
        })
        .collect();
    let calibration = results
        .flows
        .iter()
        .find_map(|f| f.latency.as_ref()?.calibration.as_ref())
        .and_then(|c| serde_json::to_value(c).ok());
    RunRecord {
        summary: summary(results),
        results: serde_json::to_value(results).unwrap_or_default(),
        timestamp_sources: sources.into(),
        calibration,
        ..method_record(
            provenance,
            outcome,
            config,
            serde_json::Value::Null,
            Summary::default(),
            histograms,
        )
    }
}

/// Every flow's latency histogram of a finished engine run (flows that measured none are
/// left out), each named `prefix` and the flow's name.
fn flow_histograms(scenario: &Scenario, report: &RunReport, prefix: &str) -> Vec<FlowHistogram> {
    scenario
        .flows
        .iter()
        .filter_map(|f| {
            let latency = report
                .rx_flows
                .get(f.id as usize)?
                .as_ref()?
                .latency
                .as_ref()?;
            let hist = latency.histogram();
            (!hist.is_empty()).then(|| FlowHistogram {
                flow: format!("{prefix}{}", f.name),
                encoded: strobe_history::encode_histogram(hist),
            })
        })
        .collect()
}

/// What a methodology's record keeps of its trials: when the method started, what its trials
/// sent, received and lost together and the latency of all their frames
/// ([`TrialHistograms::summary`]), and each trial's latency histograms, one per trial and
/// flow, named `trial N: LABEL: FLOW` (N counts the trials that measured, from 1; learning
/// runs are not trials), so that `strobe runs compare --flow` can set trials side by side.
pub struct TrialHistograms {
    started_unix_ns: i64,
    trials: usize,
    histograms: Vec<FlowHistogram>,
    summary: Summary,
    /// Every trial's frames' latency together (the summary's percentiles).
    latency: Option<hdrhistogram::Histogram<u64>>,
}

impl Default for TrialHistograms {
    /// Trials of a method that starts now.
    fn default() -> Self {
        TrialHistograms {
            started_unix_ns: strobe_history::now_unix_ns(),
            trials: 0,
            histograms: Vec::new(),
            summary: Summary::default(),
            latency: None,
        }
    }
}

impl TrialHistograms {
    /// Keeps the histograms of one finished trial, named by what it was, and adds what it
    /// sent, received, lost and measured to the method's totals.
    pub fn add(&mut self, label: &str, scenario: &Scenario, report: &RunReport) {
        self.trials += 1;
        let prefix = if label.is_empty() {
            format!("trial {}: ", self.trials)
        } else {
            format!("trial {}: {label}: ", self.trials)
        };
        self.histograms
            .extend(flow_histograms(scenario, report, &prefix));
        let trial = summary(&Results::new(scenario, report, None));
        let add = |total: &mut Option<u64>, v: Option<u64>| {
            if let Some(v) = v {
                *total = Some(total.unwrap_or(0) + v);
            }
        };
        add(&mut self.summary.frames_tx, trial.frames_tx);
        add(&mut self.summary.frames_rx, trial.frames_rx);
        add(&mut self.summary.frames_lost, trial.frames_lost);
        self.summary.flows = self.summary.flows.max(trial.flows);
        for rx in report.rx_flows.iter().flatten() {
            let Some(latency) = rx.latency.as_ref() else {
                continue;
            };
            let hist = latency.histogram();
            if hist.is_empty() {
                continue;
            }
            match &mut self.latency {
                Some(all) => {
                    // Both 1 ns .. 100 s at 3 digits (the engine's bounds): never refused.
                    let _ = all.add(hist);
                }
                None => self.latency = Some(hist.clone()),
            }
        }
    }

    /// When the method started (when these trials were set up).
    pub fn started_unix_ns(&self) -> i64 {
        self.started_unix_ns
    }

    /// The method's totals over its trials: frames sent, received and lost summed, the
    /// percentiles of every trial's frames together (no rate: trials ran at many).
    pub fn summary(&self) -> Summary {
        let mut summary = self.summary.clone();
        if let Some(h) = &self.latency {
            summary.p50_ns = Some(h.value_at_quantile(0.5) as f64);
            summary.p99_ns = Some(h.value_at_quantile(0.99) as f64);
            summary.p99_9999_ns = Some(h.value_at_quantile(0.999999) as f64);
            summary.max_ns = Some(h.max() as f64);
        }
        summary
    }

    /// The histograms kept, in the trials' order.
    pub fn take(&mut self) -> Vec<FlowHistogram> {
        std::mem::take(&mut self.histograms)
    }
}

/// A methodology's record (RFC 2544, Y.1564, a convoy sweep): its options and report, with
/// whatever summary it has, and its trials' histograms ([`TrialHistograms`]).
pub fn method_record(
    provenance: &Provenance,
    outcome: &str,
    config: serde_json::Value,
    results: serde_json::Value,
    summary: Summary,
    histograms: Vec<FlowHistogram>,
) -> RunRecord {
    let (host, user) = strobe_history::host_and_user();
    RunRecord {
        kind: provenance.kind.clone(),
        origin: provenance.origin.clone(),
        command: provenance.command.clone(),
        started_unix_ns: provenance.started_unix_ns,
        finished_unix_ns: strobe_history::now_unix_ns(),
        outcome: outcome.into(),
        host,
        user,
        strobe_version: provenance.strobe_version.clone(),
        strobe_commit: provenance.strobe_commit.clone(),
        label: None,
        summary,
        config,
        results,
        timestamp_sources: serde_json::Value::Object(Default::default()),
        calibration: None,
        histograms,
    }
}

/// Totals over a run's flows, and the latency of its slowest flow at each percentile.
pub fn summary(results: &Results) -> Summary {
    let sum = |get: fn(&crate::results::FlowResult) -> Option<u64>| {
        results
            .flows
            .iter()
            .filter_map(get)
            .fold(None, |acc: Option<u64>, v| Some(acc.unwrap_or(0) + v))
    };
    let worst = |get: fn(&strobe_analyze::latency::LatencyStats) -> f64| {
        results
            .flows
            .iter()
            .filter_map(|f| f.latency.as_ref())
            .map(|l| get(&l.raw))
            .fold(None, |acc: Option<f64>, v| {
                Some(acc.map_or(v, |a| a.max(v)))
            })
    };
    let tx_pps = results
        .ports
        .iter()
        .filter(|p| p.elapsed_ns > 0 && p.frames_tx > 0)
        .map(|p| p.frames_tx as f64 * 1e9 / p.elapsed_ns as f64)
        .fold(None, |acc: Option<f64>, v| Some(acc.unwrap_or(0.0) + v));
    Summary {
        flows: Some(results.flows.len() as u64),
        frames_tx: sum(|f| f.frames_tx),
        frames_rx: sum(|f| f.frames_rx_unique.or(f.frames_rx)),
        frames_lost: sum(|f| f.loss),
        tx_pps,
        p50_ns: worst(|s| s.p50_ns),
        p99_ns: worst(|s| s.p99_ns),
        p99_9999_ns: worst(|s| s.p99_9999_ns),
        max_ns: worst(|s| s.max_ns),
    }
}

/// The database a front end records its runs in, opened before traffic starts, so a bad
/// `--db` fails before anything is sent.
pub struct Recorder {
    history: Option<History>,
}

impl Recorder {
    /// Opens the history `given` names (else `STROBE_DB`, else the default location).
    /// A path the user named that cannot be opened is an error; the default location is
    /// only a warning (returned) and nothing is recorded.
    pub fn open(given: Option<&Path>) -> Result<(Recorder, Option<String>), HistoryError> {
        let named = given.is_some() || std::env::var_os(strobe_history::DB_ENV).is_some();
        let Some(path) = chosen_path(given) else {
            return Ok((Recorder { history: None }, None));
        };
        match History::open(&path) {
            Ok(history) => Ok((
                Recorder {
                    history: Some(history),
                },
                None,
            )),
            Err(e) if named => Err(e),
            Err(e) => Ok((
                Recorder { history: None },
                Some(format!(
                    "{e}; this run is not recorded (give --db PATH, or --db none to record \
                     nothing)"
                )),
            )),
        }
    }

    /// The database's path, when recording.
    pub fn path(&self) -> Option<&Path> {
        self.history.as_ref().map(History::path)
    }

    /// A recorder that records nothing.
    pub fn off() -> Recorder {
        Recorder { history: None }
    }

    /// Records `run`; the run's id and the database's path, or `None` when recording is off.
    pub fn record(&mut self, run: &RunRecord) -> Result<Option<(i64, PathBuf)>, HistoryError> {
        match &mut self.history {
            None => Ok(None),
            Some(h) => Ok(Some((h.record(run)?, h.path().to_owned()))),
        }
    }
}

/// Arguments joined as a shell would need them typed, quoting those with special characters.
pub fn shell_words(args: impl IntoIterator<Item = String>) -> String {
    args.into_iter()
        .map(|a| {
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:=@,+%".contains(c));
            if plain {
                a
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_lines_are_quoted_where_a_shell_needs_it() {
        let args = [
            "strobe",
            "gen",
            "--udp",
            "198.18.0.1:1-198.18.1.1:2",
            "it's here",
            "",
        ];
        assert_eq!(
            shell_words(args.map(String::from)),
            "strobe gen --udp 198.18.0.1:1-198.18.1.1:2 'it'\\''s here' ''"
        );
    }
}
