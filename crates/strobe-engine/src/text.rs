//! How times read in prose, in the engine's warnings and (re-exported by the run-control
//! layer) in every front end: three decimals of µs below 1 ms (ns resolution), of ms below
//! 1 s, of s above, always with the unit.

pub fn duration_text(ns: u64) -> String {
    duration_text_f64(ns as f64)
}

/// [`duration_text`] for fractional (or negative) nanoseconds.
pub fn duration_text_f64(ns: f64) -> String {
    if ns.abs() >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if ns.abs() >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else {
        format!("{:.3} µs", ns / 1e3)
    }
}
