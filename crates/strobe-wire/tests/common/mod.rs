//! Helpers shared by the integration tests.
#![allow(dead_code)]

use strobe_wire::checksum::sum_words;
use strobe_wire::{ChecksumSpec, Header, HeaderKind};

/// A header of `kind` with the given fields set.
pub fn hdr(kind: HeaderKind, fields: &[(&str, u128)]) -> Header {
    let mut header = Header::new(kind);
    for &(name, value) in fields {
        header.set(name, value).expect("test field is valid");
    }
    header
}

pub fn mac(bytes: [u8; 6]) -> u128 {
    bytes.iter().fold(0, |acc, &b| acc << 8 | u128::from(b))
}

pub fn ipv4(bytes: [u8; 4]) -> u128 {
    u128::from(u32::from_be_bytes(bytes))
}

pub fn ipv6(bytes: [u8; 16]) -> u128 {
    u128::from_be_bytes(bytes)
}

pub fn be16(bytes: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([bytes[at], bytes[at + 1]])
}

/// Recomputes a spec from its description alone, the slow and obvious way: copy the covered
/// ranges with the field zeroed, pad each odd range, add 32-bit words and fold.
pub fn reference_checksum(spec: &ChecksumSpec, frame: &[u8]) -> u16 {
    let mut zeroed = frame.to_vec();
    zeroed[spec.at] = 0;
    zeroed[spec.at + 1] = 0;
    let mut sum: u64 = spec.constant;
    for range in &spec.covers {
        let mut part = zeroed[range.clone()].to_vec();
        if part.len() % 2 == 1 {
            part.push(0);
        }
        for pair in part.chunks(2) {
            sum += u64::from(pair[0]) * 256 + u64::from(pair[1]);
        }
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    let value = !(sum as u16);
    if value == 0 && spec.zero_as_ffff {
        0xFFFF
    } else {
        value
    }
}

/// Internet checksum over `bytes` that already contain their checksum: 0 when it verifies.
pub fn residue(bytes: &[u8]) -> u16 {
    strobe_wire::checksum::checksum(sum_words(bytes))
}
