//! Every example scenario run end to end: `strobe gen` writes a pcap with scheduled
//! departure times, tshark reads the times and fields back, and the shape of each timing
//! model is checked. Simulated time only: nothing here depends on the machine's speed.

mod common;
use common::*;

fn gaps(times: &[u64]) -> Vec<u64> {
    times.windows(2).map(|w| w[1] - w[0]).collect()
}

#[test]
fn cbr_gaps_are_exact_and_fields_cycle() {
    let dir = Scratch::new("cbr");
    gen_example("udp-cbr.toml", &dir);
    let pcap = dir.path("udp-cbr.pcap");
    let times = tshark_times_ns(&pcap);
    assert_eq!(times.len(), 10_000);
    for (i, t) in times.iter().enumerate() {
        assert_eq!(*t, i as u64 * 10_000, "departure of frame {i} at 100 kpps");
    }
    let rows = tshark(&pcap, &["ip.src", "udp.dstport", "frame.len"]);
    for (j, r) in rows.iter().enumerate() {
        let src = std::net::Ipv4Addr::from(u32::from_be_bytes([198, 18, 0, 1]) + (j % 256) as u32);
        assert_eq!(r[0], src.to_string(), "ip.src of frame {j}");
        assert_eq!(
            r[1],
            (2000 - j % 10).to_string(),
            "udp.dstport of frame {j}"
        );
        assert_eq!(r[2], "124");
    }
}

#[test]
fn layer1_rate_with_imix_sizes() {
    let dir = Scratch::new("l1");
    gen_example("l1-rate-imix.toml", &dir);
    let pcap = dir.path("l1-rate-imix.pcap");
    let rows = tshark(&pcap, &["frame.len", "frame.time_epoch"]);
    assert_eq!(rows.len(), 12_000);
    let lens: Vec<u64> = rows.iter().map(|r| r[0].parse().unwrap()).collect();
    // IMIX 64:7, 570:4, 1518:1 exactly in every block of 12 frames.
    for block in lens.chunks(12) {
        let count = |n| block.iter().filter(|&&l| l == n).count();
        assert_eq!(
            (count(60), count(566), count(1514)),
            (7, 4, 1),
            "block {block:?}"
        );
    }
    // At 1 Gbit/s one bit lasts 1 ns: each gap is the previous frame's (size + 20) bytes.
    let times = tshark_times_ns(&pcap);
    for (i, g) in gaps(&times).iter().enumerate() {
        assert_eq!(*g, (lens[i] + 4 + 20) * 8, "gap after frame {i}");
    }
}

#[test]
fn poisson_million_frames_fit_and_keep_the_rate() {
    let dir = Scratch::new("poisson");
    let pcap = dir.path("p.pcap");
    gen_udp(
        &format!("pcap:{pcap}"),
        &[
            "--rate",
            "1mpps",
            "--pattern",
            "poisson",
            "--count",
            "1000000",
            "--seed",
            "3",
        ],
    );
    let out = ok(strobe()
        .args(["analyze", &pcap, "--expect", "poisson:1mpps", "--json"])
        .output()
        .unwrap());
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["packets"], 1_000_000);
    let err = report["target"]["rate_error_pct"].as_f64().unwrap();
    assert!(err.abs() < 1.0, "mean rate off by {err} %");
    assert_eq!(
        report["poisson"]["consistent_with_poisson"], true,
        "{}",
        report["poisson"]
    );
    let cv = report["poisson"]["coefficient_of_variation"]
        .as_f64()
        .unwrap();
    assert!((cv - 1.0).abs() < 0.01, "coefficient of variation {cv}");
    // A file has no floor: judged through the floor read from its own gaps (next to none),
    // the plain exponential holds.
    let plain = report["floor_fit"]["fits"]
        .as_array()
        .expect("poisson is judged through a floor by default")
        .iter()
        .find(|m| m["model"] == "plain")
        .unwrap()
        .clone();
    assert_eq!(plain["consistent"], true, "{}", report["floor_fit"]);
}

#[test]
fn otg_bursts_have_the_configured_shape() {
    let dir = Scratch::new("burst");
    gen_example("burst.toml", &dir);
    let times = tshark_times_ns(&dir.path("burst.pcap"));
    assert_eq!(times.len(), 50 * 32);
    for (i, g) in gaps(&times).iter().enumerate() {
        // 10 Mpps inside a burst; after the 32nd frame, its slot (100 ns) plus 100 µs.
        let want = if (i + 1) % 32 == 0 { 100_100 } else { 100 };
        assert_eq!(*g, want, "gap after frame {i}");
    }
}

#[test]
fn on_off_sends_only_in_on_periods() {
    let dir = Scratch::new("onoff");
    gen_example("on-off.toml", &dir);
    let times = tshark_times_ns(&dir.path("on-off.pcap"));
    assert_eq!(times.len(), 20 * 1000, "20 on-periods of 1 ms at 1 Mpps");
    for t in &times {
        assert!(
            t % 5_000_000 < 1_000_000,
            "frame at {t} ns falls in an off period"
        );
    }
}

#[test]
fn distributions_have_their_means() {
    let dir = Scratch::new("dist");
    gen_example("distributions.toml", &dir);
    let pcap = dir.path("distributions.pcap");
    let rows = tshark(&pcap, &["udp.srcport", "frame.time_epoch"]);
    let times = tshark_times_ns(&pcap);
    // Flows are told apart by source port; the merged trace must stay in time order.
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "merge by deadline keeps time order"
    );
    // (source port, theoretical mean gap in ns): Weibull mean = scale·Γ(1 + 1/shape).
    let expected = [
        (1001, 10_000.0),
        (1002, 10_000.0),
        (1003, 10_000.0),
        (1004, 10_000.0),
        (1005, 9_027.5),
        (1006, 10_000.0),
    ];
    for (port, mean) in expected {
        let t: Vec<u64> = rows
            .iter()
            .zip(&times)
            .filter(|(r, _)| r[0] == port.to_string())
            .map(|(_, t)| *t)
            .collect();
        assert_eq!(t.len(), 2000, "flow with source port {port}");
        let g = gaps(&t);
        let got = g.iter().sum::<u64>() as f64 / g.len() as f64;
        // Seeded, so deterministic; the bound allows for Pareto's heavy tail.
        assert!(
            (got - mean).abs() / mean < 0.25,
            "port {port}: mean gap {got} vs {mean}"
        );
    }
    // Uniform gaps stay inside [5 µs, 15 µs].
    let uni: Vec<u64> = rows
        .iter()
        .zip(&times)
        .filter(|(r, _)| r[0] == "1001")
        .map(|(_, t)| *t)
        .collect();
    assert!(gaps(&uni).iter().all(|g| (5_000..=15_000).contains(g)));
}

#[test]
fn empirical_table_frequencies() {
    let dir = Scratch::new("empirical");
    gen_example("empirical.toml", &dir);
    let times = tshark_times_ns(&dir.path("empirical.pcap"));
    let g = gaps(&times);
    let share = |v| g.iter().filter(|&&x| x == v).count() as f64 / g.len() as f64;
    assert_eq!(
        share(1000) + share(5000) + share(20000),
        1.0,
        "only the table's gaps occur"
    );
    for (v, w) in [(1000, 0.6), (5000, 0.3), (20000, 0.1)] {
        assert!(
            (share(v) - w).abs() < 0.03,
            "gap {v}: share {} vs weight {w}",
            share(v)
        );
    }
}

#[test]
fn rate_steps_and_ramp() {
    let dir = Scratch::new("ramp");
    gen_example("ramp.toml", &dir);
    let pcap = dir.path("ramp.pcap");
    let rows = tshark(&pcap, &["udp.srcport"]);
    let times = tshark_times_ns(&pcap);
    let flow = |port: &str| -> Vec<u64> {
        rows.iter()
            .zip(&times)
            .filter(|(r, _)| r[0] == port)
            .map(|(_, t)| *t)
            .collect()
    };
    let steps = flow("1000");
    let in_window = |t: &[u64], a: u64, b: u64| t.iter().filter(|&&x| x >= a && x < b).count();
    assert_eq!(in_window(&steps, 0, 10_000_000), 100, "10 kpps for 10 ms");
    assert_eq!(
        in_window(&steps, 10_000_000, 20_000_000),
        500,
        "50 kpps for 10 ms"
    );
    // Ramp from 20 kpps to 200 kpps in 10 steps over 100 ms (Poisson): the last 10 ms carry
    // far more frames than the first 10 ms.
    let ramp = flow("1001");
    let first = in_window(&ramp, 0, 10_000_000) as f64;
    let last = in_window(&ramp, 90_000_000, 100_000_000) as f64;
    assert!(
        (first - 200.0).abs() < 60.0,
        "first 10 ms: {first} frames, expected about 200"
    );
    assert!(last > 4.0 * first, "ramp did not rise: {first} -> {last}");
}

#[test]
fn replay_keeps_the_capture_timing_at_speed() {
    let dir = Scratch::new("replay");
    gen_example("replay.toml", &dir);
    let original = tshark_times_ns(&examples_dir().join("replay-source.pcap").to_string_lossy());
    let replayed = tshark_times_ns(&dir.path("replay.pcap"));
    assert_eq!(replayed.len(), 500);
    let (og, rg) = (gaps(&original), gaps(&replayed));
    for i in 0..og.len() {
        assert!(
            rg[i].abs_diff(og[i] / 2) <= 1,
            "gap {i}: {} vs original {} / 2",
            rg[i],
            og[i]
        );
    }
    assert!(
        replayed.windows(2).all(|w| w[0] <= w[1]),
        "looping stays monotonic"
    );
}

#[test]
fn analyze_reports_known_answers_for_a_perfect_cbr_trace() {
    let dir = Scratch::new("analyze");
    gen_example("udp-cbr.toml", &dir);
    let out = ok(strobe()
        .args([
            "analyze",
            &dir.path("udp-cbr.pcap"),
            "--expect",
            "cbr:100kpps",
            "--json",
        ])
        .output()
        .unwrap());
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["target"]["rate_error_pct"].as_f64(), Some(0.0));
    assert_eq!(r["precision"]["mse_ns2"].as_f64(), Some(0.0));
    assert_eq!(r["precision"]["share_within_100ns"].as_f64(), Some(1.0));
    assert_eq!(r["bursts"]["burst_count"], 0);
    assert_eq!(r["gaps"]["min_gap_ns"], 10_000);
    assert_eq!(r["gaps"]["max_gap_ns"], 10_000);
    // And the text report says the same.
    let text = ok(strobe()
        .args([
            "analyze",
            &dir.path("udp-cbr.pcap"),
            "--expect",
            "cbr:100kpps",
        ])
        .output()
        .unwrap());
    assert!(text.contains("within ±100 ns"), "{text}");
}
