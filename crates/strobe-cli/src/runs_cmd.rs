//! `strobe runs`: the run history (list, show, compare, export, import, label, delete), and
//! the `--db` option with which every measuring command records its runs there.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use strobe_control::history::{Build, Provenance, Recorder};
use strobe_control::history::{Filter, History, RunRecord, RunRow};
use strobe_control::Results;

use crate::display::{print_latency, print_summary};
use crate::failure::Failure;
use crate::outputs::write_file;

/// Where runs are recorded; flattened into every command that measures.
#[derive(Args, Clone, Debug, Default)]
pub struct HistoryArgs {
    /// The run history database every run is recorded in (default
    /// ~/.local/share/strobe/runs.db; `none` records nothing). See `strobe runs`.
    #[arg(
        long,
        value_name = "PATH",
        env = "STROBE_DB",
        help_heading = "Run history"
    )]
    pub db: Option<PathBuf>,
}

impl HistoryArgs {
    /// The database, opened before anything is sent: a `--db` that cannot be opened is bad
    /// input; a default location that cannot is a warning, and the run is not recorded.
    pub fn recorder(&self) -> Result<Recorder, Failure> {
        let (recorder, warning) = Recorder::open(self.db.as_deref()).map_err(|e| {
            Failure::BadInput(format!(
                "{e}; give --db a file in a folder you can write to, or --db none to record \
                 nothing (nothing was sent)"
            ))
        })?;
        if let Some(w) = warning {
            eprintln!("warning: {w}");
        }
        Ok(recorder)
    }
}

/// This strobe's version and commit.
pub fn build() -> Build {
    Build {
        version: env!("CARGO_PKG_VERSION").into(),
        commit: option_env!("STROBE_COMMIT").map(String::from),
    }
}

/// Where this process's run came from: the command line as typed.
pub fn provenance(kind: &str) -> Provenance {
    Provenance::command_line(kind, std::env::args(), &build())
}

/// Records `run`; returns the line that says where, for the end of the command's output. A
/// failure to record is a warning (the run's results are on the terminal and in its files).
#[must_use = "print the line where the run was recorded"]
pub fn keep(recorder: &mut Recorder, run: &RunRecord) -> Option<String> {
    match recorder.record(run) {
        Ok(Some((id, path))) => Some(format!(
            "recorded as run {id} in {} (strobe runs show {id})",
            path.display()
        )),
        Ok(None) => None,
        Err(e) => {
            eprintln!("warning: this run is not recorded: {e}");
            None
        }
    }
}

/// How a run that ended after `signal` (if any), with these failures, is recorded.
pub fn outcome(signal: Option<i32>, failures: &[impl std::fmt::Display]) -> String {
    match (signal, failures.first()) {
        (Some(s), _) => format!("stopped by {}", crate::signals::name(s)),
        (None, Some(f)) => format!("failed: {f}"),
        (None, None) => "completed".into(),
    }
}

#[derive(Args)]
pub struct RunsArgs {
    #[command(subcommand)]
    command: RunsCommand,
    #[command(flatten)]
    history: HistoryArgs,
}

#[derive(Subcommand)]
enum RunsCommand {
    /// The recorded runs, oldest first: id, start, kind, frames, loss, the slowest flow's
    /// latency, the command.
    List(ListArgs),
    /// One run: where it came from and what it measured.
    Show {
        id: i64,
        /// The whole record as JSON (config, results, histograms in base64) to FILE; `-` or
        /// no FILE: to the standard output.
        #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
        json: Option<PathBuf>,
    },
    /// Runs' latency side by side: a percentile table, and their CCDFs on one figure.
    Compare(CompareArgs),
    /// A run as a JSON file that `strobe runs import` reads (on another machine too).
    Export {
        id: i64,
        /// The file to write (default: standard output).
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Runs from files `strobe runs export` wrote; each gets a new id.
    Import {
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
    /// Attach a note to a run ("irqbalance off"), shown in lists and comparisons; without
    /// TEXT, remove it.
    Label { id: i64, text: Option<String> },
    /// Remove runs from the history.
    Delete {
        #[arg(required = true)]
        ids: Vec<i64>,
    },
}

#[derive(Args)]
struct ListArgs {
    /// Only runs of this kind: gen, trains, rfc2544, y1564, study (a run of `strobe study`),
    /// otg (traffic started through strobe serve).
    #[arg(long)]
    kind: Option<String>,
    /// Only runs started since a time (2026-11-27, 2026-11-27T08:00:00Z, UTC) or an age
    /// (2h, 7days).
    #[arg(long, value_name = "WHEN")]
    since: Option<String>,
    /// Only runs whose command line or label contains TEXT.
    #[arg(long, value_name = "TEXT")]
    grep: Option<String>,
    /// Show the newest N runs (0: all).
    #[arg(long, default_value_t = 50, value_name = "N")]
    limit: u64,
    /// The runs as JSON (`runs`: one object per run) to FILE; `-` or no FILE: to the
    /// standard output, the table then going to stderr.
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    json: Option<PathBuf>,
}

#[derive(Args)]
struct CompareArgs {
    #[arg(required = true, num_args = 1.., value_name = "ID")]
    ids: Vec<i64>,
    /// Only this flow of each run (default: every flow with latency).
    #[arg(long, value_name = "NAME")]
    flow: Option<String>,
    /// A self-contained HTML page: the runs, the table and the overlaid CCDFs.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// The overlaid CCDFs alone, as SVG.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
}

pub fn run(args: RunsArgs) -> Result<(), Failure> {
    let Some(path) = strobe_control::history::chosen_path(args.history.db.as_deref()) else {
        return Err(Failure::BadInput(
            "--db none: there is no history to read; give the database with --db PATH".into(),
        ));
    };
    let mut db = History::open(&path).map_err(|e| Failure::Runtime(e.to_string()))?;
    let failed = |e: strobe_control::history::HistoryError| match e {
        e @ strobe_control::history::HistoryError::NoRun(_) => Failure::BadInput(e.to_string()),
        e @ strobe_control::history::HistoryError::BadExport(_) => Failure::BadInput(e.to_string()),
        e => Failure::Runtime(e.to_string()),
    };
    match args.command {
        RunsCommand::List(list) => {
            let since = list
                .since
                .as_deref()
                .map(|s| {
                    strobe_control::history::parse_since(s, strobe_control::history::now_unix_ns())
                })
                .transpose()
                .map_err(Failure::BadInput)?;
            let rows = db
                .list(&Filter {
                    kind: list.kind,
                    text: list.grep,
                    since_unix_ns: since,
                    limit: (list.limit > 0).then_some(list.limit),
                })
                .map_err(failed)?;
            if let Some(out) = &list.json {
                let runs = strobe_control::results::RunsList { runs: rows.clone() };
                let text = crate::outputs::document("runs-list", &runs);
                crate::outputs::write_file(out, text.as_bytes())?;
            }
            print_rows(&rows, &path, db.count().map_err(failed)?);
            Ok(())
        }
        RunsCommand::Show { id, json } => {
            let run = db.get(id).map_err(failed)?;
            if let Some(out) = &json {
                let shown = strobe_control::results::RunShow { run: run.clone() };
                let text = crate::outputs::document("runs-show", &shown);
                crate::outputs::write_file(out, text.as_bytes())?;
            }
            show(&run);
            Ok(())
        }
        RunsCommand::Compare(c) => compare(&db, c),
        RunsCommand::Export { id, output } => {
            let text = strobe_control::history::export(&db.get(id).map_err(failed)?);
            match output {
                Some(path) => write_file(&path, text.as_bytes()),
                None => {
                    println!("{text}");
                    Ok(())
                }
            }
        }
        RunsCommand::Import { files } => {
            // Every file is read and checked before any is stored: all or nothing.
            let mut records = Vec::new();
            for file in &files {
                let text = std::fs::read_to_string(file).map_err(|e| {
                    Failure::BadInput(format!("{}: cannot be read: {e}", file.display()))
                })?;
                let record = strobe_control::history::import(&text)
                    .map_err(|e| Failure::BadInput(format!("{}: {e}", file.display())))?;
                records.push(record);
            }
            let ids = db.record_all(&records).map_err(failed)?;
            for (file, id) in files.iter().zip(ids) {
                println!("{}: imported as run {id}", file.display());
            }
            Ok(())
        }
        RunsCommand::Label { id, text } => db
            .set_label(id, text.as_deref().filter(|t| !t.is_empty()))
            .map_err(failed),
        RunsCommand::Delete { ids } => {
            for id in ids {
                db.delete(id).map_err(failed)?;
                println!("run {id} deleted");
            }
            Ok(())
        }
    }
}

fn print_rows(rows: &[RunRow], path: &std::path::Path, total: u64) {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>6}  {:<20} {:<8} {:>12} {:>12} {:>9} {:>10} {:>10}  command",
        "id", "started (UTC)", "kind", "frames tx", "frames rx", "loss %", "p50 µs", "p99 µs"
    );
    let cell = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_else(|| "-".into());
    let us = |v: Option<f64>| {
        v.map(|v| format!("{:.3}", v / 1e3))
            .unwrap_or_else(|| "-".into())
    };
    for r in rows {
        let s = &r.summary;
        let loss = match (s.frames_lost, s.frames_tx) {
            (Some(lost), Some(tx)) if tx > 0 => format!("{:.4}", lost as f64 * 100.0 / tx as f64),
            _ => "-".into(),
        };
        let label = r
            .label
            .as_deref()
            .map(|l| format!("[{l}] "))
            .unwrap_or_default();
        let outcome = if r.outcome == "completed" {
            String::new()
        } else {
            format!(" ({})", r.outcome)
        };
        let _ = writeln!(
            out,
            "{:>6}  {:<20} {:<8} {:>12} {:>12} {:>9} {:>10} {:>10}  {label}{}{outcome}",
            r.id,
            r.started(),
            r.kind,
            cell(s.frames_tx),
            cell(s.frames_rx),
            loss,
            us(s.p50_ns),
            us(s.p99_ns),
            r.command
        );
    }
    let _ = writeln!(
        out,
        "{} of {total} runs in {} (latency: the slowest flow's)",
        rows.len(),
        path.display()
    );
    print!("{out}");
}

fn show(run: &strobe_control::history::StoredRun) {
    let r = &run.record;
    // Imported records are untrusted: no arithmetic that can overflow.
    let seconds = r.finished_unix_ns.saturating_sub(r.started_unix_ns).max(0) as f64 / 1e9;
    println!("run {}: {} ({}), {}", run.id, r.kind, r.origin, r.outcome);
    if let Some(label) = &r.label {
        println!("  label:    {label}");
    }
    println!(
        "  started:  {} UTC, took {seconds:.1} s",
        strobe_control::history::rfc3339(r.started_unix_ns)
    );
    println!("  command:  {}", r.command);
    println!("  host:     {} (user {})", r.host, r.user);
    println!(
        "  strobe:   {}{}",
        r.strobe_version,
        r.strobe_commit
            .as_deref()
            .map(|c| format!(" (commit {c})"))
            .unwrap_or_default()
    );
    if let Some(c) = &r.calibration {
        println!("  calibration: {c}");
    }
    // An engine run's results print as the run printed them; a methodology's report is in
    // its JSON.
    match serde_json::from_value::<Results>(r.results.clone()) {
        Ok(results) => {
            print_summary(&results);
            print_latency(&results);
        }
        Err(_) => println!(
            "  results:  its {} report (strobe runs show {} --json)",
            r.kind, run.id
        ),
    }
    if !r.histograms.is_empty() {
        let flows: Vec<&str> = r.histograms.iter().map(|h| h.flow.as_str()).collect();
        println!(
            "  latency histograms of {} (strobe runs compare {} …)",
            flows.join(", "),
            run.id
        );
    }
}

fn compare(db: &History, args: CompareArgs) -> Result<(), Failure> {
    for (flag, path) in [("--html", &args.html), ("--svg", &args.svg)] {
        if let Some(path) = path {
            crate::outputs::check_writable(flag, path)?;
        }
    }
    let runs = args
        .ids
        .iter()
        .map(|&id| db.get(id))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Failure::BadInput(e.to_string()))?;
    let comparison = strobe_control::history::compare::compare(&runs, args.flow.as_deref())
        .map_err(Failure::BadInput)?;
    let mut written = Vec::new();
    if let Some(path) = &args.html {
        write_file(path, comparison.html().as_bytes())?;
        written.push(format!(
            "the report with the overlaid CCDFs: {}",
            path.display()
        ));
    }
    if let Some(path) = &args.svg {
        write_file(path, comparison.svg().as_bytes())?;
        written.push(format!("the CCDF chart: {}", path.display()));
    }
    for line in &comparison.runs {
        println!("{line}");
    }
    print!("{}", comparison.table());
    for line in written {
        println!("wrote {line}");
    }
    Ok(())
}

/// Records an engine run in the history (how it ended from the signal that stopped it and
/// its failures); returns [`keep`]'s line.
#[must_use = "print the line where the run was recorded"]
pub fn record_engine_run(
    recorder: &mut Recorder,
    provenance: &Provenance,
    signal: Option<i32>,
    config: serde_json::Value,
    scenario: &strobe_control::model::Scenario,
    report: &strobe_control::RunReport,
    results: &Results,
) -> Option<String> {
    let record = strobe_control::history::run_record(
        provenance,
        &outcome(signal, &results.failures),
        config,
        scenario,
        report,
        results,
    );
    keep(recorder, &record)
}
