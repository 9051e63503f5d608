//! Counters shared between the workers and whoever watches a run (status lines, progress).
//!
//! Workers own their exact counters and publish copies here with relaxed atomic stores,
//! once per batch (TX) or every few hundred frames (RX): the watcher sees values at most a
//! batch old, and the hot path never contends on a shared cache line per packet.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// Published counters of one flow.
#[derive(Debug)]
pub struct FlowLive {
    pub tx_frames: AtomicU64,
    pub tx_bytes: AtomicU64,
    pub rx_frames: AtomicU64,
    pub rx_bytes: AtomicU64,
    pub rx_unique: AtomicU64,
    /// Latency so far over every receive port: frames measured, their sum (saturating),
    /// the lowest and highest (bucketed as the histograms hold them).
    pub latency_frames: AtomicU64,
    pub latency_sum_ns: AtomicU64,
    pub latency_min_ns: AtomicU64,
    pub latency_max_ns: AtomicU64,
}

impl Default for FlowLive {
    fn default() -> Self {
        FlowLive {
            tx_frames: AtomicU64::new(0),
            tx_bytes: AtomicU64::new(0),
            rx_frames: AtomicU64::new(0),
            rx_bytes: AtomicU64::new(0),
            rx_unique: AtomicU64::new(0),
            latency_frames: AtomicU64::new(0),
            latency_sum_ns: AtomicU64::new(0),
            // So that the first fetch_min takes the first value.
            latency_min_ns: AtomicU64::new(u64::MAX),
            latency_max_ns: AtomicU64::new(0),
        }
    }
}

/// A copy of one flow's counters at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowSnapshot {
    pub tx_frames: u64,
    pub tx_bytes: u64,
    pub rx_frames: u64,
    pub rx_bytes: u64,
    pub rx_unique: u64,
    /// Latency so far; None until a frame of the flow was measured.
    pub latency: Option<LatencySoFar>,
}

/// A flow's latency so far, as the receive workers published it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LatencySoFar {
    pub frames: u64,
    pub sum_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
}

impl LatencySoFar {
    pub fn mean_ns(&self) -> f64 {
        self.sum_ns as f64 / self.frames.max(1) as f64
    }

    fn merged(a: Option<Self>, b: Option<Self>) -> Option<Self> {
        match (a, b) {
            (Some(a), Some(b)) => Some(LatencySoFar {
                frames: a.frames + b.frames,
                sum_ns: a.sum_ns.saturating_add(b.sum_ns),
                min_ns: a.min_ns.min(b.min_ns),
                max_ns: a.max_ns.max(b.max_ns),
            }),
            (a, b) => a.or(b),
        }
    }
}

impl FlowSnapshot {
    /// Adds another part of the same flow (a sub-flow), or another flow for a total.
    pub fn add(&mut self, other: &FlowSnapshot) {
        self.tx_frames += other.tx_frames;
        self.tx_bytes += other.tx_bytes;
        self.rx_frames += other.rx_frames;
        self.rx_bytes += other.rx_bytes;
        self.rx_unique += other.rx_unique;
        self.latency = LatencySoFar::merged(self.latency, other.latency);
    }
}

/// Flows asked to stop while the rest of their run goes on. Transmitters look at it once
/// per hand-over, and only read the flags when the change count moved: a stopped flow sends
/// nothing after the hand-over in progress.
#[derive(Debug)]
pub struct FlowSwitches {
    names: Vec<String>,
    stopped: Vec<AtomicBool>,
    changes: AtomicU64,
    /// Live rate and size changes, per flow (see [`FlowSwitches::update`]).
    updates: Vec<UpdateSlot>,
    update_count: AtomicU64,
}

/// A flow's newest live change, published by one writer and read by its transmitters
/// between hand-overs. A sequence lock: `version` is odd while the writer fills the slot, so
/// a reader that sees it odd or moved retries at its next batch; no reader ever waits.
#[derive(Debug, Default)]
struct UpdateSlot {
    version: AtomicU64,
    /// The new rate (f64 bits; 0: unchanged) and whether it is a layer-1 bit rate.
    rate_bits: AtomicU64,
    rate_per_bit: AtomicBool,
    /// The flow's whole rate when the run started (f64 bits), in the new rate's unit: a
    /// transmitter sending a share of the flow (a Poisson flow split over workers) scales
    /// the new rate by the share it was given.
    base_bits: AtomicU64,
    /// The new fixed frame size with FCS (0: unchanged).
    size: AtomicU32,
}

/// A live change of a flow: its new rate and fixed frame size, each None when unchanged.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowUpdate {
    pub rate: Option<strobe_timing::Rate>,
    /// The flow's rate as the run started; with `rate`, in the same unit.
    pub base_rate: Option<strobe_timing::Rate>,
    pub size: Option<u32>,
}

impl FlowSwitches {
    /// Switches for the flows named (a scenario's flows, in any order).
    pub fn new(names: impl IntoIterator<Item = String>) -> Self {
        let names: Vec<String> = names.into_iter().collect();
        FlowSwitches {
            stopped: names.iter().map(|_| AtomicBool::new(false)).collect(),
            updates: names.iter().map(|_| UpdateSlot::default()).collect(),
            names,
            changes: AtomicU64::new(0),
            update_count: AtomicU64::new(0),
        }
    }

    /// Publishes a live change of the flow named `name` (every part of it a split port
    /// sends); its transmitters apply it at their next hand-over. false when there is no
    /// such flow. Meant for one writer at a time (the server takes its requests so); a second
    /// writer at once only makes readers retry.
    pub fn update(&self, name: &str, update: FlowUpdate) -> bool {
        let Some(i) = self.names.iter().position(|n| n == name) else {
            return false;
        };
        let slot = &self.updates[i];
        slot.version.fetch_add(1, Ordering::AcqRel);
        let bits = |r: Option<strobe_timing::Rate>| r.map_or(0, |r| r.value().to_bits());
        slot.rate_bits.store(bits(update.rate), Ordering::Relaxed);
        slot.base_bits
            .store(bits(update.base_rate), Ordering::Relaxed);
        slot.rate_per_bit.store(
            matches!(update.rate, Some(strobe_timing::Rate::L1BitsPerSec(_))),
            Ordering::Relaxed,
        );
        slot.size.store(update.size.unwrap_or(0), Ordering::Relaxed);
        slot.version.fetch_add(1, Ordering::Release);
        self.update_count.fetch_add(1, Ordering::Release);
        true
    }

    /// How many live changes were published so far (a transmitter rereads its flows'
    /// slots when it moves).
    pub fn update_count(&self) -> u64 {
        self.update_count.load(Ordering::Acquire)
    }

    /// The newest change of the flow named `name` and its version, when one was published
    /// and is not being written: (version, change). None also while a writer fills it (read
    /// it again later).
    pub fn latest_update(&self, name: &str) -> Option<(u64, FlowUpdate)> {
        let slot = &self.updates[self.names.iter().position(|n| n == name)?];
        let before = slot.version.load(Ordering::Acquire);
        if before == 0 || before & 1 == 1 {
            return None;
        }
        let rate_bits = slot.rate_bits.load(Ordering::Relaxed);
        let base_bits = slot.base_bits.load(Ordering::Relaxed);
        let per_bit = slot.rate_per_bit.load(Ordering::Relaxed);
        let size = slot.size.load(Ordering::Relaxed);
        std::sync::atomic::fence(Ordering::Acquire);
        if slot.version.load(Ordering::Relaxed) != before {
            return None;
        }
        let rate = |bits: u64| {
            (bits != 0).then(|| match per_bit {
                true => strobe_timing::Rate::L1BitsPerSec(f64::from_bits(bits)),
                false => strobe_timing::Rate::Pps(f64::from_bits(bits)),
            })
        };
        Some((
            before,
            FlowUpdate {
                rate: rate(rate_bits),
                base_rate: rate(base_bits),
                size: (size != 0).then_some(size),
            },
        ))
    }

    /// Stops the flow named `name` (and every part of it a split port sends); false when
    /// there is no such flow.
    pub fn stop(&self, name: &str) -> bool {
        let Some(i) = self.names.iter().position(|n| n == name) else {
            return false;
        };
        self.stopped[i].store(true, Ordering::Relaxed);
        // Released after the flag: a transmitter that acquires the new count sees it.
        self.changes.fetch_add(1, Ordering::Release);
        true
    }

    pub fn is_stopped(&self, name: &str) -> bool {
        self.names
            .iter()
            .position(|n| n == name)
            .is_some_and(|i| self.stopped[i].load(Ordering::Relaxed))
    }

    /// How many stops were asked so far (a transmitter rereads the flags when it moves).
    pub fn changes(&self) -> u64 {
        self.changes.load(Ordering::Acquire)
    }
}

/// The live counters of every flow of a run, indexed by flow id.
#[derive(Debug)]
pub struct LiveCounters {
    flows: Vec<FlowLive>,
    /// Frames received that belong to no flow (all receive ports together).
    pub rx_other: AtomicU64,
    /// Paced transmit workers by name, and how far behind its own schedule each was at its
    /// last hand-over (ns; 0 while on time). Published once per hand-over.
    behind: Vec<(String, AtomicU64)>,
}

impl LiveCounters {
    pub fn new(n_flows: usize) -> Self {
        LiveCounters {
            flows: (0..n_flows).map(|_| FlowLive::default()).collect(),
            rx_other: AtomicU64::new(0),
            behind: Vec::new(),
        }
    }

    /// With a lag slot for each of the paced transmit workers named.
    pub fn with_paced_workers(mut self, names: impl IntoIterator<Item = String>) -> Self {
        self.behind = names.into_iter().map(|n| (n, AtomicU64::new(0))).collect();
        self
    }

    /// The lag slot of the paced transmit worker `name` (looked up once, before sending).
    pub fn behind_slot(&self, name: &str) -> Option<usize> {
        self.behind.iter().position(|(n, _)| n == name)
    }

    pub fn publish_behind(&self, slot: usize, behind_ns: u64) {
        if let Some((_, b)) = self.behind.get(slot) {
            b.store(behind_ns, Ordering::Relaxed);
        }
    }

    /// Each paced worker's lag behind its schedule, in the order they were named.
    pub fn behind(&self) -> Vec<u64> {
        self.behind
            .iter()
            .map(|(_, b)| b.load(Ordering::Relaxed))
            .collect()
    }

    pub fn flow(&self, id: u16) -> Option<&FlowLive> {
        self.flows.get(id as usize)
    }

    pub fn publish_tx(&self, id: u16, frames: u64, bytes: u64) {
        if let Some(f) = self.flow(id) {
            f.tx_frames.store(frames, Ordering::Relaxed);
            f.tx_bytes.store(bytes, Ordering::Relaxed);
        }
    }

    pub fn snapshot(&self) -> Vec<FlowSnapshot> {
        self.flows
            .iter()
            .map(|f| FlowSnapshot {
                tx_frames: f.tx_frames.load(Ordering::Relaxed),
                tx_bytes: f.tx_bytes.load(Ordering::Relaxed),
                rx_frames: f.rx_frames.load(Ordering::Relaxed),
                rx_bytes: f.rx_bytes.load(Ordering::Relaxed),
                rx_unique: f.rx_unique.load(Ordering::Relaxed),
                latency: match f.latency_frames.load(Ordering::Acquire) {
                    0 => None,
                    frames => Some(LatencySoFar {
                        frames,
                        sum_ns: f.latency_sum_ns.load(Ordering::Relaxed),
                        min_ns: f.latency_min_ns.load(Ordering::Relaxed),
                        max_ns: f.latency_max_ns.load(Ordering::Relaxed),
                    }),
                },
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switches_stop_flows_by_name_and_count_changes() {
        let sw = FlowSwitches::new(["a".to_string(), "b".to_string()]);
        assert_eq!(sw.changes(), 0);
        assert!(!sw.is_stopped("a"));
        assert!(sw.stop("b"));
        assert!(!sw.stop("nope"));
        assert_eq!(sw.changes(), 1);
        assert!(sw.is_stopped("b") && !sw.is_stopped("a") && !sw.is_stopped("nope"));
    }

    #[test]
    fn updates_are_read_back_by_name_with_a_new_version_each() {
        use strobe_timing::Rate;
        let sw = FlowSwitches::new(["a".to_string(), "b".to_string()]);
        assert_eq!((sw.update_count(), sw.latest_update("a")), (0, None));
        let change = FlowUpdate {
            rate: Some(Rate::L1BitsPerSec(1e6)),
            base_rate: Some(Rate::L1BitsPerSec(2e6)),
            size: None,
        };
        assert!(sw.update("a", change));
        assert!(!sw.update("nope", change));
        let (first, read) = sw.latest_update("a").unwrap();
        assert_eq!(read, change);
        assert_eq!(sw.latest_update("b"), None);
        let resized = FlowUpdate {
            rate: None,
            base_rate: None,
            size: Some(512),
        };
        sw.update("a", resized);
        let (second, read) = sw.latest_update("a").unwrap();
        assert!(second > first);
        assert_eq!((read, sw.update_count()), (resized, 2));
    }

    #[test]
    fn sub_flows_add_up_with_their_latency_so_far() {
        let live = LiveCounters::new(2);
        assert_eq!(live.snapshot()[0].latency, None);
        for (id, (frames, sum, min, max)) in [
            (0u16, (10u64, 1_000u64, 50u64, 300u64)),
            (1, (30, 6_000, 20, 200)),
        ] {
            let f = live.flow(id).unwrap();
            f.latency_sum_ns.fetch_add(sum, Ordering::Relaxed);
            f.latency_min_ns.fetch_min(min, Ordering::Relaxed);
            f.latency_max_ns.fetch_max(max, Ordering::Relaxed);
            f.latency_frames.fetch_add(frames, Ordering::Release);
            f.rx_frames.fetch_add(frames, Ordering::Relaxed);
        }
        let snap = live.snapshot();
        let mut total = FlowSnapshot::default();
        total.add(&snap[0]);
        total.add(&snap[1]);
        assert_eq!(total.rx_frames, 40);
        let l = total.latency.unwrap();
        assert_eq!(
            (l.frames, l.sum_ns, l.min_ns, l.max_ns),
            (40, 7_000, 20, 300)
        );
        assert_eq!(l.mean_ns(), 175.0);
    }
}
