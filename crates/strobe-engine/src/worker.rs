//! The transmit worker of one port: merges its flows by deadline, waits for each deadline on
//! the TSC, and hands frames to the backend.
//!
//! Precision vs throughput: with `batch = 1` every frame is handed over at its own deadline.
//! With a batch of N, the worker waits for the first frame's deadline and hands all N over
//! at once, so the other N-1 leave early, back to back: higher packet rates, coarser gaps.
//! Paced runs default to 1; unpaced runs (pcap traces, `--rate max`) default to 32.
//!
//! Falling behind: a batch is *late* when it is handed over more than `late_tolerance_ns`
//! after its deadline. `LatePolicy::Shift` (default) moves the whole remaining schedule back
//! by the lateness, so gaps keep their shape and the rate dips; `LatePolicy::CatchUp` keeps
//! the schedule, so late frames go out back to back until the worker is on time again.
//! Either way late frames are counted.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration as StdDuration;

use strobe_io::{Backend, Filled, TimeBase};
use strobe_model::{FlowSpec, SizeSequence};
use strobe_timing::Schedule;

use crate::clock::Clock;
use crate::generator::FlowGenerator;
use crate::EngineError;

/// What to do when the worker falls behind its schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LatePolicy {
    Shift,
    CatchUp,
}

/// Options of a transmit run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Frames handed to the backend at once; None = 1 when paced, 32 otherwise.
    pub batch: Option<usize>,
    pub late_policy: LatePolicy,
    pub late_tolerance_ns: u64,
    /// Ignore deadlines and send as fast as possible (engine cost, `--rate max`).
    pub unpaced: bool,
    /// Stop after this much real time (unpaced runs with a time limit).
    pub time_limit_ns: Option<u64>,
    /// Lead time between starting the worker and the schedule's t0.
    pub start_lead_ns: u64,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            batch: None,
            late_policy: LatePolicy::Shift,
            late_tolerance_ns: 1_000,
            unpaced: false,
            time_limit_ns: None,
            start_lead_ns: 200_000,
        }
    }
}

/// Per-flow transmit results.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowReport {
    pub name: String,
    pub id: u16,
    pub frames: u64,
    /// Bytes counted as OTG frame sizes (including the 4-byte FCS).
    pub bytes: u64,
    /// Scheduled departure of the first and last frame, ns from t0 (after any shift).
    pub first_ns: Option<u64>,
    pub last_ns: Option<u64>,
    pub instrumented: bool,
}

/// Per-port transmit results.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortReport {
    pub name: String,
    pub backend: String,
    pub scheduled_time: bool,
    pub batch: usize,
    pub frames: u64,
    pub bytes: u64,
    /// Frames handed over later than the tolerance, and the worst lateness seen.
    pub late_frames: u64,
    pub max_late_ns: u64,
    /// Total schedule shift applied under `LatePolicy::Shift`.
    pub shifted_ns: u64,
    /// Real time from the first to the last hand-over (0 for scheduled-time backends).
    pub elapsed_ns: u64,
    pub stopped_early: bool,
    pub flows: Vec<FlowReport>,
}

struct FlowState {
    gen: FlowGenerator,
    sizes: SizeSequence,
    schedule: Schedule,
    /// The next frame: (deadline ns, template), or None when the flow is done.
    next: Option<(u64, u16)>,
    report: FlowReport,
}

impl FlowState {
    fn advance(&mut self) {
        let size = self.sizes.next_size();
        self.next = self
            .schedule
            .next(size)
            .map(|deadline| (deadline, self.gen.template_for(size)));
    }
}

#[derive(Clone, Copy)]
struct Planned {
    flow: u16,
    template: u16,
    deadline_ns: u64,
}

/// Runs one port's flows on `backend` until every flow's duration is over or `stop` is set.
pub fn run_port<B: Backend>(
    port_name: &str,
    backend: &mut B,
    flows: &[FlowSpec],
    clock: &Clock,
    opts: &RunOptions,
    stop: &AtomicBool,
) -> Result<PortReport, EngineError> {
    let mut states = Vec::with_capacity(flows.len());
    for f in flows {
        let schedule = Schedule::new(f.schedule.clone()).map_err(|e| EngineError::Flow {
            flow: f.name.clone(),
            message: e.to_string(),
        })?;
        let gen = FlowGenerator::compile(f)?;
        let mut s = FlowState {
            report: FlowReport {
                name: f.name.clone(),
                id: f.id,
                instrumented: gen.instrumented(),
                ..FlowReport::default()
            },
            gen,
            sizes: f.size.sequence(f.size_seed),
            schedule,
            next: None,
        };
        s.advance();
        states.push(s);
    }
    let scheduled_time = backend.time_base() == TimeBase::Scheduled;
    let paced = !scheduled_time && !opts.unpaced;
    let batch = opts
        .batch
        .unwrap_or(if paced { 1 } else { 32 })
        .clamp(1, backend.slot_count().max(1));
    let mut slot_holds = vec![u32::MAX; backend.slot_count()];
    let mut plan = vec![
        Planned {
            flow: 0,
            template: 0,
            deadline_ns: 0,
        };
        batch
    ];
    let mut report = PortReport {
        name: port_name.to_string(),
        backend: backend.describe(),
        scheduled_time,
        batch,
        ..PortReport::default()
    };
    let t0_ticks = clock.now_ticks() + clock.ns_to_ticks(opts.start_lead_ns);
    let limit_ticks = opts
        .time_limit_ns
        .map(|ns| t0_ticks + clock.ns_to_ticks(ns));
    let mut shift_ns = 0u64;
    let mut first_tx_ticks = None;
    let mut last_tx_ticks = t0_ticks;

    loop {
        if stop.load(Ordering::Relaxed) {
            report.stopped_early = true;
            break;
        }
        // Plan the batch: the earliest frames across flows, merged by deadline. A linear
        // scan is cheapest for the handful of flows a port usually carries.
        let mut n = 0;
        while n < batch {
            let mut best: Option<(usize, u64)> = None;
            for (i, s) in states.iter().enumerate() {
                if let Some((d, _)) = s.next {
                    if best.is_none_or(|(_, bd)| d < bd) {
                        best = Some((i, d));
                    }
                }
            }
            let Some((i, deadline)) = best else { break };
            let s = &mut states[i];
            let template = s.next.map(|(_, t)| t).unwrap_or(0);
            plan[n] = Planned {
                flow: i as u16,
                template,
                deadline_ns: deadline,
            };
            s.advance();
            n += 1;
        }
        if n == 0 {
            break;
        }

        let mut now = clock.now_ticks();
        if paced {
            let due = t0_ticks + clock.ns_to_ticks(plan[0].deadline_ns + shift_ns);
            if now < due {
                now = wait_until(clock, due, stop);
            }
            if now > due {
                let late = clock.ticks_to_ns(now - due);
                report.max_late_ns = report.max_late_ns.max(late);
                if late > opts.late_tolerance_ns {
                    report.late_frames += n as u64;
                    if opts.late_policy == LatePolicy::Shift {
                        shift_ns += late;
                    }
                }
            }
        }
        if let Some(limit) = limit_ticks {
            if now >= limit {
                report.stopped_early = true;
                break;
            }
        }
        first_tx_ticks.get_or_insert(now);

        let mut i = 0;
        let sent = backend.transmit(n, |slot, buf| {
            let p = plan[i];
            i += 1;
            let s = &mut states[p.flow as usize];
            let scheduled_ns = p.deadline_ns + shift_ns;
            let tx_ns = if scheduled_time {
                scheduled_ns
            } else if paced {
                // The last instant before hand-over, per frame.
                clock.realtime_ns(clock.now_ticks())
            } else {
                clock.realtime_ns(now)
            };
            let len = s
                .gen
                .write_next(buf, &mut slot_holds[slot as usize], p.template, tx_ns);
            let r = &mut s.report;
            r.frames += 1;
            r.bytes += s.gen.frame_size(p.template) as u64;
            r.first_ns.get_or_insert(scheduled_ns);
            r.last_ns = Some(scheduled_ns);
            Filled { len, scheduled_ns }
        })?;
        if sent < n {
            return Err(EngineError::Backend(format!(
                "{} accepted {sent} of {n} frames",
                backend.describe()
            )));
        }
        last_tx_ticks = now;
    }
    let stats = backend.finish()?;
    report.frames = stats.frames;
    report.bytes = states.iter().map(|s| s.report.bytes).sum();
    report.shifted_ns = shift_ns;
    report.elapsed_ns = match (scheduled_time, first_tx_ticks) {
        (false, Some(first)) => clock.ticks_to_ns(last_tx_ticks.saturating_sub(first)),
        _ => 0,
    };
    report.flows = states.into_iter().map(|s| s.report).collect();
    Ok(report)
}

/// Waits until the clock reaches `due`: sleeps while far away (saving the core), then
/// spins for the last stretch so the wake-up jitter of the kernel never reaches the wire.
fn wait_until(clock: &Clock, due: u64, stop: &AtomicBool) -> u64 {
    const SPIN_NS: u64 = 150_000;
    loop {
        let now = clock.now_ticks();
        if now >= due {
            return now;
        }
        let left = clock.ticks_to_ns(due - now);
        if left > SPIN_NS {
            if stop.load(Ordering::Relaxed) {
                return now;
            }
            std::thread::sleep(StdDuration::from_nanos((left - SPIN_NS).min(10_000_000)));
        } else {
            std::hint::spin_loop();
        }
    }
}
