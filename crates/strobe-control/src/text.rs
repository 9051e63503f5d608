//! How times and rates read in prose, the same in every front end and every warning the
//! library writes: three decimals of µs below 1 ms (ns resolution), of ms below 1 s, of s
//! above, always with the unit.

use strobe_engine::ClockSource;

// Times and rates are written by the model's warnings too: one definition, below the
// library.
pub use strobe_engine::text::{bps_text, duration_text, duration_text_f64, pps_text};

/// The clock that paced and stamped a run, in words.
pub fn clock_name(c: ClockSource) -> &'static str {
    match c {
        ClockSource::Tsc => "invariant TSC",
        ClockSource::Monotonic => "CLOCK_MONOTONIC (TSC not invariant)",
        ClockSource::Simulated => "simulated time (a test)",
    }
}
