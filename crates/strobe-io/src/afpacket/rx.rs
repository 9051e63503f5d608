//! The receive side: a PACKET_RX_RING read as TPACKET_V3 blocks (`blocks.rs`) or TPACKET_V2
//! frames (`frames.rs`), the kernel's drop counts (`stats.rs`), and whether the interface is
//! still there. Opening it is in `open.rs`.

use std::mem::size_of;
use std::os::fd::{AsRawFd, OwnedFd};
use std::ptr;

use super::blocks::BlockRing;
use super::frames::FrameRing;
use super::mapping::Mapping;
use super::socket::{check, PortName};
use super::stats;
use super::RxRing;
use crate::{IoError, Receiver, RxDrops, RxFrame};

/// Receive queue of one interface through a PACKET_RX_RING: TPACKET_V3 blocks or TPACKET_V2
/// frames, as [`AfPacketOptions::rx_ring`] chose.
pub struct AfPacketRx {
    // Declared before `fd` so the ring is unmapped before the socket closes.
    pub(super) ring: Mapping,
    pub(super) fd: OwnedFd,
    pub(super) port: PortName,
    pub(super) layout: RxLayout,
    pub(super) promiscuous: bool,
    pub(super) drops: RxDrops,
    /// The PTP hardware clock of the NIC's stamps, when hardware timestamps are on.
    pub(super) hardware_clock: Option<String>,
    /// The interface's hardware timestamping setting before this receiver changed it, put
    /// back on close: (namespace, interface, setting).
    pub(super) restore_stamping: Option<(Option<String>, String, crate::tsinfo::HwTimestampConfig)>,
}

impl Drop for AfPacketRx {
    fn drop(&mut self) {
        if let Some((netns, iface, previous)) = self.restore_stamping.take() {
            crate::tsinfo::restore_hw_timestamps(netns.as_deref(), &iface, previous);
        }
    }
}

/// The ring's layout and where reading stands in it.
pub(super) enum RxLayout {
    Blocks(BlockRing),
    Frames(FrameRing),
}

impl AfPacketRx {
    /// Which ring this receiver reads.
    pub fn ring_kind(&self) -> RxRing {
        match self.layout {
            RxLayout::Blocks(_) => RxRing::Blocks,
            RxLayout::Frames(_) => RxRing::Frames,
        }
    }

    /// [`RxRing::Blocks`]: blocks whose headers pointed outside the block; their remaining
    /// frames were skipped. Always 0 for a frame ring.
    pub fn malformed_blocks(&self) -> u64 {
        match &self.layout {
            RxLayout::Blocks(blocks) => blocks.malformed,
            RxLayout::Frames(_) => 0,
        }
    }

    /// [`RxRing::Frames`]: frames whose headers pointed outside their slot; they were
    /// skipped. Always 0 for a block ring.
    pub fn malformed_frames(&self) -> u64 {
        match &self.layout {
            RxLayout::Blocks(_) => 0,
            RxLayout::Frames(frames) => frames.malformed(),
        }
    }
}

impl Receiver for AfPacketRx {
    fn describe(&self) -> String {
        let ring = match &self.layout {
            RxLayout::Blocks(blocks) => format!(
                "TPACKET_V3 RX ring, {} blocks × {} KiB",
                blocks.block_count,
                blocks.block_size >> 10
            ),
            RxLayout::Frames(frames) => format!(
                "TPACKET_V2 RX ring, {} frames × {} B, handed over frame by frame",
                frames.geometry().frame_count(),
                frames.geometry().frame_size
            ),
        };
        let stamps = match &self.hardware_clock {
            Some(phc) => format!("hardware timestamps ({phc})"),
            None => "kernel timestamps".to_string(),
        };
        format!(
            "afpacket:{} ({ring}, {stamps}{})",
            self.port,
            if self.promiscuous {
                ", promiscuous"
            } else {
                ""
            }
        )
    }

    fn poll<F>(&mut self, max: usize, mut each: F) -> Result<usize, IoError>
    where
        F: FnMut(&RxFrame<'_>),
    {
        Ok(match &mut self.layout {
            RxLayout::Blocks(blocks) => blocks.poll(&self.ring, max, &mut each),
            RxLayout::Frames(frames) => frames.poll(&self.ring, max, &mut each),
        })
    }

    /// Frames the kernel dropped because the ring was full, accumulated over reads (the
    /// kernel resets its counter on each read).
    fn drops(&mut self) -> Result<RxDrops, IoError> {
        self.drops.ring_full +=
            u64::from(stats::kernel_drops(&self.fd, &self.port, self.ring_kind())?);
        Ok(self.drops)
    }

    fn hardware_clock(&self) -> Option<String> {
        self.hardware_clock.clone()
    }

    /// The kernel unbinds a packet socket whose interface is unregistered (its ifindex
    /// becomes -1) and never binds it again; a link that is only down comes back by itself.
    fn check_alive(&mut self) -> Result<(), IoError> {
        // SAFETY: sockaddr_ll is plain data; all zeros is a valid value.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut len = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        // SAFETY: `addr` and `len` are valid for writes and `len` is the size of `addr`.
        let rc = unsafe {
            libc::getsockname(
                self.fd.as_raw_fd(),
                ptr::from_mut(&mut addr).cast(),
                &mut len,
            )
        };
        check(rc).map_err(|e| self.port.error("getsockname", e))?;
        if addr.sll_ifindex <= 0 {
            return Err(IoError::Other(format!(
                "interface `{}` went away while receiving",
                self.port
            )));
        }
        Ok(())
    }
}
