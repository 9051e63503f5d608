//! Parsing of user strings and rejection of invalid specifications, with helpful messages.

use strobe_timing::{
    parse_duration_ns, parse_rate, Dist, Duration, EmpiricalTable, Pattern, Rate, RateProfile,
    RateStep, Schedule, ScheduleSpec, TimingError,
};

#[test]
fn parse_rate_accepts_packet_and_bit_rates() {
    let cases = [
        ("1000", Rate::Pps(1000.0)),
        ("100kpps", Rate::Pps(100_000.0)),
        ("1.5mpps", Rate::Pps(1_500_000.0)),
        ("1.1MPPS", Rate::Pps(1_100_000.0)),
        ("2gpps", Rate::Pps(2e9)),
        ("250pps", Rate::Pps(250.0)),
        ("0.5", Rate::Pps(0.5)),
        ("1e6", Rate::Pps(1e6)),
        ("10gbps", Rate::L1BitsPerSec(1e10)),
        ("10 Gbps", Rate::L1BitsPerSec(1e10)),
        ("100mbps", Rate::L1BitsPerSec(1e8)),
        ("64kbps", Rate::L1BitsPerSec(64_000.0)),
        ("9600bps", Rate::L1BitsPerSec(9600.0)),
        ("0.1gbps", Rate::L1BitsPerSec(1e8)),
        ("1tbps", Rate::L1BitsPerSec(1e12)),
        ("  400Gbps ", Rate::L1BitsPerSec(4e11)),
        // Line-rate spellings, as `strobe calc --rate` reads them.
        ("10g", Rate::L1BitsPerSec(1e10)),
        ("25G", Rate::L1BitsPerSec(25e9)),
        ("100m", Rate::L1BitsPerSec(1e8)),
        ("2.5gbit/s", Rate::L1BitsPerSec(2.5e9)),
        ("10 Gbit/s", Rate::L1BitsPerSec(1e10)),
        ("1t", Rate::L1BitsPerSec(1e12)),
    ];
    for (text, expected) in cases {
        assert_eq!(parse_rate(text), Ok(expected), "{text}");
    }
}

#[test]
fn parse_rate_rejects_with_what_is_accepted() {
    for text in [
        "", "fast", "10xps", "0", "0pps", "-5pps", "nan", "inf", "1e16pps", "10%", "1.2.3pps",
        "pps", "10 g bps",
    ] {
        let error = parse_rate(text).expect_err(text);
        let message = error.to_string();
        assert!(
            matches!(error, TimingError::ParseRate { .. }),
            "{text}: {error:?}"
        );
        assert!(message.contains(&format!("{text:?}")), "{text}: {message}");
        assert!(
            message.contains("pps") || message.contains("per second"),
            "{text}: {message}"
        );
    }
    assert!(parse_rate("10xps")
        .unwrap_err()
        .to_string()
        .contains("unknown unit \"xps\""));
}

#[test]
fn rates_display_as_strings_that_parse_back() {
    for rate in [
        Rate::Pps(1000.0),
        Rate::Pps(0.25),
        Rate::L1BitsPerSec(1e10),
        Rate::L1BitsPerSec(123.456),
    ] {
        assert_eq!(parse_rate(&rate.to_string()), Ok(rate));
    }
}

#[test]
fn parse_duration_accepts_units_and_plain_nanoseconds() {
    let cases = [
        ("10ms", 10_000_000),
        ("1.5s", 1_500_000_000),
        ("0.1s", 100_000_000),
        ("250us", 250_000),
        ("250µs", 250_000),
        ("100ns", 100),
        ("2m", 120_000_000_000),
        ("1.5min", 90_000_000_000),
        ("1h", 3_600_000_000_000),
        ("42", 42),
        (" 3 MS ", 3_000_000),
        ("0", 0),
        (".5us", 500),
        ("0.5ns", 1), // halves round up
        ("0.4ns", 0),
        ("1.0000000005s", 1_000_000_001),
        ("18446744073709551615", u64::MAX),
    ];
    for (text, expected) in cases {
        assert_eq!(parse_duration_ns(text), Ok(expected), "{text}");
    }
}

#[test]
fn parse_duration_rejects_with_what_is_accepted() {
    for text in [
        "",
        "ms",
        "-1s",
        "1e3",
        "abc",
        "1.2.3s",
        "10 parsecs",
        "10000000h",
        "18446744073709551616",
        "1,5s",
    ] {
        let error = parse_duration_ns(text).expect_err(text);
        assert!(
            matches!(error, TimingError::ParseDuration { .. }),
            "{text}: {error:?}"
        );
        assert!(error.to_string().contains("ns, us"), "{text}: {error}");
    }
    assert!(parse_duration_ns("10000000h")
        .unwrap_err()
        .to_string()
        .contains("584 years"));
}

#[test]
fn empirical_csv_accepts_header_comments_and_optional_weights() {
    let text = "# captured on lab switch\r\ngap_ns, weight\r\n\r\n100\r\n250.5 , 2 # bursty\r\n  400,0.5\r\n";
    let table = EmpiricalTable::from_csv(text).unwrap();
    assert_eq!(
        table.entries().collect::<Vec<_>>(),
        [(100.0, 1.0), (250.5, 2.0), (400.0, 0.5)]
    );
    assert_eq!(table.len(), 3);
    assert!((table.mean_ns() - (100.0 + 501.0 + 200.0) / 3.5).abs() < 1e-9);
}

#[test]
fn empirical_csv_errors_name_the_line() {
    let cases = [
        (
            "gap_ns,weight\n100,1\n# note\n200,abc\n",
            4,
            "weight \"abc\"",
        ),
        ("100\nfoo\n", 2, "gap \"foo\""),
        ("100,1,2\n", 1, "3 fields"),
        ("\n\n-5\n", 3, "gap -5"),
        ("100,-1\n", 1, "weight -1"),
        ("100,\n", 1, "weight \"\""),
        ("inf\n", 1, "gap inf"),
    ];
    for (text, line, needle) in cases {
        let error = EmpiricalTable::from_csv(text).expect_err(text);
        assert!(
            matches!(error, TimingError::EmpiricalCsv { line: l, .. } if l == line),
            "{text:?}: {error:?}"
        );
        let message = error.to_string();
        assert!(message.contains(&format!("line {line}")), "{message}");
        assert!(message.contains(needle), "{message}");
        // Either the row format or the accepted range.
        assert!(
            message.contains("`gap_ns,weight`") || message.contains(">= 0"),
            "{message}"
        );
    }
}

#[test]
fn empirical_tables_need_some_weight_and_some_gap() {
    for text in ["", "# nothing\n", "gap_ns\n", "100,0\n200,0\n", "0\n0,3\n"] {
        let error = EmpiricalTable::from_csv(text).expect_err(text);
        assert!(error.to_string().contains("empirical gap table"), "{error}");
    }
    assert!(EmpiricalTable::new([(f64::NAN, 1.0)]).is_err());
}

fn rejected(spec: ScheduleSpec) -> String {
    match Schedule::new(spec.clone()) {
        Ok(_) => panic!("accepted {spec:?}"),
        Err(error) => error.to_string(),
    }
}

#[test]
fn invalid_rates_are_rejected() {
    for rate in [
        Rate::Pps(0.0),
        Rate::Pps(-1.0),
        Rate::Pps(f64::NAN),
        Rate::Pps(f64::INFINITY),
        Rate::L1BitsPerSec(1e16),
    ] {
        let message = rejected(ScheduleSpec {
            rate,
            ..Default::default()
        });
        assert!(message.starts_with("invalid rate"), "{message}");
        assert!(message.contains("from 1e-6 to 1e15"), "{message}");
    }
}

#[test]
fn invalid_distribution_parameters_are_rejected() {
    let cases = [
        (
            Dist::Uniform {
                min_ns: 10.0,
                max_ns: 5.0,
            },
            "uniform max_ns",
        ),
        (
            Dist::Uniform {
                min_ns: -1.0,
                max_ns: 5.0,
            },
            "uniform min_ns",
        ),
        (
            Dist::Uniform {
                min_ns: 0.0,
                max_ns: 0.0,
            },
            "uniform max_ns",
        ),
        (
            Dist::Normal {
                mean_ns: 100.0,
                std_ns: -1.0,
            },
            "normal std_ns",
        ),
        (
            Dist::Normal {
                mean_ns: 0.0,
                std_ns: 1.0,
            },
            "normal mean_ns",
        ),
        (
            Dist::LogNormal {
                mean_ns: f64::NAN,
                std_ns: 1.0,
            },
            "log-normal mean_ns",
        ),
        (
            Dist::Pareto {
                scale_ns: 100.0,
                shape: 0.0,
            },
            "pareto shape",
        ),
        (
            Dist::Pareto {
                scale_ns: 0.0,
                shape: 2.0,
            },
            "pareto scale_ns",
        ),
        (
            Dist::Weibull {
                scale_ns: 100.0,
                shape: -2.0,
            },
            "weibull shape",
        ),
        (
            Dist::Exponential {
                mean_ns: f64::INFINITY,
            },
            "exponential mean_ns",
        ),
    ];
    for (dist, parameter) in cases {
        let message = rejected(ScheduleSpec {
            pattern: Pattern::Distribution(dist),
            ..Default::default()
        });
        assert!(
            message.starts_with(&format!("invalid {parameter}")),
            "{message}"
        );
        assert!(message.contains("accepted"), "{message}");
    }
}

#[test]
fn invalid_durations_are_rejected() {
    for (duration, parameter) in [
        (Duration::Packets(0), "duration packets"),
        (Duration::Seconds(0.0), "duration seconds"),
        (Duration::Seconds(-1.0), "duration seconds"),
        (Duration::Seconds(f64::NAN), "duration seconds"),
        (Duration::Seconds(1e12), "duration seconds"),
        (
            Duration::Bursts {
                bursts: 1,
                packets: 0,
                inter_burst_gap_ns: 0,
            },
            "bursts duration packets",
        ),
        (
            Duration::Bursts {
                bursts: u64::MAX,
                packets: 2,
                inter_burst_gap_ns: 0,
            },
            "bursts duration",
        ),
    ] {
        let message = rejected(ScheduleSpec {
            duration,
            ..Default::default()
        });
        assert!(
            message.starts_with(&format!("invalid {parameter}")),
            "{message}"
        );
    }
}

#[test]
fn invalid_pattern_parameters_are_rejected() {
    let replay = |timestamps_ns: Vec<u64>, speed| Pattern::Replay {
        timestamps_ns,
        speed,
    };
    for (pattern, needle) in [
        (
            Pattern::Burst {
                packets: 0,
                intra_gap_ns: None,
                inter_burst_gap_ns: 10,
            },
            "burst packets",
        ),
        (
            Pattern::Burst {
                packets: 3,
                intra_gap_ns: Some(0),
                inter_burst_gap_ns: 0,
            },
            "same instant",
        ),
        (
            Pattern::OnOff {
                on_ns: 0,
                off_ns: 10,
            },
            "on-off on_ns",
        ),
        (
            Pattern::OnOff {
                on_ns: u64::MAX,
                off_ns: 1,
            },
            "on-off on_ns + off_ns",
        ),
        (replay(vec![], 1.0), "replay timestamps_ns"),
        (
            replay(vec![10, 20, 15], 1.0),
            "replay timestamps_ns[2] = 15",
        ),
        (replay(vec![10, 20], 0.0), "replay speed"),
        (replay(vec![10, 20], f64::NAN), "replay speed"),
    ] {
        let message = rejected(ScheduleSpec {
            pattern,
            ..Default::default()
        });
        assert!(message.contains(needle), "{message}");
    }
}

#[test]
fn a_zero_span_trace_cannot_be_repeated() {
    let pattern = Pattern::Replay {
        timestamps_ns: vec![5, 5, 5],
        speed: 1.0,
    };
    let spec = |duration| ScheduleSpec {
        pattern: pattern.clone(),
        duration,
        ..Default::default()
    };
    assert!(rejected(spec(Duration::Seconds(1.0))).contains("spans 0 ns"));
    assert!(rejected(spec(Duration::Packets(4))).contains("spans 0 ns"));
    // Not repeated, so fine: all at the same instant.
    let mut schedule = Schedule::new(spec(Duration::Packets(3))).unwrap();
    let times: Vec<_> = std::iter::from_fn(|| schedule.next(64)).collect();
    assert_eq!(times, [0, 0, 0]);
}

#[test]
fn incompatible_combinations_are_rejected() {
    let steps = || {
        Some(RateProfile::Steps(vec![RateStep {
            at_ns: 10,
            rate: Rate::Pps(10.0),
        }]))
    };
    let bursts = Duration::Bursts {
        bursts: 1,
        packets: 2,
        inter_burst_gap_ns: 0,
    };
    let cases = [
        (
            ScheduleSpec {
                pattern: Pattern::Poisson,
                duration: bursts.clone(),
                ..Default::default()
            },
            "needs the cbr pattern",
        ),
        (
            ScheduleSpec {
                duration: bursts,
                profile: steps(),
                ..Default::default()
            },
            "bursts duration",
        ),
        (
            ScheduleSpec {
                pattern: Pattern::OnOff {
                    on_ns: 5,
                    off_ns: 5,
                },
                profile: steps(),
                ..Default::default()
            },
            "not on-off",
        ),
        (
            ScheduleSpec {
                pattern: Pattern::Distribution(Dist::Exponential { mean_ns: 5.0 }),
                profile: steps(),
                ..Default::default()
            },
            "not distribution",
        ),
        (
            ScheduleSpec {
                profile: Some(RateProfile::Ramp {
                    from: Rate::Pps(1.0),
                    to: Rate::L1BitsPerSec(1e9),
                    over_ns: 10,
                    steps: 2,
                }),
                ..Default::default()
            },
            "from 1pps to 1000000000bps",
        ),
    ];
    for (spec, needle) in cases {
        let message = rejected(spec);
        assert!(message.contains(needle), "{message}");
    }
}

#[test]
fn invalid_profiles_are_rejected() {
    let step = |at_ns, pps| RateStep {
        at_ns,
        rate: Rate::Pps(pps),
    };
    let ramp = |steps| RateProfile::Ramp {
        from: Rate::Pps(1.0),
        to: Rate::Pps(2.0),
        over_ns: 10,
        steps,
    };
    for (profile, needle) in [
        (RateProfile::Steps(vec![]), "rate profile steps"),
        (
            RateProfile::Steps(vec![step(10, 5.0), step(10, 6.0)]),
            "rate profile step 1 at_ns = 10",
        ),
        (
            RateProfile::Steps(vec![step(10, 5.0), step(20, 0.0)]),
            "rate profile step 1 rate",
        ),
        (ramp(0), "ramp steps"),
        (ramp(2_000_000), "ramp steps"),
        (
            RateProfile::Ramp {
                from: Rate::Pps(0.0),
                to: Rate::Pps(2.0),
                over_ns: 10,
                steps: 1,
            },
            "ramp from",
        ),
    ] {
        let message = rejected(ScheduleSpec {
            profile: Some(profile),
            ..Default::default()
        });
        assert!(message.contains(needle), "{message}");
    }
}

#[test]
fn a_ramp_over_no_time_is_its_final_rate() {
    let spec = ScheduleSpec {
        profile: Some(RateProfile::Ramp {
            from: Rate::Pps(1.0),
            to: Rate::Pps(1e6),
            over_ns: 0,
            steps: 10,
        }),
        ..Default::default()
    };
    let mut schedule = Schedule::new(spec).unwrap();
    let times: Vec<_> = (0..3).map(|_| schedule.next(64)).collect();
    assert_eq!(times, [Some(0), Some(1000), Some(2000)]);
}
