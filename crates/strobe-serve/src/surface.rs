//! The rest of the OTG surface a test suite reaches for: `PATCH /config` (snappi's
//! `update_config`: a running flow's rate and size changed live), and `POST /control/action`
//! and `POST /monitor/states`, which strobe answers with what it supports (it emulates no
//! devices and no protocols, so it has no actions or protocol states to give).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use serde_json::{json, Map, Value};
use strobe_control::otg::scenario_from_otg;
use strobe_control::session::FlowChange;

use crate::reply::{ok_json, validation};
use crate::{blocking, choice, control_error, no_config, parse_body, Reply, Server};

/// The properties of a flow that `PATCH /config` changes (OTG's FlowsUpdate enum, all of
/// which strobe applies).
const UPDATABLE: [&str; 2] = ["rate", "size"];

/// `PATCH /config`: OTG's ConfigUpdate. `flows.property_names` (rate, size) of the flows in
/// `flows.flows` replace the config's; flows sending take the change at their next
/// hand-over, without stopping; the stored config (`GET /config`) reflects it.
pub(crate) async fn update_config(State(server): State<Arc<Server>>, body: Bytes) -> Reply {
    let request = parse_body(&body)?;
    let update = read_update(&request)?;
    let _control = server.control.lock().await;
    let (config, session) = {
        let state = server.state.lock().await;
        (state.config.clone(), state.flows.clone())
    };
    let config = config.ok_or_else(no_config)?;
    if config.get("x_strobe_toml").is_some() {
        return Err(validation(vec![
            "the config was set as a strobe TOML scenario (POST /strobe/config-toml): PATCH \
             /config changes OTG configs — set the changed scenario again instead"
                .into(),
        ]));
    }
    let (patched, changes, warnings) = patch_flows(&config, &update)?;
    // The patched config is read and checked as a new one would be (rates within the line
    // rate, sizes the headers fit in), off the async workers.
    let locations = server.options.locations.clone();
    let options = server.options.plan.clone();
    let (read, patched) = blocking(move || {
        let read = scenario_from_otg(&patched, &locations)
            .map_err(|e| validation(e.0))
            .and_then(|read| {
                strobe_control::prepare(read.scenario.clone(), &options).map_err(control_error)?;
                Ok(read)
            });
        (read, patched)
    })
    .await?;
    let read = read?;
    let step = session
        .update_step(&read.scenario, &changes)
        .map_err(|e| validation(vec![format!("flows.flows: {e}")]))?;
    for (run, name, change) in step {
        run.update_flow(&name, change);
    }
    let mut state = server.state.lock().await;
    state.flows.replace_scenario(read.scenario);
    state.config = Some(patched);
    Ok(ok_json(json!({ "warnings": warnings })))
}

/// A ConfigUpdate's flows part: the properties to change, and the flows with their new
/// values.
pub(crate) struct FlowsUpdate {
    properties: Vec<String>,
    flows: Vec<Map<String, Value>>,
}

impl FlowsUpdate {
    /// The names of the flows the update changes, in its order.
    pub(crate) fn flow_names(&self) -> Vec<String> {
        self.flows
            .iter()
            .filter_map(|f| f.get("name").and_then(Value::as_str).map(str::to_string))
            .collect()
    }

    /// The same update of only the flows `keep` names, as OTG's ConfigUpdate JSON.
    pub(crate) fn to_json_for(&self, keep: &[String]) -> Value {
        let flows: Vec<&Map<String, Value>> = self
            .flows
            .iter()
            .filter(|f| {
                f.get("name")
                    .and_then(Value::as_str)
                    .is_some_and(|n| keep.iter().any(|k| k == n))
            })
            .collect();
        json!({"choice": "flows", "flows": {"property_names": self.properties, "flows": flows}})
    }
}

pub(crate) fn read_update(request: &Value) -> Result<FlowsUpdate, crate::reply::OtgError> {
    match choice(request, &["flows", "protocols"]) {
        Some("flows") => {}
        Some("protocols") => {
            return Err(validation(vec![
                "choice: `protocols` — strobe emulates no protocols; it updates flows (choice \
                 flows, property_names rate and size)"
                    .into(),
            ]))
        }
        other => {
            return Err(validation(vec![format!(
                "choice: {} — give flows (property_names rate and/or size, and the flows)",
                other.map_or("missing".into(), |o| format!("`{o}` is not an update"))
            )]))
        }
    }
    let flows = &request["flows"];
    let properties = crate::names(flows.get("property_names"))?;
    if properties.is_empty() {
        return Err(validation(vec![
            "flows.property_names: give the properties to change (rate, size)".into(),
        ]));
    }
    if let Some(other) = properties.iter().find(|p| !UPDATABLE.contains(&p.as_str())) {
        return Err(validation(vec![format!(
            "flows.property_names: `{other}` — a flow's rate and size change while it runs \
             (rate, size); set a new config for other changes"
        )]));
    }
    let list = match flows.get("flows") {
        Some(Value::Array(list)) if !list.is_empty() => list,
        _ => {
            return Err(validation(vec![
                "flows.flows: give the flows to change, each with its name and new values".into(),
            ]))
        }
    };
    let mut out = Vec::with_capacity(list.len());
    for (i, flow) in list.iter().enumerate() {
        match flow.as_object() {
            Some(f) if f.get("name").is_some_and(Value::is_string) => out.push(f.clone()),
            _ => {
                return Err(validation(vec![format!(
                    "flows.flows[{i}]: expected a flow object with its name"
                )]))
            }
        }
    }
    Ok(FlowsUpdate {
        properties,
        flows: out,
    })
}

/// The config with the update's properties of its flows replaced (a property the update's
/// flow leaves out takes OTG's default), the changes made, and warnings for what the
/// update's flows say differently beyond those properties (not applied).
pub(crate) fn patch_flows(
    config: &Value,
    update: &FlowsUpdate,
) -> Result<(Value, Vec<FlowChange>, Vec<String>), crate::reply::OtgError> {
    let mut patched = config.clone();
    let Some(flows) = patched.get_mut("flows").and_then(Value::as_array_mut) else {
        return Err(validation(vec![
            "flows.flows: the config has no flows to change".into(),
        ]));
    };
    let mut changes: Vec<FlowChange> = Vec::new();
    let mut warnings = Vec::new();
    for (i, new) in update.flows.iter().enumerate() {
        let name = new.get("name").and_then(Value::as_str).unwrap_or_default();
        let Some(old) = flows
            .iter_mut()
            .filter_map(Value::as_object_mut)
            .find(|f| f.get("name").and_then(Value::as_str) == Some(name))
        else {
            return Err(validation(vec![format!(
                "flows.flows[{i}].name: no flow `{name}` in the config"
            )]));
        };
        if changes.iter().any(|c| c.name == name) {
            return Err(validation(vec![format!(
                "flows.flows[{i}].name: flow `{name}` is named twice"
            )]));
        }
        let differing: Vec<&str> = new
            .iter()
            .filter(|(k, v)| !update.properties.contains(*k) && old.get(*k) != Some(*v))
            .map(|(k, _)| k.as_str())
            .collect();
        if !differing.is_empty() {
            warnings.push(format!(
                "flow `{name}`: {} differ from the config and were not changed (property_names \
                 names what an update changes)",
                differing.join(", ")
            ));
        }
        for property in &update.properties {
            match new.get(property) {
                Some(value) => old.insert(property.clone(), value.clone()),
                None => old.remove(property),
            };
        }
        changes.push(FlowChange {
            name: name.to_string(),
            rate: update.properties.iter().any(|p| p == "rate"),
            size: update.properties.iter().any(|p| p == "size"),
        });
    }
    Ok((patched, changes, warnings))
}

/// `POST /control/action`: OTG's actions are on emulated protocols and devices (ARP/ND,
/// BGP, IS-IS, port reboot), none of which strobe has.
pub(crate) async fn control_action(body: Bytes) -> Reply {
    let request = parse_body(&body)?;
    let asked = match choice(&request, &["protocol", "port"]) {
        Some("protocol") => {
            let sub = choice(&request["protocol"], &["ipv4", "ipv6", "bgp", "isis"]);
            format!("protocol {}", sub.unwrap_or("(none given)"))
        }
        Some("port") => "port reboot".to_string(),
        Some(other) => format!("`{other}`"),
        None => "(no choice given)".to_string(),
    };
    Err(validation(vec![format!(
        "control/action {asked}: not supported — strobe is a stateless traffic generator: it \
         emulates no devices or protocols, so it has no protocol actions (ipv4/ipv6 ping, \
         bgp, isis) and does not reboot ports. It supports POST /control/state: traffic \
         flow_transmit (start, stop, pause, resume), port capture (start, stop) and port \
         link (up, down on the lab's ports)"
    )]))
}

/// `POST /monitor/states`: OTG's states are of emulated protocols (neighbours, BGP prefixes,
/// LSPs, DHCP leases, …), none of which strobe has.
pub(crate) async fn monitor_states(body: Bytes) -> Reply {
    let request = parse_body(&body)?;
    let asked = request
        .get("choice")
        .and_then(Value::as_str)
        .map_or("(no choice given)".to_string(), |c| format!("`{c}`"));
    Err(validation(vec![format!(
        "monitor/states {asked}: not supported — strobe is a stateless traffic generator: it \
         emulates no devices or protocols, so it has no protocol states (ipv4_neighbors, \
         ipv6_neighbors, bgp_prefixes, isis_lsps, lldp_neighbors, rsvp_lsps, dhcp, ospf, \
         bmp). It monitors POST /monitor/metrics (port and flow) and POST /monitor/capture"
    )]))
}

/// The columns a port metrics request may choose (OTG's `column_names`); `name` always stays.
const PORT_COLUMNS: [&str; 14] = [
    "transmit",
    "location",
    "link",
    "capture",
    "frames_tx",
    "frames_rx",
    "bytes_tx",
    "bytes_rx",
    "frames_tx_rate",
    "frames_rx_rate",
    "bytes_tx_rate",
    "bytes_rx_rate",
    "last_change",
    "speed",
];

/// The metrics a flow metrics request may choose (OTG's `metric_names`). What the list
/// cannot name (name, ports, loss, latency, timestamps: the config's `metrics` asks for
/// those) always stays.
const FLOW_METRICS: [&str; 17] = [
    "transmit",
    "frames_tx",
    "frames_rx",
    "bytes_tx",
    "bytes_rx",
    "frames_tx_rate",
    "frames_rx_rate",
    "tx_l1_rate_bps",
    "rx_l1_rate_bps",
    "tx_rate_bytes",
    "rx_rate_bytes",
    "tx_rate_bps",
    "rx_rate_bps",
    "tx_rate_kbps",
    "rx_rate_kbps",
    "tx_rate_mbps",
    "rx_rate_mbps",
];

/// The columns a metrics request chose: `port.column_names` or `flow.metric_names`, each
/// checked against OTG's list (empty: every column).
pub(crate) fn chosen_columns(
    request: &Value,
    kind: &str,
) -> Result<Vec<String>, crate::reply::OtgError> {
    let (key, accepted): (&str, &[&str]) = match kind {
        "port" => ("column_names", &PORT_COLUMNS),
        _ => ("metric_names", &FLOW_METRICS),
    };
    let chosen = crate::names(request.get(kind).and_then(|r| r.get(key)))?;
    if let Some(bad) = chosen.iter().find(|c| !accepted.contains(&c.as_str())) {
        return Err(validation(vec![format!(
            "{kind}.{key}: `{bad}` — accepted: {}",
            accepted.join(", ")
        )]));
    }
    Ok(chosen)
}

/// Leaves in each metric of `reply` (`port_metrics` or `flow_metrics`) only the columns
/// `chosen` names of those a request can choose (see [`chosen_columns`]); none chosen: all.
pub(crate) fn keep_columns(reply: &mut Value, kind: &str, chosen: &[String]) {
    if chosen.is_empty() {
        return;
    }
    let (list, choosable): (&str, &[&str]) = match kind {
        "port" => ("port_metrics", &PORT_COLUMNS),
        _ => ("flow_metrics", &FLOW_METRICS),
    };
    let Some(metrics) = reply.get_mut(list).and_then(Value::as_array_mut) else {
        return;
    };
    for metric in metrics.iter_mut().filter_map(Value::as_object_mut) {
        metric.retain(|k, _| !choosable.contains(&k.as_str()) || chosen.contains(k));
    }
}

/// What a tagged metric may keep of its counters (OTG `tagged_metrics.metric_names`): the
/// flow's choosable metrics but `transmit`.
const TAGGED_METRICS: &[&str] = FLOW_METRICS.split_at(1).1;

/// Applies a flow metrics request's `tagged_metrics` (OTG `Flow.TaggedMetrics.Filter`) to
/// the reply: `include` (default true), `include_empty_metrics` (default false: a tag
/// combination with nothing sent or received is left out), `metric_names`, and `filters`
/// (tag name and the hex values to keep; a name no flow of the reply tags is refused).
pub(crate) fn filter_tagged(
    reply: &mut Value,
    request: &Value,
) -> Result<(), crate::reply::OtgError> {
    let asked = request.get("flow").and_then(|f| f.get("tagged_metrics"));
    let flag = |key: &str, default: bool| {
        asked
            .and_then(|a| a.get(key))
            .and_then(Value::as_bool)
            .unwrap_or(default)
    };
    let (include, include_empty) = (flag("include", true), flag("include_empty_metrics", false));
    let names = crate::names(asked.and_then(|a| a.get("metric_names")))?;
    if let Some(bad) = names.iter().find(|c| !TAGGED_METRICS.contains(&c.as_str())) {
        return Err(validation(vec![format!(
            "flow.tagged_metrics.metric_names: `{bad}` — accepted: {}",
            TAGGED_METRICS.join(", ")
        )]));
    }
    let mut filters: Vec<(String, Vec<u128>)> = Vec::new();
    for (i, f) in asked
        .and_then(|a| a.get("filters"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let name = f.get("name").and_then(Value::as_str).unwrap_or_default();
        let mut values = Vec::new();
        for v in crate::names(f.get("values"))? {
            let digits = v.trim_start_matches("0x").trim_start_matches("0X");
            let n = u128::from_str_radix(digits, 16).map_err(|_| {
                validation(vec![format!(
                    "flow.tagged_metrics.filters[{i}].values: `{v}` is not a hex value such as 0x1f"
                )])
            })?;
            values.push(n);
        }
        filters.push((name.to_string(), values));
    }
    let Some(metrics) = reply.get_mut("flow_metrics").and_then(Value::as_array_mut) else {
        return Ok(());
    };
    let tag_names: Vec<String> = metrics
        .iter()
        .filter_map(|m| {
            m.get("tagged_metrics")?
                .as_array()?
                .first()?
                .get("tags")?
                .as_array()
                .cloned()
        })
        .flatten()
        .filter_map(|t| Some(t.get("name")?.as_str()?.to_string()))
        .collect();
    if let Some((name, _)) = filters.iter().find(|(n, _)| !tag_names.contains(n)) {
        return Err(validation(vec![format!(
            "flow.tagged_metrics.filters: no metric tag `{name}` in the flows asked for (tags: {})",
            if tag_names.is_empty() {
                "none".to_string()
            } else {
                tag_names.join(", ")
            }
        )]));
    }
    let value_of = |tags: &Value, name: &str| -> Option<u128> {
        let tag = tags
            .as_array()?
            .iter()
            .find(|t| t.get("name").and_then(Value::as_str) == Some(name))?;
        let hex = tag.get("value")?.get("hex")?.as_str()?;
        u128::from_str_radix(hex.trim_start_matches("0x"), 16).ok()
    };
    for metric in metrics.iter_mut().filter_map(Value::as_object_mut) {
        if !include {
            metric.remove("tagged_metrics");
            continue;
        }
        let Some(tagged) = metric
            .get_mut("tagged_metrics")
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        let zero =
            |t: &Value, key: &str| t.get(key).and_then(Value::as_str).is_none_or(|v| v == "0");
        tagged.retain(|t| {
            let shown = include_empty || !(zero(t, "frames_tx") && zero(t, "frames_rx"));
            let tags = t.get("tags").unwrap_or(&Value::Null);
            shown
                && filters.iter().all(|(name, values)| {
                    values.is_empty() || value_of(tags, name).is_some_and(|v| values.contains(&v))
                })
        });
        if !names.is_empty() {
            for t in tagged.iter_mut().filter_map(Value::as_object_mut) {
                t.retain(|k, _| !TAGGED_METRICS.contains(&k.as_str()) || names.contains(k));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Value {
        json!({
            "ports": [{"name": "p1", "location": "null"}],
            "flows": [
                {"name": "f", "tx_rx": {"choice": "port", "port": {"tx_name": "p1"}},
                 "rate": {"choice": "pps", "pps": "1000"}, "size": {"choice": "fixed", "fixed": 64}},
                {"name": "g", "tx_rx": {"choice": "port", "port": {"tx_name": "p1"}}}
            ]
        })
    }

    fn update(properties: &[&str], flows: Value) -> FlowsUpdate {
        let request =
            json!({"choice": "flows", "flows": {"property_names": properties, "flows": flows}});
        read_update(&request).unwrap()
    }

    #[test]
    fn only_the_named_properties_of_the_named_flows_change() {
        let u = update(
            &["rate"],
            json!([{"name": "f", "rate": {"choice": "pps", "pps": "2000"}, "size": {"choice": "fixed", "fixed": 512}}]),
        );
        let (patched, changes, warnings) = patch_flows(&config(), &u).unwrap();
        assert_eq!(patched["flows"][0]["rate"]["pps"], "2000");
        // size was not named: kept, and the difference is said.
        assert_eq!(patched["flows"][0]["size"]["fixed"], 64);
        assert_eq!(patched["flows"][1], config()["flows"][1]);
        assert_eq!(
            changes,
            [FlowChange {
                name: "f".into(),
                rate: true,
                size: false
            }]
        );
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("size") && !warnings[0].contains("rate"));
        // A named property the update's flow leaves out goes back to OTG's default.
        let u = update(&["size"], json!([{"name": "f"}]));
        let (patched, _, _) = patch_flows(&config(), &u).unwrap();
        assert!(patched["flows"][0].get("size").is_none());
    }

    #[test]
    fn metrics_keep_only_the_columns_chosen_and_what_cannot_be_chosen() {
        let request =
            json!({"choice": "port", "port": {"column_names": ["frames_rx", "bytes_rx_rate"]}});
        let chosen = chosen_columns(&request, "port").unwrap();
        let mut reply = json!({"port_metrics": [
            {"name": "p", "location": "x", "frames_rx": "3", "frames_tx": "4", "bytes_rx_rate": 1.0}
        ]});
        keep_columns(&mut reply, "port", &chosen);
        assert_eq!(
            reply["port_metrics"][0],
            json!({"name": "p", "frames_rx": "3", "bytes_rx_rate": 1.0})
        );
        let request = json!({"flow": {"metric_names": ["frames_tx"]}});
        let chosen = chosen_columns(&request, "flow").unwrap();
        let mut reply = json!({"flow_metrics": [
            {"name": "f", "port_tx": "p", "frames_tx": "4", "frames_rx": "3", "loss": 0.0}
        ]});
        keep_columns(&mut reply, "flow", &chosen);
        assert_eq!(
            reply["flow_metrics"][0],
            json!({"name": "f", "port_tx": "p", "frames_tx": "4", "loss": 0.0})
        );
        // None chosen: all.
        let mut all = reply.clone();
        keep_columns(&mut all, "flow", &[]);
        assert_eq!(all, reply);
        let e = chosen_columns(&json!({"port": {"column_names": ["loss"]}}), "port").unwrap_err();
        assert!(
            format!("{e:?}").contains("port.column_names: `loss`"),
            "{e:?}"
        );
    }

    #[test]
    fn bad_updates_are_refused_naming_the_field() {
        let refused = |request: Value| {
            let e = match read_update(&request) {
                Err(e) => e,
                Ok(u) => patch_flows(&config(), &u).unwrap_err(),
            };
            format!("{e:?}")
        };
        let flows = json!([{"name": "f"}]);
        for (request, says) in [
            (json!({"choice": "protocols"}), "emulates no protocols"),
            (json!({}), "choice: missing"),
            (
                json!({"choice": "flows", "flows": {"property_names": ["tx_rx"], "flows": flows}}),
                "`tx_rx`",
            ),
            (
                json!({"choice": "flows", "flows": {"property_names": [], "flows": flows}}),
                "property_names",
            ),
            (
                json!({"choice": "flows", "flows": {"property_names": ["rate"], "flows": []}}),
                "flows.flows",
            ),
            (
                json!({"choice": "flows", "flows": {"property_names": ["rate"], "flows": [{"name": "nope"}]}}),
                "no flow `nope`",
            ),
            (
                json!({"choice": "flows", "flows": {"property_names": ["rate"], "flows": [{"name": "f"}, {"name": "f"}]}}),
                "named twice",
            ),
            (
                json!({"choice": "flows", "flows": {"property_names": ["rate"], "flows": [7]}}),
                "flows.flows[0]",
            ),
        ] {
            let e = refused(request.clone());
            assert!(e.contains(says), "{request}: {e}");
        }
    }
}
