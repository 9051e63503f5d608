//! Bad input gets a message naming the file, line and field and what is accepted, with exit
//! code 2 and no panic; Ctrl-C ends a run cleanly with its results.

mod common;
use common::*;

use std::process::Output;

const GOOD_STACK: &str = r#"[[ports]]
name = "tx"
location = "pcap:x.pcap"

[[flows]]
name = "f"
tx = "tx"
size = 128
duration = { fixed_packets = { packets = 10 } }
[[flows.packet]]
ethernet = { src = "02:00:00:00:00:01" }
[[flows.packet]]
ipv4 = { src = "198.18.0.1", dst = "198.18.1.1" }
"#;

/// Runs `strobe gen` on a scenario made from GOOD_STACK with one substitution.
fn gen_with(dir: &Scratch, from: &str, to: &str) -> Output {
    assert!(GOOD_STACK.contains(from), "test bug: {from}");
    let path = dir.path("s.toml");
    std::fs::write(&path, GOOD_STACK.replacen(from, to, 1)).unwrap();
    strobe()
        .arg("gen")
        .arg(&path)
        .current_dir(&dir.0)
        .output()
        .unwrap()
}

fn bad_input(out: Output, must_contain: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "exit code; stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "panic: {stderr}");
    for s in must_contain {
        assert!(stderr.contains(s), "`{s}` missing from: {stderr}");
    }
}

#[test]
fn the_good_stack_runs() {
    let dir = Scratch::new("good");
    let out = gen_with(&dir, "", "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn scenario_errors_name_file_line_field_and_what_is_accepted() {
    let dir = Scratch::new("errors");
    bad_input(
        gen_with(&dir, "198.18.0.1\"", "198.18.0.300\""),
        &[
            "s.toml:13:",
            "flows[0].packet[1].ipv4.src",
            "198.18.0.300",
            "dotted quad",
        ],
    );
    bad_input(
        gen_with(
            &dir,
            "dst = \"198.18.1.1\"",
            "dst = \"198.18.1.1\", tll = 4",
        ),
        &["s.toml:13:", "unknown key `tll`", "time_to_live"],
    );
    bad_input(
        gen_with(
            &dir,
            "dst = \"198.18.1.1\"",
            "dst = \"198.18.1.1\", time_to_live = 300",
        ),
        &["s.toml:13:", "ipv4.time_to_live", "0 to 255"],
    );
    bad_input(
        gen_with(&dir, "tx = \"tx\"", "tx = \"nope\""),
        &["s.toml:7:", "unknown port `nope`", "defined ports: tx"],
    );
    bad_input(
        gen_with(&dir, "size = 128", "size = 128\nrate = \"10 furlongs\""),
        &["s.toml:9:", "flows[0].rate", "furlongs", "kpps"],
    );
    bad_input(
        gen_with(&dir, "[[flows.packet]]\nipv4", "[[flows.packet]]\nipv5"),
        &["s.toml:13:", "unknown header `ipv5`", "ipv4"],
    );
    bad_input(
        gen_with(&dir, "name = \"tx\"", "name = = \"tx\""),
        &["s.toml:2:", "invalid TOML"],
    );
    // A frame too small for its headers.
    bad_input(
        gen_with(&dir, "size = 128", "size = 30"),
        &["s.toml", "flows[0]", "size"],
    );
    bad_input(
        gen_with(&dir, "duration = { fixed_packets = { packets = 10 } }", ""),
        &["never ends", "--count"],
    );
    // Rates no schedule can meet: above the port's line rate (10 Gbit/s by default).
    bad_input(
        gen_with(&dir, "size = 128", "size = 64\nrate = { pps = 20000000 }"),
        &[
            "s.toml:9:",
            "flows[0].rate",
            "13.44 Gbit/s",
            "line rate of 10 Gbit/s",
            "speed",
        ],
    );
    bad_input(
        gen_with(&dir, "size = 128", "size = 128\nrate = { gbps = 40 }"),
        &["s.toml:9:", "line rate"],
    );
}

#[test]
fn command_line_errors() {
    let dir = Scratch::new("cli-errors");
    let gen = |args: &[&str]| {
        strobe()
            .arg("gen")
            .args(args)
            .current_dir(&dir.0)
            .output()
            .unwrap()
    };
    bad_input(
        gen(&["--port", "null", "--udp", "198.18.0.1:1-198.18.1.1"]),
        &["--udp", "SRC_IP:PORT-DST_IP:PORT"],
    );
    bad_input(
        gen(&[
            "--port",
            "null",
            "--udp",
            "198.18.0.1:1-198.18.1.1:2",
            "--rate",
            "5furlongs",
        ]),
        &["--rate", "mpps"],
    );
    bad_input(
        gen(&[
            "--port",
            "null",
            "--udp",
            "198.18.0.1:1-198.18.1.1:2",
            "--vary",
            "ip.srcx=inc:1/1/1",
        ]),
        &["--vary", "srcx", "accepted"],
    );
    bad_input(
        gen(&[
            "--port",
            "bogus:x",
            "--udp",
            "198.18.0.1:1-198.18.1.1:2",
            "--count",
            "1",
        ]),
        &["bogus:x", "pcap:FILE"],
    );
    bad_input(gen(&["missing.toml"]), &["missing.toml"]);
    bad_input(
        gen(&[
            "--port",
            "null",
            "--udp",
            "198.18.0.1:1-198.18.1.1:2",
            "--rate",
            "20mpps",
            "--count",
            "1",
        ]),
        &["--rate", "line rate"],
    );
    bad_input(gen(&[]), &["nothing to send"]);
    let analyze = |args: &[&str]| {
        strobe()
            .arg("analyze")
            .args(args)
            .current_dir(&dir.0)
            .output()
            .unwrap()
    };
    std::fs::write(dir.path("junk.pcap"), b"not a capture at all").unwrap();
    bad_input(
        analyze(&["junk.pcap"]),
        &["junk.pcap", "not a readable pcap"],
    );
    bad_input(
        analyze(&["junk.pcap", "--expect", "cbr:fast"]),
        &["--expect", "cbr:100kpps"],
    );
    bad_input(
        analyze(&["junk.pcap", "--floor", "2us/1us"]),
        &["--floor", "--expect"],
    );
    bad_input(
        analyze(&["junk.pcap", "--expect", "poisson:1kpps", "--floor", "fast"]),
        &["--floor fast", "auto"],
    );
    bad_input(
        analyze(&[
            "junk.pcap",
            "--expect",
            "poisson:1kpps",
            "--tolerance",
            "soon",
        ]),
        &["--tolerance soon"],
    );
    bad_input(
        analyze(&["junk.pcap", "--expect", "sometimes@1kpps"]),
        &["--expect sometimes@1kpps"],
    );
}

/// Starts `cmd`, sends it `signal` 1.5 s later, and waits for it.
fn signalled_after_1_5_s(cmd: &mut std::process::Command, signal: libc::c_int) -> Output {
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    // SAFETY: kill(2) on the PID of the child this test started.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, signal) };
    assert_eq!(rc, 0);
    child.wait_with_output().unwrap()
}

/// Starts `cmd`, sends it SIGINT (as Ctrl-C does) 1.5 s later, and waits for it.
fn interrupted_after_1_5_s(cmd: &mut std::process::Command) -> Output {
    signalled_after_1_5_s(cmd, libc::SIGINT)
}

/// A run a signal stopped: exit 128 + the signal, its name on stderr, no panic; returns stdout.
fn stopped_by(out: Output, signal: libc::c_int, name: &str) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(128 + signal),
        "{name}; stderr: {stderr}"
    );
    assert!(stderr.contains(&format!("stopped by {name}")), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn ctrl_c_term_and_hup_stop_cleanly_and_still_write_every_output() {
    let dir = Scratch::new("signals");
    for (signal, name) in [
        (libc::SIGINT, "SIGINT"),
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGHUP, "SIGHUP"),
    ] {
        let (json, csv) = (
            dir.path(&format!("{name}.json")),
            dir.path(&format!("{name}.csv")),
        );
        let out = signalled_after_1_5_s(
            strobe()
                .args([
                    "gen",
                    "--port",
                    "null",
                    "--udp",
                    "198.18.0.1:1000-198.18.1.1:2000",
                ])
                .args(["--rate", "10kpps", "--duration", "120s"])
                .args(["--json", &json, "--csv", &csv]),
            signal,
        );
        let stdout = stopped_by(out, signal, name);
        assert!(
            stdout.contains("stopped before the end"),
            "{name}: {stdout}"
        );
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let frames = report["ports"][0]["frames_tx"].as_u64().unwrap();
        assert!(
            frames > 100,
            "{name}: only {frames} frames before the signal"
        );
        assert_eq!(report["ports"][0]["stopped_early"], true);
        let csv = std::fs::read_to_string(&csv).unwrap();
        assert!(
            csv.lines().nth(1).unwrap().starts_with("udp"),
            "{name}: {csv}"
        );
    }
}

#[test]
fn a_closed_output_pipe_ends_quietly() {
    let dir = Scratch::new("pipe");
    let pcap = dir.path("p.pcap");
    gen_udp(&format!("pcap:{pcap}"), &["--count", "1000", "--quiet"]);
    let mut child = strobe()
        .args(["analyze", &pcap])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Read one line, then close our end, as `| head -1` does.
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    drop(out);
    let result = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn latency_option_errors() {
    let dir = Scratch::new("latency-errors");
    let run = |args: &[&str]| strobe().args(args).current_dir(&dir.0).output().unwrap();
    let udp = [
        "--port",
        "null",
        "--udp",
        "198.18.0.1:1-198.18.1.1:2",
        "--count",
        "1",
    ];
    std::fs::write(dir.path("cal.json"), r#"{"kind": "something else"}"#).unwrap();
    bad_input(
        run(&[&["gen"][..], &udp, &["--calibration", "cal.json"]].concat()),
        &[
            "--calibration",
            "cal.json",
            "not a strobe calibration",
            "strobe calibrate",
        ],
    );
    std::fs::write(
        dir.path("cal.json"),
        r#"{"kind": "strobe-calibration", "version": 1, "offset_ns": -3}"#,
    )
    .unwrap();
    bad_input(
        run(&[&["gen"][..], &udp, &["--calibration", "cal.json"]].concat()),
        &["offset_ns", "non-negative"],
    );
    bad_input(
        run(&[&["gen"][..], &udp, &["--calibration", "missing.json"]].concat()),
        &["missing.json", "cannot read"],
    );
    std::fs::write(dir.path("s.toml"), GOOD_STACK).unwrap();
    bad_input(
        run(&["gen", "s.toml", "--rates", "1kpps,2kpps"]),
        &["--rates", "one-flow"],
    );
    bad_input(
        run(&[
            &["gen"][..],
            &udp,
            &["--rates", "1kpps", "--latency-html", "x.html"],
        ]
        .concat()),
        &["--rates", "--hdr-log"],
    );
    bad_input(
        run(&["reflect", "bogus:x", "--duration", "1s"]),
        &["bogus:x", "accepted forms"],
    );
    bad_input(run(&["reflect", "null"]), &["null", "cannot receive"]);
    bad_input(
        run(&["reflect", "lab:rx", "--lab", "nosuchlab"]),
        &["nosuchlab", "strobe lab up"],
    );
}

#[test]
fn ctrl_c_ends_a_sweep_with_the_steps_so_far() {
    let dir = Scratch::new("sigint-sweep");
    let (json, csv) = (dir.path("sweep.json"), dir.path("sweep.csv"));
    let out = interrupted_after_1_5_s(
        strobe()
            .args([
                "gen",
                "--port",
                "null",
                "--udp",
                "198.18.0.1:1000-198.18.1.1:2000",
            ])
            .args([
                "--duration",
                "120s",
                "--rates",
                "10kpps,20kpps,30kpps",
                "-q",
            ])
            .args(["--json", &json, "--sweep-csv", &csv]),
    );
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let stdout = stopped_by(out, libc::SIGINT, "SIGINT");
    assert!(
        stderr.contains("the sweep ends after 1 of 3 steps"),
        "{stderr}"
    );
    assert!(stdout.contains("latency against load"), "{stdout}");
    let document: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let steps = &document["steps"];
    assert_eq!(steps.as_array().unwrap().len(), 1, "{document}");
    assert_eq!(steps[0]["result"]["ports"][0]["stopped_early"], true);
    assert!(std::fs::read_to_string(&csv)
        .unwrap()
        .starts_with("offered_pps"));
}

#[test]
fn a_sweep_without_receiver_runs_every_rate() {
    // No receive port: nothing to measure, but each step runs and the sweep says so.
    let dir = Scratch::new("sweep-null");
    let out = gen_udp_command("null")
        .args(["--count", "100", "--rates", "10kpps,20kpps", "-q"])
        .current_dir(&dir.0)
        .output()
        .unwrap();
    let text = ok(out);
    assert_eq!(text.matches("== offered load").count(), 2, "{text}");
    assert!(
        text.contains("20kpps  (nothing received: no latency)"),
        "{text}"
    );
}

/// Sends `signal` to the child `pid`.
fn send(pid: u32, signal: libc::c_int) {
    // SAFETY: kill(2) on the PID of a child this test started.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, signal) }, 0);
}

#[test]
fn a_second_signal_ends_the_drain_at_once_and_the_results_are_still_written() {
    // Needs root: a lab of its own.
    let lab = common::lab::TestLab::up("d", "cable");
    let dir = Scratch::new("drain");
    let (json, csv) = (dir.path("drain.json"), dir.path("drain.csv"));
    let child = lab
        .gen_command("lab:tx", "lab:rx")
        .args(["--rate", "10kpps", "--duration", "120s", "--drain", "60s"])
        .args(["--json", &json, "--csv", &csv, "--max-loss", "0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let first = std::time::Instant::now();
    send(child.id(), libc::SIGINT);
    std::thread::sleep(std::time::Duration::from_millis(1000));
    send(child.id(), libc::SIGTERM);
    let out = child.wait_with_output().unwrap();
    let took = first.elapsed();
    assert!(
        took < std::time::Duration::from_secs(20),
        "the 60 s drain was not cut short: {took:?}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    stopped_by(out, libc::SIGINT, "SIGINT");
    assert!(stderr.contains("SIGTERM: ending the drain now"), "{stderr}");
    // The loss of a stopped run is not final: --max-loss leaves it (exit 130, not 1).
    assert!(
        stderr.contains("--max-loss not checked: SIGINT stopped the run"),
        "{stderr}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(
        report["flows"][0]["frames_rx"].as_u64().unwrap() > 100,
        "{report}"
    );
    assert!(
        report["drain_ns"].as_u64().unwrap() < 20_000_000_000,
        "{report}"
    );
    assert!(std::fs::read_to_string(&csv).unwrap().lines().count() == 2);
}

#[test]
fn sigterm_ends_the_reflector_with_its_report() {
    // Needs root: a lab of its own.
    let lab = common::lab::TestLab::up("f", "cable");
    let dir = Scratch::new("reflect-term");
    let json = dir.path("reflect.json");
    let out = signalled_after_1_5_s(
        strobe().args(["reflect", "lab:rx", "--lab", &lab.prefix, "--json", &json]),
        libc::SIGTERM,
    );
    let stdout = stopped_by(out, libc::SIGTERM, "SIGTERM");
    assert!(stdout.contains("reflected"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["reflected"], 0, "{report}");
}

#[test]
fn sigterm_ends_the_demo_and_removes_its_lab() {
    // Needs root; the demo's lab has a fixed prefix (strobe-demo).
    let dir = Scratch::new("demo-sigterm");
    let db = dir.path("runs.db");
    let child = strobe()
        .args(["demo", "--seconds", "20", "--db", &db])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Long enough for the lab to be up and the first part to be running.
    std::thread::sleep(std::time::Duration::from_secs(6));
    send(child.id(), libc::SIGTERM);
    let out = child.wait_with_output().unwrap();
    let stdout = stopped_by(out, libc::SIGTERM, "SIGTERM");
    assert!(stdout.contains("lab `strobe-demo` removed"), "{stdout}");
    assert!(!stdout.contains("== 3."), "the demo went on: {stdout}");
    assert!(!demo_lab_is_up(), "the demo's lab was left behind");
    // The part the signal stopped is in the history, saying so.
    let list = ok(strobe()
        .args(["runs", "--db", &db, "list", "--json"])
        .output()
        .unwrap());
    let list: serde_json::Value = serde_json::from_str(&list).unwrap();
    let runs = list["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{list}");
    assert_eq!(runs[0]["outcome"], "stopped by SIGTERM", "{list}");
}

fn demo_lab_is_up() -> bool {
    let netns = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&netns.stdout).contains("strobe-demo-")
}

#[test]
fn every_output_path_is_checked_before_the_first_frame() {
    let dir = Scratch::new("outputs-before");
    std::fs::create_dir(dir.path("a-folder")).unwrap();
    let udp = [
        "--port",
        "null",
        "--udp",
        "198.18.0.1:1-198.18.1.1:2",
        "--rate",
        "1000",
        "--duration",
        "60s",
        "-q",
    ];
    let sweep = ["--rates", "1000"];
    for (flag, extra) in [
        ("--csv", &[][..]),
        ("--latency-html", &[]),
        ("--latency-csv", &[]),
        ("--hdr-log", &[]),
        ("--sweep-csv", &sweep[..]),
        ("--sweep-svg", &sweep),
    ] {
        for path in ["/nonexistent/x.out", "a-folder"] {
            let started = std::time::Instant::now();
            let out = strobe()
                .arg("gen")
                .args(udp)
                .args(extra)
                .args([flag, path, "--json", "ok.json"])
                .current_dir(&dir.0)
                .output()
                .unwrap();
            assert!(
                started.elapsed() < std::time::Duration::from_secs(20),
                "{flag} {path}: the 60 s run went ahead"
            );
            bad_input(out, &[flag, path, "nothing was sent"]);
            assert!(!dir.0.join("ok.json").exists(), "{flag}: ok.json written");
        }
    }
    let out = strobe()
        .arg("gen")
        .args(udp)
        .args(["--json", "/nonexistent/x.json", "--csv", "ok.csv"])
        .current_dir(&dir.0)
        .output()
        .unwrap();
    bad_input(out, &["--json", "/nonexistent/x.json", "No such file"]);
    assert!(!dir.0.join("ok.csv").exists());
    let run = |args: &[&str]| strobe().args(args).current_dir(&dir.0).output().unwrap();
    bad_input(
        run(&["reflect", "null", "--json", "/nonexistent/r.json"]),
        &["--json", "/nonexistent/r.json"],
    );
    bad_input(
        run(&["calibrate", "--out", "a-folder"]),
        &["--out", "a-folder", "folder"],
    );
}

#[test]
fn an_output_that_fails_at_the_end_keeps_none_of_the_others_from_being_written() {
    // /dev/full opens for writing, then every write fails with ENOSPC.
    let dir = Scratch::new("outputs-after");
    let out = gen_udp_command("null")
        .args(["--count", "100", "-q"])
        .args(["--json", "/dev/full", "--csv", "ok.csv"])
        .args(["--latency-csv", "/dev/full", "--hdr-log", "ok.hlog"])
        .current_dir(&dir.0)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr.matches("cannot write /dev/full").count(),
        2,
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(std::fs::read_to_string(dir.path("ok.csv"))
        .unwrap()
        .starts_with("flow,"));
    assert!(dir.0.join("ok.hlog").exists());
}

/// A minimal pcapng: section header, one Ethernet interface, two 60-byte frames.
fn small_pcapng() -> Vec<u8> {
    let mut v = Vec::new();
    let mut block = |kind: u32, body: &[u8]| {
        let total = (12 + body.len()) as u32;
        v.extend(kind.to_le_bytes());
        v.extend(total.to_le_bytes());
        v.extend(body);
        v.extend(total.to_le_bytes());
    };
    block(
        0x0a0d_0d0a,
        &[&0x1a2b_3c4du32.to_le_bytes()[..], &[1, 0, 0, 0], &[0xff; 8]].concat(),
    );
    block(
        1,
        &[&1u16.to_le_bytes()[..], &[0, 0], &0u32.to_le_bytes()].concat(),
    );
    let frame = [0x5au8; 60];
    for ts_us in [1000u32, 2000] {
        block(
            6,
            &[
                &0u32.to_le_bytes()[..],
                &0u32.to_le_bytes(),
                &ts_us.to_le_bytes(),
                &60u32.to_le_bytes(),
                &60u32.to_le_bytes(),
                &frame,
            ]
            .concat(),
        );
    }
    v
}

#[test]
fn analyze_names_the_file_the_offset_and_what_is_wrong_in_a_broken_capture() {
    let dir = Scratch::new("broken-captures");
    let good = dir.path("good.pcap");
    gen_udp(
        &format!("pcap:{good}"),
        &["--count", "3", "--size", "100", "-q"],
    );
    let pcap = std::fs::read(&good).unwrap();
    let ng = small_pcapng();
    let mut oversized = pcap.clone();
    oversized[24 + 8..24 + 12].copy_from_slice(&0x7fff_fff0u32.to_le_bytes());
    let mut bad_nanoseconds = pcap.clone();
    bad_nanoseconds[136 + 4..136 + 8].copy_from_slice(&2_000_000_000u32.to_le_bytes());
    let mut ng_oversized = ng.clone();
    ng_oversized[48 + 4..48 + 8].copy_from_slice(&0x1000_0000u32.to_le_bytes());
    let cases: [(&str, Vec<u8>, &[&str]); 8] = [
        ("empty.pcap", vec![], &["empty"]),
        (
            "short-header.pcap",
            pcap[..10].to_vec(),
            &["offset 0", "truncated file header", "10 of its 24"],
        ),
        (
            "short-record-header.pcap",
            pcap[..24 + 8].to_vec(),
            &["offset 24", "record 0", "8 of 16"],
        ),
        (
            "short-record.pcap",
            pcap[..24 + 16 + 20].to_vec(),
            &["offset 24", "record 0", "truncated", "96 bytes", "20 left"],
        ),
        (
            "oversized.pcap",
            oversized,
            &["offset 24", "record 0", "2147483632", "snap length"],
        ),
        (
            "bad-nanoseconds.pcap",
            bad_nanoseconds,
            &["offset 136", "record 1", "ts_nanosecond"],
        ),
        (
            "short-block.pcapng",
            ng[..48 + 20].to_vec(),
            &["offset 48", "block 2", "claims 92 bytes", "20 left"],
        ),
        (
            "oversized-block.pcapng",
            ng_oversized,
            &["offset 48", "block 2", "268435456"],
        ),
    ];
    let analyze = |file: &str| {
        strobe()
            .args(["analyze", file])
            .current_dir(&dir.0)
            .output()
            .unwrap()
    };
    for (file, bytes, what) in cases {
        std::fs::write(dir.path(file), bytes).unwrap();
        bad_input(analyze(file), &[&[file][..], what].concat());
    }
    std::fs::create_dir(dir.path("folder.pcap")).unwrap();
    bad_input(analyze("folder.pcap"), &["folder.pcap", "folder"]);
    // The intact ones still read.
    std::fs::write(dir.path("good.pcapng"), &ng).unwrap();
    ok(analyze("good.pcapng"));
    ok(analyze("good.pcap"));
}

#[test]
fn messages_say_what_an_option_takes() {
    let dir = Scratch::new("messages");
    let run = |args: &[&str]| strobe().args(args).current_dir(&dir.0).output().unwrap();
    let udp = [
        "gen",
        "--port",
        "null",
        "--udp",
        "198.18.0.1:1-198.18.1.1:2",
    ];
    // Negative durations, rates and counts: what the option takes, not clap's `-- -5` tip.
    for (flag, value) in [
        ("--duration", "-5s"),
        ("--rate", "-5kpps"),
        ("--drain", "-1s"),
        ("--late-tolerance", "-1us"),
        ("--rates", "-2kpps"),
        ("--count", "-5"),
    ] {
        let out = run(&[&udp[..], &[flag, value]].concat());
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(!stderr.contains("-- -"), "{flag}: {stderr}");
        bad_input(out, &[flag, value, "positive"]);
    }
    for args in [
        &["reflect", "null", "--duration", "-5s"][..],
        &["reflect", "null", "--count", "-5"],
        &["calibrate", "--rate", "-1kpps"],
        &["demo", "--seconds", "-3"],
    ] {
        let out = run(args);
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(!stderr.contains("-- -"), "{args:?}: {stderr}");
        bad_input(out, &[args[args.len() - 2], "positive"]);
    }
    let out = run(&[&udp[..], &["--max-loss", "-1"]].concat());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("-- -"));
    bad_input(out, &["--max-loss", "from 0 to 100"]);
    // A port speed of 0 says what speed takes.
    bad_input(
        gen_with(
            &dir,
            "location = \"pcap:x.pcap\"",
            "location = \"pcap:x.pcap\"\nspeed = 0",
        ),
        &["ports[0].speed", "speed = \"10gbps\""],
    );
    // An enormous rate prints readably and names the largest rate accepted.
    let out = gen_with(&dir, "size = 128", "size = 128\nrate = { pps = 1e308 }");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!stderr.contains("0000000000"), "{stderr}");
    bad_input(out, &["flows[0].rate", "1e308", "to 1e15"]);
    // analyze --bins 0 is refused, not taken as 1.
    let pcap = dir.path("c.pcap");
    gen_udp(&format!("pcap:{pcap}"), &["--count", "10", "-q"]);
    bad_input(
        run(&["analyze", &pcap, "--bins", "0"]),
        &["--bins", "at least 1"],
    );
    // Two --vary on one field: refused, both named.
    bad_input(
        run(&[
            &udp[..],
            &["--count", "3", "--vary", "ip.src=inc:198.18.0.1/0.0.0.1/5"],
            &["--vary", "ipv4.src=values:198.18.0.7"],
        ]
        .concat()),
        &[
            "--vary",
            "ip.src=inc:198.18.0.1/0.0.0.1/5",
            "ipv4.src=values:198.18.0.7",
            "both",
        ],
    );
    // reflect --count 0 is refused before any port is opened.
    bad_input(
        run(&["reflect", "null", "--count", "0"]),
        &["--count 0", "at least 1"],
    );
}

#[test]
fn a_pcap_trace_larger_than_the_free_space_is_refused_before_the_run() {
    let dir = Scratch::new("pcap-space");
    let started = std::time::Instant::now();
    bad_input(
        gen_with(&dir, "packets = 10", "packets = 9223372036854775807"),
        &[
            "pcap:x.pcap",
            "more than 16.00 EiB",
            "9223372036854775807 frames",
            "free",
            "fixed_packets",
        ],
    );
    assert!(!dir.0.join("x.pcap").exists(), "the trace was started");
    // A duration is estimated from the rate: 10 Gbit/s of 64-byte frames for a day is
    // about 100 TiB.
    let out = gen_udp_command("pcap:d.pcap")
        .args(["--rate", "10gbps", "--duration", "86400s"])
        .current_dir(&dir.0)
        .output()
        .unwrap();
    bad_input(out, &["pcap:d.pcap", "TiB", "free", "--duration"]);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert!(!dir.0.join("d.pcap").exists(), "the trace was started");
    // An unpaced run's real-time limit does not bound a trace.
    let out = gen_udp_command("pcap:m.pcap")
        .args(["--rate", "max", "--duration", "1s"])
        .current_dir(&dir.0)
        .output()
        .unwrap();
    bad_input(out, &["--rate max", "--duration", "pcap:", "--count"]);
    assert!(!dir.0.join("m.pcap").exists(), "the trace was started");
}

#[test]
fn a_full_disk_stops_a_pcap_run_with_its_results() {
    // /dev/full takes the file's creation, then fails every write with ENOSPC.
    let dir = Scratch::new("pcap-full");
    let json = dir.path("r.json");
    let out = gen_udp_command("pcap:/dev/full")
        .args(["--count", "200000", "-q", "--json", &json])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.contains("/dev/full") && stderr.contains("No space left"),
        "{stderr}"
    );
    assert!(stdout.contains("stopped by an error"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let port = &report["ports"][0];
    assert_eq!(port["stopped_early"], true, "{port}");
    assert!(
        port["failure"].as_str().unwrap().contains("No space left"),
        "{port}"
    );
    let sent = port["frames_tx"].as_u64().unwrap();
    assert!(sent > 0 && sent < 200_000, "{port}");
}

#[test]
fn a_reflector_whose_interface_goes_away_keeps_its_counts_and_says_so() {
    use std::io::{BufRead, BufReader, Read};
    // Needs root: a lab of its own, whose reflecting interface the test deletes.
    let lab = common::lab::TestLab::up("rff", "cable");
    let dir = Scratch::new("reflect-fail");
    let json = dir.path("reflect.json");
    let mut child = strobe()
        .args(["reflect", "lab:rx", "--lab", &lab.prefix, "--json", &json])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.contains("reflecting on"), "{line}");
    ok(lab
        .gen_command("lab:tx", "lab:tx")
        .args(["--rate", "10kpps", "--count", "1000"])
        .output()
        .unwrap());
    let deleted = std::time::Instant::now();
    common::lab::sh_in(&lab.ns("rx"), "ip link del rx0");
    // A reflector that misses the loss of its interface waits forever: ended here instead.
    while child.try_wait().unwrap().is_none() {
        if deleted.elapsed() > std::time::Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the reflector went on for 30 s after its interface was gone");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let mut stderr = line;
    err.read_to_string(&mut stderr).unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.contains("stopped early") && stderr.contains("went away"),
        "{stderr}"
    );
    assert!(stdout.contains("stopped by an error"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["reflected"], 1000, "{report}");
    assert!(
        report["failure"].as_str().unwrap().contains("went away"),
        "{report}"
    );
}

#[test]
fn a_receiver_whose_interface_goes_away_keeps_its_counts_and_stops_the_run() {
    receiver_goes_away("rxf", "lab:rx");
}

#[test]
fn a_kernel_counter_whose_interface_goes_away_keeps_its_counts_and_stops_the_run() {
    receiver_goes_away("rxk", "lab:rx@xdp-count");
}

fn receiver_goes_away(lab_name: &str, rx_port: &str) {
    // Needs root: a lab of its own, whose receiving interface the test deletes. The bridge
    // keeps the transmit side up when the receiving side goes.
    let lab = common::lab::TestLab::up(lab_name, "bridge");
    let dir = Scratch::new(lab_name);
    let (json, csv) = (dir.path("rxfail.json"), dir.path("rxfail.csv"));
    let child = lab
        .gen_command("lab:tx", rx_port)
        .args(["--rate", "10kpps", "--duration", "60s"])
        .args(["--json", &json, "--csv", &csv])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    lab.wait_for_rx_frames(2000);
    let deleted = std::time::Instant::now();
    common::lab::sh_in(&lab.ns("rx"), "ip link del rx0");
    let out = child.wait_with_output().unwrap();
    // The 60 s schedule ends early: nobody counts what it would send.
    assert!(
        deleted.elapsed() < std::time::Duration::from_secs(30),
        "the run went on after its receiver was gone: {:?}",
        deleted.elapsed()
    );
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.contains("stopped receiving") && stderr.contains("rx0"),
        "{stderr}"
    );
    assert!(
        stdout.contains("stopped receiving by an error") && stdout.contains("loss is not final"),
        "{stdout}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rx = &report["rx_ports"][0];
    assert!(
        rx["failure"].as_str().unwrap().contains("went away"),
        "{rx}"
    );
    assert!(rx["frames_rx"].as_u64().unwrap() >= 2000, "{rx}");
    let failures = report["failures"].as_array().unwrap();
    assert!(
        failures.iter().any(|f| f["kind"] == "receive_port_stopped"
            && f["text"]
                .as_str()
                .unwrap()
                .contains("results are incomplete")),
        "{report}"
    );
    let (tx, flow) = (&report["ports"][0], &report["flows"][0]);
    assert_eq!(tx["stopped_early"], true, "{tx}");
    let (sent, received) = (
        tx["frames_tx"].as_u64().unwrap(),
        flow["frames_rx"].as_u64().unwrap(),
    );
    assert!(received >= 2000 && sent >= received, "{flow}");
    assert_eq!(
        flow["latency"]["raw"]["count"].as_u64().unwrap(),
        received,
        "every frame counted has its latency: {flow}"
    );
    assert_eq!(std::fs::read_to_string(&csv).unwrap().lines().count(), 2);
}

/// Runs `strobe ARGS` on a pseudo-terminal (util-linux `script`), returns what it showed.
fn on_a_terminal(args: &str) -> String {
    let command = format!("{} {args}", env!("CARGO_BIN_EXE_strobe"));
    let out = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .output()
        .expect("script (util-linux) runs a command on a pseudo-terminal");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_progress_bar_with_percentage_and_time_left_on_a_terminal_only() {
    let udp = "gen --port null --udp 198.18.0.1:1-198.18.1.1:2 --rate 1000";
    for end in ["--count 2500", "--duration 2.5s"] {
        let shown = on_a_terminal(&format!("{udp} {end}"));
        assert!(
            shown.contains("% ") && shown.contains("s left"),
            "{end}: no percentage and time left in: {shown}"
        );
    }
    // An unpaced run with a time limit counts time.
    let shown =
        on_a_terminal("gen --port null --udp 198.18.0.1:1-198.18.1.1:2 --rate max --duration 2.5s");
    assert!(shown.contains("s left"), "{shown}");
    // Not on a pipe: plain status lines only.
    let out = strobe()
        .args(udp.split(' '))
        .args(["--count", "2500"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("pps"), "no status line: {stderr}");
    // (A run that falls behind says "96.8 % of the asked rate": no '%' test.)
    assert!(
        !stderr.contains("s left") && !stderr.contains('░') && !stderr.contains('█'),
        "{stderr}"
    );
}

#[test]
fn a_hung_up_terminal_still_gets_the_results_written_and_exit_129() {
    // strobe runs on a pseudo-terminal (util-linux `script`), which then goes away: every
    // write to the terminal fails from then on (EIO), and SIGHUP comes.
    let dir = Scratch::new("hangup");
    let (json, err, pid, rc) = (
        dir.path("r.json"),
        dir.path("err.txt"),
        dir.path("pid"),
        dir.path("rc"),
    );
    let inner = format!(
        "trap '' HUP; {} gen --port null --udp 198.18.0.1:1-198.18.1.1:2 --rate 1000 \
         --duration 60s --json {json} 2>{err} & echo $! > {pid}; wait $!; echo $? > {rc}",
        env!("CARGO_BIN_EXE_strobe")
    );
    let mut script = std::process::Command::new("script")
        .args(["-qec", &inner, "/dev/null"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("script (util-linux) runs a command on a pseudo-terminal");
    std::thread::sleep(std::time::Duration::from_millis(2000));
    script.kill().unwrap();
    script.wait().unwrap();
    let strobe_pid: u32 = std::fs::read_to_string(&pid)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    send(strobe_pid, libc::SIGHUP);
    let started = std::time::Instant::now();
    while !std::path::Path::new(&rc).exists()
        && started.elapsed() < std::time::Duration::from_secs(30)
    {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let stderr = std::fs::read_to_string(&err).unwrap_or_default();
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(&rc).unwrap().trim(),
        "129",
        "{stderr}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["ports"][0]["stopped_early"], true);
}

#[test]
fn sigterm_ends_calibrate_without_a_calibration_and_removes_its_lab() {
    // Needs root; calibrate's own lab has a fixed prefix (strobe-cal).
    let dir = Scratch::new("calibrate-term");
    let out_file = dir.path("cal.json");
    let child = strobe()
        .args([
            "calibrate",
            "--rate",
            "10kpps",
            "--count",
            "10000000",
            "--out",
            &out_file,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(5));
    send(child.id(), libc::SIGTERM);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let stdout = stopped_by(out, libc::SIGTERM, "SIGTERM");
    assert!(stdout.contains("stopped before the end"), "{stdout}");
    assert!(
        stderr.contains("the calibration was not stored"),
        "{stderr}"
    );
    assert!(!std::path::Path::new(&out_file).exists());
    let netns = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap();
    let netns = String::from_utf8_lossy(&netns.stdout);
    assert!(!netns.contains("strobe-cal-"), "{netns}");
}

#[test]
fn the_html_report_alone_collects_latency_over_time_for_few_flows_only() {
    // Each interval copies every active flow's histogram in the receive loop.
    let dir = Scratch::new("html-flows");
    let flows: String = (0..65)
        .map(|i| {
            format!(
                "[[flows]]\nname = \"f{i}\"\ntx = \"p\"\nrate = {{ pps = 1000 }}\n\
                 duration = {{ fixed_packets = {{ packets = 1 }} }}\n\
                 [[flows.packet]]\nethernet = {{ src = \"02:00:00:00:00:01\" }}\n\
                 [[flows.packet]]\nipv4 = {{}}\n[[flows.packet]]\nudp = {{}}\n"
            )
        })
        .collect();
    let scenario = format!("[[ports]]\nname = \"p\"\nlocation = \"null\"\n\n{flows}");
    let file = dir.path("many.toml");
    std::fs::write(&file, scenario).unwrap();
    let html = dir.path("r.html");
    let out = strobe()
        .args(["gen", &file, "-q", "--latency-html", &html])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        err.contains("leaves out latency over time for more than 64 flows"),
        "{err}"
    );
}
