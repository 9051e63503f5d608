//! The receive side of a port: frames as the kernel or NIC delivered them.

use crate::IoError;

/// Which clock stamped a received frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxTimestamp {
    /// The kernel's software receive timestamp (CLOCK_REALTIME ns), e.g. from TPACKET_V3.
    Kernel(u64),
    /// strobe's own clock right after the frame was taken from the ring (CLOCK_REALTIME ns).
    User(u64),
    /// The NIC's hardware timestamp (ns in its PTP hardware clock's time), when hardware
    /// timestamping is on and the driver stamped this frame.
    Hardware(u64),
}

impl RxTimestamp {
    /// The source's name as results show it.
    pub fn source(self) -> &'static str {
        match self {
            RxTimestamp::Kernel(_) => "kernel",
            RxTimestamp::User(_) => "user",
            RxTimestamp::Hardware(_) => "hardware",
        }
    }

    pub fn ns(self) -> u64 {
        match self {
            RxTimestamp::Kernel(ns) | RxTimestamp::User(ns) | RxTimestamp::Hardware(ns) => ns,
        }
    }
}

/// An 802.1Q/802.1ad tag the kernel took out of a received frame (VLAN offload).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VlanTag {
    /// The tag's EtherType: 0x8100 (802.1Q) or 0x88a8 (802.1ad).
    pub tpid: u16,
    /// Priority, drop eligibility and VLAN id.
    pub tci: u16,
}

impl VlanTag {
    /// The tag as it sits on the wire, after the source MAC.
    pub fn bytes(self) -> [u8; 4] {
        let [a, b] = self.tpid.to_be_bytes();
        let [c, d] = self.tci.to_be_bytes();
        [a, b, c, d]
    }
}

/// One received frame. `data` is only valid during the callback.
#[derive(Clone, Copy, Debug)]
pub struct RxFrame<'a> {
    /// The frame without FCS, possibly truncated (see `wire_len`).
    pub data: &'a [u8],
    /// Length of the frame as it was on the wire (without FCS).
    pub wire_len: u32,
    pub timestamp: Option<RxTimestamp>,
    /// The outer VLAN tag, when the kernel stripped it from `data` (frames sent back, as a
    /// reflector does, must get it back).
    pub vlan: Option<VlanTag>,
}

/// Counters a receiver keeps about frames it could not deliver.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxDrops {
    /// Frames the kernel dropped because the ring was full.
    pub ring_full: u64,
}

/// One receive queue of one port, busy-polled by an RX worker.
pub trait Receiver: Send {
    fn describe(&self) -> String;
    /// Hands up to `max` frames that are ready to `each`, without blocking; returns how
    /// many were delivered (0 when nothing is waiting).
    fn poll<F>(&mut self, max: usize, each: F) -> Result<usize, IoError>
    where
        F: FnMut(&RxFrame<'_>);
    /// Drop counters so far.
    fn drops(&mut self) -> Result<RxDrops, IoError>;
    /// The PTP hardware clock (`/dev/ptpN`) whose time this receiver's hardware timestamps
    /// are in, when it delivers hardware timestamps.
    fn hardware_clock(&self) -> Option<String> {
        None
    }
    /// An error naming why the receiver can receive no more (its interface is gone), which
    /// [`Receiver::poll`] may never say: a ring just stays empty. A system call, so the
    /// receive worker asks only while nothing arrives, and seldom.
    fn check_alive(&mut self) -> Result<(), IoError> {
        Ok(())
    }
}
