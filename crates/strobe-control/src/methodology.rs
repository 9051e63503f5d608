//! What the test methodologies ([`crate::rfc2544`], [`crate::y1564`], [`crate::trains`])
//! share: the one flow their specs describe, resolved into the model once and sent by each
//! trial or step with typed rates and lengths, and the rules for a run that a stop cuts
//! short.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use strobe_model::Scenario;
use strobe_timing::{Pattern as Departures, Rate, Schedule, ScheduleSpec};

use crate::source::OneFlow;
use crate::ControlError;

/// The flow a methodology's spec describes, from `port` to the receive port `rx`; each
/// trial or step sets what it sends. Its seed is fixed, so that every trial draws the same
/// frame sizes and timing.
pub(crate) fn spec_flow(
    port: &str,
    rx: &str,
    src_mac: &Option<String>,
    dst_mac: &Option<String>,
) -> OneFlow {
    OneFlow {
        flow: strobe_model::quick::QuickArgs {
            port: port.to_string(),
            src_mac: src_mac.clone(),
            dst_mac: dst_mac.clone(),
            seed: 1,
            ..Default::default()
        },
        rx: Some(rx.to_string()),
    }
}

/// `flow` resolved into the model once: its text (ports, addresses, frame size, options)
/// parsed and checked there, with the model's own messages. Its schedule is a placeholder
/// (the flow's rate, one frame) that [`sending`] replaces with each trial's or step's; no
/// trial writes or re-parses command-line text.
pub(crate) fn resolve_flow(flow: &OneFlow, lab_prefix: &str) -> Result<Scenario, ControlError> {
    let mut flow = flow.clone();
    flow.flow.count = Some(1);
    flow.flow.duration = None;
    let (scenario, _) = flow.scenario(lab_prefix, false)?;
    Ok(scenario)
}

/// `resolved`'s flows sending at a constant `rate` for `duration` (a count, a time, or
/// trains of frames), each schedule checked as the model checks a flow's.
pub(crate) fn sending(
    resolved: &Scenario,
    rate: Rate,
    duration: strobe_timing::Duration,
) -> Result<Scenario, ControlError> {
    let mut scenario = resolved.clone();
    for flow in &mut scenario.flows {
        flow.schedule.rate = rate;
        flow.schedule.pattern = Departures::Cbr;
        flow.schedule.duration = duration.clone();
        check_schedule(&flow.schedule)?;
    }
    Ok(scenario)
}

/// A schedule a trial or step set, checked as the model checks a flow's.
pub(crate) fn check_schedule(schedule: &ScheduleSpec) -> Result<(), ControlError> {
    Schedule::new(schedule.clone())
        .map(drop)
        .map_err(|e| ControlError::BadInput(format!("a trial's schedule: {e}")))
}

/// A run's outcome, None when it failed and `stopped` says a stop came meanwhile: a stop
/// that comes as a run starts may fail it, and the stop is what happened.
pub(crate) fn unless_stopped<T, E>(
    ran: Result<T, E>,
    stopped: impl FnOnce() -> bool,
) -> Result<Option<T>, E> {
    match ran {
        Ok(ran) => Ok(Some(ran)),
        Err(_) if stopped() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Sleeps `ns`, or until `stop` is set.
pub(crate) fn sleep_unless_stopped(ns: u64, stop: &AtomicBool) {
    let until = Instant::now() + Duration::from_nanos(ns);
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= until {
            break;
        }
        std::thread::sleep((until - now).min(Duration::from_millis(50)));
    }
}
