//! `strobe reflect PORT`: the far end of a round-trip measurement. Sends every instrumented
//! frame addressed to the port straight back (addresses and ports swapped, trailer marked as
//! reflected) until Ctrl-C, a duration or a frame count, then reports its own counters.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

use clap::Args;
use strobe_control::model::mac_string;
use strobe_control::reflector::{parse_unicast_mac, ReflectReport, Reflector, ReflectorOptions};
use strobe_control::ControlError;

use crate::failure::Failure;
use crate::lab_cmd::{resolve_lab_location, rx_port_forms};
use crate::outputs::{self, write_file, WriteFailures};
use crate::signals;

#[derive(Args)]
pub struct ReflectArgs {
    #[arg(help = concat!("Port to reflect on (usually lab:rx, the lab's sink side), one of:", rx_port_forms!()))]
    port: String,
    /// Prefix of the lab that `lab:` ports refer to.
    #[arg(long, default_value = "strobe", value_name = "PREFIX")]
    lab: String,
    /// Stop after this long, e.g. 10s (default: until Ctrl-C).
    #[arg(long, allow_hyphen_values = true, value_parser = crate::values::positive_text)]
    duration: Option<String>,
    /// Stop after reflecting this many frames.
    #[arg(long, allow_hyphen_values = true, value_parser = crate::values::count)]
    count: Option<u64>,
    /// Reflect every frame addressed to the port, not only frames with strobe's
    /// instrumentation trailer.
    #[arg(long)]
    all: bool,
    /// The MAC address to answer to, e.g. 02:00:00:00:00:01 (default: the interface's own).
    /// Frames to other addresses, broadcast or multicast are never reflected.
    #[arg(long, value_name = "MAC")]
    mac: Option<String>,
    /// Never yield the core while idle (lowest latency; costs a whole core).
    #[arg(long)]
    busy_poll: bool,
    /// No status line while running.
    #[arg(short, long)]
    quiet: bool,
    /// Write the counters as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

pub fn run(args: ReflectArgs) -> Result<(), Failure> {
    if args.count == Some(0) {
        return Err(Failure::BadInput(
            "--count 0: give the number of frames to reflect before stopping (at least 1), \
             or leave --count out to reflect until --duration or Ctrl-C"
                .into(),
        ));
    }
    outputs::check_all(&[("--json", args.json.as_deref())])?;
    let given_mac = args
        .mac
        .as_deref()
        .map(|text| {
            parse_unicast_mac(text).ok_or_else(|| {
                Failure::BadInput(format!(
                    "--mac {text}: not a unicast MAC address; write six hex bytes like \
                     02:00:00:00:00:01 (the lowest bit of the first is clear)"
                ))
            })
        })
        .transpose()?;
    let location = resolve_lab_location(&args.port, &args.lab)?;
    let limit = args
        .duration
        .as_deref()
        .map(|d| {
            strobe_control::timing::parse_duration_ns(d)
                .map(Duration::from_nanos)
                .map_err(|e| Failure::BadInput(format!("--duration {d}: {e}")))
        })
        .transpose()?;
    let options = ReflectorOptions {
        mac: given_mac,
        all_frames: args.all,
        busy_poll: args.busy_poll,
        limit,
        max_frames: args.count,
    };
    let reflector = Reflector::open(&location, options).map_err(|e| match e {
        ControlError::BadInput(m) => Failure::BadInput(format!("port {}: {m}", args.port)),
        ControlError::Runtime(m) => Failure::Runtime(format!("port {}: {m}", args.port)),
    })?;
    let signals = signals::install()?;
    if !args.quiet {
        eprintln!(
            "reflecting on {location}, frames to {} (Ctrl-C to stop)",
            mac_string(reflector.mac())
        );
    }
    let mut last = (0u64, Duration::ZERO);
    let report = reflector.run(
        &signals.stop,
        Duration::from_secs(1),
        &mut |live, elapsed| {
            if args.quiet {
                return;
            }
            let reflected = live.reflected.load(Ordering::Relaxed);
            let dt = (elapsed - last.1).as_secs_f64();
            eprintln!(
                "{:>6.1}s  reflected {reflected:>12}  {:>10.0} pps",
                elapsed.as_secs_f64(),
                (reflected - last.0) as f64 / dt
            );
            last = (reflected, elapsed);
        },
    )?;
    // The file first: the terminal may be gone by now (SIGHUP).
    let mut failures = WriteFailures::default();
    if let Some(path) = &args.json {
        let text = crate::outputs::document(
            "reflect",
            &strobe_control::results::ReflectResult::from(&report),
        );
        failures.note(write_file(path, text.as_bytes()));
    }
    print_report(&report);
    if let Some(f) = &report.failure {
        failures.note(Err(Failure::Runtime(format!(
            "the reflector stopped early, {f}; the counts above are those until then"
        ))));
    }
    failures.outcome(signals.outcome())
}

fn print_report(r: &ReflectReport) {
    println!("reflector");
    println!("  receiver: {}", r.receiver);
    println!("  backend:  {}", r.backend);
    println!(
        "  received {}, reflected {}, not instrumented (left alone) {}, unfit {}, dropped at transmit {}, dropped by the kernel (ring full) {}",
        r.received, r.reflected, r.not_instrumented, r.unfit, r.tx_dropped, r.rx_drops.ring_full
    );
    println!(
        "  refused: to another address {}, to a group address {}, from a group address {}, already reflected {}",
        r.not_for_us, r.group_destination, r.group_source, r.already_reflected
    );
    if let Some(f) = &r.failure {
        println!("  stopped by an error: {f}");
    }
}
