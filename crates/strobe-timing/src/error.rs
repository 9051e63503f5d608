use std::fmt::Display;

/// What is wrong with a schedule specification or a parsed string. The messages are meant
/// for users: each names the offending parameter and what would be accepted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TimingError {
    /// A parameter has a value outside its accepted range.
    #[error("invalid {parameter} = {value}: {accepted}")]
    InvalidParameter {
        parameter: String,
        value: String,
        accepted: String,
    },
    /// Two parts of a specification cannot be used together.
    #[error("{0}")]
    Incompatible(String),
    /// A row of an empirical gap table could not be read.
    #[error("empirical gap table, line {line}: {reason}")]
    EmpiricalCsv { line: usize, reason: String },
    /// A rate string could not be parsed.
    #[error("cannot read rate {input:?}: {reason}")]
    ParseRate { input: String, reason: String },
    /// A duration string could not be parsed.
    #[error("cannot read duration {input:?}: {reason}")]
    ParseDuration { input: String, reason: String },
}

pub(crate) fn invalid(
    parameter: impl Into<String>,
    value: impl Display,
    accepted: impl Into<String>,
) -> TimingError {
    TimingError::InvalidParameter {
        parameter: parameter.into(),
        value: value.to_string(),
        accepted: accepted.into(),
    }
}
