//! Rate and duration strings as users write them on the command line or in scenario files.

use crate::error::TimingError;
use crate::rate::{validate_rate, Rate, MAX_RATE, MIN_RATE};

/// Unit, whether it is a layer-1 bit rate, and its power of ten. A bare prefix (`10g`) is a
/// bit rate, as line rates are written (`strobe calc --rate` reads the same forms).
const RATE_UNITS: [(&str, bool, i32); 14] = [
    ("", false, 0),
    ("pps", false, 0),
    ("kpps", false, 3),
    ("mpps", false, 6),
    ("gpps", false, 9),
    ("bps", true, 0),
    ("kbps", true, 3),
    ("mbps", true, 6),
    ("gbps", true, 9),
    ("tbps", true, 12),
    ("k", true, 3),
    ("m", true, 6),
    ("g", true, 9),
    ("t", true, 12),
];

const RATE_ACCEPTED: &str = "accepted is a number of packets per second with an optional \
    unit pps, kpps, mpps or gpps, or a layer-1 bit rate with unit bps, kbps, mbps, gbps or \
    tbps, also written k, m, g, t or with bit/s (for example 1000, 1.5mpps, 10gbps, 10g, \
    2.5gbit/s)";

/// Reads a rate such as `1000` (packets per second), `100kpps`, `1.5mpps`, `10gbps`,
/// `100mbps`, `64kbps` or `9600bps`; bit rates may also be written `10g` or `2.5gbit/s`.
/// Units are case-insensitive and may follow a space; bit rates are layer-1 rates (see
/// [`crate::l1_bits`]).
pub fn parse_rate(s: &str) -> Result<Rate, TimingError> {
    let error = |reason: String| TimingError::ParseRate {
        input: s.to_owned(),
        reason,
    };
    let mut text = s.trim().to_lowercase();
    for long in ["bits/s", "bit/s", "b/s", "bit"] {
        if let Some(prefix) = text.strip_suffix(long) {
            text = format!("{prefix}bps");
            break;
        }
    }
    let (number, unit) = split_unit(&text);
    let Some(&(_, per_bit, power)) = RATE_UNITS.iter().find(|(name, ..)| *name == unit) else {
        return Err(error(format!("unknown unit {unit:?}; {RATE_ACCEPTED}")));
    };
    let value = parse_scaled_float(number, power)
        .ok_or_else(|| error(format!("{number:?} is not a number; {RATE_ACCEPTED}")))?;
    let rate = if per_bit {
        Rate::L1BitsPerSec(value)
    } else {
        Rate::Pps(value)
    };
    validate_rate(rate, "rate").map_err(|_| {
        let unit = if per_bit { "bits" } else { "packets" };
        error(format!(
            "the rate must be from {MIN_RATE:e} to {MAX_RATE:e} {unit} per second"
        ))
    })?;
    Ok(rate)
}

/// `number * 10^power`, rounded once from the exact decimal where possible.
fn parse_scaled_float(number: &str, power: i32) -> Option<f64> {
    let numeric = !number.is_empty()
        && number
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | '+' | '-'));
    if !numeric {
        return None;
    }
    if power == 0 {
        return number.parse().ok();
    }
    if number.contains('e') {
        return number.parse::<f64>().ok().map(|v| v * 10f64.powi(power));
    }
    // Letting the parser apply the exponent keeps "1.1mpps" exactly 1100000.
    format!("{number}e{power}").parse().ok()
}

/// Unit names and their length in nanoseconds.
const DURATION_UNITS: [(&str, u64); 10] = [
    ("", 1),
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("μs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("min", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

const DURATION_ACCEPTED: &str = "accepted is a decimal number with an optional unit ns, us, \
    ms, s, m (minutes) or h; a plain number is nanoseconds (for example 250us, 1.5s, 100)";

/// Reads a duration such as `10ms`, `1.5s`, `250us`, `100ns`, `2m` or `1h` into nanoseconds;
/// a plain number is nanoseconds. The decimal is converted exactly and rounded to the
/// nearest nanosecond (halves up).
pub fn parse_duration_ns(s: &str) -> Result<u64, TimingError> {
    let error = |reason: String| TimingError::ParseDuration {
        input: s.to_owned(),
        reason,
    };
    let text = s.trim().to_lowercase();
    let (number, unit) = split_unit(&text);
    let Some(&(_, unit_ns)) = DURATION_UNITS.iter().find(|(name, _)| *name == unit) else {
        return Err(error(format!("unknown unit {unit:?}; {DURATION_ACCEPTED}")));
    };
    decimal_times(number, unit_ns).map_err(|reason| error(format!("{reason}; {DURATION_ACCEPTED}")))
}

/// Digits after the point beyond this would overflow the exact arithmetic below.
const MAX_FRACTION_DIGITS: usize = 18;

/// `number * unit_ns` rounded to whole nanoseconds, computed exactly in integers.
fn decimal_times(number: &str, unit_ns: u64) -> Result<u64, String> {
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits_only = |part: &str| part.chars().all(|c| c.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty()) || !digits_only(whole) || !digits_only(fraction) {
        return Err(format!("{number:?} is not a non-negative decimal number"));
    }
    if fraction.len() > MAX_FRACTION_DIGITS {
        return Err(format!(
            "at most {MAX_FRACTION_DIGITS} digits may follow the decimal point"
        ));
    }
    let too_long =
        || "it is longer than 584 years (the most a u64 of nanoseconds holds)".to_owned();
    let as_int = |part: &str| -> Result<u128, String> {
        if part.is_empty() {
            Ok(0)
        } else {
            part.parse::<u128>().map_err(|_| too_long())
        }
    };
    let scale = 10u128.pow(fraction.len() as u32);
    let (whole, fraction) = (as_int(whole)?, as_int(fraction)?);
    // In units of 1/scale ns.
    let scaled = whole
        .checked_mul(scale)
        .and_then(|v| v.checked_add(fraction))
        .and_then(|v| v.checked_mul(u128::from(unit_ns)))
        .ok_or_else(too_long)?;
    u64::try_from((scaled + scale / 2) / scale).map_err(|_| too_long())
}

/// Splits a trimmed, lower-case string into its number and its trailing alphabetic unit.
fn split_unit(text: &str) -> (&str, &str) {
    let unit_start = text
        .char_indices()
        .rev()
        .take_while(|(_, c)| c.is_alphabetic())
        .last()
        .map_or(text.len(), |(i, _)| i);
    (text[..unit_start].trim_end(), &text[unit_start..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_number_from_unit() {
        assert_eq!(split_unit("10gbps"), ("10", "gbps"));
        assert_eq!(split_unit("1e6"), ("1e6", ""));
        assert_eq!(split_unit("2.5 ms"), ("2.5", "ms"));
        assert_eq!(split_unit("250µs"), ("250", "µs"));
        assert_eq!(split_unit("pps"), ("", "pps"));
    }
}
