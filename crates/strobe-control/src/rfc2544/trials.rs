//! Trials run by the engine: a front end runs each trial's scenario its own way (status
//! lines, a server's run) through a [`TrialRunner`]; [`EngineTrials`] makes the scenarios
//! (learning frames, then the test flow at the trial's rate) and reads what came back.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use strobe_engine::RunReport;
use strobe_model::{warning_texts, Scenario, Warning};
use strobe_timing::Rate;

use super::flows::SizedFlow;
use super::report::{FrameSize, RecoveryOutcome, RecoveryPlan, Rfc2544Report, TrialResult};
use super::request::Rfc2544Request;
use super::session::{run_sizes, Label, Offer, TrialAsk, TrialOutcome, Trials};
use crate::methodology::{sleep_unless_stopped, unless_stopped};
use crate::plan::Pacing;
use crate::{ControlError, Results};

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

/// A runner that notes the device under test of the first trial that ran on a lab, for a
/// methodology's report to name.
pub struct NotingDut<'a, R> {
    inner: &'a mut R,
    pub device_under_test: Option<strobe_model::DeviceUnderTest>,
}

impl<'a, R> NotingDut<'a, R> {
    pub fn new(inner: &'a mut R) -> Self {
        NotingDut {
            inner,
            device_under_test: None,
        }
    }

    /// Notes `report`'s device under test unless one is noted already.
    fn note(&mut self, report: &RunReport) {
        if self.device_under_test.is_none() {
            self.device_under_test = report.device_under_test.clone();
        }
    }
}

impl<R: TrialRunner> TrialRunner for NotingDut<'_, R> {
    type Error = R::Error;

    fn run(&mut self, trial: TrialRun) -> Result<(Scenario, RunReport), Self::Error> {
        let (scenario, report) = self.inner.run(trial)?;
        self.note(&report);
        Ok((scenario, report))
    }

    fn finished(&mut self, trial: &TrialResult) {
        self.inner.finished(trial);
    }
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
    let flows = request
        .sizes
        .iter()
        .map(|s| SizedFlow::resolve(request, s))
        .collect::<Result<Vec<_>, _>>()?;
    let sizes: Vec<FrameSize> = flows.iter().map(|f| f.size.clone()).collect();
    let mut noting = NotingDut::new(runner);
    let mut trials = EngineTrials {
        request,
        flows,
        stop,
        runner: &mut noting,
        failure: None,
    };
    let mut report = run_sizes(request, &sizes, &mut trials)?;
    report.device_under_test = noting.device_under_test;
    Ok(report)
}

/// Trials run by the engine through a front end's runner.
struct EngineTrials<'a, R: TrialRunner> {
    request: &'a Rfc2544Request,
    /// Each size's flows, resolved once.
    flows: Vec<SizedFlow>,
    stop: &'a AtomicBool,
    runner: &'a mut R,
    failure: Option<String>,
}

impl<R: TrialRunner> EngineTrials<'_, R> {
    /// The flows of a frame size.
    fn flow(&self, size: &FrameSize) -> Result<&SizedFlow, ControlError> {
        self.flows
            .iter()
            .find(|f| f.size.size == size.size)
            .ok_or_else(|| ControlError::Runtime(format!("no flow for frame size `{}`", size.size)))
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
        let (mut scenario, pacing) = self
            .flow(size)?
            .paced(plan.overload_pps, plan.overload_frames())?;
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
            self.failure = Some(format!(
                "{what}: {}",
                warning_texts(&results.failures).join("; ")
            ));
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
        let flow = self.flow(trial.size)?;
        let learning = flow.learning.clone();
        let scenario = flow.trial(trial.offer, r.settings.trial_ns)?;
        if let Some(learning) = learning {
            let learned = self.runner.run(TrialRun {
                what: format!(
                    "learning: {} frames from the receive port",
                    r.settings.learning_frames
                ),
                progress: String::new(),
                scenario: learning,
                pacing: Pacing::Scheduled,
                drain_ns: 0,
                learning: true,
            });
            // A stop that comes as a run starts may fail it: the stop is what happened.
            if self.stopped() {
                return Ok(None);
            }
            learned?;
        }
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
                warning_texts(&results.failures).join("; ")
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
            warnings.push(Warning::SuspectTrial);
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
