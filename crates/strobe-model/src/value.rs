//! Field values written by people (MAC, IPv4, IPv6, integers, hex bytes) and the checks
//! shared by the scenario file and the command line.

use std::net::{Ipv4Addr, Ipv6Addr};

use strobe_wire::{FieldDef, FieldFormat, HeaderKind};

use crate::pattern::Pattern;

/// "a MAC address such as 02:00:00:00:00:01", … — what a field accepts, for messages.
pub(crate) fn format_hint(def: &FieldDef) -> String {
    match def.format {
        FieldFormat::Mac => "a MAC address such as 02:00:00:00:00:01".to_string(),
        FieldFormat::Ipv4 => "a dotted quad such as 198.18.0.1".to_string(),
        FieldFormat::Ipv6 => "an IPv6 address such as 2001:db8::1".to_string(),
        FieldFormat::Integer | FieldFormat::Checksum => format!(
            "an integer from 0 to {} (decimal, or a \"0x..\" string)",
            def.max()
        ),
    }
}

/// An unsigned integer written in decimal, `0x` hex or `0b` binary (underscores allowed).
pub(crate) fn parse_uint(text: &str) -> Option<u128> {
    let cleaned: String = text.trim().chars().filter(|c| *c != '_').collect();
    let (digits, radix) = if let Some(hex) = cleaned
        .strip_prefix("0x")
        .or_else(|| cleaned.strip_prefix("0X"))
    {
        (hex, 16)
    } else if let Some(bin) = cleaned
        .strip_prefix("0b")
        .or_else(|| cleaned.strip_prefix("0B"))
    {
        (bin, 2)
    } else {
        (cleaned.as_str(), 10)
    };
    if digits.is_empty() || digits.starts_with('+') {
        return None;
    }
    u128::from_str_radix(digits, radix).ok()
}

pub(crate) fn parse_mac(text: &str) -> Option<u128> {
    let separator = if text.contains('-') { '-' } else { ':' };
    let parts: Vec<&str> = text.split(separator).collect();
    if parts.len() != 6 {
        return None;
    }
    parts.iter().try_fold(0u128, |acc, part| {
        if part.is_empty() || part.len() > 2 {
            return None;
        }
        u8::from_str_radix(part, 16)
            .ok()
            .map(|byte| (acc << 8) | u128::from(byte))
    })
}

/// A field value written as text in the field's own format. Any field also takes a
/// `0x..` integer, which is how raw values and steps of odd widths are written.
pub(crate) fn parse_field_text(text: &str, def: &FieldDef) -> Result<u128, String> {
    let trimmed = text.trim();
    let hex_literal = trimmed.starts_with("0x") || trimmed.starts_with("0X");
    let parsed = match def.format {
        _ if hex_literal => parse_uint(trimmed),
        FieldFormat::Mac => parse_mac(trimmed),
        FieldFormat::Ipv4 => trimmed
            .parse::<Ipv4Addr>()
            .ok()
            .map(|a| u128::from(u32::from(a))),
        FieldFormat::Ipv6 => trimmed.parse::<Ipv6Addr>().ok().map(u128::from),
        FieldFormat::Integer | FieldFormat::Checksum => parse_uint(trimmed),
    };
    let value = parsed.ok_or_else(|| {
        let what = match def.format {
            FieldFormat::Mac => "MAC address",
            FieldFormat::Ipv4 => "IPv4 address",
            FieldFormat::Ipv6 => "IPv6 address",
            FieldFormat::Integer | FieldFormat::Checksum => "integer",
        };
        format!("invalid {what} `{text}` — expected {}", format_hint(def))
    })?;
    check_fits(value, def)
}

/// A field value written as a TOML integer.
pub(crate) fn parse_field_int(value: i64, def: &FieldDef) -> Result<u128, String> {
    let value = u128::try_from(value)
        .map_err(|_| format!("{value} is negative — expected {}", format_hint(def)))?;
    check_fits(value, def)
}

/// Rejects values wider than the field.
pub(crate) fn check_fits(value: u128, def: &FieldDef) -> Result<u128, String> {
    if value > def.max() {
        Err(format!(
            "value {value} does not fit in the {}-bit field `{}` — accepted: 0 to {}",
            def.bit_len,
            def.name,
            def.max()
        ))
    } else {
        Ok(value)
    }
}

/// Random patterns are allowed where OTG allows them, plus on every integer field of at
/// most 64 bits (a strobe extension).
pub(crate) fn random_allowed(kind: HeaderKind, def: &FieldDef) -> bool {
    let otg = matches!(
        (kind, def.name),
        (HeaderKind::Ipv4, "src" | "dst")
            | (HeaderKind::Udp | HeaderKind::Tcp, "src_port" | "dst_port")
            | (HeaderKind::Ipv6, "flow_label")
    );
    otg || (def.format == FieldFormat::Integer && def.bit_len <= 64)
}

pub(crate) const COUNT_AT_LEAST_ONE: &str =
    "count must be at least 1 (the number of values before the pattern repeats)";

/// Checks a pattern's shape against its field (values already fit the field width).
pub(crate) fn check_pattern(
    kind: HeaderKind,
    def: &FieldDef,
    pattern: &Pattern,
) -> Result<(), String> {
    if def.shapes_layout && !pattern.is_constant() {
        return Err(format!(
            "{}.{} decides which optional fields the header carries, so it takes one value for \
             the whole flow — give a single value (or leave it out: it is 1 when those fields \
             are given)",
            kind.name(),
            def.name
        ));
    }
    match pattern {
        Pattern::Value(_) => Ok(()),
        Pattern::Values(values) if values.is_empty() => {
            Err("`values` is empty — give at least one value".to_string())
        }
        Pattern::Values(_) => Ok(()),
        Pattern::Increment { count: 0, .. } | Pattern::Decrement { count: 0, .. } => {
            Err(COUNT_AT_LEAST_ONE.to_string())
        }
        Pattern::Increment { .. } | Pattern::Decrement { .. } => Ok(()),
        Pattern::Random { .. } if !random_allowed(kind, def) => Err(format!(
            "random is not available for {}.{} — it is accepted on ipv4 src/dst, udp and tcp ports, ipv6 flow_label and integer fields of up to 64 bits",
            kind.name(),
            def.name
        )),
        Pattern::Random { min, max, .. } if min > max => Err(format!(
            "random min {min} is greater than max {max} — min must not exceed max"
        )),
        Pattern::Random { .. } => Ok(()),
    }
}

/// Bytes written in hex: `"deadbeef"`, `"0xdead beef"`, `"de:ad:be:ef"` (OTG custom header
/// syntax: spaces and colons are ignored).
pub(crate) fn parse_hex_bytes(text: &str) -> Result<Vec<u8>, String> {
    let body = text
        .trim()
        .strip_prefix("0x")
        .or_else(|| text.trim().strip_prefix("0X"))
        .unwrap_or(text.trim());
    let digits: Vec<u8> = body.bytes().filter(|b| *b != b' ' && *b != b':').collect();
    let bad = || {
        format!("invalid hex bytes `{text}` — expected pairs of hex digits such as \"deadbeef\" (spaces and colons are ignored)")
    };
    if digits.is_empty() || digits.len() % 2 != 0 {
        return Err(bad());
    }
    digits
        .chunks(2)
        .map(|pair| {
            std::str::from_utf8(pair)
                .ok()
                .and_then(|s| u8::from_str_radix(s, 16).ok())
                .ok_or_else(bad)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(kind: HeaderKind, name: &str) -> &'static FieldDef {
        kind.field(name).expect("field exists").1
    }

    #[test]
    fn addresses_parse_in_their_own_format() {
        let mac = def(HeaderKind::Ethernet, "src");
        assert_eq!(
            parse_field_text("02:00:00:00:00:0a", mac),
            Ok(0x0200_0000_000a)
        );
        assert_eq!(
            parse_field_text("02-00-00-00-00-0A", mac),
            Ok(0x0200_0000_000a)
        );
        assert!(parse_field_text("02:00:00:00:00", mac).is_err());
        let v4 = def(HeaderKind::Ipv4, "src");
        assert_eq!(parse_field_text("198.18.0.1", v4), Ok(0xC612_0001));
        assert_eq!(parse_field_text("0x0a000001", v4), Ok(0x0A00_0001));
        let err = parse_field_text("198.18.0.300", v4).unwrap_err();
        assert_eq!(
            err,
            "invalid IPv4 address `198.18.0.300` — expected a dotted quad such as 198.18.0.1"
        );
        let v6 = def(HeaderKind::Ipv6, "dst");
        assert_eq!(parse_field_text("::1", v6), Ok(1));
        assert_eq!(
            parse_field_text("2001:db8::", v6),
            Ok(0x2001_0db8u128 << 96)
        );
        assert!(parse_field_text("2001:db8::g", v6)
            .unwrap_err()
            .contains("IPv6"));
    }

    #[test]
    fn integers_and_widths() {
        let ttl = def(HeaderKind::Ipv4, "time_to_live");
        assert_eq!(parse_field_text("0x20", ttl), Ok(32));
        assert_eq!(parse_field_text("1_0", ttl), Ok(10));
        assert_eq!(parse_field_int(255, ttl), Ok(255));
        let err = parse_field_int(256, ttl).unwrap_err();
        assert!(
            err.contains("does not fit in the 8-bit field `time_to_live`"),
            "{err}"
        );
        assert!(err.contains("0 to 255"), "{err}");
        assert!(parse_field_int(-1, ttl).unwrap_err().contains("negative"));
        assert!(parse_field_text("ten", ttl)
            .unwrap_err()
            .contains("invalid integer"));
    }

    #[test]
    fn random_is_limited_to_otg_fields_and_narrow_integers() {
        let random = Pattern::Random {
            min: 0,
            max: 1,
            seed: 1,
            count: 0,
        };
        let ok = |k: HeaderKind, n: &str| check_pattern(k, def(k, n), &random).is_ok();
        assert!(ok(HeaderKind::Ipv4, "src"));
        assert!(ok(HeaderKind::Udp, "dst_port"));
        assert!(ok(HeaderKind::Ipv6, "flow_label"));
        assert!(ok(HeaderKind::Ptp, "correction"));
        assert!(!ok(HeaderKind::Ethernet, "src"));
        assert!(!ok(HeaderKind::Ipv6, "src"));
        assert!(!ok(HeaderKind::Ipv4, "header_checksum"));
    }

    #[test]
    fn hex_bytes() {
        assert_eq!(
            parse_hex_bytes("dead BEEF"),
            Ok(vec![0xde, 0xad, 0xbe, 0xef])
        );
        assert_eq!(parse_hex_bytes("0x01:02"), Ok(vec![1, 2]));
        assert!(parse_hex_bytes("abc").is_err());
        assert!(parse_hex_bytes("zz").is_err());
        assert!(parse_hex_bytes("").is_err());
    }
}
