//! How a command fails, and the exit code each way maps to (see `main`).

/// Exit codes (docs/results.md, `strobe --help`): 0 success, 1 strobe itself failed (a port
/// or an output it could not use, a run cut short by an error), 2 bad input or a missing
/// privilege (also clap's usage errors), 3 the run worked and its verdict failed
/// ([`VERDICT_EXIT`]), 128 + the signal's number for a run that SIGINT, SIGTERM or SIGHUP
/// stopped (its results written).
pub enum Failure {
    BadInput(String),
    Runtime(String),
    /// The measurement is complete and failed what was asked of it: loss above
    /// `--max-loss`, a suspect flow, a Y.1564 FAIL.
    Verdict(String),
    Interrupted(i32),
}

/// The exit code of a failed verdict, apart from strobe's own failures (1) and bad input
/// (2), so that a script can tell "the device failed" from "the test did not run".
pub const VERDICT_EXIT: u8 = 3;

impl From<strobe_control::ControlError> for Failure {
    fn from(e: strobe_control::ControlError) -> Self {
        match e {
            strobe_control::ControlError::BadInput(m) => Failure::BadInput(m),
            strobe_control::ControlError::Runtime(m) => Failure::Runtime(m),
        }
    }
}
