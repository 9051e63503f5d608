//! `strobe reflect PORT`: the far end of a round-trip measurement. Sends every instrumented
//! frame straight back (addresses and ports swapped, trailer kept) until Ctrl-C, a duration
//! or a frame count, then reports its own counters.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::json;
use strobe_engine::reflect::{run_reflect, ReflectCounters, ReflectOptions, ReflectReport};
use strobe_engine::rx_worker::IdlePolicy;

use crate::lab_cmd::{resolve_lab_location, rx_port_forms};
use crate::Failure;

#[derive(Args)]
pub struct ReflectArgs {
    #[arg(help = concat!("Port to reflect on (usually lab:rx, the lab's sink side), one of:", rx_port_forms!()))]
    port: String,
    /// Prefix of the lab that `lab:` ports refer to.
    #[arg(long, default_value = "strobe", value_name = "PREFIX")]
    lab: String,
    /// Stop after this long, e.g. 10s (default: until Ctrl-C).
    #[arg(long)]
    duration: Option<String>,
    /// Stop after reflecting this many frames.
    #[arg(long)]
    count: Option<u64>,
    /// Reflect every frame, not only frames with strobe's instrumentation trailer.
    #[arg(long)]
    all: bool,
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
    let location = resolve_lab_location(&args.port, &args.lab)?;
    let limit = args
        .duration
        .as_deref()
        .map(|d| {
            strobe_timing::parse_duration_ns(d)
                .map(Duration::from_nanos)
                .map_err(|e| Failure::BadInput(format!("--duration {d}: {e}")))
        })
        .transpose()?;
    let (mut tx, mut rx) = strobe_io::open_duplex(&location, 64)
        .map_err(|e| Failure::BadInput(format!("port {}: {e}", args.port)))?;
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        ctrlc::set_handler(move || stop.store(true, Ordering::Relaxed))
            .map_err(|e| Failure::Runtime(format!("cannot install the Ctrl-C handler: {e}")))?;
    }
    let opts = ReflectOptions {
        all_frames: args.all,
        idle: if args.busy_poll {
            IdlePolicy::busy()
        } else {
            IdlePolicy::default()
        },
        max_frames: args.count,
    };
    let live = ReflectCounters::default();
    if !args.quiet {
        eprintln!("reflecting on {location} (Ctrl-C to stop)");
    }
    let report = std::thread::scope(|scope| {
        let worker = scope.spawn(|| run_reflect(&mut rx, &mut tx, &opts, &stop, Some(&live)));
        let started = Instant::now();
        let mut last = (0u64, started);
        while !worker.is_finished() {
            std::thread::sleep(Duration::from_millis(20));
            if limit.is_some_and(|l| started.elapsed() >= l) {
                stop.store(true, Ordering::Relaxed);
            }
            if !args.quiet && last.1.elapsed() >= Duration::from_secs(1) {
                let reflected = live.reflected.load(Ordering::Relaxed);
                let dt = last.1.elapsed().as_secs_f64();
                eprintln!(
                    "{:>6.1}s  reflected {reflected:>12}  {:>10.0} pps",
                    started.elapsed().as_secs_f64(),
                    (reflected - last.0) as f64 / dt
                );
                last = (reflected, Instant::now());
            }
        }
        worker.join()
    })
    .map_err(|_| Failure::Runtime("the reflector worker panicked".into()))?
    .map_err(Failure::from)?;
    print_report(&report);
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report_json(&report)).unwrap_or_default();
        std::fs::write(path, text)
            .map_err(|e| Failure::Runtime(format!("cannot write {}: {e}", path.display())))?;
    }
    Ok(())
}

fn print_report(r: &ReflectReport) {
    println!("reflector");
    println!("  receiver: {}", r.receiver);
    println!("  backend:  {}", r.backend);
    println!(
        "  received {}, reflected {}, not instrumented (left alone) {}, unfit {}, dropped at transmit {}, dropped by the kernel (ring full) {}",
        r.received, r.reflected, r.not_instrumented, r.unfit, r.tx_dropped, r.rx_drops.ring_full
    );
}

fn report_json(r: &ReflectReport) -> serde_json::Value {
    json!({
        "receiver": r.receiver,
        "backend": r.backend,
        "received": r.received,
        "reflected": r.reflected,
        "not_instrumented": r.not_instrumented,
        "unfit": r.unfit,
        "tx_dropped": r.tx_dropped,
        "rx_ring_full": r.rx_drops.ring_full,
    })
}
