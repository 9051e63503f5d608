//! The engine's clock: the CPU time-stamp counter, calibrated against CLOCK_MONOTONIC.
//!
//! Reading the TSC costs a few ns and never enters the kernel, so the transmit loop can
//! spin on it. It is only trustworthy when it is invariant (constant rate, not stopped in
//! deep C-states): strobe checks the `constant_tsc` and `nonstop_tsc` CPU flags and falls
//! back to `clock_gettime(CLOCK_MONOTONIC)` (vDSO, slower) when they are missing.

use std::time::Duration;

/// Which counter the clock reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockSource {
    /// Invariant TSC, calibrated.
    Tsc,
    /// CLOCK_MONOTONIC through the vDSO (TSC missing or not invariant).
    Monotonic,
    /// Simulated time ([`SimTime`]): tests of pacing that neither sleep nor depend on the
    /// machine's load.
    Simulated,
}

/// Time as a test decides it: each clock read costs the `read_ns` given to [`SimTime::new`]
/// (so a spin on the clock moves on), a sleep ends at its deadline plus a stall due by then
/// ([`SimTime::stall_at`]), and a test's backend advances it by what a hand-over costs. Deterministic: nothing here reads a real
/// clock or sleeps.
#[derive(Debug)]
pub struct SimTime {
    now_ns: std::sync::atomic::AtomicU64,
    read_ns: u64,
    /// Host stalls to come: (from when, how long), see [`SimTime::stall_at`].
    stalls: std::sync::Mutex<Vec<(u64, u64)>>,
    sleeps: std::sync::atomic::AtomicU64,
}

impl SimTime {
    /// CLOCK_REALTIME at simulated time zero: a plausible date for transmit stamps.
    pub const REALTIME_AT_ZERO_NS: u64 = 1_800_000_000 * 1_000_000_000;

    /// Simulated time starting at 1 s, each clock read costing `read_ns` (at least 1). Lives
    /// as long as the process: a [`Clock`] is `Copy` and holds a reference to it.
    pub fn new(read_ns: u64) -> &'static SimTime {
        Box::leak(Box::new(SimTime {
            now_ns: 1_000_000_000.into(),
            read_ns: read_ns.max(1),
            stalls: Default::default(),
            sleeps: 0.into(),
        }))
    }

    /// The simulated time now, without the cost of a read.
    pub fn now_ns(&self) -> u64 {
        self.now_ns.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Moves time on by `ns` (what a hand-over to the path cost).
    pub fn advance(&self, ns: u64) {
        self.now_ns
            .fetch_add(ns, std::sync::atomic::Ordering::Relaxed);
    }

    /// A host stall: the first sleep that ends at or after `at_ns` wakes `late_ns` late, or
    /// the first clock read at or after it comes `late_ns` later (the CPU lost mid-spin).
    pub fn stall_at(&self, at_ns: u64, late_ns: u64) {
        if let Ok(mut stalls) = self.stalls.lock() {
            stalls.push((at_ns, late_ns));
        }
    }

    /// Sleeps taken so far.
    pub fn sleeps(&self) -> u64 {
        self.sleeps.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn read(&self) -> u64 {
        let now = self
            .now_ns
            .fetch_add(self.read_ns, std::sync::atomic::Ordering::Relaxed)
            + self.read_ns;
        match self.stall_due(now) {
            0 => now,
            // The thread lost its CPU just before this read.
            late => {
                self.now_ns
                    .fetch_add(late, std::sync::atomic::Ordering::Relaxed)
                    + late
            }
        }
    }

    /// A stall due by `ns`, taken (0: none).
    fn stall_due(&self, ns: u64) -> u64 {
        match self.stalls.lock() {
            Ok(mut stalls) => match stalls.iter().position(|&(at, _)| at <= ns) {
                Some(i) => stalls.swap_remove(i).1,
                None => 0,
            },
            Err(_) => 0,
        }
    }

    /// Sleeps until `target_ns`: time jumps there, plus a stall due by then.
    fn sleep_until(&self, target_ns: u64) {
        self.sleeps
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let late = self.stall_due(target_ns);
        self.now_ns
            .fetch_max(target_ns + late, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A monotonic clock in raw ticks with a fixed-point conversion to ns, anchored to
/// CLOCK_REALTIME so that ns values can be written into packets.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    source: ClockSource,
    /// ns = (ticks - anchor_ticks) * mult >> SHIFT
    mult: u64,
    anchor_ticks: u64,
    /// CLOCK_REALTIME (ns since the Unix epoch) at anchor_ticks.
    anchor_realtime_ns: u64,
    ticks_per_sec: f64,
    /// The simulated time a [`ClockSource::Simulated`] clock reads. Beside `source`, not
    /// folded into it as an enum's payload: that form cost the 8-flow null run 7 % (30.8
    /// against 32.6 Mpps, 10 alternating runs each, 2026-11-28).
    sim: Option<&'static SimTime>,
}

const SHIFT: u32 = 24;

/// CLOCK_REALTIME as strobe stamps with it: in debug builds shifted by the test-only clock
/// offset (`strobe_io::test_clock`, for tests of a multi-host controller's clock checks);
/// in release builds CLOCK_REALTIME itself.
#[inline(always)]
fn realtime_read() -> u64 {
    strobe_io::test_clock::shift(clock_ns(libc::CLOCK_REALTIME))
}

pub(crate) fn clock_ns(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec; the clock ids used here always exist.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The kernel's current clocksource (e.g. `tsc`, `kvm-clock`): what CLOCK_REALTIME, and so
/// every software timestamp, is derived from.
pub fn kernel_clocksource() -> String {
    std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// Reads the raw TSC.
#[inline(always)]
pub fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: rdtsc has no preconditions on x86_64.
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        clock_ns(libc::CLOCK_MONOTONIC)
    }
}

/// Whether /proc/cpuinfo reports an invariant TSC (constant rate and not stopped).
pub fn tsc_is_invariant() -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
        return false;
    };
    let Some(flags) = info.lines().find(|l| l.starts_with("flags")) else {
        return false;
    };
    let has = |f: &str| flags.split_whitespace().any(|w| w == f);
    has("constant_tsc") && has("nonstop_tsc")
}

/// How long the TSC is calibrated against CLOCK_MONOTONIC: 25 ms gives its rate to about
/// 2 ppm (0.0002 % of a run's rate; transmit stamps are re-anchored every millisecond, so
/// latency does not drift with it).
pub const CALIBRATION_WINDOW: Duration = Duration::from_millis(25);

static CALIBRATED: std::sync::OnceLock<Clock> = std::sync::OnceLock::new();

fn calibrate_once() -> Clock {
    Clock::calibrate(CALIBRATION_WINDOW)
}

impl Clock {
    /// Calibrates the TSC against CLOCK_MONOTONIC over `window` (longer = more exact; 50 ms
    /// gives about 1 ppm). Falls back to CLOCK_MONOTONIC when the TSC is not invariant.
    pub fn calibrate(window: Duration) -> Clock {
        if !tsc_is_invariant() {
            return Clock::monotonic();
        }
        // Bracket each monotonic read between two TSC reads and keep the tightest pair, so a
        // preemption during calibration does not skew the rate.
        let sample = || {
            let mut best = (u64::MAX, 0u64, 0u64);
            for _ in 0..16 {
                let a = rdtsc();
                let ns = clock_ns(libc::CLOCK_MONOTONIC);
                let b = rdtsc();
                if b - a < best.0 {
                    best = (b - a, a + (b - a) / 2, ns);
                }
            }
            (best.1, best.2)
        };
        let (t1, n1) = sample();
        std::thread::sleep(window);
        let (t2, n2) = sample();
        let ticks_per_ns = (t2 - t1) as f64 / (n2 - n1).max(1) as f64;
        let mult = ((1u64 << SHIFT) as f64 / ticks_per_ns).round() as u64;
        let anchor_ticks = rdtsc();
        let anchor_realtime_ns = realtime_read();
        Clock {
            source: ClockSource::Tsc,
            mult,
            anchor_ticks,
            anchor_realtime_ns,
            ticks_per_sec: ticks_per_ns * 1e9,
            sim: None,
        }
    }

    /// The clock of a run: the TSC's rate calibrated once per process (over
    /// [`CALIBRATION_WINDOW`]; an invariant TSC keeps its rate, so a server's later runs
    /// start that much sooner), anchored to CLOCK_REALTIME afresh at each call. A caller
    /// that waits for the calibration started by [`Clock::calibrate_soon`] gets its result.
    pub fn calibrated() -> Clock {
        CALIBRATED.get_or_init(calibrate_once).reanchored()
    }

    /// Starts the process's calibration on a thread of its own and returns at once, so that
    /// it runs while a command opens its ports and reads its input: the first run's start
    /// then waits for what is left of the window, not all of it.
    pub fn calibrate_soon() {
        if CALIBRATED.get().is_none() {
            let _ = std::thread::Builder::new()
                .name("calibrate".into())
                .spawn(|| {
                    CALIBRATED.get_or_init(calibrate_once);
                });
        }
    }

    /// This clock's rate, anchored to CLOCK_REALTIME now.
    pub fn reanchored(&self) -> Clock {
        let anchor_ticks = match self.source {
            ClockSource::Tsc => rdtsc(),
            ClockSource::Monotonic => clock_ns(libc::CLOCK_MONOTONIC),
            ClockSource::Simulated => return *self,
        };
        Clock {
            anchor_ticks,
            anchor_realtime_ns: realtime_read(),
            ..*self
        }
    }

    /// A clock that reads `sim` (ticks are ns; CLOCK_REALTIME is a fixed date plus it).
    pub fn simulated(sim: &'static SimTime) -> Clock {
        Clock {
            source: ClockSource::Simulated,
            mult: 1 << SHIFT,
            anchor_ticks: 0,
            anchor_realtime_ns: SimTime::REALTIME_AT_ZERO_NS,
            ticks_per_sec: 1e9,
            sim: Some(sim),
        }
    }

    /// The simulated time this clock reads, if it is simulated.
    pub fn sim(&self) -> Option<&'static SimTime> {
        self.sim
    }

    /// CLOCK_MONOTONIC now (what sleeps are measured on), or the simulated time.
    #[inline]
    pub fn monotonic_ns(&self) -> u64 {
        match self.sim {
            Some(sim) => sim.read(),
            None => clock_ns(libc::CLOCK_MONOTONIC),
        }
    }

    /// Sleeps until CLOCK_MONOTONIC reaches `target_ns` (on a simulated clock, time jumps
    /// there). False when a signal woke the thread early.
    pub fn sleep_until_monotonic(&self, target_ns: u64) -> bool {
        if let Some(sim) = self.sim {
            sim.sleep_until(target_ns);
            return true;
        }
        let ts = libc::timespec {
            tv_sec: (target_ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (target_ns % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: ts is a valid timespec; no remainder is asked for with TIMER_ABSTIME.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        rc == 0
    }

    /// A clock that reads CLOCK_MONOTONIC (ticks are ns).
    pub fn monotonic() -> Clock {
        Clock {
            source: ClockSource::Monotonic,
            mult: 1 << SHIFT,
            anchor_ticks: clock_ns(libc::CLOCK_MONOTONIC),
            anchor_realtime_ns: realtime_read(),
            ticks_per_sec: 1e9,
            sim: None,
        }
    }

    pub fn source(&self) -> ClockSource {
        self.source
    }

    pub fn ticks_per_sec(&self) -> f64 {
        self.ticks_per_sec
    }

    #[inline(always)]
    pub fn now_ticks(&self) -> u64 {
        match self.source {
            ClockSource::Tsc => rdtsc(),
            ClockSource::Monotonic => clock_ns(libc::CLOCK_MONOTONIC),
            ClockSource::Simulated => self.sim.map_or(0, SimTime::read),
        }
    }

    /// ns elapsed between two tick readings (b >= a).
    #[inline(always)]
    pub fn ticks_to_ns(&self, ticks: u64) -> u64 {
        ((ticks as u128 * self.mult as u128) >> SHIFT) as u64
    }

    /// Ticks that correspond to `ns`.
    #[inline(always)]
    pub fn ns_to_ticks(&self, ns: u64) -> u64 {
        (((ns as u128) << SHIFT) / self.mult.max(1) as u128) as u64
    }

    /// CLOCK_REALTIME now, read through the vDSO: the clock the kernel stamps received frames
    /// with, so transmit stamps taken with it give latencies without any conversion error
    /// (a TSC-to-realtime mapping calibrated over 50 ms drifts by about 1 µs per second).
    #[inline(always)]
    pub fn realtime_now_ns(&self) -> u64 {
        match self.sim {
            Some(sim) => SimTime::REALTIME_AT_ZERO_NS + sim.read(),
            None => realtime_read(),
        }
    }

    /// Wall-clock ns (since the Unix epoch) of a tick reading, for packet timestamps.
    #[inline(always)]
    pub fn realtime_ns(&self, ticks: u64) -> u64 {
        self.anchor_realtime_ns + self.ticks_to_ns(ticks.wrapping_sub(self.anchor_ticks))
    }
}

/// CLOCK_REALTIME for transmit stamps at the cost of a TSC read: the TSC reading is
/// converted from an anchor (a TSC reading and CLOCK_REALTIME read back to back) that is
/// renewed every millisecond, so the calibration's rate error (about 1 ppm) and any NTP slew
/// of CLOCK_REALTIME can add at most a few ns before the next anchor. On the fallback clock
/// (no invariant TSC) every stamp is read from CLOCK_REALTIME directly.
#[derive(Clone, Copy, Debug)]
pub struct WallClock {
    anchor_ticks: u64,
    anchor_ns: u64,
    renew_ticks: u64,
}

impl WallClock {
    const RENEW_NS: u64 = 1_000_000;

    pub fn new(clock: &Clock) -> Self {
        let mut w = WallClock {
            anchor_ticks: 0,
            anchor_ns: 0,
            renew_ticks: clock.ns_to_ticks(Self::RENEW_NS),
        };
        // Until an anchor is tight, `now_ns` reads CLOCK_REALTIME itself.
        w.renew(clock);
        w
    }

    /// Most a usable anchor's bracket may span: a preemption between the reads would put the
    /// midpoint away from the realtime reading and shift every stamp until the next renewal.
    const MAX_BRACKET_NS: u64 = 2_000;

    /// Anchors at the tightest of a few brackets (TSC, CLOCK_REALTIME, TSC). Returns false
    /// when none was tight enough; the anchor is then left as it was.
    fn renew(&mut self, clock: &Clock) -> bool {
        let mut best: Option<(u64, u64, u64)> = None;
        for _ in 0..8 {
            let before = clock.now_ticks();
            let ns = clock.realtime_now_ns();
            let after = clock.now_ticks();
            let width = after.saturating_sub(before);
            if best.is_none_or(|(w, _, _)| width < w) {
                best = Some((width, before + width / 2, ns));
            }
        }
        match best {
            Some((width, ticks, ns)) if clock.ticks_to_ns(width) <= Self::MAX_BRACKET_NS => {
                self.anchor_ticks = ticks;
                self.anchor_ns = ns;
                true
            }
            _ => false,
        }
    }

    /// Renews the anchor when the next `now_ns` would; a paced sender calls this while it
    /// waits, so the renewal's clock reads never delay a frame.
    #[inline]
    pub fn renew_if_due(&mut self, clock: &Clock) {
        if clock.source() == ClockSource::Tsc
            && clock.now_ticks().wrapping_sub(self.anchor_ticks) >= self.renew_ticks
        {
            self.renew(clock);
        }
    }

    /// CLOCK_REALTIME now, in ns since the Unix epoch.
    #[inline]
    pub fn now_ns(&mut self, clock: &Clock) -> u64 {
        if clock.source() != ClockSource::Tsc {
            return clock.realtime_now_ns();
        }
        let ticks = clock.now_ticks();
        if ticks.wrapping_sub(self.anchor_ticks) >= self.renew_ticks && !self.renew(clock) {
            // No tight anchor this time (the thread was interrupted while anchoring): this
            // stamp comes from CLOCK_REALTIME itself, and the next one tries again.
            return clock.realtime_now_ns();
        }
        let ticks = clock.now_ticks();
        self.anchor_ns + clock.ticks_to_ns(ticks.saturating_sub(self.anchor_ticks))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_trip() {
        let c = Clock::calibrate(Duration::from_millis(20));
        for ns in [0u64, 1, 1_000, 1_000_000_007, 86_400_000_000_000] {
            let back = c.ticks_to_ns(c.ns_to_ticks(ns));
            assert!(back.abs_diff(ns) <= 1 + ns / 1_000_000, "{ns} -> {back}");
        }
        // The clock runs forward and agrees with CLOCK_REALTIME to well within a second.
        let a = c.now_ticks();
        let b = c.now_ticks();
        assert!(b >= a);
        let skew = c.realtime_ns(b).abs_diff(realtime_read());
        assert!(skew < 1_000_000_000, "skew {skew} ns");
    }

    #[test]
    fn wall_clock_follows_clock_realtime() {
        // Not a timing test: the stamps must lie between two CLOCK_REALTIME reads taken
        // around them (give or take the anchor's bracketing), across many renewals.
        let c = Clock::calibrate(Duration::from_millis(20));
        let mut wall = WallClock::new(&c);
        let mut worst = 0u64;
        let mut last = 0u64;
        let until = realtime_read() + 30_000_000;
        while realtime_read() < until {
            let before = realtime_read();
            let stamp = wall.now_ns(&c);
            let after = realtime_read();
            let off = if stamp < before {
                before - stamp
            } else {
                stamp.saturating_sub(after)
            };
            worst = worst.max(off);
            assert!(stamp + 1_000 >= last, "stamps go back: {last} then {stamp}");
            last = stamp;
        }
        // Generous: a preemption between the reads widens the window, not the error.
        assert!(
            worst < 50_000,
            "a stamp was {worst} ns outside CLOCK_REALTIME"
        );
    }
}
