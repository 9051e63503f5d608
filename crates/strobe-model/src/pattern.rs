//! Field value patterns (OTG `x-field-pattern` semantics) and the counter-based random
//! generator behind them.
//!
//! Every pattern is random-access: the value carried by packet `j` is a pure function of
//! `j`, so any number of workers can build any packet of a flow without coordination, and a
//! run can be reproduced exactly from its scenario file.

/// Golden-ratio increment of splitmix64; makes consecutive counters land far apart.
const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// A field's value sequence, OTG semantics: packet `j` carries `values[j % len]`,
/// `start ± (j % count)·step` (wrapping modulo 2^bit_len), or a seeded random value.
/// Every field cycles on its own; fields are not combined as a cartesian product.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// The same value in every packet.
    Value(u128),
    /// Packet `j` carries `values[j % len]`.
    Values(Vec<u128>),
    /// Packet `j` carries `start + (j % count)·step`, wrapping at the field width.
    Increment { start: u128, step: u128, count: u64 },
    /// Packet `j` carries `start - (j % count)·step`, wrapping at the field width.
    Decrement { start: u128, step: u128, count: u64 },
    /// Packet `j` carries `random_in(seed, j % count, min, max)`; `count` 0 never repeats.
    Random {
        min: u128,
        max: u128,
        seed: u64,
        count: u64,
    },
}

impl Pattern {
    /// The value of packet `j` for a field `bit_len` bits wide. This is the reference
    /// semantics every fast path must agree with. O(1).
    ///
    /// Degenerate patterns that validation rejects (an empty `Values`, a zero `count`
    /// on a counter) behave as if they had one element, so this never panics.
    pub fn value_at(&self, j: u64, bit_len: u32) -> u128 {
        let value = match self {
            Pattern::Value(v) => *v,
            Pattern::Values(values) => {
                if values.is_empty() {
                    0
                } else {
                    values[(j % values.len() as u64) as usize]
                }
            }
            Pattern::Increment { start, step, count } => {
                start.wrapping_add(step.wrapping_mul(u128::from(j % (*count).max(1))))
            }
            Pattern::Decrement { start, step, count } => {
                start.wrapping_sub(step.wrapping_mul(u128::from(j % (*count).max(1))))
            }
            Pattern::Random {
                min,
                max,
                seed,
                count,
            } => {
                let k = if *count == 0 { j } else { j % count };
                random_in(*seed, k, *min, *max)
            }
        };
        // 2^bit_len divides 2^128, so masking after wrapping u128 arithmetic is exactly
        // arithmetic modulo 2^bit_len.
        value & width_mask(bit_len)
    }

    /// Number of packets after which the sequence repeats: 1, `len`, `count`, `count`
    /// (a never-repeating random pattern reports `u64::MAX`).
    pub fn period(&self) -> u64 {
        match self {
            Pattern::Value(_) => 1,
            Pattern::Values(values) => (values.len() as u64).max(1),
            Pattern::Increment { count, .. } | Pattern::Decrement { count, .. } => (*count).max(1),
            Pattern::Random { count: 0, .. } => u64::MAX,
            Pattern::Random { count, .. } => *count,
        }
    }

    /// True when every packet carries the same value, so the field can be written once.
    pub fn is_constant(&self) -> bool {
        match self {
            Pattern::Value(_) => true,
            Pattern::Values(values) => values.windows(2).all(|w| w[0] == w[1]),
            Pattern::Increment { step, count, .. } | Pattern::Decrement { step, count, .. } => {
                *step == 0 || *count <= 1
            }
            Pattern::Random {
                min, max, count, ..
            } => min == max || *count == 1,
        }
    }
}

/// All-ones mask for a field `bit_len` bits wide (0 and anything ≥ 128 mean the full u128).
pub fn width_mask(bit_len: u32) -> u128 {
    if bit_len == 0 || bit_len >= 128 {
        u128::MAX
    } else {
        (1u128 << bit_len) - 1
    }
}

/// Counter-based random word: the splitmix64 finaliser applied to
/// `seed + (k + 1)·0x9E3779B97F4A7C15` (wrapping). Random-access and reproducible: the
/// `k`-th word of a stream needs no state and no earlier words.
pub fn random_word(seed: u64, k: u64) -> u64 {
    let mut z = seed.wrapping_add(k.wrapping_add(1).wrapping_mul(GOLDEN_GAMMA));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The `k`-th value of stream `seed`, uniform in `[min, max]` (bounds swapped if reversed).
///
/// Spans up to 2^64 use one word and Lemire's multiply-shift (no division, bias below
/// 2^-64 per value). Wider spans, which only 128-bit fields can have, combine words `2k`
/// and `2k + 1` and reduce modulo the span.
pub fn random_in(seed: u64, k: u64, min: u128, max: u128) -> u128 {
    let (lo, hi) = if min <= max { (min, max) } else { (max, min) };
    let span_minus_one = hi - lo;
    if span_minus_one <= u128::from(u64::MAX) {
        let span = span_minus_one + 1;
        let r = u128::from(random_word(seed, k));
        return lo + ((r * span) >> 64);
    }
    let wide = (u128::from(random_word(seed, k.wrapping_mul(2))) << 64)
        | u128::from(random_word(seed, k.wrapping_mul(2).wrapping_add(1)));
    match span_minus_one.checked_add(1) {
        Some(span) => lo + wide % span,
        // The full 128-bit range: every word is already uniform over it.
        None => wide,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_is_constant_and_masked() {
        let p = Pattern::Value(0x1_23);
        assert_eq!(p.value_at(0, 16), 0x123);
        assert_eq!(p.value_at(99, 16), 0x123);
        assert_eq!(p.value_at(5, 8), 0x23);
        assert_eq!(p.period(), 1);
        assert!(p.is_constant());
    }

    #[test]
    fn values_cycle_in_order() {
        let p = Pattern::Values(vec![10, 20, 30]);
        let got: Vec<u128> = (0..7).map(|j| p.value_at(j, 16)).collect();
        assert_eq!(got, [10, 20, 30, 10, 20, 30, 10]);
        assert_eq!(p.period(), 3);
        assert!(!p.is_constant());
        assert!(Pattern::Values(vec![4, 4]).is_constant());
    }

    #[test]
    fn increment_cycles_every_count_packets() {
        let p = Pattern::Increment {
            start: 100,
            step: 5,
            count: 3,
        };
        let got: Vec<u128> = (0..7).map(|j| p.value_at(j, 16)).collect();
        assert_eq!(got, [100, 105, 110, 100, 105, 110, 100]);
        assert_eq!(p.period(), 3);
        assert!(!p.is_constant());
    }

    #[test]
    fn increment_wraps_at_the_field_width() {
        let p = Pattern::Increment {
            start: 0xFFFE,
            step: 1,
            count: 4,
        };
        let got: Vec<u128> = (0..4).map(|j| p.value_at(j, 16)).collect();
        assert_eq!(got, [0xFFFE, 0xFFFF, 0, 1]);
        // An IPv4 address counting past 255.255.255.255.
        let ip = Pattern::Increment {
            start: 0xFFFF_FFFF,
            step: 0x100,
            count: 2,
        };
        assert_eq!(ip.value_at(1, 32), 0xFF);
        // A 128-bit field wraps modulo 2^128.
        let v6 = Pattern::Increment {
            start: u128::MAX,
            step: 2,
            count: 2,
        };
        assert_eq!(v6.value_at(1, 128), 1);
    }

    #[test]
    fn decrement_wraps_below_zero() {
        let p = Pattern::Decrement {
            start: 1,
            step: 1,
            count: 3,
        };
        let got: Vec<u128> = (0..4).map(|j| p.value_at(j, 12)).collect();
        assert_eq!(got, [1, 0, 0xFFF, 1]);
        assert_eq!(p.period(), 3);
    }

    #[test]
    fn counters_with_one_element_or_zero_step_are_constant() {
        let one = Pattern::Increment {
            start: 7,
            step: 3,
            count: 1,
        };
        assert!(one.is_constant());
        assert_eq!(one.value_at(5, 8), 7);
        let flat = Pattern::Decrement {
            start: 7,
            step: 0,
            count: 9,
        };
        assert!(flat.is_constant());
    }

    #[test]
    fn random_word_is_splitmix64() {
        // splitmix64 seeded with 0 produces this well-known first output.
        assert_eq!(random_word(0, 0), 0xE220_A839_7B1D_CDAF);
        assert_eq!(random_word(0, 1), 0x6E78_9E6A_A1B9_65F4);
        assert_ne!(random_word(1, 0), random_word(2, 0));
    }

    #[test]
    fn random_is_reproducible_bounded_and_spread() {
        let p = Pattern::Random {
            min: 1024,
            max: 65535,
            seed: 7,
            count: 0,
        };
        let first: Vec<u128> = (0..1000).map(|j| p.value_at(j, 16)).collect();
        let again: Vec<u128> = (0..1000).map(|j| p.value_at(j, 16)).collect();
        assert_eq!(first, again);
        assert!(first.iter().all(|v| (1024..=65535).contains(v)));
        let mut distinct = first.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert!(
            distinct.len() > 950,
            "only {} distinct values",
            distinct.len()
        );
        assert!(first.iter().any(|v| *v < 20_000) && first.iter().any(|v| *v > 50_000));
        assert_eq!(p.period(), u64::MAX);
        let other_seed = Pattern::Random {
            min: 1024,
            max: 65535,
            seed: 8,
            count: 0,
        };
        assert_ne!(
            first[..10],
            (0..10)
                .map(|j| other_seed.value_at(j, 16))
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn random_count_cycles() {
        let p = Pattern::Random {
            min: 0,
            max: u128::from(u32::MAX),
            seed: 3,
            count: 4,
        };
        for j in 0..4 {
            assert_eq!(p.value_at(j, 32), p.value_at(j + 4, 32));
            assert_eq!(p.value_at(j, 32), p.value_at(j + 400, 32));
        }
        assert_ne!(p.value_at(0, 32), p.value_at(1, 32));
        assert_eq!(p.period(), 4);
    }

    #[test]
    fn random_in_hits_both_ends_of_a_small_range() {
        let got: Vec<u128> = (0..200).map(|k| random_in(11, k, 5, 6)).collect();
        assert!(got.contains(&5) && got.contains(&6));
        assert!(got.iter().all(|v| *v == 5 || *v == 6));
        assert_eq!(random_in(1, 0, 9, 9), 9);
        // Reversed bounds are accepted.
        assert!((5..=6).contains(&random_in(11, 0, 6, 5)));
    }

    #[test]
    fn random_in_handles_wide_spans() {
        let min = 1u128 << 100;
        let max = (1u128 << 101) - 1;
        let got: Vec<u128> = (0..100).map(|k| random_in(5, k, min, max)).collect();
        assert!(got.iter().all(|v| (min..=max).contains(v)));
        assert!(got.iter().any(|v| *v >= min + (1u128 << 99)));
        assert!(got.iter().any(|v| *v < min + (1u128 << 99)));
        // The full range uses both words unreduced.
        let full = random_in(5, 3, 0, u128::MAX);
        assert_eq!(
            full,
            (u128::from(random_word(5, 6)) << 64) | u128::from(random_word(5, 7))
        );
    }
}
