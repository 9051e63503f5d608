//! Timing on the wire: paced frames coalesce to the port's floor, so random and bursty
//! models keep their short gaps and their rate on a live port, and a rate above what the
//! path paces is warned about before the first frame. Captured with tcpdump at the
//! receiving end of a lab cable and read back by tshark (not by strobe's own reader).
//! Needs root, as every live test here. Bounds are generous: the figures live in BENCHMARKS.md (`bench/run precision`).

mod common;
use common::lab::{Capture, TestLab};
use common::*;

use std::process::Command;
use std::sync::{Mutex, MutexGuard};

/// One timing run at a time: two at once on a 2-core machine measure each other.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static RUNS: Mutex<()> = Mutex::new(());
    RUNS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Capture timestamps (ns) of the run's frames (UDP to port 2000), by tshark.
fn run_times_ns(pcap: &str) -> Vec<u64> {
    let out = Command::new("tshark")
        .args(["-r", pcap, "-T", "fields", "-e", "frame.time_epoch"])
        .args([
            "-Y",
            "udp.dstport == 2000 and not frame contains \"P-strobe-floor-P\"",
        ])
        .output()
        .expect("tshark (apt-get install tshark)");
    assert!(
        out.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| {
            let (s, frac) = line.trim().split_once('.').unwrap_or((line.trim(), "0"));
            let frac = format!("{frac:0<9}");
            s.parse::<u64>().unwrap() * 1_000_000_000 + frac[..9].parse::<u64>().unwrap()
        })
        .collect()
}

fn gaps(times: &[u64]) -> Vec<u64> {
    times
        .windows(2)
        .map(|w| w[1].saturating_sub(w[0]))
        .collect()
}

/// The trains in a run of gaps (a gap of 50 µs or more starts the next): their lengths,
/// and the gaps inside them.
fn trains_of(gaps: &[u64]) -> (Vec<usize>, Vec<u64>) {
    let mut trains = vec![1usize];
    let mut inside = Vec::new();
    for &g in gaps {
        if g >= 50_000 {
            trains.push(1);
        } else {
            *trains.last_mut().unwrap() += 1;
            inside.push(g);
        }
    }
    (trains, inside)
}

fn share_below(gaps: &[u64], ns: u64) -> f64 {
    gaps.iter().filter(|&&g| g < ns).count() as f64 / gaps.len() as f64
}

/// The KS statistic of `model` in a floor fit (`floor_fit` of analyze, `departure_fit` of
/// gen).
fn model_fit(fit: &serde_json::Value, model: &str, field: &str) -> f64 {
    fit["fits"]
        .as_array()
        .unwrap_or_else(|| panic!("no floor fit: {fit}"))
        .iter()
        .find(|m| m["model"] == model)
        .and_then(|m| m[field].as_f64())
        .unwrap_or_else(|| panic!("no {model} {field}: {fit}"))
}

/// A floor fit of a coalescing sender's gaps: the whole distribution is at least twice as
/// near the perfect sender (KS D) as the plain model (which no sender on the path can send,
/// and which one frame per hand-over, sending nothing at the floor, would be nearer), and
/// where the two models put clearly different shares of gaps at the path's spacing (5 %
/// apart or more), the observed share is the perfect sender's. Not a KS acceptance: this
/// machine's hand-over cost varies with what shares its two cores, the model's floor is
/// one value (BENCHMARKS.md has the fits on a quiet path). Under the full suite the share at
/// the floor has moved 1-3 % off both models in CI runs (11.2-11.6 % where they put 10.1
/// and 12.0; 22.9 % where they put 19.8 and 18.7) while KS D stayed 16-800 times nearer the
/// perfect sender: a share difference smaller than that noise cannot judge.
fn closer_to_the_perfect_sender(fit: &serde_json::Value) -> Result<(), String> {
    let observed = fit["share_at_floor"].as_f64().unwrap();
    let share = |model| model_fit(fit, model, "share_at_floor");
    let off = |model| (share(model) - observed).abs();
    let d = |model| model_fit(fit, model, "ks_d");
    let shares_apart = (share("perfect_sender") - share("plain")).abs() > 0.05;
    if (!shares_apart || off("perfect_sender") < off("plain"))
        && d("perfect_sender") * 2.0 < d("plain")
    {
        Ok(())
    } else {
        Err(format!(
            "D perfect {} plain {}: {}",
            d("perfect_sender"),
            d("plain"),
            fit["verdict"]
        ))
    }
}

/// One paced run on a cable lab, captured at the receiving end: (gen's JSON, gaps).
fn captured_run(
    lab: &TestLab,
    dir: &Scratch,
    name: &str,
    extra: &[&str],
) -> (serde_json::Value, Vec<u64>) {
    captured_run_on(lab, dir, name, "lab:tx", extra)
}

/// [`captured_run`] from transmit port `port`.
fn captured_run_on(
    lab: &TestLab,
    dir: &Scratch,
    name: &str,
    port: &str,
    extra: &[&str],
) -> (serde_json::Value, Vec<u64>) {
    let pcap = dir.path(&format!("{name}.pcap"));
    let json = dir.path(&format!("{name}.json"));
    {
        let _capture = Capture::start(&lab.ns("rx"), "rx0", &pcap);
        ok(lab
            .gen_command(port, "lab:rx")
            .args(["--json", &json])
            .args(extra)
            .output()
            .unwrap());
    }
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let times = run_times_ns(&pcap);
    let sent = report["ports"][0]["frames_tx"].as_u64().unwrap() as usize;
    assert!(
        times.len() >= sent * 99 / 100,
        "{name}: captured {} of {sent} frames",
        times.len()
    );
    (report, gaps(&times))
}

#[test]
fn poisson_keeps_its_short_gaps_and_its_rate_on_a_live_port() {
    let _one = one_at_a_time();
    // Receive steering off, as docs/precision.md advises for paced timing in a VM: with it, every
    // hand-over raises an inter-processor interrupt (a VM exit) to the receiving core, and
    // an idle receiving vCPU makes a third of the hand-overs late on this project's VM.
    let lab = TestLab::up_with("poi", "cable", &["--rps", "off"]);
    let dir = Scratch::new("timing-poisson");
    let poisson = [
        "--pattern",
        "poisson",
        "--rate",
        "100kpps",
        "--count",
        "150000",
    ];
    // strobe analyze judges the capture through the path's floor: a sender that coalesces
    // is closer to the perfect sender on the path than to the plain exponential, which no
    // sender on this path can put on the wire. (Closer, not identical: the receive worker
    // and tcpdump share this machine's two cores with the sender, whose hand-over cost then
    // varies; BENCHMARKS.md has the fits on a quiet path.) A run that other work on the
    // machine stalled sends far more frames back to back than any model (seen in CI: 32 %
    // at the floor against 12.5 %).
    let judge = |name: &str| -> serde_json::Value {
        let judged: serde_json::Value = serde_json::from_str(&ok(strobe()
            .args(["analyze", &dir.path(&format!("{name}.pcap"))])
            .args([
                "--expect",
                "poisson:100kpps",
                "--tolerance",
                "500ns",
                "--json",
            ])
            .output()
            .unwrap()))
        .unwrap();
        judged["floor_fit"].clone()
    };
    // One frame per hand-over cannot send a gap below the hand-over's cost (about the 1st
    // percentile of its gaps); Exp(10 µs) puts 1 - e^-0.1 ≈ 9.5 % of gaps below 1 µs, and
    // coalescing sends those at the path's spacing. Asked: 4 % below 4/5 of that cost
    // (about 1.5 µs here, where the exponential puts 14 %), or half the exponential's share
    // on a machine whose hand-overs are so short that it puts less there; and twice the
    // share one frame per hand-over sends there.
    let mut alone = captured_run(
        &lab,
        &dir,
        "alone",
        &[&poisson[..], &["--batch", "1"]].concat(),
    )
    .1;
    alone.sort_unstable();
    let short = alone[alone.len() / 100] * 4 / 5;
    let exponential = 1.0 - (-(short as f64) / 10_000.0).exp();
    let want = (exponential / 2.0)
        .min(0.04)
        .max(2.0 * share_below(&alone, short));
    let keeps_short_gaps = |coalesced: &[u64]| -> Result<(), String> {
        let share = share_below(coalesced, short);
        if share > want {
            return Ok(());
        }
        Err(format!(
            "coalesced: only {:.2} % of gaps below {short} ns (one frame per hand-over: {:.2} %)",
            share * 100.0,
            share_below(&alone, short) * 100.0
        ))
    };
    // Up to three runs, each judged on its fit and its short gaps: in fresh-clone CI runs
    // on this VM (2026-11-28) both of two runs twice put 11.2–11.6 % of gaps at the floor
    // where the perfect sender puts 10.1 % and the plain model 12.0 % (KS D 16× closer to
    // the perfect sender all the same), and once (2026-11-29) a run that fitted put 0.04 %
    // of its gaps below the hand-over cost, while the test alone passed at once; a sender
    // that really moved toward the plain model, or stopped coalescing, fails all three.
    let judged = |coalesced: &[u64], fit: &serde_json::Value| {
        closer_to_the_perfect_sender(fit).and_then(|()| keeps_short_gaps(coalesced))
    };
    let (mut report, mut coalesced) = captured_run(&lab, &dir, "coalesced", &poisson);
    let mut fit = judge("coalesced");
    let mut misses = Vec::new();
    for again in ["again", "third"] {
        match judged(&coalesced, &fit) {
            Ok(()) => break,
            Err(miss) => {
                eprintln!("judged away from the perfect sender ({miss}); running again");
                misses.push(miss);
            }
        }
        (report, coalesced) = captured_run(&lab, &dir, again, &poisson);
        fit = judge(again);
    }
    if let Err(last) = judged(&coalesced, &fit) {
        panic!("three times: {}; {last}", misses.join("; "));
    }
    assert_eq!(fit["floor_estimated"], true);
    let port = &report["ports"][0];
    let pacing = &port["pacing"];
    let handover = pacing["observed_handover_ns"]
        .as_u64()
        .expect("a paced port reports its floor");
    let spacing = pacing["observed_spacing_ns"]
        .as_u64()
        .expect("a coalescing run times its spacing");
    assert!(spacing > 0 && handover > 0, "{pacing}");
    // No floor given: an earlier run's, or learned from this run's own hand-overs.
    assert!(
        pacing["floor_source"] == "remembered" || pacing["floor_source"] == "learned",
        "{pacing}"
    );
    assert!(port["coalesced_frames"].as_u64().unwrap() > 0, "{port}");
    // gen judges its own estimated departures the same way, on the floor it refined. Only
    // its presence is checked live: the estimates are placed with the floor as it stood at
    // each hand-over, which moves during a run on this shared machine (up to 3 µs per frame
    // in CI), while the fit takes the final one; the fit itself is tested in strobe-analyze.
    let own = &port["departure_fit"];
    assert_eq!(own["floor_estimated"], false, "{port}");
    assert_eq!(own["fits"].as_array().map(Vec::len), Some(3), "{own}");
    assert_eq!(own["spacing_ns"], pacing["observed_spacing_ns"], "{port}");

    // The rate on the wire is the schedule's own: the captured span of the run's frames
    // against the span its deadlines planned, plus what stalls shifted it by (a VM that
    // stops the sender for tens of ms shifts the schedule and says so; a sender that
    // cannot keep the rate shifts it by far more than the bound here).
    let wire: u64 = coalesced.iter().sum();
    let planned = port["planned_ns"].as_u64().unwrap();
    let shifted = port["shifted_ns"].as_u64().unwrap();
    let error = wire as f64 / (planned + shifted) as f64 - 1.0;
    assert!(
        error.abs() < 0.005 && shifted < planned / 10,
        "wire span {wire} ns vs planned {planned} ns, shifted by {shifted} ns"
    );
}

#[test]
fn bursts_leave_as_back_to_back_trains() {
    let _one = one_at_a_time();
    let lab = TestLab::up("bur", "cable");
    let dir = Scratch::new("timing-burst");
    // A stall of the busy two-core machine splits a train, or lets it catch up with the
    // next: a run that leaves fewer than 90 % of its trains whole gets one more run, and
    // the second must hold.
    if let Err(first) = burst_run(&lab, &dir, "burst") {
        if let Err(second) = burst_run(&lab, &dir, "burst-again") {
            panic!("twice: {first}; {second}");
        }
    }
}

/// 1000 bursts of 32 frames 200 µs apart, captured: Err when fewer than 90 % of the trains
/// (frames between pauses of 50 µs or more) hold 32 frames, or when a train's frames are
/// not back to back (closer than the hand-over cost, which one hand-over per frame costs).
/// The frames of a burst are due 100 ns apart, closer than any path's hand-over, so they
/// coalesce on a fast machine as on a slow one (1 µs apart, a machine whose calls cost less
/// than 1 µs would rightly send each alone).
fn burst_run(lab: &TestLab, dir: &Scratch, name: &str) -> Result<(), String> {
    let (report, gaps) = captured_run(
        lab,
        dir,
        name,
        &[
            "--pattern",
            "burst:32/200us",
            "--rate",
            "10mpps",
            "--count",
            "32000",
        ],
    );
    // The floor the run refined (or learned) from its own hand-overs.
    let handover = report["ports"][0]["pacing"]["observed_handover_ns"]
        .as_u64()
        .unwrap();
    // Trains end at the 200 µs pauses.
    let (trains, mut inside) = trains_of(&gaps);
    let whole = trains.iter().filter(|&&n| n == 32).count();
    if whole * 10 < trains.len() * 9 {
        return Err(format!("{whole} of {} trains have 32 frames", trains.len()));
    }
    inside.sort_unstable();
    let median = inside[inside.len() / 2];
    if median >= handover {
        return Err(format!(
            "frames of a train are {median} ns apart, not back to back (hand-over {handover} ns)"
        ));
    }
    Ok(())
}

/// `xdp-live` paces the frames it generates in the kernel: its program sends each frame at
/// the first repetition at or after its deadline. A constant rate keeps its rate and a
/// quarter or more of its gaps within a microsecond (kernel batches of 64, or pacing by
/// batch, put almost none there); bursts leave as trains of their length, spaced as asked.
#[test]
fn xdp_live_paces_in_the_kernel() {
    let _one = one_at_a_time();
    let lab = TestLab::up("xpc", "cable");
    let dir = Scratch::new("timing-xdp-live");
    // A stall of the busy two-core machine (the same CPU runs the program and rx0's
    // receive) can spoil a run: one more run, and the second must hold.
    for run in [xdp_live_cbr_run, xdp_live_burst_run] {
        if let Err(first) = run(&lab, &dir, "first") {
            if let Err(second) = run(&lab, &dir, "second") {
                panic!("twice: {first}; {second}");
            }
        }
    }
}

fn in_kernel_and_paced(report: &serde_json::Value) -> Result<(), String> {
    let port = &report["ports"][0];
    let paced = port["generation"]
        .as_str()
        .is_some_and(|g| g.contains("paced by the program"));
    // The program counts every frame it paced in one decade of lateness.
    let counted: u64 = port["kernel_lateness"]
        .as_object()
        .map_or(0, |d| d.values().filter_map(|n| n.as_u64()).sum());
    if port["in_kernel"] == true && paced && Some(counted) == port["frames_tx"].as_u64() {
        Ok(())
    } else {
        Err(format!("not paced in the kernel: {port}"))
    }
}

/// CBR 100 kpps, 100 000 frames: the rate within 0.5 % and at least half of the gaps within
/// ±1 µs of 10 µs.
fn xdp_live_cbr_run(lab: &TestLab, dir: &Scratch, name: &str) -> Result<(), String> {
    let (report, gaps) = captured_run_on(
        lab,
        dir,
        &format!("cbr-{name}"),
        "lab:tx@xdp-live",
        &["--rate", "100kpps", "--count", "100000", "--no-latency"],
    );
    in_kernel_and_paced(&report)?;
    let span: u64 = gaps.iter().sum();
    let rate = gaps.len() as f64 / (span as f64 / 1e9);
    let within = gaps
        .iter()
        .filter(|&&g| g.abs_diff(10_000) <= 1_000)
        .count() as f64
        / gaps.len() as f64;
    // Alone on this VM 51-58 % of the captured gaps fall within ±1 µs (the capture's own
    // software stamps jitter too); under a full test suite 41 %. Frames sent in batches put
    // almost none there (the gaps inside a batch are well under 1 µs), so a quarter still
    // tells per-frame pacing from batching.
    if (rate / 100_000.0 - 1.0).abs() > 0.005 || within < 0.25 {
        return Err(format!(
            "{rate:.1} pps, {:.1} % of gaps within ±1 µs",
            within * 100.0
        ));
    }
    eprintln!(
        "xdp-live cbr {name}: {rate:.1} pps, {:.1} % of gaps within ±1 µs",
        within * 100.0
    );
    Ok(())
}

/// 1000 bursts of 16 frames at 200 kpps (5 µs apart), 100 µs between them: at least 90 % of
/// the trains whole, and their frames 3–7 µs apart (median).
fn xdp_live_burst_run(lab: &TestLab, dir: &Scratch, name: &str) -> Result<(), String> {
    let (report, gaps) = captured_run_on(
        lab,
        dir,
        &format!("burst-{name}"),
        "lab:tx@xdp-live",
        &[
            "--pattern",
            "burst:16/100us",
            "--rate",
            "200kpps",
            "--count",
            "16000",
            "--no-latency",
        ],
    );
    in_kernel_and_paced(&report)?;
    let (trains, mut inside) = trains_of(&gaps);
    let whole = trains.iter().filter(|&&n| n == 16).count();
    inside.sort_unstable();
    let median = inside.get(inside.len() / 2).copied().unwrap_or(0);
    if whole * 10 < trains.len() * 9 || !(3_000..=7_000).contains(&median) {
        return Err(format!(
            "{whole} of {} trains have 16 frames; their frames {median} ns apart",
            trains.len()
        ));
    }
    Ok(())
}

#[test]
fn a_rate_above_the_paced_ceiling_is_warned_about_before_the_run() {
    let _one = one_at_a_time();
    let lab = TestLab::up("cei", "cable");
    let dir = Scratch::new("timing-ceiling");
    let json = dir.path("ceiling.json");
    let out = lab
        .gen_command("lab:tx", "lab:rx")
        .args([
            "--floor",
            "20us/10us",
            "--rate",
            "500kpps",
            "--count",
            "2000",
        ])
        .args(["--json", &json])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("paces at most 99.61 kpps"), "{stderr}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let pacing = &report["ports"][0]["pacing"];
    assert_eq!(pacing["floor_source"], "given");
    assert_eq!(pacing["handover_ns"], 20_000);
    assert_eq!(report["ports"][0]["frames_tx"], 2000);
}

#[test]
fn ports_measures_a_floor_on_request_and_nowhere_else() {
    let _one = one_at_a_time();
    let lab = TestLab::up("pfl", "cable");
    let out = ok(strobe()
        .args(["ports", "--lab", &lab.prefix, "--floor", "lab:tx", "--json"])
        .output()
        .unwrap());
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let (handover, spacing) = (
        doc["handover_ns"].as_u64().unwrap(),
        doc["spacing_ns"].as_u64().unwrap(),
    );
    assert!(handover > 0 && spacing > 0, "{doc}");
    // The ceiling is what the floor gives with 256 frames per hand-over.
    let ceiling = 256.0 * 1e9 / (handover + 255 * spacing) as f64;
    assert!((doc["ceiling_pps"].as_f64().unwrap() / ceiling - 1.0).abs() < 1e-9);
    let dir = Scratch::new("timing-ports-floor");
    let pcap = dir.path("no.pcap");
    let out = strobe()
        .args(["ports", "--floor", &format!("pcap:{pcap}")])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no floor to measure"));
    assert!(!std::path::Path::new(&pcap).exists());
}

#[test]
fn a_floor_that_cannot_be_read_is_refused_with_the_form_it_takes() {
    let out = gen_udp_command("null")
        .args(["--floor", "fast", "--count", "10"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--floor fast"), "{stderr}");
    assert!(
        stderr.contains("HANDOVER/SPACING") || stderr.contains("duration"),
        "{stderr}"
    );
}

#[test]
fn a_lab_whose_receive_steering_makes_paced_frames_late_says_so_in_the_result() {
    let _serial = one_at_a_time();
    let dir = Scratch::new("rps-late");
    // The lab's default steers receive work to another core: in this VM every hand-over of
    // a paced run then costs an inter-processor interrupt (16–19 % of 100 kpps late).
    let lab = TestLab::up("rps", "router");
    let run = |name: &str| -> (f64, bool, serde_json::Value) {
        let json = dir.path(name);
        ok(lab
            .gen_command("lab:tx", "lab:rx")
            .args(["--rate", "100kpps", "--count", "100000", "--json", &json])
            .output()
            .unwrap());
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let p = &r["ports"][0];
        let own = p["late_frames"].as_u64().unwrap() - p["late_host_frames"].as_u64().unwrap();
        let share = own as f64 / p["frames_tx"].as_f64().unwrap();
        let warned = r["warnings"].as_array().unwrap().iter().any(|w| {
            w["kind"] == "late_on_steering_lab"
                && w["text"]
                    .as_str()
                    .unwrap()
                    .contains("receive steering (RPS) is on")
        });
        (share, warned, r)
    };
    let (share, warned, r) = run("on.json");
    // Said exactly when strobe's own late frames pass 1 %, naming the fix.
    assert_eq!(warned, share > 0.01, "{share}: {}", r["warnings"]);
    if warned {
        assert!(
            r["warnings"].to_string().contains(&format!(
                "strobe lab up --prefix {} --dut router --rps off",
                lab.prefix
            )),
            "{}",
            r["warnings"]
        );
    }
    // The fix as named: the same lab with receive steering off, never said there.
    ok(strobe()
        .args([
            "lab",
            "up",
            "--prefix",
            &lab.prefix,
            "--dut",
            "router",
            "--rps",
            "off",
        ])
        .output()
        .unwrap());
    let (share_off, warned_off, r) = run("off.json");
    assert!(!warned_off, "{share_off}: {}", r["warnings"]);
}
