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
    // 256 could coalesce), but for frames that a stall of the machine made late.
    assert_eq!(port["batch"], 256, "{port}");
    let handovers = port["handovers"].as_u64().unwrap();
    assert!(handovers >= 9_900, "{port}");
    assert!(
        handovers + port["coalesced_frames"].as_u64().unwrap() >= 10_000,
        "{port}"
    );
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
