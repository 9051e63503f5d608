//! The one error type of the model: where the problem is and what would be accepted.

use std::fmt;
use std::ops::Range;

/// A scenario or command-line problem, located as precisely as the input allows.
///
/// Displays as `scenario.toml:12:5: flows[0].packet[1].ipv4.src: invalid IPv4 address …`;
/// parts that are unknown (no line for command-line input, no path for a syntax error)
/// are left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelError {
    /// File name, or "command line".
    pub source: String,
    /// 1-based line in the scenario file.
    pub line: Option<usize>,
    /// 1-based column (in characters) in the scenario file.
    pub column: Option<usize>,
    /// Where in the model: `flows[0].packet[1].ipv4.src`, or a flag such as `--udp`.
    pub path: String,
    /// What is wrong and what is accepted.
    pub message: String,
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        if !self.path.is_empty() {
            write!(f, ": {}", self.path)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ModelError {}

/// Maps byte offsets of a scenario text to 1-based line and column numbers.
#[derive(Clone, Copy)]
pub(crate) struct Locator<'a> {
    pub source: &'a str,
    text: &'a str,
}

impl<'a> Locator<'a> {
    pub fn new(source: &'a str, text: &'a str) -> Self {
        Locator { source, text }
    }

    /// Line and column of the start of `span` (columns count characters, not bytes).
    pub fn line_column(&self, span: &Range<usize>) -> (usize, usize) {
        let mut offset = span.start.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &self.text[..offset];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        (line, column)
    }

    /// An error at `span` (None: no position, for problems with the file as a whole).
    pub fn error(
        &self,
        span: Option<&Range<usize>>,
        path: impl Into<String>,
        message: impl Into<String>,
    ) -> ModelError {
        // A document without text (a JSON config read as a tree) has paths, not lines.
        let span = span.filter(|_| !self.text.is_empty());
        let (line, column) = match span.map(|s| self.line_column(s)) {
            Some((line, column)) => (Some(line), Some(column)),
            None => (None, None),
        };
        ModelError {
            source: self.source.to_string(),
            line,
            column,
            path: path.into(),
            message: message.into(),
        }
    }
}

/// An error in a command-line flag (no line or column).
pub(crate) fn flag_error(flag: &str, message: impl Into<String>) -> ModelError {
    ModelError {
        source: "command line".to_string(),
        line: None,
        column: None,
        path: flag.to_string(),
        message: message.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_with_and_without_position() {
        let located = ModelError {
            source: "scenario.toml".into(),
            line: Some(12),
            column: Some(5),
            path: "flows[0].packet[1].ipv4.src".into(),
            message: "invalid IPv4 address".into(),
        };
        assert_eq!(
            located.to_string(),
            "scenario.toml:12:5: flows[0].packet[1].ipv4.src: invalid IPv4 address"
        );
        assert_eq!(
            flag_error("--udp", "bad").to_string(),
            "command line: --udp: bad"
        );
    }

    #[test]
    fn line_and_column_count_characters() {
        let text = "a = 1\nbé = \"x\"\n";
        let loc = Locator::new("f.toml", text);
        assert_eq!(loc.line_column(&(0..1)), (1, 1));
        let x = text.find('"').unwrap();
        assert_eq!(loc.line_column(&(x..x + 3)), (2, 6));
    }
}
