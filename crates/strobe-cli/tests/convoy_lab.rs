//! A convoy of packet trains through the lab's token-bucket DUT (needs root: the test
//! builds its own lab and removes it): every train counted, the bandwidth from the trains'
//! dispersion near the shaper's rate, and the head frame's latency free of the queueing the
//! frames behind it meet.

mod common;
use common::lab::TestLab;
use common::*;

#[test]
fn a_convoy_through_a_50_mbit_shaper_measures_it() {
    let lab = TestLab::up("cv", "tbf:50mbit");
    let dir = Scratch::new("convoy");
    let csv = dir.path("trains.csv");
    // 20 trains of 60 frames of 1000 bytes (60 KB: within the shaper's queue of 10 ms at
    // 50 Mbit/s plus its 6250-byte bucket), 20 ms apart (a train drains in ~10 ms).
    let r = lab.gen(
        &dir,
        &[
            "--size",
            "1000",
            "--pattern",
            "train:20x60/20ms",
            "--trains-csv",
            &csv,
        ],
    );
    let flow = &r["flows"][0];
    let convoy = &flow["convoy"];
    assert_eq!(convoy["trains"].as_array().unwrap().len(), 20, "{convoy}");
    assert_eq!(convoy["frames_sent"], 1200);
    assert_eq!(convoy["frames_lost"], flow["loss"], "{flow}");
    // The shaper counts frames without FCS (996 of each 1000 bytes) at 50 Mbit/s; its
    // bucket lets the first ~6 frames of a train through at once, so a train's dispersion
    // is shorter by those and the estimate sits up to ~10 % above the rate.
    let l2 = convoy["l2_bps"]["mean"].as_f64().unwrap() * 996.0 / 1000.0;
    assert!((45e6..60e6).contains(&l2), "layer-2 estimate {l2} bit/s");
    let ci = convoy["l2_bps"]["ci95"].as_array().unwrap();
    assert!(ci[0].as_f64().unwrap() <= l2 * 1000.0 / 996.0, "{ci:?}");
    // Each train's second half, past the bucket, reads the shaper's rate (generous: 5 %).
    let half = convoy["second_half_l2_bps"]["mean"].as_f64().unwrap() * 996.0 / 1000.0;
    assert!(
        (half / 50e6 - 1.0).abs() < 0.05,
        "second-half estimate {half} bit/s"
    );
    // Heads wait in no queue; the frames behind them wait for the shaper: the flow's
    // median latency (every frame) is far above the heads' mean.
    let head = convoy["head_latency_ns"]["mean"].as_f64().unwrap();
    let every_frame_p50 = flow["latency"]["raw"]["p50_ns"].as_f64().unwrap();
    assert!(
        head * 5.0 < every_frame_p50,
        "head {head} ns, p50 of all {every_frame_p50} ns"
    );
    // One CSV row per train, with its dispersion.
    let text = std::fs::read_to_string(&csv).unwrap();
    let rows: Vec<&str> = text.lines().skip(1).collect();
    assert_eq!(rows.len(), 20, "{text}");
    assert!(
        rows.iter()
            .all(|r| r.split(',').nth(8).is_some_and(|d| !d.is_empty())),
        "{text}"
    );
}
