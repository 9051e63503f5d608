//! The TPACKET_V2 receive ring: one fixed-size slot per frame, each with its own status word.
//!
//! A V3 block is handed over only when it is full or its timer expires, so a lone frame can
//! wait milliseconds in the ring. Here the kernel flips a slot's status to USER as soon as it
//! has written the frame, and we flip it back after reading: every frame is ours at once, at
//! the cost of one status handshake per frame instead of per block.
//!
//! Slot headers are written by the kernel, but we treat them as untrusted input: every length
//! and offset is checked against the slot before it is used, and a slot that fails the check
//! is counted and given back.

use std::mem::{offset_of, size_of};
use std::sync::atomic::{AtomicU32, Ordering};

use super::mapping::{align_up, Mapping, TPACKET_ALIGNMENT};
use super::ring_frame::{read_u16, read_u32, FrameHeader, Malformed, RingFrame};
use super::socket::LINK_OVERHEAD;
use crate::RxFrame;

/// Where a slot's frame data may start at the earliest: after the tpacket2_hdr (aligned) and
/// the sockaddr_ll the kernel writes behind it (the kernel's TPACKET2_HDRLEN).
const SLOT_HEADER_LEN: usize =
    align_up(size_of::<libc::tpacket2_hdr>(), TPACKET_ALIGNMENT) + size_of::<libc::sockaddr_ll>();
/// Where the kernel puts a frame's network header in a slot: the header room plus at least 16
/// bytes for the link header, aligned. Frame data ends at most MTU (+ one in-band VLAN tag)
/// after it, which is what a slot must hold for no frame of the link to be cut.
const NETWORK_OFFSET: usize = align_up(SLOT_HEADER_LEN + 16, TPACKET_ALIGNMENT);

/// How a TPACKET_V2 ring is laid out: `blocks` blocks of `block_size` bytes, each holding
/// `frames_per_block` slots of `frame_size` bytes (slots never straddle blocks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FrameGeometry {
    pub frame_size: usize,
    pub frames_per_block: usize,
    pub block_size: usize,
    pub blocks: usize,
}

impl FrameGeometry {
    /// Slots that hold any frame an interface of this MTU carries, packed into the blocks.
    pub fn for_mtu(mtu: usize, block_size: usize, blocks: usize) -> Result<Self, String> {
        let frame_size = NETWORK_OFFSET
            .checked_add(mtu)
            .and_then(|n| n.checked_add(LINK_OVERHEAD))
            .map(|n| align_up(n, TPACKET_ALIGNMENT))
            .ok_or_else(|| format!("the interface MTU {mtu} is out of range"))?;
        let frames_per_block = block_size / frame_size;
        if frames_per_block == 0 {
            return Err(format!(
                "rx_block_size {block_size} cannot hold one TPACKET_V2 frame slot of \
                 {frame_size} bytes (MTU {mtu}); use rx_block_size of at least {frame_size} \
                 bytes, rounded up to a page"
            ));
        }
        Ok(FrameGeometry {
            frame_size,
            frames_per_block,
            block_size,
            blocks,
        })
    }

    pub fn frame_count(&self) -> usize {
        self.frames_per_block * self.blocks
    }

    /// Byte offset of slot `frame` from the ring start.
    pub fn offset(&self, frame: usize) -> usize {
        (frame / self.frames_per_block) * self.block_size
            + (frame % self.frames_per_block) * self.frame_size
    }

    /// The PACKET_RX_RING request; None when a number does not fit the kernel's u32 fields.
    pub fn request(&self) -> Option<libc::tpacket_req> {
        Some(libc::tpacket_req {
            tp_block_size: u32::try_from(self.block_size).ok()?,
            tp_block_nr: u32::try_from(self.blocks).ok()?,
            tp_frame_size: u32::try_from(self.frame_size).ok()?,
            tp_frame_nr: u32::try_from(self.frames_per_block.checked_mul(self.blocks)?).ok()?,
        })
    }
}

/// Reads the header of a slot the kernel handed over.
fn parse_slot(slot: &[u8]) -> Result<RingFrame, Malformed> {
    let field = |offset: usize| read_u32(slot, offset);
    let header = FrameHeader {
        status: field(offset_of!(libc::tpacket2_hdr, tp_status))?,
        wire_len: field(offset_of!(libc::tpacket2_hdr, tp_len))?,
        snaplen: field(offset_of!(libc::tpacket2_hdr, tp_snaplen))?,
        sec: field(offset_of!(libc::tpacket2_hdr, tp_sec))?,
        nsec: field(offset_of!(libc::tpacket2_hdr, tp_nsec))?,
        mac: usize::from(read_u16(slot, offset_of!(libc::tpacket2_hdr, tp_mac))?),
        tci: read_u16(slot, offset_of!(libc::tpacket2_hdr, tp_vlan_tci))?,
        tpid: read_u16(slot, offset_of!(libc::tpacket2_hdr, tp_vlan_tpid))?,
    };
    // The kernel captures at most the whole frame, and writes nanoseconds below a second.
    if header.snaplen > header.wire_len || header.nsec >= 1_000_000_000 {
        return Err(Malformed);
    }
    header.frame(slot, 0, SLOT_HEADER_LEN)
}

/// A slot's frame data and wire length, sliced exactly as `FrameRing::poll` slices them.
#[cfg(feature = "fuzzing")]
pub(super) fn slot_data(slot: &[u8]) -> Option<(&[u8], u32)> {
    let frame = parse_slot(slot).ok()?;
    Some((frame.data(slot), frame.wire_len))
}

/// Reading state of a TPACKET_V2 ring.
pub(super) struct FrameRing {
    geometry: FrameGeometry,
    /// Next slot to read: the kernel fills slots in ring order.
    next: usize,
    malformed: u64,
}

impl FrameRing {
    pub fn new(geometry: FrameGeometry) -> Self {
        FrameRing {
            geometry,
            next: 0,
            malformed: 0,
        }
    }

    pub fn geometry(&self) -> &FrameGeometry {
        &self.geometry
    }

    /// Slots whose headers pointed outside the slot; they were skipped and given back.
    pub fn malformed(&self) -> u64 {
        self.malformed
    }

    fn status<'r>(&self, ring: &'r Mapping) -> &'r AtomicU32 {
        // SAFETY: slot offsets are multiples of TPACKET_ALIGNMENT inside the ring (the
        // geometry the kernel accepted for this mapping), and the status word leads each slot.
        unsafe { ring.status(self.geometry.offset(self.next)) }
    }

    /// Hands up to `max` waiting frames to `each`, giving each slot back right after.
    pub fn poll<F>(&mut self, ring: &Mapping, max: usize, each: &mut F) -> usize
    where
        F: FnMut(&RxFrame<'_>),
    {
        let mut delivered = 0;
        while delivered < max {
            if self.status(ring).load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
                break;
            }
            // SAFETY: the slot lies inside the ring, and while its status is TP_STATUS_USER
            // the kernel does not write it. The slice ends with this statement, before the
            // status store below hands the slot back.
            let slot = unsafe {
                std::slice::from_raw_parts(
                    ring.base.as_ptr().add(self.geometry.offset(self.next)),
                    self.geometry.frame_size,
                )
            };
            match parse_slot(slot) {
                Ok(frame) => {
                    each(&frame.rx_frame(slot));
                    delivered += 1;
                }
                Err(Malformed) => self.malformed += 1,
            }
            self.status(ring)
                .store(libc::TP_STATUS_KERNEL, Ordering::Release);
            self.next += 1;
            if self.next == self.geometry.frame_count() {
                self.next = 0;
            }
        }
        delivered
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::HeaderFuzz;
    use crate::VlanTag;
    use std::ptr::{self, NonNull};

    /// Writes a slot the way the kernel does for an Ethernet frame.
    fn put_frame(slot: &mut [u8], data: &[u8], wire_len: u32, sec: u32, nsec: u32) {
        let mac = NETWORK_OFFSET - 14;
        let mut put = |offset: usize, value: u32| {
            slot[offset..offset + 4].copy_from_slice(&value.to_ne_bytes());
        };
        put(offset_of!(libc::tpacket2_hdr, tp_len), wire_len);
        put(
            offset_of!(libc::tpacket2_hdr, tp_snaplen),
            data.len() as u32,
        );
        put(offset_of!(libc::tpacket2_hdr, tp_sec), sec);
        put(offset_of!(libc::tpacket2_hdr, tp_nsec), nsec);
        let at = offset_of!(libc::tpacket2_hdr, tp_mac);
        slot[at..at + 2].copy_from_slice(&(mac as u16).to_ne_bytes());
        slot[mac..mac + data.len()].copy_from_slice(data);
    }

    fn slot_with(data: &[u8]) -> Vec<u8> {
        let mut slot = vec![0u8; 1600];
        put_frame(&mut slot, data, data.len() as u32 + 4, 1_700_000_000, 42);
        slot
    }

    fn set_u32(slot: &mut [u8], offset: usize, value: u32) {
        slot[offset..offset + 4].copy_from_slice(&value.to_ne_bytes());
    }

    #[test]
    fn a_stripped_vlan_tag_is_read_from_the_header() {
        let mut slot = slot_with(&[0x11; 60]);
        assert_eq!(parse_slot(&slot).unwrap().vlan, None);
        let status = libc::TP_STATUS_USER | 1 << 4 | 1 << 6; // VLAN_VALID, VLAN_TPID_VALID
        set_u32(&mut slot, offset_of!(libc::tpacket2_hdr, tp_status), status);
        let at = offset_of!(libc::tpacket2_hdr, tp_vlan_tci);
        slot[at..at + 2].copy_from_slice(&0x2007u16.to_ne_bytes());
        let at = offset_of!(libc::tpacket2_hdr, tp_vlan_tpid);
        slot[at..at + 2].copy_from_slice(&0x88a8u16.to_ne_bytes());
        assert_eq!(
            parse_slot(&slot).unwrap().vlan,
            Some(VlanTag {
                tpid: 0x88a8,
                tci: 0x2007
            })
        );
        // Without TPID_VALID (older kernels) the tag is 802.1Q.
        set_u32(
            &mut slot,
            offset_of!(libc::tpacket2_hdr, tp_status),
            libc::TP_STATUS_USER | 1 << 4,
        );
        assert_eq!(parse_slot(&slot).unwrap().vlan.unwrap().tpid, 0x8100);
    }

    #[test]
    fn layout_matches_the_kernel_abi() {
        assert_eq!(size_of::<libc::tpacket2_hdr>(), 32);
        assert_eq!(SLOT_HEADER_LEN, libc::TPACKET2_HDRLEN);
        assert_eq!(SLOT_HEADER_LEN, 52);
        // The kernel puts an Ethernet frame at 80 - 14 = 66 in each slot.
        assert_eq!(NETWORK_OFFSET, 80);
    }

    #[test]
    fn slots_fit_the_mtu_and_never_straddle_blocks() {
        let g = FrameGeometry::for_mtu(1500, 4096, 3).unwrap();
        assert_eq!(g.frame_size, 1600);
        assert_eq!(g.frames_per_block, 2);
        assert_eq!(g.frame_count(), 6);
        let offsets: Vec<usize> = (0..6).map(|i| g.offset(i)).collect();
        assert_eq!(offsets, [0, 1600, 4096, 5696, 8192, 9792]);
        for &offset in &offsets {
            assert_eq!(offset % TPACKET_ALIGNMENT, 0);
            assert!(offset % 4096 + g.frame_size <= 4096);
        }
        // A full MTU frame with a VLAN tag fits behind the kernel's header room.
        assert!(NETWORK_OFFSET - 14 + 1500 + LINK_OVERHEAD <= g.frame_size);
        let req = g.request().unwrap();
        assert_eq!(
            (
                req.tp_block_size,
                req.tp_block_nr,
                req.tp_frame_size,
                req.tp_frame_nr
            ),
            (4096, 3, 1600, 6)
        );
    }

    #[test]
    fn a_block_too_small_for_one_slot_is_a_clear_error() {
        let err = FrameGeometry::for_mtu(9000, 4096, 8).unwrap_err();
        assert!(
            err.contains("rx_block_size 4096") && err.contains("MTU 9000"),
            "{err}"
        );
        assert!(FrameGeometry::for_mtu(usize::MAX - 10, 4096, 1).is_err());
        let huge = FrameGeometry::for_mtu(1500, 1 << 20, usize::MAX / 2).unwrap();
        assert!(huge.request().is_none());
    }

    #[test]
    fn reads_a_well_formed_slot() {
        let data: Vec<u8> = (0..200).map(|i| i as u8).collect();
        let slot = slot_with(&data);
        let frame = parse_slot(&slot).unwrap();
        assert_eq!(
            &slot[frame.data_start..frame.data_start + frame.data_len],
            &data[..]
        );
        assert_eq!(frame.wire_len, 204);
        assert_eq!(frame.timestamp_ns, 1_700_000_000_000_000_042);
    }

    #[test]
    fn a_cut_frame_keeps_its_wire_length() {
        let mut slot = vec![0u8; 1600];
        put_frame(&mut slot, &[9; 1534], 3000, 1, 0);
        let frame = parse_slot(&slot).unwrap();
        assert_eq!((frame.data_len, frame.wire_len), (1534, 3000));
    }

    #[test]
    fn rejects_headers_that_point_outside_the_slot() {
        let good = slot_with(&[1; 100]);
        let len_at = offset_of!(libc::tpacket2_hdr, tp_len);
        let snap_at = offset_of!(libc::tpacket2_hdr, tp_snaplen);
        let mac_at = offset_of!(libc::tpacket2_hdr, tp_mac);
        let nsec_at = offset_of!(libc::tpacket2_hdr, tp_nsec);

        let mut snap_past_end = good.clone();
        set_u32(&mut snap_past_end, len_at, u32::MAX);
        set_u32(&mut snap_past_end, snap_at, 1600 - 66 + 1);
        assert_eq!(parse_slot(&snap_past_end), Err(Malformed));

        let mut snap_huge = good.clone();
        set_u32(&mut snap_huge, len_at, u32::MAX);
        set_u32(&mut snap_huge, snap_at, u32::MAX);
        assert_eq!(parse_slot(&snap_huge), Err(Malformed));

        let mut snap_over_wire = good.clone();
        set_u32(&mut snap_over_wire, len_at, 99);
        assert_eq!(parse_slot(&snap_over_wire), Err(Malformed));

        let mut mac_in_header = good.clone();
        mac_in_header[mac_at..mac_at + 2].copy_from_slice(&20u16.to_ne_bytes());
        assert_eq!(parse_slot(&mac_in_header), Err(Malformed));

        let mut mac_past_end = good.clone();
        mac_past_end[mac_at..mac_at + 2].copy_from_slice(&u16::MAX.to_ne_bytes());
        assert_eq!(parse_slot(&mac_past_end), Err(Malformed));

        let mut bad_nsec = good.clone();
        set_u32(&mut bad_nsec, nsec_at, 1_000_000_000);
        assert_eq!(parse_slot(&bad_nsec), Err(Malformed));

        assert_eq!(parse_slot(&good[..20]), Err(Malformed));
        assert_eq!(parse_slot(&[]), Err(Malformed));
    }

    #[test]
    fn arbitrary_slot_bytes_never_panic() {
        // A deterministic pseudo-random sweep over header words and slot lengths: any value
        // must parse to a frame inside the slot or be rejected.
        let mut fuzz = HeaderFuzz::new(0x2545_F491_4F6C_DD1D);
        for _ in 0..20_000 {
            let mut slot = slot_with(&[7; 300]);
            fuzz.corrupt(&mut slot, size_of::<libc::tpacket2_hdr>() - 3, 3, 4000);
            let len = match fuzz.below(3) {
                0 => fuzz.below(slot.len()),
                _ => slot.len(),
            };
            if let Ok(frame) = parse_slot(&slot[..len]) {
                assert!(frame.data_start >= SLOT_HEADER_LEN);
                assert!(frame.data_start + frame.data_len <= len);
                assert!(frame.data_len as u64 <= u64::from(frame.wire_len));
            }
        }
    }

    /// Zeroed private memory standing in for the kernel's ring.
    fn fake_ring(len: usize) -> Mapping {
        // SAFETY: an anonymous private mapping of `len` bytes; the result is checked.
        let addr = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(addr, libc::MAP_FAILED);
        Mapping {
            base: NonNull::new(addr.cast()).unwrap(),
            len,
        }
    }

    /// Plays the kernel: writes `data` into slot `frame` (or garbage) and hands it over.
    fn kernel_fills(ring: &Mapping, g: &FrameGeometry, frame: usize, data: Option<&[u8]>) {
        let offset = g.offset(frame);
        // SAFETY: the slot lies inside the fake ring and the test owns all of it.
        let slot =
            unsafe { std::slice::from_raw_parts_mut(ring.base.as_ptr().add(offset), g.frame_size) };
        match data {
            Some(data) => put_frame(slot, data, data.len() as u32, 10, frame as u32),
            None => set_u32(slot, offset_of!(libc::tpacket2_hdr, tp_snaplen), u32::MAX),
        }
        // SAFETY: slot offsets are aligned and inside the fake ring.
        unsafe { ring.status(offset) }.store(libc::TP_STATUS_USER, Ordering::Release);
    }

    fn slot_status(ring: &Mapping, g: &FrameGeometry, frame: usize) -> u32 {
        // SAFETY: slot offsets are aligned and inside the fake ring.
        unsafe { ring.status(g.offset(frame)) }.load(Ordering::Acquire)
    }

    fn poll_all(frames: &mut FrameRing, ring: &Mapping, max: usize) -> Vec<(Vec<u8>, u64)> {
        let mut got = Vec::new();
        let n = frames.poll(ring, max, &mut |f: &RxFrame<'_>| {
            got.push((f.data.to_vec(), f.timestamp.unwrap().ns()));
        });
        assert_eq!(n, got.len());
        got
    }

    #[test]
    fn walks_the_ring_in_order_and_gives_every_slot_back() {
        let g = FrameGeometry::for_mtu(1500, 4096, 2).unwrap();
        let ring = fake_ring(g.block_size * g.blocks);
        let mut frames = FrameRing::new(g);
        assert!(
            poll_all(&mut frames, &ring, 8).is_empty(),
            "nothing handed over yet"
        );

        kernel_fills(&ring, &g, 0, Some(&[1; 60]));
        kernel_fills(&ring, &g, 1, Some(&[2; 1514]));
        kernel_fills(&ring, &g, 2, None);
        kernel_fills(&ring, &g, 3, Some(&[4; 70]));

        // `max` bounds one poll; the rest waits for the next.
        let first = poll_all(&mut frames, &ring, 1);
        assert_eq!(first, [(vec![1; 60], 10_000_000_000)]);
        assert_eq!(slot_status(&ring, &g, 0), libc::TP_STATUS_KERNEL);
        assert_eq!(slot_status(&ring, &g, 1), libc::TP_STATUS_USER);

        // The malformed slot is counted, skipped and given back too.
        let rest = poll_all(&mut frames, &ring, 8);
        assert_eq!(rest.len(), 2);
        assert_eq!(rest[0].0, vec![2; 1514]);
        assert_eq!(rest[1], (vec![4; 70], 10_000_000_003));
        assert_eq!(frames.malformed(), 1);
        for frame in 0..4 {
            assert_eq!(slot_status(&ring, &g, frame), libc::TP_STATUS_KERNEL);
        }

        // Past the last slot the ring wraps to the first, and waits for it in order.
        kernel_fills(&ring, &g, 1, Some(&[6; 64]));
        assert!(
            poll_all(&mut frames, &ring, 8).is_empty(),
            "slot 0 comes first"
        );
        kernel_fills(&ring, &g, 0, Some(&[5; 64]));
        let wrapped = poll_all(&mut frames, &ring, 8);
        let datas: Vec<u8> = wrapped.iter().map(|(d, _)| d[0]).collect();
        assert_eq!(datas, [5, 6]);
    }
}
