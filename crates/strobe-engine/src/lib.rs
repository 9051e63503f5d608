//! strobe-engine: turns a scenario into frames on backends.
//!
//! - [`generator`]: per-flow templates with incremental checksum updates (no per-packet
//!   rebuild, no allocation).
//! - [`worker`]: one transmit worker per port walking an absolute-deadline schedule on the
//!   TSC ([`clock`]), flows merged by deadline.
pub mod clock;
pub mod generator;
pub mod worker;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use strobe_io::{AnyBackend, TimeBase};
use strobe_model::Scenario;
use strobe_timing::{Duration, Pattern, ScheduleSpec};

pub use clock::{Clock, ClockSource};
pub use generator::FlowGenerator;
pub use worker::{run_port, FlowReport, HandoverError, LatePolicy, PortReport, RunOptions};

/// Errors that stop a run.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("flow `{flow}`: {message}")]
    Flow { flow: String, message: String },
    #[error("port `{port}`: {source}")]
    Port {
        port: String,
        #[source]
        source: strobe_io::IoError,
    },
    #[error(transparent)]
    Io(#[from] strobe_io::IoError),
    #[error("backend: {0}")]
    Backend(String),
    #[error("transmit worker for port `{0}` panicked")]
    WorkerPanicked(String),
    #[error(
        "flow `{flow}` never ends, but port `{port}` writes a trace in scheduled time, which would \
         fill the disk: give it a duration (fixed_packets, fixed_seconds, or burst with bursts > 0; \
         on the command line --count or --duration)"
    )]
    Endless { flow: String, port: String },
}

impl EngineError {
    /// Whether the error comes from what the user asked for (as opposed to a failure while
    /// running): the front end exits with a different code.
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            EngineError::Flow { .. } | EngineError::Port { .. } | EngineError::Endless { .. }
        )
    }
}

/// Whether a flow's schedule comes to an end by itself.
fn schedule_ends(spec: &ScheduleSpec) -> bool {
    match spec.duration {
        Duration::Continuous => matches!(spec.pattern, Pattern::Replay { .. }),
        Duration::Bursts { bursts, .. } => bursts > 0,
        Duration::Packets(_) | Duration::Seconds(_) => true,
    }
}

/// Results of a whole run.
#[derive(Clone, Debug)]
pub struct RunReport {
    pub clock: ClockSource,
    pub ticks_per_sec: f64,
    pub ports: Vec<PortReport>,
}

/// Runs every port of the scenario that has flows, one worker thread per port.
pub fn run_scenario(
    scenario: &Scenario,
    opts: &RunOptions,
    stop: Arc<AtomicBool>,
) -> Result<RunReport, EngineError> {
    let clock = Clock::calibrate(std::time::Duration::from_millis(50));
    // Open every backend before any worker starts, so a bad port fails the run up front.
    let mut jobs = Vec::new();
    for port in &scenario.ports {
        let flows: Vec<_> = scenario
            .flows
            .iter()
            .filter(|f| f.tx_port == port.name)
            .cloned()
            .collect();
        if flows.is_empty() {
            continue;
        }
        if AnyBackend::time_base_of(&port.location) == Some(TimeBase::Scheduled) {
            if let Some(f) = flows.iter().find(|f| !schedule_ends(&f.schedule)) {
                return Err(EngineError::Endless {
                    flow: f.name.clone(),
                    port: port.name.clone(),
                });
            }
        }
        let batch = opts.batch.unwrap_or(32);
        let backend =
            AnyBackend::open(&port.location, batch).map_err(|source| EngineError::Port {
                port: port.name.clone(),
                source,
            })?;
        jobs.push((port.name.clone(), backend, flows));
    }
    let results: Vec<Result<PortReport, EngineError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = jobs
            .into_iter()
            .map(|(name, mut backend, flows)| {
                let stop = stop.clone();
                let clock = &clock;
                let thread_name = name.clone();
                let handle = std::thread::Builder::new()
                    .name(format!("tx-{name}"))
                    .spawn_scoped(scope, move || {
                        run_port(&thread_name, &mut backend, &flows, clock, opts, &stop)
                    })
                    .expect("spawning a thread");
                (handle, name)
            })
            .collect();
        handles
            .into_iter()
            .map(|(h, name)| h.join().unwrap_or(Err(EngineError::WorkerPanicked(name))))
            .collect()
    });
    let ports = results.into_iter().collect::<Result<Vec<_>, _>>()?;
    Ok(RunReport {
        clock: clock.source(),
        ticks_per_sec: clock.ticks_per_sec(),
        ports,
    })
}
