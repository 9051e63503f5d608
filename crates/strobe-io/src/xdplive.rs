//! `xdp-live:[NETNS/]IFACE`: transmit through the kernel's XDP live-frame mode
//! (`bpf(BPF_PROG_RUN)` with `BPF_F_TEST_XDP_LIVE_FRAMES`, Linux >= 5.18), with no socket
//! buffer and no socket: the kernel runs an XDP program over pages of its own and sends what
//! the program redirects straight through the driver's XDP transmit path, in batches.
//!
//! The engine writes each frame, exactly as for every other backend, into a slot of a ring
//! that is the values of a BPF array mapped into user space (`BPF_F_MMAPABLE`), and
//! publishes it by moving the ring's producer index. A runner thread keeps one long
//! `BPF_PROG_RUN` going (millions of repetitions per call: on this kernel every call with
//! more than one repetition costs about 24 ms of set-up, a change of the XDP dispatcher, so
//! one call per hand-over would send ~10 kpps). Each repetition runs strobe's program once:
//! when a frame is waiting it takes the next slot, sizes the kernel's page to the slot's
//! length, copies the frame in, moves the consumer index and redirects it through a
//! one-entry DEVMAP to the interface; when none is, it drops the empty page at once and
//! counts an idle poll. The kernel sends what a batch of repetitions (64) redirected
//! together. The DEVMAP holds the interface itself, so the runner need not be in the
//! interface's network namespace.
//!
//! The runner keeps a core busy while the port is open, as a busy-polling receiver does.
//! Frames the program refuses (a slot without a valid length: a bug) are counted in the
//! control entry and reported by `finish`, never dropped silently; frames the driver's
//! ring refuses are counted by the driver and reported as well.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::afxdp::asm::Asm;
use crate::afxdp::bpf::{
    self, create_map, load_program, update_map, Insn, ProgRunAttr, ALU64_ADD_K, ALU64_AND_K,
    ALU64_MOV_K, ALU64_MOV_X, BPF_FUNC_MAP_LOOKUP_ELEM, BPF_FUNC_REDIRECT_MAP,
    BPF_FUNC_XDP_ADJUST_TAIL, BPF_FUNC_XDP_STORE_BYTES, BPF_F_MMAPABLE, BPF_MAP_TYPE_ARRAY,
    BPF_MAP_TYPE_DEVMAP, BPF_PROG_RUN, JMP_CALL, JMP_EXIT, JMP_JEQ_K, JMP_JGT_K, JMP_JLT_K,
    JMP_JNE_K, JMP_JNE_X, LDX_MEM_DW, LDX_MEM_W, STX_MEM_DW, STX_MEM_W, ST_MEM_W, XDP_DROP,
};
use crate::afxdp::sys::{if_index, LinkFacts, Mmap};
use crate::kernel_frames::{KernelFlow, KernelGenerator, KernelRun, KernelValues};
use crate::netdev_features::{ethtool_words, string_set};
use crate::netns::in_netns;
use crate::tsinfo::{control_socket, interface_mtu};
use crate::xdp_features::{xdp_features, XDP_ACT_NDO_XMIT};
use crate::xdp_gen::{self, GenState};
use crate::{Backend, BackendStats, IoError, TimeBase, TxBatch, TxSlot, MAX_BATCH};
use std::mem::offset_of;

/// Slots in the ring (a power of two: the program wraps its index with a mask): four full
/// hand-overs, so the engine fills the next while the kernel sends the last ones. More
/// measured no faster (4.7-4.9 Mpps with 1024 and 4096 here) and lets frames wait longer.
const SLOTS: u32 = 4 * MAX_BATCH as u32;
/// Repetitions per `BPF_PROG_RUN` of the runner: as many as the kernel takes, so that a
/// run is one call (each call costs ~24 ms of set-up during which nothing is sent); a
/// signal ends it when the port closes.
const RUN_REPEAT: u32 = u32::MAX;
/// How long opening waits for the kernel to run the program.
const RUNNER_START_LIMIT: Duration = Duration::from_secs(5);
/// How long `transmit` waits for room in a full ring before it gives up on the kernel.
const FULL_RING_LIMIT: Duration = Duration::from_secs(2);
/// Repetitions the kernel runs before it sends what they redirected, for unpaced runs (the
/// kernel's default, NAPI's budget): 4.6-4.9 Mpps into an XDP drop here.
const RUN_BATCH_UNPACED: u32 = 64;
/// The same for paced runs: a frame waits for at most 8 repetitions before it leaves, so
/// deadlines keep their spacing (CBR 100 kpps: 95.6 % of gaps within ±1 µs at the receiver,
/// against 5.4 % with 64), at about half the most it sends (2.4-2.6 Mpps).
const RUN_BATCH_PACED: u32 = 8;
/// Repetitions per kernel batch when the program paces a flow it generates: a due frame
/// waits for the rest of its batch (each early repetition costs a clock read, ~40 ns).
const RUN_BATCH_KERNEL_PACED: u32 = 4;
/// The schedule a kernel batch may span when paced flows are asked closer together than
/// that batch keeps (above 1 Mpps together, or bursts): frames that close leave together
/// anyway, and fewer flushes send more.
const KERNEL_PACED_BATCH_SPAN_NS: f64 = 4_000.0;

/// The kernel batch for paced `flows`: [`RUN_BATCH_KERNEL_PACED`], or as many frames as
/// their closest deadlines put in [`KERNEL_PACED_BATCH_SPAN_NS`] (up to the unpaced batch).
fn kernel_paced_batch(flows: &[KernelFlow]) -> u32 {
    let pps: f64 = flows
        .iter()
        .filter_map(|f| f.pace)
        .map(|p| 1e9 / (p.gap_ns as f64 + f64::from(p.gap_frac) / 4_294_967_296.0).max(1.0))
        .sum();
    ((pps * KERNEL_PACED_BATCH_SPAN_NS / 1e9).round() as u32)
        .clamp(RUN_BATCH_KERNEL_PACED, RUN_BATCH_UNPACED)
}
/// How long `finish` waits for the kernel to take the frames still in the ring.
const DRAIN_LIMIT: Duration = Duration::from_secs(5);
/// Bytes before a slot's frame: its length (u32) and padding to 8.
const SLOT_HEADER: usize = 8;
/// Length of the frame the kernel initialises its pages with; the program then sets each
/// page's length to its slot's frame (growing or shrinking its tail). Short, so that setting
/// up a hand-over's pages copies little.
const SEED_LEN: usize = 64;
/// Largest frame the kernel's live-frame pages hold with room to spare: a page less XDP's
/// headroom (256), the page pool's head and the tail the kernel reserves.
const LIVE_FRAME_MAX: usize = 3072;
/// Ethernet header and one VLAN tag above the MTU, as drivers accept on XDP transmit.
const LINK_OVERHEAD: usize = 14 + 4;
/// Smallest frame the program sends: an Ethernet header.
const MIN_FRAME: usize = 14;

/// `BPF_F_TEST_XDP_LIVE_FRAMES`.
const BPF_F_TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;

/// The privileges this backend needs.
const PRIVILEGE_HINT: &str =
    "xdp-live needs root or CAP_BPF+CAP_NET_ADMIN (to load an XDP program and run it in live-frame mode)";

/// The control entry (key 0 of the array), as the program reads and writes it.
#[repr(C)]
struct Control {
    /// Frames published (free-running; the slot is the index masked): written by user space.
    produced: AtomicU32,
    /// Frames taken: written by the program.
    consumed: AtomicU32,
    /// Frames the program refused.
    refused: u64,
    /// Repetitions that found no frame waiting.
    idle: u64,
}

const CONTROL_PRODUCED: i16 = 0;
const CONTROL_CONSUMED: i16 = 4;
const CONTROL_REFUSED: i16 = 8;
const CONTROL_IDLE: i16 = 16;

fn value_size(max_frame: usize) -> usize {
    (SLOT_HEADER + max_frame).next_multiple_of(8)
}

/// strobe's live-frame program for a ring of `SLOTS` slots of frames up to `max_frame`
/// bytes:
///
/// ```text
/// ctl = slots[0]; i = ctl->consumed
/// if (ctl->produced == i) { ctl->idle++; return XDP_DROP }
/// slot = slots[(i & (SLOTS-1)) + 1]
/// if (slot->len < 14 || slot->len > max_frame) goto refuse
/// if (bpf_xdp_adjust_tail(ctx, slot->len - SEED_LEN)) goto refuse
/// if (bpf_xdp_store_bytes(ctx, 0, slot->frame, slot->len)) goto refuse
/// ctl->consumed = i + 1
/// return bpf_redirect_map(&devmap, 0, 0)
/// refuse: ctl->refused++; ctl->consumed = i + 1; return XDP_DROP
/// ```
///
/// The consumer index moves only after the copy, so user space never rewrites a slot the
/// program still reads. Plain loads of the producer index see user space's release store
/// in order on x86-64 and arm64's BPF JIT alike (the JITs emit the architecture's ordinary
/// loads; user space publishes with release ordering after writing the slot).
fn live_program(slots_fd: i32, devmap_fd: i32, max_frame: usize) -> Vec<Insn> {
    // Registers: r6 ctx, r7 control entry, r8 consumer index, r9 slot.
    let mut a = Asm::new();
    let (waiting, refuse, drop) = (a.label(), a.label(), a.label());
    // r4 = slot->len, bounded for the verifier and against a slot never written.
    let bounded_len = |a: &mut Asm| {
        a.op(LDX_MEM_W, 4, 9, 0, 0);
        a.jump(JMP_JGT_K, 4, 0, max_frame as i32, refuse);
        a.jump(JMP_JLT_K, 4, 0, MIN_FRAME as i32, refuse);
    };
    // r0 = lookup(slots, the u32 on the stack at `key`); to `missing` when there is none.
    let lookup = |a: &mut Asm, key: i16, missing: usize| {
        a.op(ALU64_MOV_X, 2, 10, 0, 0);
        a.op(ALU64_ADD_K, 2, 0, 0, i32::from(key));
        a.map(1, slots_fd);
        a.op(JMP_CALL, 0, 0, 0, BPF_FUNC_MAP_LOOKUP_ELEM);
        a.jump(JMP_JEQ_K, 0, 0, 0, missing);
    };
    a.op(ALU64_MOV_X, 6, 1, 0, 0);
    // ctl = lookup(slots, &0)
    a.op(ST_MEM_W, 10, 0, -4, 0);
    lookup(&mut a, -4, drop);
    a.op(ALU64_MOV_X, 7, 0, 0, 0);
    // Nothing waiting: count an idle poll and drop the empty page.
    a.op(LDX_MEM_W, 8, 7, CONTROL_CONSUMED, 0);
    a.op(LDX_MEM_W, 1, 7, CONTROL_PRODUCED, 0);
    a.jump(JMP_JNE_X, 1, 8, 0, waiting);
    a.op(LDX_MEM_DW, 1, 7, CONTROL_IDLE, 0);
    a.op(ALU64_ADD_K, 1, 0, 0, 1);
    a.op(STX_MEM_DW, 7, 1, CONTROL_IDLE, 0);
    a.op(ALU64_MOV_K, 0, 0, 0, XDP_DROP);
    a.op(JMP_EXIT, 0, 0, 0, 0);
    // slot = lookup(slots, &((i & mask) + 1))
    a.bind(waiting);
    a.op(ALU64_MOV_X, 1, 8, 0, 0);
    a.op(ALU64_AND_K, 1, 0, 0, (SLOTS - 1) as i32);
    a.op(ALU64_ADD_K, 1, 0, 0, 1);
    a.op(STX_MEM_W, 10, 1, -8, 0);
    lookup(&mut a, -8, refuse);
    a.op(ALU64_MOV_X, 9, 0, 0, 0);
    // bpf_xdp_adjust_tail(ctx, len - SEED_LEN)
    bounded_len(&mut a);
    a.op(ALU64_MOV_X, 1, 6, 0, 0);
    a.op(ALU64_MOV_X, 2, 4, 0, 0);
    a.op(ALU64_ADD_K, 2, 0, 0, -(SEED_LEN as i32));
    a.op(JMP_CALL, 0, 0, 0, BPF_FUNC_XDP_ADJUST_TAIL);
    a.jump(JMP_JNE_K, 0, 0, 0, refuse);
    // bpf_xdp_store_bytes(ctx, 0, slot + SLOT_HEADER, len)
    bounded_len(&mut a);
    a.op(ALU64_MOV_X, 1, 6, 0, 0);
    a.op(ALU64_MOV_K, 2, 0, 0, 0);
    a.op(ALU64_MOV_X, 3, 9, 0, 0);
    a.op(ALU64_ADD_K, 3, 0, 0, SLOT_HEADER as i32);
    a.op(JMP_CALL, 0, 0, 0, BPF_FUNC_XDP_STORE_BYTES);
    a.jump(JMP_JNE_K, 0, 0, 0, refuse);
    // consumed = i + 1; return bpf_redirect_map(&devmap, 0, 0)
    a.op(ALU64_ADD_K, 8, 0, 0, 1);
    a.op(STX_MEM_W, 7, 8, CONTROL_CONSUMED, 0);
    a.map(1, devmap_fd);
    a.op(ALU64_MOV_K, 2, 0, 0, 0);
    a.op(ALU64_MOV_K, 3, 0, 0, 0);
    a.op(JMP_CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP);
    a.op(JMP_EXIT, 0, 0, 0, 0);
    // refuse: ctl->refused++; consumed = i + 1 (the slot is skipped, not retried)
    a.bind(refuse);
    a.op(LDX_MEM_DW, 1, 7, CONTROL_REFUSED, 0);
    a.op(ALU64_ADD_K, 1, 0, 0, 1);
    a.op(STX_MEM_DW, 7, 1, CONTROL_REFUSED, 0);
    a.op(ALU64_ADD_K, 8, 0, 0, 1);
    a.op(STX_MEM_W, 7, 8, CONTROL_CONSUMED, 0);
    a.bind(drop);
    a.op(ALU64_MOV_K, 0, 0, 0, XDP_DROP);
    a.op(JMP_EXIT, 0, 0, 0, 0);
    a.finish()
        .expect("the ring's program is a few dozen instructions, every label bound")
}

/// The thread that keeps the program running over the ring.
struct Runner {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<(), String>>>,
}

impl Runner {
    /// Starts running `prog` over pages initialised with `seed`, `batch` repetitions per
    /// kernel batch.
    fn start(prog: OwnedFd, iface: &str, batch: u32, seed: Vec<u8>) -> Result<Runner, IoError> {
        install_wake_handler()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name(format!("xdp-live {iface}"))
            .spawn(move || {
                while !stopped.load(Ordering::Acquire) {
                    if let Err(e) = run_program(&prog, &seed, RUN_REPEAT, batch) {
                        // A signal ends a call early; the loop decides whether to go on.
                        if e.raw_os_error() != Some(libc::EINTR) {
                            return Err(e.to_string());
                        }
                    }
                }
                Ok(())
            })
            .map_err(|e| IoError::Other(format!("cannot start the xdp-live runner: {e}")))?;
        Ok(Runner {
            stop,
            thread: Some(thread),
        })
    }

    /// Whether the runner ended with an error (it runs until stopped otherwise).
    fn failed(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| t.is_finished())
    }

    /// Stops the runner; its error, if it failed. The kernel checks for signals between
    /// batches of repetitions: a signal with a handler that does nothing ends the call with
    /// EINTR, and the runner sees the stop flag. Sent until the runner is out, since one
    /// that arrives just before the call is taken in user space.
    fn stop(&mut self) -> Result<(), String> {
        self.stop.store(true, Ordering::Release);
        let Some(thread) = self.thread.take() else {
            return Ok(());
        };
        let pthread = std::os::unix::thread::JoinHandleExt::as_pthread_t(&thread);
        while !thread.is_finished() {
            // SAFETY: the thread has not been joined, so its pthread_t is valid; the signal
            // has a handler (installed before the thread started) that does nothing.
            unsafe { libc::pthread_kill(pthread, wake_signal()) };
            std::thread::sleep(Duration::from_millis(5));
        }
        match thread.join() {
            Ok(result) => result,
            Err(_) => Err("the xdp-live runner panicked".into()),
        }
    }
}

/// The signal that ends a runner's call: a real-time one, which nothing else in strobe uses.
fn wake_signal() -> libc::c_int {
    libc::SIGRTMIN() + 4
}

extern "C" fn ignore_signal(_: libc::c_int) {}

/// Installs the handler of [`wake_signal`] once per process. A handler, not SIG_IGN: the
/// kernel drops an ignored signal before it can interrupt the call.
fn install_wake_handler() -> Result<(), IoError> {
    static INSTALLED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            // SAFETY: a zeroed sigaction is valid; the handler is an extern "C" function that
            // touches nothing (async-signal-safe), installed without SA_RESTART so that the
            // interrupted bpf() call returns.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = ignore_signal as *const () as usize;
                libc::sigemptyset(&mut action.sa_mask);
                if libc::sigaction(wake_signal(), &action, std::ptr::null_mut()) != 0 {
                    return Err(io::Error::last_os_error().to_string());
                }
            }
            Ok(())
        })
        .clone()
        .map_err(|e| IoError::Other(format!("cannot install the xdp-live runner's signal: {e}")))
}

impl Drop for Runner {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// The frame the kernel initialises its pages with: never sent as it is.
fn seed_frame() -> [u8; SEED_LEN] {
    let mut seed = [0u8; SEED_LEN];
    seed[..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2]);
    seed
}

/// One live-frame `BPF_PROG_RUN` of `repeat` repetitions.
fn run_program(prog: &OwnedFd, seed: &[u8], repeat: u32, batch: u32) -> io::Result<()> {
    let mut attr = ProgRunAttr {
        prog_fd: prog.as_raw_fd() as u32,
        data_size_in: seed.len() as u32,
        data_in: seed.as_ptr() as u64,
        repeat,
        flags: BPF_F_TEST_XDP_LIVE_FRAMES,
        batch_size: batch,
        ..ProgRunAttr::default()
    };
    if bpf::bpf(BPF_PROG_RUN, &mut attr) != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The transmit side of `xdp-live:[NETNS/]IFACE`.
pub struct XdpLiveTx {
    /// Frames generated in the kernel (`KernelGenerator`), when the engine asked for that;
    /// first, so that its runner stops before anything else goes.
    generation: Option<Generation>,
    /// Generation held (a paused run), also before it starts.
    held: bool,
    iface: String,
    ifindex: u32,
    max_frame: usize,
    value_size: usize,
    // Field order is drop order: the runner stops before the ring it reads is unmapped.
    runner: Option<Runner>,
    values: Mmap,
    prog: OwnedFd,
    _devmap: OwnedFd,
    _slots: OwnedFd,
    /// Frames published so far (the producer index as user space last wrote it).
    produced: u32,
    /// Repetitions per kernel batch, chosen by pacing (`set_paced`) before the runner starts.
    run_batch: u32,
    /// The driver's XDP transmit error counters, and their sum when the port opened.
    counters: Option<DriverCounters>,
    xmit_errors_before: Option<u64>,
    frames: u64,
    bytes: u64,
}

fn kernel_error(step: impl std::fmt::Display, err: io::Error) -> IoError {
    match err.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            IoError::Other(format!("{step}: {err}: {PRIVILEGE_HINT}"))
        }
        _ => IoError::Other(format!("{step}: {err}")),
    }
}

/// A sum of a driver's ethtool statistics, chosen by name: the XDP frames it could not
/// queue for transmit (veth: `tx_queue_N_xdp_xmit_errors`, frames that found the peer's
/// 256-entry ring full), or those an XDP program dropped. Redirected frames have no other
/// way back: without these counters an overflow would be silent.
struct DriverCounters {
    /// A socket in the interface's namespace: ethtool requests name the interface there.
    sock: OwnedFd,
    iface: String,
    n_stats: usize,
    indices: Vec<usize>,
}

const ETHTOOL_GSTATS: u32 = 0x1d;
const ETH_SS_STATS: u32 = 1;

fn is_xmit_error(name: &str) -> bool {
    name.contains("xdp") && name.contains("xmit") && name.contains("err")
}

fn is_xdp_drop(name: &str) -> bool {
    name.ends_with("xdp_drops")
}

impl DriverCounters {
    /// The counters of `iface` (in the calling thread's namespace) whose names `pick`
    /// chooses; None when its driver keeps none (the caller says so).
    fn find(iface: &str, pick: fn(&str) -> bool) -> Result<Option<DriverCounters>, IoError> {
        let sock = control_socket()?;
        let Ok(names) = string_set(&sock, iface, ETH_SS_STATS) else {
            return Ok(None);
        };
        let indices: Vec<usize> = names
            .iter()
            .enumerate()
            .filter(|(_, name)| pick(name))
            .map(|(i, _)| i)
            .collect();
        Ok((!indices.is_empty()).then(|| DriverCounters {
            sock,
            iface: iface.to_string(),
            n_stats: names.len(),
            indices,
        }))
    }

    /// The counters' sum now.
    fn read(&self) -> Result<u64, IoError> {
        // ethtool_stats: cmd, n_stats, then n_stats u64 values (two words each).
        let mut words = vec![0u32; 2 + self.n_stats * 2];
        words[..2].copy_from_slice(&[ETHTOOL_GSTATS, self.n_stats as u32]);
        ethtool_words(&self.sock, &self.iface, &mut words).map_err(|e| {
            IoError::Other(format!("cannot read the statistics of {}: {e}", self.iface))
        })?;
        let value = |i: usize| {
            let (a, b) = (
                words[2 + 2 * i].to_ne_bytes(),
                words[3 + 2 * i].to_ne_bytes(),
            );
            u64::from_ne_bytes([a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]])
        };
        Ok(self.indices.iter().map(|&i| value(i)).sum())
    }
}

impl XdpLiveTx {
    /// Opens `iface` (in network namespace `netns`, when given) for live-frame transmit.
    pub fn open(iface: &str, netns: Option<&str>) -> Result<XdpLiveTx, IoError> {
        if let Some((major, minor)) = crate::kernel_release() {
            if (major, minor) < (5, 18) {
                return Err(IoError::Other(format!(
                    "xdp-live:{iface}: this kernel ({major}.{minor}) has no XDP live-frame mode (Linux >= 5.18); send with afxdp:{iface} or afpacket:{iface}"
                )));
            }
        }
        let (ifindex, mtu, devmap, counters) = in_netns(netns, || {
            let ifindex = if_index(iface, netns)?;
            // Frames the driver does not take are dropped before it, uncounted: refuse.
            if let Some(features) = xdp_features(ifindex)? {
                if features & XDP_ACT_NDO_XMIT == 0 {
                    let facts = LinkFacts::query(iface);
                    let driver = facts.driver_name();
                    let how = if driver == "veth" {
                        "a veth transmits XDP frames only while its peer can take them: \
                         receive on the peer with afxdp: (strobe's XDP program), or turn \
                         GRO on there (`ethtool -K PEER gro on`, inside its namespace)"
                            .to_string()
                    } else {
                        format!("driver {driver} has no XDP transmit (ndo_xdp_xmit); send with afxdp:{iface} or afpacket:{iface}")
                    };
                    return Err(IoError::Other(format!(
                        "xdp-live:{iface} cannot send now: the kernel reports that {iface} does not take redirected XDP frames, which would vanish uncounted; {how}"
                    )));
                }
            }
            let mtu = interface_mtu(iface)?;
            let counters = DriverCounters::find(iface, is_xmit_error)?;
            // The DEVMAP resolves the interface now, in its namespace, and keeps it.
            let devmap = create_map(BPF_MAP_TYPE_DEVMAP, 4, 1, 0, "strobe_live_dev")
                .map_err(|e| kernel_error("cannot create the DEVMAP for xdp-live", e))?;
            update_map(&devmap, 0, &ifindex)
                .map_err(|e| kernel_error(format_args!("cannot put {iface} into the DEVMAP"), e))?;
            Ok((ifindex, mtu, devmap, counters))
        })?;
        let xmit_errors_before = counters.as_ref().map(|c| c.read()).transpose()?;
        let max_frame = (mtu + LINK_OVERHEAD).min(LIVE_FRAME_MAX);
        let value_size = value_size(max_frame);
        let slots = create_map(
            BPF_MAP_TYPE_ARRAY,
            value_size as u32,
            SLOTS + 1,
            BPF_F_MMAPABLE,
            "strobe_live",
        )
        .map_err(|e| kernel_error("cannot create the slot array for xdp-live", e))?;
        let map_len = (value_size * (SLOTS as usize + 1)).next_multiple_of(4096);
        let values = Mmap::shared(&slots, map_len, 0)
            .map_err(|e| kernel_error("cannot map the slot array of xdp-live", e))?;
        let prog = load_program(
            &live_program(slots.as_raw_fd(), devmap.as_raw_fd(), max_frame),
            "strobe_live",
            false,
        )?;
        let mut tx = XdpLiveTx {
            generation: None,
            held: false,
            iface: iface.to_string(),
            ifindex,
            max_frame,
            value_size,
            runner: None,
            values,
            prog,
            _devmap: devmap,
            _slots: slots,
            produced: 0,
            run_batch: RUN_BATCH_UNPACED,
            counters,
            xmit_errors_before,
            frames: 0,
            bytes: 0,
        };
        tx.probe()?;
        Ok(tx)
    }

    /// Runs the program once with the ring empty: it counts an idle poll and sends
    /// nothing, but the kernel has shown it accepts live-frame runs of this program.
    fn probe(&mut self) -> Result<(), IoError> {
        run_program(&self.prog, &seed_frame(), 1, 1).map_err(|e| {
            let why = match e.raw_os_error() {
                Some(libc::EINVAL) => {
                    " (this kernel refuses BPF_F_TEST_XDP_LIVE_FRAMES: it needs Linux >= 5.18)"
                }
                _ => "",
            };
            kernel_error(
                format_args!(
                    "xdp-live:{}: the kernel refused a live-frame run{why}",
                    self.iface
                ),
                e,
            )
        })?;
        let idle = self.control().idle;
        if idle != 1 {
            return Err(IoError::Other(format!(
                "xdp-live:{}: the live-frame probe did not run the program as expected ({idle} idle polls of 1)",
                self.iface
            )));
        }
        Ok(())
    }

    fn value(&self, key: u32) -> *mut u8 {
        // In bounds: key <= SLOTS and the mapping holds SLOTS + 1 values.
        self.values
            .as_ptr()
            .wrapping_add(key as usize * self.value_size)
    }

    fn control(&self) -> &Control {
        // SAFETY: value 0 is the control entry, 8-aligned (values are 8-byte multiples in a
        // page-aligned mapping) and at least 24 bytes. The indices are atomics; the program
        // writes the plain counters, which are only read.
        unsafe { &*self.value(0).cast::<Control>() }
    }

    fn set_len(&mut self, slot: u32, len: u32) {
        // SAFETY: the slot's value starts with its u32 length, 8-aligned; the slot is not
        // published, so the program does not read it.
        unsafe { self.value(slot + 1).cast::<u32>().write(len) };
    }

    /// Starts the runner once the kernel's batch is chosen (by `set_paced`, or at the first
    /// frame), and waits until the program polls the ring: a call takes ~24 ms to set up,
    /// which would otherwise hold the first frames back and bunch them.
    fn ensure_runner(&mut self) -> Result<(), IoError> {
        if self.runner.is_some() {
            return Ok(());
        }
        let prog = self
            .prog
            .try_clone()
            .map_err(|e| IoError::Other(format!("cannot share the xdp-live program: {e}")))?;
        let idle_before = self.idle_polls();
        self.runner = Some(Runner::start(
            prog,
            &self.iface,
            self.run_batch,
            seed_frame().to_vec(),
        )?);
        let deadline = Instant::now() + RUNNER_START_LIMIT;
        while self.idle_polls() == idle_before {
            if self.runner.as_ref().is_none_or(Runner::failed) {
                return Err(self.runner_error());
            }
            if Instant::now() > deadline {
                return Err(IoError::Other(format!(
                    "xdp-live:{}: the kernel did not start running strobe's program within {} s",
                    self.iface,
                    RUNNER_START_LIMIT.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        Ok(())
    }

    /// Stops the ring's runner before another program runs: it would keep the other core
    /// busy polling an empty ring.
    fn stop_ring_runner(&mut self) -> Result<(), IoError> {
        match self.runner.take().as_mut().map(Runner::stop) {
            Some(Err(e)) => Err(IoError::Other(format!(
                "xdp-live:{}: the kernel's live-frame run failed: {e}",
                self.iface
            ))),
            _ => Ok(()),
        }
    }

    /// Sends `frame` over and over, unchanged, as fast as the kernel sends, until `stop` is
    /// set: a program that only redirects each page (the issue's C probe's measure), the
    /// ceiling of this path beside which `bench/run xdplive` puts strobe's generator. Not
    /// for runs (nothing is counted): frames count at the receiver.
    pub fn send_unchanged(&mut self, frame: &[u8], stop: &AtomicBool) -> Result<(), IoError> {
        if frame.len() < 14 || frame.len() > self.max_frame {
            return Err(IoError::Other(format!(
                "xdp-live:{}: a frame of {} bytes (14 to {} here)",
                self.iface,
                frame.len(),
                self.max_frame
            )));
        }
        self.stop_ring_runner()?;
        let mut a = Asm::new();
        a.map(1, self._devmap.as_raw_fd());
        a.op(ALU64_MOV_K, 2, 0, 0, 0);
        a.op(ALU64_MOV_K, 3, 0, 0, 0);
        a.op(JMP_CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP);
        a.op(JMP_EXIT, 0, 0, 0, 0);
        let prog = load_program(&a.finish().map_err(IoError::Other)?, "strobe_bare", false)?;
        let mut runner = Runner::start(prog, &self.iface, self.run_batch, frame.to_vec())?;
        while !stop.load(Ordering::Relaxed) && !runner.failed() {
            std::thread::sleep(Duration::from_millis(10));
        }
        runner.stop().map_err(|e| {
            IoError::Other(format!(
                "xdp-live:{}: the kernel's live-frame run failed: {e}",
                self.iface
            ))
        })
    }

    /// The program's idle polls so far (written by the program: a volatile read).
    fn idle_polls(&self) -> u64 {
        // SAFETY: the control entry is live mapped memory; the read is of an aligned u64
        // the program updates in place.
        unsafe { std::ptr::addr_of!(self.control().idle).read_volatile() }
    }

    /// Frames published that the program has not taken yet.
    fn in_flight(&self) -> u32 {
        self.produced
            .wrapping_sub(self.control().consumed.load(Ordering::Acquire))
    }

    fn runner_error(&mut self) -> IoError {
        let why = match self.runner.as_mut().map(Runner::stop) {
            Some(Err(e)) => e,
            _ => "it stopped".into(),
        };
        IoError::Other(format!(
            "xdp-live:{}: the kernel's live-frame run failed: {why}",
            self.iface
        ))
    }
}

impl Backend for XdpLiveTx {
    fn describe(&self) -> String {
        format!(
            "xdp-live:{} (XDP live frames: a runner thread keeps BPF_PROG_RUN going, a core busy, redirecting each frame through the driver's XDP transmit in kernel batches of {}, ifindex {}; {})",
            self.iface,
            self.run_batch,
            self.ifindex,
            if self.counters.is_some() {
                "the driver counts frames its transmit ring refused"
            } else {
                "the driver keeps no XDP transmit error counter: frames its ring refuses are lost uncounted"
            }
        )
    }
    fn slot_count(&self) -> usize {
        SLOTS as usize
    }
    fn max_frame_len(&self) -> usize {
        self.max_frame
    }
    fn frame_too_long(&self, len: usize) -> String {
        format!(
            "frames of {len} bytes do not fit: xdp-live:{} takes frames of up to {} bytes (without FCS), its MTU plus an Ethernet header and a VLAN tag, at most {LIVE_FRAME_MAX} (one kernel page each)",
            self.iface, self.max_frame
        )
    }
    fn time_base(&self) -> TimeBase {
        TimeBase::RealTime
    }
    fn throughput_batch(&self) -> usize {
        MAX_BATCH
    }
    fn set_paced(&mut self, paced: bool) -> Result<(), IoError> {
        if self.runner.is_none() {
            self.run_batch = if paced {
                RUN_BATCH_PACED
            } else {
                RUN_BATCH_UNPACED
            };
        }
        self.ensure_runner()
    }
    fn kernel_generator(&mut self) -> Option<&mut dyn KernelGenerator> {
        Some(self)
    }
    fn transmit<F>(&mut self, count: usize, fill: F) -> Result<usize, IoError>
    where
        F: FnOnce(&mut [TxSlot<'_>]),
    {
        self.ensure_runner()?;
        let mut free = (SLOTS - self.in_flight()) as usize;
        if free == 0 && count > 0 {
            // The ring is full: the kernel is behind (or between calls). Wait for room here
            // rather than have the engine take a stall for a dead port.
            let deadline = Instant::now() + FULL_RING_LIMIT;
            while free == 0 {
                if self.runner.as_ref().is_none_or(Runner::failed) {
                    return Err(self.runner_error());
                }
                if Instant::now() > deadline {
                    return Err(IoError::Other(format!(
                        "xdp-live:{}: the kernel took no frame for {} s",
                        self.iface,
                        FULL_RING_LIMIT.as_secs()
                    )));
                }
                std::hint::spin_loop();
                free = (SLOTS - self.in_flight()) as usize;
            }
        }
        let n = count.min(free).min(MAX_BATCH);
        if n == 0 {
            return Ok(0);
        }
        let first = self.produced;
        let mut batch = TxBatch::new();
        for i in 0..n as u32 {
            let id = first.wrapping_add(i) & (SLOTS - 1);
            // SAFETY: each id appears once in the batch, so the frames do not overlap; none
            // is published (the program reads only slots below the producer index), each lies
            // inside the mapping (value id + 1, after its header) and lives as long as
            // `self`, which the batch does not outlive.
            let buf = unsafe {
                std::slice::from_raw_parts_mut(self.value(id + 1).add(SLOT_HEADER), self.max_frame)
            };
            batch.push(TxSlot::blank(id, buf));
        }
        fill(&mut batch);
        let lens: arrayvec::ArrayVec<(u32, u32), MAX_BATCH> = batch
            .iter()
            .map(|s| (s.id, s.len.min(self.max_frame) as u32))
            .collect();
        drop(batch);
        let mut bytes = 0u64;
        for (id, len) in lens {
            self.set_len(id, len);
            bytes += len as u64;
        }
        self.produced = first.wrapping_add(n as u32);
        // Release: the frames and lengths above are visible before the index that
        // publishes them.
        self.control()
            .produced
            .store(self.produced, Ordering::Release);
        self.frames += n as u64;
        self.bytes += bytes;
        Ok(n)
    }
    fn finish(&mut self) -> Result<BackendStats, IoError> {
        let deadline = Instant::now() + DRAIN_LIMIT;
        while self.in_flight() > 0 {
            if self.runner.as_ref().is_none_or(Runner::failed) {
                return Err(self.runner_error());
            }
            if Instant::now() > deadline {
                return Err(IoError::Other(format!(
                    "xdp-live:{}: the kernel took no frame for {} s ({} still waiting)",
                    self.iface,
                    DRAIN_LIMIT.as_secs(),
                    self.in_flight()
                )));
            }
            std::thread::sleep(Duration::from_micros(50));
        }
        if let Some(generation) = &self.generation {
            if generation.runner.is_some() {
                KernelGenerator::stop(self)?;
            }
        }
        if let Some(Err(e)) = self.runner.as_mut().map(Runner::stop) {
            return Err(IoError::Other(format!(
                "xdp-live:{}: the kernel's live-frame run failed: {e}",
                self.iface
            )));
        }
        let refused = self.control().refused;
        if refused > 0 {
            return Err(IoError::Other(format!(
                "xdp-live:{}: the kernel program refused {refused} frames (a slot without a valid length): a strobe bug, please report it",
                self.iface
            )));
        }
        let xmit_errors = match (&self.counters, self.xmit_errors_before) {
            (Some(c), Some(before)) => Some(c.read()?.saturating_sub(before)),
            _ => None,
        };
        Ok(BackendStats {
            frames: self.frames,
            bytes: self.bytes,
            segmentation: None,
            xmit_errors,
            tx_stamps: None,
        })
    }
}

/// Flows generated in the kernel (see [`crate::xdp_gen`]): their program, state and runner.
struct Generation {
    // Field order is drop order: the runner stops before the state it reads is unmapped.
    runner: Option<Runner>,
    state: Mmap,
    _map: OwnedFd,
    /// The flows (their sizes count the bytes sent).
    flows: Vec<KernelFlow>,
    /// Where each flow's state block starts.
    blocks: Vec<usize>,
}

impl Generation {
    /// Flow `flow`'s state block.
    fn state(&self, flow: usize) -> *mut xdp_gen::GenState {
        // SAFETY: blocks lie within the mapping (`states_size`).
        unsafe { self.state.as_ptr().add(self.blocks[flow]).cast() }
    }
    /// A u64 of flow `flow`'s state block at `offset` (`offset_of!(GenState, …)`), as the
    /// program last wrote it.
    fn read(&self, flow: usize, offset: usize) -> u64 {
        // SAFETY: the offset is of a u64 field of the block, which is live mapped memory,
        // 8-aligned (a page-aligned mapping of whole-u64 blocks); the program updates it in
        // place, so the read is volatile.
        unsafe {
            self.state(flow)
                .cast::<u8>()
                .add(offset)
                .cast::<u64>()
                .read_volatile()
        }
    }
    /// What flow `flow` sent, as its block says.
    fn run(&self, flow: usize) -> KernelRun {
        let f = &self.flows[flow];
        let read = |offset| self.read(flow, offset);
        let frames = read(offset_of!(GenState, produced));
        let timed = (f.stamped_per_frame() || f.pace.is_some()) && frames > 0;
        KernelRun {
            frames,
            first_ns: timed.then(|| read(offset_of!(GenState, first_ns))),
            last_ns: timed.then(|| read(offset_of!(GenState, last_ns))),
            late_frames: read(offset_of!(GenState, late)),
            max_late_ns: read(offset_of!(GenState, max_late_ns)),
            lateness: std::array::from_fn(|k| read(offset_of!(GenState, lateness) + 8 * k)),
        }
    }
    /// The sum of a u64 over all flows' blocks.
    fn total(&self, offset: usize) -> u64 {
        (0..self.flows.len()).map(|f| self.read(f, offset)).sum()
    }
}

/// CLOCK_REALTIME minus CLOCK_MONOTONIC now (wrapping), from a realtime reading between two
/// monotonic ones: what turns `bpf_ktime_get_ns()` into the clock receivers stamp with.
fn realtime_offset() -> u64 {
    crate::xdp_count::realtime_offset().0
}

impl KernelGenerator for XdpLiveTx {
    fn refuses(&self, flows: &[KernelFlow]) -> Option<String> {
        xdp_gen::refuses(flows, self.max_frame)
    }

    fn start(&mut self, flows: &[KernelFlow]) -> Result<(), IoError> {
        if let Some(why) = KernelGenerator::refuses(self, flows) {
            return Err(IoError::Other(format!(
                "xdp-live:{} cannot generate {} in the kernel: {why}",
                self.iface,
                if flows.len() == 1 {
                    "this flow"
                } else {
                    "these flows"
                }
            )));
        }
        // Frames the ring still holds leave first (none, unless frames were sent before).
        let drained = Instant::now() + DRAIN_LIMIT;
        while self.in_flight() > 0
            && self.runner.as_ref().is_some_and(|r| !r.failed())
            && Instant::now() < drained
        {
            std::thread::sleep(Duration::from_micros(100));
        }
        if self.generation.is_some() || self.in_flight() > 0 {
            return Err(IoError::Other(format!(
                "xdp-live:{}: kernel generation starts once, before any frame (a strobe bug)",
                self.iface
            )));
        }
        self.stop_ring_runner()?;
        let (map, state) = state_map(flows, self.held)?;
        let prog = load_program(
            &xdp_gen::program(flows, map.as_raw_fd(), self._devmap.as_raw_fd())
                .map_err(|why| IoError::Other(format!("xdp-live:{}: {why}", self.iface)))?,
            "strobe_gen",
            false,
        )?;
        let mut generation = Generation {
            runner: None,
            state,
            _map: map,
            flows: flows.to_vec(),
            blocks: xdp_gen::blocks_at(flows),
        };
        let seed = xdp_gen::seed_of(flows);
        // Paced: a frame whose deadline has come leaves with the kernel's next flush, at
        // the end of the current batch of repetitions.
        let batch = if flows.iter().any(|f| f.pace.is_some()) {
            kernel_paced_batch(flows)
        } else {
            self.run_batch
        };
        self.run_batch = batch;
        generation.runner = Some(Runner::start(prog, &self.iface, batch, seed)?);
        // Back once the program runs: frames are on their way, or it idles (held, or a
        // flow of no frames).
        let deadline = Instant::now() + RUNNER_START_LIMIT;
        while generation.total(offset_of!(GenState, produced)) == 0
            && generation.read(0, offset_of!(GenState, idle)) == 0
        {
            if generation.runner.as_ref().is_none_or(Runner::failed) {
                let why = match generation.runner.as_mut().map(Runner::stop) {
                    Some(Err(e)) => e,
                    _ => "it stopped".into(),
                };
                return Err(IoError::Other(format!(
                    "xdp-live:{}: the kernel's live-frame run failed: {why}",
                    self.iface
                )));
            }
            if Instant::now() > deadline {
                return Err(IoError::Other(format!(
                    "xdp-live:{}: the kernel did not start running strobe's generator within {} s",
                    self.iface,
                    RUNNER_START_LIMIT.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        self.generation = Some(generation);
        Ok(())
    }

    fn generated(&self, flow: usize) -> u64 {
        self.generation
            .as_ref()
            .filter(|g| flow < g.flows.len())
            .map_or(0, |g| g.read(flow, offset_of!(GenState, produced)))
    }

    fn done(&self) -> bool {
        self.generation.as_ref().is_some_and(|g| {
            (0..g.flows.len()).all(|f| {
                g.read(f, offset_of!(GenState, produced)) >= g.read(f, offset_of!(GenState, limit))
            })
        })
    }

    fn end_flow(&mut self, flow: usize) {
        if let Some(g) = self.generation.as_ref().filter(|g| flow < g.flows.len()) {
            // The program sends a flow's frame only while `produced < limit`: a limit at
            // (or below, should one more be on its way) what it produced ends the flow.
            // SAFETY: an aligned u64 of the live mapped state; the program only reads it.
            unsafe {
                let produced = g.read(flow, offset_of!(GenState, produced));
                std::ptr::addr_of_mut!((*g.state(flow)).limit).write_volatile(produced);
            }
        }
    }

    fn hold(&mut self, on: bool) {
        self.held = on;
        if let Some(g) = &self.generation {
            // The program reads the first block's switch for all flows.
            // SAFETY: an aligned u32 of the live mapped state, which the program only reads.
            unsafe {
                std::ptr::addr_of_mut!((*g.state(0)).hold).write_volatile(on as u32);
            }
        }
    }

    fn stop(&mut self) -> Result<Vec<KernelRun>, IoError> {
        let Some(g) = self.generation.as_mut() else {
            return Ok(Vec::new());
        };
        // Stopped between kernel batches: every frame generated went to the driver.
        let stopped = g.runner.take().map(|mut r| r.stop());
        let refused = g.total(offset_of!(GenState, refused));
        let runs: Vec<KernelRun> = (0..g.flows.len()).map(|f| g.run(f)).collect();
        for (run, flow) in runs.iter().zip(&g.flows) {
            self.frames += run.frames;
            self.bytes += flow.frame_bytes(run.frames);
        }
        if let Some(Err(e)) = stopped {
            return Err(IoError::Other(format!(
                "xdp-live:{}: the kernel's live-frame run failed: {e}",
                self.iface
            )));
        }
        if refused > 0 {
            return Err(IoError::Other(format!(
                "xdp-live:{}: the kernel handed strobe's generator {refused} pages shorter than the frame: a strobe bug, please report it",
                self.iface
            )));
        }
        Ok(runs)
    }

    fn stamp_source(&self) -> String {
        format!(
            "stamped in the kernel per frame (bpf_ktime_get_ns, CLOCK_MONOTONIC moved to CLOCK_REALTIME at the start) as the program writes the frame, before the kernel sends its batch of {}: early by up to one batch's time",
            self.run_batch
        )
    }
}

/// The first `n` frames strobe's generator program writes for `flow`, run without sending
/// (`BPF_PROG_RUN`'s plain test mode, once per frame, all in one page that starts as the
/// longest frame, as a live-frame page does, and keeps what every frame left in it): for
/// checking the program against the engine. Needs what `xdp-live` needs.
pub fn generated_frames(flow: &KernelFlow, n: usize) -> Result<Vec<Vec<u8>>, IoError> {
    let frames = generated_frames_of(std::slice::from_ref(flow), n)?;
    Ok(frames.into_iter().map(|(_, frame)| frame).collect())
}

/// [`generated_frames`] for several flows in one program: each frame with the index of the
/// flow it belongs to. Several flows are paced, so which comes next depends on the clock;
/// repetitions before a deadline write nothing (and are not returned).
pub fn generated_frames_of(
    flows: &[KernelFlow],
    n: usize,
) -> Result<Vec<(usize, Vec<u8>)>, IoError> {
    if let Some(why) = xdp_gen::refuses(flows, LIVE_FRAME_MAX) {
        return Err(IoError::Other(format!(
            "cannot generate these flows: {why}"
        )));
    }
    let (map, state) = state_map(flows, false)?;
    // An empty DEVMAP: the redirect fails, which the test mode does not act on anyway.
    let devmap = create_map(BPF_MAP_TYPE_DEVMAP, 4, 1, 0, "strobe_gen_dev")
        .map_err(|e| kernel_error("cannot create a DEVMAP", e))?;
    let prog = load_program(
        &xdp_gen::program(flows, map.as_raw_fd(), devmap.as_raw_fd()).map_err(IoError::Other)?,
        "strobe_gen",
        false,
    )?;
    // One page used over and over, as the kernel's pool recycles its pages: each frame
    // starts from what the ones before left in it.
    let mut page = xdp_gen::seed_of(flows);
    let mut frames = Vec::with_capacity(n);
    let blocks = xdp_gen::blocks_at(flows);
    let produced = |f: usize| {
        // SAFETY: a u64 of flow f's block within the mapping, 8-aligned; the program ran
        // to its end (BPF_PROG_RUN returned).
        unsafe {
            state
                .as_ptr()
                .add(blocks[f] + offset_of!(GenState, produced))
                .cast::<u64>()
                .read_volatile()
        }
    };
    let mut before: Vec<u64> = (0..flows.len()).map(produced).collect();
    let give_up = Instant::now() + Duration::from_secs(10);
    while frames.len() < n {
        if Instant::now() > give_up {
            return Err(IoError::Other(format!(
                "the generator wrote {} of {n} frames in 10 s (more than the flows' counts, deadlines too far apart for a test, or pages refused)",
                frames.len()
            )));
        }
        let mut out = vec![0u8; page.len()];
        let run = bpf::test_run(&prog, &page, &mut out, 1)
            .map_err(|e| kernel_error("cannot test-run the generator", e))?;
        out.truncate(run.size_out);
        page[..out.len()].copy_from_slice(&out);
        let after: Vec<u64> = (0..flows.len()).map(produced).collect();
        if let Some(f) = (0..flows.len()).find(|&f| after[f] != before[f]) {
            frames.push((f, out));
        }
        before = after;
    }
    Ok(frames)
}

/// The generator's state for `flows`: its one-value array, mapped, holding each flow's
/// initial state block (generation held when `held`).
fn state_map(flows: &[KernelFlow], held: bool) -> Result<(OwnedFd, Mmap), IoError> {
    let size = xdp_gen::states_size(flows);
    let map = create_map(
        BPF_MAP_TYPE_ARRAY,
        size as u32,
        1,
        BPF_F_MMAPABLE,
        "strobe_gen",
    )
    .map_err(|e| kernel_error("cannot create the state of xdp-live's generator", e))?;
    let state = Mmap::shared(&map, size.next_multiple_of(4096), 0)
        .map_err(|e| kernel_error("cannot map the state of xdp-live's generator", e))?;
    // One offset for all flows: their stamps are on the same clock.
    let offset_ns = realtime_offset();
    for (flow, at) in flows.iter().zip(xdp_gen::blocks_at(flows)) {
        // SAFETY: the block lies within the mapping (`states_size`), 8-aligned.
        write_state(
            unsafe { state.as_ptr().add(at) },
            flow,
            held && at == 0,
            offset_ns,
        );
    }
    Ok((map, state))
}

/// Writes the generator's initial state block for `flow` at `base`, mapped memory of at
/// least `state_size(flow)` bytes, 8-aligned, that no program runs over yet.
fn write_state(base: *mut u8, flow: &KernelFlow, held: bool, offset_ns: u64) {
    let mut init = xdp_gen::GenState {
        limit: flow.frames.unwrap_or(u64::MAX),
        offset_ns,
        seq: flow.seq_start,
        hold: held as u32,
        ..Default::default()
    };
    if let Some(pace) = &flow.pace {
        xdp_gen::pace_state(&mut init, pace);
    }
    // SAFETY: `base` holds at least `state_size(flow)` bytes, 8-aligned, and no program
    // runs over it yet: plain writes of the state, one field state per field, and the listed
    // values where `listed_at` puts them (8-byte aligned: every part before them is whole
    // u64s).
    unsafe {
        base.cast::<xdp_gen::GenState>().write(init);
        let fields = base
            .add(std::mem::size_of::<xdp_gen::GenState>())
            .cast::<xdp_gen::FieldState>();
        for (i, f) in flow.fields.iter().enumerate() {
            fields.add(i).write(xdp_gen::field_state(f));
        }
        for (f, at) in flow.fields.iter().zip(xdp_gen::listed_at(flow)) {
            if let KernelValues::Listed(values) = &f.values {
                let table = base.add(at).cast::<u64>();
                for (j, v) in values.iter().enumerate() {
                    table.add(j).write(v & f.mask());
                }
            }
        }
        let cycle = base.add(xdp_gen::cycle_at(flow)).cast::<u64>();
        for (j, &t) in flow.cycle.iter().enumerate() {
            cycle.add(j).write(u64::from(t));
        }
    }
}

/// A peer that drops every frame in its driver's XDP hook, and counts them through the
/// driver's statistics: the fastest receiver there is, for measuring what a sender alone
/// can do (the issue's "peer drops in XDP"). Detached when dropped.
pub struct XdpDropSink {
    _link: OwnedFd,
    _prog: OwnedFd,
    counters: DriverCounters,
    before: u64,
}

impl XdpDropSink {
    /// Attaches the dropping program to `iface` (in `netns`) in the driver's native mode.
    pub fn attach(iface: &str, netns: Option<&str>) -> Result<XdpDropSink, IoError> {
        let program = [
            Insn::new(ALU64_MOV_K, 0, 0, 0, XDP_DROP),
            Insn::new(JMP_EXIT, 0, 0, 0, 0),
        ];
        in_netns(netns, || {
            let ifindex = if_index(iface, netns)?;
            let counters = DriverCounters::find(iface, is_xdp_drop)?.ok_or_else(|| {
                IoError::Other(format!(
                    "the driver of {iface} keeps no XDP drop counter to count the sink with"
                ))
            })?;
            let prog = load_program(&program, "strobe_drop", false)?;
            let link = bpf::create_link(&prog, ifindex, bpf::XDP_FLAGS_DRV_MODE).map_err(|e| {
                kernel_error(
                    format_args!("cannot attach the XDP drop sink to {iface} (native mode)"),
                    e,
                )
            })?;
            let before = counters.read()?;
            Ok(XdpDropSink {
                _link: link,
                _prog: prog,
                counters,
                before,
            })
        })
    }

    /// Frames dropped since the sink was attached.
    pub fn dropped(&self) -> Result<u64, IoError> {
        Ok(self.counters.read()?.saturating_sub(self.before))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paced_batches_grow_only_where_deadlines_are_closer_than_a_microsecond() {
        let paced = |gap_ns: u64| KernelFlow {
            templates: Vec::new(),
            cycle: vec![0],
            fields: Vec::new(),
            seq_start: 0,
            stamp: crate::kernel_frames::KernelStamp::Fixed(0),
            frames: None,
            pace: Some(crate::kernel_frames::KernelPace {
                gap_ns,
                gap_frac: 0,
                burst: 1,
                burst_gap_ns: 0,
                late_tolerance_ns: 0,
            }),
        };
        // 100 kpps, 1 Mpps: the precise batch.
        assert_eq!(kernel_paced_batch(&[paced(10_000)]), RUN_BATCH_KERNEL_PACED);
        assert_eq!(kernel_paced_batch(&[paced(1_000)]), RUN_BATCH_KERNEL_PACED);
        // Four flows at 1 Mpps: 4 µs of their schedule; bursts 100 ns apart; never above
        // the unpaced batch.
        assert_eq!(
            kernel_paced_batch(&[paced(1_000), paced(1_000), paced(1_000), paced(1_000)]),
            16
        );
        assert_eq!(kernel_paced_batch(&[paced(100)]), 40);
        assert_eq!(kernel_paced_batch(&[paced(1)]), RUN_BATCH_UNPACED);
    }

    #[test]
    fn jumps_land_on_their_labels() {
        let p = live_program(3, 4, 1518);
        let exits: Vec<usize> = p
            .iter()
            .enumerate()
            .filter(|(_, i)| i.code() == JMP_EXIT)
            .map(|(pc, _)| pc)
            .collect();
        assert_eq!(exits.len(), 3, "idle, redirect and drop exits");
        let drop_at = exits[2] - 1;
        let refuse_at = drop_at - 5;
        let after_idle = exits[0] + 1;
        let mut targets = Vec::new();
        for (pc, insn) in p.iter().enumerate() {
            if insn.is_conditional_jump() {
                let target = (pc as i64 + 1 + insn.off() as i64) as usize;
                assert!(
                    [refuse_at, drop_at, after_idle].contains(&target),
                    "jump at {pc} lands on {target}"
                );
                targets.push(target);
            }
        }
        let count = |at: usize| targets.iter().filter(|&&t| t == at).count();
        // Only a missing control entry skips the count (there is nothing to count in).
        assert_eq!(count(drop_at), 1);
        // A missing slot, two length checks before each helper, and each helper's failure.
        assert_eq!(count(refuse_at), 7);
        // A waiting frame skips the idle exit.
        assert_eq!(count(after_idle), 1);
    }

    #[test]
    fn slot_values_are_whole_words() {
        assert_eq!(value_size(1518), 1528);
        assert_eq!(value_size(3072), 3080);
    }
}
