//! A load sweep: the one-flow options run once per offered rate, in order, each a run of
//! its own, with its results and its point on the latency-against-load curve. The front end
//! says how one step runs (its status line) and what happens after it (printing, the
//! history); the sweep decides the steps and when to stop.

use std::sync::atomic::{AtomicBool, Ordering};

use strobe_analyze::latency::LoadPoint;
use strobe_model::Scenario;

use crate::calibration::Correction;
use crate::source::OneFlow;
use crate::{ControlError, Pacing, Results, RunReport};

/// One rate of a sweep: the run, its results and its point on the load curve.
pub struct SweepStep {
    pub rate: String,
    /// When the step began (ns since the Unix epoch), for the run history.
    pub started_unix_ns: i64,
    pub scenario: Scenario,
    pub report: RunReport,
    pub results: Results,
    /// None when nothing was received (no latency).
    pub point: Option<LoadPoint>,
}

/// The steps of a sweep of `base` over `rates`.
pub struct Sweep<'a> {
    pub base: &'a OneFlow,
    pub rates: &'a [String],
    /// The lab `lab:` ports name.
    pub lab_prefix: &'a str,
    /// Every step unpaced (`--unpaced`).
    pub unpaced: bool,
    /// A calibration's correction of every step's latency.
    pub correction: Option<&'a Correction>,
}

impl Sweep<'_> {
    /// Runs the steps in order until the last or until `stop` is set between two (a step
    /// running then is cut short by its own run and kept). `run` runs one step's scenario;
    /// `after` sees each finished step. Returns the steps that ran.
    pub fn run<E: From<ControlError>>(
        &self,
        stop: &AtomicBool,
        mut run: impl FnMut(&str, Scenario, Pacing) -> Result<(Scenario, RunReport), E>,
        mut after: impl FnMut(&SweepStep),
    ) -> Result<Vec<SweepStep>, E> {
        let mut steps = Vec::new();
        for rate in self.rates {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let mut flow = self.base.clone();
            flow.flow.rate = rate.clone();
            let (scenario, pacing) = flow.scenario(self.lab_prefix, self.unpaced)?;
            let started_unix_ns = strobe_history::now_unix_ns();
            let (scenario, report) = run(rate, scenario, pacing)?;
            let results = Results::new(&scenario, &report, self.correction);
            let step = SweepStep {
                rate: rate.clone(),
                started_unix_ns,
                point: results.load_point(&scenario),
                scenario,
                report,
                results,
            };
            after(&step);
            steps.push(step);
        }
        Ok(steps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> OneFlow {
        OneFlow {
            flow: strobe_model::quick::QuickArgs {
                port: "null".into(),
                udp: Some("198.18.0.1:1000-198.18.1.1:2000".into()),
                src_mac: Some("02:00:00:00:00:01".into()),
                dst_mac: Some("02:00:00:00:00:02".into()),
                count: Some(50),
                ..strobe_model::quick::QuickArgs::default()
            },
            rx: None,
        }
    }

    /// Each rate runs as a run of its own on the null port (no privileges needed), in
    /// order, at its own rate; a stop between steps ends the sweep with the steps done.
    #[test]
    fn each_rate_is_a_run_of_its_own_until_a_stop() {
        let base = base();
        let rates = [
            "1kpps".to_string(),
            "2kpps".to_string(),
            "3kpps".to_string(),
        ];
        let sweep = Sweep {
            base: &base,
            rates: &rates,
            lab_prefix: "strobe",
            unpaced: false,
            correction: None,
        };
        let stop = AtomicBool::new(false);
        let mut asked = Vec::new();
        let options = crate::PlanOptions {
            drain_ns: 0,
            ..crate::PlanOptions::default()
        };
        let steps = sweep
            .run::<ControlError>(
                &stop,
                |rate, scenario, pacing| {
                    asked.push((rate.to_string(), scenario.flows[0].schedule.rate));
                    let plan = crate::prepare(
                        scenario,
                        &crate::PlanOptions {
                            pacing,
                            ..options.clone()
                        },
                    )?;
                    let report = crate::run::run_blocking(
                        &plan,
                        std::sync::Arc::new(AtomicBool::new(false)),
                        1_000_000_000,
                        &mut |_| {},
                    )?;
                    Ok((plan.scenario, report))
                },
                |step| {
                    if step.rate == "2kpps" {
                        stop.store(true, Ordering::Relaxed);
                    }
                },
            )
            .unwrap();
        assert_eq!(steps.len(), 2);
        assert_eq!(asked[0].0, "1kpps");
        assert_eq!(asked[1].1, strobe_timing::Rate::Pps(2_000.0));
        for step in &steps {
            assert_eq!(step.results.flows[0].frames_tx, Some(50));
        }
    }
}
