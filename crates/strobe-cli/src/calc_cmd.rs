//! `strobe calc`: calculators for the physical ground truth behind a measurement.

use clap::{Args, Subcommand};
use strobe_analyze::physics::{
    parse_length_m, parse_line_rate_bps, FiberLoop, PhysicsError, SINGLE_MODE_GROUP_INDEX,
};

use crate::failure::Failure;

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
    /// Line rate, read as `strobe gen --rate` reads bit rates: 1g, 10g, 25g, 40g, 100g, 100m,
    /// 2.5gbit/s, 10gbps, 9600bps.
    #[arg(long, value_name = "RATE")]
    rate: String,
    /// Frame size in bytes including the 4-byte FCS, as `strobe gen --size` and OTG count it
    /// (a capture shows 4 bytes less); the 8-byte preamble/SFD is added on the wire, frames
    /// under 64 bytes are padded.
    #[arg(long, value_name = "BYTES", default_value_t = 64)]
    frame: u32,
    /// Print the result as JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: CalcArgs) -> Result<(), Failure> {
    match args.command {
        CalcCommand::Latency(args) => latency(args),
    }
}

fn latency(args: LatencyArgs) -> Result<(), Failure> {
    let fiber = FiberLoop {
        length_m: parse_length_m(&args.fiber).map_err(|e| bad_flag(&e))?,
        refractive_index: args.refractive_index,
        line_rate_bps: parse_line_rate_bps(&args.rate).map_err(|e| bad_flag(&e))?,
        frame_bytes: args.frame,
    };
    let budget = fiber.budget().map_err(|e| bad_flag(&e))?;
    if args.json {
        let json = serde_json::to_string_pretty(&budget)
            .map_err(|e| Failure::Runtime(format!("cannot encode the result as JSON: {e}")))?;
        println!("{json}");
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
