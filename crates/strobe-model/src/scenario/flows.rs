//! `[[flows]]`: a flow's table, its endpoints (`tx`, `rx`), and what is measured of it
//! (`metrics`, `latency`).

use strobe_timing::{Duration, Rate, ScheduleSpec};
use strobe_wire::Payload;

use crate::error::ModelError;
use crate::model::{
    finish_flow, FlowDraft, FlowSpec, LatencyMode, MetricsRequest, Part, DEFAULT_PORT_SPEED_BPS,
};
use crate::node::{Node, Table, Value};
use crate::size::SizeSpec;

use super::timing::Timing;
use super::{default_size_seed, default_timing_seed, Loader, PortSpeeds};

impl Loader<'_> {
    pub(super) fn flow(
        &self,
        node: &Node,
        index: usize,
        speeds: &PortSpeeds,
        warnings: &mut Vec<crate::Warning>,
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

    pub(super) fn endpoints(
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

    pub(super) fn metrics(&self, node: &Node, path: &str) -> Result<MetricsRequest, ModelError> {
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

    pub(super) fn latency(
        &self,
        node: &Node,
        path: &str,
    ) -> Result<(Option<bool>, LatencyMode), ModelError> {
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
}
