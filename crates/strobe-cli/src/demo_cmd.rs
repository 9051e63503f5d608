//! `strobe demo`: a first real result with nothing to set up. Brings up the virtual lab
//! (its own, under a separate prefix), sends a throughput run and a mixed CBR + Poisson run
//! through the device under test, prints what came back, and removes the lab again.

use clap::Args;
use strobe_control::analyze::latency::LatencyStats;
use strobe_control::history::Recorder;
use strobe_control::lab::{Dut, Lab, LabConfig};
use strobe_control::model::quick::QuickArgs;
use strobe_control::model::Scenario;
use strobe_control::source::OneFlow;
use strobe_control::RunReport;
use strobe_control::{Pacing, PlanOptions, Results};

use crate::display::{print_latency, print_summary};
use crate::failure::Failure;
use crate::lab_cmd::lab_failure;
use crate::signals;

/// A saturated path's p99 above which the demo explains queueing (an idle veth path's is
/// tens of µs).
const SATURATED_P99_NS: f64 = 200_000.0;

/// The demo's own lab, so a lab the user has up is never touched.
const DEMO_PREFIX: &str = "strobe-demo";

#[derive(Args)]
pub struct DemoArgs {
    /// Seconds per run.
    #[arg(long, default_value_t = 3.0, allow_hyphen_values = true, value_parser = crate::values::positive_seconds)]
    seconds: f64,
    /// Device under test: cable | bridge | router | tbf:RATE | nft:RULES | xdp.
    #[arg(long, default_value = "router")]
    dut: String,
    /// Also print the full report of each part: backends and their rings, clocks,
    /// timestamp sources, hand-over precision.
    #[arg(short, long)]
    verbose: bool,
    #[command(flatten)]
    history: crate::runs_cmd::HistoryArgs,
}

/// Removes the demo lab when the demo ends, however it ends.
struct LabGuard;

impl Drop for LabGuard {
    fn drop(&mut self) {
        match strobe_control::lab::down(DEMO_PREFIX) {
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

/// A scenario of several one-flow descriptions on the same tx port, received at lab rx,
/// and its pacing (the first flow's: a `max` rate is an unpaced part).
fn scenario(lab: &Lab, flows: &[(&str, QuickArgs)]) -> Result<(Scenario, Pacing), Failure> {
    let mut out: Option<(Scenario, Pacing)> = None;
    for (i, (name, q)) in flows.iter().enumerate() {
        let one = OneFlow {
            flow: q.clone(),
            rx: Some(lab.port(&lab.rx, "afpacket")),
        };
        let (mut s, pacing) = one.scenario(DEMO_PREFIX, false)?;
        let mut f = s.flows.remove(0);
        f.name = (*name).to_string();
        f.id = i as u16;
        match &mut out {
            Some((acc, _)) => {
                f.tx_port = acc.ports[0].name.clone();
                acc.flows.push(f);
            }
            None => {
                s.flows = vec![f];
                out = Some((s, pacing));
            }
        }
    }
    out.ok_or_else(|| Failure::Runtime("no flows".into()))
}

/// Runs one part of the demo through the run-control layer; a signal stops it like a
/// `strobe gen` run. The part is recorded in the run history as a run of kind `demo`.
fn run(
    s: &Scenario,
    pacing: Pacing,
    part: &str,
    recorder: &mut Recorder,
) -> Result<(Scenario, RunReport), Failure> {
    let provenance = crate::runs_cmd::provenance("demo");
    let signals = signals::install()?;
    if let Some(signal) = signals.signal() {
        return Err(Failure::Interrupted(signal));
    }
    let options = PlanOptions {
        lab_prefix: DEMO_PREFIX.into(),
        pacing,
        ..PlanOptions::default()
    };
    let mut plan = strobe_control::prepare(s.clone(), &options)?;
    plan.options.drain_abort = Some(signals.abort_drain.clone());
    let report =
        strobe_control::run::run_blocking(&plan, signals.stop.clone(), u64::MAX, &mut |_| {})?;
    let results = Results::new(&plan.scenario, &report, None);
    let config = serde_json::json!({
        "args": std::env::args().skip(1).collect::<Vec<_>>(),
        "part": part,
    });
    if let Some(line) = crate::runs_cmd::record_engine_run(
        recorder,
        &provenance,
        signals.signal(),
        config,
        &plan.scenario,
        &report,
        &results,
    ) {
        println!("   ({line})");
    }
    Ok((plan.scenario, report))
}

/// The full report of one part (`--verbose`).
fn print_details(s: &Scenario, report: &RunReport) {
    let results = Results::new(s, report, None);
    print_summary(&results);
    print_latency(&results);
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
    if !(args.seconds.is_finite() && args.seconds > 0.0 && args.seconds <= 3600.0) {
        return Err(Failure::BadInput(format!(
            "--seconds {}: give a length per part between 0 and 3600 seconds, e.g. 3",
            args.seconds
        )));
    }
    let mut recorder = args.history.recorder()?;
    // From here on a signal stops the current part, skips the rest and removes the lab.
    let signals = signals::install()?;
    println!("== 1. The virtual lab");
    let lab = strobe_control::lab::up(&LabConfig {
        prefix: DEMO_PREFIX.into(),
        receive_steering: dut.steers_receive_by_default(),
        dut,
    })
    .map_err(lab_failure)?;
    let _guard = LabGuard;
    explain(&[
        &format!("Network namespaces {DEMO_PREFIX}-* joined by virtual Ethernet cables (veth):"),
        &format!(
            "strobe sends from {} ({}), the device under test ({}) forwards,",
            lab.tx.iface,
            lab.tx.ipv4,
            lab.dut.name()
        ),
        &format!(
            "and strobe counts and timestamps every frame that arrives at {} ({}).",
            lab.rx.iface, lab.rx.ipv4
        ),
        "Nothing leaves this machine; the lab is removed at the end.",
    ]);

    let secs = args.seconds;
    println!("\n== 2. Throughput: how many frames per second get through the DUT");
    explain(&[
        &format!("64-byte UDP frames, sent as fast as strobe can for {secs} s (no pacing), counted at the sink."),
        "Offered more than it can forward, the DUT queues frames and then drops what does not fit.",
    ]);
    let (s, pacing) = scenario(
        &lab,
        &[("throughput", lab_flow(&lab, 1000, "max", "cbr", secs))],
    )?;
    let (s, report) = run(&s, pacing, "throughput", &mut recorder)?;
    if args.verbose {
        print_details(&s, &report);
    }
    let part = Part::of(&s, &report);
    part.print_table();
    if part.stopped_early {
        explain(&[&format!(
            "\"stopped before the end\": this part has no planned end; strobe stopped it after {secs} s, as asked."
        )]);
    }
    if let Some(p99) = part.flows.first().and_then(|f| f.latency.map(|l| l.p99_ns)) {
        if p99 >= SATURATED_P99_NS {
            explain(&[
                &format!(
                    "Why p99 is {} here, far above part 3: frames come faster than the kernel and the DUT",
                    human_time(p99)
                ),
                "take them in, so they wait in queues (the backlogs in front of and inside the DUT).",
                "At saturation latency measures how full those queues are; part 3 shows the path itself.",
            ]);
        }
    }
    println!(
        "   => verdict: {}",
        throughput_verdict(&part, &lab.dut.name())
    );
    if !args.verbose {
        explain(&["(on veth the kernel forwards each frame on the sending core, so this rate is the DUT's and the kernel's as much as strobe's)"]);
    }

    signals.outcome()?;
    println!("\n== 3. Latency at a moderate load: a 20 kpps constant-rate flow and a 20 kpps Poisson flow, {secs} s");
    explain(&[
        "Far below the DUT's limit, so its queues stay short: latency here is the path itself (the",
        "kernel, the DUT, the veths) plus the timestamps. Constant rate sends evenly spaced frames;",
        "Poisson sends random gaps, as independent users do, whose short bursts briefly build a queue.",
    ]);
    let (s, pacing) = scenario(
        &lab,
        &[
            ("cbr-20k", lab_flow(&lab, 1001, "20kpps", "cbr", secs)),
            (
                "poisson-20k",
                lab_flow(&lab, 1002, "20kpps", "poisson", secs),
            ),
        ],
    )?;
    let (s, report) = run(&s, pacing, "latency", &mut recorder)?;
    if args.verbose {
        print_details(&s, &report);
    }
    let part = Part::of(&s, &report);
    part.print_table();
    for line in late_explanation(&part, secs) {
        explain(&[&line]);
    }
    if part.stopped_early {
        explain(&["\"stopped before the end\": the part was interrupted before every planned frame was sent."]);
    }
    println!("   => verdict: {}", paced_verdict(&part));
    if !args.verbose {
        println!("\n(-v shows the full report: backends, rings, clocks and timestamp sources.)");
    }
    signals.outcome()?;
    println!("\nNext: `strobe lab up`, `strobe gen --port lab:tx --rx lab:rx …`, `strobe reflect`, `strobe calibrate`, `strobe analyze`, examples/.");
    Ok(())
}

fn explain(lines: &[&str]) {
    for line in lines {
        println!("   {line}");
    }
}

/// A time in the unit that reads best: µs below a millisecond, ms below a second, else s.
fn human_time(ns: f64) -> String {
    if ns < 1e6 {
        format!("{:.1} µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.1} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

/// What one part of the demo did, per flow and in total.
struct Part {
    flows: Vec<PartFlow>,
    /// Seconds from the first to the last frame handed over.
    elapsed_s: f64,
    late_frames: u64,
    max_late_ns: u64,
    stopped_early: bool,
}

struct PartFlow {
    name: String,
    sent: u64,
    received: u64,
    lost: u64,
    latency: Option<LatencyStats>,
}

impl Part {
    fn of(s: &Scenario, r: &RunReport) -> Part {
        let flows = s
            .flows
            .iter()
            .map(|f| {
                let sent = r.frames_sent(f.id);
                let rx = r.rx_flows.get(f.id as usize).and_then(Option::as_ref);
                PartFlow {
                    name: f.name.clone(),
                    sent,
                    received: rx.map_or(0, |x| x.counters.unique),
                    lost: rx.and_then(|x| x.lost).unwrap_or(sent),
                    latency: rx
                        .and_then(|x| x.latency.as_ref())
                        .and_then(|l| LatencyStats::from_histogram(l.histogram())),
                }
            })
            .collect();
        Part {
            flows,
            elapsed_s: r.ports.iter().map(|p| p.elapsed_ns).max().unwrap_or(0) as f64 / 1e9,
            late_frames: r.ports.iter().map(|p| p.late_frames).sum(),
            max_late_ns: r.ports.iter().map(|p| p.max_late_ns).max().unwrap_or(0),
            stopped_early: r.ports.iter().any(|p| p.stopped_early),
        }
    }

    fn sent(&self) -> u64 {
        self.flows.iter().map(|f| f.sent).sum()
    }

    fn rate(&self, frames: u64) -> f64 {
        if self.elapsed_s > 0.0 {
            frames as f64 / self.elapsed_s
        } else {
            0.0
        }
    }

    fn print_table(&self) {
        println!(
            "   {:<14} {:>10} {:>10} {:>8} {:>8} {:>11} {:>11} {:>11}",
            "flow", "sent", "received", "lost", "loss %", "p50 µs", "p99 µs", "max µs"
        );
        for f in &self.flows {
            let cell = |v: Option<f64>| v.map_or("-".to_string(), |ns| format!("{:.1}", ns / 1e3));
            println!(
                "   {:<14} {:>10} {:>10} {:>8} {:>8.3} {:>11} {:>11} {:>11}",
                f.name,
                f.sent,
                f.received,
                f.lost,
                loss_pct(f.lost, f.sent),
                cell(f.latency.map(|l| l.p50_ns)),
                cell(f.latency.map(|l| l.p99_ns)),
                cell(f.latency.map(|l| l.max_ns)),
            );
        }
        println!(
            "   (latency: one way, from strobe's transmit stamp to the sink's receive stamp; p99: 99 % of frames were faster)"
        );
    }
}

fn loss_pct(lost: u64, sent: u64) -> f64 {
    lost as f64 * 100.0 / sent.max(1) as f64
}

/// The one-line verdict on the throughput part.
fn throughput_verdict(part: &Part, dut: &str) -> String {
    let (sent, received): (u64, u64) = (part.sent(), part.flows.iter().map(|f| f.received).sum());
    let lost = part.flows.iter().map(|f| f.lost).sum::<u64>();
    let mpps = |frames| part.rate(frames) / 1e6;
    if received == 0 {
        format!("nothing came through {dut} ({sent} frames sent): the lab does not forward; check `strobe lab status`")
    } else if lost == 0 {
        format!(
            "{dut} forwarded all {:.3} Mpps strobe sent, no loss: the sending side (strobe and the kernel on its core) was the bottleneck, not the DUT",
            mpps(sent)
        )
    } else {
        format!(
            "{dut} forwarded {:.3} Mpps of the {:.3} Mpps offered ({:.2} % lost): that is its limit for 64-byte frames on this machine",
            mpps(received),
            mpps(sent),
            loss_pct(lost, sent)
        )
    }
}

/// Why frames were late and what it did to the part, when any were.
fn late_explanation(part: &Part, planned_s: f64) -> Vec<String> {
    if part.late_frames == 0 {
        return vec![
            "late frames: none — every frame was handed over within 1 µs of its planned time."
                .into(),
        ];
    }
    let mut lines = vec![
        format!(
            "late frames: {} of {} ({:.1} %) were handed over more than 1 µs after their planned time,",
            part.late_frames,
            part.sent(),
            part.late_frames as f64 * 100.0 / part.sent().max(1) as f64
        ),
        format!(
            "the worst by {}: the sending core was interrupted (other programs, or the VM's host).",
            human_time(part.max_late_ns as f64)
        ),
    ];
    if part.elapsed_s > planned_s * 1.05 {
        lines.push(format!(
            "the rest of the schedule moved back by those delays, so the part took {:.1} s instead of {planned_s} s.",
            part.elapsed_s
        ));
    }
    lines
}

/// The one-line verdict on the paced part.
fn paced_verdict(part: &Part) -> String {
    let lost: u64 = part.flows.iter().map(|f| f.lost).sum();
    let latency: Vec<String> = part
        .flows
        .iter()
        .filter_map(|f| {
            let l = f.latency?;
            Some(format!(
                "{} p50 {} / p99 {}",
                f.name,
                human_time(l.p50_ns),
                human_time(l.p99_ns)
            ))
        })
        .collect();
    if latency.is_empty() {
        return "nothing came through: no latency to show; check `strobe lab status`".into();
    }
    let loss = if lost == 0 {
        "no loss".to_string()
    } else {
        format!("{lost} frames lost ({:.3} %)", loss_pct(lost, part.sent()))
    };
    format!("{loss}; one-way latency {}", latency.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(sent: u64, received: u64, late: u64, elapsed_s: f64) -> Part {
        Part {
            flows: vec![PartFlow {
                name: "f".into(),
                sent,
                received,
                lost: sent - received,
                latency: None,
            }],
            elapsed_s,
            late_frames: late,
            max_late_ns: 2_500_000,
            stopped_early: false,
        }
    }

    #[test]
    fn late_frames_are_explained_with_their_cause_and_cost() {
        let text = late_explanation(&part(60_000, 60_000, 600, 4.5), 3.0).join(" ");
        assert!(text.contains("600 of 60000 (1.0 %)"), "{text}");
        assert!(
            text.contains("more than 1 µs after their planned time"),
            "{text}"
        );
        assert!(
            text.contains("2.5 ms") && text.contains("interrupted"),
            "{text}"
        );
        assert!(text.contains("took 4.5 s instead of 3 s"), "{text}");
        let on_time = late_explanation(&part(60_000, 60_000, 0, 3.0), 3.0).join(" ");
        assert!(on_time.contains("none"), "{on_time}");
    }

    #[test]
    fn throughput_verdicts_tell_loss_from_no_loss() {
        let lossless = throughput_verdict(&part(1_000_000, 1_000_000, 0, 2.0), "a Linux router");
        assert!(
            lossless.contains("all 0.500 Mpps") && lossless.contains("no loss"),
            "{lossless}"
        );
        let lossy = throughput_verdict(&part(1_000_000, 750_000, 0, 2.0), "a Linux router");
        assert!(
            lossy.contains("0.375 Mpps of the 0.500 Mpps") && lossy.contains("25.00 % lost"),
            "{lossy}"
        );
        let none = throughput_verdict(&part(1000, 0, 0, 1.0), "a Linux router");
        assert!(none.contains("nothing came through"), "{none}");
    }

    #[test]
    fn times_read_in_their_unit() {
        assert_eq!(human_time(12_199.0), "12.2 µs");
        assert_eq!(human_time(3_950_591.0), "4.0 ms");
        assert_eq!(human_time(2.5e9), "2.50 s");
    }
}
