//! `strobe calibrate`: measures strobe's own latency — transmit stamp, backend, wire, receive
//! stamp — over a direct cable (the lab's `cable` DUT, or a real loopback cable), and stores it
//! so that later runs can report a DUT's latency with the measurement path subtracted
//! (`strobe gen --calibration FILE`).
//!
//! The stored offset is the median: robust against the tail a shared machine adds, and the
//! value a corrected p50 should come out at zero for a zero-latency DUT. The whole
//! distribution is stored too, so the spread the correction cannot remove is on record.

use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::json;
use strobe_analyze::latency::LatencyStats;
use strobe_lab::{Dut, LabConfig};

use crate::gen_cmd::{execute, parse_gen_args};
use crate::lab_cmd::lab_failure;
use crate::outputs::{self, write_file};
use crate::results::{port_failures, print_latency, print_summary, timestamp_sources, Correction};
use crate::{signals, Failure};

/// Format marker and version of calibration files.
const KIND: &str = "strobe-calibration";
const VERSION: u64 = 1;
/// The lab calibrate builds when none is named, so a lab the user has up is never touched.
const OWN_PREFIX: &str = "strobe-cal";

#[derive(Args)]
pub struct CalibrateArgs {
    /// Use this lab (its DUT should be `cable`) instead of building one of its own.
    #[arg(long, value_name = "PREFIX")]
    lab: Option<String>,
    /// A real loopback instead of the lab: the transmit port (e.g. afpacket:eth1) …
    #[arg(long, requires = "rx")]
    port: Option<String>,
    /// … and the receive port at the other end of the cable.
    #[arg(long, requires = "port")]
    rx: Option<String>,
    /// Backend on the lab's ports: afpacket or afxdp (use the one your runs will use).
    #[arg(long, default_value = "afpacket", value_parser = ["afpacket", "afxdp"])]
    backend: String,
    /// Rate of the calibration flow.
    #[arg(long, default_value = "100kpps", allow_hyphen_values = true, value_parser = crate::values::positive_text)]
    rate: String,
    /// Frames to measure.
    #[arg(long, default_value_t = 200_000, allow_hyphen_values = true, value_parser = crate::values::count)]
    count: u64,
    /// Frame size incl. FCS (use the size your runs will use).
    #[arg(long, default_value = "64")]
    size: String,
    /// Where to store the calibration.
    #[arg(long, default_value = "strobe-calibration.json", value_name = "FILE")]
    out: PathBuf,
}

/// Removes the calibration's own lab, however the run ends.
struct OwnLab;

impl Drop for OwnLab {
    fn drop(&mut self) {
        if let Err(e) = strobe_lab::down(OWN_PREFIX) {
            eprintln!("warning: could not remove lab `{OWN_PREFIX}`: {e}");
        }
    }
}

pub fn run(args: CalibrateArgs) -> Result<(), Failure> {
    outputs::check_all(&[("--out", Some(args.out.as_path()))])?;
    // Signals from here on stop the run and still remove calibrate's own lab.
    let signals = signals::install()?;
    let mut _own_lab = None;
    let (tx, rx, prefix) = match (&args.port, &args.rx) {
        (Some(tx), Some(rx)) => (tx.clone(), rx.clone(), "strobe".to_string()),
        _ => {
            let prefix = match &args.lab {
                Some(p) => {
                    let lab = strobe_lab::status(p).map_err(lab_failure)?.ok_or_else(|| {
                        Failure::BadInput(format!(
                            "--lab {p}: no such lab is up (strobe lab up --prefix {p} --dut cable)"
                        ))
                    })?;
                    if lab.dut != Dut::Cable {
                        eprintln!(
                            "warning: lab `{p}` has a {:?} DUT, not a cable: the calibration will include that DUT's latency",
                            lab.dut
                        );
                    }
                    p.clone()
                }
                None => {
                    strobe_lab::up(&LabConfig {
                        prefix: OWN_PREFIX.into(),
                        dut: Dut::Cable,
                        receive_steering: true,
                    })
                    .map_err(lab_failure)?;
                    _own_lab = Some(OwnLab);
                    OWN_PREFIX.to_string()
                }
            };
            let side = |s: &str| match args.backend.as_str() {
                "afxdp" => format!("lab:{s}@afxdp"),
                _ => format!("lab:{s}"),
            };
            (side("tx"), side("rx"), prefix)
        }
    };
    let argv: Vec<String> = [
        "--port",
        &tx,
        "--rx",
        &rx,
        "--lab",
        &prefix,
        "--udp",
        "198.18.0.1:1000-198.18.1.1:2000",
        "--rate",
        &args.rate,
        "--count",
        &args.count.to_string(),
        "--size",
        &args.size,
        "--quiet",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let gen = parse_gen_args(&argv)?;
    println!(
        "calibrating: {} frames at {} from {tx} to {rx}",
        args.count, args.rate
    );
    let (scenario, report) = execute(&gen)?;
    print_summary(&scenario, &report);
    print_latency(&scenario, &report, None);
    if let Some(signal) = signals.signal() {
        // A calibration from a cut-short run is not stored: it would pass for a whole one.
        eprintln!(
            "{}: the calibration was not stored (the run was cut short)",
            signals::name(signal)
        );
        return Err(Failure::Interrupted(signal));
    }
    if let Some(failure) = port_failures(&report).into_iter().next() {
        return Err(Failure::Runtime(format!(
            "{failure}; the calibration was not stored"
        )));
    }
    let flow = &scenario.flows[0];
    let stats = report
        .rx_flows
        .first()
        .and_then(Option::as_ref)
        .and_then(|r| r.latency.as_ref())
        .and_then(|l| LatencyStats::from_histogram(l.histogram()))
        .ok_or_else(|| {
            Failure::Runtime(format!(
                "no frame came back from {tx} to {rx}: check that the two ports are cabled to each other"
            ))
        })?;
    let (tx_ts, rx_ts) = timestamp_sources(&report, flow);
    let created = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let file = json!({
        "kind": KIND,
        "version": VERSION,
        "created_unix_s": created,
        "tx_port": tx,
        "rx_port": rx,
        "rate": args.rate,
        "size": args.size,
        "timestamps": {"tx": tx_ts, "rx": rx_ts},
        "latency": stats,
        "offset_ns": stats.p50_ns,
    });
    let text = serde_json::to_string_pretty(&file).unwrap_or_default();
    write_file(&args.out, text.as_bytes())?;
    println!(
        "calibration stored in {}: offset {:.3} µs (median), spread p99 − p50 {:.3} µs; use it with strobe gen --calibration {}",
        args.out.display(),
        stats.p50_ns / 1e3,
        (stats.p99_ns - stats.p50_ns) / 1e3,
        args.out.display()
    );
    Ok(())
}

/// Reads a calibration file written by `strobe calibrate`.
pub fn load_calibration(path: &Path) -> Result<Correction, Failure> {
    let bad = |why: String| {
        Failure::BadInput(format!(
            "--calibration {}: {why} (write one with `strobe calibrate --out {}`)",
            path.display(),
            path.display()
        ))
    };
    let text = std::fs::read_to_string(path).map_err(|e| bad(format!("cannot read it: {e}")))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| bad(format!("not JSON: {e}")))?;
    if v["kind"] != KIND {
        return Err(bad("not a strobe calibration file".into()));
    }
    if v["version"].as_u64() != Some(VERSION) {
        return Err(bad(format!(
            "version {} is not the supported {VERSION}",
            v["version"]
        )));
    }
    let offset_ns = v["offset_ns"]
        .as_f64()
        .filter(|o| o.is_finite() && *o >= 0.0)
        .ok_or_else(|| bad("`offset_ns` is missing or not a non-negative number".into()))?;
    Ok(Correction {
        source: path.display().to_string(),
        offset_ns,
    })
}
