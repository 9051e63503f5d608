//! strobe-io: the transmit backends behind one trait, plus capture-file reading.
//!
//! A backend owns the frame buffers ("slots"); the engine writes a whole batch of frames
//! straight into slots through the `fill` callback of [`Backend::transmit`], so it can work
//! field by field over the batch instead of dispatching per packet. Slot ids are stable, so
//! the engine can keep a template in a slot and patch only the varying fields, as MoonGen does
//! with pre-filled mbufs. Live backends (AF_PACKET, AF_XDP) implement the same trait with
//! ring frames / UMEM frames as slots.
pub mod afpacket;
pub mod afxdp;
mod capture;
pub mod clockcheck;
pub mod clocksync;
pub mod ifaddr;
pub mod ifdrops;
pub mod kernel_frames;
pub mod netdev_features;
pub mod netns;
mod null;
mod pcap;
mod rx;
pub mod test_clock;
#[cfg(any(test, feature = "test-support"))]
#[doc(hidden)]
pub mod test_support;
pub mod timesync;
pub mod tsinfo;
pub mod tx_stamps;
pub mod xdp_count;
pub mod xdp_features;
pub mod xdp_forward;
mod xdp_gen;
pub mod xdplive;

pub use capture::{read_capture, CaptureInfo, CapturedFrame};
pub use null::{slots_of, NullBackend};
pub use pcap::PcapBackend;
pub use rx::{Receiver, RxDrops, RxFrame, RxTimestamp, VlanTag};
/// Port locations live in the model (parsed where they enter); re-exported here, where they
/// are opened.
pub use strobe_model::{Location, LocationError, LOCATION_FORMS};

/// Most frames one `transmit` call may carry.
pub const MAX_BATCH: usize = 256;

/// (major, minor) of the running kernel, when /proc says: for features that depend on it.
pub fn kernel_release() -> Option<(u32, u32)> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    let mut parts = release.trim().split(|c: char| !c.is_ascii_digit());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// Frames per hand-over of unpaced runs by default.
pub const UNPACED_BATCH: usize = 32;

/// One frame buffer handed to the engine's fill callback.
pub struct TxSlot<'a> {
    /// Stable id of the buffer: the same id always names the same memory.
    pub id: u32,
    /// The buffer, `max_frame_len()` bytes; it still holds what was last written into it.
    pub buf: &'a mut [u8],
    /// Set by the engine: frame length without FCS.
    pub len: usize,
    /// Set by the engine: scheduled departure in ns on the run's timeline (t0 = 0).
    pub scheduled_ns: u64,
}

impl<'a> TxSlot<'a> {
    /// Slot `id` over `buf`, for the engine to fill.
    pub fn blank(id: u32, buf: &'a mut [u8]) -> TxSlot<'a> {
        TxSlot {
            id,
            buf,
            len: 0,
            scheduled_ns: 0,
        }
    }
}

/// A batch of slots on the stack (no allocation per batch).
pub type TxBatch<'a> = arrayvec::ArrayVec<TxSlot<'a>, MAX_BATCH>;

/// How a backend's transmit timestamps relate to real time; reported with every result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeBase {
    /// No wall clock: frames carry their scheduled departure (deterministic traces).
    Scheduled,
    /// Frames leave in real time, timestamped by the engine's clock.
    RealTime,
}

/// Counters a backend keeps about what it accepted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BackendStats {
    pub frames: u64,
    pub bytes: u64,
    /// Backends that send UDP segmentation batches (`afpacket-gso`): how many went, and
    /// how many of the frames they carried; None elsewhere.
    pub segmentation: Option<Segmentation>,
    /// Frames the driver refused after the backend handed them over (its transmit ring was
    /// full), as the driver counts them: `xdp-live` (XDP transmit drops instead of waiting).
    /// None where the backend waits for room instead, or the driver does not count.
    pub xmit_errors: Option<u64>,
    /// Transmit stamps from AF_XDP TX metadata, when asked for
    /// ([`afxdp::AfXdpTx::stamp_transmits`]); None elsewhere.
    pub tx_stamps: Option<tx_stamps::TxStampStats>,
}

/// Superframes sent, and the frames they carried (the rest went alone).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Segmentation {
    pub superframes: u64,
    pub frames: u64,
}

/// Errors from opening or driving a backend.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    /// A location that does not parse; the message lists the accepted forms.
    #[error(transparent)]
    UnknownPort(#[from] LocationError),
    #[error("{what} `{path}`: {source}")]
    File {
        what: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a readable pcap or pcapng file: {detail}")]
    BadCapture { path: String, detail: String },
    #[error("{0}")]
    Other(String),
}

/// One transmit queue of one port.
pub trait Backend: Send {
    /// Human description, e.g. `pcap:out.pcap (nanosecond pcap, scheduled time)`.
    fn describe(&self) -> String;
    /// How many frame slots the backend owns; `transmit` never asks for more at once.
    fn slot_count(&self) -> usize;
    /// Largest frame (without FCS) a slot holds.
    fn max_frame_len(&self) -> usize;
    /// Why frames of `len` bytes (without FCS, more than `max_frame_len()`) cannot be sent
    /// here, and what to change: the run is refused with this before it starts.
    fn frame_too_long(&self, len: usize) -> String {
        format!(
            "frames of {len} bytes do not fit; this port takes frames of up to {} bytes (without FCS)",
            self.max_frame_len()
        )
    }
    fn time_base(&self) -> TimeBase;
    /// Frames per hand-over for an unpaced run whose transmit stamps nobody reads: the
    /// batch that sends fastest. A batch shares one transmit stamp, so runs that measure
    /// latency keep [`UNPACED_BATCH`] instead.
    fn throughput_batch(&self) -> usize {
        UNPACED_BATCH
    }
    /// Told once, before the first frame and before the run's clock starts, whether the run
    /// is paced (frames at deadlines) or sends as fast as it can: a backend may trade
    /// throughput for timing then, and get ready to send.
    fn set_paced(&mut self, _paced: bool) -> Result<(), IoError> {
        Ok(())
    }
    /// The backend's own frame generator, when it can write frames itself (`xdp-live`, in
    /// the kernel): an unpaced run whose flow it can describe hands it the whole flow
    /// instead of frames. Asked after `set_paced`, before the first frame.
    fn kernel_generator(&mut self) -> Option<&mut dyn kernel_frames::KernelGenerator> {
        None
    }
    /// Transmit up to `count` frames (at most [`MAX_BATCH`] and `slot_count()`): the backend
    /// picks free slots and calls `fill` once with all of them; the engine writes the frames
    /// and sets each slot's `len` and `scheduled_ns`. Returns how many frames were handed to
    /// the wire (or file).
    fn transmit<F>(&mut self, count: usize, fill: F) -> Result<usize, IoError>
    where
        F: FnOnce(&mut [TxSlot<'_>]);
    /// Flush buffered output; called once at the end of a run.
    fn finish(&mut self) -> Result<BackendStats, IoError>;
}

/// Frame slot capacity of the file and null backends: jumbo frames up to 9216 bytes.
pub const MAX_FRAME_LEN: usize = 9216;

impl TimeBase {
    /// Whether `location` writes a trace in scheduled time (a `pcap:` file) or sends in
    /// real time.
    pub fn of(location: &Location) -> TimeBase {
        match location {
            Location::Pcap(_) => TimeBase::Scheduled,
            _ => TimeBase::RealTime,
        }
    }
}

/// Any backend strobe can open from a port location.
pub enum AnyBackend {
    Pcap(PcapBackend),
    Null(NullBackend),
    AfPacket(afpacket::AfPacketTx),
    AfXdp(afxdp::AfXdpTx),
    XdpLive(xdplive::XdpLiveTx),
}

fn open_afpacket_tx(
    iface: &str,
    netns: Option<&str>,
    gso: bool,
) -> Result<afpacket::AfPacketTx, IoError> {
    let opts = afpacket::AfPacketOptions {
        gso,
        ..afpacket::AfPacketOptions::default()
    };
    afpacket::AfPacketTx::open(iface, netns, &opts)
}

/// UMEM of the ports `gen` and `reflect` open, sized so that a transmitting and a
/// receiving port together take 6 MiB, under the usual 8 MiB locked-memory limit (UMEM is
/// charged to it without CAP_IPC_LOCK, and a closed socket's UMEM is released a moment
/// later): 1024 TX frames in flight (70 µs of 64-byte frames at 10 Gbit/s; copy mode
/// completes each kick's frames at once) and 2048 RX frames, as libxdp's default rings.
const AFXDP_TX_FRAMES: u32 = 1024;
const AFXDP_RX_FRAMES: u32 = 2048;

/// `tx`: the port transmits (a receive-only port gets one TX frame).
fn open_afxdp(
    iface: &str,
    queue: u32,
    netns: Option<&str>,
    rx: bool,
    tx: bool,
) -> Result<afxdp::AfXdpPort, IoError> {
    afxdp::AfXdpPort::open(iface, queue, netns, &afxdp_tx_options(rx, tx))
}

/// The options [`open_afxdp`] opens with.
fn afxdp_tx_options(rx: bool, tx: bool) -> afxdp::AfXdpOptions {
    afxdp::AfXdpOptions {
        rx,
        // With rx, half the frames receive.
        frames: if rx {
            2 * AFXDP_RX_FRAMES
        } else {
            AFXDP_TX_FRAMES
        },
        tx_frames: if tx { AFXDP_TX_FRAMES } else { 1 },
        ..afxdp::AfXdpOptions::default()
    }
}

/// The options of a socket that only receives, as [`open_afxdp`] sets them.
fn afxdp_rx_options() -> afxdp::AfXdpOptions {
    afxdp::AfXdpOptions {
        rx: true,
        frames: 2 * AFXDP_RX_FRAMES,
        tx_frames: 1,
        ..afxdp::AfXdpOptions::default()
    }
}

impl AnyBackend {
    /// The time base a port location would have, without opening it.
    pub fn time_base_of(location: &str) -> Option<TimeBase> {
        match Location::parse(location).ok()? {
            Location::Pcap(_) => Some(TimeBase::Scheduled),
            _ => Some(TimeBase::RealTime),
        }
    }

    /// Opens the transmit side of a port location. `slots` is the batch size the engine
    /// will use (for backends that size their buffers by it).
    pub fn open(location: &str, slots: usize) -> Result<Self, IoError> {
        Self::open_at(&Location::parse(location)?, slots)
    }

    /// [`AnyBackend::open`] for a location already parsed.
    pub fn open_at(location: &Location, slots: usize) -> Result<Self, IoError> {
        Self::open_with(location, slots, false)
    }

    /// [`AnyBackend::open_at`]; `tx_metadata` opens an `afxdp:` port with AF_XDP TX
    /// metadata for transmit stamps ([`AnyBackend::stamp_transmits`]) and refuses every
    /// other kind of port.
    pub fn open_with(
        location: &Location,
        slots: usize,
        tx_metadata: bool,
    ) -> Result<Self, IoError> {
        if tx_metadata {
            return match location.clone() {
                Location::AfXdp {
                    netns,
                    iface,
                    queue,
                } => {
                    let mut opts = afxdp_tx_options(false, true);
                    opts.tx_metadata = true;
                    Ok(AnyBackend::AfXdp(
                        afxdp::AfXdpPort::open(&iface, queue, netns.as_deref(), &opts)?
                            .split()
                            .0,
                    ))
                }
                other => Err(IoError::Other(format!(
                    "port `{other}` cannot give transmit stamps from AF_XDP TX metadata: only an afxdp: port can{}",
                    other
                        .interface()
                        .map(|(_, iface)| format!(" (afxdp:{iface})"))
                        .unwrap_or_default()
                ))),
            };
        }
        Ok(match location.clone() {
            Location::Pcap(path) => AnyBackend::Pcap(PcapBackend::create(&path)?),
            Location::Null => AnyBackend::Null(NullBackend::new(slots.max(1))),
            Location::AfPacket { netns, iface, gso } => {
                AnyBackend::AfPacket(open_afpacket_tx(&iface, netns.as_deref(), gso)?)
            }
            Location::AfXdp {
                netns,
                iface,
                queue,
            } => AnyBackend::AfXdp(
                open_afxdp(&iface, queue, netns.as_deref(), false, true)?
                    .split()
                    .0,
            ),
            Location::XdpLive { netns, iface } => {
                AnyBackend::XdpLive(xdplive::XdpLiveTx::open(&iface, netns.as_deref())?)
            }
            Location::AfXdpAllQueues { iface, .. } => {
                return Err(IoError::Other(format!(
                    "port `{location}` cannot send: `@*` receives on every queue, a transmit port sends on one; use afxdp:{iface}@QUEUE"
                )))
            }
            Location::XdpCount { iface, .. } => {
                return Err(IoError::Other(format!(
                    "port `{location}` cannot send: xdp-count counts received frames in the kernel; send with afpacket:{iface}, afxdp:{iface} or xdp-live:{iface}"
                )))
            }
            Location::Auto {
                netns,
                iface,
                queue,
            } => match open_afxdp(&iface, queue, netns.as_deref(), false, true) {
                Ok(port) => {
                    eprintln!("{}", auto_pick_note(&iface));
                    AnyBackend::AfXdp(port.split().0)
                }
                Err(e) => {
                    eprintln!("note: auto:{iface}: AF_XDP unavailable ({e}); using AF_PACKET");
                    AnyBackend::AfPacket(open_afpacket_tx(&iface, netns.as_deref(), false)?)
                }
            },
        })
    }
}

impl AnyBackend {
    /// Has an `afxdp:` port opened with TX metadata ([`AnyBackend::open_with`]) publish
    /// each of run `run_tag`'s frames' hand-over delay on `board`; see
    /// [`afxdp::AfXdpTx::stamp_transmits`]. Returns where the stamps come from, and the
    /// NIC's transmit stamping to keep on until the run ends.
    pub fn stamp_transmits(
        &mut self,
        board: std::sync::Arc<tx_stamps::TxStampBoard>,
        run_tag: u8,
        completion_ok: bool,
    ) -> Result<afxdp::TxStampsOn, IoError> {
        match self {
            AnyBackend::AfXdp(tx) => tx.stamp_transmits(board, run_tag, completion_ok),
            other => Err(IoError::Other(format!(
                "{} cannot give transmit stamps from AF_XDP TX metadata",
                other.describe()
            ))),
        }
    }
}

/// What `auto:` says when it sends with AF_XDP: which path, and why not xdp-live.
fn auto_pick_note(iface: &str) -> String {
    format!(
        "note: auto:{iface}: sending with AF_XDP, the fastest socket path; xdp-live \
         (`xdp-live:{iface}`, about twice as fast) is used only when named: it keeps a core \
         busy and needs a receiver set up for XDP frames"
    )
}

macro_rules! each_backend {
    ($self:expr, $b:ident => $body:expr) => {
        match $self {
            AnyBackend::Pcap($b) => $body,
            AnyBackend::Null($b) => $body,
            AnyBackend::AfPacket($b) => $body,
            AnyBackend::AfXdp($b) => $body,
            AnyBackend::XdpLive($b) => $body,
        }
    };
}

impl Backend for AnyBackend {
    fn describe(&self) -> String {
        each_backend!(self, b => b.describe())
    }
    fn slot_count(&self) -> usize {
        each_backend!(self, b => b.slot_count())
    }
    fn max_frame_len(&self) -> usize {
        each_backend!(self, b => b.max_frame_len())
    }
    fn frame_too_long(&self, len: usize) -> String {
        each_backend!(self, b => b.frame_too_long(len))
    }
    fn time_base(&self) -> TimeBase {
        each_backend!(self, b => b.time_base())
    }
    fn throughput_batch(&self) -> usize {
        each_backend!(self, b => b.throughput_batch())
    }
    fn set_paced(&mut self, paced: bool) -> Result<(), IoError> {
        each_backend!(self, b => b.set_paced(paced))
    }
    fn kernel_generator(&mut self) -> Option<&mut dyn kernel_frames::KernelGenerator> {
        each_backend!(self, b => b.kernel_generator())
    }
    fn transmit<F>(&mut self, count: usize, fill: F) -> Result<usize, IoError>
    where
        F: FnOnce(&mut [TxSlot<'_>]),
    {
        each_backend!(self, b => b.transmit(count, fill))
    }
    fn finish(&mut self) -> Result<BackendStats, IoError> {
        each_backend!(self, b => b.finish())
    }
}

/// Any receiver strobe can open from a port location.
pub enum AnyReceiver {
    AfPacket(afpacket::AfPacketRx),
    AfXdp(afxdp::AfXdpRx),
    AfXdpQueues(afxdp::AfXdpRxQueues),
}

fn open_afpacket_rx(iface: &str, netns: Option<&str>) -> Result<afpacket::AfPacketRx, IoError> {
    afpacket::AfPacketRx::open(iface, netns, &afpacket::AfPacketOptions::default())
}

fn open_afxdp_rx(iface: &str, queue: u32, netns: Option<&str>) -> Result<afxdp::AfXdpRx, IoError> {
    open_afxdp(iface, queue, netns, true, false)?
        .split()
        .1
        .ok_or_else(|| {
            IoError::Other(format!(
                "afxdp:{iface}@{queue}: the socket has no receive side"
            ))
        })
}

impl AnyReceiver {
    /// Whether the frames this receiver's full ring refused also count in its interface's
    /// receive drops: an AF_XDP socket's ring refuses them in the driver's XDP redirect,
    /// which veth in native mode counts as dropped on receive; AF_PACKET's ring refuses
    /// them after the stack took them.
    pub fn ring_drops_count_at_interface(&self) -> bool {
        match self {
            AnyReceiver::AfPacket(_) => false,
            AnyReceiver::AfXdp(r) => r.ring_drops_count_at_interface(),
            AnyReceiver::AfXdpQueues(r) => r.ring_drops_count_at_interface(),
        }
    }

    /// Opens the receive side of a port location, with kernel or user-space timestamps.
    pub fn open(location: &str) -> Result<Self, IoError> {
        Self::open_with(location, false)
    }

    /// Opens the receive side of a port location; `hardware_timestamps` asks for the NIC's
    /// receive timestamps (AF_PACKET on a NIC that stamps every frame).
    pub fn open_with(location: &str, hardware_timestamps: bool) -> Result<Self, IoError> {
        Self::open_at(&Location::parse(location)?, hardware_timestamps)
    }

    /// [`AnyReceiver::open_with`] for a location already parsed.
    pub fn open_at(location_parsed: &Location, hardware_timestamps: bool) -> Result<Self, IoError> {
        let location = location_parsed.to_string();
        let location_parsed = location_parsed.clone();
        if hardware_timestamps && !matches!(location_parsed, Location::AfPacket { .. }) {
            return Err(IoError::Other(format!(
                "port `{location}`: hardware receive timestamps are read through AF_PACKET only; use afpacket:IFACE"
            )));
        }
        Ok(match location_parsed {
            Location::Pcap(_) | Location::Null => {
                return Err(IoError::Other(format!(
                    "port `{location}` cannot receive: `pcap:` and `null` ports only transmit; \
                     receive with afpacket:IFACE or afxdp:IFACE@QUEUE"
                )))
            }
            Location::AfPacket { gso: true, .. } => {
                return Err(IoError::Other(format!(
                    "port `{location}` cannot receive: afpacket-gso is a way of sending; receive with afpacket:IFACE"
                )))
            }
            Location::XdpLive { .. } => {
                return Err(IoError::Other(format!(
                    "port `{location}` cannot receive: xdp-live is a way of sending; receive with afxdp:IFACE or afpacket:IFACE"
                )))
            }
            Location::XdpCount { iface, .. } => {
                return Err(IoError::Other(format!(
                    "port `{location}` hands no frames to user space: xdp-count counts them in the kernel, for a run's receive ports only; receive frames with afxdp:{iface} or afpacket:{iface}"
                )))
            }
            Location::AfPacket { netns, iface, .. } => {
                let opts = afpacket::AfPacketOptions {
                    hardware_timestamps,
                    ..afpacket::AfPacketOptions::default()
                };
                AnyReceiver::AfPacket(afpacket::AfPacketRx::open(&iface, netns.as_deref(), &opts)?)
            }
            Location::AfXdp {
                netns,
                iface,
                queue,
            } => AnyReceiver::AfXdp(open_afxdp_rx(&iface, queue, netns.as_deref())?),
            Location::AfXdpAllQueues { netns, iface } => AnyReceiver::AfXdpQueues(
                afxdp::AfXdpRxQueues::open(&iface, netns.as_deref(), &afxdp_rx_options())?,
            ),
            Location::Auto {
                netns,
                iface,
                queue,
            } => match open_afxdp_rx(&iface, queue, netns.as_deref()) {
                Ok(rx) => AnyReceiver::AfXdp(rx),
                Err(e) => {
                    eprintln!(
                        "note: auto:{iface}: AF_XDP receive unavailable ({e}); using AF_PACKET"
                    );
                    AnyReceiver::AfPacket(open_afpacket_rx(&iface, netns.as_deref())?)
                }
            },
        })
    }
}

/// Opens both sides of one port, for a worker that receives and sends on it (a reflector):
/// AF_XDP serves both from one socket, since a queue takes only one socket. AF_PACKET
/// receives through a TPACKET_V2 frame ring: every frame waits in the ring until the
/// reflector sees it, and a V3 block ring would hold a lone frame for its block timeout.
pub fn open_duplex(location: &str, slots: usize) -> Result<(AnyBackend, AnyReceiver), IoError> {
    let xdp = |iface: &str, queue: u32, netns: Option<&str>| {
        let (tx, rx) = open_afxdp(iface, queue, netns, true, true)?.split();
        let rx = rx.ok_or_else(|| {
            IoError::Other(format!(
                "afxdp:{iface}@{queue}: the socket has no receive side"
            ))
        })?;
        Ok::<_, IoError>((AnyBackend::AfXdp(tx), AnyReceiver::AfXdp(rx)))
    };
    let afpacket = |iface: &str, netns: Option<&str>| {
        let opts = afpacket::AfPacketOptions {
            rx_ring: afpacket::RxRing::Frames,
            ..afpacket::AfPacketOptions::default()
        };
        Ok::<_, IoError>((
            AnyBackend::AfPacket(afpacket::AfPacketTx::open(iface, netns, &opts)?),
            AnyReceiver::AfPacket(afpacket::AfPacketRx::open(iface, netns, &opts)?),
        ))
    };
    match Location::parse(location)? {
        Location::AfXdp {
            netns,
            iface,
            queue,
        } => xdp(&iface, queue, netns.as_deref()),
        Location::AfPacket { gso: true, .. } => Err(IoError::Other(format!(
            "port `{location}` cannot reflect: afpacket-gso is a way of sending; use afpacket:IFACE"
        ))),
        Location::XdpLive { .. } => Err(IoError::Other(format!(
            "port `{location}` cannot reflect: xdp-live is a way of sending; use afxdp:IFACE"
        ))),
        Location::AfXdpAllQueues { iface, .. } => Err(IoError::Other(format!(
            "port `{location}` cannot reflect: a reflector answers on the queue it receives on; use afxdp:{iface}@QUEUE"
        ))),
        Location::AfPacket { netns, iface, .. } => afpacket(&iface, netns.as_deref()),
        Location::Auto {
            netns,
            iface,
            queue,
        } => xdp(&iface, queue, netns.as_deref()).or_else(|e| {
            eprintln!("note: auto:{iface}: AF_XDP unavailable ({e}); using AF_PACKET");
            afpacket(&iface, netns.as_deref())
        }),
        _ => Ok((
            AnyBackend::open(location, slots)?,
            AnyReceiver::open(location)?,
        )),
    }
}

impl Receiver for AnyReceiver {
    fn describe(&self) -> String {
        match self {
            AnyReceiver::AfPacket(r) => r.describe(),
            AnyReceiver::AfXdp(r) => r.describe(),
            AnyReceiver::AfXdpQueues(r) => r.describe(),
        }
    }
    fn poll<F>(&mut self, max: usize, each: F) -> Result<usize, IoError>
    where
        F: FnMut(&RxFrame<'_>),
    {
        match self {
            AnyReceiver::AfPacket(r) => r.poll(max, each),
            AnyReceiver::AfXdp(r) => r.poll(max, each),
            AnyReceiver::AfXdpQueues(r) => r.poll(max, each),
        }
    }
    fn drops(&mut self) -> Result<RxDrops, IoError> {
        match self {
            AnyReceiver::AfPacket(r) => r.drops(),
            AnyReceiver::AfXdp(r) => r.drops(),
            AnyReceiver::AfXdpQueues(r) => r.drops(),
        }
    }
    fn hardware_clock(&self) -> Option<String> {
        match self {
            AnyReceiver::AfPacket(r) => r.hardware_clock(),
            AnyReceiver::AfXdp(r) => r.hardware_clock(),
            AnyReceiver::AfXdpQueues(r) => r.hardware_clock(),
        }
    }
    fn check_alive(&mut self) -> Result<(), IoError> {
        match self {
            AnyReceiver::AfPacket(r) => r.check_alive(),
            AnyReceiver::AfXdp(r) => r.check_alive(),
            AnyReceiver::AfXdpQueues(r) => r.check_alive(),
        }
    }
}

#[cfg(test)]
mod location_tests {
    // Parsing and writing locations is tested beside `Location` in strobe-model; here, what
    // opening them refuses and the time base they give.
    use super::*;

    #[test]
    fn every_queue_cannot_send_and_traces_are_in_scheduled_time() {
        let err = AnyBackend::open("afxdp:eth1@*", 1)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("cannot send"), "{err}");
        assert_eq!(
            TimeBase::of(&Location::parse("pcap:x").unwrap()),
            TimeBase::Scheduled
        );
        assert_eq!(
            TimeBase::of(&Location::parse("afpacket:eth1").unwrap()),
            TimeBase::RealTime
        );
        assert_eq!(
            AnyBackend::time_base_of("pcap:x"),
            Some(TimeBase::Scheduled)
        );
    }

    #[test]
    fn ways_of_sending_only_and_unknown_forms_are_refused_before_any_interface() {
        // A way of sending only: refused before any interface is touched.
        for (open, way) in [
            (
                AnyReceiver::open_with("afpacket-gso:tx0", false).err(),
                "afpacket-gso",
            ),
            (open_duplex("afpacket-gso:tx0", 1).err(), "afpacket-gso"),
            (
                AnyReceiver::open_with("xdp-live:tx0", false).err(),
                "xdp-live",
            ),
            (open_duplex("xdp-live:tx0", 1).err(), "xdp-live"),
        ] {
            let message = open.expect("refused").to_string();
            assert!(
                message.contains(&format!("{way} is a way of sending")),
                "{message}"
            );
        }
        for bad in ["bogus:x", "lab:tx", "afxdp:eth0@x"] {
            let err = AnyBackend::open(bad, 1).err().unwrap().to_string();
            assert!(
                err.starts_with(&format!("unknown port `{bad}`: accepted forms are")),
                "{bad}: {err}"
            );
        }
    }
}
