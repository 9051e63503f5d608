//! `strobe calc`: calculators for the physical ground truth behind a measurement.

use clap::{Args, Subcommand};
use strobe_control::analyze::physics::{
    parse_length_m, parse_line_rate_bps, FiberLoop, PhysicsError, SINGLE_MODE_GROUP_INDEX,
};

use crate::failure::Failure;
use crate::outputs;

#[derive(Args)]
pub struct CalcArgs {
    #[command(subcommand)]
    command: CalcCommand,
}

#[derive(Subcommand)]
enum CalcCommand {
    /// The least latency of a fibre loop: light's propagation through the fibre plus the
    /// serialisation of one frame (received when its last bit arrives).
    Latency(LatencyArgs),
    /// What a link carries of frames of one size sent back to back: the frame rate, and the
    /// bandwidth at layer 1 and layer 2 (with and without the FCS) — the ground truth a
    /// convoy of packet trains measures against.
    Bandwidth(BandwidthArgs),
}

/// The link and the output, alike in every calculator.
#[derive(Args)]
struct LinkArgs {
    /// Line rate, read as `strobe gen --rate` reads bit rates: 1g, 10g, 25g, 40g, 100g, 100m,
    /// 2.5gbit/s, 10gbps, 9600bps.
    #[arg(long, value_name = "RATE")]
    rate: String,
    /// Print the result as JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct BandwidthArgs {
    #[command(flatten)]
    link: LinkArgs,
    /// Frame size in bytes including the 4-byte FCS (64 to 9216); each frame costs 20 more
    /// bytes on the wire (preamble, start of frame, minimum inter-frame gap).
    #[arg(long, value_name = "BYTES", default_value_t = 64)]
    frame: u32,
}

#[derive(Args)]
struct LatencyArgs {
    /// Fibre length: 2km, 150m, or a plain number of metres.
    #[arg(long, value_name = "LENGTH")]
    fiber: String,
    /// Refractive (group) index of the fibre; the default is standard single-mode fibre
    /// (G.652) at 1550 nm.
    #[arg(long, value_name = "N", default_value_t = SINGLE_MODE_GROUP_INDEX)]
    refractive_index: f64,
    #[command(flatten)]
    link: LinkArgs,
    /// Frame size in bytes including the 4-byte FCS, as `strobe gen --size` and OTG count it
    /// (a capture shows 4 bytes less); the 8-byte preamble/SFD is added on the wire, frames
    /// under 64 bytes are padded.
    #[arg(long, value_name = "BYTES", default_value_t = 64)]
    frame: u32,
}

pub fn run(args: CalcArgs) -> Result<(), Failure> {
    match args.command {
        CalcCommand::Latency(args) => latency(args),
        CalcCommand::Bandwidth(args) => bandwidth(args),
    }
}

fn bandwidth(args: BandwidthArgs) -> Result<(), Failure> {
    use strobe_control::analyze::trains::{expected_bandwidth_bps, Counted};
    let rate = parse_line_rate_bps(&args.link.rate).map_err(|e| bad_flag(&e))?;
    if !(64..=strobe_control::model::MAX_FRAME_SIZE).contains(&args.frame) {
        return Err(Failure::BadInput(format!(
            "--frame {}: give a frame size from 64 to {} bytes, FCS included",
            args.frame,
            strobe_control::model::MAX_FRAME_SIZE
        )));
    }
    let wire_bytes = args.frame + strobe_control::analyze::L1_OVERHEAD_BYTES as u32;
    let pps = rate / (f64::from(wire_bytes) * 8.0);
    let with_fcs = expected_bandwidth_bps(rate, args.frame, Counted::WithFcs);
    let without_fcs = expected_bandwidth_bps(rate, args.frame, Counted::WithoutFcs);
    if args.link.json {
        let json = serde_json::json!({
            "line_rate_bps": rate,
            "frame_bytes": args.frame,
            "wire_bytes": wire_bytes,
            "frames_per_sec": pps,
            "l1_bps": rate,
            "l2_bps": with_fcs,
            "l2_without_fcs_bps": without_fcs,
        });
        let text = serde_json::to_string_pretty(&json).unwrap_or_default();
        // Through the JSON writer: a bare `--json` keeps stdout for the document alone.
        outputs::write_file(std::path::Path::new("-"), format!("{text}\n").as_bytes())?;
    } else {
        let gbit = |bps: f64| format!("{:.3} Gbit/s", bps / 1e9);
        println!(
            "{}-byte frames back to back at {}: {wire_bytes} bytes each on the wire, {:.0} frames/s",
            args.frame,
            gbit(rate),
            pps
        );
        println!(
            "  layer 1 (frames + preamble, start of frame, inter-frame gap): {}",
            gbit(rate)
        );
        println!(
            "  layer 2 (frames with their FCS):                              {}",
            gbit(with_fcs)
        );
        println!(
            "  layer 2 without the FCS (what a capture holds):               {}",
            gbit(without_fcs)
        );
    }
    Ok(())
}

fn latency(args: LatencyArgs) -> Result<(), Failure> {
    let fiber = FiberLoop {
        length_m: parse_length_m(&args.fiber).map_err(|e| bad_flag(&e))?,
        refractive_index: args.refractive_index,
        line_rate_bps: parse_line_rate_bps(&args.link.rate).map_err(|e| bad_flag(&e))?,
        frame_bytes: args.frame,
    };
    let budget = fiber.budget().map_err(|e| bad_flag(&e))?;
    if args.link.json {
        let json = serde_json::to_string_pretty(&budget)
            .map_err(|e| Failure::Runtime(format!("cannot encode the result as JSON: {e}")))?;
        outputs::write_file(std::path::Path::new("-"), format!("{json}\n").as_bytes())?;
    } else {
        println!("{budget}");
    }
    Ok(())
}

/// The error, prefixed with the flag it is about.
fn bad_flag(error: &PhysicsError) -> Failure {
    let flag = match error {
        PhysicsError::ParseLength { .. } | PhysicsError::Length(_) => "--fiber",
        PhysicsError::RefractiveIndex(_) => "--refractive-index",
        PhysicsError::ParseLineRate { .. } | PhysicsError::LineRate(_) => "--rate",
        PhysicsError::EmptyFrame => "--frame",
    };
    Failure::BadInput(format!("{flag}: {error}"))
}
