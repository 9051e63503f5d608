//! Instrumented GRE, MPLS and GTPv1 flows end to end on the virtual lab (a veth cable between
//! the generator and the sink; needs root): the receiver finds the trailer at the end of each
//! frame whatever encapsulation precedes it, so every frame is counted and its latency
//! measured.

mod common;
use common::lab::TestLab;
use common::*;

const FRAMES: u64 = 2000;

fn flow(name: &str, headers: &str) -> String {
    format!(
        r#"
[[flows]]
name = "{name}"
tx = "tx"
rx = "rx"
size = 200
rate = {{ pps = 20000 }}
duration = {{ fixed_packets = {{ packets = {FRAMES} }} }}
metrics = {{ enable = true, loss = true, latency = {{ enable = true }} }}
{headers}"#
    )
}

#[test]
fn tunnelled_flows_are_counted_and_timed_end_to_end() {
    let dir = Scratch::new("tunnels-lab");
    let lab = TestLab::up("tun", "cable");
    let outer = r#"[[flows.packet]]
ethernet = {}
[[flows.packet]]
ipv4 = { src = "198.18.0.1", dst = "198.18.1.1" }
"#;
    let inner = r#"[[flows.packet]]
ipv4 = { src = "10.0.0.1", dst = "10.0.0.2" }
[[flows.packet]]
udp = { src_port = 1000, dst_port = { increment = { start = 2000, count = 10 } } }
"#;
    let scenario = [
        "[[ports]]\nname = \"tx\"\nlocation = \"lab:tx\"\n".to_string(),
        "[[ports]]\nname = \"rx\"\nlocation = \"lab:rx\"\n".to_string(),
        flow(
            "gre",
            &format!("{outer}[[flows.packet]]\ngre = {{ checksum_present = 1 }}\n{inner}"),
        ),
        flow(
            "mpls",
            &format!(
                "[[flows.packet]]\nethernet = {{}}\n[[flows.packet]]\nmpls = {{ label = 100 }}\n\
                 [[flows.packet]]\nmpls = {{ label = {{ increment = {{ start = 200, count = 5 }} }} }}\n{inner}"
            ),
        ),
        flow(
            "gtpv1",
            &format!(
                "{outer}[[flows.packet]]\nudp = {{ src_port = 2152 }}\n[[flows.packet]]\n\
                 gtpv1 = {{ teid = {{ increment = {{ start = 1, count = 100 }} }}, \
                 next_extension_header_type = 0x85, \
                 extension_headers = [{{ contents = \"0x100900000000\" }}] }}\n{inner}"
            ),
        ),
    ]
    .concat();
    let report = lab.gen_scenario(&dir, "tunnels-lab", &scenario);
    for name in ["gre", "mpls", "gtpv1"] {
        let f = report["flows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == name)
            .unwrap_or_else(|| panic!("no flow {name}: {report}"));
        assert_eq!(f["frames_tx"], FRAMES, "{name}: {f}");
        assert_eq!(f["frames_rx"], FRAMES, "{name}: every frame counted: {f}");
        assert_eq!(f["loss"], 0, "{name}: {f}");
        let latency = &f["latency"]["raw"];
        assert_eq!(latency["count"], FRAMES, "{name}: every frame timed: {f}");
        let p50 = latency["p50_ns"].as_f64().expect("a median latency");
        assert!(p50 > 0.0 && p50 < 1e9, "{name}: median {p50} ns");
    }
}
