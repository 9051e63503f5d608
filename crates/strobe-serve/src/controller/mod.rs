//! A controller: one OTG endpoint over strobe agents on many hosts, as ixia-c's controller
//! is over its traffic engines. Any `strobe serve` given agents is one; the protocol to the
//! agents is OTG itself (HTTPS and a token), with strobe's extensions where OTG has no word
//! (a run tag and a start time, under `x_strobe`).
//!
//! - A port's location names its agent: `AGENT/LOCATION` (see [`placement`]).
//! - `set_config` gives every agent the whole config, its own ports in place and the
//!   others' as `remote:` ports, so flow ids agree everywhere.
//! - A start starts the agents that only receive first (their receivers count until the
//!   controller stops them), then asks every sender to start at one CLOCK_REALTIME time,
//!   with one run tag for all; once every sender is done the receivers are stopped and drain.
//! - Metrics merge what a flow's sender sent with what its receivers counted (see [`merge`]).

mod agents;
mod merge;
mod placement;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use futures_util::future::join_all;
use serde_json::{json, Value};
use strobe_control::ControlError;
use tokio::sync::Mutex;

pub use agents::{Agent, AgentError, AgentSpec};
use placement::{FlowPlace, Placement};

use crate::reply::{internal, octets, ok_json, validation, OtgError};
use crate::{choice, names, parse_body, takes_extensions, Reply};

/// What a multi-host run's controller adds to an agent's `flow_transmit` start
/// (`x_strobe`): the run tag every agent's trailers carry and, for senders, the time to
/// start at.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StartExtension {
    pub run_tag: Option<u8>,
    /// CLOCK_REALTIME ns.
    pub start_at_ns: Option<u64>,
    /// Senders wait, ready, for the time (`POST /strobe/go`).
    pub gated: bool,
    /// The controller's lease on the agent's runs (see `lease`).
    pub lease: Option<Duration>,
}

impl StartExtension {
    /// Reads `request.x_strobe` of a `flow_transmit` request (absent: none).
    pub fn read(request: &Value) -> Result<StartExtension, ControlError> {
        let Some(x) = request.get("x_strobe") else {
            return Ok(StartExtension::default());
        };
        let bad = |m: &str| ControlError::BadInput(format!("x_strobe.{m}"));
        let run_tag = match x.get("run_tag") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_u64()
                    .and_then(|t| u8::try_from(t).ok())
                    .ok_or_else(|| bad("run_tag: give a number from 0 to 255"))?,
            ),
        };
        let start_at_ns = match x.get("start_at_ns") {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.as_u64().ok_or_else(|| {
                bad("start_at_ns: give CLOCK_REALTIME nanoseconds since the Unix epoch")
            })?),
        };
        let lease = match x.get("lease_ms") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                crate::lease::length(v)
                    .map_err(|e| ControlError::BadInput(format!("x_strobe.{e}")))?,
            ),
        };
        let gated = match x.get("gate") {
            None | Some(Value::Null) => false,
            Some(v) => v.as_bool().ok_or_else(|| bad("gate: give true or false"))?,
        };
        Ok(StartExtension {
            run_tag,
            start_at_ns,
            gated,
            lease,
        })
    }
}

/// How long an agent may take: to take a config (large ones are read at about 1 MB per
/// 10 ms), to answer control (a stop waits for its receivers' drain) and metrics.
const CONFIG_TIMEOUT: Duration = Duration::from_secs(60);
const CONTROL_TIMEOUT: Duration = Duration::from_secs(30);
const METRICS_TIMEOUT: Duration = Duration::from_secs(5);
/// How often the controller asks the senders of a start whether they are done.
const SENDERS_POLL: Duration = Duration::from_millis(100);
/// The lease a controller holds on its agents' runs (they stop on their own when it runs
/// out), renewed this often; an agent that fails this many renewals in a row is lost.
const LEASE: Duration = Duration::from_secs(5);
const LEASE_RENEWAL: Duration = Duration::from_secs(1);
const LOST_AFTER: u32 = 2;
/// The clock offset check: exchanges per agent, and how long it may take.
const CLOCK_CHECK_SAMPLES: usize = 64;
const CLOCK_CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// How a controller runs.
#[derive(Clone, Debug)]
pub struct ControllerOptions {
    pub agents: Vec<AgentSpec>,
    /// Senders start this long after every agent is ready (ports open, receivers counting):
    /// time for the controller's "go" to reach every sender.
    pub start_lead: Duration,
    /// The largest clock error bound (both ends' together) under which a flow's one-way
    /// latency across hosts is shown; above it, or with no sync known, it is withheld.
    pub max_clock_error_ns: u64,
}

impl Default for ControllerOptions {
    fn default() -> Self {
        ControllerOptions {
            agents: Vec::new(),
            start_lead: Duration::from_millis(100),
            max_clock_error_ns: 10_000,
        }
    }
}

pub(crate) struct Controller {
    agents: Vec<Agent>,
    names: Vec<String>,
    locations: Vec<(String, String)>,
    no_extensions: bool,
    start_lead: Duration,
    max_clock_error_ns: u64,
    /// Config and control requests, one at a time.
    control: Mutex<()>,
    state: Mutex<ControllerState>,
    /// Bumped by every config: what watches a start of an older one ends.
    generation: AtomicU64,
    /// The lease keeper runs (from the first start on).
    keeping: std::sync::atomic::AtomicBool,
}

#[derive(Default)]
struct ControllerState {
    config: Option<Value>,
    placement: Option<Arc<Placement>>,
    /// The last time each agent failed a request the controller made on its own (while
    /// watching a start), said with the next reply.
    faults: Vec<String>,
    /// Each flow's last synchronized start (CLOCK_REALTIME ns).
    start_at: std::collections::HashMap<String, u64>,
    /// Each agent's clock as it said at the config (and as the controller checked it).
    clocks: Vec<merge::AgentClock>,
    /// Agents lost since the config (they stopped answering): why, in words.
    lost: BTreeMap<usize, String>,
    /// Each agent's last metrics entries (flows and ports by name): what a lost agent
    /// measured is still shown.
    seen_flows: Vec<BTreeMap<String, Value>>,
    seen_ports: Vec<BTreeMap<String, Value>>,
    /// The last start: its time and its flows with their senders.
    last_start: Option<(u64, Vec<(usize, String)>)>,
}

/// The controller's routes (the OTG ones; strobe's own endpoints answer that they run on
/// agents).
pub(crate) fn router(options: &crate::ServeOptions) -> Result<Router, String> {
    let agents = options
        .controller
        .agents
        .iter()
        .cloned()
        .map(Agent::new)
        .collect::<Result<Vec<_>, _>>()?;
    let names: Vec<String> = agents.iter().map(|a| a.spec.name.clone()).collect();
    if let Some(dup) = names
        .iter()
        .enumerate()
        .find(|(i, n)| names[..*i].contains(n))
    {
        return Err(format!("agent `{}` is named twice", dup.1));
    }
    let controller = Arc::new(Controller {
        agents,
        names,
        locations: options.locations.clone(),
        no_extensions: options.no_extensions,
        start_lead: options.controller.start_lead,
        max_clock_error_ns: options.controller.max_clock_error_ns,
        control: Mutex::new(()),
        state: Mutex::new(ControllerState::default()),
        generation: AtomicU64::new(0),
        keeping: std::sync::atomic::AtomicBool::new(false),
    });
    Ok(Router::new()
        .route(
            "/config",
            post(set_config).get(get_config).patch(update_config),
        )
        .route("/control/state", post(set_control_state))
        .route("/control/action", post(crate::surface::control_action))
        .route("/monitor/states", post(crate::surface::monitor_states))
        .route("/monitor/metrics", post(get_metrics))
        .route("/monitor/capture", post(get_capture))
        .route("/capabilities/version", get(crate::get_version))
        .route("/strobe/agents", get(list_agents))
        .route("/strobe/start", get(last_start))
        .with_state(controller))
}

/// An agent's failure as an OTG error: the agent's own refusal is the request's fault
/// (validation), an agent that does not answer is the controller's (internal).
fn agent_error(errors: Vec<AgentError>) -> OtgError {
    let refused = errors.iter().all(|e| e.refused);
    said_by_agents(refused, errors.iter().map(ToString::to_string).collect())
}

/// What agents said, as an OTG error: their refusal is the request's fault (validation),
/// anything else the controller's (internal).
fn said_by_agents(refused: bool, texts: Vec<String>) -> OtgError {
    if refused {
        validation(texts)
    } else {
        internal(texts)
    }
}

impl Controller {
    /// Sends `body` to `path` of each of `agents` at once; every failure is kept.
    async fn each(
        &self,
        agents: &[usize],
        path: &str,
        body: impl Fn(usize) -> Value,
        timeout: Duration,
    ) -> Vec<(usize, Result<Value, AgentError>)> {
        let calls = agents.iter().map(|&a| {
            let body = body(a);
            async move { (a, self.agents[a].post(path, &body, timeout).await) }
        });
        join_all(calls).await
    }

    async fn placement(&self) -> Result<Arc<Placement>, OtgError> {
        self.state.lock().await.placement.clone().ok_or_else(|| {
            validation(vec![
                "no config: set one first (POST /config, snappi's set_config)".into(),
            ])
        })
    }
}

/// What the agents of a config must agree on, asked of each (`GET /strobe/agent`): their
/// detail on (the controller reads it to know when counts are final), and where a Poisson
/// flow is split over a port's transmit workers without the port saying how many, the same
/// `--cores` everywhere (a receiver must split alike to know the sub-flows' ids).
async fn check_agent_settings(
    c: &Controller,
    placement: &Placement,
    scenario: &strobe_control::model::Scenario,
) -> Result<(), OtgError> {
    let used = placement.agents_in_use();
    let asks = used
        .iter()
        .map(|&a| async move { (a, c.agents[a].get("/strobe/agent", METRICS_TIMEOUT).await) });
    let mut workers: Vec<(usize, u64)> = Vec::new();
    let mut problems = Vec::new();
    for (a, reply) in join_all(asks).await {
        // An agent that cannot say is checked when it is given the config.
        let Ok(reply) = reply else { continue };
        if reply["extensions"] == false {
            problems.push(format!(
                "agent `{}` runs with --no-extensions: a controller reads strobe's detail to know \
                 when a flow's counts are final — start the agent without it",
                c.names[a]
            ));
        }
        if let Some(n) = reply["tx_workers"].as_u64() {
            workers.push((a, n));
        }
    }
    let split_unsaid = scenario.flows.iter().any(|f| {
        matches!(f.schedule.pattern, strobe_control::timing::Pattern::Poisson)
            && scenario
                .ports
                .iter()
                .any(|p| p.name == f.tx_port && p.cores.is_none())
    });
    let differ = workers.windows(2).any(|w| w[0].1 != w[1].1);
    if split_unsaid && differ {
        problems.push(format!(
            "the agents split Poisson flows over different numbers of transmit workers ({}): \
             a receiver must split as its sender does — give each port its `cores` in the \
             config, or run every agent with the same transmit workers",
            workers
                .iter()
                .map(|(a, n)| format!("{} {n}", c.names[*a]))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(validation(problems))
    }
}

/// What each agent of `used` says of its clock (an agent that cannot say: nothing known).
async fn agent_clocks(c: &Controller, used: &[usize]) -> Vec<merge::AgentClock> {
    let mut clocks = vec![merge::AgentClock::default(); c.agents.len()];
    let asks = used
        .iter()
        .map(|&a| async move { (a, c.agents[a].get("/strobe/clock", METRICS_TIMEOUT).await) });
    for (a, reply) in join_all(asks).await {
        clocks[a] = match reply {
            Ok(reply) => merge::AgentClock::from_reply(&reply),
            Err(e) => merge::AgentClock {
                detail: format!("its clock could not be read: {e}"),
                ..merge::AgentClock::default()
            },
        };
    }
    // The controller's own check of each agent's clock against its own (UDP, NTP-style,
    // kernel receive stamps), one agent after another so that none disturbs another's.
    for &a in used {
        let url = c.agents[a].spec.url.clone();
        let checked = crate::blocking(move || {
            let target = agents::udp_target(&url)
                .ok_or_else(|| format!("cannot resolve the address of {url}"))?;
            strobe_control::host::measure_clock_offset(
                target,
                CLOCK_CHECK_SAMPLES,
                CLOCK_CHECK_TIMEOUT,
            )
        })
        .await;
        match checked {
            Ok(Ok(estimate)) => {
                clocks[a].checked = Some((estimate.offset_ns, estimate.bound_ns));
                clocks[a].check = Some(serde_json::to_value(estimate).unwrap_or_default());
            }
            Ok(Err(e)) => clocks[a].check = Some(json!({ "error": e })),
            Err(_) => {}
        }
    }
    clocks
}

impl Controller {
    /// Each sender's own metrics of the flows it sends (`watched`: sender and flow name).
    async fn senders_metrics(
        &self,
        watched: &[(usize, String)],
    ) -> (Vec<usize>, Vec<(usize, Result<Value, AgentError>)>) {
        let mut by_sender: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
        for (a, name) in watched {
            by_sender.entry(*a).or_default().push(name);
        }
        let senders: Vec<usize> = by_sender.keys().copied().collect();
        let replies = self
            .each(
                &senders,
                "/monitor/metrics",
                |a| json!({ "choice": "flow", "flow": { "flow_names": by_sender[&a] } }),
                METRICS_TIMEOUT,
            )
            .await;
        (senders, replies)
    }
}

/// The agents' replies, or one OTG error naming every agent that failed.
fn all_ok(
    results: Vec<(usize, Result<Value, AgentError>)>,
) -> Result<Vec<(usize, Value)>, OtgError> {
    let mut ok = Vec::new();
    let mut failed = Vec::new();
    for (a, r) in results {
        match r {
            Ok(v) => ok.push((a, v)),
            Err(e) => failed.push(e),
        }
    }
    if failed.is_empty() {
        Ok(ok)
    } else {
        Err(agent_error(failed))
    }
}

/// The agents' warnings, each said once, with the agent's name.
fn warnings_of(controller: &Controller, replies: &[(usize, Value)]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (a, reply) in replies {
        for w in reply
            .get("warnings")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            let text = format!("{}: {w}", controller.names[*a]);
            if !out.contains(&text) {
                out.push(text);
            }
        }
    }
    out
}

async fn set_config(State(c): State<Arc<Controller>>, body: Bytes) -> Reply {
    let config = parse_body(&body)?;
    let _control = c.control.lock().await;
    let placement = placement::place(&config, &c.names, &c.locations).map_err(validation)?;
    // The whole config checked here first (every port as `null`), so a mistake is said once
    // and no agent is given half a config.
    let mut checked = config.clone();
    if let Some(ports) = checked.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports {
            p["location"] = json!("null");
        }
    }
    let read = crate::blocking(move || strobe_control::otg::scenario_from_otg(&checked, &[]))
        .await?
        .map_err(|e| validation(e.0))?;
    check_agent_settings(&c, &placement, &read.scenario).await?;
    c.generation.fetch_add(1, Ordering::SeqCst);
    let used = placement.agents_in_use();
    let replies = c
        .each(
            &used,
            "/config",
            |a| placement.configs[a].clone().unwrap_or_else(|| json!({})),
            CONFIG_TIMEOUT,
        )
        .await;
    // Agents with no port in this config are given an empty one, which ends what an older
    // config left running there; one that does not answer is not in this config's way.
    let unused: Vec<usize> = (0..c.agents.len()).filter(|a| !used.contains(a)).collect();
    let _ = c
        .each(&unused, "/config", |_| json!({}), CONFIG_TIMEOUT)
        .await;
    let replies = match all_ok(replies) {
        Ok(replies) => replies,
        Err(e) => {
            // Some agents took the new config and some did not: none is kept. What any of
            // them runs is stopped, and the user sets a config again.
            let everyone: Vec<usize> = (0..c.agents.len()).collect();
            stop_quietly(&c, &everyone, None).await;
            let mut state = c.state.lock().await;
            state.config = None;
            state.placement = None;
            return Err(e);
        }
    };
    let clocks = agent_clocks(&c, &used).await;
    let mut state = c.state.lock().await;
    state.clocks = clocks;
    state.config = Some(config);
    state.placement = Some(Arc::new(placement));
    state.faults.clear();
    state.start_at.clear();
    state.last_start = None;
    state.lost.clear();
    state.seen_flows = vec![BTreeMap::new(); c.agents.len()];
    state.seen_ports = vec![BTreeMap::new(); c.agents.len()];
    Ok(ok_json(json!({ "warnings": warnings_of(&c, &replies) })))
}

/// `PATCH /config` (snappi's update_config): each flow's change goes to the agent that
/// sends it, which changes it live as a single server does (or refuses, with the reason);
/// then the controller's config says so. The receiving agents keep their copy: a flow's
/// rate and size do not change what they count.
async fn update_config(State(c): State<Arc<Controller>>, body: Bytes) -> Reply {
    let request = parse_body(&body)?;
    let update = crate::surface::read_update(&request)?;
    let _control = c.control.lock().await;
    let placement = c.placement().await?;
    let config = c.state.lock().await.config.clone().unwrap_or_default();
    // Checked against the whole config first (names, properties), so no agent is given an
    // update another would refuse for a mistake of the request's.
    let (patched, _changes, warnings) = crate::surface::patch_flows(&config, &update)?;
    let mut senders: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for name in update.flow_names() {
        if let Some(f) = placement.flows.iter().find(|f| f.name == name) {
            senders.entry(f.tx_agent).or_default().push(name);
        }
    }
    let mut done: Vec<String> = Vec::new();
    for (agent, flows) in &senders {
        let body = update.to_json_for(flows);
        if let Err(e) = c.agents[*agent]
            .patch("/config", &body, CONTROL_TIMEOUT)
            .await
        {
            let mut texts = vec![e.to_string()];
            if !done.is_empty() {
                texts.push(format!(
                    "agents that took their flows' change before: {} (their flows changed)",
                    done.join(", ")
                ));
            }
            return Err(said_by_agents(e.refused, texts));
        }
        done.push(c.names[*agent].clone());
    }
    c.state.lock().await.config = Some(patched);
    Ok(ok_json(json!({ "warnings": warnings })))
}

async fn get_config(State(c): State<Arc<Controller>>) -> Response {
    ok_json(
        c.state
            .lock()
            .await
            .config
            .clone()
            .unwrap_or_else(|| json!({})),
    )
}

/// A `control/state` request as an agent takes it: traffic's `flow_transmit`.
fn flow_transmit_request(state: &str, flows: Option<&[String]>, x: Option<Value>) -> Value {
    let mut request = json!({ "state": state });
    if let Some(flows) = flows {
        request["flow_names"] = json!(flows);
    }
    if let Some(x) = x {
        request["x_strobe"] = x;
    }
    json!({
        "choice": "traffic",
        "traffic": { "choice": "flow_transmit", "flow_transmit": request },
    })
}

async fn set_control_state(State(c): State<Arc<Controller>>, body: Bytes) -> Reply {
    let request = parse_body(&body)?;
    let _control = c.control.lock().await;
    let placement = c.placement().await?;
    let lost: Vec<String> = c.state.lock().await.lost.values().cloned().collect();
    let stopping = request["traffic"]["flow_transmit"]["state"] == "stop";
    if !lost.is_empty() && !stopping {
        return Err(internal(
            lost.into_iter()
                .chain([
                    "set the config again once the agent is back (or without its ports)".into(),
                ])
                .collect(),
        ));
    }
    match choice(&request, &["traffic", "port", "protocol"]) {
        Some("traffic") => match choice(&request["traffic"], &["flow_transmit"]) {
            Some("flow_transmit") => {
                flow_transmit(&c, &placement, &request["traffic"]["flow_transmit"]).await
            }
            _ => Err(validation(vec![
                "traffic.choice: strobe controls traffic with flow_transmit".into(),
            ])),
        },
        Some("port") => {
            let port = &request["port"];
            let (kind, inner) = match choice(port, &["capture", "link"]) {
                Some("capture") => ("capture", &port["capture"]),
                Some("link") => ("link", &port["link"]),
                _ => {
                    return Err(validation(vec![
                        "port.choice: missing or unknown — give capture or link".into(),
                    ]))
                }
            };
            port_request(&c, &placement, kind, inner).await
        }
        Some("protocol") => Err(validation(vec![
            "protocol: not supported — strobe emulates no protocols".into(),
        ])),
        _ => Err(validation(vec![
            "choice: missing or unknown — give traffic (flow_transmit start/stop)".into(),
        ])),
    }
}

async fn flow_transmit(c: &Arc<Controller>, placement: &Arc<Placement>, request: &Value) -> Reply {
    let given = names(request.get("flow_names"))?;
    let state = request.get("state").and_then(Value::as_str).unwrap_or("");
    let flows = placement.flows_named(&given).map_err(|n| {
        validation(vec![format!(
            "flow_transmit.flow_names: no flow `{n}` in the config"
        )])
    })?;
    let lost: Vec<usize> = c.state.lock().await.lost.keys().copied().collect();
    // A stop goes to every agent of the flows but those lost (each failure would fail it).
    let involved: Vec<usize> = Placement::agents_of(&flows)
        .into_iter()
        .filter(|a| !lost.contains(a))
        .collect();
    let named = (!given.is_empty()).then_some(given.as_slice());
    let replies = match state {
        "start" => start(c, &flows, named).await?,
        "stop" => all_ok(
            c.each(
                &involved,
                "/control/state",
                |_| flow_transmit_request("stop", named, None),
                CONTROL_TIMEOUT,
            )
            .await,
        )?,
        "pause" | "resume" => {
            let senders = senders_of(&flows);
            all_ok(
                c.each(
                    &senders,
                    "/control/state",
                    |_| flow_transmit_request(state, named, None),
                    CONTROL_TIMEOUT,
                )
                .await,
            )?
        }
        other => {
            return Err(validation(vec![format!(
                "flow_transmit.state: `{other}` — accepted: start, stop, pause, resume"
            )]))
        }
    };
    let mut warnings = warnings_of(c, &replies);
    warnings.append(&mut c.state.lock().await.faults);
    Ok(ok_json(json!({ "warnings": warnings })))
}

fn senders_of(flows: &[&FlowPlace]) -> Vec<usize> {
    let mut senders: Vec<usize> = flows.iter().map(|f| f.tx_agent).collect();
    senders.sort_unstable();
    senders.dedup();
    senders
}

/// Receivers first, then every sender at one time, with one run tag; then a watch that
/// stops the agents that only hold receivers once every sender is done.
async fn start(
    c: &Arc<Controller>,
    flows: &[&FlowPlace],
    named: Option<&[String]>,
) -> Result<Vec<(usize, Value)>, OtgError> {
    let run_tag = strobe_control::fresh_run_tag();
    let senders = senders_of(flows);
    let all = Placement::agents_of(flows);
    // 1. Every agent makes its runs ready: ports open, receivers counting, senders waiting
    //    at their gate. Nothing is sent until every agent has answered.
    let x = json!({ "run_tag": run_tag, "gate": true, "lease_ms": LEASE.as_millis() as u64 });
    let results = c
        .each(
            &all,
            "/control/state",
            |_| flow_transmit_request("start", named, Some(x.clone())),
            CONTROL_TIMEOUT,
        )
        .await;
    let accepted: Vec<usize> = results
        .iter()
        .filter(|(_, r)| r.is_ok())
        .map(|(a, _)| *a)
        .collect();
    let mut replies = match all_ok(results) {
        Ok(r) => r,
        Err(e) => {
            // All or nothing: what was made ready is stopped (it has sent nothing). Agents
            // that refused (e.g. the flows still send there) are left as they are.
            stop_quietly(c, &accepted, named).await;
            return Err(e);
        }
    };
    // 2. Every sender starts at one time, `--start-lead` from now: time for this request.
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let start_at_ns = now_ns + c.start_lead.as_nanos() as u64;
    let go = all_ok(
        c.each(
            &senders,
            "/strobe/go",
            |_| json!({ "start_at_ns": start_at_ns }),
            CONTROL_TIMEOUT,
        )
        .await,
    );
    match go {
        Ok(mut r) => {
            replies.append(&mut r);
            let mut state = c.state.lock().await;
            for f in flows {
                state.start_at.insert(f.name.clone(), start_at_ns);
            }
            let started = flows.iter().map(|f| (f.tx_agent, f.name.clone())).collect();
            state.last_start = Some((start_at_ns, started));
        }
        Err(e) => {
            stop_quietly(c, &all, named).await;
            return Err(e);
        }
    }
    if !c.keeping.swap(true, Ordering::SeqCst) {
        tokio::spawn(keep_lease(Arc::downgrade(c)));
    }
    // Agents that receive a flow another agent sends hold their receivers until told.
    let holders: Vec<usize> = {
        let mut h: Vec<usize> = flows
            .iter()
            .filter(|f| !f.local())
            .flat_map(|f| f.rx_agents.iter().copied().filter(|&a| a != f.tx_agent))
            .collect();
        h.sort_unstable();
        h.dedup();
        h
    };
    if !holders.is_empty() {
        let watched: Vec<(usize, String)> =
            flows.iter().map(|f| (f.tx_agent, f.name.clone())).collect();
        let generation = c.generation.load(Ordering::SeqCst);
        let named = named.map(<[String]>::to_vec);
        tokio::spawn(release_receivers(
            c.clone(),
            generation,
            watched,
            holders,
            named,
        ));
    }
    Ok(replies)
}

/// Stops `agents`' flows, ignoring failures (a start that failed is being undone).
async fn stop_quietly(c: &Controller, agents: &[usize], named: Option<&[String]>) {
    let _ = c
        .each(
            agents,
            "/control/state",
            |_| flow_transmit_request("stop", named, None),
            CONTROL_TIMEOUT,
        )
        .await;
}

/// Waits until every flow of a start is done on its sender (`watched`: sender and flow),
/// then stops the `holders`' runs of that start, which drain and end. Ends early when a
/// newer config replaces the start's.
async fn release_receivers(
    c: Arc<Controller>,
    generation: u64,
    watched: Vec<(usize, String)>,
    holders: Vec<usize>,
    named: Option<Vec<String>>,
) {
    loop {
        tokio::time::sleep(SENDERS_POLL).await;
        if c.generation.load(Ordering::SeqCst) != generation {
            return;
        }
        let (_, replies) = c.senders_metrics(&watched).await;
        let mut done = true;
        for (_, reply) in replies {
            match reply {
                Ok(reply) => {
                    done &= reply["flow_metrics"]
                        .as_array()
                        .is_some_and(|flows| flows.iter().all(|f| f["transmit"] == "stopped"))
                }
                Err(e) if e.refused => {
                    done = false;
                }
                Err(e) => {
                    // A sender that does not answer is not done: once the lease keeper or a
                    // metrics request finds it lost, every other agent is stopped anyway.
                    done = false;
                    let lost = c.state.lock().await.lost.contains_key(&e_agent(&c, &e));
                    if lost {
                        return;
                    }
                }
            }
        }
        if done {
            // A config set meanwhile has its own runs: these receivers are not its.
            let _control = c.control.lock().await;
            if c.generation.load(Ordering::SeqCst) != generation {
                return;
            }
            let named = named.as_deref();
            let _ = c
                .each(
                    &holders,
                    "/control/state",
                    |_| flow_transmit_request("stop", named, None),
                    CONTROL_TIMEOUT,
                )
                .await;
            return;
        }
    }
}

/// The index of the agent an error names.
fn e_agent(c: &Controller, e: &AgentError) -> usize {
    c.names
        .iter()
        .position(|n| *n == e.agent)
        .unwrap_or(usize::MAX)
}

/// Renews the lease on every agent of the config while the controller lives; an agent
/// that fails [`LOST_AFTER`] renewals in a row is lost ([`lose`]).
async fn keep_lease(c: std::sync::Weak<Controller>) {
    let mut failures: BTreeMap<usize, u32> = BTreeMap::new();
    loop {
        tokio::time::sleep(LEASE_RENEWAL).await;
        let Some(c) = c.upgrade() else {
            return;
        };
        let Some(placement) = c.state.lock().await.placement.clone() else {
            continue;
        };
        // A lost agent's lease is left to run out: if it lives on, it stops on its own.
        let lost: Vec<usize> = c.state.lock().await.lost.keys().copied().collect();
        let used: Vec<usize> = placement
            .agents_in_use()
            .into_iter()
            .filter(|a| !lost.contains(a))
            .collect();
        failures.retain(|a, _| used.contains(a));
        let body = json!({ "lease_ms": LEASE.as_millis() as u64 });
        for (a, result) in c
            .each(&used, "/strobe/lease", |_| body.clone(), LEASE_RENEWAL)
            .await
        {
            match result {
                Ok(_) => {
                    failures.remove(&a);
                }
                Err(e) if !e.refused => {
                    let n = failures.entry(a).or_default();
                    *n += 1;
                    if *n >= LOST_AFTER {
                        lose(&c, a, &e).await;
                    }
                }
                Err(_) => {}
            }
        }
    }
}

/// Agent `a` stopped answering (`why`): every other agent's runs are stopped, keeping what
/// they measured, and the controller says so until the next config.
async fn lose(c: &Controller, a: usize, why: &AgentError) {
    let others: Vec<usize> = {
        let mut state = c.state.lock().await;
        if state.lost.contains_key(&a) {
            return;
        }
        let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now());
        state.lost.insert(
            a,
            format!(
                "{why} (lost at {stamp}); the other agents' runs were stopped, and what every \
                 agent measured is kept (the lost agent's as last seen)"
            ),
        );
        let Some(placement) = &state.placement else {
            return;
        };
        placement
            .agents_in_use()
            .into_iter()
            .filter(|o| *o != a && !state.lost.contains_key(o))
            .collect()
    };
    stop_quietly(c, &others, None).await;
    // And the agent itself, should it be alive but slow (else its lease ends its runs).
    stop_quietly(c, &[a], None).await;
}

/// The agents' replies to a metrics request: an agent that does not answer is lost (and
/// this request's error names it); a lost agent's entries are its last seen, marked so.
async fn metrics_replies(
    c: &Controller,
    placement: &Placement,
    asks: Vec<(usize, Value)>,
    key: &str,
) -> Result<Vec<Option<Value>>, OtgError> {
    let lost = c.state.lock().await.lost.clone();
    let live: Vec<usize> = asks
        .iter()
        .map(|(a, _)| *a)
        .filter(|a| !lost.contains_key(a))
        .collect();
    let ask = |a: usize| {
        asks.iter()
            .find(|(b, _)| *b == a)
            .map_or(Value::Null, |(_, v)| v.clone())
    };
    let results = c
        .each(&live, "/monitor/metrics", ask, METRICS_TIMEOUT)
        .await;
    let mut replies: Vec<Option<Value>> = vec![None; c.agents.len()];
    let mut failed = Vec::new();
    for (a, result) in results {
        match result {
            Ok(reply) => replies[a] = Some(reply),
            Err(e) if !e.refused => {
                lose(c, a, &e).await;
                failed.push(e);
            }
            Err(e) => failed.push(e),
        }
    }
    if !failed.is_empty() {
        return Err(agent_error(failed));
    }
    let mut state = c.state.lock().await;
    let seen_all = if key == "flow_metrics" {
        &mut state.seen_flows
    } else {
        &mut state.seen_ports
    };
    seen_all.resize(c.agents.len(), BTreeMap::new());
    for (a, reply) in replies.iter().enumerate() {
        for entry in reply
            .as_ref()
            .and_then(|r| r[key].as_array())
            .into_iter()
            .flatten()
        {
            if let Some(name) = entry["name"].as_str() {
                seen_all[a].insert(name.to_string(), entry.clone());
            }
        }
    }
    for (a, why) in &lost {
        // What it was last seen to have, and nothing for what it was never asked about.
        let mut seen = seen_all[*a].clone();
        let mine: Vec<String> = if key == "flow_metrics" {
            placement
                .flows
                .iter()
                .filter(|f| f.tx_agent == *a || f.rx_agents.contains(a))
                .map(|f| f.name.clone())
                .collect()
        } else {
            placement
                .ports
                .iter()
                .filter(|p| p.agent == *a)
                .map(|p| p.name.clone())
                .collect()
        };
        for name in mine {
            seen.entry(name.clone()).or_insert_with(|| {
                json!({
                    "name": name,
                    "frames_tx": "0", "frames_rx": "0", "bytes_tx": "0", "bytes_rx": "0",
                    "frames_tx_rate": 0.0, "frames_rx_rate": 0.0,
                })
            });
        }
        let mut entries: Vec<Value> = seen.into_values().collect();
        for e in &mut entries {
            // Its counts will not change: final, and why.
            e["transmit"] = json!("stopped");
            if !e["x_strobe"].is_object() {
                e["x_strobe"] = json!({});
            }
            e["x_strobe"]["agent_lost"] = json!(why);
        }
        replies[*a] = Some(json!({ key: entries }));
    }
    Ok(replies)
}

/// A capture or link request: each agent is given its own ports of those named.
async fn port_request(
    c: &Arc<Controller>,
    placement: &Arc<Placement>,
    kind: &str,
    request: &Value,
) -> Reply {
    if !request.is_object() {
        return Err(validation(vec![format!(
            "port.{kind}: give an object with state and port_names"
        )]));
    }
    let mut ports = names(request.get("port_names"))?;
    if let Some(n) = ports.iter().find(|n| placement.port(n).is_none()) {
        return Err(validation(vec![format!(
            "port.{kind}.port_names: no port `{n}` in the config"
        )]));
    }
    if ports.is_empty() {
        ports = placement.ports.iter().map(|p| p.name.clone()).collect();
    }
    let mut per_agent: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for p in &ports {
        if let Some(place) = placement.port(p) {
            per_agent.entry(place.agent).or_default().push(p.clone());
        }
    }
    if kind == "capture" {
        // Only ports the config captures on: an agent refuses the others.
        let config = c.state.lock().await.config.clone().unwrap_or(Value::Null);
        let captured: Vec<&str> = config["captures"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|cap| cap["port_names"].as_array().into_iter().flatten())
            .filter_map(Value::as_str)
            .collect();
        if request.get("port_names").is_none() {
            for list in per_agent.values_mut() {
                list.retain(|p| captured.contains(&p.as_str()));
            }
            per_agent.retain(|_, list| !list.is_empty());
        }
    }
    let agents: Vec<usize> = per_agent.keys().copied().collect();
    let replies = all_ok(
        c.each(
            &agents,
            "/control/state",
            |a| {
                let mut inner = request.clone();
                inner["port_names"] = json!(per_agent[&a]);
                json!({ "choice": "port", "port": { "choice": kind, kind: inner } })
            },
            CONTROL_TIMEOUT,
        )
        .await,
    )?;
    Ok(ok_json(json!({ "warnings": warnings_of(c, &replies) })))
}

async fn get_metrics(State(c): State<Arc<Controller>>, headers: HeaderMap, body: Bytes) -> Reply {
    let request = parse_body(&body)?;
    let placement = c.placement().await?;
    let replies: Vec<Option<Value>>;
    match choice(&request, &["port", "flow"]).unwrap_or("port") {
        "flow" => {
            let wanted = names(request.get("flow").and_then(|f| f.get("flow_names")))?;
            let flows = placement.flows_named(&wanted).map_err(|n| {
                validation(vec![format!(
                    "flow.flow_names: no flow `{n}` in the config"
                )])
            })?;
            // Each agent is asked for its own flows only (it holds every flow of the config).
            let mut per_agent: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
            for f in &flows {
                for a in std::iter::once(f.tx_agent).chain(f.rx_agents.iter().copied()) {
                    let names = per_agent.entry(a).or_default();
                    if names.last() != Some(&f.name.as_str()) {
                        names.push(&f.name);
                    }
                }
            }
            let asks = per_agent
                .into_iter()
                .map(|(a, names)| {
                    (
                        a,
                        json!({ "choice": "flow", "flow": { "flow_names": names } }),
                    )
                })
                .collect();
            replies = metrics_replies(&c, &placement, asks, "flow_metrics").await?;
            let extensions = !c.no_extensions && takes_extensions(&headers);
            let (start_at, clocks) = {
                let state = c.state.lock().await;
                (state.start_at.clone(), state.clocks.clone())
            };
            let none = merge::AgentClock::default();
            let clock_of = |a: usize| (c.names[a].as_str(), clocks.get(a).unwrap_or(&none));
            Ok(ok_json(merge::flow_metrics(
                &flows,
                &replies,
                &c.names,
                extensions,
                &|name| start_at.get(name).copied(),
                &|tx, rx| merge::one_way(clock_of(tx), clock_of(rx), c.max_clock_error_ns),
            )))
        }
        "port" => {
            let wanted = names(request.get("port").and_then(|p| p.get("port_names")))?;
            if let Some(n) = wanted.iter().find(|n| placement.port(n).is_none()) {
                return Err(validation(vec![format!(
                    "port.port_names: no port `{n}` in the config"
                )]));
            }
            let mut per_agent: BTreeMap<usize, Vec<String>> = BTreeMap::new();
            for p in &placement.ports {
                if wanted.is_empty() || wanted.contains(&p.name) {
                    per_agent.entry(p.agent).or_default().push(p.name.clone());
                }
            }
            let asks = per_agent
                .iter()
                .map(|(&a, ports)| {
                    (
                        a,
                        json!({ "choice": "port", "port": { "port_names": ports } }),
                    )
                })
                .collect();
            replies = metrics_replies(&c, &placement, asks, "port_metrics").await?;
            Ok(ok_json(merge::port_metrics(&placement, &wanted, &replies)))
        }
        other => Err(validation(vec![format!(
            "choice: `{other}` metrics are not supported — strobe reports port and flow metrics"
        )])),
    }
}

async fn get_capture(State(c): State<Arc<Controller>>, body: Bytes) -> Reply {
    let request = parse_body(&body)?;
    let placement = c.placement().await?;
    let Some(name) = request.get("port_name").and_then(Value::as_str) else {
        return Err(validation(vec![
            "port_name: give the port whose capture to read".into(),
        ]));
    };
    let port = placement
        .port(name)
        .ok_or_else(|| validation(vec![format!("port_name: no port `{name}` in the config")]))?;
    let bytes = c.agents[port.agent]
        .post_bytes("/monitor/capture", &request, CONTROL_TIMEOUT)
        .await
        .map_err(|e| agent_error(vec![e]))?;
    Ok(octets(bytes))
}

/// strobe's own endpoint on a controller: each agent, where it is, and whether it answers
/// (its version) — tokens are never shown.
async fn list_agents(State(c): State<Arc<Controller>>) -> Response {
    let checks = c.agents.iter().map(|a| async move {
        let started = std::time::Instant::now();
        let version = a.get("/capabilities/version", METRICS_TIMEOUT).await;
        let took = started.elapsed();
        let clock = match &version {
            Ok(_) => a.get("/strobe/clock", METRICS_TIMEOUT).await.ok(),
            Err(_) => None,
        };
        (a, version, took, clock)
    });
    let mut out = Vec::new();
    for (a, version, took, clock) in join_all(checks).await {
        let index = c
            .agents
            .iter()
            .position(|x| std::ptr::eq(x, a))
            .unwrap_or(0);
        let checked = c
            .state
            .lock()
            .await
            .clocks
            .get(index)
            .and_then(|k| k.check.clone());
        out.push(json!({
            "clock": clock,
            "clock_check": checked,
            "name": a.spec.name,
            "url": a.spec.url,
            "reachable": version.is_ok(),
            "app_version": version.as_ref().ok().and_then(|v| v.get("app_version")).cloned(),
            "round_trip_ms": (took.as_secs_f64() * 1e6).round() / 1e3,
            "error": version.as_ref().err().map(ToString::to_string),
        }));
    }
    ok_json(json!({ "agents": out }))
}

/// strobe's own endpoint on a controller: the last synchronized start — its time, each
/// sender's start error (its first frame against its deadline from that time; known once
/// the sender's run is over) and the skew between senders (the largest error less the
/// smallest).
async fn last_start(State(c): State<Arc<Controller>>) -> Reply {
    let Some((at_ns, flows)) = c.state.lock().await.last_start.clone() else {
        return Err(validation(vec!["no start yet: start traffic first".into()]));
    };
    let (senders, replies) = c.senders_metrics(&flows).await;
    let clocks = c.state.lock().await.clocks.clone();
    let mut out = Vec::new();
    let mut errors = Vec::new();
    // Each error is on its sender's own clock; on the controller's (the offset check's
    // offsets taken off), they say how far apart the senders really started.
    let mut on_one_clock = Vec::new();
    for (a, reply) in all_ok(replies)? {
        // A sender's error: its earliest flow's (every flow of a port starts on one t0).
        let error = reply["flow_metrics"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| merge::start_error_ns(f, at_ns))
            .min_by_key(|e| e.abs());
        errors.extend(error);
        let checked = clocks.get(a).and_then(|k| k.checked);
        if let (Some(e), Some((offset, _))) = (error, checked) {
            on_one_clock.push(e - offset);
        }
        out.push(json!({
            "agent": c.names[a],
            "error_ns": error,
            "clock_offset_ns": checked.map(|k| k.0),
        }));
    }
    let spread = |v: &[i64]| {
        (v.len() == senders.len() && !v.is_empty())
            .then(|| v.iter().max().copied().unwrap_or(0) - v.iter().min().copied().unwrap_or(0))
    };
    Ok(ok_json(json!({
        "at_ns": at_ns,
        "senders": out,
        "skew_ns": spread(&errors),
        "skew_on_controller_clock_ns": spread(&on_one_clock),
    })))
}
