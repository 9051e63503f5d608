//! strobe-model: the traffic model.
//!
//! - [`load_scenario`] reads a TOML scenario file written with Open Traffic Generator
//!   names and shapes (documented in SCENARIO.md beside this crate) and validates it
//!   completely, so the engine never meets a frame it cannot build or a schedule it
//!   cannot run.
//! - [`quick::build`] turns the one-flow command-line shorthand into the same model.
//! - [`PortLocation`] and [`Location`]: where a port is, parsed once where it is read (a
//!   `lab:` end stays symbolic until the run-control layer finds the lab).
//! - [`Pattern`] and [`SizeSpec`] give every packet's field values and frame size as pure,
//!   random-access functions of the packet index.
//!
//! Pure: no I/O. Files a scenario names are read through the caller's [`Resources`].
//! Every error is a [`ModelError`] naming the file, line, column and model path, and what
//! would have been accepted.

#![forbid(unsafe_code)]

mod device;
mod error;
mod line_rate;
mod location;
mod mac;
mod model;
mod node;
mod pattern;
pub mod quick;
mod scenario;
mod size;
pub mod text;
mod value;
pub mod warning;

pub use device::DeviceUnderTest;
pub use error::ModelError;
pub use line_rate::line_rate_excess;
pub use location::{
    LabBackend, LabPort, LabSide, Location, LocationError, PortLocation, LOCATION_FORMS,
};
pub use mac::{check_macs, fill_unset_macs, mac_string, parse_mac};
pub use model::{
    FieldPattern, FieldTag, FlowSpec, HeaderSpec, LatencyMode, Metrics, NoFiles, Pacing, PortSpec,
    Resources, Scenario, TagPlan, DEFAULT_PORT_SPEED_BPS, FCS_LEN, MAX_CORES, MAX_FLOWS,
    MAX_FRAME_SIZE, MAX_TAG_POSITIONS,
};
pub use pattern::{random_in, random_word, width_mask, Pattern};
pub use scenario::{
    default_size_seed, default_timing_seed, load_scenario, load_scenario_json, SIZE_SEED_BASE,
    TIMING_SEED_BASE,
};
pub use size::{SizeSequence, SizeSpec};
pub use warning::{warning_texts, MeasuredFloor, Warning};
