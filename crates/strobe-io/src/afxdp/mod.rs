//! AF_XDP backend: one XDP socket on one queue of an interface, transmitting from (and
//! optionally receiving into) a UMEM that strobe registers itself, with no C library.
//!
//! What kernels and drivers give:
//! - AF_XDP sockets exist since Linux 4.18 (CONFIG_XDP_SOCKETS). Every driver supports
//!   *copy mode*: TX frames are copied into socket buffers and sent by `sendto()` (at most
//!   32 per call; since 6.17 strobe raises that to 256 with XDP_MAX_TX_SKB_BUDGET), RX
//!   frames are copied from the driver's buffers into the UMEM.
//! - *Zero-copy* needs driver support (i40e, ice, ixgbe, mlx5, igc, stmmac, …); veth has
//!   none, so binding with XDP_ZEROCOPY fails with EOPNOTSUPP there and
//!   `XdpMode::Auto` falls back to copy mode, saying why.
//! - need_wakeup (XDP_USE_NEED_WAKEUP and the ring flags word) since 5.4; without it the
//!   socket is kicked after every batch. Copy-mode TX always asks for a wake-up.
//! - XDP programs attached through a bpf_link (BPF_LINK_CREATE, attach type BPF_XDP) since
//!   5.9: the program detaches when the link's descriptor closes, also when strobe crashes.
//! - veth runs XDP natively (since 4.19). A native program on one end receives what the
//!   other end's stack or AF_XDP socket sends with nothing set up on the peer: attaching it
//!   turns TSO/GSO off on the peer (`ethtool -k` shows them "off [fixed]") so every frame
//!   reaches the program. GRO or an XDP program on the peer matters only for frames
//!   redirected *into* a veth (XDP_REDIRECT/XDP_TX). Other drivers without native XDP get
//!   the generic (SKB) hook, with a note.
//! - RX timestamps: the XDP path carries no kernel timestamp here, so frames are stamped
//!   with strobe's CLOCK_REALTIME right after they are taken off the RX ring.
//!
//! Threads: TX uses the TX and completion rings, RX the fill and RX rings. Those are
//! independent single-producer/single-consumer pairs over disjoint UMEM frames, so
//! [`AfXdpPort::split`] hands each direction to its own thread with no lock between them.

pub(crate) mod asm;
pub(crate) mod bpf;
mod ring;
pub(crate) mod sys;

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bpf::{AttachMode, XdpAttachment};
use ring::{Consumer, Producer, RingOffsets};
use sys::{failed, LinkFacts, Mmap};

use crate::netns::in_netns;
use crate::tx_stamps::{TxStampBoard, TxStampClock, TxStamper};
use crate::{
    Backend, BackendStats, IoError, Receiver, RxDrops, RxFrame, RxTimestamp, TimeBase, TxBatch,
    TxSlot, MAX_BATCH,
};

/// Which AF_XDP mode to ask the driver for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum XdpMode {
    /// Zero-copy when the driver supports it, else copy mode (the reason is in `notes()`).
    #[default]
    Auto,
    Copy,
    ZeroCopy,
}

/// The mode a bound socket actually runs in, as the kernel reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XdpModeInUse {
    Copy,
    ZeroCopy,
}

impl XdpModeInUse {
    fn name(self) -> &'static str {
        match self {
            XdpModeInUse::Copy => "copy mode",
            XdpModeInUse::ZeroCopy => "zero-copy",
        }
    }
}

/// How to set up an AF_XDP port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AfXdpOptions {
    pub mode: XdpMode,
    /// UMEM frame size: 2048 or 4096 bytes; one frame holds one packet.
    pub frame_size: u32,
    /// UMEM frames. With `rx`, half (at most `ring_size`) go to RX and the rest to TX; TX
    /// uses at most `ring_size`. Frames the rings could never hold are not allocated.
    pub frames: u32,
    /// TX frames at most (frames sent and not yet completed): UMEM for more would only
    /// count against the locked-memory limit. A port that only receives needs 1.
    pub tx_frames: u32,
    /// Entries of the RX, TX and completion rings: a power of two. The fill ring gets room
    /// for twice the RX frames, as the kernel reports its progress on it only now and then.
    pub ring_size: u32,
    /// Bind with XDP_USE_NEED_WAKEUP and kick the kernel only when it asks.
    pub need_wakeup: bool,
    /// Load and attach strobe's XDP program and receive this queue's frames. Off by default:
    /// it takes every frame of the queue away from the kernel's stack.
    pub rx: bool,
    /// With `rx`: attach the XDP program for this socket alone (true), or leave it to the
    /// caller, which attaches one program for the sockets of several queues
    /// ([`AfXdpRxQueues`]).
    pub attach: bool,
    /// Reserve AF_XDP TX metadata before every TX frame and ask for a transmit stamp in it
    /// (Linux >= 6.8): see [`AfXdpTx::stamp_transmits`]. Frames then cannot span several
    /// UMEM frames.
    pub tx_metadata: bool,
}

impl Default for AfXdpOptions {
    fn default() -> Self {
        AfXdpOptions {
            mode: XdpMode::Auto,
            frame_size: 2048,
            frames: 8192,
            tx_frames: 4096,
            ring_size: 4096,
            need_wakeup: true,
            rx: false,
            attach: true,
            tx_metadata: false,
        }
    }
}

/// `sizeof(struct xsk_tx_metadata)`: flags, then the request or (after completion) the
/// transmit stamp at byte 8.
const TX_METADATA_LEN: u32 = 24;
/// Where the kernel writes the transmit stamp in the metadata.
const TX_METADATA_STAMP_AT: usize = 8;

/// Largest UMEM frame (chunk) size every kernel accepts without huge pages.
const MAX_FRAME_SIZE: u32 = 4096;
/// Ethernet header plus one VLAN tag: frames up to MTU + this cross the interface.
const LINK_OVERHEAD: usize = 14 + 4;

/// How the UMEM is divided: TX frames are ids `0..tx_frames`, RX frames follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    frame_size: u32,
    ring_size: u32,
    tx_frames: u32,
    rx_frames: u32,
    /// UMEM frames per TX frame: more than 1 for frames longer than one UMEM frame, sent as
    /// multi-buffer packets (one descriptor per UMEM frame, XDP_USE_SG, Linux >= 6.6).
    tx_chunks: u32,
    /// Frames may span several UMEM frames (XDP_USE_SG): the MTU allows longer frames.
    multi_buffer: bool,
    /// Bytes of AF_XDP TX metadata before each TX frame's data: 0, or
    /// [`TX_METADATA_LEN`] when transmit stamps are asked for.
    tx_headroom: u32,
}

impl Layout {
    /// The kernel publishes how far it has read the fill ring only when it has used up
    /// what it read last time, so up to all RX frames can sit there consumed but not yet
    /// released while all of them come back: twice the RX frames always fits.
    /// UMEM frames the TX frames take; RX frames follow them.
    fn tx_umem_frames(&self) -> u32 {
        self.tx_frames * self.tx_chunks
    }

    fn fill_ring_size(&self) -> u32 {
        (2 * self.rx_frames).next_power_of_two().max(self.ring_size)
    }
}

impl AfXdpOptions {
    fn layout(&self) -> Result<Layout, IoError> {
        if self.frame_size != 2048 && self.frame_size != 4096 {
            return Err(IoError::Other(format!(
                "AF_XDP frame size {} is not supported: use 2048 or 4096",
                self.frame_size
            )));
        }
        if !self.ring_size.is_power_of_two() || !(8..=65536).contains(&self.ring_size) {
            return Err(IoError::Other(format!(
                "AF_XDP ring size {} is not supported: use a power of two from 8 to 65536",
                self.ring_size
            )));
        }
        let needed = if self.rx { 2 } else { 1 };
        if self.frames < needed {
            return Err(IoError::Other(format!(
                "AF_XDP needs at least {needed} UMEM frames{}, not {}",
                if self.rx {
                    " (one for TX, one for RX)"
                } else {
                    ""
                },
                self.frames
            )));
        }
        // TX frames never outnumber the TX and completion ring entries, and the fill ring
        // holds twice the RX frames, so a frame handed back to the kernel finds room once
        // the kernel has published its progress.
        // Before 6.8 the metadata length was padding the kernel ignored: a socket would
        // take it and then refuse every descriptor that asks for metadata.
        if self.tx_metadata && crate::kernel_release().is_some_and(|r| r < (6, 8)) {
            return Err(IoError::Other(
                "this kernel has no AF_XDP TX metadata (it needs Linux 6.8 or later): leave --tx-timestamps at strobe".into(),
            ));
        }
        let rx_frames = if self.rx {
            (self.frames / 2).min(self.ring_size)
        } else {
            0
        };
        let tx_frames = (self.frames - rx_frames)
            .min(self.ring_size)
            .min(self.tx_frames.max(1));
        Ok(Layout {
            frame_size: self.frame_size,
            ring_size: self.ring_size,
            tx_frames,
            rx_frames,
            tx_chunks: 1,
            multi_buffer: false,
            tx_headroom: if self.tx_metadata { TX_METADATA_LEN } else { 0 },
        })
    }
}

/// The socket and its UMEM, shared by the two halves of a port.
struct Socket {
    // Field order is drop order: close the socket before unmapping the UMEM it used.
    fd: OwnedFd,
    umem: Mmap,
}

impl Socket {
    /// Start of UMEM frame `frame`; the caller keeps `frame` inside the UMEM.
    fn frame_ptr(&self, layout: &Layout, frame: u32) -> *mut u8 {
        debug_assert!(((frame as usize + 1) * layout.frame_size as usize) <= self.umem.len());
        // SAFETY: the offset stays inside the UMEM mapping (checked above in debug builds,
        // guaranteed by callers, which only use frame ids of the layout).
        unsafe {
            self.umem
                .as_ptr()
                .add(frame as usize * layout.frame_size as usize)
        }
    }
}

/// Where a port is, for messages and `describe()`.
#[derive(Clone, Debug)]
struct Place {
    iface: String,
    netns: Option<String>,
    queue: u32,
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.netns {
            Some(ns) => write!(f, "{ns}/{} queue {}", self.iface, self.queue),
            None => write!(f, "{} queue {}", self.iface, self.queue),
        }
    }
}

/// A socket set up but not yet bound: UMEM registered, rings sized and mapped, the fill
/// ring stocked with every RX frame.
struct Unbound {
    socket: Socket,
    tx: Producer<libc::xdp_desc>,
    completion: Consumer<u64>,
    rx: Option<(Consumer<libc::xdp_desc>, Producer<u64>)>,
    has_flags: bool,
    tx_budget: Option<u32>,
}

/// `XDP_MAX_TX_SKB_BUDGET` (Linux 6.17, include/uapi/linux/if_xdp.h): descriptors one
/// `sendto` sends in copy mode, 32 before. Not in the libc crate yet.
const XDP_MAX_TX_SKB_BUDGET: libc::c_int = 9;

/// Raises the copy-mode kick budget to a full batch, within the TX ring (the kernel accepts
/// 32 to the ring's size). None on kernels without the option: they send 32 per kick,
/// which `flush` handles with more kicks.
fn raise_tx_budget(fd: &OwnedFd, tx_ring: u32) -> Option<u32> {
    let budget = (MAX_BATCH as u32).min(tx_ring);
    if budget <= 32 {
        return None;
    }
    sys::setsockopt(fd, libc::SOL_XDP, XDP_MAX_TX_SKB_BUDGET, &budget)
        .ok()
        .map(|()| budget)
}

impl Unbound {
    fn new(layout: &Layout, rx: bool) -> Result<Unbound, IoError> {
        // SAFETY: plain socket creation; the result is checked.
        let fd = sys::owned_fd(unsafe {
            libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0)
        } as libc::c_long)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::EAFNOSUPPORT) => IoError::Other(format!(
                "this kernel has no AF_XDP sockets ({e}): AF_XDP needs Linux >= 4.18 built with CONFIG_XDP_SOCKETS=y; use an afpacket port instead"
            )),
            _ => failed("cannot create an AF_XDP socket", e),
        })?;

        let frames = layout.tx_umem_frames() + layout.rx_frames;
        let umem_len = frames as usize * layout.frame_size as usize;
        let umem = Mmap::anonymous(umem_len)
            .map_err(|e| failed(format_args!("cannot allocate {umem_len} bytes of UMEM"), e))?;
        let mut reg = libc::xdp_umem_reg {
            addr: umem.as_ptr() as u64,
            len: umem_len as u64,
            chunk_size: layout.frame_size,
            headroom: 0,
            flags: 0,
            tx_metadata_len: layout.tx_headroom,
        };
        if layout.tx_headroom > 0 {
            reg.flags = libc::XDP_UMEM_TX_METADATA_LEN;
        }
        let (soft, hard) = sys::raise_memlock_for(umem_len as u64);
        let mut registered = sys::setsockopt(&fd, libc::SOL_XDP, libc::XDP_UMEM_REG, &reg);
        // Linux 6.8 to 6.10 take the metadata length without the flag (and refuse it).
        if layout.tx_headroom > 0
            && registered
                .as_ref()
                .is_err_and(|e| e.raw_os_error() == Some(libc::EINVAL))
        {
            reg.flags = 0;
            registered = sys::setsockopt(&fd, libc::SOL_XDP, libc::XDP_UMEM_REG, &reg);
        }
        if let (true, Err(e)) = (layout.tx_headroom > 0, &registered) {
            if e.raw_os_error() == Some(libc::EINVAL) {
                return Err(IoError::Other(format!(
                    "the kernel refused {} bytes of AF_XDP TX metadata per frame ({e}): leave --tx-timestamps at strobe",
                    layout.tx_headroom
                )));
            }
        }
        registered.map_err(|e| {
            let kib = |b: u64| match b {
                libc::RLIM_INFINITY => "unlimited".to_string(),
                b => format!("{} KiB", b / 1024),
            };
            match e.raw_os_error() {
                Some(libc::ENOBUFS) | Some(libc::ENOMEM) => IoError::Other(format!(
                    "cannot register {} KiB of UMEM: {e}: the kernel charges UMEM to the \
                     locked-memory limit (RLIMIT_MEMLOCK, soft {} and hard {} after strobe raised \
                     the soft one as far as allowed) unless the process has CAP_IPC_LOCK: give \
                     strobe cap_ipc_lock (`setcap cap_net_raw,cap_net_admin,cap_bpf,cap_ipc_lock+ep \
                     strobe`), raise the hard limit (`prlimit --memlock`, LimitMEMLOCK= in a \
                     systemd unit), or run as root",
                    umem_len / 1024,
                    kib(soft),
                    kib(hard)
                )),
                _ => failed("cannot register the UMEM with the AF_XDP socket", e),
            }
        })?;
        sys::umem_registered(umem_len as u64);

        let size = layout.ring_size;
        let fill_size = layout.fill_ring_size();
        let set_size = |name: libc::c_int, what: &str, size: u32| {
            sys::setsockopt(&fd, libc::SOL_XDP, name, &size).map_err(|e| {
                failed(
                    format_args!("cannot size the AF_XDP {what} ring to {size}"),
                    e,
                )
            })
        };
        set_size(libc::XDP_UMEM_FILL_RING, "fill", fill_size)?;
        set_size(libc::XDP_UMEM_COMPLETION_RING, "completion", size)?;
        set_size(libc::XDP_TX_RING, "TX", size)?;
        let tx_budget = raise_tx_budget(&fd, size);
        if rx {
            set_size(libc::XDP_RX_RING, "RX", size)?;
        }

        let (offsets, has_flags) = mmap_offsets(&fd)?;
        let map_err = |what: &'static str| {
            move |e| failed(format_args!("cannot map the AF_XDP {what} ring"), e)
        };
        let tx = Producer::map(&fd, libc::XDP_PGOFF_TX_RING as u64, size, offsets.tx)
            .map_err(map_err("TX"))?;
        let completion = Consumer::map(&fd, libc::XDP_UMEM_PGOFF_COMPLETION_RING, size, offsets.cr)
            .map_err(map_err("completion"))?;
        let mut fill = Producer::map(&fd, libc::XDP_UMEM_PGOFF_FILL_RING, fill_size, offsets.fr)
            .map_err(map_err("fill"))?;
        let rx = if rx {
            let ring = Consumer::map(&fd, libc::XDP_PGOFF_RX_RING as u64, size, offsets.rx)
                .map_err(map_err("RX"))?;
            // Every RX frame starts out with the kernel (the fresh ring has room for all).
            for i in 0..layout.rx_frames {
                let frame = layout.tx_umem_frames() + i;
                fill.write(i, frame as u64 * layout.frame_size as u64);
            }
            fill.submit(layout.rx_frames);
            Some((ring, fill))
        } else {
            None
        };
        Ok(Unbound {
            socket: Socket { fd, umem },
            tx,
            completion,
            rx,
            has_flags,
            tx_budget,
        })
    }

    fn bind(
        &self,
        ifindex: u32,
        queue: u32,
        mode: XdpModeInUse,
        need_wakeup: bool,
        multi_buffer: bool,
    ) -> std::io::Result<()> {
        let mut flags = match mode {
            XdpModeInUse::Copy => libc::XDP_COPY,
            XdpModeInUse::ZeroCopy => libc::XDP_ZEROCOPY,
        };
        if need_wakeup {
            flags |= libc::XDP_USE_NEED_WAKEUP;
        }
        if multi_buffer {
            flags |= libc::XDP_USE_SG;
        }
        let addr = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: flags,
            sxdp_ifindex: ifindex,
            sxdp_queue_id: queue,
            sxdp_shared_umem_fd: 0,
        };
        // SAFETY: addr is a valid sockaddr_xdp of the size passed.
        let rc = unsafe {
            libc::bind(
                self.socket.fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_xdp).cast(),
                std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

struct AllOffsets {
    rx: RingOffsets,
    tx: RingOffsets,
    fr: RingOffsets,
    cr: RingOffsets,
}

/// Ring layout from the kernel; kernels before need_wakeup return the shorter structure
/// without the flags word.
fn mmap_offsets(fd: &OwnedFd) -> Result<(AllOffsets, bool), IoError> {
    let mut raw = [0u64; 16];
    let len = sys::getsockopt(fd, libc::SOL_XDP, libc::XDP_MMAP_OFFSETS, &mut raw)
        .map_err(|e| failed("cannot read the AF_XDP ring offsets", e))?;
    let per_ring = match len {
        128 => 4,
        96 => 3,
        other => {
            return Err(IoError::Other(format!(
                "the kernel returned AF_XDP ring offsets of an unknown size ({other} bytes)"
            )))
        }
    };
    let ring = |i: usize| {
        let r = &raw[i * per_ring..(i + 1) * per_ring];
        RingOffsets {
            producer: r[0],
            consumer: r[1],
            desc: r[2],
            flags: (per_ring == 4).then(|| r[3]),
        }
    };
    Ok((
        AllOffsets {
            rx: ring(0),
            tx: ring(1),
            fr: ring(2),
            cr: ring(3),
        },
        per_ring == 4,
    ))
}

/// Why a socket could not be opened: set-up failures are final, a failed bind may be retried
/// in another mode.
enum OpenError {
    Setup(IoError),
    /// The last mode tried, and why the kernel refused it.
    Bind(std::io::Error, XdpModeInUse),
}

/// How long to retry a bind that finds the queue busy: a socket closed a moment ago frees
/// its queue from deferred kernel work, shortly after `close()` returns.
const BUSY_QUEUE_GRACE: Duration = Duration::from_secs(1);

/// Sets up a socket and binds it in the first of `modes` the driver takes; returns it with
/// that mode and why the modes before it failed. Each mode is tried on the same socket: a
/// new socket would register its UMEM again while the kernel still charges the first to the
/// locked-memory limit (a closed socket's UMEM is released by deferred work).
fn open_bound(
    layout: &Layout,
    opts: &AfXdpOptions,
    ifindex: u32,
    queue: u32,
    modes: &[XdpModeInUse],
) -> Result<(Unbound, XdpModeInUse, Vec<std::io::Error>), OpenError> {
    let started = Instant::now();
    'socket: loop {
        let socket = Unbound::new(layout, opts.rx).map_err(OpenError::Setup)?;
        let need_wakeup = opts.need_wakeup && socket.has_flags;
        let mut refused = Vec::new();
        for (i, &mode) in modes.iter().enumerate() {
            match socket.bind(ifindex, queue, mode, need_wakeup, layout.multi_buffer) {
                Ok(()) => return Ok((socket, mode, refused)),
                Err(e)
                    if e.raw_os_error() == Some(libc::EBUSY)
                        && started.elapsed() < BUSY_QUEUE_GRACE =>
                {
                    drop(socket);
                    std::thread::sleep(Duration::from_millis(10));
                    continue 'socket;
                }
                Err(e) if i + 1 == modes.len() => return Err(OpenError::Bind(e, mode)),
                Err(e) => refused.push(e),
            }
        }
        unreachable!("open_bound is given at least one mode");
    }
}

fn queue_out_of_range(place: &Place, queues: u32) -> IoError {
    IoError::Other(format!(
        "queue {} is out of range for {}: it has {queues} queue{}, numbered from 0 (see `ethtool -l {}`)",
        place.queue,
        place.iface,
        if queues == 1 { "" } else { "s" },
        place.iface
    ))
}

fn bind_error(
    place: &Place,
    facts: &LinkFacts,
    mode: XdpModeInUse,
    err: std::io::Error,
) -> IoError {
    let iface = &place.iface;
    let driver = facts.driver_name();
    let step = format!("cannot bind the AF_XDP socket to {place} ({})", mode.name());
    match (err.raw_os_error(), mode) {
        (Some(libc::EOPNOTSUPP) | Some(524), XdpModeInUse::ZeroCopy) => IoError::Other(format!(
            "{step}: {err}: driver {driver} of {iface} has no AF_XDP zero-copy support; use copy or auto mode"
        )),
        (Some(libc::EBUSY), _) => IoError::Other(format!(
            "{step}: {err}: queue {} of {iface} is already used by another AF_XDP socket",
            place.queue
        )),
        (Some(libc::EINVAL), _) => match facts.rx_queues.min(facts.tx_queues) {
            Some(n) if place.queue >= n => queue_out_of_range(place, n),
            _ => IoError::Other(format!(
                "{step}: {err}: the queue may be out of range (`ethtool -l {iface}`), or the kernel is older than 5.4 and lacks need_wakeup (set need_wakeup = false)"
            )),
        },
        _ => failed(step, err),
    }
}

/// Asks the kernel whether a bound socket runs zero-copy (XDP_OPTIONS, Linux 5.3+).
fn mode_in_use(fd: &OwnedFd, asked: XdpModeInUse) -> XdpModeInUse {
    let mut options = libc::xdp_options { flags: 0 };
    match sys::getsockopt(fd, libc::SOL_XDP, libc::XDP_OPTIONS, &mut options) {
        Ok(_) if options.flags & libc::XDP_OPTIONS_ZEROCOPY != 0 => XdpModeInUse::ZeroCopy,
        Ok(_) => XdpModeInUse::Copy,
        Err(_) => asked,
    }
}

/// One AF_XDP socket on one queue: TX and (with `rx`) RX over one UMEM.
pub struct AfXdpPort {
    tx: AfXdpTx,
    rx: Option<AfXdpRx>,
    mode: XdpModeInUse,
    notes: Vec<String>,
}

impl AfXdpPort {
    /// Opens queue `queue` of `iface`, inside network namespace `netns` if given.
    pub fn open(
        iface: &str,
        queue: u32,
        netns: Option<&str>,
        opts: &AfXdpOptions,
    ) -> Result<AfXdpPort, IoError> {
        let layout = opts.layout()?;
        let place = Place {
            iface: iface.to_string(),
            netns: netns.map(str::to_string),
            queue,
        };
        in_netns(netns, || Self::open_here(place, layout, opts))
    }

    fn open_here(
        place: Place,
        mut layout: Layout,
        opts: &AfXdpOptions,
    ) -> Result<AfXdpPort, IoError> {
        let ifindex = sys::if_index(&place.iface, place.netns.as_deref())?;
        // One UMEM frame per packet: on an interface with a larger MTU take the largest
        // frame size every kernel accepts, 4096; frames beyond it are refused before a run.
        let mtu = crate::tsinfo::interface_mtu(&place.iface)?;
        // Frames the link carries, up to the longest strobe builds (loopback allows 64 KiB).
        let link_max = (mtu + LINK_OVERHEAD).min(crate::MAX_FRAME_LEN);
        // TX metadata sits in the UMEM frame before the packet.
        let headroom = layout.tx_headroom as usize;
        if (layout.frame_size as usize) < link_max + headroom {
            // The same UMEM bytes in half as many frames.
            let scale = |frames: u32| frames * layout.frame_size / MAX_FRAME_SIZE;
            layout.tx_frames = scale(layout.tx_frames).max(1);
            layout.rx_frames = scale(layout.rx_frames).max(u32::from(layout.rx_frames > 0));
            layout.frame_size = MAX_FRAME_SIZE;
        }
        // Longer frames span several UMEM frames, sent as one multi-buffer packet each;
        // frames with TX metadata before them stay in one (and the socket binds without
        // multi-buffer, which some drivers' zero-copy lacks).
        layout.multi_buffer = headroom == 0
            && (layout.frame_size as usize) < link_max
            && crate::kernel_release().is_some_and(|r| r >= (6, 6));
        if layout.multi_buffer && layout.tx_frames > 1 {
            layout.tx_chunks = link_max.div_ceil(layout.frame_size as usize) as u32;
            layout.tx_frames = (layout.tx_frames / layout.tx_chunks).max(1);
        }
        let max_frame_len =
            ((layout.tx_chunks * layout.frame_size - layout.tx_headroom) as usize).min(link_max);
        let facts = LinkFacts::query(&place.iface);
        // Clearly out of range for every kind of queue: say so before the kernel's EINVAL.
        if let Some(n) = facts.rx_queues.max(facts.tx_queues) {
            if place.queue >= n {
                return Err(queue_out_of_range(&place, n));
            }
        }

        let mut notes = Vec::new();
        let modes: &[XdpModeInUse] = match opts.mode {
            XdpMode::Copy => &[XdpModeInUse::Copy],
            XdpMode::ZeroCopy => &[XdpModeInUse::ZeroCopy],
            XdpMode::Auto => &[XdpModeInUse::ZeroCopy, XdpModeInUse::Copy],
        };
        let (socket, asked, refused) = match open_bound(&layout, opts, ifindex, place.queue, modes)
        {
            Ok(opened) => opened,
            Err(OpenError::Setup(e)) => return Err(e),
            Err(OpenError::Bind(e, mode)) => return Err(bind_error(&place, &facts, mode, e)),
        };
        if let Some(zc) = refused.first() {
            notes.push(format!(
                "zero-copy is not available on {} (driver {}: {zc}); using copy mode",
                place.iface,
                facts.driver_name()
            ));
        }
        let mode = mode_in_use(&socket.socket.fd, asked);
        let need_wakeup = opts.need_wakeup && socket.has_flags;
        if opts.need_wakeup && !socket.has_flags {
            notes.push(
                "this kernel has no need_wakeup (< 5.4): the socket is kicked after every batch"
                    .into(),
            );
        }

        let Unbound {
            socket,
            tx,
            completion,
            rx,
            tx_budget,
            ..
        } = socket;
        let socket = Arc::new(socket);
        let rx = match rx {
            Some((ring, fill)) => {
                let xdp = if opts.attach {
                    let xdp = XdpAttachment::attach(
                        &place.iface,
                        facts.driver_name(),
                        ifindex,
                        &[(place.queue, &socket.fd)],
                        layout.multi_buffer,
                    )?;
                    notes.extend(xdp.note.clone());
                    Some(xdp)
                } else {
                    None
                };
                Some(AfXdpRx {
                    ring,
                    fill,
                    xdp,
                    socket: Arc::clone(&socket),
                    layout,
                    place: place.clone(),
                    mode,
                    need_wakeup,
                    gather: if layout.multi_buffer {
                        vec![0u8; crate::MAX_FRAME_LEN].into_boxed_slice()
                    } else {
                        Box::default()
                    },
                    gathered: 0,
                    driver: facts.driver_name().to_string(),
                })
            }
            None => None,
        };
        let tx = AfXdpTx {
            max_frame_len,
            mtu,
            ring: tx,
            completion,
            free: FrameFifo::new(layout.tx_frames),
            in_flight: 0,
            socket,
            layout,
            place,
            mode,
            need_wakeup,
            tx_budget,
            stats: BackendStats::default(),
            lens: vec![0; layout.tx_frames as usize].into_boxed_slice(),
            stamper: None,
            stamp_source: None,
        };
        Ok(AfXdpPort {
            tx,
            rx,
            mode,
            notes,
        })
    }

    /// The mode the kernel runs the socket in.
    pub fn mode(&self) -> XdpModeInUse {
        self.mode
    }

    /// Fallbacks taken while opening (zero-copy to copy, native to generic XDP, no
    /// need_wakeup), each with its reason; empty when everything ran as asked.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Separates the directions, so a TX worker and an RX worker can each own one: they
    /// share nothing but the socket (no lock, disjoint frames, separate rings). The RX half
    /// exists when the port was opened with `rx`; dropping it detaches the XDP program.
    pub fn split(self) -> (AfXdpTx, Option<AfXdpRx>) {
        (self.tx, self.rx)
    }
}

/// Free TX frame ids in the order they completed: a fixed ring, no allocation after open.
/// Completions arrive in send order, so the ids come back round in the same rotation.
struct FrameFifo {
    ids: Box<[u32]>,
    head: u32,
    len: u32,
    mask: u32,
}

impl FrameFifo {
    fn new(count: u32) -> FrameFifo {
        let capacity = count.next_power_of_two();
        let mut ids = vec![0u32; capacity as usize].into_boxed_slice();
        for (slot, id) in ids.iter_mut().zip(0..count) {
            *slot = id;
        }
        FrameFifo {
            ids,
            head: 0,
            len: count,
            mask: capacity - 1,
        }
    }

    fn get(&self, i: u32) -> u32 {
        self.ids[(self.head.wrapping_add(i) & self.mask) as usize]
    }

    fn pop(&mut self, n: u32) {
        self.head = self.head.wrapping_add(n);
        self.len -= n;
    }

    fn push(&mut self, id: u32) {
        self.ids[(self.head.wrapping_add(self.len) & self.mask) as usize] = id;
        self.len += 1;
    }
}

/// Kicks per `transmit` to empty the TX ring: a full batch in copy mode takes
/// MAX_BATCH / 32 of them; the rest is slack for a busy kernel.
const MAX_FLUSH_KICKS: u32 = (MAX_BATCH / 32) as u32 + 8;

/// How long TX waits for the kernel to complete frames before giving up.
const TX_STALL_LIMIT: Duration = Duration::from_secs(2);

/// The transmit half: UMEM frames `0..slot_count()` are the engine's slots.
pub struct AfXdpTx {
    ring: Producer<libc::xdp_desc>,
    completion: Consumer<u64>,
    free: FrameFifo,
    /// Frames published to the TX ring and not yet completed.
    in_flight: u32,
    socket: Arc<Socket>,
    layout: Layout,
    place: Place,
    mode: XdpModeInUse,
    need_wakeup: bool,
    /// Descriptors copy mode sends per kick, when the kernel let us raise it from 32.
    tx_budget: Option<u32>,
    stats: BackendStats,
    /// The UMEM frame size or what the interface's MTU carries, whichever is smaller.
    max_frame_len: usize,
    mtu: usize,
    /// Length of the frame last sent from each TX frame (to find its trailer on completion).
    lens: Box<[u32]>,
    /// Reads each completed frame's transmit stamp, when asked for.
    stamper: Option<Box<TxStamper>>,
    /// Where the transmit stamps come from, for `describe()`.
    stamp_source: Option<String>,
}

/// What [`AfXdpTx::stamp_transmits`] set up: where the stamps come from, and the NIC's
/// transmit stamping if it turned that on, to be kept until the run's last frame is
/// received (several ports may share the NIC; dropping it turns the stamping off).
#[derive(Debug)]
pub struct TxStampsOn {
    pub source: String,
    pub stamping: Option<crate::tsinfo::TransmitStamping>,
}

impl AfXdpTx {
    /// Descriptors one kick sends in copy mode, when raised above the kernel's 32.
    pub fn tx_budget(&self) -> Option<u32> {
        self.tx_budget
    }

    /// Takes completed frames back into the free rotation.
    fn reclaim(&mut self) {
        let n = self.completion.available(u32::MAX);
        if n == 0 {
            return;
        }
        let slot_bytes = self.layout.frame_size as u64 * self.layout.tx_chunks as u64;
        for i in 0..n {
            let addr = self.completion.read(i);
            let frame = addr / slot_bytes;
            // The kernel only completes what we sent; anything else would be a kernel bug,
            // and taking it would hand one frame out twice. A multi-buffer frame completes
            // all its buffers at once (one skb): its first buffer frees it.
            if frame < self.layout.tx_frames as u64
                && (self.layout.tx_chunks == 1 || addr % slot_bytes == 0)
            {
                if let Some(stamper) = &mut self.stamper {
                    let headroom = self.layout.tx_headroom as usize;
                    let start = self.socket.frame_ptr(&self.layout, frame as u32);
                    let len = self.lens[frame as usize] as usize;
                    // SAFETY: the frame is back from the kernel and not yet free again:
                    // this half alone reads it. The metadata and the frame lie inside its
                    // UMEM frame (`len` <= max_frame_len = frame size - headroom).
                    let (stamp, data) = unsafe {
                        (
                            std::ptr::read_unaligned(start.add(TX_METADATA_STAMP_AT).cast::<u64>()),
                            std::slice::from_raw_parts(start.add(headroom), len),
                        )
                    };
                    stamper.completed(stamp, data);
                }
                self.free.push(frame as u32);
            }
        }
        self.completion.release(n);
        self.in_flight -= n.min(self.in_flight);
    }

    /// Whether the kernel needs a `sendto` to process the TX ring: always without
    /// need_wakeup, else when it set the flag (copy mode always does).
    fn wants_kick(&self) -> bool {
        !self.need_wakeup || self.ring.needs_wakeup()
    }

    /// Tells the kernel to process the TX ring, if it asked for that.
    fn kick(&mut self) -> Result<(), IoError> {
        if !self.wants_kick() {
            return Ok(());
        }
        // SAFETY: a zero-length sendto without buffers or address only wakes the socket.
        let rc = unsafe {
            libc::sendto(
                self.socket.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if rc >= 0 {
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        match err.raw_os_error() {
            // The kernel sent what it could this round (copy mode: 32 frames) or is busy;
            // the next kick continues.
            Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS) | Some(libc::EINTR) => {
                Ok(())
            }
            Some(libc::ENETDOWN) => Err(IoError::Other(format!(
                "AF_XDP TX on {}: interface {} is down (`ip link set {} up`)",
                self.place, self.place.iface, self.place.iface
            ))),
            Some(libc::ENXIO) => Err(IoError::Other(format!(
                "AF_XDP TX on {}: the interface went away",
                self.place
            ))),
            _ => Err(failed(
                format_args!("AF_XDP TX kick on {}", self.place),
                err,
            )),
        }
    }

    /// Kicks until the kernel has taken every published descriptor off the TX ring, so no
    /// frame waits for the next call (copy mode sends at most 32 per kick). Bounded: what a
    /// busy kernel leaves goes out with the next kick.
    fn flush(&mut self) -> Result<(), IoError> {
        let mut tries = MAX_FLUSH_KICKS;
        while tries > 0 && self.ring.pending() > 0 && self.wants_kick() {
            self.kick()?;
            tries -= 1;
        }
        Ok(())
    }

    /// Whether `want` frames are free and the TX ring has room for them. The ring can lag
    /// behind the frames: the kernel publishes how far it has read only now and then.
    fn has_room(&mut self, want: u32) -> bool {
        let descriptors = want * self.layout.tx_chunks;
        self.free.len >= want && self.ring.free(descriptors) >= descriptors
    }

    /// Kicks and reclaims until `want` frames can be sent or the stall limit passes.
    fn wait_for_room(&mut self, want: u32) -> Result<(), IoError> {
        let started = Instant::now();
        loop {
            self.kick()?;
            self.reclaim();
            if self.has_room(want) {
                return Ok(());
            }
            if started.elapsed() > TX_STALL_LIMIT {
                return Err(self.stalled());
            }
            std::hint::spin_loop();
        }
    }

    fn stalled(&mut self) -> IoError {
        IoError::Other(format!(
            "AF_XDP TX on {} stalled: {} frames not completed after {} s ({} still in the TX ring); is the link up (`ip link show {}`)?",
            self.place,
            self.in_flight,
            TX_STALL_LIMIT.as_secs(),
            self.ring.pending(),
            self.place.iface
        ))
    }

    /// The mode the kernel runs the socket in.
    pub fn mode(&self) -> XdpModeInUse {
        self.mode
    }

    /// Reads the transmit stamp the kernel writes into each completed frame's TX metadata
    /// and publishes each of this run's frames' hand-over delay on `board` (see
    /// [`crate::tx_stamps`]). In copy mode the stamp is the kernel's completion time; in
    /// zero-copy mode it is the NIC's, and the driver must say it stamps (the kernel's
    /// `netdev` family), the NIC must stamp sent frames on a PHC, and its stamping is
    /// turned on until this half is dropped. Returns where the stamps come from.
    ///
    /// Copy mode's completion time is no departure time (on a veth it is taken in the
    /// receiving stack, after the frame arrived): it is refused unless `completion_ok`
    /// (tests of the stamps' way through strobe).
    pub fn stamp_transmits(
        &mut self,
        board: Arc<TxStampBoard>,
        run_tag: u8,
        completion_ok: bool,
    ) -> Result<TxStampsOn, IoError> {
        if self.layout.tx_headroom == 0 {
            return Err(IoError::Other(format!(
                "AF_XDP TX on {} was opened without TX metadata",
                self.place
            )));
        }
        let mut stamping = None;
        let clock = match self.mode {
            XdpModeInUse::Copy if !completion_ok => {
                return Err(IoError::Other(format!(
                    "afxdp:{} runs in copy mode, where the kernel's TX metadata stamp is its completion time (on a veth taken after the peer received the frame, on a NIC at the completion interrupt), not the time the frame left: transmit stamps from TX metadata need zero-copy on a driver that stamps (`strobe ports`, column xsk-tx-ts); leave --tx-timestamps at strobe",
                    self.place.iface
                )))
            }
            XdpModeInUse::Copy => TxStampClock::kernel_tai()?,
            XdpModeInUse::ZeroCopy => {
                let (clock, on) = self.device_stamp_clock()?;
                stamping = on;
                clock
            }
        };
        let source = clock.source();
        self.stamper = Some(Box::new(TxStamper::new(board, clock, run_tag)));
        self.stamp_source = Some(source.clone());
        Ok(TxStampsOn { source, stamping })
    }

    /// Zero-copy: the NIC's clock, once the driver and the NIC have said they stamp, and the
    /// NIC's transmit stamping if this turned it on.
    fn device_stamp_clock(
        &mut self,
    ) -> Result<(TxStampClock, Option<crate::tsinfo::TransmitStamping>), IoError> {
        let (netns, iface) = (self.place.netns.as_deref(), self.place.iface.as_str());
        let refuse = |why: String| {
            IoError::Other(format!(
                "afxdp:{iface} runs zero-copy, where transmit stamps come from the NIC, but {why}; leave --tx-timestamps at strobe (strobe's stamp before the hand-over)"
            ))
        };
        match crate::xdp_features::xsk_tx_timestamps(netns, iface)? {
            Some(true) => {}
            Some(false) => {
                return Err(refuse(format!(
                    "driver {} does not stamp AF_XDP frames (its netdev xsk-features lack tx-timestamp)",
                    LinkFacts::query(iface).driver_name()
                )))
            }
            None => return Err(refuse("this kernel cannot say whether the driver stamps AF_XDP frames (Linux 6.8 or later)".into())),
        }
        let info = crate::tsinfo::query_ts_info(netns, iface)?;
        let phc = match (info.hardware_tx(), info.phc_path()) {
            (true, Some(phc)) => phc,
            _ => {
                return Err(refuse(format!(
                    "the NIC does not stamp sent frames on a PTP clock ({})",
                    info.summary()
                )))
            }
        };
        let stamping = crate::tsinfo::enable_hw_tx_timestamps(netns, iface)?;
        let mut realtime = crate::clocksync::SystemClock::by_name("realtime")
            .ok_or_else(|| IoError::Other("CLOCK_REALTIME cannot be read".into()))?;
        let mut nic = crate::clocksync::PhcClock::open(&phc)?;
        let sync = crate::clocksync::measure(
            &mut realtime,
            &mut nic,
            6,
            Duration::from_millis(200),
            std::thread::sleep,
        )?;
        Ok((TxStampClock::Device { phc, sync }, stamping))
    }
}

impl Backend for AfXdpTx {
    fn describe(&self) -> String {
        format!(
            "afxdp:{} TX ({}, {} frames of {} bytes{}, need_wakeup {}{}{})",
            self.place,
            self.mode.name(),
            self.layout.tx_frames,
            self.layout.frame_size * self.layout.tx_chunks,
            if self.layout.tx_chunks > 1 {
                format!(
                    " in {} UMEM frames each (multi-buffer)",
                    self.layout.tx_chunks
                )
            } else {
                String::new()
            },
            if self.need_wakeup { "on" } else { "off" },
            match (self.mode, self.tx_budget) {
                (XdpModeInUse::Copy, Some(b)) => format!(", {b} frames per kick"),
                _ => String::new(),
            },
            match &self.stamp_source {
                Some(source) => format!("; transmit stamps from {source}"),
                None => String::new(),
            }
        )
    }

    /// Copy mode sends 32 descriptors per kick unless the budget was raised; with it
    /// raised, one kick per batch of that size (+3.7 % on a veth pair, BENCHMARKS.md §2).
    fn throughput_batch(&self) -> usize {
        match (self.mode, self.tx_budget) {
            (XdpModeInUse::Copy, Some(b)) => (b as usize).min(crate::MAX_BATCH),
            _ => crate::UNPACED_BATCH,
        }
    }

    fn slot_count(&self) -> usize {
        self.layout.tx_frames as usize
    }

    fn max_frame_len(&self) -> usize {
        self.max_frame_len
    }

    fn frame_too_long(&self, len: usize) -> String {
        if len <= self.mtu + LINK_OVERHEAD && self.layout.tx_headroom > 0 {
            return format!(
                "frames of {len} bytes ({} with FCS) do not fit AF_XDP's {}-byte UMEM frames on \
                 {} with the {} bytes of TX metadata before them: transmit stamps from TX \
                 metadata take frames up to {} bytes; send longer ones with --tx-timestamps strobe",
                len + 4,
                self.layout.frame_size,
                self.place,
                self.layout.tx_headroom,
                self.max_frame_len
            );
        }
        if len <= self.mtu + LINK_OVERHEAD {
            return format!(
                "frames of {len} bytes ({} with FCS) do not fit AF_XDP's {}-byte UMEM frames on \
                 {} (frames spanning several need multi-buffer AF_XDP, Linux 6.6 or later): \
                 use afpacket: for frames this long",
                len + 4,
                self.layout.frame_size,
                self.place
            );
        }
        crate::afpacket::mtu_too_small(
            &self.place.iface,
            self.place.netns.as_deref(),
            self.mtu,
            len,
        )
    }

    fn time_base(&self) -> TimeBase {
        TimeBase::RealTime
    }

    fn transmit<F>(&mut self, count: usize, fill: F) -> Result<usize, IoError>
    where
        F: FnOnce(&mut [TxSlot<'_>]),
    {
        let want = count.min(MAX_BATCH).min(self.slot_count()) as u32;
        self.reclaim();
        if !self.has_room(want) {
            self.wait_for_room(want)?;
        }

        let frame_size = self.layout.frame_size as usize;
        let chunks = self.layout.tx_chunks;
        let slot_size = frame_size * chunks as usize;
        let headroom = self.layout.tx_headroom as usize;
        let max_len = self.max_frame_len;
        let mut batch = TxBatch::new();
        for i in 0..want {
            let id = self.free.get(i);
            // SAFETY: free frames are owned by this half alone: the kernel gave them back
            // (or never had them), RX frames are other ids, and each id is in the free FIFO
            // once, so the slices are disjoint. They do not outlive this call. The TX
            // metadata before the frame (`headroom`) is written below, not through `buf`.
            let buf = unsafe {
                std::slice::from_raw_parts_mut(
                    self.socket
                        .frame_ptr(&self.layout, id * chunks)
                        .add(headroom),
                    slot_size - headroom,
                )
            };
            batch.push(TxSlot::blank(id, buf));
        }
        fill(&mut batch);

        // Check every length before publishing anything: the kernel silently skips a bad
        // descriptor and never completes its frame, which would leak the slot.
        if let Some(bad) = batch.iter().find(|s| s.len < 14 || s.len > max_len) {
            return Err(IoError::Other(format!(
                "AF_XDP TX on {}: frame of {} bytes in slot {}; frames must be 14 to {max_len} bytes (UMEM frame and MTU)",
                self.place, bad.len, bad.id
            )));
        }
        let n = batch.len() as u32;
        let mut bytes = 0u64;
        let mut descriptors = 0u32;
        if chunks == 1 {
            let options = if headroom > 0 {
                libc::XDP_TX_METADATA
            } else {
                0
            };
            for (i, slot) in batch.iter().enumerate() {
                if headroom > 0 {
                    let meta = self.socket.frame_ptr(&self.layout, slot.id);
                    // SAFETY: the slot's UMEM frame is this half's until published below;
                    // the metadata's 24 bytes start the frame, before the slot's buffer.
                    unsafe {
                        std::ptr::write_bytes(meta, 0, TX_METADATA_LEN as usize);
                        std::ptr::write_unaligned(
                            meta.cast::<u64>(),
                            libc::XDP_TXMD_FLAGS_TIMESTAMP as u64,
                        );
                    }
                    self.lens[slot.id as usize] = slot.len as u32;
                }
                self.ring.write(
                    i as u32,
                    libc::xdp_desc {
                        addr: slot.id as u64 * frame_size as u64 + headroom as u64,
                        len: slot.len as u32,
                        options,
                    },
                );
                bytes += slot.len as u64;
            }
            descriptors = n;
        } else {
            // One descriptor per UMEM frame the packet covers, all but the last marked as
            // continued.
            for slot in batch.iter() {
                let start = slot.id as u64 * slot_size as u64;
                let mut at = 0usize;
                while at < slot.len {
                    let len = (slot.len - at).min(frame_size);
                    let last = at + len == slot.len;
                    self.ring.write(
                        descriptors,
                        libc::xdp_desc {
                            addr: start + at as u64,
                            len: len as u32,
                            options: if last { 0 } else { libc::XDP_PKT_CONTD },
                        },
                    );
                    descriptors += 1;
                    at += len;
                }
                bytes += slot.len as u64;
            }
        }
        drop(batch);
        self.ring.submit(descriptors);
        self.free.pop(n);
        self.in_flight += descriptors;
        self.stats.frames += n as u64;
        self.stats.bytes += bytes;
        self.flush()?;
        if self.stamper.is_some() {
            // Copy mode completes a kick's frames within it: publish their stamps now, not
            // with the next batch (a receiver waits for them).
            self.reclaim();
        }
        Ok(n as usize)
    }

    /// Waits (bounded) until the kernel has completed every frame handed to it.
    fn finish(&mut self) -> Result<BackendStats, IoError> {
        let started = Instant::now();
        loop {
            self.reclaim();
            if self.in_flight == 0 {
                self.stats.tx_stamps = self.stamper.as_ref().map(|s| s.stats);
                return Ok(self.stats);
            }
            if started.elapsed() > TX_STALL_LIMIT {
                return Err(self.stalled());
            }
            self.kick()?;
            std::hint::spin_loop();
        }
    }
}

/// The receive half: this queue's frames, redirected by strobe's XDP program.
pub struct AfXdpRx {
    ring: Consumer<libc::xdp_desc>,
    fill: Producer<u64>,
    /// The XDP program feeding this socket, when it has one of its own.
    xdp: Option<XdpAttachment>,
    socket: Arc<Socket>,
    layout: Layout,
    place: Place,
    mode: XdpModeInUse,
    need_wakeup: bool,
    /// A multi-buffer frame's parts are copied here, in order, until its last part: the
    /// engine takes a frame as one slice. Empty without multi-buffer.
    gather: Box<[u8]>,
    /// Bytes of the frame being gathered (its whole length, also beyond `gather`).
    gathered: usize,
    /// The interface's driver.
    driver: String,
}

impl AfXdpRx {
    /// Whether the XDP program runs in the driver (true) or in the generic SKB path.
    pub fn native_xdp(&self) -> bool {
        self.xdp
            .as_ref()
            .is_some_and(|x| x.mode == AttachMode::Native)
    }

    /// Whether the frames this socket's full ring refuses also count in the interface's
    /// receive drops: veth counts a failed redirect in native XDP mode so; generic mode and
    /// other drivers leave them out (or count them elsewhere).
    pub fn ring_drops_count_at_interface(&self) -> bool {
        self.native_xdp() && self.driver == "veth"
    }

    /// Wakes the kernel to refill from the fill ring, if it asked for that.
    fn kick(&mut self) -> Result<(), IoError> {
        if !self.need_wakeup || !self.fill.needs_wakeup() {
            return Ok(());
        }
        // SAFETY: a zero-length recvfrom without buffers or address only wakes the socket.
        let rc = unsafe {
            libc::recvfrom(
                self.socket.fd.as_raw_fd(),
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        if rc >= 0 {
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::EINTR) => Ok(()),
            Some(libc::ENETDOWN) => Err(IoError::Other(format!(
                "AF_XDP RX on {}: interface {} is down",
                self.place, self.place.iface
            ))),
            _ => Err(failed(
                format_args!("AF_XDP RX wake-up on {}", self.place),
                err,
            )),
        }
    }
}

impl Receiver for AfXdpRx {
    fn describe(&self) -> String {
        format!(
            "afxdp:{} RX ({}, XDP {} via bpf_link, {} frames of {} bytes; timestamps: strobe's CLOCK_REALTIME right after dequeue, XDP gives no kernel RX timestamp here)",
            self.place,
            self.mode.name(),
            if self.native_xdp() { "native" } else { "generic" },
            self.layout.rx_frames,
            self.layout.frame_size
        )
    }

    fn poll<F>(&mut self, max: usize, mut each: F) -> Result<usize, IoError>
    where
        F: FnMut(&RxFrame<'_>),
    {
        let ready = self.ring.available(max.min(u32::MAX as usize) as u32);
        // Every frame taken goes straight back to the fill ring, so take no more than fit
        // (the fill ring's size makes that all of them; this only guards the invariant).
        let n = if ready == 0 {
            0
        } else {
            self.fill.free(ready).min(ready)
        };
        if n == 0 {
            self.kick()?;
            return Ok(0);
        }
        let now = sys::realtime_ns();
        let frame_size = self.layout.frame_size as u64;
        let first = self.layout.tx_umem_frames() as u64;
        let end = first + self.layout.rx_frames as u64;

        let mut delivered = 0;
        let mut refill = 0;
        for i in 0..n {
            let desc = self.ring.read(i);
            let frame = desc.addr / frame_size;
            // Descriptors come from the kernel, but a bad one must not make us read outside
            // our frames or recycle a frame that is not ours: skip it.
            if !(first..end).contains(&frame) {
                continue;
            }
            let offset = desc.addr % frame_size;
            if offset + desc.len as u64 > frame_size {
                // Not a valid buffer: drop it (and the frame it was part of).
                self.gathered = 0;
                self.fill.write(refill, frame * frame_size);
                refill += 1;
                continue;
            }
            // SAFETY: the kernel handed this frame to us through the RX ring and will not
            // touch it until it is back on the fill ring, which happens after `each` returns
            // (or the part is copied); the range lies inside the frame (checked above).
            let data = unsafe {
                std::slice::from_raw_parts(
                    self.socket
                        .frame_ptr(&self.layout, frame as u32)
                        .add(offset as usize),
                    desc.len as usize,
                )
            };
            if self.layout.multi_buffer
                && (self.gathered > 0 || desc.options & libc::XDP_PKT_CONTD != 0)
            {
                let at = self.gathered.min(self.gather.len());
                let fits = data.len().min(self.gather.len() - at);
                self.gather[at..at + fits].copy_from_slice(&data[..fits]);
                self.gathered += data.len();
                if desc.options & libc::XDP_PKT_CONTD == 0 {
                    // A frame longer than `gather` arrives cut short: counted as truncated.
                    let len = self.gathered.min(self.gather.len());
                    each(&RxFrame {
                        data: &self.gather[..len],
                        wire_len: self.gathered.min(u32::MAX as usize) as u32,
                        timestamp: Some(RxTimestamp::User(now)),
                        vlan: None,
                    });
                    delivered += 1;
                    self.gathered = 0;
                }
            } else {
                each(&RxFrame {
                    data,
                    wire_len: desc.len,
                    timestamp: Some(RxTimestamp::User(now)),
                    // XDP sees the frame as it arrived, tag included.
                    vlan: None,
                });
                delivered += 1;
            }
            self.fill.write(refill, frame * frame_size);
            refill += 1;
        }
        self.ring.release(n);
        self.fill.submit(refill);
        Ok(delivered)
    }

    /// Frames the kernel could not put on the RX ring: ring full, no free frame on the fill
    /// ring, or a frame too long for a UMEM frame.
    fn drops(&mut self) -> Result<RxDrops, IoError> {
        // SAFETY: all-zero is a valid xdp_statistics (integers only).
        let mut stats: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        sys::getsockopt(
            &self.socket.fd,
            libc::SOL_XDP,
            libc::XDP_STATISTICS,
            &mut stats,
        )
        .map_err(|e| {
            failed(
                format_args!("cannot read AF_XDP statistics of {}", self.place),
                e,
            )
        })?;
        Ok(RxDrops {
            ring_full: stats.rx_dropped + stats.rx_ring_full,
        })
    }

    /// The kernel unbinds an XDP socket whose interface is unregistered and leaves ENETDOWN
    /// as its pending error (and only then: a link that goes down sets none).
    fn check_alive(&mut self) -> Result<(), IoError> {
        let mut pending: libc::c_int = 0;
        sys::getsockopt(
            &self.socket.fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            &mut pending,
        )
        .map_err(|e| failed(format_args!("AF_XDP RX on {}: SO_ERROR", self.place), e))?;
        match pending {
            0 => Ok(()),
            libc::ENETDOWN => Err(IoError::Other(format!(
                "AF_XDP RX on {}: interface {} went away while receiving",
                self.place, self.place.iface
            ))),
            errno => Err(failed(
                format_args!("AF_XDP RX on {}", self.place),
                std::io::Error::from_raw_os_error(errno),
            )),
        }
    }
}

/// Every receive queue of an interface, an AF_XDP socket each, fed by one XDP program: a
/// driver puts a frame on the queue it picks (veth puts XDP frames on the sending CPU's),
/// and a receiver bound to one queue would not see the others'. The queues are polled in
/// turn by one worker.
pub struct AfXdpRxQueues {
    // Field order is drop order: detach the program before the sockets close.
    xdp: XdpAttachment,
    queues: Vec<AfXdpRx>,
    /// The queue polled first next time, so that none waits behind a busy one.
    next: usize,
}

impl AfXdpRxQueues {
    /// Opens a socket on each receive queue of `iface` (in `netns`) and attaches strobe's
    /// program for all of them.
    pub fn open(
        iface: &str,
        netns: Option<&str>,
        opts: &AfXdpOptions,
    ) -> Result<AfXdpRxQueues, IoError> {
        let (queue_count, driver, ifindex) = in_netns(netns, || {
            let facts = LinkFacts::query(iface);
            let ifindex = sys::if_index(iface, netns)?;
            let queues = facts.rx_queues.filter(|&n| n > 0).ok_or_else(|| {
                IoError::Other(format!(
                    "afxdp:{iface}@*: cannot tell how many receive queues {iface} has (ethtool -l \
                     does not say); name the queue: afxdp:{iface}@QUEUE"
                ))
            })?;
            Ok((queues, facts.driver_name().to_string(), ifindex))
        })?;
        let per_queue = AfXdpOptions {
            rx: true,
            attach: false,
            ..opts.clone()
        };
        let mut queues = Vec::with_capacity(queue_count as usize);
        for queue in 0..queue_count {
            let rx = AfXdpPort::open(iface, queue, netns, &per_queue)?
                .split()
                .1
                .ok_or_else(|| {
                    IoError::Other(format!(
                        "afxdp:{iface}@{queue}: the socket has no receive side"
                    ))
                })?;
            queues.push(rx);
        }
        let sockets: Vec<(u32, &OwnedFd)> = queues
            .iter()
            .map(|q| (q.place.queue, &q.socket.fd))
            .collect();
        let frags = queues.iter().any(|q| q.layout.multi_buffer);
        let xdp = in_netns(netns, || {
            XdpAttachment::attach(iface, &driver, ifindex, &sockets, frags)
        })?;
        Ok(AfXdpRxQueues {
            xdp,
            queues,
            next: 0,
        })
    }
}

impl AfXdpRxQueues {
    /// See [`AfXdpRx::ring_drops_count_at_interface`].
    pub fn ring_drops_count_at_interface(&self) -> bool {
        self.xdp.mode == AttachMode::Native && self.queues[0].driver == "veth"
    }
}

impl Receiver for AfXdpRxQueues {
    fn describe(&self) -> String {
        let first = &self.queues[0];
        let place = match &first.place.netns {
            Some(ns) => format!("{ns}/{}", first.place.iface),
            None => first.place.iface.clone(),
        };
        format!(
            "afxdp:{place} RX on all {} queues ({}, XDP {} via bpf_link, {} frames of {} bytes per queue; timestamps: strobe's CLOCK_REALTIME right after dequeue, XDP gives no kernel RX timestamp here)",
            self.queues.len(),
            first.mode.name(),
            if self.xdp.mode == AttachMode::Native {
                "native"
            } else {
                "generic"
            },
            first.layout.rx_frames,
            first.layout.frame_size
        )
    }

    fn poll<F>(&mut self, max: usize, mut each: F) -> Result<usize, IoError>
    where
        F: FnMut(&RxFrame<'_>),
    {
        let n = self.queues.len();
        let mut delivered = 0;
        for k in 0..n {
            if delivered >= max {
                break;
            }
            let q = (self.next + k) % n;
            delivered += self.queues[q].poll(max - delivered, &mut each)?;
        }
        self.next = (self.next + 1) % n;
        Ok(delivered)
    }

    fn drops(&mut self) -> Result<RxDrops, IoError> {
        let mut total = RxDrops::default();
        for q in &mut self.queues {
            total.ring_full += q.drops()?.ring_full;
        }
        Ok(total)
    }

    fn check_alive(&mut self) -> Result<(), IoError> {
        self.queues.iter_mut().try_for_each(|q| q.check_alive())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_splits_frames_and_caps_them_by_the_rings() {
        let opts = AfXdpOptions {
            rx: true,
            ..AfXdpOptions::default()
        };
        let l = opts.layout().unwrap();
        assert_eq!((l.tx_frames, l.rx_frames), (4096, 4096));
        assert_eq!(l.fill_ring_size(), 8192);
        let tx_only = AfXdpOptions {
            frames: 10_000,
            ring_size: 1024,
            ..AfXdpOptions::default()
        };
        let l = tx_only.layout().unwrap();
        assert_eq!((l.tx_frames, l.rx_frames), (1024, 0));
        let small = AfXdpOptions {
            frames: 3,
            rx: true,
            ..AfXdpOptions::default()
        };
        let l = small.layout().unwrap();
        assert_eq!((l.tx_frames, l.rx_frames), (2, 1));
    }

    #[test]
    fn bad_options_are_refused_with_what_is_accepted() {
        let bad_frame = AfXdpOptions {
            frame_size: 1500,
            ..AfXdpOptions::default()
        };
        let err = bad_frame.layout().unwrap_err().to_string();
        assert!(
            err.contains("1500") && err.contains("2048 or 4096"),
            "{err}"
        );
        let bad_ring = AfXdpOptions {
            ring_size: 1000,
            ..AfXdpOptions::default()
        };
        let err = bad_ring.layout().unwrap_err().to_string();
        assert!(err.contains("power of two"), "{err}");
        let no_frames = AfXdpOptions {
            frames: 1,
            rx: true,
            ..AfXdpOptions::default()
        };
        assert!(no_frames.layout().is_err());
    }

    #[test]
    fn free_frames_rotate_in_completion_order() {
        let mut fifo = FrameFifo::new(3);
        assert_eq!((fifo.get(0), fifo.get(1), fifo.get(2)), (0, 1, 2));
        fifo.pop(2);
        fifo.push(0);
        fifo.push(1);
        assert_eq!(fifo.len, 3);
        assert_eq!((fifo.get(0), fifo.get(1), fifo.get(2)), (2, 0, 1));
    }
}
