//! Metric tags end to end on the virtual lab (a router DUT whose nftables rules drop some
//! tag values' frames; needs root): every combination of tag values is counted as a flow of
//! its own, so its frames, loss and latency are exact, and the flow is their sum.

mod common;
use common::lab::TestLab;
use common::*;

const FRAMES: u64 = 8000;

fn flow(name: &str, dport: u16, tags: &str) -> String {
    format!(
        r#"
[[flows]]
name = "{name}"
tx = "tx"
rx = "rx"
size = 128
rate = {{ pps = 20000 }}
duration = {{ fixed_packets = {{ packets = {FRAMES} }} }}
metrics = {{ enable = true, loss = true, latency = {{ enable = true }} }}
[[flows.packet]]
ethernet = {{}}
[[flows.packet]]
ipv4 = {{ src = "198.18.0.1", dst = "198.18.1.1" }}
[[flows.packet]]
udp = {{ src_port = {{ values = [1000, 1001, 1002, 1003], metric_tags = [{tags}] }}, dst_port = {dport} }}
"#
    )
}

/// The flow `name`'s tagged results as (tag value, frames_tx, frames_rx, loss, latency?).
fn tagged(report: &serde_json::Value, name: &str) -> Vec<(String, u64, u64, u64, bool)> {
    let f = report["flows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("no flow {name}: {report}"));
    f["tagged"]
        .as_array()
        .unwrap_or_else(|| panic!("{name} has no tagged results: {f}"))
        .iter()
        .map(|t| {
            let tags = t["tags"].as_array().unwrap();
            assert_eq!(tags.len(), 1, "{t}");
            (
                tags[0]["value"].as_str().unwrap().to_string(),
                t["frames_tx"].as_u64().unwrap(),
                t["frames_rx"].as_u64().unwrap(),
                t["loss"].as_u64().unwrap(),
                t["latency"]["count"].as_u64().is_some_and(|n| n > 0),
            )
        })
        .collect()
}

#[test]
fn each_tag_values_frames_loss_and_latency_are_counted_exactly_through_a_dropping_router() {
    let dir = Scratch::new("tagged-lab");
    let lab = TestLab::up("tag", "router");
    let nft = |args: &str| lab.nft(args);
    nft("add table inet strobetag");
    nft("add chain inet strobetag tagged { type filter hook forward priority 0 ; }");
    // Flow `sport`: all of source port 1002, and every 10th of 1001. Flow `half`: all of 1003.
    nft("add rule inet strobetag tagged udp dport 2000 udp sport 1002 drop");
    nft("add rule inet strobetag tagged udp dport 2000 udp sport 1001 numgen inc mod 10 == 0 drop");
    nft("add rule inet strobetag tagged udp dport 3000 udp sport 1003 drop");
    let scenario = [
        "[[ports]]\nname = \"tx\"\nlocation = \"lab:tx\"\n".to_string(),
        "[[ports]]\nname = \"rx\"\nlocation = \"lab:rx\"\n".to_string(),
        flow("sport", 2000, "{ name = \"sport\" }"),
        // The port's top 15 bits: 1000 and 1001 share 0x1f4, 1002 and 1003 share 0x1f5.
        flow("half", 3000, "{ name = \"hi\", offset = 0, length = 15 }"),
    ]
    .concat();
    let report = lab.gen_scenario(&dir, "tagged-lab", &scenario);
    let per_port = FRAMES / 4;
    assert_eq!(
        tagged(&report, "sport"),
        vec![
            ("0x3e8".into(), per_port, per_port, 0, true),
            (
                "0x3e9".into(),
                per_port,
                per_port - per_port / 10,
                per_port / 10,
                true
            ),
            ("0x3ea".into(), per_port, 0, per_port, false),
            ("0x3eb".into(), per_port, per_port, 0, true),
        ]
    );
    assert_eq!(
        tagged(&report, "half"),
        vec![
            ("0x1f4".into(), 2 * per_port, 2 * per_port, 0, true),
            ("0x1f5".into(), 2 * per_port, per_port, per_port, true),
        ]
    );
    // The flows themselves are the sums.
    for (name, lost) in [("sport", per_port + per_port / 10), ("half", per_port)] {
        let f = report["flows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == name)
            .unwrap();
        assert_eq!(f["frames_tx"], FRAMES, "{f}");
        assert_eq!(f["loss"], lost, "{f}");
        assert_eq!(f["excess_rx"], 0, "{f}");
    }
}
