//! Latency per time interval, for HdrHistogram interval logs: receive workers send their
//! cumulative per-flow histograms at every interval boundary; the run's watcher turns them
//! into per-interval differences, adds up the parts of each flow (receive ports, sub-flows)
//! and keeps each interval compressed (V2 + deflate, a few KiB), so a long run costs little
//! memory and the receive workers only copy a histogram once per interval.

use std::collections::{BTreeMap, HashMap};

use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

use crate::latency::new_histogram;

/// A receive worker's cumulative histogram of one flow at the end of interval `index`.
#[derive(Debug)]
pub struct Snapshot {
    /// Which receive worker sent it.
    pub worker: usize,
    pub flow_id: u16,
    pub index: u64,
    pub cumulative: Histogram<u64>,
}

/// One flow's latencies during one interval, compressed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncodedInterval {
    /// The scenario's flow id.
    pub flow_id: u16,
    /// Start of the interval, CLOCK_REALTIME ns.
    pub start_ns: u64,
    pub duration_ns: u64,
    /// The interval's histogram, V2 compressed (HdrHistogram's own encoding).
    pub encoded: Vec<u8>,
}

/// Turns snapshots into finished, compressed intervals.
pub struct IntervalCollector {
    origin_ns: u64,
    interval_ns: u64,
    /// flow id (as sent) -> scenario flow id.
    parent: Vec<u16>,
    previous: HashMap<(usize, u16), Histogram<u64>>,
    /// (interval index, scenario flow id) -> the sum of its parts so far.
    open: BTreeMap<(u64, u16), Histogram<u64>>,
    newest_index: u64,
    done: Vec<EncodedInterval>,
    serializer: V2DeflateSerializer,
}

impl IntervalCollector {
    /// Intervals of `interval_ns` starting at `origin_ns` (CLOCK_REALTIME); `parent` maps a
    /// sent flow id to the scenario's.
    pub fn new(origin_ns: u64, interval_ns: u64, parent: Vec<u16>) -> Self {
        IntervalCollector {
            origin_ns,
            interval_ns: interval_ns.max(1),
            parent,
            previous: HashMap::new(),
            open: BTreeMap::new(),
            newest_index: 0,
            done: Vec::new(),
            serializer: V2DeflateSerializer::new(),
        }
    }

    /// Takes one snapshot; intervals two or more behind the newest seen are finished (every
    /// worker has long passed them).
    pub fn add(&mut self, s: Snapshot) {
        let key = (s.worker, s.flow_id);
        let mut delta = s.cumulative.clone();
        if let Some(prev) = self.previous.get(&key) {
            // Same bounds, and counts only grow: subtracting cannot fail.
            let _ = delta.subtract(prev);
        }
        self.previous.insert(key, s.cumulative);
        let flow = self
            .parent
            .get(s.flow_id as usize)
            .copied()
            .unwrap_or(s.flow_id);
        let _ = self
            .open
            .entry((s.index, flow))
            .or_insert_with(new_histogram)
            .add(&delta);
        self.newest_index = self.newest_index.max(s.index);
        self.finish_before(self.newest_index.saturating_sub(1));
    }

    fn finish_before(&mut self, index: u64) {
        while let Some((&(i, flow), _)) = self.open.first_key_value() {
            if i >= index {
                break;
            }
            let hist = self.open.remove(&(i, flow)).expect("the first key exists");
            if hist.is_empty() {
                continue;
            }
            let mut encoded = Vec::new();
            if self.serializer.serialize(&hist, &mut encoded).is_ok() {
                self.done.push(EncodedInterval {
                    flow_id: flow,
                    start_ns: self.origin_ns + i * self.interval_ns,
                    duration_ns: self.interval_ns,
                    encoded,
                });
            }
        }
    }

    /// The intervals finished so far, handed out (a live view): the report will not hold
    /// them.
    pub fn take_finished(&mut self) -> Vec<EncodedInterval> {
        std::mem::take(&mut self.done)
    }

    pub fn extend(&mut self, snapshots: impl Iterator<Item = Snapshot>) {
        for s in snapshots {
            self.add(s);
        }
    }

    /// Every interval, in time order, once all snapshots are in.
    pub fn finish(mut self) -> Vec<EncodedInterval> {
        self.finish_before(u64::MAX);
        self.done.sort_by_key(|i| (i.start_ns, i.flow_id));
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::Deserializer;

    fn cumulative(values: &[u64]) -> Histogram<u64> {
        let mut h = new_histogram();
        for &v in values {
            h.record(v).unwrap();
        }
        h
    }

    fn decode(i: &EncodedInterval) -> Histogram<u64> {
        Deserializer::new()
            .deserialize(&mut i.encoded.as_slice())
            .unwrap()
    }

    #[test]
    fn differences_per_interval_summed_over_workers_and_sub_flows() {
        // Flow 2 is a sub-flow of flow 0; two receive workers.
        let mut c = IntervalCollector::new(1_000, 100, vec![0, 1, 0]);
        let snap = |worker, flow_id, index, values: &[u64]| Snapshot {
            worker,
            flow_id,
            index,
            cumulative: cumulative(values),
        };
        c.add(snap(0, 0, 0, &[10, 10]));
        c.add(snap(1, 2, 0, &[30]));
        c.add(snap(0, 1, 0, &[5]));
        // Interval 1: worker 0's flow 0 adds one frame at 20; flow 1 adds nothing.
        c.add(snap(0, 0, 1, &[10, 10, 20]));
        c.add(snap(0, 1, 1, &[5]));
        c.add(snap(1, 2, 1, &[30, 40, 40]));
        let out = c.finish();
        let summary: Vec<(u16, u64, u64, u64)> = out
            .iter()
            .map(|i| {
                let h = decode(i);
                (i.flow_id, i.start_ns, h.len(), h.max())
            })
            .collect();
        assert_eq!(
            summary,
            vec![(0, 1_000, 3, 30), (1, 1_000, 1, 5), (0, 1_100, 3, 40)],
            "an empty interval (flow 1, interval 1) is left out"
        );
        assert!(out.iter().all(|i| i.duration_ns == 100));
    }
}
