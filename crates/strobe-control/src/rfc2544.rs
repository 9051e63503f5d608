//! RFC 2544's benchmarks (§26): throughput (the no-drop rate, and a partial-drop rate, in one
//! search), latency at the throughput and below it, and the frame loss rate curve, per frame
//! size, run as trials the RFC's way: learning frames first, traffic at one rate for a set
//! time, a wait for late frames, counters read only after the stop, a settle time before the
//! next trial.
//!
//! strobe measures every frame's latency in every trial (not one tagged frame per trial,
//! as RFC 2544 §26.2 allows), and every trial runs with its own run tag, so frames that
//! arrive after their trial ended never count in the next one.
//!
//! The highest rate is the link's line rate for the frame size, or the most this generator
//! offers on the port when that is less: the first trial of a size sends unpaced for the
//! trial's duration and what it offered becomes the maximum, stated in the report. A DUT
//! that forwards all of it is reported as at least that fast, limited by the generator.
//!
//! Front ends run each trial their own way (status lines, a server's run) through a
//! [`TrialRunner`]; everything else happens here.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use strobe_analyze::latency::LatencyStats;
use strobe_analyze::search::{SearchMethod, SearchSpec, ThroughputSearch, Trial};
use strobe_engine::latency::FlowLatency;
use strobe_engine::RunReport;
use strobe_model::Scenario;
use strobe_timing::Rate;

use crate::methodology::{sleep_unless_stopped, spec_flow, unless_stopped};
use crate::plan::Pacing;
use crate::results::TimestampSources;
use crate::source::OneFlow;
use crate::text::{duration_text, pps_text};
use crate::{ControlError, Results};

/// RFC 2544's frame sizes for Ethernet (§9.1), FCS included.
pub const DEFAULT_SIZES: [&str; 7] = ["64", "128", "256", "512", "1024", "1280", "1518"];

/// Loads for the latency benchmark, as shares of the throughput.
pub const DEFAULT_LATENCY_LOADS_PCT: [f64; 4] = [100.0, 90.0, 50.0, 10.0];

/// A trial that offered less than this share of the asked rate was held back by the
/// generator, not the DUT.
const OFFERED_SHARE: f64 = 0.98;

/// Slices of the recovery window, each a flow of its own: enough for a fine resolution,
/// few enough to keep a run's flows light.
const MAX_RECOVERY_SLICES: u64 = 1000;

/// Learning frames go this fast: enough to be over in a few ms, slow enough for any DUT.
const LEARNING_PPS: f64 = 10_000.0;

/// One of the benchmarks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Benchmark {
    Throughput,
    Latency,
    Loss,
    BackToBack,
    Recovery,
}

impl Benchmark {
    pub const ALL: [Benchmark; 5] = [
        Benchmark::Throughput,
        Benchmark::Latency,
        Benchmark::Loss,
        Benchmark::BackToBack,
        Benchmark::Recovery,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Benchmark::Throughput => "throughput",
            Benchmark::Latency => "latency",
            Benchmark::Loss => "loss",
            Benchmark::BackToBack => "back_to_back",
            Benchmark::Recovery => "recovery",
        }
    }
}

/// The benchmarks as a user asks for them: the command line's options, the server's request
/// body (JSON, these names), with the same defaults and checks for both.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Rfc2544Spec {
    /// Which benchmarks, in RFC order whatever the order given; empty: all of them.
    pub tests: Vec<Benchmark>,
    /// Transmit and receive port locations (`lab:tx`, `afpacket:NETNS/IFACE`, …).
    pub port: String,
    pub rx: String,
    /// The UDP flow, SRC:PORT-DST:PORT.
    pub udp: String,
    pub src_mac: Option<String>,
    pub dst_mac: Option<String>,
    /// Frame sizes, FCS included, or `imix` (empty: [`DEFAULT_SIZES`]).
    pub sizes: Vec<String>,
    /// The link's line rate (layer 1): 100 % of a size's rate.
    pub link: String,
    /// The highest rate to try, if below the line rate (`500kpps`, `2g`, …).
    pub max_rate: Option<String>,
    /// Each trial's traffic time, e.g. `10s` (the RFC asks for 60 s for the throughput).
    pub trial: String,
    /// How long the receiver keeps counting after a trial's last frame (late frames).
    pub wait: String,
    /// Pause between trials for the DUT to settle.
    pub settle: String,
    /// Learning frames sent from the receive port before each trial (0: none).
    pub learning: u64,
    /// The throughput search ends when its passing and failing rates are this close, in
    /// percent of the failing rate.
    pub resolution_pct: f64,
    /// Also find the rate with at most this loss, in percent, in the same search (the
    /// partial-drop rate, PDR); None: the no-drop rate alone.
    pub pdr_pct: Option<f64>,
    /// At most this many trials per throughput search.
    pub max_trials: usize,
    /// `aimed` (at what the DUT forwarded) or `binary` (halving, for comparison).
    pub search: SearchMethod,
    /// Latency loads, in percent of the throughput (empty: [`DEFAULT_LATENCY_LOADS_PCT`]).
    pub latency_loads_pct: Vec<f64>,
    /// Trials per latency load, aggregated.
    pub latency_trials: u32,
    /// The loss curve's step, in percent of the highest rate.
    pub loss_step_pct: f64,
    /// Back-to-back: searches for the longest burst, averaged (RFC 2544 asks for 50).
    pub b2b_searches: u32,
    /// Back-to-back: the longest burst tried, as the time it lasts at the highest rate.
    pub b2b_max: String,
    /// System recovery: how long the overload at 110 % of the throughput lasts (the RFC
    /// asks for at least 60 s).
    pub recovery_overload: String,
    /// System recovery: how long the load at 50 % is watched for loss, and in slices of
    /// what length (the recovery time's resolution).
    pub recovery_window: String,
    pub recovery_slice: String,
}

impl Default for Rfc2544Spec {
    fn default() -> Self {
        Rfc2544Spec {
            tests: Vec::new(),
            port: "lab:tx".into(),
            rx: "lab:rx".into(),
            udp: "198.18.0.1:1000-198.18.1.1:2000".into(),
            src_mac: None,
            dst_mac: None,
            sizes: Vec::new(),
            link: "10g".into(),
            max_rate: None,
            trial: "10s".into(),
            wait: "2s".into(),
            settle: "1s".into(),
            learning: 16,
            resolution_pct: 0.5,
            pdr_pct: Some(0.5),
            max_trials: 30,
            search: SearchMethod::Aimed,
            latency_loads_pct: Vec::new(),
            latency_trials: 1,
            loss_step_pct: 10.0,
            b2b_searches: 3,
            b2b_max: "2s".into(),
            recovery_overload: "10s".into(),
            recovery_window: "2s".into(),
            recovery_slice: "20ms".into(),
        }
    }
}

/// How every trial runs and how a search judges it: asked for in the request, echoed in
/// the report (flattened there: its fields are the report's own in JSON).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrialSettings {
    /// The link's line rate (layer 1).
    pub link_bps: f64,
    pub trial_ns: u64,
    pub wait_ns: u64,
    pub settle_ns: u64,
    pub learning_frames: u64,
    pub relative_resolution: f64,
    /// Loss ratios searched for: 0 (NDR) and the PDR's.
    pub tolerances: Vec<f64>,
    pub search: SearchMethod,
}

/// The benchmarks as asked, checked and typed.
#[derive(Clone, Debug)]
pub struct Rfc2544Request {
    /// The flow: ports, addresses, the receive port; each trial sets size, rate and count.
    pub flow: OneFlow,
    pub lab_prefix: String,
    pub tests: Vec<Benchmark>,
    pub sizes: Vec<String>,
    pub settings: TrialSettings,
    pub max_rate: Option<Rate>,
    pub max_trials: usize,
    /// Shares of the throughput (0 to 1].
    pub latency_loads: Vec<f64>,
    pub latency_trials: u32,
    /// Share of the highest rate (0 to 1].
    pub loss_step: f64,
    pub b2b_searches: u32,
    pub b2b_max_ns: u64,
    pub recovery_overload_ns: u64,
    pub recovery_window_ns: u64,
    pub recovery_slice_ns: u64,
}

impl Rfc2544Spec {
    /// The request this spec makes, on the lab `lab_prefix` (for `lab:` ports).
    pub fn request(&self, lab_prefix: &str) -> Result<Rfc2544Request, ControlError> {
        let bad = |m: String| ControlError::BadInput(m);
        let duration = |what: &str, text: &str, zero_ok: bool| {
            strobe_timing::parse_duration_ns(text)
                .ok()
                .filter(|&ns| zero_ok || ns > 0)
                .ok_or_else(|| {
                    bad(format!(
                        "{what} `{text}`: give a {}duration, e.g. 2s or 500ms",
                        if zero_ok { "" } else { "positive " }
                    ))
                })
        };
        let link_bps = strobe_analyze::physics::parse_line_rate_bps(&self.link)
            .map_err(|e| bad(format!("link `{}`: {e}", self.link)))?;
        let max_rate = self
            .max_rate
            .as_deref()
            .map(|r| strobe_timing::parse_rate(r).map_err(|e| bad(format!("max rate: {e}"))))
            .transpose()?;
        let pct = |what: &str, v: f64, lo_open: bool| {
            let ok = v.is_finite() && v <= 100.0 && if lo_open { v > 0.0 } else { v >= 0.0 };
            if ok {
                Ok(v / 100.0)
            } else {
                Err(bad(format!(
                    "{what} {v}: give a percentage {} 0 and at most 100",
                    if lo_open { "above" } else { "from" }
                )))
            }
        };
        let relative_resolution = pct("resolution", self.resolution_pct, true)?;
        let mut tolerances = vec![0.0];
        if let Some(p) = self.pdr_pct {
            let t = pct("PDR loss", p, true)?;
            if t >= 1.0 {
                return Err(bad("PDR loss 100 %: every rate passes it; give less".into()));
            }
            tolerances.push(t);
        }
        let latency_loads = if self.latency_loads_pct.is_empty() {
            DEFAULT_LATENCY_LOADS_PCT.to_vec()
        } else {
            self.latency_loads_pct.clone()
        }
        .into_iter()
        .map(|l| pct("latency load", l, true))
        .collect::<Result<Vec<_>, _>>()?;
        let loss_step = pct("loss step", self.loss_step_pct, true)?;
        if self.max_trials < 2 {
            return Err(bad(format!(
                "at most {} trials per search: a search needs at least 2",
                self.max_trials
            )));
        }
        if self.latency_trials == 0 {
            return Err(bad("latency trials: give at least 1".into()));
        }
        if self.b2b_searches == 0 {
            return Err(bad("back-to-back searches: give at least 1".into()));
        }
        let recovery_window_ns = duration("recovery window", &self.recovery_window, false)?;
        let recovery_slice_ns = duration("recovery slice", &self.recovery_slice, false)?;
        if recovery_window_ns / recovery_slice_ns > MAX_RECOVERY_SLICES {
            return Err(bad(format!(
                "a recovery window of {} in slices of {} makes more than {MAX_RECOVERY_SLICES} \
                 slices: give longer slices or a shorter window",
                self.recovery_window, self.recovery_slice
            )));
        }
        let mut tests = if self.tests.is_empty() {
            Benchmark::ALL.to_vec()
        } else {
            self.tests.clone()
        };
        tests.sort();
        tests.dedup();
        let mut flow = spec_flow(&self.port, &self.rx, &self.src_mac, &self.dst_mac);
        flow.flow.udp = Some(self.udp.clone());
        // Rates are checked against the link here, not the model's default port.
        flow.flow.unbounded = true;
        Ok(Rfc2544Request {
            flow,
            lab_prefix: lab_prefix.to_string(),
            tests,
            sizes: if self.sizes.is_empty() {
                DEFAULT_SIZES.iter().map(|s| s.to_string()).collect()
            } else {
                self.sizes.clone()
            },
            settings: TrialSettings {
                link_bps,
                trial_ns: duration("trial", &self.trial, false)?,
                wait_ns: duration("wait", &self.wait, true)?,
                settle_ns: duration("settle", &self.settle, true)?,
                learning_frames: self.learning,
                relative_resolution,
                tolerances,
                search: self.search,
            },
            max_rate,
            max_trials: self.max_trials,
            latency_loads,
            latency_trials: self.latency_trials,
            loss_step,
            b2b_searches: self.b2b_searches,
            b2b_max_ns: duration("back-to-back maximum", &self.b2b_max, false)?,
            recovery_overload_ns: duration("recovery overload", &self.recovery_overload, false)?,
            recovery_window_ns,
            recovery_slice_ns,
        })
    }
}

/// One trial for a front end to run: its scenario, how it is paced, and how long the
/// receivers keep counting after the last frame.
pub struct TrialRun {
    /// What the trial is (its name in the run history).
    pub what: String,
    /// How far the methodology has come, for a status line; empty when it says nothing.
    pub progress: String,
    pub scenario: Scenario,
    pub pacing: Pacing,
    pub drain_ns: u64,
    /// Learning frames before a trial (nothing is measured: a front end may run it quietly).
    pub learning: bool,
}

impl TrialRun {
    /// What a status line shows: what the trial is, then the progress in parentheses.
    pub fn status(&self) -> String {
        if self.progress.is_empty() {
            self.what.clone()
        } else {
            format!("{} ({})", self.what, self.progress)
        }
    }
}

/// How a front end runs trials and hears of their results.
pub trait TrialRunner {
    type Error: From<ControlError>;
    /// Prepares and runs a trial's scenario, as the front end runs any.
    fn run(&mut self, trial: TrialRun) -> Result<(Scenario, RunReport), Self::Error>;
    /// A trial's result, as soon as it is known.
    fn finished(&mut self, _trial: &TrialResult) {}
}

/// A frame size as tested: the size text the flow takes, and its mean frame length.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct RateFigures {
    pub pps: f64,
    pub l1_bps: f64,
    pub l2_bps: f64,
    pub line_pct: f64,
}

/// What a trial was for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    pub warnings: Vec<String>,
    pub failures: Vec<String>,
}

impl TrialResult {
    /// Whether the generator offered what was asked (unpaced trials always do).
    pub fn offered_as_asked(&self) -> bool {
        self.asked_pps
            .is_none_or(|asked| self.offered_pps >= asked * OFFERED_SHARE)
    }
}

/// Where the highest rate of a size came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MaxSource {
    /// The link's line rate.
    LineRate,
    /// The user's maximum.
    Given,
    /// The most the generator offered on this port (less than the line rate).
    Generator,
}

/// One loss tolerance's outcome of a throughput search.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatencyResult {
    pub size: FrameSize,
    /// The throughput the loads are shares of (the NDR).
    pub throughput_pps: Option<f64>,
    pub points: Vec<LatencyPoint>,
    /// Why there are no points, when there are none.
    pub note: Option<String>,
}

/// One point of a loss curve.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LossPoint {
    /// Percent of the highest rate.
    pub load_pct: f64,
    pub rate: RateFigures,
    pub loss_ratio: f64,
    pub trial: TrialResult,
}

/// The frame loss rate curve of one frame size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LossCurve {
    pub size: FrameSize,
    pub max_pps: f64,
    pub max_source: MaxSource,
    pub points: Vec<LossPoint>,
}

/// A system recovery trial: an overload, then a lower load watched slice by slice.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecoveryOutcome {
    pub overload: (u64, u64),
    pub slices: Vec<(u64, u64)>,
    pub wall_ns: u64,
    pub warnings: Vec<String>,
}

/// System recovery (RFC 2544 §26.5) for one frame size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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

/// One search for the longest burst the DUT forwards without loss.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BurstSearch {
    /// The longest burst without loss (None: not even the shortest).
    pub frames: Option<u64>,
    /// The shortest burst that lost frames (None: the longest tried passed).
    pub lowest_failed: Option<u64>,
    pub resolved: bool,
    pub trials: Vec<TrialResult>,
}

/// Back-to-back frames (RFC 2544 §26.4, RFC 9004) for one frame size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
}

/// A trial's result, and its receive side's latency for merging trials at one load.
pub(crate) struct TrialOutcome {
    pub result: TrialResult,
    pub latency: Option<FlowLatency>,
}

/// How a trial sends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Offer {
    Paced(f64),
    /// As fast as the generator goes, for the trial's time.
    Unpaced,
    /// This many frames as fast as the generator goes (back-to-back).
    Burst(u64),
}

impl Offer {
    /// The rate asked for; None: as fast as the generator goes.
    pub(crate) fn asked_pps(self) -> Option<f64> {
        match self {
            Offer::Paced(pps) => Some(pps),
            Offer::Unpaced | Offer::Burst(_) => None,
        }
    }
}

/// A trial as a benchmark asks for it: what it sends.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TrialAsk<'a> {
    pub benchmark: Benchmark,
    pub size: &'a FrameSize,
    pub offer: Offer,
}

/// What a trial is called: what it is, and how far the benchmarks have come (a status
/// line's [`TrialRun::what`] and [`TrialRun::progress`]).
#[derive(Clone, Debug)]
pub(crate) struct Label {
    pub what: String,
    pub progress: String,
}

/// What the benchmarks need of a trial: the engine's is [`EngineTrials`]; the unit tests
/// use a model of a DUT.
pub(crate) trait Trials {
    type Error: From<ControlError>;
    /// Runs one trial; None when stopped before it began.
    fn run_trial(
        &mut self,
        trial: TrialAsk<'_>,
        label: Label,
    ) -> Result<Option<TrialOutcome>, Self::Error>;
    /// Runs a system recovery trial; None when stopped before it began.
    fn run_recovery(
        &mut self,
        size: &FrameSize,
        plan: &RecoveryPlan,
        label: Label,
    ) -> Result<Option<RecoveryOutcome>, Self::Error>;
    /// Stopped by the user, or a trial failed: no further trial runs.
    fn stopped(&self) -> bool;
    /// The failure that ended the benchmarks, if one did.
    fn failure(&self) -> Option<String>;
}

/// A size's highest rate, where it came from, and the trials that found it (the last one
/// at that rate).
#[derive(Clone)]
struct MaxTrials {
    max_pps: f64,
    source: MaxSource,
    trials: Vec<TrialResult>,
}

/// Runs the benchmarks one after another.
struct Session<'a, T: Trials> {
    request: &'a Rfc2544Request,
    trials: &'a mut T,
    started: Instant,
    trials_done: usize,
    wall_done_ns: u64,
    /// Each size's trials at the highest rate, shared by the throughput and the loss curve.
    max_trials: Vec<Option<MaxTrials>>,
    /// Trials still to come in the benchmarks after the current one (for the time left).
    trials_after: usize,
    /// The throughput search's trials for each size searched so far (for the time left).
    search_trials: Vec<usize>,
}

/// Runs `request`'s benchmarks through `runner` until all ran or `stop` is set. A trial
/// that fails (a port stops, nothing is sent) ends them too, with the failure in the
/// report; what ran before is kept.
pub fn run_benchmarks<R: TrialRunner>(
    request: &Rfc2544Request,
    stop: &AtomicBool,
    runner: &mut R,
) -> Result<Rfc2544Report, R::Error> {
    if request.flow.rx.is_none() {
        return Err(ControlError::BadInput(
            "RFC 2544 measures what comes back: give the receive port (--rx PORT)".into(),
        )
        .into());
    }
    let sizes = request
        .sizes
        .iter()
        .map(|s| frame_size(request, s))
        .collect::<Result<Vec<_>, _>>()?;
    let mut trials = EngineTrials {
        request,
        stop,
        runner,
        failure: None,
    };
    run_sizes(request, &sizes, &mut trials)
}

/// The benchmarks of `request` for `sizes`, trial by trial through `trials`.
pub(crate) fn run_sizes<T: Trials>(
    request: &Rfc2544Request,
    sizes: &[FrameSize],
    trials: &mut T,
) -> Result<Rfc2544Report, T::Error> {
    if sizes.is_empty() {
        return Err(ControlError::BadInput("give at least one frame size".into()).into());
    }
    let mut session = Session {
        request,
        trials,
        started: Instant::now(),
        trials_done: 0,
        wall_done_ns: 0,
        max_trials: vec![None; sizes.len()],
        trials_after: 0,
        search_trials: Vec::new(),
    };
    let mut report = Rfc2544Report {
        tests: request.tests.clone(),
        settings: request.settings.clone(),
        latency_method: String::new(),
        throughput: Vec::new(),
        latency: Vec::new(),
        loss: Vec::new(),
        back_to_back: Vec::new(),
        recovery: Vec::new(),
        trials: 0,
        elapsed_ns: 0,
        interrupted: false,
        failure: None,
    };
    let wants = |b: Benchmark| request.tests.contains(&b);
    // The latency and system recovery need each size's throughput: it is searched even when
    // not asked for.
    if wants(Benchmark::Throughput) || wants(Benchmark::Latency) || wants(Benchmark::Recovery) {
        for (i, size) in sizes.iter().enumerate() {
            if session.stopped() {
                break;
            }
            session.trials_after = session.estimate_after(Benchmark::Throughput, sizes.len() - i);
            let Some(t) = session.throughput(i, size)? else {
                break;
            };
            session.search_trials.push(t.trials.len());
            report.throughput.push(t);
        }
        if !wants(Benchmark::Throughput) {
            // Searched for the latency's sake: kept, since its trials ran.
            report.tests.insert(0, Benchmark::Throughput);
        }
    }
    if wants(Benchmark::Latency) {
        for (i, t) in report.throughput.iter().enumerate() {
            if session.stopped() {
                break;
            }
            session.trials_after = session.estimate_after(Benchmark::Latency, sizes.len() - i);
            let Some(l) = session.latency(t)? else {
                break;
            };
            report.latency.push(l);
        }
    }
    if wants(Benchmark::Loss) {
        for (i, size) in sizes.iter().enumerate() {
            if session.stopped() {
                break;
            }
            session.trials_after = session.estimate_after(Benchmark::Loss, sizes.len() - i);
            let Some(c) = session.loss_curve(i, size)? else {
                break;
            };
            report.loss.push(c);
        }
    }
    if wants(Benchmark::BackToBack) {
        for (i, size) in sizes.iter().enumerate() {
            if session.stopped() {
                break;
            }
            session.trials_after = session.estimate_after(Benchmark::BackToBack, sizes.len() - i);
            let throughput = report
                .throughput
                .iter()
                .find(|t| t.size.size == size.size)
                .and_then(|t| t.ndr())
                .map(|r| r.pps);
            let Some(b) = session.back_to_back(i, size, throughput)? else {
                break;
            };
            report.back_to_back.push(b);
        }
    }
    if wants(Benchmark::Recovery) {
        for t in &report.throughput {
            if session.stopped() {
                break;
            }
            let Some(r) = session.recovery(t)? else {
                break;
            };
            report.recovery.push(r);
        }
    }
    report.latency_method = latency_method(&report);
    report.trials = session.trials_done;
    report.elapsed_ns = session.started.elapsed().as_nanos() as u64;
    report.failure = session.trials.failure();
    report.interrupted = session.trials.stopped();
    Ok(report)
}

/// The size's mean length and line rate, from the flow the trials will send (which also
/// checks the size text with the model's own messages).
fn frame_size(request: &Rfc2544Request, size: &str) -> Result<FrameSize, ControlError> {
    let mut flow = request.flow.clone();
    flow.flow.size = size.to_string();
    flow.flow.count = Some(1);
    let (scenario, _) = flow.scenario(&request.lab_prefix, false)?;
    let mean_bytes = scenario
        .flows
        .first()
        .map(|f| f.size.mean())
        .ok_or_else(|| ControlError::BadInput(format!("frame size `{size}`: no flow")))?;
    Ok(FrameSize {
        size: size.to_string(),
        mean_bytes,
        line_rate_pps: request.settings.link_bps / ((mean_bytes + 20.0) * 8.0),
    })
}

fn latency_method(report: &Rfc2544Report) -> String {
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

impl<T: Trials> Session<'_, T> {
    fn stopped(&self) -> bool {
        self.trials.stopped()
    }

    /// Runs one trial and counts it for the time left.
    fn trial(
        &mut self,
        benchmark: Benchmark,
        size: &FrameSize,
        offer: Offer,
        what: &str,
        progress: String,
    ) -> Result<Option<TrialOutcome>, T::Error> {
        let trial = TrialAsk {
            benchmark,
            size,
            offer,
        };
        let label = Label {
            what: what.to_string(),
            progress,
        };
        let outcome = self.trials.run_trial(trial, label)?;
        if let Some(o) = &outcome {
            if !o.result.interrupted {
                self.trials_done += 1;
                self.wall_done_ns += o.result.wall_ns;
            }
        }
        Ok(outcome)
    }

    /// The mean wall time of a trial so far, or what one is expected to take.
    fn trial_wall_ns(&self) -> u64 {
        if self.trials_done > 0 {
            self.wall_done_ns / self.trials_done as u64
        } else {
            let r = self.request;
            r.settings.trial_ns + r.settings.wait_ns + r.settings.settle_ns + 200_000_000
        }
    }

    /// Trials expected in `benchmark` for `sizes_left` sizes and in the benchmarks after it.
    fn estimate_after(&self, benchmark: Benchmark, sizes_left: usize) -> usize {
        let r = self.request;
        let per_size = |b: Benchmark| match b {
            Benchmark::Throughput => {
                search_trials_per_size(&self.search_trials, r.settings.tolerances.len() > 1)
            }
            Benchmark::Latency => r.latency_loads.len() * r.latency_trials as usize,
            // Down to the knee and two clean steps; a third of the steps is typical.
            Benchmark::Loss => ((1.0 / r.loss_step) / 3.0).ceil() as usize + 2,
            Benchmark::BackToBack => 6 * r.b2b_searches as usize,
            Benchmark::Recovery => 1,
        };
        let sizes = r.sizes.len();
        Benchmark::ALL
            .iter()
            .filter(|&&b| b > benchmark && r.tests.contains(&b))
            .map(|&b| per_size(b) * sizes)
            .sum::<usize>()
            + per_size(benchmark) * sizes_left.saturating_sub(1)
    }

    fn progress(&self, trials_left_here: usize) -> String {
        let left = (trials_left_here + self.trials_after) as u64 * self.trial_wall_ns();
        format!(
            "{} trials done, about {} left",
            self.trials_done,
            duration_text(left.div_ceil(1_000_000_000) * 1_000_000_000)
        )
    }

    /// The size's highest rate and the trials that found it, the last at that rate (run
    /// once, shared by the throughput and the loss curve).
    fn max_trial(
        &mut self,
        index: usize,
        size: &FrameSize,
        benchmark: Benchmark,
    ) -> Result<Option<MaxTrials>, T::Error> {
        if let Some(m) = &self.max_trials[index] {
            return Ok(Some(m.clone()));
        }
        let line = size.line_rate_pps;
        let label = |what: String| format!("{} {} B: trial at {what}", benchmark.name(), size.size);
        let mut ran = Vec::new();
        let (max_pps, source) = match self.request.max_rate {
            Some(rate) => {
                let pps = rate.packets_per_sec(size.mean_bytes);
                if pps > line * 1.000_001 {
                    return Err(ControlError::BadInput(format!(
                        "the highest rate {} is above the {} link's line rate for {} B frames \
                         ({}): give a lower --max-rate or a faster --link",
                        pps_text(pps),
                        crate::text::bps_text(self.request.settings.link_bps),
                        size.size,
                        pps_text(line)
                    ))
                    .into());
                }
                let l = label(format!("the highest rate given, {}", pps_text(pps)));
                let progress = self.progress(4);
                let Some(t) = self.trial(benchmark, size, Offer::Paced(pps), &l, progress)? else {
                    return Ok(None);
                };
                ran.push(t.result);
                (pps, MaxSource::Given)
            }
            None => {
                let l = label("the generator's most (unpaced)".into());
                let progress = self.progress(4);
                let Some(t) = self.trial(benchmark, size, Offer::Unpaced, &l, progress)? else {
                    return Ok(None);
                };
                let offered = t.result.offered_pps;
                ran.push(t.result);
                if offered >= line && !self.stopped() {
                    // Faster than the line: the line rate, paced, is the maximum.
                    let l = label(format!("line rate, {}", pps_text(line)));
                    let progress = self.progress(4);
                    let Some(t) = self.trial(benchmark, size, Offer::Paced(line), &l, progress)?
                    else {
                        return Ok(None);
                    };
                    ran.push(t.result);
                    (line, MaxSource::LineRate)
                } else {
                    (offered, MaxSource::Generator)
                }
            }
        };
        let m = MaxTrials {
            max_pps,
            source,
            trials: ran,
        };
        if !self.stopped() && max_pps > 0.0 {
            self.max_trials[index] = Some(m.clone());
        }
        Ok(Some(m))
    }

    /// RFC 2544 §26.1 for one size: the highest rate with loss at or below each tolerance.
    fn throughput(
        &mut self,
        index: usize,
        size: &FrameSize,
    ) -> Result<Option<ThroughputResult>, T::Error> {
        let started = Instant::now();
        let Some(MaxTrials {
            max_pps,
            source: max_source,
            mut trials,
        }) = self.max_trial(index, size, Benchmark::Throughput)?
        else {
            return Ok(None);
        };
        let r = self.request;
        let Some(first) = trials.last().cloned() else {
            return Ok(None);
        };
        let mut result = ThroughputResult {
            size: size.clone(),
            max_pps,
            max_source,
            outcomes: Vec::new(),
            trials: Vec::new(),
            elapsed_ns: 0,
        };
        if first.interrupted || max_pps <= 0.0 {
            result.trials = trials;
            return Ok(Some(result));
        }
        let mut search = ThroughputSearch::new(SearchSpec {
            max_rate: max_pps,
            min_rate: (max_pps / 1000.0).max(1.0).min(max_pps / 2.0),
            resolution: 0.0,
            relative_resolution: r.settings.relative_resolution,
            tolerances: r.settings.tolerances.clone(),
            method: r.settings.search,
        })
        .map_err(ControlError::BadInput)?;
        search.record(Trial {
            rate: max_pps,
            loss_ratio: first.loss_ratio,
        });
        let mut stopped_early = false;
        while let Some(rate) = search.next_rate() {
            if trials.len() >= r.max_trials {
                stopped_early = true;
                break;
            }
            let left = search_trials_left(&search);
            let label = format!(
                "throughput {} B, trial {}: {}",
                size.size,
                trials.len() + 1,
                pps_text(rate),
            );
            let progress = self.progress(left);
            let Some(t) = self.trial(
                Benchmark::Throughput,
                size,
                Offer::Paced(rate),
                &label,
                progress,
            )?
            else {
                break;
            };
            let t = t.result;
            trials.push(t.clone());
            if t.interrupted {
                break;
            }
            if t.offered_as_asked() {
                search.record(Trial {
                    rate,
                    loss_ratio: t.loss_ratio,
                });
            } else if t.frames_lost > 0 {
                // Less went out than asked, and the DUT lost frames of it: overloaded at what
                // was offered (a DUT that cannot keep up may also slow the sender, as a veth
                // path does). The failure counts at the rate offered.
                search.record(Trial {
                    rate: t.offered_pps,
                    loss_ratio: t.loss_ratio,
                });
            } else {
                // The sender fell short and nothing was lost: what it offered is the most
                // this port takes, and the trial passes at that rate.
                search.spec.max_rate = search.spec.max_rate.min(t.offered_pps);
                result.max_pps = search.spec.max_rate;
                result.max_source = MaxSource::Generator;
                search.record(Trial {
                    rate: t.offered_pps,
                    loss_ratio: t.loss_ratio,
                });
            }
        }
        result.outcomes = search
            .brackets
            .iter()
            .map(|b| SearchOutcome {
                tolerance: b.tolerance,
                rate: b.passed.map(|p| size.figures(p)),
                lowest_failed_pps: b.failed,
                resolved: !stopped_early && !self.stopped(),
            })
            .collect();
        result.trials = trials;
        result.elapsed_ns = started.elapsed().as_nanos() as u64;
        Ok(Some(result))
    }

    /// RFC 2544 §26.2 for one size: every frame's latency at loads relative to the
    /// throughput, trials at one load merged.
    fn latency(&mut self, t: &ThroughputResult) -> Result<Option<LatencyResult>, T::Error> {
        let r = self.request;
        let size = &t.size;
        let throughput = t.ndr().map(|n| n.pps);
        let mut result = LatencyResult {
            size: size.clone(),
            throughput_pps: throughput,
            points: Vec::new(),
            note: None,
        };
        let Some(throughput) = throughput else {
            result.note = Some("no rate passed without loss: no throughput to load".into());
            return Ok(Some(result));
        };
        let runs = r.latency_loads.len() * r.latency_trials as usize;
        let mut done = 0;
        for &load in &r.latency_loads {
            let pps = throughput * load;
            let mut merged: Option<FlowLatency> = None;
            let mut point = LatencyPoint {
                load_pct: load * 100.0,
                rate: size.figures(pps),
                latency: None,
                frames_tx: 0,
                frames_lost: 0,
                trials: Vec::new(),
            };
            for k in 0..r.latency_trials {
                let label = format!(
                    "latency {} B at {:.0} % of the throughput, {}{}",
                    size.size,
                    load * 100.0,
                    pps_text(pps),
                    if r.latency_trials > 1 {
                        format!(", trial {} of {}", k + 1, r.latency_trials)
                    } else {
                        String::new()
                    },
                );
                let progress = self.progress(runs - done);
                let Some(outcome) = self.trial(
                    Benchmark::Latency,
                    size,
                    Offer::Paced(pps),
                    &label,
                    progress,
                )?
                else {
                    break;
                };
                done += 1;
                if !outcome.result.interrupted {
                    point.frames_tx += outcome.result.frames_tx;
                    point.frames_lost += outcome.result.frames_lost;
                    if let Some(l) = &outcome.latency {
                        merged.get_or_insert_with(Default::default).add(l);
                    }
                }
                point.trials.push(outcome.result);
                if self.stopped() {
                    break;
                }
            }
            point.latency = merged
                .as_ref()
                .and_then(|m| LatencyStats::from_histogram(m.histogram()));
            if !point.trials.is_empty() {
                result.points.push(point);
            }
            if self.stopped() {
                break;
            }
        }
        Ok(Some(result))
    }

    /// RFC 2544 §26.4 with RFC 9004's updates for one size: the longest burst at the
    /// highest rate the DUT forwards without loss, searched `b2b_searches` times and
    /// averaged, and the DUT buffer it implies.
    fn back_to_back(
        &mut self,
        index: usize,
        size: &FrameSize,
        throughput_pps: Option<f64>,
    ) -> Result<Option<BackToBackResult>, T::Error> {
        let Some(max) = self.max_trial(index, size, Benchmark::BackToBack)? else {
            return Ok(None);
        };
        let r = self.request;
        let max_frames = ((max.max_pps * r.b2b_max_ns as f64 / 1e9).ceil() as u64).max(2);
        let mut result = BackToBackResult {
            size: size.clone(),
            max_frames,
            burst_pps: 0.0,
            searches: Vec::new(),
            mean_frames: None,
            implied_buffer_ns: None,
            throughput_pps,
            buffered_frames: None,
            buffer_drain_ns: None,
        };
        let mut rates = Vec::new();
        for k in 0..r.b2b_searches {
            if self.stopped() {
                break;
            }
            let mut search = ThroughputSearch::new(SearchSpec {
                max_rate: max_frames as f64,
                min_rate: 1.0,
                resolution: 1.0,
                relative_resolution: r.settings.relative_resolution,
                tolerances: vec![0.0],
                method: r.settings.search,
            })
            .map_err(ControlError::BadInput)?;
            let mut trials = Vec::new();
            let mut stopped_early = false;
            while let Some(frames) = search.next_rate() {
                let frames = frames.round().max(1.0) as u64;
                if trials.len() >= r.max_trials {
                    stopped_early = true;
                    break;
                }
                let label = format!(
                    "back-to-back {} B, search {} of {}, trial {}: a burst of {frames} frames",
                    size.size,
                    k + 1,
                    r.b2b_searches,
                    trials.len() + 1,
                );
                let progress = self.progress(search_trials_left(&search));
                let Some(t) = self.trial(
                    Benchmark::BackToBack,
                    size,
                    Offer::Burst(frames),
                    &label,
                    progress,
                )?
                else {
                    stopped_early = true;
                    break;
                };
                let t = t.result;
                trials.push(t.clone());
                if t.interrupted {
                    stopped_early = true;
                    break;
                }
                if t.offered_pps > 0.0 {
                    rates.push(t.offered_pps);
                }
                search.record(Trial {
                    rate: frames as f64,
                    loss_ratio: t.loss_ratio,
                });
            }
            let b = search.brackets[0];
            result.searches.push(BurstSearch {
                frames: b.passed.map(|f| f as u64),
                lowest_failed: b.failed.map(|f| f as u64),
                resolved: !stopped_early,
                trials,
            });
        }
        rates.sort_by(f64::total_cmp);
        result.burst_pps = rates.get(rates.len() / 2).copied().unwrap_or(max.max_pps);
        let found: Vec<f64> = result
            .searches
            .iter()
            .filter(|s| s.resolved)
            .filter_map(|s| s.frames.map(|f| f as f64))
            .collect();
        if !found.is_empty() && result.burst_pps > 0.0 {
            let mean = found.iter().sum::<f64>() / found.len() as f64;
            let rate = result.burst_pps;
            result.mean_frames = Some(mean);
            result.implied_buffer_ns = Some(mean / rate * 1e9);
            if let Some(t) = throughput_pps.filter(|&t| t > 0.0 && t < rate) {
                let buffered = mean * (1.0 - t / rate);
                result.buffered_frames = Some(buffered);
                result.buffer_drain_ns = Some(buffered / t * 1e9);
            }
        }
        Ok(Some(result))
    }

    /// RFC 2544 §26.5 for one size: 110 % of the throughput for a while, then 50 %; the
    /// time from the reduction until frames stop being lost, to a slice's resolution.
    fn recovery(&mut self, t: &ThroughputResult) -> Result<Option<RecoveryResult>, T::Error> {
        let r = self.request;
        let mut result = RecoveryResult {
            size: t.size.clone(),
            throughput_pps: t.ndr().map(|n| n.pps),
            plan: None,
            outcome: None,
            recovery_ns: None,
            note: None,
        };
        let Some(throughput) = result.throughput_pps else {
            result.note = Some("no rate passed without loss: no throughput to overload".into());
            return Ok(Some(result));
        };
        let overload_pps = 1.1 * throughput;
        if overload_pps > t.max_pps * 1.000_001 {
            result.note = Some(format!(
                "110 % of the throughput ({}) is above the highest rate the port takes ({}): \
                 the DUT cannot be overloaded from here",
                pps_text(overload_pps),
                pps_text(t.max_pps)
            ));
            return Ok(Some(result));
        }
        let plan = RecoveryPlan {
            overload_pps,
            overload_ns: r.recovery_overload_ns,
            recovery_pps: 0.5 * throughput,
            slice_ns: r.recovery_slice_ns,
            slices: (r.recovery_window_ns / r.recovery_slice_ns).max(1),
        };
        result.plan = Some(plan);
        let what = format!(
            "recovery {} B: {} for {}, then {} watched for {}",
            t.size.size,
            pps_text(plan.overload_pps),
            duration_text(plan.overload_ns),
            pps_text(plan.recovery_pps),
            duration_text(plan.slices * plan.slice_ns),
        );
        let label = Label {
            what,
            progress: self.progress(1),
        };
        let Some(outcome) = self.trials.run_recovery(&t.size, &plan, label)? else {
            return Ok(None);
        };
        self.trials_done += 1;
        self.wall_done_ns += outcome.wall_ns;
        if outcome.overload.1 == 0 {
            result.note = Some(
                "nothing was lost at 110 % of the throughput: the DUT was not overloaded, \
                 there is no recovery to time (a longer overload fills deeper buffers)"
                    .into(),
            );
        } else {
            let last_lossy = outcome.slices.iter().rposition(|&(_, lost)| lost > 0);
            result.recovery_ns = match last_lossy {
                None => Some(0),
                Some(k) if k + 1 == outcome.slices.len() => {
                    result.note = Some(format!(
                        "still losing frames at the end of the {} window: not recovered",
                        duration_text(plan.slices * plan.slice_ns)
                    ));
                    None
                }
                Some(k) => Some((k as u64 + 1) * plan.slice_ns),
            };
        }
        result.outcome = Some(outcome);
        Ok(Some(result))
    }

    /// RFC 2544 §26.3 for one size: loss from the highest rate down in steps until two
    /// steps in a row lose nothing.
    fn loss_curve(
        &mut self,
        index: usize,
        size: &FrameSize,
    ) -> Result<Option<LossCurve>, T::Error> {
        let Some(MaxTrials {
            max_pps,
            source: max_source,
            trials,
        }) = self.max_trial(index, size, Benchmark::Loss)?
        else {
            return Ok(None);
        };
        let Some(first) = trials.last().cloned() else {
            return Ok(None);
        };
        let step = self.request.loss_step;
        let point = |load: f64, trial: TrialResult| LossPoint {
            load_pct: load * 100.0,
            rate: size.figures(trial.offered_pps),
            loss_ratio: trial.loss_ratio,
            trial,
        };
        let mut curve = LossCurve {
            size: size.clone(),
            max_pps,
            max_source,
            points: vec![point(1.0, first.clone())],
        };
        let mut clean_in_a_row = usize::from(first.frames_lost == 0);
        let mut k = 1;
        while clean_in_a_row < 2 && !first.interrupted {
            let load = 1.0 - step * k as f64;
            if load <= 1e-9 {
                break;
            }
            let pps = max_pps * load;
            let steps_left = (load / step).ceil() as usize;
            let label = format!(
                "loss {} B at {:.0} % of the highest rate, {}",
                size.size,
                load * 100.0,
                pps_text(pps),
            );
            let progress = self.progress(steps_left.min(3));
            let Some(t) = self.trial(Benchmark::Loss, size, Offer::Paced(pps), &label, progress)?
            else {
                break;
            };
            let interrupted = t.result.interrupted;
            clean_in_a_row = if t.result.frames_lost == 0 {
                clean_in_a_row + 1
            } else {
                0
            };
            curve.points.push(point(load, t.result));
            if interrupted {
                break;
            }
            k += 1;
        }
        Ok(Some(curve))
    }
}

/// Trials run by the engine through a front end's runner.
struct EngineTrials<'a, R: TrialRunner> {
    request: &'a Rfc2544Request,
    stop: &'a AtomicBool,
    runner: &'a mut R,
    failure: Option<String>,
}

impl<R: TrialRunner> EngineTrials<'_, R> {
    /// The scenario of a trial's `flow`, its port as fast as the link: the link, not the
    /// model's default port speed, says what the line rate is.
    fn scenario(&self, flow: &OneFlow) -> Result<(Scenario, Pacing), ControlError> {
        let (mut scenario, pacing) = flow.scenario(&self.request.lab_prefix, false)?;
        if let Some(p) = scenario.ports.first_mut() {
            p.speed_bps = self.request.settings.link_bps as u64;
        }
        Ok((scenario, pacing))
    }

    /// Runs a measured trial (not learning frames); None when a stop cut it short.
    fn run_measured(
        &mut self,
        label: Label,
        (scenario, pacing): (Scenario, Pacing),
    ) -> Result<Option<(Scenario, RunReport)>, R::Error> {
        let ran = self.runner.run(TrialRun {
            what: label.what,
            progress: label.progress,
            scenario,
            pacing,
            drain_ns: self.request.settings.wait_ns,
            learning: false,
        });
        unless_stopped(ran, || self.stopped())
    }
}

impl<R: TrialRunner> Trials for EngineTrials<'_, R> {
    type Error = R::Error;

    fn stopped(&self) -> bool {
        self.failure.is_some() || self.stop.load(Ordering::Relaxed)
    }

    fn failure(&self) -> Option<String> {
        self.failure.clone()
    }

    fn run_recovery(
        &mut self,
        size: &FrameSize,
        plan: &RecoveryPlan,
        label: Label,
    ) -> Result<Option<RecoveryOutcome>, R::Error> {
        if self.stopped() {
            return Ok(None);
        }
        let started = Instant::now();
        let r = self.request;
        let mut flow = r.flow.clone();
        flow.flow.size = size.size.clone();
        flow.flow.rate = format!("{:.3}", plan.overload_pps);
        flow.flow.count = Some(plan.overload_frames());
        let (mut scenario, pacing) = self.scenario(&flow)?;
        // Each slice of the lower load is a flow of its own, starting where the one before
        // ends: its loss says whether the DUT still dropped frames then.
        let Some(template) = scenario.flows.first().cloned() else {
            return Err(ControlError::Runtime("the recovery flow is missing".into()).into());
        };
        scenario.flows[0].name = "overload".into();
        for k in 0..plan.slices {
            let mut slice = template.clone();
            slice.id = u16::try_from(k + 1).map_err(|_| {
                ControlError::BadInput("too many recovery slices for one run".into())
            })?;
            slice.name = format!("slice{k}");
            slice.schedule.rate = Rate::Pps(plan.recovery_pps);
            slice.schedule.duration = strobe_timing::Duration::Packets(plan.slice_frames());
            slice.schedule.start_delay_ns = plan.overload_ns + k * plan.slice_ns;
            scenario.flows.push(slice);
        }
        let what = label.what.clone();
        let Some((scenario, run)) = self.run_measured(label, (scenario, pacing))? else {
            return Ok(None);
        };
        if self.stopped() {
            return Ok(None);
        }
        let results = Results::new(&scenario, &run, None);
        if !results.failures.is_empty() {
            self.failure = Some(format!("{what}: {}", results.failures.join("; ")));
            return Ok(None);
        }
        let counts =
            |f: &crate::results::FlowResult| (f.frames_tx.unwrap_or(0), f.loss.unwrap_or(0));
        let mut flows = results.flows.iter().map(counts);
        let overload = flows.next().unwrap_or((0, 0));
        sleep_unless_stopped(r.settings.settle_ns, self.stop);
        Ok(Some(RecoveryOutcome {
            overload,
            slices: flows.collect(),
            wall_ns: started.elapsed().as_nanos() as u64,
            warnings: results.warnings.clone(),
        }))
    }

    /// Runs one trial: learning frames, the traffic, the wait, the settle time. None when
    /// stopped before it began.
    fn run_trial(
        &mut self,
        trial: TrialAsk<'_>,
        label: Label,
    ) -> Result<Option<TrialOutcome>, R::Error> {
        if self.stopped() {
            return Ok(None);
        }
        let started = Instant::now();
        let r = self.request;
        if r.settings.learning_frames > 0 {
            let (scenario, pacing) =
                learning_flow(r, &trial.size.size)?.scenario(&r.lab_prefix, false)?;
            let learned = self.runner.run(TrialRun {
                what: format!(
                    "learning: {} frames from the receive port",
                    r.settings.learning_frames
                ),
                progress: String::new(),
                scenario,
                pacing,
                drain_ns: 0,
                learning: true,
            });
            // A stop that comes as a run starts may fail it: the stop is what happened.
            if self.stopped() {
                return Ok(None);
            }
            learned?;
        }
        let mut flow = r.flow.clone();
        flow.flow.size = trial.size.size.clone();
        match trial.offer {
            Offer::Paced(pps) => {
                flow.flow.rate = format!("{pps:.3}");
                flow.flow.count =
                    Some(((pps * r.settings.trial_ns as f64 / 1e9).round() as u64).max(2));
            }
            Offer::Unpaced => {
                flow.flow.rate = "max".into();
                flow.flow.duration = Some(format!("{}ns", r.settings.trial_ns));
            }
            Offer::Burst(frames) => {
                flow.flow.rate = "max".into();
                flow.flow.count = Some(frames);
            }
        }
        let scenario = self.scenario(&flow)?;
        let what = label.what.clone();
        let Some((scenario, run)) = self.run_measured(label, scenario)? else {
            return Ok(None);
        };
        let results = Results::new(&scenario, &run, None);
        let flow = results.flows.first();
        let sent = flow.and_then(|f| f.frames_tx).unwrap_or(0);
        if !results.failures.is_empty() || (sent == 0 && !self.stopped()) {
            let why = if results.failures.is_empty() {
                "no frame was sent".to_string()
            } else {
                results.failures.join("; ")
            };
            self.failure = Some(format!("{what}: the trial failed: {why}"));
        }
        let interrupted = self.stopped();
        if !interrupted {
            sleep_unless_stopped(r.settings.settle_ns, self.stop);
        }
        let get = |f: fn(&crate::results::FlowResult) -> Option<u64>| flow.and_then(f).unwrap_or(0);
        let frames_tx = get(|f| f.frames_tx);
        let frames_lost = get(|f| f.loss);
        // Real time from the first hand-over to the last: what the generator offered (the
        // schedule's own span would hide a sender that fell behind).
        let span_ns = results.ports.first().map_or(0, |p| p.elapsed_ns);
        let offered_pps = match trial.offer {
            _ if frames_tx >= 2 && span_ns > 0 => (frames_tx - 1) as f64 * 1e9 / span_ns as f64,
            Offer::Paced(pps) => pps,
            Offer::Unpaced | Offer::Burst(_) => 0.0,
        };
        let mut warnings = results.warnings.clone();
        if flow.is_some_and(|f| f.suspect) {
            warnings.push(
                "more unique frames arrived than were sent: this trial's counts are suspect".into(),
            );
        }
        let result = TrialResult {
            benchmark: trial.benchmark,
            size: trial.size.size.clone(),
            asked_pps: trial.offer.asked_pps(),
            offered_pps,
            frames_tx,
            frames_rx: get(|f| f.frames_rx_unique),
            frames_lost,
            loss_ratio: if frames_tx > 0 {
                frames_lost as f64 / frames_tx as f64
            } else {
                0.0
            },
            reordered: get(|f| f.reordered),
            duplicates: get(|f| f.duplicates),
            latency: flow.and_then(|f| f.latency.as_ref()).map(|l| l.raw),
            timestamps: flow
                .and_then(|f| f.latency.as_ref())
                .map(|l| l.timestamps.clone()),
            wall_ns: started.elapsed().as_nanos() as u64,
            interrupted,
            warnings,
            failures: results.failures.clone(),
        };
        self.runner.finished(&result);
        let latency = run
            .rx_flows
            .first()
            .and_then(|f| f.as_ref())
            .and_then(|f| f.latency.clone());
        Ok(Some(TrialOutcome { result, latency }))
    }
}

/// Trials a size's throughput search is expected to take (the trial at the maximum
/// included): the mean of the sizes searched so far (`done`), or before any, what the aimed
/// search takes through the lab's shaper — 3-6 for the NDR alone (BENCHMARKS.md §10), 9-10
/// with the PDR beside it (a user's run of 256, 512 and 1518 B through tbf:50mbit).
fn search_trials_per_size(done: &[usize], with_pdr: bool) -> usize {
    match (done.len(), with_pdr) {
        (0, true) => 10,
        (0, false) => 6,
        (n, _) => done.iter().sum::<usize>().div_ceil(n),
    }
}

/// About how many trials a search still needs: the aimed trial and its confirmation for the
/// widest undecided interval, or halvings when it is wide.
fn search_trials_left(search: &ThroughputSearch) -> usize {
    search
        .brackets
        .iter()
        .filter_map(|b| {
            let hi = b.failed?;
            let lo = b.passed.unwrap_or(search.spec.min_rate);
            let goal = search.spec.width_goal(hi);
            (hi - lo > goal).then(|| ((hi - lo) / goal).log2().ceil().clamp(1.0, 3.0) as usize)
        })
        .sum::<usize>()
        .max(1)
}

/// Learning frames (RFC 2544 §23): from the receive port back towards the transmit port,
/// so that a switching DUT knows where the test frames go before they come.
fn learning_flow(r: &Rfc2544Request, size: &str) -> Result<OneFlow, ControlError> {
    let rx = r.flow.rx.clone().unwrap_or_default();
    let udp = r.flow.flow.udp.as_deref().unwrap_or_default();
    let reversed = reverse_udp(udp).ok_or_else(|| {
        ControlError::BadInput(format!(
            "the UDP flow `{udp}`: give it as SRC:PORT-DST:PORT (learning frames go back from \
             DST to SRC)"
        ))
    })?;
    let mut flow = r.flow.clone();
    flow.rx = None;
    flow.flow.port = rx;
    flow.flow.udp = Some(reversed);
    flow.flow.no_trailer = true;
    std::mem::swap(&mut flow.flow.src_mac, &mut flow.flow.dst_mac);
    flow.flow.size = size.to_string();
    flow.flow.rate = format!("{LEARNING_PPS}");
    flow.flow.count = Some(r.settings.learning_frames);
    flow.flow.duration = None;
    Ok(flow)
}

/// `A:1-B:2` → `B:2-A:1` (IPv6 addresses in brackets hold no `-`).
fn reverse_udp(udp: &str) -> Option<String> {
    let (src, dst) = udp.split_once('-')?;
    (!src.is_empty() && !dst.is_empty()).then(|| format!("{dst}-{src}"))
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

impl MaxSource {
    pub fn describe(self) -> &'static str {
        match self {
            MaxSource::LineRate => "line rate",
            MaxSource::Given => "given",
            MaxSource::Generator => "the most the port took",
        }
    }
}

impl Rfc2544Report {
    /// What the HTML report draws.
    pub fn figures(&self) -> strobe_analyze::rfc2544_plot::Rfc2544Figures {
        use strobe_analyze::rfc2544_plot::{LatencyFigure, LossFigure, ThroughputFigure};
        let mut notes = vec![format!(
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
        )];
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
        use std::fmt::Write as _;
        let mut out = String::from(
            "benchmark,size,load_pct,asked_pps,offered_pps,frames_tx,frames_rx,frames_lost,\
             loss_pct,reordered,duplicates,latency_min_ns,latency_mean_ns,latency_p50_ns,\
             latency_p99_ns,latency_p99_9_ns,latency_max_ns,interrupted\n",
        );
        let mut row = |t: &TrialResult, load: Option<f64>| {
            let cell = |v: Option<f64>| v.map(|x| format!("{x:.1}")).unwrap_or_default();
            let [min, mean, p50, p99, p99_9, max] = latency_columns(t.latency).map(cell);
            let _ = writeln!(
                out,
                "{},{},{},{},{:.3},{},{},{},{:.6},{},{},{},{},{},{},{},{},{}",
                t.benchmark.name(),
                t.size,
                cell(load),
                t.asked_pps.map(|a| format!("{a:.3}")).unwrap_or_default(),
                t.offered_pps,
                t.frames_tx,
                t.frames_rx,
                t.frames_lost,
                t.loss_ratio * 100.0,
                t.reordered,
                t.duplicates,
                min,
                mean,
                p50,
                p99,
                p99_9,
                max,
                t.interrupted
            );
        };
        for t in &self.throughput {
            for trial in &t.trials {
                row(trial, None);
            }
        }
        for l in &self.latency {
            for p in &l.points {
                for trial in &p.trials {
                    row(trial, Some(p.load_pct));
                }
            }
        }
        for c in &self.loss {
            for p in &c.points {
                row(&p.trial, Some(p.load_pct));
            }
        }
        for b in &self.back_to_back {
            for trial in b.searches.iter().flat_map(|s| &s.trials) {
                row(trial, None);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
