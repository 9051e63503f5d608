//! Floor-aware fits: a capture's gaps against a timing model as a sender on a path with a
//! floor would send it (see [`strobe_timing::path_floor`]).
//!
//! A software sender's path can put frames `spacing` apart (one hand-over) or `handover`
//! and more apart (separate hand-overs), nothing in between. So the gaps of a random model
//! cannot survive unchanged; what can be asked is that they are what a *perfect* sender on
//! that path gives: the model's deadlines, hand-overs coalesced by
//! [`strobe_timing::PathFloor::joins`], deadlines kept absolute (so the rate is kept). The
//! capture is compared, by two-sample Kolmogorov-Smirnov tests, with draws of
//! 1. the plain model,
//! 2. the naive clamp (model gaps below `spacing` moved up to it; it loses rate, as the
//!    mean of max(gap, spacing) is above the model's mean gap),
//! 3. the perfect sender on the path.
//!
//! The perfect sender (and any deterministic part of a model: bursts, constant gaps) puts
//! probability mass exactly at some gaps, where real timestamps jitter by tens of ns. So the
//! CDFs are compared with a time tolerance δ (the Lévy form of the KS distance:
//! F_a(x) against F_b(x ± δ)), which a shift of every gap by up to δ does not change; with
//! δ = 0 it is the plain two-sample KS statistic. The p-value is the KS one for that
//! statistic, so with δ > 0 the test leans towards "consistent" and the report says δ.

use serde::{Deserialize, Serialize};
use strobe_timing::{perfect_departures, Duration, PathFloor, Schedule, ScheduleSpec};

use crate::ks;

/// The floor to judge a capture against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloorChoice {
    /// Estimated from the capture's own smallest gaps.
    Auto,
    Given(PathFloor),
}

/// Most model gaps drawn, and the fewest.
const MAX_MODEL_GAPS: usize = 5_000_000;
const MIN_MODEL_GAPS: usize = 1_000_000;

/// One model's two-sample KS test against the capture.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ModelFit {
    /// `plain`, `naive_clamp` or `perfect_sender`.
    pub model: String,
    pub ks_d: f64,
    pub ks_p: f64,
    pub consistent: bool,
    /// Share of the model's gaps at or below the spacing band's top.
    pub share_at_floor: f64,
}

/// A capture judged against a model sent through a path's floor.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FloorFit {
    /// The timing model, e.g. `poisson at 100000 pps`.
    pub model: String,
    pub handover_ns: u64,
    pub spacing_ns: u64,
    /// `true` when the floor was estimated from the capture, not given.
    pub floor_estimated: bool,
    /// Time tolerance δ of the KS comparison (timestamp jitter), and half-width of the
    /// band "at the floor".
    pub band_ns: u64,
    /// Share of the capture's gaps at or below `spacing_ns + band_ns`.
    pub share_at_floor: f64,
    pub model_gaps: usize,
    pub max_batch: usize,
    pub alpha: f64,
    pub fits: Vec<ModelFit>,
    /// In words: which model holds.
    pub verdict: String,
}

/// Estimates a path's floor from sorted gaps. The spacing is where the smallest gaps
/// crowd: the median of the densest window one jitter band wide between the 0.1 % quantile
/// (at least the 10th gap) and twice it (frames of one hand-over arrive a little apart, so
/// the very smallest gaps are its lower tail, not its centre). The hand-over is where gaps
/// resume above that cluster (the 0.5 % quantile of the gaps above it), or the spacing when
/// no gap is missing between; [`fit`] refines it.
pub fn estimate_floor(sorted: &[u64]) -> Option<PathFloor> {
    if sorted.len() < 20 {
        return None;
    }
    let low = sorted[(sorted.len() / 1000).max(10)];
    let width = band_ns(low, 1);
    let first = sorted.partition_point(|&g| g < low);
    let end = sorted.partition_point(|&g| g <= low.saturating_mul(2));
    // Densest window [sorted[i], sorted[i] + width] over the candidates.
    let (mut best_start, mut best_len, mut j) = (first, 0, first);
    for i in first..end {
        while j < end && sorted[j] <= sorted[i].saturating_add(width) {
            j += 1;
        }
        if j - i > best_len {
            (best_start, best_len) = (i, j - i);
        }
    }
    let spacing_ns = sorted[best_start + best_len / 2].max(1);
    let top = spacing_ns.saturating_add(band_ns(spacing_ns, 1));
    let above = &sorted[sorted.partition_point(|&g| g <= top)..];
    let handover_ns = match above.get(above.len() / 200) {
        Some(&g) if g > top.saturating_add(band_ns(spacing_ns, 1)) => g,
        _ => spacing_ns,
    };
    Some(PathFloor {
        handover_ns,
        spacing_ns,
    })
}

/// Jitter band around the floor's atoms: 10 % of the spacing, at least 100 ns and the
/// timestamp resolution.
fn band_ns(spacing_ns: u64, resolution_ns: u64) -> u64 {
    (spacing_ns / 10).max(100).max(resolution_ns)
}

/// A timing model to judge gaps against, through a path's floor.
#[derive(Clone, Debug, PartialEq)]
pub struct FloorModel {
    /// The flows' rates and patterns, their departures merged as on one port (duration
    /// and seed are the fit's own).
    pub specs: Vec<ScheduleSpec>,
    /// How the report names it, e.g. `poisson:100kpps`.
    pub name: String,
    pub floor: FloorChoice,
    /// Most frames per hand-over the sender coalesced (strobe's `--batch`, default 256).
    pub max_batch: usize,
    /// Time tolerance of the comparison (timestamp and path jitter); None: 10 % of the
    /// spacing, at least 100 ns and the timestamp resolution.
    pub tolerance_ns: Option<u64>,
}

/// Judges `sorted` (the gaps, ascending) against `model`, for timestamps of
/// `resolution_ns`, at significance `alpha`; None when the floor is to be estimated and
/// too few gaps are there to read it.
pub fn fit(
    sorted: &[u64],
    model: &FloorModel,
    resolution_ns: u64,
    alpha: f64,
) -> Result<Option<FloorFit>, String> {
    let FloorModel {
        specs,
        name,
        floor,
        max_batch,
        tolerance_ns,
    } = model;
    let (max_batch, tolerance_ns) = (*max_batch, *tolerance_ns);
    let n_model = (sorted.len() * 10).clamp(MIN_MODEL_GAPS, MAX_MODEL_GAPS);
    let deadlines = model_deadlines(specs, n_model + 1)?;
    if deadlines.len() < 2 {
        return Err("the model gives fewer than two departures".into());
    }
    let (floor, estimated) = match *floor {
        FloorChoice::Given(f) => (f, false),
        FloorChoice::Auto => match estimate_floor(sorted) {
            Some(f) => (
                fit_handover(
                    sorted,
                    &deadlines,
                    f,
                    max_batch,
                    tolerance_ns,
                    resolution_ns,
                ),
                true,
            ),
            None => return Ok(None),
        },
    };
    let plain = diffs(&deadlines);
    let mut clamped: Vec<u64> = plain.iter().map(|&g| g.max(floor.spacing_ns)).collect();
    clamped.sort_unstable();
    let perfect = diffs(&perfect_departures(&deadlines, floor, max_batch));

    let band = tolerance_ns.unwrap_or_else(|| band_ns(floor.spacing_ns, resolution_ns));
    let at_floor = |g: &[u64]| {
        g.partition_point(|&x| x <= floor.spacing_ns.saturating_add(band)) as f64 / g.len() as f64
    };
    let fits: Vec<ModelFit> = [
        ("plain", &plain),
        ("naive_clamp", &clamped),
        ("perfect_sender", &perfect),
    ]
    .into_iter()
    .map(|(model, gaps)| {
        let d = two_sample_statistic(sorted, gaps, band);
        let n_eff = (sorted.len() * gaps.len()) / (sorted.len() + gaps.len());
        let p = ks::p_value(d, n_eff.max(1));
        ModelFit {
            model: model.to_string(),
            ks_d: d,
            ks_p: p,
            consistent: p >= alpha,
            share_at_floor: at_floor(gaps),
        }
    })
    .collect();
    let share_at_floor = at_floor(sorted);
    let verdict = verdict(name, &floor, share_at_floor, &fits);
    Ok(Some(FloorFit {
        model: name.clone(),
        handover_ns: floor.handover_ns,
        spacing_ns: floor.spacing_ns,
        floor_estimated: estimated,
        band_ns: band,
        share_at_floor,
        model_gaps: plain.len(),
        max_batch,
        alpha,
        fits,
        verdict,
    }))
}

/// The first `count` departures of `specs` merged by deadline, as a port sends its flows.
/// Each flow runs on (its duration is the fit's), with a seed of its own so two random
/// flows do not draw the same gaps; an OTG burst duration keeps its shape, repeated.
/// Frame sizes matter only for bit rates; the model is drawn at 64-byte frames.
fn model_deadlines(specs: &[ScheduleSpec], count: usize) -> Result<Vec<u64>, String> {
    let mut schedules = specs
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            let duration = match spec.duration {
                Duration::Bursts {
                    packets,
                    inter_burst_gap_ns,
                    ..
                } => Duration::Bursts {
                    bursts: 0,
                    packets,
                    inter_burst_gap_ns,
                },
                _ => Duration::Continuous,
            };
            Schedule::new(ScheduleSpec {
                duration,
                seed: 0x5eed_f100 ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
                ..spec.clone()
            })
            .map_err(|e| e.to_string())
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut next: Vec<Option<u64>> = schedules.iter_mut().map(|s| s.next(64)).collect();
    let mut deadlines = Vec::with_capacity(count);
    while deadlines.len() < count {
        let Some((i, d)) = next
            .iter()
            .enumerate()
            .filter_map(|(i, d)| d.map(|d| (i, d)))
            .min_by_key(|&(_, d)| d)
        else {
            break;
        };
        deadlines.push(d);
        next[i] = schedules[i].next(64);
    }
    Ok(deadlines)
}

/// Sorted gaps of departure times.
fn diffs(times: &[u64]) -> Vec<u64> {
    let mut g: Vec<u64> = times.windows(2).map(|w| w[1] - w[0]).collect();
    g.sort_unstable();
    g
}

/// Model deadlines used to choose the hand-over (the final fit uses all of them).
const HANDOVER_SEARCH_GAPS: usize = 300_000;

/// The hand-over cost that best explains the capture, the spacing kept: a capture's
/// smallest gaps show the spacing plainly, but where a sender's calls vary (another worker
/// or the receive path on its core) gaps above the spacing are a continuum and do not show
/// where separate hand-overs begin. So the hand-over is chosen on a geometric grid from the
/// spacing to the capture's mean gap as the one whose perfect sender is closest (smallest
/// KS distance) to the capture. Fitting a parameter makes the later p-value optimistic; the
/// report says the floor was estimated.
fn fit_handover(
    sorted: &[u64],
    deadlines: &[u64],
    guess: PathFloor,
    max_batch: usize,
    tolerance_ns: Option<u64>,
    resolution_ns: u64,
) -> PathFloor {
    let spacing = guess.spacing_ns;
    let band = tolerance_ns.unwrap_or_else(|| band_ns(spacing, resolution_ns));
    // Gaps are untrusted (any capture): summed wide, so no sum overflows.
    let mean_gap =
        (sorted.iter().map(|&g| u128::from(g)).sum::<u128>() / sorted.len().max(1) as u128) as u64;
    let top = mean_gap.max(spacing.saturating_add(1));
    let search = &deadlines[..deadlines.len().min(HANDOVER_SEARCH_GAPS)];
    let distance = |handover_ns: u64| {
        let floor = PathFloor {
            handover_ns,
            spacing_ns: spacing,
        };
        two_sample_statistic(
            sorted,
            &diffs(&perfect_departures(search, floor, max_batch)),
            band,
        )
    };
    const STEPS: i32 = 32;
    let ratio = (top as f64 / spacing as f64).powf(1.0 / f64::from(STEPS));
    let mut candidates = (0..=STEPS)
        .map(|k| (spacing as f64 * ratio.powi(k)).round() as u64)
        .chain([guess.handover_ns]);
    let best = |candidates: &mut dyn Iterator<Item = u64>| {
        candidates
            .map(|h| (distance(h), h))
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .map_or(guess.handover_ns, |(_, h)| h)
    };
    let coarse = best(&mut candidates);
    // Then finer, between the coarse grid's neighbours of the best.
    let (low, high) = (coarse as f64 / ratio, coarse as f64 * ratio);
    let handover_ns = best(
        &mut (0..=16)
            .map(|k| (low + (high - low) * f64::from(k) / 16.0).round() as u64)
            .filter(|&h| h >= spacing),
    );
    PathFloor {
        handover_ns,
        spacing_ns: spacing,
    }
}

fn verdict(model: &str, floor: &PathFloor, at_floor: f64, fits: &[ModelFit]) -> String {
    let by = |name: &str| fits.iter().find(|f| f.model == name);
    let (Some(plain), Some(perfect)) = (by("plain"), by("perfect_sender")) else {
        return String::new();
    };
    let floor_text = format!(
        "the path's floor ({} ns per hand-over, {} ns back to back)",
        floor.handover_ns, floor.spacing_ns
    );
    let shares = format!(
        "{:.2} % of gaps at the floor, where a perfect sender puts {:.2} % and the plain \
         model {:.2} %",
        at_floor * 100.0,
        perfect.share_at_floor * 100.0,
        plain.share_at_floor * 100.0
    );
    match (perfect.consistent, plain.consistent) {
        (true, false) => format!(
            "consistent with {model} as a perfect sender sends it through {floor_text}; not \
             with the plain model, which the path cannot send ({shares})"
        ),
        (true, true) => {
            format!("consistent with {model}, plain and as sent through {floor_text} ({shares})")
        }
        (false, true) => format!(
            "consistent with the plain {model}, not with it as sent through {floor_text} \
             (is the floor right?) ({shares})"
        ),
        (false, false) => format!(
            "NOT consistent with {model}, neither plain nor as a perfect sender sends it \
             through {floor_text} ({shares})"
        ),
    }
}

/// Two-sample KS statistic of sorted samples `a` and `b` with time tolerance `delta_ns`:
/// the largest of F_a(x) - F_b(x + δ) and F_b(x) - F_a(x + δ) over all x.
pub fn two_sample_statistic(a: &[u64], b: &[u64], delta_ns: u64) -> f64 {
    if a.is_empty() || b.is_empty() {
        return 1.0;
    }
    one_sided(a, b, delta_ns).max(one_sided(b, a, delta_ns))
}

/// sup over x of F_a(x) - F_b(x + δ): attained where F_a jumps, at a value of `a`.
fn one_sided(a: &[u64], b: &[u64], delta_ns: u64) -> f64 {
    let (n, m) = (a.len() as f64, b.len() as f64);
    let mut d = 0.0f64;
    let mut i = 0;
    while i < a.len() {
        let v = a[i];
        // F_a(v): every value up to v (ties included).
        i += a[i..].partition_point(|&x| x <= v);
        let below = b.partition_point(|&x| x <= v.saturating_add(delta_ns));
        d = d.max(i as f64 / n - below as f64 / m);
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use strobe_timing::{Pattern, Rate};

    const PATH: PathFloor = PathFloor {
        handover_ns: 2_300,
        spacing_ns: 900,
    };

    fn poisson(pps: f64) -> ScheduleSpec {
        ScheduleSpec {
            rate: Rate::Pps(pps),
            pattern: Pattern::Poisson,
            ..ScheduleSpec::default()
        }
    }

    /// Gaps of `spec` drawn with `seed`, through `floor` when given, with ±`jitter` ns.
    fn capture(
        spec: &ScheduleSpec,
        n: u64,
        floor: Option<PathFloor>,
        jitter: u64,
        seed: u64,
    ) -> Vec<u64> {
        let mut s = Schedule::new(ScheduleSpec {
            duration: Duration::Packets(n),
            seed,
            ..spec.clone()
        })
        .unwrap();
        let mut t = Vec::new();
        while let Some(d) = s.next(64) {
            t.push(d);
        }
        if let Some(f) = floor {
            t = perfect_departures(&t, f, 256);
        }
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
        let t: Vec<u64> = t
            .iter()
            .map(|&x| x + 1_000_000 + rng.gen_range(0..=2 * jitter) - jitter)
            .collect();
        let mut g: Vec<u64> = t.windows(2).map(|w| w[1].saturating_sub(w[0])).collect();
        g.sort_unstable();
        g
    }

    fn model(specs: &[ScheduleSpec], floor: FloorChoice, tolerance_ns: Option<u64>) -> FloorModel {
        FloorModel {
            specs: specs.to_vec(),
            name: "model".into(),
            floor,
            max_batch: 256,
            tolerance_ns,
        }
    }

    fn fit_of(gaps: &[u64], spec: &ScheduleSpec, floor: FloorChoice) -> FloorFit {
        fit(
            gaps,
            &model(std::slice::from_ref(spec), floor, None),
            1,
            0.01,
        )
        .unwrap()
        .unwrap()
    }

    fn by<'a>(f: &'a FloorFit, name: &str) -> &'a ModelFit {
        f.fits.iter().find(|m| m.model == name).unwrap()
    }

    #[test]
    fn poisson_through_a_floor_fits_the_perfect_sender_not_the_plain_model() {
        let spec = poisson(500_000.0);
        let gaps = capture(&spec, 300_001, Some(PATH), 30, 7);
        let f = fit_of(&gaps, &spec, FloorChoice::Given(PATH));
        assert!(by(&f, "perfect_sender").consistent, "{f:#?}");
        assert!(!by(&f, "plain").consistent, "{f:#?}");
        assert!(!by(&f, "naive_clamp").consistent, "{f:#?}");
        assert!(
            f.verdict
                .starts_with("consistent with model as a perfect sender"),
            "{}",
            f.verdict
        );
        assert!((f.share_at_floor - by(&f, "perfect_sender").share_at_floor).abs() < 0.01);
    }

    #[test]
    fn plain_poisson_fits_the_plain_model() {
        let spec = poisson(10_000.0);
        let gaps = capture(&spec, 100_001, None, 0, 3);
        let f = fit_of(
            &gaps,
            &spec,
            FloorChoice::Given(PathFloor {
                handover_ns: 1,
                spacing_ns: 1,
            }),
        );
        assert!(by(&f, "plain").consistent, "{f:#?}");
    }

    #[test]
    fn constant_gaps_fit_no_poisson() {
        let cbr = ScheduleSpec {
            rate: Rate::Pps(100_000.0),
            ..ScheduleSpec::default()
        };
        let gaps = capture(&cbr, 100_001, None, 20, 5);
        let f = fit_of(&gaps, &poisson(100_000.0), FloorChoice::Given(PATH));
        assert!(f.fits.iter().all(|m| !m.consistent), "{f:#?}");
        assert!(f.verdict.starts_with("NOT consistent"), "{}", f.verdict);
    }

    #[test]
    fn the_floor_is_estimated_from_the_capture() {
        let spec = poisson(500_000.0);
        let gaps = capture(&spec, 300_001, Some(PATH), 30, 11);
        let f = estimate_floor(&gaps).unwrap();
        assert!(f.spacing_ns.abs_diff(900) <= 90, "{f:?}");
        assert!(f.handover_ns.abs_diff(2_300) <= 230, "{f:?}");
        let fitted = fit_of(&gaps, &spec, FloorChoice::Auto);
        assert!(fitted.floor_estimated);
    }

    #[test]
    fn bursts_through_a_floor_fit_the_perfect_sender() {
        let spec = ScheduleSpec {
            rate: Rate::Pps(10_000_000.0),
            pattern: Pattern::Burst {
                packets: 32,
                intra_gap_ns: None,
                inter_burst_gap_ns: 100_000,
            },
            ..ScheduleSpec::default()
        };
        let gaps = capture(&spec, 64_001, Some(PATH), 20, 13);
        let f = fit_of(&gaps, &spec, FloorChoice::Given(PATH));
        assert!(by(&f, "perfect_sender").consistent, "{f:#?}");
        assert!(!by(&f, "plain").consistent, "{f:#?}");
    }

    #[test]
    fn flows_on_one_port_are_merged_with_seeds_of_their_own() {
        // Two Poisson flows at 50 kpps merge into one at 100 kpps: mean gap 10 µs, and
        // exponential (a shared seed would stack every departure on its twin's, gap 0).
        let flows = [poisson(50_000.0), poisson(50_000.0)];
        let d = model_deadlines(&flows, 200_001).unwrap();
        let gaps = diffs(&d);
        let mean = gaps.iter().sum::<u64>() as f64 / gaps.len() as f64;
        assert!((mean - 10_000.0).abs() < 100.0, "mean gap {mean}");
        let zero = gaps.partition_point(|&g| g == 0) as f64 / gaps.len() as f64;
        assert!(zero < 0.001, "{zero}");
        let plain = capture(&poisson(100_000.0), 200_001, None, 0, 9);
        assert!(two_sample_statistic(&plain, &gaps, 0) < 0.01);
        // An OTG burst duration keeps its shape and repeats.
        let otg = ScheduleSpec {
            rate: Rate::Pps(1_000_000.0),
            duration: Duration::Bursts {
                bursts: 2,
                packets: 8,
                inter_burst_gap_ns: 50_000,
            },
            ..ScheduleSpec::default()
        };
        let d = model_deadlines(&[otg], 80).unwrap();
        assert_eq!(d.len(), 80);
        let long = diffs(&d).iter().filter(|&&g| g > 40_000).count();
        assert_eq!(long, 9);
    }

    #[test]
    fn extreme_gaps_are_judged_without_overflow() {
        // Gaps from an untrusted capture: zeros, the largest values, and a mix.
        let spec = poisson(1_000.0);
        let mut gaps: Vec<u64> = (0..40)
            .map(|i| if i % 2 == 0 { 0 } else { u64::MAX - i })
            .collect();
        gaps.sort_unstable();
        for floor in [
            FloorChoice::Auto,
            FloorChoice::Given(PathFloor {
                handover_ns: u64::MAX / 2,
                spacing_ns: u64::MAX / 4,
            }),
        ] {
            let f = fit(
                &gaps,
                &model(std::slice::from_ref(&spec), floor, Some(u64::MAX)),
                1,
                0.01,
            )
            .expect("the model draws");
            assert!(f.is_some());
        }
        assert_eq!(
            estimate_floor(&[u64::MAX; 30]).map(|f| f.spacing_ns),
            Some(u64::MAX)
        );
    }

    #[test]
    fn the_tolerance_absorbs_jitter_around_an_atom_but_not_moved_mass() {
        let a = [890, 900, 910, 5_000];
        let b = [900, 900, 900, 5_000];
        assert!(two_sample_statistic(&a, &b, 0) >= 0.25);
        assert_eq!(two_sample_statistic(&a, &b, 100), 0.0);
        let moved = [900, 900, 5_000, 5_000];
        assert!((two_sample_statistic(&a, &moved, 100) - 0.25).abs() < 1e-12);
    }
}
