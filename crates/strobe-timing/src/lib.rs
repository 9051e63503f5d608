//! Departure schedules for strobe: when each packet of a flow leaves, in nanoseconds from the
//! run's t0.
//!
//! Everything here is pure and deterministic: no clocks, no sleeping, no I/O. Randomised
//! patterns draw from a `Xoshiro256PlusPlus` generator seeded from [`ScheduleSpec::seed`], so
//! the same specification always yields the same departures.
//!
//! Schedules yield absolute times computed without cumulative drift: constant-rate times are
//! kept as exact fractions of a nanosecond and only rounded (half up) when reported, and
//! random gaps are accumulated with their fractional part carried, so rounding never piles up.
//!
//! ```
//! use strobe_timing::{Duration, Rate, Schedule, ScheduleSpec};
//!
//! let spec = ScheduleSpec { rate: Rate::Pps(3.0), duration: Duration::Packets(3), ..Default::default() };
//! let mut schedule = Schedule::new(spec)?;
//! assert_eq!(schedule.next(64), Some(0));
//! assert_eq!(schedule.next(64), Some(333_333_333));
//! assert_eq!(schedule.next(64), Some(666_666_667));
//! assert_eq!(schedule.next(64), None);
//! # Ok::<(), strobe_timing::TimingError>(())
//! ```

#![forbid(unsafe_code)]

mod dist;
mod error;
mod exact_time;
mod parse;
mod path_floor;
mod rate;
mod schedule;

pub use dist::{Dist, EmpiricalTable};
pub use error::TimingError;
pub use parse::{parse_duration_ns, parse_rate};
pub use path_floor::{perfect_departures, FloorEstimate, PathFloor};
pub use rate::{l1_bits, Rate, L1_OVERHEAD_BYTES, MAX_RATE, MIN_RATE};
pub use schedule::{
    Duration, Pattern, Periodic, RateProfile, RateStep, Schedule, ScheduleSpec, MAX_RAMP_STEPS,
};

/// Nanoseconds in one second.
pub const NS_PER_SEC: u64 = 1_000_000_000;
