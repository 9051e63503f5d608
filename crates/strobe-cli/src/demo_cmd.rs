//! `strobe demo`: a first result in under a minute, with nothing to set up.
//!
//! It generates constant-rate and Poisson traces, measures their precision the way
//! `strobe analyze` does for any capture, then measures the engine itself on the null
//! backend, unpaced and paced in real time.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use clap::Args;
use strobe_analyze::{analyze, Capture, Expectation, Options, Report};
use strobe_engine::{run_scenario, RunOptions, RunReport};
use strobe_model::quick::{self, QuickArgs};

use crate::gen_cmd::FileResources;
use crate::Failure;

#[derive(Args)]
pub struct DemoArgs {
    /// Seconds of real-time engine measurement on the null backend.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
}

fn udp_flow(
    port: String,
    rate: &str,
    pattern: &str,
    count: Option<u64>,
    duration: Option<String>,
) -> QuickArgs {
    QuickArgs {
        port,
        udp: Some("198.18.0.1:1000-198.18.1.1:2000".into()),
        size: "64".into(),
        rate: rate.into(),
        pattern: pattern.into(),
        count,
        duration,
        vary: vec!["ip.src=inc:198.18.0.1/0.0.0.1/256".into()],
        ..QuickArgs::default()
    }
}

fn run(q: &QuickArgs, opts: &RunOptions) -> Result<RunReport, Failure> {
    let res = FileResources::cwd();
    let scenario = quick::build(q, &res).map_err(|e| Failure::BadInput(e.to_string()))?;
    run_scenario(&scenario, opts, Arc::new(AtomicBool::new(false)))
        .map_err(|e| Failure::Runtime(e.to_string()))
}

fn analyze_trace(path: &str, expect: Expectation) -> Result<Report, Failure> {
    let mut capture = Capture {
        timestamps_ns: Vec::new(),
        frame_lens: Vec::new(),
        resolution_ns: 1,
    };
    strobe_io::read_capture(path, false, |f| {
        capture.timestamps_ns.push(f.ts_ns);
        capture.frame_lens.push(f.orig_len);
    })
    .map_err(|e| Failure::Runtime(e.to_string()))?;
    let options = Options {
        expect: Some(expect),
        burst_gap_ns: None,
        histogram_bins: 10,
    };
    analyze(&capture, &options).map_err(|e| Failure::Runtime(e.to_string()))
}

pub fn run_demo(args: DemoArgs) -> Result<(), Failure> {
    let dir = std::env::temp_dir().join(format!("strobe-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| Failure::Runtime(format!("cannot create {}: {e}", dir.display())))?;
    let result = demo_steps(&dir, args.seconds);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn demo_steps(dir: &std::path::Path, seconds: f64) -> Result<(), Failure> {
    println!("== 1. A constant-rate trace: 100 000 UDP frames at 100 kpps, source address cycling over 256 values");
    let cbr = dir.join("cbr.pcap").to_string_lossy().into_owned();
    run(
        &udp_flow(format!("pcap:{cbr}"), "100kpps", "cbr", Some(100_000), None),
        &RunOptions::default(),
    )?;
    let r = analyze_trace(&cbr, Expectation::Cbr { pps: 100_000.0 })?;
    println!("{r}\n");

    println!("== 2. A Poisson trace: 100 000 frames at a mean of 1 Mpps");
    let poisson = dir.join("poisson.pcap").to_string_lossy().into_owned();
    run(
        &udp_flow(
            format!("pcap:{poisson}"),
            "1mpps",
            "poisson",
            Some(100_000),
            None,
        ),
        &RunOptions::default(),
    )?;
    let r = analyze_trace(&poisson, Expectation::Poisson { pps: 1_000_000.0 })?;
    println!("{r}\n");

    let secs = format!("{seconds}s");
    println!("== 3. Engine cost: every per-packet step (field patch, checksums, trailer with timestamp), frames dropped by the null backend, {secs}");
    let mut q = udp_flow("null".into(), "1000000000000", "cbr", None, None);
    // Unpaced: the rate is a placeholder, so the line-rate check does not apply.
    q.unbounded = true;
    let opts = RunOptions {
        unpaced: true,
        time_limit_ns: Some((seconds * 1e9) as u64),
        ..RunOptions::default()
    };
    let report = run(&q, &opts)?;
    print_rate(&report);

    println!("\n== 4. Real-time pacing: 1 Mpps CBR on the null backend for {secs}, one frame per deadline");
    let report = run(
        &udp_flow("null".into(), "1mpps", "cbr", None, Some(secs)),
        &RunOptions::default(),
    )?;
    print_rate(&report);
    for p in &report.ports {
        if let Some(h) = &p.handover {
            println!(
                "   hand-over after each deadline: p50 {} ns, p99 {} ns, p99.9 {} ns, max {:.1} µs; {:.3} % within 1 µs",
                h.p50_ns,
                h.p99_ns,
                h.p99_9_ns,
                h.max_ns as f64 / 1e3,
                h.within_1us * 100.0
            );
        }
        println!(
            "   {} of {} frames later than 1 µs — the tail is the machine (preemption, virtualisation), not the schedule",
            p.late_frames, p.frames
        );
    }
    println!(
        "\nNext: `strobe gen --help`, `strobe analyze --help`, and the scenarios in examples/."
    );
    Ok(())
}

fn print_rate(report: &RunReport) {
    for p in &report.ports {
        let secs = p.elapsed_ns as f64 / 1e9;
        if secs > 0.0 {
            println!(
                "   {} frames in {:.3} s: {:.2} Mpps, {:.2} ns per frame",
                p.frames,
                secs,
                p.frames as f64 / secs / 1e6,
                secs * 1e9 / p.frames.max(1) as f64
            );
        }
    }
}
