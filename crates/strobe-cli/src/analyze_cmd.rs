use clap::Args;
use strobe_analyze::{analyze, Capture, Expectation, Options};

use crate::Failure;

#[derive(Args)]
pub struct AnalyzeArgs {
    /// Capture file (pcap with µs or ns timestamps, or pcapng).
    capture: String,
    /// Target timing to compare against: cbr:RATE, poisson:RATE (RATE like 100kpps, 1mpps,
    /// 1000, or an L1 bit rate like 10gbps for cbr).
    #[arg(long)]
    expect: Option<String>,
    /// Gap (ns) at or below which two frames count as back to back.
    #[arg(long, value_name = "NS", allow_hyphen_values = true, value_parser = crate::values::count)]
    burst_gap: Option<u64>,
    /// Number of histogram bins.
    #[arg(long, default_value_t = 20, allow_hyphen_values = true, value_parser = crate::values::at_least_one)]
    bins: usize,
    /// Print the report as JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: AnalyzeArgs) -> Result<(), Failure> {
    let expect = args
        .expect
        .as_deref()
        .map(|s| {
            s.parse::<Expectation>()
                .map_err(|e| Failure::BadInput(format!("--expect {s}: {e}")))
        })
        .transpose()?;
    let mut timestamps_ns = Vec::new();
    let mut frame_lens = Vec::new();
    // Floor probe frames (sent before a paced run to measure the path) are not the run's.
    let mut probes = 0u64;
    let info = strobe_io::read_capture(&args.capture, false, |f| {
        if strobe_wire::trailer::is_probe(&f.data) {
            probes += 1;
            return;
        }
        timestamps_ns.push(f.ts_ns);
        frame_lens.push(f.orig_len);
    })
    .map_err(|e| Failure::BadInput(e.to_string()))?;
    if probes > 0 && !args.json {
        eprintln!("note: left out {probes} floor probe frames (strobe's path measurement before a paced run)");
    }
    let capture = Capture {
        timestamps_ns,
        frame_lens,
        resolution_ns: info.resolution_ns,
    };
    let options = Options {
        expect,
        burst_gap_ns: args.burst_gap,
        histogram_bins: args.bins,
    };
    let report = analyze(&capture, &options)
        .map_err(|e| Failure::BadInput(format!("{}: {e}", args.capture)))?;
    if args.json {
        println!("{}", report.to_json());
    } else {
        println!(
            "capture: {} ({}, {} ns resolution)",
            args.capture, info.format, info.resolution_ns
        );
        println!("{report}");
    }
    Ok(())
}
