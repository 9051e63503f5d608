//! `strobe clocks`: the machine's system clocks and PTP hardware clocks, and with `--sync A B`
//! the offset, drift and residual of clock B against clock A.

use std::path::Path;
use std::time::Duration;

use clap::Args;
use serde_json::json;
use strobe_control::host::{
    kernel_tai_offset_s, measure_clocks, open_clock, phc_devices, phc_name, ClockReader,
    SystemClock, SAMPLES_PER_ROUND,
};

use crate::failure::Failure;
use strobe_control::text::{duration_text, duration_text_f64};

#[derive(Args)]
pub struct ClocksArgs {
    /// Measure clock B against clock A; each is realtime, monotonic, tai or a /dev/ptpN path.
    #[arg(long, num_args = 2, value_names = ["A", "B"])]
    sync: Option<Vec<String>>,
    /// Sync rounds (each the median of 7 A-B-A reads); two or more give the drift.
    #[arg(long, default_value_t = 10)]
    rounds: usize,
    /// Time between rounds in ms.
    #[arg(long, default_value_t = 100)]
    interval_ms: u64,
    /// Print machine-readable JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: ClocksArgs) -> Result<(), Failure> {
    match &args.sync {
        Some(pair) => sync(&pair[0], &pair[1], &args),
        None => list(args.json),
    }
}

/// A signed ns count as seconds with 9 decimals, e.g. `+37.000000012 s`.
fn seconds(ns: i128) -> String {
    let sign = if ns < 0 { '-' } else { '+' };
    let abs = ns.unsigned_abs();
    format!("{sign}{}.{:09} s", abs / 1_000_000_000, abs % 1_000_000_000)
}

fn open(spec: &str) -> Result<Box<dyn ClockReader>, Failure> {
    open_clock(spec).map_err(|e| Failure::BadInput(format!("--sync: {e}")))
}

fn sync(a_spec: &str, b_spec: &str, args: &ClocksArgs) -> Result<(), Failure> {
    if args.rounds == 0 {
        return Err(Failure::BadInput(
            "--rounds 0: a sync needs at least one round".to_string(),
        ));
    }
    let mut a = open(a_spec)?;
    let mut b = open(b_spec)?;
    let interval = Duration::from_millis(args.interval_ms);
    let result = measure_clocks(
        a.as_mut(),
        b.as_mut(),
        args.rounds,
        interval,
        std::thread::sleep,
    )
    .map_err(|e| Failure::Runtime(e.to_string()))?;
    let (a_name, b_name) = (a.name(), b.name());
    if args.json {
        let doc = json!({
            "a": a_name,
            "b": b_name,
            "offset_ns": i64::try_from(result.offset_ns).ok(),
            "offset_s": result.offset_ns as f64 / 1e9,
            "residual_ns": result.residual_ns,
            "drift_ppb": result.drift_ppb,
            "uncertainty_ns": result.uncertainty_ns,
            "rounds": result.rounds,
            "interval_ms": args.interval_ms,
            "reads_per_round": SAMPLES_PER_ROUND,
        });
        println!("{doc:#}");
        return Ok(());
    }
    println!(
        "{b_name} against {a_name}: {rounds}, each the median of {SAMPLES_PER_ROUND} \
         {a_name}-{b_name}-{a_name} reads",
        rounds = if result.rounds == 1 {
            "1 round".to_string()
        } else {
            format!("{} rounds {} ms apart", result.rounds, args.interval_ms)
        }
    );
    // The offset keeps every nanosecond (9 decimals of s); other times follow the
    // output's one rule (`duration_text`).
    println!(
        "  offset       {}  ({b_name} − {a_name} at the last round)",
        seconds(result.offset_ns)
    );
    println!(
        "  residual     {}  (rms distance of the rounds from the fitted line)",
        duration_text_f64(result.residual_ns)
    );
    if result.rounds > 1 {
        println!(
            "  drift        {:+.1} ppb  ({b_name} gains this many ns per second on {a_name})",
            result.drift_ppb
        );
    } else {
        println!("  drift        n/a (one round; --rounds 2 or more measures it)");
    }
    println!(
        "  uncertainty  ±{}  (half the {a_name}-{a_name} window of a median read)",
        duration_text(result.uncertainty_ns)
    );
    Ok(())
}

/// Interfaces whose NIC owns a PHC, from sysfs (as this namespace's sysfs mount sees them).
fn phc_interfaces(device: &Path) -> Vec<String> {
    let Some(node) = device.file_name().and_then(|n| n.to_str()) else {
        return Vec::new();
    };
    let Ok(dir) = std::fs::read_dir(format!("/sys/class/ptp/{node}/device/net")) else {
        return Vec::new();
    };
    let mut names: Vec<String> = dir
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn list(as_json: bool) -> Result<(), Failure> {
    let runtime = |e: strobe_control::host::IoError| Failure::Runtime(e.to_string());
    let tai_s = kernel_tai_offset_s().map_err(runtime)?;
    let mut system = Vec::new();
    for (name, kernel_name) in SystemClock::ALL {
        let mut clock = SystemClock::by_name(name).expect("every listed clock has a name");
        system.push((
            name,
            kernel_name,
            clock.resolution_ns().map_err(runtime)?,
            clock.now_ns().map_err(runtime)?,
        ));
    }
    let phcs: Vec<_> = phc_devices()
        .into_iter()
        .map(|path| {
            let name = phc_name(&path);
            let ifaces = phc_interfaces(&path);
            (path, name, ifaces)
        })
        .collect();
    if as_json {
        let doc = json!({
            "system_clocks": system.iter().map(|(name, kernel, res, now)| json!({
                "name": name,
                "kernel_name": kernel,
                "resolution_ns": i64::try_from(*res).ok(),
                "now_ns": i64::try_from(*now).ok(),
            })).collect::<Vec<_>>(),
            "tai_offset_s": tai_s,
            "phc_devices": phcs.iter().map(|(path, name, ifaces)| json!({
                "path": path.display().to_string(),
                "clock_name": name,
                "interfaces": ifaces,
            })).collect::<Vec<_>>(),
        });
        println!("{doc:#}");
        return Ok(());
    }
    println!("system clocks:");
    for (name, kernel_name, res, now) in &system {
        println!(
            "  {name:<10} {kernel_name:<16} resolution {}   now {}",
            duration_text_f64(*res as f64),
            seconds(*now).trim_start_matches('+')
        );
    }
    println!(
        "  the kernel's TAI offset is {tai_s} s (tai = realtime + {tai_s} s; a time daemon sets it)"
    );
    println!("PTP hardware clocks:");
    if phcs.is_empty() {
        println!(
            "  none (virtual NICs such as veth have none; strobe uses kernel software timestamps)"
        );
    }
    for (path, name, ifaces) in &phcs {
        println!(
            "  {:<12} {:<20} interfaces: {}",
            path.display(),
            name.as_deref().unwrap_or("(unnamed)"),
            if ifaces.is_empty() {
                "none in this namespace".to_string()
            } else {
                ifaces.join(", ")
            }
        );
    }
    println!(
        "`strobe clocks --sync A B` measures clock B against A (e.g. --sync realtime /dev/ptp0)."
    );
    Ok(())
}
