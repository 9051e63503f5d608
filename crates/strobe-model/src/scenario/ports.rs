//! `[[ports]]`: names, locations (parsed here, once), line rates and transmit workers.

use strobe_timing::{parse_rate, Rate};

use crate::error::ModelError;
use crate::location::PortLocation;
use crate::model::{PortSpec, DEFAULT_PORT_SPEED_BPS, MAX_CORES};
use crate::node::{Node, Value};

use super::{Loader, PortPlace};

impl Loader<'_> {
    pub(super) fn ports(&self, node: &Node) -> Result<(Vec<PortSpec>, Vec<PortPlace>), ModelError> {
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
                Some(n) => {
                    let path = t.child("location");
                    let text =
                        self.r
                            .string(n, &path, "a location such as \"pcap:out.pcap\"")?;
                    PortLocation::parse(text)
                        .map_err(|e| self.err(&n.span(), &path, e.to_string()))?
                }
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

    pub(super) fn port_speed(&self, node: &Node, path: &str) -> Result<u64, ModelError> {
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
}
