//! `strobe ports` and `strobe clocks`, run as the built binary. The ports tests create their
//! own namespaces (removed on drop, also when a test fails); they need root and `ip`.

mod common;

use std::process::Output;

use common::{ok, strobe};
use serde_json::Value;
use strobe_io::test_support::{Netns, VethPair};

fn fails_with_bad_input(out: Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    stderr
}

#[test]
fn ports_shows_a_veth_with_software_timestamps() {
    let lab = VethPair::new("ports");
    let (ns, a, b) = (lab.ns(), &lab.a, &lab.b);

    let text = ok(strobe().args(["ports", "--netns", ns]).output().unwrap());
    assert!(text.contains(&format!("network namespace {ns}:")), "{text}");
    let row: Vec<&str> = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some(a.as_str()))
        .unwrap_or_else(|| panic!("no row for {a}:\n{text}"))
        .split_whitespace()
        .collect();
    // interface, sw-tx, sw-rx, hw-tx, hw-rx, PHC, xdp-rx-ts, xsk-tx-ts, latency source…
    // (veth answers the XDP RX metadata timestamp kfunc, without a hardware clock behind
    // it; it has no AF_XDP TX metadata stamps)
    assert_eq!(
        row[1..8],
        ["yes", "yes", "no", "no", "none", "yes", "no"],
        "{text}"
    );
    assert!(
        row[8..]
            .join(" ")
            .starts_with("rx: kernel software (AF_PACKET)"),
        "{text}"
    );

    let json: Value = serde_json::from_str(&ok(strobe()
        .args(["ports", "--netns", ns, "--json"])
        .output()
        .unwrap()))
    .unwrap();
    let namespaces = json["namespaces"].as_array().unwrap();
    assert_eq!(namespaces.len(), 1);
    assert_eq!(namespaces[0]["netns"], ns);
    let ifaces = namespaces[0]["interfaces"].as_array().unwrap();
    let names: Vec<&str> = ifaces.iter().map(|i| i["name"].as_str().unwrap()).collect();
    assert!(
        names.contains(&"lo") && names.contains(&a.as_str()) && names.contains(&b.as_str()),
        "{names:?}"
    );
    let veth = ifaces.iter().find(|i| i["name"] == a.as_str()).unwrap();
    assert_eq!(veth["software_tx"], true);
    assert_eq!(veth["software_rx"], true);
    assert_eq!(veth["hardware_tx"], false);
    assert_eq!(veth["hardware_rx"], false);
    assert_eq!(veth["phc"], Value::Null);
    assert_eq!(veth["xdp_rx_metadata_timestamp"], true);
    let lo = ifaces.iter().find(|i| i["name"] == "lo").unwrap();
    assert_eq!(lo["xdp_rx_metadata_timestamp"], false);
    assert_eq!(veth["xsk_tx_metadata_timestamp"], false);
    assert_eq!(lo["xsk_tx_metadata_timestamp"], false);
    assert_eq!(veth["latency_source"], "software");
}

#[test]
fn ports_lists_the_three_namespaces_of_a_lab() {
    let prefix = format!("spl{}", std::process::id());
    let names: Vec<String> = ["tx", "rx", "dut"]
        .iter()
        .map(|side| format!("{prefix}-{side}"))
        .collect();
    let mut guard: Vec<Netns> = names.iter().map(Netns::add).collect();
    let json: Value = serde_json::from_str(&ok(strobe()
        .args(["ports", "--lab", &prefix, "--json"])
        .output()
        .unwrap()))
    .unwrap();
    let listed: Vec<&str> = json["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["netns"].as_str().unwrap())
        .collect();
    assert_eq!(listed, names);
    // A cable lab has no DUT namespace: its two ends are listed.
    drop(guard.pop());
    let json: Value = serde_json::from_str(&ok(strobe()
        .args(["ports", "--lab", &prefix, "--json"])
        .output()
        .unwrap()))
    .unwrap();
    assert_eq!(json["namespaces"].as_array().unwrap().len(), 2, "{json}");
}

#[test]
fn ports_in_a_missing_namespace_or_lab_is_bad_input() {
    let err = fails_with_bad_input(
        strobe()
            .args(["ports", "--netns", "strobe-no-such-ns"])
            .output()
            .unwrap(),
    );
    assert!(err.contains("`strobe-no-such-ns` not found"), "{err}");
    let err = fails_with_bad_input(
        strobe()
            .args(["ports", "--lab", "strobe-no-such-lab"])
            .output()
            .unwrap(),
    );
    assert!(
        err.contains("no lab with prefix `strobe-no-such-lab`") && err.contains("strobe lab up"),
        "{err}"
    );
}

/// The kernel's TAI offset read here with adjtimex, independently of strobe.
fn kernel_tai_offset_ns() -> i64 {
    // SAFETY: timex is plain old data; with modes = 0 adjtimex only fills it in.
    let mut tx: libc::timex = unsafe { std::mem::zeroed() };
    // SAFETY: as above; `tx` outlives the call.
    assert!(unsafe { libc::adjtimex(&mut tx) } >= 0);
    i64::from(tx.tai) * 1_000_000_000
}

#[test]
fn clocks_sync_realtime_tai_prints_the_kernels_tai_offset() {
    let expected = kernel_tai_offset_ns();
    let json: Value = serde_json::from_str(&ok(strobe()
        .args(["clocks", "--sync", "realtime", "tai", "--rounds", "3"])
        .args(["--interval-ms", "1", "--json"])
        .output()
        .unwrap()))
    .unwrap();
    let offset = json["offset_ns"].as_i64().unwrap();
    assert!((offset - expected).abs() < 5_000, "{json} vs {expected}");
    assert_eq!(json["rounds"], 3);

    let text = ok(strobe()
        .args(["clocks", "--sync", "realtime", "tai", "--rounds", "2"])
        .args(["--interval-ms", "1"])
        .output()
        .unwrap());
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("offset"))
        .unwrap_or_else(|| panic!("no offset line:\n{text}"));
    // "offset  +37.000000012 s  (tai − realtime at the last round)": every ns, in seconds,
    // and no raw nanosecond integer.
    assert!(!line.contains(" ns"), "{line}");
    let seconds = line.split_whitespace().nth(1).unwrap();
    let seconds: f64 = seconds.parse().unwrap();
    assert!((seconds * 1e9 - expected as f64).abs() < 5_000.0, "{text}");
    assert!(
        text.contains("drift") && text.contains("residual"),
        "{text}"
    );
}

#[test]
fn clocks_lists_system_clocks_and_phcs() {
    let text = ok(strobe().arg("clocks").output().unwrap());
    for name in [
        "CLOCK_REALTIME",
        "CLOCK_MONOTONIC",
        "CLOCK_TAI",
        "PTP hardware clocks:",
    ] {
        assert!(text.contains(name), "{name} missing:\n{text}");
    }
    let json: Value =
        serde_json::from_str(&ok(strobe().args(["clocks", "--json"]).output().unwrap())).unwrap();
    assert_eq!(json["system_clocks"].as_array().unwrap().len(), 3);
    assert_eq!(
        json["tai_offset_s"].as_i64().unwrap() * 1_000_000_000,
        kernel_tai_offset_ns()
    );
    let phcs = json["phc_devices"].as_array().unwrap();
    let on_disk = std::fs::read_dir("/dev")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_prefix("ptp")
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .count();
    assert_eq!(phcs.len(), on_disk, "{json}");
}

#[test]
fn a_bad_clock_name_is_bad_input_listing_the_accepted_names() {
    let err = fails_with_bad_input(
        strobe()
            .args(["clocks", "--sync", "realtime", "sundial"])
            .output()
            .unwrap(),
    );
    for accepted in ["`sundial`", "realtime", "monotonic", "tai", "/dev/ptp0"] {
        assert!(err.contains(accepted), "{accepted} missing: {err}");
    }
    let err = fails_with_bad_input(
        strobe()
            .args(["clocks", "--sync", "/dev/ptp99", "realtime"])
            .output()
            .unwrap(),
    );
    assert!(err.contains("/dev/ptp99"), "{err}");
}
