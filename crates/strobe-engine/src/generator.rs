//! Compiles a flow into prebuilt frame templates plus a short list of per-packet patches.
//!
//! Per packet the generator writes only the fields that vary (field patterns, the trailer's
//! sequence number and timestamp) and recomputes every checksum incrementally: each template
//! keeps, per checksum, the one's-complement sum of everything that never changes, and each
//! varying field adds its own contribution. One's-complement sums are sums modulo 65535 and
//! 2^16 ≡ 1 (mod 65535), so a field's contribution is its value times 2^r, where r only
//! depends on where the field ends relative to the checksum's 16-bit word grid (RFC 1071
//! §2(B), RFC 1624). That makes the update stateless: no previous-packet state, no rescans,
//! any template in any slot.

use strobe_io::kernel_frames::{
    KernelChecksum, KernelField, KernelFlow, KernelStamp, KernelTemplate, KernelValue, KernelValues,
};
use strobe_io::{TxSlot, MAX_BATCH};
use strobe_model::{FlowSpec, Pattern};
use strobe_wire::{bits, checksum, trailer, Built, Header};

use crate::EngineError;

/// Folds a sum into 16 bits with end-around carry (the value stays ≡ mod 65535).
#[inline(always)]
fn fold(mut x: u64) -> u64 {
    x = (x & 0xFFFF_FFFF) + (x >> 32);
    x = (x & 0xFFFF) + (x >> 16);
    x = (x & 0xFFFF) + (x >> 16);
    (x & 0xFFFF) + (x >> 16)
}

/// A representative of `v` mod 65535 below 2^33 (2^32 ≡ 1 mod 65535): cheaper than a full
/// fold and small enough that checksum terms can be summed unfolded.
#[inline(always)]
fn reduce(v: u64) -> u64 {
    (v & 0xFFFF_FFFF) + (v >> 32)
}

#[inline(always)]
fn reduce128(v: u128) -> u64 {
    reduce(v as u64) + reduce((v >> 64) as u64)
}

/// The power of two by which a field ending at absolute bit `end_bit` weighs in a checksum
/// whose words start at byte `range_start`.
fn weight_shift(end_bit: usize, range_start: usize) -> u8 {
    let d = (end_bit - range_start * 8) % 16;
    ((16 - d) % 16) as u8
}

/// Produces the j-th value of a field pattern, one step per packet, with OTG semantics
/// (`start ± (j % count)·step`, `values[j % len]`, seeded random), without division.
#[derive(Clone, Debug)]
enum ValueGen {
    /// Fields of up to 64 bits (nearly all) count in u64, wider ones in u128.
    Counter64(Counter<u64>),
    Counter(Counter<u128>),
    Table {
        values: Box<[u128]>,
        idx: usize,
    },
    Random {
        seed: u64,
        k: u64,
        count: u64,
        min: u128,
        max: u128,
    },
}

impl ValueGen {
    fn new(pattern: &Pattern, bit_len: u32) -> ValueGen {
        let mask = if bit_len >= 128 {
            u128::MAX
        } else {
            (1u128 << bit_len) - 1
        };
        match pattern {
            Pattern::Value(v) => ValueGen::Table {
                values: vec![*v & mask].into_boxed_slice(),
                idx: 0,
            },
            Pattern::Values(vs) => ValueGen::Table {
                values: vs.iter().map(|v| v & mask).collect(),
                idx: 0,
            },
            Pattern::Increment { start, step, count }
            | Pattern::Decrement { start, step, count } => {
                let step = if matches!(pattern, Pattern::Decrement { .. }) {
                    step.wrapping_neg() & mask
                } else {
                    step & mask
                };
                let count = (*count).max(1);
                let start = start & mask;
                if bit_len <= 64 {
                    ValueGen::Counter64(Counter {
                        start: start as u64,
                        step: step as u64,
                        count,
                        k: 0,
                        cur: start as u64,
                        mask: mask as u64,
                    })
                } else {
                    ValueGen::Counter(Counter {
                        start,
                        step,
                        count,
                        k: 0,
                        cur: start,
                        mask,
                    })
                }
            }
            Pattern::Random {
                min,
                max,
                seed,
                count,
            } => ValueGen::Random {
                seed: *seed,
                k: 0,
                count: *count,
                min: *min,
                max: *max,
            },
        }
    }

    /// The values of the next `out.len()` packets, in order: one dispatch per batch, then a
    /// tight loop. `T` is u64 for fields of up to 64 bits (cheaper arithmetic), else u128.
    #[inline]
    fn fill<T: FieldValue>(&mut self, out: &mut [T]) {
        match self {
            ValueGen::Counter64(c) => {
                for o in out {
                    *o = T::from_u64(c.next());
                }
            }
            ValueGen::Counter(c) => {
                for o in out {
                    *o = T::from_u128(c.next());
                }
            }
            ValueGen::Table { values, idx } => {
                for o in out {
                    *o = T::from_u128(values[*idx]);
                    *idx += 1;
                    if *idx == values.len() {
                        *idx = 0;
                    }
                }
            }
            ValueGen::Random {
                seed,
                k,
                count,
                min,
                max,
            } => {
                for o in out {
                    *o = T::from_u128(strobe_model::random_in(*seed, *k, *min, *max));
                    *k += 1;
                    if *k == *count {
                        *k = 0;
                    }
                }
            }
        }
    }
}

/// OTG increment/decrement: `start + (j % count)·step` modulo the field width, stepped one
/// packet at a time without division. A decrement is an increment by the two's complement.
#[derive(Clone, Debug)]
struct Counter<W> {
    start: W,
    step: W,
    count: u64,
    k: u64,
    cur: W,
    mask: W,
}

impl<W: Word> Counter<W> {
    #[inline(always)]
    fn next(&mut self) -> W {
        let v = self.cur;
        self.k += 1;
        if self.k == self.count {
            self.k = 0;
            self.cur = self.start;
        } else {
            self.cur = self.cur.wrapping_add(self.step) & self.mask;
        }
        v
    }
}

/// The unsigned words a counter runs in.
trait Word: Copy + std::ops::BitAnd<Output = Self> {
    fn wrapping_add(self, other: Self) -> Self;
}

impl Word for u64 {
    #[inline(always)]
    fn wrapping_add(self, other: Self) -> Self {
        u64::wrapping_add(self, other)
    }
}

impl Word for u128 {
    #[inline(always)]
    fn wrapping_add(self, other: Self) -> Self {
        u128::wrapping_add(self, other)
    }
}

/// The integer a batch of field values is produced in. Values always fit: u64 is only used
/// for fields of at most 64 bits.
trait FieldValue: Copy {
    fn from_u64(v: u64) -> Self;
    fn from_u128(v: u128) -> Self;
}

impl FieldValue for u64 {
    #[inline(always)]
    fn from_u64(v: u64) -> Self {
        v
    }
    #[inline(always)]
    fn from_u128(v: u128) -> Self {
        v as u64
    }
}

impl FieldValue for u128 {
    #[inline(always)]
    fn from_u64(v: u64) -> Self {
        v as u128
    }
    #[inline(always)]
    fn from_u128(v: u128) -> Self {
        v
    }
}

/// A header field whose value changes from packet to packet.
#[derive(Clone, Debug)]
struct VarField {
    bit_offset: usize,
    bit_len: u32,
    /// (byte offset, byte count) when the field is whole bytes: written without bit ops.
    whole_bytes: Option<(usize, usize)>,
    gen: ValueGen,
}

/// Size of a flow's per-packet value table: varying fields, then the trailer's sequence
/// number and timestamp, then checksums (nested checksums feed outer ones).
const VALUES: usize = 256;
/// Most varying fields a flow may have (the rest of the table holds trailer and checksums).
pub const MAX_VARYING_FIELDS: usize = 200;

/// One term of a checksum: value `src` of this packet's table weighted by 2^shift.
#[derive(Clone, Copy, Debug)]
struct Term {
    src: u8,
    shift: u8,
}

#[derive(Clone, Debug)]
struct CsumPlan {
    at: usize,
    base: u64,
    zero_as_ffff: bool,
    terms: Vec<Term>,
}

#[derive(Clone, Debug)]
struct Template {
    bytes: Box<[u8]>,
    /// Frame size including FCS, as configured.
    size: u32,
    csums: Vec<CsumPlan>,
    /// Byte offset of the trailer, when the flow is instrumented.
    trailer_at: Option<usize>,
}

/// A compiled flow: templates (one per distinct frame size), varying fields, and the
/// per-packet value table they share with the checksum plans.
#[derive(Clone, Debug)]
pub struct FlowGenerator {
    pub name: String,
    pub id: u16,
    templates: Vec<Template>,
    /// Template index by frame size (incl. FCS).
    by_size: Vec<u16>,
    fields: Vec<VarField>,
    /// Index of the trailer's sequence number in the value table (after the fields).
    seq_at: usize,
    /// Checksums recomputed per packet (the same for every template of the flow).
    n_csums: usize,
    instrumented: bool,
    seq: u32,
    /// The run tag the trailers carry (templates built later carry it too).
    tag: u8,
    /// A flow with metric tags: each frame's trailer carries its tag position's flow id.
    positions: Option<TagPositions>,
}

/// The trailer of a frame whose template puts it at `at`.
#[inline(always)]
fn trailer_of(buf: &mut [u8], at: usize) -> &mut [u8; trailer::LEN] {
    (&mut buf[at..at + trailer::LEN])
        .try_into()
        .expect("trailer fits: checked at compile time")
}

/// Writes a frame's sequence number and transmit stamp into its trailer.
#[inline(always)]
fn stamp_trailer(dst: &mut [u8; trailer::LEN], seq: u32, tx_ns: u64) {
    dst[trailer::SEQ_OFFSET..trailer::SEQ_OFFSET + 4].copy_from_slice(&seq.to_be_bytes());
    dst[trailer::TIMESTAMP_OFFSET..].copy_from_slice(&tx_ns.to_be_bytes());
}

/// The sending side of a flow's tag positions ([`strobe_model::TagPlan`]): frame `j` is in
/// position `j % L`, carries that position's flow id and sequence number `j / L` (counted
/// from the run's first), so each position is a flow of its own to the receivers.
#[derive(Clone, Debug)]
struct TagPositions {
    ids: Box<[u16]>,
    /// The next frame's position, and how many times every position has been used.
    next: usize,
    round: u32,
    /// Frames and bytes (without FCS) sent in each position.
    frames: Box<[u64]>,
    bytes: Box<[u64]>,
}

const NO_TEMPLATE: u16 = u16::MAX;

/// One frame size's template: the frame built, its trailer (tag `tag`, when instrumented)
/// and its checksum plans for the varying `fields`.
fn template(
    flow: &FlowSpec,
    base_headers: &[Header],
    size: u32,
    tag: u8,
    fields: &[VarField],
) -> Result<Template, EngineError> {
    let tagged = !flow.tag_ids.is_empty();
    let instrumented = flow.metrics.instrument;
    let built = build_frame(flow, base_headers, size)?;
    let mut bytes = built.bytes.clone();
    let trailer_at = if instrumented {
        let at = bytes
            .len()
            .checked_sub(trailer::LEN)
            .filter(|&at| at >= built.payload.start);
        let Some(at) = at else {
            return Err(EngineError::Flow {
                flow: flow.name.clone(),
                message: format!(
                    "frame size {size} leaves no room for the {}-byte instrumentation trailer",
                    trailer::LEN
                ),
            });
        };
        let t = trailer::Trailer::sent(tag, flow.id, 0, 0);
        let dst: &mut [u8; trailer::LEN] = (&mut bytes[at..at + trailer::LEN])
            .try_into()
            .expect("trailer slice has trailer length");
        t.write(dst);
        Some(at)
    } else {
        None
    };
    let csums = plan_checksums(&built, &bytes, fields, trailer_at, tagged);
    // The template holds valid checksums for its own contents, so a frame copied
    // from it is correct even before any patch.
    let mut bytes = bytes.into_boxed_slice();
    finish_template(&mut bytes, &built);
    Ok(Template {
        bytes,
        size,
        csums,
        trailer_at,
    })
}

impl FlowGenerator {
    /// Builds templates for every frame size the flow can use, trailers (if any) carrying
    /// run tag `tag` and sequence numbers from `seq_start`.
    pub fn compile(flow: &FlowSpec, tag: u8, seq_start: u32) -> Result<FlowGenerator, EngineError> {
        let base_headers: Vec<Header> = flow.packet.iter().map(|h| h.header_at(0)).collect();
        let instrumented = flow.metrics.instrument;
        let sizes = flow.size.distinct_sizes();
        let max_size = sizes.iter().copied().max().unwrap_or(64) as usize;
        let mut by_size = vec![NO_TEMPLATE; max_size + 1];
        if sizes.len() >= NO_TEMPLATE as usize {
            return Err(EngineError::Flow {
                flow: flow.name.clone(),
                message: format!(
                    "{} distinct frame sizes; at most 65534 are supported",
                    sizes.len()
                ),
            });
        }

        // Varying fields: everything whose pattern is not a single value.
        let mut fields = Vec::new();
        let probe = build_frame(flow, &base_headers, sizes[0])?;
        for (h, spec) in flow.packet.iter().enumerate() {
            let defs = spec.kind.fields();
            for fp in &spec.fields {
                if fp.pattern.is_constant() {
                    continue;
                }
                let def = &defs[fp.field_index];
                if !def.on_wire() {
                    continue;
                }
                let bit_offset = probe.field_bit_offset(h, fp.field_index);
                let whole_bytes = (bit_offset % 8 == 0 && def.bit_len % 8 == 0)
                    .then_some((bit_offset / 8, def.bit_len as usize / 8));
                fields.push(VarField {
                    bit_offset,
                    bit_len: def.bit_len,
                    whole_bytes,
                    gen: ValueGen::new(&fp.pattern, def.bit_len),
                });
            }
        }

        if fields.len() > MAX_VARYING_FIELDS {
            return Err(EngineError::Flow {
                flow: flow.name.clone(),
                message: format!(
                    "{} varying fields; at most {MAX_VARYING_FIELDS} are supported",
                    fields.len()
                ),
            });
        }
        let mut templates = Vec::with_capacity(sizes.len());
        for (t, &size) in sizes.iter().enumerate() {
            templates.push(template(flow, &base_headers, size, tag, &fields)?);
            by_size[size as usize] = t as u16;
        }
        let n_csums = templates.first().map_or(0, |t| t.csums.len());
        let n = flow.tag_ids.len();
        let positions = (n > 0 && instrumented).then(|| TagPositions {
            ids: flow.tag_ids.clone().into_boxed_slice(),
            next: 0,
            round: 0,
            frames: vec![0; n].into_boxed_slice(),
            bytes: vec![0; n].into_boxed_slice(),
        });
        Ok(FlowGenerator {
            positions,
            name: flow.name.clone(),
            id: flow.id,
            templates,
            by_size,
            seq_at: fields.len(),
            n_csums,
            fields,
            instrumented,
            seq: seq_start,
            tag,
        })
    }

    /// Makes `size` (with FCS) one of the flow's frame sizes, building its template if it
    /// has none: a live size change, applied between hand-overs (this allocates, once per
    /// change, never per frame). Returns the size's template.
    pub fn add_size(&mut self, flow: &FlowSpec, size: u32) -> Result<u16, EngineError> {
        if let Some(&t) = self
            .by_size
            .get(size as usize)
            .filter(|&&t| t != NO_TEMPLATE)
        {
            return Ok(t);
        }
        let too_many = || EngineError::Flow {
            flow: flow.name.clone(),
            message: "too many distinct frame sizes; at most 65534 are supported".into(),
        };
        let t = u16::try_from(self.templates.len())
            .ok()
            .filter(|&t| t != NO_TEMPLATE)
            .ok_or_else(too_many)?;
        let base_headers: Vec<Header> = flow.packet.iter().map(|h| h.header_at(0)).collect();
        let built = template(flow, &base_headers, size, self.tag, &self.fields)?;
        // Checksum plans are the same for every template: a template that disagrees would
        // have the per-frame patches write out of its plans.
        if built.csums.len() != self.n_csums {
            return Err(EngineError::Flow {
                flow: flow.name.clone(),
                message: format!("frame size {size} changes the frame's checksums"),
            });
        }
        if self.by_size.len() <= size as usize {
            self.by_size.resize(size as usize + 1, NO_TEMPLATE);
        }
        self.templates.push(built);
        self.by_size[size as usize] = t;
        Ok(t)
    }

    /// A tagged flow's frames and bytes (without FCS) per tag position so far.
    pub fn tag_counts(&self) -> Option<(&[u16], &[u64], &[u64])> {
        self.positions
            .as_ref()
            .map(|p| (&p.ids[..], &p.frames[..], &p.bytes[..]))
    }

    /// The tag positions the last `k` frames used (at most every position once), for
    /// publishing their counts.
    pub fn last_positions(&self, k: usize) -> impl Iterator<Item = usize> + '_ {
        let n = self.positions.as_ref().map_or(0, |p| p.ids.len());
        let next = self.positions.as_ref().map_or(0, |p| p.next);
        (1..=k.min(n)).map(move |back| (next + n - back) % n)
    }

    pub fn instrumented(&self) -> bool {
        self.instrumented
    }

    /// The source MAC of this flow's frames (None when they do not start with Ethernet).
    pub fn source_mac(&self) -> Option<[u8; 6]> {
        let t = self.templates.first()?;
        t.bytes.get(6..12)?.try_into().ok()
    }

    /// Template index for a frame size produced by the flow's size sequence.
    #[inline(always)]
    pub fn template_for(&self, size: u32) -> u16 {
        self.by_size[size as usize]
    }

    /// Frame length on the wire (without FCS) of a template.
    #[inline(always)]
    pub fn frame_len(&self, template: u16) -> usize {
        self.templates[template as usize].bytes.len()
    }

    pub fn frame_size(&self, template: u16) -> u32 {
        self.templates[template as usize].size
    }

    /// This flow as a backend can generate it by itself ([`KernelFlow`]): from the next
    /// frame on, `frames` of them (None: until stopped), carrying transmit stamp `stamp`,
    /// their sizes `sizes` over and over (the flow's size sequence, one period of it).
    /// Why not, in words, when the flow needs what only the engine does: fields not in
    /// whole bytes of 1, 2, 4, 6 or 8, wider values.
    pub fn kernel_flow(
        &self,
        frames: Option<u64>,
        stamp: KernelStamp,
        sizes: &[u32],
    ) -> Result<KernelFlow, String> {
        if self.positions.is_some() {
            return Err("metric tags (a trailer flow id per tag position)".into());
        }
        let cycle = sizes
            .iter()
            .map(|&size| {
                self.by_size
                    .get(size as usize)
                    .copied()
                    .filter(|&t| (t as usize) < self.templates.len())
                    .ok_or_else(|| format!("a frame size {size} without a template (a strobe bug)"))
            })
            .collect::<Result<Vec<u16>, String>>()?;
        if cycle.is_empty() {
            return Err("a flow without frame sizes (a strobe bug)".into());
        }
        let mut fields = Vec::with_capacity(self.fields.len());
        for f in &self.fields {
            let Some((at, bytes)) = f
                .whole_bytes
                .filter(|&(_, n)| matches!(n, 1 | 2 | 4 | 6 | 8))
            else {
                return Err(format!(
                    "a varying field of {} bits at bit {} (whole fields of 1, 2, 4, 6 or 8 bytes only)",
                    f.bit_len, f.bit_offset
                ));
            };
            let values = match &f.gen {
                ValueGen::Counter64(c) if c.k == 0 => KernelValues::Counter {
                    start: c.start,
                    step: c.step,
                    count: c.count,
                },
                ValueGen::Table { values, idx: 0 } => {
                    KernelValues::Listed(values.iter().map(|&v| v as u64).collect())
                }
                &ValueGen::Random {
                    seed,
                    k: 0,
                    count,
                    min,
                    max,
                } => {
                    let (lo, hi) = (min.min(max), min.max(max));
                    let (Ok(lo), Ok(hi)) = (u64::try_from(lo), u64::try_from(hi)) else {
                        return Err("random values above 2^64 (64-bit values only)".into());
                    };
                    KernelValues::Random {
                        seed,
                        lo,
                        hi,
                        count,
                    }
                }
                ValueGen::Counter(_) => {
                    return Err("a counter wider than 64 bits (64-bit values only)".into())
                }
                _ => return Err("a field already under way (a strobe bug)".into()),
            };
            fields.push(KernelField { at, bytes, values });
        }
        let n = self.fields.len();
        let value = |src: u8| match src as usize {
            i if i < n => KernelValue::Field(i),
            i if i == n => KernelValue::Seq,
            i if i == n + 1 => KernelValue::Stamp,
            i => KernelValue::Checksum(i - n - 2),
        };
        let templates = self
            .templates
            .iter()
            .map(|t| KernelTemplate {
                frame: t.bytes.to_vec(),
                trailer: t.trailer_at.map(|at| (at, trailer::LEN)),
                seq_at: t.trailer_at.map(|at| at + trailer::SEQ_OFFSET),
                stamp_at: t.trailer_at.map(|at| at + trailer::TIMESTAMP_OFFSET),
                checksums: t
                    .csums
                    .iter()
                    .map(|c| KernelChecksum {
                        at: c.at,
                        base: c.base,
                        zero_as_ffff: c.zero_as_ffff,
                        terms: c
                            .terms
                            .iter()
                            .map(|term| (value(term.src), term.shift))
                            .collect(),
                    })
                    .collect(),
            })
            .collect();
        Ok(KernelFlow {
            templates,
            cycle,
            fields,
            seq_start: self.seq,
            stamp,
            frames,
            pace: None,
        })
    }

    /// Writes this flow's next packets into `slots[which[0]]`, `slots[which[1]]`, … in
    /// order; packet j uses template `templates[j]`. `holds` says which template each slot
    /// (by id) already contains and is kept up to date: a template is copied only when the
    /// slot held another. Sets each slot's `len`. The work runs phase by phase over the
    /// batch (templates and trailer, then each field, then each checksum) so that every
    /// loop is tight and every dispatch happens once per batch.
    pub fn write_batch(
        &mut self,
        slots: &mut [TxSlot<'_>],
        which: &[u16],
        templates: &[u16],
        tx_time: TxTime,
        holds: &mut [u32],
        scratch: &mut BatchScratch,
    ) {
        let k = which.len().min(MAX_BATCH);
        let (which, templates) = (&which[..k], &templates[..k]);
        let vals = &mut scratch.vals;
        let at = |value: usize, j: usize| (value * MAX_BATCH + j) & (VALUE_SLOTS - 1);
        let seq_at = self.seq_at;

        // Templates and lengths.
        for (&w, &tid) in which.iter().zip(templates) {
            let slot = &mut slots[w as usize];
            let t = &self.templates[tid as usize];
            let len = t.bytes.len();
            let key = ((self.id as u32) << 16) | tid as u32;
            let held = &mut holds[slot.id as usize];
            if *held != key {
                slot.buf[..len].copy_from_slice(&t.bytes);
                *held = key;
            }
            slot.len = len;
        }

        // The trailer: sequence number and timestamp (every template of a flow has one, or
        // none has).
        if let Some(p) = &mut self.positions {
            // Tagged: the flow id and sequence number are one 6-byte value per frame.
            let (seqs, rest) = vals[seq_at * MAX_BATCH..].split_at_mut(MAX_BATCH);
            let stamps = &mut rest[..MAX_BATCH];
            let fcs = u64::from(strobe_model::FCS_LEN);
            for (j, (&w, &tid)) in which.iter().zip(templates).enumerate() {
                let slot = &mut slots[w as usize];
                let t = &self.templates[tid as usize];
                let tr = t.trailer_at.unwrap_or(0);
                let tx_ns = match tx_time {
                    TxTime::Same(ns) => ns,
                    TxTime::Scheduled => slot.scheduled_ns,
                };
                let r = p.next;
                let (id, seq) = (p.ids[r], self.seq.wrapping_add(p.round));
                let dst = trailer_of(slot.buf, tr);
                dst[trailer::FLOW_ID_OFFSET..trailer::FLOW_ID_OFFSET + 2]
                    .copy_from_slice(&id.to_be_bytes());
                stamp_trailer(dst, seq, tx_ns);
                seqs[j] = reduce((u64::from(id) << 32) | u64::from(seq));
                stamps[j] = reduce(tx_ns);
                p.frames[r] += 1;
                p.bytes[r] += u64::from(t.size).saturating_sub(fcs);
                p.next += 1;
                if p.next == p.ids.len() {
                    p.next = 0;
                    p.round = p.round.wrapping_add(1);
                }
            }
        } else if self.instrumented {
            let (seqs, rest) = vals[seq_at * MAX_BATCH..].split_at_mut(MAX_BATCH);
            let stamps = &mut rest[..MAX_BATCH];
            for (j, (&w, &tid)) in which.iter().zip(templates).enumerate() {
                let slot = &mut slots[w as usize];
                let tr = self.templates[tid as usize].trailer_at.unwrap_or(0);
                let tx_ns = match tx_time {
                    TxTime::Same(ns) => ns,
                    TxTime::Scheduled => slot.scheduled_ns,
                };
                let seq = self.seq.wrapping_add(j as u32);
                stamp_trailer(trailer_of(slot.buf, tr), seq, tx_ns);
                seqs[j] = seq as u64;
                stamps[j] = reduce(tx_ns);
            }
        }
        if self.positions.is_none() {
            self.seq = self.seq.wrapping_add(k as u32);
        }

        // Each varying field over the whole batch.
        for (i, f) in self.fields.iter_mut().enumerate() {
            let out = &mut vals[i * MAX_BATCH..i * MAX_BATCH + k];
            if f.bit_len <= 64 {
                let values = &mut scratch.narrow[..k];
                f.gen.fill(values);
                match f.whole_bytes {
                    Some((off, 2)) => put::<2>(slots, which, off, values, out),
                    Some((off, 4)) => put::<4>(slots, which, off, values, out),
                    Some((off, 6)) => put::<6>(slots, which, off, values, out),
                    Some((off, 1)) => put::<1>(slots, which, off, values, out),
                    Some((off, 8)) => put::<8>(slots, which, off, values, out),
                    _ => {
                        for ((&w, &v), o) in which.iter().zip(values.iter()).zip(out.iter_mut()) {
                            bits::write_bits(
                                slots[w as usize].buf,
                                f.bit_offset,
                                f.bit_len,
                                v as u128,
                            );
                            *o = reduce(v);
                        }
                    }
                }
            } else {
                let values = &mut scratch.wide[..k];
                f.gen.fill(values);
                for ((&w, &v), o) in which.iter().zip(values.iter()).zip(out.iter_mut()) {
                    match f.whole_bytes {
                        Some((off, n)) => slots[w as usize].buf[off..off + n]
                            .copy_from_slice(&v.to_be_bytes()[16 - n..]),
                        None => bits::write_bits(slots[w as usize].buf, f.bit_offset, f.bit_len, v),
                    }
                    *o = reduce128(v);
                }
            }
        }

        // Each checksum over the whole batch, innermost first.
        if self.templates.len() == 1 {
            // One template: the same plan for every packet, so each term is one contiguous
            // add across the batch (vectorisable), then one fold per packet.
            let sums = &mut scratch.sums[..k];
            for (c, plan) in self.templates[0].csums.iter().enumerate() {
                sums.fill(plan.base);
                for term in &plan.terms {
                    let src = term.src as usize * MAX_BATCH;
                    for (sum, v) in sums.iter_mut().zip(&vals[src..src + k]) {
                        *sum += v << term.shift;
                    }
                }
                let dst = (seq_at + 2 + c) * MAX_BATCH;
                for ((&w, &sum), out) in which.iter().zip(sums.iter()).zip(&mut vals[dst..dst + k])
                {
                    let value = finish_checksum(sum, plan.zero_as_ffff);
                    slots[w as usize].buf[plan.at..plan.at + 2]
                        .copy_from_slice(&value.to_be_bytes());
                    *out = value as u64;
                }
            }
        } else {
            for c in 0..self.n_csums {
                for (j, (&w, &tid)) in which.iter().zip(templates).enumerate() {
                    let plan = &self.templates[tid as usize].csums[c];
                    let mut sum = plan.base;
                    for term in &plan.terms {
                        sum += vals[at(term.src as usize, j)] << term.shift;
                    }
                    let value = finish_checksum(sum, plan.zero_as_ffff);
                    slots[w as usize].buf[plan.at..plan.at + 2]
                        .copy_from_slice(&value.to_be_bytes());
                    vals[at(seq_at + 2 + c, j)] = value as u64;
                }
            }
        }
    }
}

/// The checksum field value for a one's-complement sum. Terms stay below 2^49, so sums of
/// them never overflow and need only this one fold.
#[inline(always)]
fn finish_checksum(sum: u64, zero_as_ffff: bool) -> u16 {
    let value = !(fold(sum) as u16);
    if value == 0 && zero_as_ffff {
        0xFFFF
    } else {
        value
    }
}

/// Writes an N-byte (N <= 8) field big-endian into every packet of the batch and keeps its
/// reduced value; N is a constant so each store is a single instruction.
#[inline(always)]
fn put<const N: usize>(
    slots: &mut [TxSlot<'_>],
    which: &[u16],
    off: usize,
    values: &[u64],
    out: &mut [u64],
) {
    for ((&w, &v), o) in which.iter().zip(values).zip(out.iter_mut()) {
        let bytes = v.to_be_bytes();
        let dst: &mut [u8; N] = (&mut slots[w as usize].buf[off..off + N])
            .try_into()
            .expect("N bytes");
        dst.copy_from_slice(&bytes[8 - N..]);
        *o = reduce(v);
    }
}

/// The timestamp written into the trailers of a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxTime {
    /// One clock reading for the whole batch (handed over at once).
    Same(u64),
    /// Each frame's own scheduled departure (traces in scheduled time).
    Scheduled,
}

/// Entries of the batch value table: [`VALUES`] values for each of [`MAX_BATCH`] packets.
const VALUE_SLOTS: usize = VALUES * MAX_BATCH;

/// Per-worker scratch space for [`FlowGenerator::write_batch`], allocated once.
pub struct BatchScratch {
    vals: Box<[u64; VALUE_SLOTS]>,
    wide: Box<[u128; MAX_BATCH]>,
    narrow: Box<[u64; MAX_BATCH]>,
    sums: Box<[u64; MAX_BATCH]>,
}

impl BatchScratch {
    pub fn new() -> Self {
        BatchScratch {
            // Built on the heap: the table is 512 KiB, too big for a stack temporary.
            vals: vec![0; VALUE_SLOTS]
                .into_boxed_slice()
                .try_into()
                .expect("length is VALUE_SLOTS"),
            wide: Box::new([0; MAX_BATCH]),
            narrow: Box::new([0; MAX_BATCH]),
            sums: Box::new([0; MAX_BATCH]),
        }
    }
}

impl Default for BatchScratch {
    fn default() -> Self {
        Self::new()
    }
}

fn build_frame(flow: &FlowSpec, headers: &[Header], size: u32) -> Result<Built, EngineError> {
    let frame_len = (size as usize)
        .checked_sub(4)
        .ok_or_else(|| EngineError::Flow {
            flow: flow.name.clone(),
            message: format!("frame size {size} is smaller than the 4-byte FCS"),
        })?;
    strobe_wire::build(headers, frame_len, &flow.payload).map_err(|e| EngineError::Flow {
        flow: flow.name.clone(),
        message: e.to_string(),
    })
}

/// Rewrites every computed checksum of a template from its full definition.
fn finish_template(bytes: &mut [u8], built: &Built) {
    for spec in &built.checksums {
        spec.write(bytes);
    }
}

/// For each checksum that can change from packet to packet: the sum of its constant part,
/// and the terms for what varies. Checksums over constant bytes only are left out: the
/// template already holds their value.
fn plan_checksums(
    built: &Built,
    bytes: &[u8],
    fields: &[VarField],
    trailer_at: Option<usize>,
    tagged: bool,
) -> Vec<CsumPlan> {
    // (start bit, end bit, value index) of everything that varies.
    let seq_at = fields.len();
    let mut varying: Vec<(usize, usize, usize)> = fields
        .iter()
        .enumerate()
        .map(|(i, f)| (f.bit_offset, f.bit_offset + f.bit_len as usize, i))
        .collect();
    // The constant part: the frame with every varying bit zeroed.
    let mut constant = bytes.to_vec();
    for f in fields {
        bits::write_bits(&mut constant, f.bit_offset, f.bit_len, 0);
    }
    if let Some(at) = trailer_at {
        // A tagged flow's flow id varies too: with the sequence number right after it,
        // it is one value of 6 bytes.
        let seq = at + trailer::SEQ_OFFSET;
        let from = if tagged {
            at + trailer::FLOW_ID_OFFSET
        } else {
            seq
        };
        let ts = at + trailer::TIMESTAMP_OFFSET;
        constant[from..seq + 4].fill(0);
        constant[ts..ts + 8].fill(0);
        varying.push((from * 8, (seq + 4) * 8, seq_at));
        varying.push((ts * 8, (ts + 8) * 8, seq_at + 1));
    }
    let mut plans = Vec::new();
    // Innermost first, so a checksum knows whether the inner ones it covers vary.
    for spec in &built.checksums {
        let covering = |start: usize, end: usize| {
            spec.covers
                .iter()
                .find(|r| start >= r.start * 8 && end <= r.end * 8)
                .map(|r| r.start)
        };
        let terms: Vec<Term> = varying
            .iter()
            .filter_map(|&(start, end, src)| {
                covering(start, end).map(|range_start| Term {
                    src: src as u8,
                    shift: weight_shift(end, range_start),
                })
            })
            .collect();
        if terms.is_empty() {
            continue;
        }
        // The field itself counts as zero; every other byte of the range is constant or
        // zeroed above.
        let mut own = constant.clone();
        own[spec.at..spec.at + 2].fill(0);
        let mut base = spec.constant;
        for r in &spec.covers {
            base += checksum::sum_words(&own[r.clone()]);
        }
        // From now on this checksum varies: outer checksums see it as a term.
        let (at_bit, end_bit) = (spec.at * 8, spec.at * 8 + 16);
        bits::write_bits(&mut constant, at_bit, 16, 0);
        varying.push((at_bit, end_bit, seq_at + 2 + plans.len()));
        plans.push(CsumPlan {
            at: spec.at,
            base,
            zero_as_ffff: spec.zero_as_ffff,
            terms,
        });
    }
    plans
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fold_is_mod_65535() {
        for x in [
            0u64,
            1,
            0xFFFF,
            0x1_0000,
            0xFFFF_FFFF,
            u64::MAX,
            0x1234_5678_9ABC_DEF0,
        ] {
            let f = fold(x);
            assert!(f <= 0xFFFF);
            assert_eq!(f % 0xFFFF, x % 0xFFFF, "x={x:#x}");
        }
    }

    #[test]
    fn weight_shift_matches_word_grid() {
        // A 16-bit field aligned on the grid weighs 2^0; one byte later it weighs 2^8.
        assert_eq!(weight_shift(16, 0), 0);
        assert_eq!(weight_shift(24, 0), 8);
        // A 12-bit field ending at bit 16 (VLAN id style) also weighs 2^0.
        assert_eq!(weight_shift(32, 2), 0);
        // Odd range start shifts the grid.
        assert_eq!(weight_shift(24, 1), 0);
    }
}
