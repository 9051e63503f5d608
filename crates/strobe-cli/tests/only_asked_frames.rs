//! strobe puts on the wire exactly the frames the user configured, nothing of its own: a
//! capture at the receiving end of a cable (where a device under test would sit) holds
//! exactly `frames_tx` frames, every one the flow's, the first being the flow's first
//! (sequence 0, configured size and fields). Paced and unpaced, on every live backend, with
//! the floor learned while running and with the floor an earlier run remembered.
//!
//! Needs root (network namespaces), tcpdump and tshark.

mod common;

use common::lab::{Capture, TestLab};
use common::{strobe, tshark, Scratch};

/// The flow: 128-byte frames (124 on a veth, without FCS) 198.18.0.1:1000 -> 198.18.1.1:2000.
const WIRE_LEN: &str = "124";

/// One run of `count` frames from `tx` (plus `args`) captured at rx0; returns the run's
/// JSON report and the captured frames as tshark reads them (length, EtherType, source MAC,
/// UDP ports, UDP payload in hex).
fn captured_run(
    lab: &TestLab,
    dir: &Scratch,
    name: &str,
    tx: &str,
    args: &[&str],
) -> (serde_json::Value, Vec<Vec<String>>) {
    // A state directory of this test's own: the first paced run on each path learns its
    // floor, the next one starts from the floor it remembered.
    let state = dir.path("state");
    let pcap = dir.path(&format!("{name}.pcap"));
    let json = dir.path(&format!("{name}.json"));
    let capture = Capture::start(&lab.ns("rx"), "rx0", &pcap);
    let out = lab
        .gen_command(tx, "lab:rx")
        .env("STROBE_STATE_DIR", &state)
        .args(["--size", "128", "--json", &json])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(capture);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = tshark(
        &pcap,
        &[
            "frame.len",
            "eth.type",
            "eth.src",
            "udp.srcport",
            "udp.dstport",
            "data.data",
            "icmpv6.type",
        ],
    );
    // The kernel's own link chatter on the freshly created veths (IPv6 multicast listener
    // reports and neighbour discovery, ICMPv6 types 133-136 and 143) is not strobe's:
    // everything else at rx0 is judged.
    let rows = rows
        .into_iter()
        .filter(|r| !matches!(r[6].as_str(), "133" | "134" | "135" | "136" | "143"))
        .collect();
    (report, rows)
}

/// Every captured frame is one of the flow's, as many as it sent, in sequence from 0.
fn assert_only_the_flows_frames(name: &str, report: &serde_json::Value, rows: &[Vec<String>]) {
    let port = &report["ports"][0];
    let sent = port["frames_tx"].as_u64().unwrap();
    assert!(sent > 0, "{name}: nothing sent: {port}");
    let foreign: Vec<&Vec<String>> = rows
        .iter()
        .filter(|r| r[1] != "0x0800" || r[3] != "1000" || r[4] != "2000")
        .collect();
    assert!(
        foreign.is_empty(),
        "{name}: {} captured frames nobody configured, first {:?}",
        foreign.len(),
        foreign.first()
    );
    assert_eq!(
        rows.len() as u64,
        sent,
        "{name}: captured {} frames, the run sent {sent}",
        rows.len()
    );
    let src = &rows[0][2];
    for (j, r) in rows.iter().enumerate() {
        assert_eq!(r[0], WIRE_LEN, "{name}: frame {j} length: {r:?}");
        assert_eq!(&r[2], src, "{name}: frame {j} source MAC: {r:?}");
        // The trailer is the payload's last 16 bytes: marker 'S', tag, flow, sequence.
        let payload = &r[5];
        let trailer = &payload[payload.len() - 32..];
        assert_eq!(&trailer[..2], "53", "{name}: frame {j} trailer {trailer}");
        let seq = u32::from_str_radix(&trailer[8..16], 16).unwrap();
        assert_eq!(seq as usize, j, "{name}: frame {j} carries sequence {seq}");
    }
}

#[test]
fn a_capture_at_the_far_end_holds_exactly_the_flows_frames() {
    let dir = Scratch::new("only-asked");
    let lab = TestLab::up("oaf", "cable");
    // Bursts of 8 frames 0.5 µs apart, every 100 µs: hand-overs of several frames, so the
    // run learns the whole floor (and remembers it); the capture keeps up with every frame.
    let bursts: &[&str] = &[
        "--rate",
        "2mpps",
        "--pattern",
        "burst:8/100us",
        "--count",
        "800",
    ];
    let cbr: &[&str] = &["--rate", "20kpps", "--count", "400"];
    let unpaced: &[&str] = &["--unpaced", "--count", "400"];
    let cases: [(&str, &str, &[&str]); 7] = [
        ("afpacket-learned", "lab:tx", bursts),
        ("afpacket-remembered", "lab:tx", cbr),
        ("afpacket-unpaced", "lab:tx", unpaced),
        ("afxdp-learned", "lab:tx@afxdp", bursts),
        ("afxdp-remembered", "lab:tx@afxdp", cbr),
        ("afxdp-unpaced", "lab:tx@afxdp", unpaced),
        ("xdp-live-paced", "lab:tx@xdp-live", cbr),
    ];
    for (name, tx, args) in cases {
        let (report, rows) = captured_run(&lab, &dir, name, tx, args);
        assert_only_the_flows_frames(name, &report, &rows);
        let port = &report["ports"][0];
        let pacing = &port["pacing"];
        if name.ends_with("learned") {
            assert_eq!(pacing["floor_source"], "learned", "{name}: {pacing}");
            assert!(
                pacing["observed_spacing_ns"].as_u64().is_some(),
                "{name}: {pacing}"
            );
        } else if name.ends_with("remembered") {
            assert_eq!(pacing["floor_source"], "remembered", "{name}: {pacing}");
            assert!(pacing["handover_ns"].as_u64().is_some(), "{name}: {pacing}");
        }
    }
    // `strobe ports` shows what the runs remembered, per path through tx0.
    let out = strobe()
        .env("STROBE_STATE_DIR", dir.path("state"))
        .args(["ports", "--lab", &lab.prefix, "--json"])
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_str(&common::ok(out)).unwrap();
    let tx0 = doc["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|ns| ns["interfaces"].as_array().unwrap())
        .find(|i| i["name"] == "tx0")
        .expect("tx0 is listed");
    let remembered: Vec<&str> = tx0["floors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["location"].as_str().unwrap())
        .collect();
    assert_eq!(remembered.len(), 2, "afpacket and afxdp paths: {tx0}");
    assert!(
        remembered.iter().any(|l| l.starts_with("afpacket:"))
            && remembered.iter().any(|l| l.starts_with("afxdp:")),
        "{remembered:?}"
    );
}
