//! `strobe demo`: a first real result with nothing to set up. Brings up the virtual lab
//! (its own, under a separate prefix), sends a throughput run and a mixed CBR + Poisson run
//! through the device under test, prints what came back, and removes the lab again.

use clap::Args;
use strobe_engine::{run_scenario, RunOptions, RunReport};
use strobe_lab::{Dut, Lab, LabConfig};
use strobe_model::quick::{self, QuickArgs};
use strobe_model::{PortSpec, Scenario};

use crate::gen_cmd::FileResources;
use crate::lab_cmd::lab_failure;
use crate::results::{print_latency, print_summary};
use crate::{signals, Failure};

/// The demo's own lab, so a lab the user has up is never touched.
const DEMO_PREFIX: &str = "strobe-demo";

#[derive(Args)]
pub struct DemoArgs {
    /// Seconds per run.
    #[arg(long, default_value_t = 3.0, allow_hyphen_values = true, value_parser = crate::values::positive_seconds)]
    seconds: f64,
    /// Device under test: cable | bridge | router | tbf:RATE.
    #[arg(long, default_value = "router")]
    dut: String,
}

/// Removes the demo lab when the demo ends, however it ends.
struct LabGuard;

impl Drop for LabGuard {
    fn drop(&mut self) {
        match strobe_lab::down(DEMO_PREFIX) {
            Ok(_) => println!("\n== lab `{DEMO_PREFIX}` removed"),
            Err(e) => eprintln!("warning: could not remove lab `{DEMO_PREFIX}`: {e}"),
        }
    }
}

fn hex(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// One UDP flow from the lab's tx side to its rx side.
fn lab_flow(lab: &Lab, src_port: u16, rate: &str, pattern: &str, seconds: f64) -> QuickArgs {
    QuickArgs {
        port: lab.port(&lab.tx, "afpacket"),
        udp: Some(format!("{}:{src_port}-{}:2000", lab.tx.ipv4, lab.rx.ipv4)),
        src_mac: Some(hex(lab.tx.mac)),
        dst_mac: Some(hex(lab.tx.next_hop_mac)),
        size: "64".into(),
        rate: rate.into(),
        pattern: pattern.into(),
        duration: Some(format!("{seconds}s")),
        ..QuickArgs::default()
    }
}

/// A scenario of several one-flow descriptions on the same tx port, received at lab rx.
fn scenario(lab: &Lab, flows: &[(&str, QuickArgs)]) -> Result<Scenario, Failure> {
    let mut out: Option<Scenario> = None;
    for (i, (name, q)) in flows.iter().enumerate() {
        let mut s =
            quick::build(q, &FileResources::cwd()).map_err(|e| Failure::BadInput(e.to_string()))?;
        let mut f = s.flows.remove(0);
        f.name = (*name).to_string();
        f.id = i as u16;
        f.rx_ports = vec!["rx".into()];
        match &mut out {
            Some(acc) => {
                f.tx_port = acc.ports[0].name.clone();
                acc.flows.push(f);
            }
            None => {
                s.flows = vec![f];
                let speed_bps = s.ports[0].speed_bps;
                s.ports.push(PortSpec {
                    name: "rx".into(),
                    location: lab.port(&lab.rx, "afpacket"),
                    speed_bps,
                    cores: None,
                });
                out = Some(s);
            }
        }
    }
    out.ok_or_else(|| Failure::Runtime("no flows".into()))
}

/// Runs one part of the demo; a signal stops it like a `strobe gen` run.
fn run(s: &Scenario, opts: &RunOptions) -> Result<RunReport, Failure> {
    let signals = signals::install()?;
    if let Some(signal) = signals.signal() {
        return Err(Failure::Interrupted(signal));
    }
    let opts = RunOptions {
        drain_abort: Some(signals.abort_drain.clone()),
        ..opts.clone()
    };
    run_scenario(s, &opts, signals.stop.clone(), u64::MAX, &mut |_| {}).map_err(Failure::from)
}

pub fn run_demo(args: DemoArgs) -> Result<(), Failure> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(Failure::BadInput(
            "strobe demo builds a virtual lab of network namespaces, which needs root: run it with sudo \
             (scripts/demo.sh does)"
                .into(),
        ));
    }
    let dut: Dut = args
        .dut
        .parse()
        .map_err(|e| Failure::BadInput(format!("--dut {}: {e}", args.dut)))?;
    // From here on a signal stops the current part, skips the rest and removes the lab.
    let signals = signals::install()?;
    println!("== 1. The virtual lab: generator, device under test ({dut:?}), sink — namespaces {DEMO_PREFIX}-*");
    let lab = strobe_lab::up(&LabConfig {
        prefix: DEMO_PREFIX.into(),
        dut,
        receive_steering: true,
    })
    .map_err(lab_failure)?;
    let _guard = LabGuard;
    println!(
        "   tx {} {} -> DUT -> rx {} {}",
        lab.tx.iface, lab.tx.ipv4, lab.rx.iface, lab.rx.ipv4
    );

    let secs = args.seconds;
    println!("\n== 2. Throughput: 64-byte UDP frames as fast as strobe sends them (AF_PACKET), {secs} s, counted at the sink");
    let mut q = lab_flow(&lab, 1000, "1000000000000", "cbr", secs);
    q.duration = None;
    q.unbounded = true;
    let s = scenario(&lab, &[("throughput", q)])?;
    let report = run(
        &s,
        &RunOptions {
            unpaced: true,
            time_limit_ns: Some((secs * 1e9) as u64),
            ..RunOptions::default()
        },
    )?;
    print_summary(&s, &report);
    print_latency(&s, &report, None);
    if let (Some(tx), Some(Some(rx))) = (report.ports.first(), report.rx_flows.first()) {
        let t = tx.elapsed_ns as f64 / 1e9;
        let lost = rx.lost.unwrap_or(0);
        println!(
            "   => sent {:.3} Mpps, received {:.3} Mpps through the DUT, {lost} lost ({:.3} %)",
            tx.frames as f64 / t / 1e6,
            rx.counters.unique as f64 / t / 1e6,
            lost as f64 * 100.0 / tx.frames.max(1) as f64
        );
        println!(
            "      (on veth the kernel forwards each frame on the sending core, so this is the DUT's and the \
             kernel's rate as much as strobe's)"
        );
    }

    signals.outcome()?;
    println!("\n== 3. Mixed traffic: a 20 kpps constant-rate flow and a 20 kpps Poisson flow, {secs} s, paced frame by frame");
    let s = scenario(
        &lab,
        &[
            ("cbr-20k", lab_flow(&lab, 1001, "20kpps", "cbr", secs)),
            (
                "poisson-20k",
                lab_flow(&lab, 1002, "20kpps", "poisson", secs),
            ),
        ],
    )?;
    let report = run(&s, &RunOptions::default())?;
    print_summary(&s, &report);
    print_latency(&s, &report, None);
    signals.outcome()?;
    println!("\nNext: `strobe lab up`, `strobe gen --port lab:tx --rx lab:rx …`, `strobe reflect`, `strobe calibrate`, `strobe analyze`, examples/.");
    Ok(())
}
