//! The database survives a writer killed at any moment, and holds and lists many runs.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use strobe_history::{encode_histogram, Filter, FlowHistogram, History, RunRecord, Summary};

const WRITER_ENV: &str = "STROBE_HISTORY_TEST_WRITER";

fn run_with(flows: usize, n: u64) -> RunRecord {
    let histograms = (0..flows)
        .map(|f| {
            let mut h =
                hdrhistogram::Histogram::<u64>::new_with_bounds(1, 100_000_000_000, 3).unwrap();
            // A wide distribution, so each blob is a few kB and a write takes a while.
            for v in 0..20_000u64 {
                h.record(1_000 + v * 37 + n).unwrap();
            }
            FlowHistogram {
                flow: format!("f{f}"),
                encoded: encode_histogram(&h),
            }
        })
        .collect();
    RunRecord {
        kind: "gen".into(),
        origin: "cli".into(),
        command: format!("strobe gen run {n}"),
        started_unix_ns: 1_795_000_000_000_000_000 + n as i64,
        finished_unix_ns: 1_795_000_001_000_000_000 + n as i64,
        outcome: "completed".into(),
        host: "h".into(),
        user: "u".into(),
        strobe_version: "0.1.0".into(),
        strobe_commit: None,
        label: None,
        summary: Summary {
            flows: Some(flows as u64),
            frames_tx: Some(n),
            ..Summary::default()
        },
        config: serde_json::json!({"n": n, "padding": "x".repeat(4096)}),
        results: serde_json::json!({"n": n}),
        timestamp_sources: serde_json::json!({}),
        calibration: None,
        histograms,
    }
}

/// Not a test on its own: the child process the killing test starts (it writes runs until
/// it is killed). Without the variable it returns at once.
#[test]
fn writer_child() {
    let Ok(path) = std::env::var(WRITER_ENV) else {
        return;
    };
    let mut db = History::open(Path::new(&path)).unwrap();
    // Built once: the loop spends its time inside record(), where the kill should land.
    let mut run = run_with(8, 0);
    for n in 0.. {
        run.command = format!("strobe gen run {n}");
        println!("begin {n}");
        db.record(&run).unwrap();
        println!("end {n}");
    }
}

#[test]
fn a_writer_killed_mid_write_leaves_a_readable_database_without_half_runs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    let me = std::env::current_exe().unwrap();
    let mut kills_mid_run = 0;
    for round in 0..6u64 {
        let mut child = Command::new(&me)
            .args(["--exact", "writer_child", "--nocapture"])
            .env(WRITER_ENV, &path)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // What the writer said it was doing, read as it goes.
        let stdout = child.stdout.take().unwrap();
        let said = std::thread::spawn(move || {
            use std::io::BufRead;
            std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .filter(|l| l.starts_with("begin ") || l.starts_with("end "))
                .last()
        });
        // Let it write a few runs, then kill it at a moment that varies from round to round.
        let before = count(&path);
        let deadline = Instant::now() + Duration::from_secs(30);
        while count(&path) < before + 3 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_micros(700 * round + 300));
        // SAFETY: kill(2) on the pid of the child this test started and has not reaped.
        assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGKILL) }, 0);
        let status = child.wait().unwrap();
        let last = said.join().unwrap().unwrap_or_default();
        if last.starts_with("begin ") {
            kills_mid_run += 1;
        }
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(libc::SIGKILL),
            "the writer ended before it was killed: {status:?}"
        );
        let db = History::open(&path).unwrap();
        assert_eq!(db.integrity_check().unwrap(), ["ok"], "round {round}");
        // Every run there is whole: all its histograms (8 from the writer, 1 from this test
        // after each kill) decode and its JSON reads.
        for row in db.list(&Filter::default()).unwrap() {
            let run = db.get(row.id).unwrap();
            let flows = run.record.summary.flows.unwrap() as usize;
            assert!(flows == 8 || flows == 1);
            assert_eq!(
                run.record.histograms.len(),
                flows,
                "run {} is partial",
                row.id
            );
            assert!(run.record.histograms.iter().all(|h| h.decode().is_some()));
            assert_eq!(run.record.config["padding"].as_str().unwrap().len(), 4096);
        }
        // The database stays writable after the crash.
        let mut db = db;
        db.record(&run_with(1, 1_000_000 + round)).unwrap();
    }
    // The writer spends nearly all its time in record(): most kills land inside one.
    assert!(
        kills_mid_run >= 3,
        "only {kills_mid_run} of 6 kills landed while a run was being written"
    );
}

fn count(path: &Path) -> u64 {
    History::open(path).and_then(|db| db.count()).unwrap_or(0)
}

#[test]
fn a_thousand_runs_are_recorded_and_listed() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = History::open(&dir.path().join("runs.db")).unwrap();
    let template = run_with(1, 0);
    for n in 0..1000u64 {
        let mut run = template.clone();
        run.command = format!("strobe gen run {n}");
        run.summary.frames_tx = Some(n);
        db.record(&run).unwrap();
    }
    let rows = db.list(&Filter::default()).unwrap();
    assert_eq!(rows.len(), 1000);
    assert!(
        rows.iter()
            .enumerate()
            .all(|(n, r)| r.summary.frames_tx == Some(n as u64)
                && r.command.ends_with(&n.to_string()))
    );
    assert_eq!(db.count().unwrap(), 1000);
}
