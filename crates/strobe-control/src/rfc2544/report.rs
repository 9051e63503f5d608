//! What the benchmarks measured: each trial's result, each benchmark's per frame size, the
//! whole report, and how it reads (figures and tables for the HTML report, CSV).

use serde::{Deserialize, Serialize};
use strobe_analyze::latency::LatencyStats;
use strobe_analyze::search::SearchMethod;
use strobe_model::Warning;

use super::request::{Benchmark, TrialSettings};
use crate::results::TimestampSources;
use crate::text::{duration_text, pps_text};

/// A trial that offered less than this share of the asked rate was held back by the
/// generator, not the DUT.
const OFFERED_SHARE: f64 = 0.98;

/// A frame size as tested: the size text the flow takes, and its mean frame length.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FrameSize {
    /// `64`, `1518`, `imix`, …
    pub size: String,
    /// Mean frame length, FCS included.
    pub mean_bytes: f64,
    /// The link's line rate for these frames.
    pub line_rate_pps: f64,
}

impl FrameSize {
    /// A rate in frames per second as every unit a report shows.
    pub fn figures(&self, pps: f64) -> RateFigures {
        RateFigures {
            pps,
            l1_bps: pps * (self.mean_bytes + 20.0) * 8.0,
            l2_bps: pps * self.mean_bytes * 8.0,
            line_pct: 100.0 * pps / self.line_rate_pps,
        }
    }
}

/// A rate in frames per second, layer-1 and layer-2 bits per second (FCS included), and
/// percent of the line rate.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RateFigures {
    pub pps: f64,
    pub l1_bps: f64,
    pub l2_bps: f64,
    pub line_pct: f64,
}

/// What a trial was for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TrialResult {
    pub benchmark: Benchmark,
    pub size: String,
    /// The rate asked for; None: unpaced, as fast as the generator goes.
    pub asked_pps: Option<f64>,
    /// The rate the generator offered: frames sent over the time from the first to the last.
    pub offered_pps: f64,
    pub frames_tx: u64,
    /// Unique frames received (duplicates left out).
    pub frames_rx: u64,
    pub frames_lost: u64,
    /// Lost over sent (0 to 1).
    pub loss_ratio: f64,
    pub reordered: u64,
    pub duplicates: u64,
    /// Every received frame's latency (not one tagged frame).
    pub latency: Option<LatencyStats>,
    /// Where the latency's timestamps were taken.
    pub timestamps: Option<TimestampSources>,
    /// From the learning frames to the end of the settle time.
    pub wall_ns: u64,
    /// Cut short by a stop: not used by any benchmark.
    pub interrupted: bool,
    pub warnings: Vec<Warning>,
    pub failures: Vec<Warning>,
}

impl TrialResult {
    /// Whether the generator offered what was asked (unpaced trials always do).
    pub fn offered_as_asked(&self) -> bool {
        self.asked_pps
            .is_none_or(|asked| self.offered_pps >= asked * OFFERED_SHARE)
    }
}

/// Where the highest rate of a size came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MaxSource {
    /// The link's line rate.
    LineRate,
    /// The user's maximum.
    Given,
    /// The most the generator offered on this port (less than the line rate).
    Generator,
}

impl MaxSource {
    pub fn describe(self) -> &'static str {
        match self {
            MaxSource::LineRate => "line rate",
            MaxSource::Given => "given",
            MaxSource::Generator => "the most the port took",
        }
    }
}

/// One loss tolerance's outcome of a throughput search.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SearchOutcome {
    /// Loss ratio tolerated: 0 is the NDR.
    pub tolerance: f64,
    /// The highest rate that passed; None: not even the lowest searched.
    pub rate: Option<RateFigures>,
    /// The lowest rate that failed; None: the highest rate passed.
    pub lowest_failed_pps: Option<f64>,
    /// The interval closed to the resolution (false: the search hit its trial limit or was
    /// stopped).
    pub resolved: bool,
}

/// The throughput of one frame size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ThroughputResult {
    pub size: FrameSize,
    pub max_pps: f64,
    pub max_source: MaxSource,
    /// NDR first, then the PDR.
    pub outcomes: Vec<SearchOutcome>,
    pub trials: Vec<TrialResult>,
    pub elapsed_ns: u64,
}

impl ThroughputResult {
    /// The no-drop rate, if any rate passed.
    pub fn ndr(&self) -> Option<RateFigures> {
        self.outcomes.first().and_then(|o| o.rate)
    }
}

/// Latency at one load.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LatencyPoint {
    /// Percent of the throughput.
    pub load_pct: f64,
    pub rate: RateFigures,
    /// Every frame of every trial at this load.
    pub latency: Option<LatencyStats>,
    pub frames_tx: u64,
    pub frames_lost: u64,
    pub trials: Vec<TrialResult>,
}

/// The latency of one frame size, at loads relative to its throughput.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LatencyResult {
    pub size: FrameSize,
    /// The throughput the loads are shares of (the NDR).
    pub throughput_pps: Option<f64>,
    pub points: Vec<LatencyPoint>,
    /// Why there are no points, when there are none.
    pub note: Option<String>,
}

/// One point of a loss curve.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LossPoint {
    /// Percent of the highest rate.
    pub load_pct: f64,
    pub rate: RateFigures,
    pub loss_ratio: f64,
    pub trial: TrialResult,
}

/// The frame loss rate curve of one frame size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LossCurve {
    pub size: FrameSize,
    pub max_pps: f64,
    pub max_source: MaxSource,
    pub points: Vec<LossPoint>,
}

/// A system recovery trial: an overload, then a lower load watched slice by slice.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecoveryPlan {
    pub overload_pps: f64,
    pub overload_ns: u64,
    pub recovery_pps: f64,
    pub slice_ns: u64,
    pub slices: u64,
}

impl RecoveryPlan {
    /// Frames in the overload, and in each slice of the lower load (at least one).
    pub fn overload_frames(&self) -> u64 {
        ((self.overload_pps * self.overload_ns as f64 / 1e9).round() as u64).max(1)
    }

    pub fn slice_frames(&self) -> u64 {
        ((self.recovery_pps * self.slice_ns as f64 / 1e9).round() as u64).max(1)
    }
}

/// What a recovery trial's flows showed: the overload's frames sent and lost, then each
/// slice's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecoveryOutcome {
    pub overload: (u64, u64),
    pub slices: Vec<(u64, u64)>,
    pub wall_ns: u64,
    pub warnings: Vec<Warning>,
}

/// System recovery (RFC 2544 §26.5) for one frame size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecoveryResult {
    pub size: FrameSize,
    /// The throughput the loads are shares of (the NDR).
    pub throughput_pps: Option<f64>,
    pub plan: Option<RecoveryPlan>,
    pub outcome: Option<RecoveryOutcome>,
    /// From the load's reduction to the end of the last slice that lost a frame (0: none
    /// did); None when the window ended still losing, or nothing was measured.
    pub recovery_ns: Option<u64>,
    /// Why there is no recovery time, when there is none.
    pub note: Option<String>,
}

impl RecoveryResult {
    /// The outcome in one line.
    pub fn summary(&self) -> String {
        let (Some(plan), Some(o)) = (&self.plan, &self.outcome) else {
            return self.note.clone().unwrap_or_default();
        };
        let lost_after: u64 = o.slices.iter().map(|s| s.1).sum();
        format!(
            "{} for {} lost {} of {} frames; then {}: {} lost in the {} after — {}",
            pps_text(plan.overload_pps),
            duration_text(plan.overload_ns),
            o.overload.1,
            o.overload.0,
            pps_text(plan.recovery_pps),
            lost_after,
            duration_text(plan.slices * plan.slice_ns),
            match (self.recovery_ns, &self.note) {
                (Some(0), _) => format!(
                    "recovered at once (no slice of {} lost a frame)",
                    duration_text(plan.slice_ns)
                ),
                (Some(ns), _) => format!(
                    "recovered within {} (to {})",
                    duration_text(ns),
                    duration_text(plan.slice_ns)
                ),
                (None, Some(note)) => note.clone(),
                (None, None) => "not measured".into(),
            }
        )
    }
}

/// One search for the longest burst the DUT forwards without loss.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BurstSearch {
    /// The longest burst without loss (None: not even the shortest).
    pub frames: Option<u64>,
    /// The shortest burst that lost frames (None: the longest tried passed).
    pub lowest_failed: Option<u64>,
    pub resolved: bool,
    pub trials: Vec<TrialResult>,
}

/// Back-to-back frames (RFC 2544 §26.4, RFC 9004) for one frame size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BackToBackResult {
    pub size: FrameSize,
    /// The longest burst tried.
    pub max_frames: u64,
    /// The rate the bursts left at (median of the trials').
    pub burst_pps: f64,
    pub searches: Vec<BurstSearch>,
    /// Mean of the searches' longest bursts without loss.
    pub mean_frames: Option<f64>,
    /// RFC 9004's implied DUT buffer time: the mean burst over the rate it came at.
    pub implied_buffer_ns: Option<f64>,
    /// The DUT's throughput (NDR) for the size, when it was measured.
    pub throughput_pps: Option<f64>,
    /// What the DUT held when the burst ended: the burst less what it forwarded meanwhile
    /// at its throughput, B × (1 − T / R).
    pub buffered_frames: Option<f64>,
    /// The time those frames take to leave at the throughput: how much queueing the DUT's
    /// buffer amounts to.
    pub buffer_drain_ns: Option<f64>,
}

/// Everything the benchmarks measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Rfc2544Report {
    pub tests: Vec<Benchmark>,
    #[serde(flatten)]
    pub settings: TrialSettings,
    /// How latency was measured, in words (every frame, and its timestamps).
    pub latency_method: String,
    pub throughput: Vec<ThroughputResult>,
    pub latency: Vec<LatencyResult>,
    pub loss: Vec<LossCurve>,
    pub back_to_back: Vec<BackToBackResult>,
    pub recovery: Vec<RecoveryResult>,
    pub trials: usize,
    pub elapsed_ns: u64,
    /// Stopped before the end (by the user or a failed trial): what ran is kept.
    pub interrupted: bool,
    /// The failed trial's reason, when one ended the benchmarks.
    pub failure: Option<String>,
    /// The lab's device under test the trials went through (its kind, software and
    /// version, cores); absent off a lab.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_under_test: Option<strobe_model::DeviceUnderTest>,
}

/// A latency's figures as reports show them, in ns: the minimum, mean, median, 99th and
/// 99.9th percentiles and maximum; None where nothing was measured.
pub fn latency_columns(latency: Option<LatencyStats>) -> [Option<f64>; 6] {
    match latency {
        Some(l) => [
            l.min_ns, l.mean_ns, l.p50_ns, l.p99_ns, l.p99_9_ns, l.max_ns,
        ]
        .map(Some),
        None => [None; 6],
    }
}

impl Rfc2544Report {
    /// What the HTML report draws.
    pub fn figures(&self) -> strobe_analyze::rfc2544_plot::Rfc2544Figures {
        use strobe_analyze::rfc2544_plot::{LatencyFigure, LossFigure, ThroughputFigure};
        let mut notes: Vec<String> = self
            .device_under_test
            .iter()
            .map(|d| format!("Device under test: {}.", d.described()))
            .collect();
        notes.push(format!(
            "{} trials in {}: each {} of traffic, then {} for late frames and {} to settle; \
             {} learning frames before each; a {} link. Throughput: the {} search to {:.2} % \
             of the rate, NDR = no frame lost{}.",
            self.trials,
            duration_text(self.elapsed_ns),
            duration_text(self.settings.trial_ns),
            duration_text(self.settings.wait_ns),
            duration_text(self.settings.settle_ns),
            self.settings.learning_frames,
            crate::text::bps_text(self.settings.link_bps),
            match self.settings.search {
                SearchMethod::Aimed => "aimed",
                SearchMethod::Binary => "binary",
            },
            self.settings.relative_resolution * 100.0,
            self.settings
                .tolerances
                .get(1)
                .map_or(String::new(), |t| format!(
                    ", PDR = at most {:.3} % lost",
                    t * 100.0
                ))
        ));
        if !self.latency.is_empty() {
            notes.push(format!("Latency: {}.", self.latency_method));
        }
        if let Some(f) = &self.failure {
            notes.push(format!("Ended by a failed trial: {f}"));
        } else if self.interrupted {
            notes.push("Stopped before the end: these are the trials that ran.".into());
        }
        strobe_analyze::rfc2544_plot::Rfc2544Figures {
            notes,
            throughput: self
                .throughput
                .iter()
                .map(|t| ThroughputFigure {
                    size: t.size.size.clone(),
                    mean_bytes: t.size.mean_bytes,
                    ndr_pps: t.ndr().map(|r| r.pps),
                    pdr_pps: t.outcomes.get(1).and_then(|o| o.rate).map(|r| r.pps),
                    max_pps: t.max_pps,
                    max_source: t.max_source.describe().into(),
                    line_rate_pps: t.size.line_rate_pps,
                    trials: t.trials.len(),
                    seconds: t.elapsed_ns as f64 / 1e9,
                })
                .collect(),
            latency: self
                .latency
                .iter()
                .map(|l| LatencyFigure {
                    size: l.size.size.clone(),
                    mean_bytes: l.size.mean_bytes,
                    points: l
                        .points
                        .iter()
                        .filter_map(|p| Some((p.load_pct, p.rate.pps, p.latency?)))
                        .collect(),
                })
                .collect(),
            loss: self
                .loss
                .iter()
                .map(|c| LossFigure {
                    size: c.size.size.clone(),
                    points: c
                        .points
                        .iter()
                        .map(|p| (p.load_pct, p.loss_ratio * 100.0))
                        .collect(),
                })
                .collect(),
            tables: self
                .back_to_back_table()
                .into_iter()
                .chain(self.recovery_table())
                .collect(),
        }
    }

    /// System recovery results as a report table.
    fn recovery_table(&self) -> Option<strobe_analyze::rfc2544_plot::Table> {
        (!self.recovery.is_empty()).then(|| strobe_analyze::rfc2544_plot::Table {
            title: "System recovery (110 % of the throughput, then 50 %)".into(),
            header: vec!["frame".into(), "recovery".into()],
            rows: self
                .recovery
                .iter()
                .map(|r| {
                    (
                        vec![format!("{} B", r.size.size), r.summary()],
                        r.recovery_ns.is_some(),
                    )
                })
                .collect(),
        })
    }

    /// Back-to-back results as a report table.
    fn back_to_back_table(&self) -> Option<strobe_analyze::rfc2544_plot::Table> {
        if self.back_to_back.is_empty() {
            return None;
        }
        let f = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1}"));
        let t = |v: Option<f64>| v.map_or("-".into(), |ns| duration_text(ns as u64));
        Some(strobe_analyze::rfc2544_plot::Table {
            title: "Back-to-back frames (RFC 9004)".into(),
            header: [
                "frame",
                "burst rate pps",
                "longest bursts without loss",
                "mean",
                "implied buffer time",
                "held (less what left at the throughput)",
                "held drains in",
            ]
            .iter()
            .map(|h| h.to_string())
            .collect(),
            rows: self
                .back_to_back
                .iter()
                .map(|b| {
                    let each: Vec<String> = b
                        .searches
                        .iter()
                        .map(|s| s.frames.map_or("none".into(), |f| f.to_string()))
                        .collect();
                    (
                        vec![
                            format!("{} B", b.size.size),
                            format!("{:.1}", b.burst_pps),
                            each.join(", "),
                            f(b.mean_frames),
                            t(b.implied_buffer_ns),
                            f(b.buffered_frames),
                            t(b.buffer_drain_ns),
                        ],
                        b.mean_frames.is_some(),
                    )
                })
                .collect(),
        })
    }

    /// Every trial as CSV, one row each, in the order they ran within each benchmark.
    pub fn trials_csv(&self) -> String {
        const HEADER: [&str; 18] = [
            "benchmark",
            "size",
            "load_pct",
            "asked_pps",
            "offered_pps",
            "frames_tx",
            "frames_rx",
            "frames_lost",
            "loss_pct",
            "reordered",
            "duplicates",
            "latency_min_ns",
            "latency_mean_ns",
            "latency_p50_ns",
            "latency_p99_ns",
            "latency_p99_9_ns",
            "latency_max_ns",
            "interrupted",
        ];
        let row = |t: &TrialResult, load: Option<f64>| {
            let cell = |v: Option<f64>| v.map(|x| format!("{x:.1}")).unwrap_or_default();
            let mut row = vec![
                t.benchmark.name().to_string(),
                t.size.clone(),
                cell(load),
                t.asked_pps.map(|a| format!("{a:.3}")).unwrap_or_default(),
                format!("{:.3}", t.offered_pps),
                t.frames_tx.to_string(),
                t.frames_rx.to_string(),
                t.frames_lost.to_string(),
                format!("{:.6}", t.loss_ratio * 100.0),
                t.reordered.to_string(),
                t.duplicates.to_string(),
            ];
            row.extend(latency_columns(t.latency).map(cell));
            row.push(t.interrupted.to_string());
            row
        };
        let throughput = self
            .throughput
            .iter()
            .flat_map(|t| &t.trials)
            .map(|t| row(t, None));
        let latency = self
            .latency
            .iter()
            .flat_map(|l| &l.points)
            .flat_map(|p| p.trials.iter().map(move |t| row(t, Some(p.load_pct))));
        let loss = self
            .loss
            .iter()
            .flat_map(|c| &c.points)
            .map(|p| row(&p.trial, Some(p.load_pct)));
        let back_to_back = self
            .back_to_back
            .iter()
            .flat_map(|b| b.searches.iter().flat_map(|s| &s.trials))
            .map(|t| row(t, None));
        crate::results::csv_text(
            &HEADER,
            throughput.chain(latency).chain(loss).chain(back_to_back),
        )
    }
}

/// How latency was measured, in words: every frame, and where its timestamps were taken.
pub(super) fn latency_method(report: &Rfc2544Report) -> String {
    let sources = report
        .latency
        .iter()
        .flat_map(|l| &l.points)
        .flat_map(|p| &p.trials)
        .chain(report.throughput.iter().flat_map(|t| &t.trials))
        .find_map(|t| t.timestamps.clone());
    format!(
        "every received frame's latency in every trial, not one tagged frame per trial as \
         RFC 2544 §26.2 allows{}",
        sources.map_or(String::new(), |s| format!(
            "; transmit stamps: {}; receive stamps: {}",
            s.tx, s.rx
        ))
    )
}
