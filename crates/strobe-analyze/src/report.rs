//! The analysis result: serialisable fields plus a human-readable rendering.

use std::fmt;

use serde::Serialize;

use crate::bursts::BurstStats;
use crate::expectation::Expectation;
use crate::gaps::{GapStats, Histogram};

/// Full precision report of one capture. Serialised field names are
/// snake_case and carry their unit; optional sections are `null` when absent,
/// so the JSON schema does not depend on the options.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Report {
    pub packets: u64,
    /// Sum of captured frame lengths (no FCS).
    pub bytes: u64,
    /// First to last timestamp.
    pub duration_ns: u64,
    pub resolution_ns: u64,
    /// `true` when the timestamp resolution is 1 µs or coarser, which limits
    /// every sub-µs metric.
    pub resolution_limited: bool,
    /// Gaps per second: (packets - 1) / duration, as n packets span n - 1 gaps.
    pub achieved_pps: f64,
    /// Frame bits (no FCS) over the duration; the last frame is excluded since
    /// each frame owns the gap that follows it.
    pub l2_bits_per_sec: f64,
    /// Like `l2_bits_per_sec` with 4 B FCS + 20 B preamble/SFD/IFG per frame.
    pub l1_bits_per_sec: f64,
    /// Present when an expectation was given.
    pub target: Option<TargetRate>,
    pub gaps: GapStats,
    pub histogram: Histogram,
    pub precision: Precision,
    pub bursts: BurstStats,
    /// Present for a Poisson expectation.
    pub poisson: Option<PoissonFit>,
    /// Present when a model was fitted through a path's floor.
    pub floor_fit: Option<crate::FloorFit>,
}

impl Report {
    /// Pretty-printed JSON of the report.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self)
            .expect("a report holds only numbers, strings and flags, which always serialise")
    }
}

/// The expected rate and how far the capture is from it (accuracy).
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct TargetRate {
    pub expectation: Expectation,
    /// For `cbr_l1`, the packet rate the expected bit rate gives for these frame sizes.
    pub target_pps: f64,
    /// Only for `cbr_l1`.
    pub target_l1_bits_per_sec: Option<f64>,
    /// Mean of the per-gap targets (all equal unless `cbr_l1`).
    pub target_gap_ns: f64,
    /// (achieved - target) / target in %, on the basis below.
    pub rate_error_pct: f64,
    pub rate_error_basis: RateBasis,
}

/// Which rate `rate_error_pct` compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RateBasis {
    Pps,
    L1BitsPerSec,
}

/// Where the precision metrics take their target gap from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TargetSource {
    /// The expectation's (per-gap) target.
    Expected,
    /// No expectation: the capture's own mean gap.
    MeanGap,
}

/// Precision of the gaps against their target gap ("Mind the Gap" metrics).
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Precision {
    pub target_source: TargetSource,
    /// Mean of the per-gap targets.
    pub target_gap_ns: f64,
    /// Mean of (gap - target): the bias.
    pub mean_error_ns: f64,
    /// Mean of (gap - target)^2.
    pub mse_ns2: f64,
    pub rmse_ns: f64,
    /// Fractions 0..1 of gaps with |gap - target| at or below the bound.
    pub share_within_100ns: f64,
    pub share_within_1us: f64,
    pub share_within_10pct: f64,
}

/// Kolmogorov-Smirnov fit of the gaps to the exponential distribution, as seen
/// through timestamps truncated to the capture resolution.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct PoissonFit {
    pub target_pps: f64,
    pub ks_d_vs_target: f64,
    pub ks_p_vs_target: f64,
    /// 1 / mean gap.
    pub fitted_pps: f64,
    pub ks_d_vs_fitted: f64,
    /// Optimistic (too large) because the rate was fitted from the same data.
    pub ks_p_vs_fitted: f64,
    /// 1.0 for exponential gaps.
    pub coefficient_of_variation: f64,
    pub alpha: f64,
    /// `ks_p_vs_target >= alpha`: gaps are consistent with Exp(target rate).
    pub consistent_with_poisson: bool,
}

const LABEL_WIDTH: usize = 24;
const BAR_WIDTH: usize = 40;

fn line(f: &mut fmt::Formatter<'_>, label: &str, value: impl fmt::Display) -> fmt::Result {
    writeln!(f, "  {label:<LABEL_WIDTH$}{value}")
}

/// Duration in the largest unit that keeps it at or above 1.
fn time(ns: f64) -> String {
    let magnitude = ns.abs();
    if magnitude < 0.05 {
        // Avoid printing rounding noise as "-0.0".
        "0.0 ns".to_owned()
    } else if magnitude < 1e3 {
        format!("{ns:.1} ns")
    } else if magnitude < 1e6 {
        format!("{:.3} µs", ns / 1e3)
    } else if magnitude < 1e9 {
        format!("{:.3} ms", ns / 1e6)
    } else {
        format!("{:.3} s", ns / 1e9)
    }
}

/// Rate with an SI prefix, e.g. "1.500 Mpps", "10.000 Gbit/s".
fn rate(per_sec: f64, unit: &str) -> String {
    const PREFIXES: [(f64, &str); 4] = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")];
    let (scale, prefix) = PREFIXES
        .iter()
        .copied()
        .find(|&(scale, _)| per_sec.abs() >= scale)
        .unwrap_or((1.0, ""));
    format!("{:.3} {prefix}{unit}", per_sec / scale)
}

fn percent(fraction: f64) -> String {
    format!("{:.2} %", fraction * 100.0)
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_capture(f)?;
        self.fmt_rate(f)?;
        self.fmt_gaps(f)?;
        self.fmt_histogram(f)?;
        self.fmt_precision(f)?;
        self.fmt_bursts(f)?;
        self.fmt_poisson(f)?;
        self.fmt_floor_fit(f)
    }
}

impl Report {
    fn fmt_capture(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "Capture")?;
        line(f, "packets", self.packets)?;
        line(f, "bytes", format!("{} (frames without FCS)", self.bytes))?;
        line(f, "duration", time(self.duration_ns as f64))?;
        line(f, "timestamp resolution", time(self.resolution_ns as f64))?;
        if self.resolution_limited {
            writeln!(
                f,
                "  note: timestamps have {} resolution; sub-µs metrics (MSE, ±100 ns share, \
                 short bursts) are limited by the capture resolution",
                time(self.resolution_ns as f64)
            )?;
        }
        Ok(())
    }

    fn fmt_rate(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "Rate")?;
        line(f, "achieved", rate(self.achieved_pps, "pps"))?;
        line(f, "L2 bit rate", rate(self.l2_bits_per_sec, "bit/s"))?;
        line(
            f,
            "L1 bit rate",
            format!(
                "{} (+4 B FCS, +20 B preamble/SFD/IFG per frame)",
                rate(self.l1_bits_per_sec, "bit/s")
            ),
        )?;
        let Some(target) = &self.target else {
            return line(f, "expected", "none given");
        };
        line(f, "expected", target.expectation)?;
        line(f, "target rate", rate(target.target_pps, "pps"))?;
        if let Some(bits) = target.target_l1_bits_per_sec {
            line(f, "target L1 bit rate", rate(bits, "bit/s"))?;
        }
        line(f, "target gap", time(target.target_gap_ns))?;
        let basis = match target.rate_error_basis {
            RateBasis::Pps => "packet rate",
            RateBasis::L1BitsPerSec => "L1 bit rate",
        };
        line(
            f,
            "rate error",
            format!("{:+.4} % ({basis})", target.rate_error_pct),
        )
    }

    fn fmt_gaps(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = &self.gaps;
        writeln!(f, "Inter-arrival gaps ({})", g.count)?;
        line(f, "min", time(g.min_gap_ns as f64))?;
        line(f, "mean", time(g.mean_gap_ns))?;
        line(f, "max", time(g.max_gap_ns as f64))?;
        line(f, "stddev", time(g.stddev_gap_ns))?;
        line(
            f,
            "coeff. of variation",
            format!("{:.4}", g.coefficient_of_variation),
        )?;
        for (label, value) in g.percentiles.labelled() {
            line(f, label, time(value as f64))?;
        }
        Ok(())
    }

    fn fmt_histogram(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let h = &self.histogram;
        writeln!(
            f,
            "Gap histogram (linear bins of {} from p0.1 to past p99.9)",
            time(h.bin_width_ns as f64)
        )?;
        let largest = h.bins.iter().map(|b| b.count).max().unwrap_or(0).max(1);
        let bar = |count: u64| {
            // Round up so that any non-empty bin shows at least one mark.
            let len = (count as usize * BAR_WIDTH).div_ceil(largest as usize);
            "#".repeat(len)
        };
        if h.underflow > 0 {
            let label = format!("< {}", time(h.start_ns as f64));
            writeln!(f, "  {label:<28}{:>10}", h.underflow)?;
        }
        for bin in &h.bins {
            let label = format!(
                "[{}, {})",
                time(bin.start_ns as f64),
                time(bin.end_ns as f64)
            );
            writeln!(f, "  {label:<28}{:>10} {}", bin.count, bar(bin.count))?;
        }
        if h.overflow > 0 {
            let label = format!(">= {}", time(h.end_ns as f64));
            writeln!(f, "  {label:<28}{:>10}", h.overflow)?;
        }
        Ok(())
    }

    fn fmt_precision(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.precision;
        match p.target_source {
            TargetSource::Expected => {
                writeln!(f, "Precision vs expected gap {}", time(p.target_gap_ns))?
            }
            TargetSource::MeanGap => writeln!(
                f,
                "Precision vs mean gap {} (no expectation given)",
                time(p.target_gap_ns)
            )?,
        }
        line(f, "MSE", format!("{:.1} ns^2", p.mse_ns2))?;
        line(f, "RMSE", time(p.rmse_ns))?;
        line(f, "mean error", time(p.mean_error_ns))?;
        line(f, "within ±100 ns", percent(p.share_within_100ns))?;
        line(f, "within ±1 µs", percent(p.share_within_1us))?;
        line(f, "within ±10 %", percent(p.share_within_10pct))?;
        if matches!(
            self.target.as_ref().map(|t| t.expectation),
            Some(Expectation::Poisson { .. })
        ) {
            writeln!(
                f,
                "  note: Poisson gaps are meant to vary; see the Poisson fit below"
            )?;
        }
        Ok(())
    }

    fn fmt_bursts(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.bursts;
        let origin = if b.burst_gap_from_options {
            "given"
        } else {
            "default: 1/10 of the target or mean gap"
        };
        writeln!(
            f,
            "Bursts (back to back: gap <= {}, {origin})",
            time(b.burst_gap_ns as f64)
        )?;
        line(f, "bursts", b.burst_count)?;
        let mean = b
            .mean_burst_len_packets
            .map_or_else(|| "-".to_owned(), |m| format!("{m:.2} packets"));
        line(f, "mean length", mean)?;
        line(
            f,
            "max length",
            format!("{} packets", b.max_burst_len_packets),
        )?;
        line(
            f,
            "packets in bursts",
            format!(
                "{} ({})",
                b.packets_in_bursts,
                percent(b.share_packets_in_bursts)
            ),
        )
    }

    fn fmt_floor_fit(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(fit) = &self.floor_fit else {
            return Ok(());
        };
        writeln!(
            f,
            "Through the path's floor (two-sample KS against {} model gaps, each gap allowed ±{})",
            fit.model_gaps,
            time(fit.band_ns as f64)
        )?;
        line(f, "model", &fit.model)?;
        line(
            f,
            "floor",
            format!(
                "{} per hand-over, {} back to back, up to {} frames per hand-over{}",
                time(fit.handover_ns as f64),
                time(fit.spacing_ns as f64),
                fit.max_batch,
                if fit.floor_estimated {
                    " (estimated from the capture)"
                } else {
                    ""
                }
            ),
        )?;
        line(f, "gaps at the floor", percent(fit.share_at_floor))?;
        for m in &fit.fits {
            let name = match m.model.as_str() {
                "plain" => "vs plain model",
                "naive_clamp" => "vs naive clamp",
                _ => "vs perfect sender",
            };
            line(
                f,
                name,
                format!(
                    "D = {:.5}, p = {:.4e}, {} at the floor: {}",
                    m.ks_d,
                    m.ks_p,
                    percent(m.share_at_floor),
                    if m.consistent {
                        "consistent"
                    } else {
                        "NOT consistent"
                    }
                ),
            )?;
        }
        line(f, "verdict", &fit.verdict)
    }

    fn fmt_poisson(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(p) = &self.poisson else {
            return Ok(());
        };
        writeln!(
            f,
            "Poisson fit (Kolmogorov-Smirnov, exponential gaps on the {} timestamp grid)",
            time(self.resolution_ns as f64)
        )?;
        line(
            f,
            "vs target rate",
            format!(
                "D = {:.5}, p = {:.4e} (Exp at {})",
                p.ks_d_vs_target,
                p.ks_p_vs_target,
                rate(p.target_pps, "pps")
            ),
        )?;
        line(
            f,
            "vs fitted rate",
            format!(
                "D = {:.5}, p = {:.4e} (Exp at {}; rate fitted from the data, \
                 so p is optimistic, cf. Lilliefors)",
                p.ks_d_vs_fitted,
                p.ks_p_vs_fitted,
                rate(p.fitted_pps, "pps")
            ),
        )?;
        line(
            f,
            "coeff. of variation",
            format!("{:.4} (1 for exponential gaps)", p.coefficient_of_variation),
        )?;
        let verdict = if p.consistent_with_poisson {
            "consistent with Poisson"
        } else {
            "NOT consistent with Poisson"
        };
        line(
            f,
            "verdict",
            format!("{verdict} at the target rate (alpha {})", p.alpha),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_pick_a_readable_unit() {
        assert_eq!(time(67.0), "67.0 ns");
        assert_eq!(time(-1e-9), "0.0 ns");
        assert_eq!(time(10_000.0), "10.000 µs");
        assert_eq!(time(-2_500.0), "-2.500 µs");
        assert_eq!(time(9_990_000.0), "9.990 ms");
        assert_eq!(time(1.5e9), "1.500 s");
    }

    #[test]
    fn rates_use_si_prefixes() {
        assert_eq!(rate(100_000.0, "pps"), "100.000 kpps");
        assert_eq!(rate(1.5e6, "pps"), "1.500 Mpps");
        assert_eq!(rate(10e9, "bit/s"), "10.000 Gbit/s");
        assert_eq!(rate(12.0, "pps"), "12.000 pps");
    }
}
