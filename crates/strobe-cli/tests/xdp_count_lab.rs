//! Counting in the kernel (`xdp-count:`) on the virtual lab (needs root): through a router,
//! and a bridge, whose nftables rule drops every 10th frame of one flow, the in-kernel counts are exact
//! and the same as the user-space AF_PACKET receiver's on the same traffic; the kernel's
//! ARP and other frames still reach the stack (the router resolves the sink through them);
//! and the program is gone from the interface after the run. Through a DUT that reorders
//! (an htb class holding every 16th frame back), its reordering, late and duplicate counts
//! are exactly what the frames' order in a capture gives.

mod common;
use common::lab::{sh_in, Capture, TestLab};
use common::*;

const FRAMES: u64 = 20_000;

fn scenario(rx_location: &str) -> String {
    let flow = |name: &str, dport: u16| {
        format!(
            r#"
[[flows]]
name = "{name}"
tx = "tx"
rx = "rx"
size = "imix"
rate = {{ pps = 40000 }}
duration = {{ fixed_packets = {{ packets = {FRAMES} }} }}
metrics = {{ enable = true, loss = true, latency = {{ enable = true }} }}
[[flows.packet]]
ethernet = {{}}
[[flows.packet]]
ipv4 = {{ src = "198.18.0.1", dst = "198.18.1.1" }}
[[flows.packet]]
udp = {{ src_port = 1000, dst_port = {dport} }}
"#
        )
    };
    [
        "[[ports]]\nname = \"tx\"\nlocation = \"lab:tx\"\n".to_string(),
        format!("[[ports]]\nname = \"rx\"\nlocation = \"{rx_location}\"\n"),
        flow("dropped", 2000),
        flow("whole", 2001),
    ]
    .concat()
}

/// Flow `name`'s (frames_tx, frames_rx, loss, duplicates, reordered, latency frames).
fn counts(report: &serde_json::Value, name: &str) -> (u64, u64, u64, u64, u64, u64) {
    let f = report["flows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("no flow {name}: {report}"));
    let n = |key: &str| {
        f[key]
            .as_u64()
            .unwrap_or_else(|| panic!("{name}: no {key} in {f}"))
    };
    (
        n("frames_tx"),
        n("frames_rx"),
        n("loss"),
        n("duplicates"),
        n("reordered"),
        f["latency"]["raw"]["count"].as_u64().unwrap_or(0),
    )
}

#[test]
fn the_kernel_counts_exactly_and_as_the_user_space_receiver_does() {
    counts_through("xcnt", "router", "inet");
}

/// The same through a Linux bridge, its nftables rule in the bridge family.
#[test]
fn through_a_bridge_too() {
    counts_through("xcbr", "bridge", "bridge");
}

/// Through DUT `dut` whose forward hook (nftables family `family`) drops every 10th frame
/// of flow `dropped`: both receivers count exactly, and alike.
fn counts_through(name: &str, dut: &str, family: &str) {
    let dir = Scratch::new(name);
    let lab = TestLab::up(name, dut);
    let nft = |args: &str| lab.nft(args);
    nft(&format!("add table {family} strobexcnt"));
    nft(&format!(
        "add chain {family} strobexcnt drops {{ type filter hook forward priority 0 ; }}"
    ));
    nft(&format!(
        "add rule {family} strobexcnt drops udp dport 2000 numgen inc mod 10 == 0 drop"
    ));

    let kernel = lab.gen_scenario(&dir, "kernel", &scenario("lab:rx@xdp-count"));
    let user = lab.gen_scenario(&dir, "user", &scenario("lab:rx"));
    let expected = |name| match name {
        "dropped" => (FRAMES, FRAMES - FRAMES / 10, FRAMES / 10),
        _ => (FRAMES, FRAMES, 0),
    };
    for name in ["dropped", "whole"] {
        let (k, u) = (counts(&kernel, name), counts(&user, name));
        assert_eq!((k.0, k.1, k.2), expected(name), "kernel, {name}: {kernel}");
        assert_eq!(
            (u.0, u.1, u.2),
            expected(name),
            "user space, {name}: {user}"
        );
        // The DUT keeps order and makes no copies; every frame received has its latency.
        assert_eq!((k.3, k.4, k.5), (0, 0, k.1), "kernel, {name}");
        assert_eq!(k, u, "{name}: kernel and user space differ");
    }
    let port = &kernel["rx_ports"][0];
    let receiver = port["receiver"].as_str().unwrap();
    assert!(
        receiver.starts_with("xdp-count:") && receiver.contains("XDP program"),
        "{port}"
    );
    assert_eq!(port["timestamps"], "kernel", "{port}");
    assert_eq!(port["foreign"], 0, "{port}");
    // The latency is of the same order as user space's (different runs: not the same).
    let p50 = |r: &serde_json::Value| {
        let whole = &r["flows"][1];
        assert_eq!(whole["name"], "whole");
        whole["latency"]["raw"]["p50_ns"]
            .as_f64()
            .unwrap_or_else(|| panic!("no median: {}", whole["latency"]))
    };
    let (k50, u50) = (p50(&kernel), p50(&user));
    assert!(k50 > 0.0 && k50 < 10.0 * u50 + 100_000.0, "{k50} vs {u50}");
    // Detached with the run.
    let link = sh_in(&lab.ns("rx"), "ip -details link show rx0");
    assert!(!link.contains("prog/xdp"), "{link}");
}

#[test]
fn xdp_count_cannot_send_and_says_how_to() {
    let dir = Scratch::new("xdp-count-send");
    let lab = TestLab::up("xcns", "cable");
    let text =
        scenario("lab:rx").replace("location = \"lab:tx\"", "location = \"lab:rx@xdp-count\"");
    let path = dir.path("send.toml");
    std::fs::write(&path, text).unwrap();
    let out = strobe()
        .arg("gen")
        .arg(&path)
        .args(["--lab", &lab.prefix, "-q"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot send: xdp-count counts received frames in the kernel"),
        "{err}"
    );
}

/// Hardware receive stamps through XDP RX metadata need a NIC that stamps every frame: on a
/// veth (no hardware clock) they are refused before anything is sent, with the way out.
#[test]
fn hardware_stamps_on_a_device_without_them_are_refused_with_the_reason() {
    let dir = Scratch::new("xdp-count-hw");
    let lab = TestLab::up("xchw", "cable");
    let path = dir.path("hw.toml");
    std::fs::write(&path, scenario("lab:rx@xdp-count")).unwrap();
    let out = strobe()
        .arg("gen")
        .arg(&path)
        .args(["--lab", &lab.prefix, "-q", "--hw-timestamps"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("xdp-count:rx0: hardware receive timestamps asked for, but the interface cannot stamp every frame in hardware")
            && err.contains("leave them off"),
        "{err}"
    );
    let link = sh_in(&lab.ns("rx"), "ip -details link show rx0");
    assert!(!link.contains("prog/xdp"), "{link}");
}

/// A DUT that reorders: the router's way out to rx0 has an htb class of 300 kbit/s for the
/// frames of source port 1000 (every 16th: 1 Mbit/s offered), so they queue and arrive up
/// to seconds after frames sent later: reordered, and most of them more than the window
/// behind (late; still so if a busy host sends at half the rate). tcpdump captures rx0 (the program passes the
/// frames on with `--pass-counted`, after counting them in the same order), and the test
/// counts reordering, lateness (more than the 4096-number window behind) and duplicates from
/// the capture's trailers by itself: the program's counts must be exactly those.
#[test]
fn a_reordering_dut_is_counted_as_the_capture_shows_it() {
    const SENT: u64 = 20_000;
    let dir = Scratch::new("xdp-count-reorder");
    let lab = TestLab::up("xcro", "router");
    let dut = lab.ns("dut");
    for cmd in [
        "tc qdisc add dev dut1 root handle 1: htb default 1",
        "tc class add dev dut1 parent 1: classid 1:1 htb rate 1gbit",
        "tc class add dev dut1 parent 1: classid 1:2 htb rate 300kbit burst 2k",
        "tc qdisc add dev dut1 parent 1:2 handle 20: pfifo limit 5000",
        "tc filter add dev dut1 parent 1: protocol ip u32 match ip sport 1000 0xffff flowid 1:2",
    ] {
        sh_in(&dut, cmd);
    }
    let scenario = format!(
        r#"
[[ports]]
name = "tx"
location = "lab:tx"
[[ports]]
name = "rx"
location = "lab:rx@xdp-count"
[[flows]]
name = "reordered"
tx = "tx"
rx = "rx"
size = 100
rate = {{ pps = 20000 }}
duration = {{ fixed_packets = {{ packets = {SENT} }} }}
metrics = {{ enable = true, loss = true, latency = {{ enable = true }} }}
[[flows.packet]]
ethernet = {{}}
[[flows.packet]]
ipv4 = {{ src = "198.18.0.1", dst = "198.18.1.1" }}
[[flows.packet]]
udp = {{ src_port = {{ increment = {{ start = 1000, step = 1, count = 16 }} }}, dst_port = 2000 }}
"#
    );
    let (path, json, pcap) = (
        dir.path("reorder.toml"),
        dir.path("reorder.json"),
        dir.path("rx0.pcap"),
    );
    std::fs::write(&path, scenario).unwrap();
    let capture = Capture::start(&lab.ns("rx"), "rx0", &pcap);
    ok(strobe()
        .arg("gen")
        .arg(&path)
        .args([
            "--lab",
            &lab.prefix,
            "-q",
            "--pass-counted",
            "--json",
            &json,
        ])
        .args(["--drain", "4s"])
        .output()
        .unwrap());
    drop(capture);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();

    // The capture's own count, frame by frame in arrival order.
    let seqs: Vec<u64> = tshark(&pcap, &["udp.dstport", "udp.payload"])
        .iter()
        .filter(|r| r[0] == "2000")
        .map(|r| {
            let hex: String = r[1].chars().filter(|c| *c != ':').collect();
            let t = &hex[hex.len() - 32..];
            assert_eq!(&t[0..2], "53", "trailer marker 'S': {t}");
            u64::from_str_radix(&t[8..16], 16).unwrap()
        })
        .collect();
    let (mut unique, mut reordered, mut late, mut duplicates) = (0u64, 0u64, 0u64, 0u64);
    let mut highest: Option<u64> = None;
    let mut seen = std::collections::HashSet::new();
    for &s in &seqs {
        match highest {
            Some(h) if s <= h && h - s >= 4096 => {
                (unique, reordered, late) = (unique + 1, reordered + 1, late + 1)
            }
            Some(h) if s <= h && !seen.insert(s) => duplicates += 1,
            Some(h) if s <= h => (unique, reordered) = (unique + 1, reordered + 1),
            _ => {
                highest = Some(s);
                seen.insert(s);
                unique += 1;
            }
        }
    }
    eprintln!(
        "capture: {unique} unique, {reordered} reordered, {late} late, {duplicates} duplicates"
    );
    assert_eq!(seqs.len() as u64, SENT, "the capture holds every frame");
    assert!(
        reordered > 500,
        "the DUT reordered only {reordered} frames: the test no longer tests reordering"
    );
    assert!(
        late > 100,
        "only {late} late frames: the window's edge is not tested"
    );
    let f = &report["flows"][0];
    let n = |k: &str| f[k].as_u64().unwrap_or_else(|| panic!("no {k} in {f}"));
    assert_eq!(
        (
            n("frames_rx"),
            n("frames_rx_unique"),
            n("reordered"),
            n("late"),
            n("duplicates")
        ),
        (seqs.len() as u64, unique, reordered, late, duplicates),
        "the program's counts against the capture's: {f}"
    );
    assert_eq!((n("frames_tx"), n("loss")), (SENT, 0), "{f}");
    assert_eq!(f["latency"]["raw"]["count"].as_u64(), Some(SENT), "{f}");
}
