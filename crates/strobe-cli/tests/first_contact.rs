//! What a new user meets first: scenarios that cannot reach a DUT, runs that lose
//! everything or fall behind, the documented examples, and how times and rates are printed.
//! Live tests (root) build their own lab under a unique prefix and remove it.

mod common;
use common::lab::{Capture, TestLab};
use common::*;

use std::process::Output;

/// A one-flow UDP scenario on `location` whose outer Ethernet header is `ethernet`.
fn scenario_with(ethernet: &str, location: &str) -> String {
    format!(
        "[[ports]]\nname = \"p\"\nlocation = \"{location}\"\n\n[[flows]]\nname = \"f\"\ntx = \"p\"\n\
         duration = {{ fixed_packets = {{ packets = 10 }} }}\n\
         [[flows.packet]]\nethernet = {ethernet}\n[[flows.packet]]\n\
         ipv4 = {{ src = \"198.18.0.1\", dst = \"198.18.1.1\" }}\n[[flows.packet]]\n\
         udp = {{ src_port = 1000, dst_port = 2000 }}\n"
    )
}

fn run_scenario_text(dir: &Scratch, name: &str, text: &str, extra: &[&str]) -> Output {
    let path = dir.path(name);
    std::fs::write(&path, text).unwrap();
    strobe()
        .arg("gen")
        .arg(&path)
        .args(extra)
        .current_dir(&dir.0)
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn json_file(path: &str) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn zero_and_group_source_macs_are_refused_before_sending() {
    let dir = Scratch::new("fc-macs");
    // `ethernet = {}` leaves both MACs at zero: refused, naming the file, flow and field.
    let out = run_scenario_text(&dir, "zero.toml", &scenario_with("{}", "null"), &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("zero.toml: flow `f`: packet[0].ethernet.src")
            && err.contains("00:00:00:00:00:00"),
        "{err}"
    );
    // A group (multicast/broadcast) source, also inside a values list.
    for src in [
        "\"ff:ff:ff:ff:ff:ff\"",
        "{ values = [\"02:00:00:00:00:01\", \"01:00:5e:00:00:01\"] }",
    ] {
        let text = scenario_with(
            &format!("{{ src = {src}, dst = \"02:00:00:00:00:02\" }}"),
            "null",
        );
        let out = run_scenario_text(&dir, "group.toml", &text, &[]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{src}: {err}");
        assert!(
            err.contains("packet[0].ethernet.src") && err.contains("group"),
            "{src}: {err}"
        );
    }
    // The one-flow options name the flag.
    let out = gen_udp_command("null")
        .args(["--src-mac", "01:00:5e:00:00:01", "--count", "10"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--src-mac"), "{}", stderr(&out));
    // An all-zero destination is only warned about.
    let text = scenario_with("{ src = \"02:00:00:00:00:01\" }", "null");
    let out = run_scenario_text(&dir, "dst.toml", &text, &[]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("warning:") && err.contains("packet[0].ethernet.dst"),
        "{err}"
    );
}

#[test]
fn max_loss_is_checked_before_the_run() {
    for (extra, wanted) in [
        (&["--max-loss", "5"][..], "needs a port that receives"),
        (
            &["--rx", "null", "--max-loss", "101"][..],
            "not a loss percentage",
        ),
        (
            &["--rx", "null", "--max-loss", "five"][..],
            "not a loss percentage",
        ),
    ] {
        let out = gen_udp_command("null")
            .args(["--count", "10"])
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(wanted), "{extra:?}: {}", stderr(&out));
    }
}

#[test]
fn unset_macs_on_lab_ports_take_the_labs_and_the_two_port_example_counts_exactly() {
    let dir = Scratch::new("fc-two-ports");
    let lab = TestLab::up("e2", "router");
    let ingress = dir.path("ingress.pcap");
    let json = dir.path("two.json");
    let out = {
        let _capture = Capture::start(&lab.ns("dut"), "dut0", &ingress);
        strobe()
            .arg("gen")
            .arg(examples_dir().join("lab-two-ports.toml"))
            .args([
                "--lab",
                &lab.prefix,
                "-q",
                "--max-loss",
                "0",
                "--json",
                &json,
            ])
            .output()
            .unwrap()
    };
    ok(out);
    let r = json_file(&json);
    let flows = r["flows"].as_array().unwrap();
    let expected = [
        ("west-to-east", 10_000),
        ("east-to-west", 5_000),
        ("west-to-east-v6", 5_000),
    ];
    assert_eq!(flows.len(), expected.len(), "{r}");
    for (f, (name, frames)) in flows.iter().zip(expected) {
        assert_eq!(f["name"], name, "{f}");
        assert_eq!(f["frames_tx"], frames, "{f}");
        assert_eq!(f["frames_rx"], frames, "{f}");
        assert_eq!(f["loss"], 0, "{f}");
        assert_eq!(f["duplicates"], 0, "{f}");
        // Transmit and receive times are on one clock (CLOCK_REALTIME): the first frame
        // arrived after it was scheduled to leave, within a generous second.
        let ns = |key: &str| f[key].as_u64().unwrap_or_else(|| panic!("{key}: {f}"));
        let first_delay = ns("first_rx_ns") as i128 - ns("first_tx_ns") as i128;
        let last_delay = ns("last_rx_ns") as i128 - ns("last_tx_ns") as i128;
        for delay in [first_delay, last_delay] {
            assert!((0..1_000_000_000).contains(&delay), "{delay} ns: {f}");
        }
    }
    // At the router's near side, every frame from the generator carries the lab's MACs
    // (tx0 -> dut0), read by tshark.
    let rows = tshark(&ingress, &["eth.src", "eth.dst", "ip.src", "ipv6.src"]);
    let from_generator: Vec<_> = rows
        .iter()
        .filter(|r| r[2] == "198.18.0.1" || r[3] == "2001:2::1")
        .collect();
    assert_eq!(from_generator.len(), 15_000, "frames seen at dut0");
    assert!(
        from_generator
            .iter()
            .all(|r| r[0] == "02:53:54:00:00:01" && r[1] == "02:53:54:00:00:10"),
        "{:?}",
        from_generator.iter().find(|r| r[0] != "02:53:54:00:00:01")
    );
}

/// The first ```toml block after `## Full example` in SCENARIO.md.
fn scenario_md_full_example() -> String {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../strobe-model/SCENARIO.md"),
    )
    .unwrap();
    let section = &doc[doc.find("## Full example").expect("a Full example section")..];
    let start = section.find("```toml\n").expect("a toml block") + "```toml\n".len();
    let end = section[start..].find("```").unwrap() + start;
    section[start..end].to_string()
}

#[test]
fn scenario_md_full_example_runs_as_written() {
    let dir = Scratch::new("fc-full");
    let lab = TestLab::up("f1", "router");
    let json = dir.path("full.json");
    let started = std::time::Instant::now();
    let out = run_scenario_text(
        &dir,
        "full.toml",
        &scenario_md_full_example(),
        &["--lab", &lab.prefix, "-q", "--json", &json],
    );
    ok(out);
    // It ends by itself (3 s of schedule; generous for a loaded machine).
    assert!(started.elapsed().as_secs() < 60, "{:?}", started.elapsed());
    let r = json_file(&json);
    let flow = |name: &str| {
        r["flows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == name)
            .unwrap_or_else(|| panic!("no flow {name}: {r}"))
            .clone()
    };
    let poisson = flow("udp-poisson");
    assert_eq!(poisson["frames_tx"], 50_000, "{poisson}");
    assert_eq!(poisson["frames_rx"], 50_000, "{poisson}");
    assert_eq!(poisson["loss"], 0, "{poisson}");
    let steps = flow("v6-tcp-steps");
    assert!(steps["frames_tx"].as_u64().unwrap() > 10_000, "{steps}");
    assert_eq!(steps["frames_rx"], steps["frames_tx"], "{steps}");
    assert_eq!(steps["loss"], 0, "{steps}");
    let tagged = flow("tagged");
    assert_eq!(tagged["frames_tx"], 1_000, "{tagged}");
    assert!(tagged["frames_rx"].is_null(), "no receiver: {tagged}");
}

#[test]
fn a_run_that_loses_everything_says_so_and_max_loss_fails_it() {
    let dir = Scratch::new("fc-loss");
    let lab = TestLab::up("l1", "router");
    let json = dir.path("lost.json");
    // The router drops frames not addressed to its own MAC.
    let lost_run = |extra: &[&str]| {
        lab.gen_command("lab:tx", "lab:rx")
            .args([
                "--dst-mac",
                "02:00:00:00:00:99",
                "--rate",
                "20kpps",
                "--count",
                "2000",
            ])
            .args(["--json", &json])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = lost_run(&[]);
    let err = stderr(&out);
    assert!(
        out.status.success(),
        "without --max-loss the run succeeds: {err}"
    );
    let warning: Vec<_> = err.lines().filter(|l| l.contains("100 % loss")).collect();
    assert_eq!(warning.len(), 1, "one clear line: {err}");
    assert!(
        warning[0].contains("2000 frames") && warning[0].contains("MAC"),
        "{err}"
    );

    // The failing run must write its own results: nothing left from the first.
    std::fs::remove_file(&json).unwrap();
    let out = lost_run(&["--max-loss", "5%"]);
    let err = stderr(&out);
    // 3: a failed verdict, apart from strobe's own failures (1; docs/results.md).
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("more than --max-loss 5 %"), "{err}");
    // The results were still written.
    assert_eq!(json_file(&json)["flows"][0]["loss"], 2000);
}

#[test]
fn smooth_is_the_default_late_policy() {
    let help = ok(strobe().args(["gen", "--help"]).output().unwrap());
    let late = help
        .split("--late <LATE>")
        .nth(1)
        .and_then(|rest| rest.split("--late-tolerance").next())
        .unwrap_or_else(|| panic!("no --late in help:\n{help}"));
    assert!(late.contains("[default: smooth]"), "{late}");
}

/// A scenario of `packets` frames at 100 Mpps (10 ns a frame) on a null port described as
/// 400 Gbit/s: run one frame per hand-over (`--batch 1`), more than any core paces, however
/// fast the machine (the engine reads the clock and writes a frame for each).
fn beyond_any_core(dir: &Scratch, packets: u64) -> String {
    let scenario = dir.path("fast.toml");
    std::fs::write(
        &scenario,
        format!(
            "[[ports]]\nname = \"tx\"\nlocation = \"null\"\nspeed = \"400gbps\"\n\n\
             [[flows]]\nname = \"udp\"\ntx = \"tx\"\nsize = 64\nrate = \"100mpps\"\n\
             duration = {{ fixed_packets = {{ packets = {packets} }} }}\n\n\
             [[flows.packet]]\nipv4 = {{ src = \"198.18.0.1\", dst = \"198.18.1.1\" }}\n\
             [[flows.packet]]\nudp = {{ src_port = 1, dst_port = 2 }}\n"
        ),
    )
    .unwrap();
    scenario
}

/// A run that keeps falling behind its schedule is told so while it goes, well before it
/// ends (here: it is stopped once told; 10 s of schedule would take far longer).
#[test]
fn a_run_falling_behind_is_told_while_it_goes() {
    use std::io::{BufRead, BufReader};
    let dir = Scratch::new("fc-behind");
    let scenario = beyond_any_core(&dir, 1_000_000_000);
    let mut child = strobe()
        .args(["gen", &scenario, "--batch", "1"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let (lines_tx, lines) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let deadline = started + std::time::Duration::from_secs(20);
    let told = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) if line.contains("keeps falling behind its schedule") => break Some(line),
            Ok(line) => seen.push(line),
            Err(_) => break None,
        }
    };
    let after = started.elapsed();
    // SAFETY: kill(2) on the PID of the child this test started.
    let killed = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    assert_eq!(killed, 0);
    let status = child.wait().unwrap();
    let rest: Vec<String> = lines.iter().collect();
    let told = told.unwrap_or_else(|| panic!("not told within 20 s: {seen:?} {rest:?}"));
    assert!(
        told.starts_with("warning: port `tx`")
            && told.contains("of the 100.000 Mpps asked")
            && told.contains("--cores"),
        "{told}"
    );
    assert!(after.as_secs() < 20, "told after {after:?}");
    // Stopped by the signal (exit 128 + SIGINT), the run still reports.
    assert_eq!(status.code(), Some(128 + libc::SIGINT), "{rest:?}");
    assert!(
        rest.iter().any(|l| l.contains("stopped by SIGINT")),
        "{rest:?}"
    );
}

#[test]
fn a_run_that_cannot_keep_up_says_so_in_one_line_and_in_json() {
    let dir = Scratch::new("fc-shortfall");
    let json = dir.path("s.json");
    let scenario = beyond_any_core(&dir, 1_000_000);
    let out = strobe()
        .args(["gen", &scenario, "--batch", "1", "--json", &json])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let lines: Vec<_> = err.lines().filter(|l| l.contains("of the asked")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains("100.000 Mpps")
            && lines[0].contains("late")
            && lines[0].contains("lower the rate"),
        "{err}"
    );
    let port = &json_file(&json)["ports"][0];
    assert!(
        port["shortfall"]["kind"] == "rate_shortfall"
            && port["shortfall"]["text"]
                .as_str()
                .unwrap()
                .contains("of the asked"),
        "{port}"
    );
    assert!(
        port["elapsed_ns"].as_u64().unwrap() > port["planned_ns"].as_u64().unwrap(),
        "{port}"
    );
    // Times in prose carry a unit and are not raw nanosecond integers.
    let stdout = String::from_utf8_lossy(&out.stdout);
    for line in stdout
        .lines()
        .filter(|l| l.contains("late frames:") || l.contains("hand-over after deadline"))
    {
        let without_labels = line.replace("within 100 ns", "");
        assert!(!without_labels.contains(" ns"), "{line}");
        assert!(line.contains("µs") || line.contains(" ms"), "{line}");
    }
}

#[test]
fn sweep_shows_a_slow_sender_as_sent_below_offered_not_as_loss() {
    let dir = Scratch::new("fc-sweep");
    let lab = TestLab::up("s1", "cable");
    let (csv, json) = (dir.path("sweep.csv"), dir.path("sweep.json"));
    // 5 Mpps one frame at a time (one send call each) is far beyond one core on AF_PACKET,
    // on any machine: the sender falls behind, which the receiver must not be blamed for.
    let text = lab.gen_text(&[
        "--batch",
        "1",
        "--rates",
        "20kpps,5mpps",
        "--count",
        "10000",
        "--sweep-csv",
        &csv,
        "--json",
        &json,
    ]);
    assert!(
        text.contains("offered pps") && text.contains("sent pps") && text.contains("rcvd pps"),
        "{text}"
    );
    // Plain numbers only: a split on commas reads it.
    let sweep = std::fs::read_to_string(&csv).unwrap();
    let mut lines = sweep.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let column = |name: &str| {
        header
            .iter()
            .position(|&h| h == name)
            .unwrap_or_else(|| panic!("no {name} in {header:?}"))
    };
    let (offered, sent, received, loss) = (
        column("offered_pps"),
        column("sent_pps"),
        column("received_pps"),
        column("loss_pct"),
    );
    let rows: Vec<Vec<f64>> = lines
        .map(|l| l.split(',').map(|v| v.parse().unwrap()).collect())
        .collect();
    let document = json_file(&json);
    assert_eq!(rows.len(), 2, "{rows:?}");
    for (row, step) in rows.iter().zip(document["steps"].as_array().unwrap()) {
        let flow = &step["result"]["flows"][0];
        let (tx, lost) = (
            flow["frames_tx"].as_f64().unwrap(),
            flow["loss"].as_f64().unwrap(),
        );
        // Loss is counted against what was sent, whatever the sender managed.
        assert!(
            (row[loss] - lost * 100.0 / tx).abs() < 1e-9,
            "{row:?} {flow}"
        );
        assert!(row[received] <= row[sent] * 1.000_001, "{row:?}");
    }
    let slow = &rows[1];
    assert!(
        slow[sent] < slow[offered] * 0.5,
        "the sender fell behind: {slow:?}"
    );
    assert!(
        slow[received] >= slow[sent] * (1.0 - slow[loss] / 100.0) * 0.999,
        "received = sent − lost: {slow:?}"
    );
}
