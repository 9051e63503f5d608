//! How times and rates read in prose, in the engine's warnings and (re-exported by the run-control
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

/// A packet rate with a unit that keeps it readable: `1.000 Mpps`, `99.60 kpps`, `50.0 pps`.
pub fn pps_text(pps: f64) -> String {
    if pps >= 1e6 {
        format!("{:.3} Mpps", pps / 1e6)
    } else if pps >= 1e3 {
        format!("{:.2} kpps", pps / 1e3)
    } else {
        format!("{pps:.1} pps")
    }
}
