//! OTG capture filters (`captures[].filters`): which received frames a capture keeps.
//!
//! OTG lays the filters out as a stack of headers from the start of the frame: `ethernet`
//! covers its 14 bytes, `vlan` the 4 bytes of a tag after them (TCI, then the protocol
//! that follows), `ipv4` its header (the frame's own IHL), `ipv6` its 40 bytes, and
//! `custom` a field of `bit_length` bits `offset` bits after the end of the filter before it.
//! A frame is kept when every field given in every filter matches (OTG: the filters are
//! AND-ed); fields that are not given compare nothing, only move the next header along.
//!
//! A field compares `value` with the frame's bits where `mask` is 0: a mask bit of 1 is
//! "don't care", as in Ixia's filter pallette, which is what OTG's default mask of `00` needs
//! for a field given only its value to compare every bit. `negate` keeps the frames whose
//! field does not match. A frame too short for a field does not match, negated or not.
//!
//! Written here rather than compiled to classic BPF: OTG's filters follow the IPv4 header's
//! own length and address bits at any offset, and the capture thread (not a sender) runs them.

use serde_json::{Map, Value};

/// The compiled filters of one capture: the frames it keeps. Empty keeps every frame.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FrameFilter {
    layers: Vec<Layer>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Layer {
    extent: Extent,
    fields: Vec<FieldMatch>,
}

/// How far a filter's header reaches, so the next one starts after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Extent {
    Bits(u64),
    /// IPv4: the header's length from its IHL field (bits 4..8), in 32-bit words.
    Ipv4Header,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct FieldMatch {
    /// From the start of the filter's header.
    bit_offset: u64,
    bits: u32,
    value: u128,
    /// The bits compared (the complement of OTG's mask, within the field).
    compared: u128,
    negate: bool,
}

/// (name, bit offset in the header, bits) of every field a header filter names.
const ETHERNET: &[(&str, u64, u32)] = &[("dst", 0, 48), ("src", 48, 48), ("ether_type", 96, 16)];
const VLAN: &[(&str, u64, u32)] = &[
    ("priority", 0, 3),
    ("cfi", 3, 1),
    ("id", 4, 12),
    ("protocol", 16, 16),
];
const IPV4: &[(&str, u64, u32)] = &[
    ("version", 0, 4),
    ("header_length", 4, 4),
    ("priority", 8, 8),
    ("total_length", 16, 16),
    ("identification", 32, 16),
    ("reserved", 48, 1),
    ("dont_fragment", 49, 1),
    ("more_fragments", 50, 1),
    ("fragment_offset", 51, 13),
    ("time_to_live", 64, 8),
    ("protocol", 72, 8),
    ("header_checksum", 80, 16),
    ("src", 96, 32),
    ("dst", 128, 32),
];
const IPV6: &[(&str, u64, u32)] = &[
    ("version", 0, 4),
    ("traffic_class", 4, 8),
    ("flow_label", 12, 20),
    ("payload_length", 32, 16),
    ("next_header", 48, 8),
    ("hop_limit", 56, 8),
    ("src", 64, 128),
    ("dst", 192, 128),
];

/// Longest field a custom filter compares at once; a longer one is several custom filters
/// in a row (each starts where the one before ends).
const MAX_FIELD_BITS: u32 = 128;

impl FrameFilter {
    /// Reads OTG's `filters` array; `path` names it in errors (`captures[0].filters`).
    pub fn from_otg(filters: Option<&Value>, path: &str) -> Result<FrameFilter, Vec<String>> {
        let mut errors = Vec::new();
        let mut layers = Vec::new();
        let items: &[Value] = match filters {
            None | Some(Value::Null) => &[],
            Some(Value::Array(items)) => items,
            Some(other) => return Err(vec![format!("{path}: expected a list, found {other}")]),
        };
        for (i, item) in items.iter().enumerate() {
            let path = format!("{path}[{i}]");
            match layer(item, &path) {
                Ok(l) => layers.push(l),
                Err(mut e) => errors.append(&mut e),
            }
        }
        if errors.is_empty() {
            Ok(FrameFilter { layers })
        } else {
            Err(errors)
        }
    }

    /// True when the filter keeps every frame (no filters, or filters that compare nothing).
    pub fn keeps_all(&self) -> bool {
        self.layers.iter().all(|l| l.fields.is_empty())
    }

    /// Whether the capture keeps `frame` (its bytes from the destination MAC on).
    pub fn matches(&self, frame: &[u8]) -> bool {
        let mut start = 0u64;
        for (i, layer) in self.layers.iter().enumerate() {
            for f in &layer.fields {
                let Some(got) = read_bits(frame, start + f.bit_offset, f.bits) else {
                    return false;
                };
                if ((got ^ f.value) & f.compared == 0) == f.negate {
                    return false;
                }
            }
            if i + 1 < self.layers.len() {
                start += match layer.extent {
                    Extent::Bits(n) => n,
                    Extent::Ipv4Header => match read_bits(frame, start + 4, 4) {
                        Some(ihl) if ihl >= 5 => ihl as u64 * 32,
                        _ => return false,
                    },
                };
            }
        }
        true
    }
}

/// `bits` bits (at most 128) of `frame` from bit `at` (bit 0 is the first byte's top bit),
/// as a number; None past the frame's end.
fn read_bits(frame: &[u8], at: u64, bits: u32) -> Option<u128> {
    let end = at.checked_add(bits as u64)?;
    if end > frame.len() as u64 * 8 {
        return None;
    }
    let mut acc = 0u128;
    for pos in at..end {
        let byte = frame[(pos / 8) as usize];
        acc = (acc << 1) | ((byte >> (7 - pos % 8)) & 1) as u128;
    }
    Some(acc)
}

fn layer(item: &Value, path: &str) -> Result<Layer, Vec<String>> {
    let Some(obj) = item.as_object() else {
        return Err(vec![format!(
            "{path}: expected a filter object, found {item}"
        )]);
    };
    let choice = match obj.get("choice") {
        None | Some(Value::Null) => "custom",
        Some(Value::String(s)) => s.as_str(),
        Some(other) => {
            return Err(vec![format!(
                "{path}.choice: expected a name, found {other}"
            )])
        }
    };
    let kinds = ["custom", "ethernet", "vlan", "ipv4", "ipv6"];
    if !kinds.contains(&choice) {
        return Err(vec![format!(
            "{path}.choice: `{choice}` — accepted: custom, ethernet, vlan, ipv4, ipv6"
        )]);
    }
    let mut errors = Vec::new();
    for key in obj.keys() {
        if key != "choice" && key != choice && !obj[key].is_null() {
            errors.push(format!(
                "{path}.{key}: the filter's choice is `{choice}` — set choice to `{key}` or \
                 remove it"
            ));
        }
    }
    let body = match obj.get(choice) {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(other) => {
            errors.push(format!(
                "{path}.{choice}: expected an object, found {other}"
            ));
            Map::new()
        }
    };
    let path = format!("{path}.{choice}");
    let layer = if choice == "custom" {
        custom(&body, &path, &mut errors)
    } else {
        let (table, extent) = match choice {
            "ethernet" => (ETHERNET, Extent::Bits(112)),
            "vlan" => (VLAN, Extent::Bits(32)),
            "ipv4" => (IPV4, Extent::Ipv4Header),
            _ => (IPV6, Extent::Bits(320)),
        };
        let mut fields = Vec::new();
        for (key, field) in &body {
            if field.is_null() {
                continue;
            }
            let fpath = format!("{path}.{key}");
            if choice == "ethernet" && key == "pfc_queue" {
                errors.push(format!(
                    "{fpath}: a PFC queue is not a field of the Ethernet header — filter on a \
                     pause frame's class-enable bits with a custom filter"
                ));
                continue;
            }
            let Some(&(_, offset, bits)) = table.iter().find(|(name, _, _)| name == key) else {
                let names: Vec<&str> = table.iter().map(|(n, _, _)| *n).collect();
                errors.push(format!(
                    "{fpath}: not a field of a {choice} capture filter — accepted: {}",
                    names.join(", ")
                ));
                continue;
            };
            if let Some(m) = field_match(field, false, offset, bits, &fpath, &mut errors) {
                fields.push(m);
            }
        }
        Layer { extent, fields }
    };
    if errors.is_empty() {
        Ok(layer)
    } else {
        Err(errors)
    }
}

fn custom(body: &Map<String, Value>, path: &str, errors: &mut Vec<String>) -> Layer {
    for key in body.keys() {
        if !matches!(
            key.as_str(),
            "offset" | "bit_length" | "value" | "mask" | "negate"
        ) {
            errors.push(format!(
                "{path}.{key}: not a field of a custom capture filter — accepted: offset, \
                 bit_length, value, mask, negate"
            ));
        }
    }
    let uint = |key: &str, default: u64, errors: &mut Vec<String>| match body.get(key) {
        None | Some(Value::Null) => default,
        Some(v) => match v
            .as_u64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        {
            Some(n) if n <= u32::MAX as u64 => n,
            _ => {
                errors.push(format!(
                    "{path}.{key}: expected a whole number of bits (uint32), found {v}"
                ));
                default
            }
        },
    };
    let offset = uint("offset", 0, errors);
    let bits = uint("bit_length", 8, errors);
    if bits == 0 || bits > MAX_FIELD_BITS as u64 {
        errors.push(format!(
            "{path}.bit_length: {bits} — give 1 to {MAX_FIELD_BITS} bits; a longer field is \
             several custom filters in a row, each starting where the one before ends"
        ));
        return Layer {
            extent: Extent::Bits(offset),
            fields: Vec::new(),
        };
    }
    let field = Value::Object(body.clone());
    let fields = field_match(&field, true, offset, bits as u32, path, errors)
        .into_iter()
        .collect();
    Layer {
        extent: Extent::Bits(offset + bits),
        fields,
    }
}

/// One field's match from its OTG `value`, `mask` and `negate` (a custom filter's own
/// `offset` and `bit_length` beside them are read by `custom`).
fn field_match(
    field: &Value,
    custom: bool,
    bit_offset: u64,
    bits: u32,
    path: &str,
    errors: &mut Vec<String>,
) -> Option<FieldMatch> {
    let Some(obj) = field.as_object() else {
        errors.push(format!(
            "{path}: expected {{value, mask, negate}}, found {field}"
        ));
        return None;
    };
    let before = errors.len();
    let hex = |key: &str, errors: &mut Vec<String>| -> u128 {
        match obj.get(key) {
            None | Some(Value::Null) => 0,
            Some(Value::String(s)) => match parse_hex(s, bits) {
                Ok(v) => v,
                Err(why) => {
                    errors.push(format!("{path}.{key}: `{s}` {why}"));
                    0
                }
            },
            Some(other) => {
                errors.push(format!(
                    "{path}.{key}: expected hex digits as a string, found {other}"
                ));
                0
            }
        }
    };
    let value = hex("value", errors);
    let mask = hex("mask", errors);
    let negate = match obj.get("negate") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            errors.push(format!(
                "{path}.negate: expected true or false, found {other}"
            ));
            false
        }
    };
    if !custom {
        for key in obj.keys() {
            if !matches!(key.as_str(), "value" | "mask" | "negate") {
                errors.push(format!(
                    "{path}.{key}: a filter field has value, mask and negate"
                ));
            }
        }
    }
    if errors.len() > before {
        return None;
    }
    let all = if bits == 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    };
    Some(FieldMatch {
        bit_offset,
        bits,
        value,
        compared: !mask & all,
        negate,
    })
}

/// A hex string (OTG's `format: hex`, an optional 0x) as a number of at most `bits` bits.
fn parse_hex(text: &str, bits: u32) -> Result<u128, String> {
    let digits = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("is not hex digits".into());
    }
    let significant = digits.trim_start_matches('0');
    if significant.len() > 32 {
        return Err(format!("has more than the field's {bits} bits"));
    }
    let v = if significant.is_empty() {
        0
    } else {
        u128::from_str_radix(significant, 16).map_err(|e| e.to_string())?
    };
    if bits < 128 && v >> bits != 0 {
        return Err(format!("has more than the field's {bits} bits"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn filter(v: Value) -> FrameFilter {
        FrameFilter::from_otg(Some(&v), "f").unwrap()
    }

    /// Ethernet, a VLAN tag, IPv4 with `ihl` words, UDP to port 7 from 198.18.0.`last`.
    fn frame(vid: u16, ihl: u8, last: u8) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0x02, 0x81, 0x00];
        f.extend_from_slice(&(0x2000 | vid).to_be_bytes());
        f.extend_from_slice(&[0x08, 0x00]);
        let mut ip = vec![0x40 | ihl, 0, 0, 28, 0, 1, 0x40, 0, 64, 17, 0, 0];
        ip.extend_from_slice(&[198, 18, 0, last, 198, 18, 1, 1]);
        ip.resize(ihl as usize * 4, 0);
        f.extend_from_slice(&ip);
        f.extend_from_slice(&[0x30, 0x39, 0, 7, 0, 8, 0, 0]);
        f
    }

    #[test]
    fn headers_stack_from_the_frame_start_and_every_given_field_must_match() {
        let f = filter(json!([
            {"choice": "ethernet", "ethernet": {"ether_type": {"value": "8100"}}},
            {"choice": "vlan", "vlan": {"id": {"value": "05"}, "priority": {"value": "1"}}},
            {"choice": "ipv4", "ipv4": {"src": {"value": "c612000a"}}},
            {"choice": "custom", "custom": {"offset": 16, "bit_length": 16, "value": "0007"}}
        ]));
        assert!(f.matches(&frame(5, 5, 10)));
        assert!(!f.matches(&frame(6, 5, 10)), "another VLAN");
        assert!(!f.matches(&frame(5, 5, 11)), "another source");
        // Options in the IPv4 header move the UDP port along: the IHL is followed.
        assert!(f.matches(&frame(5, 7, 10)));
        // Too short for the custom field: not kept.
        assert!(!f.matches(&frame(5, 5, 10)[..40]));
    }

    #[test]
    fn a_mask_bit_of_one_is_dont_care_and_negate_inverts() {
        // The last octet of the source masked: any 198.18.0.x.
        let any = filter(json!([{"choice": "ethernet"}, {"choice": "vlan"},
            {"choice": "ipv4", "ipv4": {"src": {"value": "c6120000", "mask": "000000ff"}}}]));
        assert!(any.matches(&frame(1, 5, 10)) && any.matches(&frame(1, 5, 200)));
        let not10 = filter(json!([{"choice": "ethernet"}, {"choice": "vlan"},
            {"choice": "ipv4", "ipv4": {"src": {"value": "c612000a", "negate": true}}}]));
        assert!(!not10.matches(&frame(1, 5, 10)) && not10.matches(&frame(1, 5, 11)));
        // A custom filter's offset counts from the end of the one before.
        let dst_mac = filter(json!([{"choice": "custom",
            "custom": {"offset": 0, "bit_length": 48, "value": "020000000001"}}]));
        assert!(dst_mac.matches(&frame(1, 5, 1)));
        assert!(FrameFilter::default().keeps_all() && FrameFilter::default().matches(&[]));
    }

    #[test]
    fn bad_filters_are_refused_naming_the_field() {
        let refused = |v: Value| {
            FrameFilter::from_otg(Some(&v), "captures[0].filters")
                .unwrap_err()
                .join("; ")
        };
        let e = refused(json!([{"choice": "ipv4", "ipv4": {"ttl": {"value": "40"}}}]));
        assert!(
            e.contains("captures[0].filters[0].ipv4.ttl") && e.contains("time_to_live"),
            "{e}"
        );
        let e = refused(json!([{"choice": "vlan", "vlan": {"id": {"value": "1fff"}}}]));
        assert!(e.contains("vlan.id.value") && e.contains("12 bits"), "{e}");
        let e = refused(json!([{"choice": "ethernet", "ethernet": {"src": {"value": "zz"}}}]));
        assert!(e.contains("not hex"), "{e}");
        let e = refused(json!([{"choice": "custom", "custom": {"bit_length": 200}}]));
        assert!(
            e.contains("bit_length") && e.contains("several custom filters"),
            "{e}"
        );
        let e = refused(json!([{"choice": "tcp"}]));
        assert!(e.contains("accepted: custom, ethernet"), "{e}");
        let e = refused(json!([{"choice": "ipv4", "ipv6": {}}]));
        assert!(e.contains("filters[0].ipv6"), "{e}");
        let e = refused(json!([{"choice": "ethernet", "ethernet": {"pfc_queue": {"value": "1"}}}]));
        assert!(e.contains("pfc_queue"), "{e}");
    }

    proptest::proptest! {
        /// Untrusted frames of any length never panic the matcher, and a filter that
        /// compares nothing keeps them all.
        #[test]
        fn any_frame_is_matched_without_panicking(frame in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let f = filter(json!([{"choice": "ethernet"}, {"choice": "ipv4",
                "ipv4": {"dst": {"value": "c6120101"}}},
                {"choice": "custom", "custom": {"offset": 3, "bit_length": 128, "value": "1"}}]));
            let _ = f.matches(&frame);
            let all = filter(json!([{"choice": "ethernet"}, {"choice": "ipv4"}]));
            proptest::prop_assert!(all.keeps_all() && all.matches(&frame));
        }
    }
}
