//! Loading a TOML scenario file (OTG names and shapes, plus strobe's `timing` extension).
//! SCENARIO.md in this crate documents the format.
//!
//! One file per job: `ports`, `flows` (a flow's table, endpoints and metrics), `headers`
//! (fields and payload), `frame_size` and `timing` (rates, durations, departure patterns);
//! this one holds the entry points and the loader they share. The TOML and JSON readers
//! that keep every value's position are in `crate::node`.

mod flows;
mod frame_size;
mod headers;
mod ports;
mod timing;

pub(crate) use frame_size::{predefined_size, PREDEFINED_SIZE_NAMES};
pub(crate) use timing::{rate_from_text, time_from_text};

use std::collections::HashMap;
use std::ops::Range;

use crate::error::{Locator, ModelError};
use crate::line_rate::{check_port, Remedy, TxLine};
use crate::model::{FlowSpec, Pacing, Resources, Scenario, MAX_FLOWS};
use crate::node::{parse_document, Node, Reader, Table};

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
