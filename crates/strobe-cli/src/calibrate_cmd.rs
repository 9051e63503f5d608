//! `strobe calibrate`: measures strobe's own latency — transmit stamp, backend, wire, receive
//! stamp — over a direct cable (the lab's `cable` DUT, or a real loopback cable), and stores it
//! so that later runs can report a DUT's latency with the measurement path subtracted
//! (`strobe gen --calibration FILE`). The file and its offset are the run-control layer's
//! ([`strobe_control::calibration`]).

use std::path::PathBuf;

use clap::Args;
use strobe_control::calibration::CalibrationFile;
use strobe_control::lab::{Dut, LabConfig};
use strobe_control::model::quick::QuickArgs;
use strobe_control::source::OneFlow;
use strobe_control::{PlanOptions, Results};

use crate::display::{print_latency, print_summary, print_verdicts};
use crate::failure::Failure;
use crate::gen_cmd::{run_on_terminal, StatusView};
use crate::lab_cmd::lab_failure;
use crate::outputs::{self, write_file};
use crate::signals;

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
        if let Err(e) = strobe_control::lab::down(OWN_PREFIX) {
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
                    let lab = strobe_control::lab::status(p)
                        .map_err(lab_failure)?
                        .ok_or_else(|| {
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
                    strobe_control::lab::up(&LabConfig {
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
    let flow = OneFlow {
        flow: QuickArgs {
            port: tx.clone(),
            udp: Some("198.18.0.1:1000-198.18.1.1:2000".into()),
            rate: args.rate.clone(),
            count: Some(args.count),
            size: args.size.clone(),
            ..QuickArgs::default()
        },
        rx: Some(rx.clone()),
    };
    let options = PlanOptions {
        lab_prefix: prefix.clone(),
        ..PlanOptions::default()
    };
    let (scenario, pacing) = flow.scenario(&prefix, false)?;
    println!(
        "calibrating: {} frames at {} from {tx} to {rx}",
        args.count, args.rate
    );
    let view = StatusView {
        verbose: false,
        quiet: true,
    };
    let (scenario, report) =
        run_on_terminal(scenario, &PlanOptions { pacing, ..options }, view, true)?;
    let results = Results::new(&scenario, &report, None);
    print_summary(&results);
    print_latency(&results);
    print_verdicts(&results);
    if let Some(signal) = signals.signal() {
        // A calibration from a cut-short run is not stored: it would pass for a whole one.
        eprintln!(
            "{}: the calibration was not stored (the run was cut short)",
            signals::name(signal)
        );
        return Err(Failure::Interrupted(signal));
    }
    let file = CalibrationFile::from_results(&results, &tx, &rx, &args.rate, &args.size)?;
    let stats = file.latency;
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
