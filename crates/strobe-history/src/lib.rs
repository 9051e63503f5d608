//! strobe-history: every run kept in an embedded SQLite database.
//!
//! A [`RunRecord`] holds what a run was (kind, command line or API call, when, where, who,
//! the strobe version and commit, the full config) and what it measured (the results, each
//! flow's latency histogram in HdrHistogram's compressed V2 encoding, the timestamp sources
//! and the calibration used). [`History`] stores, lists, reads, exports, imports and deletes
//! them; [`compare`] puts several runs' distributions side by side.
//!
//! Recording happens after a run, never on its hot threads. Every write is one transaction
//! and the database runs in WAL mode, so a process killed mid-write leaves the runs before it
//! intact and no half-written run. The schema's version lives in SQLite's `user_version`
//! ([`schema`]); a database from a newer strobe is refused with a message, never rewritten.
#![forbid(unsafe_code)]

pub mod compare;
pub mod schema;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use rusqlite::{params, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};

/// The environment variable that names the database, like `--db`.
pub const DB_ENV: &str = "STROBE_DB";
/// The value of `--db` (or `STROBE_DB`) that records nothing.
pub const NO_DB: &str = "none";
/// How each histogram blob is encoded.
pub const HISTOGRAM_ENCODING: &str = "hdr-v2-deflate";
/// The first line of an exported run: what the file is and its format's version.
pub const EXPORT_FORMAT: &str = "strobe-run-export/1";
/// How long a writer waits for another process's transaction before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(15);

/// Why the history could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("run history {path}: {message}")]
    Open { path: String, message: String },
    #[error("run history: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("run history: no run {0} (see `strobe runs list`)")]
    NoRun(i64),
    #[error("{0}")]
    BadExport(String),
}

/// One run, as it is recorded and exported.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunRecord {
    /// What ran: `gen`, `trains`, `rfc2544`, `y1564`, `study`, `otg` (traffic through `strobe serve`).
    pub kind: String,
    /// `cli` or `api`.
    pub origin: String,
    /// The command line, or the API call that started it.
    pub command: String,
    /// Wall-clock start and end (ns since the Unix epoch).
    pub started_unix_ns: i64,
    pub finished_unix_ns: i64,
    /// `completed`, `stopped by SIGINT`, `stopped through the API`, `failed: …`.
    pub outcome: String,
    pub host: String,
    pub user: String,
    pub strobe_version: String,
    pub strobe_commit: Option<String>,
    /// A note the user attached (`strobe runs label`).
    #[serde(default)]
    pub label: Option<String>,
    pub summary: Summary,
    /// The configuration as run (scenario, OTG config, method options).
    pub config: serde_json::Value,
    /// Everything the run measured (the schema of its `--json`).
    pub results: serde_json::Value,
    /// Per flow, where the transmit and receive stamps were taken.
    pub timestamp_sources: serde_json::Value,
    /// The calibration file and offset that corrected the latency, if any.
    pub calibration: Option<serde_json::Value>,
    /// Each flow's latency over the whole run.
    pub histograms: Vec<FlowHistogram>,
}

/// The figures `strobe runs list` shows, over all flows of a run: totals, and the latency
/// of its slowest flow at each percentile.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Summary {
    pub flows: Option<u64>,
    pub frames_tx: Option<u64>,
    pub frames_rx: Option<u64>,
    pub frames_lost: Option<u64>,
    /// Frames sent per second over the run's sending time, all ports together.
    pub tx_pps: Option<f64>,
    pub p50_ns: Option<f64>,
    pub p99_ns: Option<f64>,
    pub p99_9999_ns: Option<f64>,
    pub max_ns: Option<f64>,
}

/// One flow's latency histogram, as HdrHistogram's V2 compressed encoding (the one its
/// interval logs use; base64 in exports).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FlowHistogram {
    pub flow: String,
    /// Base64.
    #[serde(with = "base64_bytes")]
    #[schemars(with = "String")]
    pub encoded: Vec<u8>,
}

impl FlowHistogram {
    /// The histogram, or `None` when the stored bytes do not decode.
    pub fn decode(&self) -> Option<hdrhistogram::Histogram<u64>> {
        strobe_analyze::latency::decode_histogram(&self.encoded)
    }
}

/// One line of `strobe runs list`: everything but the config, results and histograms.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct RunRow {
    pub id: i64,
    pub kind: String,
    pub origin: String,
    pub command: String,
    pub started_unix_ns: i64,
    pub finished_unix_ns: i64,
    pub outcome: String,
    pub host: String,
    pub label: Option<String>,
    pub summary: Summary,
}

impl RunRow {
    /// The start time as RFC 3339 UTC, to the second.
    pub fn started(&self) -> String {
        rfc3339(self.started_unix_ns)
    }
}

/// A stored run: its id and record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StoredRun {
    pub id: i64,
    #[serde(flatten)]
    pub record: RunRecord,
}

/// Which runs `list` returns.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Only this kind (`gen`, `rfc2544`, …).
    pub kind: Option<String>,
    /// Only runs whose command line or label contains this text.
    pub text: Option<String>,
    /// Only runs started at or after this time (ns since the epoch).
    pub since_unix_ns: Option<i64>,
    /// The newest this many (all when `None`), listed oldest first.
    pub limit: Option<u64>,
}

/// An open run history.
pub struct History {
    conn: Connection,
    path: PathBuf,
}

/// Another connection holds the lock SQLite needed (`SQLITE_BUSY`, `SQLITE_LOCKED`).
fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

impl History {
    /// Opens (creating it and its directory when missing) and migrates the database at
    /// `path`.
    pub fn open(path: &Path) -> Result<History, HistoryError> {
        let fail = |message: String| HistoryError::Open {
            path: path.display().to_string(),
            message,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| fail(format!("cannot create {}: {e}", dir.display())))?;
        }
        let mut conn = Connection::open(path).map_err(|e| fail(e.to_string()))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| fail(e.to_string()))?;
        // WAL: readers never block the writer, and a killed writer's partial transaction is
        // simply not in the log. NORMAL sync is durable against a crashed process (not
        // against a power cut, where the last run may go, but never the database).
        //
        // Setting the journal mode can meet another process recovering the log of a writer
        // that was killed, and SQLite answers that at once ("database is locked") instead
        // of waiting as the busy timeout does: retried within the same timeout.
        let settings = |conn: &Connection| {
            conn.pragma_update(None, "journal_mode", "WAL")
                .and_then(|()| conn.pragma_update(None, "synchronous", "NORMAL"))
                .and_then(|()| conn.pragma_update(None, "foreign_keys", "ON"))
        };
        let give_up = std::time::Instant::now() + BUSY_TIMEOUT;
        loop {
            match settings(&conn) {
                Ok(()) => break,
                Err(e) if is_busy(&e) && std::time::Instant::now() < give_up => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(fail(e.to_string())),
            }
        }
        schema::migrate(&mut conn).map_err(fail)?;
        Ok(History {
            conn,
            path: path.to_owned(),
        })
    }

    /// Where the database is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stores a run in one transaction; returns its id.
    pub fn record(&mut self, run: &RunRecord) -> Result<i64, HistoryError> {
        Ok(self.record_all(std::slice::from_ref(run))?[0])
    }

    /// Stores runs in one transaction (all or none); returns their ids.
    pub fn record_all(&mut self, runs: &[RunRecord]) -> Result<Vec<i64>, HistoryError> {
        let tx = self.conn.transaction()?;
        let ids = runs
            .iter()
            .map(|run| insert(&tx, run))
            .collect::<Result<Vec<_>, _>>()?;
        tx.commit()?;
        Ok(ids)
    }
    /// The runs `filter` selects, oldest first, without their configs and results.
    pub fn list(&self, filter: &Filter) -> Result<Vec<RunRow>, HistoryError> {
        let mut sql = String::from(
            "SELECT id, kind, origin, command, started_ns, finished_ns, outcome, host, label, \
             flows, frames_tx, frames_rx, frames_lost, tx_pps, p50_ns, p99_ns, p99_9999_ns, \
             max_ns FROM runs WHERE 1",
        );
        let mut args: Vec<rusqlite::types::Value> = Vec::new();
        if let Some(kind) = &filter.kind {
            args.push(kind.clone().into());
            sql += &format!(" AND kind = ?{}", args.len());
        }
        if let Some(text) = &filter.text {
            args.push(format!("%{}%", like_escape(text)).into());
            let n = args.len();
            sql += &format!(
                " AND (command LIKE ?{n} ESCAPE '\\' OR IFNULL(label, '') LIKE ?{n} ESCAPE '\\')"
            );
        }
        if let Some(since) = filter.since_unix_ns {
            args.push(since.into());
            sql += &format!(" AND started_ns >= ?{}", args.len());
        }
        sql += " ORDER BY id DESC";
        if let Some(limit) = filter.limit {
            args.push(clamp_i64(limit).into());
            sql += &format!(" LIMIT ?{}", args.len());
        }
        let mut statement = self.conn.prepare(&sql)?;
        let mut rows = statement
            .query_map(rusqlite::params_from_iter(args), |r| {
                Ok(RunRow {
                    id: r.get(0)?,
                    kind: r.get(1)?,
                    origin: r.get(2)?,
                    command: r.get(3)?,
                    started_unix_ns: r.get(4)?,
                    finished_unix_ns: r.get(5)?,
                    outcome: r.get(6)?,
                    host: r.get(7)?,
                    label: r.get(8)?,
                    summary: summary_at(r, 9)?,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        rows.reverse();
        Ok(rows)
    }

    /// How many runs are stored.
    pub fn count(&self) -> Result<u64, HistoryError> {
        let n: i64 = self
            .conn
            .query_row("SELECT COUNT(*) FROM runs", [], |r| r.get(0))?;
        Ok(n.max(0) as u64)
    }

    /// One run, whole.
    pub fn get(&self, id: i64) -> Result<StoredRun, HistoryError> {
        let record = self
            .conn
            .query_row(
                "SELECT kind, origin, command, started_ns, finished_ns, outcome, host, user, \
                 strobe_version, strobe_commit, label, flows, frames_tx, frames_rx, \
                 frames_lost, tx_pps, p50_ns, p99_ns, p99_9999_ns, max_ns, config, results, \
                 timestamp_sources, calibration FROM runs WHERE id = ?1",
                [id],
                |r| {
                    Ok(RunRecord {
                        kind: r.get(0)?,
                        origin: r.get(1)?,
                        command: r.get(2)?,
                        started_unix_ns: r.get(3)?,
                        finished_unix_ns: r.get(4)?,
                        outcome: r.get(5)?,
                        host: r.get(6)?,
                        user: r.get(7)?,
                        strobe_version: r.get(8)?,
                        strobe_commit: r.get(9)?,
                        label: r.get(10)?,
                        summary: summary_at(r, 11)?,
                        config: json_at(r, 20)?,
                        results: json_at(r, 21)?,
                        timestamp_sources: json_at(r, 22)?,
                        calibration: r
                            .get::<_, Option<String>>(23)?
                            .map(|_| json_at(r, 23))
                            .transpose()?,
                        histograms: Vec::new(),
                    })
                },
            )
            .optional()?
            .ok_or(HistoryError::NoRun(id))?;
        let mut statement = self.conn.prepare(
            "SELECT flow, data FROM histograms WHERE run_id = ?1 AND encoding = ?2 ORDER BY rowid",
        )?;
        let histograms = statement
            .query_map(params![id, HISTOGRAM_ENCODING], |r| {
                Ok(FlowHistogram {
                    flow: r.get(0)?,
                    encoded: r.get(1)?,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(StoredRun {
            id,
            record: RunRecord {
                histograms,
                ..record
            },
        })
    }

    /// Removes a run and its histograms.
    pub fn delete(&mut self, id: i64) -> Result<(), HistoryError> {
        // The histograms go with their run (ON DELETE CASCADE), in the same statement.
        match self.conn.execute("DELETE FROM runs WHERE id = ?1", [id])? {
            0 => Err(HistoryError::NoRun(id)),
            _ => Ok(()),
        }
    }

    /// Sets (or with `None` clears) a run's label.
    pub fn set_label(&mut self, id: i64, label: Option<&str>) -> Result<(), HistoryError> {
        match self.conn.execute(
            "UPDATE runs SET label = ?2 WHERE id = ?1",
            params![id, label],
        )? {
            0 => Err(HistoryError::NoRun(id)),
            _ => Ok(()),
        }
    }

    /// SQLite's own consistency check: `["ok"]` for a sound database.
    pub fn integrity_check(&self) -> Result<Vec<String>, HistoryError> {
        let mut statement = self.conn.prepare("PRAGMA integrity_check")?;
        let rows = statement
            .query_map([], |r| r.get::<_, String>(0))?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }
}

/// One run's rows, inside the caller's transaction.
fn insert(tx: &rusqlite::Transaction<'_>, run: &RunRecord) -> Result<i64, HistoryError> {
    let s = &run.summary;
    let json = |v: &serde_json::Value| v.to_string();
    tx.execute(
        "INSERT INTO runs (kind, origin, command, started_ns, finished_ns, outcome, host, \
         user, strobe_version, strobe_commit, label, flows, frames_tx, frames_rx, \
         frames_lost, tx_pps, p50_ns, p99_ns, p99_9999_ns, max_ns, config, results, \
         timestamp_sources, calibration) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, \
         ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24)",
        params![
            run.kind,
            run.origin,
            run.command,
            run.started_unix_ns,
            run.finished_unix_ns,
            run.outcome,
            run.host,
            run.user,
            run.strobe_version,
            run.strobe_commit,
            run.label,
            s.flows.map(clamp_i64),
            s.frames_tx.map(clamp_i64),
            s.frames_rx.map(clamp_i64),
            s.frames_lost.map(clamp_i64),
            s.tx_pps,
            s.p50_ns,
            s.p99_ns,
            s.p99_9999_ns,
            s.max_ns,
            json(&run.config),
            json(&run.results),
            json(&run.timestamp_sources),
            run.calibration.as_ref().map(json),
        ],
    )?;
    let id = tx.last_insert_rowid();
    {
        let mut insert = tx.prepare(
            "INSERT INTO histograms (run_id, flow, encoding, data) VALUES (?1, ?2, ?3, ?4)",
        )?;
        for h in &run.histograms {
            insert.execute(params![id, h.flow, HISTOGRAM_ENCODING, h.encoded])?;
        }
    }
    Ok(id)
}

/// A run as an export file's text: a JSON object with the record (histograms in base64).
pub fn export(run: &StoredRun) -> String {
    let doc = serde_json::json!({
        "format": EXPORT_FORMAT,
        "id": run.id,
        "run": run.record,
    });
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}

/// The record in an export file's text, checked: its histograms must decode.
pub fn import(text: &str) -> Result<RunRecord, HistoryError> {
    #[derive(Deserialize)]
    struct Export {
        format: String,
        run: RunRecord,
    }
    let doc: Export = serde_json::from_str(text).map_err(|e| {
        HistoryError::BadExport(format!(
            "not a strobe run export ({EXPORT_FORMAT}, as `strobe runs export` writes): {e}"
        ))
    })?;
    if doc.format != EXPORT_FORMAT {
        return Err(HistoryError::BadExport(format!(
            "export format {:?}: this strobe reads {EXPORT_FORMAT}",
            doc.format
        )));
    }
    if let Some(h) = doc.run.histograms.iter().find(|h| h.decode().is_none()) {
        return Err(HistoryError::BadExport(format!(
            "the histogram of flow {:?} does not decode as HdrHistogram's V2 encoding",
            h.flow
        )));
    }
    Ok(doc.run)
}

/// Where runs are recorded unless `--db` or `STROBE_DB` says otherwise: the user's data
/// directory (`$XDG_DATA_HOME`, else `~/.local/share`), `strobe/runs.db`.
pub fn default_path() -> Option<PathBuf> {
    dirs::data_dir().map(|d| d.join("strobe").join("runs.db"))
}

/// The database a command uses: the given path, else `STROBE_DB`, else [`default_path`];
/// `None` when recording is off (`none`) or there is no home to put it in.
pub fn chosen_path(given: Option<&Path>) -> Option<PathBuf> {
    let named = given
        .map(Path::to_owned)
        .or_else(|| std::env::var_os(DB_ENV).map(PathBuf::from));
    match named {
        Some(p) if p.as_os_str() == NO_DB => None,
        Some(p) => Some(p),
        None => default_path(),
    }
}

/// The machine's host name and the user running this process, for a record.
pub fn host_and_user() -> (String, String) {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into());
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata("/proc/self")
                .map(|m| format!("uid {}", m.uid()))
                .unwrap_or_else(|_| "unknown".into())
        });
    (host, user)
}

/// Now, in ns since the Unix epoch.
pub fn now_unix_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| clamp_i64(d.as_nanos().min(u64::MAX as u128) as u64))
        .unwrap_or(0)
}

/// ns since the epoch as RFC 3339 UTC to the second.
pub fn rfc3339(unix_ns: i64) -> String {
    let t = UNIX_EPOCH + Duration::from_nanos(unix_ns.max(0) as u64);
    humantime::format_rfc3339_seconds(t).to_string()
}

/// A time a user gives `--since`: RFC 3339 (`2026-11-27T08:00:00Z`, or a date
/// `2026-11-27`), or an age (`2h`, `7days`) back from now.
pub fn parse_since(text: &str, now_unix_ns: i64) -> Result<i64, String> {
    let text = text.trim();
    let as_time = if text.len() == 10 {
        humantime::parse_rfc3339_weak(&format!("{text} 00:00:00"))
    } else {
        humantime::parse_rfc3339_weak(text)
    };
    if let Ok(t) = as_time {
        let ns = t.duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos();
        return Ok(ns.min(i64::MAX as u128) as i64);
    }
    match humantime::parse_duration(text) {
        Ok(age) => Ok(now_unix_ns.saturating_sub(age.as_nanos().min(i64::MAX as u128) as i64)),
        Err(_) => Err(format!(
            "--since {text:?}: give a time (2026-11-27 or 2026-11-27T08:00:00Z, UTC) or an age \
             (2h, 7days)"
        )),
    }
}

fn clamp_i64(v: u64) -> i64 {
    v.min(i64::MAX as u64) as i64
}

fn like_escape(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_")
}

fn summary_at(r: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<Summary> {
    let count = |k: usize| -> rusqlite::Result<Option<u64>> {
        Ok(r.get::<_, Option<i64>>(at + k)?.map(|v| v.max(0) as u64))
    };
    Ok(Summary {
        flows: count(0)?,
        frames_tx: count(1)?,
        frames_rx: count(2)?,
        frames_lost: count(3)?,
        tx_pps: r.get(at + 4)?,
        p50_ns: r.get(at + 5)?,
        p99_ns: r.get(at + 6)?,
        p99_9999_ns: r.get(at + 7)?,
        max_ns: r.get(at + 8)?,
    })
}

fn json_at(r: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<serde_json::Value> {
    let text: String = r.get(at)?;
    serde_json::from_str(&text).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(at, rusqlite::types::Type::Text, Box::new(e))
    })
}

mod base64_bytes {
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text.as_bytes())
            .map_err(serde::de::Error::custom)
    }
}

/// Encodes a histogram for a record (HdrHistogram's V2 compressed encoding).
pub fn encode_histogram(hist: &hdrhistogram::Histogram<u64>) -> Vec<u8> {
    use hdrhistogram::serialization::Serializer as _;
    let mut out = Vec::new();
    // Writing to a Vec cannot fail; an empty blob would be refused on import.
    let _ = hdrhistogram::serialization::V2DeflateSerializer::new().serialize(hist, &mut out);
    out
}

/// A histogram's encoding as base64, the form HdrHistogram's logs carry.
pub fn histogram_base64(encoded: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(encoded)
}

#[cfg(test)]
mod tests;
