//! The TPACKET_V3 receive ring: frames of any length packed into blocks, each block handed
//! over (its status word) when it is full or its timer expires. Block and frame headers are
//! read as untrusted input (see `ring_frame.rs`): a block whose headers point outside it is
//! counted and given back.

use std::mem::{offset_of, size_of};
use std::sync::atomic::{AtomicU32, Ordering};

use super::mapping::Mapping;
use super::ring_frame::{read_u16, read_u32, FrameHeader, Malformed, RingFrame};
use crate::RxFrame;

/// Reading state of a TPACKET_V3 ring.
pub(super) struct BlockRing {
    pub(super) block_size: usize,
    pub(super) block_count: usize,
    /// Block being read, or waited for.
    block: usize,
    /// Where we are inside `block` when it is ours and partly delivered.
    cursor: Option<BlockCursor>,
    /// Blocks whose headers pointed outside the block.
    pub(super) malformed: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct BlockCursor {
    /// Frames of the block not yet delivered.
    remaining: u32,
    /// Offset of the next frame's tpacket3_hdr from the block start.
    next: usize,
}

/// Offset of the block status word from a block's start.
pub(super) const BLOCK_STATUS: usize =
    offset_of!(libc::tpacket_block_desc, hdr) + offset_of!(libc::tpacket_hdr_v1, block_status);
pub(super) const BLOCK_NUM_PKTS: usize =
    offset_of!(libc::tpacket_block_desc, hdr) + offset_of!(libc::tpacket_hdr_v1, num_pkts);
pub(super) const BLOCK_FIRST_PKT: usize = offset_of!(libc::tpacket_block_desc, hdr)
    + offset_of!(libc::tpacket_hdr_v1, offset_to_first_pkt);
const BLOCK_HEADER_LEN: usize = size_of::<libc::tpacket_block_desc>();
pub(super) const FRAME_HEADER_LEN: usize = size_of::<libc::tpacket3_hdr>();

/// Reads a block header the kernel handed over: how many frames and where the first is.
fn open_block(block: &[u8]) -> Result<BlockCursor, Malformed> {
    let remaining = read_u32(block, BLOCK_NUM_PKTS)?;
    let next = read_u32(block, BLOCK_FIRST_PKT)? as usize;
    if remaining > 0 && (next < BLOCK_HEADER_LEN || next >= block.len()) {
        return Err(Malformed);
    }
    Ok(BlockCursor { remaining, next })
}

/// One frame inside a block, and where the next one's header is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FrameInBlock {
    frame: RingFrame,
    /// Offset of the following frame's header from this one's (0 for the last).
    next_offset: usize,
}

fn frame_at(block: &[u8], at: usize) -> Result<FrameInBlock, Malformed> {
    let header_end = at.checked_add(FRAME_HEADER_LEN).ok_or(Malformed)?;
    if header_end > block.len() {
        return Err(Malformed);
    }
    let field = |offset: usize| read_u32(block, at + offset);
    let hv1 = at + offset_of!(libc::tpacket3_hdr, hv1);
    let header = FrameHeader {
        status: field(offset_of!(libc::tpacket3_hdr, tp_status))?,
        wire_len: field(offset_of!(libc::tpacket3_hdr, tp_len))?,
        snaplen: field(offset_of!(libc::tpacket3_hdr, tp_snaplen))?,
        sec: field(offset_of!(libc::tpacket3_hdr, tp_sec))?,
        nsec: field(offset_of!(libc::tpacket3_hdr, tp_nsec))?,
        mac: usize::from(read_u16(
            block,
            at + offset_of!(libc::tpacket3_hdr, tp_mac),
        )?),
        // The TCI field is 32 bits wide in this header; the tag's 16 are the low ones.
        tci: read_u32(
            block,
            hv1 + offset_of!(libc::tpacket_hdr_variant1, tp_vlan_tci),
        )? as u16,
        tpid: read_u16(
            block,
            hv1 + offset_of!(libc::tpacket_hdr_variant1, tp_vlan_tpid),
        )?,
    };
    Ok(FrameInBlock {
        frame: header.frame(block, at, FRAME_HEADER_LEN)?,
        next_offset: field(offset_of!(libc::tpacket3_hdr, tp_next_offset))? as usize,
    })
}

impl BlockRing {
    /// A ring of `block_count` blocks of `block_size` bytes, read from its first block.
    pub(super) fn new(block_size: usize, block_count: usize) -> BlockRing {
        BlockRing {
            block_size,
            block_count,
            block: 0,
            cursor: None,
            malformed: 0,
        }
    }

    fn status<'r>(&self, ring: &'r Mapping) -> &'r AtomicU32 {
        // SAFETY: blocks are page-aligned and the status word lies inside the block header.
        unsafe { ring.status(self.block * self.block_size + BLOCK_STATUS) }
    }

    /// The current block's bytes. Only valid while the block is ours (status USER): callers
    /// stop using the slice before `release`.
    fn bytes<'r>(&self, ring: &'r Mapping) -> &'r [u8] {
        // SAFETY: the block lies inside the ring; while its status is TP_STATUS_USER the
        // kernel does not write it.
        unsafe {
            std::slice::from_raw_parts(
                ring.base.as_ptr().add(self.block * self.block_size),
                self.block_size,
            )
        }
    }

    /// Gives the current block back to the kernel and moves to the next.
    fn release(&mut self, ring: &Mapping) {
        self.cursor = None;
        self.status(ring)
            .store(libc::TP_STATUS_KERNEL, Ordering::Release);
        self.block += 1;
        if self.block == self.block_count {
            self.block = 0;
        }
    }

    pub(super) fn poll<F>(&mut self, ring: &Mapping, max: usize, each: &mut F) -> usize
    where
        F: FnMut(&RxFrame<'_>),
    {
        let mut delivered = 0;
        while delivered < max {
            let mut cursor = match self.cursor {
                Some(cursor) => cursor,
                None => {
                    if self.status(ring).load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
                        break;
                    }
                    match open_block(self.bytes(ring)) {
                        Ok(cursor) => cursor,
                        Err(Malformed) => {
                            self.malformed += 1;
                            self.release(ring);
                            continue;
                        }
                    }
                }
            };
            if cursor.remaining == 0 {
                self.release(ring);
                continue;
            }
            let block = self.bytes(ring);
            let FrameInBlock { frame, next_offset } = match frame_at(block, cursor.next) {
                Ok(frame) => frame,
                Err(Malformed) => {
                    self.malformed += 1;
                    self.release(ring);
                    continue;
                }
            };
            each(&frame.rx_frame(block));
            delivered += 1;
            cursor.remaining -= 1;
            if cursor.remaining == 0 {
                self.release(ring);
            } else if next_offset == 0 {
                // More frames announced but no link to them.
                self.malformed += 1;
                self.release(ring);
            } else {
                cursor.next += next_offset;
                self.cursor = Some(cursor);
            }
        }
        delivered
    }
}

/// Walks a whole TPACKET_V3 block the way [`AfPacketRx`]'s poll does, handing each frame's
/// data, wire length and stamp to `each`; for the tests and the fuzz targets, which have no
/// kernel ring to read.
#[cfg(any(test, feature = "fuzzing"))]
pub(super) fn walk_block(
    block: &[u8],
    each: &mut dyn FnMut(&[u8], u32, u64),
) -> Result<(), Malformed> {
    let mut cursor = open_block(block)?;
    while cursor.remaining > 0 {
        let FrameInBlock { frame, next_offset } = frame_at(block, cursor.next)?;
        each(frame.data(block), frame.wire_len, frame.timestamp_ns);
        cursor.remaining -= 1;
        if cursor.remaining > 0 {
            if next_offset == 0 {
                return Err(Malformed);
            }
            cursor.next = cursor.next.checked_add(next_offset).ok_or(Malformed)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::afpacket::mapping::{align_up, TPACKET_ALIGNMENT};
    use crate::test_support::HeaderFuzz;

    const BLOCK: usize = 4096;

    /// Writes a block header and frames the way the kernel lays them out.
    fn block_with(frames: &[&[u8]]) -> Vec<u8> {
        let mut block = vec![0u8; BLOCK];
        let first = align_up(BLOCK_HEADER_LEN, 8);
        block[BLOCK_NUM_PKTS..BLOCK_NUM_PKTS + 4]
            .copy_from_slice(&(frames.len() as u32).to_ne_bytes());
        block[BLOCK_FIRST_PKT..BLOCK_FIRST_PKT + 4].copy_from_slice(&(first as u32).to_ne_bytes());
        let mut at = first;
        for (i, data) in frames.iter().enumerate() {
            let mac = align_up(FRAME_HEADER_LEN + 20, TPACKET_ALIGNMENT);
            let next = align_up(mac + data.len(), TPACKET_ALIGNMENT);
            let put = |block: &mut Vec<u8>, offset: usize, value: u32| {
                block[at + offset..at + offset + 4].copy_from_slice(&value.to_ne_bytes())
            };
            let last = i + 1 == frames.len();
            put(
                &mut block,
                offset_of!(libc::tpacket3_hdr, tp_next_offset),
                if last { 0 } else { next as u32 },
            );
            put(
                &mut block,
                offset_of!(libc::tpacket3_hdr, tp_sec),
                1_700_000_000 + i as u32,
            );
            put(&mut block, offset_of!(libc::tpacket3_hdr, tp_nsec), 5);
            put(
                &mut block,
                offset_of!(libc::tpacket3_hdr, tp_snaplen),
                data.len() as u32,
            );
            put(
                &mut block,
                offset_of!(libc::tpacket3_hdr, tp_len),
                data.len() as u32 + 4,
            );
            let mac_at = at + offset_of!(libc::tpacket3_hdr, tp_mac);
            block[mac_at..mac_at + 2].copy_from_slice(&(mac as u16).to_ne_bytes());
            block[at + mac..at + mac + data.len()].copy_from_slice(data);
            at += next;
        }
        block
    }

    /// Walks a block the way `poll` does; None when it is malformed.
    fn walk(block: &[u8]) -> Option<Vec<(Vec<u8>, u32, u64)>> {
        let mut out = Vec::new();
        walk_block(block, &mut |data, wire_len, ts| {
            out.push((data.to_vec(), wire_len, ts))
        })
        .ok()?;
        Some(out)
    }

    #[test]
    fn walks_frames_of_a_well_formed_block() {
        let block = block_with(&[&[1; 60], &[2; 1514], &[3; 61]]);
        let frames = walk(&block).expect("well formed");
        assert_eq!(frames.len(), 3);
        assert_eq!(frames[0], (vec![1; 60], 64, 1_700_000_000_000_000_005));
        assert_eq!(frames[1].0, vec![2; 1514]);
        assert_eq!(frames[2].1, 65);
        assert_eq!(frames[2].2, 1_700_000_002_000_000_005);
    }

    #[test]
    fn rejects_lengths_and_offsets_outside_the_block() {
        let good = block_with(&[&[1; 100], &[2; 100]]);
        let first = read_u32(&good, BLOCK_FIRST_PKT).unwrap() as usize;

        let mut snap_too_long = good.clone();
        let at = first + offset_of!(libc::tpacket3_hdr, tp_snaplen);
        snap_too_long[at..at + 4].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert!(walk(&snap_too_long).is_none());

        let mut first_outside = good.clone();
        first_outside[BLOCK_FIRST_PKT..BLOCK_FIRST_PKT + 4]
            .copy_from_slice(&(BLOCK as u32 - 10).to_ne_bytes());
        assert!(walk(&first_outside).is_none());

        let mut next_outside = good.clone();
        let at = first + offset_of!(libc::tpacket3_hdr, tp_next_offset);
        next_outside[at..at + 4].copy_from_slice(&(BLOCK as u32).to_ne_bytes());
        assert!(walk(&next_outside).is_none());

        let mut too_many = good.clone();
        too_many[BLOCK_NUM_PKTS..BLOCK_NUM_PKTS + 4].copy_from_slice(&3u32.to_ne_bytes());
        assert!(walk(&too_many).is_none());

        let mut mac_inside_header = good;
        let at = first + offset_of!(libc::tpacket3_hdr, tp_mac);
        mac_inside_header[at..at + 2].copy_from_slice(&4u16.to_ne_bytes());
        assert!(walk(&mac_inside_header).is_none());
    }

    #[test]
    fn arbitrary_block_bytes_never_panic() {
        // A deterministic pseudo-random sweep over header words: any value must parse or be
        // rejected, never index out of bounds or overflow.
        let mut fuzz = HeaderFuzz::new(0x9E37_79B9_7F4A_7C15);
        let headers = BLOCK_HEADER_LEN + 3 * FRAME_HEADER_LEN + 64;
        for _ in 0..20_000 {
            let mut block = block_with(&[&[7; 80], &[8; 90]]);
            fuzz.corrupt(&mut block, headers, 4, 2 * BLOCK as u32);
            let _ = walk(&block);
        }
    }
}
