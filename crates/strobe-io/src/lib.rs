//! strobe-io: the transmit backends behind one trait, plus capture-file reading.
//!
//! A backend owns the frame buffers ("slots"); the engine writes a whole batch of frames
//! straight into slots through the `fill` callback of [`Backend::transmit`], so it can work
//! field by field over the batch instead of dispatching per packet. Slot ids are stable, so
//! the engine can keep a template in a slot and patch only the varying fields, as MoonGen does
//! with pre-filled mbufs. Live backends (AF_PACKET, AF_XDP) implement the same trait with
//! ring frames / UMEM frames as slots.
pub mod afpacket;
pub mod afxdp;
mod capture;
pub mod netns;
mod null;
mod pcap;
mod rx;

pub use capture::{read_capture, CaptureInfo, CapturedFrame};
pub use null::{slots_of, NullBackend};
pub use pcap::PcapBackend;
pub use rx::{Receiver, RxDrops, RxFrame, RxTimestamp};

/// Most frames one `transmit` call may carry.
pub const MAX_BATCH: usize = 256;

/// One frame buffer handed to the engine's fill callback.
pub struct TxSlot<'a> {
    /// Stable id of the buffer: the same id always names the same memory.
    pub id: u32,
    /// The buffer, `max_frame_len()` bytes; it still holds what was last written into it.
    pub buf: &'a mut [u8],
    /// Set by the engine: frame length without FCS.
    pub len: usize,
    /// Set by the engine: scheduled departure in ns on the run's timeline (t0 = 0).
    pub scheduled_ns: u64,
}

/// A batch of slots on the stack (no allocation per batch).
pub type TxBatch<'a> = arrayvec::ArrayVec<TxSlot<'a>, MAX_BATCH>;

/// How a backend's transmit timestamps relate to real time; reported with every result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeBase {
    /// No wall clock: frames carry their scheduled departure (deterministic traces).
    Scheduled,
    /// Frames leave in real time, timestamped by the engine's clock.
    RealTime,
}

/// Counters a backend keeps about what it accepted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BackendStats {
    pub frames: u64,
    pub bytes: u64,
}

/// Errors from opening or driving a backend.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    #[error("unknown port `{0}`: accepted forms are `pcap:FILE` (write a nanosecond pcap) and `null` (drop after all per-packet work)")]
    UnknownPort(String),
    #[error("{what} `{path}`: {source}")]
    File {
        what: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a readable pcap or pcapng file: {detail}")]
    BadCapture { path: String, detail: String },
    #[error("{0}")]
    Other(String),
}

/// One transmit queue of one port.
pub trait Backend: Send {
    /// Human description, e.g. `pcap:out.pcap (nanosecond pcap, scheduled time)`.
    fn describe(&self) -> String;
    /// How many frame slots the backend owns; `transmit` never asks for more at once.
    fn slot_count(&self) -> usize;
    /// Largest frame (without FCS) a slot holds.
    fn max_frame_len(&self) -> usize;
    fn time_base(&self) -> TimeBase;
    /// Transmit up to `count` frames (at most [`MAX_BATCH`] and `slot_count()`): the backend
    /// picks free slots and calls `fill` once with all of them; the engine writes the frames
    /// and sets each slot's `len` and `scheduled_ns`. Returns how many frames were handed to
    /// the wire (or file).
    fn transmit<F>(&mut self, count: usize, fill: F) -> Result<usize, IoError>
    where
        F: FnOnce(&mut [TxSlot<'_>]);
    /// Flush buffered output; called once at the end of a run.
    fn finish(&mut self) -> Result<BackendStats, IoError>;
}

/// Frame slot capacity of the file and null backends: jumbo frames up to 9216 bytes.
pub const MAX_FRAME_LEN: usize = 9216;

/// Any backend strobe can open from a port location string.
pub enum AnyBackend {
    Pcap(PcapBackend),
    Null(NullBackend),
}

impl AnyBackend {
    /// The time base a port location would have, without opening it.
    pub fn time_base_of(location: &str) -> Option<TimeBase> {
        if location.starts_with("pcap:") {
            Some(TimeBase::Scheduled)
        } else if location == "null" {
            Some(TimeBase::RealTime)
        } else {
            None
        }
    }

    /// Opens the backend named by a port location: `pcap:FILE` or `null`.
    /// `slots` is the batch size the engine will use.
    pub fn open(location: &str, slots: usize) -> Result<Self, IoError> {
        if let Some(path) = location.strip_prefix("pcap:") {
            if path.is_empty() {
                return Err(IoError::UnknownPort(location.to_string()));
            }
            return Ok(AnyBackend::Pcap(PcapBackend::create(path)?));
        }
        if location == "null" {
            return Ok(AnyBackend::Null(NullBackend::new(slots.max(1))));
        }
        Err(IoError::UnknownPort(location.to_string()))
    }
}

impl Backend for AnyBackend {
    fn describe(&self) -> String {
        match self {
            AnyBackend::Pcap(b) => b.describe(),
            AnyBackend::Null(b) => b.describe(),
        }
    }
    fn slot_count(&self) -> usize {
        match self {
            AnyBackend::Pcap(b) => b.slot_count(),
            AnyBackend::Null(b) => b.slot_count(),
        }
    }
    fn max_frame_len(&self) -> usize {
        match self {
            AnyBackend::Pcap(b) => b.max_frame_len(),
            AnyBackend::Null(b) => b.max_frame_len(),
        }
    }
    fn time_base(&self) -> TimeBase {
        match self {
            AnyBackend::Pcap(b) => b.time_base(),
            AnyBackend::Null(b) => b.time_base(),
        }
    }
    fn transmit<F>(&mut self, count: usize, fill: F) -> Result<usize, IoError>
    where
        F: FnOnce(&mut [TxSlot<'_>]),
    {
        match self {
            AnyBackend::Pcap(b) => b.transmit(count, fill),
            AnyBackend::Null(b) => b.transmit(count, fill),
        }
    }
    fn finish(&mut self) -> Result<BackendStats, IoError> {
        match self {
            AnyBackend::Pcap(b) => b.finish(),
            AnyBackend::Null(b) => b.finish(),
        }
    }
}

/// Any receiver strobe can open from a port location.
pub enum AnyReceiver {}

impl AnyReceiver {
    /// Opens the receive side of a port location.
    pub fn open(location: &str) -> Result<Self, IoError> {
        Err(IoError::Other(format!(
            "port `{location}` cannot receive: `pcap:` and `null` ports only transmit"
        )))
    }
}

impl Receiver for AnyReceiver {
    fn describe(&self) -> String {
        match *self {}
    }
    fn poll<F>(&mut self, _max: usize, _each: F) -> Result<usize, IoError>
    where
        F: FnMut(&RxFrame<'_>),
    {
        match *self {}
    }
    fn drops(&mut self) -> Result<RxDrops, IoError> {
        match *self {}
    }
}
