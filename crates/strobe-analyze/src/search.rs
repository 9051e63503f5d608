//! The throughput search of RFC 2544 (§26.1): the highest offered rate a device forwards
//! with a loss ratio at or below a tolerance — 0 for the no-drop rate (NDR), e.g. 0.005 for a
//! partial-drop rate (PDR) — to a stated resolution, for several tolerances at once.
//!
//! Pure and driven from outside: [`ThroughputSearch::next_rate`] proposes the next trial's
//! rate, [`ThroughputSearch::record`] takes what the trial measured. The first trial runs at
//! the maximum rate. A failed trial's loss ratio says what the device forwarded
//! (rate × (1 − loss)); the next trial is aimed just below that for the tolerance, as
//! TRex's optimised search and FD.io's MLRsearch do, instead of halving the interval; when
//! it passes, one trial a resolution above closes the interval. Every trial narrows the
//! interval of every tolerance it decides. A guess that would not shrink an interval by at
//! least a quarter falls back to bisection, so the search always ends.

use serde::{Deserialize, Serialize};

/// What to search for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SearchSpec {
    /// The highest rate (the first trial's), and the lowest the search goes down to, in any
    /// unit as long as it is one unit throughout (frames per second, say).
    pub max_rate: f64,
    pub min_rate: f64,
    /// The search ends for a tolerance when its passing and failing rates are this close…
    pub resolution: f64,
    /// …or this close relative to the failing rate (0.005: within 0.5 %, MLRsearch's
    /// default width goal), whichever is wider. 0: the absolute resolution alone.
    #[serde(default)]
    pub relative_resolution: f64,
    /// Loss ratios (0 to 1) to find the rate for, e.g. [0.0, 0.005].
    pub tolerances: Vec<f64>,
    /// How the next rate is chosen.
    #[serde(default)]
    pub method: SearchMethod,
}

/// How a search chooses the next rate after the first trial (at the maximum).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SearchMethod {
    /// Aimed at what the device forwarded, bisection as the fallback.
    #[default]
    Aimed,
    /// Halving the interval every trial: the plain binary search, for comparison.
    Binary,
}

/// One trial: the rate offered and the share of frames lost (0 to 1).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Trial {
    pub rate: f64,
    pub loss_ratio: f64,
}

/// Where the search stands for one tolerance.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Bracket {
    pub tolerance: f64,
    /// The highest rate that passed (loss at or below the tolerance) so far.
    pub passed: Option<f64>,
    /// The lowest rate that failed so far.
    pub failed: Option<f64>,
    /// What the device forwarded in the failed trial closest to the interval, used to aim
    /// the next one.
    aim: Option<f64>,
    /// The aim comes from the latest trial of this tolerance, and has not been tried.
    #[serde(default)]
    aim_fresh: bool,
    /// Failures in a row since the last pass: an aim that keeps missing is not trusted.
    #[serde(default)]
    failures_in_a_row: u32,
    /// Passes in a row since the last failure: steps up from the highest pass grow with them.
    #[serde(default)]
    passes_in_a_row: u32,
}

impl SearchSpec {
    /// How close the rates around `failed` must be for the search to end there.
    pub fn width_goal(&self, failed: f64) -> f64 {
        self.resolution.max(self.relative_resolution * failed)
    }
}

impl Bracket {
    fn is_done(&self, spec: &SearchSpec) -> bool {
        match (self.passed, self.failed) {
            // The maximum passed: nothing above it is asked.
            (Some(p), _) if p >= spec.max_rate => true,
            (Some(p), Some(f)) => f - p <= spec.width_goal(f),
            // Failing down at the lowest rate: the rate is below what was asked to search.
            (None, Some(f)) => f <= spec.min_rate,
            _ => false,
        }
    }

    /// The rate this tolerance would try next.
    fn next(&self, spec: &SearchSpec) -> f64 {
        let lo = self.passed.unwrap_or(spec.min_rate);
        let hi = self.failed.unwrap_or(spec.max_rate);
        if self.failed.is_none() {
            return spec.max_rate;
        }
        if self.passed.is_none() && hi - lo <= spec.width_goal(hi) {
            return lo;
        }
        // Steps of the goal at the low end: a failure a step above a pass closes the
        // interval whatever the failing rate.
        let resolution = spec.width_goal(lo);
        let bisect = (lo + hi) / 2.0;
        if spec.method == SearchMethod::Binary {
            return bisect.clamp(spec.min_rate, spec.max_rate);
        }
        // Aim just below the rate at which what the device forwarded at the failed rate
        // makes the tolerated loss (forwarded / (1 − tolerance)), by half a resolution, so
        // that the aimed trial passes and one a resolution above closes the interval.
        let guess = self
            .aim
            .map(|forwarded| forwarded / (1.0 - self.tolerance) - resolution / 2.0);
        match guess {
            // A fresh aim inside the interval: try it (unless aims keep missing — noise, or
            // a device whose loss does not follow the offered rate).
            Some(g) if self.aim_fresh && self.failures_in_a_row <= 3 && g > lo && g < hi => g,
            // The aimed trial passed: one trial a resolution above it closes the interval
            // if the aim was right (and when that passes too, the aim is stale: bisect).
            Some(g) if g <= lo && g > lo - resolution && lo + resolution < hi => lo + resolution,
            // Nothing passed yet and aims missed: step down from the lowest failure by a
            // width that doubles with each failure (MLRsearch's external search), rather
            // than halving all the way from the lowest rate.
            _ if self.passed.is_none() => {
                let width = spec.width_goal(hi) * 2f64.powi(self.failures_in_a_row.min(60) as i32);
                (hi - width).max(bisect.min(lo + (hi - lo) / 4.0)).max(lo)
            }
            // The lowest failure forwarded less than a rate that passed (it overwhelmed the
            // device: receive livelock, a queue or bucket that absorbed part of another
            // trial), so its aim lands below the interval, and the interval still reaches far
            // above the highest pass (to the first, unpaced trial, say). Step up from the
            // highest pass by a width that grows fourfold with each pass in a row (the
            // external search upwards; doubling took 7 trials to climb from half the rate,
            // seen on the lab's shaper), never past the middle, rather than halving the whole
            // range.
            Some(g) if g <= lo && hi > 1.5 * lo => {
                (lo + resolution * 4f64.powi(self.passes_in_a_row.min(30) as i32)).min(bisect)
            }
            _ => bisect,
        }
        .clamp(spec.min_rate, spec.max_rate)
    }
}

/// A throughput search in progress.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ThroughputSearch {
    pub spec: SearchSpec,
    pub brackets: Vec<Bracket>,
    pub trials: Vec<Trial>,
}

impl ThroughputSearch {
    /// A search, or why `spec` cannot be searched.
    pub fn new(spec: SearchSpec) -> Result<ThroughputSearch, String> {
        let finite = |v: f64| v.is_finite();
        if !(finite(spec.max_rate) && finite(spec.min_rate) && finite(spec.resolution))
            || spec.min_rate < 0.0
            || spec.max_rate <= spec.min_rate
        {
            return Err(format!(
                "the search needs 0 <= lowest rate < highest rate, got {} to {}",
                spec.min_rate, spec.max_rate
            ));
        }
        if !(spec.relative_resolution.is_finite() && spec.relative_resolution >= 0.0)
            || spec.resolution < 0.0
            || spec.width_goal(spec.min_rate.max(f64::MIN_POSITIVE)) <= 0.0
        {
            return Err("the search's resolution must be above 0".into());
        }
        if spec.tolerances.is_empty() || spec.tolerances.iter().any(|t| !(0.0..1.0).contains(t)) {
            return Err("give loss tolerances from 0 (no drop) to below 100 %".into());
        }
        let brackets = spec
            .tolerances
            .iter()
            .map(|&tolerance| Bracket {
                tolerance,
                passed: None,
                failed: None,
                aim: None,
                aim_fresh: false,
                failures_in_a_row: 0,
                passes_in_a_row: 0,
            })
            .collect();
        Ok(ThroughputSearch {
            spec,
            brackets,
            trials: Vec::new(),
        })
    }

    /// The next trial's rate, or None when every tolerance is decided to the resolution.
    /// The undecided tolerance with the widest interval goes first.
    pub fn next_rate(&self) -> Option<f64> {
        self.brackets
            .iter()
            .filter(|b| !b.is_done(&self.spec))
            .map(|b| {
                let width = b.failed.unwrap_or(f64::INFINITY) - b.passed.unwrap_or(0.0);
                (width, b.next(&self.spec))
            })
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, rate)| rate)
    }

    /// Takes a trial's result: it passes or fails each tolerance.
    pub fn record(&mut self, trial: Trial) {
        let loss = trial.loss_ratio.clamp(0.0, 1.0);
        // A trial outside a tolerance's interval tells it nothing new and leaves it as it is.
        for b in &mut self.brackets {
            if loss <= b.tolerance {
                if b.passed.is_none_or(|p| trial.rate > p) {
                    b.passed = Some(trial.rate);
                    b.aim_fresh = false;
                    b.failures_in_a_row = 0;
                    b.passes_in_a_row += 1;
                }
            } else if b.failed.is_none_or(|f| trial.rate < f) {
                b.failed = Some(trial.rate);
                b.aim = Some(trial.rate * (1.0 - loss));
                b.aim_fresh = true;
                b.failures_in_a_row += 1;
                b.passes_in_a_row = 0;
            }
        }
        self.trials.push(trial);
    }

    /// Each tolerance's result: the highest rate that passed (None: none did).
    pub fn results(&self) -> Vec<(f64, Option<f64>)> {
        self.brackets
            .iter()
            .map(|b| (b.tolerance, b.passed))
            .collect()
    }
}

/// A plain binary search to the same resolution, for comparison: halves the interval
/// every trial, for one tolerance.
pub fn binary_search_trials(
    spec: &SearchSpec,
    tolerance: f64,
    loss_at: impl Fn(f64) -> f64,
) -> usize {
    let (mut lo, mut hi) = (spec.min_rate, spec.max_rate);
    let mut trials = 1;
    if loss_at(hi) <= tolerance {
        return trials;
    }
    while hi - lo > spec.width_goal(hi) {
        let mid = (lo + hi) / 2.0;
        trials += 1;
        if loss_at(mid) <= tolerance {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    trials
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device that forwards up to `capacity` and drops the excess.
    fn shaper(capacity: f64) -> impl Fn(f64) -> f64 {
        move |rate: f64| {
            if rate <= capacity {
                0.0
            } else {
                1.0 - capacity / rate
            }
        }
    }

    fn run(spec: SearchSpec, device: impl Fn(f64) -> f64) -> ThroughputSearch {
        let mut s = ThroughputSearch::new(spec).unwrap();
        while let Some(rate) = s.next_rate() {
            assert!(s.trials.len() < 100, "the search does not end");
            s.record(Trial {
                rate,
                loss_ratio: device(rate),
            });
        }
        s
    }

    fn spec(tolerances: Vec<f64>) -> SearchSpec {
        SearchSpec {
            max_rate: 1_488_095.0,
            min_rate: 1_000.0,
            resolution: 1_000.0,
            relative_resolution: 0.0,
            tolerances,
            method: SearchMethod::Aimed,
        }
    }

    #[test]
    fn a_shaper_is_found_to_the_resolution_in_far_fewer_trials_than_halving() {
        for capacity in [97_656.0, 412_000.0, 1_234_567.0] {
            let s = run(spec(vec![0.0]), shaper(capacity));
            let found = s.results()[0].1.unwrap();
            assert!(
                found <= capacity && capacity - found <= 1_000.0,
                "{capacity}: {found}"
            );
            let plain = binary_search_trials(&s.spec, 0.0, shaper(capacity));
            eprintln!(
                "{capacity}: {} trials, binary search {plain}",
                s.trials.len()
            );
            assert!(
                s.trials.len() * 10 <= plain * 6,
                "{capacity}: {} trials, binary search {plain}",
                s.trials.len()
            );
        }
    }

    #[test]
    fn the_binary_method_halves_as_the_plain_binary_search_does() {
        for capacity in [97_656.0, 412_000.0, 1_234_567.0] {
            let mut binary = spec(vec![0.0]);
            binary.method = SearchMethod::Binary;
            let s = run(binary.clone(), shaper(capacity));
            let plain = binary_search_trials(&binary, 0.0, shaper(capacity));
            assert_eq!(s.trials.len(), plain, "{capacity}");
            let found = s.results()[0].1.unwrap();
            assert!(found <= capacity && capacity - found <= 1_000.0);
        }
    }

    #[test]
    fn ndr_and_pdr_come_from_one_search() {
        // Loss grows gently above 500 kpps: 1 % per 100 kpps.
        let gentle = |rate: f64| ((rate - 500_000.0) / 1e7).max(0.0);
        let s = run(spec(vec![0.0, 0.005]), gentle);
        let results = s.results();
        let ndr = results[0].1.unwrap();
        let pdr = results[1].1.unwrap();
        assert!((499_000.0..=500_000.0).contains(&ndr), "NDR {ndr}");
        assert!((549_000.0..=550_000.0).contains(&pdr), "PDR {pdr}");
        assert!(s.trials.len() <= 2 * 21, "{} trials", s.trials.len());
    }

    #[test]
    fn a_device_that_forwards_everything_takes_one_trial_and_one_that_forwards_nothing_ends() {
        let s = run(spec(vec![0.0]), |_| 0.0);
        assert_eq!((s.trials.len(), s.results()[0].1), (1, Some(1_488_095.0)));
        let s = run(spec(vec![0.0]), |_| 1.0);
        assert_eq!(s.results()[0].1, None);
        assert!(s.trials.len() <= 22, "{}", s.trials.len());
    }

    #[test]
    fn noisy_losses_still_end_within_the_resolution() {
        // A device whose loss jitters: some rates below capacity lose a frame or two.
        let jitter = |rate: f64| {
            let base = shaper(700_000.0)(rate);
            if (rate as u64 / 1_000) % 7 == 3 {
                base + 1e-6
            } else {
                base
            }
        };
        let s = run(spec(vec![0.0]), jitter);
        let b = s.brackets[0];
        assert!(b.failed.unwrap() - b.passed.unwrap() <= 1_000.0, "{b:?}");
    }

    #[test]
    fn stale_aims_step_up_from_the_highest_pass_instead_of_halving_the_range() {
        // Seen on the lab's shaper in CI: trials far above its rate overwhelm the path and
        // forward 9-13 % less than the shaper's rate, so their aims land low; rates just
        // above the rate lose a few frames (its bucket absorbs some).
        shaper_searched_in_few_trials(286_742.0, 24_800.0, 0.87 * 24_800.0, 1.003);
    }

    #[test]
    fn a_device_that_forwarded_half_its_rate_when_overwhelmed_is_climbed_to_quickly() {
        // Seen in CI on the lab's 50 Mbit/s shaper (25 000 frames/s of 256 bytes): the first,
        // unpaced trial at 263 000 frames/s starved the shaper's CPU and only 12 633 got
        // through, so the search started from half the rate (doubling steps: 13 trials).
        shaper_searched_in_few_trials(263_125.0, 25_100.0, 12_633.0, 1.0);
    }

    /// A shaper of `capacity` frames/s (up to `excess` times it passes where its bucket
    /// absorbs some), that forwards only `overwhelmed` frames/s when offered more than three
    /// times its rate, searched from `max_rate` to 0.5 %: NDR and PDR found in at most ten
    /// trials (halving from the first pass to the first trial takes nine more).
    fn shaper_searched_in_few_trials(max_rate: f64, capacity: f64, overwhelmed: f64, excess: f64) {
        let device = move |rate: f64| {
            let forwarded = if rate > 3.0 * capacity {
                overwhelmed
            } else {
                rate.min(capacity * excess)
            };
            1.0 - forwarded / rate
        };
        let spec = SearchSpec {
            max_rate,
            min_rate: 100.0,
            resolution: 0.0,
            relative_resolution: 0.005,
            tolerances: vec![0.0, 0.005],
            method: SearchMethod::Aimed,
        };
        let s = run(spec, device);
        let ndr = s.results()[0].1.unwrap();
        assert!(
            ndr <= capacity * excess && ndr > capacity * 0.99,
            "NDR {ndr}"
        );
        let rates: Vec<u64> = s.trials.iter().map(|t| t.rate as u64).collect();
        assert!(s.trials.len() <= 10, "{} trials: {rates:?}", s.trials.len());
    }

    #[test]
    fn bad_specs_are_refused_with_the_reason() {
        let mut bad = spec(vec![0.0]);
        bad.min_rate = 2e6;
        assert!(ThroughputSearch::new(bad)
            .unwrap_err()
            .contains("lowest rate"));
        let mut bad = spec(vec![1.0]);
        assert!(ThroughputSearch::new(bad.clone())
            .unwrap_err()
            .contains("tolerances"));
        bad.tolerances = vec![0.0];
        bad.resolution = 0.0;
        assert!(ThroughputSearch::new(bad)
            .unwrap_err()
            .contains("resolution"));
    }
}
