//! Latency distributions held in HdrHistograms (one per flow, values in nanoseconds):
//! summary statistics, CDF/CCDF tables, HdrHistogram interval logs and load-sweep tables.
//!
//! Pure: every function reads histograms the engine filled and writes to a caller's
//! writer; nothing here measures or reads a clock.

use std::borrow::Cow;
use std::io::{self, Write};
use std::time::{Duration, UNIX_EPOCH};

use hdrhistogram::serialization::interval_log::{
    IntervalLogWriterBuilder, IntervalLogWriterError, Tag,
};
use hdrhistogram::serialization::{Deserializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// The percentiles every report shows, as (label, quantile), in increasing order.
pub const PERCENTILES: [(&str, f64); 7] = [
    ("p50", 0.5),
    ("p90", 0.9),
    ("p99", 0.99),
    ("p99.9", 0.999),
    ("p99.99", 0.9999),
    ("p99.999", 0.99999),
    ("p99.9999", 0.999_999),
];

/// Summary of one latency distribution, in nanoseconds.
///
/// Values come from HdrHistogram buckets: `min_ns` is the lowest value of the lowest
/// recorded bucket, percentiles and `max_ns` the highest value of their bucket (the
/// HdrHistogram convention), so each is within the histogram's precision (3 significant
/// digits: 0.1 %) of the exact sample.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LatencyStats {
    pub count: u64,
    pub min_ns: f64,
    pub mean_ns: f64,
    pub stddev_ns: f64,
    pub p50_ns: f64,
    pub p90_ns: f64,
    pub p99_ns: f64,
    pub p99_9_ns: f64,
    pub p99_99_ns: f64,
    pub p99_999_ns: f64,
    pub p99_9999_ns: f64,
    pub max_ns: f64,
}

impl LatencyStats {
    /// Statistics of `hist`, or `None` when it holds no sample.
    pub fn from_histogram(hist: &Histogram<u64>) -> Option<LatencyStats> {
        if hist.is_empty() {
            return None;
        }
        let mut p = [0.0; PERCENTILES.len()];
        // One pass over the buckets for all percentiles (they are in increasing order).
        for (slot, value) in p
            .iter_mut()
            .zip(hist.value_at_quantiles(PERCENTILES.iter().map(|&(_, q)| q)))
        {
            *slot = value as f64;
        }
        Some(LatencyStats {
            count: hist.len(),
            min_ns: hist.min() as f64,
            mean_ns: hist.mean(),
            stddev_ns: hist.stdev(),
            p50_ns: p[0],
            p90_ns: p[1],
            p99_ns: p[2],
            p99_9_ns: p[3],
            p99_99_ns: p[4],
            p99_999_ns: p[5],
            p99_9999_ns: p[6],
            max_ns: hist.max() as f64,
        })
    }

    /// The same distribution shifted down by `offset_ns` (a calibrated constant such as the
    /// measurement path's own latency). Values clamp at 0; the spread (stddev) and the count
    /// are unchanged by a shift.
    pub fn subtract(&self, offset_ns: f64) -> LatencyStats {
        let shift = |v: f64| (v - offset_ns).max(0.0);
        LatencyStats {
            count: self.count,
            min_ns: shift(self.min_ns),
            mean_ns: shift(self.mean_ns),
            stddev_ns: self.stddev_ns,
            p50_ns: shift(self.p50_ns),
            p90_ns: shift(self.p90_ns),
            p99_ns: shift(self.p99_ns),
            p99_9_ns: shift(self.p99_9_ns),
            p99_99_ns: shift(self.p99_99_ns),
            p99_999_ns: shift(self.p99_999_ns),
            p99_9999_ns: shift(self.p99_9999_ns),
            max_ns: shift(self.max_ns),
        }
    }

    /// The [`PERCENTILES`] with their values, as (label, quantile, ns).
    pub fn percentiles(&self) -> [(&'static str, f64, f64); PERCENTILES.len()] {
        let values = [
            self.p50_ns,
            self.p90_ns,
            self.p99_ns,
            self.p99_9_ns,
            self.p99_99_ns,
            self.p99_999_ns,
            self.p99_9999_ns,
        ];
        std::array::from_fn(|i| (PERCENTILES[i].0, PERCENTILES[i].1, values[i]))
    }

    /// Every value as (label, ns) in the order front ends print them: min, the
    /// percentiles, max, mean, stddev.
    pub fn rows(&self) -> [(&'static str, f64); PERCENTILES.len() + 4] {
        let p = self.percentiles();
        let mut rows = [("", 0.0); PERCENTILES.len() + 4];
        rows[0] = ("min", self.min_ns);
        for (row, &(label, _, value)) in rows[1..].iter_mut().zip(&p) {
            *row = (label, value);
        }
        rows[PERCENTILES.len() + 1] = ("max", self.max_ns);
        rows[PERCENTILES.len() + 2] = ("mean", self.mean_ns);
        rows[PERCENTILES.len() + 3] = ("stddev", self.stddev_ns);
        rows
    }

    /// Whether `count` samples resolve `quantile`: at least one sample lies above it.
    /// An unresolved percentile (p99.9999 of 1000 samples) is just the maximum.
    pub fn resolves(&self, quantile: f64) -> bool {
        // Compare counts, not fractions: (1 - quantile) * count >= 1.
        self.count as f64 * (1.0 - quantile) >= 1.0 - 1e-9
    }
}

/// Writes the CDF and CCDF of each flow as CSV with the columns `flow, latency_ns,
/// count_at_or_below, cdf, ccdf`: one row per recorded histogram bucket, `latency_ns`
/// being the highest value of the bucket. `ccdf` is computed from the exact integer count
/// above the bucket, so the tail is exact however far it goes (1e-6 and below); the last
/// row of each flow has ccdf 0. Empty histograms contribute no rows.
pub fn write_cdf_csv<W: Write>(w: W, flows: &[(&str, &Histogram<u64>)]) -> io::Result<()> {
    let mut out = csv::Writer::from_writer(w);
    out.write_record(["flow", "latency_ns", "count_at_or_below", "cdf", "ccdf"])?;
    for &(flow, hist) in flows {
        let total = hist.len();
        let mut at_or_below = 0u64;
        for bucket in hist.iter_recorded() {
            at_or_below += bucket.count_since_last_iteration();
            let above = total - at_or_below;
            out.write_record([
                flow.to_owned(),
                bucket.value_iterated_to().to_string(),
                at_or_below.to_string(),
                (at_or_below as f64 / total as f64).to_string(),
                (above as f64 / total as f64).to_string(),
            ])?;
        }
    }
    out.flush()
}

/// One interval of an interval log.
#[derive(Clone, Debug)]
pub struct Interval<'a> {
    /// Written as `Tag=…` (usually the flow name); empty for no tag. It may not contain a
    /// comma, space or line break.
    pub tag: String,
    /// Seconds from the log's start time to the start of the interval.
    pub start_offset_s: f64,
    pub duration_s: f64,
    pub hist: &'a Histogram<u64>,
}

/// The log's `Interval_Max` column is the histogram's maximum divided by this: values are
/// recorded in nanoseconds and the column shows microseconds. The column is for people
/// only; tools decode the histograms, whose values stay in nanoseconds (so
/// `HistogramLogProcessor -outputValueUnitRatio 1000` prints microseconds).
pub const INTERVAL_LOG_MAX_VALUE_DIVISOR: f64 = 1000.0;

/// Why an interval log could not be written.
#[derive(Debug, thiserror::Error)]
pub enum IntervalLogError {
    #[error(
        "interval tag {tag:?} contains a comma, space or line break, which the HdrHistogram \
         log format cannot hold; use a tag without them"
    )]
    InvalidTag { tag: String },
    #[error("{what} must be a finite, non-negative number of seconds, got {value}")]
    InvalidTime { what: &'static str, value: f64 },
    #[error("cannot encode the histogram of interval {tag:?}: {reason}")]
    Encode { tag: String, reason: String },
    #[error("cannot write the interval log: {0}")]
    Io(#[from] io::Error),
}

/// Writes an HdrHistogram interval log (format 1.3, V2 compressed histograms, as the Java
/// `HistogramLogWriter` writes and `HistogramLogProcessor` and the other HdrHistogram
/// readers read). `StartTime` and `BaseTime` are both `start_unix_s`, so each interval's
/// timestamp is its offset from the start; see [`INTERVAL_LOG_MAX_VALUE_DIVISOR`] for units.
pub fn write_interval_log<W: Write>(
    w: W,
    start_unix_s: f64,
    intervals: &[Interval<'_>],
) -> Result<(), IntervalLogError> {
    let meta: Vec<_> = intervals
        .iter()
        .map(|i| (i.tag.as_str(), i.start_offset_s, i.duration_s))
        .collect();
    write_log(w, start_unix_s, &meta, |k| {
        Ok(Cow::Borrowed(intervals[k].hist))
    })
}

/// One interval of a log whose histogram is kept compressed (HdrHistogram's V2 encoding,
/// deflated or not), so a long run's intervals cost a few KiB each until written.
#[derive(Clone, Debug)]
pub struct EncodedInterval<'a> {
    pub tag: String,
    /// Start of the interval, seconds since the Unix epoch.
    pub start_unix_s: f64,
    pub duration_s: f64,
    pub encoded: &'a [u8],
}

/// Decodes one compressed interval histogram (V2, deflated or not); None when the bytes
/// hold none.
pub fn decode_histogram(encoded: &[u8]) -> Option<Histogram<u64>> {
    Deserializer::new().deserialize(&mut &encoded[..]).ok()
}

/// Writes an interval log of compressed intervals, decoding one histogram at a time; the
/// log starts at the earliest interval.
pub fn write_encoded_interval_log<W: Write>(
    w: W,
    intervals: &[EncodedInterval<'_>],
) -> Result<(), IntervalLogError> {
    let start = intervals
        .iter()
        .map(|i| i.start_unix_s)
        .fold(f64::INFINITY, f64::min);
    let start = if start.is_finite() { start } else { 0.0 };
    let meta: Vec<_> = intervals
        .iter()
        .map(|i| (i.tag.as_str(), i.start_unix_s - start, i.duration_s))
        .collect();
    let mut decoder = Deserializer::new();
    write_log(w, start, &meta, |k| {
        let i = &intervals[k];
        decoder
            .deserialize(&mut &i.encoded[..])
            .map(Cow::Owned)
            .map_err(|e| IntervalLogError::Encode {
                tag: i.tag.clone(),
                reason: format!("cannot decode the stored histogram: {e:?}"),
            })
    })
}

/// Checks every interval's tag and times before writing any (so a bad one leaves no
/// half-written log), then writes the log, asking `hist_of` for each histogram in turn.
fn write_log<'h, W: Write>(
    mut w: W,
    start_unix_s: f64,
    meta: &[(&str, f64, f64)],
    mut hist_of: impl FnMut(usize) -> Result<Cow<'h, Histogram<u64>>, IntervalLogError>,
) -> Result<(), IntervalLogError> {
    let start = seconds("start_unix_s", start_unix_s)?;
    let checked = meta
        .iter()
        .map(|&(text, offset, duration)| {
            let tag = match text {
                "" => None,
                text => Some(Tag::new(text).ok_or_else(|| IntervalLogError::InvalidTag {
                    tag: text.to_owned(),
                })?),
            };
            let offset = seconds("start_offset_s", offset)?;
            let duration = seconds("duration_s", duration)?;
            Ok((text, tag, offset, duration))
        })
        .collect::<Result<Vec<_>, IntervalLogError>>()?;

    let mut serializer = V2DeflateSerializer::new();
    let mut log = IntervalLogWriterBuilder::new()
        .add_comment("[Histogram log format version 1.3]")
        .add_comment(
            "[strobe latency: values in nanoseconds; the Interval_Max column in microseconds]",
        )
        .with_start_time(UNIX_EPOCH + start)
        .with_base_time(UNIX_EPOCH + start)
        .with_max_value_divisor(INTERVAL_LOG_MAX_VALUE_DIVISOR)
        .begin_log_with(&mut w, &mut serializer)?;
    for (k, (text, tag, offset, duration)) in checked.into_iter().enumerate() {
        let hist = hist_of(k)?;
        log.write_histogram(&hist, offset, duration, tag)
            .map_err(|e| match e {
                IntervalLogWriterError::IoError(e) => IntervalLogError::Io(e),
                IntervalLogWriterError::SerializeError(e) => IntervalLogError::Encode {
                    tag: text.to_owned(),
                    reason: e.to_string(),
                },
            })?;
    }
    w.flush()?;
    Ok(())
}

fn seconds(what: &'static str, value: f64) -> Result<Duration, IntervalLogError> {
    Duration::try_from_secs_f64(value).map_err(|_| IntervalLogError::InvalidTime { what, value })
}

/// One step of a latency-versus-load sweep. A sender that could not keep up shows as
/// `sent_pps` below `offered_pps`; loss is what the receiver missed of what was sent.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct LoadPoint {
    /// The rate asked for.
    pub offered_pps: f64,
    /// Frames sent over the sender's real time.
    pub sent_pps: f64,
    /// Unique frames received over the same time.
    pub received_pps: f64,
    /// Frames lost, in percent of the frames sent.
    pub loss_pct: f64,
    pub p50_ns: f64,
    pub p99_ns: f64,
    pub p9999_ns: f64,
}

/// Writes a sweep as CSV, one row per point with the columns named as [`LoadPoint`]'s
/// fields.
pub fn write_load_sweep_csv<W: Write>(w: W, points: &[LoadPoint]) -> io::Result<()> {
    let mut out = csv::Writer::from_writer(w);
    for point in points {
        out.serialize(point)?;
    }
    if points.is_empty() {
        out.write_record([
            "offered_pps",
            "sent_pps",
            "received_pps",
            "loss_pct",
            "p50_ns",
            "p99_ns",
            "p9999_ns",
        ])?;
    }
    out.flush()
}

#[cfg(test)]
pub(crate) mod tests {
    use std::process::Command;

    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    use hdrhistogram::serialization::Serializer;

    use super::*;

    /// The engine's histogram: 1 ns .. 100 s, 3 significant digits.
    pub(crate) fn engine_histogram() -> Histogram<u64> {
        Histogram::new_with_bounds(1, 100_000_000_000, 3).unwrap()
    }

    /// A long-tailed sample: 10 µs base, 1 in 100 near 50 µs, 1 in 10 000 near 2 ms,
    /// spread over many buckets (deterministic).
    pub(crate) fn tailed(samples: u64) -> Histogram<u64> {
        let mut h = engine_histogram();
        for i in 0..samples {
            let jitter = (i * 7919) % 2000;
            let value = match i % 10_000 {
                0 => 2_000_000 + jitter * 100,
                k if k % 100 == 1 => 50_000 + jitter * 10,
                _ => 10_000 + jitter,
            };
            h.record(value).unwrap();
        }
        h
    }

    #[test]
    fn empty_histogram_has_no_stats() {
        assert_eq!(LatencyStats::from_histogram(&engine_histogram()), None);
    }

    #[test]
    fn stats_match_an_independent_sort_of_the_samples() {
        let mut h = engine_histogram();
        let mut samples: Vec<u64> = (0..100_000u64)
            .map(|i| 1_000 + (i * 48_271) % 99_991 + if i % 997 == 0 { 1_000_000 } else { 0 })
            .collect();
        for &s in &samples {
            h.record(s).unwrap();
        }
        samples.sort_unstable();
        let n = samples.len();
        let stats = LatencyStats::from_histogram(&h).unwrap();
        assert_eq!(stats.count, n as u64);
        // Nearest-rank percentile of the exact samples; the histogram's answer is the top of
        // that sample's bucket, within 0.1 %.
        let close = |got: f64, exact: u64, what: &str| {
            let exact = exact as f64;
            assert!(
                got >= exact && got <= exact * 1.001 + 1.0,
                "{what}: histogram {got}, exact {exact}"
            );
        };
        for (label, q, value) in stats.percentiles() {
            let rank = ((q * n as f64).ceil() as usize).max(1);
            close(value, samples[rank - 1], label);
        }
        close(stats.max_ns, samples[n - 1], "max");
        assert!(stats.min_ns <= samples[0] as f64 && stats.min_ns >= samples[0] as f64 * 0.999);
        let mean = samples.iter().sum::<u64>() as f64 / n as f64;
        assert!(
            (stats.mean_ns - mean).abs() < mean * 1e-3,
            "{} vs {mean}",
            stats.mean_ns
        );
        let var = samples
            .iter()
            .map(|&s| (s as f64 - mean).powi(2))
            .sum::<f64>()
            / n as f64;
        assert!((stats.stddev_ns - var.sqrt()).abs() < var.sqrt() * 1e-2);
    }

    #[test]
    fn tail_percentiles_are_distinct_down_to_one_in_a_million() {
        // 1 000 000 samples: each percentile's rank falls in its own group of values, so
        // every one up to p99.9999 is distinct (ranks: p99 = 990 000, p99.9999 = 999 999).
        let mut h = engine_histogram();
        let n = 1_000_000u64;
        for (value, count) in [
            (10_000, 989_999),
            (20_000, 9_000),
            (30_000, 900),
            (40_000, 90),
            (50_000, 9),
            (60_000, 1),
            (70_000, 1),
        ] {
            h.record_n(value, count).unwrap();
        }
        let s = LatencyStats::from_histogram(&h).unwrap();
        assert_eq!(s.count, n);
        let equivalent = |got: f64, want: u64| h.equivalent(got as u64, want);
        assert!(equivalent(s.p99_ns, 20_000), "{s:?}");
        assert!(equivalent(s.p99_9_ns, 30_000), "{s:?}");
        assert!(equivalent(s.p99_99_ns, 40_000), "{s:?}");
        assert!(equivalent(s.p99_999_ns, 50_000), "{s:?}");
        assert!(equivalent(s.p99_9999_ns, 60_000), "{s:?}");
        assert!(equivalent(s.max_ns, 70_000), "{s:?}");
        assert!(s.resolves(0.999_999));
        let few = LatencyStats::from_histogram(&tailed(1000)).unwrap();
        assert!(few.resolves(0.999) && !few.resolves(0.9999));
    }

    #[test]
    fn subtract_shifts_locations_clamps_at_zero_and_keeps_spread() {
        let stats = LatencyStats::from_histogram(&tailed(50_000)).unwrap();
        let shifted = stats.subtract(10_500.0);
        assert_eq!(shifted.count, stats.count);
        assert_eq!(shifted.stddev_ns, stats.stddev_ns);
        assert_eq!(shifted.min_ns, 0.0, "min below the offset clamps");
        assert_eq!(shifted.p99_ns, stats.p99_ns - 10_500.0);
        assert_eq!(shifted.max_ns, stats.max_ns - 10_500.0);
        assert_eq!(shifted.mean_ns, stats.mean_ns - 10_500.0);
        let labels: Vec<&str> = shifted.rows().iter().map(|r| r.0).collect();
        assert_eq!(
            labels,
            [
                "min", "p50", "p90", "p99", "p99.9", "p99.99", "p99.999", "p99.9999", "max",
                "mean", "stddev"
            ]
        );
        assert_eq!(shifted.rows()[3].1, shifted.p99_ns);
    }

    #[test]
    fn stats_serialize_with_ns_field_names() {
        let stats = LatencyStats::from_histogram(&tailed(100)).unwrap();
        let json: serde_json::Value = serde_json::to_value(stats).unwrap();
        assert_eq!(json["count"], 100);
        assert_eq!(json["p99_9999_ns"].as_f64(), Some(stats.p99_9999_ns));
        assert_eq!(json["max_ns"].as_f64(), Some(stats.max_ns));
    }

    #[derive(Debug, serde::Deserialize)]
    struct CdfRow {
        flow: String,
        latency_ns: u64,
        count_at_or_below: u64,
        cdf: f64,
        ccdf: f64,
    }

    #[test]
    fn cdf_csv_reads_back_to_the_histogram() {
        let a = tailed(200_000);
        let mut b = engine_histogram();
        b.record_n(123_456, 3).unwrap();
        let empty = engine_histogram();
        let mut out = Vec::new();
        write_cdf_csv(
            &mut out,
            &[("flow, \"a\"", &a), ("b", &b), ("silent", &empty)],
        )
        .unwrap();
        let mut reader = csv::Reader::from_reader(out.as_slice());
        assert_eq!(
            reader.headers().unwrap(),
            vec!["flow", "latency_ns", "count_at_or_below", "cdf", "ccdf"]
        );
        let rows: Vec<CdfRow> = reader.deserialize().map(Result::unwrap).collect();
        let a_rows: Vec<&CdfRow> = rows.iter().filter(|r| r.flow == "flow, \"a\"").collect();
        let b_rows: Vec<&CdfRow> = rows.iter().filter(|r| r.flow == "b").collect();
        assert_eq!(
            a_rows.len() + b_rows.len(),
            rows.len(),
            "an empty flow has no rows"
        );

        // Every recorded bucket, in order, with the histogram's own counts.
        let buckets: Vec<(u64, u64)> = a
            .iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value()))
            .collect();
        assert_eq!(a_rows.len(), buckets.len());
        let mut previous = 0;
        for (row, &(value, count)) in a_rows.iter().zip(&buckets) {
            assert_eq!(row.latency_ns, value);
            assert_eq!(row.count_at_or_below - previous, count);
            assert_eq!(a.count_between(0, value), row.count_at_or_below);
            previous = row.count_at_or_below;
            assert!((row.cdf + row.ccdf - 1.0).abs() < 1e-12);
        }
        assert!(a_rows
            .windows(2)
            .all(|w| w[0].cdf < w[1].cdf && w[0].latency_ns < w[1].latency_ns));
        let last = a_rows.last().unwrap();
        assert_eq!(
            (last.cdf, last.ccdf, last.count_at_or_below),
            (1.0, 0.0, a.len())
        );
        // The 1-in-10 000 tail is exact: 20 samples near 2 ms out of 200 000.
        let tail = a_rows.iter().find(|r| r.latency_ns >= 1_000_000).unwrap();
        let before = a_rows
            .iter()
            .rev()
            .find(|r| r.latency_ns < 1_000_000)
            .unwrap();
        assert_eq!(before.ccdf, 20.0 / 200_000.0);
        assert!(tail.ccdf < before.ccdf);
        assert_eq!(b_rows.len(), 1);
        assert!(b.equivalent(b_rows[0].latency_ns, 123_456));
        assert_eq!((b_rows[0].count_at_or_below, b_rows[0].ccdf), (3, 0.0));
    }

    #[test]
    fn encoded_intervals_give_the_same_log_as_histograms() {
        let (expected, first, second) = sample_log();
        let encode = |h: &Histogram<u64>| {
            let mut out = Vec::new();
            V2DeflateSerializer::new().serialize(h, &mut out).unwrap();
            out
        };
        let (a, b) = (encode(&first), encode(&second));
        let intervals = [
            EncodedInterval {
                tag: "flow-a".into(),
                start_unix_s: 1_700_000_000.25,
                duration_s: 1.0,
                encoded: &a,
            },
            EncodedInterval {
                tag: String::new(),
                start_unix_s: 1_700_000_001.25,
                duration_s: 1.5,
                encoded: &b,
            },
        ];
        let mut out = Vec::new();
        write_encoded_interval_log(&mut out, &intervals).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            String::from_utf8(expected).unwrap()
        );
        // A corrupt stored histogram is an error naming the interval, not a panic.
        let bad = [EncodedInterval {
            tag: "broken".into(),
            start_unix_s: 1.0,
            duration_s: 1.0,
            encoded: &[1, 2, 3],
        }];
        let err = write_encoded_interval_log(Vec::new(), &bad).unwrap_err();
        assert!(err.to_string().contains("broken"), "{err}");
    }

    fn sample_log() -> (Vec<u8>, Histogram<u64>, Histogram<u64>) {
        let first = tailed(30_000);
        let mut second = engine_histogram();
        second.record_n(9_800, 9_800).unwrap();
        second.record_n(123_456, 200).unwrap();
        let intervals = [
            Interval {
                tag: "flow-a".into(),
                start_offset_s: 0.0,
                duration_s: 1.0,
                hist: &first,
            },
            Interval {
                tag: String::new(),
                start_offset_s: 1.0,
                duration_s: 1.5,
                hist: &second,
            },
        ];
        let mut out = Vec::new();
        write_interval_log(&mut out, 1_700_000_000.25, &intervals).unwrap();
        (out, first, second)
    }

    #[test]
    fn interval_log_round_trips_through_the_crate_reader() {
        let (log, first, second) = sample_log();
        let text = String::from_utf8(log.clone()).unwrap();
        assert!(
            text.starts_with("#[Histogram log format version 1.3]\n"),
            "{text}"
        );
        assert!(text.contains("#[StartTime: 1700000000.250 "), "{text}");
        let mut entries = IntervalLogIterator::new(&log).map(Result::unwrap);
        assert!(
            matches!(entries.next(), Some(LogEntry::StartTime(t)) if t.as_secs_f64() == 1_700_000_000.25)
        );
        assert!(
            matches!(entries.next(), Some(LogEntry::BaseTime(t)) if t.as_secs_f64() == 1_700_000_000.25)
        );
        let mut deserializer = Deserializer::new();
        for (original, tag, start, duration) in [
            (&first, Some("flow-a"), 0.0, 1.0),
            (&second, None, 1.0, 1.5),
        ] {
            let Some(LogEntry::Interval(interval)) = entries.next() else {
                panic!("expected an interval");
            };
            assert_eq!(interval.tag().map(|t| t.as_str()), tag);
            assert_eq!(interval.start_timestamp().as_secs_f64(), start);
            assert_eq!(interval.duration().as_secs_f64(), duration);
            assert_eq!(interval.max(), original.max() as f64 / 1000.0);
            let bytes = base64::Engine::decode(
                &base64::engine::general_purpose::STANDARD,
                interval.encoded_histogram(),
            )
            .unwrap();
            let decoded: Histogram<u64> = deserializer.deserialize(&mut bytes.as_slice()).unwrap();
            assert_eq!(&decoded, original);
        }
        assert!(entries.next().is_none());
    }

    #[test]
    fn interval_log_is_read_by_the_python_hdrhistogram_package() {
        let (log, first, second) = sample_log();
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), &log).unwrap();
        // The independent reader: HdrHistogram's Python implementation (`pip install
        // hdrhistogram`), decoding every interval with its own log reader and codec.
        let script = r#"
import sys
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader
reader = HistogramLogReader(sys.argv[1], HdrHistogram(1, 100000000000, 3))
while True:
    h = reader.get_next_interval_histogram()
    if h is None:
        break
    print(h.get_tag(), h.get_total_count(), h.get_value_at_percentile(99.0),
          h.get_max_value(), h.get_start_time_stamp() / 1000.0)
"#;
        let out = Command::new("python3")
            .arg("-c")
            .arg(script)
            .arg(file.path())
            .output()
            .expect("running python3 (needed for this test)");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "python3 could not read the log (install the reader with \
             `pip install hdrhistogram`): {stderr}"
        );
        let stdout = String::from_utf8(out.stdout).unwrap();
        let lines: Vec<Vec<&str>> = stdout.lines().map(|l| l.split(' ').collect()).collect();
        assert_eq!(lines.len(), 2, "{stdout}");
        for (fields, original, tag, start) in [
            (&lines[0], &first, "flow-a", 1_700_000_000.25),
            (&lines[1], &second, "None", 1_700_000_001.25),
        ] {
            assert_eq!(fields[0], tag);
            assert_eq!(fields[1].parse::<u64>().unwrap(), original.len());
            assert_eq!(
                fields[2].parse::<u64>().unwrap(),
                original.value_at_quantile(0.99)
            );
            assert_eq!(fields[3].parse::<u64>().unwrap(), original.max());
            assert!((fields[4].parse::<f64>().unwrap() - start).abs() < 1e-3);
        }
    }

    #[test]
    fn interval_log_rejects_bad_tags_and_times() {
        let h = tailed(10);
        let write = |tag: &str, start: f64| {
            write_interval_log(
                Vec::new(),
                1.0,
                &[Interval {
                    tag: tag.into(),
                    start_offset_s: start,
                    duration_s: 1.0,
                    hist: &h,
                }],
            )
        };
        let err = write("flow a", 0.0).unwrap_err();
        assert!(matches!(err, IntervalLogError::InvalidTag { .. }));
        assert!(err.to_string().contains("\"flow a\""), "{err}");
        let err = write("a", -1.0).unwrap_err();
        assert!(err.to_string().contains("start_offset_s"), "{err}");
        let err = write("a", f64::NAN).unwrap_err();
        assert!(matches!(err, IntervalLogError::InvalidTime { .. }));

        // A bad interval after a good one leaves the writer untouched.
        let mut out = Vec::new();
        let good = Interval {
            tag: "a".into(),
            start_offset_s: 0.0,
            duration_s: 1.0,
            hist: &h,
        };
        let bad = Interval {
            tag: "b,c".into(),
            ..good.clone()
        };
        assert!(write_interval_log(&mut out, 1.0, &[good, bad]).is_err());
        assert!(out.is_empty());
    }

    #[test]
    fn load_sweep_csv_has_one_row_per_point() {
        let points = [
            LoadPoint {
                offered_pps: 1e5,
                sent_pps: 1e5,
                received_pps: 1e5,
                loss_pct: 0.0,
                p50_ns: 9_000.0,
                p99_ns: 12_000.0,
                p9999_ns: 40_000.5,
            },
            LoadPoint {
                offered_pps: 1e6,
                sent_pps: 9e5,
                received_pps: 8.5e5,
                loss_pct: 5.5,
                p50_ns: 90_000.0,
                p99_ns: 120_000.0,
                p9999_ns: 400_000.0,
            },
        ];
        // The same header whether or not there is a row to name the columns from.
        let header = "offered_pps,sent_pps,received_pps,loss_pct,p50_ns,p99_ns,p9999_ns";
        let mut out = Vec::new();
        write_load_sweep_csv(&mut out, &points).unwrap();
        let mut reader = csv::Reader::from_reader(out.as_slice());
        assert_eq!(
            reader.headers().unwrap(),
            header.split(',').collect::<Vec<_>>()
        );
        let rows: Vec<Vec<f64>> = reader
            .records()
            .map(|r| r.unwrap().iter().map(|f| f.parse().unwrap()).collect())
            .collect();
        assert_eq!(rows[0], [1e5, 1e5, 1e5, 0.0, 9_000.0, 12_000.0, 40_000.5]);
        assert_eq!(
            rows[1],
            [1e6, 9e5, 8.5e5, 5.5, 90_000.0, 120_000.0, 400_000.0]
        );

        let mut empty = Vec::new();
        write_load_sweep_csv(&mut empty, &[]).unwrap();
        assert_eq!(String::from_utf8(empty).unwrap(), format!("{header}\n"));
    }
}
