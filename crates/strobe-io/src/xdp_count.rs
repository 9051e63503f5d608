//! Counting in the kernel: an XDP program on a receiving interface that reads each frame's
//! instrumentation trailer and keeps, per flow, what the engine's user-space receiver keeps
//! (frames, bytes, unique frames, duplicates, reordering, late frames, first and last
//! arrival, and every frame's latency in a histogram), so that frames are counted at the
//! rate the kernel receives them and never copied to user space.
//!
//! # What the program does with a frame
//! - Its last 16 bytes are read in place (the program is not multi-buffer, so the driver
//!   gives it each frame in one buffer; an MTU above a page is refused when attaching).
//!   No strobe marker there: counted as not instrumented, passed to the stack (`XDP_PASS`)
//!   untouched.
//! - Another run's tag, a flow id this run does not have, or a transmit stamp outside the
//!   run (before its start or after the frame's arrival, beyond [`STAMP_MARGIN_NS`]): counted
//!   apart and passed on, as the user-space receiver counts them apart.
//! - This run's frame: counted in its flow's block and dropped (`XDP_DROP`), or passed when
//!   something else on the host needs the frames ([`CountSetup::pass_counted`]).
//!
//! # State
//! One block per CPU and flow in an array map mapped into user space: the program runs on
//! one CPU at a time for a frame and never on two CPUs for the same block, so it updates its
//! counters with plain loads and stores (no atomics, no locks), and user space adds the CPUs'
//! blocks up when it reads them. The frames of one flow are checked in sequence per CPU:
//! on a NIC with several receive queues a flow stays on one queue (its hash does not change),
//! as it does for the user-space receivers, which keep one window per queue.
//!
//! The sequence window is 4096 numbers deep, as the user-space receiver's: a ring of 128
//! 64-bit words, each tagged with the block of 64 sequence numbers it holds, so moving the
//! window ahead is one tag compare per frame, never a loop.
//!
//! The latency histogram has exactly HdrHistogram's buckets for 1 ns to 100 s at 3
//! significant digits (the engine's histogram): every value below 2048 ns in a bucket of
//! its own, and above that 1024 buckets per power of two (a bucket is at most 1/1024 of its
//! value wide, 0.1 %). Recorded into the engine's histogram at each bucket's lowest value,
//! the counts land in the same buckets, so every percentile is the one the user-space
//! receiver would report. A bucket counts up to 2^32 - 1 frames per CPU; the reader notices
//! an overflow (the buckets no longer add up to the frames recorded) and says so.
//!
//! # Clock
//! The receive stamp is `bpf_ktime_get_ns()` (CLOCK_MONOTONIC) plus CLOCK_REALTIME minus
//! CLOCK_MONOTONIC as user space last measured it (refreshed at every read), so it is on the
//! transmit stamps' clock. Tests build the program with [`ProgramClock::Injected`]: it reads
//! the receive stamp user space wrote instead, so its results can be compared exactly.
//!
//! [`ProgramClock::Device`] asks the driver first: the program is bound to its interface and
//! calls the XDP RX metadata kfunc `bpf_xdp_metadata_rx_timestamp` (Linux >= 6.3), which a
//! driver with hardware receive stamps answers with the NIC clock's stamp; user space keeps
//! the offset from that clock to CLOCK_REALTIME ([`XdpCounter::set_device_offset`]). A frame
//! the driver has no stamp for (veth never has one: it answers "no data" for frames
//! redirected to it and 0 for socket buffers) is stamped by the kernel's clock as above, and
//! each flow counts how many of its frames the device stamped.

use std::io;
use std::mem::{offset_of, size_of};
use std::os::fd::{AsRawFd, OwnedFd};

use crate::afxdp::asm::Asm;
use crate::afxdp::bpf::{
    self, create_link, create_map, is_mode_unsupported, link_error, load_program, load_program_for,
    Insn, ALU64_ADD_K, ALU64_ADD_X, ALU64_AND_K, ALU64_ARSH_K, ALU64_LSH_K, ALU64_LSH_X,
    ALU64_MOV_K, ALU64_MOV_X, ALU64_MUL_K, ALU64_NEG, ALU64_OR_X, ALU64_RSH_K, ALU64_RSH_X,
    ALU64_SUB_K, ALU64_SUB_X, ALU_TO_BE, BPF_FUNC_GET_SMP_PROCESSOR_ID, BPF_FUNC_KTIME_GET_NS,
    BPF_FUNC_MAP_LOOKUP_ELEM, BPF_FUNC_XDP_GET_BUFF_LEN, BPF_F_MMAPABLE, BPF_MAP_TYPE_ARRAY,
    BPF_PSEUDO_KFUNC_CALL, BPF_PSEUDO_MAP_VALUE, JMP_CALL, JMP_EXIT, JMP_JA, JMP_JEQ_K, JMP_JEQ_X,
    JMP_JGE_K, JMP_JGE_X, JMP_JGT_K, JMP_JGT_X, JMP_JLT_K, JMP_JNE_K, JMP_JNE_X, JMP_JSGE_K,
    LDX_MEM_B, LDX_MEM_DW, LDX_MEM_H, LDX_MEM_W, STX_ATOMIC_DW, STX_MEM_DW, STX_MEM_W, XDP_DROP,
    XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE, XDP_PASS,
};
use crate::afxdp::sys::{if_index, Mmap};
use crate::netns::in_netns;
use crate::IoError;

/// How far a transmit stamp may lie before the run's start, or after the frame's arrival,
/// and still be this run's (the user-space receiver's margin).
pub const STAMP_MARGIN_NS: u64 = 100_000_000;
/// Sequence numbers below the highest seen that are checked exactly for duplicates.
pub const WINDOW: u64 = 4096;
/// Latencies above this are recorded as this and counted as clamped (the engine's
/// histogram's highest value).
pub const HIGHEST_NS: u64 = 100_000_000_000;
/// Values below this each have a bucket of their own.
const EXACT_BELOW: u64 = 2048;
/// Buckets per power of two above [`EXACT_BELOW`] (log2).
const HALF_MAGNITUDE: u32 = 10;
/// Buckets of the histogram: HdrHistogram's count for 1 ns to 100 s at 3 significant
/// digits.
pub const BUCKETS: usize = 28 << HALF_MAGNITUDE;
/// Words of the sequence ring (a power of two, covering the window and one more word).
const RING_WORDS: u64 = 128;
/// Most flows one program counts.
pub const MAX_FLOWS: usize = 1 << 16;
/// Most memory the blocks may take (CPUs × flows × a block), so that a host with many CPUs
/// and a run with many flows is refused with the reason rather than starved.
pub const MAX_STATE_BYTES: usize = 1 << 30;

/// The histogram bucket of a latency in ns (1 ..= [`HIGHEST_NS`]): HdrHistogram's index
/// with a unit of 1 ns and 2048 sub-buckets.
pub fn bucket_index(v: u64) -> usize {
    if v < EXACT_BELOW {
        return v as usize;
    }
    let shift = 63 - v.leading_zeros() - HALF_MAGNITUDE;
    ((shift as usize) << HALF_MAGNITUDE) + (v >> shift) as usize
}

/// The lowest latency of bucket `i` (recorded there, it lands in bucket `i` again).
pub fn bucket_value(i: usize) -> u64 {
    if (i as u64) < EXACT_BELOW {
        return i as u64;
    }
    let shift = (i >> HALF_MAGNITUDE) as u32 - 1;
    ((i as u64 & ((1 << HALF_MAGNITUDE) - 1)) + (1 << HALF_MAGNITUDE)) << shift
}

/// The counters at the head of a flow's block on one CPU, as the program writes them.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct BlockHead {
    frames: u64,
    bytes: u64,
    unique: u64,
    duplicates: u64,
    reordered: u64,
    late: u64,
    max_seq: u64,
    /// Nonzero once a sequence number was seen (`max_seq` holds it).
    has_max: u64,
    first_rx_ns: u64,
    last_rx_ns: u64,
    /// Written by user space: nonzero to record latency.
    measure_latency: u64,
    negative: u64,
    clamped: u64,
    /// Sum of the recorded latencies (clamped ones as [`HIGHEST_NS`]).
    sum_ns: u64,
    /// RFC 3550 interarrival jitter, times 16 (the filter's gain), in ns.
    jitter_x16: u64,
    jitter_frames: u64,
    /// The previous frame's transit time (rx - tx, two's complement).
    last_transit_ns: u64,
    /// Frames recorded in the histogram.
    recorded: u64,
    /// The lowest and highest latency recorded (0: none yet), for live views that do not
    /// read the histogram.
    min_ns: u64,
    max_ns: u64,
    /// Frames stamped by the device ([`ProgramClock::Device`]), not the kernel's clock.
    device_stamped: u64,
}

/// Offsets in a block: the head, the ring's tags and bits, the histogram (u32 counts).
const TAGS_AT: usize = 256;
const BITS_AT: usize = TAGS_AT + RING_WORDS as usize * 8;
const HIST_AT: usize = BITS_AT + RING_WORDS as usize * 8;
/// Bytes of one block.
pub const BLOCK_BYTES: usize = HIST_AT + BUCKETS * 4;
const _: () = assert!(size_of::<BlockHead>() <= TAGS_AT);

/// The program's one control value (a single-entry array, addressed directly).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct Control {
    /// CLOCK_REALTIME minus CLOCK_MONOTONIC, added to `bpf_ktime_get_ns()`.
    offset_ns: u64,
    /// Transmit stamps before this are not this run's (0: not checked).
    earliest_tx_ns: u64,
    /// Nonzero: the run ended; frames count as late.
    finalised: u64,
    /// The receive stamp of [`ProgramClock::Injected`] programs.
    injected_rx_ns: u64,
    /// CLOCK_REALTIME minus the device's clock, added to its stamps
    /// ([`ProgramClock::Device`]).
    device_offset_ns: u64,
    not_instrumented: u64,
    unknown_flow: u64,
    foreign: u64,
    out_of_window: u64,
    /// Frames of a CPU without a block (never, unless CPUs were added after the start).
    stray: u64,
}

/// Where the program's receive stamps come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgramClock {
    /// `bpf_ktime_get_ns()` moved to CLOCK_REALTIME: the real one.
    Kernel,
    /// The stamp user space wrote ([`XdpCounter::inject_rx_ns`]): for tests.
    Injected,
    /// The driver's XDP RX metadata timestamp where it has one (a NIC's hardware clock,
    /// moved to CLOCK_REALTIME by [`XdpCounter::set_device_offset`]), else
    /// [`ProgramClock::Kernel`]'s. The program is bound to its interface when attached.
    Device,
}

/// What a counting program is built for.
#[derive(Clone, Copy, Debug)]
pub struct CountSetup {
    /// The run tag of this run's trailers.
    pub run_tag: u8,
    /// Flow ids 0..flows are this run's.
    pub flows: usize,
    /// Pass this run's frames on to the stack after counting them (a capture or a
    /// reflector on the host needs them) instead of dropping them.
    pub pass_counted: bool,
    pub clock: ProgramClock,
}

/// A flow's counts, added over the CPUs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CountedFlow {
    pub frames: u64,
    pub bytes: u64,
    pub unique: u64,
    pub duplicates: u64,
    pub reordered: u64,
    pub late: u64,
    pub max_seq: Option<u64>,
    pub first_rx_ns: Option<u64>,
    pub last_rx_ns: Option<u64>,
    pub latency: CountedLatency,
    /// Frames the device stamped ([`ProgramClock::Device`]); the others the kernel's clock.
    pub device_stamped: u64,
}

/// A flow's latency, added over the CPUs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CountedLatency {
    /// (bucket, frames) of every bucket holding frames, by bucket ([`bucket_value`]).
    pub buckets: Vec<(usize, u64)>,
    /// Frames recorded in the buckets.
    pub recorded: u64,
    /// The lowest and highest latency recorded, exactly (None: none recorded).
    pub min_ns: Option<u64>,
    pub max_ns: Option<u64>,
    pub negative: u64,
    pub clamped: u64,
    pub sum_ns: u128,
    /// RFC 3550 jitter: per CPU, then averaged weighted by frames (as the engine adds
    /// receive workers' jitter).
    pub jitter_ns: f64,
    pub jitter_frames: u64,
    /// A bucket of some CPU overflowed its 32 bits: the buckets undercount.
    pub overflowed: bool,
}

/// Frames that belong to no flow, added over the CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CountedOther {
    pub not_instrumented: u64,
    pub unknown_flow: u64,
    pub foreign: u64,
    pub out_of_window: u64,
    pub stray: u64,
}

/// Everything the program counted so far.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CountSnapshot {
    pub flows: Vec<CountedFlow>,
    pub other: CountedOther,
}

/// How the program runs on its interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CountMode {
    /// In the driver, before any socket buffer exists.
    Native,
    /// In the generic (SKB) path: every interface has it, slower.
    Generic,
}

/// A counting program, its maps, and (once attached) its link to an interface. Dropping it
/// detaches the program.
pub struct XdpCounter {
    // Field order is drop order: detach first, then the program, then the maps.
    link: Option<OwnedFd>,
    /// Loaded at creation, or at attachment for [`ProgramClock::Device`] (bound to the
    /// device, so loaded once it is known).
    prog: Option<OwnedFd>,
    blocks: Mmap,
    blocks_map: OwnedFd,
    control: Mmap,
    control_map: OwnedFd,
    setup: CountSetup,
    cpus: usize,
    /// The interface the program is attached to.
    attached_to: Option<String>,
    /// [`ProgramClock::Device`] on an interface with a hardware clock: the clock, and the
    /// stamping setting to put back when the counter goes.
    device_clock: Option<DeviceClock>,
}

/// The hardware clock a device stamps received frames with, turned on for the run.
struct DeviceClock {
    phc: String,
    netns: Option<String>,
    iface: String,
    previous: crate::tsinfo::HwTimestampConfig,
}

impl Drop for XdpCounter {
    fn drop(&mut self) {
        // Detached first: no frame is stamped once the setting is put back.
        self.link = None;
        if let Some(d) = self.device_clock.take() {
            crate::tsinfo::restore_hw_timestamps(d.netns.as_deref(), &d.iface, d.previous);
        }
    }
}

/// The privileges counting needs.
const PRIVILEGE_HINT: &str =
    "counting in XDP needs root or CAP_BPF+CAP_NET_ADMIN (to load an XDP program and attach it)";

fn kernel_error(step: impl std::fmt::Display, err: io::Error) -> IoError {
    match err.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            IoError::Other(format!("{step}: {err}: {PRIVILEGE_HINT}"))
        }
        _ => IoError::Other(format!("{step}: {err}")),
    }
}

/// CPUs the kernel may number (`bpf_get_smp_processor_id()` is below this).
fn possible_cpus() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/possible")
        .ok()
        .and_then(|s| parse_cpu_list_end(s.trim()))
        // SAFETY: sysconf has no preconditions.
        .unwrap_or_else(|| unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.max(1) as usize)
}

/// One more than the highest CPU of a list such as `0-3,8-11`.
fn parse_cpu_list_end(list: &str) -> Option<usize> {
    list.split(',')
        .filter_map(|part| part.rsplit('-').next()?.trim().parse::<usize>().ok())
        .max()
        .map(|highest| highest + 1)
}

impl XdpCounter {
    /// Creates the maps and loads the program (not yet attached). Refuses more flows than
    /// [`MAX_FLOWS`], or blocks that would take more than [`MAX_STATE_BYTES`].
    pub fn new(setup: CountSetup) -> Result<XdpCounter, IoError> {
        XdpCounter::with_cpus(setup, possible_cpus())
    }

    fn with_cpus(setup: CountSetup, cpus: usize) -> Result<XdpCounter, IoError> {
        if setup.flows == 0 || setup.flows > MAX_FLOWS {
            return Err(IoError::Other(format!(
                "counting in XDP takes 1 to {MAX_FLOWS} flows, not {}",
                setup.flows
            )));
        }
        let entries = cpus * setup.flows;
        let bytes = entries * BLOCK_BYTES;
        if bytes > MAX_STATE_BYTES {
            return Err(IoError::Other(format!(
                "counting {} flows in XDP on a host of {cpus} CPUs would take {} MiB of kernel memory (a {} KiB block per CPU and flow, above the limit of {} MiB): count fewer flows in the kernel, or receive with afxdp: or afpacket:",
                setup.flows,
                bytes >> 20,
                BLOCK_BYTES >> 10,
                MAX_STATE_BYTES >> 20
            )));
        }
        let control_map = create_map(
            BPF_MAP_TYPE_ARRAY,
            size_of::<Control>() as u32,
            1,
            BPF_F_MMAPABLE,
            "strobe_cnt_ctl",
        )
        .map_err(|e| kernel_error("cannot create the counting program's control map", e))?;
        let control = Mmap::shared(&control_map, 4096, 0)
            .map_err(|e| kernel_error("cannot map the counting program's control map", e))?;
        let blocks_map = create_map(
            BPF_MAP_TYPE_ARRAY,
            BLOCK_BYTES as u32,
            entries as u32,
            BPF_F_MMAPABLE,
            "strobe_cnt",
        )
        .map_err(|e| kernel_error("cannot create the counting program's flow blocks", e))?;
        let blocks = Mmap::shared(&blocks_map, bytes.next_multiple_of(4096), 0)
            .map_err(|e| kernel_error("cannot map the counting program's flow blocks", e))?;
        let prog = match setup.clock {
            ProgramClock::Device => None,
            ProgramClock::Kernel | ProgramClock::Injected => {
                let insns = program(
                    &setup,
                    control_map.as_raw_fd(),
                    blocks_map.as_raw_fd(),
                    None,
                )
                .map_err(IoError::Other)?;
                Some(load_program(&insns, "strobe_count", false)?)
            }
        };
        let counter = XdpCounter {
            link: None,
            prog,
            blocks,
            blocks_map,
            control,
            control_map,
            setup,
            cpus,
            attached_to: None,
            device_clock: None,
        };
        counter.write_control(offset_of!(Control, offset_ns), realtime_offset().0);
        for flow in 0..setup.flows {
            counter.set_latency(flow, true);
        }
        Ok(counter)
    }

    /// Attaches the program to `iface` (in network namespace `netns`): natively, or in
    /// generic mode where the driver has no native XDP (then with the reason).
    pub fn attach(
        &mut self,
        iface: &str,
        netns: Option<&str>,
    ) -> Result<(CountMode, Option<String>), IoError> {
        // The link is made in the interface's namespace; it stays attached from here.
        in_netns(netns, || self.attach_here(iface, netns))
    }

    fn attach_here(
        &mut self,
        iface: &str,
        netns: Option<&str>,
    ) -> Result<(CountMode, Option<String>), IoError> {
        let ifindex = if_index(iface, netns)?;
        if self.setup.clock == ProgramClock::Device {
            let kfunc = rx_timestamp_kfunc()?;
            let insns = program(
                &self.setup,
                self.control_map.as_raw_fd(),
                self.blocks_map.as_raw_fd(),
                Some(kfunc),
            )
            .map_err(IoError::Other)?;
            // Bound to the device, in its namespace (the kernel finds the index there).
            let prog = load_program_for(&insns, "strobe_count", false, Some(ifindex))
                .map_err(|e| {
                    IoError::Other(format!(
                        "{e} (reading receive stamps from {iface}'s XDP RX metadata needs Linux 6.3 or later)"
                    ))
                })?;
            self.prog = Some(prog);
            // A NIC that can stamp every frame does so only once asked; a device without
            // (veth) is counted all the same, its frames stamped by the kernel's clock.
            let info = crate::tsinfo::query_ts_info(None, iface).ok();
            if let Some(phc) = info.and_then(|i| i.every_frame_stamped_on()) {
                let previous = crate::tsinfo::enable_hw_timestamps(None, iface)?;
                self.device_clock = Some(DeviceClock {
                    phc,
                    netns: netns.map(str::to_string),
                    iface: iface.to_string(),
                    previous,
                });
            }
        }
        let prog = self.prog.as_ref().expect("loaded at creation or just now");
        let (link, mode, note) = match create_link(prog, ifindex, XDP_FLAGS_DRV_MODE) {
            Ok(link) => (link, CountMode::Native, None),
            Err(native) if self.setup.clock == ProgramClock::Device => {
                return Err(link_error(
                    iface,
                    "native (a program reading XDP RX metadata runs only in the driver)",
                    native,
                ))
            }
            Err(native) if is_mode_unsupported(&native) => {
                let link = create_link(prog, ifindex, XDP_FLAGS_SKB_MODE)
                    .map_err(|e| link_error(iface, "generic", e))?;
                let note = format!(
                    "{iface} has no native XDP ({native}); counting in generic (SKB) mode, which costs a socket buffer per frame"
                );
                (link, CountMode::Generic, Some(note))
            }
            Err(e) => return Err(link_error(iface, "native", e)),
        };
        self.link = Some(link);
        self.attached_to = Some(iface.to_string());
        Ok((mode, note))
    }

    fn write_control(&self, at: usize, value: u64) {
        // SAFETY: `at` is a u64 field's offset within the control value, which lies at the
        // start of the mapping (8-aligned, shorter than a page).
        unsafe {
            self.control
                .as_ptr()
                .add(at)
                .cast::<u64>()
                .write_volatile(value)
        }
    }

    fn read_control(&self, at: usize) -> u64 {
        // SAFETY: as in `write_control`.
        unsafe { self.control.as_ptr().add(at).cast::<u64>().read_volatile() }
    }

    fn block(&self, cpu: usize, flow: usize) -> *mut u8 {
        debug_assert!(cpu < self.cpus && flow < self.setup.flows);
        // SAFETY: the block lies within the mapping (entries × BLOCK_BYTES, checked at
        // creation), and BLOCK_BYTES is a multiple of 8.
        unsafe {
            self.blocks
                .as_ptr()
                .add((cpu * self.setup.flows + flow) * BLOCK_BYTES)
        }
    }

    /// Turns latency recording of flow `flow` on or off (on from the start).
    pub fn set_latency(&self, flow: usize, on: bool) {
        if flow >= self.setup.flows {
            return;
        }
        for cpu in 0..self.cpus {
            // SAFETY: a u64 of the block's head.
            unsafe {
                self.block(cpu, flow)
                    .add(offset_of!(BlockHead, measure_latency))
                    .cast::<u64>()
                    .write_volatile(u64::from(on))
            }
        }
    }

    /// Counts frames whose transmit stamp lies more than [`STAMP_MARGIN_NS`] before
    /// `run_start_ns` (or after their arrival) apart, as out of window.
    pub fn check_stamps_from(&self, run_start_ns: u64) {
        self.write_control(
            offset_of!(Control, earliest_tx_ns),
            run_start_ns.saturating_sub(STAMP_MARGIN_NS).max(1),
        );
    }

    /// Ends the run: frames from now on count as late.
    pub fn finalise(&self) {
        self.write_control(offset_of!(Control, finalised), 1);
    }

    /// An error naming the interface if it went away since the program was attached (the
    /// kernel then detached the program: nothing more is counted). A system call: for a
    /// check now and then, not per read.
    pub fn check_attached(&self) -> Result<(), IoError> {
        let (Some(link), Some(iface)) = (&self.link, &self.attached_to) else {
            return Ok(());
        };
        match bpf::xdp_link_ifindex(link) {
            Ok(0) => Err(IoError::Other(format!(
                "interface `{iface}` went away: the counting program went with it"
            ))),
            Ok(_) => Ok(()),
            Err(e) => Err(kernel_error(
                format!("cannot ask whether the counting program is still on `{iface}`"),
                e,
            )),
        }
    }

    /// The hardware clock (e.g. `/dev/ptp0`) the device stamps frames with, once a
    /// [`ProgramClock::Device`] program is attached to a device that has one.
    pub fn device_clock(&self) -> Option<&str> {
        self.device_clock.as_ref().map(|d| d.phc.as_str())
    }

    /// CLOCK_REALTIME minus the device's clock, for a [`ProgramClock::Device`] program:
    /// added to each stamp the driver gives (two's complement: the device's clock may be
    /// ahead).
    pub fn set_device_offset(&self, offset_ns: i64) {
        self.write_control(offset_of!(Control, device_offset_ns), offset_ns as u64);
    }

    /// The receive stamp an [`ProgramClock::Injected`] program gives the next frames.
    pub fn inject_rx_ns(&self, rx_ns: u64) {
        self.write_control(offset_of!(Control, injected_rx_ns), rx_ns);
    }

    /// Measures CLOCK_REALTIME against CLOCK_MONOTONIC again, and takes the new offset if
    /// the wall clock was stepped (beyond the measurement's error and 1 µs; re-measuring
    /// alone would only add its error to the stamps).
    pub fn refresh_clock(&self) {
        let (offset, error) = realtime_offset();
        let at = offset_of!(Control, offset_ns);
        if offset.abs_diff(self.read_control(at)) > error + 1_000 {
            self.write_control(at, offset);
        }
    }

    /// Everything counted so far, added over the CPUs (while the program runs, each counter
    /// is read once, so the figures of one flow may be a frame apart).
    pub fn snapshot(&self) -> CountSnapshot {
        self.read(true)
    }

    /// [`XdpCounter::snapshot`] without the histograms (their buckets left empty): the
    /// counters, and latency's frames, sum and bounds, for a live view (reading every
    /// bucket takes a pass over 114 KiB per CPU and flow).
    pub fn counters(&self) -> CountSnapshot {
        self.read(false)
    }

    fn read(&self, with_buckets: bool) -> CountSnapshot {
        let other = CountedOther {
            not_instrumented: self.read_control(offset_of!(Control, not_instrumented)),
            unknown_flow: self.read_control(offset_of!(Control, unknown_flow)),
            foreign: self.read_control(offset_of!(Control, foreign)),
            out_of_window: self.read_control(offset_of!(Control, out_of_window)),
            stray: self.read_control(offset_of!(Control, stray)),
        };
        let mut buckets = vec![0u64; if with_buckets { BUCKETS } else { 0 }];
        let flows = (0..self.setup.flows)
            .map(|flow| self.flow_snapshot(flow, with_buckets.then_some(&mut buckets[..])))
            .collect();
        CountSnapshot { flows, other }
    }

    /// One flow over the CPUs; `buckets`, scratch of [`BUCKETS`] counts, when the
    /// histogram is read too.
    fn flow_snapshot(&self, flow: usize, mut buckets: Option<&mut [u64]>) -> CountedFlow {
        if let Some(b) = buckets.as_deref_mut() {
            b.fill(0);
        }
        let mut out = CountedFlow::default();
        let mut jitter_weighted = 0.0;
        for cpu in 0..self.cpus {
            let block = self.block(cpu, flow);
            // SAFETY: the head lies at the block's start; the program may be writing it,
            // which at worst makes a counter a frame old (aligned u64s do not tear).
            let h: BlockHead = unsafe { block.cast::<BlockHead>().read_volatile() };
            if h.frames == 0 {
                continue;
            }
            out.frames += h.frames;
            out.bytes += h.bytes;
            out.unique += h.unique;
            out.duplicates += h.duplicates;
            out.reordered += h.reordered;
            out.late += h.late;
            out.device_stamped += h.device_stamped;
            if h.has_max != 0 {
                out.max_seq = out.max_seq.max(Some(h.max_seq));
            }
            if h.first_rx_ns != 0 {
                out.first_rx_ns = Some(
                    out.first_rx_ns
                        .map_or(h.first_rx_ns, |f| f.min(h.first_rx_ns)),
                );
            }
            out.last_rx_ns = out
                .last_rx_ns
                .max((h.last_rx_ns != 0).then_some(h.last_rx_ns));
            let l = &mut out.latency;
            l.negative += h.negative;
            l.clamped += h.clamped;
            l.sum_ns += u128::from(h.sum_ns);
            l.recorded += h.recorded;
            l.jitter_frames += h.jitter_frames;
            if h.min_ns != 0 {
                l.min_ns = Some(l.min_ns.map_or(h.min_ns, |m| m.min(h.min_ns)));
                l.max_ns = l.max_ns.max(Some(h.max_ns));
            }
            jitter_weighted += h.jitter_x16 as f64 / 16.0 * h.jitter_frames as f64;
            let Some(buckets) = buckets.as_deref_mut() else {
                continue;
            };
            let mut in_buckets = 0u64;
            for (i, total) in buckets.iter_mut().enumerate() {
                // SAFETY: bucket i's u32 lies within the block (HIST_AT + BUCKETS * 4).
                let n = unsafe { block.add(HIST_AT + 4 * i).cast::<u32>().read_volatile() };
                *total += u64::from(n);
                in_buckets += u64::from(n);
            }
            // Read while the program runs, a few frames may be recorded but not yet in a
            // bucket (or the reverse); 2^32 apart only if a bucket overflowed.
            if h.recorded.saturating_sub(in_buckets) >= 1 << 31 {
                l.overflowed = true;
            }
        }
        let l = &mut out.latency;
        if l.jitter_frames > 0 {
            l.jitter_ns = jitter_weighted / l.jitter_frames as f64;
        }
        if let Some(buckets) = buckets {
            l.buckets = buckets
                .iter()
                .enumerate()
                .filter(|&(_, &n)| n > 0)
                .map(|(i, &n)| (i, n))
                .collect();
        }
        out
    }

    /// Runs the program once on `frame` without an interface (`BPF_PROG_RUN`'s test mode,
    /// on this CPU): its verdict, `XDP_DROP` (1) or `XDP_PASS` (2). For tests and fuzzing.
    pub fn run_frame(&self, frame: &[u8]) -> Result<u32, IoError> {
        let mut out = vec![0u8; frame.len().max(64)];
        bpf::test_run(self.test_prog()?, frame, &mut out, 1)
            .map(|run| run.retval)
            .map_err(|e| kernel_error("cannot test-run the counting program", e))
    }

    /// The program's mean time per frame over `repeat` runs on `frame` (`BPF_PROG_RUN`'s
    /// own timing, on this CPU, the kernel's per-run overhead included), in ns. The same
    /// frame each time: after the first, a duplicate. For `bench/run rxcount`.
    pub fn time_frame(&self, frame: &[u8], repeat: u32) -> Result<f64, IoError> {
        time_program(self.test_prog()?, frame, repeat)
    }

    fn test_prog(&self) -> Result<&OwnedFd, IoError> {
        match (&self.prog, self.setup.clock) {
            (Some(prog), ProgramClock::Kernel | ProgramClock::Injected) => Ok(prog),
            _ => Err(IoError::Other(
                "a counting program that reads a device's RX metadata runs only on that device, not in BPF_PROG_RUN".into(),
            )),
        }
    }

    /// The CPUs that have blocks.
    pub fn cpus(&self) -> usize {
        self.cpus
    }
}

/// The mean time per run of `prog` over `repeat` runs on `frame`, in ns (the kernel's own
/// measure of a `BPF_PROG_RUN`).
fn time_program(prog: &OwnedFd, frame: &[u8], repeat: u32) -> Result<f64, IoError> {
    let mut out = vec![0u8; frame.len().max(64)];
    bpf::test_run(prog, frame, &mut out, repeat)
        .map(|run| f64::from(run.duration_ns))
        .map_err(|e| kernel_error("cannot time an XDP program", e))
}

/// The mean time per frame of the barest XDP program (`return XDP_DROP;`) over `repeat`
/// runs on `frame`, in ns: what any XDP program costs in `BPF_PROG_RUN`, to set the
/// counting program's time beside.
pub fn time_bare_drop(frame: &[u8], repeat: u32) -> Result<f64, IoError> {
    let bare = [
        Insn::new(ALU64_MOV_K, 0, 0, 0, XDP_DROP),
        Insn::new(JMP_EXIT, 0, 0, 0, 0),
    ];
    time_program(&load_program(&bare, "strobe_bare", false)?, frame, repeat)
}

/// CLOCK_REALTIME minus CLOCK_MONOTONIC, and how far it may be off: the narrowest of a few
/// brackets (MONOTONIC, REALTIME, MONOTONIC). The kernel keeps the two clocks a fixed
/// offset apart (NTP slews both alike), so it changes only when the wall clock is stepped.
pub(crate) fn realtime_offset() -> (u64, u64) {
    let read = |clock| {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: ts is a valid timespec to write; both clocks exist on every Linux.
        unsafe { libc::clock_gettime(clock, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    };
    (0..8)
        .map(|_| {
            let before = read(libc::CLOCK_MONOTONIC);
            let real = read(libc::CLOCK_REALTIME);
            let after = read(libc::CLOCK_MONOTONIC);
            let width = after - before;
            (real.wrapping_sub(before + width / 2), width / 2)
        })
        .min_by_key(|&(_, error)| error)
        .expect("eight brackets")
}

// Registers: r6 the frame's length, r7 the flow's block, r8 the flow id (then the trailer's
// values), r9 the receive stamp. The trailer is copied to the stack at fp-16; a
// device-stamping program keeps its context, the device's stamp and whether it gave one
// below the map key.
const TRAILER_AT: i16 = -16;
const KEY_AT: i16 = -24;
const CTX_AT: i16 = -32;
const STAMP_AT: i16 = -40;
const DEVICE_AT: i16 = -48;

/// The program's idioms over a block (r7) and the control value.
trait CountAsm {
    fn head_load(&mut self, dst: u8, field: usize);
    fn head_store(&mut self, field: usize, src: u8);
    /// The block's u64 at `field` plus one (uses r1).
    fn head_bump(&mut self, field: usize);
    /// dst = the control value's address.
    fn control(&mut self, dst: u8, fd: i32);
    /// r1 = the block of 64 numbers sequence number `s` is in; r2 = the address of its
    /// word's place in the ring, less `TAGS_AT` / `BITS_AT` (uses r1, r2).
    fn ring_word(&mut self, s: u8);
    /// Sets sequence number `s`'s bit in the ring (uses r1, r2, r3, r5; `s` is another).
    fn set_seen(&mut self, s: u8);
}

impl CountAsm for Asm {
    fn head_load(&mut self, dst: u8, field: usize) {
        self.op(LDX_MEM_DW, dst, 7, field as i16, 0);
    }
    fn head_store(&mut self, field: usize, src: u8) {
        self.op(STX_MEM_DW, 7, src, field as i16, 0);
    }
    fn head_bump(&mut self, field: usize) {
        self.head_load(1, field);
        self.op(ALU64_ADD_K, 1, 0, 0, 1);
        self.head_store(field, 1);
    }
    fn control(&mut self, dst: u8, fd: i32) {
        self.imm64(dst, BPF_PSEUDO_MAP_VALUE, fd, 0);
    }
    fn ring_word(&mut self, s: u8) {
        self.op(ALU64_MOV_X, 1, s, 0, 0);
        self.op(ALU64_RSH_K, 1, 0, 0, 6);
        self.op(ALU64_MOV_X, 2, 1, 0, 0);
        self.op(ALU64_AND_K, 2, 0, 0, RING_WORDS as i32 - 1);
        self.op(ALU64_LSH_K, 2, 0, 0, 3);
        self.op(ALU64_ADD_X, 2, 7, 0, 0);
    }
    fn set_seen(&mut self, s: u8) {
        let same = self.label();
        self.ring_word(s);
        // A word of an older block starts over.
        self.op(LDX_MEM_DW, 3, 2, TAGS_AT as i16, 0);
        self.jump(JMP_JEQ_X, 3, 1, 0, same);
        self.op(STX_MEM_DW, 2, 1, TAGS_AT as i16, 0);
        self.op(ALU64_MOV_K, 3, 0, 0, 0);
        self.op(STX_MEM_DW, 2, 3, BITS_AT as i16, 0);
        self.bind(same);
        self.op(LDX_MEM_DW, 3, 2, BITS_AT as i16, 0);
        self.op(ALU64_MOV_X, 5, s, 0, 0);
        self.op(ALU64_AND_K, 5, 0, 0, 63);
        self.op(ALU64_MOV_K, 1, 0, 0, 1);
        self.op(ALU64_LSH_X, 1, 5, 0, 0);
        self.op(ALU64_OR_X, 3, 1, 0, 0);
        self.op(STX_MEM_DW, 2, 3, BITS_AT as i16, 0);
    }
}

/// The BTF id of kfunc `bpf_xdp_metadata_rx_timestamp` in the running kernel's BTF.
fn rx_timestamp_kfunc() -> Result<i32, IoError> {
    const VMLINUX: &str = "/sys/kernel/btf/vmlinux";
    const NAME: &str = "bpf_xdp_metadata_rx_timestamp";
    let no = |why: String| {
        IoError::Other(format!(
            "cannot read receive stamps from XDP RX metadata: {why} (it needs Linux 6.3 or later with BTF, CONFIG_DEBUG_INFO_BTF)"
        ))
    };
    let btf = btf_rs::Btf::from_file(VMLINUX).map_err(|e| no(format!("{VMLINUX}: {e}")))?;
    let ids = btf
        .resolve_ids_by_name(NAME)
        .map_err(|e| no(format!("{NAME} is not in {VMLINUX}: {e}")))?;
    ids.into_iter()
        .find(|&id| matches!(btf.resolve_type_by_id(id), Ok(btf_rs::Type::Func(_))))
        .and_then(|id| i32::try_from(id).ok())
        .ok_or_else(|| no(format!("{VMLINUX} has no function {NAME}")))
}

/// The counting program for `setup`, over the control value (map `control_fd`) and the
/// blocks (map `blocks_fd`); `rx_timestamp` is the BTF id of the RX metadata timestamp
/// kfunc, for [`ProgramClock::Device`].
fn program(
    setup: &CountSetup,
    control_fd: i32,
    blocks_fd: i32,
    rx_timestamp: Option<i32>,
) -> Result<Vec<Insn>, String> {
    use std::mem::offset_of as at;
    let mut a = Asm::new();
    let not_instrumented = a.label();
    let foreign = a.label();
    let unknown = a.label();
    let out_of_window = a.label();
    let stray = a.label();
    let counted = a.label();

    // The frame's length, and its last 16 bytes on the stack.
    if setup.clock == ProgramClock::Device {
        a.op(STX_MEM_DW, 10, 1, CTX_AT, 0);
    }
    a.op(ALU64_MOV_X, 6, 1, 0, 0);
    a.op(JMP_CALL, 0, 0, 0, BPF_FUNC_XDP_GET_BUFF_LEN);
    a.jump(JMP_JLT_K, 0, 0, 16, not_instrumented);
    a.op(ALU64_MOV_X, 7, 0, 0, 0);
    // Read in place: the program is not multi-buffer (no BPF_F_XDP_HAS_FRAGS), so a driver
    // hands it every frame in one buffer, whose last 16 bytes are the frame's (12 ns a
    // frame less than bpf_xdp_load_bytes). The bounds are for the verifier.
    a.jump(JMP_JGT_K, 0, 0, 0xffff, not_instrumented);
    a.op(LDX_MEM_W, 2, 6, 0, 0);
    a.op(LDX_MEM_W, 3, 6, 4, 0);
    a.op(ALU64_SUB_K, 0, 0, 0, 16);
    a.op(ALU64_ADD_X, 2, 0, 0, 0);
    a.op(ALU64_MOV_X, 4, 2, 0, 0);
    a.op(ALU64_ADD_K, 4, 0, 0, 16);
    a.jump(JMP_JGT_X, 4, 3, 0, not_instrumented);
    a.op(LDX_MEM_DW, 5, 2, 0, 0);
    a.op(STX_MEM_DW, 10, 5, TRAILER_AT, 0);
    a.op(LDX_MEM_DW, 5, 2, 8, 0);
    a.op(STX_MEM_DW, 10, 5, TRAILER_AT + 8, 0);
    a.op(ALU64_MOV_X, 6, 7, 0, 0);

    // Marker, run tag, flow id.
    let marked = a.label();
    a.op(LDX_MEM_B, 1, 10, TRAILER_AT, 0);
    a.jump(JMP_JEQ_K, 1, 0, i32::from(strobe_wire_marks::SENT), marked);
    a.jump(
        JMP_JNE_K,
        1,
        0,
        i32::from(strobe_wire_marks::REFLECTED),
        not_instrumented,
    );
    a.bind(marked);
    a.op(LDX_MEM_B, 1, 10, TRAILER_AT + 1, 0);
    a.jump(JMP_JNE_K, 1, 0, i32::from(setup.run_tag), foreign);
    a.op(LDX_MEM_H, 8, 10, TRAILER_AT + 2, 0);
    a.op(ALU_TO_BE, 8, 0, 0, 16);
    a.jump(JMP_JGE_K, 8, 0, setup.flows as i32, unknown);

    // The receive stamp (r9), and the transmit stamp checked against the run.
    let kernel_clock = |a: &mut Asm| {
        a.op(JMP_CALL, 0, 0, 0, BPF_FUNC_KTIME_GET_NS);
        a.control(1, control_fd);
        a.op(LDX_MEM_DW, 2, 1, at!(Control, offset_ns) as i16, 0);
        a.op(ALU64_ADD_X, 0, 2, 0, 0);
        a.op(ALU64_MOV_X, 9, 0, 0, 0);
    };
    match setup.clock {
        ProgramClock::Kernel => kernel_clock(&mut a),
        ProgramClock::Injected => {
            a.control(1, control_fd);
            a.op(LDX_MEM_DW, 9, 1, at!(Control, injected_rx_ns) as i16, 0);
        }
        ProgramClock::Device => {
            let kfunc = rx_timestamp.ok_or("a device-stamping program needs the kfunc's id")?;
            let (none, stamped) = (a.label(), a.label());
            // bpf_xdp_metadata_rx_timestamp(ctx, &stamp): 0 and a stamp, or an error.
            a.op(ALU64_MOV_K, 1, 0, 0, 0);
            a.op(STX_MEM_DW, 10, 1, STAMP_AT, 0);
            a.op(LDX_MEM_DW, 1, 10, CTX_AT, 0);
            a.op(ALU64_MOV_X, 2, 10, 0, 0);
            a.op(ALU64_ADD_K, 2, 0, 0, i32::from(STAMP_AT));
            a.op(JMP_CALL, 0, BPF_PSEUDO_KFUNC_CALL, 0, kfunc);
            a.jump(JMP_JNE_K, 0, 0, 0, none);
            a.op(LDX_MEM_DW, 9, 10, STAMP_AT, 0);
            a.jump(JMP_JEQ_K, 9, 0, 0, none);
            a.control(1, control_fd);
            a.op(LDX_MEM_DW, 2, 1, at!(Control, device_offset_ns) as i16, 0);
            a.op(ALU64_ADD_X, 9, 2, 0, 0);
            a.op(ALU64_MOV_K, 1, 0, 0, 1);
            a.op(STX_MEM_DW, 10, 1, DEVICE_AT, 0);
            a.jump(JMP_JA, 0, 0, 0, stamped);
            a.bind(none);
            kernel_clock(&mut a);
            a.op(ALU64_MOV_K, 1, 0, 0, 0);
            a.op(STX_MEM_DW, 10, 1, DEVICE_AT, 0);
            a.bind(stamped);
        }
    }
    let in_window = a.label();
    a.control(1, control_fd);
    a.op(LDX_MEM_DW, 2, 1, at!(Control, earliest_tx_ns) as i16, 0);
    a.jump(JMP_JEQ_K, 2, 0, 0, in_window);
    a.op(LDX_MEM_DW, 3, 10, TRAILER_AT + 8, 0);
    a.op(ALU_TO_BE, 3, 0, 0, 64);
    a.jump(JMP_JGT_X, 2, 3, 0, out_of_window);
    a.op(ALU64_MOV_X, 4, 9, 0, 0);
    a.op(ALU64_ADD_K, 4, 0, 0, STAMP_MARGIN_NS as i32);
    a.jump(JMP_JGT_X, 3, 4, 0, out_of_window);
    a.bind(in_window);

    // The flow's block on this CPU (r7).
    a.op(JMP_CALL, 0, 0, 0, BPF_FUNC_GET_SMP_PROCESSOR_ID);
    a.op(ALU64_MUL_K, 0, 0, 0, setup.flows as i32);
    a.op(ALU64_ADD_X, 0, 8, 0, 0);
    a.op(STX_MEM_W, 10, 0, KEY_AT, 0);
    a.map(1, blocks_fd);
    a.op(ALU64_MOV_X, 2, 10, 0, 0);
    a.op(ALU64_ADD_K, 2, 0, 0, i32::from(KEY_AT));
    a.op(JMP_CALL, 0, 0, 0, BPF_FUNC_MAP_LOOKUP_ELEM);
    a.jump(JMP_JEQ_K, 0, 0, 0, stray);
    a.op(ALU64_MOV_X, 7, 0, 0, 0);

    // Frames, bytes, first and last arrival; by whom stamped.
    a.head_bump(at!(BlockHead, frames));
    if setup.clock == ProgramClock::Device {
        a.op(LDX_MEM_DW, 2, 10, DEVICE_AT, 0);
        a.head_load(1, at!(BlockHead, device_stamped));
        a.op(ALU64_ADD_X, 1, 2, 0, 0);
        a.head_store(at!(BlockHead, device_stamped), 1);
    }
    a.head_load(1, at!(BlockHead, bytes));
    a.op(ALU64_ADD_X, 1, 6, 0, 0);
    a.head_store(at!(BlockHead, bytes), 1);
    let has_first = a.label();
    a.head_load(1, at!(BlockHead, first_rx_ns));
    a.jump(JMP_JNE_K, 1, 0, 0, has_first);
    a.head_store(at!(BlockHead, first_rx_ns), 9);
    a.bind(has_first);
    a.head_store(at!(BlockHead, last_rx_ns), 9);
    let live = a.label();
    a.control(1, control_fd);
    a.op(LDX_MEM_DW, 1, 1, at!(Control, finalised) as i16, 0);
    a.jump(JMP_JEQ_K, 1, 0, 0, live);
    a.head_bump(at!(BlockHead, late));
    a.jump(JMP_JA, 0, 0, 0, counted);
    a.bind(live);

    latency(&mut a);
    sequence(&mut a, counted);

    a.bind(counted);
    let verdict = if setup.pass_counted {
        XDP_PASS
    } else {
        XDP_DROP
    };
    a.op(ALU64_MOV_K, 0, 0, 0, verdict);
    a.op(JMP_EXIT, 0, 0, 0, 0);

    // Frames of no flow: counted (atomically: any CPU may count them) and passed on.
    for (label, field) in [
        (not_instrumented, at!(Control, not_instrumented)),
        (foreign, at!(Control, foreign)),
        (unknown, at!(Control, unknown_flow)),
        (out_of_window, at!(Control, out_of_window)),
        (stray, at!(Control, stray)),
    ] {
        a.bind(label);
        a.control(1, control_fd);
        a.op(ALU64_MOV_K, 2, 0, 0, 1);
        a.op(STX_ATOMIC_DW, 1, 2, field as i16, 0);
        a.op(ALU64_MOV_K, 0, 0, 0, XDP_PASS);
        a.op(JMP_EXIT, 0, 0, 0, 0);
    }
    a.finish()
}

/// The trailer's markers, as the wire crate defines them (strobe-io does not depend on it;
/// a test checks they agree).
mod strobe_wire_marks {
    pub const SENT: u8 = b'S';
    pub const REFLECTED: u8 = b'R';
}

/// The frame's latency into the histogram, and the jitter filter (continues with the
/// sequence check).
fn latency(a: &mut Asm) {
    use std::mem::offset_of as at;
    let done = a.label();
    a.head_load(1, at!(BlockHead, measure_latency));
    a.jump(JMP_JEQ_K, 1, 0, 0, done);
    a.op(LDX_MEM_DW, 8, 10, TRAILER_AT + 8, 0);
    a.op(ALU_TO_BE, 8, 0, 0, 64);
    // A zero stamp: written in scheduled time (a trace), not stamped.
    a.jump(JMP_JEQ_K, 8, 0, 0, done);
    a.op(ALU64_MOV_X, 2, 9, 0, 0);
    a.op(ALU64_SUB_X, 2, 8, 0, 0);

    // Jitter (RFC 3550 A.8): J += (|D| - J) / 16, kept as 16 J.
    let first = a.label();
    a.head_load(1, at!(BlockHead, jitter_frames));
    a.jump(JMP_JEQ_K, 1, 0, 0, first);
    a.head_load(3, at!(BlockHead, last_transit_ns));
    a.op(ALU64_MOV_X, 4, 2, 0, 0);
    a.op(ALU64_SUB_X, 4, 3, 0, 0);
    let positive_d = a.label();
    a.jump(JMP_JSGE_K, 4, 0, 0, positive_d);
    a.op(ALU64_NEG, 4, 0, 0, 0);
    a.bind(positive_d);
    a.head_load(5, at!(BlockHead, jitter_x16));
    a.op(ALU64_MOV_X, 3, 5, 0, 0);
    a.op(ALU64_RSH_K, 3, 0, 0, 4);
    a.op(ALU64_ADD_X, 5, 4, 0, 0);
    a.op(ALU64_SUB_X, 5, 3, 0, 0);
    a.head_store(at!(BlockHead, jitter_x16), 5);
    a.bind(first);
    a.head_store(at!(BlockHead, last_transit_ns), 2);
    a.head_bump(at!(BlockHead, jitter_frames));

    // Arrived before it left: counted apart, never recorded (compared unsigned, so that a
    // stamp 2^63 ns away is far, not negative).
    let forward = a.label();
    a.jump(JMP_JGE_X, 9, 8, 0, forward);
    a.head_bump(at!(BlockHead, negative));
    a.jump(JMP_JA, 0, 0, 0, done);
    a.bind(forward);
    let at_least_one = a.label();
    a.jump(JMP_JNE_K, 2, 0, 0, at_least_one);
    a.op(ALU64_MOV_K, 2, 0, 0, 1);
    a.bind(at_least_one);
    let in_range = a.label();
    a.constant(3, HIGHEST_NS);
    a.jump(JMP_JGE_X, 3, 2, 0, in_range);
    a.head_bump(at!(BlockHead, clamped));
    a.op(ALU64_MOV_X, 2, 3, 0, 0);
    a.bind(in_range);
    a.head_load(1, at!(BlockHead, sum_ns));
    a.op(ALU64_ADD_X, 1, 2, 0, 0);
    a.head_store(at!(BlockHead, sum_ns), 1);
    a.head_bump(at!(BlockHead, recorded));
    let (not_lower, not_higher) = (a.label(), a.label());
    let lower = a.label();
    a.head_load(1, at!(BlockHead, min_ns));
    a.jump(JMP_JEQ_K, 1, 0, 0, lower);
    a.jump(JMP_JGE_X, 2, 1, 0, not_lower);
    a.bind(lower);
    a.head_store(at!(BlockHead, min_ns), 2);
    a.bind(not_lower);
    a.head_load(1, at!(BlockHead, max_ns));
    a.jump(JMP_JGE_X, 1, 2, 0, not_higher);
    a.head_store(at!(BlockHead, max_ns), 2);
    a.bind(not_higher);

    // The bucket (r3): HdrHistogram's index, with floor(log2) by halving (r4, r5).
    let (wide, bump) = (a.label(), a.label());
    a.jump(JMP_JGE_K, 2, 0, EXACT_BELOW as i32, wide);
    a.op(ALU64_MOV_X, 3, 2, 0, 0);
    a.jump(JMP_JA, 0, 0, 0, bump);
    a.bind(wide);
    a.op(ALU64_MOV_K, 4, 0, 0, 0);
    a.op(ALU64_MOV_X, 5, 2, 0, 0);
    for step in [32, 16, 8, 4, 2, 1] {
        let smaller = a.label();
        a.op(ALU64_MOV_X, 1, 5, 0, 0);
        a.op(ALU64_RSH_K, 1, 0, 0, step);
        a.jump(JMP_JEQ_K, 1, 0, 0, smaller);
        a.op(ALU64_MOV_X, 5, 1, 0, 0);
        a.op(ALU64_ADD_K, 4, 0, 0, step);
        a.bind(smaller);
    }
    a.op(ALU64_SUB_K, 4, 0, 0, HALF_MAGNITUDE as i32);
    a.op(ALU64_MOV_X, 3, 2, 0, 0);
    a.op(ALU64_RSH_X, 3, 4, 0, 0);
    a.op(ALU64_LSH_K, 4, 0, 0, HALF_MAGNITUDE as i32);
    a.op(ALU64_ADD_X, 3, 4, 0, 0);
    a.bind(bump);
    a.jump(JMP_JGE_K, 3, 0, BUCKETS as i32, done);
    a.op(ALU64_LSH_K, 3, 0, 0, 2);
    a.op(ALU64_ADD_X, 3, 7, 0, 0);
    a.op(LDX_MEM_W, 1, 3, HIST_AT as i16, 0);
    a.op(ALU64_ADD_K, 1, 0, 0, 1);
    a.op(STX_MEM_W, 3, 1, HIST_AT as i16, 0);
    a.bind(done);
}

/// The frame's sequence number against the flow's: unique, reordered, duplicate or late
/// (then jumps to `counted`).
fn sequence(a: &mut Asm, counted: usize) {
    use std::mem::offset_of as at;
    a.op(LDX_MEM_W, 8, 10, TRAILER_AT + 4, 0);
    a.op(ALU_TO_BE, 8, 0, 0, 32);
    let compare = a.label();
    a.head_load(1, at!(BlockHead, has_max));
    a.jump(JMP_JNE_K, 1, 0, 0, compare);
    a.head_store(at!(BlockHead, max_seq), 8);
    a.op(ALU64_MOV_K, 1, 0, 0, 1);
    a.head_store(at!(BlockHead, has_max), 1);
    a.head_bump(at!(BlockHead, unique));
    a.set_seen(8);
    a.jump(JMP_JA, 0, 0, 0, counted);

    // r4 = the number extended to 64 bits nearest the highest seen (r2): within 2^31.
    a.bind(compare);
    a.head_load(2, at!(BlockHead, max_seq));
    a.op(ALU64_MOV_X, 3, 8, 0, 0);
    a.op(ALU64_SUB_X, 3, 2, 0, 0);
    a.op(ALU64_LSH_K, 3, 0, 0, 32);
    a.op(ALU64_ARSH_K, 3, 0, 0, 32);
    a.op(ALU64_MOV_X, 4, 2, 0, 0);
    a.op(ALU64_ADD_X, 4, 3, 0, 0);
    let extended = a.label();
    a.jump(JMP_JSGE_K, 3, 0, 0, extended);
    // Below zero: the number itself (ahead of the highest, as the user-space receiver has
    // it).
    a.op(ALU64_MOV_X, 5, 3, 0, 0);
    a.op(ALU64_NEG, 5, 0, 0, 0);
    a.jump(JMP_JGE_X, 2, 5, 0, extended);
    a.op(ALU64_MOV_X, 4, 8, 0, 0);
    a.bind(extended);

    let (ahead, within, unseen) = (a.label(), a.label(), a.label());
    a.jump(JMP_JGT_X, 4, 2, 0, ahead);
    a.op(ALU64_MOV_X, 5, 2, 0, 0);
    a.op(ALU64_SUB_X, 5, 4, 0, 0);
    a.jump(JMP_JLT_K, 5, 0, WINDOW as i32, within);
    // Older than the window: counted unique, reordered and late.
    a.head_bump(at!(BlockHead, late));
    a.head_bump(at!(BlockHead, unique));
    a.head_bump(at!(BlockHead, reordered));
    a.jump(JMP_JA, 0, 0, 0, counted);

    a.bind(within);
    a.ring_word(4);
    a.op(LDX_MEM_DW, 3, 2, TAGS_AT as i16, 0);
    a.jump(JMP_JNE_X, 3, 1, 0, unseen);
    a.op(LDX_MEM_DW, 3, 2, BITS_AT as i16, 0);
    a.op(ALU64_MOV_X, 5, 4, 0, 0);
    a.op(ALU64_AND_K, 5, 0, 0, 63);
    a.op(ALU64_RSH_X, 3, 5, 0, 0);
    a.op(ALU64_AND_K, 3, 0, 0, 1);
    a.jump(JMP_JEQ_K, 3, 0, 0, unseen);
    a.head_bump(at!(BlockHead, duplicates));
    a.jump(JMP_JA, 0, 0, 0, counted);

    a.bind(unseen);
    a.set_seen(4);
    a.head_bump(at!(BlockHead, unique));
    a.head_bump(at!(BlockHead, reordered));
    a.jump(JMP_JA, 0, 0, 0, counted);

    a.bind(ahead);
    a.head_store(at!(BlockHead, max_seq), 4);
    a.head_bump(at!(BlockHead, unique));
    a.set_seen(4);
    a.jump(JMP_JA, 0, 0, 0, counted);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_round_trip_and_are_a_thousandth_wide() {
        for v in (1..5000).chain([
            2047,
            2048,
            2049,
            4095,
            4096,
            1_000_000,
            123_456_789,
            HIGHEST_NS - 1,
            HIGHEST_NS,
        ]) {
            let i = bucket_index(v);
            assert!(i < BUCKETS, "{v} -> {i}");
            let low = bucket_value(i);
            assert!(low <= v, "{v}: bucket {i} starts at {low}");
            assert_eq!(bucket_index(low), i, "{v}");
            // The next bucket starts above v, at most a thousandth (1/1024) further.
            let next = bucket_value(i + 1);
            assert!(next > v, "{v}");
            assert!((next - low) * 1024 <= low.max(1024), "{v}: {low}..{next}");
        }
        // The highest value has a bucket (HdrHistogram's count reaches up to 2^37 ns).
        assert!(bucket_index(HIGHEST_NS) < BUCKETS);
        assert!(bucket_value(BUCKETS - 1) > HIGHEST_NS);
    }

    #[test]
    fn the_program_is_a_few_hundred_instructions() {
        let setup = CountSetup {
            run_tag: 1,
            flows: 3,
            pass_counted: false,
            clock: ProgramClock::Kernel,
        };
        let n = program(&setup, 3, 4, None).unwrap().len();
        // The docs say "about 300": the verifier walks each of its paths per load.
        assert!((250..350).contains(&n), "{n} instructions");
    }

    #[test]
    fn cpu_lists_give_one_more_than_the_highest() {
        assert_eq!(parse_cpu_list_end("0-1"), Some(2));
        assert_eq!(parse_cpu_list_end("0"), Some(1));
        assert_eq!(parse_cpu_list_end("0-3,8-11"), Some(12));
        assert_eq!(parse_cpu_list_end(""), None);
    }

    #[test]
    fn too_many_flows_or_too_much_memory_is_refused_with_the_reason() {
        let setup = |flows| CountSetup {
            run_tag: 1,
            flows,
            pass_counted: false,
            clock: ProgramClock::Injected,
        };
        let e = XdpCounter::with_cpus(setup(0), 2)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("1 to 65536 flows"), "{e}");
        let e = XdpCounter::with_cpus(setup(4096), 64)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("64 CPUs") && e.contains("afxdp:"), "{e}");
    }

    fn frame(tag: u8, flow: u16, seq: u32, tx_ns: u64, len: usize) -> Vec<u8> {
        let mut f = vec![0xeeu8; len];
        let t = &mut f[len - 16..];
        t[0] = b'S';
        t[1] = tag;
        t[2..4].copy_from_slice(&flow.to_be_bytes());
        t[4..8].copy_from_slice(&seq.to_be_bytes());
        t[8..].copy_from_slice(&tx_ns.to_be_bytes());
        f
    }

    fn root() -> bool {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        if !root {
            eprintln!("skipped: loading BPF programs needs root");
        }
        root
    }

    #[test]
    fn the_program_loads_and_counts_a_flow_and_what_is_not_one() {
        if !root() {
            return;
        }
        let c = XdpCounter::new(CountSetup {
            run_tag: 7,
            flows: 2,
            pass_counted: false,
            clock: ProgramClock::Injected,
        })
        .unwrap();
        let t0 = 1_700_000_000_000_000_000u64;
        c.check_stamps_from(t0);
        let run = |f: &[u8], rx: u64| {
            c.inject_rx_ns(rx);
            c.run_frame(f).unwrap()
        };
        // Flow 1: 0, 1, 3, 2 (reordered), 2 again (duplicate), latencies 1000 + seq ns.
        for seq in [0u32, 1, 3, 2, 2] {
            let tx = t0 + u64::from(seq) * 10_000;
            assert_eq!(
                run(&frame(7, 1, seq, tx, 100), tx + 1000 + u64::from(seq)),
                1
            );
        }
        // Not this run's: another tag, a flow it does not have, a stamp before the run, no
        // marker, too short: passed on.
        assert_eq!(run(&frame(8, 1, 9, t0, 100), t0 + 5), 2);
        assert_eq!(run(&frame(7, 2, 9, t0, 100), t0 + 5), 2);
        assert_eq!(
            run(&frame(7, 0, 9, t0 - STAMP_MARGIN_NS - 1, 100), t0 + 5),
            2
        );
        assert_eq!(run(&[0u8; 60], t0), 2);
        assert_eq!(run(&[0u8; 15], t0), 2);
        let s = c.snapshot();
        assert_eq!(
            s.other,
            CountedOther {
                not_instrumented: 2,
                unknown_flow: 1,
                foreign: 1,
                out_of_window: 1,
                stray: 0
            }
        );
        assert_eq!(s.flows[0], CountedFlow::default());
        let f = &s.flows[1];
        assert_eq!(
            (
                f.frames,
                f.bytes,
                f.unique,
                f.duplicates,
                f.reordered,
                f.late
            ),
            (5, 500, 4, 1, 1, 0)
        );
        assert_eq!(f.max_seq, Some(3));
        assert_eq!(f.first_rx_ns, Some(t0 + 1000));
        assert_eq!(f.last_rx_ns, Some(t0 + 20_000 + 1002));
        assert_eq!(f.latency.recorded, 5);
        assert_eq!(
            f.latency.buckets,
            vec![(1000, 1), (1001, 1), (1002, 2), (1003, 1)]
        );
        assert_eq!(f.latency.sum_ns, 1000 + 1001 + 1003 + 1002 + 1002);
        assert_eq!(
            (f.latency.min_ns, f.latency.max_ns),
            (Some(1000), Some(1003))
        );
        let counters = c.counters();
        assert!(counters.flows[1].latency.buckets.is_empty());
        assert_eq!(
            CountedLatency {
                buckets: f.latency.buckets.clone(),
                ..counters.flows[1].latency.clone()
            },
            f.latency
        );
        // After the end: late, and no sequence check.
        c.finalise();
        run(&frame(7, 1, 4, t0, 100), t0 + 1);
        let f = &c.snapshot().flows[1];
        assert_eq!((f.frames, f.late, f.unique), (6, 1, 4));
    }
}
