//! Random patterns checked against theory over many seeded draws (deterministic).

mod common;

use common::{assert_close, departures, gaps, ks_p_value, ks_statistic, mean_and_variance};
use strobe_timing::{
    Dist, Duration, EmpiricalTable, Pattern, Rate, RateProfile, RateStep, ScheduleSpec,
};

const ALPHA: f64 = 0.01;

fn poisson(rate: Rate, seed: u64) -> ScheduleSpec {
    ScheduleSpec {
        rate,
        pattern: Pattern::Poisson,
        seed,
        ..Default::default()
    }
}

fn exponential_cdf(mean_ns: f64) -> impl Fn(f64) -> f64 {
    move |x| 1.0 - (-x / mean_ns).exp()
}

#[test]
fn ks_p_value_matches_tabulated_critical_values() {
    // The Kolmogorov distribution's 1 % and 5 % points are about 1.628 and 1.358.
    let n = 1_000_000;
    let root_n = (n as f64).sqrt();
    assert!((ks_p_value(1.6276 / root_n, n) - 0.01).abs() < 5e-4);
    assert!((ks_p_value(1.3581 / root_n, n) - 0.05).abs() < 5e-4);
    assert_eq!(ks_p_value(0.0, n), 1.0);
}

#[test]
fn poisson_gaps_are_exponential_at_the_target_rate() {
    let times = departures(poisson(Rate::Pps(1000.0), 42), 64, 1_000_001);
    let gaps = gaps(&times);
    assert_eq!(gaps.len(), 1_000_000);
    let achieved_pps = gaps.len() as f64 * 1e9 / (times[times.len() - 1] - times[0]) as f64;
    assert_close("poisson rate", achieved_pps, 1000.0, 0.01);

    let d = ks_statistic(&gaps, exponential_cdf(1e6));
    let p = ks_p_value(d, gaps.len());
    assert!(p > ALPHA, "KS rejects exponential gaps: D = {d}, p = {p}");
}

#[test]
fn ks_test_rejects_gaps_that_are_not_exponential() {
    let n = 100_000;
    let cbr = departures(ScheduleSpec::default(), 64, n + 1);
    let d = ks_statistic(&gaps(&cbr), exponential_cdf(1e6));
    assert!(ks_p_value(d, n) < ALPHA, "KS accepts CBR gaps: D = {d}");

    // Same mean as the exponential, different shape.
    let uniform = departures(
        ScheduleSpec {
            pattern: Pattern::Distribution(Dist::Uniform {
                min_ns: 0.0,
                max_ns: 2e6,
            }),
            ..Default::default()
        },
        64,
        n + 1,
    );
    let d = ks_statistic(&gaps(&uniform), exponential_cdf(1e6));
    assert!(ks_p_value(d, n) < ALPHA, "KS accepts uniform gaps: D = {d}");

    // Exponential, but at the wrong rate.
    let fast = departures(poisson(Rate::Pps(1050.0), 1), 64, n + 1);
    let d = ks_statistic(&gaps(&fast), exponential_cdf(1e6));
    assert!(
        ks_p_value(d, n) < ALPHA,
        "KS accepts a 5 % faster rate: D = {d}"
    );
}

#[test]
fn poisson_at_a_bit_rate_scales_with_frame_size() {
    // 1 Gbps of 1500-byte frames: mean gap (1500 + 20) * 8 ns.
    let times = departures(poisson(Rate::L1BitsPerSec(1e9), 3), 1500, 200_001);
    let gaps = gaps(&times);
    let (mean, _) = mean_and_variance(&gaps);
    assert_close("mean gap", mean, 12_160.0, 0.01);
    let d = ks_statistic(&gaps, exponential_cdf(12_160.0));
    assert!(ks_p_value(d, gaps.len()) > ALPHA, "D = {d}");
}

#[test]
fn same_seed_same_sequence_and_different_seeds_differ() {
    let a = departures(poisson(Rate::Pps(1e5), 7), 64, 1000);
    let b = departures(poisson(Rate::Pps(1e5), 7), 64, 1000);
    let c = departures(poisson(Rate::Pps(1e5), 8), 64, 1000);
    assert_eq!(a, b);
    assert_ne!(a, c);

    let dist = |seed| ScheduleSpec {
        pattern: Pattern::Distribution(Dist::Normal {
            mean_ns: 1e4,
            std_ns: 1e3,
        }),
        seed,
        ..Default::default()
    };
    assert_eq!(departures(dist(1), 64, 1000), departures(dist(1), 64, 1000));
    assert_ne!(departures(dist(1), 64, 1000), departures(dist(2), 64, 1000));
}

fn dist_gaps(dist: Dist, count: usize) -> Vec<f64> {
    let spec = ScheduleSpec {
        pattern: Pattern::Distribution(dist),
        seed: 2024,
        ..Default::default()
    };
    gaps(&departures(spec, 64, count + 1))
}

#[test]
fn distributions_have_their_theoretical_mean_and_variance() {
    let pi = std::f64::consts::PI;
    // (distribution, mean, variance, variance tolerance)
    let cases = [
        (
            Dist::Uniform {
                min_ns: 1e4,
                max_ns: 3e4,
            },
            2e4,
            4e8 / 12.0,
            0.03,
        ),
        (
            Dist::Normal {
                mean_ns: 1e5,
                std_ns: 1e4,
            },
            1e5,
            1e8,
            0.03,
        ),
        (
            Dist::LogNormal {
                mean_ns: 1e5,
                std_ns: 5e4,
            },
            1e5,
            2.5e9,
            0.05,
        ),
        // Variance scale^2 * a / ((a - 1)^2 (a - 2)); shape 5 keeps the 4th moment finite.
        (
            Dist::Pareto {
                scale_ns: 1e4,
                shape: 5.0,
            },
            1.25e4,
            1e8 * 5.0 / 48.0,
            0.1,
        ),
        (
            Dist::Weibull {
                scale_ns: 1e5,
                shape: 2.0,
            },
            1e5 * pi.sqrt() / 2.0,
            1e10 * (1.0 - pi / 4.0),
            0.03,
        ),
        (Dist::Exponential { mean_ns: 1e5 }, 1e5, 1e10, 0.03),
    ];
    for (dist, mean, variance, variance_tolerance) in cases {
        let (sample_mean, sample_variance) = mean_and_variance(&dist_gaps(dist.clone(), 200_000));
        assert_close(&format!("{dist:?} mean"), sample_mean, mean, 0.01);
        assert_close(
            &format!("{dist:?} variance"),
            sample_variance,
            variance,
            variance_tolerance,
        );
        assert_close(
            &format!("{dist:?} mean_ns()"),
            dist.mean_ns().unwrap(),
            mean,
            1e-12,
        );
    }
}

#[test]
fn normal_draws_below_zero_are_clamped_to_zero() {
    let gaps = dist_gaps(
        Dist::Normal {
            mean_ns: 100.0,
            std_ns: 1000.0,
        },
        100_000,
    );
    let zeros = gaps.iter().filter(|&&g| g == 0.0).count() as f64 / gaps.len() as f64;
    // P(X < 0) for N(100, 1000) is about 0.46; rounding adds draws below 0.5 ns.
    assert!((0.44..0.48).contains(&zeros), "share of 0 gaps {zeros}");
}

#[test]
fn empirical_table_reproduces_its_weights() {
    let table = EmpiricalTable::from_csv("gap_ns,weight\n100,1\n200,3\n# rare\n300,6\n").unwrap();
    let gaps = dist_gaps(Dist::Empirical(table), 100_000);
    for (value, weight) in [(100.0, 0.1), (200.0, 0.3), (300.0, 0.6)] {
        let share = gaps.iter().filter(|&&g| g == value).count() as f64 / gaps.len() as f64;
        assert!(
            (share - weight).abs() < 0.01,
            "gap {value}: share {share}, weight {weight}"
        );
    }
    assert!(gaps.iter().all(|g| [100.0, 200.0, 300.0].contains(g)));
}

#[test]
fn empirical_rows_of_weight_zero_are_never_drawn() {
    let table =
        EmpiricalTable::new([(50.0, 0.0), (100.0, 1.0), (150.0, 0.0), (200.0, 1.0)]).unwrap();
    let gaps = dist_gaps(Dist::Empirical(table), 20_000);
    assert!(gaps.iter().all(|&g| g == 100.0 || g == 200.0));
    assert!(gaps.contains(&100.0) && gaps.contains(&200.0));
}

#[test]
fn poisson_follows_rate_steps() {
    let spec = ScheduleSpec {
        rate: Rate::Pps(1000.0),
        pattern: Pattern::Poisson,
        profile: Some(RateProfile::Steps(vec![RateStep {
            at_ns: 10_000_000_000,
            rate: Rate::Pps(10_000.0),
        }])),
        duration: Duration::Seconds(20.0),
        seed: 5,
        ..Default::default()
    };
    let times = departures(spec, 64, usize::MAX);
    let slow = times.iter().filter(|&&t| t < 10_000_000_000).count() as f64;
    let fast = times.len() as f64 - slow;
    assert_close("packets in the 1000 pps segment", slow, 10_000.0, 0.03);
    assert_close("packets in the 10000 pps segment", fast, 100_000.0, 0.01);
}
