//! Lays a header stack out into frame bytes and computes every auto field.
//!
//! Stack order is free: any sequence of headers can be built, and the auto rules apply only
//! where the neighbours give them a meaning (an Ethernet header followed by UDP gets the OTG
//! default EtherType 0xFFFF, a `custom` header after IPv6 leaves `next_header` at 59, ...).
//! A stack is rejected only when a requested value cannot be produced: an auto UDP/TCP
//! checksum with no IP header to take the pseudo-header from, an auto ICMPv6 checksum
//! without IPv6, a length that does not fit its field, a value for an optional field that
//! its flag leaves out (GRE, GTP), a GTP extension header not behind a GTPv1 header that
//! announces it, or more than 20 MPLS labels.
//!
//! The pseudo-header of UDP, TCP and ICMPv6 comes from the IP header directly before it, or
//! before a run of `custom` headers (which is how IPv6 extension headers are written).
//! Lengths and checksums cover the bytes actually present up to the end of the frame, so an
//! explicitly overridden length field does not change what a checksum covers.

use std::ops::Range;

use crate::bits::write_bits;
use crate::checksum::{checksum, sum_words};
use crate::header::{FieldDef, FieldFormat, Header, HeaderKind, PTP_LEN};
use crate::WireError;

/// Largest frame `build` accepts (bytes, without FCS): every 16-bit length field can still
/// describe it, and it is far beyond any jumbo frame.
pub const MAX_FRAME_LEN: usize = 65_535;

/// What fills the frame after the last header (OTG `Flow.Payload`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Payload {
    /// `pattern` repeated to the end, or once followed by zeros when `repeat` is false.
    /// An empty pattern gives zeros.
    Fixed { pattern: Vec<u8>, repeat: bool },
    /// 00 01 02 .. ff 00 01 ..
    IncrementByte,
    /// ff fe fd .. 00 ff fe ..
    DecrementByte,
    /// 00 00, 00 01, .. ff ff, 00 00 ..; an odd last byte is the high byte of the next word.
    IncrementWord,
    /// ff ff, ff fe, .. 00 00, ff ff ..
    DecrementWord,
}

impl Default for Payload {
    fn default() -> Self {
        Payload::Fixed {
            pattern: vec![0],
            repeat: true,
        }
    }
}

impl Payload {
    /// Writes the pattern into `dst`, starting the pattern at `dst[0]`.
    pub fn fill(&self, dst: &mut [u8]) {
        match self {
            Payload::Fixed { pattern, repeat } => {
                dst.fill(0);
                if *repeat {
                    for (byte, value) in dst.iter_mut().zip(pattern.iter().cycle()) {
                        *byte = *value;
                    }
                } else {
                    let n = pattern.len().min(dst.len());
                    dst[..n].copy_from_slice(&pattern[..n]);
                }
            }
            Payload::IncrementByte => {
                for (i, byte) in dst.iter_mut().enumerate() {
                    *byte = i as u8;
                }
            }
            Payload::DecrementByte => {
                for (i, byte) in dst.iter_mut().enumerate() {
                    *byte = !(i as u8);
                }
            }
            Payload::IncrementWord | Payload::DecrementWord => {
                let invert = matches!(self, Payload::DecrementWord);
                for (i, byte) in dst.iter_mut().enumerate() {
                    let word = (i / 2) as u16;
                    let word = if invert { !word } else { word };
                    *byte = word.to_be_bytes()[i % 2];
                }
            }
        }
    }
}

/// Where a header sits in the built frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placed {
    pub kind: HeaderKind,
    pub offset: usize,
    pub len: usize,
}

/// A computed 16-bit Internet checksum and everything needed to recompute it after the
/// frame bytes change (see the crate docs for the exact semantics).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChecksumSpec {
    /// Byte offset of the checksum field in the frame.
    pub at: usize,
    /// Frame byte ranges summed, each from its own start. The checksum field lies inside one
    /// of them and counts as zero.
    pub covers: Vec<Range<usize>>,
    /// Added to the sum: pseudo-header protocol number and upper-layer length.
    pub constant: u64,
    /// A computed 0 is sent as 0xFFFF (UDP, where 0 means "no checksum").
    pub zero_as_ffff: bool,
    /// Index in the stack of the header that owns the field.
    pub header_index: usize,
}

impl ChecksumSpec {
    /// The value the checksum field must hold for `frame`, whatever it holds now.
    ///
    /// # Panics
    /// If a covered range or the field lies outside `frame` (a frame of another layout).
    pub fn compute(&self, frame: &[u8]) -> u16 {
        let mut sum = self.constant;
        for range in &self.covers {
            sum += sum_words(&frame[range.clone()]);
            // Take the field back out of the sum: each of its bytes was added as the high or
            // low half of a word depending on its distance from the range start.
            for (pos, &byte) in (self.at..).zip(&frame[self.at..self.at + 2]) {
                if range.contains(&pos) {
                    let byte = u64::from(byte);
                    sum -= if (pos - range.start) % 2 == 0 {
                        byte << 8
                    } else {
                        byte
                    };
                }
            }
        }
        match checksum(sum) {
            0 if self.zero_as_ffff => 0xFFFF,
            value => value,
        }
    }

    /// Recomputes the checksum and stores it in `frame`.
    ///
    /// # Panics
    /// As [`ChecksumSpec::compute`].
    pub fn write(&self, frame: &mut [u8]) {
        let value = self.compute(frame);
        frame[self.at..self.at + 2].copy_from_slice(&value.to_be_bytes());
    }
}

/// A built frame and its layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Built {
    /// The frame without FCS, `frame_len` bytes long.
    pub bytes: Vec<u8>,
    /// One entry per stack header, in stack order.
    pub headers: Vec<Placed>,
    /// The bytes after the last header.
    pub payload: Range<usize>,
    /// Computed checksums, innermost first: recompute them in this order.
    pub checksums: Vec<ChecksumSpec>,
    /// Per stack header, each field's bit offset from the header start (`None`: absent,
    /// left out by the header's flags, or not on the wire).
    field_offsets: Vec<Vec<Option<u32>>>,
}

impl Built {
    /// Absolute bit offset in `bytes` of field `field_index` of header `header_index`.
    /// Meaningless for fields that are not on the wire ([`FieldDef::on_wire`]) or that the
    /// header's flags leave out (`build` refuses a value for those).
    ///
    /// # Panics
    /// If either index is out of range (caller bug).
    pub fn field_bit_offset(&self, header_index: usize, field_index: usize) -> usize {
        let placed = &self.headers[header_index];
        let within = self.field_offsets[header_index][field_index]
            .unwrap_or(placed.kind.fields()[field_index].bit_offset);
        placed.offset * 8 + within as usize
    }
}

/// Builds a `frame_len`-byte frame (without FCS) from `stack`, filling the bytes after the
/// last header with `payload`.
pub fn build(stack: &[Header], frame_len: usize, payload: &Payload) -> Result<Built, WireError> {
    validate(stack)?;
    if frame_len > MAX_FRAME_LEN {
        return Err(WireError::FrameTooLong {
            frame_len,
            max: MAX_FRAME_LEN,
        });
    }
    let mut headers = Vec::with_capacity(stack.len());
    let mut offset = 0;
    for header in stack {
        let len = header.wire_len();
        headers.push(Placed {
            kind: header.kind,
            offset,
            len,
        });
        offset = offset.saturating_add(len);
    }
    if offset > frame_len {
        return Err(WireError::FrameTooShort {
            frame_len,
            needed: offset,
        });
    }

    let mut bytes = vec![0u8; frame_len];
    payload.fill(&mut bytes[offset..]);
    let layout = Layout {
        stack,
        headers: &headers,
        frame_len,
    };
    for index in 0..stack.len() {
        layout.write_header(&mut bytes, index)?;
    }
    // Reverse stack order is innermost first: every checksum covers only bytes at or after
    // its own header (the pseudo-header addresses are not checksum fields).
    let mut checksums = Vec::new();
    for index in (0..stack.len()).rev() {
        if let Some(spec) = layout.checksum_spec(index)? {
            spec.write(&mut bytes);
            checksums.push(spec);
        }
    }
    let field_offsets = stack
        .iter()
        .map(|header| {
            (0..header.kind.fields().len())
                .map(|index| header.field_bit_offset(index))
                .collect()
        })
        .collect();
    Ok(Built {
        bytes,
        headers,
        payload: offset..frame_len,
        checksums,
        field_offsets,
    })
}

/// Rejects stacks whose `Header`s were assembled inconsistently by hand.
fn validate(stack: &[Header]) -> Result<(), WireError> {
    if stack.is_empty() {
        return Err(WireError::BadStack(
            "the stack is empty; it needs at least one header".to_owned(),
        ));
    }
    for (position, header) in stack.iter().enumerate() {
        let name = header.kind.name();
        let fields = header.kind.fields();
        if header.values.len() != fields.len() {
            return Err(WireError::BadStack(format!(
                "header {position} ({name}) carries {} field values, but {name} has {} fields",
                header.values.len(),
                fields.len()
            )));
        }
        if header.kind != HeaderKind::Custom && !header.bytes.is_empty() {
            return Err(WireError::BadStack(format!(
                "header {position} ({name}) carries raw bytes; only custom headers do"
            )));
        }
        for (value, def) in header.values.iter().zip(fields) {
            if let Some(value) = *value {
                check_fits(header.kind, def, value)?;
            }
        }
        check_optional_fields(header)?;
        if header.kind == HeaderKind::GtpExtension {
            check_extension_place(stack, position)?;
        }
    }
    let labels = stack.iter().filter(|h| h.kind == HeaderKind::Mpls).count();
    if labels > MAX_MPLS_LABELS {
        return Err(WireError::BadStack(format!(
            "{labels} mpls headers; OTG allows at most {MAX_MPLS_LABELS} in one stack"
        )));
    }
    Ok(())
}

/// OTG's limit on stacked MPLS headers.
const MAX_MPLS_LABELS: usize = 20;

/// A value given for a field that the header's flags leave out would be silently lost.
fn check_optional_fields(header: &Header) -> Result<(), WireError> {
    let name = header.kind.name();
    for (index, (value, def)) in header.values.iter().zip(header.kind.fields()).enumerate() {
        if value.is_none() || !def.on_wire() || header.field_bit_offset(index).is_some() {
            continue;
        }
        let flags = match header.kind {
            HeaderKind::Gre => "checksum_present is 0",
            HeaderKind::Gtpv1 => "e_flag, s_flag and pn_flag are all 0",
            HeaderKind::Gtpv2 => "teid_flag is 0",
            _ => "its flags leave it out",
        };
        return Err(WireError::BadStack(format!(
            "{name}.{field} is given, but {flags}, so the header has no {field} field; set \
             the flag to 1 (or leave it auto) or drop {name}.{field}",
            field = def.name
        )));
    }
    Ok(())
}

/// A GTP extension header belongs right after a GTPv1 header that announces it (e_flag 1)
/// or after another extension header.
fn check_extension_place(stack: &[Header], position: usize) -> Result<(), WireError> {
    let owner = stack[..position]
        .iter()
        .rev()
        .find(|h| h.kind != HeaderKind::GtpExtension);
    match owner {
        Some(gtp) if gtp.kind == HeaderKind::Gtpv1 && position > 0 => {
            if gtp.flag("e_flag") == 1 {
                Ok(())
            } else {
                Err(WireError::BadStack(format!(
                    "header {position} (gtp_extension) follows a gtpv1 whose e_flag is 0; \
                     set gtpv1.e_flag to 1, or give gtpv1.next_extension_header_type (the \
                     first extension's type), which sets it"
                )))
            }
        }
        _ => Err(WireError::BadStack(format!(
            "header {position} (gtp_extension) does not follow a gtpv1 header; write \
             extension headers inside gtpv1 as extension_headers"
        ))),
    }
}

fn check_fits(kind: HeaderKind, def: &FieldDef, value: u128) -> Result<(), WireError> {
    if value > def.max() {
        return Err(WireError::ValueTooLarge {
            header: kind.name(),
            field: def.name,
            value,
            bits: def.bit_len,
            max: def.max(),
        });
    }
    Ok(())
}

/// The validated stack and where each header goes.
struct Layout<'a> {
    stack: &'a [Header],
    headers: &'a [Placed],
    frame_len: usize,
}

impl Layout<'_> {
    fn write_header(&self, bytes: &mut [u8], index: usize) -> Result<(), WireError> {
        let header = &self.stack[index];
        let placed = &self.headers[index];
        if header.kind == HeaderKind::Custom {
            bytes[placed.offset..placed.offset + placed.len].copy_from_slice(&header.bytes);
            return Ok(());
        }
        let fields = header.kind.fields();
        for (field_index, (def, value)) in fields.iter().zip(&header.values).enumerate() {
            if def.alias_of.is_some() {
                continue;
            }
            // Off-wire fields and optional fields the flags leave out.
            let Some(bit_offset) = header.field_bit_offset(field_index) else {
                continue;
            };
            let value = match *value {
                Some(value) => value,
                None if def.auto => self.auto_value(index, def)?,
                None => def.default,
            };
            write_bits(
                bytes,
                placed.offset * 8 + bit_offset as usize,
                def.bit_len,
                value,
            );
        }
        // Aliases go last so that they override only their own bits of the field they share.
        for (def, value) in fields.iter().zip(&header.values) {
            if let (Some(_), Some(value)) = (def.alias_of, *value) {
                write_bits(
                    bytes,
                    placed.offset * 8 + def.bit_offset as usize,
                    def.bit_len,
                    value,
                );
            }
        }
        Ok(())
    }

    /// The value of an auto field left unset. Checksums get a zero placeholder here and are
    /// computed once the whole frame is written.
    fn auto_value(&self, index: usize, def: &FieldDef) -> Result<u128, WireError> {
        let kind = self.stack[index].kind;
        let next = self.stack.get(index + 1);
        let next_kind = next.map(|header| header.kind);
        let to_end = (self.frame_len - self.headers[index].offset) as u128;
        let value = match (kind, def.name) {
            (HeaderKind::Ethernet, "ether_type") | (HeaderKind::Vlan, "tpid") => match next_kind {
                Some(HeaderKind::Vlan) => 0x8100,
                Some(HeaderKind::Ipv4) => 0x0800,
                Some(HeaderKind::Ipv6) => 0x86DD,
                Some(HeaderKind::Arp) => 0x0806,
                Some(HeaderKind::Ptp) => 0x88F7,
                Some(HeaderKind::Mpls) => 0x8847,
                // IEEE's EtherType for PPP frames (the one GRE uses for PPTP too).
                Some(HeaderKind::Ppp) => 0x880B,
                _ => def.default,
            },
            (HeaderKind::Ipv4, "header_length") => 5,
            (HeaderKind::Ipv4, "total_length") => to_end,
            (HeaderKind::Ipv4, "protocol") => match next_kind {
                Some(HeaderKind::Udp) => 17,
                Some(HeaderKind::Tcp) => 6,
                Some(HeaderKind::Icmp) => 1,
                Some(HeaderKind::Igmpv1) => 2,
                Some(HeaderKind::Ipv4) => 4,
                Some(HeaderKind::Ipv6) => 41,
                Some(HeaderKind::Gre) => 47,
                _ => def.default,
            },
            (HeaderKind::Ipv6, "payload_length") => to_end - self.headers[index].len as u128,
            (HeaderKind::Ipv6, "next_header") => match next_kind {
                Some(HeaderKind::Udp) => 17,
                Some(HeaderKind::Tcp) => 6,
                Some(HeaderKind::Icmpv6) => 58,
                Some(HeaderKind::Ipv4) => 4,
                Some(HeaderKind::Ipv6) => 41,
                Some(HeaderKind::Gre) => 47,
                _ => def.default,
            },
            (HeaderKind::Udp, "length") => to_end,
            (HeaderKind::Udp, "dst_port") => match next {
                Some(header) if header.kind == HeaderKind::Vxlan => 4789,
                // TS 29.281 / 29.274: GTP-U on 2152, GTP-C on 2123.
                Some(header) if header.kind == HeaderKind::Gtpv1 => 2152,
                Some(header) if header.kind == HeaderKind::Gtpv2 => 2123,
                Some(header) if header.kind == HeaderKind::Ptp => {
                    // Event messages (Sync, Delay_Req, ...: types 0-7) go to 319, general
                    // messages to 320 (IEEE 1588 annex D).
                    let message_type = header.get("message_type").unwrap_or(0);
                    if message_type < 8 {
                        319
                    } else {
                        320
                    }
                }
                _ => def.default,
            },
            (HeaderKind::Tcp, "data_offset") => 5,
            (HeaderKind::Ptp, "message_length") => PTP_LEN as u128,
            (HeaderKind::Gre, "protocol") => match next_kind {
                Some(HeaderKind::Ipv6) => 0x86DD,
                Some(HeaderKind::Ethernet) => 0x6558, // transparent Ethernet bridging
                Some(HeaderKind::Mpls) => 0x8847,
                Some(HeaderKind::Ppp) => 0x880B,
                _ => def.default, // 0x0800, IPv4
            },
            (HeaderKind::Gre | HeaderKind::Gtpv1 | HeaderKind::Gtpv2, _) if def.shapes_layout => {
                self.stack[index].flag(def.name)
            }
            (HeaderKind::Mpls, "bottom_of_stack") => {
                u128::from(next_kind != Some(HeaderKind::Mpls))
            }
            // A G-PDU (255) carries the user's packet; with nothing to carry, OTG's 0.
            (HeaderKind::Gtpv1, "message_type") => {
                let carried = self.stack[index + 1..]
                    .iter()
                    .find(|h| h.kind != HeaderKind::GtpExtension)
                    .map(|h| h.kind);
                match carried {
                    Some(HeaderKind::Ipv4 | HeaderKind::Ipv6) => 255,
                    _ => def.default,
                }
            }
            // GTPv1 counts what follows its mandatory 8 bytes, GTPv2 what follows its first 4.
            (HeaderKind::Gtpv1, "message_length") => to_end.saturating_sub(8),
            (HeaderKind::Gtpv2, "message_length") => to_end.saturating_sub(4),
            (HeaderKind::GtpExtension, "extension_length") => (self.headers[index].len / 4) as u128,
            (HeaderKind::Ppp, "protocol_type") => match next_kind {
                Some(HeaderKind::Ipv6) => 0x0057,
                Some(HeaderKind::Mpls) => 0x0281,
                _ => def.default, // 0x0021, IPv4
            },
            _ => def.default,
        };
        check_fits(kind, def, value)?;
        Ok(value)
    }

    /// The checksum of header `index` if it has an unset checksum field to compute.
    fn checksum_spec(&self, index: usize) -> Result<Option<ChecksumSpec>, WireError> {
        let header = &self.stack[index];
        let placed = &self.headers[index];
        let Some((field_index, def)) = header
            .kind
            .fields()
            .iter()
            .enumerate()
            .find(|(_, def)| def.format == FieldFormat::Checksum)
        else {
            return Ok(None);
        };
        // Given explicitly, or left out by the header's flags (a GRE checksum).
        if header.values[field_index].is_some() || header.field_bit_offset(field_index).is_none() {
            return Ok(None);
        }
        let spec = |covers: Vec<Range<usize>>, constant: u64| ChecksumSpec {
            at: placed.offset
                + header
                    .field_bit_offset(field_index)
                    .unwrap_or(def.bit_offset) as usize
                    / 8,
            covers,
            constant,
            zero_as_ffff: header.kind == HeaderKind::Udp,
            header_index: index,
        };
        let to_end = placed.offset..self.frame_len;
        let protocol: u64 = match header.kind {
            // IPv4 sums its own header; so does IGMPv1 (RFC 1112: "the 8-octet IGMP message").
            HeaderKind::Ipv4 | HeaderKind::Igmpv1 => {
                let own_header = placed.offset..placed.offset + placed.len;
                return Ok(Some(spec(vec![own_header], 0)));
            }
            // ICMP and GRE (RFC 2784) sum their header and everything after it, with no
            // pseudo-header.
            HeaderKind::Icmp | HeaderKind::Gre => return Ok(Some(spec(vec![to_end], 0))),
            HeaderKind::Udp => 17,
            HeaderKind::Tcp => 6,
            HeaderKind::Icmpv6 => 58,
            _ => return Ok(None),
        };
        // The pseudo-header's upper-layer length, summed as the 32-bit word IPv6 uses (for
        // IPv4 the 16-bit length gives the same sum).
        let constant = protocol + sum_words(&(to_end.len() as u32).to_be_bytes());
        let ip_index = self
            .pseudo_header_source(index)
            .filter(|&ip| {
                header.kind != HeaderKind::Icmpv6 || self.stack[ip].kind == HeaderKind::Ipv6
            })
            .ok_or_else(|| {
                let needs = match header.kind {
                    HeaderKind::Icmpv6 => "an IPv6 header",
                    _ => "an IPv4 or IPv6 header",
                };
                WireError::BadStack(format!(
                    "header {index} ({name}) needs {needs} before it (directly or behind \
                     custom headers) to compute its checksum; set {name}.checksum to build it \
                     anyway",
                    name = header.kind.name()
                ))
            })?;
        // RFC 7348: the outer UDP checksum of VXLAN over IPv4 is sent as zero.
        let carries_vxlan = self
            .stack
            .get(index + 1)
            .is_some_and(|next| next.kind == HeaderKind::Vxlan);
        if header.kind == HeaderKind::Udp
            && carries_vxlan
            && self.stack[ip_index].kind == HeaderKind::Ipv4
        {
            return Ok(None);
        }
        let covers = vec![
            self.field_bytes(ip_index, "src"),
            self.field_bytes(ip_index, "dst"),
            to_end,
        ];
        Ok(Some(spec(covers, constant)))
    }

    /// The IP header whose addresses form the pseudo-header of the L4 header at `index`.
    fn pseudo_header_source(&self, index: usize) -> Option<usize> {
        (0..index)
            .rev()
            .find(|&i| self.stack[i].kind != HeaderKind::Custom)
            .filter(|&i| matches!(self.stack[i].kind, HeaderKind::Ipv4 | HeaderKind::Ipv6))
    }

    /// Byte range of a byte-aligned field of header `index`.
    fn field_bytes(&self, index: usize, field: &str) -> Range<usize> {
        let placed = &self.headers[index];
        let (_, def) = placed
            .kind
            .field(field)
            .expect("the IPv4 and IPv6 tables define src and dst");
        let start = placed.offset + def.bit_offset as usize / 8;
        start..start + def.bit_len as usize / 8
    }
}
