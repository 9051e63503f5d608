//! When packets leave: `rate`, `duration` (counts, times, bursts), strobe's `timing` table
//! (departure patterns, rate steps and ramps, empirical gaps, replay), and rates and times
//! written as text.

use strobe_timing::{
    parse_duration_ns, parse_rate, Dist, Duration, EmpiricalTable, Pattern as Departures, Rate,
    RateProfile, RateStep, TimingError,
};

use crate::error::ModelError;
use crate::node::{Node, Table, Value};

use super::Loader;

pub(super) const RATE_HINT: &str = "a rate such as \"1mpps\", \"100kpps\", \"10gbps\" (layer 1), \"50%\" of the port speed, or a number of packets per second";

/// The strobe `timing` table, resolved.
pub(super) struct Timing {
    pub(super) pattern: Departures,
    pub(super) profile: Option<RateProfile>,
    pub(super) seed: Option<u64>,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            pattern: Departures::Cbr,
            profile: None,
            seed: None,
        }
    }
}

/// A rate written as text: "1mpps", "10gbps", "50%", "1000" (pps).
pub(crate) fn rate_from_text(text: &str, speed_bps: u64) -> Result<Rate, String> {
    if let Some(percent) = text.trim().strip_suffix('%') {
        let value: f64 = percent
            .trim()
            .parse()
            .map_err(|_| format!("invalid rate `{text}` — expected {RATE_HINT}"))?;
        return percentage_rate(value, speed_bps);
    }
    parse_rate(text).map_err(|e| match e {
        TimingError::ParseRate { reason, .. } => format!(
            "invalid rate `{text}`: {reason}; a percentage of the port speed such as \"50%\" is accepted too"
        ),
        other => format!("invalid rate `{text}`: {other}"),
    })
}

/// A time written as text: "10us", "1.5s", "250" (nanoseconds).
pub(crate) fn time_from_text(text: &str) -> Result<u64, String> {
    parse_duration_ns(text).map_err(|e| match e {
        TimingError::ParseDuration { reason, .. } => format!("invalid time `{text}`: {reason}"),
        other => format!("invalid time `{text}`: {other}"),
    })
}

/// A percentage of the port's line rate, as a layer-1 bit rate.
pub(crate) fn percentage_rate(percent: f64, speed_bps: u64) -> Result<Rate, String> {
    if percent > 0.0 && percent <= 100.0 {
        Ok(Rate::L1BitsPerSec(speed_bps as f64 * percent / 100.0))
    } else {
        Err(format!(
            "percentage {percent} is out of range — accepted: above 0 and at most 100 (of the port speed)"
        ))
    }
}

/// The time `bytes` take on a line of `speed_bps`, in whole nanoseconds.
pub(crate) fn bytes_to_ns(bytes: f64, speed_bps: u64) -> u64 {
    (bytes * 8.0 * 1e9 / speed_bps.max(1) as f64).round() as u64
}

impl Loader<'_> {
    pub(super) fn rate(&self, node: &Node, path: &str, speed_bps: u64) -> Result<Rate, ModelError> {
        let result = match node.get_ref() {
            Value::Str(s) => rate_from_text(s, speed_bps),
            Value::Int(_) | Value::Float(_) => {
                let pps = self.r.number(node, path, RATE_HINT)?;
                Ok(Rate::Pps(pps))
            }
            Value::Table(_) => {
                let t = self.r.table(node, path, "a rate table")?;
                let (choice, body) = self.r.choice(
                    &t,
                    &["pps", "bps", "kbps", "mbps", "gbps", "percentage"],
                    Some("pps"),
                )?;
                let cpath = format!("{path}.{choice}");
                let value = match body {
                    Some(n) => self.r.number(n, &cpath, &format!("a number of {choice}"))?,
                    None => match choice {
                        "pps" => 1000.0,
                        "bps" => 1e9,
                        "kbps" => 1e6,
                        "mbps" => 1000.0,
                        "gbps" => 1.0,
                        _ => 100.0,
                    },
                };
                let span = body.map_or(t.span.clone(), Node::span);
                return match choice {
                    "pps" => Ok(Rate::Pps(value)),
                    "bps" => Ok(Rate::L1BitsPerSec(value)),
                    "kbps" => Ok(Rate::L1BitsPerSec(value * 1e3)),
                    "mbps" => Ok(Rate::L1BitsPerSec(value * 1e6)),
                    "gbps" => Ok(Rate::L1BitsPerSec(value * 1e9)),
                    _ => percentage_rate(value, speed_bps),
                }
                .map_err(|m| self.err(&span, &cpath, m));
            }
            other => Err(format!("expected {RATE_HINT}, found {}", other.kind())),
        };
        result.map_err(|m| self.err(&node.span(), path, m))
    }

    pub(super) fn duration(
        &self,
        node: &Node,
        path: &str,
        speed_bps: u64,
        flow: &str,
        warnings: &mut Vec<crate::Warning>,
    ) -> Result<(Duration, u64), ModelError> {
        match node.get_ref() {
            // Shorthands: a packet count or a time.
            Value::Int(_) => {
                let packets = self.r.uint(node, path, u64::MAX, "a packet count")?;
                return Ok((Duration::Packets(packets), 0));
            }
            Value::Str(s) if s == "continuous" => return Ok((Duration::Continuous, 0)),
            Value::Str(s) => {
                let ns = time_from_text(s).map_err(|m| {
                    let also =
                        "a packet count, \"continuous\" or a duration table are accepted too";
                    self.err(&node.span(), path, format!("{m}; {also}"))
                })?;
                return Ok((Duration::Seconds(ns as f64 / 1e9), 0));
            }
            _ => {}
        }
        let t = self.r.table(
            node,
            path,
            "a duration table such as { fixed_packets = { packets = 1000 } }",
        )?;
        let (choice, body) = self.r.choice(
            &t,
            &["fixed_packets", "fixed_seconds", "burst", "continuous"],
            Some("continuous"),
        )?;
        let cpath = format!("{path}.{choice}");
        let empty = Table {
            entries: &[],
            span: t.span.clone(),
            path: cpath.clone(),
        };
        let b = match body {
            Some(n) => self.r.table(n, &cpath, "a table")?,
            None => empty,
        };
        let accepted: &[&str] = match choice {
            "fixed_packets" => &["packets", "gap", "delay"],
            "fixed_seconds" => &["seconds", "gap", "delay"],
            "burst" => &["bursts", "packets", "gap", "inter_burst_gap"],
            _ => &["gap", "delay"],
        };
        self.r.only(&b, accepted)?;
        if let Some(gap) = self
            .r
            .opt_uint(&b, "gap", u64::from(u32::MAX), "a gap in bytes")?
        {
            if gap != 12 {
                warnings.push(crate::Warning::GapNotUsed {
                    flow: flow.to_string(),
                    path: cpath.to_string(),
                    gap_bytes: gap,
                });
            }
        }
        let delay_ns = match b.get("delay") {
            Some(n) => self.byte_time(n, &b.child("delay"), speed_bps, 0.0)?,
            None => 0,
        };
        let duration = match choice {
            "fixed_packets" => {
                let packets = self
                    .r
                    .opt_uint(&b, "packets", u64::MAX, "a packet count")?
                    .unwrap_or(1);
                if packets == 0 {
                    return Err(self.err(
                        &b.get("packets").map_or(b.span.clone(), Node::span),
                        &b.child("packets"),
                        "packets must be at least 1",
                    ));
                }
                Duration::Packets(packets)
            }
            "fixed_seconds" => Duration::Seconds(
                self.r
                    .opt_number(&b, "seconds", "a number of seconds")?
                    .unwrap_or(1.0),
            ),
            "burst" => {
                let bursts = self
                    .r
                    .opt_uint(&b, "bursts", u64::MAX, "a number of bursts (0 = no limit)")?
                    .unwrap_or(0);
                let packets = self
                    .r
                    .opt_uint(&b, "packets", u64::MAX, "packets per burst")?
                    .unwrap_or(1);
                let inter_burst_gap_ns = match b.get("inter_burst_gap") {
                    Some(n) => self.byte_time(n, &b.child("inter_burst_gap"), speed_bps, 12.0)?,
                    None => bytes_to_ns(12.0, speed_bps),
                };
                Duration::Bursts {
                    bursts,
                    packets,
                    inter_burst_gap_ns,
                }
            }
            _ => Duration::Continuous,
        };
        Ok((duration, delay_ns))
    }

    /// OTG `{ bytes | nanoseconds | microseconds }`, converted to nanoseconds (bytes at the
    /// port's line rate).
    pub(super) fn byte_time(
        &self,
        node: &Node,
        path: &str,
        speed_bps: u64,
        default_bytes: f64,
    ) -> Result<u64, ModelError> {
        let t = self.r.table(
            node,
            path,
            "a table with bytes, nanoseconds or microseconds",
        )?;
        let (choice, body) =
            self.r
                .choice(&t, &["bytes", "nanoseconds", "microseconds"], Some("bytes"))?;
        let cpath = format!("{path}.{choice}");
        let value = match body {
            Some(n) => self.r.number(n, &cpath, &format!("a number of {choice}"))?,
            None if choice == "bytes" => default_bytes,
            None => 0.0,
        };
        Ok(match choice {
            "bytes" => bytes_to_ns(value, speed_bps),
            "nanoseconds" => value.round() as u64,
            _ => (value * 1e3).round() as u64,
        })
    }

    pub(super) fn timing(
        &self,
        node: &Node,
        path: &str,
        speed_bps: u64,
    ) -> Result<Timing, ModelError> {
        if let Value::Str(s) = node.get_ref() {
            return match s.as_str() {
                "cbr" => Ok(Timing::default()),
                "poisson" => Ok(Timing { pattern: Departures::Poisson, ..Timing::default() }),
                other => Err(self.err(
                    &node.span(),
                    path,
                    format!("unknown timing `{other}` as a string — \"cbr\" and \"poisson\" may be written alone; other patterns need a table such as {{ pattern = \"burst\", packets = 32, inter_burst_gap = \"10us\" }}"),
                )),
            };
        }
        let t = self.r.table(
            node,
            path,
            "a timing table such as { pattern = \"poisson\" }",
        )?;
        let pattern_name = self
            .r
            .opt_string(&t, "pattern", "a timing pattern name")?
            .unwrap_or("cbr");
        let own: &[&str] = match pattern_name {
            "cbr" | "poisson" => &[],
            "burst" => &["packets", "intra_gap", "inter_burst_gap"],
            "on_off" => &["on", "off"],
            "uniform" => &["min", "max"],
            "normal" | "lognormal" => &["mean", "std"],
            "pareto" | "weibull" => &["scale", "shape"],
            "exponential" => &["mean"],
            "empirical" => &["file"],
            "replay" => &["file", "speed"],
            other => {
                let span = t.get("pattern").map_or(t.span.clone(), Node::span);
                return Err(self.err(
                    &span,
                    &t.child("pattern"),
                    format!("unknown timing pattern `{other}` — accepted: cbr, poisson, burst, on_off, uniform, normal, lognormal, pareto, weibull, exponential, empirical, replay"),
                ));
            }
        };
        let mut accepted = vec!["pattern", "seed", "steps", "ramp"];
        accepted.extend_from_slice(own);
        self.r.only(&t, &accepted)?;

        let required = |key: &str| {
            let p = t.child(key);
            match t.get(key) {
                Some(n) => Ok((n, p)),
                None => Err(self.err(
                    &t.span,
                    &p,
                    format!(
                        "missing {key} — the {pattern_name} pattern needs {}",
                        own.join(" and ")
                    ),
                )),
            }
        };
        let time = |key: &str| -> Result<u64, ModelError> {
            let (n, p) = required(key)?;
            self.time(n, &p)
        };
        let real = |key: &str| -> Result<f64, ModelError> {
            let (n, p) = required(key)?;
            self.r.number(n, &p, "a number")
        };

        let pattern = match pattern_name {
            "cbr" => Departures::Cbr,
            "poisson" => Departures::Poisson,
            "burst" => {
                let p = t.child("packets");
                let packets_node = t.get("packets").ok_or_else(|| {
                    self.err(
                        &t.span,
                        &p,
                        "missing packets — the burst pattern needs packets and inter_burst_gap",
                    )
                })?;
                let packets = self
                    .r
                    .uint(packets_node, &p, u64::MAX, "packets per burst")?;
                let intra_gap_ns = t
                    .get("intra_gap")
                    .map(|n| self.time(n, &t.child("intra_gap")))
                    .transpose()?;
                Departures::Burst {
                    packets,
                    intra_gap_ns,
                    inter_burst_gap_ns: time("inter_burst_gap")?,
                }
            }
            "on_off" => Departures::OnOff {
                on_ns: time("on")?,
                off_ns: time("off")?,
            },
            "uniform" => Departures::Distribution(Dist::Uniform {
                min_ns: time("min")? as f64,
                max_ns: time("max")? as f64,
            }),
            "normal" => Departures::Distribution(Dist::Normal {
                mean_ns: time("mean")? as f64,
                std_ns: time("std")? as f64,
            }),
            "lognormal" => Departures::Distribution(Dist::LogNormal {
                mean_ns: time("mean")? as f64,
                std_ns: time("std")? as f64,
            }),
            "pareto" => Departures::Distribution(Dist::Pareto {
                scale_ns: time("scale")? as f64,
                shape: real("shape")?,
            }),
            "weibull" => Departures::Distribution(Dist::Weibull {
                scale_ns: time("scale")? as f64,
                shape: real("shape")?,
            }),
            "exponential" => Departures::Distribution(Dist::Exponential {
                mean_ns: time("mean")? as f64,
            }),
            "empirical" => {
                let (file, n, p) = self.file(&t, pattern_name)?;
                let text = self.res.read_text(file).map_err(|e| {
                    self.err(
                        &n.span(),
                        &p,
                        format!("cannot read gap table `{file}`: {e}"),
                    )
                })?;
                let table = EmpiricalTable::from_csv(&text)
                    .map_err(|e| self.err(&n.span(), &p, format!("gap table `{file}`: {e}")))?;
                Departures::Distribution(Dist::Empirical(table))
            }
            _ => {
                let (file, n, p) = self.file(&t, pattern_name)?;
                let timestamps_ns = self.res.read_capture_timestamps(file).map_err(|e| {
                    self.err(&n.span(), &p, format!("cannot read capture `{file}`: {e}"))
                })?;
                let speed = self
                    .r
                    .opt_number(&t, "speed", "a replay speed factor such as 1.0")?
                    .unwrap_or(1.0);
                Departures::Replay {
                    timestamps_ns,
                    speed,
                }
            }
        };
        let seed = self.r.opt_uint(&t, "seed", i64::MAX as u64, "a seed")?;
        let profile = match (t.get("steps"), t.get("ramp")) {
            (Some(_), Some(ramp)) => {
                return Err(self.err(
                    &ramp.span(),
                    &t.child("ramp"),
                    "give either steps or ramp, not both",
                ))
            }
            (Some(n), None) => Some(self.steps(n, &t.child("steps"), speed_bps)?),
            (None, Some(n)) => Some(self.ramp(n, &t.child("ramp"), speed_bps)?),
            (None, None) => None,
        };
        Ok(Timing {
            pattern,
            profile,
            seed,
        })
    }

    pub(super) fn file<'n>(
        &self,
        t: &Table<'n>,
        pattern: &str,
    ) -> Result<(&'n str, &'n Node, String), ModelError> {
        let p = t.child("file");
        let n = t.get("file").ok_or_else(|| {
            self.err(
                &t.span,
                &p,
                format!("missing file — the {pattern} pattern reads its data from a file"),
            )
        })?;
        Ok((self.r.string(n, &p, "a file path")?, n, p))
    }

    /// A time: a string with a unit such as "10us", or an integer number of nanoseconds.
    pub(super) fn time(&self, node: &Node, path: &str) -> Result<u64, ModelError> {
        if let Value::Int(_) = node.get_ref() {
            return self.r.uint(node, path, u64::MAX, "a number of nanoseconds");
        }
        let text = self.r.string(
            node,
            path,
            "a time such as \"250ns\", \"10us\", \"1.5ms\" or \"2s\"",
        )?;
        time_from_text(text).map_err(|m| self.err(&node.span(), path, m))
    }

    pub(super) fn steps(
        &self,
        node: &Node,
        path: &str,
        speed_bps: u64,
    ) -> Result<RateProfile, ModelError> {
        let items = self
            .r
            .array(node, path, "an array of { at, rate } tables")?;
        let mut steps = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let ipath = format!("{path}[{i}]");
            let t = self
                .r
                .table(item, &ipath, "a { at = \"1s\", rate = \"200kpps\" } table")?;
            self.r.only(&t, &["at", "rate"])?;
            let (at_node, rate_node) = match (t.get("at"), t.get("rate")) {
                (Some(a), Some(r)) => (a, r),
                _ => {
                    return Err(self.err(
                        &t.span,
                        &ipath,
                        "each step needs at and rate, e.g. { at = \"1s\", rate = \"200kpps\" }",
                    ))
                }
            };
            steps.push(RateStep {
                at_ns: self.time(at_node, &t.child("at"))?,
                rate: self.rate(rate_node, &t.child("rate"), speed_bps)?,
            });
        }
        Ok(RateProfile::Steps(steps))
    }

    pub(super) fn ramp(
        &self,
        node: &Node,
        path: &str,
        speed_bps: u64,
    ) -> Result<RateProfile, ModelError> {
        let t = self
            .r
            .table(node, path, "a { from, to, over, steps } table")?;
        self.r.only(&t, &["from", "to", "over", "steps"])?;
        let need = |key: &str| {
            t.get(key).ok_or_else(|| {
                let example = "{ from = \"100kpps\", to = \"1mpps\", over = \"10s\", steps = 10 }";
                let message =
                    format!("missing {key} — a ramp needs from, to and over, e.g. {example}");
                self.err(&t.span, &t.child(key), message)
            })
        };
        let from = self.rate(need("from")?, &t.child("from"), speed_bps)?;
        let to = self.rate(need("to")?, &t.child("to"), speed_bps)?;
        let over_ns = self.time(need("over")?, &t.child("over"))?;
        let steps = self
            .r
            .opt_uint(&t, "steps", u64::from(u32::MAX), "a number of steps")?
            .unwrap_or(10) as u32;
        Ok(RateProfile::Ramp {
            from,
            to,
            over_ns,
            steps,
        })
    }
}
