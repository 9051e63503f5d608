//! strobe-wire: packet wire formats. Pure: no I/O, no clock, no randomness.
//!
//! CONTRACT (implemented by this crate; the model and engine crates code against it).
//!
//! ```text
//! pub mod bits      write_bits(buf: &mut [u8], bit_offset: usize, bit_len: u32, value: u128)
//!                   read_bits(buf: &[u8], bit_offset: usize, bit_len: u32) -> u128
//!                   Big-endian bit fields (network order), bit 0 = MSB of buf[0].
//!                   bit_len 1..=128. Panics only on out-of-range offsets (caller bug).
//! pub mod checksum  Internet checksum (RFC 1071) helpers:
//!                   sum_words(bytes: &[u8]) -> u64      big-endian 16-bit words from bytes[0];
//!                                                        odd trailing byte padded with zero
//!                   fold(sum: u64) -> u16               end-around carry fold (NOT complemented)
//!                   checksum(sum: u64) -> u16           !fold(sum)
//! pub mod header    FieldFormat, FieldDef, HeaderKind, Header (tables below)
//! pub mod build     Payload, Placed, ChecksumSpec, Built, build()
//! pub mod reflect   swap_addresses(frame) for reflectors (checksums stay valid);
//!                   mark_reflected(frame): trailer marker 'S' -> 'R', checksums updated
//! pub mod trailer   instrumentation trailer layout
//! WireError (thiserror) with messages that name the header and field.
//!
//! Additions beyond the original contract:
//!   FieldDef::alias_of, FieldDef::on_wire(), FieldDef::OFF_WIRE (pfc_queue is metadata),
//!   Header::wire_len(), Payload::fill(), ChecksumSpec::compute()/write(),
//!   MAX_FRAME_LEN and WireError::FrameTooLong.
//!   Headers with optional fields (GRE, GTPv1, GTPv2): FieldDef::shapes_layout marks the
//!   flags that add them, Header::wire_len()/field_bit_offset()/flag() give one header's
//!   layout, Built::field_bit_offset follows it; HeaderKind::table_len() is the full table,
//!   fixed_len() is None for these. HeaderKind::nested() (gtp_extension lives in gtpv1).
//! ```
//!
//! Header tables (`HeaderKind::fields()`): one `FieldDef` per OTG field name, with
//! `bit_offset` relative to the header start, `bit_len`, `format`, `default`, and `auto`
//! (= computed from the stack when the user leaves it unset). Values of every format are
//! plain unsigned integers (`u128`): MAC = 48 bits, IPv4 = 32, IPv6 = 128.
//!
//! `build(stack, frame_len, payload)` lays the headers out back to back, fills the payload
//! after the last header up to `frame_len` bytes (frame WITHOUT the 4-byte FCS), computes every
//! auto field (lengths, ether types, protocol numbers, checksums) and returns `Built`:
//! the bytes, where each header sits, and one `ChecksumSpec` per computed checksum, listed
//! innermost first (the order in which they must be (re)computed).
//!
//! ChecksumSpec semantics: the 16-bit field at `at` equals
//! `checksum(constant + Σ sum_words(bytes[r]) for r in covers)` computed with the field itself
//! taken as zero; each range is summed from its own start, only the last may be odd;
//! `zero_as_ffff` = a computed 0 is sent as 0xFFFF (UDP).

#![forbid(unsafe_code)]
pub mod bits;
pub mod build;
pub mod checksum;
pub mod header;
pub mod reflect;
pub mod trailer;

pub use build::{build, Built, ChecksumSpec, Payload, Placed, MAX_FRAME_LEN};
pub use header::{FieldDef, FieldFormat, Header, HeaderKind};
pub use trailer::Trailer;

/// Errors raised while building a frame from a header stack.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WireError {
    #[error("{header}: unknown field `{field}`; accepted fields: {accepted}")]
    UnknownField {
        header: &'static str,
        field: String,
        accepted: String,
    },
    #[error("{header}.{field}: value {value} does not fit in {bits} bits (max {max})")]
    ValueTooLarge {
        header: &'static str,
        field: &'static str,
        value: u128,
        bits: u32,
        max: u128,
    },
    #[error("frame of {frame_len} bytes (without FCS) is too short for the header stack, which needs {needed} bytes")]
    FrameTooShort { frame_len: usize, needed: usize },
    #[error("frame of {frame_len} bytes (without FCS) is longer than the largest supported frame of {max} bytes")]
    FrameTooLong { frame_len: usize, max: usize },
    #[error("invalid header stack: {0}")]
    BadStack(String),
}
