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
//!
//! The rooms, one job each:
//! - `request`: the spec a user writes and the checked request it makes;
//! - `session`: the benchmarks in RFC order, trial by trial, and the time left; each
//!   benchmark's steps in its own file: `throughput` (the highest rate and the NDR/PDR
//!   search), `latency`, `loss`, `back_to_back`, `recovery`;
//! - `trials`: trials run by the engine through a front end's [`TrialRunner`];
//! - `flows`: the typed flows trials send (the test flow per size, the learning frames);
//! - `report`: the results, the report, and how it reads (figures, tables, CSV).

mod back_to_back;
mod flows;
mod latency;
mod loss;
mod recovery;
mod report;
mod request;
mod session;
mod throughput;
mod trials;

pub use report::{
    latency_columns, BackToBackResult, BurstSearch, FrameSize, LatencyPoint, LatencyResult,
    LossCurve, LossPoint, MaxSource, RateFigures, RecoveryOutcome, RecoveryPlan, RecoveryResult,
    Rfc2544Report, SearchOutcome, ThroughputResult, TrialResult,
};
pub use request::{
    Benchmark, Rfc2544Request, Rfc2544Spec, TrialSettings, DEFAULT_LATENCY_LOADS_PCT, DEFAULT_SIZES,
};
pub use trials::{run_benchmarks, NotingDut, TrialRun, TrialRunner};

#[cfg(test)]
mod tests;
