//! strobe-control: run control, the layer between the engine and every front end (the
//! command line, `strobe serve`).
//!
//! - [`plan`]: a typed test plan from a scenario and run options: lab ports resolved, MACs
//!   checked, traces sized, pacing a typed choice, warnings collected (never printed here).
//! - [`run`]: [`start`] a plan and get a [`RunHandle`]: `stop()`, live [`Metrics`] while the
//!   traffic runs, `wait()` for the engine's report.
//! - [`otg`]: an Open Traffic Generator JSON config read into a scenario, with OTG's defaults.
//! - [`source`]: scenario files, and the one-flow options with what they imply (`--rate max`
//!   is an unpaced run, `lab:` ports' MAC defaults, a receive port).
//! - [`ports`]: port locations, including the lab's `lab:tx` / `lab:rx`.
//! - [`trains`]: the convoy-of-packet-trains experiments (convoy, frame-size and train-length
//!   sweeps) with the bottleneck's prediction beside the measurement.
//! - [`results`]: a finished run's [`Results`], one serde schema for every front end, with
//!   the run's warnings collected; [`calibration`] files that correct their latency.
//! - [`history`]: a run as the run history (strobe-history's SQLite database) records it.
#![forbid(unsafe_code)]

pub mod calibration;
pub mod capture;
pub mod capture_filter;
pub mod floor_memory;
pub mod history;
pub mod host;
pub mod methodology;
pub mod otg;
pub mod pcap_space;
pub mod plan;
pub mod ports;
pub mod reflector;
pub mod results;
pub mod rfc2544;
pub mod run;
pub mod session;
pub mod source;
pub mod study;
pub mod sweep;
pub mod text;
pub mod trains;
pub mod y1564;

pub use plan::{prepare, Pacing, Plan, PlanOptions};

// The vocabulary the front ends parse and show (scenarios, rates and durations, the
// analyses' figures and reports, the lab), re-exported so that a front end depends on
// this crate alone and sees one version of each.
pub use strobe_analyze as analyze;
pub use strobe_lab as lab;
pub use strobe_model as model;
pub use strobe_timing as timing;

/// Starts calibrating the engine's clock in the background (see
/// `strobe_engine::clock::Clock::calibrate_soon`): a front end calls it first thing.
pub fn calibrate_clock_soon() {
    strobe_engine::clock::Clock::calibrate_soon();
}
pub use results::Results;
pub use strobe_model::{warning_texts, Warning};
// What the engine reports and the settings a front end names, re-exported so that front
// ends need no crate below this one.
pub use run::{
    start, start_then, FlowMetrics, IntervalLatency, Metrics, PortMetrics, RunEnd, RunHandle,
    RunState, TaggedMetrics, Transmit,
};
pub use strobe_engine::latency::FlowLatency;
pub use strobe_engine::live::FlowSnapshot;
pub use strobe_engine::{ClockSource, LatePolicy, RunReport, StartGate, Tick};
pub use strobe_io::Location;

/// A run tag for a run that several processes take part in (a multi-host run's agents):
/// random, never the tag of strobe versions before run tags.
pub fn fresh_run_tag() -> u8 {
    strobe_engine::random_run_tag()
}

/// Why a plan cannot run or a run failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    /// What was asked cannot be run (scenario, option, port, privilege): the message says
    /// what to change. Front ends answer with their "bad input" (exit 2, an OTG validation
    /// error).
    #[error("{0}")]
    BadInput(String),
    /// The run failed while running.
    #[error("{0}")]
    Runtime(String),
}

impl From<strobe_engine::EngineError> for ControlError {
    fn from(e: strobe_engine::EngineError) -> Self {
        if e.is_bad_input() {
            ControlError::BadInput(e.to_string())
        } else {
            ControlError::Runtime(e.to_string())
        }
    }
}

impl From<strobe_lab::LabError> for ControlError {
    /// Lab errors from missing privileges or bad names are the user's to fix.
    fn from(e: strobe_lab::LabError) -> Self {
        ControlError::BadInput(e.to_string())
    }
}
