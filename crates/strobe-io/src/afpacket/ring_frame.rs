//! One received frame's header, as the kernel writes it into a TPACKET_V3 block or a
//! TPACKET_V2 slot, read as untrusted input: every length and offset is checked against the
//! bytes it lies in before it is used.

use crate::{RxFrame, VlanTag};

use super::timestamps::ring_timestamp;

/// tp_status bits: the frame had a VLAN tag, which the kernel moved into the header
/// (linux/if_packet.h), and the header holds its TPID too.
const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;

/// The VLAN tag the kernel took out of a ring frame, from its status and header fields.
fn ring_vlan(status: u32, tci: u16, tpid: u16) -> Option<VlanTag> {
    if status & TP_STATUS_VLAN_VALID == 0 {
        return None;
    }
    let tpid = if status & TP_STATUS_VLAN_TPID_VALID != 0 && tpid != 0 {
        tpid
    } else {
        0x8100
    };
    Some(VlanTag { tpid, tci })
}

/// A ring block or frame header that points outside its block or slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Malformed;

pub(super) fn read_u32(block: &[u8], offset: usize) -> Result<u32, Malformed> {
    let bytes = block
        .get(offset..offset.checked_add(4).ok_or(Malformed)?)
        .ok_or(Malformed)?;
    Ok(u32::from_ne_bytes(bytes.try_into().map_err(|_| Malformed)?))
}

pub(super) fn read_u16(block: &[u8], offset: usize) -> Result<u16, Malformed> {
    let bytes = block
        .get(offset..offset.checked_add(2).ok_or(Malformed)?)
        .ok_or(Malformed)?;
    Ok(u16::from_ne_bytes(bytes.try_into().map_err(|_| Malformed)?))
}

/// One frame of a ring, a V3 block's or a V2 slot's, with every offset checked against the
/// bytes it lies in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct RingFrame {
    pub(super) data_start: usize,
    pub(super) data_len: usize,
    pub(super) wire_len: u32,
    pub(super) timestamp_ns: u64,
    /// tp_status: which clock stamped the frame.
    pub(super) status: u32,
    pub(super) vlan: Option<VlanTag>,
}

impl RingFrame {
    /// The frame's data in `bytes`, the block or slot it was read from.
    #[inline]
    pub(super) fn data<'b>(&self, bytes: &'b [u8]) -> &'b [u8] {
        &bytes[self.data_start..self.data_start + self.data_len]
    }

    /// The frame as a receiver hands it on, its data in `bytes` (see [`RingFrame::data`]).
    #[inline]
    pub(super) fn rx_frame<'b>(&self, bytes: &'b [u8]) -> RxFrame<'b> {
        RxFrame {
            data: self.data(bytes),
            wire_len: self.wire_len,
            timestamp: Some(ring_timestamp(self.status, self.timestamp_ns)),
            vlan: self.vlan,
        }
    }
}

/// The fields of a TPACKET_V3 or V2 frame header that describe its frame, as the kernel
/// wrote them: nothing checked yet.
pub(super) struct FrameHeader {
    pub(super) status: u32,
    pub(super) wire_len: u32,
    pub(super) snaplen: u32,
    pub(super) sec: u32,
    pub(super) nsec: u32,
    /// Where the frame data starts, from the header's start.
    pub(super) mac: usize,
    pub(super) tci: u16,
    pub(super) tpid: u16,
}

impl FrameHeader {
    /// The frame of this header, which starts at `at` in `bytes` (a block or a slot): its
    /// data must lie past the first `header_len` bytes of the header and inside `bytes`.
    #[inline]
    pub(super) fn frame(
        &self,
        bytes: &[u8],
        at: usize,
        header_len: usize,
    ) -> Result<RingFrame, Malformed> {
        let data_start = at.checked_add(self.mac).ok_or(Malformed)?;
        let data_len = self.snaplen as usize;
        let data_end = data_start.checked_add(data_len).ok_or(Malformed)?;
        if self.mac < header_len || data_end > bytes.len() {
            return Err(Malformed);
        }
        Ok(RingFrame {
            data_start,
            data_len,
            wire_len: self.wire_len,
            timestamp_ns: u64::from(self.sec) * 1_000_000_000 + u64::from(self.nsec),
            status: self.status,
            vlan: ring_vlan(self.status, self.tci, self.tpid),
        })
    }
}
