//! Opening a port: the packet socket in the right network namespace, the options each ring
//! asks of it, the ring request (geometry checked first, with a message that says what to
//! change), the mapping and the bind.

use crate::netns::in_netns;
use crate::{BackendStats, IoError, RxDrops, Segmentation, MAX_BATCH};

use super::blocks::BlockRing;
use super::frames::{FrameGeometry, FrameRing};
use super::mapping::{align_up, page_size, Mapping, TPACKET_ALIGNMENT};
use super::rx::{AfPacketRx, RxLayout};
use super::socket::{
    bind_to, interface_index, interface_mtu, packet_socket, set_int_option, set_option, PortName,
    LINK_OVERHEAD,
};
use super::timestamps::{hardware_clock_for, PACKET_TIMESTAMP};
use super::tx::{AfPacketTx, MIN_FRAME_SIZE, TX_DATA_OFFSET};
use super::{AfPacketOptions, RxRing};

/// Nominal RX frame size given to the kernel. TPACKET_V3 packs frames of any length into a
/// block, so this only sets the kernel's frame count, not a size limit.
const RX_NOMINAL_FRAME: usize = 2048;

impl AfPacketTx {
    /// Opens a TX ring on `iface` (inside network namespace `netns`, None = the current one).
    pub fn open(iface: &str, netns: Option<&str>, opts: &AfPacketOptions) -> Result<Self, IoError> {
        let port = PortName::new(iface, netns)?;
        if opts.ring_frames == 0 {
            return Err(IoError::Other(format!(
                "AF_PACKET on `{port}`: ring_frames must be at least 1"
            )));
        }
        if opts.frame_size < MIN_FRAME_SIZE {
            return Err(IoError::Other(format!(
                "AF_PACKET on `{port}`: frame_size {} is too small; it must be at least {MIN_FRAME_SIZE} bytes",
                opts.frame_size
            )));
        }
        // The slot holds any frame the interface carries, jumbo frames included, up to the
        // longest frame strobe builds (loopback's MTU of 65536 would cost 64 KiB a slot).
        // One socket for the MTU and the ring: closing a packet socket waits for an RCU
        // grace period (about 15 ms here), which a separate probe socket added to every start.
        let (fd, mtu) = in_netns(netns, || {
            let fd = packet_socket(&port)?;
            let mtu = interface_mtu(&fd, &port)?;
            Ok((fd, mtu))
        })?;
        let longest = (mtu + LINK_OVERHEAD).min(crate::MAX_FRAME_LEN);
        let frame_size = align_up(
            opts.frame_size.max(TX_DATA_OFFSET + longest),
            TPACKET_ALIGNMENT,
        );
        let block_size = align_up(frame_size, page_size());
        let frames_per_block = block_size / frame_size;
        let blocks = opts.ring_frames.div_ceil(frames_per_block);
        let frame_count = blocks * frames_per_block;
        let too_big = || {
            IoError::Other(format!(
                "AF_PACKET on `{port}`: a TX ring of {} frames of {frame_size} bytes is too large; use fewer ring_frames",
                opts.ring_frames
            ))
        };
        let ring_bytes = blocks.checked_mul(block_size).ok_or_else(too_big)?;
        let req = libc::tpacket_req {
            tp_block_size: u32::try_from(block_size).map_err(|_| too_big())?,
            tp_block_nr: u32::try_from(blocks).map_err(|_| too_big())?,
            tp_frame_size: u32::try_from(frame_size).map_err(|_| too_big())?,
            tp_frame_nr: u32::try_from(frame_count).map_err(|_| too_big())?,
        };

        if opts.gso {
            if let Some(release) = crate::kernel_release().filter(|&r| r < (6, 2)) {
                return Err(IoError::Other(format!(
                    "afpacket-gso on `{port}` needs Linux 6.2 or later (UDP segmentation in a packet socket's virtio-net header); this kernel is {}.{}: use afpacket:",
                    release.0, release.1
                )));
            }
            let features = crate::netdev_features::query(netns, iface)?;
            let mut device_does = Vec::new();
            if features.udp_segmentation() {
                device_does.push("takes UDP segmentation batches whole (tx-udp-segmentation on)");
            }
            if features.tx_checksum() {
                device_does.push("completes checksums itself (tx-checksumming on)");
            }
            if !device_does.is_empty() {
                let place = netns.map_or(String::new(), |ns| format!("ip netns exec {ns} "));
                return Err(IoError::Other(format!(
                    "afpacket-gso on `{port}`: the device {}; strobe needs the kernel to cut every batch into frames and complete their checksums before the driver (a veth pair does neither, so frames would arrive uncut or unfinished). Let the kernel do both: `{place}ethtool -K {iface} tx-udp-segmentation off tx-checksumming off`, or use afpacket: without gso",
                    device_does.join(" and ")
                )));
            }
        }
        // Segmented frames go through the qdisc path; the direct path drops them.
        let qdisc_bypass = opts.qdisc_bypass && !opts.gso;
        let port_ref = &port;
        let (fd, ring) = in_netns(netns, move || {
            let port = port_ref;
            let ifindex = interface_index(&fd, port)?;
            set_int_option(
                &fd,
                port,
                libc::SOL_PACKET,
                libc::PACKET_VERSION,
                "PACKET_VERSION",
                libc::tpacket_versions::TPACKET_V2 as libc::c_int,
            )?;
            // A virtio-net header whose hdr_len covers the whole frame makes the kernel copy
            // the frame into a linear skb instead of attaching the ring page as a zero-copy
            // fragment. Fragments are copied into a new page again when a frame crosses a
            // veth pair; linear skbs cost about 30 % less CPU per 64-byte frame there.
            set_int_option(
                &fd,
                port,
                libc::SOL_PACKET,
                libc::PACKET_VNET_HDR,
                "PACKET_VNET_HDR",
                1,
            )?;
            if qdisc_bypass {
                set_int_option(
                    &fd,
                    port,
                    libc::SOL_PACKET,
                    libc::PACKET_QDISC_BYPASS,
                    "PACKET_QDISC_BYPASS",
                    1,
                )?;
            }
            set_option(&fd, libc::SOL_PACKET, libc::PACKET_TX_RING, &req).map_err(|e| {
                let mut err = port.error("setsockopt(PACKET_TX_RING)", e);
                if let IoError::Other(msg) = &mut err {
                    msg.push_str(&format!(
                        " (ring of {frame_count} frames × {frame_size} bytes = {ring_bytes} bytes)"
                    ));
                }
                err
            })?;
            let ring = Mapping::map(&fd, port, ring_bytes)?;
            // Protocol 0: the socket only sends, so the kernel delivers nothing to it.
            bind_to(&fd, port, ifindex, 0)?;
            Ok((fd, ring))
        })?;

        let frame_offsets = (0..frame_count)
            .map(|i| (i / frames_per_block) * block_size + (i % frames_per_block) * frame_size)
            .collect();
        let max_frame_len = (frame_size - TX_DATA_OFFSET)
            .min(mtu + LINK_OVERHEAD)
            .min(usize::from(u16::MAX));
        let gso_slots = opts.gso.then(|| {
            (0..MAX_BATCH.min(frame_count))
                .map(|_| vec![0u8; max_frame_len].into_boxed_slice())
                .collect()
        });
        Ok(AfPacketTx {
            ring,
            fd,
            port,
            frame_offsets,
            frame_size,
            // The kernel checks no MTU when a virtio-net header is present: we do, here.
            // hdr_len is 16 bits.
            max_frame_len,
            mtu,
            qdisc_bypass,
            gso_slots,
            head: 0,
            tail: 0,
            in_flight: 0,
            stats: BackendStats {
                segmentation: opts.gso.then(Segmentation::default),
                xmit_errors: None,
                ..BackendStats::default()
            },
        })
    }
}

/// The PACKET_RX_RING request of either ring version.
enum RingRequest {
    V3(libc::tpacket_req3),
    V2(libc::tpacket_req),
}

impl AfPacketRx {
    /// Opens an RX ring on `iface` (inside network namespace `netns`, None = the current one).
    /// Frames this host sends on the interface are not received (PACKET_IGNORE_OUTGOING).
    pub fn open(iface: &str, netns: Option<&str>, opts: &AfPacketOptions) -> Result<Self, IoError> {
        let port = PortName::new(iface, netns)?;
        let page = page_size();
        if opts.rx_block_size == 0 || opts.rx_block_size % page != 0 {
            return Err(IoError::Other(format!(
                "AF_PACKET on `{port}`: rx_block_size {} must be a non-zero multiple of the page size ({page} bytes)",
                opts.rx_block_size
            )));
        }
        if opts.rx_blocks == 0 {
            return Err(IoError::Other(format!(
                "AF_PACKET on `{port}`: rx_blocks must be at least 1"
            )));
        }
        let too_big = || {
            IoError::Other(format!(
                "AF_PACKET on `{port}`: an RX ring of {} blocks of {} bytes is too large; use fewer or smaller blocks",
                opts.rx_blocks, opts.rx_block_size
            ))
        };
        let ring_bytes = opts
            .rx_block_size
            .checked_mul(opts.rx_blocks)
            .ok_or_else(too_big)?;

        let (hardware_clock, restore_stamping) = if opts.hardware_timestamps {
            let (phc, previous) = hardware_clock_for(iface, netns, &port)?;
            (
                Some(phc),
                Some((netns.map(str::to_string), iface.to_string(), previous)),
            )
        } else {
            (None, None)
        };
        let (fd, ring, layout) = in_netns(netns, || {
            let fd = packet_socket(&port)?;
            let ifindex = interface_index(&fd, &port)?;
            if hardware_clock.is_some() {
                set_int_option(
                    &fd,
                    &port,
                    libc::SOL_PACKET,
                    PACKET_TIMESTAMP,
                    "PACKET_TIMESTAMP",
                    libc::SOF_TIMESTAMPING_RAW_HARDWARE as libc::c_int,
                )?;
            }
            let (request, layout) = match opts.rx_ring {
                RxRing::Blocks => {
                    let frames_per_block = opts.rx_block_size / RX_NOMINAL_FRAME;
                    let request = libc::tpacket_req3 {
                        tp_block_size: u32::try_from(opts.rx_block_size).map_err(|_| too_big())?,
                        tp_block_nr: u32::try_from(opts.rx_blocks).map_err(|_| too_big())?,
                        tp_frame_size: RX_NOMINAL_FRAME as u32,
                        tp_frame_nr: u32::try_from(frames_per_block * opts.rx_blocks)
                            .map_err(|_| too_big())?,
                        tp_retire_blk_tov: opts.rx_block_timeout_ms,
                        tp_sizeof_priv: 0,
                        tp_feature_req_word: 0,
                    };
                    let blocks = BlockRing::new(opts.rx_block_size, opts.rx_blocks);
                    (RingRequest::V3(request), RxLayout::Blocks(blocks))
                }
                RxRing::Frames => {
                    // Slots are sized for the interface, so nothing the link carries is cut.
                    let mtu = interface_mtu(&fd, &port)?;
                    let geometry = FrameGeometry::for_mtu(mtu, opts.rx_block_size, opts.rx_blocks)
                        .map_err(|why| IoError::Other(format!("AF_PACKET on `{port}`: {why}")))?;
                    let request = geometry.request().ok_or_else(too_big)?;
                    (
                        RingRequest::V2(request),
                        RxLayout::Frames(FrameRing::new(geometry)),
                    )
                }
            };
            let version = match request {
                RingRequest::V3(_) => libc::tpacket_versions::TPACKET_V3,
                RingRequest::V2(_) => libc::tpacket_versions::TPACKET_V2,
            };
            set_int_option(
                &fd,
                &port,
                libc::SOL_PACKET,
                libc::PACKET_VERSION,
                "PACKET_VERSION",
                version as libc::c_int,
            )?;
            set_int_option(
                &fd,
                &port,
                libc::SOL_PACKET,
                libc::PACKET_IGNORE_OUTGOING,
                "PACKET_IGNORE_OUTGOING",
                1,
            )?;
            // Turns on the kernel's early receive timestamps (taken when the frame enters
            // the stack), which the ring then reports instead of the later copy time.
            set_int_option(
                &fd,
                &port,
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMPNS,
                "SO_TIMESTAMPNS",
                1,
            )?;
            match &request {
                RingRequest::V3(req) => {
                    set_option(&fd, libc::SOL_PACKET, libc::PACKET_RX_RING, req)
                }
                RingRequest::V2(req) => {
                    set_option(&fd, libc::SOL_PACKET, libc::PACKET_RX_RING, req)
                }
            }
            .map_err(|e| {
                let mut err = port.error("setsockopt(PACKET_RX_RING)", e);
                if let IoError::Other(msg) = &mut err {
                    msg.push_str(&format!(
                        " (ring of {} blocks × {} bytes = {ring_bytes} bytes)",
                        opts.rx_blocks, opts.rx_block_size
                    ));
                }
                err
            })?;
            let ring = Mapping::map(&fd, &port, ring_bytes)?;
            bind_to(&fd, &port, ifindex, libc::ETH_P_ALL as u16)?;
            if opts.promiscuous {
                let membership = libc::packet_mreq {
                    mr_ifindex: ifindex,
                    mr_type: libc::PACKET_MR_PROMISC as u16,
                    mr_alen: 0,
                    mr_address: [0; 8],
                };
                set_option(
                    &fd,
                    libc::SOL_PACKET,
                    libc::PACKET_ADD_MEMBERSHIP,
                    &membership,
                )
                .map_err(|e| port.error("setsockopt(PACKET_ADD_MEMBERSHIP, promiscuous)", e))?;
            }
            Ok((fd, ring, layout))
        })?;

        Ok(AfPacketRx {
            ring,
            fd,
            port,
            layout,
            promiscuous: opts.promiscuous,
            drops: RxDrops::default(),
            hardware_clock,
            restore_stamping,
        })
    }
}
