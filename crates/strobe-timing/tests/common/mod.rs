//! Helpers shared by the integration tests: running schedules and a Kolmogorov-Smirnov test.
#![allow(dead_code)] // each test binary uses a different subset

use strobe_timing::{Schedule, ScheduleSpec};

pub fn schedule(spec: ScheduleSpec) -> Schedule {
    match Schedule::new(spec.clone()) {
        Ok(schedule) => schedule,
        Err(e) => panic!("{spec:?} rejected: {e}"),
    }
}

/// Up to `limit` departures of frames of `frame_len` bytes.
pub fn departures(spec: ScheduleSpec, frame_len: u32, limit: usize) -> Vec<u64> {
    let mut schedule = schedule(spec);
    std::iter::from_fn(|| schedule.next(frame_len))
        .take(limit)
        .collect()
}

pub fn gaps(times: &[u64]) -> Vec<f64> {
    times.windows(2).map(|w| (w[1] - w[0]) as f64).collect()
}

pub fn mean_and_variance(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, variance)
}

pub fn assert_close(what: &str, actual: f64, expected: f64, relative: f64) {
    let error = (actual - expected).abs() / expected.abs();
    assert!(
        error <= relative,
        "{what}: {actual} is {:.3}% from {expected} (allowed {:.3}%)",
        error * 100.0,
        relative * 100.0
    );
}

/// The Kolmogorov-Smirnov statistic D of `samples` against the continuous CDF `cdf`.
pub fn ks_statistic(samples: &[f64], cdf: impl Fn(f64) -> f64) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len() as f64;
    sorted
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            let f = cdf(x);
            let above = (i + 1) as f64 / n - f;
            let below = f - i as f64 / n;
            above.max(below)
        })
        .fold(0.0, f64::max)
}

/// Asymptotic p-value of D for n samples: the Kolmogorov distribution's tail
/// 2 * sum_{j>=1} (-1)^(j-1) exp(-2 j^2 t^2), at t = D * (sqrt(n) + 0.12 + 0.11 / sqrt(n))
/// (Stephens' small-sample correction).
pub fn ks_p_value(d: f64, n: usize) -> f64 {
    let root_n = (n as f64).sqrt();
    let t = d * (root_n + 0.12 + 0.11 / root_n);
    if t < 0.2 {
        return 1.0; // the series converges slowly here and the tail is 1 to 10 digits
    }
    let mut sum = 0.0;
    for j in 1..=100 {
        let j = j as f64;
        let term = (-2.0 * j * j * t * t).exp();
        sum += if j as u64 % 2 == 1 { term } else { -term };
        if term < 1e-16 {
            break;
        }
    }
    (2.0 * sum).clamp(0.0, 1.0)
}
