//! `strobe calc latency` and `strobe calc bandwidth`: the physical ground truth through the binary.

mod common;
use common::*;

use std::process::Output;

fn calc(args: &[&str]) -> Output {
    strobe()
        .args(["calc", "latency"])
        .args(args)
        .output()
        .expect("running strobe")
}

#[test]
fn two_km_at_10g_in_text() {
    let text = ok(calc(&[
        "--fiber",
        "2km",
        "--refractive-index",
        "1.4444",
        "--rate",
        "10g",
        "--frame",
        "64",
    ]));
    // 2000 m × 1.4444 / 299 792 458 m/s = 9636.0 ns; 72 B × 8 / 10 Gbit/s = 57.6 ns.
    for part in [
        "9636.0 ns",
        "57.6 ns",
        "9693.6 ns",
        "72 B on the wire",
        "64-byte frame (FCS included)",
        "incl. FCS 4 B",
        "preamble/SFD 8 B",
    ] {
        assert!(text.contains(part), "{part} missing from:\n{text}");
    }
}

#[test]
fn json_output_carries_every_term() {
    let stdout = ok(calc(&[
        "--fiber",
        "2000",
        "--refractive-index",
        "1.4444",
        "--rate",
        "10gbps",
        "--json",
    ]));
    let json: serde_json::Value = serde_json::from_str(&stdout).expect("stdout is JSON");
    let number = |key: &str| {
        json[key]
            .as_f64()
            .unwrap_or_else(|| panic!("{key} in {json}"))
    };
    let propagation = 2000.0 * 1.4444 / 299_792_458.0 * 1e9;
    assert!((number("propagation_ns") - propagation).abs() < 1e-6);
    assert!((number("serialization_ns") - 57.6).abs() < 1e-9);
    assert!((number("total_ns") - propagation - 57.6).abs() < 1e-6);
    assert_eq!(number("wire_bytes"), 72.0);
    assert_eq!(
        number("frame_bytes_with_fcs"),
        64.0,
        "64 (FCS included, as gen --size counts) is the default frame"
    );
    assert_eq!(number("line_rate_bps"), 10e9);
}

#[test]
fn bad_values_name_the_flag_and_what_is_accepted() {
    let cases: [(&[&str], &[&str]); 5] = [
        (&["--fiber", "2 miles", "--rate", "10g"], &["--fiber", "km"]),
        (&["--fiber", "2km", "--rate", "10 pps"], &["--rate", "100g"]),
        (
            &[
                "--fiber",
                "2km",
                "--rate",
                "10g",
                "--refractive-index",
                "0.5",
            ],
            &["--refractive-index", "at least 1"],
        ),
        (
            &["--fiber", "2km", "--rate", "10g", "--frame", "0"],
            &["--frame", "at least 1 byte"],
        ),
        (&["--fiber", "2km"], &["--rate"]),
    ];
    for (args, must_contain) in cases {
        let out = calc(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        for part in must_contain {
            assert!(
                stderr.contains(part),
                "{args:?}: `{part}` missing from {stderr}"
            );
        }
    }
}

#[test]
fn calc_and_gen_read_rates_and_frame_sizes_alike() {
    // `10g` is 10 Gbit/s (layer 1) for both: gen paces 64-byte frames at 10e9 / (84 × 8)
    // = 14.88 Mpps, and calc serialises a 64-byte frame (FCS included) as 72 bytes.
    let dir = Scratch::new("calc-gen-rate");
    let json = dir.path("g.json");
    ok(gen_udp_command("pcap:g.pcap")
        .args([
            "--rate", "10g", "--size", "64", "--count", "1001", "-q", "--json", &json,
        ])
        .current_dir(&dir.0)
        .output()
        .unwrap());
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let flow = &r["ports"][0]["flows"][0];
    let span_ns = flow["last_ns"].as_u64().unwrap() - flow["first_ns"].as_u64().unwrap();
    // 1000 gaps of 84 bytes at 10 Gbit/s = 67.2 ns each.
    assert!((span_ns as f64 - 67_200.0).abs() <= 1.0, "{span_ns} ns");
    let calc_json = ok(calc(&[
        "--fiber", "0", "--rate", "10g", "--frame", "64", "--json",
    ]));
    let c: serde_json::Value = serde_json::from_str(&calc_json).unwrap();
    assert_eq!(c["line_rate_bps"], 10e9);
    assert_eq!(c["wire_bytes"], 72, "{c}");
    // A plain number is packets per second to gen, so calc refuses it instead of reading
    // bits per second.
    let out = calc(&["--fiber", "0", "--rate", "9600"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("packet rate"));
}

#[test]
fn bandwidth_gives_the_convoy_studys_ground_truth() {
    let bandwidth = |args: &[&str]| {
        strobe()
            .args(["calc", "bandwidth"])
            .args(args)
            .output()
            .unwrap()
    };
    // The study's Table 1: 9.844 Gbit/s for 1518-byte frames and 7.143 for 60 bytes (64 with
    // the FCS) at 10 GbE, counted without the FCS.
    let text = ok(bandwidth(&["--rate", "10g", "--frame", "1518"]));
    assert!(
        text.contains("9.844 Gbit/s") && text.contains("812744 frames/s"),
        "{text}"
    );
    let v: serde_json::Value = serde_json::from_str(&ok(bandwidth(&[
        "--rate", "10g", "--frame", "64", "--json",
    ])))
    .unwrap();
    let gbit = |key: &str| v[key].as_f64().unwrap() / 1e9;
    assert!((gbit("l2_without_fcs_bps") - 7.143).abs() < 0.0005, "{v}");
    assert!((gbit("l1_bps") - 10.0).abs() < 1e-9, "{v}");
    assert!(
        (v["frames_per_sec"].as_f64().unwrap() - 14_880_952.4).abs() < 1.0,
        "{v}"
    );
    let out = bandwidth(&["--rate", "10g", "--frame", "12"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--frame 12"));
}
