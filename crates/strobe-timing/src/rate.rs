use std::fmt;

use crate::error::{invalid, TimingError};
use crate::NS_PER_SEC;

/// Bytes each frame costs on the wire beyond its own length (FCS included): 8 of preamble and
/// start-of-frame delimiter plus the 12-byte minimum inter-frame gap.
pub const L1_OVERHEAD_BYTES: u64 = 20;

/// Smallest accepted rate, in packets or bits per second (one packet every 11.6 days).
pub const MIN_RATE: f64 = 1e-6;
/// Largest accepted rate, in packets or bits per second (far above any real link).
pub const MAX_RATE: f64 = 1e15;

/// How fast a flow sends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rate {
    /// Packets per second.
    Pps(f64),
    /// Layer-1 bits per second: each frame costs [`l1_bits`] of its length.
    L1BitsPerSec(f64),
}

impl Rate {
    /// The number as given, in packets or bits per second.
    pub fn value(&self) -> f64 {
        match *self {
            Rate::Pps(v) | Rate::L1BitsPerSec(v) => v,
        }
    }

    /// Packets per second this rate amounts to for frames of `mean_frame_len` bytes
    /// (FCS included).
    pub fn packets_per_sec(&self, mean_frame_len: f64) -> f64 {
        match *self {
            Rate::Pps(pps) => pps,
            Rate::L1BitsPerSec(bps) => bps / ((mean_frame_len + L1_OVERHEAD_BYTES as f64) * 8.0),
        }
    }

    /// Whether `self` and `other` are in the same unit (both packet rates or both bit rates).
    pub fn is_same_unit(&self, other: &Rate) -> bool {
        matches!(
            (self, other),
            (Rate::Pps(_), Rate::Pps(_)) | (Rate::L1BitsPerSec(_), Rate::L1BitsPerSec(_))
        )
    }
}

/// Formats as a string [`crate::parse_rate`] reads back to the same value.
impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Rate::Pps(v) => write!(f, "{v}pps"),
            Rate::L1BitsPerSec(v) => write!(f, "{v}bps"),
        }
    }
}

/// Layer-1 bits a frame of `frame_len_with_fcs` bytes occupies: (len + 20) * 8.
#[inline]
pub fn l1_bits(frame_len_with_fcs: u32) -> u64 {
    (u64::from(frame_len_with_fcs) + L1_OVERHEAD_BYTES) * 8
}

pub(crate) fn validate_rate(rate: Rate, parameter: &str) -> Result<(), TimingError> {
    let value = rate.value();
    if value.is_finite() && (MIN_RATE..=MAX_RATE).contains(&value) {
        return Ok(());
    }
    let unit = match rate {
        Rate::Pps(_) => "packets per second",
        Rate::L1BitsPerSec(_) => "layer-1 bits per second",
    };
    // Out-of-range values print in scientific notation: 1e308 has 309 digits written out.
    let readable = match rate {
        Rate::Pps(v) => format!("{v:e}pps"),
        Rate::L1BitsPerSec(v) => format!("{v:e}bps"),
    };
    Err(invalid(
        parameter,
        readable,
        format!("accepted are {unit} from {MIN_RATE:e} to {MAX_RATE:e}"),
    ))
}

/// A validated rate held as the exact fraction `num / den` packets (or L1 bits) per second,
/// so that departure times can be accumulated in integers without ever losing precision.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct ExactRate {
    pub per_bit: bool,
    /// Also the denominator of a clock's sub-nanosecond remainder; always < 2^63.
    pub num: u64,
    pub den: u64,
}

/// Bounds of the fraction chosen for a rate: `bits * 1e9 * den` must fit in a u128 for any
/// u32 frame length, and a clock's remainder (below num) must fit in a u64 with room to add.
const MAX_DEN: u128 = 1 << 62;
const MAX_NUM: u128 = 1 << 62;

impl ExactRate {
    pub fn new(rate: Rate, parameter: &str) -> Result<Self, TimingError> {
        validate_rate(rate, parameter)?;
        Ok(Self::approximate(rate))
    }

    /// The simplest fraction that an already validated rate is the f64 of: 0.1 pps is taken
    /// as exactly 1/10 and 1234.5678 as 6172839/5000, so times land where a user expects.
    pub fn approximate(rate: Rate) -> Self {
        let (num, den) = simplest_fraction(rate.value());
        Self {
            per_bit: matches!(rate, Rate::L1BitsPerSec(_)),
            num,
            den,
        }
    }

    /// One packet every `gap_ns` nanoseconds, exactly.
    pub fn every_ns(gap_ns: u64) -> Self {
        Self {
            per_bit: false,
            num: NS_PER_SEC,
            den: gap_ns,
        }
    }

    #[inline]
    fn work(self, frame_len: u32) -> u64 {
        if self.per_bit {
            l1_bits(frame_len)
        } else {
            1
        }
    }

    /// Time a frame occupies at this rate as whole nanoseconds plus a remainder in units of
    /// 1/num ns; None when it does not fit in u64 nanoseconds.
    pub fn cost(self, frame_len: u32) -> Option<(u64, u64)> {
        let total =
            u128::from(self.work(frame_len)) * u128::from(NS_PER_SEC) * u128::from(self.den);
        let whole = u64::try_from(total / u128::from(self.num)).ok()?;
        // The remainder is below num, which fits in u64.
        let rem = (total % u128::from(self.num)) as u64;
        Some((whole, rem))
    }

    /// Time a frame occupies at this rate, in (fractional) nanoseconds.
    pub fn gap_ns(self, frame_len: u32) -> f64 {
        self.work(frame_len) as f64 * NS_PER_SEC as f64 * self.den as f64 / self.num as f64
    }
}

/// The first continued-fraction convergent of `x` that rounds to `x` as an f64 (the
/// simplest such fraction), or the last one within bounds. `x` must be positive and finite.
fn simplest_fraction(x: f64) -> (u64, u64) {
    // x = mantissa * 2^exponent exactly.
    let bits = x.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    let fraction = bits & ((1 << 52) - 1);
    let (mut mantissa, mut exponent) = if biased == 0 {
        (fraction, -1074)
    } else {
        (fraction | (1 << 52), biased - 1075)
    };
    let zeros = mantissa.trailing_zeros();
    mantissa >>= zeros;
    exponent += zeros as i32;

    if exponent >= 0 {
        let whole = u128::from(mantissa) << exponent.min(64);
        return (whole.min(MAX_NUM) as u64, 1);
    }
    if exponent < -120 {
        // Far below MIN_RATE; only reachable through a bug, so stay safe rather than exact.
        return (1, (1.0 / x).round().clamp(1.0, MAX_DEN as f64) as u64);
    }

    // Euclid on mantissa / 2^-exponent; convergents p/q start from the conventional 0/1, 1/0.
    let (mut a, mut b) = (u128::from(mantissa), 1u128 << -exponent);
    let (mut p_prev, mut q_prev, mut p, mut q) = (0u128, 1u128, 1u128, 0u128);
    loop {
        let term = a / b;
        let next = term
            .checked_mul(p)
            .and_then(|v| v.checked_add(p_prev))
            .zip(term.checked_mul(q).and_then(|v| v.checked_add(q_prev)));
        let Some((p_next, q_next)) = next.filter(|&(p, q)| p <= MAX_NUM && q <= MAX_DEN) else {
            break;
        };
        (p_prev, q_prev, p, q) = (p, q, p_next, q_next);
        if p != 0 && p as f64 / q as f64 == x {
            break;
        }
        let r = a - term * b;
        if r == 0 {
            break;
        }
        (a, b) = (b, r);
    }
    if p == 0 || q == 0 {
        return (1, (1.0 / x).round().clamp(1.0, MAX_DEN as f64) as u64);
    }
    (p as u64, q as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractions_are_exact_for_short_decimals() {
        assert_eq!(simplest_fraction(1000.0), (1000, 1));
        assert_eq!(simplest_fraction(0.1), (1, 10));
        assert_eq!(simplest_fraction(7.5), (15, 2));
        assert_eq!(simplest_fraction(1.5e6), (1_500_000, 1));
        assert_eq!(simplest_fraction(123.456), (15432, 125));
        assert_eq!(simplest_fraction(1e15), (1_000_000_000_000_000, 1));
        assert_eq!(simplest_fraction(1e-6), (1, 1_000_000));
        assert_eq!(simplest_fraction(1.0 / 3.0), (1, 3));
    }

    #[test]
    fn irrational_rates_are_approximated_closely() {
        for x in [
            std::f64::consts::PI,
            std::f64::consts::E * 1e4,
            0.000_123_456_789_1,
        ] {
            let (n, d) = simplest_fraction(x);
            let rel = ((n as f64 / d as f64) - x).abs() / x;
            assert!(rel < 1e-15, "{x}: {n}/{d} off by {rel}");
        }
    }

    #[test]
    fn cost_splits_whole_and_remainder() {
        let rate = ExactRate::approximate(Rate::Pps(3.0));
        assert_eq!(rate.cost(64), Some((333_333_333, 1)));
        let bits = ExactRate::approximate(Rate::L1BitsPerSec(1e9));
        assert_eq!(bits.cost(64), Some((672, 0)));
        assert_eq!(ExactRate::every_ns(250).cost(1500), Some((250, 0)));
    }
}
