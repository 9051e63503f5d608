//! The one-flow command-line shorthand:
//! `strobe gen --port pcap:out.pcap --udp 198.18.0.1:1000-198.18.1.1:2000 --size 128
//! --rate 1mpps --pattern poisson --count 1000000 --vary ip.src=inc:198.18.0.1/0.0.0.1/256`
//!
//! It builds the same [`Scenario`] a file would, through the same validation; errors
//! name the flag and say what it accepts.

use std::net::{IpAddr, SocketAddr};

use strobe_timing::{Duration, Pattern as Departures, ScheduleSpec};
use strobe_wire::{HeaderKind, Payload};

use crate::error::{flag_error, ModelError};
use crate::line_rate::{check_port, Remedy, TxLine};
use crate::location::PortLocation;
use crate::model::{
    finish_flow, FlowDraft, HeaderSpec, MetricsRequest, Pacing, Part, PortSpec, Resources,
    Scenario, DEFAULT_PORT_SPEED_BPS,
};
use crate::pattern::Pattern;
use crate::scenario::{
    predefined_size, rate_from_text, time_from_text, PREDEFINED_SIZE_NAMES, SIZE_SEED_BASE,
};
use crate::size::SizeSpec;
use crate::value::{check_pattern, parse_field_text};

/// Name of the single port of a command-line scenario.
pub const PORT_NAME: &str = "port0";

/// Command-line arguments of the one-flow shorthand (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuickArgs {
    /// Port location, e.g. "pcap:out.pcap".
    pub port: String,
    /// "IP:PORT-IP:PORT"; IPv6 in brackets: "[2001:2::1]:1000-[2001:2::2]:2000".
    pub udp: Option<String>,
    pub tcp: Option<String>,
    /// "IP-IP" (ICMPv6 when the addresses are IPv6).
    pub icmp: Option<String>,
    pub src_mac: Option<String>,
    pub dst_mac: Option<String>,
    /// VLAN ids, outer first: zero, one or two tags.
    pub vlan: Vec<u16>,
    /// "128" | "imix" | "64-1518" (step 1) | "64-1518/64" | "random:64-1518".
    pub size: String,
    /// "1mpps", "10gbps", "50%", a plain number of packets per second, …
    pub rate: String,
    /// "cbr" | "poisson" | "burst:32/10us" | "on_off:1ms/9ms" | "empirical:FILE" | "replay:FILE".
    pub pattern: String,
    pub count: Option<u64>,
    /// "10s", "500ms", …
    pub duration: Option<String>,
    /// "LAYER.FIELD=SPEC", e.g. "ip.src=inc:198.18.0.1/0.0.0.1/256".
    pub vary: Vec<String>,
    /// Timing seed; random sizes use `seed ^ SIZE_SEED_BASE`.
    pub seed: u64,
    /// Leave the instrumentation trailer out (no loss or latency measurement).
    pub no_trailer: bool,
    /// The rate is a placeholder for an unpaced run: skip the line-rate check.
    pub unbounded: bool,
}

impl Default for QuickArgs {
    fn default() -> Self {
        QuickArgs {
            port: "null".to_string(),
            udp: None,
            tcp: None,
            icmp: None,
            src_mac: None,
            dst_mac: None,
            vlan: Vec::new(),
            size: "64".to_string(),
            rate: "1000".to_string(),
            pattern: "cbr".to_string(),
            count: None,
            duration: None,
            vary: Vec::new(),
            seed: 1,
            no_trailer: false,
            unbounded: false,
        }
    }
}

const DEFAULT_SRC_MAC: &str = "02:00:00:00:00:01";
const DEFAULT_DST_MAC: &str = "02:00:00:00:00:02";

/// Builds the one-flow scenario the arguments describe.
pub fn build(args: &QuickArgs, res: &dyn Resources) -> Result<Scenario, ModelError> {
    if args.port.trim().is_empty() {
        return Err(flag_error(
            "--port",
            "the port location is empty — give e.g. pcap:out.pcap",
        ));
    }
    let location =
        PortLocation::parse(&args.port).map_err(|e| flag_error("--port", e.to_string()))?;
    let (l4_flag, mut packet) = stack(args)?;
    refuse_repeated_vary(&args.vary)?;
    for spec in &args.vary {
        apply_vary(&mut packet, spec)?;
    }
    let size = parse_size(&args.size)?;
    let mut rate =
        rate_from_text(&args.rate, DEFAULT_PORT_SPEED_BPS).map_err(|m| flag_error("--rate", m))?;
    let train = parse_train(&args.pattern)?;
    let pattern = match train {
        Some(_) => Departures::Cbr,
        None => parse_pattern(&args.pattern, res)?,
    };
    let (duration, duration_flag) = match (&args.count, &args.duration) {
        (Some(_), _) | (_, Some(_)) if train.is_some() => {
            return Err(flag_error(
                "--pattern",
                "a train pattern sets the flow's length (TRAINSxFRAMES): leave out --count and --duration",
            ))
        }
        _ if train.is_some() => {
            // Frames of a train back to back: at the port's line rate.
            rate = strobe_timing::Rate::L1BitsPerSec(DEFAULT_PORT_SPEED_BPS as f64);
            let (bursts, packets, inter_burst_gap_ns) = train.unwrap_or_default();
            (
                Duration::Bursts {
                    bursts,
                    packets,
                    inter_burst_gap_ns,
                },
                "--pattern",
            )
        }
        (Some(_), Some(_)) => {
            return Err(flag_error(
                "--duration",
                "give --count or --duration, not both",
            ))
        }
        (Some(0), None) => {
            return Err(flag_error("--count", "the packet count must be at least 1"))
        }
        (Some(n), None) => (Duration::Packets(*n), "--count"),
        (None, Some(text)) => {
            let ns = time_from_text(text).map_err(|m| flag_error("--duration", m))?;
            (Duration::Seconds(ns as f64 / 1e9), "--duration")
        }
        (None, None) => (Duration::Continuous, "--count"),
    };
    let name = l4_flag
        .map_or("ethernet", |f| f.trim_start_matches('-'))
        .to_string();
    let line = (!args.unbounded).then(|| TxLine {
        port: "the command-line port".to_string(),
        speed_bps: DEFAULT_PORT_SPEED_BPS,
        remedy: Remedy::CommandLine,
    });
    let draft = FlowDraft {
        name,
        id: 0,
        tx_port: PORT_NAME.to_string(),
        rx_ports: Vec::new(),
        packet,
        size,
        size_seed: args.seed ^ SIZE_SEED_BASE,
        payload: Payload::default(),
        schedule: ScheduleSpec {
            rate,
            pattern,
            duration,
            profile: None,
            start_delay_ns: 0,
            seed: args.seed,
        },
        metrics: MetricsRequest {
            instrument: args.no_trailer.then_some(false),
            ..MetricsRequest::measure_all()
        },
        line: line.clone(),
    };
    let locate = |part: Part, message: String| {
        let flag = match part {
            Part::Packet => l4_flag.unwrap_or("--vary"),
            Part::Size => "--size",
            Part::Metrics | Part::Instrument => "--no-trailer",
            Part::Rate => "--rate",
            Part::Timing => "--pattern",
            Part::Duration => duration_flag,
        };
        flag_error(flag, message)
    };
    let mut warnings = Vec::new();
    let flow = finish_flow(draft, &locate, &mut warnings)?;
    if let Some(line) = &line {
        // The flow's long-run rate: on/off periods shorter than a packet gap still send
        // one packet each.
        check_port(&[&flow], line).map_err(|m| flag_error("--rate", m))?;
    }
    Ok(Scenario {
        source: "command line".to_string(),
        ports: vec![PortSpec {
            name: PORT_NAME.to_string(),
            location,
            speed_bps: DEFAULT_PORT_SPEED_BPS,
            cores: None,
        }],
        flows: vec![flow],
        warnings,
        pacing: Pacing::Scheduled,
    })
}

/// The header stack; also returns the flag that chose the transport, if any.
fn stack(args: &QuickArgs) -> Result<(Option<&'static str>, Vec<HeaderSpec>), ModelError> {
    let given: Vec<(&'static str, &String)> = [
        ("--udp", &args.udp),
        ("--tcp", &args.tcp),
        ("--icmp", &args.icmp),
    ]
    .into_iter()
    .filter_map(|(flag, value)| value.as_ref().map(|v| (flag, v)))
    .collect();
    if given.len() > 1 {
        return Err(flag_error(
            given[1].0,
            format!(
                "{} and {} were both given — choose one of --udp, --tcp, --icmp",
                given[0].0, given[1].0
            ),
        ));
    }

    let mut ethernet = HeaderSpec::new(HeaderKind::Ethernet);
    set_text(
        &mut ethernet,
        "src",
        args.src_mac.as_deref().unwrap_or(DEFAULT_SRC_MAC),
        "--src-mac",
    )?;
    set_text(
        &mut ethernet,
        "dst",
        args.dst_mac.as_deref().unwrap_or(DEFAULT_DST_MAC),
        "--dst-mac",
    )?;
    let mut packet = vec![ethernet];

    if args.vlan.len() > 2 {
        return Err(flag_error(
            "--vlan",
            format!(
                "{} tags given — accepted: at most 2 (outer first)",
                args.vlan.len()
            ),
        ));
    }
    for id in &args.vlan {
        let mut vlan = HeaderSpec::new(HeaderKind::Vlan);
        set_text(&mut vlan, "id", &id.to_string(), "--vlan")?;
        packet.push(vlan);
    }

    let Some((flag, text)) = given.first().copied() else {
        return Ok((None, packet));
    };
    let (src, dst, ports) = if flag == "--icmp" {
        let (a, b) = parse_hosts(text).ok_or_else(|| {
            let accepted = "SRC-DST such as 198.18.0.1-198.18.1.1 or [2001:2::1]-[2001:2::2]";
            flag_error(
                flag,
                format!("invalid endpoints `{text}` — expected {accepted}"),
            )
        })?;
        (a, b, None)
    } else {
        let (a, b) = parse_sockets(text).ok_or_else(|| {
            let accepted = "SRC_IP:PORT-DST_IP:PORT such as 198.18.0.1:1000-198.18.1.1:2000, IPv6 in brackets: [2001:2::1]:1000-[2001:2::2]:2000";
            flag_error(flag, format!("invalid endpoints `{text}` — expected {accepted}"))
        })?;
        (a.ip(), b.ip(), Some((a.port(), b.port())))
    };
    let v6 = match (src, dst) {
        (IpAddr::V4(_), IpAddr::V4(_)) => false,
        (IpAddr::V6(_), IpAddr::V6(_)) => true,
        _ => {
            return Err(flag_error(
                flag,
                format!("`{text}` mixes IPv4 and IPv6 — both ends must be the same family"),
            ))
        }
    };
    let mut ip = HeaderSpec::new(if v6 {
        HeaderKind::Ipv6
    } else {
        HeaderKind::Ipv4
    });
    set_text(&mut ip, "src", &src.to_string(), flag)?;
    set_text(&mut ip, "dst", &dst.to_string(), flag)?;
    packet.push(ip);

    let l4 = match flag {
        "--udp" => HeaderKind::Udp,
        "--tcp" => HeaderKind::Tcp,
        _ if v6 => HeaderKind::Icmpv6,
        _ => HeaderKind::Icmp,
    };
    let mut transport = HeaderSpec::new(l4);
    if let Some((sport, dport)) = ports {
        set_text(&mut transport, "src_port", &sport.to_string(), flag)?;
        set_text(&mut transport, "dst_port", &dport.to_string(), flag)?;
    }
    packet.push(transport);
    Ok((Some(flag), packet))
}

/// Sets a field from text in its own format (values come from our own formatting or
/// from the user, so errors are reported on `flag`).
fn set_text(
    header: &mut HeaderSpec,
    field: &str,
    text: &str,
    flag: &str,
) -> Result<(), ModelError> {
    let (index, def) = header.kind.field(field).ok_or_else(|| {
        flag_error(
            flag,
            format!("{} has no field `{field}`", header.kind.name()),
        )
    })?;
    let value = parse_field_text(text, def).map_err(|m| flag_error(flag, m))?;
    header.set(index, Pattern::Value(value));
    Ok(())
}

/// "a:p-b:p"; IPv6 addresses contain no '-', so the first '-' separates the ends.
fn parse_sockets(text: &str) -> Option<(SocketAddr, SocketAddr)> {
    let (a, b) = text.split_once('-')?;
    Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
}

fn parse_hosts(text: &str) -> Option<(IpAddr, IpAddr)> {
    let (a, b) = text.split_once('-')?;
    let host = |s: &str| -> Option<IpAddr> {
        let s = s.trim();
        let s = s
            .strip_prefix('[')
            .and_then(|s| s.strip_suffix(']'))
            .unwrap_or(s);
        s.parse().ok()
    };
    Some((host(a)?, host(b)?))
}

const VARY_HINT: &str = "LAYER.FIELD=SPEC, e.g. ip.src=inc:198.18.0.1/0.0.0.1/256 — SPEC is inc:START/STEP/COUNT, dec:START/STEP/COUNT, rand:MIN-MAX[/SEED], values:A,B,C or a plain value";

/// Two `--vary` on one field would silently keep only the last: refused, both named.
fn refuse_repeated_vary(specs: &[String]) -> Result<(), ModelError> {
    let target = |spec: &str| {
        let (layer, field) = spec.split_once('=')?.0.trim().split_once('.')?;
        let layer = match layer {
            "eth" => "ethernet",
            "ip" | "ipv4" | "ipv6" => "ip",
            "icmp" | "icmpv6" => "icmp",
            other => other,
        };
        Some((layer.to_string(), field.trim().to_string()))
    };
    for (i, first) in specs.iter().enumerate() {
        for second in &specs[i + 1..] {
            if let (Some(a), Some(b)) = (target(first), target(second)) {
                if a == b {
                    return Err(flag_error(
                        "--vary",
                        format!(
                            "`{first}` and `{second}` both vary {}.{}: give one pattern per field \
                             (values:A,B,C lists several values)",
                            a.0, a.1
                        ),
                    ));
                }
            }
        }
    }
    Ok(())
}

fn apply_vary(packet: &mut [HeaderSpec], spec: &str) -> Result<(), ModelError> {
    let bad = |message: String| flag_error("--vary", format!("`{spec}`: {message}"));
    let (target, pattern_text) = spec
        .split_once('=')
        .ok_or_else(|| bad(format!("expected {VARY_HINT}")))?;
    let (layer, field) = target
        .trim()
        .split_once('.')
        .ok_or_else(|| bad(format!("expected {VARY_HINT}")))?;
    let wanted: &[HeaderKind] = match layer {
        "eth" | "ethernet" => &[HeaderKind::Ethernet],
        "vlan" => &[HeaderKind::Vlan],
        "ip" => &[HeaderKind::Ipv4, HeaderKind::Ipv6],
        "ipv4" => &[HeaderKind::Ipv4],
        "ipv6" => &[HeaderKind::Ipv6],
        "udp" => &[HeaderKind::Udp],
        "tcp" => &[HeaderKind::Tcp],
        "icmp" => &[HeaderKind::Icmp, HeaderKind::Icmpv6],
        "icmpv6" => &[HeaderKind::Icmpv6],
        other => {
            return Err(bad(format!(
                "unknown layer `{other}` — accepted: eth, ethernet, vlan, ip, ipv4, ipv6, udp, tcp, icmp, icmpv6"
            )))
        }
    };
    let present: Vec<&str> = packet.iter().map(|h| h.kind.name()).collect();
    let header = packet
        .iter_mut()
        .find(|h| wanted.contains(&h.kind))
        .ok_or_else(|| {
            bad(format!(
                "the packet has no {layer} header — it has {}",
                present.join(", ")
            ))
        })?;
    let kind = header.kind;
    let (index, def) = kind.field(field).ok_or_else(|| {
        let names: Vec<&str> = kind.fields().iter().map(|d| d.name).collect();
        bad(format!(
            "{} has no field `{field}` — accepted: {}",
            kind.name(),
            names.join(", ")
        ))
    })?;
    let value = |text: &str| parse_field_text(text, def).map_err(&bad);
    let count = |text: &str| -> Result<u64, ModelError> {
        text.trim()
            .parse::<u64>()
            .map_err(|_| bad(format!("invalid count `{text}` — expected a whole number")))
    };
    let text = pattern_text.trim();
    let pattern = if let Some(rest) = text
        .strip_prefix("inc:")
        .or_else(|| text.strip_prefix("dec:"))
    {
        let parts: Vec<&str> = rest.split('/').collect();
        let [start, step, n] = parts[..] else {
            return Err(bad(
                "a counter is written inc:START/STEP/COUNT or dec:START/STEP/COUNT".to_string(),
            ));
        };
        let (start, step, count) = (value(start)?, value(step)?, count(n)?);
        if text.starts_with("inc:") {
            Pattern::Increment { start, step, count }
        } else {
            Pattern::Decrement { start, step, count }
        }
    } else if let Some(rest) = text.strip_prefix("rand:") {
        // Say that random is unavailable before complaining about the bounds' format.
        let probe = Pattern::Random {
            min: 0,
            max: 0,
            seed: 0,
            count: 0,
        };
        check_pattern(kind, def, &probe).map_err(&bad)?;
        let (range, seed) = match rest.split_once('/') {
            Some((range, seed)) => (range, count(seed)?),
            None => (rest, 1),
        };
        let (min, max) = range.split_once('-').ok_or_else(|| {
            bad("random is written rand:MIN-MAX or rand:MIN-MAX/SEED".to_string())
        })?;
        Pattern::Random {
            min: value(min)?,
            max: value(max)?,
            seed,
            count: 0,
        }
    } else if let Some(rest) = text.strip_prefix("values:") {
        Pattern::Values(rest.split(',').map(value).collect::<Result<_, _>>()?)
    } else {
        Pattern::Value(value(text)?)
    };
    check_pattern(kind, def, &pattern).map_err(bad)?;
    header.set(index, pattern);
    Ok(())
}

fn parse_size(text: &str) -> Result<SizeSpec, ModelError> {
    let bad = || {
        flag_error(
            "--size",
            format!(
                "invalid size `{text}` — accepted: 128, 64-1518 (every size), 64-1518/64 (step), random:64-1518, or one of {}",
                PREDEFINED_SIZE_NAMES.join(", ")
            ),
        )
    };
    let number = |s: &str| s.trim().parse::<u32>().map_err(|_| bad());
    let text = text.trim();
    if let Some(spec) = predefined_size(text) {
        return Ok(spec);
    }
    if let Some(range) = text.strip_prefix("random:") {
        let (min, max) = range.split_once('-').ok_or_else(bad)?;
        return Ok(SizeSpec::Random {
            min: number(min)?,
            max: number(max)?,
        });
    }
    if let Some((start, rest)) = text.split_once('-') {
        let (end, step) = match rest.split_once('/') {
            Some((end, step)) => (number(end)?, number(step)?),
            None => (number(rest)?, 1),
        };
        return Ok(SizeSpec::Increment {
            start: number(start)?,
            end,
            step,
        });
    }
    Ok(SizeSpec::Fixed(number(text)?))
}

/// Reads `--pattern train:TRAINSxFRAMES/GAP` (a convoy of trains, e.g. `train:100x100/1ms`:
/// 100 trains of 100 frames, 1 ms between a train's last frame and the next one's first) as
/// (trains, frames per train, gap in ns); None for any other pattern.
pub fn parse_train(text: &str) -> Result<Option<(u64, u64, u64)>, ModelError> {
    let Some(rest) = text.trim().strip_prefix("train:") else {
        return Ok(None);
    };
    let bad = |detail: String| {
        flag_error(
            "--pattern",
            format!("{detail} — accepted: train:TRAINSxFRAMES/GAP, e.g. train:100x100/1ms (100 trains of 100 frames back to back, 1 ms apart)"),
        )
    };
    let (counts, gap) = rest
        .split_once('/')
        .ok_or_else(|| bad(format!("invalid train `{text}`")))?;
    let (trains, frames) = counts
        .split_once(['x', '×'])
        .ok_or_else(|| bad(format!("invalid train counts `{counts}`")))?;
    let count = |what: &str, n: &str| match n.trim().parse::<u64>() {
        Ok(v) if v >= 1 => Ok(v),
        _ => Err(bad(format!(
            "invalid {what} `{n}` (a whole number, at least 1)"
        ))),
    };
    let gap = time_from_text(gap.trim()).map_err(bad)?;
    Ok(Some((
        count("number of trains", trains)?,
        count("frames per train", frames)?,
        gap,
    )))
}

/// Reads a `--pattern` (`cbr`, `poisson`, `burst:32/10us`, `on_off:1ms/9ms`,
/// `empirical:FILE`, `replay:FILE`) into a timing pattern; files are read through `res`.
pub fn parse_pattern(text: &str, res: &dyn Resources) -> Result<Departures, ModelError> {
    const HINT: &str = "accepted: cbr, poisson, burst:PACKETS/INTER_BURST_GAP (e.g. burst:32/10us), on_off:ON/OFF (e.g. on_off:1ms/9ms), empirical:GAPS.CSV, replay:CAPTURE.PCAP";
    let bad = |detail: String| flag_error("--pattern", format!("{detail} — {HINT}"));
    let time = |s: &str| time_from_text(s.trim()).map_err(&bad);
    let text = text.trim();
    match text.split_once(':') {
        None => match text {
            "cbr" => Ok(Departures::Cbr),
            "poisson" => Ok(Departures::Poisson),
            _ => Err(bad(format!("unknown pattern `{text}`"))),
        },
        Some(("burst", rest)) => {
            let (packets, gap) = rest
                .split_once('/')
                .ok_or_else(|| bad(format!("invalid burst `{text}`")))?;
            let packets = packets
                .trim()
                .parse::<u64>()
                .map_err(|_| bad(format!("invalid packets per burst `{packets}`")))?;
            Ok(Departures::Burst {
                packets,
                intra_gap_ns: None,
                inter_burst_gap_ns: time(gap)?,
            })
        }
        Some(("on_off", rest)) => {
            let (on, off) = rest
                .split_once('/')
                .ok_or_else(|| bad(format!("invalid on_off `{text}`")))?;
            Ok(Departures::OnOff {
                on_ns: time(on)?,
                off_ns: time(off)?,
            })
        }
        Some(("empirical", file)) => {
            let csv = res.read_text(file).map_err(|e| {
                flag_error("--pattern", format!("cannot read gap table `{file}`: {e}"))
            })?;
            let table = strobe_timing::EmpiricalTable::from_csv(&csv)
                .map_err(|e| flag_error("--pattern", format!("gap table `{file}`: {e}")))?;
            Ok(Departures::Distribution(strobe_timing::Dist::Empirical(
                table,
            )))
        }
        Some(("replay", file)) => {
            let timestamps_ns = res.read_capture_timestamps(file).map_err(|e| {
                flag_error("--pattern", format!("cannot read capture `{file}`: {e}"))
            })?;
            Ok(Departures::Replay {
                timestamps_ns,
                speed: 1.0,
            })
        }
        Some((other, _)) => Err(bad(format!("unknown pattern `{other}`"))),
    }
}
