//! The run history from the command line (needs root: the tests build their own lab):
//! runs recorded by `gen` and a methodology, listed, labelled, compared (the table checked
//! against HdrHistogram's Python implementation decoding the stored histograms), exported,
//! imported, deleted; a run Ctrl-C stops is recorded as stopped; a bad --db fails before
//! anything is sent.

mod common;
use std::process::Stdio;

use common::lab::TestLab;
use common::*;

fn runs(db: &str, args: &[&str]) -> std::process::Output {
    strobe()
        .args(["runs", "--db", db])
        .args(args)
        .output()
        .unwrap()
}

fn json(out: std::process::Output) -> serde_json::Value {
    serde_json::from_str(&ok(out)).unwrap()
}

#[test]
fn runs_are_recorded_listed_compared_exported_and_deleted() {
    let lab = TestLab::up("hi", "cable");
    let dir = Scratch::new("history");
    let db = dir.path("runs.db");
    // Two runs at different rates and sizes, recorded in a database named with --db.
    for (rate, size) in [("20kpps", "64"), ("40kpps", "512")] {
        let out = lab.gen_text(&[
            "--count", "3000", "--rate", rate, "--size", size, "--db", &db,
        ]);
        assert!(out.contains("recorded as run"), "{out}");
    }
    let list = json(runs(&db, &["list", "--json"]));
    let rows = list["runs"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{list}");
    for (row, id) in rows.iter().zip([1, 2]) {
        assert_eq!(row["id"], id);
        assert_eq!(row["kind"], "gen");
        assert_eq!(row["origin"], "cli");
        assert_eq!(row["summary"]["frames_tx"], 3000);
        assert_eq!(row["summary"]["frames_rx"], 3000);
        assert!(row["command"].as_str().unwrap().contains("--count 3000"));
    }
    let text = ok(runs(&db, &["list"]));
    assert!(text.contains("2 of 2 runs"), "{text}");

    // The whole record: the results as the run's --json has them, the stamps' sources,
    // the version and commit of this build.
    let shown = json(runs(&db, &["show", "2", "--json"]))["run"].clone();
    assert_eq!(shown["results"]["flows"][0]["frames_tx"], 3000);
    assert!(shown["timestamp_sources"]["udp"]["rx"]
        .as_str()
        .unwrap()
        .contains("kernel"));
    assert_eq!(shown["strobe_version"], env!("CARGO_PKG_VERSION"));
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    if commit.status.success() {
        let commit = String::from_utf8(commit.stdout).unwrap();
        assert_eq!(shown["strobe_commit"], commit.trim());
    }
    ok(runs(&db, &["label", "2", "bigger frames"]));
    assert!(ok(runs(&db, &["show", "2"])).contains("label:    bigger frames"));

    // compare: its table against the stored histograms as an independent decoder reads them.
    let (html, svg) = (dir.path("c.html"), dir.path("c.svg"));
    let table = ok(runs(
        &db,
        &["compare", "1", "2", "--html", &html, "--svg", &svg],
    ));
    let export = dir.path("2.json");
    ok(runs(&db, &["export", "1", "-o", &dir.path("1.json")]));
    ok(runs(&db, &["export", "2", "-o", &export]));
    let script = r#"
import json, sys
from hdrh.histogram import HdrHistogram
for path in sys.argv[1:]:
    run = json.load(open(path))["run"]
    for h in run["histograms"]:
        hist = HdrHistogram.decode(h["encoded"])
        print(" ".join("%.3f" % (hist.get_value_at_percentile(p) / 1e3) for p in (50, 90, 99)))
"#;
    let decoded = std::process::Command::new("python3")
        .args(["-c", script, &dir.path("1.json"), &export])
        .output()
        .unwrap();
    let decoded = ok(decoded);
    let expected: Vec<Vec<String>> = decoded
        .lines()
        .map(|l| l.split(' ').map(String::from).collect())
        .collect();
    assert_eq!(expected.len(), 2, "{decoded}");
    for (k, name) in ["p50", "p90", "p99"].iter().enumerate() {
        let row: Vec<&str> = table
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap()
            .split_whitespace()
            .collect();
        assert_eq!(
            row[1..],
            [expected[0][k].as_str(), expected[1][k].as_str()],
            "{name}: {table}\npython: {decoded}"
        );
    }
    assert!(table.contains("#2 udp (bigger frames)"), "{table}");
    // It says where it wrote its files.
    assert!(
        table.contains(&format!("wrote the report with the overlaid CCDFs: {html}"))
            && table.contains(&format!("wrote the CCDF chart: {svg}")),
        "{table}"
    );
    let html = std::fs::read_to_string(&html).unwrap();
    assert!(html.contains("<svg") && html.contains("bigger frames"));
    assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));

    // Export → import into another database: the same record under a new id.
    let other = dir.path("other.db");
    let imported = ok(runs(&other, &["import", &export]));
    assert!(imported.contains("imported as run 1"), "{imported}");
    let mut again = json(runs(&other, &["show", "1", "--json"]))["run"].clone();
    again["id"] = 2.into();
    assert_eq!(again, shown_after_label(&db));

    // Delete: gone from the list, and its id answers with a clear error.
    ok(runs(&db, &["delete", "1"]));
    assert_eq!(
        json(runs(&db, &["list", "--json"]))["runs"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let out = runs(&db, &["show", "1"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no run 1"), "{err}");
    let out = runs(&db, &["compare", "2", "--flow", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no latency for flow \"nope\""));
}

fn shown_after_label(db: &str) -> serde_json::Value {
    json(runs(db, &["show", "2", "--json"]))["run"].clone()
}

#[test]
fn a_run_ctrl_c_stops_and_a_methodology_are_recorded() {
    let lab = TestLab::up("hs", "cable");
    let dir = Scratch::new("history-stop");
    let db = dir.path("runs.db");
    let child = lab
        .gen_command("lab:tx", "lab:rx")
        .args(["--rate", "5kpps", "--db", &db])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    // SAFETY: kill(2) on the PID of the child this test started.
    let sent = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    assert_eq!(sent, 0);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{out:?}");
    ok(strobe()
        .args(["trains", "convoy", "--lab", &lab.prefix, "--quiet"])
        .args([
            "--trains", "5", "--frames", "10", "--gap", "10ms", "--db", &db,
        ])
        .output()
        .unwrap());
    let list = json(runs(&db, &["list", "--json"]));
    let rows = list["runs"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{list}");
    assert_eq!(rows[0]["outcome"], "stopped by SIGINT");
    assert!(
        rows[0]["summary"]["frames_tx"].as_u64().unwrap() > 1000,
        "{list}"
    );
    assert_eq!(
        (&rows[1]["kind"], &rows[1]["outcome"]),
        (&"trains".into(), &"completed".into())
    );
    let convoy = json(runs(&db, &["show", "2", "--json"]))["run"].clone();
    assert_eq!(
        convoy["results"]["steps"].as_array().unwrap().len(),
        1,
        "{convoy}"
    );
    // Recorded from when the method started (its trial drains 500 ms at least), with what
    // its trials sent, received, lost and measured.
    let took_ns =
        convoy["finished_unix_ns"].as_i64().unwrap() - convoy["started_unix_ns"].as_i64().unwrap();
    assert!(took_ns > 400_000_000, "took {took_ns} ns: {convoy}");
    let summary = &rows[1]["summary"];
    assert_eq!(summary["frames_tx"], 50, "{list}");
    assert_eq!(summary["frames_rx"], 50, "{list}");
    assert_eq!(summary["frames_lost"], 0, "{list}");
    assert!(summary["p50_ns"].as_f64().unwrap() > 0.0, "{list}");
    // Each trial's latency histogram is kept, named by its trial, and compared like a flow.
    let histograms = convoy["histograms"].as_array().unwrap();
    assert!(!histograms.is_empty(), "{convoy}");
    let name = histograms[0]["flow"].as_str().unwrap();
    assert!(name.starts_with("trial 1: "), "{name}");
    assert!(!name.ends_with(')'), "the progress is left out: {name}");
    let table = ok(runs(&db, &["compare", "2", "--flow", name]));
    // The column (its long name wrapped) holds the trial's 50 frames.
    assert!(table.contains("#2 trial 1: "), "{name:?}: {table}");
    let frames = table.lines().find(|l| l.starts_with("frames")).unwrap();
    assert_eq!(frames.split_whitespace().nth(1), Some("50"), "{table}");
    let list = json(runs(&db, &["list", "--json", "--kind", "trains"]));
    assert_eq!(list["runs"].as_array().unwrap().len(), 1);
}

#[test]
fn a_database_that_cannot_be_written_stops_the_run_before_it_sends() {
    let dir = Scratch::new("history-bad");
    // A file where the database's folder would be.
    let blocker = dir.path("file");
    std::fs::write(&blocker, "x").unwrap();
    let out = strobe()
        .args(["gen", "--port", "null", "--count", "10", "--db"])
        .arg(format!("{blocker}/runs.db"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("run history") && err.contains("nothing was sent"),
        "{err}"
    );
    // `none` records nothing, and says nothing about it.
    let out = ok(strobe()
        .args(["gen", "--port", "null", "--count", "10", "--db", "none"])
        .output()
        .unwrap());
    assert!(!out.contains("recorded as run"), "{out}");
}
