//! How this host's clock is synchronised, with a bound on its error: what a multi-host run
//! needs before it subtracts a transmit stamp taken on one host from a receive stamp taken on
//! another. One-way latency across hosts carries the sum of both hosts' bounds, or is
//! withheld when either host cannot justify one.
//!
//! [`probe`] asks, in this order, and reports the first that answers:
//!
//! 1. **ptp4l**, through `pmc` on ptp4l's local (Unix domain) management socket: port state,
//!    offset from the master, mean path delay, grandmaster, timestamping mode;
//! 2. **chronyd**, through `chronyc -c tracking`;
//! 3. **the kernel**, through `adjtimex(2)`: any NTP daemon that disciplines the kernel clock
//!    (ntpd, chronyd, systemd-timesyncd) shows there as `STA_UNSYNC` cleared, with the
//!    maximum and estimated errors the daemon wrote;
//!
//! and [`SyncSource::Unknown`] when none does. Each external command runs with a timeout and
//! is killed by its PID when it overruns; a missing binary is not an error, only a source
//! that is not there.
//!
//! Parsing is pure and kept apart from running anything ([`parse_pmc`],
//! [`parse_chrony_tracking`]), and so is turning what was read into a [`ClockSync`]
//! ([`ptp_sync`], [`chrony_sync`], [`kernel_sync`]). Everything the probe touches on the host
//! goes through the [`Host`] seam, so the probe's decisions are tested without the binaries.
//!
//! The parsers' fixtures (`timesync/pmc_*.txt`) are real `pmc` answers captured from two
//! ptp4l over a veth pair by `tests/timesync_capture.sh`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// How the clock is synchronised, and how far from true time it may be.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClockSync {
    pub source: SyncSource,
    /// A bound on |this clock − the reference's time| in ns that the source's own figures
    /// justify (see each source for the formula); None when the clock is not synchronised or
    /// the figures do not allow one. One-way latency between two hosts is good to the sum of
    /// their bounds, and only when they follow the same reference (the same PTP grandmaster,
    /// or both true time).
    pub error_bound_ns: Option<u64>,
    /// One line in words: what was found, and why a bound is missing when it is.
    pub detail: String,
    /// When this was checked: CLOCK_REALTIME in ns since the Unix epoch.
    pub checked_unix_ns: u64,
}

/// Where the clock's time comes from, with the figures the bound is computed from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SyncSource {
    /// ptp4l (linuxptp), read through `pmc`.
    Ptp {
        /// State of the port that decides: the SLAVE port when there is one, else a MASTER
        /// port, else the first (`SLAVE`, `MASTER`, `UNCALIBRATED`, `LISTENING`, `FAULTY`, …).
        port_state: String,
        /// offsetFromMaster: this clock − the master's, ns (0 when ptp4l did not say).
        offset_from_master_ns: i64,
        /// meanPathDelay: the mean of the two one-way delays to the master, ns (0 when ptp4l
        /// did not say).
        mean_path_delay_ns: i64,
        /// The grandmaster's clock identity, e.g. `7ea2dc.fffe.2e8f3f`: bounds of two hosts
        /// add up only when this is the same on both.
        gm_identity: String,
        /// Whether a grandmaster other than this clock is present (false on the grandmaster).
        gm_present: bool,
        /// Boundary clocks between this clock and the grandmaster, plus one.
        steps_removed: u32,
        /// The clock that carries PTP time here, which strobe stamps with:
        /// `CLOCK_REALTIME (ptp4l software timestamping)`, `PHC /dev/ptpN`, or
        /// `CLOCK_REALTIME disciplined by phc2sys`.
        stamping_clock: String,
    },
    /// chronyd, read through `chronyc -c tracking`.
    Chrony {
        /// Reference ID and name, e.g. `CB00710F (203.0.113.15)`.
        reference: String,
        stratum: u32,
        /// The system clock − chrony's NTP clock, ns: positive when the system clock is ahead
        /// (chronyc prints this as "System time", positive when *slow*; the sign is turned
        /// here to match PTP's offset from master).
        system_offset_ns: i64,
        root_delay_ns: u64,
        root_dispersion_ns: u64,
        /// `Normal`, `Insert second`, `Delete second` or `Not synchronised`.
        leap_status: String,
    },
    /// The kernel's NTP state (adjtimex(2)), as some daemon left it.
    KernelNtp {
        /// `STA_UNSYNC` is clear (and adjtimex did not return `TIME_ERROR`).
        synchronized: bool,
        /// The kernel's `maxerror` (kept in µs), in ns.
        max_error_ns: u64,
        /// The kernel's `esterror` (kept in µs), in ns.
        est_error_ns: u64,
    },
    /// Nothing answered.
    Unknown,
}

// ---------------------------------------------------------------------------------------
// pmc

/// What `pmc` said about ptp4l: the answers to `GET TIME_STATUS_NP`, `GET PORT_DATA_SET`,
/// and, when asked, `GET CURRENT_DATA_SET`, `GET PORT_PROPERTIES_NP` and
/// `GET TIME_PROPERTIES_DATA_SET`. Fields an answer did not carry are None.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PtpState {
    /// This clock's identity (from the port-0 answers), e.g. `76ef85.fffe.0d509d`.
    pub clock_identity: Option<String>,
    /// TIME_STATUS_NP `master_offset`, ns.
    pub master_offset_ns: Option<i64>,
    /// TIME_STATUS_NP `ingress_time`: when the last Sync arrived, on the local clock, ns.
    pub ingress_time_ns: Option<i64>,
    pub gm_present: Option<bool>,
    pub gm_identity: Option<String>,
    /// CURRENT_DATA_SET.
    pub steps_removed: Option<u32>,
    pub offset_from_master_ns: Option<i64>,
    pub mean_path_delay_ns: Option<i64>,
    /// TIME_PROPERTIES_DATA_SET: TAI − UTC in s, and whether the domain runs on the PTP
    /// (TAI) timescale.
    pub current_utc_offset_s: Option<i32>,
    pub ptp_timescale: Option<bool>,
    /// One entry per port, from PORT_DATA_SET and PORT_PROPERTIES_NP, in port order.
    pub ports: Vec<PtpPort>,
}

/// One ptp4l port.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PtpPort {
    /// e.g. `76ef85.fffe.0d509d-1`.
    pub identity: String,
    pub state: String,
    /// PORT_DATA_SET `delayMechanism`: 1 end-to-end, 2 peer-to-peer.
    pub delay_mechanism: Option<u8>,
    /// PORT_DATA_SET `peerMeanPathDelay` (meaningful with the peer-to-peer mechanism), ns.
    pub peer_mean_path_delay_ns: Option<i64>,
    /// PORT_PROPERTIES_NP `timestamping`: `SOFTWARE`, `HARDWARE`, `LEGACY_HW`, `ONESTEP`, …
    pub timestamping: Option<String>,
    /// PORT_PROPERTIES_NP `interface`.
    pub interface: Option<String>,
}

/// The management queries [`probe`] sends to ptp4l.
pub const PMC_QUERIES: [&str; 5] = [
    "GET TIME_STATUS_NP",
    "GET PORT_DATA_SET",
    "GET CURRENT_DATA_SET",
    "GET PORT_PROPERTIES_NP",
    "GET TIME_PROPERTIES_DATA_SET",
];

/// ptp4l's management socket when its configuration does not name another.
pub const PTP4L_DEFAULT_SOCKET: &str = "/var/run/ptp4l";

fn parse_int(value: &str) -> Option<i64> {
    value.parse().ok()
}

/// pmc prints TimeInterval values as floating ns (`-1389.0`): rounded, when finite and in
/// range.
fn parse_ns(value: &str) -> Option<i64> {
    let v: f64 = value.parse().ok()?;
    (v.is_finite() && v.abs() < 9.0e18).then(|| v.round() as i64)
}

fn parse_bool(value: &str) -> Option<bool> {
    match value {
        "true" | "1" => Some(true),
        "false" | "0" => Some(false),
        _ => None,
    }
}

/// Parses what `pmc -u -b 0 -s SOCKET 'GET TIME_STATUS_NP' 'GET PORT_DATA_SET' …` printed.
///
/// pmc prints `sending: GET …` for each query, then per answer a header line
/// (`<tab>PORT-IDENTITY seq N RESPONSE MANAGEMENT ID`) and its fields (`<tab><tab>name
/// value`); answers and `sending:` lines interleave, an answer comes once per port for port
/// data sets, and error answers (`MANAGEMENT_ERROR_STATUS`) are skipped. An error when no
/// answer carried a port state (ptp4l did not answer, or not to these queries).
pub fn parse_pmc(text: &str) -> Result<PtpState, String> {
    let mut state = PtpState::default();
    // The data set the fields below belong to, and for port data sets the port's index.
    let mut current: Option<(String, Option<usize>)> = None;
    for raw in text.lines() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with("sending:") {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        if let Some(pos) = words.iter().position(|w| *w == "RESPONSE") {
            current = None;
            if words.get(pos + 1) != Some(&"MANAGEMENT") || pos < 3 || words[pos - 2] != "seq" {
                continue;
            }
            let Some(id) = words.get(pos + 2) else {
                continue;
            };
            let port_identity = words[0];
            let port_index = match *id {
                "PORT_DATA_SET" | "PORT_PROPERTIES_NP" => {
                    Some(port_slot(&mut state.ports, port_identity))
                }
                _ => {
                    if state.clock_identity.is_none() {
                        if let Some((clock, _)) = port_identity.rsplit_once('-') {
                            state.clock_identity = Some(clock.to_string());
                        }
                    }
                    None
                }
            };
            current = Some((id.to_string(), port_index));
            continue;
        }
        if words.len() < 2 {
            continue;
        }
        let Some((set, port)) = &current else {
            continue;
        };
        let (name, value) = (words[0], words[1]);
        match (set.as_str(), name) {
            ("TIME_STATUS_NP", "master_offset") => state.master_offset_ns = parse_int(value),
            ("TIME_STATUS_NP", "ingress_time") => state.ingress_time_ns = parse_int(value),
            ("TIME_STATUS_NP", "gmPresent") => state.gm_present = parse_bool(value),
            ("TIME_STATUS_NP", "gmIdentity") => state.gm_identity = Some(value.to_string()),
            ("CURRENT_DATA_SET", "stepsRemoved") => state.steps_removed = value.parse().ok(),
            ("CURRENT_DATA_SET", "offsetFromMaster") => {
                state.offset_from_master_ns = parse_ns(value)
            }
            ("CURRENT_DATA_SET", "meanPathDelay") => state.mean_path_delay_ns = parse_ns(value),
            ("TIME_PROPERTIES_DATA_SET", "currentUtcOffset") => {
                state.current_utc_offset_s = value.parse().ok()
            }
            ("TIME_PROPERTIES_DATA_SET", "ptpTimescale") => state.ptp_timescale = parse_bool(value),
            (_, _) => {
                let Some(p) = port.and_then(|i| state.ports.get_mut(i)) else {
                    continue;
                };
                match name {
                    "portIdentity" => p.identity = value.to_string(),
                    "portState" => p.state = value.to_string(),
                    "delayMechanism" => p.delay_mechanism = value.parse().ok(),
                    "peerMeanPathDelay" => p.peer_mean_path_delay_ns = parse_ns(value),
                    "timestamping" => p.timestamping = Some(value.to_string()),
                    "interface" => p.interface = Some(value.to_string()),
                    _ => {}
                }
            }
        }
    }
    state.ports.retain(|p| !p.state.is_empty());
    if state.ports.is_empty() {
        let said = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with("sending:"));
        return Err(match said {
            None => "ptp4l did not answer".to_string(),
            Some(line) => format!("no port state in pmc's answer (it said `{}`)", clip(line)),
        });
    }
    Ok(state)
}

/// The index of the port `identity` in `ports`, added when new.
fn port_slot(ports: &mut Vec<PtpPort>, identity: &str) -> usize {
    if let Some(i) = ports.iter().position(|p| p.identity == identity) {
        return i;
    }
    ports.push(PtpPort {
        identity: identity.to_string(),
        ..PtpPort::default()
    });
    ports.len() - 1
}

/// A line of another program's output, cut short for a one-line detail.
fn clip(line: &str) -> String {
    let line = line.trim();
    match line.char_indices().nth(80) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_string(),
    }
}

/// The port whose state decides: SLAVE, else MASTER or GRAND_MASTER, else the first.
fn deciding_port(state: &PtpState) -> Option<&PtpPort> {
    let find = |names: &[&str]| {
        state
            .ports
            .iter()
            .find(|p| names.contains(&p.state.as_str()))
    };
    find(&["SLAVE"])
        .or_else(|| find(&["MASTER", "GRAND_MASTER"]))
        .or_else(|| state.ports.first())
}

/// What ptp4l's timestamps are taken on, as far as the probe could tell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stamping {
    /// Software timestamping: ptp4l disciplines CLOCK_REALTIME itself.
    Software,
    /// Hardware timestamping on this PHC (None: its device is not known), which ptp4l
    /// disciplines; CLOCK_REALTIME is left alone.
    Phc(Option<String>),
    /// Hardware timestamping, and phc2sys copies the PHC's time to CLOCK_REALTIME:
    /// `realtime_minus_phc` is one measurement of CLOCK_REALTIME − PHC (ns) with its read
    /// uncertainty, or why there is none.
    Phc2sys {
        phc: Option<String>,
        realtime_minus_phc: Result<(i128, u64), String>,
    },
    /// ptp4l did not say how it timestamps (no PORT_PROPERTIES_NP answer).
    Unknown,
}

impl Stamping {
    fn describe(&self) -> String {
        let phc = |p: &Option<String>| match p {
            Some(path) => format!("PHC {path}"),
            None => "the port's PHC".to_string(),
        };
        match self {
            Stamping::Software => "CLOCK_REALTIME (ptp4l software timestamping)".to_string(),
            Stamping::Phc(p) => phc(p),
            Stamping::Phc2sys { .. } => "CLOCK_REALTIME disciplined by phc2sys".to_string(),
            Stamping::Unknown => "unknown (ptp4l did not say how it timestamps)".to_string(),
        }
    }
}

/// ptp4l's figures as a [`ClockSync`].
///
/// The bound, relative to the grandmaster's time (the PTP timescale of the domain):
///
/// * **SLAVE port**: `|offsetFromMaster| + |meanPathDelay|`. ptp4l computes the offset from
///   the four Sync/Delay_Req timestamps assuming the path is symmetric (IEEE 1588-2019
///   §11.3 / §11.4: offset = ((t2 − t1) − (t4 − t3))/2). With one-way delays d_ms and d_sm
///   (both ≥ 0) and meanPathDelay = (d_ms + d_sm)/2, the offset ptp4l reports differs from
///   the true one by (d_ms − d_sm)/2 = d_ms − meanPathDelay, which lies within
///   ±meanPathDelay when the asymmetry is unknown. So the unknown asymmetry costs one whole
///   mean path delay, not half of it: meanPathDelay is already a one-way figure (the PTP
///   counterpart of NTP's round-trip delay/2 in chrony's bound below). The absolute value
///   keeps the bound valid when software timestamping's noise makes the measured delay
///   negative. The offset is ptp4l's last sample, not a worst case over time.
/// * **Grandmaster** (no SLAVE port, a MASTER port, `gmPresent` false): 0. It *is* the
///   reference of the domain, so its error relative to the PTP timescale is 0 by definition;
///   how far that timescale is from UTC is not known here. Hosts compare only when they
///   report the same `gm_identity`.
/// * **Any other state** (LISTENING, UNCALIBRATED, FAULTY, PASSIVE, …): None, the clock
///   does not follow a master.
///
/// Then by what strobe stamps with ([`Stamping`]): the PHC or CLOCK_REALTIME that ptp4l
/// disciplines takes the bound as it is; CLOCK_REALTIME disciplined by phc2sys adds
/// |CLOCK_REALTIME − PHC + TAI−UTC| (the TAI−UTC offset only when the domain runs on the
/// PTP timescale, which phc2sys then takes off) plus that measurement's read uncertainty;
/// an unknown stamping clock gives None.
pub fn ptp_sync(state: &PtpState, stamping: &Stamping, checked_unix_ns: u64) -> ClockSync {
    let port = deciding_port(state);
    let port_state = port.map_or_else(|| "UNKNOWN".to_string(), |p| p.state.clone());
    let offset = state.offset_from_master_ns.or(state.master_offset_ns);
    let delay = state.mean_path_delay_ns.or_else(|| {
        // Without CURRENT_DATA_SET the port's peer delay stands in, when it is measured
        // (peer-to-peer); with end-to-end it stays 0 and says nothing.
        port.filter(|p| p.delay_mechanism == Some(2))
            .and_then(|p| p.peer_mean_path_delay_ns)
    });
    let gm_present = state.gm_present.unwrap_or(false);
    let gm_identity = state.gm_identity.clone().unwrap_or_default();
    let is_grandmaster =
        !gm_present && state.gm_identity.is_some() && state.gm_identity == state.clock_identity;
    let source = SyncSource::Ptp {
        port_state: port_state.clone(),
        offset_from_master_ns: offset.unwrap_or(0),
        mean_path_delay_ns: delay.unwrap_or(0),
        gm_identity: gm_identity.clone(),
        gm_present,
        steps_removed: state.steps_removed.unwrap_or(0),
        stamping_clock: stamping.describe(),
    };
    let (ptp_bound, mut detail) = match port_state.as_str() {
        "SLAVE" => match (offset, delay) {
            (Some(o), Some(d)) => {
                let bound = o.unsigned_abs().saturating_add(d.unsigned_abs());
                (
                    Some(bound),
                    format!(
                        "ptp4l port SLAVE to grandmaster {gm_identity} ({} step(s) away): offset {o} ns, \
                         mean path delay {d} ns; bound |offset| + mean path delay (path asymmetry unknown)",
                        state.steps_removed.unwrap_or(0)
                    ),
                )
            }
            (_, None) => (
                None,
                "ptp4l port SLAVE, but no mean path delay was reported (no CURRENT_DATA_SET), \
                 so no bound"
                    .to_string(),
            ),
            (None, Some(_)) => (
                None,
                "ptp4l port SLAVE, but no offset from the master was reported, so no bound"
                    .to_string(),
            ),
        },
        "MASTER" | "GRAND_MASTER" if is_grandmaster => (
            Some(0),
            format!(
                "this clock ({gm_identity}) is the PTP grandmaster: the domain's reference, \
                 bound 0 relative to the PTP timescale (its own error against UTC is not known here)"
            ),
        ),
        "MASTER" | "GRAND_MASTER" => (
            None,
            format!(
                "ptp4l port MASTER but grandmaster {gm_identity} is another clock and no port \
                 follows it, so no bound"
            ),
        ),
        other => (
            None,
            format!("ptp4l port {other}: not synchronised to a master, so no bound"),
        ),
    };
    let bound = match (ptp_bound, stamping) {
        (None, _) => None,
        (Some(b), Stamping::Software | Stamping::Phc(_)) => Some(b),
        (Some(_), Stamping::Unknown) => {
            detail.push_str("; ptp4l did not say how it timestamps, so the clock strobe stamps with is unknown: no bound");
            None
        }
        (
            Some(b),
            Stamping::Phc2sys {
                phc,
                realtime_minus_phc,
            },
        ) => {
            let phc_name = phc.as_deref().unwrap_or("the PHC");
            let utc = if state.ptp_timescale == Some(true) {
                i128::from(state.current_utc_offset_s.unwrap_or(0)) * 1_000_000_000
            } else {
                0
            };
            match realtime_minus_phc {
                Ok((diff, uncertainty)) => {
                    let residual = diff.saturating_add(utc);
                    if residual.unsigned_abs() > 1_000_000_000 {
                        detail.push_str(&format!(
                            "; CLOCK_REALTIME is {residual} ns from {phc_name} after the TAI−UTC \
                             offset: phc2sys is not keeping them together, no bound"
                        ));
                        None
                    } else {
                        let extra = u64::try_from(residual.unsigned_abs())
                            .unwrap_or(u64::MAX)
                            .saturating_add(*uncertainty);
                        detail.push_str(&format!(
                            "; phc2sys: CLOCK_REALTIME {residual} ns from {phc_name} (read ±{uncertainty} ns), added"
                        ));
                        Some(b.saturating_add(extra))
                    }
                }
                Err(why) => {
                    detail.push_str(&format!(
                        "; phc2sys copies {phc_name} to CLOCK_REALTIME but the two could not be compared ({why}): no bound"
                    ));
                    None
                }
            }
        }
    };
    ClockSync {
        source,
        error_bound_ns: bound,
        detail,
        checked_unix_ns,
    }
}

// ---------------------------------------------------------------------------------------
// chronyc

/// What `chronyc -c tracking` printed: one CSV line of 14 fields (chrony 3 and 4):
/// reference ID (hex), name or address, stratum, reference time (s since the epoch), system
/// time (s, positive when the system clock is slow), last offset, RMS offset (s),
/// frequency, residual frequency, skew (ppm), root delay, root dispersion (s), update
/// interval (s), leap status.
#[derive(Clone, Debug, PartialEq)]
pub struct ChronyTracking {
    pub reference_id: String,
    pub reference_name: String,
    pub stratum: u32,
    /// "System time" as chronyc prints it: NTP time − system time, s (positive: slow).
    pub system_time_s: f64,
    pub last_offset_s: f64,
    pub root_delay_s: f64,
    pub root_dispersion_s: f64,
    pub update_interval_s: f64,
    pub leap_status: String,
}

/// The reference ID chrony reports when it serves its own clock (`local` directive).
pub const CHRONY_LOCAL_REFID: &str = "7F7F0101";

/// Parses `chronyc -c tracking` (the first line with a comma); an error for anything else,
/// such as `506 Cannot talk to daemon`.
pub fn parse_chrony_tracking(csv_text: &str) -> Result<ChronyTracking, String> {
    let Some(line) = csv_text.lines().map(str::trim).find(|l| l.contains(',')) else {
        let said = csv_text.lines().map(str::trim).find(|l| !l.is_empty());
        return Err(match said {
            Some(l) => format!("chronyc said `{}`", clip(l)),
            None => "chronyc printed nothing".to_string(),
        });
    };
    let fields: Vec<&str> = line.split(',').map(str::trim).collect();
    if fields.len() < 14 {
        return Err(format!(
            "chronyc -c tracking gave {} fields, expected 14: `{}`",
            fields.len(),
            clip(line)
        ));
    }
    let seconds = |i: usize, name: &str| -> Result<f64, String> {
        match fields[i].parse::<f64>() {
            Ok(v) if v.is_finite() && v.abs() < 1.0e9 => Ok(v),
            _ => Err(format!(
                "chronyc -c tracking: {name} `{}` is not a number of seconds",
                clip(fields[i])
            )),
        }
    };
    let reference_id = fields[0];
    if reference_id.is_empty() || !reference_id.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!(
            "chronyc -c tracking: reference ID `{}` is not hexadecimal",
            clip(reference_id)
        ));
    }
    Ok(ChronyTracking {
        reference_id: reference_id.to_string(),
        reference_name: fields[1].to_string(),
        stratum: fields[2].parse().map_err(|_| {
            format!(
                "chronyc -c tracking: stratum `{}` is not a number",
                clip(fields[2])
            )
        })?,
        system_time_s: seconds(4, "system time")?,
        last_offset_s: seconds(5, "last offset")?,
        root_delay_s: seconds(10, "root delay")?,
        root_dispersion_s: seconds(11, "root dispersion")?,
        update_interval_s: seconds(12, "update interval")?,
        leap_status: fields[13].to_string(),
    })
}

/// Seconds to whole ns, rounded (callers pass values under 1e9 s).
fn ns_of(seconds: f64) -> i64 {
    (seconds * 1e9).round() as i64
}

/// chronyd's figures as a [`ClockSync`].
///
/// The bound is chrony's own, from chronyc(1), `tracking`, "Root dispersion": "An absolute
/// bound on the computer's clock accuracy (assuming the stratum-1 computer is correct) is
/// given by: clock_error <= |system_time_offset| + root_dispersion + (0.5 * root_delay)".
/// Root delay is the round trip to the stratum-1 server, so half of it bounds the error of
/// an unknown path asymmetry; root dispersion gathers every other error on the way (and
/// grows with the time since the last update). Half a root delay is rounded up. None when chrony is
/// not synchronised (leap status `Not synchronised`) or serves only its own clock (reference
/// ID 7F7F0101, the `local` directive).
pub fn chrony_sync(t: &ChronyTracking, checked_unix_ns: u64) -> ClockSync {
    let reference = if t.reference_name.is_empty() {
        t.reference_id.clone()
    } else {
        format!("{} ({})", t.reference_id, t.reference_name)
    };
    // chronyc prints whole ns (9 decimals), so these are exact.
    let system_offset_ns = -ns_of(t.system_time_s);
    let root_delay_ns = ns_of(t.root_delay_s).unsigned_abs();
    let root_dispersion_ns = ns_of(t.root_dispersion_s).unsigned_abs();
    let source = SyncSource::Chrony {
        reference: reference.clone(),
        stratum: t.stratum,
        system_offset_ns,
        root_delay_ns,
        root_dispersion_ns,
        leap_status: t.leap_status.clone(),
    };
    let (bound, detail) = if t.leap_status == "Not synchronised" {
        (
            None,
            "chronyd runs but is not synchronised (leap status `Not synchronised`), so no bound"
                .to_string(),
        )
    } else if t.reference_id.eq_ignore_ascii_case(CHRONY_LOCAL_REFID) {
        (
            None,
            "chronyd serves its own local clock (reference 7F7F0101, `local` mode), not a time \
             source, so no bound"
                .to_string(),
        )
    } else {
        let bound = system_offset_ns
            .unsigned_abs()
            .saturating_add(root_delay_ns.div_ceil(2))
            .saturating_add(root_dispersion_ns);
        (
            Some(bound),
            format!(
                "chronyd synchronised to {reference}, stratum {}: system clock offset \
                 {system_offset_ns} ns, root delay {root_delay_ns} ns, root dispersion \
                 {root_dispersion_ns} ns; bound |offset| + root delay/2 + root dispersion \
                 (chronyc docs)",
                t.stratum
            ),
        )
    };
    ClockSync {
        source,
        error_bound_ns: bound,
        detail,
        checked_unix_ns,
    }
}

// ---------------------------------------------------------------------------------------
// adjtimex

/// What adjtimex(2) read with `modes = 0` (it changes nothing then).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelTimex {
    /// adjtimex's return value: the clock state (`TIME_OK` 0 … `TIME_ERROR` 5).
    pub state: i32,
    /// `status` bits (`STA_UNSYNC` = 0x40).
    pub status: i32,
    /// `maxerror` and `esterror`, in µs as the kernel keeps them.
    pub max_error_us: i64,
    pub est_error_us: i64,
}

/// adjtimex `status` bit: the clock is not synchronised.
pub const STA_UNSYNC: i32 = 0x0040;
/// adjtimex return value: the clock is not synchronised.
pub const TIME_ERROR: i32 = 5;

/// Time daemons known to write `maxerror` = 0 when they discipline the kernel clock
/// (systemd-timesyncd; linuxptp's ptp4l and phc2sys), by their `comm` name (15 characters
/// at most): with one of them running, the kernel's maxerror is no bound.
pub const MAXERROR_ZERO_WRITERS: [&str; 3] = ["systemd-timesyn", "phc2sys", "ptp4l"];

/// The kernel's NTP state as a [`ClockSync`].
///
/// The bound is the kernel's `maxerror` while synchronised: the NTP kernel interface
/// (RFC 1589, ntp_adjtime(3), adjtimex(2) "maxerror: maximum error (microseconds)") keeps a
/// maximum error that the daemon sets at each update — ntpd and chronyd set it to their
/// root delay/2 + root dispersion — and that the kernel grows by 500 µs every second after
/// (`MAXFREQ`), setting `STA_UNSYNC` once it passes 16 s. That holds only for a daemon that
/// writes a real figure: systemd-timesyncd and linuxptp write 0, so with one of
/// `zero_writers_running` the bound is withheld. None too when not synchronised.
pub fn kernel_sync(
    t: &KernelTimex,
    zero_writers_running: &[String],
    checked_unix_ns: u64,
) -> ClockSync {
    let synchronized = t.status & STA_UNSYNC == 0 && t.state != TIME_ERROR;
    let us_to_ns = |us: i64| u64::try_from(us).unwrap_or(0).saturating_mul(1000);
    let source = SyncSource::KernelNtp {
        synchronized,
        max_error_ns: us_to_ns(t.max_error_us),
        est_error_ns: us_to_ns(t.est_error_us),
    };
    let (bound, detail) = if !synchronized {
        (
            None,
            format!(
                "the kernel clock is not synchronised (adjtimex: STA_UNSYNC{}), so no bound",
                if t.state == TIME_ERROR {
                    ", TIME_ERROR"
                } else {
                    ""
                }
            ),
        )
    } else if !zero_writers_running.is_empty() {
        (
            None,
            format!(
                "the kernel clock is synchronised, but {} writes maxerror 0, so the kernel's \
                 maximum error ({} µs) is no bound",
                zero_writers_running.join(", "),
                t.max_error_us
            ),
        )
    } else {
        (
            Some(us_to_ns(t.max_error_us)),
            format!(
                "the kernel clock is synchronised by an NTP daemon (adjtimex): maximum error {} µs, \
                 estimated error {} µs; bound = maxerror",
                t.max_error_us, t.est_error_us
            ),
        )
    };
    ClockSync {
        source,
        error_bound_ns: bound,
        detail,
        checked_unix_ns,
    }
}

// ---------------------------------------------------------------------------------------
// The host seam and the probe

/// How an external command ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CommandOutcome {
    /// The binary is not installed (not on PATH nor in the sbin directories).
    NotFound,
    /// It ran to the end.
    Exited {
        success: bool,
        stdout: String,
        stderr: String,
    },
    /// It overran the timeout and was killed by its PID.
    TimedOut,
    /// It could not be started or waited for.
    Failed(String),
}

/// Everything the probe asks of the host, so its decisions are tested without the binaries.
pub trait Host {
    /// Runs `program` with `args`, killed after `timeout`.
    fn run(&self, program: &str, args: &[&str], timeout: Duration) -> CommandOutcome;
    fn exists(&self, path: &Path) -> bool;
    /// adjtimex(2) with `modes = 0`.
    fn adjtimex(&self) -> Result<KernelTimex, String>;
    /// Whether a process with this `comm` name runs.
    fn process_running(&self, comm: &str) -> bool;
    /// The PHC device of `iface` (in namespace `netns`), e.g. `/dev/ptp0`.
    fn interface_phc(&self, netns: Option<&str>, iface: &str) -> Option<String>;
    /// One measurement of CLOCK_REALTIME − `phc` in ns, with its read uncertainty.
    fn realtime_minus_phc(&self, phc: &str) -> Result<(i128, u64), String>;
    /// CLOCK_REALTIME, ns since the Unix epoch.
    fn now_unix_ns(&self) -> u64;
}

/// Where [`probe`] looks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeOptions {
    /// ptp4l's management socket (`uds_address`); None skips ptp4l.
    pub pmc_socket: Option<PathBuf>,
    /// The network namespace ptp4l's interfaces live in, to find their PHC.
    pub netns: Option<String>,
    /// How long each external command may take before it is killed.
    pub timeout: Duration,
}

impl Default for ProbeOptions {
    fn default() -> Self {
        ProbeOptions {
            pmc_socket: Some(PathBuf::from(PTP4L_DEFAULT_SOCKET)),
            netns: None,
            timeout: Duration::from_secs(2),
        }
    }
}

/// How this host's clock is synchronised: ptp4l, then chronyd, then the kernel's NTP state,
/// else [`SyncSource::Unknown`]. Never fails and never hangs (each command is killed after
/// `options.timeout`); what was tried and not found is said in the detail.
pub fn probe(options: &ProbeOptions) -> ClockSync {
    probe_with(&SystemHost, options)
}

/// [`probe`] over any [`Host`].
pub fn probe_with(host: &dyn Host, options: &ProbeOptions) -> ClockSync {
    let mut tried: Vec<String> = Vec::new();
    if let Some(found) = try_ptp(host, options, &mut tried) {
        return with_tried(found, &tried);
    }
    if let Some(found) = try_chrony(host, options, &mut tried) {
        return with_tried(found, &tried);
    }
    match host.adjtimex() {
        Ok(t) => {
            let writers: Vec<String> = MAXERROR_ZERO_WRITERS
                .iter()
                .filter(|comm| host.process_running(comm))
                .map(|comm| comm.to_string())
                .collect();
            with_tried(kernel_sync(&t, &writers, host.now_unix_ns()), &tried)
        }
        Err(why) => {
            tried.push(format!("adjtimex: {why}"));
            ClockSync {
                source: SyncSource::Unknown,
                error_bound_ns: None,
                detail: format!("no clock synchronisation found: {}", tried.join("; "))
                    .replace(['\n', '\r'], " "),
                checked_unix_ns: host.now_unix_ns(),
            }
        }
    }
}

/// Appends what was tried before the source that answered, keeping the detail one line.
fn with_tried(mut found: ClockSync, tried: &[String]) -> ClockSync {
    if !tried.is_empty() {
        found.detail = format!("{} (tried first: {})", found.detail, tried.join("; "));
    }
    found.detail = found.detail.replace(['\n', '\r'], " ");
    found
}

fn describe_failure(program: &str, outcome: &CommandOutcome, timeout: Duration) -> String {
    match outcome {
        CommandOutcome::NotFound => format!("{program} is not installed"),
        CommandOutcome::TimedOut => {
            format!("{program} did not finish in {timeout:?} and was killed")
        }
        CommandOutcome::Failed(why) => format!("{program} could not run: {why}"),
        CommandOutcome::Exited { stdout, stderr, .. } => {
            let said = stderr
                .lines()
                .chain(stdout.lines())
                .map(str::trim)
                .find(|l| !l.is_empty() && !l.starts_with("sending:"));
            match said {
                Some(line) => format!("{program}: {}", clip(line)),
                None => format!("{program} printed nothing useful"),
            }
        }
    }
}

fn try_ptp(host: &dyn Host, options: &ProbeOptions, tried: &mut Vec<String>) -> Option<ClockSync> {
    let socket = options.pmc_socket.as_ref()?;
    if !host.exists(socket) {
        tried.push(format!("no ptp4l socket at {}", socket.display()));
        return None;
    }
    let socket_text = socket.to_string_lossy().into_owned();
    let mut args = vec!["-u", "-b", "0", "-s", socket_text.as_str()];
    args.extend(PMC_QUERIES);
    let outcome = host.run("pmc", &args, options.timeout);
    let CommandOutcome::Exited { stdout, .. } = &outcome else {
        tried.push(describe_failure("pmc", &outcome, options.timeout));
        return None;
    };
    let state = match parse_pmc(stdout) {
        Ok(state) => state,
        Err(why) => {
            tried.push(format!("pmc on {socket_text}: {why}"));
            return None;
        }
    };
    let stamping = stamping_of(host, options, &state);
    Some(ptp_sync(&state, &stamping, host.now_unix_ns()))
}

/// What ptp4l's deciding port timestamps with, and whether phc2sys carries it to
/// CLOCK_REALTIME.
fn stamping_of(host: &dyn Host, options: &ProbeOptions, state: &PtpState) -> Stamping {
    let Some(port) = deciding_port(state) else {
        return Stamping::Unknown;
    };
    match port.timestamping.as_deref() {
        None => Stamping::Unknown,
        Some("SOFTWARE") => Stamping::Software,
        Some(_) => {
            let phc = port
                .interface
                .as_deref()
                .and_then(|iface| host.interface_phc(options.netns.as_deref(), iface));
            if host.process_running("phc2sys") {
                let realtime_minus_phc = match &phc {
                    Some(path) => host.realtime_minus_phc(path),
                    None => Err("the port's PHC is not known".to_string()),
                };
                Stamping::Phc2sys {
                    phc,
                    realtime_minus_phc,
                }
            } else {
                Stamping::Phc(phc)
            }
        }
    }
}

fn try_chrony(
    host: &dyn Host,
    options: &ProbeOptions,
    tried: &mut Vec<String>,
) -> Option<ClockSync> {
    let outcome = host.run("chronyc", &["-c", "-n", "tracking"], options.timeout);
    let CommandOutcome::Exited {
        stdout, success, ..
    } = &outcome
    else {
        tried.push(describe_failure("chronyc", &outcome, options.timeout));
        return None;
    };
    if !success {
        tried.push(describe_failure("chronyc", &outcome, options.timeout));
        return None;
    }
    match parse_chrony_tracking(stdout) {
        Ok(t) => Some(chrony_sync(&t, host.now_unix_ns())),
        Err(why) => {
            tried.push(why);
            None
        }
    }
}

// ---------------------------------------------------------------------------------------
// The real host

/// The machine itself.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemHost;

/// Largest output kept from a command; the rest is not read (a command that keeps writing is
/// killed at its timeout).
const OUTPUT_LIMIT: u64 = 1 << 20;

/// Where time daemons' tools live when PATH (of a non-root user) leaves out the sbin
/// directories.
const EXTRA_DIRS: [&str; 5] = ["/usr/sbin", "/sbin", "/usr/local/sbin", "/usr/bin", "/bin"];

/// `program`'s path: as given when it has a slash, else the first executable file of that
/// name on PATH or in the sbin directories.
pub fn find_program(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let path = PathBuf::from(program);
        return executable(&path).then_some(path);
    }
    let path_var = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path_var)
        .chain(EXTRA_DIRS.iter().map(PathBuf::from))
        .map(|dir| dir.join(program))
        .find(|candidate| executable(candidate))
}

/// Runs `program` with `args`, stdin closed, in the C locale; kills it by its PID once
/// `timeout` has passed and reaps it. Never waits longer than `timeout` plus a moment for
/// the output pipes.
pub fn run_command(program: &str, args: &[&str], timeout: Duration) -> CommandOutcome {
    let Some(path) = find_program(program) else {
        return CommandOutcome::NotFound;
    };
    let spawned = Command::new(&path)
        .args(args)
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return CommandOutcome::NotFound,
        Err(e) => return CommandOutcome::Failed(e.to_string()),
    };
    // The pipes are read on threads, so a child that fills one does not stall; a thread is
    // left behind only if a grandchild keeps a pipe open past the deadline.
    let (tx, rx) = mpsc::channel::<(bool, String)>();
    for (is_stdout, pipe) in [
        (
            true,
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ),
        (
            false,
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ),
    ] {
        let Some(pipe) = pipe else { continue };
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.take(OUTPUT_LIMIT).read_to_end(&mut bytes);
            let _ = tx.send((is_stdout, String::from_utf8_lossy(&bytes).into_owned()));
        });
    }
    drop(tx);
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(1);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                // Child::kill sends SIGKILL to this child's PID, and only to it.
                let _ = child.kill();
                let _ = child.wait();
                return CommandOutcome::TimedOut;
            }
            Ok(None) => {
                std::thread::sleep(pause.min(deadline.saturating_duration_since(Instant::now())));
                pause = (pause * 2).min(Duration::from_millis(20));
            }
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return CommandOutcome::Failed(format!("cannot wait for {program}: {e}"));
            }
        }
    };
    let (mut stdout, mut stderr) = (String::new(), String::new());
    let drain_until = Instant::now() + Duration::from_millis(200);
    for _ in 0..2 {
        match rx.recv_timeout(drain_until.saturating_duration_since(Instant::now())) {
            Ok((true, text)) => stdout = text,
            Ok((false, text)) => stderr = text,
            Err(_) => break,
        }
    }
    CommandOutcome::Exited {
        success: status.success(),
        stdout,
        stderr,
    }
}

/// adjtimex(2) with `modes = 0`: reads the kernel's NTP state and changes nothing.
pub fn read_adjtimex() -> Result<KernelTimex, String> {
    // SAFETY: timex is plain old data, for which all zeroes is a valid value; modes = 0
    // makes adjtimex a read.
    let mut tx: libc::timex = unsafe { std::mem::zeroed() };
    // SAFETY: `tx` is a valid, writable timex that outlives the call; with modes = 0
    // adjtimex only fills it in and adjusts nothing.
    let state = unsafe { libc::adjtimex(&mut tx) };
    if state < 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    Ok(KernelTimex {
        state,
        status: tx.status,
        max_error_us: tx.maxerror,
        est_error_us: tx.esterror,
    })
}

/// Whether a process whose `comm` is `comm` runs (read from /proc/PID/comm).
pub fn process_running(comm: &str) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .any(|e| std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim_end() == comm))
}

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

impl Host for SystemHost {
    fn run(&self, program: &str, args: &[&str], timeout: Duration) -> CommandOutcome {
        run_command(program, args, timeout)
    }
    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }
    fn adjtimex(&self) -> Result<KernelTimex, String> {
        read_adjtimex()
    }
    fn process_running(&self, comm: &str) -> bool {
        process_running(comm)
    }
    fn interface_phc(&self, netns: Option<&str>, iface: &str) -> Option<String> {
        crate::tsinfo::query_ts_info(netns, iface).ok()?.phc_path()
    }
    fn realtime_minus_phc(&self, phc: &str) -> Result<(i128, u64), String> {
        use crate::clocksync::{sync_once, PhcClock, SystemClock, SAMPLES_PER_ROUND};
        let mut realtime = SystemClock::by_name("realtime").ok_or("no CLOCK_REALTIME")?;
        let mut phc = PhcClock::open(phc).map_err(|e| e.to_string())?;
        // sync_once gives B − A with A = CLOCK_REALTIME, B = the PHC.
        let sample =
            sync_once(&mut realtime, &mut phc, SAMPLES_PER_ROUND).map_err(|e| e.to_string())?;
        Ok((-sample.offset_ns, sample.uncertainty_ns))
    }
    fn now_unix_ns(&self) -> u64 {
        unix_ns()
    }
}

#[cfg(test)]
mod tests;
