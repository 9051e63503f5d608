//! Real-time pacing on the null backend (correctness with generous bounds; precision is the
//! benchmark's job), and every scenario in examples/ runs.

mod common;
use common::*;

#[test]
fn paced_run_follows_its_schedule_and_reports_its_precision() {
    let dir = Scratch::new("paced");
    let json = dir.path("r.json");
    gen_udp(
        "null",
        &["--rate", "20kpps", "--count", "10000", "--json", &json],
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let port = &r["ports"][0];
    assert_eq!(port["frames_tx"], 10_000);
    // Frames 50 µs apart are far above any floor: each leaves in its own hand-over (up to
    // 256 could coalesce), but for frames that a stall of the machine made late (a frame
    // joins the hand-over before it only when that one started almost a gap late). A CI run
    // beside the other tests of this file saw 401 stalls (117 ms), 1 089 late frames and
    // 292 of them coalesced.
    assert_eq!(port["batch"], 256, "{port}");
    let handovers = port["handovers"].as_u64().unwrap();
    let coalesced = port["coalesced_frames"].as_u64().unwrap();
    assert!(coalesced <= port["late_frames"].as_u64().unwrap(), "{port}");
    assert!(handovers + coalesced >= 10_000, "{port}");
    // 10 000 frames at 20 kpps take 0.5 s of real time; an unpaced run would take ~1 ms.
    let secs = port["elapsed_ns"].as_f64().unwrap() / 1e9;
    assert!((0.45..2.0).contains(&secs), "elapsed {secs} s");
    let h = &port["handover_error"];
    assert_eq!(h["samples"], handovers, "every hand-over measured");
    assert!(
        h["p50_ns"].as_u64().unwrap() < 100_000,
        "median hand-over error {}",
        h["p50_ns"]
    );
    assert_eq!(port["flows"][0]["frames_tx"], 10_000);
    // A lone transmitter spins on the highest core it may use (the watcher stays off it).
    let highest = allowed_cpus().into_iter().max().unwrap();
    assert_eq!(port["core"], highest, "{port}");
}

/// CPUs this test process may run on, from /proc (independent of strobe's own reading).
fn allowed_cpus() -> Vec<u64> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim();
    list.split(',')
        .flat_map(|part| match part.split_once('-') {
            Some((a, b)) => (a.parse().unwrap()..=b.parse().unwrap()).collect::<Vec<u64>>(),
            None => vec![part.parse().unwrap()],
        })
        .collect()
}

#[test]
fn unpaced_run_ignores_deadlines() {
    let out = gen_udp("null", &["--rate", "max", "--count", "1000000"]);
    assert!(out.contains("1000000 frames"), "{out}");
    assert!(
        !out.contains("hand-over"),
        "no deadlines, no hand-over error: {out}"
    );
}

#[test]
fn a_scenario_file_asks_for_an_unpaced_run_with_a_time_limit() {
    let dir = Scratch::new("unpaced-file");
    let scenario = dir.path("unpaced.toml");
    let json = dir.path("r.json");
    std::fs::write(
        &scenario,
        "[run]\npacing = \"unpaced\"\ntime_limit = \"300ms\"\n\
         [[ports]]\nname = \"p\"\nlocation = \"null\"\n\
         [[flows]]\nname = \"f\"\ntx = \"p\"\nrate = \"1kpps\"\n\
         [[flows.packet]]\nethernet = { src = \"02:00:00:00:00:01\", dst = \"02:00:00:00:00:02\" }\n\
         [[flows.packet]]\n\
         ipv4 = { src = \"198.18.0.1\", dst = \"198.18.1.1\" }\n[[flows.packet]]\nudp = {}\n",
    )
    .unwrap();
    // Bounded: were the file's pacing ignored, the continuous flow would never end.
    let out = std::process::Command::new("timeout")
        .arg("30")
        .arg(strobe().get_program())
        .args(["gen", "-q", "--json", &json])
        .arg(&scenario)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let port = &r["ports"][0];
    // A continuous flow at 1 kpps would send ~300 frames in 300 ms; unpaced, the time limit
    // ends a run of far more, with no deadline to measure hand-overs against.
    assert!(port["frames_tx"].as_u64().unwrap() > 10_000, "{port}");
    assert_eq!(port["stopped_early"], true, "{port}");
    assert!(port["handover_error"].is_null(), "{port}");
    // Unpaced: no pacing wait, so no policy, margin or host stalls to report.
    assert!(
        port["scheduling"].is_null() && port["host_stalls"].is_null(),
        "{port}"
    );
    let secs = port["elapsed_ns"].as_f64().unwrap() / 1e9;
    assert!((0.25..3.0).contains(&secs), "elapsed {secs} s");
}

#[test]
fn every_example_scenario_runs() {
    let dir = Scratch::new("examples");
    let mut ran = 0;
    for entry in std::fs::read_dir(examples_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            // Live examples need a lab: first_contact.rs runs them on one.
            if std::fs::read_to_string(&path)
                .unwrap()
                .contains("location = \"lab:")
            {
                continue;
            }
            let out = strobe()
                .arg("gen")
                .arg(&path)
                .current_dir(&dir.0)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}: {}",
                path.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            ran += 1;
        }
    }
    assert!(ran >= 10, "only {ran} examples found");
}

#[test]
fn smooth_late_policy_sends_everything_and_repays_its_shift() {
    let dir = Scratch::new("smooth");
    let json = dir.path("s.json");
    gen_udp(
        "null",
        &[
            "--rate", "20kpps", "--count", "10000", "--late", "smooth", "--json", &json,
        ],
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let port = &r["ports"][0];
    assert_eq!(port["frames_tx"], 10_000);
    // Whatever stalls the machine caused, the shift is paid back over the following gaps
    // (at most 1/50 of each), so the run ends within a generous bound of 0.5 s.
    let secs = port["elapsed_ns"].as_f64().unwrap() / 1e9;
    assert!((0.45..2.0).contains(&secs), "elapsed {secs} s");
}

/// The transmit worker's thread of a running `strobe gen` (comm `tx-…`): its id.
fn tx_thread(pid: u32) -> Option<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|tid| {
            std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
                .is_ok_and(|c| c.starts_with("tx-"))
        })
}

/// A thread's timer slack and scheduling policy (`stat` field 41: 0 other, 1 FIFO).
fn thread_slack_and_policy(pid: u32, tid: &str) -> Option<(u64, u64)> {
    // Only /proc/<tid> has timerslack_ns (not /proc/<pid>/task/<tid>).
    let slack = std::fs::read_to_string(format!("/proc/{tid}/timerslack_ns")).ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
    // Fields after the command's closing parenthesis start at field 3.
    let after = stat.rsplit_once(')')?.1;
    let policy = after.split_whitespace().nth(41 - 3)?.parse().ok()?;
    Some((slack.trim().parse().ok()?, policy))
}

#[test]
fn paced_worker_waits_with_1ns_slack_and_reports_the_policy_it_ran() {
    let dir = Scratch::new("slack");
    let json = dir.path("r.json");
    let mut child = gen_udp_command("null")
        .args(["--rate", "1kpps", "--count", "3000", "--json", &json])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("running strobe");
    let pid = child.id();
    // Looked at while it runs (3 s): the worker sets its slack as it starts pacing.
    let mut seen = None;
    while child.try_wait().unwrap().is_none() {
        // 1 ns as set; recent kernels give a SCHED_FIFO thread none (0), not the 50 µs default.
        if let Some((slack @ 0..=1, policy)) =
            tx_thread(pid).and_then(|t| thread_slack_and_policy(pid, &t))
        {
            assert!(slack == 1 || policy == 1, "slack 0 on a SCHED_OTHER thread");
            seen = Some(policy);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "strobe gen failed: {}", out.status);
    let summary = String::from_utf8_lossy(&out.stdout);
    let policy = seen.expect("the transmit thread never ran with a timer slack of 1 ns");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let port = &r["ports"][0];
    let reported = port["scheduling"]["policy"].as_str().unwrap();
    let note = port["scheduling"]["note"].as_str().unwrap_or("");
    match policy {
        // A FIFO worker that could not sleep for 10 ms drops to SCHED_OTHER and says so.
        1 => assert!(
            reported == "SCHED_FIFO" || note.contains("then SCHED_OTHER"),
            "ran SCHED_FIFO, reported {port}"
        ),
        0 => assert_eq!(reported, "SCHED_OTHER", "{port}"),
        other => panic!("unexpected policy {other}"),
    }
    // Root on a machine of 2 or more cores, the lone transmitter is pinned: FIFO.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 && allowed_cpus().len() > 1 {
        assert_eq!(policy, 1, "root, pinned, yet not SCHED_FIFO: {port}");
    }
    // The host's stalls are reported apart from lateness, and the margin learned in bounds.
    let stalls = &port["host_stalls"];
    assert!(
        stalls["count"].is_u64() && stalls["worst_ns"].is_u64(),
        "{port}"
    );
    let margin = port["spin_margin_ns"].as_u64().unwrap();
    assert!((20_000..=2_000_000).contains(&margin), "{port}");
    // The summary says both, per port.
    assert!(summary.contains("host stalls while waiting: "), "{summary}");
    assert!(
        summary.contains(&format!("waiting: {reported}")),
        "{summary}"
    );
}

/// Gaps shorter than the initial spin margin (10 kpps: 100 µs against 150 µs) left the worker
/// never sleeping, so it never learned its host's wake-ups and spun the initial guess for
/// the whole run (then lost SCHED_FIFO after 10 ms awake). It now learns them before its
/// first deadline, and tells the late frames the host caused from its own.
#[test]
fn short_gaps_learn_the_margin_before_the_first_deadline_and_late_frames_name_their_cause() {
    let dir = Scratch::new("warmup");
    let json = dir.path("r.json");
    let out = gen_udp_command("null")
        .args(["--rate", "10kpps", "--count", "2000", "--json", &json])
        .output()
        .expect("running strobe");
    assert!(out.status.success(), "strobe gen failed: {}", out.status);
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let port = &r["ports"][0];
    let margin = port["spin_margin_ns"].as_u64().unwrap();
    // Learned: p99.9 × 1.25 + 5 µs of real wake-ups, never exactly the initial 150 µs.
    assert_ne!(margin, 150_000, "the margin was never learned: {port}");
    assert!((20_000..=2_000_000).contains(&margin), "{port}");
    let (late, host) = (
        port["late_frames"].as_u64().unwrap(),
        port["late_host_frames"].as_u64().unwrap(),
    );
    assert!(host <= late, "{port}");
    let summary = String::from_utf8_lossy(&out.stdout);
    // The verdict line: what was sent against what was asked, nothing measured at a receiver,
    // and the schedule.
    let verdict = summary
        .lines()
        .find(|l| l.starts_with("verdict: "))
        .unwrap_or_else(|| panic!("no verdict line:\n{summary}"));
    assert!(
        verdict.starts_with("verdict: 2000 frames sent at ")
            && verdict.contains("% of the 10.00 kpps asked")
            && verdict.contains("no receive port")
            && (verdict.contains("every frame on schedule")
                || verdict.contains(&format!("{late} frames late"))),
        "{verdict}"
    );
    if late > 0 {
        assert!(
            summary.contains(&format!(
                "{host} by the host taking the CPU across the deadline, {} strobe's own",
                late - host
            )),
            "{summary}"
        );
    }
}
