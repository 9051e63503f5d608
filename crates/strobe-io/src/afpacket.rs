//! AF_PACKET backend: a TPACKET_V2 transmit ring and a receive ring on one Linux interface,
//! opened inside a named network namespace when asked. The receive ring is TPACKET_V3
//! (blocks, for throughput) or TPACKET_V2 (one slot per frame, for latency; see [`RxRing`]).
//!
//! The rings live in memory shared with the kernel. Ownership of a TX frame, an RX block or
//! an RX frame passes back and forth through its status word, so every status access is an
//! atomic load (Acquire: the other side's writes to the frame are visible after it) or store
//! (Release: our writes are visible before the kernel sees the new status). Everything else
//! in a frame or a block is only touched by the side that currently owns it.
//!
//! One job a file:
//! - `open.rs`: opening a port: socket, options, ring request, mapping, bind;
//! - `socket.rs`: the socket's system calls and the port's name in messages;
//! - `mapping.rs`: the ring memory shared with the kernel and its status words;
//! - `tx.rs`: the transmit ring, and `gso.rs` its UDP segmentation batches;
//! - `rx.rs`: the receive side, reading `blocks.rs` (TPACKET_V3) or `frames.rs` (TPACKET_V2),
//!   whose frame headers `ring_frame.rs` checks;
//! - `timestamps.rs`: which clock stamped a frame, and hardware stamping;
//! - `stats.rs`: the kernel's drop counts.

mod blocks;
mod frames;
mod gso;
#[cfg(test)]
mod live_tests;
mod mapping;
mod open;
mod ring_frame;
mod rx;
mod socket;
mod stats;
mod timestamps;
mod tx;

pub use self::rx::AfPacketRx;
pub(crate) use self::socket::mtu_too_small;
pub use self::tx::AfPacketTx;

/// Ring geometry and socket behaviour of an AF_PACKET port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AfPacketOptions {
    /// TX ring frames (the engine's slots); rounded up to fill whole ring blocks.
    pub ring_frames: usize,
    /// Bytes per TX ring frame including its 42 bytes of headers: at least 2048, rounded up
    /// to a multiple of 16, and raised to hold MTU + 18 bytes (Ethernet header and one VLAN
    /// tag) on an interface with a larger MTU (jumbo frames). The largest frame is this
    /// minus 42, or MTU + 18, whichever is smaller.
    pub frame_size: usize,
    /// Hand frames straight to the driver instead of through the qdisc. Faster, but packet
    /// taps (tcpdump) on the sending interface no longer see the frames; the peer still does.
    pub qdisc_bypass: bool,
    /// How the RX ring hands frames over: in blocks (throughput) or one by one (latency).
    pub rx_ring: RxRing,
    /// RX ring block size in bytes, a multiple of the page size. A frame must fit in a block.
    pub rx_block_size: usize,
    /// RX ring blocks; the ring holds `rx_block_size * rx_blocks` bytes of frames.
    pub rx_blocks: usize,
    /// [`RxRing::Blocks`] only: the kernel hands a partly filled RX block over after this
    /// long (ms); 0 lets the kernel derive it from the link speed.
    pub rx_block_timeout_ms: u32,
    /// Receive frames addressed to any MAC (PACKET_MR_PROMISC membership, undone on close).
    pub promiscuous: bool,
    /// Receive timestamps from the NIC's clock: checks that the driver stamps every frame
    /// (ETHTOOL_GET_TS_INFO), turns stamping on (SIOCSHWTSTAMP) and asks the ring for raw
    /// hardware stamps. Frames the NIC did not stamp keep the kernel's software stamp.
    pub hardware_timestamps: bool,
    /// Transmit runs of IPv4/UDP frames that differ only in what UDP segmentation rewrites
    /// as one superframe each, which the kernel cuts back into those frames (`gso.rs`).
    /// Needs the qdisc path (so `qdisc_bypass` is ignored) and a device that leaves both
    /// segmentation and checksums to the kernel (`tx-udp-segmentation` and
    /// `tx-checksumming` off), so every frame leaves complete.
    pub gso: bool,
}

impl Default for AfPacketOptions {
    fn default() -> Self {
        AfPacketOptions {
            ring_frames: 1024,
            frame_size: 2048,
            qdisc_bypass: true,
            rx_ring: RxRing::Blocks,
            rx_block_size: 512 << 10,
            rx_blocks: 64,
            rx_block_timeout_ms: 2,
            promiscuous: true,
            hardware_timestamps: false,
            gso: false,
        }
    }
}

/// The layout of an AF_PACKET receive ring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RxRing {
    /// TPACKET_V3: frames of any length packed into blocks; the kernel hands a block over
    /// when it is full or after `rx_block_timeout_ms`. Fewest hand-overs per frame, but a lone
    /// frame waits for the timeout: right for counting and one-way latency (the kernel
    /// timestamps each frame on arrival), wrong for anything that answers frames.
    #[default]
    Blocks,
    /// TPACKET_V2: one fixed slot per frame (sized for the interface MTU; longer frames are
    /// truncated) with its own status word, so each frame is ours the moment the kernel has
    /// written it. For a reflector, whose round trip includes the hand-over.
    Frames,
}

/// The ring parsers over plain bytes, for the fuzz targets in fuzz/ (feature `fuzzing`).
#[cfg(feature = "fuzzing")]
pub mod fuzzing {
    /// Walks `block` as a TPACKET_V3 receive block; false when it is malformed.
    pub fn walk_v3_block(block: &[u8], each: &mut dyn FnMut(&[u8], u32, u64)) -> bool {
        super::blocks::walk_block(block, each).is_ok()
    }

    /// Reads `slot` as a TPACKET_V2 frame slot: the frame's data and wire length.
    pub fn read_v2_slot(slot: &[u8]) -> Option<(&[u8], u32)> {
        super::frames::slot_data(slot)
    }
}

#[cfg(test)]
mod tests {
    use super::blocks::{BLOCK_FIRST_PKT, BLOCK_NUM_PKTS, BLOCK_STATUS, FRAME_HEADER_LEN};
    use super::tx::{TX_DATA_OFFSET, TX_VNET_OFFSET};

    #[test]
    fn layout_matches_the_kernel_abi() {
        assert_eq!(TX_VNET_OFFSET, 32);
        assert_eq!(TX_DATA_OFFSET, 42);
        assert_eq!(BLOCK_STATUS, 8);
        assert_eq!(BLOCK_NUM_PKTS, 12);
        assert_eq!(BLOCK_FIRST_PKT, 16);
        assert_eq!(FRAME_HEADER_LEN, 48);
    }
}
