//! A controller over two agents, all three in this process on loopback, their ports the
//! two ends of a veth pair in a network namespace of the test's own (root; skipped with the
//! reason otherwise): configs split per agent, errors that name the agent, a start with one
//! run tag and one start time, receivers released once the senders are done, and metrics
//! merged. Agents on separate hosts (namespaces with their own servers, a router between
//! them) are tested in tests/multihost.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use strobe_serve::controller::{AgentSpec, ControllerOptions};
use strobe_serve::ServeOptions;

/// Serves `options` on a free loopback port until the test's runtime ends; its URL.
async fn spawn(options: ServeOptions) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(strobe_serve::serve(
        listener,
        options,
        std::future::pending(),
    ));
    url
}

fn agent_options() -> ServeOptions {
    let mut options = ServeOptions::default();
    options.plan.drain_ns = 100_000_000;
    options
}

async fn controller(agents: &[(&str, &str)]) -> String {
    let options = ServeOptions {
        controller: ControllerOptions {
            agents: agents
                .iter()
                .map(|(name, url)| AgentSpec::from_flag(&format!("{name}={url}"), None).unwrap())
                .collect(),
            start_lead: Duration::from_millis(200),
            ..ControllerOptions::default()
        },
        ..ServeOptions::default()
    };
    spawn(options).await
}

async fn post(url: &str, path: &str, body: Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{url}{path}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

fn flow(name: &str, tx: &str, rx: &str, packets: u64) -> Value {
    json!({
        "name": name,
        "tx_rx": {"choice": "port", "port": {"tx_name": tx, "rx_names": [rx]}},
        "packet": [
            {"choice": "ethernet", "ethernet": {
                "src": {"choice": "value", "value": "02:00:00:00:00:01"},
                "dst": {"choice": "value", "value": "02:00:00:00:00:02"}}},
            {"choice": "ipv4", "ipv4": {
                "src": {"choice": "value", "value": "198.18.1.2"},
                "dst": {"choice": "value", "value": "198.18.2.2"}}},
            {"choice": "udp", "udp": {}},
        ],
        "size": {"choice": "fixed", "fixed": 128},
        "rate": {"choice": "pps", "pps": "20000"},
        "duration": {"choice": "fixed_packets", "fixed_packets": {"packets": packets}},
        "metrics": {"enable": true, "loss": true, "latency": {"enable": true}},
    })
}

/// A network namespace with a veth pair `va`–`vb`, removed when dropped.
struct Cable(String);

impl Cable {
    fn new() -> Option<Cable> {
        if !nix_is_root() {
            eprintln!("skipped: needs root to make a network namespace and a veth pair");
            return None;
        }
        // One per test: tests run in parallel.
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let ns = format!("ctl{}-{n}", std::process::id());
        let ip = |args: &str| {
            let ok = std::process::Command::new("ip")
                .args(args.split(' '))
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "ip {args}");
        };
        ip(&format!("netns add {ns}"));
        let cable = Cable(ns.clone());
        ip(&format!("-n {ns} link add va type veth peer name vb"));
        for end in ["va", "vb", "lo"] {
            ip(&format!("-n {ns} link set {end} up"));
        }
        // Only the test's frames on the cable.
        let _ = std::process::Command::new("ip")
            .args([
                "netns",
                "exec",
                &ns,
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
            ])
            .status();
        Some(cable)
    }
}

impl Drop for Cable {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.0])
            .status();
    }
}

fn nix_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .and_then(|l| l.split_whitespace().nth(2))
            == Some("0")
    })
}

fn config(ns: &str) -> Value {
    json!({
        "ports": [
            {"name": "a1", "location": format!("hosta/afpacket:{ns}/va")},
            {"name": "b1", "location": format!("hostb/afpacket:{ns}/vb")},
        ],
        "flows": [flow("ab", "a1", "b1", 2000), flow("ba", "b1", "a1", 1000)],
    })
}

fn start(names: &[&str]) -> Value {
    json!({"choice": "traffic", "traffic": {"choice": "flow_transmit",
        "flow_transmit": {"state": "start", "flow_names": names}}})
}

async fn flows(url: &str) -> Vec<Value> {
    let (status, reply) = post(
        url,
        "/monitor/metrics",
        json!({"choice": "flow", "flow": {"flow_names": []}}),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    reply["flow_metrics"].as_array().unwrap().clone()
}

/// Flow metrics once every flow named is stopped (its counts final).
async fn when_stopped(url: &str) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let flows = flows(url).await;
        if flows.iter().all(|f| f["transmit"] == "stopped") {
            return flows;
        }
        assert!(Instant::now() < deadline, "never stopped: {flows:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flow_across_agents_is_sent_by_one_and_counted_by_the_other() {
    let Some(cable) = Cable::new() else { return };
    let ns = cable.0.clone();
    let a = spawn(agent_options()).await;
    let b = spawn(agent_options()).await;
    let c = controller(&[("hosta", &a), ("hostb", &b)]).await;
    let (status, reply) = post(&c, "/config", config(&ns)).await;
    assert_eq!(status, 200, "{reply}");
    // Each agent has the whole config: its own port in place, the other's remote.
    let b_config: Value = reqwest::get(format!("{b}/config"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        b_config["ports"][0]["location"],
        format!("remote:hosta/afpacket:{ns}/va")
    );
    assert_eq!(
        b_config["ports"][1]["location"],
        format!("afpacket:{ns}/vb")
    );
    assert_eq!(b_config["flows"].as_array().unwrap().len(), 2);

    let (status, reply) = post(&c, "/control/state", start(&[])).await;
    assert_eq!(status, 200, "{reply}");
    let flows = when_stopped(&c).await;
    let ab = &flows[0];
    assert_eq!(ab["name"], "ab");
    assert_eq!(ab["frames_tx"], "2000");
    // Counted on B, final once B's receivers were released and drained.
    assert_eq!(ab["frames_rx"], "2000");
    assert_eq!(ab["loss"], json!(0.0));
    assert!(ab["latency"]["minimum_ns"].as_f64().unwrap() > 0.0, "{ab}");
    // Both agents are on this machine: one clock, so one-way latency stands.
    assert_eq!(ab["x_strobe"]["clock"]["bound_ns"], 0, "{ab}");
    assert_eq!(ab["x_strobe"]["frames_rx_unique"], "2000");
    assert_eq!(
        ab["x_strobe"]["agents"],
        json!({"tx": "hosta", "rx": ["hostb"]})
    );
    let error = ab["x_strobe"]["start"]["error_ns"]
        .as_i64()
        .expect("a start error");
    assert!(error.abs() < 1_000_000_000, "{error}");
    // And the other way.
    assert_eq!(flows[1]["frames_tx"], "1000");
    assert_eq!(flows[1]["frames_rx"], "1000");
    // The agent that only received was released (its run is over), so B's port reports.
    let (_, ports) = post(&c, "/monitor/metrics", json!({"choice": "port"})).await;
    let ports = ports["port_metrics"].as_array().unwrap();
    assert_eq!(ports[0]["location"], format!("hosta/afpacket:{ns}/va"));
    assert_eq!(ports[0]["frames_tx"], "2000");
    assert_eq!(ports[0]["frames_rx"], "1000");
    assert_eq!(ports[1]["frames_tx"], "1000");
    assert_eq!(ports[1]["frames_rx"], "2000");
    let skew: Value = reqwest::get(format!("{c}/strobe/start"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(skew["senders"].as_array().unwrap().len(), 2, "{skew}");
    assert!(skew["skew_ns"].as_i64().is_some(), "{skew}");

    // A subset start: only its flow moves.
    let (status, reply) = post(&c, "/control/state", start(&["ba"])).await;
    assert_eq!(status, 200, "{reply}");
    let flows = when_stopped(&c).await;
    assert_eq!(flows[1]["frames_tx"], "1000");
    assert_eq!(flows[1]["frames_rx"], "1000");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_name_the_agent_or_the_port_at_fault() {
    let a = spawn(agent_options()).await;
    // Nothing listens here.
    let down = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let c = controller(&[("hosta", &a), ("hostb", &down)]).await;
    let null = |mut c: Value| {
        c["ports"][0]["location"] = json!("hosta/null");
        c["ports"][1]["location"] = json!("hostb/null");
        c
    };
    let config = || null(config("none"));
    let mut bad = config();
    bad["ports"][1]["location"] = json!("hostz/null");
    let (status, reply) = post(&c, "/config", bad).await;
    assert_eq!(status, 400, "{reply}");
    let text = reply["errors"].to_string();
    assert!(
        text.contains("`hostz/null` names no agent") && text.contains("hosta, hostb"),
        "{text}"
    );
    let (status, reply) = post(&c, "/config", config()).await;
    assert_eq!(status, 500, "{reply}");
    let text = reply["errors"].to_string();
    assert!(text.contains("agent `hostb`: unreachable at"), "{text}");
    // A mistake in a flow is found before any agent is given the config.
    let mut bad = config();
    bad["flows"][0]["size"] = json!({"choice": "fixed", "fixed": 20});
    let (status, reply) = post(&c, "/config", bad).await;
    assert_eq!(status, 400, "{reply}");
    // No config was taken: control says so.
    let (status, reply) = post(&c, "/control/state", start(&[])).await;
    assert_eq!(status, 400, "{reply}");
    assert!(reply["errors"].to_string().contains("no config"), "{reply}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_stops_its_runs_when_the_controllers_lease_runs_out() {
    let Some(cable) = Cable::new() else { return };
    let agent = spawn(agent_options()).await;
    let mut config = config(&cable.0);
    config["ports"][0]["location"] = json!(format!("afpacket:{}/va", cable.0));
    config["ports"][1]["location"] = json!(format!("afpacket:{}/vb", cable.0));
    // Long enough that only the lease can end it within the test.
    config["flows"][0]["duration"] =
        json!({"choice": "fixed_seconds", "fixed_seconds": {"seconds": 60}});
    let (status, reply) = post(&agent, "/config", config).await;
    assert_eq!(status, 200, "{reply}");
    let held = json!({"choice": "traffic", "traffic": {"choice": "flow_transmit",
        "flow_transmit": {"state": "start", "flow_names": ["ab"],
            "x_strobe": {"run_tag": 7, "lease_ms": 1500}}}});
    let (status, reply) = post(&agent, "/control/state", held).await;
    assert_eq!(status, 200, "{reply}");
    // Renewed twice, then left to run out (a controller that is gone). A renewal every
    // 500 ms of a 1.5 s lease: a second of slack for a loaded 2-core machine, where the
    // test's other runs share the cores (a 400 ms lease renewed every 250 ms ran out).
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (status, _) = post(&agent, "/strobe/lease", json!({"lease_ms": 1500})).await;
        assert_eq!(status, 200);
        assert_eq!(flows(&agent).await[0]["transmit"], "started");
    }
    let stopped = Instant::now();
    let ab = when_stopped_one(&agent).await;
    assert!(
        stopped.elapsed() < Duration::from_secs(5),
        "{:?}",
        stopped.elapsed()
    );
    let sent: u64 = ab["frames_tx"].as_str().unwrap().parse().unwrap();
    assert!(sent > 0 && sent < 60 * 20_000, "{ab}");
    // A lease out of bounds is refused by name.
    let (status, reply) = post(&agent, "/strobe/lease", json!({"lease_ms": 5})).await;
    assert_eq!(status, 400);
    assert!(reply["errors"].to_string().contains("lease_ms"), "{reply}");
}

async fn when_stopped_one(url: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let ab = flows(url).await[0].clone();
        if ab["transmit"] == "stopped" {
            return ab;
        }
        assert!(
            Instant::now() < deadline,
            "the lease never stopped it: {ab}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timed_flows_both_ways_end_and_are_counted() {
    // Each agent sends one flow and holds its receivers for the other's: its own flow must
    // still end (a duration in seconds has no frame count to reach).
    let Some(cable) = Cable::new() else { return };
    let a = spawn(agent_options()).await;
    let b = spawn(agent_options()).await;
    let c = controller(&[("hosta", &a), ("hostb", &b)]).await;
    let mut config = config(&cable.0);
    for f in config["flows"].as_array_mut().unwrap() {
        f["duration"] = json!({"choice": "fixed_seconds", "fixed_seconds": {"seconds": 1}});
    }
    let (status, reply) = post(&c, "/config", config).await;
    assert_eq!(status, 200, "{reply}");
    let (status, reply) = post(&c, "/control/state", start(&[])).await;
    assert_eq!(status, 200, "{reply}");
    let flows = when_stopped(&c).await;
    for f in &flows {
        let tx: u64 = f["frames_tx"].as_str().unwrap().parse().unwrap();
        assert!(tx > 10_000, "{f}");
        assert_eq!(f["frames_rx"], f["frames_tx"], "{f}");
        assert_eq!(f["loss"], json!(0.0), "{f}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_flows_across_agents_hold_and_resume() {
    let Some(cable) = Cable::new() else { return };
    let a = spawn(agent_options()).await;
    let b = spawn(agent_options()).await;
    let c = controller(&[("hosta", &a), ("hostb", &b)]).await;
    let mut config = config(&cable.0);
    config["flows"][0]["duration"] =
        json!({"choice": "fixed_seconds", "fixed_seconds": {"seconds": 2}});
    let (status, reply) = post(&c, "/config", config).await;
    assert_eq!(status, 200, "{reply}");
    let (status, reply) = post(&c, "/control/state", start(&["ab"])).await;
    assert_eq!(status, 200, "{reply}");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let pause = |state: &str| {
        json!({"choice": "traffic", "traffic": {"choice": "flow_transmit",
            "flow_transmit": {"state": state, "flow_names": ["ab"]}}})
    };
    let (status, reply) = post(&c, "/control/state", pause("pause")).await;
    assert_eq!(status, 200, "{reply}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let sent = |f: &Value| f["frames_tx"].as_str().unwrap().parse::<u64>().unwrap();
    let held = flows(&c).await[0].clone();
    assert_eq!(held["transmit"], "paused", "{held}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let still = flows(&c).await[0].clone();
    assert_eq!(
        sent(&held),
        sent(&still),
        "sent while paused: {held} {still}"
    );
    let (status, reply) = post(&c, "/control/state", pause("resume")).await;
    assert_eq!(status, 200, "{reply}");
    let ab = when_stopped(&c).await[0].clone();
    // Two seconds of sending in all (the pause does not count), every frame received.
    assert!(sent(&ab) > sent(&still), "{ab}");
    assert_eq!(ab["frames_rx"], ab["frames_tx"], "{ab}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_without_its_detail_is_refused_at_config_by_name() {
    let a = spawn(agent_options()).await;
    let b = spawn(ServeOptions {
        no_extensions: true,
        ..agent_options()
    })
    .await;
    let c = controller(&[("hosta", &a), ("hostb", &b)]).await;
    let mut config = config("none");
    config["ports"][0]["location"] = json!("hosta/null");
    config["ports"][1]["location"] = json!("hostb/null");
    let (status, reply) = post(&c, "/config", config).await;
    assert_eq!(status, 400, "{reply}");
    let text = reply["errors"].to_string();
    assert!(
        text.contains("agent `hostb` runs with --no-extensions"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poisson_flows_need_agents_that_split_them_alike() {
    let a = spawn(agent_options()).await;
    let mut two = agent_options();
    two.plan.tx_workers = 2;
    let b = spawn(two).await;
    let c = controller(&[("hosta", &a), ("hostb", &b)]).await;
    let mut config = config("none");
    config["ports"][0]["location"] = json!("hosta/null");
    config["ports"][1]["location"] = json!("hostb/null");
    // Constant-rate flows are never split: the agents may differ.
    let (status, reply) = post(&c, "/config", config.clone()).await;
    assert_eq!(status, 200, "{reply}");
    config["flows"][0]["timing"] = json!("poisson");
    let (status, reply) = post(&c, "/config", config).await;
    assert_eq!(status, 400, "{reply}");
    let text = reply["errors"].to_string();
    assert!(
        text.contains("hosta 1, hostb 2") && text.contains("give each port its `cores`"),
        "{text}"
    );
}
