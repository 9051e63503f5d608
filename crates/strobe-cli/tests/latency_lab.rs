//! Latency through the virtual lab (needs root; every test builds and removes its own lab):
//!
//! - strobe's reported distribution against an independent ground truth: the kernel
//!   timestamps of every frame captured (tcpdump, nanosecond precision, decoded by tshark) at
//!   the bridge DUT's ingress and egress, matched by flow and sequence number;
//! - calibration over a cable, and corrected values;
//! - round trips through `strobe reflect`, on AF_PACKET and AF_XDP.

mod common;
use common::lab::{spawn_reflector, Capture, TestLab};
use common::*;

use std::collections::HashMap;
use std::process::Child;

/// Per frame of flow 0: sequence number -> (capture timestamp ns, trailer tx timestamp ns),
/// decoded by tshark from a capture.
fn trailer_times(pcap: &str) -> HashMap<u32, (u64, u64)> {
    let rows = tshark(pcap, &["frame.time_epoch", "udp.dstport", "data.data"]);
    let mut out = HashMap::new();
    for r in rows.iter().filter(|r| r[1] == "2000") {
        let hex: String = r[2].chars().filter(|c| *c != ':').collect();
        assert!(hex.len() >= 32, "payload too short for a trailer: {hex}");
        let t = &hex[hex.len() - 32..];
        let field = |a: usize, b: usize| u64::from_str_radix(&t[a..b], 16).unwrap();
        assert_eq!(field(0, 2), u64::from(b'S'), "trailer marker: as sent");
        assert_eq!(field(4, 8), 0, "flow id");
        let (s, frac) = r[0].split_once('.').unwrap();
        let ts = s.parse::<u64>().unwrap() * 1_000_000_000
            + format!("{frac:0<9}")[..9].parse::<u64>().unwrap();
        out.insert(field(8, 16) as u32, (ts, field(16, 32)));
    }
    out
}

/// The q-quantile of `v` (sorted in place), as HdrHistogram reports it: the smallest value
/// with at least q of the samples at or below it.
fn quantile(v: &mut [u64], q: f64) -> u64 {
    v.sort_unstable();
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

fn latency_field(report: &serde_json::Value, which: &str, field: &str) -> f64 {
    report["flows"][0]["latency"][which][field]
        .as_f64()
        .unwrap_or_else(|| panic!("no latency.{which}.{field} in {}", report["flows"][0]))
}

#[test]
fn latency_agrees_with_the_dut_ground_truth() {
    let dir = Scratch::new("latency-truth");
    // The measurement path's own latency, over a cable.
    let calibration = dir.path("cal.json");
    {
        let cable = TestLab::up("c", "cable");
        ok(strobe()
            .args([
                "calibrate",
                "--lab",
                &cable.prefix,
                "--count",
                "20000",
                "--out",
            ])
            .arg(&calibration)
            .output()
            .unwrap());
    }
    let cal: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&calibration).unwrap()).unwrap();
    let offset = cal["offset_ns"].as_f64().unwrap();
    assert!(
        offset > 0.0 && offset < 1e6,
        "calibration offset {offset} ns"
    );

    let lab = TestLab::up("b", "bridge");
    // The DUT's own latency and strobe's corrected value part when a stall of the busy
    // two-core machine delays the veth hop after the DUT (strobe still agrees with the
    // sink's capture): a run that falls outside the bound gets one more run, and the second
    // must hold.
    if let Err(first) = through_the_bridge(&lab, &dir, &calibration, offset, "1") {
        if let Err(second) = through_the_bridge(&lab, &dir, &calibration, offset, "2") {
            panic!("twice: {first}; {second}");
        }
    }
}

/// 20 000 frames through the bridge, captured at its ingress and egress and at the sink:
/// strobe's latency equals the sink capture's (asserted); Err when its corrected value is
/// outside the bound around the DUT's own latency.
fn through_the_bridge(
    lab: &TestLab,
    dir: &Scratch,
    calibration: &str,
    offset: f64,
    attempt: &str,
) -> Result<(), String> {
    let (ingress, egress, sink) = (
        dir.path(&format!("in-{attempt}.pcap")),
        dir.path(&format!("out-{attempt}.pcap")),
        dir.path(&format!("sink-{attempt}.pcap")),
    );
    let captures = [
        Capture::start(&lab.ns("dut"), "dut0", &ingress),
        Capture::start(&lab.ns("dut"), "dut1", &egress),
        Capture::start(&lab.ns("rx"), "rx0", &sink),
    ];
    let r = lab.gen(
        dir,
        &[
            "--rate",
            "100kpps",
            "--count",
            "20000",
            "--calibration",
            calibration,
        ],
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    drop(captures);
    assert_eq!(r["flows"][0]["frames_rx"], 20_000);
    let lat = &r["flows"][0]["latency"];
    assert_eq!(lat["raw"]["count"], 20_000, "every frame measured: {lat}");
    assert_eq!(lat["negative"], 0);
    assert!(
        lat["timestamps"]["rx"].as_str().unwrap().contains("kernel"),
        "{lat}"
    );
    assert!(
        lat["timestamps"]["tx"]
            .as_str()
            .unwrap()
            .contains("CLOCK_REALTIME"),
        "{lat}"
    );

    let (ingress, egress, sink) = (
        trailer_times(&ingress),
        trailer_times(&egress),
        trailer_times(&sink),
    );
    assert!(
        ingress.len() >= 19_000 && egress.len() >= 19_000 && sink.len() >= 19_000,
        "captures missed frames: {} {} {}",
        ingress.len(),
        egress.len(),
        sink.len()
    );
    let (mut truth, mut end_to_end) = (Vec::new(), Vec::new());
    for (seq, &(t_in, tx_ns)) in &ingress {
        let (Some(&(t_out, _)), Some(&(t_sink, _))) = (egress.get(seq), sink.get(seq)) else {
            continue;
        };
        // One clock on the whole path: every frame passes the four points in order.
        assert!(
            tx_ns <= t_in && t_in <= t_out && t_out <= t_sink,
            "frame {seq}: tx {tx_ns} ingress {t_in} egress {t_out} sink {t_sink}"
        );
        truth.push(t_out - t_in);
        end_to_end.push(t_sink - tx_ns);
    }
    for (label, q, field) in [
        ("p50", 0.5, "p50_ns"),
        ("p90", 0.9, "p90_ns"),
        ("p99", 0.99, "p99_ns"),
    ] {
        let strobe_raw = latency_field(&r, "raw", field);
        let strobe_corrected = latency_field(&r, "corrected", field);
        assert!((strobe_raw - offset - strobe_corrected).abs() < 1.0 || strobe_corrected == 0.0);
        // What strobe measured equals what the sink's capture says about the same frames.
        let e2e = quantile(&mut end_to_end, q) as f64;
        assert!(
            (strobe_raw - e2e).abs() <= 2_000.0 + e2e * 0.01,
            "{label}: strobe {strobe_raw} ns, capture at the sink {e2e} ns"
        );
        // The DUT's own latency, from its ingress and egress: strobe's corrected value is
        // within generous bounds of it (what remains is one veth hop and scheduling).
        let dut = quantile(&mut truth, q) as f64;
        assert!(
            strobe_raw >= dut,
            "{label}: strobe {strobe_raw} ns below the DUT's own {dut} ns"
        );
        // The p99 also holds the scheduling of the veth hop after the DUT, which on a busy
        // two-core machine reaches the DUT's own tail (seen in CI: 1.13 ms against the DUT's
        // 0.51 ms, while strobe agreed with the sink's capture): a wider bound there.
        let bound = 20_000.0 + if label == "p99" { 3.0 * dut } else { dut };
        if (strobe_corrected - dut).abs() > bound {
            return Err(format!(
                "{label}: corrected {strobe_corrected} ns vs DUT ground truth {dut} ns (bound {bound})"
            ));
        }
    }
    Ok(())
}

/// `strobe reflect` running until it has reflected `count` frames (or 60 s).
struct Reflector {
    child: Child,
}

impl Reflector {
    fn start(lab: &TestLab, port: &str, count: u64, json: &str) -> Reflector {
        let mut cmd = strobe();
        cmd.args(["reflect", port, "--lab", &lab.prefix])
            .args(["--duration", "60s", "--json", json])
            .args(["--count", &count.to_string()]);
        let child = spawn_reflector(&mut cmd);
        Reflector { child }
    }

    fn wait(mut self) -> std::process::ExitStatus {
        self.child.wait().unwrap()
    }
}

impl Drop for Reflector {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the PID of the child this test started.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
        let _ = self.child.wait();
    }
}

#[test]
fn round_trips_through_strobe_reflect() {
    let dir = Scratch::new("latency-reflect");
    let lab = TestLab::up("r", "cable");
    for (reflect_port, count) in [("lab:rx", 20_000u64), ("lab:rx@afxdp", 5_000)] {
        let json = dir.path("reflect.json");
        let reflector = Reflector::start(&lab, reflect_port, count, &json);
        let out = dir.path("rt.json");
        // Tagged frames: the reflection must come back in the same VLAN (veth strips the tag
        // into metadata on receive, the reflector puts it back).
        let pcap = dir.path("back.pcap");
        let capture = Capture::start(&lab.ns("tx"), "tx0", &pcap);
        ok(lab
            .gen_command("lab:tx", "lab:tx")
            .args([
                "--json",
                &out,
                "--rate",
                "20kpps",
                "--count",
                &count.to_string(),
                "--vlan",
                "7",
                "--size",
                "68",
            ])
            .output()
            .unwrap());
        assert!(reflector.wait().success());
        std::thread::sleep(std::time::Duration::from_millis(200));
        drop(capture);
        let back: Vec<Vec<String>> = tshark(&pcap, &["udp.srcport", "vlan.id"])
            .into_iter()
            .filter(|r| r[0] == "2000")
            .collect();
        // tcpdump may miss a few under load; strobe's own counts below are exact.
        assert!(
            back.len() as u64 >= count * 9 / 10,
            "{reflect_port}: tcpdump saw {} of {count} reflections on tx0",
            back.len()
        );
        assert!(
            back.iter().all(|r| r[1] == "7"),
            "{reflect_port}: a reflection lost its VLAN tag: {:?}",
            back.iter().find(|r| r[1] != "7")
        );
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        let f = &r["flows"][0];
        assert_eq!(f["frames_rx"], count, "{reflect_port}: {f}");
        assert_eq!(
            (f["loss"].as_u64(), f["duplicates"].as_u64()),
            (Some(0), Some(0)),
            "{f}"
        );
        assert_eq!(f["latency"]["raw"]["count"], count);
        let p50 = latency_field(&r, "raw", "p50_ns");
        assert!(p50 > 0.0 && p50 < 5e6, "round trip p50 {p50} ns");
        let refl: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(refl["reflected"], count, "{refl}");
        assert_eq!(refl["tx_dropped"], 0);
    }
}

#[test]
fn latency_outputs_and_a_load_sweep() {
    let dir = Scratch::new("latency-outputs");
    let lab = TestLab::up("o", "cable");
    let (hlog, sweep_csv, sweep_svg, json) = (
        dir.path("sweep.hlog"),
        dir.path("sweep.csv"),
        dir.path("sweep.svg"),
        dir.path("sweep.json"),
    );
    let out = lab.gen_text(&[
        "--count",
        "5000",
        "--rates",
        "10kpps,50kpps",
        "--hdr-log",
        &hlog,
        "--hdr-interval",
        "100ms",
        "--sweep-csv",
        &sweep_csv,
        "--sweep-svg",
        &sweep_svg,
        "--json",
        &json,
    ]);
    assert!(out.contains("latency against load"), "{out}");
    // The interval log, read by HdrHistogram's Python implementation: one interval per
    // rate, every frame in it.
    // Intervals of 100 ms: the 10 kpps step (0.5 s) spans several; added back up per tag by
    // hdrh, they hold every frame and give strobe's own median.
    let script = r#"
import sys
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader
reader = HistogramLogReader(sys.argv[1], HdrHistogram(1, 100000000000, 3))
totals, intervals = {}, {}
while True:
    h = reader.get_next_interval_histogram()
    if h is None:
        break
    tag = h.get_tag()
    totals.setdefault(tag, HdrHistogram(1, 100000000000, 3)).add(h)
    intervals[tag] = intervals.get(tag, 0) + 1
for tag in sorted(totals):
    t = totals[tag]
    print(tag, t.get_total_count(), t.get_value_at_percentile(50.0), intervals[tag])
"#;
    let py = std::process::Command::new("python3")
        .args(["-c", script, &hlog])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&py.stdout).to_string();
    assert!(
        py.status.success(),
        "hdrh: {}",
        String::from_utf8_lossy(&py.stderr)
    );
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split(' ').collect()).collect();
    assert_eq!(rows.len(), 2, "{text}");
    let steps: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for (row, (tag, step)) in rows.iter().zip([("udp@10kpps", 0), ("udp@50kpps", 1)]) {
        assert_eq!(row[0], tag);
        assert_eq!(row[1], "5000", "{tag}: every frame in the intervals");
        let p50 = steps["steps"][step]["result"]["flows"][0]["latency"]["raw"]["p50_ns"]
            .as_f64()
            .unwrap();
        let theirs: f64 = row[2].parse().unwrap();
        assert!(
            (theirs - p50).abs() <= p50 * 0.001 + 1.0,
            "{tag}: hdrh p50 {theirs}, strobe {p50}"
        );
        if step == 0 {
            let n: u32 = row[3].parse().unwrap();
            assert!(n >= 4, "0.5 s in 100 ms intervals gave {n} intervals");
        }
    }
    let csv = std::fs::read_to_string(&sweep_csv).unwrap();
    assert_eq!(csv.lines().count(), 3, "{csv}");
    assert!(std::fs::read_to_string(&sweep_svg)
        .unwrap()
        .contains("<svg"));

    // One run's HTML report and CDF/CCDF table.
    let (html, cdf) = (dir.path("lat.html"), dir.path("lat.csv"));
    lab.gen_text(&[
        "--count",
        "3000",
        "--rate",
        "20kpps",
        "--latency-html",
        &html,
        "--latency-csv",
        &cdf,
    ]);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("<svg") && page.contains("udp"),
        "no figure in the report"
    );
    assert!(
        !page.contains("http://") && !page.contains("https://"),
        "the report must be self-contained"
    );
    let rows: Vec<Vec<String>> = std::fs::read_to_string(&cdf)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    let last = rows.last().unwrap();
    assert_eq!(
        (last[2].as_str(), last[4].parse::<f64>().unwrap()),
        ("3000", 0.0)
    );

    // veth stamps in software only: asking for hardware receive timestamps is refused,
    // with the reason, before anything is sent.
    let out = lab
        .gen_command("lab:tx", "lab:rx")
        .args(["--count", "10", "--hw-timestamps"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cannot stamp every frame in hardware"),
        "{stderr}"
    );
}
