//! Outputs that follow the conventions (docs/results.md): every `--json` document says which
//! strobe wrote it, in which layout and when; `--json -` keeps the standard output for the
//! document alone; a failed verdict exits apart from strobe's own failures; the published
//! JSON Schemas are the code's; sent and received bytes count the same thing (the lab test
//! needs root). The schemas are checked against real documents by an independent validator
//! in scripts/check-json-schema.py.

mod common;
use common::lab::TestLab;
use common::*;

use std::path::Path;
use std::process::Output;

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A short run on the null port with `extra` options.
fn null_run(extra: &[&str]) -> Output {
    gen_udp_command("null")
        .args(["--rate", "100kpps", "--count", "1000"])
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn the_published_schemas_are_the_codes() {
    for kind in strobe_control::results::SCHEMA_KINDS {
        let generated = ok(strobe().args(["schema", kind]).output().unwrap());
        let file = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("../../docs/schema/{kind}.schema.json"));
        let published = std::fs::read_to_string(&file).unwrap_or_default();
        assert!(
            generated == published,
            "{} is stale: write it again with `strobe schema {kind} > docs/schema/{kind}.schema.json`",
            file.display()
        );
        let schema: serde_json::Value = serde_json::from_str(&generated).unwrap();
        let required = schema["required"].as_array().unwrap();
        for field in [
            "strobe_version",
            "schema_version",
            "started_at",
            "started_unix_ns",
        ] {
            assert!(required.contains(&field.into()), "{kind}: {field}");
        }
    }
    let out = strobe().args(["schema", "nonsense"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn json_to_stdout_is_one_clean_document_and_the_table_goes_to_stderr() {
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let out = null_run(&["--json", "-"]);
    let (stdout, err) = (String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert!(out.status.success(), "{err}");
    let document: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}):\n{stdout}"));
    assert!(
        err.contains("1000 frames, 60000 bytes") && err.contains("verdict:"),
        "the table and verdict go to stderr: {err}"
    );
    assert_eq!(document["strobe_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(document["schema_version"], 1);
    assert_eq!(document["document"], "gen");
    let started = document["started_unix_ns"].as_u64().unwrap();
    assert!(
        started + 1_000_000_000 > before && started < before + 60_000_000_000,
        "started {started}, test began {before}"
    );
    let at = document["started_at"].as_str().unwrap();
    assert!(
        at.ends_with('Z') && at.len() == 30,
        "RFC 3339 UTC, ns: {at}"
    );
    assert_eq!(document["flows"][0]["frames_tx"], 1000);

    // A file instead: the table stays on stdout, the file holds the same document form.
    let dir = Scratch::new("conv-json");
    let json = dir.path("r.json");
    let out = null_run(&["--json", &json]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("1000 frames, 60000 bytes"));
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(file["document"], "gen");

    // analyze and runs list take the same form.
    let trace = dir.path("t.pcap");
    ok(gen_udp_command(&format!("pcap:{trace}"))
        .args(["--rate", "10kpps", "--count", "200", "-q"])
        .output()
        .unwrap());
    let out = strobe()
        .args(["analyze", &trace, "--json", "-"])
        .output()
        .unwrap();
    let document: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(document["document"], "analyze");
    assert!(stderr(&out).contains("capture: "), "{}", stderr(&out));
    let db = dir.path("runs.db");
    null_run(&["-q", "--db", &db]);
    let out = strobe()
        .args(["runs", "--db", &db, "list", "--json", "-"])
        .output()
        .unwrap();
    let document: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(document["document"], "runs-list");
    assert_eq!(document["runs"].as_array().unwrap().len(), 1);
    assert!(stderr(&out).contains("gen"), "the table: {}", stderr(&out));
}

#[test]
fn exit_codes_tell_bad_input_strobes_failures_and_failed_verdicts_apart() {
    // 2: bad input.
    let out = null_run(&["--size", "nonsense"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    // 1: strobe itself failed (an output it could not write).
    let out = null_run(&["-q", "--json", "/dev/full"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    // 0: a run that worked.
    assert_eq!(null_run(&["-q"]).status.code(), Some(0));
}

/// 3: the run worked and failed its verdict (all lost, above --max-loss), its results
/// written; and bytes: a lossless run over veth counts the same bytes on both sides.
#[test]
fn a_failed_verdict_exits_3_and_bytes_match_on_both_sides() {
    let dir = Scratch::new("conv-lab");
    let lab = TestLab::up("cv", "cable");
    let json = dir.path("r.json");
    let out = lab
        .gen_command("lab:tx", "lab:rx")
        .args(["--rate", "20kpps", "--count", "2000", "--size", "128"])
        .args(["--json", &json])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let flow = &r["flows"][0];
    assert_eq!(flow["loss"], 0, "a lossless run: {flow}");
    assert_eq!(flow["bytes_tx"], 2000 * 124, "without FCS: {flow}");
    assert_eq!(flow["bytes_tx"], flow["bytes_rx"], "{flow}");
    assert_eq!(flow["bytes_tx_with_fcs"], 2000 * 128, "{flow}");
    assert_eq!(
        flow["bytes_tx_with_fcs"], flow["bytes_rx_with_fcs"],
        "{flow}"
    );
    assert_eq!(r["ports"][0]["bytes_tx"], flow["bytes_tx"]);

    // The router drops frames not addressed to it: every frame lost, a failed verdict.
    let lab = TestLab::up("cw", "router");
    std::fs::remove_file(&json).unwrap();
    let out = lab
        .gen_command("lab:tx", "lab:rx")
        .args(["--dst-mac", "02:00:00:00:00:99", "--rate", "20kpps"])
        .args(["--count", "500", "--max-loss", "1", "--json", &json])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("more than --max-loss 1 %"));
    assert!(std::fs::metadata(&json).is_ok(), "the results were written");
}
