//! Frames a backend writes itself, in the kernel, rather than the engine writing each one:
//! `xdp-live` generates them in its XDP program (the "in-kernel generation"), so a
//! run needs one busy core (the kernel's) instead of two (engine and kernel), and no frame
//! crosses from user space.
//!
//! The engine describes one flow as its frame templates (one per size, and the cycle of
//! sizes) plus what changes per frame, in the same terms its own generator uses (see
//! `strobe_engine::generator`): counted, listed or random fields, the trailer's sequence
//! number and transmit stamp, and checksums kept as a constant sum plus weighted terms. A backend that takes the description must produce byte for byte the frames
//! the engine would (transmit stamps aside), which the tests check against the engine.

/// A flow for a backend to generate by itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelFlow {
    /// The flow's frames, one per frame size.
    pub templates: Vec<KernelTemplate>,
    /// Which template each frame uses, from the next frame on, over and over (at least one
    /// entry; one template: `[0]`).
    pub cycle: Vec<u16>,
    pub fields: Vec<KernelField>,
    /// The trailer's first sequence number (templates with a trailer count from it).
    pub seq_start: u32,
    /// The transmit stamp that trailers carry.
    pub stamp: KernelStamp,
    /// Frames to send; None: until stopped.
    pub frames: Option<u64>,
    /// When each frame leaves; None: as fast as the kernel sends (unpaced).
    pub pace: Option<KernelPace>,
}

/// One frame size of a [`KernelFlow`]: its first frame, where its trailer lies, its
/// checksums. Every template has the same varying fields at the same places (in the
/// headers); only lengths, the trailer and checksum terms move with the size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelTemplate {
    /// The first frame of this size, without FCS, with valid checksums.
    pub frame: Vec<u8>,
    /// Where the instrumentation trailer lies (start, length): rewritten in every frame
    /// with the headers, since a receiver may have changed the page it was in.
    pub trailer: Option<(usize, usize)>,
    /// Where the trailer's big-endian u32 sequence number goes.
    pub seq_at: Option<usize>,
    /// Where the trailer's big-endian u64 transmit stamp goes.
    pub stamp_at: Option<usize>,
    /// Checksums, innermost first (a later one may sum an earlier one).
    pub checksums: Vec<KernelChecksum>,
}

impl KernelFlow {
    /// Whether frames carry a stamp taken per frame.
    pub fn stamped_per_frame(&self) -> bool {
        self.stamp == KernelStamp::PerFrame && self.templates.iter().any(|t| t.stamp_at.is_some())
    }

    /// Bytes of the first `frames` frames, without FCS.
    pub fn frame_bytes(&self, frames: u64) -> u64 {
        let len = |t: &u16| {
            self.templates
                .get(*t as usize)
                .map_or(0, |t| t.frame.len() as u64)
        };
        let n = self.cycle.len().max(1) as u64;
        let whole: u64 = self.cycle.iter().map(len).sum();
        let rest: u64 = self.cycle.iter().take((frames % n) as usize).map(len).sum();
        frames / n * whole + rest
    }
}

/// A paced flow's deadlines, kept by the backend's program: the first frame leaves at once,
/// each next one `gap` after the one before, and after every `burst` frames `burst_gap_ns`
/// more (a constant rate is bursts of 1 with no extra gap). Deadlines are absolute, so a
/// frame that leaves late does not move the ones after it: late frames go back to back
/// until the schedule is met again (catch-up).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelPace {
    /// Between deadlines: whole nanoseconds and a fraction in units of 2^-32 ns.
    pub gap_ns: u64,
    pub gap_frac: u32,
    /// Frames per burst (>= 1).
    pub burst: u64,
    pub burst_gap_ns: u64,
    /// A frame that leaves more than this after its deadline counts as late.
    pub late_tolerance_ns: u64,
}

/// The transmit stamp a generated frame carries (CLOCK_REALTIME ns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelStamp {
    /// Taken per frame, where the backend says ([`KernelGenerator::stamp_source`]).
    PerFrame,
    /// The same in every frame (latency is not measured: receivers only check that a
    /// stamp belongs to the run), which spares a clock read per frame.
    Fixed(u64),
}

/// A whole-byte field whose value changes per frame, as the engine's generator changes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelField {
    /// Byte offset of the field in the frame.
    pub at: usize,
    /// Its width in bytes: 1, 2, 4, 6 or 8.
    pub bytes: usize,
    pub values: KernelValues,
}

/// The values a [`KernelField`] takes, frame `j` from the flow's next frame on; every value
/// is masked to the field's width.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelValues {
    /// OTG increment/decrement: `start + (j % count)·step` (a decrement steps by the two's
    /// complement); `count` >= 1.
    Counter { start: u64, step: u64, count: u64 },
    /// OTG values: `values[j % len]`.
    Listed(Vec<u64>),
    /// OTG random: `strobe_model::random_in(seed, j % count, lo, hi)` (`count` 0: never
    /// repeats), `lo <= hi`.
    Random {
        seed: u64,
        lo: u64,
        hi: u64,
        count: u64,
    },
}

impl KernelField {
    pub fn mask(&self) -> u64 {
        if self.bytes >= 8 {
            u64::MAX
        } else {
            (1u64 << (8 * self.bytes)) - 1
        }
    }

    /// A counting field (the common case), `start + (j % count)·step`.
    pub fn counter(at: usize, bytes: usize, start: u64, step: u64, count: u64) -> KernelField {
        KernelField {
            at,
            bytes,
            values: KernelValues::Counter { start, step, count },
        }
    }
}

/// A value a checksum sums, reduced modulo 65535 as the engine does (a u64 as the sum of
/// its two 32-bit halves).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelValue {
    Field(usize),
    Seq,
    Stamp,
    /// An earlier checksum's field value.
    Checksum(usize),
}

/// A 16-bit Internet checksum at `at`: the complement of the one's-complement sum of `base`
/// (everything constant) and each term's value times 2^shift.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelChecksum {
    pub at: usize,
    pub base: u64,
    /// UDP: a computed 0 is sent as 0xFFFF.
    pub zero_as_ffff: bool,
    pub terms: Vec<(KernelValue, u8)>,
}

/// What a backend's kernel generation did, read when it stopped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelRun {
    pub frames: u64,
    /// Transmit stamps (CLOCK_REALTIME ns) of the first and last frame, when frames were
    /// stamped.
    pub first_ns: Option<u64>,
    pub last_ns: Option<u64>,
    /// Paced flows: frames that left later than the tolerance, and the latest any left.
    pub late_frames: u64,
    pub max_late_ns: u64,
    /// Paced flows: frames by how late the program sent them, in decades: at most 100 ns,
    /// 1 µs, 10 µs, 100 µs, 1 ms after the deadline, and later.
    pub lateness: [u64; LATENESS_DECADES],
}

/// The decades of [`KernelRun::lateness`].
pub const LATENESS_DECADES: usize = 6;
/// Their upper bounds in ns (the last decade has none).
pub const LATENESS_LIMITS_NS: [u64; LATENESS_DECADES - 1] =
    [100, 1_000, 10_000, 100_000, 1_000_000];

/// A backend that can generate [`KernelFlow`]s by itself: one flow, or several paced ones
/// (a port's), each frame from the flow whose deadline comes first.
pub trait KernelGenerator {
    /// Why `flows` cannot be generated here (None: they can), checked before the run.
    fn refuses(&self, flows: &[KernelFlow]) -> Option<String>;
    /// Starts sending `flows`: returns once frames are on their way.
    fn start(&mut self, flows: &[KernelFlow]) -> Result<(), crate::IoError>;
    /// Frames of flow `flow` (its index in what `start` took) generated so far.
    fn generated(&self, flow: usize) -> u64;
    /// Whether every flow's frame count is reached (never, for a flow without one).
    fn done(&self) -> bool;
    /// Ends flow `flow` where it is while the others go on (a flow switched off).
    fn end_flow(&mut self, flow: usize);
    /// Holds (true) or resumes (false) generation.
    fn hold(&mut self, on: bool);
    /// Stops, and says what each flow sent. Every frame generated has been handed to the
    /// driver.
    fn stop(&mut self) -> Result<Vec<KernelRun>, crate::IoError>;
    /// Where transmit stamps are taken and their bias, in words for the report.
    fn stamp_source(&self) -> String;
}
