//! How times and rates read in prose, the same in every warning and every front end: three
//! decimals of µs below 1 ms (ns resolution), of ms below 1 s, of s above, always with the
//! unit. Here, at the bottom of the library, because [`crate::Warning`] renders with them.

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
        assert_eq!(bps_text(50e6), "50.000 Mbit/s");
        assert_eq!(bps_text(9.844e9), "9.844 Gbit/s");
    }
}
