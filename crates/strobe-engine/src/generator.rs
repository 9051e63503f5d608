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

#[inline(always)]
fn fold128(v: u128) -> u64 {
    fold(fold(v as u64) + fold((v >> 64) as u64))
}

/// The power of two by which a field ending at absolute bit `end_bit` weighs in a checksum
/// whose words start at byte `range_start`.
fn weight_shift(end_bit: usize, range_start: usize) -> u32 {
    let d = (end_bit - range_start * 8) % 16;
    ((16 - d) % 16) as u32
}

/// Produces the j-th value of a field pattern, one step per packet, with OTG semantics
/// (`start ± (j % count)·step`, `values[j % len]`, seeded random), without division.
#[derive(Clone, Debug)]
enum ValueGen {
    Counter {
        start: u128,
        step: u128,
        down: bool,
        count: u64,
        k: u64,
        cur: u128,
        mask: u128,
    },
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
            | Pattern::Decrement { start, step, count } => ValueGen::Counter {
                start: start & mask,
                step: step & mask,
                down: matches!(pattern, Pattern::Decrement { .. }),
                count: (*count).max(1),
                k: 0,
                cur: start & mask,
                mask,
            },
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

    /// The current packet's value; then steps to the next packet.
    #[inline(always)]
    fn next_value(&mut self) -> u128 {
        match self {
            ValueGen::Counter {
                start,
                step,
                down,
                count,
                k,
                cur,
                mask,
            } => {
                let v = *cur;
                *k += 1;
                if *k == *count {
                    *k = 0;
                    *cur = *start;
                } else if *down {
                    *cur = cur.wrapping_sub(*step) & *mask;
                } else {
                    *cur = cur.wrapping_add(*step) & *mask;
                }
                v
            }
            ValueGen::Table { values, idx } => {
                let v = values[*idx];
                *idx += 1;
                if *idx == values.len() {
                    *idx = 0;
                }
                v
            }
            ValueGen::Random {
                seed,
                k,
                count,
                min,
                max,
            } => {
                let v = strobe_model::random_in(*seed, *k, *min, *max);
                *k += 1;
                if *k == *count {
                    *k = 0;
                }
                v
            }
        }
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

/// One term of a checksum: the folded value in slot `src` of the per-packet value table,
/// weighted by 2^shift.
#[derive(Clone, Copy, Debug)]
struct Term {
    src: u16,
    shift: u32,
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
    /// Folded values of this packet: fields first, then trailer seq and timestamp, then
    /// the checksums already computed (for checksums nested inside other checksums).
    folded: Vec<u64>,
    instrumented: bool,
    seq: u32,
}

const NO_TEMPLATE: u16 = u16::MAX;

impl FlowGenerator {
    /// Builds templates for every frame size the flow can use.
    pub fn compile(flow: &FlowSpec) -> Result<FlowGenerator, EngineError> {
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
        let seq_slot = fields.len();
        let ts_slot = seq_slot + 1;
        let csum_slot0 = ts_slot + 1;

        let mut templates = Vec::with_capacity(sizes.len());
        for (t, &size) in sizes.iter().enumerate() {
            let built = build_frame(flow, &base_headers, size)?;
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
                let t = trailer::Trailer {
                    flow_id: flow.id,
                    seq: 0,
                    tx_ns: 0,
                };
                let dst: &mut [u8; trailer::LEN] = (&mut bytes[at..at + trailer::LEN])
                    .try_into()
                    .expect("trailer slice has trailer length");
                t.write(dst);
                Some(at)
            } else {
                None
            };
            let csums = plan_checksums(
                &built, &bytes, &fields, trailer_at, seq_slot, ts_slot, csum_slot0,
            );
            // The template holds valid checksums for its own contents, so a frame copied
            // from it is correct even before any patch.
            let mut bytes = bytes.into_boxed_slice();
            finish_template(&mut bytes, &built);
            templates.push(Template {
                bytes,
                size,
                csums,
                trailer_at,
            });
            by_size[size as usize] = t as u16;
        }
        let n_csums = templates.iter().map(|t| t.csums.len()).max().unwrap_or(0);
        Ok(FlowGenerator {
            name: flow.name.clone(),
            id: flow.id,
            templates,
            by_size,
            folded: vec![0; csum_slot0 + n_csums],
            fields,
            instrumented,
            seq: 0,
        })
    }

    pub fn instrumented(&self) -> bool {
        self.instrumented
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

    /// Writes the next packet into `buf`. `slot_holds` says which template the buffer
    /// already contains (updated here); the template is copied only when it differs.
    /// `tx_ns` goes into the trailer. Returns the frame length.
    #[inline]
    pub fn write_next(
        &mut self,
        buf: &mut [u8],
        slot_holds: &mut u32,
        template: u16,
        tx_ns: u64,
    ) -> usize {
        let key = ((self.id as u32) << 16) | template as u32;
        let t = &self.templates[template as usize];
        let len = t.bytes.len();
        let frame = &mut buf[..len];
        if *slot_holds != key {
            frame.copy_from_slice(&t.bytes);
            *slot_holds = key;
        }
        for (i, f) in self.fields.iter_mut().enumerate() {
            let v = f.gen.next_value();
            match f.whole_bytes {
                Some((at, n)) if n <= 8 => {
                    frame[at..at + n].copy_from_slice(&(v as u64).to_be_bytes()[8 - n..]);
                }
                Some((at, n)) => frame[at..at + n].copy_from_slice(&v.to_be_bytes()[16 - n..]),
                None => bits::write_bits(frame, f.bit_offset, f.bit_len, v),
            }
            self.folded[i] = fold128(v);
        }
        let seq_slot = self.fields.len();
        if let Some(at) = t.trailer_at {
            let seq = self.seq;
            frame[at + trailer::SEQ_OFFSET..at + trailer::SEQ_OFFSET + 4]
                .copy_from_slice(&seq.to_be_bytes());
            frame[at + trailer::TIMESTAMP_OFFSET..at + trailer::TIMESTAMP_OFFSET + 8]
                .copy_from_slice(&tx_ns.to_be_bytes());
            self.folded[seq_slot] = fold(seq as u64);
            self.folded[seq_slot + 1] = fold(tx_ns);
        }
        self.seq = self.seq.wrapping_add(1);
        let csum_slot0 = seq_slot + 2;
        for (c, plan) in t.csums.iter().enumerate() {
            let mut sum = plan.base;
            for term in &plan.terms {
                sum += fold(self.folded[term.src as usize] << term.shift);
            }
            let mut value = !(fold(sum) as u16);
            if value == 0 && plan.zero_as_ffff {
                value = 0xFFFF;
            }
            frame[plan.at..plan.at + 2].copy_from_slice(&value.to_be_bytes());
            self.folded[csum_slot0 + c] = value as u64;
        }
        len
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

/// For each checksum: the sum of its constant part, and the terms for what varies.
fn plan_checksums(
    built: &Built,
    bytes: &[u8],
    fields: &[VarField],
    trailer_at: Option<usize>,
    seq_slot: usize,
    ts_slot: usize,
    csum_slot0: usize,
) -> Vec<CsumPlan> {
    // The constant part: the frame with every varying bit and every checksum zeroed.
    let mut constant = bytes.to_vec();
    for f in fields {
        bits::write_bits(&mut constant, f.bit_offset, f.bit_len, 0);
    }
    // (start bit, end bit, value slot) of everything that varies.
    let mut varying: Vec<(usize, usize, usize)> = fields
        .iter()
        .enumerate()
        .map(|(i, f)| (f.bit_offset, f.bit_offset + f.bit_len as usize, i))
        .collect();
    if let Some(at) = trailer_at {
        let seq = at + trailer::SEQ_OFFSET;
        let ts = at + trailer::TIMESTAMP_OFFSET;
        constant[seq..seq + 4].fill(0);
        constant[ts..ts + 8].fill(0);
        varying.push((seq * 8, (seq + 4) * 8, seq_slot));
        varying.push((ts * 8, (ts + 8) * 8, ts_slot));
    }
    for spec in &built.checksums {
        constant[spec.at..spec.at + 2].fill(0);
    }
    let mut plans = Vec::with_capacity(built.checksums.len());
    for (c, spec) in built.checksums.iter().enumerate() {
        let mut base = spec.constant;
        for r in &spec.covers {
            base += checksum::sum_words(&constant[r.clone()]);
        }
        let mut terms = Vec::new();
        let covering = |start: usize, end: usize| {
            spec.covers
                .iter()
                .find(|r| start >= r.start * 8 && end <= r.end * 8)
                .map(|r| r.start)
        };
        for &(start, end, slot) in &varying {
            if let Some(range_start) = covering(start, end) {
                terms.push(Term {
                    src: slot as u16,
                    shift: weight_shift(end, range_start),
                });
            }
        }
        // Checksums computed earlier (inner ones) that this one covers.
        for (inner, inner_spec) in built.checksums.iter().enumerate().take(c) {
            let (start, end) = (inner_spec.at * 8, inner_spec.at * 8 + 16);
            if let Some(range_start) = covering(start, end) {
                terms.push(Term {
                    src: (csum_slot0 + inner) as u16,
                    shift: weight_shift(end, range_start),
                });
            }
        }
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
