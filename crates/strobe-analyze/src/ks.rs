//! One-sample Kolmogorov-Smirnov test.
//!
//! Written here because no well-kept Rust crate offers a KS test with the
//! Kolmogorov distribution tail: `statrs` has distributions but no test, and the
//! small KS crates are unmaintained. The test is a few dozen lines.

use std::f64::consts::PI;

/// KS statistic D = sup |F_n(x) - F(x)| of the `sorted` sample against `cdf`.
///
/// `cdf_below(x)` is the null CDF just below `x`: `cdf` itself for a continuous
/// distribution, the previous grid step for a discrete one. Ties are handled:
/// at a run of equal values the empirical CDF jumps from the rank before the
/// first to the rank of the last, and both ends are compared.
pub fn statistic(sorted: &[u64], cdf: impl Fn(f64) -> f64, cdf_below: impl Fn(f64) -> f64) -> f64 {
    let n = sorted.len() as f64;
    sorted
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            let x = x as f64;
            let below = i as f64 / n;
            let at_or_below = (i + 1) as f64 / n;
            (at_or_below - cdf(x)).max(cdf_below(x) - below)
        })
        .fold(0.0, f64::max)
}

/// Tail of the Kolmogorov distribution, Q_KS(λ) = 2 Σ_{k≥1} (-1)^{k-1} e^{-2k²λ²}.
///
/// That alternating series converges slowly for small λ, so below λ = 1.18 the
/// equivalent Jacobi-theta form of the CDF is used instead:
/// 1 - Q_KS(λ) = √(2π)/λ Σ_{k≥1} e^{-(2k-1)²π²/(8λ²)}.
pub fn kolmogorov_tail(lambda: f64) -> f64 {
    const TERMS: u32 = 100;
    if lambda.is_nan() || lambda <= 0.0 {
        return 1.0;
    }
    let q = if lambda < 1.18 {
        let mut cdf_sum = 0.0;
        for k in 1..=TERMS {
            let odd = f64::from(2 * k - 1);
            let term = (-(odd * odd) * PI * PI / (8.0 * lambda * lambda)).exp();
            cdf_sum += term;
            if term <= cdf_sum * f64::EPSILON {
                break;
            }
        }
        1.0 - (2.0 * PI).sqrt() / lambda * cdf_sum
    } else {
        let mut tail = 0.0;
        for k in 1..=TERMS {
            let k = f64::from(k);
            let term = (-2.0 * k * k * lambda * lambda).exp();
            tail += if k % 2.0 == 1.0 { term } else { -term };
            if term <= tail.abs() * f64::EPSILON {
                break;
            }
        }
        2.0 * tail
    };
    q.clamp(0.0, 1.0)
}

/// Asymptotic p-value of statistic `d` for a sample of size `n`, with the
/// small-sample correction λ = (√n + 0.12 + 0.11/√n)·D (Stephens 1970).
pub fn p_value(d: f64, n: usize) -> f64 {
    let sqrt_n = (n as f64).sqrt();
    kolmogorov_tail((sqrt_n + 0.12 + 0.11 / sqrt_n) * d)
}

/// CDF of the gaps between timestamps truncated to a grid of `resolution_ns`
/// when the true gaps are exponential with `rate_per_ns`.
///
/// With the first arrival at a uniform phase u within its grid cell, the
/// observed gap is r·floor(u + X/r), so P(gap <= x) for a grid point x is the
/// mean of the exponential CDF over [x, x + r]:
/// 1 - e^{-λx}·(1 - e^{-λr})/(λr). Testing against this instead of the
/// continuous CDF keeps µs captures of true Poisson traffic from being
/// rejected merely for their ties; as r -> 0 it tends to 1 - e^{-λx}.
pub fn quantized_exponential_cdf(rate_per_ns: f64, resolution_ns: u64) -> impl Fn(f64) -> f64 {
    let cell = rate_per_ns * resolution_ns as f64;
    let smear = -(-cell).exp_m1() / cell;
    move |x| {
        if x < 0.0 {
            0.0
        } else {
            1.0 - (-rate_per_ns * x).exp() * smear
        }
    }
}

/// KS statistic of integer gaps on a `resolution_ns` grid against Exp(`rate_per_ns`).
pub fn exponential_statistic(sorted: &[u64], rate_per_ns: f64, resolution_ns: u64) -> f64 {
    let cdf = quantized_exponential_cdf(rate_per_ns, resolution_ns);
    let step = resolution_ns as f64;
    statistic(sorted, &cdf, |x| cdf(x - step))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistic_matches_hand_computation() {
        // Sample {1, 4, 7} against U(0, 10): the largest gap is 1 - 0.7 at x = 7.
        let uniform = |x: f64| x / 10.0;
        let d = statistic(&[1, 4, 7], uniform, uniform);
        assert!((d - 0.3).abs() < 1e-12, "{d}");
    }

    #[test]
    fn statistic_handles_ties() {
        // All mass at 5 while F(5) = 0.5: the empirical CDF jumps 0 -> 1 there.
        let uniform = |x: f64| x / 10.0;
        let d = statistic(&[5, 5, 5, 5], uniform, uniform);
        assert!((d - 0.5).abs() < 1e-12, "{d}");
    }

    #[test]
    fn statistic_checks_the_left_limit_of_a_discrete_null() {
        // Null: fair coin on {0, 1}. Sample all ones: just below 1 the null
        // CDF is 0.5 while the empirical one is 0.
        let coin = |x: f64| {
            if x < 0.0 {
                0.0
            } else if x < 1.0 {
                0.5
            } else {
                1.0
            }
        };
        let d = statistic(&[1, 1, 1], coin, |x| coin(x - 1.0));
        assert!((d - 0.5).abs() < 1e-12, "{d}");
        let d = statistic(&[0, 1], coin, |x| coin(x - 1.0));
        assert!(d.abs() < 1e-12, "{d}");
    }

    #[test]
    fn tail_matches_known_values() {
        // Reference values of the Kolmogorov distribution.
        for (lambda, q) in [
            (0.5, 0.963_945),
            (1.0, 0.269_999),
            (1.358, 0.050_027),
            (1.628, 0.009_976),
            (2.0, 0.000_670_9),
        ] {
            let got = kolmogorov_tail(lambda);
            assert!((got - q).abs() < 2e-6, "Q({lambda}) = {got}, expected {q}");
        }
        assert_eq!(kolmogorov_tail(0.0), 1.0);
        assert_eq!(kolmogorov_tail(0.05), 1.0);
        assert!(kolmogorov_tail(10.0) < 1e-80);
    }

    #[test]
    fn both_series_agree_at_the_switch_point() {
        let below = kolmogorov_tail(1.18 - 1e-12);
        let above = kolmogorov_tail(1.18);
        assert!((below - above).abs() < 1e-9, "{below} vs {above}");
    }

    #[test]
    fn quantized_exponential_cdf_is_correct() {
        // One grid cell per mean gap: P(gap = 0) = e^{-1} (see the derivation).
        let cdf = quantized_exponential_cdf(1.0 / 1000.0, 1000);
        assert!((cdf(0.0) - (-1.0f64).exp()).abs() < 1e-15);
        assert_eq!(cdf(-1000.0), 0.0);
        // P(gap <= r) = 1 - e^{-1} (1 - e^{-1}).
        let expected = 1.0 - (-1.0f64).exp() * (1.0 - (-1.0f64).exp());
        assert!((cdf(1000.0) - expected).abs() < 1e-15);
        // A fine grid approaches the continuous CDF.
        let fine = quantized_exponential_cdf(1.0 / 1e6, 1);
        let continuous = 1.0 - (-1.0f64).exp();
        assert!((fine(1e6) - continuous).abs() < 1e-6);
    }
}
