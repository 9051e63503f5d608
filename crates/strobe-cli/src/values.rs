//! Value parsers for command-line numbers, durations and rates: a negative value gets a
//! message saying what the option takes, not clap's tip to write `-- -5` (these options also
//! accept values that start with a hyphen, so that the parser sees them).

/// A duration or rate, as text for its own parser: refused when negative.
pub fn positive_text(text: &str) -> Result<String, String> {
    if text.trim_start().starts_with('-') {
        Err("durations and rates must be positive, e.g. 10s, 500ms, 100kpps or 10gbps".into())
    } else {
        Ok(text.to_string())
    }
}

/// A number of frames: a whole number, not negative.
pub fn count(text: &str) -> Result<u64, String> {
    text.trim().parse().map_err(|_| {
        if text.trim_start().starts_with('-') {
            "must be a positive whole number, e.g. 1000".to_string()
        } else {
            format!("`{text}` is not a whole number, e.g. 1000")
        }
    })
}

/// A number of things of which there must be at least one (histogram bins).
pub fn at_least_one(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{text}` is not a positive whole number, e.g. 20")),
    }
}

/// Seconds, more than zero.
pub fn positive_seconds(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 => Ok(s),
        Ok(_) => Err("must be a positive number of seconds, e.g. 3 or 0.5".into()),
        Err(_) => Err(format!(
            "`{text}` is not a number of seconds, e.g. 3 or 0.5"
        )),
    }
}
