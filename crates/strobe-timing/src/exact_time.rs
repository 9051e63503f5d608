//! Simulated time that moves forward by gaps without accumulating rounding error.
//!
//! Both clocks report the nearest whole nanosecond (halves round up) but keep the exact
//! fractional part internally. A clock whose time no longer fits in u64 nanoseconds
//! (584 years) reports `None` from then on.

use crate::rate::ExactRate;

/// 2^64 as f64: the first whole number of nanoseconds a u64 cannot hold.
pub(crate) const U64_LIMIT: f64 = 18_446_744_073_709_551_616.0;

/// Whole nanoseconds that stop at the first overflow instead of wrapping: the integer part
/// both clocks keep beside their exact fraction.
#[derive(Clone, Copy, Debug, Default)]
struct WholeNs {
    ns: u64,
    overflowed: bool,
}

impl WholeNs {
    #[inline]
    fn add(&mut self, ns: u64) {
        match self.ns.checked_add(ns) {
            Some(t) => self.ns = t,
            None => self.overflowed = true,
        }
    }

    /// Adds a whole, non-negative number of nanoseconds held in an f64; 2^64 or more, or
    /// not a number, overflows.
    #[inline]
    fn add_whole(&mut self, whole_ns: f64) {
        if whole_ns < U64_LIMIT {
            self.add(whole_ns as u64);
        } else {
            self.overflowed = true;
        }
    }

    /// The time to the nearest nanosecond, given whether the fraction rounds up; `None`
    /// once overflowed.
    #[inline]
    fn rounded(&self, round_up: bool) -> Option<u64> {
        if self.overflowed {
            return None;
        }
        self.ns.checked_add(u64::from(round_up))
    }
}

/// Time `ns + rem / rate.num` advanced by exact per-frame costs at an [`ExactRate`].
#[derive(Clone, Debug)]
pub(crate) struct ExactClock {
    time: WholeNs,
    rem: u64,
    rate: ExactRate,
    /// The cost of the last frame length seen; bit rates see few distinct lengths in a row.
    step_len: u32,
    step: Option<(u64, u64)>,
}

impl ExactClock {
    pub fn new(rate: ExactRate) -> Self {
        Self {
            time: WholeNs::default(),
            rem: 0,
            rate,
            step_len: 0,
            step: rate.cost(0),
        }
    }

    pub fn rate(&self) -> ExactRate {
        self.rate
    }

    /// Whole nanoseconds elapsed (the exact time, rounded down).
    #[inline]
    pub fn whole_ns(&self) -> u64 {
        self.time.ns
    }

    #[inline]
    pub fn now(&self) -> Option<u64> {
        // rem >= num - rem is rem / num >= 1/2 without overflowing.
        self.time.rounded(self.rem >= self.rate.num - self.rem)
    }

    /// Moves past a frame of `frame_len` bytes sent at the clock's rate.
    #[inline]
    pub fn advance(&mut self, frame_len: u32) {
        if self.rate.per_bit && frame_len != self.step_len {
            self.step_len = frame_len;
            self.step = self.rate.cost(frame_len);
        }
        let Some((whole, rem)) = self.step else {
            self.time.overflowed = true;
            return;
        };
        // Both remainders are below num < 2^63, so the sum cannot overflow.
        self.rem += rem;
        let carry = if self.rem >= self.rate.num {
            self.rem -= self.rate.num;
            1
        } else {
            0
        };
        self.add_ns(whole);
        self.add_ns(carry);
    }

    #[inline]
    pub fn add_ns(&mut self, ns: u64) {
        self.time.add(ns);
    }

    /// Back to time zero, keeping the rate.
    pub fn reset(&mut self) {
        self.time = WholeNs::default();
        self.rem = 0;
    }

    /// How far the exact time lies past `at_ns`, which must not be later than it.
    pub fn excess_over(&self, at_ns: u64) -> f64 {
        (self.time.ns - at_ns) as f64 + self.rem as f64 / self.rate.num as f64
    }

    /// Continues at `at_ns + offset_ns` with a new rate.
    pub fn restart(&mut self, at_ns: u64, offset_ns: f64, rate: ExactRate) {
        let mut whole = offset_ns.floor();
        // Nearest representable remainder; a fraction that rounds up to a whole ns carries.
        let mut rem = ((offset_ns - whole) * rate.num as f64).round();
        if rem >= rate.num as f64 {
            whole += 1.0;
            rem = 0.0;
        }
        self.rate = rate;
        self.step_len = 0;
        self.step = rate.cost(0);
        self.rem = (rem as u64).min(rate.num - 1);
        self.time.ns = at_ns;
        self.time.add_whole(whole);
    }
}

/// Time `ns + frac` advanced by arbitrary non-negative f64 gaps; the fraction is carried so
/// that rounding never accumulates.
#[derive(Clone, Debug, Default)]
pub(crate) struct FracClock {
    time: WholeNs,
    frac: f64,
}

impl FracClock {
    #[inline]
    pub fn whole_ns(&self) -> u64 {
        self.time.ns
    }

    #[inline]
    pub fn now(&self) -> Option<u64> {
        self.time.rounded(self.frac >= 0.5)
    }

    /// Moves forward by `gap_ns`, which must be non-negative.
    #[inline]
    pub fn advance_by(&mut self, gap_ns: f64) {
        let total = self.frac + gap_ns;
        let whole = total.floor();
        self.frac = total - whole;
        self.time.add_whole(whole);
    }

    /// How far the exact time lies past `at_ns`, which must not be later than it.
    pub fn excess_over(&self, at_ns: u64) -> f64 {
        (self.time.ns - at_ns) as f64 + self.frac
    }

    /// Continues at `at_ns + offset_ns`.
    pub fn restart(&mut self, at_ns: u64, offset_ns: f64) {
        self.time.ns = at_ns;
        self.frac = 0.0;
        self.advance_by(offset_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rate::Rate;

    #[test]
    fn exact_clock_carries_remainders() {
        let mut clock = ExactClock::new(ExactRate::approximate(Rate::Pps(3.0)));
        let mut seen = Vec::new();
        for _ in 0..4 {
            seen.push(clock.now());
            clock.advance(64);
        }
        assert_eq!(
            seen,
            [
                Some(0),
                Some(333_333_333),
                Some(666_666_667),
                Some(1_000_000_000)
            ]
        );
    }

    #[test]
    fn clocks_report_overflow_instead_of_wrapping() {
        let mut clock = ExactClock::new(ExactRate::every_ns(u64::MAX / 2 + 1));
        clock.advance(64);
        assert!(clock.now().is_some());
        clock.advance(64);
        assert_eq!(clock.now(), None);

        let mut frac = FracClock::default();
        frac.advance_by(1e30);
        assert_eq!(frac.now(), None);
    }

    #[test]
    fn frac_clock_does_not_accumulate_rounding() {
        let mut clock = FracClock::default();
        for _ in 0..1000 {
            clock.advance_by(0.4);
        }
        // 1000 * 0.4 = 400 within f64 error, not 0 (as summing rounded gaps would give).
        assert_eq!(clock.now(), Some(400));
    }
}
