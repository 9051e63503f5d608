//! Loading a TOML scenario file (OTG names and shapes, plus strobe's `timing` extension).
//! SCENARIO.md in this crate documents the format.

use std::collections::HashMap;
use std::ops::Range;

use strobe_timing::{
    parse_duration_ns, parse_rate, Dist, Duration, EmpiricalTable, Pattern as Departures, Rate,
    RateProfile, RateStep, ScheduleSpec, TimingError,
};
use strobe_wire::{FieldDef, FieldFormat, HeaderKind, Payload};

use crate::error::{Locator, ModelError};
use crate::line_rate::{check_port, Remedy, TxLine};
use crate::model::{
    finish_flow, FlowDraft, FlowSpec, HeaderSpec, LatencyMode, MetricsRequest, Pacing, Part,
    PortSpec, Resources, Scenario, DEFAULT_PORT_SPEED_BPS, MAX_CORES, MAX_FLOWS,
};
use crate::node::{parse_document, Node, Reader, Table, Value};
use crate::pattern::Pattern;
use crate::size::SizeSpec;
use crate::value::{
    check_pattern, format_hint, parse_field_int, parse_field_text, parse_hex_bytes,
    COUNT_AT_LEAST_ONE,
};

/// High bits of the default timing seed; the low bits are the flow index.
pub const TIMING_SEED_BASE: u64 = 0x5449_4D45_0000_0000; // "TIME"
/// High bits of the default size seed; the low bits are the flow index.
pub const SIZE_SEED_BASE: u64 = 0x5349_5A45_0000_0000; // "SIZE"

/// Default timing seed of flow `index` when the scenario gives none.
pub fn default_timing_seed(index: usize) -> u64 {
    TIMING_SEED_BASE | index as u64
}

/// Default size seed of flow `index` when the scenario gives none.
pub fn default_size_seed(index: usize) -> u64 {
    SIZE_SEED_BASE | index as u64
}

/// OTG's predefined size distributions. Fractional OTG weights are kept to two decimals
/// by scaling them by 100.
const PREDEFINED_SIZES: [(&str, &[(u32, u32)]); 5] = [
    ("imix", &[(64, 7), (570, 4), (1518, 1)]),
    (
        "ipsec_imix",
        &[(90, 5867), (92, 200), (594, 2366), (1418, 1567)],
    ),
    (
        "ipv6_imix",
        &[(60, 5867), (496, 200), (594, 2366), (1518, 1567)],
    ),
    (
        "standard_imix",
        &[(58, 5867), (62, 200), (594, 2366), (1518, 1567)],
    ),
    (
        "tcp_imix",
        &[(90, 5867), (92, 200), (594, 2366), (1518, 1567)],
    ),
];

const RATE_HINT: &str = "a rate such as \"1mpps\", \"100kpps\", \"10gbps\" (layer 1), \"50%\" of the port speed, or a number of packets per second";

/// Parses and validates a scenario. `source` names the file in error messages; files the
/// scenario refers to are read through `res`.
pub fn load_scenario(
    text: &str,
    source: &str,
    res: &dyn Resources,
) -> Result<Scenario, ModelError> {
    let loc = Locator::new(source, text);
    check_flow_tables(text, &loc)?;
    let root = parse_document(text, &loc)?;
    let loader = Loader {
        r: Reader { loc },
        res,
    };
    loader.scenario(&root, source)
}

/// Parses and validates a scenario given as a JSON document with the same keys (an OTG
/// config after the control layer's mapping). Errors name the path; `source` names the
/// document.
pub fn load_scenario_json(
    value: &serde_json::Value,
    source: &str,
    res: &dyn Resources,
) -> Result<Scenario, ModelError> {
    let loc = Locator::new(source, "");
    let flows = value
        .get("flows")
        .and_then(serde_json::Value::as_array)
        .map_or(0, Vec::len);
    if flows > MAX_FLOWS {
        return Err(loc.error(
            None,
            "flows",
            format!(
                "{flows} flows — at most {MAX_FLOWS} flows are accepted (flow ids are 16 bits)"
            ),
        ));
    }
    let root = crate::node::from_json(value)
        .ok_or_else(|| loc.error(None, "", "the scenario is null — give ports and flows"))?;
    let loader = Loader {
        r: Reader { loc },
        res,
    };
    loader.scenario(&root, source)
}

/// Refuses a file with more `[[flows]]` tables than there are flow ids before the TOML
/// tree is built: the tree costs kilobytes per flow (70 000 flows took half a gigabyte).
/// Flows written as an inline array are counted after parsing, in `Loader::scenario`.
fn check_flow_tables(text: &str, loc: &Locator<'_>) -> Result<(), ModelError> {
    let mut count = 0usize;
    let mut offset = 0usize;
    for line in text.split_inclusive('\n') {
        let header = line
            .trim_start()
            .strip_prefix("[[")
            .and_then(|rest| rest.split_once("]]"))
            .map(|(name, _)| name.trim());
        if header == Some("flows") {
            count += 1;
            if count > MAX_FLOWS {
                return Err(loc.error(
                    Some(&(offset..offset + line.len())),
                    "flows",
                    format!(
                        "more than {MAX_FLOWS} [[flows]] tables — at most {MAX_FLOWS} flows are \
                         accepted (flow ids are 16 bits)"
                    ),
                ));
            }
        }
        offset += line.len();
    }
    Ok(())
}

struct Loader<'a> {
    r: Reader<'a>,
    res: &'a dyn Resources,
}

/// A flow's view of its ports: name → line rate.
type PortSpeeds = HashMap<String, TxLine>;

/// Where a port is written, for errors about its line rate.
struct PortPlace {
    path: String,
    /// The `speed` value, or the port table when `speed` is not given.
    span: Range<usize>,
}

impl Loader<'_> {
    fn err(&self, span: &Range<usize>, path: &str, message: impl Into<String>) -> ModelError {
        self.r.error(span, path, message)
    }

    fn scenario(&self, root: &Node, source: &str) -> Result<Scenario, ModelError> {
        let top = self.r.table(root, "", "a table")?;
        self.r.only(&top, &["ports", "flows", "run"])?;
        let pacing = match top.get("run") {
            Some(run) => self.pacing(run)?,
            None => Pacing::Scheduled,
        };

        let ports_node = top.get("ports").ok_or_else(|| {
            self.r.loc.error(
                None,
                "ports",
                "the scenario defines no ports — add a [[ports]] table with name and location",
            )
        })?;
        let (ports, places) = self.ports(ports_node)?;
        let speeds: PortSpeeds = ports
            .iter()
            .zip(&places)
            .map(|(p, place)| {
                let remedy = if place.path.ends_with(".speed") {
                    Remedy::RaiseSpeed
                } else {
                    Remedy::SetSpeed
                };
                let line = TxLine {
                    port: format!("port `{}`", p.name),
                    speed_bps: p.speed_bps,
                    remedy,
                };
                (p.name.clone(), line)
            })
            .collect();

        let flows_node = top.get("flows").ok_or_else(|| {
            self.r.loc.error(
                None,
                "flows",
                "the scenario defines no flows — add a [[flows]] table",
            )
        })?;
        let flow_nodes = self
            .r
            .array(flows_node, "flows", "an array of [[flows]] tables")?;
        if flow_nodes.is_empty() {
            return Err(self.err(
                &flows_node.span(),
                "flows",
                "no flows — add at least one [[flows]] table",
            ));
        }
        if flow_nodes.len() > MAX_FLOWS {
            return Err(self.err(
                &flows_node.span(),
                "flows",
                format!(
                    "{} flows — at most {MAX_FLOWS} are accepted (flow ids are 16 bits)",
                    flow_nodes.len()
                ),
            ));
        }

        let mut warnings = Vec::new();
        let mut flows = Vec::with_capacity(flow_nodes.len());
        let mut names: HashMap<String, usize> = HashMap::new();
        for (index, node) in flow_nodes.iter().enumerate() {
            let flow = self.flow(node, index, &speeds, &mut warnings)?;
            if let Some(first) = names.insert(flow.name.clone(), index) {
                let path = format!("flows[{index}].name");
                let table = self.r.table(node, &path, "a table")?;
                let span = table.get("name").map_or(table.span.clone(), Node::span);
                return Err(self.err(
                    &span,
                    &path,
                    format!(
                        "flow name `{}` is already used by flows[{first}] — flow names must be unique",
                        flow.name
                    ),
                ));
            }
            flows.push(flow);
        }
        for (port, place) in ports.iter().zip(&places) {
            let on_port: Vec<&FlowSpec> = flows.iter().filter(|f| f.tx_port == port.name).collect();
            if let Some(line) = speeds.get(&port.name) {
                check_port(&on_port, line).map_err(|m| self.err(&place.span, &place.path, m))?;
            }
        }
        Ok(Scenario {
            source: source.to_string(),
            ports,
            flows,
            warnings,
            pacing,
        })
    }

    /// `[run]`: `pacing = "scheduled" | "unpaced"`, and for an unpaced run an optional
    /// real-time `time_limit`.
    fn pacing(&self, node: &Node) -> Result<Pacing, ModelError> {
        let t = self.r.table(node, "run", "a [run] table")?;
        self.r.only(&t, &["pacing", "time_limit"])?;
        let unpaced = match t.get("pacing") {
            None => false,
            Some(n) => match self
                .r
                .string(n, "run.pacing", "\"scheduled\" or \"unpaced\"")?
            {
                "scheduled" => false,
                "unpaced" => true,
                other => {
                    return Err(self.err(
                        &n.span(),
                        "run.pacing",
                        format!(
                            "`{other}` — accepted: \"scheduled\" (each frame at its departure) or \
                             \"unpaced\" (as fast as the engine goes)"
                        ),
                    ))
                }
            },
        };
        let time_limit_ns = match t.get("time_limit") {
            Some(n) if !unpaced => {
                return Err(self.err(
                    &n.span(),
                    "run.time_limit",
                    "a time limit applies to unpaced runs (pacing = \"unpaced\"); a scheduled \
                     run ends with its flows' durations",
                ))
            }
            Some(n) => Some(self.time(n, "run.time_limit")?).filter(|&ns| ns > 0),
            None => None,
        };
        Ok(match unpaced {
            true => Pacing::Unpaced { time_limit_ns },
            false => Pacing::Scheduled,
        })
    }

    fn ports(&self, node: &Node) -> Result<(Vec<PortSpec>, Vec<PortPlace>), ModelError> {
        let items = self
            .r
            .array(node, "ports", "an array of [[ports]] tables")?;
        if items.is_empty() {
            return Err(self.err(
                &node.span(),
                "ports",
                "no ports — add at least one [[ports]] table",
            ));
        }
        let mut ports: Vec<PortSpec> = Vec::with_capacity(items.len());
        let mut places = Vec::with_capacity(items.len());
        for (index, item) in items.iter().enumerate() {
            let path = format!("ports[{index}]");
            let t = self.r.table(item, &path, "a [[ports]] table")?;
            self.r.only(&t, &["name", "location", "speed", "cores"])?;
            let name = self.required_name(&t, "a port name such as \"tx\"")?;
            if let Some(first) = ports.iter().position(|p| p.name == name) {
                return Err(self.err(
                    &t.get("name").map_or(t.span.clone(), Node::span),
                    &t.child("name"),
                    format!("port name `{name}` is already used by ports[{first}] — port names must be unique"),
                ));
            }
            let location = match t.get("location") {
                Some(n) => self
                    .r
                    .string(n, &t.child("location"), "a location such as \"pcap:out.pcap\"")?
                    .to_string(),
                None => {
                    return Err(self.err(
                        &t.span,
                        &t.child("location"),
                        "missing location — give where the port sends and receives, e.g. \"pcap:out.pcap\"",
                    ))
                }
            };
            let speed_bps = match t.get("speed") {
                Some(n) => self.port_speed(n, &t.child("speed"))?,
                None => DEFAULT_PORT_SPEED_BPS,
            };
            let cores = match t.get("cores") {
                Some(n) => match n.get_ref() {
                    Value::Int(i) if (1..=MAX_CORES as i64).contains(i) => Some(*i as usize),
                    _ => return Err(self.err(
                        &n.span(),
                        &t.child("cores"),
                        format!("invalid cores — expected a whole number of transmit workers from 1 to {MAX_CORES}"),
                    )),
                },
                None => None,
            };
            ports.push(PortSpec {
                name,
                location,
                speed_bps,
                cores,
            });
            places.push(match t.get("speed") {
                Some(n) => PortPlace {
                    path: t.child("speed"),
                    span: n.span(),
                },
                None => PortPlace {
                    path,
                    span: t.span.clone(),
                },
            });
        }
        Ok((ports, places))
    }

    fn port_speed(&self, node: &Node, path: &str) -> Result<u64, ModelError> {
        const HINT: &str = "a line rate such as \"10gbps\", \"25gbps\" or \"100mbps\", or an integer number of bits per second";
        let bps = match node.get_ref() {
            Value::Int(i) if *i > 0 => *i as f64,
            Value::Int(i) => {
                return Err(self.err(
                    &node.span(),
                    path,
                    format!(
                    "port speed {i} is not a line rate — expected {HINT}, e.g. speed = \"10gbps\""
                ),
                ))
            }
            Value::Str(s) => match parse_rate(s) {
                Ok(Rate::L1BitsPerSec(bps)) => bps,
                Ok(Rate::Pps(_)) | Err(_) => {
                    return Err(self.err(
                        &node.span(),
                        path,
                        format!("invalid port speed `{s}` — expected {HINT}"),
                    ))
                }
            },
            other => {
                return Err(self.err(
                    &node.span(),
                    path,
                    format!("expected {HINT}, found {}", other.kind()),
                ))
            }
        };
        if bps >= 1.0 && bps <= u64::MAX as f64 {
            Ok(bps.round() as u64)
        } else {
            Err(self.err(
                &node.span(),
                path,
                format!("port speed must be at least 1 bit/s — expected {HINT}"),
            ))
        }
    }

    fn required_name(&self, t: &Table<'_>, what: &str) -> Result<String, ModelError> {
        let path = t.child("name");
        let node = t
            .get("name")
            .ok_or_else(|| self.err(&t.span, &path, format!("missing name — give {what}")))?;
        let name = self.r.string(node, &path, what)?;
        if name.trim().is_empty() {
            return Err(self.err(
                &node.span(),
                &path,
                format!("the name is empty — give {what}"),
            ));
        }
        Ok(name.to_string())
    }

    fn flow(
        &self,
        node: &Node,
        index: usize,
        speeds: &PortSpeeds,
        warnings: &mut Vec<String>,
    ) -> Result<FlowSpec, ModelError> {
        let path = format!("flows[{index}]");
        let t = self.r.table(node, &path, "a [[flows]] table")?;
        self.r.only(
            &t,
            &[
                "name", "tx_rx", "tx", "rx", "packet", "size", "rate", "duration", "timing",
                "metrics", "payload",
            ],
        )?;
        let name = self.required_name(&t, "a flow name such as \"udp-1\"")?;
        let (tx_port, rx_ports) = self.endpoints(&t, speeds)?;
        let line = speeds.get(&tx_port).cloned();
        let speed = line
            .as_ref()
            .map_or(DEFAULT_PORT_SPEED_BPS, |l| l.speed_bps);

        let packet = match t.get("packet") {
            Some(n) => self.packet(n, &t.child("packet"))?,
            None => {
                return Err(self.err(
                    &t.span,
                    &t.child("packet"),
                    "missing packet — add [[flows.packet]] tables such as ethernet, ipv4, udp",
                ))
            }
        };
        let (size, size_seed) = match t.get("size") {
            Some(n) => self.size(n, &t.child("size"), index)?,
            None => (SizeSpec::Fixed(64), default_size_seed(index)),
        };
        let rate = match t.get("rate") {
            Some(n) => self.rate(n, &t.child("rate"), speed)?,
            None => Rate::Pps(1000.0),
        };
        let (duration, start_delay_ns) = match t.get("duration") {
            Some(n) => self.duration(n, &t.child("duration"), speed, &name, warnings)?,
            None => (Duration::Continuous, 0),
        };
        let timing = match t.get("timing") {
            Some(n) => self.timing(n, &t.child("timing"), speed)?,
            None => Timing::default(),
        };
        let metrics = match t.get("metrics") {
            Some(n) => self.metrics(n, &t.child("metrics"))?,
            None => MetricsRequest::measure_all(),
        };
        let payload = match t.get("payload") {
            Some(n) => self.payload(n, &t.child("payload"))?,
            None => Payload::default(),
        };

        let schedule = ScheduleSpec {
            rate,
            pattern: timing.pattern,
            duration,
            profile: timing.profile,
            start_delay_ns,
            seed: timing.seed.unwrap_or_else(|| default_timing_seed(index)),
        };
        let draft = FlowDraft {
            name,
            id: index as u16,
            tx_port,
            rx_ports,
            packet,
            size,
            size_seed,
            payload,
            schedule,
            metrics,
            line,
        };
        let locate = |part: Part, message: String| {
            let (key, sub) = match part {
                Part::Packet => ("packet", None),
                Part::Size => ("size", None),
                Part::Metrics => ("metrics", None),
                Part::Instrument => ("metrics", Some("instrument")),
                Part::Rate => ("rate", None),
                Part::Timing => ("timing", None),
                Part::Duration => ("duration", None),
            };
            let mut at_path = t.child(key);
            let mut span = t.get(key).map_or(t.span.clone(), Node::span);
            if let (Some(sub), Some(Value::Table(entries))) = (sub, t.get(key).map(|n| n.get_ref()))
            {
                if let Some((_, value)) = entries.iter().find(|(k, _)| k.get_ref() == sub) {
                    at_path = format!("{at_path}.{sub}");
                    span = value.span();
                }
            }
            self.err(&span, &at_path, message)
        };
        finish_flow(draft, &locate, warnings)
    }

    fn endpoints(
        &self,
        t: &Table<'_>,
        speeds: &PortSpeeds,
    ) -> Result<(String, Vec<String>), ModelError> {
        let port_ref = |node: &Node, path: &str| -> Result<String, ModelError> {
            let name = self.r.string(node, path, "a port name")?;
            if speeds.contains_key(name) {
                Ok(name.to_string())
            } else {
                let mut known: Vec<&str> = speeds.keys().map(String::as_str).collect();
                known.sort_unstable();
                Err(self.err(
                    &node.span(),
                    path,
                    format!(
                        "unknown port `{name}` — defined ports: {}",
                        known.join(", ")
                    ),
                ))
            }
        };
        let rx_list = |node: &Node, path: &str| -> Result<Vec<String>, ModelError> {
            match node.get_ref() {
                Value::Array(items) => items
                    .iter()
                    .enumerate()
                    .map(|(i, n)| port_ref(n, &format!("{path}[{i}]")))
                    .collect(),
                _ => Ok(vec![port_ref(node, path)?]),
            }
        };

        match (t.get("tx_rx"), t.get("tx")) {
            (Some(_), Some(tx)) => Err(self.err(
                &tx.span(),
                &t.child("tx"),
                "give either tx_rx (OTG form) or the tx/rx shorthand, not both",
            )),
            (None, None) => Err(self.err(
                &t.span,
                &t.child("tx_rx"),
                "missing transmit port — give tx_rx = { port = { tx_name = \"tx\", rx_names = [\"rx\"] } } or tx = \"tx\"",
            )),
            (None, Some(tx)) => {
                let tx_port = port_ref(tx, &t.child("tx"))?;
                let rx = match t.get("rx") {
                    Some(n) => rx_list(n, &t.child("rx"))?,
                    None => Vec::new(),
                };
                Ok((tx_port, rx))
            }
            (Some(node), None) => {
                if let Some(rx) = t.get("rx") {
                    return Err(self.err(
                        &rx.span(),
                        &t.child("rx"),
                        "rx is part of the shorthand — with tx_rx, list receive ports in tx_rx.port.rx_names",
                    ));
                }
                let path = t.child("tx_rx");
                let what = "a table such as { port = { tx_name = \"tx\" } }";
                let tx_rx = self.r.table(node, &path, what)?;
                let (choice, body) = self.r.choice(&tx_rx, &["port", "device"], Some("port"))?;
                if choice == "device" {
                    return Err(self.err(
                        &node.span(),
                        &path,
                        "device endpoints need emulated devices, which strobe does not have — use port = { tx_name, rx_names }",
                    ));
                }
                let port_path = format!("{path}.port");
                let Some(body) = body else {
                    let message = "missing port table — give port = { tx_name = \"tx\" }";
                    return Err(self.err(&node.span(), &port_path, message));
                };
                let what = "a table with tx_name and rx_names";
                let port = self.r.table(body, &port_path, what)?;
                self.r.only(&port, &["tx_name", "rx_names", "rx_name"])?;
                let Some(tx) = port.get("tx_name") else {
                    let message = "missing tx_name — name the transmit port";
                    return Err(self.err(&port.span, &port.child("tx_name"), message));
                };
                let tx_port = port_ref(tx, &port.child("tx_name"))?;
                let mut rx = match port.get("rx_names") {
                    Some(n) => {
                        let p = port.child("rx_names");
                        self.r.array(n, &p, "an array of port names")?;
                        rx_list(n, &p)?
                    }
                    None => Vec::new(),
                };
                // OTG's deprecated single receive port.
                if let Some(n) = port.get("rx_name") {
                    let name = port_ref(n, &port.child("rx_name"))?;
                    if !rx.contains(&name) {
                        rx.push(name);
                    }
                }
                Ok((tx_port, rx))
            }
        }
    }

    fn packet(&self, node: &Node, path: &str) -> Result<Vec<HeaderSpec>, ModelError> {
        let items = self
            .r
            .array(node, path, "an array of [[flows.packet]] tables")?;
        if items.is_empty() {
            return Err(self.err(
                &node.span(),
                path,
                "the packet has no headers — add [[flows.packet]] tables such as ethernet, ipv4, udp",
            ));
        }
        items
            .iter()
            .enumerate()
            .map(|(i, item)| self.header(item, &format!("{path}[{i}]")))
            .collect()
    }

    fn header(&self, node: &Node, path: &str) -> Result<HeaderSpec, ModelError> {
        let header_names = HeaderKind::ALL.map(HeaderKind::name);
        let t = self.r.table(
            node,
            path,
            "a header table such as { ipv4 = { src = \"198.18.0.1\" } }",
        )?;
        if let Some(key) = t
            .keys()
            .find(|k| k.get_ref() != "choice" && !header_names.contains(&k.get_ref().as_str()))
        {
            return Err(self.err(
                &key.span(),
                &t.child(key.get_ref()),
                format!(
                    "unknown header `{}` — accepted headers: {}",
                    key.get_ref(),
                    header_names.join(", ")
                ),
            ));
        }
        let (name, body) = self.r.choice(&t, &header_names, None)?;
        let kind = HeaderKind::from_name(name)
            .ok_or_else(|| self.err(&t.span, path, format!("unknown header `{name}`")))?;
        let hpath = format!("{path}.{name}");
        let mut spec = HeaderSpec::new(kind);
        let Some(body) = body else {
            if kind == HeaderKind::Custom {
                return Err(self.err(
                    &t.span,
                    &hpath,
                    "missing custom header bytes — give custom = { bytes = \"deadbeef\" }",
                ));
            }
            return Ok(spec);
        };
        let fields = self
            .r
            .table(body, &hpath, &format!("a table of {name} fields"))?;
        if kind == HeaderKind::Custom {
            self.r.only(&fields, &["bytes"])?;
            let bytes_path = fields.child("bytes");
            let bytes_node = fields.get("bytes").ok_or_else(|| {
                self.err(
                    &fields.span,
                    &bytes_path,
                    "missing bytes — give the header as hex, e.g. bytes = \"deadbeef\"",
                )
            })?;
            let text = self
                .r
                .string(bytes_node, &bytes_path, "hex bytes such as \"deadbeef\"")?;
            spec.custom_bytes =
                parse_hex_bytes(text).map_err(|m| self.err(&bytes_node.span(), &bytes_path, m))?;
            return Ok(spec);
        }
        let fields = match fields.get("echo") {
            // OTG nests ICMP and ICMPv6 echo fields under a choice: { echo = { identifier = 1 } }.
            Some(echo) if matches!(kind, HeaderKind::Icmp | HeaderKind::Icmpv6) => {
                self.r.only(&fields, &["choice", "echo"])?;
                self.r
                    .table(echo, &fields.child("echo"), "a table of echo fields")?
            }
            _ => fields,
        };
        let accepted: Vec<&str> = kind.fields().iter().map(|d| d.name).collect();
        self.r.only(&fields, &accepted)?;
        for (key, value) in fields.entries {
            let field_path = fields.child(key.get_ref());
            if kind == HeaderKind::Ipv4 && key.get_ref() == "priority" && is_otg_priority(value) {
                self.otg_priority(value, &field_path, &mut spec)?;
                continue;
            }
            // `only` has vetted every key.
            let Some((index, def)) = kind.field(key.get_ref()) else {
                continue;
            };
            if let Some(pattern) = self.field(value, &field_path, kind, def)? {
                spec.set(index, pattern);
            }
        }
        Ok(spec)
    }

    /// OTG's nested IPv4 priority: `{ raw = N }` (the TOS byte) or
    /// `{ dscp = { phb = N, ecn = N } }`, each a field pattern.
    fn otg_priority(
        &self,
        node: &Node,
        path: &str,
        spec: &mut HeaderSpec,
    ) -> Result<(), ModelError> {
        let t = self.r.table(node, path, "a priority table")?;
        let (choice, body) = self.r.choice(&t, &["raw", "tos", "dscp"], Some("dscp"))?;
        let cpath = format!("{path}.{choice}");
        let mut set = |field: &str, node: &Node, field_path: &str| -> Result<(), ModelError> {
            let (index, def) = HeaderKind::Ipv4.field(field).ok_or_else(|| {
                self.err(
                    &node.span(),
                    field_path,
                    format!("ipv4 has no field `{field}`"),
                )
            })?;
            if let Some(pattern) = self.field(node, field_path, HeaderKind::Ipv4, def)? {
                spec.set(index, pattern);
            }
            Ok(())
        };
        match (choice, body) {
            (_, None) => Ok(()),
            ("raw", Some(n)) => set("priority", n, &cpath),
            ("tos", Some(n)) => Err(self.err(
                &n.span(),
                &cpath,
                "the tos form is not supported — write the whole byte as priority = { raw = N }, or use dscp = { phb, ecn }",
            )),
            (_, Some(n)) => {
                let d = self.r.table(n, &cpath, "a table with phb and ecn")?;
                self.r.only(&d, &["phb", "ecn"])?;
                if let Some(phb) = d.get("phb") {
                    set("dscp", phb, &d.child("phb"))?;
                }
                if let Some(ecn) = d.get("ecn") {
                    set("ecn", ecn, &d.child("ecn"))?;
                }
                Ok(())
            }
        }
    }

    /// One field value or pattern; `None` means auto (computed).
    fn field(
        &self,
        node: &Node,
        path: &str,
        kind: HeaderKind,
        def: &FieldDef,
    ) -> Result<Option<Pattern>, ModelError> {
        let pattern = match node.get_ref() {
            Value::Str(s) if s == "auto" => return self.auto(node, path, kind, def).map(|()| None),
            Value::Str(_) | Value::Int(_) => Pattern::Value(self.scalar(node, path, def)?),
            Value::Array(_) => Pattern::Values(self.scalars(node, path, def)?),
            Value::Table(_) if def.format == FieldFormat::Checksum => {
                return self.checksum(node, path, def)
            }
            Value::Table(_) => {
                let t = self.r.table(node, path, "a pattern table")?;
                let default = if def.auto { "auto" } else { "value" };
                let (choice, body) = self.r.choice(
                    &t,
                    &[
                        "value",
                        "values",
                        "increment",
                        "decrement",
                        "random",
                        "auto",
                    ],
                    Some(default),
                )?;
                let cpath = format!("{path}.{choice}");
                match choice {
                    "auto" => return self.auto(node, path, kind, def).map(|()| None),
                    "value" => Pattern::Value(match body {
                        Some(n) => self.scalar(n, &cpath, def)?,
                        None => def.default,
                    }),
                    "values" => Pattern::Values(match body {
                        Some(n) => self.scalars(n, &cpath, def)?,
                        None => vec![def.default],
                    }),
                    "increment" | "decrement" => {
                        self.counter(body, &cpath, def, choice == "increment")?
                    }
                    _ => self.random(body, &cpath, def)?,
                }
            }
            other => {
                return Err(self.err(
                    &node.span(),
                    path,
                    format!(
                        "expected {}, a pattern table or \"auto\", found {}",
                        format_hint(def),
                        other.kind()
                    ),
                ))
            }
        };
        check_pattern(kind, def, &pattern).map_err(|m| self.err(&node.span(), path, m))?;
        Ok(Some(pattern))
    }

    fn auto(
        &self,
        node: &Node,
        path: &str,
        kind: HeaderKind,
        def: &FieldDef,
    ) -> Result<(), ModelError> {
        if def.auto {
            Ok(())
        } else {
            let computed: Vec<&str> = kind
                .fields()
                .iter()
                .filter(|d| d.auto)
                .map(|d| d.name)
                .collect();
            let which = if computed.is_empty() {
                format!("{} has no computed fields", kind.name())
            } else {
                format!("computed {} fields: {}", kind.name(), computed.join(", "))
            };
            Err(self.err(
                &node.span(),
                path,
                format!(
                    "`{}` is not computed by strobe, so it cannot be auto — give {} ({which})",
                    def.name,
                    format_hint(def)
                ),
            ))
        }
    }

    fn scalar(&self, node: &Node, path: &str, def: &FieldDef) -> Result<u128, ModelError> {
        let parsed = match node.get_ref() {
            Value::Str(s) => parse_field_text(s, def),
            Value::Int(i) => parse_field_int(*i, def),
            other => Err(format!(
                "expected {}, found {}",
                format_hint(def),
                other.kind()
            )),
        };
        parsed.map_err(|m| self.err(&node.span(), path, m))
    }

    fn scalars(&self, node: &Node, path: &str, def: &FieldDef) -> Result<Vec<u128>, ModelError> {
        let items = self.r.array(node, path, "an array of values")?;
        items
            .iter()
            .enumerate()
            .map(|(i, n)| self.scalar(n, &format!("{path}[{i}]"), def))
            .collect()
    }

    fn counter(
        &self,
        body: Option<&Node>,
        path: &str,
        def: &FieldDef,
        up: bool,
    ) -> Result<Pattern, ModelError> {
        let (mut start, mut step, mut count) = (def.default, 1, 1);
        if let Some(node) = body {
            let t = self
                .r
                .table(node, path, "a table with start, step and count")?;
            self.r.only(&t, &["start", "step", "count"])?;
            if let Some(n) = t.get("start") {
                start = self.scalar(n, &t.child("start"), def)?;
            }
            if let Some(n) = t.get("step") {
                step = self.scalar(n, &t.child("step"), def)?;
            }
            if let Some(n) = self
                .r
                .opt_uint(&t, "count", u64::MAX, "a count of values")?
            {
                count = n;
            }
            if count == 0 {
                let span = t.get("count").map_or(t.span.clone(), Node::span);
                return Err(self.err(&span, &t.child("count"), COUNT_AT_LEAST_ONE));
            }
        }
        Ok(if up {
            Pattern::Increment { start, step, count }
        } else {
            Pattern::Decrement { start, step, count }
        })
    }

    fn random(
        &self,
        body: Option<&Node>,
        path: &str,
        def: &FieldDef,
    ) -> Result<Pattern, ModelError> {
        // OTG defaults, except count: OTG's 1 would repeat one value forever, so strobe's
        // default 0 means "never repeats".
        let (mut min, mut max, mut seed, mut count) = (0, def.max(), 1, 0);
        if let Some(node) = body {
            let t = self
                .r
                .table(node, path, "a table with min, max, seed and count")?;
            self.r.only(&t, &["min", "max", "seed", "count"])?;
            if let Some(n) = t.get("min") {
                min = self.scalar(n, &t.child("min"), def)?;
            }
            if let Some(n) = t.get("max") {
                max = self.scalar(n, &t.child("max"), def)?;
            }
            if let Some(n) = self.r.opt_uint(&t, "seed", i64::MAX as u64, "a seed")? {
                seed = n;
            }
            if let Some(n) = self.r.opt_uint(
                &t,
                "count",
                i64::MAX as u64,
                "a count of values (0 = never repeat)",
            )? {
                count = n;
            }
        }
        Ok(Pattern::Random {
            min,
            max,
            seed,
            count,
        })
    }

    /// OTG checksum fields: `{ choice = "generated", generated = "good" }` or
    /// `{ choice = "custom", custom = 0x1234 }`.
    fn checksum(
        &self,
        node: &Node,
        path: &str,
        def: &FieldDef,
    ) -> Result<Option<Pattern>, ModelError> {
        let t = self.r.table(node, path, "a checksum table")?;
        let (choice, body) = self
            .r
            .choice(&t, &["generated", "custom"], Some("generated"))?;
        let cpath = format!("{path}.{choice}");
        match (choice, body) {
            ("custom", Some(n)) => Ok(Some(Pattern::Value(self.scalar(n, &cpath, def)?))),
            ("custom", None) => {
                let message = "missing custom checksum value — give custom = 0x1234";
                Err(self.err(&t.span, &cpath, message))
            }
            (_, None) => Ok(None),
            (_, Some(n)) => match self.r.string(n, &cpath, "\"good\"")? {
                "good" => Ok(None),
                other => Err(self.err(
                    &n.span(),
                    &cpath,
                    format!("generated = \"{other}\" is not supported — accepted: \"good\" (computed), or custom = a fixed value"),
                )),
            },
        }
    }

    fn size(&self, node: &Node, path: &str, index: usize) -> Result<(SizeSpec, u64), ModelError> {
        let seed = default_size_seed(index);
        let size_u32 = |n: &Node, p: &str| -> Result<u32, ModelError> {
            self.r
                .uint(n, p, u64::from(u32::MAX), "a frame size in bytes")
                .map(|v| v as u32)
        };
        match node.get_ref() {
            Value::Int(_) => Ok((SizeSpec::Fixed(size_u32(node, path)?), seed)),
            Value::Str(s) => Ok((self.predefined_size(s, node, path)?, seed)),
            Value::Table(_) => {
                let t = self.r.table(node, path, "a size table")?;
                let (choice, body) = self.r.choice(
                    &t,
                    &["fixed", "increment", "random", "weight_pairs"],
                    Some("fixed"),
                )?;
                let cpath = format!("{path}.{choice}");
                match choice {
                    "fixed" => Ok((
                        SizeSpec::Fixed(
                            body.map(|n| size_u32(n, &cpath)).transpose()?.unwrap_or(64),
                        ),
                        seed,
                    )),
                    "increment" => {
                        let (mut start, mut end, mut step) = (64, 1518, 1);
                        if let Some(n) = body {
                            let b = self
                                .r
                                .table(n, &cpath, "a table with start, end and step")?;
                            self.r.only(&b, &["start", "end", "step"])?;
                            if let Some(v) = b.get("start") {
                                start = size_u32(v, &b.child("start"))?;
                            }
                            if let Some(v) = b.get("end") {
                                end = size_u32(v, &b.child("end"))?;
                            }
                            if let Some(v) = b.get("step") {
                                step = size_u32(v, &b.child("step"))?;
                            }
                        }
                        Ok((SizeSpec::Increment { start, end, step }, seed))
                    }
                    "random" => {
                        let (mut min, mut max, mut seed) = (64, 1518, seed);
                        if let Some(n) = body {
                            let b = self.r.table(n, &cpath, "a table with min and max")?;
                            self.r.only(&b, &["min", "max", "seed"])?;
                            if let Some(v) = b.get("min") {
                                min = size_u32(v, &b.child("min"))?;
                            }
                            if let Some(v) = b.get("max") {
                                max = size_u32(v, &b.child("max"))?;
                            }
                            if let Some(v) =
                                self.r.opt_uint(&b, "seed", i64::MAX as u64, "a seed")?
                            {
                                seed = v;
                            }
                        }
                        Ok((SizeSpec::Random { min, max }, seed))
                    }
                    _ => Ok((self.weight_pairs(body, &cpath)?, seed)),
                }
            }
            other => Err(self.err(
                &node.span(),
                path,
                format!(
                    "expected a frame size such as 128, \"imix\" or a size table, found {}",
                    other.kind()
                ),
            )),
        }
    }

    fn predefined_size(&self, name: &str, node: &Node, path: &str) -> Result<SizeSpec, ModelError> {
        predefined_size(name).ok_or_else(|| {
            self.err(
                &node.span(),
                path,
                format!(
                    "unknown size `{name}` — accepted: a size in bytes such as 128, or one of {}",
                    PREDEFINED_SIZE_NAMES.join(", ")
                ),
            )
        })
    }

    fn weight_pairs(&self, body: Option<&Node>, path: &str) -> Result<SizeSpec, ModelError> {
        let Some(node) = body else {
            return Ok(SizeSpec::imix());
        };
        let t = self
            .r
            .table(node, path, "a table with predefined or custom")?;
        let (choice, inner) = self
            .r
            .choice(&t, &["predefined", "custom"], Some("predefined"))?;
        let cpath = format!("{path}.{choice}");
        if choice == "predefined" {
            return match inner {
                None => Ok(SizeSpec::imix()),
                Some(n) => {
                    let name = self.r.string(
                        n,
                        &cpath,
                        "a predefined distribution name such as \"imix\"",
                    )?;
                    self.predefined_size(name, n, &cpath)
                }
            };
        }
        let inner = inner.ok_or_else(|| {
            self.err(
                &t.span,
                &cpath,
                "missing custom list — give custom = [{ size = 64, weight = 7 }, …]",
            )
        })?;
        let items = self
            .r
            .array(inner, &cpath, "an array of { size, weight } tables")?;
        let mut sizes = Vec::with_capacity(items.len());
        let mut weights = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let ipath = format!("{cpath}[{i}]");
            let pair = self.r.table(item, &ipath, "a { size, weight } table")?;
            self.r.only(&pair, &["size", "weight"])?;
            let size = self
                .r
                .opt_uint(&pair, "size", u64::from(u32::MAX), "a frame size in bytes")?
                .unwrap_or(64);
            let weight = self
                .r
                .opt_number(&pair, "weight", "a weight")?
                .unwrap_or(1.0);
            sizes.push(size as u32);
            weights.push(weight);
        }
        if items.is_empty() {
            return Err(self.err(
                &inner.span(),
                &cpath,
                "the custom list is empty — give at least one { size, weight }",
            ));
        }
        let weights = integer_weights(&weights).map_err(|m| self.err(&inner.span(), &cpath, m))?;
        Ok(SizeSpec::WeightPairs(
            sizes.into_iter().zip(weights).collect(),
        ))
    }

    fn rate(&self, node: &Node, path: &str, speed_bps: u64) -> Result<Rate, ModelError> {
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

    fn duration(
        &self,
        node: &Node,
        path: &str,
        speed_bps: u64,
        flow: &str,
        warnings: &mut Vec<String>,
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
                warnings.push(format!(
                    "flow `{flow}`: {cpath}.gap = {gap} bytes is not used — strobe spaces packets by the flow's rate and timing pattern"
                ));
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
    fn byte_time(
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

    fn timing(&self, node: &Node, path: &str, speed_bps: u64) -> Result<Timing, ModelError> {
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

    fn file<'n>(
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
    fn time(&self, node: &Node, path: &str) -> Result<u64, ModelError> {
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

    fn steps(&self, node: &Node, path: &str, speed_bps: u64) -> Result<RateProfile, ModelError> {
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

    fn ramp(&self, node: &Node, path: &str, speed_bps: u64) -> Result<RateProfile, ModelError> {
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

    fn metrics(&self, node: &Node, path: &str) -> Result<MetricsRequest, ModelError> {
        let t = self.r.table(
            node,
            path,
            "a metrics table such as { enable = true, latency = { enable = true } }",
        )?;
        self.r.only(
            &t,
            &["enable", "loss", "timestamps", "latency", "instrument"],
        )?;
        let enable = self.r.opt_bool(&t, "enable")?.unwrap_or(true);
        let loss = self.r.opt_bool(&t, "loss")?;
        let timestamps = self.r.opt_bool(&t, "timestamps")?;
        let (latency_enable, mode) = match t.get("latency") {
            None => (None, LatencyMode::StoreForward),
            Some(n) => self.latency(n, &t.child("latency"))?,
        };
        let instrument = self.r.opt_bool(&t, "instrument")?;
        let asked = [
            ("loss", loss),
            ("timestamps", timestamps),
            ("latency", latency_enable),
        ];
        if !enable {
            if let Some((key, _)) = asked.iter().find(|(_, v)| *v == Some(true)) {
                let span = t.get(key).map_or(t.span.clone(), Node::span);
                let message = format!(
                    "{key} is measured only with enable = true — remove enable = false or the {key} request"
                );
                return Err(self.err(&span, &t.child(key), message));
            }
        }
        Ok(MetricsRequest {
            enable,
            loss: loss.unwrap_or(enable),
            timestamps: timestamps.unwrap_or(enable),
            latency: latency_enable.unwrap_or(enable).then_some(mode),
            instrument,
            demanded: asked.iter().any(|(_, v)| *v == Some(true)),
        })
    }

    fn latency(&self, node: &Node, path: &str) -> Result<(Option<bool>, LatencyMode), ModelError> {
        if let Value::Bool(b) = node.get_ref() {
            return Ok((Some(*b), LatencyMode::StoreForward));
        }
        let t = self.r.table(
            node,
            path,
            "a table such as { enable = true, mode = \"store_forward\" }, or true/false",
        )?;
        self.r.only(&t, &["enable", "mode"])?;
        let enable = self.r.opt_bool(&t, "enable")?;
        let mode = match t.get("mode") {
            None => LatencyMode::StoreForward,
            Some(n) => {
                match self
                    .r
                    .string(n, &t.child("mode"), "store_forward or cut_through")?
                {
                    "store_forward" => LatencyMode::StoreForward,
                    "cut_through" => LatencyMode::CutThrough,
                    other => {
                        return Err(self.err(
                            &n.span(),
                            &t.child("mode"),
                            format!(
                            "unknown latency mode `{other}` — accepted: store_forward, cut_through"
                        ),
                        ))
                    }
                }
            }
        };
        Ok((enable, mode))
    }

    fn payload(&self, node: &Node, path: &str) -> Result<Payload, ModelError> {
        const SIMPLE: [(&str, Payload); 4] = [
            ("increment_byte", Payload::IncrementByte),
            ("decrement_byte", Payload::DecrementByte),
            ("increment_word", Payload::IncrementWord),
            ("decrement_word", Payload::DecrementWord),
        ];
        if let Value::Str(s) = node.get_ref() {
            return SIMPLE
                .iter()
                .find(|(n, _)| n == s)
                .map(|(_, p)| p.clone())
                .ok_or_else(|| {
                    let accepted = "increment_byte, decrement_byte, increment_word, decrement_word, or { fixed = { pattern = \"00ff\", repeat = true } }";
                    let message = format!("unknown payload `{s}` — accepted: {accepted}");
                    self.err(&node.span(), path, message)
                });
        }
        let t = self.r.table(
            node,
            path,
            "a payload table such as { increment_byte = {} }",
        )?;
        let (choice, body) = self.r.choice(
            &t,
            &[
                "fixed",
                "increment_byte",
                "decrement_byte",
                "increment_word",
                "decrement_word",
            ],
            Some("fixed"),
        )?;
        let cpath = format!("{path}.{choice}");
        if let Some((_, simple)) = SIMPLE.iter().find(|(n, _)| *n == choice) {
            if let Some(n) = body {
                let b = self.r.table(n, &cpath, "an empty table {}")?;
                self.r.only(&b, &[])?;
            }
            return Ok(simple.clone());
        }
        let Some(n) = body else {
            return Ok(Payload::default());
        };
        let b = self.r.table(n, &cpath, "a table with pattern and repeat")?;
        self.r.only(&b, &["pattern", "repeat"])?;
        let pattern = match b.get("pattern") {
            None => vec![0],
            Some(p) => {
                let text = self
                    .r
                    .string(p, &b.child("pattern"), "hex bytes such as \"00ff\"")?;
                parse_hex_bytes(text).map_err(|m| self.err(&p.span(), &b.child("pattern"), m))?
            }
        };
        let repeat = self.r.opt_bool(&b, "repeat")?.unwrap_or(true);
        Ok(Payload::Fixed { pattern, repeat })
    }
}

/// The strobe `timing` table, resolved.
struct Timing {
    pattern: Departures,
    profile: Option<RateProfile>,
    seed: Option<u64>,
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

/// Whether an ipv4 `priority` value is OTG's nested form rather than a pattern of the
/// whole TOS byte.
fn is_otg_priority(node: &Node) -> bool {
    let Value::Table(entries) = node.get_ref() else {
        return false;
    };
    entries.iter().any(|(key, value)| match key.get_ref().as_str() {
        "raw" | "tos" | "dscp" => true,
        "choice" => matches!(value.get_ref(), Value::Str(c) if ["raw", "tos", "dscp"].contains(&c.as_str())),
        _ => false,
    })
}

/// Names of OTG's predefined size distributions.
pub(crate) const PREDEFINED_SIZE_NAMES: [&str; 5] = [
    PREDEFINED_SIZES[0].0,
    PREDEFINED_SIZES[1].0,
    PREDEFINED_SIZES[2].0,
    PREDEFINED_SIZES[3].0,
    PREDEFINED_SIZES[4].0,
];

/// One of OTG's predefined size distributions, by name.
pub(crate) fn predefined_size(name: &str) -> Option<SizeSpec> {
    PREDEFINED_SIZES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, pairs)| SizeSpec::WeightPairs(pairs.to_vec()))
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

/// OTG weights are floats; strobe interleaves sizes by integer weights. Whole weights are
/// kept as they are, others are kept to two decimals (scaled by 100); the result is
/// reduced by the common divisor.
fn integer_weights(weights: &[f64]) -> Result<Vec<u32>, String> {
    if let Some(bad) = weights.iter().find(|w| !w.is_finite() || **w < 0.0) {
        return Err(format!(
            "weight {bad} is not accepted — weights are numbers ≥ 0"
        ));
    }
    let whole = weights.iter().all(|w| w.fract() == 0.0);
    let scale = if whole { 1.0 } else { 100.0 };
    let scaled: Vec<f64> = weights.iter().map(|w| (w * scale).round()).collect();
    if scaled.iter().any(|w| *w > f64::from(u32::MAX)) {
        return Err(format!(
            "weights above {} are not accepted",
            u32::MAX as f64 / scale
        ));
    }
    let ints: Vec<u32> = scaled.iter().map(|w| *w as u32).collect();
    let divisor = ints.iter().fold(0, |g, w| gcd(g, *w)).max(1);
    Ok(ints.iter().map(|w| w / divisor).collect())
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod flow_table_count {
    use super::*;

    #[test]
    fn more_flow_tables_than_flow_ids_are_refused_at_the_first_one_too_many() {
        let table = "[[ flows ]]\nname = \"f\"\n";
        let text = table.repeat(MAX_FLOWS + 1);
        let err = check_flow_tables(&text, &Locator::new("big.toml", &text)).unwrap_err();
        let msg = err.to_string();
        let line = 2 * MAX_FLOWS + 1;
        assert!(msg.contains(&format!("big.toml:{line}:")), "{msg}");
        assert!(msg.contains("at most 65536 flows"), "{msg}");
        let text = table.repeat(MAX_FLOWS);
        assert!(check_flow_tables(&text, &Locator::new("ok.toml", &text)).is_ok());
        // Other array tables are not flows.
        let text = "[[flows.packet]]\n".repeat(MAX_FLOWS + 1);
        assert!(check_flow_tables(&text, &Locator::new("ok.toml", &text)).is_ok());
    }
}
