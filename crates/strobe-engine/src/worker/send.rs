//! The send loop: from t0 to the port's last frame (or a stop, the time limit, a backend
//! failure), batch after batch: plan the frames, wait for the first one's deadline (paced),
//! judge how late the hand-over is and apply the late policy, then write the frames into
//! the backend's slots and hand them over.
//!
//! The loop is one function on purpose: per frame it allocates nothing, takes no lock and
//! calls nothing through a pointer, and its state lives in locals the compiler keeps in
//! registers. Everything it needs is set up before t0 ([`Sending::start`]), and everything
//! it measured is handed on as it ends ([`Sent`]).

use std::sync::atomic::{AtomicBool, Ordering};

use hdrhistogram::Histogram;
use strobe_io::Backend;
use strobe_model::FlowSpec;
use strobe_timing::{FloorEstimate, PathFloor};

use super::batch::BatchPlan;
use super::flow_state::FlowState;
use super::late::{late_for_the_host, smooth_repay_ns, stall_min_ns};
use super::report::PortReport;
use super::wait::{hold_while_paused, wait_until, RENEW_SLACK_NS};
use super::{Handovers, LatePolicy, PortShape, RunOptions};
use crate::clock::{Clock, WallClock};
use crate::generator::{BatchScratch, TxTime};
use crate::live::FlowSwitches;
use crate::pacer::Pacer;
use crate::EngineError;

/// What the send loop starts from: its buffers, the pacer, the histograms and the clocks,
/// all made before t0 is taken.
pub(super) struct Sending {
    plan: BatchPlan,
    holds: Vec<u32>,
    scratch: BatchScratch,
    /// Paced: this thread's timer slack, scheduling policy and learned spin margin.
    pacer: Option<Pacer>,
    /// Hand-over errors, estimated departures' errors, and (coalesced runs) the gaps
    /// between consecutive estimated departures.
    handover: Histogram<u64>,
    departure: Histogram<u64>,
    departure_gaps: Histogram<u64>,
    wall: WallClock,
    /// The schedule's t0, and the real-time limit, in clock ticks.
    t0_ticks: u64,
    limit_ticks: Option<u64>,
    /// t0 on CLOCK_REALTIME (None for scheduled-time backends).
    t0_unix_ns: Option<u64>,
}

impl Sending {
    /// Sets up everything the loop needs (nothing is allocated after this), then takes t0.
    ///
    /// t0 comes after every set-up here (the histograms, the wall clock's anchor, the
    /// pacer's warm-up), so the lead is all the first hand-over has to get ready: a t0 taken
    /// earlier made the first frame of a run near the path's ceiling ~160 µs late, and the
    /// run that much short.
    pub(super) fn start<B: Backend>(
        backend: &B,
        clock: &Clock,
        opts: &RunOptions,
        shape: &PortShape,
        stop: &AtomicBool,
    ) -> Sending {
        let holds = vec![u32::MAX; backend.slot_count()];
        let scratch = BatchScratch::new();
        let plan = BatchPlan::new();
        let pacer = shape.paced.then(|| {
            let mut pacer = Pacer::enter_on(clock, clock.now_ticks());
            pacer.warm_up(clock);
            pacer
        });
        // 1 ns to 100 s at 3 significant digits; allocated once, recording never allocates.
        let handover = Histogram::<u64>::new_with_bounds(1, 100_000_000_000, 3)
            .expect("static histogram bounds are valid");
        let departure = handover.clone();
        let departure_gaps = handover.clone();
        let mut wall = WallClock::new(clock);
        let lead_ns = match opts.start_at_unix_ns {
            Some(at) => at
                .saturating_sub(wall.now_ns(clock))
                .max(opts.start_lead_ns),
            None => opts.start_lead_ns,
        };
        let t0_ticks = clock.now_ticks() + clock.ns_to_ticks(lead_ns);
        if opts.start_at_unix_ns.is_some() {
            // A synchronized start is often far off: sleep to it here, so that no loop (an
            // unpaced one sends at once) starts before the agreed time.
            sleep_until(clock, t0_ticks, stop);
        }
        let limit_ticks = opts
            .time_limit_ns
            .map(|ns| t0_ticks + clock.ns_to_ticks(ns));
        let t0_unix_ns = (!shape.scheduled_time).then(|| {
            let (now_ticks, now_unix) = (clock.now_ticks(), wall.now_ns(clock));
            if t0_ticks >= now_ticks {
                now_unix + clock.ticks_to_ns(t0_ticks - now_ticks)
            } else {
                now_unix.saturating_sub(clock.ticks_to_ns(now_ticks - t0_ticks))
            }
        });
        Sending {
            plan,
            holds,
            scratch,
            pacer,
            handover,
            departure,
            departure_gaps,
            wall,
            t0_ticks,
            limit_ticks,
            t0_unix_ns,
        }
    }
}

/// What the send loop hands on when it ends: the report so far, the flows (with their
/// counters), and what the final report is drawn from.
pub(super) struct Sent {
    pub(super) report: PortReport,
    pub(super) states: Vec<FlowState>,
    /// Schedule shift still in force at the end.
    pub(super) shift_ns: u64,
    /// Coalesced runs: the floor and what the run learned of it.
    pub(super) coalesce: Option<(PathFloor, FloorEstimate)>,
    pub(super) pacer: Option<Pacer>,
    pub(super) handover: Histogram<u64>,
    pub(super) departure: Histogram<u64>,
    pub(super) departure_gaps: Histogram<u64>,
    /// The schedule's t0 as the loop began (before any pause moved it), in clock ticks.
    pub(super) t0_start_ticks: u64,
    /// First hand-over, and the end of the last, in clock ticks.
    pub(super) first_tx_ticks: Option<u64>,
    pub(super) last_tx_ticks: u64,
    /// Time paused after the first frame (not sending time).
    pub(super) paused_while_sending_ns: u64,
    /// The first and the last hand-over's deadline (before any shift).
    pub(super) first_deadline: Option<u64>,
    pub(super) previous_deadline: u64,
}

/// Sends the port's flows until every flow's duration is over, `stop` is set, the time
/// limit passes or the backend fails (kept in the report, with what went before). Errs only
/// when the backend takes no frame at all for a million tries.
#[allow(clippy::too_many_arguments)]
pub(super) fn send_loop<B: Backend>(
    port_name: &str,
    backend: &mut B,
    mut states: Vec<FlowState>,
    flows: &[FlowSpec],
    clock: &Clock,
    opts: &RunOptions,
    stop: &AtomicBool,
    shape: &PortShape,
    handovers: Handovers,
    mut report: PortReport,
    sending: Sending,
) -> Result<Sent, EngineError> {
    let PortShape {
        scheduled_time,
        paced,
        mut last_deadline_ns,
        ..
    } = *shape;
    let Handovers {
        batch,
        mut coalesce,
        has_trains,
    } = handovers;
    let Sending {
        mut plan,
        mut holds,
        mut scratch,
        mut pacer,
        mut handover,
        mut departure,
        mut departure_gaps,
        mut wall,
        mut t0_ticks,
        mut limit_ticks,
        t0_unix_ns,
    } = sending;
    report.t0_unix_ns = t0_unix_ns;
    let t0_start_ticks = t0_ticks;
    let mut shift_ns = 0u64;
    // Coalesced runs: when a perfect sender on the path would end its last hand-over, on the
    // deadlines' timeline (before any shift).
    let mut ideal_free_ns = 0u64;
    // Coalesced runs: time the sender lost to stalls since its last hand-over.
    let mut stalled_ns = 0u64;
    let mut previous_deadline = 0u64;
    let mut first_deadline = None;
    let mut last_leaves: Option<u64> = None;
    let mut first_tx_ticks = None;
    let mut paused_while_sending_ns = 0u64;
    let mut last_tx_ticks = t0_ticks;

    // After a pause of `paused` ticks the whole timeline moves by it: deadlines, the last
    // hand-over (time away from the path that is not a stall) and a real-time limit; a
    // pause after the first frame is not sending time.
    macro_rules! after_pause {
        ($paused:expr) => {{
            let paused: u64 = $paused;
            t0_ticks += paused;
            last_tx_ticks += paused;
            limit_ticks = limit_ticks.map(|l| l + paused);
            report.paused_ns += clock.ticks_to_ns(paused);
            if first_tx_ticks.is_some() {
                paused_while_sending_ns += clock.ticks_to_ns(paused);
            }
        }};
    }

    let mut switch_changes = 0u64;
    let mut updates_seen = 0u64;
    // Where this worker says how far behind its schedule it is (a paced worker of a watched
    // run), at most once a millisecond: the watcher reads it every 20 ms, and per hand-over
    // the hot path only compares two clock readings.
    let behind_slot = opts
        .live
        .as_ref()
        .filter(|_| paced)
        .and_then(|live| Some((live.clone(), live.behind_slot(port_name)?)));
    let behind_every = clock.ns_to_ticks(1_000_000);
    // How late the host last made the sender (see `late_for_the_host`), until it is back on
    // time.
    let mut host_debt_ns = 0u64;
    let mut next_behind = 0u64;
    'batches: loop {
        // 1. Stopped, flows switched off, paused.
        if stop.load(Ordering::Relaxed) {
            report.stopped_early = true;
            break;
        }
        if let Some(switches) = &opts.flow_switches {
            stop_switched_off(&mut states, switches, &mut switch_changes);
            if switches.update_count() != updates_seen
                && apply_updates(&mut states, flows, switches, &mut updates_seen)
            {
                // The port's last deadline was fixed by the old rates and sizes.
                last_deadline_ns = None;
            }
        }
        let paused = hold_while_paused(clock, opts.pause.as_deref(), stop);
        if paused > 0 {
            after_pause!(paused);
            if let Some(pacer) = pacer.as_mut() {
                pacer.woke(clock.now_ticks());
            }
            continue;
        }
        // 2. The batch planned: its frames, merged by deadline (coalesced: those better off
        // in one hand-over).
        let mut now = clock.now_ticks();
        let n = match &coalesce {
            Some((floor, estimate)) => {
                // Now on the deadlines' timeline (before any shift).
                let now_ns = clock
                    .ticks_to_ns(now.saturating_sub(t0_ticks))
                    .saturating_sub(shift_ns);
                // A run still learning its hand-over cost times one-frame calls (a train's
                // frames join their head's call: its heads are one-frame calls already).
                let cap = if estimate.wants_singles() && !has_trains {
                    1
                } else {
                    batch
                };
                // Behind with a spacing no call has timed for long: the frames already
                // due go together once, so a wrong spacing cannot keep the sender behind.
                let join_due = estimate.wants_spacing_check();
                plan.fill_coalesced(&mut states, cap, floor, now_ns, join_due)
            }
            None => plan.fill(&mut states, batch),
        };
        if n == 0 {
            break;
        }

        // 3. Paced: wait for the batch's deadline, then judge how late the hand-over is and
        // apply the late policy.
        if let Some(pacer) = pacer.as_mut() {
            if opts.late_policy == LatePolicy::Smooth && shift_ns > 0 {
                let gap = plan.deadlines[0].saturating_sub(previous_deadline);
                let repay = smooth_repay_ns(shift_ns, gap, plan.deadlines[0], last_deadline_ns);
                shift_ns = shift_ns.saturating_sub(repay);
            }
            previous_deadline = plan.deadlines[0];
            first_deadline.get_or_insert(plan.deadlines[0]);
            let mut due = t0_ticks + clock.ns_to_ticks(plan.deadlines[0] + shift_ns);
            let mut host_late_ns = 0;
            if now < due {
                // Renewing the transmit stamp's anchor takes a few clock reads (under 1 µs):
                // do it in the slack before the deadline, not between it and the hand-over.
                if due - now > clock.ns_to_ticks(RENEW_SLACK_NS) {
                    wall.renew_if_due(clock);
                }
                let waited = wait_until(clock, pacer, due, stop, opts.pause.as_deref());
                (now, host_late_ns) = (waited.now, waited.host_late_ns);
                let paused = waited.paused;
                if paused > 0 {
                    // Paused while waiting for this hand-over: it and everything after it
                    // leave later by the pause.
                    after_pause!(paused);
                    due += paused;
                }
            }
            pacer.check_awake(clock, now);
            if now >= next_behind {
                if let Some((live, slot)) = &behind_slot {
                    next_behind = now + behind_every;
                    let since_t0 = clock.ticks_to_ns(now.saturating_sub(t0_ticks));
                    live.publish_behind(*slot, since_t0.saturating_sub(plan.deadlines[0]));
                }
            }
            let error_ns = clock.ticks_to_ns(now.saturating_sub(due));
            handover.saturating_record(error_ns);
            report.handovers += 1;
            if n > 1 {
                report.coalesced_frames += n as u64;
            }
            if let Some((floor, _)) = &coalesce {
                // Frame k leaves about k spacings after the hand-over starts.
                let start_ns = clock.ticks_to_ns(now.saturating_sub(t0_ticks));
                for (k, &d) in plan.deadlines[..n].iter().enumerate() {
                    let leaves = start_ns + k as u64 * floor.spacing_ns;
                    departure.saturating_record(leaves.abs_diff(d + shift_ns));
                    if let Some(previous) = last_leaves {
                        departure_gaps.saturating_record(leaves.saturating_sub(previous));
                    }
                    last_leaves = Some(leaves);
                }
            }
            // Coalesced, the hand-over is owed when a perfect sender on the path would make
            // it: at its first deadline, or when that sender's previous hand-over ends. Waiting
            // for the hand-over before is the path's floor; only lateness beyond it is the
            // sender falling behind (a stall, or a floor the path no longer keeps), which
            // the late policy handles.
            let owed = match &coalesce {
                Some((_, estimate)) if !estimate.handover_known() => {
                    // Still learning what a hand-over costs: owed at its deadline, but not
                    // before this sender's own previous hand-over ended; the perfect sender
                    // starts from here once the cost is known.
                    let now_ns = clock
                        .ticks_to_ns(now.saturating_sub(t0_ticks))
                        .saturating_sub(shift_ns);
                    ideal_free_ns = now_ns.max(plan.deadlines[0]) + estimate.guess().call_ns(n);
                    due.max(last_tx_ticks)
                }
                Some((_, estimate)) => {
                    let floor = &estimate.guess();
                    let start_ns = plan.deadlines[0].max(ideal_free_ns);
                    ideal_free_ns = start_ns + floor.call_ns(n);
                    // Away between hand-overs for longer than waiting for this one's deadline
                    // explains: a stall.
                    let ready = due.max(last_tx_ticks);
                    if now > ready {
                        let away = clock.ticks_to_ns(now - ready);
                        if away > stall_min_ns(floor, opts) {
                            stalled_ns += away;
                        }
                    }
                    t0_ticks + clock.ns_to_ticks(start_ns + shift_ns)
                }
                None => due,
            };
            // A backlog the host left (with catch-up, the frames due during a stall follow
            // it late) stays the host's until the sender is back on time.
            host_debt_ns = host_debt_ns.max(host_late_ns);
            let late = clock.ticks_to_ns(now.saturating_sub(owed));
            if late <= opts.late_tolerance_ns {
                host_debt_ns = 0;
            }
            if now > owed {
                report.max_late_ns = report.max_late_ns.max(late);
                if late > opts.late_tolerance_ns {
                    report.late_frames += n as u64;
                    if late_for_the_host(late, host_debt_ns, opts.late_tolerance_ns) {
                        report.late_host_frames += n as u64;
                    }
                    // Coalesced, only the part a stall caused is shifted: a backlog within
                    // the path's floor is repaid by coalescing, as a perfect sender would.
                    let shift = match coalesce {
                        Some(_) => late.min(stalled_ns),
                        None => late,
                    };
                    if opts.late_policy != LatePolicy::CatchUp {
                        shift_ns += shift;
                    }
                }
            }
            stalled_ns = 0;
        }
        // 4. The time limit.
        if let Some(limit) = limit_ticks {
            if now >= limit {
                report.stopped_early = true;
                break;
            }
        }
        first_tx_ticks.get_or_insert(now);

        // 5. The hand-over: frames written straight into the backend's slots.
        // A backend may take fewer frames than asked when its ring is full: hand over the
        // rest of the planned batch in further calls, in order.
        let mut done = 0;
        let mut stalls = 0u32;
        while done < n {
            let (plan, states, holds, scratch) = (&mut plan, &mut states, &mut holds, &mut scratch);
            let wall = &mut wall;
            let sent = backend.transmit(n - done, move |slots| {
                for (slot, &d) in slots.iter_mut().zip(&plan.deadlines[done..]) {
                    slot.scheduled_ns = d + shift_ns;
                }
                // Frames of one batch are handed over together: one reading, taken last
                // before the frames are written and handed to the backend.
                // A coalesced hand-over shares one stamp too: taken before any of its frames
                // leaves, so it never claims a frame left later than it did; the wait of
                // frame k (about k spacings) counts in its latency.
                let tx_time = if scheduled_time {
                    TxTime::Scheduled
                } else {
                    TxTime::Same(wall.now_ns(clock))
                };
                plan.write(done, slots, states, tx_time, holds, scratch);
            });
            let sent = match sent {
                Ok(sent) => sent,
                Err(e) => {
                    // Stop here and keep the results of what went before.
                    report.failure = Some(e.to_string());
                    report.stopped_early = true;
                    break 'batches;
                }
            };
            done += sent;
            if sent == 0 {
                stalls += 1;
                if stalls > 1_000_000 {
                    return Err(EngineError::Backend(format!(
                        "{} accepts no frames ({done} of {n} of a batch sent)",
                        backend.describe()
                    )));
                }
                std::hint::spin_loop();
            }
        }
        // 6. What the hand-over took: elapsed time, and (coalesced) the floor refined.
        // Elapsed time runs to the end of the last hand-over.
        last_tx_ticks = clock.now_ticks();
        if let Some((floor, estimate)) = &mut coalesce {
            let call_ns = clock.ticks_to_ns(last_tx_ticks - now);
            // A call far longer than the floor says (twice, and by more than the stall
            // minimum) was interrupted: a stall. Not judged before the hand-over cost is known.
            let expected = floor.call_ns(n);
            if estimate.handover_known() && call_ns > 2 * expected + stall_min_ns(floor, opts) {
                stalled_ns += call_ns - expected;
            }
            // The call just made refines the floor the next ones are coalesced to.
            estimate.observe(n, call_ns);
            *floor = estimate.floor();
        }
    }
    Ok(Sent {
        report,
        states,
        shift_ns,
        coalesce,
        pacer,
        handover,
        departure,
        departure_gaps,
        t0_start_ticks,
        first_tx_ticks,
        last_tx_ticks,
        paused_while_sending_ns,
        first_deadline,
        previous_deadline,
    })
}

/// Applies the live changes published since the worker last looked (`seen`: the update
/// count it last acted on) to the flows they name; true when one was applied. A change
/// still being written is read when the count next moves (its writer moves it once done).
#[cold]
fn apply_updates(
    states: &mut [FlowState],
    flows: &[FlowSpec],
    switches: &FlowSwitches,
    seen: &mut u64,
) -> bool {
    *seen = switches.update_count();
    let mut applied = false;
    for (s, f) in states.iter_mut().zip(flows).filter(|(s, _)| !s.stopped) {
        if let Some((version, update)) = switches.latest_update(&s.report.name) {
            if version != s.update_seen {
                s.update_seen = version;
                s.apply(f, update);
                applied = true;
            }
        }
    }
    applied
}

/// Stops the flows whose switch was turned off since the switches last changed (`seen`: the
/// change count this worker last acted on). Per batch: one atomic read unless they changed.
#[inline]
fn stop_switched_off(states: &mut [FlowState], switches: &FlowSwitches, seen: &mut u64) {
    let changes = switches.changes();
    if changes != *seen {
        *seen = changes;
        for s in states.iter_mut().filter(|s| !s.stopped) {
            if switches.is_stopped(&s.report.name) {
                s.stop();
            }
        }
    }
}

/// Sleeps until about a millisecond before `t0_ticks` (10 ms at a time, so that a stop
/// ends the wait), then spins to it.
fn sleep_until(clock: &Clock, t0_ticks: u64, stop: &AtomicBool) {
    const SPIN_NS: u64 = 1_000_000;
    const NAP_NS: u64 = 10_000_000;
    loop {
        let now = clock.now_ticks();
        if now >= t0_ticks || stop.load(Ordering::Relaxed) {
            return;
        }
        let left_ns = clock.ticks_to_ns(t0_ticks - now);
        if left_ns > SPIN_NS {
            std::thread::sleep(std::time::Duration::from_nanos(
                (left_ns - SPIN_NS).min(NAP_NS),
            ));
        } else {
            std::hint::spin_loop();
        }
    }
}
