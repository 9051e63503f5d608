//! A `pcap:` port writes as fast as the engine runs (gigabytes a second): before the run,
//! the trace's size is estimated and a trace larger than the free space of its filesystem is
//! refused, with the numbers and what to change.

use std::path::Path;

use indicatif::HumanBytes;
use strobe_model::{FlowSpec, Scenario};
use strobe_timing::{Duration, Pattern, Rate, RateProfile};

use crate::ControlError;

/// pcap file header and per-record header, in bytes.
const FILE_HEADER: u128 = 24;
const RECORD_HEADER: u128 = 16;

/// Frames a flow sends at most; None when its schedule never ends (the engine refuses those
/// on a trace port and says how to give them an end).
fn frames_of(flow: &FlowSpec) -> Option<u128> {
    let s = &flow.schedule;
    let replayed = match &s.pattern {
        Pattern::Replay { timestamps_ns, .. } => Some(timestamps_ns.len() as u128),
        _ => None,
    };
    let scheduled = match s.duration {
        Duration::Packets(n) => Some(u128::from(n)),
        Duration::Bursts {
            bursts, packets, ..
        } if bursts > 0 => Some(u128::from(bursts) * u128::from(packets)),
        Duration::Seconds(secs) => {
            // The highest rate the flow runs at, over the whole time: an upper bound.
            let mut rates = vec![s.rate];
            match &s.profile {
                Some(RateProfile::Steps(steps)) => rates.extend(steps.iter().map(|st| st.rate)),
                Some(RateProfile::Ramp { from, to, .. }) => rates.extend([*from, *to]),
                None => {}
            }
            let pps = rates
                .iter()
                .map(|r: &Rate| r.packets_per_sec(flow.size.mean()))
                .fold(0.0, f64::max);
            let frames = (pps * secs).ceil() + 1.0;
            Some(if frames >= u128::MAX as f64 {
                u128::MAX
            } else {
                frames as u128
            })
        }
        _ => None,
    };
    match (scheduled, replayed) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Bytes free to an unprivileged writer on the filesystem that holds `file`, plus what the
/// file itself holds now (it is overwritten).
fn room_for(file: &Path) -> Option<u128> {
    let folder = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let fs = nix::sys::statvfs::statvfs(folder).ok()?;
    let free = u128::from(fs.blocks_available()) * u128::from(fs.fragment_size());
    let existing = std::fs::metadata(file).map_or(0, |m| u128::from(m.len()));
    Some(free + existing)
}

/// "about 1.50 GiB", or "more than 16.00 EiB" past what a u64 holds.
fn human(bytes: u128) -> String {
    match u64::try_from(bytes) {
        Ok(b) => format!("about {}", HumanBytes(b)),
        Err(_) => format!("more than {}", HumanBytes(u64::MAX)),
    }
}

/// Refuses a run whose pcap traces would not fit on their filesystems.
pub fn check(scenario: &Scenario) -> Result<(), ControlError> {
    'ports: for port in &scenario.ports {
        let Some(file) = port.location.pcap_file() else {
            continue;
        };
        let flows: Vec<&FlowSpec> = scenario
            .flows
            .iter()
            .filter(|f| f.tx_port == port.name)
            .collect();
        let mut frames: u128 = 0;
        let mut bytes = FILE_HEADER;
        for f in &flows {
            let Some(n) = frames_of(f) else {
                continue 'ports;
            };
            frames = frames.saturating_add(n);
            bytes =
                bytes.saturating_add(n.saturating_mul(RECORD_HEADER + u128::from(f.size.max())));
        }
        let Some(room) = room_for(Path::new(file)) else {
            continue;
        };
        if bytes > room {
            return Err(ControlError::BadInput(format!(
                "port `{}` (pcap:{file}): the trace would take {} ({frames} frames, each a \
                 16-byte record header and up to {} bytes of frame), but its filesystem has {} \
                 free: lower the frame count or the duration (fixed_packets / fixed_seconds; on \
                 the command line --count / --duration), or write the trace where there is room",
                port.name,
                human(bytes),
                flows.iter().map(|f| f.size.max()).max().unwrap_or(0),
                HumanBytes(u64::try_from(room).unwrap_or(u64::MAX)),
            )));
        }
    }
    Ok(())
}
