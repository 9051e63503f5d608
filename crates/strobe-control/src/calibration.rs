//! Calibration files: strobe's own measurement-path latency (transmit stamp, backend, wire,
//! receive stamp) stored by `strobe calibrate`, and subtracted from later runs' latency.
//!
//! The stored offset is the median: robust against the tail a shared machine adds, and the
//! value at which a corrected p50 comes out zero for a zero-latency DUT. The whole
//! distribution is stored too, so the spread the correction cannot remove is on record.

use std::path::Path;

use serde::{Deserialize, Serialize};
use strobe_analyze::latency::LatencyStats;

use crate::results::{Results, TimestampSources};
use crate::ControlError;

/// Format marker and version of calibration files.
pub const KIND: &str = "strobe-calibration";
pub const VERSION: u64 = 1;

/// A calibration file's contents.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CalibrationFile {
    pub kind: String,
    pub version: u64,
    pub created_unix_s: u64,
    pub tx_port: String,
    pub rx_port: String,
    pub rate: String,
    pub size: String,
    pub timestamps: TimestampSources,
    pub latency: LatencyStats,
    /// What later runs subtract: the median latency of the measurement path.
    pub offset_ns: f64,
}

/// A calibration in use: the measurement path's own latency, subtracted from every flow's.
#[derive(Clone, Debug, PartialEq)]
pub struct Correction {
    /// Where it came from (a `strobe calibrate` file).
    pub source: String,
    pub offset_ns: f64,
}

impl CalibrationFile {
    /// The calibration a finished calibration run measured: its one flow's latency. Refused
    /// when a port failed or nothing came back.
    pub fn from_results(
        results: &Results,
        tx_port: &str,
        rx_port: &str,
        rate: &str,
        size: &str,
    ) -> Result<Self, ControlError> {
        if let Some(failure) = results.failures.first() {
            return Err(ControlError::Runtime(format!(
                "{failure}; the calibration was not stored"
            )));
        }
        let latency = results
            .flows
            .first()
            .and_then(|f| f.latency.as_ref())
            .ok_or_else(|| {
                ControlError::Runtime(format!(
                    "no frame came back from {tx_port} to {rx_port}: check that the two ports \
                     are cabled to each other"
                ))
            })?;
        let created_unix_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Ok(CalibrationFile {
            kind: KIND.into(),
            version: VERSION,
            created_unix_s,
            tx_port: tx_port.into(),
            rx_port: rx_port.into(),
            rate: rate.into(),
            size: size.into(),
            timestamps: latency.timestamps.clone(),
            latency: latency.raw,
            offset_ns: latency.raw.p50_ns,
        })
    }
}

/// Reads a calibration file written by `strobe calibrate`; errors name the file and how to
/// write a good one.
pub fn load(path: &Path) -> Result<Correction, ControlError> {
    let bad = |why: String| {
        ControlError::BadInput(format!(
            "--calibration {}: {why} (write one with `strobe calibrate --out {}`)",
            path.display(),
            path.display()
        ))
    };
    let text = std::fs::read_to_string(path).map_err(|e| bad(format!("cannot read it: {e}")))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| bad(format!("not JSON: {e}")))?;
    if v["kind"] != KIND {
        return Err(bad("not a strobe calibration file".into()));
    }
    if v["version"].as_u64() != Some(VERSION) {
        return Err(bad(format!(
            "version {} is not the supported {VERSION}",
            v["version"]
        )));
    }
    let offset_ns = v["offset_ns"]
        .as_f64()
        .filter(|o| o.is_finite() && *o >= 0.0)
        .ok_or_else(|| bad("`offset_ns` is missing or not a non-negative number".into()))?;
    Ok(Correction {
        source: path.display().to_string(),
        offset_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_checked_before_their_offset_is_used() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cal.json");
        let write = |v: serde_json::Value| std::fs::write(&path, v.to_string()).unwrap();
        write(serde_json::json!({"kind": KIND, "version": VERSION, "offset_ns": 4321.5}));
        assert_eq!(load(&path).unwrap().offset_ns, 4321.5);
        write(serde_json::json!({"kind": "other", "version": VERSION, "offset_ns": 1.0}));
        assert!(load(&path)
            .unwrap_err()
            .to_string()
            .contains("not a strobe calibration"));
        write(serde_json::json!({"kind": KIND, "version": 9, "offset_ns": 1.0}));
        assert!(load(&path).unwrap_err().to_string().contains("version 9"));
        write(serde_json::json!({"kind": KIND, "version": VERSION, "offset_ns": -1.0}));
        assert!(load(&path).unwrap_err().to_string().contains("offset_ns"));
        std::fs::write(&path, "{").unwrap();
        assert!(load(&path).unwrap_err().to_string().contains("not JSON"));
    }
}
