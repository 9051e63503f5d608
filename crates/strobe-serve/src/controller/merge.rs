//! One flow's and one port's metrics out of the agents' replies: a flow sent on agent A and
//! received on agent B takes what it sent from A and what arrived (counts, latency, reorder)
//! from B; loss is what A sent that B did not receive, once B's counts are final.

use serde_json::{json, Map, Value};

use super::placement::{FlowPlace, Placement};

/// Entries of an agent's metrics reply (`flow_metrics` or `port_metrics`), by name.
fn entries<'a>(reply: Option<&'a Value>, key: &str) -> Vec<&'a Value> {
    reply
        .and_then(|r| r.get(key))
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

fn find<'a>(reply: Option<&'a Value>, key: &str, name: &str) -> Option<&'a Value> {
    entries(reply, key)
        .into_iter()
        .find(|e| e.get("name").and_then(Value::as_str) == Some(name))
}

/// OTG's 64-bit counters travel as strings (numbers are taken too).
fn counter(entry: &Value, key: &str) -> u64 {
    match entry.get(key) {
        Some(Value::String(s)) => s.parse().unwrap_or(0),
        Some(Value::Number(n)) => n.as_u64().unwrap_or(0),
        _ => 0,
    }
}

fn rate(entry: &Value, key: &str) -> f64 {
    entry.get(key).and_then(Value::as_f64).unwrap_or(0.0)
}

/// A receiving agent's counts of a flow are final once its run is over: its entry then
/// carries strobe's detail (`x_strobe`, from the run's results).
fn is_final(entry: &Value) -> bool {
    entry.get("x_strobe").is_some_and(Value::is_object)
}

/// What an agent said of its clock (`GET /strobe/clock`) and what the controller's own
/// offset check found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AgentClock {
    /// The kernel's boot id: agents with the same one share one CLOCK_REALTIME.
    pub boot_id: Option<String>,
    /// The bound its sync source gives on its clock's error (None: no sync known).
    pub bound_ns: Option<u64>,
    /// Its sync source, in words.
    pub detail: String,
    /// The controller's check: this agent's clock less the controller's, and its bound.
    pub checked: Option<(i64, u64)>,
    /// The check as measured (or why it could not be), for `/strobe/agents`.
    pub check: Option<Value>,
}

impl AgentClock {
    /// Reads an agent's `GET /strobe/clock` reply.
    pub fn from_reply(reply: &Value) -> AgentClock {
        AgentClock {
            boot_id: reply["boot_id"].as_str().map(str::to_string),
            bound_ns: reply["sync"]["error_bound_ns"].as_u64(),
            detail: reply["sync"]["detail"]
                .as_str()
                .unwrap_or("its agent did not say")
                .to_string(),
            checked: None,
            check: None,
        }
    }
}

/// Whether a flow's one-way latency from `tx` to `rx` can be trusted, with `max_ns` the
/// largest clock error bound accepted: the bound and how it is known, or why not.
pub fn one_way(
    tx: (&str, &AgentClock),
    rx: (&str, &AgentClock),
    max_ns: u64,
) -> Result<Value, String> {
    let (tx_name, tx) = tx;
    let (rx_name, rx) = rx;
    let same_clock = tx.boot_id.is_some() && tx.boot_id == rx.boot_id;
    let (claimed, how) = if same_clock {
        (
            0,
            "one machine's clock (both agents report the same kernel boot id)".to_string(),
        )
    } else {
        let unknown = |name: &str, c: &AgentClock| {
            format!(
                "no clock synchronization is known on agent `{name}` ({}): one-way latency needs both ends' clocks synchronized (ptp4l, chrony)",
                c.detail
            )
        };
        let t = tx.bound_ns.ok_or_else(|| unknown(tx_name, tx))?;
        let r = rx.bound_ns.ok_or_else(|| unknown(rx_name, rx))?;
        (
            t + r,
            format!("`{tx_name}`: {}; `{rx_name}`: {}", tx.detail, rx.detail),
        )
    };
    // The controller's own check between the two ends, where it ran.
    let check = match (tx.checked, rx.checked) {
        (Some((t, tb)), Some((r, rb))) => Some((r - t, tb + rb)),
        _ => None,
    };
    if let Some((offset, uncertainty)) = check {
        if offset.unsigned_abs() > claimed + uncertainty {
            return Err(format!(
                "the controller's offset check finds agent `{rx_name}`'s clock {offset} ns from `{tx_name}`'s (± {uncertainty} ns), beyond the {claimed} ns their synchronization claims ({how})"
            ));
        }
    }
    if claimed > max_ns {
        return Err(format!(
            "the clocks of `{tx_name}` and `{rx_name}` are known to within {claimed} ns only, above the {max_ns} ns accepted (--max-clock-error; {how})"
        ));
    }
    Ok(json!({
        "bound_ns": claimed,
        "how": how,
        // Each end's synchronization as its agent reported it (ptp4l's state, chrony's, …).
        "sync": { tx_name: tx.detail, rx_name: rx.detail },
        "offset_check_ns": check.map(|c| c.0),
        "offset_check_bound_ns": check.map(|c| c.1),
    }))
}

/// What a receiver can do instead when one-way latency is withheld.
pub const ROUND_TRIPS_INSTEAD: &str = "measure round trips instead: `strobe reflect` on the far host and a flow back to the sender (docs/latency.md)";

/// How late a sender's first frame went against a synchronized start at `start_at_ns`
/// (its entry's `x_strobe.tx_start`: the schedule's t0, the first frame's deadline and when
/// it went); negative: early. None until the sender's run is over.
pub fn start_error_ns(sent: &Value, start_at_ns: u64) -> Option<i64> {
    let start = sent.get("x_strobe")?.get("tx_start")?;
    let get = |k: &str| start.get(k).and_then(Value::as_u64);
    let (t0, due, went) = (
        get("t0_ns")?,
        get("first_due_ns")?,
        get("first_handover_ns")?,
    );
    // The first frame was due this long after t0; at a perfect start, at `start_at` + that.
    let due_at_start = start_at_ns.checked_add(due.checked_sub(t0)?)?;
    Some(went as i64 - due_at_start as i64)
}

/// Flow metrics of `flows` (the config's order) from the agents' replies (`replies[agent]`,
/// None for agents not asked); `extensions`: keep strobe's detail, with each flow's start
/// error against its synchronized start (`start_at`, by flow name).
pub fn flow_metrics(
    flows: &[&FlowPlace],
    replies: &[Option<Value>],
    agent_names: &[String],
    extensions: bool,
    start_at: &dyn Fn(&str) -> Option<u64>,
    clock: &dyn Fn(usize, usize) -> Result<Value, String>,
) -> Value {
    // Each agent's entries by name, looked up once per flow and end.
    let index: Vec<std::collections::HashMap<&str, &Value>> = replies
        .iter()
        .map(|r| {
            entries(r.as_ref(), "flow_metrics")
                .into_iter()
                .filter_map(|e| Some((e.get("name")?.as_str()?, e)))
                .collect()
        })
        .collect();
    let find = |agent: usize, name: &str| index.get(agent).and_then(|i| i.get(name)).copied();
    let mut out = Vec::new();
    for flow in flows {
        let Some(sent) = find(flow.tx_agent, &flow.name) else {
            continue;
        };
        let mut merged = sent.as_object().cloned().unwrap_or_default();
        let start = start_at(&flow.name)
            .map(|at| json!({ "at_ns": at, "error_ns": start_error_ns(sent, at) }));
        if flow.local() {
            // As for flows across agents: "stopped" once the counts are final (its run over,
            // its detail present), not while its receivers still drain.
            let draining = start.is_some()
                && !flow.rx_agents.is_empty()
                && sent.get("transmit").and_then(Value::as_str) == Some("stopped")
                && !is_final(sent);
            if draining {
                merged.insert("transmit".into(), json!("started"));
            }
            if !extensions {
                merged.remove("x_strobe");
                if let Some(Value::Array(tagged)) = merged.get_mut("tagged_metrics") {
                    for t in tagged.iter_mut().filter_map(Value::as_object_mut) {
                        t.remove("x_strobe");
                    }
                }
            } else if let (Some(start), Some(Value::Object(x))) =
                (start, merged.get_mut("x_strobe"))
            {
                x.insert("start".into(), start);
            }
            out.push(Value::Object(merged));
            continue;
        }
        let received: Vec<&Value> = flow
            .rx_agents
            .iter()
            .filter_map(|&a| find(a, &flow.name))
            .collect();
        merge_received(&mut merged, sent, &received, start.is_some());
        // One-way latency across hosts only where both clocks are known to agree.
        let verdicts: Vec<Result<Value, String>> = flow
            .rx_agents
            .iter()
            .map(|&r| clock(flow.tx_agent, r))
            .collect();
        let withheld = verdicts.iter().find_map(|v| v.as_ref().err()).cloned();
        if withheld.is_some() {
            merged.remove("latency");
        }
        if extensions {
            let mut detail = received
                .first()
                .and_then(|r| r.get("x_strobe"))
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            if !received.is_empty() && received.iter().all(|r| is_final(r)) {
                detail.insert(
                    "frames_rx_unique".into(),
                    json!(unique_rx(&received).to_string()),
                );
            }
            if let Some(t) = sent.get("x_strobe").and_then(|x| x.get("tx_start")) {
                detail.insert("tx_start".into(), t.clone());
            }
            if let Some(start) = start {
                detail.insert("start".into(), start);
            }
            match &withheld {
                Some(why) => {
                    detail.remove("latency");
                    detail.insert(
                        "one_way_latency".into(),
                        json!({ "withheld": why, "instead": ROUND_TRIPS_INSTEAD }),
                    );
                }
                None => {
                    if let Some(Ok(clock)) = verdicts.first() {
                        detail.insert("clock".into(), clock.clone());
                    }
                }
            }
            detail.insert(
                "agents".into(),
                json!({
                    "tx": agent_names[flow.tx_agent],
                    "rx": flow.rx_agents.iter().map(|&a| &agent_names[a]).collect::<Vec<_>>(),
                }),
            );
            merged.insert("x_strobe".into(), Value::Object(detail));
        } else {
            merged.remove("x_strobe");
        }
        out.push(Value::Object(merged));
    }
    json!({ "choice": "flow_metrics", "flow_metrics": out })
}

/// Frames received once each, over the receiving agents (their detail's count, or frames).
fn unique_rx(received: &[&Value]) -> u64 {
    received
        .iter()
        .map(
            |r| match r.get("x_strobe").and_then(|x| x.get("frames_rx_unique")) {
                Some(_) => counter(&r["x_strobe"], "frames_rx_unique"),
                None => counter(r, "frames_rx"),
            },
        )
        .sum()
}

/// `merged` (the sender's entry) with the receivers' counts, latency and times, its
/// transmit state "stopped" only once every receiver's counts are final, and loss then.
fn merge_received(
    merged: &mut Map<String, Value>,
    sent: &Value,
    received: &[&Value],
    started: bool,
) {
    let sum = |key: &str| received.iter().map(|r| counter(r, key)).sum::<u64>();
    merged.insert("frames_rx".into(), json!(sum("frames_rx").to_string()));
    merged.insert("bytes_rx".into(), json!(sum("bytes_rx").to_string()));
    let rx_rate: f64 = received.iter().map(|r| rate(r, "frames_rx_rate")).sum();
    merged.insert("frames_rx_rate".into(), json!(rx_rate));
    merged.remove("latency");
    merged.remove("timestamps");
    merged.remove("loss");
    for key in ["latency", "timestamps"] {
        if let Some(v) = received.iter().find_map(|r| r.get(key)) {
            merged.insert(key.into(), v.clone());
        }
    }
    let sender_done = sent.get("transmit").and_then(Value::as_str) == Some("stopped");
    let all_final = !received.is_empty() && received.iter().all(|r| is_final(r));
    if sender_done && !all_final && started {
        // Sent, but the receivers still count frames in flight. (A flow this config never
        // started is idle everywhere: stopped as its sender says.)
        merged.insert("transmit".into(), json!("started"));
    }
    // An end lost mid-run has counts as last seen: what was lost between them is not known.
    let lost_end = std::iter::once(sent)
        .chain(received.iter().copied())
        .any(|e| {
            e.get("x_strobe")
                .is_some_and(|x| x.get("agent_lost").is_some())
        });
    let counts_final = sender_done && all_final && !lost_end;
    if counts_final {
        insert_loss(merged, received);
    }
    merge_tagged(merged, received, counts_final);
}

/// Loss in percent of what `entry` says it sent, from what `received` counted once each.
fn insert_loss(entry: &mut Map<String, Value>, received: &[&Value]) {
    let tx = counter(&Value::Object(entry.clone()), "frames_tx");
    if tx > 0 {
        let lost = tx.saturating_sub(unique_rx(received));
        let pct = (lost as f64 * 100.0 / tx as f64 * 1000.0).round() / 1000.0;
        entry.insert("loss".into(), json!(pct));
    }
}

/// A tagged flow across agents: each tag combination's entry from the sender (what it sent)
/// with the receivers' entries for the same tags (what arrived), as for the flow itself.
fn merge_tagged(merged: &mut Map<String, Value>, received: &[&Value], counts_final: bool) {
    let Some(Value::Array(entries)) = merged.get_mut("tagged_metrics") else {
        return;
    };
    for entry in entries.iter_mut().filter_map(Value::as_object_mut) {
        let tags = entry.get("tags").cloned().unwrap_or(Value::Null);
        let theirs: Vec<&Value> = received
            .iter()
            .filter_map(|r| {
                r.get("tagged_metrics")?
                    .as_array()?
                    .iter()
                    .find(|t| t.get("tags") == Some(&tags))
            })
            .collect();
        let sum = |key: &str| theirs.iter().map(|r| counter(r, key)).sum::<u64>();
        entry.insert("frames_rx".into(), json!(sum("frames_rx").to_string()));
        entry.insert("bytes_rx".into(), json!(sum("bytes_rx").to_string()));
        let rx_rate: f64 = theirs.iter().map(|r| rate(r, "frames_rx_rate")).sum();
        entry.insert("frames_rx_rate".into(), json!(rx_rate));
        for key in ["latency", "timestamps", "loss"] {
            entry.remove(key);
        }
        for key in ["latency", "timestamps"] {
            if let Some(v) = theirs.iter().find_map(|r| r.get(key)) {
                entry.insert(key.into(), v.clone());
            }
        }
        if counts_final {
            insert_loss(entry, &theirs);
        }
        // The receivers' unique counts served the loss; OTG has no place for them.
        entry.remove("x_strobe");
    }
}

/// Port metrics of the ports named (all when none are), in the config's order, each from
/// its own agent, with the location as the user wrote it.
pub fn port_metrics(placement: &Placement, wanted: &[String], replies: &[Option<Value>]) -> Value {
    let mut out = Vec::new();
    for port in &placement.ports {
        if !wanted.is_empty() && !wanted.contains(&port.name) {
            continue;
        }
        let reply = replies.get(port.agent).and_then(Option::as_ref);
        if let Some(entry) = find(reply, "port_metrics", &port.name) {
            let mut entry = entry.clone();
            entry["location"] = json!(port.written);
            out.push(entry);
        }
    }
    json!({ "choice": "port_metrics", "port_metrics": out })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::placement::PortPlace;

    fn placement() -> Placement {
        Placement {
            ports: vec![
                PortPlace {
                    name: "a1".into(),
                    agent: 0,
                    written: "hosta/eth1".into(),
                },
                PortPlace {
                    name: "b1".into(),
                    agent: 1,
                    written: "hostb/eth1".into(),
                },
            ],
            flows: vec![
                FlowPlace {
                    name: "ab".into(),
                    tx_agent: 0,
                    rx_agents: vec![1],
                },
                FlowPlace {
                    name: "aa".into(),
                    tx_agent: 0,
                    rx_agents: vec![0],
                },
            ],
            configs: vec![None, None],
        }
    }

    fn names() -> Vec<String> {
        vec!["hosta".into(), "hostb".into()]
    }

    fn flow(name: &str, transmit: &str, tx: u64, rx: u64, detail: Option<Value>) -> Value {
        let mut f = json!({
            "name": name, "transmit": transmit,
            "frames_tx": tx.to_string(), "frames_rx": rx.to_string(),
            "bytes_tx": (tx * 64).to_string(), "bytes_rx": (rx * 64).to_string(),
            "frames_tx_rate": 0.0, "frames_rx_rate": 0.0,
        });
        if let Some(d) = detail {
            f["x_strobe"] = d;
            f["latency"] =
                json!({"minimum_ns": 1000.0, "maximum_ns": 2000.0, "average_ns": 1500.0});
        }
        f
    }

    #[test]
    fn a_cross_host_flow_takes_sent_from_its_sender_and_the_rest_from_its_receiver() {
        let p = placement();
        let flows: Vec<&FlowPlace> = p.flows.iter().collect();
        let a = json!({"flow_metrics": [flow("ab", "stopped", 1000, 0, None), flow("aa", "stopped", 5, 5, Some(json!({})))]});
        // The receiver still drains: not stopped, no loss yet.
        let b_running = json!({"flow_metrics": [flow("ab", "started", 0, 990, None)]});
        let m = flow_metrics(
            &flows,
            &[Some(a.clone()), Some(b_running)],
            &names(),
            true,
            &|_| Some(1),
            &|_, _| Ok(json!({})),
        );
        let ab = &m["flow_metrics"][0];
        assert_eq!(ab["frames_tx"], "1000");
        assert_eq!(ab["frames_rx"], "990");
        assert_eq!(ab["bytes_rx"], "63360");
        assert_eq!(ab["transmit"], "started");
        assert!(ab.get("loss").is_none());
        assert_eq!(
            ab["x_strobe"]["agents"],
            json!({"tx": "hosta", "rx": ["hostb"]})
        );
        // Final: stopped, with loss against unique frames and the receiver's latency.
        let b_done = json!({"flow_metrics": [flow("ab", "stopped", 0, 995, Some(json!({"frames_rx_unique": "990", "reordered": "3"})))]});
        let m = flow_metrics(
            &flows,
            &[Some(a), Some(b_done)],
            &names(),
            true,
            &|_| None,
            &|_, _| Ok(json!({})),
        );
        let ab = &m["flow_metrics"][0];
        assert_eq!(ab["transmit"], "stopped");
        assert_eq!(ab["loss"], json!(1.0));
        assert_eq!(ab["latency"]["minimum_ns"], json!(1000.0));
        assert_eq!(ab["x_strobe"]["reordered"], "3");
        // A local flow is its agent's entry as it is; without extensions, no detail at all.
        let aa = &m["flow_metrics"][1];
        assert_eq!(aa["frames_rx"], "5");
        let a = json!({"flow_metrics": [flow("ab", "stopped", 1000, 0, None), flow("aa", "stopped", 5, 5, Some(json!({})))]});
        let plain = flow_metrics(
            &flows,
            &[Some(a), None],
            &names(),
            false,
            &|_| Some(1),
            &|_, _| Ok(json!({})),
        );
        assert!(plain["flow_metrics"][1].get("x_strobe").is_none());
        assert!(plain["flow_metrics"][0].get("x_strobe").is_none());
        assert_eq!(plain["flow_metrics"][0]["transmit"], "started");
        // A flow the config never started is idle: stopped, whatever its receivers say.
        let a = json!({"flow_metrics": [flow("ab", "stopped", 0, 0, None)]});
        let idle = flow_metrics(
            &flows[..1],
            &[
                Some(a),
                Some(json!({"flow_metrics": [flow("ab", "stopped", 0, 0, None)]})),
            ],
            &names(),
            true,
            &|_| None,
            &|_, _| Ok(json!({})),
        );
        assert_eq!(idle["flow_metrics"][0]["transmit"], "stopped");
    }

    #[test]
    fn a_start_error_is_the_first_frame_against_its_deadline_from_the_agreed_start() {
        let sent = json!({"x_strobe": {"tx_start": {"t0_ns": 1_000_100, "first_due_ns": 1_000_150, "first_handover_ns": 1_000_180}}});
        // Agreed at 1_000_000: due at 1_000_050, went 130 ns late (t0 itself came 100 late).
        assert_eq!(start_error_ns(&sent, 1_000_000), Some(130));
        assert_eq!(start_error_ns(&sent, 1_000_200), Some(-70));
        assert_eq!(start_error_ns(&json!({}), 5), None);
    }

    fn clock(boot: &str, bound: Option<u64>) -> AgentClock {
        AgentClock {
            boot_id: Some(boot.into()),
            bound_ns: bound,
            detail: "test".into(),
            checked: None,
            check: None,
        }
    }

    #[test]
    fn one_way_latency_needs_one_clock_or_two_known_to_agree() {
        let same = one_way(("a", &clock("x", None)), ("b", &clock("x", None)), 0).unwrap();
        assert_eq!(same["bound_ns"], 0);
        let why = one_way(
            ("a", &clock("x", Some(500))),
            ("b", &clock("y", None)),
            10_000,
        )
        .unwrap_err();
        assert!(
            why.contains("no clock synchronization is known on agent `b`"),
            "{why}"
        );
        let ok = one_way(
            ("a", &clock("x", Some(500))),
            ("b", &clock("y", Some(700))),
            10_000,
        )
        .unwrap();
        assert_eq!(ok["bound_ns"], 1200);
        let why = one_way(
            ("a", &clock("x", Some(5000))),
            ("b", &clock("y", Some(7000))),
            10_000,
        )
        .unwrap_err();
        assert!(why.contains("above the 10000 ns accepted"), "{why}");
        // The check finds what the sync claims cannot: an offset beyond both bounds.
        let (mut a, mut b) = (clock("x", None), clock("x", None));
        a.checked = Some((100, 300));
        b.checked = Some((37_100, 300));
        let why = one_way(("a", &a), ("b", &b), 10_000).unwrap_err();
        assert!(why.contains("37000 ns from `a`'s (± 600 ns)"), "{why}");
        b.checked = Some((500, 300));
        assert_eq!(
            one_way(("a", &a), ("b", &b), 10_000).unwrap()["offset_check_ns"],
            400
        );
    }

    #[test]
    fn withheld_latency_leaves_the_reply_with_the_reason() {
        let p = placement();
        let flows: Vec<&FlowPlace> = p.flows.iter().collect();
        let a = json!({"flow_metrics": [flow("ab", "stopped", 10, 0, None), flow("aa", "stopped", 5, 5, Some(json!({})))]});
        let b = json!({"flow_metrics": [flow("ab", "stopped", 0, 10, Some(json!({"frames_rx_unique": "10", "latency": {"frames": "10"}})))]});
        let m = flow_metrics(
            &flows,
            &[Some(a), Some(b)],
            &names(),
            true,
            &|_| None,
            &|_, _| Err("no sync".into()),
        );
        let ab = &m["flow_metrics"][0];
        assert!(ab.get("latency").is_none(), "{ab}");
        assert!(ab["x_strobe"].get("latency").is_none());
        assert_eq!(ab["x_strobe"]["one_way_latency"]["withheld"], "no sync");
        assert_eq!(ab["frames_rx"], "10");
    }

    #[test]
    fn ports_come_from_their_own_agents_with_their_written_locations() {
        let p = placement();
        let a = json!({"port_metrics": [{"name": "a1", "location": "eth1", "frames_tx": "7"}]});
        let b = json!({"port_metrics": [{"name": "b1", "location": "eth1", "frames_rx": "7"}]});
        let m = port_metrics(&p, &[], &[Some(a), Some(b)]);
        assert_eq!(m["port_metrics"][0]["location"], "hosta/eth1");
        assert_eq!(m["port_metrics"][1]["frames_rx"], "7");
        let one = port_metrics(
            &p,
            &["b1".into()],
            &[None, Some(json!({"port_metrics": [{"name": "b1"}]}))],
        );
        assert_eq!(one["port_metrics"].as_array().unwrap().len(), 1);
    }
}
