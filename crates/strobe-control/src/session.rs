//! One config and the runs started from it, as a controller drives them: OTG's
//! `flow_transmit` start, stop, pause and resume of all flows or some, which run sends which
//! flow, when a run is forgotten, and whose counters a flow reports when several runs sent
//! it. `strobe serve` drives it (a later multi-host controller will drive the same type).
//!
//! A [`Session`] holds no lock and never waits: each request is checked against a copy and
//! answered with a step saying which runs to stop or wait for, so a server can wait for
//! runs to drain without holding its state, and only [`start_run`] blocks (until the ports
//! are open).

use std::collections::HashMap;
use std::sync::Arc;

use strobe_engine::live::FlowUpdate;
use strobe_model::{FlowSpec, Location, PortLocation, Scenario, SizeSpec};
use strobe_timing::{Duration, Pattern};

use crate::run::{port_metrics, FlowMetrics, Metrics, PortMetrics, RunEnd, RunState, Transmit};
use crate::{ControlError, PlanOptions, RunHandle};

/// A config's scenario and the runs started from it, oldest first: one per start request,
/// each with the flows it started (a flow's counters are those of the newest run that
/// sends it).
#[derive(Clone, Default)]
pub struct Session {
    scenario: Option<Scenario>,
    runs: Vec<Arc<RunHandle>>,
}

/// What a start request needs done: runs to end first (only draining: every flow of theirs
/// to start again has finished sending), then a run of `scenario`.
pub struct StartStep {
    pub end_first: Vec<Arc<RunHandle>>,
    /// The flows named (all when none are), flow ids renumbered in order.
    pub scenario: Scenario,
}

/// What a stop request needs done: runs whose flows are all named stop whole (and drain);
/// runs with others still sending stop the named flows only.
pub struct StopStep {
    pub whole: Vec<Arc<RunHandle>>,
    pub some: Vec<(Arc<RunHandle>, Vec<String>)>,
}

impl Session {
    /// The config's scenario, with no runs yet.
    pub fn new(scenario: Scenario) -> Session {
        Session {
            scenario: Some(scenario),
            runs: Vec::new(),
        }
    }

    pub fn scenario(&self) -> Option<&Scenario> {
        self.scenario.as_ref()
    }

    /// The runs, oldest first.
    pub fn runs(&self) -> &[Arc<RunHandle>] {
        &self.runs
    }

    /// Whether a run still goes (sends or drains).
    pub fn is_running(&self) -> bool {
        self.runs.iter().any(|r| !r.is_finished())
    }

    /// The scenario, or the error every request without a config gets.
    fn config(&self) -> Result<&Scenario, ControlError> {
        self.scenario.as_ref().ok_or_else(|| {
            ControlError::BadInput(
                "no config: set one first (POST /config, snappi's set_config)".into(),
            )
        })
    }

    /// The flows `names` name, each checked against the config (all of them when none are
    /// named).
    pub fn wanted(&self, names: &[String]) -> Result<Vec<String>, ControlError> {
        let scenario = self.config()?;
        if let Some(unknown) = names
            .iter()
            .find(|n| !scenario.flows.iter().any(|f| &f.name == *n))
        {
            return Err(ControlError::BadInput(format!(
                "no flow `{unknown}` in the config (flows: {})",
                scenario
                    .flows
                    .iter()
                    .map(|f| f.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        Ok(match names.is_empty() {
            true => scenario.flows.iter().map(|f| f.name.clone()).collect(),
            false => names.to_vec(),
        })
    }

    /// Checks a start of the flows `names` (all when none are): refused while one of them
    /// still sends.
    pub fn start_step(&self, names: &[String]) -> Result<StartStep, ControlError> {
        let wanted = self.wanted(names)?;
        let scenario = self.config()?;
        if scenario.flows.is_empty() {
            return Err(ControlError::BadInput("the config has no flows".into()));
        }
        let sending_now: Vec<String> = self.runs.iter().flat_map(|r| sending(r)).collect();
        let busy: Vec<&str> = wanted
            .iter()
            .filter(|n| sending_now.contains(n))
            .map(String::as_str)
            .collect();
        if !busy.is_empty() {
            return Err(ControlError::BadInput(format!(
                "flows {} are still sending — stop them first",
                busy.join(", ")
            )));
        }
        let end_first = self
            .runs
            .iter()
            .filter(|r| touches(r, &wanted) && sending(r).is_empty() && !r.is_finished())
            .cloned()
            .collect();
        Ok(StartStep {
            end_first,
            scenario: select_flows(scenario.clone(), names),
        })
    }

    /// Adds a run just started; runs that are over and none of whose flows is a newer
    /// run's are forgotten.
    pub fn add_run(&mut self, run: RunHandle) {
        self.runs.push(Arc::new(run));
        let all = std::mem::take(&mut self.runs);
        let newer_has = |i: usize, name: &String| {
            all[i + 1..]
                .iter()
                .any(|later| flow_names_of(later).contains(name))
        };
        let kept: Vec<bool> = all
            .iter()
            .enumerate()
            .map(|(i, run)| {
                !run.is_finished() || !flow_names_of(run).iter().all(|n| newer_has(i, n))
            })
            .collect();
        self.runs = all
            .into_iter()
            .zip(kept)
            .filter_map(|(run, keep)| keep.then_some(run))
            .collect();
    }

    /// What stopping the flows `names` (all when none are) takes.
    pub fn stop_step(&self, names: &[String]) -> Result<StopStep, ControlError> {
        let wanted = self.wanted(names)?;
        let mut step = StopStep {
            whole: Vec::new(),
            some: Vec::new(),
        };
        for run in self.runs.iter().filter(|r| !r.is_finished()) {
            let flows = flow_names_of(run);
            if flows.iter().all(|n| wanted.contains(n)) {
                step.whole.push(run.clone());
            } else {
                let named = flows.into_iter().filter(|n| wanted.contains(n)).collect();
                step.some.push((run.clone(), named));
            }
        }
        Ok(step)
    }

    /// The runs to pause or resume (`verb`) for the flows `names`: all or nothing, as a run
    /// pauses whole, every flow it sends must be named.
    pub fn pause_targets(
        &self,
        names: &[String],
        verb: &str,
    ) -> Result<Vec<Arc<RunHandle>>, ControlError> {
        let wanted = self.wanted(names)?;
        let live: Vec<Arc<RunHandle>> = self
            .runs
            .iter()
            .filter(|r| !r.is_finished() && touches(r, &wanted))
            .cloned()
            .collect();
        if live.is_empty() {
            return Err(ControlError::BadInput(format!(
                "no flow named is sending — start them first before you {verb} them"
            )));
        }
        for run in &live {
            let others: Vec<String> = flow_names_of(run)
                .into_iter()
                .filter(|n| !wanted.contains(n))
                .collect();
            if !others.is_empty() {
                return Err(ControlError::BadInput(format!(
                    "flows started together {verb} together — name {} too, or start the flows \
                     to {verb} apart in their own start request",
                    others.join(", ")
                )));
            }
        }
        Ok(live)
    }

    /// Checks a live change of the flows `changes` name (OTG's update_config): `updated` is
    /// the config's scenario with their new rates and sizes, already checked as a config is.
    /// Returns each run sending a changed flow with the change to give it; refused, naming
    /// the flow and why, when a flow sending cannot take its change while it runs (nothing
    /// is changed then). Flows not sending take any change: it applies from their next start.
    pub fn update_step(
        &self,
        updated: &Scenario,
        changes: &[FlowChange],
    ) -> Result<Vec<(Arc<RunHandle>, String, FlowUpdate)>, ControlError> {
        let scenario = self.config()?;
        let mut step = Vec::new();
        for change in changes {
            let find = |s: &Scenario| s.flows.iter().find(|f| f.name == change.name).cloned();
            let (Some(_), Some(new)) = (find(scenario), find(updated)) else {
                return Err(ControlError::BadInput(format!(
                    "no flow `{}` in the config",
                    change.name
                )));
            };
            for run in self
                .runs
                .iter()
                .filter(|r| sending(r).contains(&change.name))
            {
                let Some(running) = run.scenario().flows.iter().find(|f| f.name == change.name)
                else {
                    continue;
                };
                let update = live_update(run.scenario(), running, &new, change)?;
                step.push((run.clone(), change.name.clone(), update));
            }
        }
        Ok(step)
    }

    /// Makes `updated` (the same flows, some with new rates or sizes) the config's scenario,
    /// keeping the runs: later starts send it.
    pub fn replace_scenario(&mut self, updated: Scenario) {
        self.scenario = Some(updated);
    }

    /// What the runs have to tell, each once (see [`RunHandle::take_problems`]).
    pub fn problems(&self) -> Vec<strobe_model::Warning> {
        self.runs.iter().flat_map(|r| r.take_problems()).collect()
    }

    /// Every flow's counters from the newest run that sends it (see [`Latest`]), or None
    /// without a config.
    pub fn latest(&self) -> Option<Latest> {
        self.scenario.as_ref().map(|s| Latest::of(s, &self.runs))
    }
}

/// Prepares and starts a run of `scenario` (a [`StartStep`]'s) and waits until its ports
/// are open, so that a port that cannot be opened is the start's error; `after` is called
/// once the run is over (see [`crate::start_then`]). Blocks: call it off async workers.
pub fn start_run(
    scenario: Scenario,
    options: &PlanOptions,
    after: impl FnOnce(RunEnd<'_>) + Send + 'static,
) -> Result<RunHandle, ControlError> {
    let plan = crate::prepare(scenario, options)?;
    let handle = crate::start_then(plan, after)?;
    while handle.metrics().state == RunState::Starting && !handle.is_finished() {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    if handle.metrics().state == RunState::Failed {
        return Err(handle
            .wait()
            .err()
            .unwrap_or(ControlError::Runtime("the run failed".into())));
    }
    Ok(handle)
}

/// Which of a flow's properties a live change sets (OTG's `property_names`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowChange {
    pub name: String,
    pub rate: bool,
    pub size: bool,
}

/// The change a transmitter sending `running` (of the run of `scenario`) applies to become
/// `new`, or why it cannot while it runs.
fn live_update(
    scenario: &Scenario,
    running: &FlowSpec,
    new: &FlowSpec,
    change: &FlowChange,
) -> Result<FlowUpdate, ControlError> {
    let refused = |why: &str| {
        ControlError::BadInput(format!(
            "flow `{}` is sending and {why}: stop it, update it and start it again",
            running.name
        ))
    };
    let tx_location = scenario
        .ports
        .iter()
        .find(|p| p.name == running.tx_port)
        .map(|p| &p.location);
    match tx_location {
        Some(PortLocation::Direct(Location::XdpLive { .. })) => {
            return Err(refused(
                "its frames are generated by the kernel's XDP program (xdp-live), which takes \
                 no change while it runs",
            ))
        }
        Some(PortLocation::Remote(_)) => {
            return Err(refused("it is sent by another host's agent"));
        }
        _ => {}
    }
    let mut update = FlowUpdate {
        rate: None,
        base_rate: None,
        size: None,
    };
    if change.rate && new.schedule.rate != running.schedule.rate {
        let schedule = &running.schedule;
        let one_rate = matches!(schedule.pattern, Pattern::Cbr | Pattern::Poisson)
            && schedule.profile.is_none()
            && !matches!(schedule.duration, Duration::Bursts { .. });
        if !one_rate {
            return Err(refused(
                "its rate cannot change while it runs (strobe changes the rate of constant-rate \
                 and Poisson flows live, not of bursts, on/off patterns, gap distributions, \
                 replays or rate profiles)",
            ));
        }
        update.rate = Some(new.schedule.rate);
        update.base_rate = Some(running.schedule.rate);
    }
    if change.size && new.size != running.size {
        let SizeSpec::Fixed(size) = new.size else {
            return Err(refused(
                "a live size change takes a fixed size (size.choice fixed); increment, random \
                 and weight_pairs sizes apply from a start",
            ));
        };
        // The template the transmitter will build for the size: built here first, so a size
        // it cannot take is refused now rather than left out by the transmitter.
        let mut resized = running.clone();
        resized.size = SizeSpec::Fixed(size);
        strobe_engine::FlowGenerator::compile(&resized, 0, 0)
            .map_err(|e| refused(&format!("size {size} cannot be sent: {e}")))?;
        update.size = Some(size);
    }
    Ok(update)
}

/// The flows of `run` still sending (not finished, not stopped, not done).
fn sending(run: &RunHandle) -> Vec<String> {
    if run.is_finished() {
        return Vec::new();
    }
    run.metrics()
        .flows
        .into_iter()
        .filter(|f| f.transmit != Transmit::Stopped)
        .map(|f| f.name)
        .collect()
}

fn flow_names_of(run: &RunHandle) -> Vec<String> {
    run.scenario()
        .flows
        .iter()
        .map(|f| f.name.clone())
        .collect()
}

fn touches(run: &RunHandle, wanted: &[String]) -> bool {
    flow_names_of(run).iter().any(|n| wanted.contains(n))
}

/// The flows named (all when none are), with flow ids renumbered in order.
fn select_flows(mut scenario: Scenario, names: &[String]) -> Scenario {
    if !names.is_empty() {
        scenario.flows.retain(|f| names.contains(&f.name));
        for (id, f) in scenario.flows.iter_mut().enumerate() {
            f.id = u16::try_from(id).unwrap_or(u16::MAX);
        }
    }
    scenario
}

/// The counters of every flow of the config in its order, from the newest run that sends
/// it (zeros for a flow no run sent), with the index of that run; each run's metrics are
/// read once.
pub struct Latest {
    pub flows: Vec<(FlowMetrics, Option<usize>)>,
    /// Each run's own metrics, oldest first.
    runs: Vec<Metrics>,
}

impl Latest {
    pub fn of(scenario: &Scenario, runs: &[Arc<RunHandle>]) -> Latest {
        let metrics: Vec<Metrics> = runs.iter().map(|r| r.metrics()).collect();
        let mut newest: HashMap<&str, (usize, &FlowMetrics)> = HashMap::new();
        for (i, m) in metrics.iter().enumerate() {
            for f in &m.flows {
                newest.insert(f.name.as_str(), (i, f));
            }
        }
        let flows = scenario
            .flows
            .iter()
            .map(|f| match newest.get(f.name.as_str()) {
                Some(&(i, m)) => (m.clone(), Some(i)),
                None => (FlowMetrics::idle(f), None),
            })
            .collect();
        Latest {
            flows,
            runs: metrics,
        }
    }

    /// Port counters: one run's own (a receive port counts every frame it saw), or with
    /// flows from several runs, their flows' counters added up per port.
    pub fn ports(&self, scenario: &Scenario) -> Vec<PortMetrics> {
        let mut used: Vec<usize> = self.flows.iter().filter_map(|(_, i)| *i).collect();
        used.sort_unstable();
        used.dedup();
        match used.as_slice() {
            [] => Vec::new(),
            [one] => self.runs[*one].ports.clone(),
            _ => {
                let flows: Vec<FlowMetrics> = self.flows.iter().map(|(f, _)| f.clone()).collect();
                port_metrics(scenario, &flows)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two flows on the null port (no privileges needed), each `packets` frames at 1 kpps.
    fn two_flows(packets: u64) -> Scenario {
        let flow = |name: &str| {
            format!(
                "[[flows]]\nname = \"{name}\"\ntx = \"p\"\nrate = \"1kpps\"\nduration = {packets}\n\
                 [[flows.packet]]\nethernet = {{ src = \"02:00:00:00:00:01\", dst = \"02:00:00:00:00:02\" }}\n\
                 [[flows.packet]]\nipv4 = {{ src = \"198.18.0.1\", dst = \"198.18.1.1\" }}\n"
            )
        };
        let text = format!(
            "[[ports]]\nname = \"p\"\nlocation = \"null\"\n{}{}",
            flow("a"),
            flow("b")
        );
        strobe_model::load_scenario(&text, "t.toml", &strobe_model::NoFiles).unwrap()
    }

    fn scenario() -> Scenario {
        two_flows(100)
    }

    #[test]
    fn requests_without_a_config_or_with_unknown_flows_are_refused_by_name() {
        let empty = Session::default();
        let e = empty.start_step(&[]).err().unwrap().to_string();
        assert!(e.contains("no config"), "{e}");
        let session = Session::new(scenario());
        let e = session
            .stop_step(&["a".into(), "zz".into()])
            .err()
            .unwrap()
            .to_string();
        assert_eq!(e, "no flow `zz` in the config (flows: a, b)");
        assert_eq!(session.wanted(&[]).unwrap(), ["a", "b"]);
    }

    #[test]
    fn a_start_of_some_flows_runs_them_alone_renumbered() {
        let session = Session::new(scenario());
        let step = session.start_step(&["b".into()]).unwrap();
        assert!(step.end_first.is_empty());
        assert_eq!(step.scenario.flows.len(), 1);
        assert_eq!(step.scenario.flows[0].name, "b");
        assert_eq!(step.scenario.flows[0].id, 0);
        let all = session.start_step(&[]).unwrap();
        assert_eq!(all.scenario.flows.len(), 2);
    }

    #[test]
    fn pausing_with_nothing_sending_says_to_start_first() {
        let session = Session::new(scenario());
        let e = session.pause_targets(&[], "pause").err().unwrap();
        assert!(e.to_string().contains("start them first"), "{e}");
        assert!(session.stop_step(&[]).unwrap().whole.is_empty());
        assert!(!session.is_running());
        let latest = session.latest().unwrap();
        assert_eq!(latest.flows.len(), 2);
        assert!(latest.flows.iter().all(|(_, run)| run.is_none()));
    }

    /// Runs on the null port, no privileges needed: a second start of a flow still
    /// sending is refused; starting the other flow goes beside it; a finished run whose
    /// flows all went again in a newer run is forgotten.
    #[test]
    fn runs_are_told_apart_by_their_flows_and_forgotten_when_replaced() {
        let mut session = Session::new(scenario());
        let mut session_slow = Session::new(two_flows(1_000_000));
        let options = PlanOptions {
            drain_ns: 0,
            ..PlanOptions::default()
        };
        let step = session_slow.start_step(&["a".into()]).unwrap();
        session_slow.add_run(start_run(step.scenario, &options, |_| {}).unwrap());
        let e = session_slow
            .start_step(&["a".into()])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("still sending"), "{e}");
        let e = session_slow
            .pause_targets(&["b".into()], "pause")
            .err()
            .unwrap();
        assert!(e.to_string().contains("start them first"), "{e}");
        let step = session_slow.start_step(&["b".into()]).unwrap();
        session_slow.add_run(start_run(step.scenario, &options, |_| {}).unwrap());
        assert_eq!(
            session_slow
                .pause_targets(&["b".into()], "pause")
                .unwrap()
                .len(),
            1
        );
        let stop = session_slow.stop_step(&["a".into(), "b".into()]).unwrap();
        assert_eq!(stop.whole.len(), 2);
        for run in stop.whole {
            run.stop();
            run.wait_over();
        }
        // Flows started together pause together, and stop apart.
        let step = session_slow.start_step(&[]).unwrap();
        session_slow.add_run(start_run(step.scenario, &options, |_| {}).unwrap());
        let e = session_slow
            .pause_targets(&["a".into()], "pause")
            .err()
            .unwrap();
        assert!(e.to_string().contains("name b too"), "{e}");
        let stop = session_slow.stop_step(&["a".into()]).unwrap();
        assert!(stop.whole.is_empty());
        assert_eq!(stop.some.len(), 1);
        assert_eq!(stop.some[0].1, ["a"]);
        let stop = session_slow.stop_step(&[]).unwrap();
        for run in stop.whole {
            run.stop();
            run.wait_over();
        }
        // Short runs: each over soon; the second start of both replaces the first.
        for _ in 0..2 {
            let step = session.start_step(&[]).unwrap();
            let run = start_run(step.scenario, &options, |_| {}).unwrap();
            run.wait_over();
            session.add_run(run);
        }
        assert_eq!(session.runs().len(), 1);
        let latest = session.latest().unwrap();
        assert!(latest
            .flows
            .iter()
            .all(|(m, run)| *run == Some(0) && m.counters.frames_tx == 100));
    }
}
