//! The transmit ring (TPACKET_V2, PACKET_TX_RING): the engine writes frames straight into
//! free ring frames, which are then marked for sending in ring order and sent with one
//! zero-length `sendto` (a kick); frames the kernel has sent are reclaimed oldest first. In
//! UDP segmentation mode (`gso.rs`) the engine writes into buffers of its own and runs of
//! them go out as one ring frame each. Opening the ring is in `open.rs`.

use std::io;
use std::mem::{offset_of, size_of};
use std::os::fd::{AsRawFd, OwnedFd};
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::gso;
use super::mapping::{align_up, Mapping, TPACKET_ALIGNMENT};
use super::socket::{mtu_too_small, PortName};
use crate::{Backend, BackendStats, IoError, TimeBase, TxBatch, TxSlot, MAX_BATCH};

/// Smallest TX frame slot: a 1514-byte frame plus the ring header, rounded to a power of two.
pub(super) const MIN_FRAME_SIZE: usize = 2048;
/// Where a TX frame's virtio-net header starts: the kernel reads it right after the aligned
/// tpacket2_hdr (tp_hdrlen minus the sockaddr_ll it reserves for RX).
pub(super) const TX_VNET_OFFSET: usize =
    align_up(size_of::<libc::tpacket2_hdr>(), TPACKET_ALIGNMENT);
/// struct virtio_net_hdr: flags, gso_type, hdr_len, gso_size, csum_start, csum_offset.
const VNET_HDR_LEN: usize = 10;
/// Offset of hdr_len (little-endian u16) in the virtio-net header.
const VNET_HDR_LEN_FIELD: usize = 2;
/// Where a TX frame's data starts.
pub(super) const TX_DATA_OFFSET: usize = TX_VNET_OFFSET + VNET_HDR_LEN;
/// Shortest frame the kernel takes: an Ethernet header.
const MIN_TX_FRAME: usize = 14;
/// How long the TX ring may make no progress before `transmit`/`finish` give up.
const TX_STALL_LIMIT: Duration = Duration::from_secs(2);

/// Transmit queue of one interface through a PACKET_TX_RING.
///
/// TPACKET_V2 rather than V3: V3 only changes the RX side (block-based batching); its TX ring
/// is V2's fixed-size frames with a bigger header, so V2 is the simpler layout to drive.
pub struct AfPacketTx {
    // Declared before `fd` so the ring is unmapped before the socket closes.
    pub(super) ring: Mapping,
    pub(super) fd: OwnedFd,
    pub(super) port: PortName,
    /// Byte offset of each ring frame (frames do not straddle blocks, so not a plain stride).
    pub(super) frame_offsets: Box<[usize]>,
    pub(super) frame_size: usize,
    pub(super) max_frame_len: usize,
    /// The interface's MTU when the port was opened.
    pub(super) mtu: usize,
    pub(super) qdisc_bypass: bool,
    /// UDP segmentation mode: the engine writes into these buffers, and `transmit` packs
    /// runs of them into ring frames.
    pub(super) gso_slots: Option<Box<[Box<[u8]>]>>,
    /// Next frame to hand to the engine.
    pub(super) head: usize,
    /// Oldest frame handed to the kernel and not yet seen back as available.
    pub(super) tail: usize,
    /// Frames from `tail` on that the kernel still owns.
    pub(super) in_flight: usize,
    pub(super) stats: BackendStats,
}

impl AfPacketTx {
    fn frame_count(&self) -> usize {
        self.frame_offsets.len()
    }

    fn next_frame(&self, frame: usize) -> usize {
        if frame + 1 == self.frame_count() {
            0
        } else {
            frame + 1
        }
    }

    fn free_frames(&self) -> usize {
        self.frame_count() - self.in_flight
    }

    fn status(&self, frame: usize) -> &AtomicU32 {
        // SAFETY: frame offsets are 16-aligned and inside the ring by construction.
        unsafe { self.ring.status(self.frame_offsets[frame]) }
    }

    /// Counts frames the kernel has finished with (oldest first: it sends in ring order).
    fn reclaim(&mut self) -> Result<(), IoError> {
        while self.in_flight > 0 {
            let status = self.status(self.tail).load(Ordering::Acquire);
            if status == libc::TP_STATUS_AVAILABLE {
                self.in_flight -= 1;
                self.tail = self.next_frame(self.tail);
            } else if status & libc::TP_STATUS_WRONG_FORMAT != 0 {
                // The kernel stops at a rejected frame for good; the ring cannot recover.
                return Err(IoError::Other(format!(
                    "AF_PACKET on `{}`: the kernel rejected TX ring frame {} as malformed",
                    self.port, self.tail
                )));
            } else {
                break;
            }
        }
        Ok(())
    }

    /// Asks the kernel to send every frame marked for sending, without blocking.
    fn kick(&mut self) -> Result<(), IoError> {
        // SAFETY: a zero-length send with no address: the kernel takes the frames from the
        // ring it owns; no user buffer is read.
        let rc = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                ptr::null(),
                0,
            )
        };
        if rc >= 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            // Socket buffer or device queue full, or the device dropped one frame: what is
            // left in the ring goes out on the next kick.
            Some(libc::EAGAIN | libc::ENOBUFS | libc::EINTR) => Ok(()),
            _ => Err(self.port.error("sendto (TX ring kick)", err)),
        }
    }

    /// Kicks until at least one frame is free, for at most TX_STALL_LIMIT.
    fn wait_for_free_frame(&mut self) -> Result<(), IoError> {
        let start = Instant::now();
        loop {
            self.kick()?;
            self.reclaim()?;
            if self.free_frames() > 0 {
                return Ok(());
            }
            if start.elapsed() > TX_STALL_LIMIT {
                return Err(self.stalled());
            }
            std::thread::yield_now();
        }
    }

    /// Frees up to `wanted` ring frames (kicking and reclaiming as needed); returns how
    /// many are free, at least one unless the kernel stalls.
    fn reserve(&mut self, wanted: usize) -> Result<usize, IoError> {
        self.reclaim()?;
        if self.free_frames() < wanted {
            self.kick()?;
            self.reclaim()?;
            if self.free_frames() == 0 {
                self.wait_for_free_frame()?;
            }
        }
        Ok(wanted.min(self.free_frames()))
    }

    /// The engine's frames must fit a ring frame and be at least a header long.
    fn check_lengths(&self, batch: &TxBatch<'_>) -> Result<(), IoError> {
        match batch
            .iter()
            .find(|s| !(MIN_TX_FRAME..=self.max_frame_len).contains(&s.len))
        {
            Some(bad) => Err(IoError::Other(format!(
                "AF_PACKET on `{}`: frame of {} bytes in slot {} is outside {MIN_TX_FRAME}..={} bytes (MTU and ring frame size)",
                self.port, bad.len, bad.id, self.max_frame_len
            ))),
            None => Ok(()),
        }
    }

    /// Writes a ring frame's length and virtio-net header.
    ///
    /// # Safety
    /// `frame` must be free (status AVAILABLE), so the kernel does not read it yet.
    unsafe fn write_frame_header(&self, frame: usize, len: usize, vnet: &[u8; VNET_HDR_LEN]) {
        let base = self.ring.base.as_ptr();
        let offset = self.frame_offsets[frame];
        // SAFETY: tp_len and the virtio-net header lie in the frame's headers, inside the
        // ring; the caller guarantees the kernel does not read the frame yet.
        unsafe {
            base.add(offset + offset_of!(libc::tpacket2_hdr, tp_len))
                .cast::<u32>()
                .write((VNET_HDR_LEN + len) as u32);
            base.add(offset + TX_VNET_OFFSET)
                .copy_from_nonoverlapping(vnet.as_ptr(), VNET_HDR_LEN);
        }
    }

    /// Marks `count` frames from `head` as ready, in ring order (the kernel walks frames in
    /// order and stops at the first that is not), then kicks.
    fn publish(&mut self, count: usize) -> Result<(), IoError> {
        let mut frame = self.head;
        for _ in 0..count {
            self.status(frame)
                .store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
            frame = self.next_frame(frame);
        }
        self.head = frame;
        self.in_flight += count;
        self.kick()
    }

    /// [`Backend::transmit`] in UDP segmentation mode: the engine writes into `slots`, then
    /// each run of frames that segmentation reproduces becomes one ring frame.
    fn transmit_gso<F>(
        &mut self,
        slots: &mut [Box<[u8]>],
        count: usize,
        fill: F,
    ) -> Result<usize, IoError>
    where
        F: FnOnce(&mut [TxSlot<'_>]),
    {
        let wanted = count.min(MAX_BATCH).min(slots.len());
        if wanted == 0 {
            return Ok(0);
        }
        // Worst case every frame goes alone.
        let n = self.reserve(wanted)?;
        let mut batch = TxBatch::new();
        for (id, buf) in slots.iter_mut().take(n).enumerate() {
            batch.push(TxSlot::blank(id as u32, buf));
        }
        fill(&mut batch);
        self.check_lengths(&batch)?;
        let mut lens = [0usize; MAX_BATCH];
        for (len, slot) in lens.iter_mut().zip(batch.iter()) {
            *len = slot.len;
        }
        drop(batch);
        let frame_of = |i: usize| &slots[i][..lens[i]];

        let room = self.frame_size - TX_DATA_OFFSET;
        let base = self.ring.base.as_ptr();
        let (mut frame, mut used, mut i) = (self.head, 0, 0);
        while i < n {
            let first = frame_of(i);
            let mut k = 1;
            if gso::can_lead(first) {
                let most = gso::most_segments(first.len(), room).min(n - i);
                while k < most && gso::follows(first, frame_of(i + k), k) {
                    k += 1;
                }
            }
            // SAFETY: the frame is free (reserve counted it), lies inside the ring, and its
            // data area holds `room` bytes; nothing else refers to it.
            let data = unsafe {
                std::slice::from_raw_parts_mut(
                    base.add(self.frame_offsets[frame] + TX_DATA_OFFSET),
                    room,
                )
            };
            let (len, vnet) = if k >= 2 {
                if let Some(seg) = self.stats.segmentation.as_mut() {
                    seg.superframes += 1;
                    seg.frames += k as u64;
                }
                let len = gso::write_superframe((i..i + k).map(frame_of), data);
                (len, gso::vnet_header(first.len() - gso::HEADERS))
            } else {
                data[..first.len()].copy_from_slice(first);
                (first.len(), plain_vnet_header(first.len()))
            };
            // SAFETY: as above, the frame is free.
            unsafe { self.write_frame_header(frame, len, &vnet) };
            frame = self.next_frame(frame);
            used += 1;
            i += k;
        }
        self.stats.frames += n as u64;
        self.stats.bytes += lens[..n].iter().map(|&l| l as u64).sum::<u64>();
        self.publish(used)?;
        Ok(n)
    }

    fn stalled(&self) -> IoError {
        IoError::Other(format!(
            "AF_PACKET on `{}`: the kernel sent nothing from the TX ring for {} s ({} frames waiting); is the link up and its queue running?",
            self.port,
            TX_STALL_LIMIT.as_secs(),
            self.in_flight
        ))
    }
}

/// A virtio-net header that asks nothing of the kernel but to copy the whole frame into a
/// linear skb (see `open`).
fn plain_vnet_header(len: usize) -> [u8; VNET_HDR_LEN] {
    let mut vnet = [0u8; VNET_HDR_LEN];
    vnet[VNET_HDR_LEN_FIELD..VNET_HDR_LEN_FIELD + 2].copy_from_slice(&(len as u16).to_le_bytes());
    vnet
}

impl Backend for AfPacketTx {
    fn describe(&self) -> String {
        format!(
            "afpacket:{} (TPACKET_V2 TX ring, {} frames × {} B{}{})",
            self.port,
            self.frame_count(),
            self.frame_size,
            if self.qdisc_bypass {
                ", qdisc bypass"
            } else {
                ""
            },
            if self.gso_slots.is_some() {
                format!(
                    ", UDP segmentation: up to {} frames per skb",
                    gso::MAX_SEGMENTS
                )
            } else {
                String::new()
            }
        )
    }

    fn slot_count(&self) -> usize {
        self.gso_slots
            .as_ref()
            .map_or(self.frame_count(), |slots| slots.len())
    }

    fn max_frame_len(&self) -> usize {
        self.max_frame_len
    }
    fn frame_too_long(&self, len: usize) -> String {
        mtu_too_small(&self.port.iface, self.port.netns.as_deref(), self.mtu, len)
    }

    fn time_base(&self) -> TimeBase {
        TimeBase::RealTime
    }

    /// One `sendto` sends every frame queued on the ring, so the biggest batch costs the
    /// fewest system calls per frame (+3 % over 32 on a veth pair, BENCHMARKS.md §2).
    fn throughput_batch(&self) -> usize {
        crate::MAX_BATCH.min(self.slot_count())
    }

    /// Hands the engine up to `count` free ring frames (fewer when the ring is that full,
    /// at least one unless the kernel stalls), then queues them and kicks the kernel.
    fn transmit<F>(&mut self, count: usize, fill: F) -> Result<usize, IoError>
    where
        F: FnOnce(&mut [TxSlot<'_>]),
    {
        if let Some(mut slots) = self.gso_slots.take() {
            let result = self.transmit_gso(&mut slots, count, fill);
            self.gso_slots = Some(slots);
            return result;
        }
        let wanted = count.min(MAX_BATCH).min(self.frame_count());
        if wanted == 0 {
            return Ok(0);
        }
        let n = self.reserve(wanted)?;
        let base = self.ring.base.as_ptr();

        let mut batch = TxBatch::new();
        let mut frame = self.head;
        for _ in 0..n {
            let offset = self.frame_offsets[frame];
            // SAFETY: the frame is free (status AVAILABLE, so the kernel neither reads nor
            // writes it), lies inside the ring, and no other slice covers its data area: the
            // batch holds distinct frames, and headers are only written after the batch ends.
            let buf = unsafe {
                std::slice::from_raw_parts_mut(
                    base.add(offset + TX_DATA_OFFSET),
                    self.max_frame_len,
                )
            };
            batch.push(TxSlot::blank(frame as u32, buf));
            frame = self.next_frame(frame);
        }
        fill(&mut batch);
        self.check_lengths(&batch)?;
        let mut bytes = 0u64;
        for slot in &batch {
            // SAFETY: every slot's frame is free until published below.
            unsafe {
                self.write_frame_header(slot.id as usize, slot.len, &plain_vnet_header(slot.len))
            };
            bytes += slot.len as u64;
        }
        drop(batch);
        self.stats.frames += n as u64;
        self.stats.bytes += bytes;
        self.publish(n)?;
        Ok(n)
    }

    /// Waits (bounded) until the kernel has sent every queued frame.
    fn finish(&mut self) -> Result<BackendStats, IoError> {
        let mut last_progress = Instant::now();
        loop {
            self.kick()?;
            let before = self.in_flight;
            self.reclaim()?;
            if self.in_flight == 0 {
                return Ok(self.stats);
            }
            if self.in_flight < before {
                last_progress = Instant::now();
            } else if last_progress.elapsed() > TX_STALL_LIMIT {
                return Err(self.stalled());
            }
            std::thread::yield_now();
        }
    }
}
