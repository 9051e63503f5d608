//! AF_PACKET backend: a TPACKET_V2 transmit ring and a receive ring on one Linux interface,
//! opened inside a named network namespace when asked. The receive ring is TPACKET_V3
//! (blocks, for throughput) or TPACKET_V2 (one slot per frame, for latency; see [`RxRing`]).
//!
//! The rings live in memory shared with the kernel. Ownership of a TX frame, an RX block or
//! an RX frame passes back and forth through its status word, so every status access is an
//! atomic load (Acquire: the other side's writes to the frame are visible after it) or store
//! (Release: our writes are visible before the kernel sees the new status). Everything else
//! in a frame or a block is only touched by the side that currently owns it.

use std::fmt;
use std::io;
use std::mem::{offset_of, size_of};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

mod frames;
mod gso;
#[cfg(test)]
mod live_tests;

use self::frames::{FrameGeometry, FrameRing};
use crate::netns::in_netns;
use crate::{
    Backend, BackendStats, IoError, Receiver, RxDrops, RxFrame, RxTimestamp, Segmentation,
    TimeBase, TxBatch, TxSlot, VlanTag, MAX_BATCH,
};

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

/// Smallest TX frame slot: a 1514-byte frame plus the ring header, rounded to a power of two.
const MIN_FRAME_SIZE: usize = 2048;
/// Frames whose header and data are rounded to this (the kernel's TPACKET_ALIGNMENT).
const TPACKET_ALIGNMENT: usize = 16;
/// Where a TX frame's virtio-net header starts: the kernel reads it right after the aligned
/// tpacket2_hdr (tp_hdrlen minus the sockaddr_ll it reserves for RX).
const TX_VNET_OFFSET: usize = align_up(size_of::<libc::tpacket2_hdr>(), TPACKET_ALIGNMENT);
/// struct virtio_net_hdr: flags, gso_type, hdr_len, gso_size, csum_start, csum_offset.
const VNET_HDR_LEN: usize = 10;
/// Offset of hdr_len (little-endian u16) in the virtio-net header.
const VNET_HDR_LEN_FIELD: usize = 2;
/// Where a TX frame's data starts.
const TX_DATA_OFFSET: usize = TX_VNET_OFFSET + VNET_HDR_LEN;
/// Ethernet header plus one VLAN tag: the kernel accepts frames up to MTU + this.
const LINK_OVERHEAD: usize = 14 + 4;
/// Shortest frame the kernel takes: an Ethernet header.
const MIN_TX_FRAME: usize = 14;
/// How long the TX ring may make no progress before `transmit`/`finish` give up.
const TX_STALL_LIMIT: Duration = Duration::from_secs(2);
/// Nominal RX frame size given to the kernel. TPACKET_V3 packs frames of any length into a
/// block, so this only sets the kernel's frame count, not a size limit.
const RX_NOMINAL_FRAME: usize = 2048;

const fn align_up(value: usize, to: usize) -> usize {
    value.div_ceil(to) * to
}

fn page_size() -> usize {
    // SAFETY: sysconf only reads a system constant.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(page).unwrap_or(4096)
}

/// `NETNS/IFACE` or `IFACE`, for messages.
#[derive(Clone, Debug)]
struct PortName {
    iface: String,
    netns: Option<String>,
}

impl fmt::Display for PortName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.netns {
            Some(ns) => write!(f, "{ns}/{}", self.iface),
            None => f.write_str(&self.iface),
        }
    }
}

impl PortName {
    fn new(iface: &str, netns: Option<&str>) -> Result<Self, IoError> {
        let bad = |why: &str| IoError::Other(format!("invalid interface name `{iface}`: {why}"));
        if iface.is_empty() {
            return Err(bad("it is empty"));
        }
        if iface.len() >= libc::IFNAMSIZ {
            return Err(bad("Linux interface names have at most 15 bytes"));
        }
        if iface
            .bytes()
            .any(|b| b == 0 || b == b'/' || b.is_ascii_whitespace())
        {
            return Err(bad("it contains `/`, whitespace or a NUL byte"));
        }
        Ok(PortName {
            iface: iface.to_string(),
            netns: netns.map(str::to_string),
        })
    }

    /// An error from syscall `call` on this port; missing privilege is named as such.
    fn error(&self, call: &str, err: io::Error) -> IoError {
        match err.raw_os_error() {
            Some(libc::EPERM | libc::EACCES) => IoError::Other(format!(
                "AF_PACKET needs root or CAP_NET_RAW ({call} on `{self}`: {err})"
            )),
            Some(libc::ENETDOWN) => IoError::Other(format!(
                "{call} on `{self}` failed: the interface is down (`ip link set {} up`)",
                self.iface
            )),
            _ => IoError::Other(format!("{call} on `{self}` failed: {err}")),
        }
    }

    fn not_found(&self) -> IoError {
        match &self.netns {
            Some(ns) => IoError::Other(format!(
                "interface `{}` not found in network namespace `{ns}` (`ip -n {ns} link` lists its interfaces)",
                self.iface
            )),
            None => IoError::Other(format!(
                "interface `{}` not found in the current network namespace (`ip link` lists its interfaces)",
                self.iface
            )),
        }
    }
}

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// A raw AF_PACKET socket bound to nothing yet. Protocol 0 receives nothing until `bind`
/// names one, so a ring is never filled with traffic from other interfaces.
fn packet_socket(port: &PortName) -> Result<OwnedFd, IoError> {
    // SAFETY: plain socket creation; the result is checked before use.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    let fd = check(fd).map_err(|e| port.error("socket(AF_PACKET)", e))?;
    // SAFETY: `fd` is a freshly created descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn set_option<T>(fd: &OwnedFd, level: libc::c_int, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` points to a live T and the length passed is its size; the kernel only
    // reads from it.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            ptr::from_ref(value).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    check(rc).map(drop)
}

fn set_int_option(
    fd: &OwnedFd,
    port: &PortName,
    level: libc::c_int,
    name: libc::c_int,
    what: &str,
    value: libc::c_int,
) -> Result<(), IoError> {
    set_option(fd, level, name, &value).map_err(|e| port.error(&format!("setsockopt({what})"), e))
}

/// Issues an interface ioctl (`SIOCGIF*`) for `port` on socket `fd`.
fn interface_ioctl(
    fd: &OwnedFd,
    port: &PortName,
    request: libc::c_ulong,
    what: &str,
) -> Result<libc::ifreq, IoError> {
    // SAFETY: ifreq is plain old data; all zeroes is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    // PortName::new checked the name is shorter than IFNAMSIZ, so the NUL stays in place.
    for (dst, &src) in req.ifr_name.iter_mut().zip(port.iface.as_bytes()) {
        *dst = src as libc::c_char;
    }
    // SAFETY: `req` is a valid ifreq the kernel reads the name from and writes the answer to.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), request as _, &mut req) };
    match check(rc) {
        Ok(_) => Ok(req),
        Err(e) if e.raw_os_error() == Some(libc::ENODEV) => Err(port.not_found()),
        Err(e) => Err(port.error(&format!("ioctl({what})"), e)),
    }
}

fn interface_index(fd: &OwnedFd, port: &PortName) -> Result<libc::c_int, IoError> {
    let req = interface_ioctl(fd, port, libc::SIOCGIFINDEX, "SIOCGIFINDEX")?;
    // SAFETY: SIOCGIFINDEX answers in the ifindex member of the union.
    Ok(unsafe { req.ifr_ifru.ifru_ifindex })
}

fn interface_mtu(fd: &OwnedFd, port: &PortName) -> Result<usize, IoError> {
    let req = interface_ioctl(fd, port, libc::SIOCGIFMTU, "SIOCGIFMTU")?;
    // SAFETY: SIOCGIFMTU answers in the mtu member of the union.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu };
    Ok(usize::try_from(mtu).unwrap_or(0))
}

/// Frames of `len` bytes (without FCS) exceed what an interface of this MTU carries (MTU +
/// 18: the Ethernet header and one VLAN tag): the message names the MTU and the command
/// that raises it enough for an untagged frame.
pub(crate) fn mtu_too_small(iface: &str, netns: Option<&str>, mtu: usize, len: usize) -> String {
    let place = netns.map_or(String::new(), |ns| format!("ip netns exec {ns} "));
    let shown = netns.map_or(iface.to_string(), |ns| format!("{ns}/{iface}"));
    format!(
        "frames of {len} bytes ({} with FCS) do not fit the MTU of `{shown}`, {mtu}, which carries \
         frames of up to {} bytes ({} with FCS); raise it on this interface and on every hop to \
         the receiver: `{place}ip link set {iface} mtu {}`",
        len + 4,
        mtu + LINK_OVERHEAD,
        mtu + LINK_OVERHEAD + 4,
        len.saturating_sub(14)
    )
}

fn bind_to(
    fd: &OwnedFd,
    port: &PortName,
    ifindex: libc::c_int,
    protocol: u16,
) -> Result<(), IoError> {
    let addr = libc::sockaddr_ll {
        sll_family: libc::AF_PACKET as u16,
        sll_protocol: protocol.to_be(),
        sll_ifindex: ifindex,
        sll_hatype: 0,
        sll_pkttype: 0,
        sll_halen: 0,
        sll_addr: [0; 8],
    };
    // SAFETY: `addr` is a valid sockaddr_ll and the length passed is its size.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            ptr::from_ref(&addr).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    check(rc).map(drop).map_err(|e| port.error("bind", e))
}

/// A packet ring mapped into our address space.
struct Mapping {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is owned by exactly one Mapping and freed once in Drop; nothing about
// it is tied to the thread that created it.
unsafe impl Send for Mapping {}

impl Mapping {
    fn map(fd: &OwnedFd, port: &PortName, len: usize) -> Result<Self, IoError> {
        // SAFETY: maps the socket's ring (set up just before, `len` bytes) at an address the
        // kernel picks; the result is checked before use.
        let addr = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(port.error("mmap of the packet ring", io::Error::last_os_error()));
        }
        let base = NonNull::new(addr.cast::<u8>()).ok_or_else(|| {
            IoError::Other(format!("mmap of the packet ring on `{port}` returned NULL"))
        })?;
        Ok(Mapping { base, len })
    }

    /// The status word at byte `offset` of the ring.
    ///
    /// # Safety
    /// `offset` must be 4-byte aligned and `offset + 4 <= len`.
    unsafe fn status(&self, offset: usize) -> &AtomicU32 {
        debug_assert!(offset % 4 == 0 && offset + 4 <= self.len);
        // SAFETY: in bounds and aligned per the caller; the word is only ever accessed
        // atomically, by us and by the kernel.
        unsafe { AtomicU32::from_ptr(self.base.as_ptr().add(offset).cast()) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the region mmap returned; no references into it outlive self.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// Transmit queue of one interface through a PACKET_TX_RING.
///
/// TPACKET_V2 rather than V3: V3 only changes the RX side (block-based batching); its TX ring
/// is V2's fixed-size frames with a bigger header, so V2 is the simpler layout to drive.
pub struct AfPacketTx {
    // Declared before `fd` so the ring is unmapped before the socket closes.
    ring: Mapping,
    fd: OwnedFd,
    port: PortName,
    /// Byte offset of each ring frame (frames do not straddle blocks, so not a plain stride).
    frame_offsets: Box<[usize]>,
    frame_size: usize,
    max_frame_len: usize,
    /// The interface's MTU when the port was opened.
    mtu: usize,
    qdisc_bypass: bool,
    /// UDP segmentation mode: the engine writes into these buffers, and `transmit` packs
    /// runs of them into ring frames.
    gso_slots: Option<Box<[Box<[u8]>]>>,
    /// Next frame to hand to the engine.
    head: usize,
    /// Oldest frame handed to the kernel and not yet seen back as available.
    tail: usize,
    /// Frames from `tail` on that the kernel still owns.
    in_flight: usize,
    stats: BackendStats,
}

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

/// Receive queue of one interface through a PACKET_RX_RING: TPACKET_V3 blocks or TPACKET_V2
/// frames, as [`AfPacketOptions::rx_ring`] chose.
pub struct AfPacketRx {
    // Declared before `fd` so the ring is unmapped before the socket closes.
    ring: Mapping,
    fd: OwnedFd,
    port: PortName,
    layout: RxLayout,
    promiscuous: bool,
    drops: RxDrops,
    /// The PTP hardware clock of the NIC's stamps, when hardware timestamps are on.
    hardware_clock: Option<String>,
    /// The interface's hardware timestamping setting before this receiver changed it, put
    /// back on close: (namespace, interface, setting).
    restore_stamping: Option<(Option<String>, String, crate::tsinfo::HwTimestampConfig)>,
}

impl Drop for AfPacketRx {
    fn drop(&mut self) {
        if let Some((netns, iface, previous)) = self.restore_stamping.take() {
            crate::tsinfo::restore_hw_timestamps(netns.as_deref(), &iface, previous);
        }
    }
}

/// The ring's layout and where reading stands in it.
enum RxLayout {
    Blocks(BlockRing),
    Frames(FrameRing),
}

/// Reading state of a TPACKET_V3 ring.
struct BlockRing {
    block_size: usize,
    block_count: usize,
    /// Block being read, or waited for.
    block: usize,
    /// Where we are inside `block` when it is ours and partly delivered.
    cursor: Option<BlockCursor>,
    /// Blocks whose headers pointed outside the block.
    malformed: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct BlockCursor {
    /// Frames of the block not yet delivered.
    remaining: u32,
    /// Offset of the next frame's tpacket3_hdr from the block start.
    next: usize,
}

/// Offset of the block status word from a block's start.
const BLOCK_STATUS: usize =
    offset_of!(libc::tpacket_block_desc, hdr) + offset_of!(libc::tpacket_hdr_v1, block_status);
const BLOCK_NUM_PKTS: usize =
    offset_of!(libc::tpacket_block_desc, hdr) + offset_of!(libc::tpacket_hdr_v1, num_pkts);
const BLOCK_FIRST_PKT: usize = offset_of!(libc::tpacket_block_desc, hdr)
    + offset_of!(libc::tpacket_hdr_v1, offset_to_first_pkt);
const BLOCK_HEADER_LEN: usize = size_of::<libc::tpacket_block_desc>();
const FRAME_HEADER_LEN: usize = size_of::<libc::tpacket3_hdr>();

/// `PACKET_TIMESTAMP` (linux/if_packet.h; not in the libc crate): which stamp the ring reports.
const PACKET_TIMESTAMP: libc::c_int = 17;
/// The tp_status bit saying the NIC stamped a ring frame (linux/if_packet.h; software stamps
/// set bit 29 instead).
const TP_STATUS_TS_RAW_HARDWARE: u32 = 1 << 31;

/// The timestamp of a ring frame, by the status bits the kernel set with it: a raw hardware
/// stamp is in the NIC's clock, anything else is the kernel's CLOCK_REALTIME.
fn ring_timestamp(status: u32, ns: u64) -> RxTimestamp {
    if status & TP_STATUS_TS_RAW_HARDWARE != 0 {
        RxTimestamp::Hardware(ns)
    } else {
        RxTimestamp::Kernel(ns)
    }
}

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
struct Malformed;

fn read_u32(block: &[u8], offset: usize) -> Result<u32, Malformed> {
    let bytes = block
        .get(offset..offset.checked_add(4).ok_or(Malformed)?)
        .ok_or(Malformed)?;
    Ok(u32::from_ne_bytes(bytes.try_into().map_err(|_| Malformed)?))
}

fn read_u16(block: &[u8], offset: usize) -> Result<u16, Malformed> {
    let bytes = block
        .get(offset..offset.checked_add(2).ok_or(Malformed)?)
        .ok_or(Malformed)?;
    Ok(u16::from_ne_bytes(bytes.try_into().map_err(|_| Malformed)?))
}

/// Reads a block header the kernel handed over: how many frames and where the first is.
fn open_block(block: &[u8]) -> Result<BlockCursor, Malformed> {
    let remaining = read_u32(block, BLOCK_NUM_PKTS)?;
    let next = read_u32(block, BLOCK_FIRST_PKT)? as usize;
    if remaining > 0 && (next < BLOCK_HEADER_LEN || next >= block.len()) {
        return Err(Malformed);
    }
    Ok(BlockCursor { remaining, next })
}

/// One frame of a ring, a V3 block's or a V2 slot's, with every offset checked against the
/// bytes it lies in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RingFrame {
    data_start: usize,
    data_len: usize,
    wire_len: u32,
    timestamp_ns: u64,
    /// tp_status: which clock stamped the frame.
    status: u32,
    vlan: Option<VlanTag>,
}

impl RingFrame {
    /// The frame's data in `bytes`, the block or slot it was read from.
    #[inline]
    fn data<'b>(&self, bytes: &'b [u8]) -> &'b [u8] {
        &bytes[self.data_start..self.data_start + self.data_len]
    }

    /// The frame as a receiver hands it on, its data in `bytes` (see [`RingFrame::data`]).
    #[inline]
    fn rx_frame<'b>(&self, bytes: &'b [u8]) -> RxFrame<'b> {
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
struct FrameHeader {
    status: u32,
    wire_len: u32,
    snaplen: u32,
    sec: u32,
    nsec: u32,
    /// Where the frame data starts, from the header's start.
    mac: usize,
    tci: u16,
    tpid: u16,
}

impl FrameHeader {
    /// The frame of this header, which starts at `at` in `bytes` (a block or a slot): its
    /// data must lie past the first `header_len` bytes of the header and inside `bytes`.
    #[inline]
    fn frame(&self, bytes: &[u8], at: usize, header_len: usize) -> Result<RingFrame, Malformed> {
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

    fn poll<F>(&mut self, ring: &Mapping, max: usize, each: &mut F) -> usize
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
                    let blocks = BlockRing {
                        block_size: opts.rx_block_size,
                        block_count: opts.rx_blocks,
                        block: 0,
                        cursor: None,
                        malformed: 0,
                    };
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

    /// The kernel's count of frames dropped since the last read (it resets on each read).
    fn read_kernel_drops(&self) -> Result<u32, IoError> {
        /// Reads PACKET_STATISTICS into `stats`, whose layout depends on the ring version.
        fn read<T>(fd: &OwnedFd, stats: &mut T) -> io::Result<()> {
            let mut len = size_of::<T>() as libc::socklen_t;
            // SAFETY: `stats` and `len` are valid for writes and `len` is the size of `stats`.
            let rc = unsafe {
                libc::getsockopt(
                    fd.as_raw_fd(),
                    libc::SOL_PACKET,
                    libc::PACKET_STATISTICS,
                    ptr::from_mut(stats).cast(),
                    &mut len,
                )
            };
            check(rc).map(drop)
        }
        let dropped = match self.layout {
            RxLayout::Blocks(_) => {
                let mut stats = libc::tpacket_stats_v3 {
                    tp_packets: 0,
                    tp_drops: 0,
                    tp_freeze_q_cnt: 0,
                };
                read(&self.fd, &mut stats).map(|()| stats.tp_drops)
            }
            RxLayout::Frames(_) => {
                let mut stats = libc::tpacket_stats {
                    tp_packets: 0,
                    tp_drops: 0,
                };
                read(&self.fd, &mut stats).map(|()| stats.tp_drops)
            }
        };
        dropped.map_err(|e| self.port.error("getsockopt(PACKET_STATISTICS)", e))
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
        self.drops.ring_full += u64::from(self.read_kernel_drops()?);
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

/// Checks that `iface` stamps every received frame in hardware and turns stamping on;
/// returns the PTP hardware clock the stamps are in and the setting it replaced.
fn hardware_clock_for(
    iface: &str,
    netns: Option<&str>,
    port: &PortName,
) -> Result<(String, crate::tsinfo::HwTimestampConfig), IoError> {
    let info = crate::tsinfo::query_ts_info(netns, iface)?;
    let phc = match (info.hardware_rx_all() && info.raw_hardware(), info.phc_path()) {
        (true, Some(phc)) => phc,
        _ => {
            return Err(IoError::Other(format!(
                "AF_PACKET on `{port}`: hardware receive timestamps asked for, but the interface cannot stamp every frame in hardware ({}); leave them off to use kernel software timestamps",
                info.summary()
            )))
        }
    };
    let previous = crate::tsinfo::enable_hw_timestamps(netns, iface)?;
    Ok((phc, previous))
}

/// Walks a whole TPACKET_V3 block the way [`AfPacketRx`]'s poll does, handing each frame's
/// data, wire length and stamp to `each`; for the tests and the fuzz targets, which have no
/// kernel ring to read.
#[cfg(any(test, feature = "fuzzing"))]
fn walk_block(block: &[u8], each: &mut dyn FnMut(&[u8], u32, u64)) -> Result<(), Malformed> {
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

/// The ring parsers over plain bytes, for the fuzz targets in fuzz/ (feature `fuzzing`).
#[cfg(feature = "fuzzing")]
pub mod fuzzing {
    /// Walks `block` as a TPACKET_V3 receive block; false when it is malformed.
    pub fn walk_v3_block(block: &[u8], each: &mut dyn FnMut(&[u8], u32, u64)) -> bool {
        super::walk_block(block, each).is_ok()
    }

    /// Reads `slot` as a TPACKET_V2 frame slot: the frame's data and wire length.
    pub fn read_v2_slot(slot: &[u8]) -> Option<(&[u8], u32)> {
        super::frames::slot_data(slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::HeaderFuzz;

    #[test]
    fn ring_status_bits_say_which_clock_stamped_a_frame() {
        let user = libc::TP_STATUS_USER;
        assert_eq!(
            ring_timestamp(user | 1 << 29, 7), // TP_STATUS_TS_SOFTWARE
            RxTimestamp::Kernel(7)
        );
        assert_eq!(
            ring_timestamp(user | TP_STATUS_TS_RAW_HARDWARE, 7),
            RxTimestamp::Hardware(7)
        );
        // A frame the NIC did not stamp (no bit, or only the deprecated system-hardware one)
        // keeps the kernel's stamp.
        assert_eq!(ring_timestamp(user | 1 << 30, 9), RxTimestamp::Kernel(9));
        assert_eq!(ring_timestamp(user, 0), RxTimestamp::Kernel(0));
    }

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
    fn layout_matches_the_kernel_abi() {
        assert_eq!(TX_VNET_OFFSET, 32);
        assert_eq!(TX_DATA_OFFSET, 42);
        assert_eq!(BLOCK_STATUS, 8);
        assert_eq!(BLOCK_NUM_PKTS, 12);
        assert_eq!(BLOCK_FIRST_PKT, 16);
        assert_eq!(FRAME_HEADER_LEN, 48);
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

    #[test]
    fn interface_names_are_checked_before_any_syscall() {
        let err = PortName::new("a-name-longer-than-15", None).unwrap_err();
        assert!(err.to_string().contains("at most 15 bytes"), "{err}");
        assert!(PortName::new("", None).is_err());
        assert!(PortName::new("ns/eth0", None).is_err());
        assert_eq!(
            PortName::new("eth0", Some("lab")).unwrap().to_string(),
            "lab/eth0"
        );
    }
}
