//! Gap distributions for [`crate::Pattern::Distribution`].

use rand::Rng;
use rand_distr::{Distribution, Exp1, LogNormal, Normal, Pareto, Weibull};

use crate::error::{invalid, TimingError};

/// A distribution of inter-departure gaps, in nanoseconds.
#[derive(Clone, Debug, PartialEq)]
pub enum Dist {
    /// Uniform on `[min_ns, max_ns]`.
    Uniform { min_ns: f64, max_ns: f64 },
    /// Normal; negative draws are clamped to 0 (a packet right after the previous one), which
    /// raises the achieved mean slightly when `std_ns` is not small against `mean_ns`.
    Normal { mean_ns: f64, std_ns: f64 },
    /// Log-normal whose gaps themselves have this mean and standard deviation.
    LogNormal { mean_ns: f64, std_ns: f64 },
    /// Pareto (type I): gaps of at least `scale_ns`, tail index `shape`.
    Pareto { scale_ns: f64, shape: f64 },
    /// Weibull with scale `scale_ns` and shape `shape`.
    Weibull { scale_ns: f64, shape: f64 },
    /// Exponential with mean `mean_ns` (the gaps of a Poisson process).
    Exponential { mean_ns: f64 },
    /// Gaps drawn from a weighted table.
    Empirical(EmpiricalTable),
}

impl Dist {
    /// Mean gap in nanoseconds, or None when it is infinite (Pareto with shape <= 1).
    /// For Normal this is `mean_ns`, before clamping.
    pub fn mean_ns(&self) -> Option<f64> {
        let mean = match self {
            Dist::Uniform { min_ns, max_ns } => (min_ns + max_ns) / 2.0,
            Dist::Normal { mean_ns, .. }
            | Dist::LogNormal { mean_ns, .. }
            | Dist::Exponential { mean_ns } => *mean_ns,
            Dist::Pareto { scale_ns, shape } => {
                if *shape <= 1.0 {
                    return None;
                }
                shape * scale_ns / (shape - 1.0)
            }
            Dist::Weibull { scale_ns, shape } => scale_ns * ln_gamma(1.0 + 1.0 / shape).exp(),
            Dist::Empirical(table) => table.mean_ns(),
        };
        mean.is_finite().then_some(mean)
    }
}

/// Gap values with weights, sampled by inverse CDF over the cumulative weights.
#[derive(Clone, Debug, PartialEq)]
pub struct EmpiricalTable {
    gaps_ns: Vec<f64>,
    weights: Vec<f64>,
    cumulative: Vec<f64>,
}

const CSV_ROW_FORMAT: &str = "each row must be `gap_ns` or `gap_ns,weight` \
    (a gap in nanoseconds >= 0 and an optional weight >= 0, default 1)";

impl EmpiricalTable {
    /// A table from `(gap_ns, weight)` pairs. Gaps and weights must be finite and >= 0, the
    /// weights must not all be 0 and the weighted mean gap must be above 0.
    pub fn new(entries: impl IntoIterator<Item = (f64, f64)>) -> Result<Self, TimingError> {
        let mut table = Self {
            gaps_ns: Vec::new(),
            weights: Vec::new(),
            cumulative: Vec::new(),
        };
        for (index, (gap, weight)) in entries.into_iter().enumerate() {
            table.push(gap, weight).map_err(|reason| {
                invalid(
                    format!("empirical gap table entry {index}"),
                    format!("({gap}, {weight})"),
                    reason,
                )
            })?;
        }
        table.check_complete()?;
        Ok(table)
    }

    /// Reads a table from CSV text: one row per line, `gap_ns` or `gap_ns,weight`. Blank
    /// lines and `#` comments are skipped, and the first row may be a non-numeric header.
    pub fn from_csv(text: &str) -> Result<Self, TimingError> {
        let mut table = Self {
            gaps_ns: Vec::new(),
            weights: Vec::new(),
            cumulative: Vec::new(),
        };
        let mut seen_content = false;
        for (index, raw) in text.lines().enumerate() {
            let line = index + 1;
            let content = raw.split('#').next().unwrap_or_default().trim();
            if content.is_empty() {
                continue;
            }
            let is_first_content = !seen_content;
            seen_content = true;
            let fields: Vec<&str> = content.split(',').map(str::trim).collect();
            let csv_error = |reason: String| TimingError::EmpiricalCsv { line, reason };
            let Ok(gap) = fields[0].parse::<f64>() else {
                if is_first_content {
                    continue; // a header such as `gap_ns,weight`
                }
                return Err(csv_error(format!(
                    "gap {:?} is not a number; {CSV_ROW_FORMAT}",
                    fields[0]
                )));
            };
            let weight = match fields.as_slice() {
                [_] => 1.0,
                [_, weight] => weight.parse::<f64>().map_err(|_| {
                    csv_error(format!(
                        "weight {weight:?} is not a number; {CSV_ROW_FORMAT}"
                    ))
                })?,
                _ => {
                    return Err(csv_error(format!(
                        "found {} fields; {CSV_ROW_FORMAT}",
                        fields.len()
                    )))
                }
            };
            table.push(gap, weight).map_err(csv_error)?;
        }
        table.check_complete()?;
        Ok(table)
    }

    fn push(&mut self, gap_ns: f64, weight: f64) -> Result<(), String> {
        if !(gap_ns.is_finite() && gap_ns >= 0.0) {
            return Err(format!(
                "gap {gap_ns} must be a finite number of nanoseconds >= 0"
            ));
        }
        if !(weight.is_finite() && weight >= 0.0) {
            return Err(format!("weight {weight} must be a finite number >= 0"));
        }
        let total = self.total_weight() + weight;
        if !total.is_finite() {
            return Err("the weights add up to more than an f64 holds".to_owned());
        }
        self.gaps_ns.push(gap_ns);
        self.weights.push(weight);
        self.cumulative.push(total);
        Ok(())
    }

    fn check_complete(&self) -> Result<(), TimingError> {
        const ACCEPTED: &str =
            "accepted is at least one row with a weight above 0 and a gap above 0 ns";
        if self.total_weight() <= 0.0 {
            let value = if self.gaps_ns.is_empty() {
                "no rows"
            } else {
                "all weights 0"
            };
            return Err(invalid("empirical gap table", value, ACCEPTED));
        }
        if self.mean_ns() <= 0.0 {
            return Err(invalid("empirical gap table", "all gaps 0 ns", ACCEPTED));
        }
        Ok(())
    }

    fn total_weight(&self) -> f64 {
        self.cumulative.last().copied().unwrap_or(0.0)
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.gaps_ns.len()
    }

    /// Whether the table has no rows (never true for a table that was built successfully).
    pub fn is_empty(&self) -> bool {
        self.gaps_ns.is_empty()
    }

    /// The rows as `(gap_ns, weight)`.
    pub fn entries(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        self.gaps_ns
            .iter()
            .copied()
            .zip(self.weights.iter().copied())
    }

    /// Weighted mean gap in nanoseconds.
    pub fn mean_ns(&self) -> f64 {
        let weighted: f64 = self.entries().map(|(gap, weight)| gap * weight).sum();
        weighted / self.total_weight()
    }

    fn sample<R: Rng>(&self, rng: &mut R) -> f64 {
        let target = rng.gen::<f64>() * self.total_weight();
        // The first row whose cumulative weight exceeds the target; rows of weight 0 never
        // qualify because their cumulative weight equals their predecessor's.
        let index = self.cumulative.partition_point(|&c| c <= target);
        self.gaps_ns[index.min(self.gaps_ns.len() - 1)]
    }
}

/// A validated [`Dist`] ready to draw gaps.
#[derive(Clone, Debug)]
pub(crate) enum GapSampler {
    Uniform { min_ns: f64, width_ns: f64 },
    Normal(Normal<f64>),
    LogNormal(LogNormal<f64>),
    Pareto(Pareto<f64>),
    Weibull(Weibull<f64>),
    Exponential { mean_ns: f64 },
    Empirical(EmpiricalTable),
}

fn finite_at_least(
    parameter: &str,
    value: f64,
    min: f64,
    inclusive: bool,
) -> Result<(), TimingError> {
    let ok = value.is_finite() && if inclusive { value >= min } else { value > min };
    if ok {
        return Ok(());
    }
    let relation = if inclusive { ">=" } else { ">" };
    Err(invalid(
        parameter,
        value,
        format!("accepted is a finite number {relation} {min}"),
    ))
}

impl GapSampler {
    pub fn new(dist: &Dist) -> Result<Self, TimingError> {
        let sampler = match dist {
            Dist::Uniform { min_ns, max_ns } => {
                finite_at_least("uniform min_ns", *min_ns, 0.0, true)?;
                finite_at_least("uniform max_ns", *max_ns, min_ns.max(0.0), true)?;
                if *max_ns <= 0.0 {
                    return Err(invalid(
                        "uniform max_ns",
                        max_ns,
                        "accepted is a gap above 0 ns (all-zero gaps have no rate)",
                    ));
                }
                GapSampler::Uniform {
                    min_ns: *min_ns,
                    width_ns: max_ns - min_ns,
                }
            }
            Dist::Normal { mean_ns, std_ns } => {
                finite_at_least("normal mean_ns", *mean_ns, 0.0, false)?;
                finite_at_least("normal std_ns", *std_ns, 0.0, true)?;
                GapSampler::Normal(Normal::new(*mean_ns, *std_ns).map_err(|e| {
                    invalid("normal distribution", format!("{dist:?}"), e.to_string())
                })?)
            }
            Dist::LogNormal { mean_ns, std_ns } => {
                finite_at_least("log-normal mean_ns", *mean_ns, 0.0, false)?;
                finite_at_least("log-normal std_ns", *std_ns, 0.0, true)?;
                // Moments of the gap -> parameters of its logarithm.
                let sigma_sq = (std_ns / mean_ns).powi(2).ln_1p();
                let mu = mean_ns.ln() - sigma_sq / 2.0;
                GapSampler::LogNormal(LogNormal::new(mu, sigma_sq.sqrt()).map_err(|e| {
                    invalid(
                        "log-normal distribution",
                        format!("{dist:?}"),
                        e.to_string(),
                    )
                })?)
            }
            Dist::Pareto { scale_ns, shape } => {
                finite_at_least("pareto scale_ns", *scale_ns, 0.0, false)?;
                finite_at_least("pareto shape", *shape, 0.0, false)?;
                GapSampler::Pareto(Pareto::new(*scale_ns, *shape).map_err(|e| {
                    invalid("pareto distribution", format!("{dist:?}"), e.to_string())
                })?)
            }
            Dist::Weibull { scale_ns, shape } => {
                finite_at_least("weibull scale_ns", *scale_ns, 0.0, false)?;
                finite_at_least("weibull shape", *shape, 0.0, false)?;
                GapSampler::Weibull(Weibull::new(*scale_ns, *shape).map_err(|e| {
                    invalid("weibull distribution", format!("{dist:?}"), e.to_string())
                })?)
            }
            Dist::Exponential { mean_ns } => {
                finite_at_least("exponential mean_ns", *mean_ns, 0.0, false)?;
                GapSampler::Exponential { mean_ns: *mean_ns }
            }
            // Tables can only be built through their checking constructors.
            Dist::Empirical(table) => GapSampler::Empirical(table.clone()),
        };
        Ok(sampler)
    }

    /// Draws one gap in nanoseconds, never negative.
    #[inline]
    pub fn sample<R: Rng>(&self, rng: &mut R) -> f64 {
        match self {
            GapSampler::Uniform { min_ns, width_ns } => min_ns + width_ns * rng.gen::<f64>(),
            GapSampler::Normal(normal) => normal.sample(rng).max(0.0),
            GapSampler::LogNormal(log_normal) => log_normal.sample(rng),
            GapSampler::Pareto(pareto) => pareto.sample(rng),
            GapSampler::Weibull(weibull) => weibull.sample(rng),
            GapSampler::Exponential { mean_ns } => {
                let unit: f64 = Exp1.sample(rng);
                unit * mean_ns
            }
            GapSampler::Empirical(table) => table.sample(rng),
        }
    }
}

/// ln Γ(x) for x >= 1, from Stirling's series after shifting the argument to >= 10 with
/// Γ(x + 1) = x Γ(x); the truncated series is accurate to about 1e-13 there.
pub(crate) fn ln_gamma(x: f64) -> f64 {
    let mut z = x;
    let mut shift = 0.0;
    while z < 10.0 {
        shift += z.ln();
        z += 1.0;
    }
    let inv = 1.0 / z;
    let inv_sq = inv * inv;
    let series = inv
        * (1.0 / 12.0 - inv_sq * (1.0 / 360.0 - inv_sq * (1.0 / 1260.0 - inv_sq * (1.0 / 1680.0))));
    (z - 0.5) * z.ln() - z + 0.5 * (2.0 * std::f64::consts::PI).ln() + series - shift
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ln_gamma_matches_known_values() {
        let cases = [
            (1.0, 0.0),
            (2.0, 0.0),
            (5.0, 24f64.ln()),
            (1.5, (std::f64::consts::PI.sqrt() / 2.0).ln()),
            (11.0, 3_628_800f64.ln()),
        ];
        for (x, expected) in cases {
            assert!(
                (ln_gamma(x) - expected).abs() < 1e-12,
                "lnΓ({x}) = {}",
                ln_gamma(x)
            );
        }
    }

    #[test]
    fn weibull_mean_uses_gamma() {
        let mean = Dist::Weibull {
            scale_ns: 1000.0,
            shape: 2.0,
        }
        .mean_ns()
        .unwrap();
        assert!((mean - 500.0 * std::f64::consts::PI.sqrt()).abs() < 1e-9);
    }
}
