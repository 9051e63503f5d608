//! Transmit stamps taken after the hand-over: AF_XDP TX metadata (`XDP_TXMD_FLAGS_TIMESTAMP`,
//! Linux >= 6.8) has the kernel write, into each completed frame's metadata, the time the
//! frame went out: the NIC's stamp in zero-copy mode on a driver that stamps, the kernel's
//! software completion time (CLOCK_TAI, when the socket buffer is freed) in copy mode.
//!
//! Such a stamp exists only once the frame has left, so it cannot ride in the frame's
//! trailer. The sender reads it back with the completion and publishes, per (flow, sequence
//! number), how much later than the trailer's stamp the frame left: its *hand-over delay*.
//! A receiver in the same process looks the frame up on the [`TxStampBoard`] and takes
//! trailer stamp + delay as the frame's transmit time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use strobe_wire::trailer::Trailer;

use crate::clocksync::ClockSync;

/// Board entries: 2^20 (8 MiB), split evenly between the flows (at least 16 each): a flow's
/// entry for a frame is overwritten only by the same flow's frame that many sequence numbers
/// later, whatever the other flows send.
const BOARD_BITS: u32 = 20;
/// Fewest entries a flow gets (65 536 flow ids at most).
const MIN_FLOW_BITS: u32 = 4;
/// Marks a written entry (an entry of all zeros would otherwise match sequence number 0).
const WRITTEN: u64 = 1 << 31;
/// Delays are kept in 31 bits, two's complement: ±1.07 s, and one value for "no stamp".
const DELAY_BITS: u32 = 31;
const DELAY_MASK: u64 = (1 << DELAY_BITS) - 1;
/// The most negative 31-bit value: the frame completed without a usable stamp.
const NO_STAMP: i64 = -(1 << (DELAY_BITS - 1));

/// What the board says of one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Departure {
    /// Its sender has not published it (yet, or its entry was taken by a later frame).
    Unknown,
    /// It left this many ns after its trailer's stamp.
    After(i64),
    /// It completed without a usable stamp (the driver gave none, or one more than ±1.07 s
    /// from the trailer's): no use waiting for one.
    Unstamped,
}

/// Hand-over delays of frames sent, by (flow, sequence number), for the receivers of the
/// same run: one writer per transmitting port (its completion handling), any number of
/// readers; one atomic word per entry, no lock.
///
/// Flow `f`'s entries are `f << bits ..` (`bits` = 20 − log2 of the flows rounded up to a
/// power of two); its frame `seq` takes entry `seq mod 2^bits` there and writes
/// `seq << 32 | WRITTEN | delay` into it. A reader takes the delay only when the sequence
/// number matches, so a frame is never given another frame's delay.
pub struct TxStampBoard {
    entries: Box<[AtomicU64]>,
    flow_bits: u32,
}

impl TxStampBoard {
    /// A board for flow ids `0..flows` (at most 65 536).
    pub fn new(flows: usize) -> TxStampBoard {
        let flows = flows.clamp(1, 1 << 16).next_power_of_two();
        TxStampBoard {
            entries: (0..1usize << BOARD_BITS)
                .map(|_| AtomicU64::new(0))
                .collect(),
            flow_bits: (BOARD_BITS - flows.trailing_zeros()).max(MIN_FLOW_BITS),
        }
    }

    /// Sequence numbers a flow's entries cover before its own frames overwrite them.
    pub fn frames_per_flow(&self) -> u32 {
        1 << self.flow_bits
    }

    fn index(&self, flow: u16, seq: u32) -> usize {
        let mask = (1usize << self.flow_bits) - 1;
        // Flow ids past the board's (not expected: the board is made for the run's) share
        // the last flows' entries; the sequence check still keeps frames apart.
        (((flow as usize) << self.flow_bits) | (seq as usize & mask)) & (self.entries.len() - 1)
    }

    /// Records that frame (`flow`, `seq`) left `delay_ns` after its trailer's stamp; a delay
    /// beyond ±1.07 s is recorded as [`Departure::Unstamped`].
    pub fn publish(&self, flow: u16, seq: u32, delay_ns: i64) {
        let delay = if delay_ns > NO_STAMP && delay_ns < -NO_STAMP {
            delay_ns
        } else {
            NO_STAMP
        };
        self.store(flow, seq, delay);
    }

    /// Records that frame (`flow`, `seq`) completed without a stamp.
    pub fn publish_unstamped(&self, flow: u16, seq: u32) {
        self.store(flow, seq, NO_STAMP);
    }

    fn store(&self, flow: u16, seq: u32, delay: i64) {
        let word = (seq as u64) << 32 | WRITTEN | (delay as u64 & DELAY_MASK);
        self.entries[self.index(flow, seq)].store(word, Ordering::Release);
    }

    /// When frame (`flow`, `seq`) left, as far as its sender has published.
    pub fn departure(&self, flow: u16, seq: u32) -> Departure {
        let word = self.entries[self.index(flow, seq)].load(Ordering::Acquire);
        if word & WRITTEN == 0 || (word >> 32) as u32 != seq {
            return Departure::Unknown;
        }
        // Sign-extend the 31-bit delay.
        let raw = (word & DELAY_MASK) as i64;
        match (raw << (64 - DELAY_BITS)) >> (64 - DELAY_BITS) {
            NO_STAMP => Departure::Unstamped,
            delay => Departure::After(delay),
        }
    }

    /// The hand-over delay of frame (`flow`, `seq`), once its sender has published one.
    pub fn delay_ns(&self, flow: u16, seq: u32) -> Option<i64> {
        match self.departure(flow, seq) {
            Departure::After(delay) => Some(delay),
            _ => None,
        }
    }
}

impl std::fmt::Debug for TxStampBoard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the million entries.
        f.debug_struct("TxStampBoard")
            .field("frames_per_flow", &self.frames_per_flow())
            .finish_non_exhaustive()
    }
}

/// The clock a port's transmit stamps come in, and how they become CLOCK_REALTIME (the
/// clock of the trailers' stamps).
#[derive(Clone, Debug)]
pub enum TxStampClock {
    /// Copy mode: the kernel's completion time in CLOCK_TAI, which is CLOCK_REALTIME plus
    /// the kernel's TAI offset exactly (one clock, two epochs).
    KernelTai { tai_offset_ns: i64 },
    /// Zero-copy on a driver that stamps: the NIC's PTP clock, mapped through a clock sync.
    Device { phc: String, sync: ClockSync },
}

impl TxStampClock {
    /// The kernel's software completion clock, with the TAI offset it runs at now.
    pub fn kernel_tai() -> Result<TxStampClock, crate::IoError> {
        Ok(TxStampClock::KernelTai {
            tai_offset_ns: crate::clocksync::kernel_tai_offset_s()? as i64 * 1_000_000_000,
        })
    }

    /// `stamp` (in this clock) in CLOCK_REALTIME ns.
    pub fn to_realtime(&self, stamp: u64) -> i64 {
        match self {
            TxStampClock::KernelTai { tai_offset_ns } => stamp as i64 - tai_offset_ns,
            TxStampClock::Device { sync, .. } => sync.b_to_a(stamp as i128) as i64,
        }
    }

    /// The source's name in results: what took the stamps.
    pub fn source(&self) -> String {
        match self {
            TxStampClock::KernelTai { .. } => {
                "AF_XDP TX metadata: the kernel's completion time (copy mode, software)".into()
            }
            TxStampClock::Device { phc, .. } => {
                format!("AF_XDP TX metadata: the NIC's stamp in {phc}'s time")
            }
        }
    }
}

/// What a port's transmit stamps were: how many frames got one, and the hand-over delays.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxStampStats {
    /// Completed frames of this run that carried a stamp back.
    pub stamped: u64,
    /// Completed frames of this run without one (the driver did not stamp them).
    pub unstamped: u64,
    /// Hand-over delays (stamp minus the trailer's stamp) of the stamped frames, ns.
    pub delay_min_ns: i64,
    pub delay_max_ns: i64,
    pub delay_sum_ns: i128,
}

impl TxStampStats {
    pub fn record(&mut self, delay_ns: i64) {
        if self.stamped == 0 {
            self.delay_min_ns = delay_ns;
            self.delay_max_ns = delay_ns;
        } else {
            self.delay_min_ns = self.delay_min_ns.min(delay_ns);
            self.delay_max_ns = self.delay_max_ns.max(delay_ns);
        }
        self.stamped += 1;
        self.delay_sum_ns += delay_ns as i128;
    }

    /// Mean hand-over delay, ns (None before any stamp).
    pub fn delay_mean_ns(&self) -> Option<f64> {
        (self.stamped > 0).then(|| self.delay_sum_ns as f64 / self.stamped as f64)
    }
}

/// The test-only switch that lets copy mode's completion times stand in for transmit stamps,
/// so that their way through the engine can be tested on a veth: in debug builds,
/// `STROBE_TEST_ONLY_COMPLETION_STAMPS=1`; in release builds it does not exist (always
/// false, the variable is not read). Those stamps are no departure times (see the module
/// doc): results made with them are for tests only.
pub const COMPLETION_STAMPS_VAR: &str = "STROBE_TEST_ONLY_COMPLETION_STAMPS";

/// Whether the test-only switch [`COMPLETION_STAMPS_VAR`] is on (debug builds only).
pub fn completion_stamps_for_tests() -> bool {
    cfg!(debug_assertions) && std::env::var(COMPLETION_STAMPS_VAR).is_ok_and(|v| v == "1")
}

/// A transmitting port's side: turns each completed frame's stamp into its hand-over delay
/// and publishes it. Allocates nothing per frame.
pub struct TxStamper {
    board: Arc<TxStampBoard>,
    clock: TxStampClock,
    run_tag: u8,
    pub stats: TxStampStats,
}

impl TxStamper {
    pub fn new(board: Arc<TxStampBoard>, clock: TxStampClock, run_tag: u8) -> TxStamper {
        TxStamper {
            board,
            clock,
            run_tag,
            stats: TxStampStats::default(),
        }
    }

    /// Frame `frame` (as sent) completed with transmit stamp `stamp` (0: none). Frames
    /// without this run's trailer are not counted.
    pub fn completed(&mut self, stamp: u64, frame: &[u8]) {
        let Some(t) = Trailer::from_frame(frame) else {
            return;
        };
        if t.tag != self.run_tag || t.reflected {
            return;
        }
        if stamp == 0 {
            self.stats.unstamped += 1;
            self.board.publish_unstamped(t.flow_id, t.seq);
            return;
        }
        let delay = self.clock.to_realtime(stamp) - t.tx_ns as i64;
        self.stats.record(delay);
        self.board.publish(t.flow_id, t.seq, delay);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn an_unwritten_entry_matches_nothing_not_even_sequence_zero() {
        let board = TxStampBoard::new(3);
        assert_eq!(board.delay_ns(0, 0), None);
        board.publish(0, 0, 0);
        assert_eq!(board.delay_ns(0, 0), Some(0));
        assert_eq!(board.delay_ns(1, 0), None);
    }

    #[test]
    fn a_later_frame_of_the_flow_in_the_same_entry_hides_the_earlier_one() {
        let board = TxStampBoard::new(1);
        let later = 5 + board.frames_per_flow();
        board.publish(0, 5, 100);
        board.publish(0, later, 200);
        assert_eq!(board.departure(0, 5), Departure::Unknown);
        assert_eq!(board.delay_ns(0, later), Some(200));
    }

    /// Flows far apart in their sequence numbers keep their own entries.
    #[test]
    fn flows_do_not_take_each_others_entries() {
        let board = TxStampBoard::new(10_000);
        assert_eq!(board.frames_per_flow(), 64);
        board.publish(424, 7, 50);
        for seq in 0..100_000 {
            board.publish(0, seq, 1);
        }
        board.publish(9_999, 7 + 1_000_000, 2);
        assert_eq!(board.delay_ns(424, 7), Some(50));
        assert_eq!(TxStampBoard::new(1 << 16).frames_per_flow(), 16);
        assert_eq!(TxStampBoard::new(1).frames_per_flow(), 1 << 20);
    }

    #[test]
    fn delays_beyond_the_range_and_missing_stamps_read_as_unstamped() {
        let board = TxStampBoard::new(1);
        board.publish(0, 1, 2_000_000_000);
        board.publish(0, 2, -2_000_000_000);
        board.publish_unstamped(0, 3);
        board.publish(0, 4, -(1 << 30) + 1);
        for seq in 1..=3 {
            assert_eq!(board.departure(0, seq), Departure::Unstamped);
        }
        assert_eq!(board.delay_ns(0, 4), Some(-(1 << 30) + 1));
    }

    #[test]
    fn tai_stamps_move_back_by_the_offset() {
        let c = TxStampClock::KernelTai {
            tai_offset_ns: 37_000_000_000,
        };
        assert_eq!(c.to_realtime(1_037_000_000_123), 1_000_000_000_123);
    }

    proptest! {
        /// Any frame's delay reads back exactly, for frames of every flow published in
        /// sending order, as long as fewer than the board's entries came after it.
        #[test]
        fn published_delays_read_back_by_flow_and_sequence(
            flows in 1usize..2000,
            start in any::<u32>(),
            frames in proptest::collection::vec((any::<u16>(), -1_000_000_000i64..1_000_000_000), 1..300),
        ) {
            let board = TxStampBoard::new(flows);
            let mut seq = vec![start; flows];
            let mut sent = Vec::new();
            for (flow, delay) in frames {
                let flow = flow % flows as u16;
                let s = seq[flow as usize];
                seq[flow as usize] = s.wrapping_add(1);
                board.publish(flow, s, delay);
                sent.push((flow, s, delay));
            }
            for (flow, s, delay) in sent {
                prop_assert_eq!(board.delay_ns(flow, s), Some(delay));
                // A sequence number of the flow that was not sent is never taken for it.
                prop_assert_eq!(board.delay_ns(flow, s.wrapping_add(1_000_000)), None);
            }
        }
    }

    #[test]
    fn a_completed_frame_of_this_run_publishes_its_delay() {
        let board = Arc::new(TxStampBoard::new(4));
        let mut stamper = TxStamper::new(
            Arc::clone(&board),
            TxStampClock::KernelTai {
                tai_offset_ns: 37_000_000_000,
            },
            9,
        );
        let mut frame = vec![0u8; 64];
        let at = frame.len() - strobe_wire::trailer::LEN;
        Trailer::sent(9, 3, 77, 1_000_000).write((&mut frame[at..]).try_into().unwrap());
        stamper.completed(37_001_000_250, &frame);
        assert_eq!(board.delay_ns(3, 77), Some(250));
        // No stamp: counted, and published as such (no receiver waits for it).
        Trailer::sent(9, 3, 78, 1_000_000).write((&mut frame[at..]).try_into().unwrap());
        stamper.completed(0, &frame);
        assert_eq!(board.departure(3, 78), Departure::Unstamped);
        // Another run's frame, and a frame without a trailer: neither counted.
        Trailer::sent(8, 3, 79, 1_000_000).write((&mut frame[at..]).try_into().unwrap());
        stamper.completed(37_001_000_250, &frame);
        stamper.completed(37_001_000_250, &[0u8; 64]);
        assert_eq!(board.delay_ns(3, 79), None);
        assert_eq!((stamper.stats.stamped, stamper.stats.unstamped), (1, 1));
    }

    #[test]
    fn stats_keep_min_mean_and_max() {
        let mut s = TxStampStats::default();
        for d in [500, 100, 900] {
            s.record(d);
        }
        assert_eq!((s.stamped, s.delay_min_ns, s.delay_max_ns), (3, 100, 900));
        assert_eq!(s.delay_mean_ns(), Some(500.0));
    }
}
