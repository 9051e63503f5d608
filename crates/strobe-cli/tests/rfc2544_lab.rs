//! RFC 2544 and Y.1564 through the lab's token-bucket DUT (needs root: the tests build their
//! own labs and remove them): the throughput found per frame size is the shaper's rate in
//! frames per second, in a few trials; latency and loss curve run on it; Ctrl-C keeps what
//! ran; Y.1564's steps pass or fail as the shaper dictates.

mod common;
use std::process::Stdio;
use std::sync::Mutex;

use common::lab::TestLab;
use common::*;

/// The tests here time a shaper: one at a time, so that none loads the cores of another.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Short trials: 1 s of traffic, 200 ms for late frames, 100 ms to settle.
const SHORT: [&str; 6] = ["--trial", "1s", "--wait", "200ms", "--settle", "100ms"];

fn rfc2544(lab: &TestLab, json: &str, args: &[&str]) -> serde_json::Value {
    ok(strobe()
        .args(["rfc2544"])
        .args(args)
        .args(["--lab", &lab.prefix, "--quiet", "--json", json])
        .args(SHORT)
        .output()
        .unwrap());
    serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap()
}

#[test]
fn the_throughput_through_a_shaper_is_its_rate_in_frames_per_second() {
    let _serial = one_at_a_time();
    let lab = TestLab::up("rt", "tbf:50mbit");
    let dir = Scratch::new("rfc2544-throughput");
    let (json, csv) = (dir.path("r.json"), dir.path("r.csv"));
    let db = dir.path("runs.db");
    let r = rfc2544(
        &lab,
        &json,
        &[
            "throughput",
            "--sizes",
            "256,1518",
            "--csv",
            &csv,
            "--db",
            &db,
        ],
    );
    let throughput = r["throughput"].as_array().unwrap();
    assert_eq!(throughput.len(), 2, "{r}");
    let mut rows = 0;
    for t in throughput {
        let size: f64 = t["size"]["size"].as_str().unwrap().parse().unwrap();
        // tbf counts frames without their FCS.
        let shaper_pps = 50e6 / ((size - 4.0) * 8.0);
        let ndr = t["outcomes"][0]["rate"]["pps"].as_f64().unwrap();
        // A 1 s trial may also fill the shaper's 10 ms queue and bucket without loss: up
        // to about 1 % above its rate; the resolution is 0.5 % below.
        assert!(
            ndr > shaper_pps * 0.985 && ndr < shaper_pps * 1.03,
            "{size} B: NDR {ndr} pps against the shaper's {shaper_pps}: {t}"
        );
        assert_eq!(t["outcomes"][0]["resolved"], true);
        let pdr = t["outcomes"][1]["rate"]["pps"].as_f64().unwrap();
        assert!(pdr >= ndr, "PDR {pdr} below NDR {ndr}");
        // The first trial sent as fast as the port took, well above the shaper (a debug build
        // sends slower). A fast machine sends 1518-byte frames above the veth's nominal 10
        // Gbit/s; the search then starts from that line rate instead.
        let max_pps = t["max_pps"].as_f64().unwrap();
        let line_pps = t["size"]["line_rate_pps"].as_f64().unwrap();
        match t["max_source"].as_str() {
            Some("generator") => assert!(max_pps <= line_pps, "{t}"),
            Some("line_rate") => assert_eq!(max_pps, line_pps, "{t}"),
            _ => panic!("unexpected max_source: {t}"),
        }
        let trials = t["trials"].as_array().unwrap();
        assert!(trials[0]["asked_pps"].is_null());
        let unpaced = trials[0]["offered_pps"].as_f64().unwrap();
        assert!(unpaced > 3.0 * shaper_pps, "{t}");
        // Halving from the maximum to 0.5 % takes ten or more trials; the aimed search a
        // few (generous: a noisy VM sometimes needs a bisection or two), one more when it
        // starts with a trial at the line rate.
        let line_trial = usize::from(t["max_source"] == "line_rate");
        assert!(
            trials.len() <= 12 + line_trial,
            "{} trials: {t}",
            trials.len()
        );
        rows += trials.len();
    }
    assert_eq!(r["trials"].as_u64(), Some(rows as u64));
    let csv = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(csv.lines().count(), rows + 1, "{csv}");
    assert!(csv.starts_with("benchmark,size,load_pct,asked_pps,offered_pps,"));
    // Recorded from its start: every trial lasted 1 s; trials above the shaper lost frames.
    assert_method_recorded(&db, "rfc2544", rows as f64, true);
}

#[test]
fn all_benchmarks_run_from_one_command_and_a_stop_keeps_what_ran() {
    let _serial = one_at_a_time();
    let lab = TestLab::up("ra", "tbf:50mbit");
    let dir = Scratch::new("rfc2544-all");
    let (json, html) = (dir.path("all.json"), dir.path("all.html"));
    let r = rfc2544(
        &lab,
        &json,
        &[
            "all",
            "--html",
            &html,
            "--sizes",
            "1518",
            "--latency-loads",
            "100,50",
            "--loss-step",
            "25",
            "--max-rate",
            "7kpps",
            "--b2b-searches",
            "1",
            "--recovery-overload",
            "2s",
            "--recovery-window",
            "400ms",
        ],
    );
    assert_eq!(
        r["tests"],
        serde_json::json!(["throughput", "latency", "loss", "back_to_back", "recovery"])
    );
    let ndr = r["throughput"][0]["outcomes"][0]["rate"]["pps"]
        .as_f64()
        .unwrap();
    // Latency: every frame of the trial at 100 % and at 50 % of the throughput.
    let points = r["latency"][0]["points"].as_array().unwrap();
    assert_eq!(points.len(), 2, "{r}");
    for (p, load) in points.iter().zip([1.0, 0.5]) {
        assert!((p["rate"]["pps"].as_f64().unwrap() - ndr * load).abs() < 1e-6);
        let frames = p["frames_tx"].as_u64().unwrap();
        assert_eq!(
            p["latency"]["count"].as_u64(),
            Some(frames - p["frames_lost"].as_u64().unwrap())
        );
    }
    assert!(r["latency_method"]
        .as_str()
        .unwrap()
        .contains("every received frame"));
    // The highest rate was given: 7 kpps, 1.7 times the shaper's 4.13 kpps.
    assert_eq!(r["throughput"][0]["max_source"], "given");
    // Loss: from 7 kpps down in 25 % steps until two steps lose nothing: 100 % loses about
    // 40 %, 75 % a fifth (less when the overloaded DUT also slows the sender, as it can
    // on this VM), 50 % (3.5 kpps, 85 % of the shaper) and 25 % nothing. (At 4 kpps, 97 %
    // of the shaper, a sender that caught up after a stall overran its 10 ms queue in CI.)
    let curve = r["loss"][0]["points"].as_array().unwrap();
    let loads: Vec<f64> = curve
        .iter()
        .map(|p| p["load_pct"].as_f64().unwrap())
        .collect();
    assert_eq!(loads, [100.0, 75.0, 50.0, 25.0], "{curve:?}");
    let loss = |i: usize| curve[i]["loss_ratio"].as_f64().unwrap();
    assert!(loss(0) > 0.15 && loss(1) > 0.05, "{curve:?}");
    assert_eq!((loss(2), loss(3)), (0.0, 0.0));
    // Its first point is the throughput search's first trial, not run again.
    assert_eq!(curve[0]["trial"], r["throughput"][0]["trials"][0]);
    // Back-to-back: the shaper holds its 10 ms queue (68 750 bytes) and its 6 250-byte
    // bucket: about 50 frames of 1514 bytes, which drain at its rate in about 12 ms.
    let b2b = &r["back_to_back"][0];
    let frames = b2b["mean_frames"].as_f64().unwrap();
    assert!((40.0..=60.0).contains(&frames), "{b2b}");
    let drain_ms = b2b["buffer_drain_ns"].as_f64().unwrap() / 1e6;
    assert!((8.0..=16.0).contains(&drain_ms), "{b2b}");
    // System recovery: 110 % of the throughput for 2 s overflows the shaper's queue; at 50 %
    // it drains, and nothing is lost after the first 20 ms slice or two.
    let rec = &r["recovery"][0];
    assert!(rec["outcome"]["overload"][1].as_u64().unwrap() > 0, "{rec}");
    assert_eq!(
        rec["outcome"]["slices"].as_array().unwrap().len(),
        20,
        "{rec}"
    );
    assert!(rec["recovery_ns"].as_u64().unwrap() <= 40_000_000, "{rec}");
    // The report draws throughput (frames, bits), latency (by size, by load twice), loss.
    let html = std::fs::read_to_string(&html).unwrap();
    assert_eq!(html.matches("<svg").count(), 6, "{html}");
    assert!(html.contains("frame loss rate") && html.contains("latency at the throughput"));
    assert!(html.contains("Back-to-back frames (RFC 9004)") && html.contains("System recovery"));

    // Ctrl-C in the middle: exit 130, and the JSON holds the trials that ran.
    let stopped = dir.path("stopped.json");
    let child = strobe()
        .args([
            "rfc2544",
            "all",
            "--sizes",
            "256,512,1518",
            "--lab",
            &lab.prefix,
            "-q",
        ])
        .args(["--json", &stopped])
        .args(SHORT)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(3500));
    // SAFETY: kill(2) on the PID of the child this test started.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    assert_eq!(rc, 0);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stopped).unwrap()).unwrap();
    assert_eq!(r["interrupted"], true);
    assert!(r["trials"].as_u64().unwrap() >= 1, "{r}");
    let ran = r["throughput"][0]["trials"].as_array().unwrap();
    assert!(ran.iter().filter(|t| t["interrupted"] == false).count() >= 1);
}

#[test]
fn y1564_steps_pass_or_fail_as_the_shaper_dictates() {
    let _serial = one_at_a_time();
    let lab = TestLab::up("ry", "tbf:50mbit");
    let dir = Scratch::new("y1564");
    let (json, csv, html) = (dir.path("y.json"), dir.path("y.csv"), dir.path("y.html"));
    // `fits`: CIR 40 Mbit/s under the 50 Mbit/s shaper, CIR + EIR 60 above it (the shaper
    // polices the excess). `big`: a CIR of 60 Mbit/s, more than the shaper forwards.
    let run = || {
        let out = strobe()
            .args(["y1564", "--lab", &lab.prefix, "--quiet"])
            .args([
                "--service",
                "name=fits,udp=198.18.0.1:1000-198.18.1.1:2000,cir=40mbit,eir=20mbit",
                "--service",
                "name=big,udp=198.18.0.1:1001-198.18.1.1:2001,cir=60mbit",
            ])
            .args(["--step", "1s", "--performance", "1s", "--wait", "200ms"])
            .args([
                "--settle", "100ms", "--json", &json, "--csv", &csv, "--html", &html,
            ])
            .args(["--db", &dir.path("runs.db")])
            .output()
            .unwrap();
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        (out, r)
    };
    let verdicts = |r: &serde_json::Value, k: usize| -> Vec<bool> {
        r["services"][k]["configuration"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["verdict"]["pass"].as_bool().unwrap())
            .collect()
    };
    let expected = |r: &serde_json::Value| {
        verdicts(r, 0) == [true; 6] && verdicts(r, 1) == [true, true, true, false, false]
    };
    let (mut out, mut r) = run();
    if !expected(&r) {
        // A 1 s step on this VM can meet a host stall of tens of ms (seen in CI: 28 ms of
        // delay variation and 1.4 % lost in the step at 40 Mbit/s): once more, with the
        // first run shown. A broken step fails both.
        eprintln!("first run, steps not as expected: {r}");
        let _ = std::fs::remove_file(dir.path("runs.db"));
        (out, r) = run();
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    // A failing service fails the command, and says which.
    // 3: a failed verdict (docs/results.md: exit codes).
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("Y.1564: FAIL for"), "{stderr}");
    let verdicts = |k: usize| verdicts(&r, k);
    // fits: 25, 50, 75, 100 % of the CIR, CIR + EIR (the CIR comes through), policing (at
    // most CIR + EIR comes through): all pass.
    assert_eq!(verdicts(0), [true; 6], "{}", r["services"][0]);
    let policing = &r["services"][0]["configuration"][5]["measured"];
    assert!(policing["ir_bps"].as_f64().unwrap() < 55e6, "{policing}");
    assert!(policing["frames_lost"].as_u64().unwrap() > 0);
    // big: up to 45 Mbit/s passes; at its CIR the shaper drops; policing brings it below.
    assert_eq!(
        verdicts(1),
        [true, true, true, false, false],
        "{}",
        r["services"][1]
    );
    let at_cir = &r["services"][1]["configuration"][3]["verdict"]["failed"];
    assert!(at_cir.to_string().contains("FLR"), "{at_cir}");
    // Both at their CIR at once: 100 Mbit/s into 50: both lose.
    for k in 0..2 {
        assert_eq!(
            r["services"][k]["performance_verdict"]["pass"], false,
            "{}",
            r["services"][k]
        );
    }
    assert_eq!(r["pass"], false);
    let csv = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(csv.lines().count(), 1 + 6 + 5 + 2, "{csv}");
    let html = std::fs::read_to_string(&html).unwrap();
    assert!(html.contains("service `big`") && html.contains("#fde2e1"));
    // The history holds it from its start (12 steps of 1 s and more, not the instant it
    // ended), with what its steps sent, received and lost together.
    assert_method_recorded(&dir.path("runs.db"), "y1564", 12.0, true);
}

/// The one run in the history `db`: of `kind`, lasting `at_least_s`, with its trials' frames
/// summed (sent = received + lost) and their latency; `lossy` when trials lost frames.
fn assert_method_recorded(db: &str, kind: &str, at_least_s: f64, lossy: bool) {
    let list = ok(strobe()
        .args(["runs", "--db", db, "list", "--json"])
        .output()
        .unwrap());
    let list: serde_json::Value = serde_json::from_str(&list).unwrap();
    let rows = list["runs"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{list}");
    let row = &rows[0];
    assert_eq!(row["kind"], kind, "{row}");
    let took_s = (row["finished_unix_ns"].as_i64().unwrap()
        - row["started_unix_ns"].as_i64().unwrap()) as f64
        / 1e9;
    assert!(took_s >= at_least_s, "took {took_s} s: {row}");
    let s = &row["summary"];
    let (tx, rx, lost) = (
        s["frames_tx"].as_u64().unwrap(),
        s["frames_rx"].as_u64().unwrap(),
        s["frames_lost"].as_u64().unwrap(),
    );
    assert!(tx > 0 && rx > 0 && rx + lost == tx, "{row}");
    assert_eq!(lost > 0, lossy, "{row}");
    assert!(
        s["p99_ns"].as_f64().unwrap() >= s["p50_ns"].as_f64().unwrap(),
        "{row}"
    );
    let shown = ok(strobe()
        .args(["runs", "--db", db, "show", &row["id"].to_string()])
        .output()
        .unwrap());
    assert!(!shown.contains("took 0.0 s"), "{shown}");
}
