//! An Open Traffic Generator config (the JSON that `snappi`'s `set_config` sends) read into
//! a [`Scenario`].
//!
//! strobe's scenario files already follow the OTG model key for key (see the model crate's
//! SCENARIO.md), so the config is not read a second time by hand: it is checked for the
//! parts of OTG strobe does not build (emulated devices, LAGs, protocols), given OTG's own
//! defaults where strobe's differ (metrics are off unless asked for), its port locations
//! mapped, and then loaded by the one scenario loader, whose errors name the offending
//! field (`flows[0].packet[1].ipv4.src: …`).

use serde_json::{Map, Value};
use strobe_model::{load_scenario_json, NoFiles, Scenario, Warning};

use crate::capture::{CaptureFormat, CaptureSettings};
use crate::capture_filter::FrameFilter;
use crate::ports::otg_location;

/// Top-level keys of an OTG config that strobe reads.
const READ: [&str; 5] = ["ports", "flows", "layer1", "options", "captures"];

/// Most ports a config may have.
pub const MAX_PORTS: usize = 1024;

/// A config strobe refuses, and why: one message per offending field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<String>);

impl std::fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.join("; "))
    }
}

/// An OTG config read into a scenario, with what strobe did not apply.
#[derive(Clone, Debug)]
pub struct OtgScenario {
    pub scenario: Scenario,
    /// Ports whose frames the config's `captures` ask to keep: which frames, how much of
    /// each, in which format.
    pub captures: Vec<(String, CaptureSettings)>,
    /// Parts of the config accepted but not applied, for the reply's `warnings`.
    pub warnings: Vec<Warning>,
}

/// Reads an OTG config. `locations` maps names the user prefers to port locations
/// (checked first; then the location forms of [`otg_location`]).
pub fn scenario_from_otg(
    config: &Value,
    locations: &[(String, String)],
) -> Result<OtgScenario, ConfigErrors> {
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    let Some(top) = config.as_object() else {
        return Err(ConfigErrors(vec![format!(
            "the config must be a JSON object with `ports` and `flows`, not {}",
            kind(config)
        )]));
    };
    for (key, value) in top {
        if READ.contains(&key.as_str()) || is_empty(value) {
            continue;
        }
        errors.push(match key.as_str() {
            "devices" | "lags" | "lldp" | "events" | "egress_only_tracking" => format!(
                "{key}: not supported — strobe sends raw flows between ports and emulates no \
                 devices or protocols; remove `{key}` (give each flow's headers instead)"
            ),
            _ => format!("{key}: unknown top-level key — strobe reads ports, flows and layer1"),
        });
    }
    for key in ["ports", "flows", "layer1", "captures"] {
        if let Some(v) = top.get(key).filter(|v| !v.is_null() && !v.is_array()) {
            return Err(ConfigErrors(vec![format!(
                "{key}: expected a list, found {}",
                kind(v)
            )]));
        }
    }
    if array(top.get("ports")).len() > MAX_PORTS {
        return Err(ConfigErrors(vec![format!(
            "ports: {} ports — at most {MAX_PORTS} are accepted",
            array(top.get("ports")).len()
        )]));
    }
    let speeds = layer1_speeds(top.get("layer1"), &mut errors, &mut warnings);
    let captures = otg_captures(top.get("captures"), &mut errors);
    let mut ports = Vec::new();
    for (i, port) in array(top.get("ports")).iter().enumerate() {
        let path = format!("ports[{i}]");
        let Some(p) = port.as_object() else {
            errors.push(format!("{path}: expected an object, found {}", kind(port)));
            continue;
        };
        let name = p.get("name").and_then(Value::as_str).unwrap_or_default();
        let mut out = Map::new();
        for (key, value) in p {
            match key.as_str() {
                "name" => {
                    out.insert(key.clone(), value.clone());
                }
                "location" => match value.as_str() {
                    Some(text) => match otg_location(text, locations) {
                        Ok(location) => {
                            out.insert(key.clone(), Value::String(location));
                        }
                        Err(message) => errors.push(format!("{path}.location: {message}")),
                    },
                    None => errors.push(format!(
                        "{path}.location: expected a string, found {}",
                        kind(value)
                    )),
                },
                _ if is_empty(value) => {}
                _ => errors.push(format!(
                    "{path}.{key}: unknown key — a port takes name and location"
                )),
            }
        }
        if !out.contains_key("location") && p.get("location").is_none() {
            errors.push(format!(
                "{path}.location: missing — give where port `{name}` is: an interface \
                 (eth1, NETNS/IFACE), afpacket:IFACE, afxdp:IFACE@QUEUE, or the lab's lab:tx / lab:rx"
            ));
        }
        if let Some(speed) = speeds.iter().find(|(n, _)| n == name) {
            out.insert("speed".into(), Value::String(speed.1.clone()));
        }
        ports.push(Value::Object(out));
    }
    let mut flows = Vec::new();
    for (i, flow) in array(top.get("flows")).iter().enumerate() {
        match otg_flow(flow, &format!("flows[{i}]"), &mut warnings) {
            Ok(f) => flows.push(f),
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        return Err(ConfigErrors(errors));
    }
    if flows.is_empty() {
        // A config without flows (snappi's empty `api.config()` clears the last one; ports
        // and captures alone capture) has nothing for the scenario loader to check.
        return ports_only(&ports, captures, warnings);
    }
    let mut root = Map::new();
    root.insert("ports".into(), Value::Array(ports));
    root.insert("flows".into(), Value::Array(flows));
    let scenario = load_scenario_json(&Value::Object(root), "config", &NoFiles).map_err(|e| {
        ConfigErrors(vec![if e.path.is_empty() {
            e.message
        } else {
            format!("{}: {}", e.path, e.message)
        }])
    })?;
    warnings.extend(scenario.warnings.iter().cloned());
    with_captures(scenario, captures, warnings)
}

/// The read config, its captures' ports checked against its own.
fn with_captures(
    scenario: Scenario,
    captures: Vec<(String, CaptureSettings)>,
    warnings: Vec<Warning>,
) -> Result<OtgScenario, ConfigErrors> {
    if let Some((port, _)) = captures
        .iter()
        .find(|(port, _)| !scenario.ports.iter().any(|p| &p.name == port))
    {
        return Err(ConfigErrors(vec![format!(
            "captures: port `{port}` is not among the config's ports"
        )]));
    }
    Ok(OtgScenario {
        scenario,
        captures,
        warnings,
    })
}

/// A scenario of ports and no flows.
fn ports_only(
    ports: &[Value],
    captures: Vec<(String, CaptureSettings)>,
    warnings: Vec<Warning>,
) -> Result<OtgScenario, ConfigErrors> {
    let mut scenario = Scenario {
        source: "config".into(),
        ports: Vec::new(),
        flows: Vec::new(),
        warnings: Vec::new(),
        pacing: strobe_model::Pacing::Scheduled,
    };
    for (i, p) in ports.iter().enumerate() {
        let text = |k: &str| p.get(k).and_then(Value::as_str).map(str::to_string);
        let (Some(name), Some(location)) = (text("name"), text("location")) else {
            return Err(ConfigErrors(vec![format!(
                "ports[{i}]: give a name and a location"
            )]));
        };
        if scenario.ports.iter().any(|q| q.name == name) {
            return Err(ConfigErrors(vec![format!(
                "ports[{i}].name: `{name}` is used twice"
            )]));
        }
        let speed_bps = match text("speed") {
            Some(s) => strobe_timing::parse_rate(&s)
                .ok()
                .and_then(|r| match r {
                    strobe_timing::Rate::L1BitsPerSec(b) => Some(b as u64),
                    strobe_timing::Rate::Pps(_) => None,
                })
                .unwrap_or(strobe_model::DEFAULT_PORT_SPEED_BPS),
            None => strobe_model::DEFAULT_PORT_SPEED_BPS,
        };
        let location = strobe_model::PortLocation::parse(&location)
            .map_err(|e| ConfigErrors(vec![format!("ports[{i}].location: {e}")]))?;
        scenario.ports.push(strobe_model::PortSpec {
            name,
            location,
            speed_bps,
            cores: None,
        });
    }
    with_captures(scenario, captures, warnings)
}

/// A flow as the scenario loader reads it: OTG's defaults where strobe's differ, nulls and
/// empty lists left out, numbers sent as strings read as numbers.
fn otg_flow(flow: &Value, path: &str, warnings: &mut Vec<Warning>) -> Result<Value, String> {
    let Some(f) = flow.as_object() else {
        return Err(format!("{path}: expected an object, found {}", kind(flow)));
    };
    let mut out = Map::new();
    for (key, value) in f {
        if is_empty(value) && key != "packet" {
            continue;
        }
        match key.as_str() {
            "egress_packet" => {
                return Err(format!(
                    "{path}.egress_packet: not supported — strobe counts flows by the trailer it \
                     writes; leave egress_packet out"
                ))
            }
            "tx_rx" => {
                if value.get("choice").and_then(Value::as_str) == Some("device")
                    || value.get("device").is_some()
                {
                    return Err(format!(
                        "{path}.tx_rx.device: not supported — strobe emulates no devices; give \
                         tx_rx.port with tx_name and rx_names"
                    ));
                }
                out.insert(key.clone(), clean(value));
            }
            _ => {
                out.insert(key.clone(), clean(value));
            }
        }
    }
    // OTG: metrics are off unless enabled, and each measurement off unless asked for
    // (strobe's own files measure everything by default).
    let metrics = out
        .entry("metrics")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(m) = metrics.as_object_mut() {
        for key in ["enable", "loss", "timestamps"] {
            m.entry(key).or_insert(Value::Bool(false));
        }
        let latency = m
            .entry("latency")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(l) = latency.as_object_mut() {
            l.entry("enable").or_insert(Value::Bool(false));
        }
        let on = |k: &str| m.get(k).and_then(Value::as_bool) == Some(true);
        let latency_on = m
            .get("latency")
            .and_then(|l| l.get("enable"))
            .and_then(Value::as_bool)
            == Some(true);
        if !on("enable") && (on("loss") || on("timestamps") || latency_on) {
            warnings.push(Warning::MetricsOff {
                path: path.to_string(),
            });
            // OTG measures nothing for a flow whose metrics are off, whatever else it asks.
            m.insert("loss".into(), Value::Bool(false));
            m.insert("timestamps".into(), Value::Bool(false));
            if let Some(l) = m.get_mut("latency").and_then(Value::as_object_mut) {
                l.insert("enable".into(), Value::Bool(false));
            }
        }
    }
    Ok(Value::Object(out))
}

/// Keys whose values are integers that JSON clients send as strings: OTG's 64-bit integers
/// in a flow are its rates (snappi writes `"pps": "1000"`). Only these: `bytes` of a custom
/// header is hex text that may be all digits.
const NUMERIC: [&str; 5] = ["pps", "bps", "kbps", "mbps", "gbps"];

/// `value` without nulls and empty `metric_tags`, 64-bit numbers in strings read back.
fn clean(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, v)| !(v.is_null() || k.as_str() == "metric_tags" && is_empty(v)))
                .map(|(k, v)| {
                    let v = match v {
                        Value::String(s) if NUMERIC.contains(&k.as_str()) => s
                            .parse::<u64>()
                            .map(Value::from)
                            .or_else(|_| s.parse::<f64>().map(Value::from))
                            .unwrap_or_else(|_| v.clone()),
                        _ => clean(v),
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(items) => {
            Value::Array(items.iter().filter(|v| !v.is_null()).map(clean).collect())
        }
        other => other.clone(),
    }
}

/// Ports to capture on, from OTG's `captures`: the frames its filters match, each cut to its
/// packet_size, in pcap (the default) or pcapng.
fn otg_captures(
    captures: Option<&Value>,
    errors: &mut Vec<String>,
) -> Vec<(String, CaptureSettings)> {
    let mut out = Vec::new();
    for (i, c) in array(captures).iter().enumerate() {
        let path = format!("captures[{i}]");
        let format = match c.get("format").and_then(Value::as_str) {
            None | Some("pcap") => CaptureFormat::Pcap,
            Some("pcapng") => CaptureFormat::PcapNg,
            Some(other) => {
                errors.push(format!("{path}.format: `{other}` — accepted: pcap, pcapng"));
                continue;
            }
        };
        let filter = match FrameFilter::from_otg(c.get("filters"), &format!("{path}.filters")) {
            Ok(f) => f,
            Err(mut e) => {
                errors.append(&mut e);
                continue;
            }
        };
        let packet_size = match c.get("packet_size") {
            None | Some(Value::Null) => None,
            Some(v) => match v.as_u64() {
                Some(n @ 1..=65_535) => Some(n as u32),
                _ => {
                    errors.push(format!(
                        "{path}.packet_size: {v} — give 1 to 65535 bytes kept of each frame, \
                         or leave it out to keep whole frames"
                    ));
                    continue;
                }
            },
        };
        let settings = CaptureSettings {
            format,
            filter,
            packet_size,
        };
        let ports = array(c.get("port_names"));
        if ports.is_empty() {
            errors.push(format!("{path}.port_names: give the ports to capture on"));
        }
        for p in ports {
            match p.as_str() {
                Some(name) => out.push((name.to_string(), settings.clone())),
                None => errors.push(format!("{path}.port_names: expected names, found {p}")),
            }
        }
    }
    out
}

/// Port name → speed (as a scenario's `speed`) from OTG's layer1 settings.
fn layer1_speeds(
    layer1: Option<&Value>,
    errors: &mut Vec<String>,
    warnings: &mut Vec<Warning>,
) -> Vec<(String, String)> {
    let mut speeds = Vec::new();
    for (i, l1) in array(layer1).iter().enumerate() {
        let path = format!("layer1[{i}]");
        let names: Vec<String> = array(l1.get("port_names"))
            .iter()
            .filter_map(|n| n.as_str().map(str::to_string))
            .collect();
        if let Some(speed) = l1.get("speed").and_then(Value::as_str) {
            match layer1_speed(speed) {
                Some(s) => speeds.extend(names.iter().map(|n| (n.clone(), s.to_string()))),
                None => errors.push(format!(
                    "{path}.speed: unknown speed `{speed}` — accepted: speed_10_fd_mbps, \
                     speed_100_fd_mbps, speed_1_gbps, speed_10_gbps, speed_25_gbps, \
                     speed_40_gbps, speed_50_gbps, speed_100_gbps, speed_200_gbps, \
                     speed_400_gbps, speed_800_gbps"
                )),
            }
        }
        if let Some(obj) = l1.as_object() {
            for key in obj.keys() {
                if !matches!(key.as_str(), "name" | "port_names" | "speed") {
                    warnings.push(Warning::Layer1SettingIgnored {
                        path: path.to_string(),
                        key: key.to_string(),
                    });
                }
            }
        }
    }
    speeds
}

/// A scenario speed for OTG's layer1 speed names.
fn layer1_speed(otg: &str) -> Option<&'static str> {
    Some(match otg {
        "speed_10_fd_mbps" | "speed_10_hd_mbps" => "10mbps",
        "speed_100_fd_mbps" | "speed_100_hd_mbps" => "100mbps",
        "speed_1_gbps" => "1gbps",
        "speed_10_gbps" => "10gbps",
        "speed_25_gbps" => "25gbps",
        "speed_40_gbps" => "40gbps",
        "speed_50_gbps" => "50gbps",
        "speed_100_gbps" => "100gbps",
        "speed_200_gbps" => "200gbps",
        "speed_400_gbps" => "400gbps",
        "speed_800_gbps" => "800gbps",
        _ => return None,
    })
}

fn array(value: Option<&Value>) -> &[Value] {
    value.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config(flow: Value) -> Value {
        json!({
            "ports": [{"name": "p1", "location": "null"}, {"name": "p2", "location": "veth-b"}],
            "flows": [flow],
        })
    }

    fn udp_flow() -> Value {
        json!({
            "name": "f1",
            "tx_rx": {"choice": "port", "port": {"tx_name": "p1", "rx_names": ["p2"]}},
            "packet": [
                {"choice": "ethernet", "ethernet": {
                    "src": {"choice": "value", "value": "02:00:00:00:00:01"},
                    "dst": {"choice": "value", "value": "02:00:00:00:00:02"}}},
                {"choice": "ipv4", "ipv4": {
                    "src": {"choice": "increment", "increment": {"start": "198.18.0.1", "step": "0.0.0.1", "count": 10}},
                    "dst": {"choice": "value", "value": "198.18.1.1"}}},
                {"choice": "udp", "udp": {"src_port": {"choice": "values", "values": [1, 2]}, "metric_tags": []}},
            ],
            "size": {"choice": "fixed", "fixed": 128},
            "rate": {"choice": "pps", "pps": "2000"},
            "duration": {"choice": "fixed_packets", "fixed_packets": {"packets": 500, "gap": 12, "delay": {"choice": "bytes", "bytes": 0}}},
        })
    }

    #[test]
    fn a_snappi_config_becomes_a_scenario_with_otgs_defaults() {
        let read = scenario_from_otg(&config(udp_flow()), &[]).unwrap();
        let s = &read.scenario;
        assert_eq!(s.ports[1].location.to_string(), "afpacket:veth-b");
        let f = &s.flows[0];
        assert_eq!(
            (f.tx_port.as_str(), f.rx_ports.clone()),
            ("p1", vec!["p2".to_string()])
        );
        assert_eq!(f.size.max(), 128);
        assert_eq!(f.schedule.duration, strobe_timing::Duration::Packets(500));
        assert_eq!(f.schedule.rate.packets_per_sec(128.0), 2000.0);
        // OTG: no metrics unless asked for, so no trailer either.
        assert!(!f.metrics.enable && f.metrics.latency.is_none() && !f.metrics.instrument);
    }

    #[test]
    fn metrics_asked_for_are_measured() {
        let mut flow = udp_flow();
        flow["metrics"] =
            json!({"enable": true, "latency": {"enable": true, "mode": "cut_through"}});
        let read = scenario_from_otg(&config(flow), &[]).unwrap();
        let m = &read.scenario.flows[0].metrics;
        assert!(m.enable && m.instrument && !m.loss && !m.timestamps);
        assert_eq!(m.latency, Some(strobe_model::LatencyMode::CutThrough));
    }

    #[test]
    fn what_strobe_does_not_build_is_refused_by_name() {
        let mut bad = config(udp_flow());
        bad["devices"] = json!([{"name": "d1"}]);
        bad["flows"][0]["packet"][1]["ipv4"]["src"] =
            json!({"choice": "value", "value": "198.18.0.300"});
        let errors = scenario_from_otg(&bad, &[]).unwrap_err().0;
        assert!(
            errors[0].starts_with("devices: not supported"),
            "{errors:?}"
        );
        bad.as_object_mut().unwrap().remove("devices");
        let errors = scenario_from_otg(&bad, &[]).unwrap_err().0;
        assert!(
            errors[0].starts_with("flows[0].packet[1].ipv4.src"),
            "{errors:?}"
        );
        for body in [json!([]), json!("x"), json!({"ports": 1, "flows": [1]})] {
            assert!(scenario_from_otg(&body, &[]).is_err(), "{body}");
        }
    }

    #[test]
    fn custom_bytes_stay_hex_text_and_empty_configs_clear() {
        let mut flow = udp_flow();
        flow["packet"][2] = json!({"choice": "custom", "custom": {"bytes": "0800"}});
        let read = scenario_from_otg(&config(flow), &[]).unwrap();
        assert_eq!(
            read.scenario.flows[0].packet[2].custom_bytes,
            vec![0x08, 0x00]
        );
        let empty = scenario_from_otg(&json!({}), &[]).unwrap();
        assert!(empty.scenario.ports.is_empty() && empty.scenario.flows.is_empty());
        let ports = scenario_from_otg(&json!({"ports": [{"name": "a", "location": "null"}]}), &[]);
        assert_eq!(
            ports.unwrap().scenario.ports[0].location,
            strobe_model::PortLocation::Direct(strobe_model::Location::Null)
        );
        let bad = scenario_from_otg(
            &json!({"ports": [{"name": "a", "location": "afxdp:eth1@x"}]}),
            &[],
        );
        assert!(
            bad.unwrap_err().0[0].starts_with("ports[0].location: unknown port `afxdp:eth1@x`"),
        );
    }

    #[test]
    fn captures_name_their_ports_format_filters_and_packet_size() {
        let mut c = config(udp_flow());
        c["captures"] = json!([{"name": "c", "port_names": ["p2"], "format": "pcapng",
            "packet_size": 64,
            "filters": [{"choice": "ethernet", "ethernet": {"ether_type": {"value": "0800"}}}]}]);
        let read = scenario_from_otg(&c, &[]).unwrap();
        let [(port, settings)] = &read.captures[..] else {
            panic!("{:?}", read.captures)
        };
        assert_eq!(port, "p2");
        assert_eq!(
            (settings.format, settings.packet_size),
            (CaptureFormat::PcapNg, Some(64))
        );
        assert!(!settings.filter.keeps_all());
        assert!(read.warnings.is_empty(), "{:?}", read.warnings);
        for (size, why) in [(json!(0), "1 to 65535"), (json!(70000), "1 to 65535")] {
            c["captures"][0]["packet_size"] = size;
            let errors = scenario_from_otg(&c, &[]).unwrap_err().0;
            assert!(errors[0].contains("captures[0].packet_size") && errors[0].contains(why));
        }
        c["captures"][0]["packet_size"] = Value::Null;
        c["captures"][0]["filters"][0]["ethernet"]["ether_type"]["value"] = json!("10000");
        let errors = scenario_from_otg(&c, &[]).unwrap_err().0;
        assert!(
            errors[0].contains("captures[0].filters[0].ethernet.ether_type.value"),
            "{errors:?}"
        );
        c["captures"][0]["filters"] = json!([]);
        c["captures"][0]["port_names"] = json!(["p9"]);
        let errors = scenario_from_otg(&c, &[]).unwrap_err().0;
        assert!(errors[0].contains("`p9`"), "{errors:?}");
        c["captures"][0]["format"] = json!("erf");
        let errors = scenario_from_otg(&c, &[]).unwrap_err().0;
        assert!(errors[0].contains("pcap, pcapng"), "{errors:?}");
    }

    #[test]
    fn layer1_speeds_apply_to_their_ports() {
        let mut c = config(udp_flow());
        c["layer1"] =
            json!([{"name": "l1", "port_names": ["p1"], "speed": "speed_1_gbps", "mtu": 1500}]);
        let read = scenario_from_otg(&c, &[]).unwrap();
        assert_eq!(read.scenario.ports[0].speed_bps, 1_000_000_000);
        assert!(
            read.warnings
                .iter()
                .any(|w| w.to_string().contains("layer1[0].mtu")),
            "{:?}",
            read.warnings
        );
    }
}
