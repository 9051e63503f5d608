//! The benchmarks run one after another, trial by trial: what they need of a trial
//! ([`Trials`]), the session that runs them in RFC order and counts the time left.
//! Each benchmark's own steps are in its file (throughput, latency, loss, back-to-back,
//! recovery).

use std::time::Instant;

use strobe_engine::latency::FlowLatency;

use super::report::{
    latency_method, FrameSize, RecoveryOutcome, RecoveryPlan, Rfc2544Report, TrialResult,
};
use super::request::{Benchmark, Rfc2544Request};
use super::throughput::MaxTrials;
use crate::text::duration_text;
use crate::ControlError;

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
/// line's [`super::TrialRun::what`] and [`super::TrialRun::progress`]).
#[derive(Clone, Debug)]
pub(crate) struct Label {
    pub what: String,
    pub progress: String,
}

/// What the benchmarks need of a trial: the engine's is `EngineTrials` (in `trials`); the
/// unit tests use a model of a DUT.
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

/// Runs the benchmarks one after another.
pub(super) struct Session<'a, T: Trials> {
    pub(super) request: &'a Rfc2544Request,
    pub(super) trials: &'a mut T,
    pub(super) started: Instant,
    pub(super) trials_done: usize,
    pub(super) wall_done_ns: u64,
    /// Each size's trials at the highest rate, shared by the throughput and the loss curve.
    pub(super) max_trials: Vec<Option<MaxTrials>>,
    /// Trials still to come in the benchmarks after the current one (for the time left).
    pub(super) trials_after: usize,
    /// The throughput search's trials for each size searched so far (for the time left).
    pub(super) search_trials: Vec<usize>,
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
        device_under_test: None,
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

impl<T: Trials> Session<'_, T> {
    pub(super) fn stopped(&self) -> bool {
        self.trials.stopped()
    }

    /// Runs one trial and counts it for the time left.
    pub(super) fn trial(
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
    pub(super) fn trial_wall_ns(&self) -> u64 {
        if self.trials_done > 0 {
            self.wall_done_ns / self.trials_done as u64
        } else {
            let r = self.request;
            r.settings.trial_ns + r.settings.wait_ns + r.settings.settle_ns + 200_000_000
        }
    }

    /// Trials expected in `benchmark` for `sizes_left` sizes and in the benchmarks after it.
    pub(super) fn estimate_after(&self, benchmark: Benchmark, sizes_left: usize) -> usize {
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

    pub(super) fn progress(&self, trials_left_here: usize) -> String {
        let left = (trials_left_here + self.trials_after) as u64 * self.trial_wall_ns();
        format!(
            "{} trials done, about {} left",
            self.trials_done,
            duration_text(left.div_ceil(1_000_000_000) * 1_000_000_000)
        )
    }
}

/// Trials a size's throughput search is expected to take (the trial at the maximum
/// included): the mean of the sizes searched so far (`done`), or before any, what the aimed
/// search takes through the lab's shaper — 3-6 for the NDR alone (BENCHMARKS.md §10), 9-10
/// with the PDR beside it (a user's run of 256, 512 and 1518 B through tbf:50mbit).
pub(super) fn search_trials_per_size(done: &[usize], with_pdr: bool) -> usize {
    match (done.len(), with_pdr) {
        (0, true) => 10,
        (0, false) => 6,
        (n, _) => done.iter().sum::<usize>().div_ceil(n),
    }
}
