//! Waiting for a hand-over's deadline: sleep to a learned margin before it, then spin on the
//! clock (see [`crate::pacer`]); holding while the run is paused; and telling the time the
//! host took the worker away across a deadline from strobe's own lateness.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration as StdDuration;

use crate::clock::Clock;
use crate::pacer::Pacer;

/// Slack before a deadline that is enough to renew the transmit stamp's anchor first.
pub(super) const RENEW_SLACK_NS: u64 = 4_000;

/// While `pause` is set (and `stop` is not), sleeps; returns the ticks it held.
pub(super) fn hold_while_paused(
    clock: &Clock,
    pause: Option<&AtomicBool>,
    stop: &AtomicBool,
) -> u64 {
    let Some(pause) = pause.filter(|p| p.load(Ordering::Relaxed)) else {
        return 0;
    };
    let paused_at = clock.now_ticks();
    while pause.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(StdDuration::from_millis(1));
    }
    clock.now_ticks().saturating_sub(paused_at)
}

/// Two reads of a deadline's spin at least this far apart: the worker lost its CPU between
/// them (the spin reads the clock every few tens of ns).
const SPIN_LOSS_NS: u64 = 500;

/// Of the time past `due` at `now`, what the host took: all of it when the spin's previous
/// read came before `due` and the two reads are `loss_ticks` or more apart (the CPU was
/// away across the deadline), else none.
fn lost_across_deadline(previous: u64, now: u64, due: u64, loss_ticks: u64) -> u64 {
    if previous < due && due <= now && now - previous >= loss_ticks {
        now - due
    } else {
        0
    }
}

/// How a wait for a deadline ended ([`wait_until`]).
pub(super) struct Waited {
    pub(super) now: u64,
    pub(super) paused: u64,
    /// Of the time past the deadline, how much the host took (0: none seen).
    pub(super) host_late_ns: u64,
}

/// Waits until `due` (or `stop`): sleeps to the margin before it, then spins on the clock
/// (see [`crate::pacer`]); a pause met while waiting holds the wait and moves `due` by its
/// length. Returns the time it ended, the ticks paused, and how far past `due` the host
/// took the worker: the CPU lost across the deadline while spinning (two reads of the spin
/// [`SPIN_LOSS_NS`] or more apart, the first before `due`), or a wake-up that came after it.
///
/// Sleeping while the deadline is far away saves the core; spinning for the last stretch
/// keeps the kernel's wake-up jitter off the wire.
///
/// The spin reads the clock without a PAUSE hint: under KVM, a PAUSE loop trips pause-loop
/// exiting, and each exit takes the vCPU away for 2–10 µs (on our 2-vCPU guest a PAUSE spin
/// saw ~200 more such stalls per second than a plain one). The thread owns its core while
/// it spins, so the hint's usual benefits (a hyperthread sibling, power) do not apply.
pub(super) fn wait_until(
    clock: &Clock,
    pacer: &mut Pacer,
    mut due: u64,
    stop: &AtomicBool,
    pause: Option<&AtomicBool>,
) -> Waited {
    let mut paused = 0;
    let mut previous = clock.now_ticks();
    // The gap the margin may take half of: from now, when the worker starts waiting.
    let mut gap = clock.ticks_to_ns(due.saturating_sub(previous));
    let loss_ticks = clock.ns_to_ticks(SPIN_LOSS_NS);
    loop {
        let now = clock.now_ticks();
        if now >= due {
            pacer.spin_gap(clock.ticks_to_ns(now - previous));
            return Waited {
                now,
                paused,
                host_late_ns: clock
                    .ticks_to_ns(lost_across_deadline(previous, now, due, loss_ticks)),
            };
        }
        let left = clock.ticks_to_ns(due - now);
        if left > pacer.margin_for_gap_ns(gap) {
            if stop.load(Ordering::Relaxed) {
                return Waited {
                    now,
                    paused,
                    host_late_ns: 0,
                };
            }
            let held = hold_while_paused(clock, pause, stop);
            if held > 0 {
                paused += held;
                due += held;
                pacer.woke(clock.now_ticks());
                previous = clock.now_ticks();
                gap = clock.ticks_to_ns(due.saturating_sub(previous));
                continue;
            }
            pacer.sleep(clock, left, gap);
            previous = clock.now_ticks();
            if previous >= due {
                // Woken after the deadline: beyond the learned margin, the host's doing.
                return Waited {
                    now: previous,
                    paused,
                    host_late_ns: clock.ticks_to_ns(previous - due),
                };
            }
            continue;
        }
        // Two reads of the spin far apart: the thread lost its CPU in between.
        pacer.spin_gap(clock.ticks_to_ns(now - previous));
        previous = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_loss_of_the_cpu_across_the_deadline_is_the_hosts() {
        // Reads 2 ticks apart (the spin): never the host's, however late.
        assert_eq!(lost_across_deadline(999, 1_001, 1_000, 500), 0);
        // Away from 600 to 1 400 across the deadline at 1 000: the 400 past it are the host's.
        assert_eq!(lost_across_deadline(600, 1_400, 1_000, 500), 400);
        // Away as long, but ended before the deadline: nothing past it.
        assert_eq!(lost_across_deadline(100, 900, 1_000, 500), 0);
        // Already past the deadline before the loss: strobe was late on its own.
        assert_eq!(lost_across_deadline(1_100, 1_900, 1_000, 500), 0);
        // A short loss across the deadline is the spin's own granularity.
        assert_eq!(lost_across_deadline(900, 1_300, 1_000, 500), 0);
    }
}
