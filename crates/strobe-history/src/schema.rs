//! The database's schema, one migration per version, applied in order (the version is
//! SQLite's `user_version`). Never edit a released migration: add the next one.

use rusqlite::Connection;
use rusqlite_migration::{Migrations, M};

/// Version 1: runs (summary columns for listing, the rest as JSON) and per-flow histograms.
const V1: &str = "
CREATE TABLE runs (
    -- AUTOINCREMENT: a deleted run's id is never given to another run, so an id written
    -- in a note or a comparison keeps meaning that run.
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    origin TEXT NOT NULL,
    command TEXT NOT NULL,
    started_ns INTEGER NOT NULL,
    finished_ns INTEGER NOT NULL,
    outcome TEXT NOT NULL,
    host TEXT NOT NULL,
    user TEXT NOT NULL,
    strobe_version TEXT NOT NULL,
    strobe_commit TEXT,
    label TEXT,
    flows INTEGER,
    frames_tx INTEGER,
    frames_rx INTEGER,
    frames_lost INTEGER,
    tx_pps REAL,
    p50_ns REAL,
    p99_ns REAL,
    p99_9999_ns REAL,
    max_ns REAL,
    config TEXT NOT NULL,
    results TEXT NOT NULL,
    timestamp_sources TEXT NOT NULL,
    calibration TEXT
);
CREATE INDEX runs_by_start ON runs (started_ns);
CREATE INDEX runs_by_kind ON runs (kind, id);
CREATE TABLE histograms (
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    flow TEXT NOT NULL,
    encoding TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (run_id, flow)
);
";

/// Brings the database to the newest schema this strobe knows; refuses one from a newer
/// strobe.
pub fn migrate(conn: &mut Connection) -> Result<(), String> {
    let migrations = Migrations::new(vec![M::up(V1)]);
    let outcome = migrations.to_latest(conn);
    // Two processes that open a new database at once both see version 0 and both migrate;
    // the second's transaction waits for the first's, fails on what the first created and
    // rolls back. The database is then current, which is all that was asked.
    let latest = rusqlite_migration::SchemaVersion::Inside(LATEST);
    if outcome.is_err() && migrations.current_version(conn).ok() == Some(latest) {
        return Ok(());
    }
    outcome.map_err(|e| match e {
        rusqlite_migration::Error::MigrationDefinition(
            rusqlite_migration::MigrationDefinitionError::DatabaseTooFarAhead,
        ) => "written by a newer strobe (its schema is ahead of this one's): upgrade strobe, \
              or give another database with --db"
            .to_owned(),
        other => format!("cannot bring its schema up to date: {other}"),
    })
}

/// The schema version this strobe writes.
pub const VERSION: u32 = 1;
const LATEST: std::num::NonZeroUsize = match std::num::NonZeroUsize::new(VERSION as usize) {
    Some(v) => v,
    None => panic!("schema versions start at 1"),
};
