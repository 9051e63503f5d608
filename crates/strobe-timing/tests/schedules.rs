//! Exact departure times of the deterministic patterns and durations, in simulated time.

mod common;

use common::{departures, gaps, schedule};
use strobe_timing::{l1_bits, Duration, Pattern, Rate, RateProfile, RateStep, ScheduleSpec};

fn cbr(rate: Rate) -> ScheduleSpec {
    ScheduleSpec {
        rate,
        ..Default::default()
    }
}

/// delay + round(i * 1e9 * den / num) with halves rounded up: CBR at num/den pps.
fn expected_cbr(delay: u64, i: u64, num: u128, den: u128) -> u64 {
    let twice = 2 * u128::from(i) * 1_000_000_000 * den;
    delay + ((twice + num) / (2 * num)) as u64
}

#[test]
fn cbr_pps_departures_are_exact_for_integer_and_fractional_rates() {
    // (rate, the same rate as an exact fraction)
    for (pps, num, den) in [
        (1000.0, 1000, 1),
        (3.0, 3, 1),
        (7.5, 15, 2),
        (0.1, 1, 10),
        (1234.5678, 6_172_839, 5000),
    ] {
        let delay = 1_000;
        let times = departures(
            ScheduleSpec {
                start_delay_ns: delay,
                ..cbr(Rate::Pps(pps))
            },
            64,
            10_000,
        );
        for (i, &t) in times.iter().enumerate() {
            assert_eq!(
                t,
                expected_cbr(delay, i as u64, num, den),
                "{pps} pps, packet {i}"
            );
        }
    }
}

#[test]
fn cbr_does_not_drift_over_ten_million_packets() {
    let mut schedule = schedule(cbr(Rate::Pps(3.0)));
    let mut last = 0;
    for i in 0..10_000_000u64 {
        last = schedule.next(64).unwrap();
        if i % 999_983 == 0 {
            assert_eq!(last, expected_cbr(0, i, 3, 1));
        }
    }
    // Packet 10^7 - 1 leaves at exactly (10^7 - 1) / 3 s, rounded.
    assert_eq!(last, 3_333_333_000_000_000);
    assert_eq!(schedule.next(64), Some(3_333_333_333_333_333));
}

#[test]
fn cbr_bit_rate_gaps_are_each_frames_wire_time() {
    // At 1 Gbps a frame's L1 bits are its nanoseconds.
    let sizes = [64u32, 1518, 570, 9000, 65, 128];
    let mut schedule = schedule(cbr(Rate::L1BitsPerSec(1e9)));
    let mut expected = 0;
    for round in 0..100 {
        for &size in &sizes {
            assert_eq!(
                schedule.next(size),
                Some(expected),
                "round {round}, size {size}"
            );
            expected += l1_bits(size);
        }
    }
    assert_eq!(l1_bits(64), 672);
}

#[test]
fn cbr_bit_rate_follows_the_running_total_of_bits() {
    // At 10 Gbps gaps are fractional (67.2 ns for 64 bytes); times come from the exact total.
    let sizes = [64u32, 1518, 570, 64, 64, 9000, 1500];
    let mut schedule = schedule(cbr(Rate::L1BitsPerSec(1e10)));
    let mut bits: u64 = 0;
    for i in 0..70_000 {
        let size = sizes[i % sizes.len()];
        // round(bits / 10) with halves up
        assert_eq!(schedule.next(size), Some((bits + 5) / 10), "packet {i}");
        bits += l1_bits(size);
    }
}

#[test]
fn cbr_fixed_size_at_line_rate_gives_the_classic_packet_rate() {
    let times = departures(
        ScheduleSpec {
            duration: Duration::Seconds(1.0),
            ..cbr(Rate::L1BitsPerSec(1e10))
        },
        64,
        usize::MAX,
    );
    // 10 Gbps of 64-byte frames is 14 880 952.38 pps.
    assert_eq!(times.len(), 14_880_953);
}

#[test]
fn packets_duration_yields_exactly_n_then_none() {
    let mut schedule = schedule(ScheduleSpec {
        duration: Duration::Packets(5),
        ..Default::default()
    });
    let times: Vec<_> = (0..5).map(|_| schedule.next(64)).collect();
    assert_eq!(
        times,
        [0, 1_000_000, 2_000_000, 3_000_000, 4_000_000].map(Some)
    );
    assert_eq!(schedule.sent(), 5);
    for _ in 0..3 {
        assert_eq!(schedule.next(64), None);
    }
    assert_eq!(schedule.sent(), 5);
}

#[test]
fn seconds_duration_ends_at_the_first_departure_at_or_after_the_end() {
    let spec = |seconds| ScheduleSpec {
        duration: Duration::Seconds(seconds),
        ..Default::default()
    };
    // Departures every 1 ms: 0..=10 ms are before 10.5 ms; one at exactly 10 ms is excluded.
    assert_eq!(departures(spec(0.0105), 64, usize::MAX).len(), 11);
    assert_eq!(departures(spec(0.010), 64, usize::MAX).len(), 10);
    assert_eq!(departures(spec(0.010_000_001), 64, usize::MAX).len(), 11);
}

#[test]
fn start_delay_shifts_every_departure_and_the_seconds_end() {
    let delay = 5_000_000_000;
    let times = departures(
        ScheduleSpec {
            start_delay_ns: delay,
            duration: Duration::Seconds(0.0035),
            ..Default::default()
        },
        64,
        usize::MAX,
    );
    assert_eq!(
        times,
        [
            delay,
            delay + 1_000_000,
            delay + 2_000_000,
            delay + 3_000_000
        ]
    );
}

#[test]
fn burst_pattern_with_fixed_intra_gap() {
    let spec = ScheduleSpec {
        pattern: Pattern::Burst {
            packets: 4,
            intra_gap_ns: Some(100),
            inter_burst_gap_ns: 1000,
        },
        duration: Duration::Packets(10),
        ..Default::default()
    };
    // Slot of a burst's last packet ends 100 ns after it; the next burst starts 1000 ns later.
    assert_eq!(
        departures(spec, 64, usize::MAX),
        [0, 100, 200, 300, 1400, 1500, 1600, 1700, 2800, 2900]
    );
}

#[test]
fn burst_pattern_back_to_back_at_the_rate() {
    let spec = ScheduleSpec {
        rate: Rate::L1BitsPerSec(1e9),
        pattern: Pattern::Burst {
            packets: 3,
            intra_gap_ns: None,
            inter_burst_gap_ns: 10_000,
        },
        ..Default::default()
    };
    // 64-byte frames take 672 ns at 1 Gbps; a burst's slots end at 3 * 672.
    let burst = 3 * 672 + 10_000;
    assert_eq!(
        departures(spec, 64, 9),
        [
            0,
            672,
            1344,
            burst,
            burst + 672,
            burst + 1344,
            2 * burst,
            2 * burst + 672,
            2 * burst + 1344
        ]
    );
}

#[test]
fn otg_bursts_duration_has_its_exact_shape_and_count() {
    let spec = ScheduleSpec {
        rate: Rate::Pps(1e6),
        duration: Duration::Bursts {
            bursts: 3,
            packets: 5,
            inter_burst_gap_ns: 10_000,
        },
        ..Default::default()
    };
    let times = departures(spec, 64, usize::MAX);
    assert_eq!(times.len(), 15);
    for (burst, chunk) in times.chunks(5).enumerate() {
        let start = burst as u64 * 15_000; // 5 slots of 1000 ns + 10 000 ns gap
        assert_eq!(
            chunk,
            [0, 1000, 2000, 3000, 4000].map(|t| start + t),
            "burst {burst}"
        );
    }
    let gaps = gaps(&times);
    assert_eq!(gaps.iter().filter(|&&g| g == 11_000.0).count(), 2);
}

#[test]
fn otg_bursts_zero_means_forever() {
    let spec = ScheduleSpec {
        rate: Rate::Pps(1e6),
        duration: Duration::Bursts {
            bursts: 0,
            packets: 2,
            inter_burst_gap_ns: 0,
        },
        ..Default::default()
    };
    let times = departures(spec, 64, 100_000);
    assert_eq!(times.len(), 100_000);
    // No inter-burst gap: plain 1 Mpps.
    assert_eq!(times[99_999], 99_999_000);
}

#[test]
fn on_off_sends_at_the_rate_only_during_on_periods() {
    let spec = ScheduleSpec {
        rate: Rate::Pps(1e6),
        pattern: Pattern::OnOff {
            on_ns: 3500,
            off_ns: 6500,
        },
        ..Default::default()
    };
    let times = departures(spec.clone(), 64, 12);
    let period = |k: u64| [0, 1000, 2000, 3000].map(|t| k * 10_000 + t);
    assert_eq!(times, [period(0), period(1), period(2)].concat());
    assert_eq!(schedule(spec).nominal_pps(64.0), Some(400_000.0));
}

#[test]
fn on_off_period_shorter_than_a_gap_sends_one_packet_per_period() {
    let spec = ScheduleSpec {
        rate: Rate::Pps(1000.0),
        pattern: Pattern::OnOff {
            on_ns: 10,
            off_ns: 90,
        },
        ..Default::default()
    };
    assert_eq!(departures(spec, 64, 4), [0, 100, 200, 300]);
}

#[test]
fn rate_steps_hold_each_segments_rate() {
    let spec = ScheduleSpec {
        rate: Rate::Pps(1000.0),
        profile: Some(RateProfile::Steps(vec![
            RateStep {
                at_ns: 1_000_000_000,
                rate: Rate::Pps(4000.0),
            },
            RateStep {
                at_ns: 2_000_000_000,
                rate: Rate::Pps(500.0),
            },
        ])),
        duration: Duration::Seconds(3.0),
        ..Default::default()
    };
    let times = departures(spec, 64, usize::MAX);
    let segment = |from: u64, to: u64| -> Vec<u64> {
        times
            .iter()
            .copied()
            .filter(|&t| t >= from && t < to)
            .collect()
    };
    let expected = [
        (0, 1_000_000),
        (1_000_000_000, 250_000),
        (2_000_000_000, 2_000_000),
    ];
    for (index, (start, gap)) in expected.into_iter().enumerate() {
        let inside = segment(start, start + 1_000_000_000);
        assert_eq!(inside.len() as u64, 1_000_000_000 / gap, "segment {index}");
        for (k, &t) in inside.iter().enumerate() {
            assert_eq!(t, start + k as u64 * gap, "segment {index}, packet {k}");
        }
    }
    assert_eq!(times.len(), 1000 + 4000 + 500);
}

#[test]
fn a_rate_change_mid_gap_rescales_what_is_left_of_it() {
    let spec = ScheduleSpec {
        rate: Rate::Pps(3.0),
        profile: Some(RateProfile::Steps(vec![RateStep {
            at_ns: 500_000_000,
            rate: Rate::Pps(6.0),
        }])),
        ..Default::default()
    };
    // The gap from 333 333 333 is half done at 0.5 s; its other half at 6 pps takes 1/12 s.
    assert_eq!(
        departures(spec, 64, 5),
        [0, 333_333_333, 583_333_333, 750_000_000, 916_666_667]
    );
}

#[test]
fn steps_may_switch_between_packet_and_bit_rates() {
    let spec = ScheduleSpec {
        rate: Rate::Pps(1e6),
        profile: Some(RateProfile::Steps(vec![RateStep {
            at_ns: 10_000,
            rate: Rate::L1BitsPerSec(1e9),
        }])),
        ..Default::default()
    };
    let times = departures(spec, 64, 14);
    assert_eq!(
        times[..10],
        [0, 1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000]
    );
    assert_eq!(times[10..], [10_000, 10_672, 11_344, 12_016]);
}

#[test]
fn ramp_steps_evenly_then_holds_the_final_rate() {
    let spec = ScheduleSpec {
        profile: Some(RateProfile::Ramp {
            from: Rate::Pps(1000.0),
            to: Rate::Pps(2000.0),
            over_ns: 1_000_000_000,
            steps: 2,
        }),
        duration: Duration::Seconds(2.0),
        ..Default::default()
    };
    let mut schedule = schedule(spec);
    let times: Vec<u64> = std::iter::from_fn(|| schedule.next(64)).collect();
    let count = |from: u64, to: u64| times.iter().filter(|&&t| t >= from && t < to).count();
    assert_eq!(count(0, 500_000_000), 500); // 1000 pps
    assert_eq!(count(500_000_000, 1_000_000_000), 750); // 1500 pps
    assert_eq!(count(1_000_000_000, 2_000_000_000), 2000); // then 2000 pps
    assert!(times.contains(&500_000_000) && times.contains(&1_000_000_000));
    assert_eq!(times[501] - times[500], 666_667);
    assert!(times
        .windows(2)
        .rev()
        .take(100)
        .all(|w| w[1] - w[0] == 500_000));
    assert_eq!(schedule.nominal_pps(64.0), Some(2000.0));
}

#[test]
fn replay_keeps_the_traces_gaps_divided_by_speed() {
    let trace = vec![1000, 1500, 3000, 3100];
    let spec = |duration| ScheduleSpec {
        pattern: Pattern::Replay {
            timestamps_ns: trace.clone(),
            speed: 2.0,
        },
        duration,
        start_delay_ns: 7,
        ..Default::default()
    };
    // Without a duration asking for more, the replay ends with the trace.
    assert_eq!(
        departures(spec(Duration::Continuous), 64, 100),
        [7, 257, 1007, 1057]
    );
    // Asking for more repeats it: one pass is the 2100 ns span plus the 700 ns mean gap.
    assert_eq!(
        departures(spec(Duration::Packets(9)), 64, 100),
        [0, 250, 1000, 1050, 1400, 1650, 2400, 2450, 2800].map(|t| t + 7)
    );
    let at_original_speed = ScheduleSpec {
        pattern: Pattern::Replay {
            timestamps_ns: trace.clone(),
            speed: 1.0,
        },
        ..Default::default()
    };
    assert_eq!(departures(at_original_speed, 64, 100), [0, 500, 2000, 2100]);
}

#[test]
fn looping_replay_stays_monotonic_and_ends_with_the_seconds_duration() {
    // Uneven gaps and a speed that makes each pass a fraction of a nanosecond off.
    let spec = ScheduleSpec {
        pattern: Pattern::Replay {
            timestamps_ns: vec![0, 1, 1, 2, 10, 10, 13],
            speed: 3.0,
        },
        duration: Duration::Seconds(0.0001),
        ..Default::default()
    };
    let times = departures(spec, 64, usize::MAX);
    assert!(times.windows(2).all(|w| w[0] <= w[1]));
    assert!(*times.last().unwrap() < 100_000);
    // 7 packets per pass of (13 + 13/6) / 3 ns.
    let passes = 100_000.0 / ((13.0 + 13.0 / 6.0) / 3.0);
    assert!(
        (times.len() as f64 - 7.0 * passes).abs() < 8.0,
        "{} packets",
        times.len()
    );
}

#[test]
fn nominal_rates() {
    let nominal = |spec: ScheduleSpec, len: f64| schedule(spec).nominal_pps(len);
    assert_eq!(nominal(cbr(Rate::Pps(1000.0)), 64.0), Some(1000.0));
    let line_rate = nominal(cbr(Rate::L1BitsPerSec(1e10)), 64.0).unwrap();
    assert!((line_rate - 1e10 / 672.0).abs() < 1e-6);
    let bursts = ScheduleSpec {
        rate: Rate::Pps(1e6),
        duration: Duration::Bursts {
            bursts: 0,
            packets: 5,
            inter_burst_gap_ns: 5000,
        },
        ..Default::default()
    };
    assert_eq!(nominal(bursts, 64.0), Some(500_000.0));
    let pattern = |pattern| ScheduleSpec {
        pattern,
        ..Default::default()
    };
    assert_eq!(
        nominal(
            pattern(Pattern::Distribution(strobe_timing::Dist::Exponential {
                mean_ns: 1e5
            })),
            64.0
        ),
        Some(10_000.0)
    );
    assert_eq!(
        nominal(
            pattern(Pattern::Distribution(strobe_timing::Dist::Pareto {
                scale_ns: 1e3,
                shape: 1.0
            })),
            64.0
        ),
        None
    );
    assert_eq!(
        nominal(
            pattern(Pattern::Replay {
                timestamps_ns: vec![0, 5],
                speed: 1.0
            }),
            64.0
        ),
        None
    );
}

/// Every periodic schedule, added up as a kernel program keeps it (whole nanoseconds plus a
/// 2^-32 ns fraction), departs within a nanosecond of the exact schedule, and as many times.
#[test]
fn periodic_schedules_added_up_stay_within_a_nanosecond_of_the_exact_ones() {
    let specs = [
        (cbr(Rate::Pps(1_000_000.0)), 64, Duration::Packets(200_000)),
        (cbr(Rate::Pps(333_333.0)), 64, Duration::Seconds(0.5)),
        (cbr(Rate::Pps(1234.5678)), 128, Duration::Packets(10_000)),
        (cbr(Rate::L1BitsPerSec(50e6)), 1518, Duration::Seconds(0.2)),
        (
            ScheduleSpec {
                rate: Rate::Pps(3_000_000.0),
                pattern: Pattern::Burst {
                    packets: 32,
                    intra_gap_ns: None,
                    inter_burst_gap_ns: 10_000,
                },
                ..Default::default()
            },
            64,
            Duration::Packets(100_000),
        ),
        (
            cbr(Rate::Pps(1_488_095.0)),
            64,
            Duration::Bursts {
                bursts: 100,
                packets: 50,
                inter_burst_gap_ns: 1_000_000,
            },
        ),
    ];
    for (spec, frame_len, duration) in specs {
        let spec = ScheduleSpec { duration, ..spec };
        let exact = departures(spec.clone(), frame_len, usize::MAX);
        let periodic = spec.periodic(frame_len).unwrap();
        assert_eq!(periodic.packets, Some(exact.len() as u64), "{spec:?}");
        let added = periodic.departures(exact.len());
        let worst = exact
            .iter()
            .zip(&added)
            .map(|(&e, &a)| e.abs_diff(a))
            .max()
            .unwrap();
        assert!(worst <= 1, "{spec:?}: {worst} ns apart");
    }
}

#[test]
fn random_and_delayed_schedules_are_not_periodic() {
    let poisson = ScheduleSpec {
        pattern: Pattern::Poisson,
        ..Default::default()
    };
    assert_eq!(poisson.periodic(64), Err("Poisson departures".into()));
    let delayed = ScheduleSpec {
        start_delay_ns: 5,
        ..Default::default()
    };
    assert!(delayed.periodic(64).is_err());
    let continuous = ScheduleSpec::default().periodic(64).unwrap();
    assert_eq!((continuous.gap_ns, continuous.packets), (1_000_000, None));
}

#[test]
fn the_last_departure_is_where_the_schedule_puts_it() {
    let cases = [
        (cbr(Rate::Pps(3000.0)), Duration::Packets(1000)),
        (cbr(Rate::Pps(1_172_973.0)), Duration::Seconds(0.01)),
        (cbr(Rate::L1BitsPerSec(1e9)), Duration::Packets(777)),
        (
            cbr(Rate::Pps(1e6)),
            Duration::Bursts {
                bursts: 5,
                packets: 7,
                inter_burst_gap_ns: 3_333,
            },
        ),
    ];
    for (spec, duration) in cases {
        let spec = ScheduleSpec { duration, ..spec };
        let exact = departures(spec.clone(), 128, usize::MAX);
        let last = spec.last_departure_ns(128).unwrap();
        assert!(
            last.abs_diff(*exact.last().unwrap()) <= 1,
            "{spec:?}: {last} vs {exact:?}"
        );
    }
    // Random departures run for a time end before it, wherever they fall.
    let poisson = ScheduleSpec {
        pattern: Pattern::Poisson,
        duration: Duration::Seconds(2.0),
        start_delay_ns: 7,
        ..Default::default()
    };
    assert_eq!(poisson.last_departure_ns(64), Some(2_000_000_007));
    // Until stopped, or a count of random gaps: no fixed end.
    assert_eq!(cbr(Rate::Pps(1e3)).last_departure_ns(64), None);
    let counted = ScheduleSpec {
        duration: Duration::Packets(10),
        ..poisson
    };
    assert_eq!(counted.last_departure_ns(64), None);
}

#[test]
fn a_live_rate_change_rescales_the_gap_after_the_last_departure_handed_out() {
    let mut s = strobe_timing::Schedule::new(ScheduleSpec {
        start_delay_ns: 500,
        ..cbr(Rate::Pps(1000.0))
    })
    .unwrap();
    assert!(s.takes_live_rate());
    let first: Vec<u64> = (0..3).map(|_| s.next(64).unwrap()).collect();
    assert_eq!(first, [500, 1_000_500, 2_000_500]);
    // Changed after the third departure was handed out: the gap after it is already the
    // new one.
    s.change_rate_live(Rate::Pps(2000.0)).unwrap();
    let then: Vec<u64> = (0..3).map(|_| s.next(64).unwrap()).collect();
    assert_eq!(then, [2_500_500, 3_000_500, 3_500_500]);
    // A bit rate too: 1 Mbit/s of 64-byte frames is one every 672 ns·1000.
    s.change_rate_live(Rate::L1BitsPerSec(1e6)).unwrap();
    assert_eq!(s.next(64), Some(3_500_500 + l1_bits(64) * 1000));
    // Out of range: refused, the schedule unchanged.
    assert!(s.change_rate_live(Rate::Pps(-1.0)).is_err());
}

#[test]
fn schedules_without_one_rate_refuse_live_changes() {
    let mut bursts = strobe_timing::Schedule::new(ScheduleSpec {
        pattern: Pattern::Burst {
            packets: 4,
            intra_gap_ns: None,
            inter_burst_gap_ns: 1000,
        },
        ..cbr(Rate::Pps(1000.0))
    })
    .unwrap();
    assert!(!bursts.takes_live_rate());
    assert!(bursts.change_rate_live(Rate::Pps(10.0)).is_err());
    let profiled = strobe_timing::Schedule::new(ScheduleSpec {
        profile: Some(RateProfile::Steps(vec![RateStep {
            at_ns: 1000,
            rate: Rate::Pps(10.0),
        }])),
        ..cbr(Rate::Pps(1000.0))
    })
    .unwrap();
    assert!(!profiled.takes_live_rate());
}
