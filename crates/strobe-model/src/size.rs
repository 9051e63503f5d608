//! Frame size patterns (OTG `Flow.Size`). Sizes include the 4-byte FCS.

use crate::pattern::random_in;

/// Frame sizes in bytes, INCLUDING the 4-byte FCS (OTG convention).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SizeSpec {
    /// Every frame has this size.
    Fixed(u32),
    /// `start, start+step, …` up to the last value not above `end`, then again from `start`.
    Increment { start: u32, end: u32, step: u32 },
    /// Uniform in `[min, max]`.
    Random { min: u32, max: u32 },
    /// `(size, weight)` pairs: each size gets `weight / Σweights` of the frames.
    WeightPairs(Vec<(u32, u32)>),
}

impl SizeSpec {
    /// The simple IMIX: 7 × 64, 4 × 570, 1 × 1518 bytes.
    pub fn imix() -> Self {
        SizeSpec::WeightPairs(vec![(64, 7), (570, 4), (1518, 1)])
    }

    /// Every size the spec can produce, sorted ascending, without duplicates.
    pub fn distinct_sizes(&self) -> Vec<u32> {
        let mut sizes: Vec<u32> = match self {
            SizeSpec::Fixed(size) => vec![*size],
            SizeSpec::Increment { start, end, step } => {
                let step = (*step).max(1) as usize;
                (*start..=(*end).max(*start)).step_by(step).collect()
            }
            SizeSpec::Random { min, max } => ((*min).min(*max)..=(*max).max(*min)).collect(),
            SizeSpec::WeightPairs(pairs) => pairs
                .iter()
                .filter(|(_, weight)| *weight > 0)
                .map(|(size, _)| *size)
                .collect(),
        };
        sizes.sort_unstable();
        sizes.dedup();
        sizes
    }

    /// Smallest size produced.
    pub fn min(&self) -> u32 {
        match self {
            SizeSpec::Fixed(size) => *size,
            SizeSpec::Increment { start, .. } => *start,
            SizeSpec::Random { min, max } => (*min).min(*max),
            SizeSpec::WeightPairs(_) => self.distinct_sizes().first().copied().unwrap_or(0),
        }
    }

    /// Largest size produced (for an increment: the last step not above `end`).
    pub fn max(&self) -> u32 {
        match self {
            SizeSpec::Fixed(size) => *size,
            SizeSpec::Increment { start, end, step } => {
                if end <= start {
                    *start
                } else {
                    let step = (*step).max(1);
                    start + (end - start) / step * step
                }
            }
            SizeSpec::Random { min, max } => (*min).max(*max),
            SizeSpec::WeightPairs(_) => self.distinct_sizes().last().copied().unwrap_or(0),
        }
    }

    /// Frames after which the sequence from [`SizeSpec::sequence`] starts over, from any
    /// point of it: 1 for one size, the sizes of an increment, the total weight of weight
    /// pairs over their common divisor (smooth weighted round robin gives each size its
    /// weight in every such block, and its credits return to where they were; weights
    /// scaled alike give the same sequence). None for random sizes.
    pub fn period(&self) -> Option<u64> {
        match self {
            SizeSpec::Fixed(_) => Some(1),
            SizeSpec::Random { min, max } if min == max => Some(1),
            SizeSpec::Random { .. } => None,
            SizeSpec::Increment { .. } => Some(self.distinct_sizes().len() as u64),
            SizeSpec::WeightPairs(pairs) => {
                let weights = pairs.iter().map(|&(_, w)| u64::from(w)).filter(|&w| w > 0);
                let divisor = weights.clone().fold(0, gcd).max(1);
                Some((weights.sum::<u64>() / divisor).max(1))
            }
        }
    }

    /// Mean frame size over a long run, FCS included.
    pub fn mean(&self) -> f64 {
        match self {
            SizeSpec::Fixed(size) => f64::from(*size),
            SizeSpec::Increment { .. } | SizeSpec::Random { .. } => {
                (f64::from(self.min()) + f64::from(self.max())) / 2.0
            }
            SizeSpec::WeightPairs(pairs) => {
                let total: f64 = pairs.iter().map(|(_, w)| f64::from(*w)).sum();
                if total == 0.0 {
                    return 0.0;
                }
                pairs
                    .iter()
                    .map(|(size, weight)| f64::from(*size) * f64::from(*weight))
                    .sum::<f64>()
                    / total
            }
        }
    }

    /// The per-packet size generator. `seed` only matters for `Random`.
    pub fn sequence(&self, seed: u64) -> SizeSequence {
        let state = match self {
            SizeSpec::Fixed(size) => SequenceState::Fixed(*size),
            SizeSpec::Increment { start, step, .. } => SequenceState::Increment {
                start: *start,
                last: self.max(),
                step: (*step).max(1),
                next: *start,
            },
            SizeSpec::Random { .. } => SequenceState::Random {
                min: self.min(),
                max: self.max(),
                seed,
                k: 0,
            },
            SizeSpec::WeightPairs(pairs) => {
                let pairs: Vec<(u32, u32)> =
                    pairs.iter().copied().filter(|(_, w)| *w > 0).collect();
                if pairs.is_empty() {
                    SequenceState::Fixed(0)
                } else {
                    SequenceState::Weighted {
                        total: pairs.iter().map(|(_, w)| i64::from(*w)).sum(),
                        current: vec![0; pairs.len()],
                        pairs,
                    }
                }
            }
        };
        SizeSequence { state }
    }
}

/// Frame sizes one packet at a time; `next_size` never allocates.
///
/// `WeightPairs` uses smooth weighted round-robin: before each pick every size's credit
/// grows by its weight, the size with the most credit (the earliest listed on a tie) is
/// sent and pays back `Σweights`. Every block of `Σweights` consecutive packets,
/// starting from the first, therefore holds each size exactly `weight` times, and the
/// sizes are interleaved rather than sent in runs (IMIX: 64 570 64 64 570 64 …).
#[derive(Clone, Debug)]
pub struct SizeSequence {
    state: SequenceState,
}

#[derive(Clone, Debug)]
enum SequenceState {
    Fixed(u32),
    Increment {
        start: u32,
        last: u32,
        step: u32,
        next: u32,
    },
    Random {
        min: u32,
        max: u32,
        seed: u64,
        k: u64,
    },
    Weighted {
        pairs: Vec<(u32, u32)>,
        current: Vec<i64>,
        total: i64,
    },
}

impl SizeSequence {
    /// The size of the next frame, FCS included.
    pub fn next_size(&mut self) -> u32 {
        match &mut self.state {
            SequenceState::Fixed(size) => *size,
            SequenceState::Increment {
                start,
                last,
                step,
                next,
            } => {
                let size = *next;
                *next = if size >= *last { *start } else { size + *step };
                size
            }
            SequenceState::Random { min, max, seed, k } => {
                let size = random_in(*seed, *k, u128::from(*min), u128::from(*max));
                *k += 1;
                // random_in stays within [min, max], both of which are u32.
                size as u32
            }
            SequenceState::Weighted {
                pairs,
                current,
                total,
            } => {
                let mut best = 0;
                let mut best_credit = i64::MIN;
                for (i, (credit, (_, weight))) in current.iter_mut().zip(pairs.iter()).enumerate() {
                    *credit += i64::from(*weight);
                    if *credit > best_credit {
                        best = i;
                        best_credit = *credit;
                    }
                }
                current[best] -= *total;
                pairs[best].0
            }
        }
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take(spec: &SizeSpec, seed: u64, n: usize) -> Vec<u32> {
        let mut seq = spec.sequence(seed);
        (0..n).map(|_| seq.next_size()).collect()
    }

    #[test]
    fn sequences_repeat_after_their_period_from_any_point() {
        let specs = [
            SizeSpec::Fixed(64),
            SizeSpec::Increment {
                start: 64,
                end: 1000,
                step: 100,
            },
            SizeSpec::imix(),
            SizeSpec::WeightPairs(vec![(64, 3), (128, 0), (256, 5), (1500, 2)]),
            SizeSpec::WeightPairs(vec![(64, 7000), (570, 4000), (1518, 1000)]),
            SizeSpec::Random { min: 100, max: 100 },
        ];
        for spec in &specs {
            let period = spec.period().unwrap() as usize;
            let sizes = take(spec, 0, 5 * period + 7);
            for j in 0..sizes.len() - period {
                assert_eq!(sizes[j], sizes[j + period], "{spec:?} at {j}");
            }
        }
        assert_eq!(SizeSpec::imix().period(), Some(12));
        assert_eq!(
            SizeSpec::WeightPairs(vec![(64, 7000), (570, 4000), (1518, 1000)]).period(),
            Some(12),
            "weights over their common divisor"
        );
        assert_eq!(SizeSpec::Random { min: 64, max: 65 }.period(), None);
    }

    #[test]
    fn imix_has_exact_proportions_in_every_block_of_twelve() {
        let imix = SizeSpec::imix();
        let sizes = take(&imix, 0, 12 * 50);
        for block in sizes.chunks(12) {
            let count = |s: u32| block.iter().filter(|x| **x == s).count();
            assert_eq!((count(64), count(570), count(1518)), (7, 4, 1), "{block:?}");
        }
        // Interleaved, not sent in runs of one size.
        assert_eq!(&sizes[..4], &[64, 570, 64, 64]);
    }

    #[test]
    fn custom_weights_keep_proportions_and_skip_zero_weights() {
        let spec = SizeSpec::WeightPairs(vec![(100, 3), (200, 0), (300, 2)]);
        for block in take(&spec, 0, 50).chunks(5) {
            assert_eq!(block.iter().filter(|s| **s == 100).count(), 3);
            assert_eq!(block.iter().filter(|s| **s == 300).count(), 2);
        }
        assert_eq!(spec.distinct_sizes(), [100, 300]);
        assert_eq!((spec.min(), spec.max()), (100, 300));
        assert!((spec.mean() - 180.0).abs() < 1e-9);
    }

    #[test]
    fn imix_statistics() {
        let imix = SizeSpec::imix();
        assert_eq!(imix.distinct_sizes(), [64, 570, 1518]);
        assert_eq!((imix.min(), imix.max()), (64, 1518));
        let expected = (64.0 * 7.0 + 570.0 * 4.0 + 1518.0) / 12.0;
        assert!((imix.mean() - expected).abs() < 1e-9);
    }

    #[test]
    fn increment_cycles_from_start_to_the_last_step() {
        let spec = SizeSpec::Increment {
            start: 64,
            end: 100,
            step: 16,
        };
        assert_eq!(take(&spec, 0, 7), [64, 80, 96, 64, 80, 96, 64]);
        assert_eq!(spec.distinct_sizes(), [64, 80, 96]);
        assert_eq!((spec.min(), spec.max()), (64, 96));
        assert!((spec.mean() - 80.0).abs() < 1e-9);
        let exact = SizeSpec::Increment {
            start: 64,
            end: 66,
            step: 1,
        };
        assert_eq!(take(&exact, 0, 4), [64, 65, 66, 64]);
    }

    #[test]
    fn random_sizes_stay_in_bounds_and_are_reproducible() {
        let spec = SizeSpec::Random { min: 64, max: 1518 };
        let a = take(&spec, 9, 2000);
        assert_eq!(a, take(&spec, 9, 2000));
        assert_ne!(a, take(&spec, 10, 2000));
        assert!(a.iter().all(|s| (64..=1518).contains(s)));
        assert!(a.iter().any(|s| *s < 200) && a.iter().any(|s| *s > 1400));
        assert_eq!(spec.distinct_sizes().len(), 1518 - 64 + 1);
        assert!((spec.mean() - 791.0).abs() < 1e-9);
    }

    #[test]
    fn fixed_is_constant() {
        let spec = SizeSpec::Fixed(128);
        assert_eq!(take(&spec, 0, 3), [128, 128, 128]);
        assert_eq!(spec.distinct_sizes(), [128]);
        assert_eq!((spec.min(), spec.max()), (128, 128));
    }
}
