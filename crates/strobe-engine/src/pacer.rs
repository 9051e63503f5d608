//! How a paced transmit worker waits for its deadlines on a noisy host.
//!
//! The worker sleeps to an absolute CLOCK_MONOTONIC deadline (`clock_nanosleep` with
//! `TIMER_ABSTIME`, so time lost before the call is not slept again) with its timer slack
//! at 1 ns (the default 50 µs would let the kernel wake it up to 50 µs late on purpose;
//! recent kernels give SCHED_FIFO threads no slack at all and report 0), and
//! spins the last stretch, the *margin*, on the clock. The margin is learned before the first
//! deadline ([`Pacer::warm_up`]: 32 short sleeps, the host's stalls among them left out) and
//! while running: it covers the 99.9th percentile of the recent wake-ups' overshoot
//! ([`OvershootWindow`], [`spin_margin_ns`]), bounded to 20 µs .. 2 ms and, for gaps over
//! 300 µs, to half the gap ([`effective_margin_ns`]), so a quiet host spins little, a noisy
//! one still wakes up in time where the gap allows, and the worker always sleeps part of a
//! long gap.
//!
//! Paced workers the engine pinned to a core of their own ([`mark_own_core`]: no other
//! worker there, the watching main thread kept off it) run as SCHED_FIFO (priority 1) where
//! the kernel allows it (CAP_SYS_NICE), so a compile job on the same core does not delay
//! their wake-ups. A FIFO thread that never sleeps would starve its core: the worker spins
//! only the margin (at most half the gap) before a deadline, and one that goes [`FIFO_AWAKE_BUDGET_NS`] without
//! sleeping (gaps shorter than its margin: high rates, or catching up a backlog) drops to
//! SCHED_OTHER for the rest of the run. FIFO is only asked for with the kernel's real-time
//! throttling on (`sched_rt_runtime_us` not -1) and more than one CPU online, so other
//! threads always keep a share.
//!
//! The sleep is a syscall between hand-overs, not per-frame work: a worker sleeps only when
//! its next deadline is further than the margin (≥ 20 µs) away, i.e. at low rates; at high
//! rates it never sleeps and the hot path makes no syscall but the backend's I/O.
//!
//! Host stalls: the time the worker lost the CPU while waiting — two consecutive clock
//! reads of the spin [`HOST_STALL_MIN_NS`] or more apart, or a wake-up that much or more
//! past its target and too late for the margin to absorb. The worker had nothing else to
//! do, so such a stall is the host's (the hypervisor, other processes), not strobe's.

use crate::clock::Clock;

/// Wake-ups the overshoot percentile is taken over (at 1 kpps about one second).
pub const WINDOW: usize = 1024;
/// Wake-ups seen before the learned margin replaces [`INITIAL_MARGIN_NS`].
pub const MIN_SAMPLES: usize = 32;
/// The percentile of the overshoot the margin covers.
pub const PERCENTILE: f64 = 0.999;
/// The percentile is taken afresh every this many wake-ups (a copy and a selection of
/// [`WINDOW`] values, done before a sleep, when there is time).
const ESTIMATE_EVERY: u32 = 64;

pub const MIN_MARGIN_NS: u64 = 20_000;
pub const MAX_MARGIN_NS: u64 = 2_000_000;
/// The margin until enough wake-ups were seen (strobe's fixed margin before it learned).
pub const INITIAL_MARGIN_NS: u64 = 150_000;
/// Added to the percentile (besides a quarter of it) so the margin is not exactly the tail.
const MARGIN_HEADROOM_NS: u64 = 5_000;
/// Until the margin is learned, sleeps are cut into steps this long so that the first
/// deadlines already give wake-ups to learn from.
const LEARNING_SLEEP_NS: u64 = 100_000;
/// Before its first deadline a worker sleeps [`MIN_SAMPLES`] times this long to learn its
/// wake-ups ([`Pacer::warm_up`]): a run whose gaps are all shorter than the initial margin
/// would otherwise never sleep, never learn, and spin as if the host were at its worst.
pub const WARM_UP_SLEEP_NS: u64 = 50_000;
/// The warm-up ends after this long even if the host woke the worker too late to get
/// [`MIN_SAMPLES`] wake-ups in (the run then learns from its own sleeps, if any).
pub const WARM_UP_BUDGET_NS: u64 = 20_000_000;
/// Longest single sleep: the worker looks at its stop and pause switches between sleeps.
const MAX_SLEEP_NS: u64 = 10_000_000;

/// Least CPU loss counted as a host stall.
pub const HOST_STALL_MIN_NS: u64 = 100_000;
/// A SCHED_FIFO worker awake this long without sleeping drops to SCHED_OTHER.
pub const FIFO_AWAKE_BUDGET_NS: u64 = 10_000_000;
/// The FIFO priority of paced workers: the lowest, above every SCHED_OTHER thread only.
const FIFO_PRIORITY: i32 = 1;

/// The recent wake-ups' overshoot (ns past the target), a fixed ring: recording never
/// allocates.
pub struct OvershootWindow {
    samples: [u32; WINDOW],
    len: usize,
    next: usize,
    since_estimate: u32,
    estimate: Option<u64>,
}

impl Default for OvershootWindow {
    fn default() -> Self {
        Self::new()
    }
}

impl OvershootWindow {
    pub fn new() -> Self {
        OvershootWindow {
            samples: [0; WINDOW],
            len: 0,
            next: 0,
            since_estimate: 0,
            estimate: None,
        }
    }

    pub fn record(&mut self, overshoot_ns: u64) {
        self.samples[self.next] = overshoot_ns.min(u32::MAX as u64) as u32;
        self.next = (self.next + 1) % WINDOW;
        self.len = (self.len + 1).min(WINDOW);
        self.since_estimate += 1;
    }

    /// Takes the last recorded wake-up back.
    pub fn forget_last(&mut self) {
        if self.len > 0 {
            self.next = (self.next + WINDOW - 1) % WINDOW;
            self.len -= 1;
        }
    }

    /// Wake-ups recorded (at most [`WINDOW`] are kept).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// [`PERCENTILE`] of the kept overshoots, or None before [`MIN_SAMPLES`]. Taken afresh
    /// every [`ESTIMATE_EVERY`] wake-ups (and at the first chance after MIN_SAMPLES).
    pub fn percentile(&mut self) -> Option<u64> {
        if self.len < MIN_SAMPLES {
            return None;
        }
        if self.estimate.is_none() || self.since_estimate >= ESTIMATE_EVERY {
            self.since_estimate = 0;
            let mut copy = self.samples;
            let kept = &mut copy[..self.len];
            let rank = ((PERCENTILE * self.len as f64).ceil() as usize).clamp(1, self.len) - 1;
            let (_, value, _) = kept.select_nth_unstable(rank);
            self.estimate = Some(*value as u64);
        }
        self.estimate
    }
}

/// The spin margin for an overshoot percentile (None: not learned yet).
pub fn spin_margin_ns(percentile_ns: Option<u64>) -> u64 {
    match percentile_ns {
        None => INITIAL_MARGIN_NS,
        Some(p) => (p + p / 4 + MARGIN_HEADROOM_NS).clamp(MIN_MARGIN_NS, MAX_MARGIN_NS),
    }
}

/// The margin spun before a deadline `gap_ns` away (from when the worker started waiting for
/// it): the learned margin, but for gaps longer than [`SPIN_WITHIN_NS`] twice over at most
/// half the gap, so that a worker sleeps at least half of every long gap however noisy its
/// wake-ups — on a loaded host a thread that never sleeps is preempted for whole time
/// slices, and a SCHED_FIFO one would hold its core. Shorter gaps keep the whole learned
/// margin, as strobe's fixed margin did: a wake-up overshoots by about the same whatever
/// the gap, so a margin cut to half a short gap (a Poisson flow's many) wakes the worker
/// after its deadline.
pub fn effective_margin_ns(learned_ns: u64, gap_ns: u64) -> u64 {
    learned_ns.min((gap_ns / 2).max(SPIN_WITHIN_NS))
}

/// Up to this margin the learned one is never cut (strobe's fixed margin before it learned).
pub const SPIN_WITHIN_NS: u64 = INITIAL_MARGIN_NS;

/// Whether a wake-up `overshoot_ns` past its target counts as a host stall when the worker
/// spun `margin_ns` before the deadline: it woke too late for the margin to absorb it (so
/// the frame was likely late for the host's sake), by [`HOST_STALL_MIN_NS`] at least. A
/// gap between two reads of the spin counts from [`HOST_STALL_MIN_NS`] (margin 0).
pub fn is_host_stall(overshoot_ns: u64, margin_ns: u64) -> bool {
    overshoot_ns >= HOST_STALL_MIN_NS.max(margin_ns)
}

/// The scheduling policy a paced worker ran under, for the report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scheduling {
    /// `SCHED_FIFO` or `SCHED_OTHER`: the policy at the end of the run.
    pub policy: &'static str,
    /// Why not FIFO, or why it stopped being FIFO; None when FIFO ran throughout.
    pub note: Option<String>,
}

/// Host stalls seen by a paced worker while it waited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostStalls {
    pub count: u64,
    pub worst_ns: u64,
    pub total_ns: u64,
}

impl HostStalls {
    fn add(&mut self, lost_ns: u64) {
        self.count += 1;
        self.worst_ns = self.worst_ns.max(lost_ns);
        self.total_ns += lost_ns;
    }
}

/// The calling thread's timer slack in ns.
pub fn timer_slack_ns() -> u64 {
    // SAFETY: PR_GET_TIMERSLACK takes no pointer arguments.
    unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) as u64 }
}

fn set_timer_slack_ns(ns: u64) {
    // SAFETY: PR_SET_TIMERSLACK takes a value, no pointers; it applies to this thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) };
}

/// The calling thread's scheduling policy and priority.
fn current_policy() -> (i32, i32) {
    // SAFETY: pid 0 is the calling thread; param is plain data the call fills.
    unsafe {
        let policy = libc::sched_getscheduler(0);
        let mut param: libc::sched_param = std::mem::zeroed();
        libc::sched_getparam(0, &mut param);
        (policy, param.sched_priority)
    }
}

fn set_policy(policy: i32, priority: i32) -> bool {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: pid 0 is the calling thread (Linux applies the policy per thread).
    unsafe { libc::sched_setscheduler(0, policy, &param) == 0 }
}

/// The calling thread's policy as the kernel says it (`SCHED_FIFO`, `SCHED_OTHER`, …).
pub fn policy_name() -> &'static str {
    match current_policy().0 {
        libc::SCHED_FIFO => "SCHED_FIFO",
        libc::SCHED_RR => "SCHED_RR",
        libc::SCHED_BATCH => "SCHED_BATCH",
        libc::SCHED_IDLE => "SCHED_IDLE",
        _ => "SCHED_OTHER",
    }
}

thread_local! {
    /// Set on a worker thread the engine pinned to a core no other worker has.
    static OWN_CORE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Says that the calling thread was pinned to a core of its own (no other worker of the run
/// on it, the watching main thread kept off it): a paced worker may then run SCHED_FIFO.
pub fn mark_own_core() {
    OWN_CORE.with(|c| c.set(true));
}

/// Why the calling thread should not ask for SCHED_FIFO, or None when it may.
fn fifo_refusal() -> Option<String> {
    // SAFETY: cpu_set_t is plain data; pid 0 is the calling thread.
    let pinned = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0
            && libc::CPU_COUNT(&set) == 1
    };
    if !pinned || !OWN_CORE.with(|c| c.get()) {
        return Some("not pinned to a core of its own".into());
    }
    // SAFETY: sysconf has no preconditions.
    if unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) } < 2 {
        return Some("a single CPU online: FIFO would take it from everything else".into());
    }
    let throttle = std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us");
    if throttle.is_ok_and(|t| t.trim() == "-1") {
        return Some("the kernel's real-time throttling is off (sched_rt_runtime_us = -1)".into());
    }
    None
}

/// A paced worker's waiting: sets up the calling thread (timer slack, SCHED_FIFO) and
/// restores it when dropped; learns the margin; counts host stalls.
pub struct Pacer {
    window: OvershootWindow,
    margin_ns: u64,
    stalls: HostStalls,
    fifo: bool,
    note: Option<String>,
    /// The thread's slack and policy before, to restore (None: not changed, as on a
    /// simulated clock).
    previous: Option<(u64, (i32, i32))>,
    /// Clock ticks when the thread last woke from a sleep (for the FIFO awake budget).
    last_woke_ticks: u64,
    /// How late the last sleep woke (None: interrupted, nothing learned).
    last_overshoot_ns: Option<u64>,
}

impl Pacer {
    /// Sets the calling thread up for pacing; `now_ticks` starts the FIFO awake budget.
    pub fn enter(now_ticks: u64) -> Pacer {
        Self::enter_on(&Clock::monotonic(), now_ticks)
    }

    /// [`enter`](Self::enter) for a worker pacing on `clock`: on a simulated clock the
    /// thread is left as it is (its real scheduling plays no part in simulated time).
    pub fn enter_on(clock: &Clock, now_ticks: u64) -> Pacer {
        if clock.sim().is_some() {
            return Pacer {
                window: OvershootWindow::new(),
                margin_ns: INITIAL_MARGIN_NS,
                stalls: HostStalls::default(),
                fifo: false,
                note: Some("simulated time: the thread's scheduling is left alone".into()),
                previous: None,
                last_woke_ticks: now_ticks,
                last_overshoot_ns: None,
            };
        }
        let previous_slack_ns = timer_slack_ns();
        let previous_policy = current_policy();
        set_timer_slack_ns(1);
        let (fifo, note) = match fifo_refusal() {
            Some(why) => (false, Some(why)),
            None if set_policy(libc::SCHED_FIFO, FIFO_PRIORITY) => (true, None),
            None => (
                false,
                Some(format!(
                    "SCHED_FIFO refused ({}; it needs CAP_SYS_NICE)",
                    std::io::Error::last_os_error()
                )),
            ),
        };
        Pacer {
            window: OvershootWindow::new(),
            margin_ns: INITIAL_MARGIN_NS,
            stalls: HostStalls::default(),
            fifo,
            note,
            previous: Some((previous_slack_ns, previous_policy)),
            last_woke_ticks: now_ticks,
            last_overshoot_ns: None,
        }
    }

    pub fn margin_ns(&self) -> u64 {
        self.margin_ns
    }

    pub fn stalls(&self) -> HostStalls {
        self.stalls
    }

    pub fn scheduling(&self) -> Scheduling {
        Scheduling {
            policy: if self.fifo {
                "SCHED_FIFO"
            } else {
                "SCHED_OTHER"
            },
            note: self.note.clone(),
        }
    }

    /// The thread woke from a sleep outside the pacer (a pause).
    pub fn woke(&mut self, now_ticks: u64) {
        self.last_woke_ticks = now_ticks;
    }

    /// A loss of the CPU of `lost_ns` seen between two clock reads while spinning.
    #[inline]
    pub fn spin_gap(&mut self, lost_ns: u64) {
        if is_host_stall(lost_ns, 0) {
            self.stalls.add(lost_ns);
        }
    }

    /// Called once per hand-over: a FIFO worker awake for longer than its budget drops to
    /// SCHED_OTHER (one syscall, once).
    #[inline]
    pub fn check_awake(&mut self, clock: &Clock, now_ticks: u64) {
        if self.fifo
            && clock.ticks_to_ns(now_ticks.saturating_sub(self.last_woke_ticks))
                > FIFO_AWAKE_BUDGET_NS
        {
            self.fifo = false;
            set_policy(libc::SCHED_OTHER, 0);
            // Leaving a real-time policy resets the slack to the thread's default (recent
            // kernels give real-time threads none at all).
            set_timer_slack_ns(1);
            self.note = Some(format!(
                "SCHED_FIFO until it ran {} ms without sleeping (gaps shorter than its spin \
                 margin), then SCHED_OTHER so it could not starve its core",
                FIFO_AWAKE_BUDGET_NS / 1_000_000
            ));
        }
    }

    /// The margin to spin before a deadline `gap_ns` away ([`effective_margin_ns`]).
    #[inline]
    pub fn margin_for_gap_ns(&self, gap_ns: u64) -> u64 {
        effective_margin_ns(self.margin_ns, gap_ns)
    }

    /// Learns the thread's wake-ups before the run's first deadline: up to [`MIN_SAMPLES`]
    /// sleeps of [`WARM_UP_SLEEP_NS`], within [`WARM_UP_BUDGET_NS`] (a few ms on a quiet
    /// host). Sends nothing; the margin is then the host's, not the initial guess.
    pub fn warm_up(&mut self, clock: &Clock) {
        let start = clock.monotonic_ns();
        while self.window.len() < MIN_SAMPLES
            && clock.monotonic_ns().saturating_sub(start) < WARM_UP_BUDGET_NS
        {
            self.sleep_for(clock, WARM_UP_SLEEP_NS, 0);
            // Of the warm-up's few wake-ups the 99.9th percentile is the largest: a stall of
            // the host among them (7.6 ms seen) would set a margin of milliseconds for a run
            // whose gaps it then never sleeps in. Such a wake-up is a stall, not the
            // margin's to cover; the run learns a larger margin if they keep coming.
            if self.last_overshoot_ns.is_some_and(|o| is_host_stall(o, 0)) {
                self.window.forget_last();
            }
        }
        self.margin_ns = spin_margin_ns(self.window.percentile());
    }

    /// Sleeps until `left_ns` minus the margin for a deadline `gap_ns` away from now (at
    /// most [`MAX_SLEEP_NS`]), learns from the wake-up's overshoot, and counts it as a host
    /// stall when it is one.
    pub fn sleep(&mut self, clock: &Clock, left_ns: u64, gap_ns: u64) {
        // The percentile's occasional refresh happens here, with time to spare.
        self.margin_ns = spin_margin_ns(self.window.percentile());
        let cap = if self.window.len() < MIN_SAMPLES {
            LEARNING_SLEEP_NS
        } else {
            MAX_SLEEP_NS
        };
        let margin = self.margin_for_gap_ns(gap_ns);
        let sleep_ns = left_ns.saturating_sub(margin).min(cap);
        if sleep_ns == 0 {
            return;
        }
        self.sleep_for(clock, sleep_ns, margin);
    }

    /// One absolute sleep of `sleep_ns` from now; `margin_ns` is what the wake-up may
    /// overshoot before it counts as a host stall.
    fn sleep_for(&mut self, clock: &Clock, sleep_ns: u64, margin_ns: u64) {
        let target = clock.monotonic_ns() + sleep_ns;
        let slept = clock.sleep_until_monotonic(target);
        let woke = clock.monotonic_ns();
        self.last_woke_ticks = clock.now_ticks();
        // An interrupted sleep (a signal) wakes early: nothing to learn from it.
        self.last_overshoot_ns = None;
        if slept && woke >= target {
            let overshoot = woke - target;
            self.last_overshoot_ns = Some(overshoot);
            self.window.record(overshoot);
            if is_host_stall(overshoot, margin_ns) {
                self.stalls.add(overshoot);
            }
        }
    }
}

impl Drop for Pacer {
    fn drop(&mut self) {
        let Some((previous_slack_ns, previous_policy)) = self.previous else {
            return;
        };
        // The policy first: changing it can reset the slack.
        if self.fifo || current_policy() != previous_policy {
            set_policy(previous_policy.0, previous_policy.1);
        }
        set_timer_slack_ns(previous_slack_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_needs_enough_samples_then_takes_the_tail() {
        let mut w = OvershootWindow::new();
        for _ in 0..MIN_SAMPLES - 1 {
            w.record(10_000);
        }
        assert_eq!(w.percentile(), None);
        w.record(10_000);
        assert_eq!(w.percentile(), Some(10_000));

        // 1000 wake-ups of 1..=1000 µs: p99.9 is the 999th smallest.
        let mut w = OvershootWindow::new();
        for i in 1..=1000u64 {
            w.record(i * 1_000);
        }
        assert_eq!(w.percentile(), Some(999_000));
    }

    #[test]
    fn one_hypervisor_stall_in_the_window_does_not_set_the_margin() {
        let mut w = OvershootWindow::new();
        for i in 0..WINDOW as u64 {
            w.record(if i == 500 {
                5_000_000
            } else {
                15_000 + i % 7 * 1_000
            });
        }
        let p = w.percentile().unwrap();
        assert!(p <= 21_000, "p99.9 {p} ns took the 5 ms stall");
    }

    #[test]
    fn a_wake_up_taken_back_is_forgotten() {
        let mut w = OvershootWindow::new();
        for _ in 0..MIN_SAMPLES {
            w.record(20_000);
        }
        w.record(7_600_000);
        w.forget_last();
        assert_eq!(w.len(), MIN_SAMPLES);
        assert_eq!(w.percentile(), Some(20_000));
        w.record(30_000);
        assert_eq!(w.len(), MIN_SAMPLES + 1);
    }

    #[test]
    fn the_window_forgets_old_wake_ups() {
        let mut w = OvershootWindow::new();
        for _ in 0..WINDOW {
            w.record(400_000);
        }
        assert_eq!(w.percentile(), Some(400_000));
        for _ in 0..WINDOW {
            w.record(30_000);
        }
        assert_eq!(w.len(), WINDOW);
        assert_eq!(w.percentile(), Some(30_000));
    }

    #[test]
    fn the_estimate_is_refreshed_every_few_wake_ups_only() {
        let mut w = OvershootWindow::new();
        for _ in 0..MIN_SAMPLES {
            w.record(10_000);
        }
        assert_eq!(w.percentile(), Some(10_000));
        for _ in 0..ESTIMATE_EVERY - 1 {
            w.record(90_000);
        }
        assert_eq!(w.percentile(), Some(10_000), "refreshed too soon");
        w.record(90_000);
        assert_eq!(w.percentile(), Some(90_000));
    }

    #[test]
    fn huge_overshoots_saturate_instead_of_wrapping() {
        let mut w = OvershootWindow::new();
        for _ in 0..MIN_SAMPLES {
            w.record(u64::MAX);
        }
        assert_eq!(w.percentile(), Some(u32::MAX as u64));
        assert_eq!(spin_margin_ns(w.percentile()), MAX_MARGIN_NS);
    }

    #[test]
    fn margin_is_the_tail_with_headroom_within_bounds() {
        assert_eq!(spin_margin_ns(None), INITIAL_MARGIN_NS);
        assert_eq!(spin_margin_ns(Some(0)), MIN_MARGIN_NS);
        // 17 µs (SCHED_FIFO here) -> 17 + 4.25 + 5 µs.
        assert_eq!(spin_margin_ns(Some(17_000)), 26_250);
        assert_eq!(spin_margin_ns(Some(100_000)), 130_000);
        assert_eq!(spin_margin_ns(Some(4_000_000)), MAX_MARGIN_NS);
    }

    #[test]
    fn margin_leaves_half_of_every_gap_to_sleep() {
        // 1 kpps on a noisy host: a learned 1.8 ms is cut to half the 1 ms gap.
        assert_eq!(effective_margin_ns(1_800_000, 1_000_000), 500_000);
        // A quiet host's margin is kept where the gap allows it.
        assert_eq!(effective_margin_ns(26_250, 1_000_000), 26_250);
        // Gaps up to twice the fixed margin keep the learned margin whole: a wake-up needs
        // it, however short the gap.
        assert_eq!(effective_margin_ns(100_000, 60_000), 100_000);
        assert_eq!(effective_margin_ns(150_000, 100_000), 150_000);
        assert_eq!(effective_margin_ns(400_000, 300_000), SPIN_WITHIN_NS);
    }

    #[test]
    fn host_stalls_are_losses_well_beyond_the_margin() {
        // A quiet host's margin: short overshoots are neither late nor stalls.
        assert!(!is_host_stall(50_000, 20_000));
        assert!(is_host_stall(100_000, 20_000));
        // A margin of 150 µs absorbs wake-ups up to 150 µs late; later ones are the host's.
        assert!(!is_host_stall(140_000, 150_000));
        assert!(is_host_stall(150_000, 150_000));
        assert!(is_host_stall(3_000_000, 150_000));
        // Gaps in the spin (margin 0): from 100 µs.
        assert!(!is_host_stall(99_999, 0));
        assert!(is_host_stall(100_000, 0));
    }

    #[test]
    fn pacer_sets_the_threads_slack_to_1ns_and_restores_it() {
        std::thread::spawn(|| {
            let before = timer_slack_ns();
            let proc_slack = || {
                std::fs::read_to_string("/proc/thread-self/timerslack_ns")
                    .map(|s| s.trim().parse::<u64>().unwrap())
            };
            {
                let _pacer = Pacer::enter(0);
                assert_eq!(timer_slack_ns(), 1);
                if let Ok(slack) = proc_slack() {
                    assert_eq!(slack, 1);
                }
            }
            assert_eq!(timer_slack_ns(), before);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn reported_policy_is_the_one_the_thread_runs() {
        for pin in [false, true] {
            std::thread::spawn(move || {
                if pin {
                    crate::pin::pin_current_thread(crate::pin::allowed_cores()[0]);
                    mark_own_core();
                }
                let before = policy_name();
                let mut pacer = Pacer::enter(0);
                assert_eq!(pacer.scheduling().policy, policy_name());
                if !pin {
                    assert_eq!(pacer.scheduling().policy, "SCHED_OTHER");
                    assert_eq!(
                        pacer.scheduling().note.as_deref(),
                        Some("not pinned to a core of its own")
                    );
                }
                // Past its awake budget a FIFO worker drops to SCHED_OTHER and says so,
                // keeping its 1 ns slack.
                pacer.check_awake(&Clock::monotonic(), u64::MAX);
                assert_eq!(pacer.scheduling().policy, "SCHED_OTHER");
                assert_eq!(policy_name(), "SCHED_OTHER");
                assert_eq!(timer_slack_ns(), 1);
                drop(pacer);
                assert_eq!(policy_name(), before);
            })
            .join()
            .unwrap();
        }
    }

    #[test]
    fn sleeping_learns_the_overshoot() {
        std::thread::spawn(|| {
            let clock = Clock::monotonic();
            let mut pacer = Pacer::enter(0);
            // Sleeps of 100 µs (the learning step) until the margin is learned; no bound on
            // how late they wake, only that each counted and a margin came out in bounds.
            for _ in 0..MIN_SAMPLES {
                pacer.sleep(&clock, INITIAL_MARGIN_NS + 50_000, 1_000_000);
            }
            assert_eq!(pacer.window.len(), MIN_SAMPLES);
            pacer.sleep(&clock, 0, 1_000_000);
            assert!((MIN_MARGIN_NS..=MAX_MARGIN_NS).contains(&pacer.margin_ns()));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn warm_up_learns_the_wake_ups_before_any_deadline() {
        std::thread::spawn(|| {
            let clock = Clock::monotonic();
            let mut pacer = Pacer::enter(0);
            let start = std::time::Instant::now();
            pacer.warm_up(&clock);
            // Enough wake-ups for a margin, or the budget ran out on a very slow host.
            assert!(
                pacer.window.len() >= MIN_SAMPLES
                    || start.elapsed().as_nanos() as u64 >= WARM_UP_BUDGET_NS,
                "{} wake-ups in {:?}",
                pacer.window.len(),
                start.elapsed()
            );
            if pacer.window.len() >= MIN_SAMPLES {
                assert_ne!(pacer.margin_ns(), INITIAL_MARGIN_NS);
                assert!((MIN_MARGIN_NS..=MAX_MARGIN_NS).contains(&pacer.margin_ns()));
            }
        })
        .join()
        .unwrap();
    }
}
