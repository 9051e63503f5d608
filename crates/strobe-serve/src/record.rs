//! Runs started through the server, recorded in the run history: a traffic run by its
//! watcher thread once it is over (so a run the server's shutdown stops is recorded too), a
//! methodology once its report is in. Never on a data-path thread, never in a request's way:
//! a history that cannot be written is a logged warning.

use std::path::PathBuf;

use serde_json::Value;
use strobe_control::history::{self, Build, Provenance};
use strobe_control::history::{History, Recorder, RunRecord};
use strobe_control::RunEnd;

/// Where the server records its runs, and what strobe it is.
#[derive(Clone, Debug)]
pub struct RunHistory {
    pub path: PathBuf,
    pub build: Build,
}

impl RunHistory {
    fn provenance(&self, kind: &str, command: String) -> Provenance {
        Provenance {
            kind: kind.into(),
            origin: "api".into(),
            command,
            started_unix_ns: strobe_control::history::now_unix_ns(),
            strobe_version: self.build.version.clone(),
            strobe_commit: self.build.commit.clone(),
        }
    }

    fn keep(&self, record: &RunRecord) {
        match History::open(&self.path).and_then(|mut h| h.record(record)) {
            Ok(id) => tracing::info!("recorded as run {id} in {}", self.path.display()),
            Err(e) => tracing::warn!("a run is not recorded: {e}"),
        }
    }
}

/// What the watcher of a traffic run started by `command` with `config` does once the run is
/// over: record it.
pub fn after_run(
    history: Option<RunHistory>,
    config: Option<Value>,
    command: String,
) -> impl FnOnce(RunEnd<'_>) + Send + 'static {
    let provenance = history.as_ref().map(|h| h.provenance("otg", command));
    move |end: RunEnd<'_>| {
        let (Some(history), Some(provenance)) = (history, provenance) else {
            return;
        };
        let config = config.unwrap_or(Value::Null);
        let record = match (end.report, end.results) {
            (Ok(report), Some(results)) => {
                // Stopped: a stop request (or the server's shutdown) cut a port's schedule
                // short. A stop after every frame had left (snappi's usual "wait until
                // stopped, then stop") only ends the drain: the run completed.
                let cut_short = end.stopped && results.ports.iter().any(|p| p.stopped_early);
                let outcome = match (cut_short, results.failures.first()) {
                    (_, Some(f)) => format!("failed: {f}"),
                    (true, None) => "stopped".to_owned(),
                    (false, None) => "completed".to_owned(),
                };
                history::run_record(&provenance, &outcome, config, end.scenario, report, results)
            }
            (Err(e), _) => history::method_record(
                &provenance,
                &format!("failed: {e}"),
                config,
                Value::Null,
                Default::default(),
                Vec::new(),
            ),
            (Ok(_), None) => return,
        };
        history.keep(&record);
    }
}

/// Records a methodology run through the server: its request and its report (or why it
/// failed), with what its trials sent, lost and measured; `stopped`: a stop request or the
/// shutdown ended it early.
pub fn method(
    history: Option<&RunHistory>,
    kind: &str,
    request: Value,
    started_unix_ns: i64,
    report: Result<&Value, &str>,
    stopped: bool,
    trials: &mut history::TrialHistograms,
) {
    let Some(history) = history else {
        return;
    };
    let mut provenance = history.provenance(kind, format!("POST /strobe/{kind}"));
    provenance.started_unix_ns = started_unix_ns;
    let (outcome, results) = match report {
        Ok(report) if stopped => ("stopped".to_owned(), report.clone()),
        Ok(report) => ("completed".to_owned(), report.clone()),
        Err(e) => (format!("failed: {e}"), Value::Null),
    };
    history.keep(&history::method_record(
        &provenance,
        &outcome,
        request,
        results,
        trials.summary(),
        trials.take(),
    ));
}

/// Where a study through the server records each of its runs (kind `study`, the API call as
/// its command), and a warning when the history cannot be opened (then nothing is).
pub fn study(history: Option<&RunHistory>) -> (Recorder, Provenance, Option<String>) {
    let command = "POST /strobe/study".to_string();
    let Some(history) = history else {
        let provenance = Provenance {
            kind: "study".into(),
            origin: "api".into(),
            command,
            started_unix_ns: strobe_control::history::now_unix_ns(),
            strobe_version: env!("CARGO_PKG_VERSION").into(),
            strobe_commit: None,
        };
        return (Recorder::off(), provenance, None);
    };
    let provenance = history.provenance("study", command);
    match Recorder::open(Some(&history.path)) {
        Ok((recorder, _)) => (recorder, provenance, None),
        Err(e) => (
            Recorder::off(),
            provenance,
            Some(format!("the study's runs are not recorded: {e}")),
        ),
    }
}
