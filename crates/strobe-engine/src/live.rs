//! Counters shared between the workers and whoever watches a run (status lines, progress).
//!
//! Workers own their exact counters and publish copies here with relaxed atomic stores,
//! once per batch (TX) or every few hundred frames (RX): the watcher sees values at most a
//! batch old, and the hot path never contends on a shared cache line per packet.

use std::sync::atomic::{AtomicU64, Ordering};

/// Published counters of one flow.
#[derive(Debug, Default)]
pub struct FlowLive {
    pub tx_frames: AtomicU64,
    pub tx_bytes: AtomicU64,
    pub rx_frames: AtomicU64,
    pub rx_bytes: AtomicU64,
    pub rx_unique: AtomicU64,
}

/// A copy of one flow's counters at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowSnapshot {
    pub tx_frames: u64,
    pub tx_bytes: u64,
    pub rx_frames: u64,
    pub rx_bytes: u64,
    pub rx_unique: u64,
}

/// The live counters of every flow of a run, indexed by flow id.
#[derive(Debug)]
pub struct LiveCounters {
    flows: Vec<FlowLive>,
    /// Frames received that belong to no flow (all receive ports together).
    pub rx_other: AtomicU64,
}

impl LiveCounters {
    pub fn new(n_flows: usize) -> Self {
        LiveCounters {
            flows: (0..n_flows).map(|_| FlowLive::default()).collect(),
            rx_other: AtomicU64::new(0),
        }
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
            })
            .collect()
    }
}
