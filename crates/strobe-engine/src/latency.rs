//! One-way (or round-trip) latency of every instrumented frame: receive timestamp minus the
//! transmit timestamp the generator wrote into the frame's trailer, recorded without sampling
//! into a per-flow HdrHistogram, plus the RFC 3550 interarrival jitter.
//!
//! Both timestamps must come from the same clock: the transmit side reads CLOCK_REALTIME right
//! before handing a batch to the backend, and the receive side uses the kernel's software
//! receive timestamp (also CLOCK_REALTIME) or its own CLOCK_REALTIME reading right after
//! taking the frame off the ring. A frame that seems to arrive before it left (clocks that
//! disagree, e.g. two hosts without synchronisation) is counted apart, never recorded as 0.

use hdrhistogram::Histogram;

/// Lowest and highest latency a histogram holds: 1 ns to 100 s.
pub const LOWEST_NS: u64 = 1;
pub const HIGHEST_NS: u64 = 100_000_000_000;
/// Significant decimal digits kept: values are exact to 0.1 % (1 ns up to 1 µs, ~1 ns per µs
/// above).
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// A fresh, empty latency histogram with strobe's bounds.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(LOWEST_NS, HIGHEST_NS, SIGNIFICANT_DIGITS)
        .expect("static histogram bounds are valid")
}

/// Latency of one flow as seen by one receive worker (or merged over several).
#[derive(Clone, Debug)]
pub struct FlowLatency {
    hist: Histogram<u64>,
    /// Frames whose receive timestamp is earlier than their transmit timestamp.
    negative: u64,
    /// Frames with a latency above [`HIGHEST_NS`] (recorded as the highest value).
    clamped: u64,
    /// RFC 3550 interarrival jitter estimate, in ns (a running filter with gain 1/16).
    jitter_ns: f64,
    /// Frames the jitter estimate has seen.
    jitter_frames: u64,
    /// Transit time (rx − tx) of the previous frame, for the jitter's difference. i128: a
    /// received trailer may carry any 64-bit stamp, and the difference must not overflow.
    last_transit_ns: Option<i128>,
    /// Sum of the recorded latencies: an exact average (the histogram's is bucketed) that a
    /// live view can publish without walking the histogram.
    sum_ns: u128,
}

impl Default for FlowLatency {
    fn default() -> Self {
        FlowLatency {
            hist: new_histogram(),
            negative: 0,
            clamped: 0,
            jitter_ns: 0.0,
            jitter_frames: 0,
            last_transit_ns: None,
            sum_ns: 0,
        }
    }
}

impl FlowLatency {
    /// Records one frame (never allocates).
    #[inline]
    pub fn record(&mut self, tx_ns: u64, rx_ns: u64) {
        let transit = rx_ns as i128 - tx_ns as i128;
        if let Some(last) = self.last_transit_ns {
            // RFC 3550 §6.4.1 / A.8: J += (|D(i-1,i)| - J) / 16.
            let d = (transit - last).unsigned_abs() as f64;
            self.jitter_ns += (d - self.jitter_ns) / 16.0;
        }
        self.last_transit_ns = Some(transit);
        self.jitter_frames += 1;
        if transit < 0 {
            self.negative += 1;
            return;
        }
        let v = u64::try_from(transit).unwrap_or(u64::MAX).max(LOWEST_NS);
        let v = if v > HIGHEST_NS {
            self.clamped += 1;
            HIGHEST_NS
        } else {
            v
        };
        self.sum_ns += u128::from(v);
        self.hist.saturating_record(v);
    }

    pub fn histogram(&self) -> &Histogram<u64> {
        &self.hist
    }

    /// Sum of every recorded latency (clamped ones at [`HIGHEST_NS`]).
    pub fn sum_ns(&self) -> u128 {
        self.sum_ns
    }

    pub fn negative(&self) -> u64 {
        self.negative
    }

    pub fn clamped(&self) -> u64 {
        self.clamped
    }

    pub fn jitter_ns(&self) -> f64 {
        self.jitter_ns
    }

    /// Adds another part of the same flow (another receive worker, or a sub-flow). The jitter
    /// of independent parts cannot be combined exactly; the merged value is their average
    /// weighted by frames.
    pub fn add(&mut self, other: &FlowLatency) {
        // Both histograms have the same bounds, so adding never fails.
        let _ = self.hist.add(&other.hist);
        self.negative += other.negative;
        self.clamped += other.clamped;
        self.sum_ns += other.sum_ns;
        let frames = self.jitter_frames + other.jitter_frames;
        if frames > 0 {
            self.jitter_ns = (self.jitter_ns * self.jitter_frames as f64
                + other.jitter_ns * other.jitter_frames as f64)
                / frames as f64;
        }
        self.jitter_frames = frames;
        self.last_transit_ns = None;
    }
}

impl FlowLatency {
    /// The latency an in-kernel counting program recorded ([`strobe_io::xdp_count`]): its
    /// buckets are this histogram's, so each bucket's lowest value lands where the program
    /// counted it and every percentile is the one recording frame by frame gives.
    pub fn from_counted(counted: &strobe_io::xdp_count::CountedLatency) -> FlowLatency {
        let mut l = FlowLatency::default();
        for &(bucket, frames) in &counted.buckets {
            let v = strobe_io::xdp_count::bucket_value(bucket).max(LOWEST_NS);
            l.hist.saturating_record_n(v, frames);
        }
        l.negative = counted.negative;
        l.clamped = counted.clamped;
        l.sum_ns = counted.sum_ns;
        l.jitter_ns = counted.jitter_ns;
        l.jitter_frames = counted.jitter_frames;
        l
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_every_frame_exactly() {
        let mut l = FlowLatency::default();
        for i in 0..10_000u64 {
            l.record(1_000_000 + i * 100, 1_000_000 + i * 100 + 5_000 + i % 7);
        }
        let h = l.histogram();
        assert_eq!(h.len(), 10_000);
        assert_eq!(h.min(), 5_000);
        assert!(h.equivalent(h.max(), 5_006));
        assert_eq!(l.negative(), 0);
        // The exact sum: 10 000 × 5 000 plus (0..10 000) mod 7.
        let extra: u128 = (0..10_000u128).map(|i| i % 7).sum();
        assert_eq!(l.sum_ns(), 10_000 * 5_000 + extra);
        let mut twice = l.clone();
        twice.add(&l);
        assert_eq!(twice.sum_ns(), 2 * l.sum_ns());
    }

    #[test]
    fn negative_transit_is_counted_apart() {
        let mut l = FlowLatency::default();
        l.record(2_000, 1_000);
        l.record(1_000, 1_500);
        assert_eq!(l.negative(), 1);
        assert_eq!(l.histogram().len(), 1);
        assert_eq!(l.histogram().max(), 500);
    }

    #[test]
    fn jitter_follows_rfc3550() {
        // Transit times alternate 10 µs, 12 µs: |D| = 2000 ns every frame, so J converges
        // to 2000 ns from 0 as 2000 * (1 - (15/16)^n).
        let mut l = FlowLatency::default();
        for i in 0..200u64 {
            let transit = if i % 2 == 0 { 10_000 } else { 12_000 };
            l.record(i * 1_000_000, i * 1_000_000 + transit);
        }
        let expected = 2000.0 * (1.0 - (15.0f64 / 16.0).powi(199));
        assert!((l.jitter_ns() - expected).abs() < 1e-6, "{}", l.jitter_ns());
        // Constant transit: no jitter at all.
        let mut c = FlowLatency::default();
        for i in 0..100u64 {
            c.record(i * 10, i * 10 + 3_000);
        }
        assert_eq!(c.jitter_ns(), 0.0);
    }

    #[test]
    fn merging_adds_counts_and_weights_jitter() {
        let mut a = FlowLatency::default();
        let mut b = FlowLatency::default();
        for i in 0..100u64 {
            a.record(i, i + 1_000);
            b.record(i, i + 9_000 + (i % 2) * 1_000);
        }
        b.record(10, 5);
        let (ja, jb) = (a.jitter_ns(), b.jitter_ns());
        a.add(&b);
        assert_eq!(a.histogram().len(), 200);
        assert_eq!(a.negative(), 1);
        assert_eq!(a.histogram().min(), 1_000);
        let expected = (ja * 100.0 + jb * 101.0) / 201.0;
        assert!((a.jitter_ns() - expected).abs() < 1e-9);
    }

    #[test]
    fn any_trailer_stamp_is_safe() {
        // A crafted or corrupt trailer: stamps at the ends of the range neither overflow nor
        // panic; they count as negative or clamped.
        let mut l = FlowLatency::default();
        l.record(u64::MAX, 0);
        l.record(0, u64::MAX);
        l.record(u64::MAX, 0);
        assert_eq!((l.negative(), l.clamped()), (2, 1));
        assert!(l.jitter_ns().is_finite());
    }

    #[test]
    fn huge_latency_is_clamped_and_counted() {
        let mut l = FlowLatency::default();
        l.record(0, 500_000_000_000);
        assert_eq!(l.clamped(), 1);
        assert_eq!(l.histogram().len(), 1);
    }
}
