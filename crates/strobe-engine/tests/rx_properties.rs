//! The receive tracker against a reference model on random loss, duplication and
//! reordering, and on arbitrary bytes (it must never panic).

use proptest::prelude::*;
use std::collections::HashSet;
use strobe_engine::rx::{RxClass, RxTracker};
use strobe_wire::trailer::{Trailer, LEN};

const TAG: u8 = 0x42;

fn frame(flow_id: u16, seq: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0x5A; len];
    let at = len - LEN;
    let dst: &mut [u8; LEN] = (&mut f[at..]).try_into().unwrap();
    Trailer::sent(TAG, flow_id, seq, 0).write(dst);
    f
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn never_panics_on_any_bytes(
        mut data in proptest::collection::vec(any::<u8>(), 0..200),
        wire_len in 0u32..300,
        flows in 0usize..4,
        ours in any::<bool>(),
        start in proptest::option::of(any::<u64>()),
        rx_ns in proptest::option::of(any::<u64>()),
    ) {
        // Half the cases look like this run's frames, to reach the flow and stamp checks.
        if ours && data.len() >= LEN {
            let at = data.len() - LEN;
            data[at] = b'S';
            data[at + 1] = TAG;
        }
        let mut t = RxTracker::new(flows, TAG);
        if let Some(start) = start {
            t.check_stamps_from(start);
        }
        let _ = t.on_frame(&data, wire_len, rx_ns);
        let _ = t.report(Some(&[0, 1, u64::MAX]));
    }

    #[test]
    fn matches_a_reference_model(
        n in 1u32..3000,
        drops in proptest::collection::vec(any::<u16>(), 0..50),
        dups in proptest::collection::vec(any::<u16>(), 0..50),
        swaps in proptest::collection::vec((any::<u16>(), 1usize..8), 0..50),
    ) {
        // Build the arrival order: 0..n minus drops, plus duplicates placed right after
        // the original, then local swaps (reordering by up to 7 positions).
        let dropped: HashSet<u32> = drops.iter().map(|&d| d as u32 % n).collect();
        let duplicated: HashSet<u32> = dups.iter().map(|&d| d as u32 % n).collect();
        let mut arrivals = Vec::new();
        for s in 0..n {
            if dropped.contains(&s) { continue; }
            arrivals.push(s);
            if duplicated.contains(&s) { arrivals.push(s); }
        }
        for (at, by) in swaps {
            if arrivals.len() > by {
                let i = at as usize % (arrivals.len() - by);
                arrivals.swap(i, i + by);
            }
        }
        // Reference: reordered = below the max so far and not seen before.
        let (mut seen, mut max, mut reordered, mut duplicates) = (HashSet::new(), None::<u32>, 0u64, 0u64);
        for &s in &arrivals {
            if !seen.insert(s) { duplicates += 1; continue; }
            if max.is_some_and(|m| s < m) { reordered += 1; }
            max = max.max(Some(s));
        }
        let mut t = RxTracker::new(1, TAG);
        for &s in &arrivals {
            let f = frame(0, s, 64);
            prop_assert!(matches!(t.on_frame(&f, 64, Some(s as u64)), RxClass::Flow(_)));
        }
        let r = &t.report(Some(&[n as u64]))[0];
        prop_assert_eq!(r.counters.frames, arrivals.len() as u64);
        prop_assert_eq!(r.counters.unique, seen.len() as u64);
        prop_assert_eq!(r.counters.duplicates, duplicates);
        prop_assert_eq!(r.counters.reordered, reordered);
        prop_assert_eq!(r.lost, Some(n as u64 - seen.len() as u64));
        prop_assert_eq!(r.counters.late, 0);
    }
}
