//! Falling behind: how `LatePolicy::Smooth` pays a schedule shift back, when a coalesced
//! sender counts as stalled, and whose fault a late frame is (the host's or strobe's).

use strobe_timing::PathFloor;

use super::RunOptions;

/// `LatePolicy::Smooth` shortens a gap by at most 1/SMOOTH_REPAY of its length…
const SMOOTH_REPAY: u64 = 50;
/// …and, to have the shift paid back by a fixed last deadline, by at most 1/SMOOTH_END_REPAY
/// (5 %: a tenth was enough to overfill a shaper at 90 % of its rate in a Y.1564 step).
const SMOOTH_END_REPAY: u64 = 20;

/// In coalesced runs, the sender counts as stalled when it was away (or a call took longer
/// than the floor says) by more than this many hand-overs, or the late tolerance if longer.
const STALL_HANDOVERS: u64 = 8;

#[inline]
pub(super) fn stall_min_ns(floor: &PathFloor, opts: &RunOptions) -> u64 {
    opts.late_tolerance_ns
        .max(STALL_HANDOVERS * floor.handover_ns)
}

/// What `LatePolicy::Smooth` pays back of a schedule shift of `shift_ns` over a gap of
/// `gap_ns` ending at `deadline_ns`: 1/[`SMOOTH_REPAY`] of the gap, or more where the rest
/// of the shift would otherwise outlast the port's last deadline — the gaps left share it
/// evenly, so the last frame still leaves when it was planned and the run keeps its asked
/// duration and mean rate — but never more than 1/[`SMOOTH_END_REPAY`] of the gap: a shift
/// the end cannot absorb so is left, rather than sent as a burst (a catch-up burst at the
/// end of a trial fills a DUT's queue that the asked rate never would).
#[inline]
pub(super) fn smooth_repay_ns(
    shift_ns: u64,
    gap_ns: u64,
    deadline_ns: u64,
    last_ns: Option<u64>,
) -> u64 {
    let steady = gap_ns / SMOOTH_REPAY;
    let Some(last_ns) = last_ns else {
        return steady;
    };
    let left_ns = last_ns.saturating_sub(deadline_ns);
    let by_the_end = if left_ns <= gap_ns {
        shift_ns
    } else {
        (u128::from(shift_ns) * u128::from(gap_ns) / u128::from(left_ns)) as u64
    };
    steady.max(by_the_end.min(gap_ns / SMOOTH_END_REPAY))
}

/// A frame `late_ns` after its deadline is the host's when the host took the worker at
/// least that long past the deadline (within the late tolerance: the hand-over's own
/// few hundred ns after the wait are not strobe falling behind).
#[inline]
pub(super) fn late_for_the_host(late_ns: u64, host_late_ns: u64, tolerance_ns: u64) -> bool {
    host_late_ns > 0 && late_ns <= host_late_ns + tolerance_ns
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smooth_pays_the_shift_back_by_the_last_deadline() {
        // Far from the end: 1/50 of each gap, as before.
        assert_eq!(smooth_repay_ns(5_000, 10_000, 0, Some(1_000_000_000)), 200);
        assert_eq!(smooth_repay_ns(5_000, 10_000, 0, None), 200);
        // 1 ms behind with 40 ms left: each 10 µs gap repays 0.25 µs, 2.5 % shorter.
        let last = 1_000_000_000;
        assert_eq!(
            smooth_repay_ns(1_000_000, 10_000, last - 40_000_000, Some(last)),
            250
        );
        // Never more than a twentieth of a gap, even at the very end: no catch-up burst.
        assert_eq!(
            smooth_repay_ns(1_000_000, 10_000, last - 10_000_000, Some(last)),
            500
        );
        assert_eq!(
            smooth_repay_ns(1_000_000, 10_000, last - 5_000, Some(last)),
            500
        );
        // Repaid step by step from far enough before the end, the shift is gone at the
        // last deadline; too close to it, what a twentieth of the gaps left cannot absorb
        // stays.
        for (shift_ns, before_ns, left_ns) in [
            (3_000_000u64, 80_000_000u64, 0u64),
            (3_000_000, 40_000_000, 1_000_000),
        ] {
            let (mut shift, mut t) = (shift_ns, last - before_ns);
            while t < last {
                t += 10_000;
                shift -= smooth_repay_ns(shift, 10_000, t, Some(last)).min(shift);
            }
            assert_eq!(
                shift, left_ns,
                "{shift_ns} ns owed {before_ns} ns before the end"
            );
        }
    }

    #[test]
    fn a_frame_is_the_hosts_when_the_host_took_at_least_its_lateness() {
        assert!(late_for_the_host(5_000, 5_000, 1_000));
        // The hand-over after the wait adds its own few hundred ns.
        assert!(late_for_the_host(5_800, 5_000, 1_000));
        // Later than the host explains: strobe's own work made it late.
        assert!(!late_for_the_host(9_000, 5_000, 1_000));
        assert!(!late_for_the_host(2_000, 0, 1_000));
    }
}
