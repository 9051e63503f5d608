//! Receive-side accounting: recognises strobe's instrumentation trailer in received frames
//! and keeps per-flow counters — frames, bytes, loss, reordering, duplicates, late frames.
//!
//! Definitions (after RFC 4737 where it has one):
//! - **received**: every frame with a valid trailer for a known flow, duplicates included.
//! - **duplicate**: a sequence number already seen (checked exactly within the last
//!   [`WINDOW`] sequence numbers below the highest seen).
//! - **reordered**: a frame whose sequence number is below the highest seen so far, i.e. it
//!   arrived after a frame sent later (duplicates are not counted again here).
//! - **late**: a frame older than the window (too far out of order to check for duplicates;
//!   counted as received and unique) or one that arrives after the flow was finalised.
//! - **lost**: frames sent minus unique frames received, final only after the drain period.
//!
//! Frames without a valid trailer (kernel chatter such as IPv6 neighbour discovery, or
//! other tools' traffic) are counted apart and never touch a flow's counters, and so are
//! frames that carry a trailer but are not this run's: another run's tag (stale frames of
//! an earlier run, another generator, forgeries), a flow this run does not have, or a
//! transmit stamp outside the run. Received frames are untrusted input: nothing here
//! panics on any byte sequence.

use std::collections::VecDeque;
use std::sync::Arc;

use strobe_io::tx_stamps::{Departure, TxStampBoard};
use strobe_wire::trailer::{Trailer, LEN as TRAILER_LEN};

use crate::latency::FlowLatency;
use strobe_analyze::trains::TrainArrival;

/// How far a transmit stamp may lie before the run's start, or after the frame's own
/// receive stamp, and still be this run's: clock readings of one host agree far better, so
/// only frames from another time (forged or stale) fall outside.
pub const STAMP_MARGIN_NS: u64 = 100_000_000;

/// How many sequence numbers below the highest seen are checked exactly for duplicates.
pub const WINDOW: u64 = 4096;
const WORDS: usize = (WINDOW / 64) as usize;

/// Counters of one flow on the receive side.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowRxCounters {
    pub frames: u64,
    pub bytes: u64,
    pub unique: u64,
    pub duplicates: u64,
    pub reordered: u64,
    pub late: u64,
    /// Highest (extended) sequence number seen.
    pub max_seq: Option<u64>,
    pub first_rx_ns: Option<u64>,
    pub last_rx_ns: Option<u64>,
}

impl FlowRxCounters {
    /// Adds another part's counts (another receive worker, or a sub-flow of the same flow).
    pub fn add(&mut self, b: &FlowRxCounters) {
        self.frames += b.frames;
        self.bytes += b.bytes;
        self.unique += b.unique;
        self.duplicates += b.duplicates;
        self.reordered += b.reordered;
        self.late += b.late;
        self.max_seq = self.max_seq.max(b.max_seq);
        self.first_rx_ns = match (self.first_rx_ns, b.first_rx_ns) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        };
        self.last_rx_ns = self.last_rx_ns.max(b.last_rx_ns);
    }
}

#[derive(Clone, Debug)]
struct FlowRx {
    counters: FlowRxCounters,
    /// Bit i of the window: sequence number max_seq - i was seen.
    seen: [u64; WORDS],
    finalised: bool,
    /// Allocated at the flow's first timestamped frame when latency is measured.
    latency: Option<Box<FlowLatency>>,
    measure_latency: bool,
    /// Per-train counts of a convoy of trains (allocated before the run, never per frame).
    trains: Option<Box<TrainTrack>>,
}

/// Largest convoy tracked train by train (its slots, a `TrainArrival` each, are allocated
/// up front: about 220 bytes each).
pub const MAX_TRACKED_TRAINS: u64 = 1_000_000;

/// A flow sent as trains of `frames_per_train` frames: its sequence numbers, counted from
/// the flow's first, say which train and which place in it a frame holds.
#[derive(Clone, Debug)]
struct TrainTrack {
    frames_per_train: u64,
    first_seq: u64,
    trains: Vec<TrainArrival>,
}

impl TrainTrack {
    fn on_frame(&mut self, seq: u64, class: Seen, tx_ns: u64, rx_ns: Option<u64>) {
        let Some(offset) = seq.checked_sub(self.first_seq) else {
            return;
        };
        let Some(t) = self
            .trains
            .get_mut((offset / self.frames_per_train) as usize)
        else {
            return;
        };
        t.frames_rx += 1;
        match class {
            Seen::Duplicate => t.duplicates += 1,
            Seen::Reordered => t.reordered += 1,
            Seen::InOrder => {}
        }
        let place = offset % self.frames_per_train;
        if class != Seen::Duplicate && place == u64::from(t.head_run) {
            t.head_run += 1;
        }
        // The head is left out: it is handed over alone, so its gap to the rest is the
        // sender's, not the path's.
        if let (Some(rx), true) = (rx_ns, class != Seen::Duplicate && place != 0) {
            t.after_burst.add(rx);
        }
        let mid = self.frames_per_train / 2;
        if class != Seen::Duplicate && place >= mid {
            t.second_half_rx += 1;
            if place == mid {
                t.mid_rx_ns = rx_ns;
            }
            if let Some(rx) = rx_ns {
                t.second_half_fit.add(rx);
            }
        }
        if let Some(rx) = rx_ns {
            t.first_rx_ns = Some(t.first_rx_ns.map_or(rx, |f| f.min(rx)));
            t.last_rx_ns = Some(t.last_rx_ns.map_or(rx, |l| l.max(rx)));
            // Only the head is timestamped for latency: it alone waited in no queue of the
            // sender (the rest of its train queued behind it).
            if place == 0 && class != Seen::Duplicate && tx_ns != 0 {
                t.head_latency_ns = Some(rx as f64 - tx_ns as f64);
            }
        }
    }
}

/// Adds another view of the same convoy (another receive worker or port), train by train.
fn add_trains(mine: &mut [TrainArrival], theirs: &[TrainArrival]) {
    for (mine, theirs) in mine.iter_mut().zip(theirs) {
        mine.frames_rx += theirs.frames_rx;
        mine.duplicates += theirs.duplicates;
        mine.reordered += theirs.reordered;
        mine.first_rx_ns = match (mine.first_rx_ns, theirs.first_rx_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        mine.last_rx_ns = mine.last_rx_ns.max(theirs.last_rx_ns);
        mine.head_latency_ns = mine.head_latency_ns.or(theirs.head_latency_ns);
        mine.mid_rx_ns = mine.mid_rx_ns.or(theirs.mid_rx_ns);
        mine.second_half_rx += theirs.second_half_rx;
        mine.second_half_fit.merge(&theirs.second_half_fit);
        // Each receiver saw its frames from the head on only if it saw the head.
        mine.head_run = mine.head_run.max(theirs.head_run);
        mine.after_burst.merge(&theirs.after_burst);
    }
}

/// How a frame's sequence number compared with what the flow had seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    InOrder,
    Reordered,
    Duplicate,
}

impl FlowRx {
    fn new() -> Self {
        FlowRx {
            counters: FlowRxCounters::default(),
            seen: [0; WORDS],
            finalised: false,
            latency: None,
            measure_latency: true,
            trains: None,
        }
    }

    fn bit(&self, back: u64) -> bool {
        self.seen[(back / 64) as usize] & (1 << (back % 64)) != 0
    }

    fn set(&mut self, back: u64) {
        self.seen[(back / 64) as usize] |= 1 << (back % 64);
    }

    /// Moves the window up by `by` sequence numbers (the new highest is `by` above the old).
    fn slide(&mut self, by: u64) {
        if by >= WINDOW {
            self.seen = [0; WORDS];
            return;
        }
        let (words, bits) = ((by / 64) as usize, (by % 64) as u32);
        for i in (0..WORDS).rev() {
            let lo = i.checked_sub(words).map_or(0, |j| self.seen[j]);
            let below = i.checked_sub(words + 1).map_or(0, |j| self.seen[j]);
            self.seen[i] = if bits == 0 {
                lo
            } else {
                (lo << bits) | (below >> (64 - bits))
            };
        }
    }

    /// Extends a 32-bit wire sequence number to the 64-bit value closest to the highest
    /// seen, so counting survives wrap-around at 2^32.
    fn extend(&self, seq: u32) -> u64 {
        let Some(max) = self.counters.max_seq else {
            return seq as u64;
        };
        let base = max & !0xFFFF_FFFF;
        let candidates = [
            base.wrapping_sub(1 << 32) | seq as u64,
            base | seq as u64,
            base.wrapping_add(1 << 32) | seq as u64,
        ];
        candidates
            .into_iter()
            .filter(|&c| c <= max.saturating_add(1 << 31))
            .min_by_key(|&c| c.abs_diff(max))
            .unwrap_or(base | seq as u64)
    }

    /// Whether a frame stamped `tx_ns` and received at `rx_ns` gives this flow a latency.
    fn takes_latency(&self, tx_ns: u64, rx_ns: Option<u64>) -> bool {
        // A zero transmit time marks frames written in scheduled time (traces), not stamped.
        self.measure_latency && !self.finalised && rx_ns.is_some() && tx_ns != 0
    }

    /// Counts one frame; its latency is recorded here unless `latency_later` (the tracker
    /// records it once the frame's transmit stamp is known).
    fn on_frame(
        &mut self,
        seq: u32,
        len: u32,
        tx_ns: u64,
        rx_ns: Option<u64>,
        latency_later: bool,
    ) {
        let c = &mut self.counters;
        c.frames += 1;
        c.bytes += len as u64;
        if let Some(ns) = rx_ns {
            c.first_rx_ns.get_or_insert(ns);
            c.last_rx_ns = Some(ns);
        }
        if self.finalised {
            c.late += 1;
            return;
        }
        if let (false, Some(rx), true) = (latency_later, rx_ns, self.takes_latency(tx_ns, rx_ns)) {
            self.latency
                .get_or_insert_with(Default::default)
                .record(tx_ns, rx);
        }
        let seq = self.extend(seq);
        let seen = match self.counters.max_seq {
            None => {
                self.counters.max_seq = Some(seq);
                self.counters.unique += 1;
                self.set(0);
                Seen::InOrder
            }
            Some(max) if seq > max => {
                self.counters.max_seq = Some(seq);
                self.counters.unique += 1;
                self.slide(seq - max);
                self.set(0);
                Seen::InOrder
            }
            Some(max) => {
                let back = max - seq;
                if back >= WINDOW {
                    let c = &mut self.counters;
                    c.late += 1;
                    c.unique += 1;
                    c.reordered += 1;
                    Seen::Reordered
                } else if self.bit(back) {
                    self.counters.duplicates += 1;
                    Seen::Duplicate
                } else {
                    self.counters.unique += 1;
                    self.counters.reordered += 1;
                    self.set(back);
                    Seen::Reordered
                }
            }
        };
        if let Some(trains) = &mut self.trains {
            trains.on_frame(seq, seen, tx_ns, rx_ns);
        }
    }
}

/// Frames that belong to no flow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OtherFrames {
    /// No trailer signature (or too short to carry one): not strobe's traffic.
    pub not_instrumented: u64,
    /// A trailer naming a flow this run does not have.
    pub unknown_flow: u64,
    /// Captured shorter than on the wire, so the trailer at the end is missing.
    pub truncated: u64,
    /// A trailer with another run's tag: frames of an earlier run still in flight, another
    /// generator's, or forged.
    pub foreign: u64,
    /// This run's tag but a transmit stamp outside the run (before its start or after the
    /// frame's arrival, beyond [`STAMP_MARGIN_NS`]): forged or corrupted.
    pub out_of_window: u64,
}

impl OtherFrames {
    /// Every frame that belongs to no flow of this run.
    pub fn total(&self) -> u64 {
        self.not_instrumented
            + self.unknown_flow
            + self.truncated
            + self.foreign
            + self.out_of_window
    }

    fn add(&mut self, b: &OtherFrames) {
        self.not_instrumented += b.not_instrumented;
        self.unknown_flow += b.unknown_flow;
        self.truncated += b.truncated;
        self.foreign += b.foreign;
        self.out_of_window += b.out_of_window;
    }
}

/// What a received frame turned out to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxClass {
    /// A frame of this flow, with its trailer.
    Flow(Trailer),
    NotInstrumented,
    UnknownFlow,
    Truncated,
    Foreign,
    OutOfWindow,
}

/// Per-flow receive accounting of one receive worker.
#[derive(Clone, Debug)]
pub struct RxTracker {
    flows: Vec<FlowRx>,
    /// The run tag this run's trailers carry.
    tag: u8,
    /// Transmit stamps before this are not this run's (None: not checked, e.g. traces in
    /// scheduled time).
    earliest_tx_ns: Option<u64>,
    pub other: OtherFrames,
    /// Transmit stamps published by the run's senders after the hand-over (AF_XDP TX
    /// metadata), which replace the trailers' stamps in latency.
    tx_stamps: Option<Box<TxStampJoin>>,
}

/// Frames whose latency waits for their transmit stamp at most this many; the oldest is
/// settled (without one) when a new frame would not fit. Allocated once, at the run's start.
const AWAITING_STAMPS: usize = 1 << 16;
/// How long a frame's latency waits for its transmit stamp, after its arrival. A sender
/// publishes a frame's stamp when it next hands frames over (or at its end), so a flow that
/// pauses for longer leaves the frames before its pause without one.
pub const TX_STAMP_WAIT_NS: u64 = 10_000_000_000;

/// A frame whose latency waits for its sender to publish its transmit stamp.
#[derive(Clone, Copy, Debug)]
struct AwaitingStamp {
    flow_id: u16,
    seq: u32,
    tx_ns: u64,
    rx_ns: u64,
}

/// How many frames' latency used a transmit stamp from the sender, and how many got none in
/// time (left out of latency).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxStampCounts {
    pub stamped: u64,
    pub missing: u64,
}

/// The receive side's end of the transmit stamps: frames in arrival order wait until their
/// stamp is on the board (latency recorded in arrival order all the same, for jitter).
#[derive(Clone, Debug)]
struct TxStampJoin {
    board: Arc<TxStampBoard>,
    awaiting: VecDeque<AwaitingStamp>,
    counts: TxStampCounts,
}

/// A flow's receive results, with loss once the number sent is known.
#[derive(Clone, Debug)]
pub struct FlowRxReport {
    pub flow_id: u16,
    pub counters: FlowRxCounters,
    /// Frames sent minus unique frames received (None when the number sent is unknown).
    pub lost: Option<u64>,
    /// Unique frames received beyond the number sent: frames that carry this run's tag but
    /// were not sent by it. Nonzero makes the flow's counts untrustworthy.
    pub excess: u64,
    /// Latency of every timestamped frame (None when not measured or nothing arrived).
    pub latency: Option<FlowLatency>,
    /// Train by train, for a flow sent as a convoy of trains (see
    /// [`RxTracker::track_trains`]).
    pub trains: Option<Vec<TrainArrival>>,
}

impl FlowRxReport {
    /// Adds another part of the same flow (a sub-flow, or another receive port's view).
    pub fn add(&mut self, other: &FlowRxReport) {
        self.counters.add(&other.counters);
        self.lost = match (self.lost, other.lost) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        self.excess += other.excess;
        if let Some(theirs) = &other.latency {
            self.latency
                .get_or_insert_with(Default::default)
                .add(theirs);
        }
        // Two receive ports' views of one convoy: their frames add up train by train.
        match (&mut self.trains, &other.trains) {
            (Some(mine), Some(theirs)) => add_trains(mine, theirs),
            (None, Some(_)) => self.trains.clone_from(&other.trains),
            _ => {}
        }
    }
}

impl RxTracker {
    /// A tracker for flows 0..n_flows (flow ids as written in trailers) of the run whose
    /// trailers carry `run_tag`.
    pub fn new(n_flows: usize, run_tag: u8) -> Self {
        RxTracker {
            flows: vec![FlowRx::new(); n_flows.min(u16::MAX as usize + 1)],
            tag: run_tag,
            earliest_tx_ns: None,
            other: OtherFrames::default(),
            tx_stamps: None,
        }
    }

    /// Takes each frame's transmit stamp from `board` (published by the run's senders after
    /// the hand-over) instead of its trailer's: a frame's latency waits until its stamp is
    /// there ([`RxTracker::settle_tx_stamps`]), at most [`TX_STAMP_WAIT_NS`].
    pub fn take_tx_stamps_from(&mut self, board: Arc<TxStampBoard>) {
        self.tx_stamps = Some(Box::new(TxStampJoin {
            board,
            awaiting: VecDeque::with_capacity(AWAITING_STAMPS),
            counts: TxStampCounts::default(),
        }));
    }

    /// Records the latency of waiting frames whose transmit stamp has been published, in
    /// arrival order, up to the first still waiting; frames that waited longer than
    /// [`TX_STAMP_WAIT_NS`] by `now_ns` (or all, with `everything`, at the run's end) are
    /// counted as missing their stamp and left out of latency.
    pub fn settle_tx_stamps(&mut self, now_ns: u64, everything: bool) {
        let Some(join) = &mut self.tx_stamps else {
            return;
        };
        while let Some(&a) = join.awaiting.front() {
            let waited_out = everything || now_ns.saturating_sub(a.rx_ns) > TX_STAMP_WAIT_NS;
            if !settle(&mut self.flows, join, a, waited_out) {
                break;
            }
            join.awaiting.pop_front();
        }
    }

    /// Whether frames wait for their transmit stamps.
    pub fn awaits_tx_stamps(&self) -> bool {
        self.tx_stamps
            .as_ref()
            .is_some_and(|j| !j.awaiting.is_empty())
    }

    /// Frames whose latency used a sender's transmit stamp, and frames that got none; None
    /// when the tracker takes the trailers' stamps.
    pub fn tx_stamp_counts(&self) -> Option<TxStampCounts> {
        self.tx_stamps.as_ref().map(|j| j.counts)
    }

    /// Counts frames whose transmit stamp lies more than [`STAMP_MARGIN_NS`] before
    /// `run_start_ns` (or after their own receive stamp) apart, as out of window. For
    /// receivers whose stamps share the transmit stamps' clock (CLOCK_REALTIME).
    pub fn check_stamps_from(&mut self, run_start_ns: u64) {
        self.earliest_tx_ns = Some(run_start_ns.saturating_sub(STAMP_MARGIN_NS));
    }

    /// Classifies one received frame and counts it. Never panics, whatever `data` holds.
    pub fn on_frame(&mut self, data: &[u8], wire_len: u32, rx_ns: Option<u64>) -> RxClass {
        if (data.len() as u64) < wire_len as u64 {
            self.other.truncated += 1;
            return RxClass::Truncated;
        }
        if data.len() < TRAILER_LEN {
            self.other.not_instrumented += 1;
            return RxClass::NotInstrumented;
        }
        let Some(t) = Trailer::from_frame(data) else {
            self.other.not_instrumented += 1;
            return RxClass::NotInstrumented;
        };
        if t.tag != self.tag {
            self.other.foreign += 1;
            return RxClass::Foreign;
        }
        let Some(flow) = self.flows.get_mut(t.flow_id as usize) else {
            self.other.unknown_flow += 1;
            return RxClass::UnknownFlow;
        };
        if let Some(earliest) = self.earliest_tx_ns {
            let after_arrival =
                rx_ns.is_some_and(|rx| t.tx_ns > rx.saturating_add(STAMP_MARGIN_NS));
            if t.tx_ns < earliest || after_arrival {
                self.other.out_of_window += 1;
                return RxClass::OutOfWindow;
            }
        }
        let Some(join) = &mut self.tx_stamps else {
            flow.on_frame(t.seq, data.len() as u32, t.tx_ns, rx_ns, false);
            return RxClass::Flow(t);
        };
        let waits = flow.takes_latency(t.tx_ns, rx_ns);
        flow.on_frame(t.seq, data.len() as u32, t.tx_ns, rx_ns, true);
        if let (true, Some(rx_ns)) = (waits, rx_ns) {
            let a = AwaitingStamp {
                flow_id: t.flow_id,
                seq: t.seq,
                tx_ns: t.tx_ns,
                rx_ns,
            };
            // In arrival order: straight through while nothing waits and the stamp is there.
            if !(join.awaiting.is_empty() && settle(&mut self.flows, join, a, false)) {
                if join.awaiting.len() == AWAITING_STAMPS {
                    let oldest = join.awaiting.pop_front().expect("the queue is full");
                    settle(&mut self.flows, join, oldest, true);
                }
                join.awaiting.push_back(a);
            }
        }
        RxClass::Flow(t)
    }

    /// Takes what an in-kernel counting program (`xdp-count:`) counted for this tracker's
    /// flows: it replaces the tracker's counts, as the program saw every frame and the
    /// tracker none. Its histograms have the tracker's buckets, so the latency is the same
    /// as counting frame by frame here would give.
    pub fn absorb_counted(&mut self, counted: &strobe_io::xdp_count::CountSnapshot) {
        for (f, c) in self.flows.iter_mut().zip(&counted.flows) {
            f.counters = FlowRxCounters {
                frames: c.frames,
                bytes: c.bytes,
                unique: c.unique,
                duplicates: c.duplicates,
                reordered: c.reordered,
                late: c.late,
                max_seq: c.max_seq,
                first_rx_ns: c.first_rx_ns,
                last_rx_ns: c.last_rx_ns,
            };
            let l = &c.latency;
            f.latency =
                (l.recorded + l.negative > 0).then(|| Box::new(FlowLatency::from_counted(l)));
        }
        let o = &counted.other;
        self.other = OtherFrames {
            not_instrumented: o.not_instrumented,
            unknown_flow: o.unknown_flow,
            truncated: 0,
            foreign: o.foreign,
            out_of_window: o.out_of_window,
        };
    }

    /// Turns latency measurement of one flow on or off (on by default).
    pub fn set_latency(&mut self, flow_id: u16, on: bool) {
        if let Some(f) = self.flows.get_mut(flow_id as usize) {
            f.measure_latency = on;
        }
    }

    /// Tracks flow `flow_id` train by train: `trains` trains of `frames_per_train` frames,
    /// the first carrying sequence number `first_seq`, each `frame_bytes` long (FCS
    /// included). Allocates the trains' slots now; refused (false) beyond
    /// [`MAX_TRACKED_TRAINS`] or for an empty train.
    pub fn track_trains(
        &mut self,
        flow_id: u16,
        trains: u64,
        frames_per_train: u64,
        first_seq: u32,
        frame_bytes: u32,
    ) -> bool {
        let Some(f) = self.flows.get_mut(flow_id as usize) else {
            return false;
        };
        if trains == 0 || trains > MAX_TRACKED_TRAINS || frames_per_train == 0 {
            return false;
        }
        let sent = u32::try_from(frames_per_train).unwrap_or(u32::MAX);
        f.trains = Some(Box::new(TrainTrack {
            frames_per_train,
            first_seq: u64::from(first_seq),
            trains: (0..trains)
                .map(|i| TrainArrival {
                    train: u32::try_from(i).unwrap_or(u32::MAX),
                    frames_sent: sent,
                    frame_bytes,
                    ..TrainArrival::default()
                })
                .collect(),
        }));
        true
    }

    pub fn latency(&self, flow_id: u16) -> Option<&FlowLatency> {
        self.flows
            .get(flow_id as usize)
            .and_then(|f| f.latency.as_deref())
    }

    /// Ends the run for every flow: frames that arrive from now on count as late.
    pub fn finalise(&mut self) {
        for f in &mut self.flows {
            f.finalised = true;
        }
    }

    pub fn flow_count(&self) -> usize {
        self.flows.len()
    }

    pub fn counters(&self, flow_id: u16) -> Option<&FlowRxCounters> {
        self.flows.get(flow_id as usize).map(|f| &f.counters)
    }

    /// Results per flow; `sent[i]` is the number of frames flow i sent, when known.
    pub fn report(&self, sent: Option<&[u64]>) -> Vec<FlowRxReport> {
        self.flows
            .iter()
            .enumerate()
            .map(|(i, f)| FlowRxReport {
                flow_id: i as u16,
                counters: f.counters.clone(),
                lost: sent
                    .and_then(|s| s.get(i))
                    .map(|&tx| tx.saturating_sub(f.counters.unique)),
                excess: sent
                    .and_then(|s| s.get(i))
                    .map_or(0, |&tx| f.counters.unique.saturating_sub(tx)),
                latency: f.latency.as_deref().cloned(),
                trains: f.trains.as_ref().map(|t| t.trains.clone()),
            })
            .collect()
    }

    /// Adds another worker's counts (flows received on several queues). Duplicates across
    /// workers cannot be told apart, so they count as unique.
    pub fn absorb(&mut self, other: &RxTracker) {
        if let (Some(mine), Some(theirs)) = (&mut self.tx_stamps, &other.tx_stamps) {
            mine.counts.stamped += theirs.counts.stamped;
            mine.counts.missing += theirs.counts.missing;
        }
        for (mine, theirs) in self.flows.iter_mut().zip(&other.flows) {
            mine.counters.add(&theirs.counters);
            if let Some(l) = &theirs.latency {
                mine.latency.get_or_insert_with(Default::default).add(l);
            }
            match (&mut mine.trains, &theirs.trains) {
                (Some(mine), Some(theirs)) => add_trains(&mut mine.trains, &theirs.trains),
                (None, Some(theirs)) => mine.trains = Some(theirs.clone()),
                _ => {}
            }
        }
        self.other.add(&other.other);
    }
}

/// Records waiting frame `a`'s latency with its published transmit stamp and returns true;
/// or, without one, returns false, unless `give_up`: then it counts the frame as missing its
/// stamp (no latency) and returns true.
fn settle(flows: &mut [FlowRx], join: &mut TxStampJoin, a: AwaitingStamp, give_up: bool) -> bool {
    match join.board.departure(a.flow_id, a.seq) {
        Departure::After(delay) => {
            if let Some(flow) = flows.get_mut(a.flow_id as usize) {
                let departed = (a.tx_ns as i64).saturating_add(delay).max(0) as u64;
                flow.latency
                    .get_or_insert_with(Default::default)
                    .record(departed, a.rx_ns);
            }
            join.counts.stamped += 1;
            true
        }
        // Its sender said it has none: no use waiting.
        Departure::Unstamped => {
            join.counts.missing += 1;
            true
        }
        Departure::Unknown if give_up => {
            join.counts.missing += 1;
            true
        }
        Departure::Unknown => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(flow_id: u16, seq: u32) -> Vec<u8> {
        stamped(flow_id, seq, 7)
    }

    const TAG: u8 = 0x3C;

    fn stamped(flow_id: u16, seq: u32, tx_ns: u64) -> Vec<u8> {
        tagged(TAG, false, flow_id, seq, tx_ns)
    }

    fn tagged(tag: u8, reflected: bool, flow_id: u16, seq: u32, tx_ns: u64) -> Vec<u8> {
        let mut f = vec![0xAB; 60];
        let at = f.len() - TRAILER_LEN;
        let dst: &mut [u8; TRAILER_LEN] = (&mut f[at..]).try_into().unwrap();
        Trailer {
            reflected,
            tag,
            flow_id,
            seq,
            tx_ns,
        }
        .write(dst);
        f
    }

    #[test]
    fn a_convoy_is_counted_train_by_train() {
        // Flow 1: 3 trains of 4 frames from sequence number 100, 1518 bytes each.
        let mut t = RxTracker::new(2, TAG);
        assert!(t.track_trains(1, 3, 4, 100, 1518));
        assert!(!t.track_trains(1, MAX_TRACKED_TRAINS + 1, 4, 100, 1518));
        let mut rx = |seq: u32, tx: u64, at: u64| {
            t.on_frame(&stamped(1, seq, tx), 60, Some(at));
        };
        // Train 0 whole (its head sent at 1000, received at 6000); train 1 with a frame
        // lost, one duplicated and one late; train 2 never arrives.
        for (k, at) in [6_000, 6_100, 6_200, 6_300].into_iter().enumerate() {
            rx(100 + k as u32, 1_000, at);
        }
        rx(104, 20_000, 27_000);
        rx(106, 20_000, 27_300);
        rx(105, 20_000, 27_400);
        rx(106, 20_000, 27_500);
        let report = t.report(Some(&[0, 12]));
        let trains = report[1].trains.as_ref().unwrap();
        assert_eq!(trains.len(), 3);
        let (a, b, c) = (&trains[0], &trains[1], &trains[2]);
        assert_eq!((a.frames_rx, a.duplicates, a.reordered), (4, 0, 0));
        assert_eq!(a.head_latency_ns, Some(5_000.0));
        assert_eq!((a.first_rx_ns, a.last_rx_ns), (Some(6_000), Some(6_300)));
        assert_eq!((a.mid_rx_ns, a.second_half_rx), (Some(6_200), 2));
        assert_eq!((b.frames_rx, b.duplicates, b.reordered), (4, 1, 1));
        assert_eq!(b.head_latency_ns, Some(7_000.0));
        assert_eq!((b.first_rx_ns, b.last_rx_ns), (Some(27_000), Some(27_500)));
        // Its second half: place 2 (seq 106) once, the duplicate left out; place 3 lost.
        assert_eq!((b.mid_rx_ns, b.second_half_rx), (Some(27_300), 1));
        assert_eq!(
            (c.frames_rx, c.first_rx_ns, c.head_latency_ns),
            (0, None, None)
        );
        assert_eq!((a.frames_sent, a.frame_bytes), (4, 1518));
        assert!(report[0].trains.is_none());
        // Another receive worker's share adds up train by train, into a tracker that had
        // none (the run's merged view) as into one that had some.
        let mut empty = RxTracker::new(2, TAG);
        empty.absorb(&t);
        assert_eq!(
            empty.report(None)[1].trains.as_ref().unwrap()[1].frames_rx,
            4
        );
        let mut other = RxTracker::new(2, TAG);
        other.track_trains(1, 3, 4, 100, 1518);
        other.on_frame(&stamped(1, 111, 40_000), 60, Some(41_000));
        t.absorb(&other);
        let merged = t.report(None);
        let c = &merged[1].trains.as_ref().unwrap()[2];
        assert_eq!(
            (c.frames_rx, c.last_rx_ns, c.head_latency_ns),
            (1, Some(41_000), None)
        );
    }

    #[test]
    fn a_trains_second_half_is_fitted_as_it_arrives() {
        // One train of 8 frames: the first half at once, the second 100 ns apart.
        let mut t = RxTracker::new(1, TAG);
        assert!(t.track_trains(0, 1, 8, 0, 64));
        for (seq, at) in [(0, 1_000), (1, 1_001), (2, 1_002), (3, 1_003)] {
            t.on_frame(&stamped(0, seq, 10), 60, Some(at));
        }
        for (k, seq) in (4..8u32).enumerate() {
            t.on_frame(&stamped(0, seq, 10), 60, Some(2_000 + 100 * k as u64));
        }
        let report = t.report(Some(&[8]));
        let train = &report[0].trains.as_ref().unwrap()[0];
        assert_eq!(train.second_half_fit.ns_per_frame(), Some(100.0));
    }

    #[test]
    fn a_train_whose_tail_was_dropped_is_fitted_by_arrival() {
        // One train of 10 frames: places 0-2 at once (a bucket's burst), 3-5 queued and
        // released 100 ns apart, 6-9 dropped but for place 8 (a slot freed in the queue);
        // a duplicate of place 1 changes nothing.
        let mut t = RxTracker::new(1, TAG);
        assert!(t.track_trains(0, 1, 10, 0, 64));
        for (seq, at) in [
            (0, 1_000),
            (1, 1_001),
            (1, 1_001),
            (2, 1_002),
            (3, 1_100),
            (4, 1_200),
            (5, 1_300),
            (8, 1_400),
        ] {
            t.on_frame(&stamped(0, seq, 10), 60, Some(at));
        }
        let report = t.report(Some(&[10]));
        let train = &report[0].trains.as_ref().unwrap()[0];
        assert_eq!(train.head_run, 6);
        assert_eq!(
            train.after_burst.burst(),
            2,
            "places 1 and 2: the head is left out"
        );
        assert_eq!(train.after_burst.arrivals(), 4);
        assert_eq!(train.after_burst.ns_per_frame(), Some(100.0));
        // By planned place the second half is places 5 and 8 only: too few for a line.
        assert_eq!(train.second_half_fit.ns_per_frame(), None);
    }

    /// With a board of transmit stamps, a frame's latency runs from trailer stamp + its
    /// published hand-over delay; frames that arrive before their stamp wait (in arrival
    /// order), and a frame whose stamp never comes is counted as missing once it has waited
    /// out, without holding the others back for longer.
    #[test]
    fn transmit_stamps_from_the_board_replace_the_trailers() {
        let board = Arc::new(TxStampBoard::new(2));
        let mut t = RxTracker::new(2, TAG);
        t.take_tx_stamps_from(Arc::clone(&board));
        // Published first: recorded at once.
        board.publish(0, 0, 300);
        t.on_frame(&stamped(0, 0, 1_000), 60, Some(10_000));
        assert_eq!(t.latency(0).unwrap().sum_ns(), 10_000 - 1_300);
        // Arrive before their stamps: counted as frames at once, latency waits.
        t.on_frame(&stamped(0, 1, 2_000), 60, Some(11_000));
        t.on_frame(&stamped(1, 0, 2_500), 60, Some(11_500));
        t.on_frame(&stamped(0, 2, 3_000), 60, Some(12_000));
        assert_eq!(t.counters(0).unwrap().frames, 3);
        assert_eq!(t.latency(0).unwrap().histogram().len(), 1);
        // Flow 1's stamp alone is not enough: flow 0 seq 1 arrived before it.
        board.publish(1, 0, 100);
        t.settle_tx_stamps(12_000, false);
        assert!(t.latency(1).is_none());
        board.publish(0, 1, 500);
        t.settle_tx_stamps(12_000, false);
        assert_eq!(t.latency(0).unwrap().histogram().len(), 2);
        assert_eq!(t.latency(0).unwrap().sum_ns(), 8_700 + 11_000 - 2_500);
        assert_eq!(t.latency(1).unwrap().sum_ns(), 11_500 - 2_600);
        // Seq 2's stamp never comes: it waits until it has waited out.
        t.settle_tx_stamps(12_000 + TX_STAMP_WAIT_NS, false);
        assert_eq!(t.tx_stamp_counts().unwrap().missing, 0);
        t.settle_tx_stamps(12_001 + TX_STAMP_WAIT_NS, false);
        assert_eq!(
            t.tx_stamp_counts(),
            Some(TxStampCounts {
                stamped: 3,
                missing: 1
            })
        );
        assert_eq!(t.latency(0).unwrap().histogram().len(), 2);
        // A frame its sender says has no stamp is settled at once, without waiting.
        t.on_frame(&stamped(1, 1, 3_500), 60, Some(12_500));
        board.publish_unstamped(1, 1);
        t.settle_tx_stamps(12_500, false);
        assert_eq!(t.tx_stamp_counts().unwrap().missing, 2);
        assert!(!t.awaits_tx_stamps());
        // At the end everything still waiting is settled.
        t.on_frame(&stamped(0, 3, 4_000), 60, Some(13_000));
        t.settle_tx_stamps(13_000, true);
        assert_eq!(t.tx_stamp_counts().unwrap().missing, 3);
        // The trailers' stamps never entered the latency.
        assert_eq!(t.latency(0).unwrap().histogram().len(), 2);
        assert_eq!(t.latency(0).unwrap().sum_ns(), 8_700 + 8_500);
    }

    /// A full queue of waiting frames settles its oldest to make room.
    #[test]
    fn the_oldest_waiting_frame_gives_way_when_the_queue_is_full() {
        let board = Arc::new(TxStampBoard::new(1));
        let mut t = RxTracker::new(1, TAG);
        t.take_tx_stamps_from(Arc::clone(&board));
        for seq in 0..=AWAITING_STAMPS as u32 {
            t.on_frame(&stamped(0, seq, 1_000), 60, Some(5_000));
        }
        assert_eq!(t.tx_stamp_counts().unwrap().missing, 1);
        // A trailer's stamp is never used in place of a missing one.
        assert!(t.latency(0).is_none());
    }

    #[test]
    fn latency_is_rx_minus_trailer_timestamp_per_flow() {
        let mut t = RxTracker::new(3, TAG);
        t.set_latency(2, false);
        for seq in 0..100u32 {
            let tx = 1_000_000 + seq as u64 * 10_000;
            for (flow, delay) in [(0u16, 4_000u64), (1, 20_000), (2, 1)] {
                let f = stamped(flow, seq, tx);
                t.on_frame(&f, 60, Some(tx + delay + seq as u64));
            }
        }
        // Frames without a receive timestamp, or in scheduled time (tx 0), are not measured.
        t.on_frame(&stamped(0, 100, 5), 60, None);
        t.on_frame(&stamped(0, 101, 0), 60, Some(9));
        let l0 = t.latency(0).unwrap().histogram();
        assert_eq!((l0.len(), l0.min()), (100, 4_000));
        assert!(l0.equivalent(l0.max(), 4_099));
        assert_eq!(t.latency(1).unwrap().histogram().min(), 20_000);
        assert!(t.latency(2).is_none());
        // Merging two workers adds the histograms; reports carry them.
        let mut merged = RxTracker::new(3, TAG);
        merged.absorb(&t);
        merged.absorb(&t);
        let r = merged.report(None);
        assert_eq!(r[0].latency.as_ref().unwrap().histogram().len(), 200);
        assert!(r[2].latency.is_none());
        // Frames after finalise count as late and stay out of the distribution.
        t.finalise();
        t.on_frame(&stamped(1, 200, 1), 60, Some(1_000_000_000));
        assert_eq!(t.latency(1).unwrap().histogram().len(), 100);
    }

    fn feed(t: &mut RxTracker, seqs: &[u32]) {
        for &s in seqs {
            let f = frame(0, s);
            t.on_frame(&f, f.len() as u32, Some(1));
        }
    }

    #[test]
    fn in_order_no_loss() {
        let mut t = RxTracker::new(1, TAG);
        feed(&mut t, &(0..1000).collect::<Vec<_>>());
        let r = &t.report(Some(&[1000]))[0];
        assert_eq!(
            (
                r.counters.unique,
                r.counters.reordered,
                r.counters.duplicates,
                r.lost
            ),
            (1000, 0, 0, Some(0))
        );
    }

    #[test]
    fn crafted_reorder_duplicate_and_loss() {
        let mut t = RxTracker::new(1, TAG);
        // 0 1 3 2 (2 reordered) 3 (duplicate) 5 (4 lost) 6 6 (duplicate)
        feed(&mut t, &[0, 1, 3, 2, 3, 5, 6, 6]);
        let c = t.counters(0).unwrap();
        assert_eq!(c.frames, 8);
        assert_eq!(c.unique, 6);
        assert_eq!(c.reordered, 1);
        assert_eq!(c.duplicates, 2);
        assert_eq!(t.report(Some(&[7]))[0].lost, Some(1));
    }

    #[test]
    fn sequence_wraps_at_2_pow_32() {
        let mut t = RxTracker::new(1, TAG);
        feed(&mut t, &[u32::MAX - 2, u32::MAX - 1, u32::MAX, 0, 1, 2]);
        let c = t.counters(0).unwrap();
        assert_eq!((c.unique, c.reordered, c.duplicates), (6, 0, 0));
        assert_eq!(c.max_seq, Some((1u64 << 32) + 2));
        // A late frame from before the wrap is reordered, not a new maximum.
        feed(&mut t, &[u32::MAX - 3]);
        let c = t.counters(0).unwrap();
        assert_eq!((c.unique, c.reordered), (7, 1));
    }

    #[test]
    fn very_old_frames_are_late() {
        let mut t = RxTracker::new(1, TAG);
        feed(&mut t, &[10_000, 1]);
        let c = t.counters(0).unwrap();
        assert_eq!((c.late, c.unique, c.reordered), (1, 2, 1));
    }

    #[test]
    fn frames_after_finalise_are_late_and_not_unique() {
        let mut t = RxTracker::new(1, TAG);
        feed(&mut t, &[0, 1]);
        t.finalise();
        feed(&mut t, &[2]);
        let c = t.counters(0).unwrap();
        assert_eq!((c.frames, c.unique, c.late), (3, 2, 1));
    }

    #[test]
    fn other_frames_stay_out_of_flow_counters() {
        let mut t = RxTracker::new(2, TAG);
        let chatter = vec![0x33u8; 86];
        assert_eq!(t.on_frame(&chatter, 86, None), RxClass::NotInstrumented);
        assert_eq!(t.on_frame(&frame(9, 0), 60, None), RxClass::UnknownFlow);
        assert_eq!(t.on_frame(&frame(0, 0)[..40], 60, None), RxClass::Truncated);
        assert_eq!(t.on_frame(&[], 0, None), RxClass::NotInstrumented);
        assert_eq!(
            t.other,
            OtherFrames {
                not_instrumented: 2,
                unknown_flow: 1,
                truncated: 1,
                ..OtherFrames::default()
            }
        );
        assert_eq!(t.counters(0).unwrap().frames, 0);
    }

    #[test]
    fn frames_of_other_runs_and_other_times_are_counted_apart() {
        let start = 1_000_000_000_000u64;
        let mut t = RxTracker::new(2, TAG);
        t.check_stamps_from(start);
        let rx = start + 5_000_000;
        let classes = [
            // This run's, as sent and as reflected back.
            t.on_frame(&stamped(0, 0, start + 10), 60, Some(rx)),
            t.on_frame(&tagged(TAG, true, 0, 1, start + 20), 60, Some(rx)),
            // Another run's tag, and the tag of versions before run tags.
            t.on_frame(&tagged(TAG ^ 1, false, 0, 2, start + 30), 60, Some(rx)),
            t.on_frame(
                &tagged(strobe_wire::trailer::LEGACY_TAG, false, 0, 3, start),
                60,
                Some(rx),
            ),
            // Stamped 100 s before the run, and after the frame arrived.
            t.on_frame(&stamped(0, 4, start - 100_000_000_000), 60, Some(rx)),
            t.on_frame(&stamped(0, 5, rx + STAMP_MARGIN_NS + 1), 60, Some(rx)),
            // Just inside the margins.
            t.on_frame(&stamped(0, 6, start - STAMP_MARGIN_NS), 60, Some(rx)),
            t.on_frame(&stamped(0, 7, rx + STAMP_MARGIN_NS), 60, Some(rx)),
            t.on_frame(&stamped(5, 8, start + 10), 60, Some(rx)),
        ];
        assert!(matches!(classes[0], RxClass::Flow(_)));
        assert!(matches!(classes[1], RxClass::Flow(t) if t.reflected));
        assert_eq!(
            classes[2..6],
            [
                RxClass::Foreign,
                RxClass::Foreign,
                RxClass::OutOfWindow,
                RxClass::OutOfWindow
            ]
        );
        assert!(matches!(classes[6], RxClass::Flow(_)) && matches!(classes[7], RxClass::Flow(_)));
        assert_eq!(classes[8], RxClass::UnknownFlow);
        assert_eq!(
            t.other,
            OtherFrames {
                foreign: 2,
                out_of_window: 2,
                unknown_flow: 1,
                ..OtherFrames::default()
            }
        );
        assert_eq!(t.other.total(), 5);
        let c = t.counters(0).unwrap();
        assert_eq!((c.frames, c.unique), (4, 4));
        // The forged stamps never reach the latency distribution.
        let h = t.latency(0).unwrap().histogram();
        // (Frame 7 "arrived before it left": counted as negative, not recorded.)
        assert_eq!(h.len(), 3);
        assert!(h.max() < 2 * STAMP_MARGIN_NS, "{}", h.max());
    }

    #[test]
    fn more_unique_frames_than_sent_is_excess() {
        let mut t = RxTracker::new(2, TAG);
        feed(&mut t, &[0, 1, 2, 2, 3, 1_000_000]);
        let r = t.report(Some(&[4, 0]));
        assert_eq!((r[0].lost, r[0].excess), (Some(0), 1));
        assert_eq!((r[1].lost, r[1].excess), (Some(0), 0));
        // Without the number sent there is nothing to compare.
        assert_eq!(t.report(None)[0].excess, 0);
        let mut sum = r[0].clone();
        sum.add(&r[0]);
        assert_eq!(sum.excess, 2);
    }

    #[test]
    fn window_slides_by_any_amount() {
        for gap in [1u64, 63, 64, 65, 127, 128, 1000, 4095, 4096, 5000] {
            let mut f = FlowRx::new();
            f.on_frame(0, 60, 0, None, false);
            f.on_frame(gap as u32, 60, 0, None, false);
            // Old frame 0 is still known (if inside the window) so it counts as duplicate.
            f.on_frame(0, 60, 0, None, false);
            let c = &f.counters;
            if gap < WINDOW {
                assert_eq!((c.duplicates, c.late), (1, 0), "gap {gap}");
            } else {
                assert_eq!((c.duplicates, c.late), (0, 1), "gap {gap}");
            }
        }
    }
}

#[cfg(test)]
mod cost {
    use super::*;

    /// Manual measurement (not a check): ns per received frame in the tracker, with and
    /// without latency recording. `cargo test --release -p strobe-engine -- --ignored
    /// tracker_cost --nocapture`
    #[test]
    #[ignore]
    fn tracker_cost() {
        let frames: Vec<Vec<u8>> = (0..4096u32)
            .map(|seq| {
                let mut f = vec![0xAB; 60];
                let at = f.len() - TRAILER_LEN;
                let dst: &mut [u8; TRAILER_LEN] = (&mut f[at..]).try_into().unwrap();
                Trailer::sent(1, 0, seq, 1_000_000 + seq as u64 * 700).write(dst);
                f
            })
            .collect();
        for latency in [false, true, false, true] {
            let mut t = RxTracker::new(1, 1);
            t.set_latency(0, latency);
            let n = 20_000_000u64;
            let start = std::time::Instant::now();
            for i in 0..n {
                let f = &frames[(i % 4096) as usize];
                let rx = 1_000_000 + (i % 4096) * 700 + 15_000 + (i * 7919) % 3_000;
                std::hint::black_box(t.on_frame(std::hint::black_box(f), 60, Some(rx)));
            }
            let ns = start.elapsed().as_nanos() as f64 / n as f64;
            println!("latency {latency}: {ns:.2} ns/frame");
        }
    }
}
