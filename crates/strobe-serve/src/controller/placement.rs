//! Where a config's ports and flows are: each port on the agent its location names
//! (`AGENT/LOCATION`), and the config each agent is given — every flow, in the config's
//! order (so flow ids agree across agents), its own ports where they are and the others'
//! as `remote:` (neither opened nor read there).

use serde_json::Value;

/// One port of the config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortPlace {
    pub name: String,
    /// Index of its agent.
    pub agent: usize,
    /// The location as the user wrote it (`hostb/eth1`, or a name of the location map).
    pub written: String,
}

/// One flow of the config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowPlace {
    pub name: String,
    pub tx_agent: usize,
    pub rx_agents: Vec<usize>,
}

impl FlowPlace {
    /// Sent and received on one agent: its counters there are the flow's own.
    pub fn local(&self) -> bool {
        self.rx_agents.iter().all(|&a| a == self.tx_agent)
    }
}

/// A config placed on the agents.
#[derive(Clone, Debug)]
pub struct Placement {
    pub ports: Vec<PortPlace>,
    pub flows: Vec<FlowPlace>,
    /// Each agent's config (None: no port of the config is on it).
    pub configs: Vec<Option<Value>>,
}

impl Placement {
    /// Agents with a port in the config.
    pub fn agents_in_use(&self) -> Vec<usize> {
        let mut used: Vec<usize> = self.ports.iter().map(|p| p.agent).collect();
        used.sort_unstable();
        used.dedup();
        used
    }

    /// The flows named (all when none are), or the first name the config does not have.
    pub fn flows_named<'a>(&'a self, names: &[String]) -> Result<Vec<&'a FlowPlace>, String> {
        if let Some(n) = names
            .iter()
            .find(|n| !self.flows.iter().any(|f| &&f.name == n))
        {
            return Err(n.clone());
        }
        Ok(self
            .flows
            .iter()
            .filter(|f| names.is_empty() || names.contains(&f.name))
            .collect())
    }

    /// Agents that send or receive any of `flows`.
    pub fn agents_of(flows: &[&FlowPlace]) -> Vec<usize> {
        let mut agents: Vec<usize> = flows
            .iter()
            .flat_map(|f| std::iter::once(f.tx_agent).chain(f.rx_agents.iter().copied()))
            .collect();
        agents.sort_unstable();
        agents.dedup();
        agents
    }

    pub fn port(&self, name: &str) -> Option<&PortPlace> {
        self.ports.iter().find(|p| p.name == name)
    }
}

/// The location a port names, through the location map (`map`, the user's names).
fn mapped<'a>(location: &'a str, map: &'a [(String, String)]) -> &'a str {
    map.iter()
        .find(|(name, _)| name == location)
        .map_or(location, |(_, to)| to.as_str())
}

/// Places `config` on `agents` (their names, in order); errors name the field and the
/// agents there are.
pub fn place(
    config: &Value,
    agents: &[String],
    map: &[(String, String)],
) -> Result<Placement, Vec<String>> {
    let mut errors = Vec::new();
    let known = agents.join(", ");
    let mut ports = Vec::new();
    // Each port's location on its agent.
    let mut at = Vec::new();
    for (i, port) in array(config, "ports").iter().enumerate() {
        let name = port.get("name").and_then(Value::as_str).unwrap_or_default();
        let written = port
            .get("location")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let location = mapped(written, map);
        let found = location
            .split_once('/')
            .and_then(|(agent, rest)| Some((agents.iter().position(|a| a == agent)?, rest)));
        match found {
            Some((agent, rest)) if !rest.is_empty() => {
                ports.push(PortPlace {
                    name: name.to_string(),
                    agent,
                    written: written.to_string(),
                });
                at.push(rest.to_string());
            }
            _ => errors.push(format!(
                "ports[{i}] `{name}`: location `{written}` names no agent — a controller's ports \
                 are AGENT/LOCATION (e.g. {}/eth1), with AGENT one of: {known}",
                agents.first().map_or("hostb", String::as_str)
            )),
        }
    }
    let port_agent = |name: &str| ports.iter().find(|p| p.name == name).map(|p| p.agent);
    let named_ports: Vec<&str> = array(config, "ports")
        .iter()
        .filter_map(|p| p.get("name").and_then(Value::as_str))
        .collect();
    let mut flows = Vec::new();
    for (i, flow) in array(config, "flows").iter().enumerate() {
        let name = flow.get("name").and_then(Value::as_str).unwrap_or_default();
        let tx_rx = flow.get("tx_rx").unwrap_or(&Value::Null);
        if tx_rx.get("device").is_some() || tx_rx["choice"] == "device" {
            errors.push(format!(
                "flows[{i}] `{name}`: tx_rx.device — strobe has no emulated devices; give \
                 tx_rx.port with tx_name and rx_names"
            ));
            continue;
        }
        let port = &tx_rx["port"];
        let tx = port
            .get("tx_name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let mut rx: Vec<&str> = port
            .get("rx_names")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(one) = port.get("rx_name").and_then(Value::as_str) {
            rx.push(one);
        }
        let Some(tx_agent) = port_agent(tx) else {
            // A port refused above is said once, there.
            if named_ports.contains(&tx) {
                continue;
            }
            errors.push(format!(
                "flows[{i}] `{name}`: tx_rx.port.tx_name `{tx}` is not a port of the config"
            ));
            continue;
        };
        let mut rx_agents = Vec::new();
        for r in rx {
            match port_agent(r) {
                Some(a) => rx_agents.push(a),
                None if named_ports.contains(&r) => {}
                None => errors.push(format!(
                    "flows[{i}] `{name}`: tx_rx.port.rx_names `{r}` is not a port of the config"
                )),
            }
        }
        flows.push(FlowPlace {
            name: name.to_string(),
            tx_agent,
            rx_agents,
        });
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let configs = (0..agents.len())
        .map(|agent| {
            ports
                .iter()
                .any(|p| p.agent == agent)
                .then(|| agent_config(config, agents, &ports, &at, agent))
        })
        .collect();
    Ok(Placement {
        ports,
        flows,
        configs,
    })
}

fn array<'a>(config: &'a Value, key: &str) -> &'a [Value] {
    config
        .get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// `agent`'s config: the user's, its ports at their locations on it, the others' ports
/// `remote:`, and only the captures of its own ports.
fn agent_config(
    config: &Value,
    agents: &[String],
    ports: &[PortPlace],
    at: &[String],
    agent: usize,
) -> Value {
    let mut config = config.clone();
    if let Some(list) = config.get_mut("ports").and_then(Value::as_array_mut) {
        for (port, (place, location)) in list.iter_mut().zip(ports.iter().zip(at)) {
            port["location"] = Value::String(if place.agent == agent {
                location.clone()
            } else {
                format!("remote:{}/{location}", agents[place.agent])
            });
        }
    }
    let own = |name: &str| ports.iter().any(|p| p.name == name && p.agent == agent);
    if let Some(captures) = config.get_mut("captures").and_then(Value::as_array_mut) {
        for capture in captures.iter_mut() {
            if let Some(names) = capture.get_mut("port_names").and_then(Value::as_array_mut) {
                names.retain(|n| n.as_str().is_some_and(own));
            }
        }
        captures.retain(|c| {
            c.get("port_names")
                .and_then(Value::as_array)
                .is_some_and(|n| !n.is_empty())
        });
    }
    config
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config() -> Value {
        json!({
            "ports": [
                {"name": "a1", "location": "hosta/eth1"},
                {"name": "b1", "location": "b-port"},
                {"name": "c1", "location": "hostc/afxdp:eth1@0"},
            ],
            "flows": [
                {"name": "ab", "tx_rx": {"choice": "port", "port": {"tx_name": "a1", "rx_names": ["b1"]}}},
                {"name": "cc", "tx_rx": {"choice": "port", "port": {"tx_name": "c1", "rx_name": "c1"}}},
            ],
            "captures": [{"name": "cap", "port_names": ["b1", "c1"]}],
        })
    }

    fn names() -> Vec<String> {
        ["hosta", "hostb", "hostc"].map(String::from).to_vec()
    }

    #[test]
    fn every_agent_gets_every_flow_its_ports_in_place_and_the_others_remote() {
        let map = [("b-port".to_string(), "hostb/eth2".to_string())];
        let placed = place(&config(), &names(), &map).unwrap();
        assert_eq!(
            placed.flows,
            vec![
                FlowPlace {
                    name: "ab".into(),
                    tx_agent: 0,
                    rx_agents: vec![1]
                },
                FlowPlace {
                    name: "cc".into(),
                    tx_agent: 2,
                    rx_agents: vec![2]
                },
            ]
        );
        assert!(!placed.flows[0].local() && placed.flows[1].local());
        let b = placed.configs[1].as_ref().unwrap();
        let locations: Vec<&str> = b["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["location"].as_str().unwrap())
            .collect();
        assert_eq!(
            locations,
            ["remote:hosta/eth1", "eth2", "remote:hostc/afxdp:eth1@0"]
        );
        assert_eq!(b["flows"], config()["flows"]);
        assert_eq!(
            b["captures"],
            json!([{"name": "cap", "port_names": ["b1"]}])
        );
        // hosta captures nothing: its config has no capture left.
        assert_eq!(placed.configs[0].as_ref().unwrap()["captures"], json!([]));
        assert_eq!(placed.agents_in_use(), vec![0, 1, 2]);
        assert_eq!(
            Placement::agents_of(&placed.flows_named(&["ab".into()]).unwrap()),
            vec![0, 1]
        );
        assert_eq!(placed.flows_named(&["zz".into()]).unwrap_err(), "zz");
    }

    #[test]
    fn ports_on_no_agent_and_device_flows_are_refused_by_name() {
        let mut c = config();
        c["ports"][0]["location"] = json!("hostz/eth1");
        c["flows"][1]["tx_rx"] = json!({"choice": "device", "device": {}});
        let errors = place(&c, &names(), &[]).unwrap_err();
        assert!(
            errors[0].contains("ports[0] `a1`: location `hostz/eth1` names no agent"),
            "{errors:?}"
        );
        assert!(errors[0].contains("hosta, hostb, hostc"));
        assert!(
            errors
                .iter()
                .any(|e| e.contains("flows[1] `cc`: tx_rx.device")),
            "{errors:?}"
        );
    }
}
