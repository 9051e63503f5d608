use clap::Args;
use strobe_control::analyze::{analyze, Capture, Expectation, FloorChoice, FloorModel, Options};
use strobe_control::timing::{PathFloor, Pattern, Rate, ScheduleSpec};

use crate::failure::Failure;

#[derive(Args)]
pub struct AnalyzeArgs {
    /// Capture file (pcap with µs or ns timestamps, or pcapng).
    capture: String,
    /// Target timing to compare against: cbr:RATE, poisson:RATE (RATE like 100kpps, 1mpps,
    /// 1000, or an L1 bit rate like 10gbps for cbr), or any `gen --pattern` at a rate as
    /// PATTERN@RATE (burst:32/10us@500kpps, on_off:1ms/9ms@100kpps, empirical:GAPS.CSV@1).
    #[arg(long)]
    expect: Option<String>,
    /// The sending path's floor to judge a random or bursty model through: auto (estimated
    /// from the capture's smallest gaps; the default for every model but cbr), none, or
    /// HANDOVER/SPACING as `gen` reports it (e.g. 2.2us/0.9us).
    #[arg(long, value_name = "auto|none|HANDOVER/SPACING")]
    floor: Option<String>,
    /// Timing jitter the floor-aware comparison tolerates (e.g. 500ns): every gap may be off
    /// by this much. Default: 10 % of the floor's spacing, at least 100 ns.
    #[arg(long, value_name = "DURATION")]
    tolerance: Option<String>,
    /// Most frames the sender put in one hand-over (gen's --batch; default 256).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=256))]
    max_batch: Option<u16>,
    /// Gap (ns) at or below which two frames count as back to back.
    #[arg(long, value_name = "NS", allow_hyphen_values = true, value_parser = crate::values::count)]
    burst_gap: Option<u64>,
    /// Number of histogram bins.
    #[arg(long, default_value_t = 20, allow_hyphen_values = true, value_parser = crate::values::at_least_one)]
    bins: usize,
    /// Write the report as JSON to FILE; `-` or no FILE: to the standard output, the text
    /// report then going to stderr.
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    json: Option<std::path::PathBuf>,
}

/// The expectation (rate and precision targets) and the timing model of `--expect`.
fn read_expectation(text: &str) -> Result<(Option<Expectation>, ScheduleSpec, String), Failure> {
    let bad = |e: String| Failure::BadInput(format!("--expect {text}: {e}"));
    if let Some((pattern, rate)) = text.split_once('@') {
        let pattern = strobe_control::model::quick::parse_pattern(
            pattern,
            &strobe_control::source::FileResources::cwd(),
        )
        .map_err(|e| bad(e.to_string()))?;
        let rate = strobe_control::timing::parse_rate(rate).map_err(|e| bad(e.to_string()))?;
        // Named as the user wrote it (burst:32/10us@500kpps says all there is to say).
        let name = text.to_string();
        let expect = match (&pattern, rate) {
            (Pattern::Poisson, Rate::Pps(pps)) => Some(Expectation::Poisson { pps }),
            (Pattern::Cbr, Rate::Pps(pps)) => Some(Expectation::Cbr { pps }),
            _ => None,
        };
        return Ok((
            expect,
            ScheduleSpec {
                rate,
                pattern,
                ..ScheduleSpec::default()
            },
            name,
        ));
    }
    let expect = text
        .parse::<Expectation>()
        .map_err(|e| bad(e.to_string()))?;
    let (pattern, rate) = match expect {
        Expectation::Poisson { pps } => (Pattern::Poisson, Rate::Pps(pps)),
        Expectation::Cbr { pps } => (Pattern::Cbr, Rate::Pps(pps)),
        Expectation::CbrL1 { bits_per_sec } => (Pattern::Cbr, Rate::L1BitsPerSec(bits_per_sec)),
    };
    Ok((
        Some(expect),
        ScheduleSpec {
            rate,
            pattern,
            ..ScheduleSpec::default()
        },
        expect.to_string(),
    ))
}

/// What `--floor` asked for.
enum FloorArg {
    /// Not given: auto for every model but cbr.
    Default,
    None,
    Judge(FloorChoice),
}

pub fn run(args: AnalyzeArgs) -> Result<(), Failure> {
    let model = args.expect.as_deref().map(read_expectation).transpose()?;
    let tolerance_ns = args
        .tolerance
        .as_deref()
        .map(|text| {
            strobe_control::timing::parse_duration_ns(text)
                .map_err(|e| Failure::BadInput(format!("--tolerance {text}: {e}")))
        })
        .transpose()?;
    let floor = match args.floor.as_deref() {
        None => FloorArg::Default,
        Some("auto") => FloorArg::Judge(FloorChoice::Auto),
        Some("none") => FloorArg::None,
        Some(text) => FloorArg::Judge(FloorChoice::Given(text.parse::<PathFloor>().map_err(
            |e| {
                Failure::BadInput(format!(
                    "--floor {text}: {e}; or give auto (estimated from the capture) or none"
                ))
            },
        )?)),
    };
    let (expect, floor_model) = match model {
        Some((expect, spec, name)) => {
            let floor = match floor {
                FloorArg::Judge(choice) => Some(choice),
                FloorArg::None => None,
                // Constant rate is judged by its own precision targets; every other model
                // through the floor estimated from the capture.
                FloorArg::Default => (spec.pattern != Pattern::Cbr).then_some(FloorChoice::Auto),
            };
            let floor_model = floor.map(|floor| FloorModel {
                specs: vec![spec],
                name,
                floor,
                max_batch: usize::from(args.max_batch.unwrap_or(256)),
                tolerance_ns,
            });
            (expect, floor_model)
        }
        None => {
            let given = [
                ("--floor", args.floor.is_some()),
                ("--tolerance", args.tolerance.is_some()),
                ("--max-batch", args.max_batch.is_some()),
            ];
            if let Some((flag, _)) = given.iter().find(|(_, set)| *set) {
                return Err(Failure::BadInput(format!(
                    "{flag} needs a timing model to judge the capture through the path's floor: \
                     add --expect, e.g. --expect poisson:100kpps"
                )));
            }
            (None, None)
        }
    };
    let times = strobe_control::host::read_capture_times(&args.capture)
        .map_err(|e| Failure::BadInput(e.to_string()))?;
    if times.probes > 0 {
        eprintln!(
            "note: left out {} floor probe frames (strobe's path measurement, `strobe ports --floor`)",
            times.probes
        );
    }
    let format = times.format;
    let capture = Capture {
        timestamps_ns: times.timestamps_ns,
        frame_lens: times.frame_lens,
        resolution_ns: times.resolution_ns,
    };
    let options = Options {
        expect,
        floor_model,
        burst_gap_ns: args.burst_gap,
        histogram_bins: args.bins,
    };
    let report = analyze(&capture, &options)
        .map_err(|e| Failure::BadInput(format!("{}: {e}", args.capture)))?;
    if let Some(path) = &args.json {
        crate::outputs::write_file(
            path,
            crate::outputs::document("analyze", &report).as_bytes(),
        )?;
    }
    println!(
        "capture: {} ({}, {} ns resolution)",
        args.capture, format, capture.resolution_ns
    );
    println!("{report}");
    Ok(())
}
