//! End-to-end checks on synthetic captures whose answers are known exactly.

use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp};
use rand_xoshiro::Xoshiro256PlusPlus;
use strobe_analyze::{
    analyze, AnalyzeError, Capture, Expectation, FloorChoice, FloorModel, Options, RateBasis,
    Report, TargetSource,
};
use strobe_timing::{PathFloor, Pattern, Rate, ScheduleSpec};

const START_NS: u64 = 1_700_000_000_000_000_000;

/// Capture of 64-byte frames with ns timestamps built from `gaps`.
fn from_gaps(gaps: impl IntoIterator<Item = u64>) -> Capture {
    let mut timestamps_ns = vec![START_NS];
    for gap in gaps {
        timestamps_ns.push(timestamps_ns[timestamps_ns.len() - 1] + gap);
    }
    Capture {
        frame_lens: vec![64; timestamps_ns.len()],
        timestamps_ns,
        resolution_ns: 1,
    }
}

fn expecting(spec: &str) -> Options {
    Options {
        expect: Some(spec.parse().expect("test expectation parses")),
        ..Options::default()
    }
}

fn run(capture: &Capture, options: &Options) -> Report {
    analyze(capture, options).expect("synthetic capture is valid")
}

#[test]
fn perfect_cbr_is_exact() {
    let report = run(&from_gaps([10_000; 999]), &expecting("cbr:100kpps"));
    assert_eq!(report.packets, 1000);
    assert_eq!(report.bytes, 64_000);
    assert_eq!(report.duration_ns, 9_990_000);
    assert_eq!(report.achieved_pps, 100_000.0);
    assert!((report.l2_bits_per_sec - 51.2e6).abs() < 1e-6);
    assert!((report.l1_bits_per_sec - 70.4e6).abs() < 1e-6);

    let target = report.target.as_ref().expect("expectation given");
    assert_eq!(target.target_pps, 100_000.0);
    assert_eq!(target.target_gap_ns, 10_000.0);
    assert_eq!(target.rate_error_pct, 0.0);
    assert_eq!(target.rate_error_basis, RateBasis::Pps);

    let p = &report.precision;
    assert_eq!(p.target_source, TargetSource::Expected);
    assert_eq!(p.mse_ns2, 0.0);
    assert_eq!(p.rmse_ns, 0.0);
    assert_eq!(p.share_within_100ns, 1.0);
    assert_eq!(p.share_within_1us, 1.0);
    assert_eq!(p.share_within_10pct, 1.0);

    assert_eq!(report.bursts.burst_count, 0);
    assert_eq!(report.bursts.burst_gap_ns, 1_000);
    assert_eq!(report.gaps.stddev_gap_ns, 0.0);
    assert_eq!(report.gaps.percentiles.p0_1_ns, 10_000);
    assert_eq!(report.gaps.percentiles.p99_9_ns, 10_000);
    assert_eq!(report.histogram.bins.len(), 1);
    assert_eq!(report.histogram.bins[0].count, 999);
    assert!(report.poisson.is_none());
}

#[test]
fn alternating_jitter_gives_known_mse_and_shares() {
    let gaps = (0..1000).map(|i| if i % 2 == 0 { 10_300 } else { 9_700 });
    let report = run(&from_gaps(gaps), &expecting("cbr:100kpps"));
    let p = &report.precision;
    assert_eq!(p.mse_ns2, 90_000.0);
    assert_eq!(p.rmse_ns, 300.0);
    assert_eq!(p.mean_error_ns, 0.0);
    assert_eq!(p.share_within_100ns, 0.0);
    assert_eq!(p.share_within_1us, 1.0);
    assert_eq!(p.share_within_10pct, 1.0);
    assert_eq!(report.gaps.min_gap_ns, 9_700);
    assert_eq!(report.gaps.max_gap_ns, 10_300);
    assert_eq!(report.gaps.stddev_gap_ns, 300.0);
    let binned: u64 = report.histogram.bins.iter().map(|b| b.count).sum();
    assert_eq!(
        binned + report.histogram.underflow + report.histogram.overflow,
        1000
    );
}

#[test]
fn jitter_beyond_ten_percent_is_counted() {
    // Every fourth gap is 1.5 µs late: outside ±1 µs and outside ±10 % of 10 µs.
    let gaps = (0..1000).map(|i| if i % 4 == 0 { 11_500 } else { 10_000 });
    let report = run(&from_gaps(gaps), &expecting("cbr:100kpps"));
    assert_eq!(report.precision.share_within_100ns, 0.75);
    assert_eq!(report.precision.share_within_1us, 0.75);
    assert_eq!(report.precision.share_within_10pct, 0.75);
}

#[test]
fn rate_error_is_relative_to_the_target() {
    let capture = from_gaps([10_000; 500]);
    let fast = Options {
        expect: Some(Expectation::Cbr {
            pps: 1e9 / 11_000.0,
        }),
        ..Options::default()
    };
    let error = run(&capture, &fast).target.unwrap().rate_error_pct;
    assert!((error - 10.0).abs() < 1e-9, "{error}");

    let slow = Options {
        expect: Some(Expectation::Cbr { pps: 1e5 / 0.9 }),
        ..Options::default()
    };
    let error = run(&capture, &slow).target.unwrap().rate_error_pct;
    assert!((error + 10.0).abs() < 1e-9, "{error}");
}

#[test]
fn without_expectation_the_mean_gap_is_the_target() {
    let gaps = (0..1000).map(|i| if i % 2 == 0 { 10_300 } else { 9_700 });
    let report = run(&from_gaps(gaps), &Options::default());
    assert!(report.target.is_none());
    assert_eq!(report.precision.target_source, TargetSource::MeanGap);
    assert_eq!(report.precision.target_gap_ns, 10_000.0);
    assert_eq!(report.precision.mse_ns2, 90_000.0);
    assert!(report.to_string().contains("no expectation given"));
}

/// Bursts of `burst` packets 67 ns apart, bursts 100 µs apart, then `singles`
/// isolated packets 100 µs apart.
fn bursty(bursts: usize, burst: usize, singles: usize) -> Capture {
    let mut gaps = Vec::new();
    for b in 0..bursts {
        if b > 0 {
            gaps.push(100_000);
        }
        gaps.extend(std::iter::repeat_n(67, burst - 1));
    }
    gaps.extend(std::iter::repeat_n(100_000, singles));
    from_gaps(gaps)
}

#[test]
fn bursts_are_counted_exactly() {
    let report = run(&bursty(10, 32, 3), &Options::default());
    let b = &report.bursts;
    assert!(!b.burst_gap_from_options);
    assert_eq!(b.burst_count, 10);
    assert_eq!(b.mean_burst_len_packets, Some(32.0));
    assert_eq!(b.max_burst_len_packets, 32);
    assert_eq!(b.packets_in_bursts, 320);
    assert_eq!(b.share_packets_in_bursts, 320.0 / 323.0);
}

#[test]
fn burst_threshold_from_options_is_inclusive() {
    let capture = bursty(10, 32, 0);
    let with = |gap| Options {
        burst_gap_ns: Some(gap),
        ..Options::default()
    };
    let at = run(&capture, &with(67)).bursts;
    assert!(at.burst_gap_from_options);
    assert_eq!(at.burst_count, 10);
    assert_eq!(run(&capture, &with(66)).bursts.burst_count, 0);
    // A threshold above the long gap joins everything into one burst.
    let all = run(&capture, &with(100_000)).bursts;
    assert_eq!(all.burst_count, 1);
    assert_eq!(all.max_burst_len_packets, 320);
}

#[test]
fn default_burst_threshold_follows_the_target_gap() {
    // Target gap 3.125 µs -> back to back at or below 312 ns.
    let report = run(&bursty(4, 32, 0), &expecting("cbr:320kpps"));
    assert_eq!(report.bursts.burst_gap_ns, 312);
    assert_eq!(report.bursts.burst_count, 4);
}

#[test]
fn burst_threshold_never_drops_below_the_resolution() {
    let mut capture = from_gaps([1_000; 100]);
    capture.resolution_ns = 1_000;
    let report = run(&capture, &Options::default());
    assert_eq!(report.bursts.burst_gap_ns, 1_000);
    assert!(report.resolution_limited);
    assert!(report
        .to_string()
        .contains("limited by the capture resolution"));
}

fn poisson_gaps(seed: u64, pps: f64, count: usize) -> Vec<u64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let exp = Exp::new(pps).expect("positive rate");
    // Accumulate in f64 seconds and round each timestamp, as a ns capture would.
    let mut t = 0.0;
    let mut last = 0u64;
    (0..count)
        .map(|_| {
            t += exp.sample(&mut rng);
            let now = (t * 1e9).round() as u64;
            let gap = now - last;
            last = now;
            gap
        })
        .collect()
}

#[test]
fn poisson_traffic_is_accepted() {
    let capture = from_gaps(poisson_gaps(0x5EED, 100e3, 20_000));
    let report = run(&capture, &expecting("poisson:100kpps"));
    let fit = report.poisson.as_ref().expect("Poisson expectation");
    assert!(fit.consistent_with_poisson, "{fit:?}");
    assert!(fit.ks_p_vs_target > 0.01, "{fit:?}");
    assert!(fit.ks_p_vs_fitted > 0.01, "{fit:?}");
    assert!((fit.coefficient_of_variation - 1.0).abs() < 0.05, "{fit:?}");
    assert!((fit.fitted_pps / 100e3 - 1.0).abs() < 0.05, "{fit:?}");
    let text = report.to_string();
    assert!(text.contains("consistent with Poisson"), "{text}");
    assert!(text.contains("Lilliefors"), "{text}");
}

/// Poisson arrivals as a µs pcap stores them: each timestamp truncated to 1 µs.
fn poisson_us_capture(seed: u64, pps: f64, count: usize) -> Capture {
    let mut capture = from_gaps(poisson_gaps(seed, pps, count));
    for t in &mut capture.timestamps_ns {
        *t -= *t % 1_000;
    }
    capture.resolution_ns = 1_000;
    capture
}

#[test]
fn poisson_traffic_in_us_captures_is_accepted_despite_ties() {
    for (pps, spec) in [(100e3, "poisson:100kpps"), (1e6, "poisson:1mpps")] {
        let capture = poisson_us_capture(0xC0FFEE, pps, 20_000);
        let fit = run(&capture, &expecting(spec)).poisson.unwrap();
        assert!(fit.consistent_with_poisson, "{spec}: {fit:?}");
        assert!(fit.ks_p_vs_target > 0.01, "{spec}: {fit:?}");
    }
}

#[test]
fn cbr_traffic_in_us_captures_is_not_poisson() {
    let mut capture = from_gaps([10_000; 5_000]);
    capture.resolution_ns = 1_000;
    let fit = run(&capture, &expecting("poisson:100kpps"))
        .poisson
        .unwrap();
    assert!(fit.ks_p_vs_target < 1e-6, "{fit:?}");
}

#[test]
fn poisson_traffic_at_the_wrong_rate_is_rejected() {
    let capture = from_gaps(poisson_gaps(0x5EED, 100e3, 20_000));
    let fit = run(&capture, &expecting("poisson:80kpps")).poisson.unwrap();
    assert!(!fit.consistent_with_poisson, "{fit:?}");
    // The shape still fits its own rate.
    assert!(fit.ks_p_vs_fitted > 0.01, "{fit:?}");
}

#[test]
fn cbr_traffic_is_not_poisson() {
    let report = run(&from_gaps([10_000; 5_000]), &expecting("poisson:100kpps"));
    let fit = report.poisson.as_ref().unwrap();
    assert!(!fit.consistent_with_poisson);
    assert!(fit.ks_p_vs_target < 1e-6, "{fit:?}");
    assert!(fit.ks_p_vs_fitted < 1e-6, "{fit:?}");
    assert_eq!(fit.coefficient_of_variation, 0.0);
    assert!(report.to_string().contains("NOT consistent with Poisson"));
}

#[test]
fn uniform_gaps_are_not_poisson() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(42);
    let gaps: Vec<u64> = (0..20_000).map(|_| rng.gen_range(0..=20_000)).collect();
    let fit = run(&from_gaps(gaps), &expecting("poisson:100kpps"))
        .poisson
        .unwrap();
    assert!(!fit.consistent_with_poisson);
    assert!(fit.ks_p_vs_target < 1e-6, "{fit:?}");
    assert!(fit.ks_p_vs_fitted < 1e-6, "{fit:?}");
}

/// Perfect 1 Gbit/s L1 trace: the gap after a frame is its wire time, (len + 24) * 8 ns.
fn l1_trace(lens: &[u32]) -> Capture {
    let mut timestamps_ns = vec![START_NS];
    for &len in &lens[..lens.len() - 1] {
        let last = timestamps_ns[timestamps_ns.len() - 1];
        timestamps_ns.push(last + (u64::from(len) + 24) * 8);
    }
    Capture {
        timestamps_ns,
        frame_lens: lens.to_vec(),
        resolution_ns: 1,
    }
}

fn mixed_sizes() -> Vec<u32> {
    [60, 1514, 590, 124, 9000, 60, 60, 1514]
        .iter()
        .copied()
        .cycle()
        .take(801)
        .collect()
}

#[test]
fn cbr_l1_uses_per_packet_target_gaps() {
    let capture = l1_trace(&mixed_sizes());
    let report = run(&capture, &expecting("cbr:1gbps"));
    let target = report.target.as_ref().unwrap();
    assert_eq!(target.rate_error_basis, RateBasis::L1BitsPerSec);
    assert_eq!(target.target_l1_bits_per_sec, Some(1e9));
    assert!(target.rate_error_pct.abs() < 1e-9, "{target:?}");
    assert!((report.l1_bits_per_sec - 1e9).abs() < 1e-3);
    assert!((target.target_pps - report.achieved_pps).abs() < 1e-6);
    assert_eq!(report.precision.mse_ns2, 0.0);
    assert_eq!(report.precision.share_within_100ns, 1.0);

    // The same trace against a constant packet rate is far from precise.
    let pps = format!("cbr:{}", report.achieved_pps);
    let flat = run(&capture, &expecting(&pps));
    assert!(flat.precision.mse_ns2 > 1e6);
}

#[test]
fn cbr_l1_jitter_is_measured_per_packet() {
    let mut capture = l1_trace(&mixed_sizes());
    // Moving one packet 100 ns late lengthens one gap and shortens the next.
    capture.timestamps_ns[400] += 100;
    let report = run(&capture, &expecting("cbr:1gbps"));
    let expected_mse = 2.0 * 100.0 * 100.0 / 800.0;
    assert!((report.precision.mse_ns2 - expected_mse).abs() < 1e-9);
    assert_eq!(report.precision.share_within_100ns, 1.0);
    assert_eq!(report.precision.share_within_1us, 1.0);
}

#[test]
fn invalid_captures_are_rejected_with_reasons() {
    let one = Capture {
        timestamps_ns: vec![5],
        frame_lens: vec![64],
        resolution_ns: 1,
    };
    assert_eq!(
        analyze(&one, &Options::default()),
        Err(AnalyzeError::TooFewPackets { packets: 1 })
    );
    assert_eq!(
        analyze(&Capture::default(), &Options::default()),
        Err(AnalyzeError::TooFewPackets { packets: 0 })
    );

    let mut decreasing = from_gaps([10, 10, 10, 10]);
    decreasing.timestamps_ns[3] = decreasing.timestamps_ns[2] - 1;
    let err = analyze(&decreasing, &Options::default()).unwrap_err();
    assert_eq!(
        err,
        AnalyzeError::DecreasingTimestamp {
            index: 3,
            previous_ns: START_NS + 20,
            timestamp_ns: START_NS + 19,
        }
    );
    assert!(err.to_string().contains("packet 3"), "{err}");

    let mut mismatched = from_gaps([10, 10]);
    mismatched.frame_lens.pop();
    assert_eq!(
        analyze(&mismatched, &Options::default()),
        Err(AnalyzeError::LengthMismatch {
            timestamps: 3,
            frame_lens: 2
        })
    );

    assert_eq!(
        analyze(&from_gaps([0, 0]), &Options::default()),
        Err(AnalyzeError::ZeroDuration { packets: 3 })
    );

    let mut unresolved = from_gaps([10]);
    unresolved.resolution_ns = 0;
    assert_eq!(
        analyze(&unresolved, &Options::default()),
        Err(AnalyzeError::ZeroResolution)
    );
}

#[test]
fn invalid_options_are_rejected() {
    let capture = from_gaps([10, 10]);
    let no_bins = Options {
        histogram_bins: 0,
        ..Options::default()
    };
    assert_eq!(
        analyze(&capture, &no_bins),
        Err(AnalyzeError::InvalidHistogramBins { bins: 0 })
    );
    let bad_rate = Options {
        expect: Some(Expectation::Cbr { pps: -1.0 }),
        ..Options::default()
    };
    let err = analyze(&capture, &bad_rate).unwrap_err();
    assert!(matches!(err, AnalyzeError::InvalidExpectation(_)));
    assert!(err.to_string().contains("pps must be a positive"), "{err}");
}

fn keys(value: &serde_json::Value) -> Vec<&str> {
    let mut keys: Vec<&str> = value
        .as_object()
        .expect("JSON object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    keys
}

#[test]
fn json_has_the_documented_schema() {
    let capture = from_gaps(poisson_gaps(1, 1e6, 2_000));
    let with_poisson: serde_json::Value =
        serde_json::from_str(&run(&capture, &expecting("poisson:1mpps")).to_json())
            .expect("valid JSON");
    let plain: serde_json::Value =
        serde_json::from_str(&run(&capture, &Options::default()).to_json()).expect("valid JSON");

    let top = [
        "achieved_pps",
        "bursts",
        "bytes",
        "duration_ns",
        "floor_fit",
        "gaps",
        "histogram",
        "l1_bits_per_sec",
        "l2_bits_per_sec",
        "packets",
        "poisson",
        "precision",
        "resolution_limited",
        "resolution_ns",
        "target",
    ];
    // The schema does not depend on the options: absent sections are null.
    assert_eq!(keys(&with_poisson), top);
    assert_eq!(keys(&plain), top);
    assert!(plain["target"].is_null() && plain["poisson"].is_null());
    assert!(plain["floor_fit"].is_null() && with_poisson["floor_fit"].is_null());
    assert_eq!(plain["precision"]["target_source"], "mean_gap");
    assert_eq!(with_poisson["precision"]["target_source"], "expected");

    assert_eq!(
        keys(&with_poisson["target"]),
        [
            "expectation",
            "rate_error_basis",
            "rate_error_pct",
            "target_gap_ns",
            "target_l1_bits_per_sec",
            "target_pps"
        ]
    );
    assert_eq!(with_poisson["target"]["expectation"]["model"], "poisson");
    assert_eq!(with_poisson["target"]["expectation"]["pps"], 1e6);
    assert_eq!(with_poisson["target"]["rate_error_basis"], "pps");
    assert_eq!(
        keys(&with_poisson["gaps"]),
        [
            "coefficient_of_variation",
            "count",
            "max_gap_ns",
            "mean_gap_ns",
            "min_gap_ns",
            "percentiles",
            "stddev_gap_ns"
        ]
    );
    assert_eq!(
        keys(&with_poisson["gaps"]["percentiles"]),
        [
            "p0_1_ns", "p10_ns", "p1_ns", "p25_ns", "p50_ns", "p5_ns", "p75_ns", "p90_ns",
            "p95_ns", "p99_9_ns", "p99_ns"
        ]
    );
    assert_eq!(
        keys(&with_poisson["histogram"]),
        [
            "bin_width_ns",
            "bins",
            "end_ns",
            "overflow",
            "start_ns",
            "underflow"
        ]
    );
    assert_eq!(
        keys(&with_poisson["histogram"]["bins"][0]),
        ["count", "end_ns", "start_ns"]
    );
    assert_eq!(
        keys(&with_poisson["precision"]),
        [
            "mean_error_ns",
            "mse_ns2",
            "rmse_ns",
            "share_within_100ns",
            "share_within_10pct",
            "share_within_1us",
            "target_gap_ns",
            "target_source"
        ]
    );
    assert_eq!(
        keys(&with_poisson["bursts"]),
        [
            "burst_count",
            "burst_gap_from_options",
            "burst_gap_ns",
            "max_burst_len_packets",
            "mean_burst_len_packets",
            "packets_in_bursts",
            "share_packets_in_bursts"
        ]
    );
    assert_eq!(
        keys(&with_poisson["poisson"]),
        [
            "alpha",
            "coefficient_of_variation",
            "consistent_with_poisson",
            "fitted_pps",
            "ks_d_vs_fitted",
            "ks_d_vs_target",
            "ks_p_vs_fitted",
            "ks_p_vs_target",
            "target_pps"
        ]
    );
}

#[test]
fn json_names_the_l1_model() {
    let json = run(&l1_trace(&mixed_sizes()), &expecting("cbr:10gbps")).to_json();
    let value: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    assert_eq!(value["target"]["expectation"]["model"], "cbr_l1");
    assert_eq!(value["target"]["expectation"]["bits_per_sec"], 1e10);
    assert_eq!(value["target"]["rate_error_basis"], "l1_bits_per_sec");
}

#[test]
fn text_report_has_the_key_lines() {
    let gaps = (0..1000).map(|i| if i % 2 == 0 { 10_300 } else { 9_700 });
    let text = run(&from_gaps(gaps), &expecting("cbr:100kpps")).to_string();
    for expected in [
        "packets                 1001",
        "achieved                100.000 kpps",
        "expected                cbr:100000pps",
        "rate error              +0.0000 % (packet rate)",
        "target gap              10.000 µs",
        "mean                    10.000 µs",
        "p99.9                   10.300 µs",
        "Gap histogram",
        "Precision vs expected gap 10.000 µs",
        "MSE                     90000.0 ns^2",
        "RMSE                    300.0 ns",
        "within ±100 ns          0.00 %",
        "within ±1 µs            100.00 %",
        "within ±10 %            100.00 %",
        "Bursts (back to back: gap <= 1.000 µs",
        "bursts                  0",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    assert!(!text.contains("Poisson fit"));
    assert!(!text.contains("limited by the capture resolution"));
}

/// Poisson at `pps` as a perfect sender on `floor` sends it: deadlines drawn independently
/// of strobe's own generator, hand-overs coalesced by the floor's rule, 256 frames at most.
fn poisson_through(floor: PathFloor, pps: f64, count: usize) -> Vec<u64> {
    let mut deadline = 0u64;
    let deadlines: Vec<u64> = poisson_gaps(7, pps, count)
        .into_iter()
        .map(|gap| {
            deadline += gap;
            deadline
        })
        .collect();
    let departures = strobe_timing::perfect_departures(&deadlines, floor, 256);
    departures.windows(2).map(|w| w[1] - w[0]).collect()
}

fn through_floor(spec: &str, floor: FloorChoice, tolerance_ns: Option<u64>) -> Options {
    let expect: Expectation = spec.parse().expect("test expectation parses");
    let Expectation::Poisson { pps } = expect else {
        panic!("poisson expectations only");
    };
    Options {
        expect: Some(expect),
        floor_model: Some(FloorModel {
            specs: vec![ScheduleSpec {
                rate: Rate::Pps(pps),
                pattern: Pattern::Poisson,
                ..ScheduleSpec::default()
            }],
            name: spec.into(),
            floor,
            max_batch: 256,
            tolerance_ns,
        }),
        ..Options::default()
    }
}

#[test]
fn poisson_through_a_floor_is_judged_against_the_perfect_sender() {
    let floor = PathFloor {
        handover_ns: 2_300,
        spacing_ns: 900,
    };
    let capture = from_gaps(poisson_through(floor, 100_000.0, 200_000));
    let report = run(
        &capture,
        &through_floor("poisson:100kpps", FloorChoice::Auto, None),
    );
    let fit = report
        .floor_fit
        .as_ref()
        .expect("a floor fit was asked for");
    // The floor is read back from the capture's own gaps.
    assert!(fit.floor_estimated);
    assert_eq!(fit.spacing_ns, 900);
    assert!(fit.handover_ns.abs_diff(2_300) < 150, "{fit:?}");
    let by = |name: &str| fit.fits.iter().find(|m| m.model == name).expect(name);
    assert!(by("perfect_sender").consistent, "{fit:?}");
    assert!(!by("plain").consistent, "{fit:?}");
    // Frames a perfect sender coalesces arrive at the spacing: about the exponential's mass
    // below the midpoint of spacing and hand-over (1 - e^-0.16 = 14.8 %), well above the
    // plain model's mass below the spacing band (1 - e^-0.1 = 9.5 %).
    assert!((0.13..0.17).contains(&fit.share_at_floor), "{fit:?}");
    assert!((fit.share_at_floor - by("perfect_sender").share_at_floor).abs() < 0.01);
    assert!(fit
        .verdict
        .starts_with("consistent with poisson:100kpps as a perfect sender"));
    let text = report.to_string();
    assert!(text.contains("Through the path's floor"), "{text}");

    let json: serde_json::Value = serde_json::from_str(&report.to_json()).expect("valid JSON");
    assert_eq!(
        keys(&json["floor_fit"]),
        [
            "alpha",
            "band_ns",
            "fits",
            "floor_estimated",
            "handover_ns",
            "max_batch",
            "model",
            "model_gaps",
            "share_at_floor",
            "spacing_ns",
            "verdict"
        ]
    );
    assert_eq!(
        keys(&json["floor_fit"]["fits"][0]),
        ["consistent", "ks_d", "ks_p", "model", "share_at_floor"]
    );

    // Plain Poisson (no floor) is not what that sender sends.
    let plain = from_gaps(poisson_gaps(3, 100_000.0, 200_000));
    let report = run(
        &plain,
        &through_floor("poisson:100kpps", FloorChoice::Given(floor), None),
    );
    let fit = report.floor_fit.expect("a floor fit was asked for");
    let by = |name: &str| fit.fits.iter().find(|m| m.model == name).expect(name);
    assert!(
        by("plain").consistent && !by("perfect_sender").consistent,
        "{fit:?}"
    );
}
