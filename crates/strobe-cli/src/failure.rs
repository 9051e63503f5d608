//! How a command fails, and the exit code each way maps to (see `main`).

/// Exit codes: 0 success, 1 the run failed, 2 bad input (also clap's usage errors), 128 + the
/// signal's number for a run that SIGINT, SIGTERM or SIGHUP stopped (its results written).
pub enum Failure {
    BadInput(String),
    Runtime(String),
    Interrupted(i32),
}

impl From<strobe_control::ControlError> for Failure {
    fn from(e: strobe_control::ControlError) -> Self {
        match e {
            strobe_control::ControlError::BadInput(m) => Failure::BadInput(m),
            strobe_control::ControlError::Runtime(m) => Failure::Runtime(m),
        }
    }
}
