//! Precision analysis of packet timestamps, after the metrics of "Mind the Gap –
//! A Comparison of Software Packet Generators" (Emmerich et al., ANCS 2017):
//! rate accuracy, inter-arrival gap distribution, deviation from the target
//! gap, bursts and, for Poisson traffic, a goodness-of-fit test.
//!
//! Pure: the caller reads the capture and passes timestamps and frame lengths.

#![forbid(unsafe_code)]

mod bursts;
mod expectation;
mod gap_fit;
mod gaps;
mod ks;
pub mod latency;
pub mod physics;
pub mod plot;
mod report;
pub mod rfc2544_plot;
pub mod search;
pub mod trains;
pub mod trains_plot;
mod xy;

pub use bursts::BurstStats;
pub use expectation::{l1_bits, Expectation, ParseExpectationError, FCS_BYTES, L1_OVERHEAD_BYTES};
pub use gap_fit::{
    estimate_floor, fit as fit_through_floor, FloorChoice, FloorFit, FloorModel, ModelFit,
};
pub use gaps::{GapStats, Histogram, HistogramBin, Percentiles};
pub use report::{PoissonFit, Precision, RateBasis, Report, TargetRate, TargetSource};

/// Default number of histogram bins.
pub const DEFAULT_HISTOGRAM_BINS: usize = 20;
/// Largest accepted number of histogram bins.
pub const MAX_HISTOGRAM_BINS: usize = 10_000;
/// Significance level of the Poisson verdict.
pub const POISSON_ALPHA: f64 = 0.01;

/// Packet timestamps and lengths of one capture, in capture order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Capture {
    pub timestamps_ns: Vec<u64>,
    /// Bytes as captured on the wire, without FCS.
    pub frame_lens: Vec<u32>,
    /// Timestamp granularity: 1 for ns pcaps, 1000 for µs pcaps.
    pub resolution_ns: u64,
}

/// What to compare the capture against.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    pub expect: Option<Expectation>,
    /// Judge the gaps against a timing model as a perfect sender on a path with a floor
    /// sends it (see the `gap_fit` module).
    pub floor_model: Option<FloorModel>,
    /// Gap at or below which two packets are back to back. Default: 1/10 of the
    /// (mean) target gap, or without an expectation 1/10 of the mean gap; never
    /// below the timestamp resolution.
    pub burst_gap_ns: Option<u64>,
    /// Upper bound on histogram bins, 1..=[`MAX_HISTOGRAM_BINS`].
    pub histogram_bins: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            expect: None,
            floor_model: None,
            burst_gap_ns: None,
            histogram_bins: DEFAULT_HISTOGRAM_BINS,
        }
    }
}

/// Why a capture could not be analysed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum AnalyzeError {
    #[error("the timing model to fit cannot be drawn: {0}")]
    InvalidModel(String),
    #[error("the capture has {packets} packet(s); at least 2 are needed to measure a gap")]
    TooFewPackets { packets: usize },
    #[error(
        "the capture has {timestamps} timestamps but {frame_lens} frame lengths; \
         there must be exactly one of each per packet"
    )]
    LengthMismatch {
        timestamps: usize,
        frame_lens: usize,
    },
    #[error(
        "timestamp of packet {index} (0-based) is {timestamp_ns} ns, earlier than the \
         previous packet's {previous_ns} ns; timestamps must not decrease (sort the capture by time)"
    )]
    DecreasingTimestamp {
        index: usize,
        previous_ns: u64,
        timestamp_ns: u64,
    },
    #[error("all {packets} timestamps are equal, so the capture spans 0 ns and has no rate")]
    ZeroDuration { packets: usize },
    #[error("the timestamp resolution must be at least 1 ns, got 0")]
    ZeroResolution,
    #[error("histogram_bins must be between 1 and {MAX_HISTOGRAM_BINS}, got {bins}")]
    InvalidHistogramBins { bins: usize },
    #[error("invalid expectation: {0}")]
    InvalidExpectation(String),
}

fn validate(capture: &Capture, options: &Options) -> Result<(), AnalyzeError> {
    let ts = &capture.timestamps_ns;
    if ts.len() < 2 {
        return Err(AnalyzeError::TooFewPackets { packets: ts.len() });
    }
    if capture.frame_lens.len() != ts.len() {
        return Err(AnalyzeError::LengthMismatch {
            timestamps: ts.len(),
            frame_lens: capture.frame_lens.len(),
        });
    }
    if let Some(index) = ts.windows(2).position(|w| w[1] < w[0]) {
        return Err(AnalyzeError::DecreasingTimestamp {
            index: index + 1,
            previous_ns: ts[index],
            timestamp_ns: ts[index + 1],
        });
    }
    if ts[0] == ts[ts.len() - 1] {
        return Err(AnalyzeError::ZeroDuration { packets: ts.len() });
    }
    if capture.resolution_ns == 0 {
        return Err(AnalyzeError::ZeroResolution);
    }
    if !(1..=MAX_HISTOGRAM_BINS).contains(&options.histogram_bins) {
        return Err(AnalyzeError::InvalidHistogramBins {
            bins: options.histogram_bins,
        });
    }
    if let Some(expect) = &options.expect {
        expect
            .validate()
            .map_err(AnalyzeError::InvalidExpectation)?;
    }
    Ok(())
}

/// Analyses `capture`; see [`Report`] for what is measured.
pub fn analyze(capture: &Capture, options: &Options) -> Result<Report, AnalyzeError> {
    validate(capture, options)?;
    let timestamps = &capture.timestamps_ns;
    let lens = &capture.frame_lens;
    let resolution_ns = capture.resolution_ns;

    let gaps: Vec<u64> = timestamps.windows(2).map(|w| w[1] - w[0]).collect();
    let mut sorted = gaps.clone();
    sorted.sort_unstable();
    let duration_ns = timestamps[timestamps.len() - 1] - timestamps[0];
    let duration = duration_ns as f64;

    // Frame i owns gap i; the last frame's bits fall outside the measured span.
    let spanning_frames = &lens[..gaps.len()];
    let l2_bits: u64 = spanning_frames.iter().map(|&len| u64::from(len) * 8).sum();
    let l1_bits_total: u64 = spanning_frames.iter().map(|&len| l1_bits(len)).sum();
    let achieved_pps = gaps.len() as f64 * 1e9 / duration;
    let l1_bits_per_sec = l1_bits_total as f64 * 1e9 / duration;

    let gap_stats = GapStats::compute(&gaps, &sorted);
    let target = options
        .expect
        .map(|expect| target_rate(expect, spanning_frames, achieved_pps, l1_bits_per_sec));

    let precision = match options.expect {
        Some(expect) => precision(&gaps, TargetSource::Expected, |i| {
            expect.target_gap_ns(lens[i])
        }),
        None => precision(&gaps, TargetSource::MeanGap, |_| gap_stats.mean_gap_ns),
    };

    let bursts = match options.burst_gap_ns {
        Some(threshold) => BurstStats::find(&gaps, threshold, true),
        None => {
            // The mean, not the median, gap: in bursty traffic the median is the
            // in-burst gap itself and a tenth of it would find no bursts at all.
            let reference = target
                .as_ref()
                .map_or(gap_stats.mean_gap_ns, |t| t.target_gap_ns);
            let threshold = ((reference / 10.0).floor() as u64).max(resolution_ns);
            BurstStats::find(&gaps, threshold, false)
        }
    };

    let poisson = match options.expect {
        Some(Expectation::Poisson { pps }) => {
            Some(poisson_fit(&sorted, pps, &gap_stats, resolution_ns))
        }
        _ => None,
    };

    let floor_fit = match &options.floor_model {
        Some(m) => gap_fit::fit(&sorted, m, resolution_ns, POISSON_ALPHA)
            .map_err(AnalyzeError::InvalidModel)?,
        None => None,
    };

    let histogram = Histogram::build(
        &gaps,
        gap_stats.percentiles.p0_1_ns,
        gap_stats.percentiles.p99_9_ns,
        options.histogram_bins,
        resolution_ns,
    );

    Ok(Report {
        packets: timestamps.len() as u64,
        bytes: lens.iter().map(|&len| u64::from(len)).sum(),
        duration_ns,
        resolution_ns,
        resolution_limited: resolution_ns >= 1000,
        achieved_pps,
        l2_bits_per_sec: l2_bits as f64 * 1e9 / duration,
        l1_bits_per_sec,
        target,
        gaps: gap_stats,
        histogram,
        precision,
        bursts,
        poisson,
        floor_fit,
    })
}

/// Target rate and accuracy; `frames` are the frames owning a gap.
fn target_rate(
    expect: Expectation,
    frames: &[u32],
    achieved_pps: f64,
    achieved_l1_bits_per_sec: f64,
) -> TargetRate {
    let relative_error_pct = |achieved: f64, target: f64| (achieved - target) / target * 100.0;
    match expect {
        Expectation::Cbr { pps } | Expectation::Poisson { pps } => TargetRate {
            expectation: expect,
            target_pps: pps,
            target_l1_bits_per_sec: None,
            target_gap_ns: 1e9 / pps,
            rate_error_pct: relative_error_pct(achieved_pps, pps),
            rate_error_basis: RateBasis::Pps,
        },
        Expectation::CbrL1 { bits_per_sec } => {
            let total_target_ns: f64 = frames.iter().map(|&len| expect.target_gap_ns(len)).sum();
            let gaps = frames.len() as f64;
            TargetRate {
                expectation: expect,
                target_pps: gaps * 1e9 / total_target_ns,
                target_l1_bits_per_sec: Some(bits_per_sec),
                target_gap_ns: total_target_ns / gaps,
                rate_error_pct: relative_error_pct(achieved_l1_bits_per_sec, bits_per_sec),
                rate_error_basis: RateBasis::L1BitsPerSec,
            }
        }
    }
}

/// Deviation of each gap from `target_ns(i)`, the target of gap `i`.
fn precision(gaps: &[u64], source: TargetSource, target_ns: impl Fn(usize) -> f64) -> Precision {
    let (mut sum_target, mut sum_error, mut sum_squared) = (0.0, 0.0, 0.0);
    let (mut within_100ns, mut within_1us, mut within_10pct) = (0u64, 0u64, 0u64);
    for (i, &gap) in gaps.iter().enumerate() {
        let target = target_ns(i);
        let error = gap as f64 - target;
        sum_target += target;
        sum_error += error;
        sum_squared += error * error;
        within_100ns += u64::from(error.abs() <= 100.0);
        within_1us += u64::from(error.abs() <= 1000.0);
        within_10pct += u64::from(error.abs() <= target / 10.0);
    }
    let count = gaps.len() as f64;
    let mse_ns2 = sum_squared / count;
    Precision {
        target_source: source,
        target_gap_ns: sum_target / count,
        mean_error_ns: sum_error / count,
        mse_ns2,
        rmse_ns: mse_ns2.sqrt(),
        share_within_100ns: within_100ns as f64 / count,
        share_within_1us: within_1us as f64 / count,
        share_within_10pct: within_10pct as f64 / count,
    }
}

/// KS tests of the `sorted` gaps against Exp(`target_pps`) and Exp(1 / mean gap),
/// both quantised to the timestamp resolution.
fn poisson_fit(
    sorted: &[u64],
    target_pps: f64,
    stats: &GapStats,
    resolution_ns: u64,
) -> PoissonFit {
    let fitted_pps = 1e9 / stats.mean_gap_ns;
    let ks_d_vs_target = ks::exponential_statistic(sorted, target_pps / 1e9, resolution_ns);
    let ks_d_vs_fitted = ks::exponential_statistic(sorted, fitted_pps / 1e9, resolution_ns);
    let ks_p_vs_target = ks::p_value(ks_d_vs_target, sorted.len());
    PoissonFit {
        target_pps,
        ks_d_vs_target,
        ks_p_vs_target,
        fitted_pps,
        ks_d_vs_fitted,
        ks_p_vs_fitted: ks::p_value(ks_d_vs_fitted, sorted.len()),
        coefficient_of_variation: stats.coefficient_of_variation,
        alpha: POISSON_ALPHA,
        consistent_with_poisson: ks_p_vs_target >= POISSON_ALPHA,
    }
}
