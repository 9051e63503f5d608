//! The line-rate check: no schedule can send faster than its port's line rate, so a flow
//! whose rate needs more — or the flows of a port that need more together — are rejected
//! when loaded. At layer 1 a frame costs its size (FCS included) + 20 bytes (OTG).

use strobe_timing::{
    Duration, Pattern as Departures, Rate, RateProfile, Schedule, ScheduleSpec, L1_OVERHEAD_BYTES,
};

use crate::model::{FlowSpec, Part};
use crate::size::SizeSpec;

/// Relative excess over the line rate still accepted: rates computed in floating point
/// (e.g. 14.880952 Mpps of 64-byte frames on 10 Gbit/s) land a hair above or below it.
const TOLERANCE: f64 = 1e-9;

/// Most flows named in a port's message.
const LISTED_FLOWS: usize = 8;

/// Line rates suggested when the port's speed must go up, in bit/s.
const COMMON_SPEEDS: [f64; 13] = [
    10e6, 100e6, 1e9, 2.5e9, 5e9, 10e9, 25e9, 40e9, 50e9, 100e9, 200e9, 400e9, 800e9,
];

/// The port a flow sends on, as the line-rate check sees it.
#[derive(Clone, Debug)]
pub(crate) struct TxLine {
    /// How messages name the port: "port `tx`", "the command-line port".
    pub port: String,
    pub speed_bps: u64,
    pub remedy: Remedy,
}

/// What the user can do, besides lowering the rate, to fit the port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Remedy {
    /// A scenario port without `speed`: give one.
    SetSpeed,
    /// A scenario port with `speed`: raise it.
    RaiseSpeed,
    /// The command-line port, whose speed is fixed.
    CommandLine,
    /// A port a method built (its caller says what to change).
    None,
}

impl TxLine {
    fn too_slow(&self, needed_bps: f64) -> bool {
        needed_bps > self.speed_bps as f64 * (1.0 + TOLERANCE)
    }

    /// ", or set the port's speed (e.g. speed = "25gbps")".
    fn remedy(&self, needed_bps: f64) -> String {
        let speed = suggested_speed(needed_bps, self.speed_bps);
        match self.remedy {
            Remedy::SetSpeed => format!(", or set the port's speed (e.g. speed = \"{speed}\")"),
            Remedy::RaiseSpeed => {
                format!(", or raise the port's speed (e.g. speed = \"{speed}\")")
            }
            Remedy::CommandLine => format!(
                ", use --rate max for an unpaced run, or describe a faster port in a scenario file (e.g. speed = \"{speed}\")"
            ),
            Remedy::None => String::new(),
        }
    }
}

/// A schedule of typed values checked against a port of `speed_bps`, as loading checks a
/// scenario's flows: None when it fits, else what it needs above the line, in words
/// (`port` names the port in them). For the layers that build flows from typed values (a
/// methodology's steps); the caller adds what the user should change.
pub fn line_rate_excess(
    spec: &ScheduleSpec,
    size: &SizeSpec,
    port: &str,
    speed_bps: u64,
) -> Option<String> {
    let line = TxLine {
        port: port.to_string(),
        speed_bps,
        remedy: Remedy::None,
    };
    check_flow(spec, size, &line)
        .err()
        .map(|(_, message)| message)
}

/// One rate a flow's schedule sends at, at some time, and where it is written.
struct Peak {
    part: Part,
    /// "rate 20 Mpps", "the ramp's top rate 20 Mpps".
    label: String,
    /// "lower the rate".
    fix: &'static str,
    rate: Rate,
}

/// Checks that the fastest a flow's schedule ever sends fits the line: the rate (within a
/// burst or an on-period too), every step of a rate profile, a burst's intra-burst gap, a
/// gap distribution's mean. Replays and distributions without a finite mean are not
/// checked. Expects a valid schedule.
pub(crate) fn check_flow(
    spec: &ScheduleSpec,
    size: &SizeSpec,
    line: &TxLine,
) -> Result<(), (Part, String)> {
    let mean = size.mean();
    let fastest = peaks(spec, mean)
        .into_iter()
        .map(|peak| (l1_bps(peak.rate, mean), peak))
        .max_by(|(a, _), (b, _)| a.total_cmp(b));
    let Some((bps, peak)) = fastest else {
        return Ok(());
    };
    if !line.too_slow(bps) {
        return Ok(());
    }
    let speed = fmt_bps(line.speed_bps as f64);
    let remedy = line.remedy(bps);
    let message = match peak.rate {
        Rate::L1BitsPerSec(_) => format!(
            "{} (layer 1) is above {}'s line rate of {speed} — {}{remedy}",
            peak.label, line.port, peak.fix
        ),
        Rate::Pps(_) => format!(
            "{} of {} needs {} at layer 1 ({} + {L1_OVERHEAD_BYTES} bytes per frame), above {}'s line rate of {speed} — {}{remedy}",
            peak.label,
            frames(size),
            fmt_bps(bps),
            fmt_num(mean),
            line.port,
            peak.fix
        ),
    };
    Err((peak.part, message))
}

fn peaks(spec: &ScheduleSpec, mean: f64) -> Vec<Peak> {
    let rate = |part: Part, label: &str, fix: &'static str, rate: Rate| Peak {
        part,
        label: format!("{label} {}", fmt_rate(rate)),
        fix,
        rate,
    };
    let configured = || rate(Part::Rate, "rate", "lower the rate", spec.rate);
    match &spec.pattern {
        Departures::Replay { .. } => Vec::new(),
        Departures::Distribution(_) => {
            let pps = Schedule::new(spec.clone())
                .ok()
                .and_then(|s| s.nominal_pps(mean))
                .filter(|pps| *pps > 0.0);
            pps.map(|pps| Peak {
                part: Part::Timing,
                label: format!("gaps averaging {} ({})", fmt_ns(1e9 / pps), fmt_pps(pps)),
                fix: "lengthen the gaps",
                rate: Rate::Pps(pps),
            })
            .into_iter()
            .collect()
        }
        Departures::Burst {
            intra_gap_ns: Some(gap),
            ..
        } => {
            let pps = 1e9 / (*gap).max(1) as f64;
            vec![Peak {
                part: Part::Timing,
                label: format!(
                    "intra_gap = {} ({} within a burst)",
                    fmt_ns(*gap as f64),
                    fmt_pps(pps)
                ),
                fix: "lengthen intra_gap",
                rate: Rate::Pps(pps),
            }]
        }
        Departures::Cbr
        | Departures::Poisson
        | Departures::Burst { .. }
        | Departures::OnOff { .. } => {
            match &spec.profile {
                None => vec![configured()],
                Some(RateProfile::Steps(steps)) => {
                    let mut peaks = Vec::with_capacity(steps.len() + 1);
                    // The flow's own rate holds until the first step, unless that is at once.
                    if steps.first().is_none_or(|s| s.at_ns > 0) {
                        peaks.push(configured());
                    }
                    peaks.extend(steps.iter().enumerate().map(|(i, step)| {
                        rate(
                            Part::Timing,
                            &format!("steps[{i}] rate"),
                            "lower that step's rate",
                            step.rate,
                        )
                    }));
                    peaks
                }
                Some(RateProfile::Ramp { from, to, .. }) => {
                    let top = if from.value() > to.value() { from } else { to };
                    vec![rate(
                        Part::Timing,
                        "the ramp's top rate",
                        "lower the ramp's rates",
                        *top,
                    )]
                }
            }
        }
    }
}

/// Checks that the flows sending on one port fit its line rate together, at every moment:
/// each flow counts with its long-run rate (the average over bursts, on/off periods or
/// gaps), its rate profile, its start delay and, when known, its end. Returns the message.
pub(crate) fn check_port(flows: &[&FlowSpec], line: &TxLine) -> Result<(), String> {
    let loads: Vec<Vec<(u64, f64)>> = flows.iter().map(|f| load(f)).collect();
    let mut events: Vec<(u64, f64)> = loads
        .iter()
        .flat_map(|changes| {
            let mut previous = 0.0;
            changes.iter().map(move |&(at, bps)| {
                let delta = bps - previous;
                previous = bps;
                (at, delta)
            })
        })
        .collect();
    events.sort_by_key(|&(at, _)| at);

    let mut total = 0.0;
    let mut i = 0;
    while i < events.len() {
        let at = events[i].0;
        while i < events.len() && events[i].0 == at {
            total += events[i].1;
            i += 1;
        }
        if !line.too_slow(total) {
            continue;
        }
        // Sums of differences drift; decide on the rates themselves.
        let shares: Vec<f64> = loads.iter().map(|l| rate_at(l, at)).collect();
        total = shares.iter().sum();
        if line.too_slow(total) {
            return Err(port_message(flows, &shares, total, at, line));
        }
    }
    Ok(())
}

fn port_message(
    flows: &[&FlowSpec],
    shares: &[f64],
    total: f64,
    at_ns: u64,
    line: &TxLine,
) -> String {
    let when = if at_ns > 0 {
        format!(" from {} into the run", fmt_ns(at_ns as f64))
    } else {
        String::new()
    };
    let speed = fmt_bps(line.speed_bps as f64);
    let remedy = line.remedy(total);
    let sending: Vec<(&FlowSpec, f64)> = flows
        .iter()
        .zip(shares)
        .filter(|(_, bps)| **bps > 0.0)
        .map(|(f, bps)| (*f, *bps))
        .collect();
    if let [(flow, _)] = sending[..] {
        return format!(
            "flow `{}` needs {} at layer 1 on average{when}, above {}'s line rate of {speed} — lower its rate{remedy}",
            flow.name,
            fmt_bps(total),
            line.port
        );
    }
    let mut listed: Vec<String> = sending
        .iter()
        .take(LISTED_FLOWS)
        .map(|(f, bps)| format!("`{}` {}", f.name, fmt_bps(*bps)))
        .collect();
    if sending.len() > LISTED_FLOWS {
        listed.push(format!("and {} more", sending.len() - LISTED_FLOWS));
    }
    format!(
        "the {} flows sending on {} need {} together at layer 1{when} ({}), above its line rate of {speed} — lower their rates{remedy}",
        sending.len(),
        line.port,
        fmt_bps(total),
        listed.join(", ")
    )
}

/// A flow's layer-1 load over time: (from ns after t0, bit/s) in time order; a later entry
/// at the same time replaces an earlier one. Empty when it cannot be known (replay).
fn load(flow: &FlowSpec) -> Vec<(u64, f64)> {
    let spec = &flow.schedule;
    let mean = flow.size.mean();
    let bps = |rate: Rate| l1_bps(rate, mean);
    let start = spec.start_delay_ns;
    let mut changes = match &spec.profile {
        None => {
            if matches!(spec.pattern, Departures::Replay { .. }) {
                return Vec::new();
            }
            let Some(pps) = Schedule::new(spec.clone())
                .ok()
                .and_then(|s| s.nominal_pps(mean))
            else {
                return Vec::new();
            };
            vec![(start, bps(Rate::Pps(pps)))]
        }
        Some(RateProfile::Steps(steps)) => std::iter::once((start, bps(spec.rate)))
            .chain(
                steps
                    .iter()
                    .map(|s| (start.saturating_add(s.at_ns), bps(s.rate))),
            )
            .collect(),
        // Counted at its top rate until it ends: a ramp is monotone.
        Some(RateProfile::Ramp {
            from, to, over_ns, ..
        }) => vec![
            (start, bps(*from).max(bps(*to))),
            (start.saturating_add(*over_ns), bps(*to)),
        ],
    };
    let end_ns = match spec.duration {
        Duration::Seconds(seconds) => Some((seconds * 1e9).ceil()),
        // A counted CBR flow ends once its packets are out; other counted patterns are
        // taken to run on.
        Duration::Packets(packets) if spec.profile.is_none() && spec.pattern == Departures::Cbr => {
            Some((packets as f64 * 1e9 / spec.rate.packets_per_sec(mean)).ceil())
        }
        _ => None,
    };
    if let Some(end_ns) = end_ns.filter(|ns| ns.is_finite() && *ns < u64::MAX as f64) {
        let end = start.saturating_add(end_ns as u64);
        changes.retain(|(at, _)| *at < end);
        changes.push((end, 0.0));
    }
    changes
}

/// The rate a load has at `at_ns`.
fn rate_at(changes: &[(u64, f64)], at_ns: u64) -> f64 {
    changes
        .iter()
        .take_while(|(at, _)| *at <= at_ns)
        .last()
        .map_or(0.0, |(_, bps)| *bps)
}

fn l1_bps(rate: Rate, mean_frame_len: f64) -> f64 {
    match rate {
        Rate::Pps(pps) => pps * (mean_frame_len + L1_OVERHEAD_BYTES as f64) * 8.0,
        Rate::L1BitsPerSec(bps) => bps,
    }
}

/// The smallest common line rate above `current` that carries `needed_bps`, as a `speed`.
fn suggested_speed(needed_bps: f64, current: u64) -> String {
    let fits = |speed: f64| needed_bps <= speed * (1.0 + TOLERANCE) && speed > current as f64;
    match COMMON_SPEEDS.iter().copied().find(|s| fits(*s)) {
        Some(speed) if speed >= 1e9 => format!("{}gbps", fmt_num(speed / 1e9)),
        Some(speed) => format!("{}mbps", fmt_num(speed / 1e6)),
        None => format!("{}gbps", (needed_bps / 1e9).ceil()),
    }
}

/// "64-byte frames", "frames averaging 353.83 bytes".
fn frames(size: &SizeSpec) -> String {
    match size {
        SizeSpec::Fixed(bytes) => format!("{bytes}-byte frames"),
        _ => format!("frames averaging {} bytes", fmt_num(size.mean())),
    }
}

fn fmt_rate(rate: Rate) -> String {
    match rate {
        Rate::Pps(pps) => fmt_pps(pps),
        Rate::L1BitsPerSec(bps) => fmt_bps(bps),
    }
}

fn fmt_pps(pps: f64) -> String {
    scaled(pps, &[(1e9, "Gpps"), (1e6, "Mpps"), (1e3, "kpps")], "pps")
}

fn fmt_bps(bps: f64) -> String {
    scaled(
        bps,
        &[
            (1e12, "Tbit/s"),
            (1e9, "Gbit/s"),
            (1e6, "Mbit/s"),
            (1e3, "kbit/s"),
        ],
        "bit/s",
    )
}

fn fmt_ns(ns: f64) -> String {
    scaled(ns, &[(1e9, "s"), (1e6, "ms"), (1e3, "us")], "ns")
}

fn scaled(value: f64, units: &[(f64, &str)], base: &str) -> String {
    match units.iter().find(|(scale, _)| value >= *scale) {
        Some((scale, unit)) => format!("{} {unit}", fmt_num(value / scale)),
        None => format!("{} {base}", fmt_num(value)),
    }
}

/// At most three decimals, without trailing zeros: 13.44, 14.881, 10.
fn fmt_num(value: f64) -> String {
    let text = format!("{value:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".to_string()
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_readable() {
        assert_eq!(fmt_pps(20e6), "20 Mpps");
        assert_eq!(fmt_pps(14_880_952.38), "14.881 Mpps");
        assert_eq!(fmt_pps(500.0), "500 pps");
        assert_eq!(fmt_bps(13.44e9), "13.44 Gbit/s");
        assert_eq!(fmt_bps(100e6), "100 Mbit/s");
        assert_eq!(fmt_ns(1.5e9), "1.5 s");
        assert_eq!(fmt_ns(50.0), "50 ns");
    }

    #[test]
    fn suggested_speeds_are_common_line_rates() {
        assert_eq!(suggested_speed(13.44e9, 10_000_000_000), "25gbps");
        assert_eq!(suggested_speed(10e9, 1_000_000_000), "10gbps");
        assert_eq!(suggested_speed(0.5e9, 100_000_000), "1gbps");
        assert_eq!(suggested_speed(150e6, 100_000_000), "1gbps");
        assert_eq!(suggested_speed(3e12, 10_000_000_000), "3000gbps");
    }
}
