use super::*;

pub(crate) fn histogram(values: &[u64]) -> hdrhistogram::Histogram<u64> {
    let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 100_000_000_000, 3).unwrap();
    for &v in values {
        h.record(v).unwrap();
    }
    h
}

pub(crate) fn record(kind: &str, command: &str, latencies: &[(&str, &[u64])]) -> RunRecord {
    RunRecord {
        kind: kind.into(),
        origin: "cli".into(),
        command: command.into(),
        started_unix_ns: 1_795_000_000_000_000_000,
        finished_unix_ns: 1_795_000_002_000_000_000,
        outcome: "completed".into(),
        host: "lab".into(),
        user: "tester".into(),
        strobe_version: "0.1.0".into(),
        strobe_commit: Some("abc123".into()),
        label: None,
        summary: Summary {
            flows: Some(latencies.len() as u64),
            frames_tx: Some(1000),
            frames_rx: Some(999),
            frames_lost: Some(1),
            tx_pps: Some(500.0),
            p50_ns: Some(10_000.0),
            p99_ns: Some(20_000.0),
            p99_9999_ns: None,
            max_ns: Some(30_000.0),
        },
        config: serde_json::json!({"flows": [{"name": "f1"}]}),
        results: serde_json::json!({"run_tag": 7}),
        timestamp_sources: serde_json::json!({"f1": {"tx": "software", "rx": "kernel"}}),
        calibration: None,
        histograms: latencies
            .iter()
            .map(|(flow, values)| FlowHistogram {
                flow: (*flow).into(),
                encoded: encode_histogram(&histogram(values)),
            })
            .collect(),
    }
}

#[test]
fn a_run_comes_back_as_it_was_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = History::open(&dir.path().join("sub/runs.db")).unwrap();
    let run = record(
        "gen",
        "strobe gen --rate 1k",
        &[("f1", &[1000, 2000]), ("f2", &[5])],
    );
    let id = db.record(&run).unwrap();
    let back = db.get(id).unwrap();
    assert_eq!(back.id, id);
    assert_eq!(back.record, run);
    let h = back.record.histograms[0].decode().unwrap();
    assert_eq!((h.len(), h.max()), (2, 2000));
    assert_eq!(db.integrity_check().unwrap(), ["ok"]);
}

#[test]
fn list_filters_and_keeps_the_newest_oldest_first() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = History::open(&dir.path().join("runs.db")).unwrap();
    for i in 0..10 {
        let kind = if i % 2 == 0 { "gen" } else { "rfc2544" };
        let mut run = record(kind, &format!("strobe {kind} run{i}"), &[]);
        run.started_unix_ns += i;
        db.record(&run).unwrap();
    }
    let all = db.list(&Filter::default()).unwrap();
    assert_eq!(
        all.iter().map(|r| r.id).collect::<Vec<_>>(),
        (1..=10).collect::<Vec<_>>()
    );
    let newest = db
        .list(&Filter {
            kind: Some("gen".into()),
            limit: Some(2),
            ..Filter::default()
        })
        .unwrap();
    assert_eq!(newest.iter().map(|r| r.id).collect::<Vec<_>>(), [7, 9]);
    let text = db
        .list(&Filter {
            text: Some("run3".into()),
            ..Filter::default()
        })
        .unwrap();
    assert_eq!(text.len(), 1);
    // LIKE's wildcards in the text are literal.
    let none = db
        .list(&Filter {
            text: Some("run_".into()),
            ..Filter::default()
        })
        .unwrap();
    assert!(none.is_empty());
    let since = db
        .list(&Filter {
            since_unix_ns: Some(1_795_000_000_000_000_008),
            ..Filter::default()
        })
        .unwrap();
    assert_eq!(since.len(), 2);
}

#[test]
fn delete_takes_the_histograms_along_and_ids_are_never_reused() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = History::open(&dir.path().join("runs.db")).unwrap();
    let a = db.record(&record("gen", "a", &[("f1", &[1])])).unwrap();
    db.delete(a).unwrap();
    assert!(matches!(db.delete(a), Err(HistoryError::NoRun(_))));
    assert!(matches!(db.get(a), Err(HistoryError::NoRun(_))));
    let blobs: i64 = db
        .conn
        .query_row("SELECT COUNT(*) FROM histograms", [], |r| r.get(0))
        .unwrap();
    assert_eq!(blobs, 0);
    let b = db.record(&record("gen", "b", &[])).unwrap();
    assert!(b > a);
    db.set_label(b, Some("irqbalance off")).unwrap();
    assert_eq!(
        db.get(b).unwrap().record.label.as_deref(),
        Some("irqbalance off")
    );
}

#[test]
fn export_and_import_round_trip_and_bad_exports_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = History::open(&dir.path().join("runs.db")).unwrap();
    let id = db
        .record(&record("gen", "x", &[("f1", &[7, 8, 9])]))
        .unwrap();
    let text = export(&db.get(id).unwrap());
    let back = import(&text).unwrap();
    assert_eq!(back, db.get(id).unwrap().record);
    assert!(import("{}").is_err());
    assert!(import(&text.replace(EXPORT_FORMAT, "strobe-run-export/9")).is_err());
    let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    doc["run"]["histograms"][0]["encoded"] = "AAAA".into();
    let err = import(&doc.to_string()).unwrap_err().to_string();
    assert!(err.contains("does not decode"), "{err}");
}

#[test]
fn a_database_from_a_newer_strobe_is_refused_not_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    drop(History::open(&path).unwrap());
    let conn = Connection::open(&path).unwrap();
    conn.pragma_update(None, "user_version", schema::VERSION + 1)
        .unwrap();
    drop(conn);
    let err = History::open(&path).err().unwrap().to_string();
    assert!(err.contains("newer strobe"), "{err}");
}

#[test]
fn since_takes_dates_times_and_ages() {
    let now = 1_795_000_000_000_000_000;
    assert_eq!(parse_since("2h", now).unwrap(), now - 7_200_000_000_000);
    let day = parse_since("2026-11-27", now).unwrap();
    assert_eq!(rfc3339(day), "2026-11-27T00:00:00Z");
    assert_eq!(
        parse_since("2026-11-27T08:30:00Z", now).unwrap() - day,
        30_600_000_000_000
    );
    assert!(parse_since("yesterday-ish", now).is_err());
}

#[test]
fn recording_can_be_switched_off_by_name() {
    assert_eq!(chosen_path(Some(Path::new(NO_DB))), None);
    assert_eq!(
        chosen_path(Some(Path::new("/tmp/x.db"))),
        Some(PathBuf::from("/tmp/x.db"))
    );
}
