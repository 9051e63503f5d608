//! The XDP program that generates [`KernelFlow`]s in the kernel, for `xdp-live`: the
//! kernel initialises its live-frame pages with the longest frame of the flows, and on every
//! repetition the program writes into the page a frame of one flow (with several, paced,
//! the one whose deadline comes first): what changes (the varying fields — counted,
//! listed or random, each value computed as the engine computes it — the trailer's sequence
//! number and transmit stamp, the checksums, incrementally), then redirects it. Pages keep what the program wrote when the kernel recycles them, and the
//! program rewrites every byte that varies, so each frame is exactly the engine's.
//!
//! The program's state (per flow a block: counters, its frame budget, deadlines, the listed
//! fields' values, the cycle of sizes; the first block's hold switch for all) is the one
//! value of an array map mapped into user space, addressed directly (`BPF_PSEUDO_MAP_VALUE`,
//! no lookup call per frame).

use crate::afxdp::asm::Asm;
use crate::afxdp::bpf::{
    Insn, ALU64_ADD_K, ALU64_ADD_X, ALU64_AND_K, ALU64_AND_X, ALU64_LSH_K, ALU64_MOV_K,
    ALU64_MOV_X, ALU64_MUL_X, ALU64_RSH_K, ALU64_SUB_X, ALU64_XOR_K, ALU64_XOR_X, ALU_TO_BE,
    BPF_FUNC_KTIME_GET_NS, BPF_FUNC_REDIRECT_MAP, BPF_FUNC_XDP_ADJUST_TAIL, BPF_PSEUDO_MAP_VALUE,
    JMP_CALL, JMP_EXIT, JMP_JA, JMP_JEQ_K, JMP_JGE_X, JMP_JGT_X, JMP_JLT_K, JMP_JNE_K, JMP_JNE_X,
    LDX_MEM_DW, LDX_MEM_W, STX_MEM_B, STX_MEM_DW, STX_MEM_H, STX_MEM_W, XDP_DROP,
};
use crate::kernel_frames::{
    KernelFlow, KernelPace, KernelStamp, KernelValue, KernelValues, LATENESS_DECADES,
    LATENESS_LIMITS_NS,
};
use std::mem::offset_of;

/// Most varying fields the program writes (each takes a stack slot and six words of state).
pub(crate) const MAX_FIELDS: usize = 16;
/// Most checksums it keeps.
pub(crate) const MAX_CHECKSUMS: usize = 8;
/// Most terms of one checksum.
const MAX_TERMS: usize = 32;
/// Most listed values of all fields together (kept in the state, 8 bytes each).
pub(crate) const MAX_LISTED: usize = 4096;
/// Most frame sizes (each has its own code in the program).
pub(crate) const MAX_TEMPLATES: usize = 32;
/// Most frames in the cycle of sizes (kept in the state, 8 bytes each).
pub(crate) const MAX_CYCLE: usize = 4096;
/// Most flows one program generates (paced; per repetition it compares their deadlines).
pub(crate) const MAX_FLOWS: usize = 8;
/// Most bytes the program rewrites in a frame of one size (headers, trailers, and where
/// the size's frame differs from the pages' first frame).
const MAX_REWRITE: usize = 1024;

/// A flow's state block, as user space sees it in the map's value (followed by one
/// [`FieldState`] per field, the listed values and the cycle of sizes). With several
/// flows, `hold`, `idle` and `early` are the first block's only.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct GenState {
    /// Frames generated (written by the program).
    pub produced: u64,
    /// Frames to generate; the program idles once `produced` reaches it.
    pub limit: u64,
    /// Repetitions that generated nothing (held, or the budget reached).
    pub idle: u64,
    /// Repetitions whose page was shorter than the frame (never, unless the kernel changed).
    pub refused: u64,
    /// Transmit stamps of the first and last frame (stamped flows only).
    pub first_ns: u64,
    pub last_ns: u64,
    /// CLOCK_REALTIME minus CLOCK_MONOTONIC, added to `bpf_ktime_get_ns()`.
    pub offset_ns: u64,
    /// The next sequence number.
    pub seq: u32,
    /// Nonzero: generate nothing (a paused run).
    pub hold: u32,
    /// Paced flows ([`KernelPace`]): the next deadline (CLOCK_MONOTONIC ns; 0: the next
    /// repetition sets it) and its fraction (2^-32 ns), written by the program.
    pub next_ns: u64,
    pub next_frac: u64,
    pub gap_ns: u64,
    pub gap_frac: u64,
    pub burst: u64,
    /// Frames sent of the current burst.
    pub in_burst: u64,
    pub burst_gap_ns: u64,
    pub late_tolerance_ns: u64,
    /// Frames later than the tolerance, and the latest (written by the program).
    pub late: u64,
    pub max_late_ns: u64,
    /// Repetitions before the next deadline (sent nothing).
    pub early: u64,
    /// Nonzero once the program saw the run held: the next frame starts the schedule anew,
    /// so that a pause is not repaid back to back.
    pub resync: u64,
    /// Frames by lateness decade ([`crate::kernel_frames::KernelRun::lateness`]).
    pub lateness: [u64; LATENESS_DECADES],
    /// Where the flow is in its cycle of frame sizes ([`KernelFlow::cycle`]).
    pub cycle_k: u64,
}

/// A field's state: a counter's value and step, or where a listed or random field is in its
/// cycle (`k`, `count`; listed values follow the field states, random ones are computed).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct FieldState {
    pub cur: u64,
    pub k: u64,
    pub count: u64,
    pub step: u64,
    pub start: u64,
    pub mask: u64,
}

const ST_PRODUCED: i16 = offset_of!(GenState, produced) as i16;
const ST_LIMIT: i16 = offset_of!(GenState, limit) as i16;
const ST_IDLE: i16 = offset_of!(GenState, idle) as i16;
const ST_REFUSED: i16 = offset_of!(GenState, refused) as i16;
const ST_FIRST: i16 = offset_of!(GenState, first_ns) as i16;
const ST_LAST: i16 = offset_of!(GenState, last_ns) as i16;
const ST_OFFSET: i16 = offset_of!(GenState, offset_ns) as i16;
const ST_SEQ: i16 = offset_of!(GenState, seq) as i16;
const ST_HOLD: i16 = offset_of!(GenState, hold) as i16;
const ST_NEXT: usize = offset_of!(GenState, next_ns);
const ST_NEXT_FRAC: usize = offset_of!(GenState, next_frac);
const ST_GAP: usize = offset_of!(GenState, gap_ns);
const ST_GAP_FRAC: usize = offset_of!(GenState, gap_frac);
const ST_BURST: usize = offset_of!(GenState, burst);
const ST_IN_BURST: usize = offset_of!(GenState, in_burst);
const ST_BURST_GAP: usize = offset_of!(GenState, burst_gap_ns);
const ST_LATE_TOLERANCE: usize = offset_of!(GenState, late_tolerance_ns);
const ST_LATE: usize = offset_of!(GenState, late);
const ST_MAX_LATE: usize = offset_of!(GenState, max_late_ns);
const ST_EARLY: usize = offset_of!(GenState, early);
const ST_RESYNC: usize = offset_of!(GenState, resync);
const ST_LATENESS: usize = offset_of!(GenState, lateness);
const ST_CYCLE_K: usize = offset_of!(GenState, cycle_k);
const ST_FIELDS: usize = std::mem::size_of::<GenState>();
const FIELD_SIZE: usize = std::mem::size_of::<FieldState>();
const F_CUR: usize = offset_of!(FieldState, cur);
const F_K: usize = offset_of!(FieldState, k);
const F_COUNT: usize = offset_of!(FieldState, count);
const F_STEP: usize = offset_of!(FieldState, step);
const F_START: usize = offset_of!(FieldState, start);
const F_MASK: usize = offset_of!(FieldState, mask);

/// Bytes of a flow's state block: the state, a field state per field, the listed values,
/// the cycle of sizes (whole u64s: blocks follow each other 8-aligned).
pub(crate) fn state_size(flow: &KernelFlow) -> usize {
    cycle_at(flow) + 8 * flow.cycle.len()
}

/// Where each flow's state block starts in the state value; the first also holds what the
/// flows share (the hold switch, the idle and early counts).
pub(crate) fn blocks_at(flows: &[KernelFlow]) -> Vec<usize> {
    let mut at = 0;
    flows
        .iter()
        .map(|f| {
            let here = at;
            at += state_size(f);
            here
        })
        .collect()
}

/// Bytes of the state value for `flows`.
pub(crate) fn states_size(flows: &[KernelFlow]) -> usize {
    flows.iter().map(state_size).sum()
}

/// Where the cycle of template indices starts in the flow's block.
pub(crate) fn cycle_at(flow: &KernelFlow) -> usize {
    ST_FIELDS + flow.fields.len() * FIELD_SIZE + 8 * listed_values(flow)
}

fn listed_values(flow: &KernelFlow) -> usize {
    flow.fields
        .iter()
        .map(|f| match &f.values {
            KernelValues::Listed(v) => v.len(),
            _ => 0,
        })
        .sum()
}

/// Where each field's listed values start in the flow's block (fields without: where the
/// next would).
pub(crate) fn listed_at(flow: &KernelFlow) -> Vec<usize> {
    let mut at = ST_FIELDS + flow.fields.len() * FIELD_SIZE;
    flow.fields
        .iter()
        .map(|f| {
            let here = at;
            if let KernelValues::Listed(v) = &f.values {
                at += 8 * v.len();
            }
            here
        })
        .collect()
}

/// A field's state at the flow's start.
pub(crate) fn field_state(f: &crate::kernel_frames::KernelField) -> FieldState {
    let mask = f.mask();
    match f.values {
        KernelValues::Counter { start, step, count } => FieldState {
            cur: start & mask,
            k: 0,
            count,
            step: step & mask,
            start: start & mask,
            mask,
        },
        KernelValues::Listed(ref values) => FieldState {
            count: values.len() as u64,
            mask,
            ..FieldState::default()
        },
        KernelValues::Random { count, .. } => FieldState {
            count,
            mask,
            ..FieldState::default()
        },
    }
}

/// Why the program cannot generate `flows` (None: it can), for frames of at most
/// `max_frame` bytes.
pub(crate) fn refuses(flows: &[KernelFlow], max_frame: usize) -> Option<String> {
    if flows.is_empty() {
        return Some("a port without flows (a strobe bug)".into());
    }
    if flows.len() > MAX_FLOWS {
        return Some(format!(
            "{} flows on one port (the kernel program writes at most {MAX_FLOWS})",
            flows.len()
        ));
    }
    if flows.len() > 1 && flows.iter().any(|f| f.pace.is_none()) {
        return Some(
            "several flows unpaced (the program orders several flows by their deadlines)".into(),
        );
    }
    for (k, flow) in flows.iter().enumerate() {
        match refuses_flow(flow, max_frame) {
            Some(why) if flows.len() > 1 => {
                return Some(format!(
                    "{why} (the port's flow {} of {})",
                    k + 1,
                    flows.len()
                ))
            }
            Some(why) => return Some(why),
            None => {}
        }
    }
    let seed = seed_of(flows);
    let differing = dirty_past_headers(flows, &seed)
        .iter()
        .filter(|&&d| d)
        .count();
    if differing > MAX_REWRITE {
        return Some(format!(
            "frames of several sizes or flows that differ in {differing} bytes past their first {REWRITTEN_BYTES} (the kernel program rewrites at most {MAX_REWRITE} there)"
        ));
    }
    // Jumps reach at most 2^15 instructions: a program too long is refused, not loaded
    // wrong.
    assemble(flows, -1, -1).err()
}

/// Why the program cannot generate `flow`, one of its flows (None: it can).
fn refuses_flow(flow: &KernelFlow, max_frame: usize) -> Option<String> {
    let n = flow.templates.len();
    if n == 0 || flow.cycle.is_empty() || flow.cycle.iter().any(|&t| t as usize >= n) {
        return Some("a flow without frames (a strobe bug)".into());
    }
    if n > MAX_TEMPLATES {
        return Some(format!(
            "{n} frame sizes (the kernel program writes at most {MAX_TEMPLATES})"
        ));
    }
    if flow.cycle.len() > MAX_CYCLE {
        return Some(format!(
            "a sequence of sizes that repeats after {} frames (the kernel program keeps at most {MAX_CYCLE})",
            flow.cycle.len()
        ));
    }
    for t in &flow.templates {
        let len = t.frame.len();
        if len < 14 || len > max_frame {
            return Some(format!(
                "frames of {len} bytes (the kernel's pages take 14 to {max_frame})"
            ));
        }
    }
    if flow.fields.len() > MAX_FIELDS {
        return Some(format!(
            "{} varying fields (the kernel program writes at most {MAX_FIELDS})",
            flow.fields.len()
        ));
    }
    if flow.templates.iter().any(|t| {
        t.checksums.len() > MAX_CHECKSUMS || t.checksums.iter().any(|c| c.terms.len() > MAX_TERMS)
    }) {
        return Some("more checksum terms than the kernel program keeps".into());
    }
    let shortest = flow
        .templates
        .iter()
        .map(|t| t.frame.len())
        .min()
        .unwrap_or(0);
    let fits = |at: usize, n: usize, len: usize| at.checked_add(n).is_some_and(|end| end <= len);
    for f in &flow.fields {
        if !matches!(f.bytes, 1 | 2 | 4 | 6 | 8) || !fits(f.at, f.bytes, shortest) {
            return Some(format!(
                "a field of {} bytes at byte {} (the kernel program writes whole fields of 1, 2, 4, 6 or 8 bytes)",
                f.bytes, f.at
            ));
        }
        let sound = match &f.values {
            KernelValues::Counter { count, .. } => *count > 0,
            KernelValues::Listed(v) => !v.is_empty(),
            KernelValues::Random { lo, hi, .. } => lo <= hi,
        };
        if !sound {
            return Some("a field without values (a strobe bug)".into());
        }
    }
    if listed_values(flow) > MAX_LISTED {
        return Some(format!(
            "{} listed field values (the kernel program keeps at most {MAX_LISTED})",
            listed_values(flow)
        ));
    }
    for t in &flow.templates {
        let len = t.frame.len();
        let seq_ok = t.seq_at.is_none_or(|at| fits(at, 4, len))
            && t.trailer.is_none_or(|(at, n)| fits(at, n, len));
        let stamp_ok = t.stamp_at.is_none_or(|at| fits(at, 8, len));
        let checks_ok = t.checksums.iter().enumerate().all(|(c, k)| {
            fits(k.at, 2, len)
                && k.terms.iter().all(|&(v, shift)| {
                    shift < 16
                        && match v {
                            KernelValue::Field(i) => i < flow.fields.len(),
                            KernelValue::Seq | KernelValue::Stamp => true,
                            KernelValue::Checksum(i) => i < c,
                        }
                })
        });
        if !(seq_ok && stamp_ok && checks_ok) {
            return Some("a trailer or checksum outside the frame (a strobe bug)".into());
        }
    }
    None
}

/// The state's pacing fields for `pace` (the deadline is set by the first repetition).
pub(crate) fn pace_state(state: &mut GenState, pace: &KernelPace) {
    state.gap_ns = pace.gap_ns;
    state.gap_frac = u64::from(pace.gap_frac);
    state.burst = pace.burst.max(1);
    state.burst_gap_ns = pace.burst_gap_ns;
    state.late_tolerance_ns = pace.late_tolerance_ns;
}

/// The generator's idioms over its state value (r7).
trait StateAsm {
    /// dst = the u64 at `off` of the state value.
    fn load(&mut self, dst: u8, off: usize);
    fn store(&mut self, off: usize, src: u8);
    /// dst = reduce(src): the two 32-bit halves added (uses r3).
    fn reduce(&mut self, dst: u8, src: u8);
}

impl StateAsm for Asm {
    fn load(&mut self, dst: u8, off: usize) {
        self.op(LDX_MEM_DW, dst, 7, off as i16, 0);
    }
    fn store(&mut self, off: usize, src: u8) {
        self.op(STX_MEM_DW, 7, src, off as i16, 0);
    }
    fn reduce(&mut self, dst: u8, src: u8) {
        self.op(ALU64_MOV_X, dst, src, 0, 0);
        self.op(ALU64_RSH_K, dst, 0, 0, 32);
        self.op(ALU64_MOV_X, 3, src, 0, 0);
        self.op(ALU64_LSH_K, 3, 0, 0, 32);
        self.op(ALU64_RSH_K, 3, 0, 0, 32);
        self.op(ALU64_ADD_X, dst, 3, 0, 0);
    }
}

/// Bytes from the frame's start that the program writes into every page (the headers,
/// whatever the protocols), besides the trailer and what varies.
const REWRITTEN_BYTES: usize = 128;

/// Template `t`'s frame as the program writes it: with the fixed transmit stamp in it.
fn frame_of(flow: &KernelFlow, t: usize) -> Vec<u8> {
    let template = &flow.templates[t];
    let mut frame = template.frame.clone();
    if let (Some(at), KernelStamp::Fixed(ns)) = (template.stamp_at, flow.stamp) {
        frame[at..at + 8].copy_from_slice(&ns.to_be_bytes());
    }
    frame
}

/// The frame every page starts as: the longest of all flows' (shorter ones are cut from
/// it).
pub(crate) fn seed_of(flows: &[KernelFlow]) -> Vec<u8> {
    flows
        .iter()
        .flat_map(|f| (0..f.templates.len()).map(move |t| (f, t)))
        .max_by_key(|&(f, t)| f.templates[t].frame.len())
        .map_or_else(Vec::new, |(f, t)| frame_of(f, t))
}

/// The bytes past the headers that a page may hold from another frame than the one the
/// program writes: every template's trailer, varying field, checksum, sequence number and
/// stamp (what one flow writes per frame, another flow's frame may have constant there),
/// and wherever any template's frame differs from `seed`, the pages' first frame (a length
/// field past the first [`REWRITTEN_BYTES`] in deep encapsulations, a payload that moves
/// with the size, another flow's bytes). Everywhere else every frame of every flow has the
/// seed's bytes. Over the seed's length.
fn dirty_past_headers(flows: &[KernelFlow], seed: &[u8]) -> Vec<bool> {
    let mut dirty = vec![false; seed.len()];
    let mut mark = |at: usize, n: usize| {
        for d in dirty.iter_mut().take(at + n).skip(at.max(REWRITTEN_BYTES)) {
            *d = true;
        }
    };
    for flow in flows {
        for f in &flow.fields {
            mark(f.at, f.bytes);
        }
        for t in &flow.templates {
            let written = t.trailer.into_iter().chain(t.seq_at.map(|at| (at, 4)));
            let written = written.chain(t.stamp_at.map(|at| (at, 8)));
            for (at, n) in written.chain(t.checksums.iter().map(|k| (k.at, 2))) {
                mark(at, n);
            }
        }
    }
    for (flow, u) in flows
        .iter()
        .flat_map(|f| (0..f.templates.len()).map(move |u| (f, u)))
    {
        let frame = frame_of(flow, u);
        for (i, d) in dirty.iter_mut().enumerate().skip(REWRITTEN_BYTES) {
            *d |= frame.get(i).is_some_and(|b| *b != seed[i]);
        }
    }
    dirty
}

/// The byte ranges the program writes into a page for a frame of template `t`, `len` bytes
/// long (besides what varies): the first [`REWRITTEN_BYTES`] (the headers, whatever the
/// protocols: a receiver that forwards in place changes them in the page, which comes back
/// to the kernel's pool) and the `dirty` bytes within the frame. Ranges are at least 8
/// bytes (the stores' width; widening only takes in bytes every frame shares), sorted; they
/// may overlap.
fn rewritten(len: usize, dirty: &[bool]) -> Vec<(usize, usize)> {
    let is_dirty = |i: usize| i < REWRITTEN_BYTES || dirty.get(i).copied().unwrap_or(false);
    let mut ranges = Vec::new();
    let mut i = 0;
    while i < len {
        if !is_dirty(i) {
            i += 1;
            continue;
        }
        let from = i;
        while i < len && is_dirty(i) {
            i += 1;
        }
        let to = i.max(8.min(len));
        ranges.push((from.min(to.saturating_sub(8)), to));
    }
    ranges
}

/// Writes `bytes[from..to]` (at least 8 bytes) into the packet (r8), 8 at a time (the last
/// store overlaps the one before when the length is not a multiple of 8). Uses r1.
fn rewrite(a: &mut Asm, bytes: &[u8], from: usize, to: usize) {
    let mut at = from;
    while at < to {
        let at8 = if at + 8 <= to { at } else { to - 8 };
        let mut word = [0u8; 8];
        word.copy_from_slice(&bytes[at8..at8 + 8]);
        a.constant(1, u64::from_ne_bytes(word));
        a.op(STX_MEM_DW, 8, 1, at8 as i16, 0);
        at = at8 + 8;
    }
}

/// Keeps the time in register `time` (CLOCK_REALTIME ns) as the last frame's, and as the
/// first's when none is kept yet. Uses register `scratch`.
fn note_time(a: &mut Asm, time: u8, scratch: u8) {
    let first_set = a.label();
    a.store(ST_LAST as usize, time);
    a.load(scratch, ST_FIRST as usize);
    a.jump(JMP_JNE_K, scratch, 0, 0, first_set);
    a.store(ST_FIRST as usize, time);
    a.bind(first_set);
}

/// The stack slot (offset from r10) of a value the checksums sum.
fn slot(fields: usize, v: KernelValue) -> i16 {
    let index = match v {
        KernelValue::Field(i) => i,
        KernelValue::Seq => fields,
        KernelValue::Stamp => fields + 1,
        KernelValue::Checksum(c) => fields + 2 + c,
    };
    -8 * (index as i16 + 1)
}

/// The program for `flow` (checked by [`refuses`]), with its state in map `state_fd` and
/// the interface in DEVMAP `devmap_fd`:
///
/// ```text
/// if (st->hold || st->produced >= st->limit) { st->idle++; st->resync = 1; return XDP_DROP }
/// paced: now = bpf_ktime_get_ns(); if (!st->next || st->resync) { st->next = now; st->resync = 0 }
///     if (now < st->next) { st->early++; return XDP_DROP }
///     count lateness; st->next += gap (+ burst gap after a burst's last frame)
/// several sizes: t = cycle[st->cycle_k++ % len]; shorten the page's frame to t's length
/// if (data + len > data_end) { st->refused++; return XDP_DROP }
/// rewrite t's constant bytes that a receiver or another size may have changed
/// seq = st->seq++; write seq; for each field: write its value, step its state
/// if stamped per frame: t = bpf_ktime_get_ns() + st->offset; write t; st->last = t;
///     first ??= t
/// for each checksum: sum = base + Σ value << shift; write ~fold(sum)
/// st->produced++; return bpf_redirect_map(&devmap, 0, 0)
/// ```
///
/// Several flows (all paced) each have a state block; the hold switch and the idle and
/// early counts are the first's. Per repetition the program reads the clock once, picks
/// the flow with the earliest deadline among those with frames left (the first of equals;
/// a flow that (re)starts its schedule counts as due at once), sends nothing when that
/// deadline is still ahead, else writes that flow's frame as above with `st` its block.
pub(crate) fn program(
    flows: &[KernelFlow],
    state_fd: i32,
    devmap_fd: i32,
) -> Result<Vec<Insn>, String> {
    assemble(flows, state_fd, devmap_fd)
}

fn assemble(flows: &[KernelFlow], state_fd: i32, devmap_fd: i32) -> Result<Vec<Insn>, String> {
    let mut a = Asm::new();
    let (idle, refuse, early, send) = (a.label(), a.label(), a.label(), a.label());
    let blocks = blocks_at(flows);
    let block =
        |a: &mut Asm, f: usize| a.imm64(7, BPF_PSEUDO_MAP_VALUE, state_fd, blocks[f] as i32);
    // r6 ctx, r7 the flow's state block, r8 packet data.
    a.op(ALU64_MOV_X, 6, 1, 0, 0);
    block(&mut a, 0);
    a.op(LDX_MEM_W, 1, 7, ST_HOLD, 0);
    a.jump(JMP_JNE_K, 1, 0, 0, idle);
    let starts: Vec<_> = flows.iter().map(|_| a.label()).collect();
    if let [flow] = flows {
        a.load(1, ST_PRODUCED as usize);
        a.load(2, ST_LIMIT as usize);
        a.jump(JMP_JGE_X, 1, 2, 0, idle);
        if flow.pace.is_some() {
            a.op(JMP_CALL, 0, 0, 0, BPF_FUNC_KTIME_GET_NS);
        }
    } else {
        // r0 now, r8 the earliest deadline so far, r9 its flow (u64::MAX: none).
        a.op(JMP_CALL, 0, 0, 0, BPF_FUNC_KTIME_GET_NS);
        a.constant(8, u64::MAX);
        a.op(ALU64_MOV_K, 9, 0, 0, -1);
        for f in 0..flows.len() {
            let (skip, counted) = (a.label(), a.label());
            block(&mut a, f);
            a.load(1, ST_PRODUCED as usize);
            a.load(2, ST_LIMIT as usize);
            a.jump(JMP_JGE_X, 1, 2, 0, skip);
            a.load(1, ST_NEXT);
            a.load(2, ST_RESYNC);
            a.jump(JMP_JEQ_K, 2, 0, 0, counted);
            a.op(ALU64_MOV_K, 1, 0, 0, 0);
            a.bind(counted);
            a.jump(JMP_JGE_X, 1, 8, 0, skip);
            a.op(ALU64_MOV_X, 8, 1, 0, 0);
            a.op(ALU64_MOV_K, 9, 0, 0, f as i32);
            a.bind(skip);
        }
        block(&mut a, 0);
        a.jump(JMP_JEQ_K, 9, 0, -1, idle);
        a.jump(JMP_JGT_X, 8, 0, 0, early);
        for (f, &start) in starts.iter().enumerate() {
            a.jump(JMP_JEQ_K, 9, 0, f as i32, start);
        }
        a.jump(JMP_JA, 0, 0, 0, idle);
    }
    let seed = seed_of(flows);
    let dirty = dirty_past_headers(flows, &seed);
    for ((flow, &start), f) in flows.iter().zip(&starts).zip(0..) {
        a.bind(start);
        if flows.len() > 1 {
            block(&mut a, f);
        }
        if flow.pace.is_some() {
            pace(&mut a, early);
        }
        flow_frame(&mut a, flow, (&seed, &dirty), (refuse, send));
    }

    // Counted, then sent.
    a.bind(send);
    a.load(1, ST_PRODUCED as usize);
    a.op(ALU64_ADD_K, 1, 0, 0, 1);
    a.store(ST_PRODUCED as usize, 1);
    a.map(1, devmap_fd);
    a.op(ALU64_MOV_K, 2, 0, 0, 0);
    a.op(ALU64_MOV_K, 3, 0, 0, 0);
    a.op(JMP_CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP);
    a.op(JMP_EXIT, 0, 0, 0, 0);

    // The exits count in the first block (a refused page in the flow's).
    let paced = flows.iter().any(|f| f.pace.is_some());
    let mut exits = vec![(idle, ST_IDLE as usize), (refuse, ST_REFUSED as usize)];
    if paced {
        exits.push((early, ST_EARLY));
    }
    for (label, counter) in exits {
        a.bind(label);
        a.load(1, counter);
        a.op(ALU64_ADD_K, 1, 0, 0, 1);
        a.store(counter, 1);
        if label == idle {
            // Held: every schedule starts anew once resumed.
            a.op(ALU64_MOV_K, 1, 0, 0, 1);
            for f in (0..flows.len()).rev() {
                block(&mut a, f);
                a.store(ST_RESYNC, 1);
            }
        }
        a.op(ALU64_MOV_K, 0, 0, 0, XDP_DROP);
        a.op(JMP_EXIT, 0, 0, 0, 0);
    }
    a.finish()
}

/// Writes a frame of `flow` (its state block in r7), the next of its cycle of sizes, and
/// jumps to `send` (or to `refuse` when the page cannot hold it).
fn flow_frame(
    a: &mut Asm,
    flow: &KernelFlow,
    (seed, dirty): (&[u8], &[bool]),
    (refuse, send): (usize, usize),
) {
    let n = flow.templates.len();
    let bodies: Vec<usize> = (0..n).map(|_| a.label()).collect();
    if n > 1 {
        // The next size from the cycle (its position bounded for the verifier), stepped.
        let (bounded, stepped) = (a.label(), a.label());
        let len = flow.cycle.len() as i32;
        a.load(2, ST_CYCLE_K);
        a.jump(JMP_JLT_K, 2, 0, len, bounded);
        a.op(ALU64_MOV_K, 2, 0, 0, 0);
        a.bind(bounded);
        a.op(ALU64_MOV_X, 3, 2, 0, 0);
        a.op(ALU64_ADD_K, 3, 0, 0, 1);
        a.jump(JMP_JNE_K, 3, 0, len, stepped);
        a.op(ALU64_MOV_K, 3, 0, 0, 0);
        a.bind(stepped);
        a.store(ST_CYCLE_K, 3);
        a.op(ALU64_LSH_K, 2, 0, 0, 3);
        a.op(ALU64_ADD_X, 2, 7, 0, 0);
        a.op(ALU64_ADD_K, 2, 0, 0, cycle_at(flow) as i32);
        a.op(LDX_MEM_DW, 1, 2, 0, 0);
        for (t, &body) in bodies.iter().enumerate().skip(1) {
            a.jump(JMP_JEQ_K, 1, 0, t as i32, body);
        }
    }
    for (t, &body) in bodies.iter().enumerate() {
        a.bind(body);
        frame_body(a, flow, t, (seed, dirty), refuse);
        a.jump(JMP_JA, 0, 0, 0, send);
    }
}

/// Writes a frame of template `t` into the page (r6 ctx, r7 state; sets r8 to the packet):
/// its length, its constant bytes, the sequence number, the fields, the stamp, the
/// checksums. Jumps to `refuse` when the page cannot hold it.
fn frame_body(
    a: &mut Asm,
    flow: &KernelFlow,
    t: usize,
    (seed, dirty): (&[u8], &[bool]),
    refuse: usize,
) {
    let template = &flow.templates[t];
    let frame = frame_of(flow, t);
    let n = flow.fields.len();
    // Pages start as the longest frame, and every repetition as long as that again.
    let shorter = frame.len() as i64 - seed.len() as i64;
    if shorter != 0 {
        a.op(ALU64_MOV_X, 1, 6, 0, 0);
        a.op(ALU64_MOV_K, 2, 0, 0, shorter as i32);
        a.op(JMP_CALL, 0, 0, 0, BPF_FUNC_XDP_ADJUST_TAIL);
        a.jump(JMP_JNE_K, 0, 0, 0, refuse);
    }
    a.op(LDX_MEM_W, 8, 6, 0, 0);
    a.op(LDX_MEM_W, 9, 6, 4, 0);
    a.op(ALU64_MOV_X, 1, 8, 0, 0);
    a.op(ALU64_ADD_K, 1, 0, 0, frame.len() as i32);
    a.jump(JMP_JGT_X, 1, 9, 0, refuse);

    for (from, to) in rewritten(frame.len(), dirty) {
        rewrite(a, &frame, from, to);
    }

    // The sequence number.
    if let Some(at) = template.seq_at {
        a.op(LDX_MEM_W, 1, 7, ST_SEQ, 0);
        a.op(ALU64_MOV_X, 2, 1, 0, 0);
        a.op(ALU64_ADD_K, 2, 0, 0, 1);
        a.op(STX_MEM_W, 7, 2, ST_SEQ, 0);
        a.op(STX_MEM_DW, 10, 1, slot(n, KernelValue::Seq), 0);
        a.op(ALU_TO_BE, 1, 0, 0, 32);
        a.op(STX_MEM_W, 8, 1, at as i16, 0);
    } else {
        a.op(ALU64_MOV_K, 1, 0, 0, 0);
        a.op(STX_MEM_DW, 10, 1, slot(n, KernelValue::Seq), 0);
    }

    // Varying fields: the value into r1, written and kept for the checksums, then the
    // field's state stepped.
    let listed = listed_at(flow);
    for (i, f) in flow.fields.iter().enumerate() {
        let base = ST_FIELDS + i * FIELD_SIZE;
        let at = f.at as i16;
        match &f.values {
            KernelValues::Counter { .. } => a.load(1, base + F_CUR),
            KernelValues::Listed(values) => {
                // values[k]; k < len always, but the verifier wants it shown.
                let bounded = a.label();
                a.load(2, base + F_K);
                a.jump(JMP_JLT_K, 2, 0, values.len() as i32, bounded);
                a.op(ALU64_MOV_K, 2, 0, 0, 0);
                a.bind(bounded);
                a.op(ALU64_LSH_K, 2, 0, 0, 3);
                a.op(ALU64_ADD_X, 2, 7, 0, 0);
                a.op(ALU64_ADD_K, 2, 0, 0, listed[i] as i32);
                a.op(LDX_MEM_DW, 1, 2, 0, 0);
            }
            &KernelValues::Random { seed, lo, hi, .. } => {
                a.load(2, base + F_K);
                random_in(a, seed, lo, hi);
                a.constant(2, f.mask());
                a.op(ALU64_AND_X, 1, 2, 0, 0);
            }
        }
        if f.bytes <= 4 {
            a.op(STX_MEM_DW, 10, 1, slot(n, KernelValue::Field(i)), 0);
        } else {
            a.reduce(2, 1);
            a.op(STX_MEM_DW, 10, 2, slot(n, KernelValue::Field(i)), 0);
        }
        a.op(ALU64_MOV_X, 2, 1, 0, 0);
        match f.bytes {
            1 => a.op(STX_MEM_B, 8, 1, at, 0),
            2 => {
                a.op(ALU_TO_BE, 2, 0, 0, 16);
                a.op(STX_MEM_H, 8, 2, at, 0);
            }
            4 => {
                a.op(ALU_TO_BE, 2, 0, 0, 32);
                a.op(STX_MEM_W, 8, 2, at, 0);
            }
            6 => {
                a.op(ALU64_RSH_K, 2, 0, 0, 32);
                a.op(ALU_TO_BE, 2, 0, 0, 16);
                a.op(STX_MEM_H, 8, 2, at, 0);
                a.op(ALU64_MOV_X, 2, 1, 0, 0);
                a.op(ALU_TO_BE, 2, 0, 0, 32);
                a.op(STX_MEM_W, 8, 2, at + 2, 0);
            }
            _ => {
                a.op(ALU_TO_BE, 2, 0, 0, 64);
                a.op(STX_MEM_DW, 8, 2, at, 0);
            }
        }
        let (step, stored) = (a.label(), a.label());
        a.load(2, base + F_K);
        a.op(ALU64_ADD_K, 2, 0, 0, 1);
        a.load(3, base + F_COUNT);
        a.jump(JMP_JNE_X, 2, 3, 0, step);
        a.op(ALU64_MOV_K, 2, 0, 0, 0);
        if let KernelValues::Counter { .. } = f.values {
            a.load(1, base + F_START);
            a.jump(JMP_JA, 0, 0, 0, stored);
            a.bind(step);
            a.load(4, base + F_STEP);
            a.op(ALU64_ADD_X, 1, 4, 0, 0);
            a.load(4, base + F_MASK);
            a.op(ALU64_AND_X, 1, 4, 0, 0);
            a.bind(stored);
            a.store(base + F_CUR, 1);
        } else {
            a.bind(step);
            a.bind(stored);
        }
        a.store(base + F_K, 2);
    }

    // The transmit stamp, as late as the frame allows: only the checksums come after it.
    if let (Some(at), KernelStamp::PerFrame) = (template.stamp_at, flow.stamp) {
        a.op(JMP_CALL, 0, 0, 0, BPF_FUNC_KTIME_GET_NS);
        a.load(1, ST_OFFSET as usize);
        a.op(ALU64_ADD_X, 0, 1, 0, 0);
        note_time(a, 0, 1);
        a.reduce(2, 0);
        a.op(STX_MEM_DW, 10, 2, slot(n, KernelValue::Stamp), 0);
        a.op(ALU_TO_BE, 0, 0, 0, 64);
        a.op(STX_MEM_DW, 8, 0, at as i16, 0);
    } else {
        // A fixed stamp is in the frame the pages start as; its value still counts.
        let fixed = match (template.stamp_at, flow.stamp) {
            (Some(_), KernelStamp::Fixed(ns)) => (ns & 0xFFFF_FFFF) + (ns >> 32),
            _ => 0,
        };
        a.constant(1, fixed);
        a.op(STX_MEM_DW, 10, 1, slot(n, KernelValue::Stamp), 0);
    }

    // Checksums: the constant sum plus each value weighted, folded and complemented.
    for (c, k) in template.checksums.iter().enumerate() {
        a.constant(1, k.base);
        for &(v, shift) in &k.terms {
            a.op(LDX_MEM_DW, 2, 10, slot(n, v), 0);
            if shift > 0 {
                a.op(ALU64_LSH_K, 2, 0, 0, shift as i32);
            }
            a.op(ALU64_ADD_X, 1, 2, 0, 0);
        }
        a.reduce(2, 1);
        a.op(ALU64_MOV_X, 1, 2, 0, 0);
        for _ in 0..3 {
            a.op(ALU64_MOV_X, 2, 1, 0, 0);
            a.op(ALU64_RSH_K, 2, 0, 0, 16);
            a.op(ALU64_AND_K, 1, 0, 0, 0xFFFF);
            a.op(ALU64_ADD_X, 1, 2, 0, 0);
        }
        a.op(ALU64_XOR_K, 1, 0, 0, 0xFFFF);
        a.op(ALU64_AND_K, 1, 0, 0, 0xFFFF);
        if k.zero_as_ffff {
            let nonzero = a.label();
            a.jump(JMP_JNE_K, 1, 0, 0, nonzero);
            a.op(ALU64_MOV_K, 1, 0, 0, 0xFFFF);
            a.bind(nonzero);
        }
        a.op(STX_MEM_DW, 10, 1, slot(n, KernelValue::Checksum(c)), 0);
        a.op(ALU_TO_BE, 1, 0, 0, 16);
        a.op(STX_MEM_H, 8, 1, k.at as i16, 0);
    }
}

/// r1 = `strobe_model::random_in(seed, k, lo, hi)` for k in r2 (the engine's random values:
/// splitmix64's word k, scaled into the span by the high half of a 64×64-bit product, which
/// BPF has no instruction for: built from 32-bit halves). Uses r0 and r2–r5.
fn random_in(a: &mut Asm, seed: u64, lo: u64, hi: u64) {
    // z = seed + (k + 1)·γ, then splitmix64's finaliser.
    a.op(ALU64_ADD_K, 2, 0, 0, 1);
    a.constant(3, GOLDEN_GAMMA);
    a.op(ALU64_MUL_X, 2, 3, 0, 0);
    a.constant(3, seed);
    a.op(ALU64_ADD_X, 2, 3, 0, 0);
    for (shift, multiplier) in [(30, SPLITMIX_M1), (27, SPLITMIX_M2)] {
        a.op(ALU64_MOV_X, 3, 2, 0, 0);
        a.op(ALU64_RSH_K, 3, 0, 0, shift);
        a.op(ALU64_XOR_X, 2, 3, 0, 0);
        a.constant(3, multiplier);
        a.op(ALU64_MUL_X, 2, 3, 0, 0);
    }
    a.op(ALU64_MOV_X, 3, 2, 0, 0);
    a.op(ALU64_RSH_K, 3, 0, 0, 31);
    a.op(ALU64_XOR_X, 2, 3, 0, 0);
    // r2 is the word; r1 = lo + ((word · span) >> 64).
    let span_minus_one = hi - lo;
    if span_minus_one == u64::MAX {
        a.op(ALU64_MOV_X, 1, 2, 0, 0);
        return;
    }
    let span = span_minus_one + 1;
    // r2 = word's high half, r3 = its low half, r4 = span's low half, r5 = its high half.
    a.op(ALU64_MOV_X, 3, 2, 0, 0);
    a.op(ALU64_LSH_K, 3, 0, 0, 32);
    a.op(ALU64_RSH_K, 3, 0, 0, 32);
    a.op(ALU64_RSH_K, 2, 0, 0, 32);
    a.constant(4, span & 0xFFFF_FFFF);
    a.constant(5, span >> 32);
    // hi·lo_s + (lo·lo_s >> 32) cannot overflow; its high half carries into the result.
    a.op(ALU64_MOV_X, 0, 3, 0, 0);
    a.op(ALU64_MUL_X, 0, 4, 0, 0);
    a.op(ALU64_RSH_K, 0, 0, 0, 32);
    a.op(ALU64_MOV_X, 1, 2, 0, 0);
    a.op(ALU64_MUL_X, 1, 4, 0, 0);
    a.op(ALU64_ADD_X, 1, 0, 0, 0);
    // r0 = the sum's low half plus lo·hi_s (< 2^64), r1 = the sum's high half.
    a.op(ALU64_MOV_X, 0, 1, 0, 0);
    a.op(ALU64_LSH_K, 0, 0, 0, 32);
    a.op(ALU64_RSH_K, 0, 0, 0, 32);
    a.op(ALU64_RSH_K, 1, 0, 0, 32);
    a.op(ALU64_MUL_X, 3, 5, 0, 0);
    a.op(ALU64_ADD_X, 0, 3, 0, 0);
    // high = hi·hi_s + r1 + (r0 >> 32).
    a.op(ALU64_MUL_X, 2, 5, 0, 0);
    a.op(ALU64_ADD_X, 1, 2, 0, 0);
    a.op(ALU64_RSH_K, 0, 0, 0, 32);
    a.op(ALU64_ADD_X, 1, 0, 0, 0);
    a.constant(2, lo);
    a.op(ALU64_ADD_X, 1, 2, 0, 0);
}

/// splitmix64's constants, as `strobe_model::random_word` uses them.
const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;
const SPLITMIX_M1: u64 = 0xBF58_476D_1CE4_E5B9;
const SPLITMIX_M2: u64 = 0x94D0_49BB_1331_11EB;

/// A paced flow's deadline check (see [`program`]), the time in r0: on to the frame when
/// its deadline has come, else to `early`. Keeps r6 and r7; the first and last frame's
/// times are the deadline checks' (the stamp, when frames carry one, comes later and
/// overwrites them).
fn pace(a: &mut Asm, early: usize) {
    let (set, due, on_time, not_latest, same_burst) =
        (a.label(), a.label(), a.label(), a.label(), a.label());
    a.load(1, ST_NEXT);
    a.load(2, ST_RESYNC);
    a.jump(JMP_JNE_K, 2, 0, 0, set);
    a.jump(JMP_JNE_K, 1, 0, 0, due);
    a.bind(set);
    a.op(ALU64_MOV_X, 1, 0, 0, 0);
    a.op(ALU64_MOV_K, 2, 0, 0, 0);
    a.store(ST_RESYNC, 2);
    a.store(ST_NEXT_FRAC, 2);
    a.store(ST_IN_BURST, 2);
    a.bind(due);
    // r0 now, r1 the deadline.
    a.jump(JMP_JGT_X, 1, 0, 0, early);
    a.op(ALU64_MOV_X, 2, 0, 0, 0);
    a.op(ALU64_SUB_X, 2, 1, 0, 0);
    a.load(3, ST_LATE_TOLERANCE);
    a.jump(JMP_JGE_X, 3, 2, 0, on_time);
    a.load(4, ST_LATE);
    a.op(ALU64_ADD_K, 4, 0, 0, 1);
    a.store(ST_LATE, 4);
    a.bind(on_time);
    // Counted in its decade of lateness.
    let (decades, counted) = (
        (0..LATENESS_DECADES).map(|_| a.label()).collect::<Vec<_>>(),
        a.label(),
    );
    for (k, &limit) in LATENESS_LIMITS_NS.iter().enumerate() {
        a.constant(3, limit);
        a.jump(JMP_JGE_X, 3, 2, 0, decades[k]);
    }
    a.jump(JMP_JA, 0, 0, 0, decades[LATENESS_DECADES - 1]);
    for (k, &decade) in decades.iter().enumerate() {
        a.bind(decade);
        a.load(3, ST_LATENESS + 8 * k);
        a.op(ALU64_ADD_K, 3, 0, 0, 1);
        a.store(ST_LATENESS + 8 * k, 3);
        a.jump(JMP_JA, 0, 0, 0, counted);
    }
    a.bind(counted);
    a.load(3, ST_MAX_LATE);
    a.jump(JMP_JGE_X, 3, 2, 0, not_latest);
    a.store(ST_MAX_LATE, 2);
    a.bind(not_latest);
    // The first and last frame's time, on CLOCK_REALTIME.
    a.load(2, ST_OFFSET as usize);
    a.op(ALU64_ADD_X, 2, 0, 0, 0);
    note_time(a, 2, 3);
    // The next deadline: the gap's fraction carried into whole nanoseconds.
    a.load(2, ST_NEXT_FRAC);
    a.load(3, ST_GAP_FRAC);
    a.op(ALU64_ADD_X, 2, 3, 0, 0);
    a.op(ALU64_MOV_X, 3, 2, 0, 0);
    a.op(ALU64_RSH_K, 3, 0, 0, 32);
    a.op(ALU64_LSH_K, 2, 0, 0, 32);
    a.op(ALU64_RSH_K, 2, 0, 0, 32);
    a.store(ST_NEXT_FRAC, 2);
    a.op(ALU64_ADD_X, 1, 3, 0, 0);
    a.load(3, ST_GAP);
    a.op(ALU64_ADD_X, 1, 3, 0, 0);
    a.load(4, ST_IN_BURST);
    a.op(ALU64_ADD_K, 4, 0, 0, 1);
    a.load(5, ST_BURST);
    a.jump(JMP_JNE_X, 4, 5, 0, same_burst);
    a.op(ALU64_MOV_K, 4, 0, 0, 0);
    a.load(3, ST_BURST_GAP);
    a.op(ALU64_ADD_X, 1, 3, 0, 0);
    a.bind(same_burst);
    a.store(ST_IN_BURST, 4);
    a.store(ST_NEXT, 1);
}
