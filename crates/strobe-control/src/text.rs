//! How times and rates read in prose, the same in every front end and every warning the
//! library writes: three decimals of µs below 1 ms (ns resolution), of ms below 1 s, of s
//! above, always with the unit.

use strobe_engine::ClockSource;

// Times and packet rates are written by the engine's warnings too: one definition, below
// the library.
pub use strobe_engine::text::{duration_text, duration_text_f64, pps_text};

/// A bit rate with a unit that keeps it readable: `50.000 Mbit/s`, `9.844 Gbit/s`.
pub fn bps_text(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.3} Gbit/s", bps / 1e9)
    } else if bps >= 1e6 {
        format!("{:.3} Mbit/s", bps / 1e6)
    } else {
        format!("{:.3} kbit/s", bps / 1e3)
    }
}

/// The clock that paced and stamped a run, in words.
pub fn clock_name(c: ClockSource) -> &'static str {
    match c {
        ClockSource::Tsc => "invariant TSC",
        ClockSource::Monotonic => "CLOCK_MONOTONIC (TSC not invariant)",
        ClockSource::Simulated => "simulated time (a test)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_follow_the_magnitude() {
        assert_eq!(duration_text(1_234), "1.234 µs");
        assert_eq!(duration_text(2_500_000), "2.500 ms");
        assert_eq!(duration_text(3_000_000_000), "3.000 s");
        assert_eq!(duration_text_f64(-1_500.0), "-1.500 µs");
        assert_eq!(pps_text(1_090_000.0), "1.090 Mpps");
        assert_eq!(pps_text(411_700.0), "411.70 kpps");
        assert_eq!(pps_text(12.0), "12.0 pps");
    }
}
