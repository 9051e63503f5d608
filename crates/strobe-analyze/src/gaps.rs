//! Inter-arrival gap statistics: moments, exact percentiles and a histogram.

use serde::Serialize;

/// Summary of the inter-arrival gaps (one fewer than packets).
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct GapStats {
    pub count: u64,
    pub min_gap_ns: u64,
    pub max_gap_ns: u64,
    pub mean_gap_ns: f64,
    /// Population standard deviation: the capture holds every gap, not a sample.
    pub stddev_gap_ns: f64,
    /// Coefficient of variation, stddev / mean (0 for CBR, 1 for exponential gaps).
    pub coefficient_of_variation: f64,
    pub percentiles: Percentiles,
}

/// Exact nearest-rank percentiles: each is an observed gap, the smallest one
/// with at least q·n gaps at or below it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Percentiles {
    pub p0_1_ns: u64,
    pub p1_ns: u64,
    pub p5_ns: u64,
    pub p10_ns: u64,
    pub p25_ns: u64,
    pub p50_ns: u64,
    pub p75_ns: u64,
    pub p90_ns: u64,
    pub p95_ns: u64,
    pub p99_ns: u64,
    pub p99_9_ns: u64,
}

impl Percentiles {
    /// Computes all percentiles from ascending `sorted` gaps (not empty).
    fn from_sorted(sorted: &[u64]) -> Self {
        Self {
            p0_1_ns: per_mille(sorted, 1),
            p1_ns: per_mille(sorted, 10),
            p5_ns: per_mille(sorted, 50),
            p10_ns: per_mille(sorted, 100),
            p25_ns: per_mille(sorted, 250),
            p50_ns: per_mille(sorted, 500),
            p75_ns: per_mille(sorted, 750),
            p90_ns: per_mille(sorted, 900),
            p95_ns: per_mille(sorted, 950),
            p99_ns: per_mille(sorted, 990),
            p99_9_ns: per_mille(sorted, 999),
        }
    }

    /// `(label, value)` pairs in ascending order, for the text report.
    pub fn labelled(&self) -> [(&'static str, u64); 11] {
        [
            ("p0.1", self.p0_1_ns),
            ("p1", self.p1_ns),
            ("p5", self.p5_ns),
            ("p10", self.p10_ns),
            ("p25", self.p25_ns),
            ("p50", self.p50_ns),
            ("p75", self.p75_ns),
            ("p90", self.p90_ns),
            ("p95", self.p95_ns),
            ("p99", self.p99_ns),
            ("p99.9", self.p99_9_ns),
        ]
    }
}

/// Nearest-rank quantile in integer arithmetic, so p50 of 1000 values is
/// exactly the 500th and not off by a rounding error.
fn per_mille(sorted: &[u64], q: u64) -> u64 {
    let n = sorted.len() as u64;
    let rank = (q * n).div_ceil(1000).max(1);
    sorted[(rank - 1) as usize]
}

impl GapStats {
    /// Statistics of `gaps`, given the same gaps in ascending order.
    pub fn compute(gaps: &[u64], sorted: &[u64]) -> Self {
        let count = gaps.len() as f64;
        let sum: u128 = gaps.iter().map(|&g| u128::from(g)).sum();
        let mean = sum as f64 / count;
        let variance = gaps.iter().map(|&g| (g as f64 - mean).powi(2)).sum::<f64>() / count;
        let stddev = variance.sqrt();
        Self {
            count: gaps.len() as u64,
            min_gap_ns: sorted[0],
            max_gap_ns: sorted[sorted.len() - 1],
            mean_gap_ns: mean,
            stddev_gap_ns: stddev,
            coefficient_of_variation: stddev / mean,
            percentiles: Percentiles::from_sorted(sorted),
        }
    }
}

/// Gap histogram with equal-width bins from p0.1 upwards so that a few
/// outliers do not squash the body of the distribution into one bin.
///
/// The bin width is the smallest multiple of the timestamp resolution for
/// which the requested number of bins reaches past p99.9; being a resolution
/// multiple keeps quantised (e.g. µs) gaps from leaving every other bin empty.
/// There are fewer bins than requested when fewer suffice at that width (one
/// bin for perfectly constant gaps). Gaps below `start_ns` count as underflow,
/// gaps at or above `end_ns` as overflow.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Histogram {
    pub start_ns: u64,
    pub end_ns: u64,
    pub bin_width_ns: u64,
    pub underflow: u64,
    pub overflow: u64,
    pub bins: Vec<HistogramBin>,
}

/// Gaps in `[start_ns, end_ns)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct HistogramBin {
    pub start_ns: u64,
    pub end_ns: u64,
    pub count: u64,
}

impl Histogram {
    /// Bins `gaps` into at most `bins` (≥ 1) bins covering `[low, high]`.
    pub fn build(gaps: &[u64], low: u64, high: u64, bins: usize, resolution_ns: u64) -> Self {
        let span = (high - low).saturating_add(1);
        let per_bin = span.div_ceil(bins as u64);
        let bin_width_ns = per_bin.div_ceil(resolution_ns) * resolution_ns;
        // Rounding the width up may need fewer bins than asked to reach `high`.
        let bin_count = span.div_ceil(bin_width_ns);
        let end_ns = low.saturating_add(bin_width_ns.saturating_mul(bin_count));
        let mut counts = vec![0u64; bin_count as usize];
        let (mut underflow, mut overflow) = (0, 0);
        for &gap in gaps {
            if gap < low {
                underflow += 1;
            } else if gap >= end_ns {
                overflow += 1;
            } else {
                counts[((gap - low) / bin_width_ns) as usize] += 1;
            }
        }
        let bins = counts
            .into_iter()
            .enumerate()
            .map(|(i, count)| {
                let start_ns = low + i as u64 * bin_width_ns;
                HistogramBin {
                    start_ns,
                    end_ns: start_ns.saturating_add(bin_width_ns),
                    count,
                }
            })
            .collect();
        Self {
            start_ns: low,
            end_ns,
            bin_width_ns,
            underflow,
            overflow,
            bins,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(values: &[u64]) -> Vec<u64> {
        let mut v = values.to_vec();
        v.sort_unstable();
        v
    }

    #[test]
    fn nearest_rank_percentiles_of_1_to_1000() {
        let values: Vec<u64> = (1..=1000).collect();
        let p = Percentiles::from_sorted(&values);
        assert_eq!(p.p0_1_ns, 1);
        assert_eq!(p.p1_ns, 10);
        assert_eq!(p.p50_ns, 500);
        assert_eq!(p.p99_ns, 990);
        assert_eq!(p.p99_9_ns, 999);
    }

    #[test]
    fn percentiles_of_a_single_gap() {
        let p = Percentiles::from_sorted(&[42]);
        assert_eq!(p.p0_1_ns, 42);
        assert_eq!(p.p99_9_ns, 42);
    }

    #[test]
    fn moments_are_population_statistics() {
        let gaps = [9_700, 10_300, 9_700, 10_300];
        let stats = GapStats::compute(&gaps, &sorted(&gaps));
        assert_eq!(stats.mean_gap_ns, 10_000.0);
        assert_eq!(stats.stddev_gap_ns, 300.0);
        assert_eq!(stats.min_gap_ns, 9_700);
        assert_eq!(stats.max_gap_ns, 10_300);
        assert_eq!(stats.coefficient_of_variation, 0.03);
    }

    #[test]
    fn histogram_counts_every_gap_once() {
        let gaps: Vec<u64> = (0..100).chain([5_000]).collect();
        let h = Histogram::build(&gaps, 10, 89, 8, 1);
        assert_eq!(h.bin_width_ns, 10);
        assert_eq!((h.start_ns, h.end_ns), (10, 90));
        assert_eq!(h.underflow, 10);
        assert_eq!(h.overflow, 11);
        assert!(h.bins.iter().all(|b| b.count == 10));
        let total: u64 = h.bins.iter().map(|b| b.count).sum::<u64>() + h.underflow + h.overflow;
        assert_eq!(total, gaps.len() as u64);
    }

    #[test]
    fn histogram_width_is_a_multiple_of_the_resolution() {
        let gaps: Vec<u64> = (0..50).map(|i| i * 1000).collect();
        let h = Histogram::build(&gaps, 0, 49_000, 20, 1000);
        assert_eq!(h.bin_width_ns % 1000, 0);
        assert_eq!(h.bin_width_ns, 3000);
        assert_eq!(h.bins.len(), 17);
        assert!(h.bins.iter().all(|b| b.count > 0));
        assert_eq!(h.overflow, 0);
    }

    #[test]
    fn histogram_of_constant_gaps_fills_the_first_bin() {
        let h = Histogram::build(&[10_000; 5], 10_000, 10_000, 20, 1);
        assert_eq!(h.bin_width_ns, 1);
        assert_eq!(h.bins.len(), 1);
        assert_eq!(h.bins[0].count, 5);
        assert_eq!(h.underflow + h.overflow, 0);
    }
}
