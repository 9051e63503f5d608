//! Which of a port's flows sends next: the one whose next frame is due first (ties: the
//! lowest flow index, so frames due together leave in the flows' order). The transmit worker
//! scans a handful of flows ([`SCAN_MAX_FLOWS`]); more are kept here, in a binary heap of
//! (deadline, flow): O(log n) per frame, so a port with tens of thousands of flows costs a
//! few comparisons per frame, not a pass over every flow.
//!
//! The heap holds at most one entry per flow and is only told when the flow it just named
//! moves on ([`EarliestFlow::advanced`]); a flow stopped meanwhile (its next deadline gone)
//! leaves a stale entry that is dropped when it reaches the top. So nothing is allocated
//! after the first call.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Up to this many flows a linear scan beats the heap (`bench/run flows`: the heap from 2 to
/// 24 flows sent 0.87–0.95x what the scan did, at 32 flows 0.9–1.05x, at 64 1.5–1.6x).
pub(crate) const SCAN_MAX_FLOWS: usize = 32;

/// The earliest next frame among flows `0..n`, whose next deadlines a caller reads out.
#[derive(Debug, Default)]
pub(crate) struct EarliestFlow {
    heap: BinaryHeap<Reverse<(u64, u32)>>,
    built: bool,
}

impl EarliestFlow {
    /// The flow whose next frame is due first, and its deadline; None when every flow is
    /// done. `next(flow)` is a flow's next deadline (None: done or stopped).
    pub(crate) fn earliest<T>(
        &mut self,
        flows: &[T],
        next: impl Fn(&T) -> Option<u64>,
    ) -> Option<(usize, u64)> {
        if !self.built {
            self.built = true;
            self.heap.reserve_exact(flows.len());
            for (i, f) in flows.iter().enumerate() {
                if let Some(d) = next(f) {
                    self.heap.push(Reverse((d, i as u32)));
                }
            }
        }
        while let Some(&Reverse((d, i))) = self.heap.peek() {
            if next(&flows[i as usize]) == Some(d) {
                return Some((i as usize, d));
            }
            // Stopped since it was queued.
            self.heap.pop();
        }
        None
    }

    /// Flow `i`, the one [`earliest`](Self::earliest) just named, moved on to its next
    /// deadline (None: it is done).
    pub(crate) fn advanced(&mut self, i: usize, next: Option<u64>) {
        match next {
            // Replacing the top in place sifts it down once, instead of a pop and a push.
            Some(d) => {
                if let Some(mut top) = self.heap.peek_mut() {
                    debug_assert_eq!(top.0 .1 as usize, i);
                    *top = Reverse((d, i as u32));
                }
            }
            None => {
                self.heap.pop();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Merges flows given as lists of deadlines, as the worker does, stopping flow
    /// `stop.0` after `stop.1` frames have been taken in all.
    fn merge(flows: &[Vec<u64>], stop: Option<(usize, usize)>) -> Vec<(usize, u64)> {
        let mut pos = vec![0usize; flows.len()];
        let mut stopped = vec![false; flows.len()];
        let mut q = EarliestFlow::default();
        let mut out = Vec::new();
        let next = |pos: &[usize], stopped: &[bool], i: usize| {
            flows[i].get(pos[i]).copied().filter(|_| !stopped[i])
        };
        loop {
            if let Some((s, after)) = stop {
                if out.len() == after && s < flows.len() {
                    stopped[s] = true;
                }
            }
            let ids: Vec<usize> = (0..flows.len()).collect();
            let Some((i, d)) = q.earliest(&ids, |&i| next(&pos, &stopped, i)) else {
                break;
            };
            out.push((i, d));
            pos[i] += 1;
            q.advanced(i, next(&pos, &stopped, i));
        }
        out
    }

    /// The same by scanning every flow for every frame (the worker's old way).
    fn scan(flows: &[Vec<u64>], stop: Option<(usize, usize)>) -> Vec<(usize, u64)> {
        let mut pos = vec![0usize; flows.len()];
        let mut stopped = vec![false; flows.len()];
        let mut out = Vec::new();
        loop {
            if let Some((s, after)) = stop {
                if out.len() == after && s < flows.len() {
                    stopped[s] = true;
                }
            }
            let mut best: Option<(usize, u64)> = None;
            for (i, f) in flows.iter().enumerate() {
                if let Some(&d) = f.get(pos[i]).filter(|_| !stopped[i]) {
                    if best.is_none_or(|(_, bd)| d < bd) {
                        best = Some((i, d));
                    }
                }
            }
            let Some((i, d)) = best else { break };
            out.push((i, d));
            pos[i] += 1;
        }
        out
    }

    proptest! {
        #[test]
        fn the_heap_merges_as_a_scan_of_every_flow_does(
            gaps in prop::collection::vec(prop::collection::vec(0u64..50, 0..30), 0..40),
            stop in prop::option::of((0usize..40, 0usize..200)),
        ) {
            // Each flow's deadlines never go back; equal deadlines across flows are common.
            let flows: Vec<Vec<u64>> = gaps
                .iter()
                .map(|g| g.iter().scan(0u64, |t, d| { *t += d; Some(*t) }).collect())
                .collect();
            prop_assert_eq!(merge(&flows, stop), scan(&flows, stop));
        }
    }

    #[test]
    fn ties_go_to_the_lowest_flow() {
        // 20 flows, each with two frames due at 5 and one at 9: by deadline,
        // then by flow, as the scan merged them.
        let flows: Vec<Vec<u64>> = (0..20).map(|_| vec![5, 5, 9]).collect();
        let want: Vec<(usize, u64)> = (0..20)
            .flat_map(|i| [(i, 5), (i, 5)])
            .chain((0..20).map(|i| (i, 9)))
            .collect();
        assert_eq!(merge(&flows, None), want);
    }
}
