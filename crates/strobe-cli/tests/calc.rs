//! `strobe calc latency`: the fibre-loop ground truth through the binary.

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
        "60",
    ]));
    // 2000 m × 1.4444 / 299 792 458 m/s = 9636.0 ns; 72 B × 8 / 10 Gbit/s = 57.6 ns.
    for part in [
        "9636.0 ns",
        "57.6 ns",
        "9693.6 ns",
        "72 B on the wire",
        "FCS 4 B",
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
    assert_eq!(number("frame_bytes"), 60.0, "60 is the default frame");
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
