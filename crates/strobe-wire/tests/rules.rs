//! Build rules: layout, payload patterns, auto values, explicit overrides and errors.

mod common;

use common::{be16, hdr, ipv4, reference_checksum, residue};
use strobe_wire::bits::read_bits;
use strobe_wire::HeaderKind::{self, *};
use strobe_wire::{build, Header, Payload, WireError, MAX_FRAME_LEN};

fn payload_of(payload: &Payload, len: usize) -> Vec<u8> {
    let built = build(&[Header::custom(vec![0xEE; 3])], 3 + len, payload).unwrap();
    assert_eq!(built.payload, 3..3 + len);
    built.bytes[3..].to_vec()
}

#[test]
fn payload_patterns() {
    assert_eq!(payload_of(&Payload::default(), 5), vec![0; 5]);
    let fixed = |pattern: &[u8], repeat| Payload::Fixed {
        pattern: pattern.to_vec(),
        repeat,
    };
    assert_eq!(
        payload_of(&fixed(&[1, 2, 3], true), 8),
        vec![1, 2, 3, 1, 2, 3, 1, 2]
    );
    assert_eq!(
        payload_of(&fixed(&[1, 2, 3], false), 6),
        vec![1, 2, 3, 0, 0, 0]
    );
    assert_eq!(payload_of(&fixed(&[1, 2, 3], false), 2), vec![1, 2]);
    assert_eq!(payload_of(&fixed(&[], true), 3), vec![0, 0, 0]);

    let inc = payload_of(&Payload::IncrementByte, 300);
    assert_eq!(&inc[..3], &[0, 1, 2]);
    assert_eq!(&inc[254..258], &[0xFE, 0xFF, 0x00, 0x01]);
    let dec = payload_of(&Payload::DecrementByte, 258);
    assert_eq!(&dec[..2], &[0xFF, 0xFE]);
    assert_eq!(&dec[255..258], &[0x00, 0xFF, 0xFE]);

    assert_eq!(
        payload_of(&Payload::IncrementWord, 7),
        vec![0, 0, 0, 1, 0, 2, 0]
    );
    assert_eq!(
        payload_of(&Payload::DecrementWord, 5),
        vec![0xFF, 0xFF, 0xFF, 0xFE, 0xFF]
    );
    // Word patterns wrap after 65536 words, longer than any frame: check with fill().
    let mut words = vec![0u8; 2 * 65_536 + 2];
    Payload::IncrementWord.fill(&mut words);
    assert_eq!(&words[2 * 255..2 * 257], &[0x00, 0xFF, 0x01, 0x00]);
    assert_eq!(&words[2 * 65_535..], &[0xFF, 0xFF, 0x00, 0x00]);
    Payload::DecrementWord.fill(&mut words);
    assert_eq!(&words[2 * 65_535..], &[0x00, 0x00, 0xFF, 0xFF]);
}

#[test]
fn zero_byte_payload_and_exact_length() {
    let built = build(
        &[hdr(Ethernet, &[]), hdr(Ipv4, &[]), hdr(Udp, &[])],
        42,
        &Payload::IncrementByte,
    )
    .unwrap();
    assert_eq!(built.bytes.len(), 42);
    assert_eq!(built.payload, 42..42);
    assert_eq!(be16(&built.bytes, 38), 8);
    assert_eq!(be16(&built.bytes, 16), 28);
}

#[test]
fn placement_follows_stack_order() {
    let stack = [
        hdr(Ethernet, &[]),
        hdr(Vlan, &[]),
        Header::custom(vec![1, 2, 3]),
        hdr(Ipv6, &[]),
        hdr(Icmpv6, &[]),
    ];
    let built = build(&stack, 100, &Payload::default()).unwrap();
    let layout: Vec<(HeaderKind, usize, usize)> = built
        .headers
        .iter()
        .map(|p| (p.kind, p.offset, p.len))
        .collect();
    assert_eq!(
        layout,
        vec![
            (Ethernet, 0, 14),
            (Vlan, 14, 4),
            (Custom, 18, 3),
            (Ipv6, 21, 40),
            (Icmpv6, 61, 8)
        ]
    );
    assert_eq!(&built.bytes[18..21], &[1, 2, 3]);
    assert_eq!(built.payload, 69..100);
}

#[test]
fn ether_type_follows_next_header() {
    let cases = [
        (Some(Vlan), 0x8100),
        (Some(Ipv4), 0x0800),
        (Some(Ipv6), 0x86DD),
        (Some(Arp), 0x0806),
        (Some(Ptp), 0x88F7),
        (Some(Udp), 0xFFFF),
        (Some(Custom), 0xFFFF),
        (None, 0xFFFF),
    ];
    for (next, expected) in cases {
        for first in [Ethernet, Vlan] {
            let mut stack = vec![Header::new(first)];
            stack.extend(next.map(Header::new));
            if next == Some(Udp) {
                stack[1].set("checksum", 0).unwrap();
            }
            let built = build(&stack, 128, &Payload::default()).unwrap();
            let at = if first == Ethernet { 12 } else { 2 };
            assert_eq!(be16(&built.bytes, at), expected, "{first:?} then {next:?}");
        }
    }
}

#[test]
fn ip_protocol_follows_next_header() {
    let cases = [
        (Some(Udp), 17, 17),
        (Some(Tcp), 6, 6),
        (Some(Icmp), 1, 59),
        (Some(Icmpv6), 61, 58),
        (Some(Ipv4), 4, 4),
        (Some(Ipv6), 41, 41),
        (Some(Vxlan), 61, 59),
        (None, 61, 59),
    ];
    for (next, v4, v6) in cases {
        for (ip, expected, at) in [(Ipv4, v4, 9), (Ipv6, v6, 6)] {
            let mut stack = vec![Header::new(ip)];
            stack.extend(next.map(Header::new));
            // ICMPv6 behind IPv4 has no pseudo-header: give its checksum a value.
            if ip == Ipv4 && next == Some(Icmpv6) {
                stack[1].set("checksum", 0x1234).unwrap();
            }
            let built = build(&stack, 200, &Payload::default()).unwrap();
            assert_eq!(u16::from(built.bytes[at]), expected, "{ip:?} then {next:?}");
        }
    }
}

#[test]
fn fixed_auto_values() {
    let stack = [hdr(Ipv4, &[]), hdr(Tcp, &[]), hdr(Ptp, &[])];
    let built = build(&stack, 100, &Payload::default()).unwrap();
    assert_eq!(built.bytes[0], 0x45);
    assert_eq!(be16(&built.bytes, 2), 100);
    assert_eq!(built.bytes[20 + 12] >> 4, 5);
    assert_eq!(be16(&built.bytes, 40 + 2), 44);
    assert_eq!(built.bytes[40 + 1], 0x02);
}

#[test]
fn explicit_values_override_auto_rules() {
    let stack = [
        hdr(Ethernet, &[("ether_type", 0x9100)]),
        hdr(
            Ipv4,
            &[
                ("total_length", 1000),
                ("header_length", 6),
                ("protocol", 99),
                ("header_checksum", 0xABCD),
            ],
        ),
        hdr(
            Udp,
            &[("length", 3), ("checksum", 0x5555), ("dst_port", 4790)],
        ),
        hdr(Vxlan, &[]),
    ];
    let built = build(&stack, 80, &Payload::default()).unwrap();
    let bytes = &built.bytes;
    assert_eq!(be16(bytes, 12), 0x9100);
    assert_eq!(bytes[14], 0x46);
    assert_eq!(be16(bytes, 16), 1000);
    assert_eq!(bytes[23], 99);
    assert_eq!(be16(bytes, 24), 0xABCD);
    assert_eq!(be16(bytes, 36), 4790);
    assert_eq!(be16(bytes, 38), 3);
    assert_eq!(be16(bytes, 40), 0x5555);
    assert!(built.checksums.is_empty());
}

#[test]
fn pfc_queue_is_not_on_the_wire() {
    let plain = build(&[hdr(Ethernet, &[])], 60, &Payload::IncrementByte).unwrap();
    let queued = build(
        &[hdr(Ethernet, &[("pfc_queue", 7)])],
        60,
        &Payload::IncrementByte,
    )
    .unwrap();
    assert_eq!(plain.bytes, queued.bytes);
}

#[test]
fn dscp_and_ecn_override_only_their_bits_of_priority() {
    let tos = |fields: &[(&str, u128)]| {
        build(&[hdr(Ipv4, fields)], 20, &Payload::default())
            .unwrap()
            .bytes[1]
    };
    assert_eq!(tos(&[("priority", 0xFF)]), 0xFF);
    assert_eq!(tos(&[("dscp", 46)]), 46 << 2);
    assert_eq!(tos(&[("ecn", 3)]), 3);
    assert_eq!(tos(&[("priority", 0xFF), ("dscp", 0)]), 0x03);
    assert_eq!(tos(&[("priority", 0xFF), ("ecn", 1)]), 0xFD);
}

/// Every on-wire field of every header lands where `field_bit_offset` says, with its value.
#[test]
fn field_bit_offsets_locate_every_field() {
    for kind in HeaderKind::ALL {
        if kind == Custom {
            continue;
        }
        let mut header = Header::new(kind);
        // Layout flags at 1, so that every optional field is present and can be located.
        let values: Vec<u128> = kind
            .fields()
            .iter()
            .enumerate()
            .map(|(i, def)| match def.shapes_layout {
                true => 1,
                false => (0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C834u128 >> i) & def.max(),
            })
            .collect();
        for (def, &value) in kind.fields().iter().zip(&values) {
            if def.alias_of.is_none() {
                header.set(def.name, value).unwrap();
            }
        }
        // An extension header lives behind a GTPv1 header that announces it, and
        // `field_bit_offset` is then asked about the third header.
        let prefix = match kind {
            GtpExtension => hdr(Gtpv1, &[("e_flag", 1)]),
            _ => Header::custom(vec![0xAB; 5]),
        };
        let stack = [Header::custom(vec![0xAB; 5]), prefix, header];
        let built = build(&stack, 200, &Payload::default()).unwrap();
        for (index, (def, &value)) in kind.fields().iter().zip(&values).enumerate() {
            if !def.on_wire() || def.alias_of.is_some() {
                continue;
            }
            let at = built.field_bit_offset(2, index);
            assert_eq!(
                read_bits(&built.bytes, at, def.bit_len),
                value,
                "{}.{}",
                kind.name(),
                def.name
            );
        }
        assert_eq!(&built.bytes[..5], &[0xAB; 5]);
    }
}

#[test]
fn udp_zero_checksum_is_sent_as_ffff() {
    // Search the source port that makes the sum all ones; the spec must then send 0xFFFF.
    let stack = |port: u128| {
        [
            hdr(
                Ipv4,
                &[("src", ipv4([1, 2, 3, 4])), ("dst", ipv4([5, 6, 7, 8]))],
            ),
            hdr(Udp, &[("src_port", port)]),
        ]
    };
    let probe = build(&stack(0), 28, &Payload::default()).unwrap();
    let spec = &probe.checksums[0];
    assert!(spec.zero_as_ffff);
    // With src_port 0 the checksum is c; adding c to the sum through src_port yields 0.
    let c = be16(&probe.bytes, 26);
    let built = build(&stack(u128::from(c)), 28, &Payload::default()).unwrap();
    assert_eq!(be16(&built.bytes, 26), 0xFFFF);
    assert_eq!(
        reference_checksum(&built.checksums[0], &built.bytes),
        0xFFFF
    );
}

#[test]
fn checksum_specs_describe_the_frame() {
    let stack = [
        hdr(Ethernet, &[]),
        hdr(
            Ipv4,
            &[("src", ipv4([10, 0, 0, 1])), ("dst", ipv4([10, 0, 0, 2]))],
        ),
        hdr(Udp, &[]),
    ];
    let built = build(&stack, 61, &Payload::IncrementByte).unwrap();
    let [udp, ip] = built.checksums.as_slice() else {
        panic!("expected two checksums: {:?}", built.checksums);
    };
    assert_eq!(udp.header_index, 2);
    assert_eq!(udp.at, 40);
    assert_eq!(udp.covers, vec![26..30, 30..34, 34..61]);
    assert_eq!(udp.constant, 17 + 27);
    assert!(udp.zero_as_ffff);
    assert_eq!(ip.header_index, 1);
    assert_eq!((ip.at, ip.constant), (24, 0));
    let ip_header = 14..34;
    assert_eq!(ip.covers, vec![ip_header]);
    assert!(!ip.zero_as_ffff);
    assert_eq!(residue(&built.bytes[14..34]), 0);

    // The engine rewrites bytes (a trailer, a field) and recomputes in the listed order.
    let mut bytes = built.bytes.clone();
    bytes[50] ^= 0x5A;
    bytes[18] = 0x77;
    for spec in &built.checksums {
        spec.write(&mut bytes);
        assert_eq!(spec.compute(&bytes), be16(&bytes, spec.at));
        assert_eq!(reference_checksum(spec, &bytes), be16(&bytes, spec.at));
    }
    assert_ne!(be16(&bytes, 40), be16(&built.bytes, 40));
    assert_eq!(residue(&bytes[14..34]), 0);
}

#[test]
fn errors_name_the_problem() {
    let err = |stack: &[Header], len| build(stack, len, &Payload::default()).unwrap_err();

    assert!(matches!(err(&[], 64), WireError::BadStack(m) if m.contains("empty")));
    assert_eq!(
        err(&[hdr(Ethernet, &[]), hdr(Ipv6, &[])], 53),
        WireError::FrameTooShort {
            frame_len: 53,
            needed: 54
        }
    );
    assert_eq!(
        err(&[hdr(Ethernet, &[])], MAX_FRAME_LEN + 1),
        WireError::FrameTooLong {
            frame_len: MAX_FRAME_LEN + 1,
            max: MAX_FRAME_LEN
        }
    );
    assert!(build(&[hdr(Ethernet, &[])], MAX_FRAME_LEN, &Payload::default()).is_ok());

    let WireError::BadStack(message) = err(&[hdr(Ethernet, &[]), hdr(Udp, &[])], 64) else {
        panic!("expected BadStack");
    };
    assert!(message.contains("header 1 (udp)"), "{message}");
    assert!(message.contains("udp.checksum"), "{message}");
    let WireError::BadStack(message) = err(&[hdr(Ipv4, &[]), hdr(Icmpv6, &[])], 64) else {
        panic!("expected BadStack");
    };
    assert!(
        message.contains("header 1 (icmpv6) needs an IPv6 header"),
        "{message}"
    );
    // Checksums that need no pseudo-header are fine anywhere.
    assert!(build(
        &[hdr(Ethernet, &[]), hdr(Icmp, &[])],
        64,
        &Payload::default()
    )
    .is_ok());

    let mut short = Header::new(Tcp);
    short.values.pop();
    let WireError::BadStack(message) = err(&[hdr(Ipv4, &[]), short], 64) else {
        panic!("expected BadStack");
    };
    assert!(
        message.contains("header 1 (tcp) carries 16 field values"),
        "{message}"
    );

    let mut raw = Header::new(Udp);
    raw.bytes = vec![1];
    assert!(matches!(err(&[raw], 64), WireError::BadStack(m) if m.contains("raw bytes")));

    let mut wide = Header::new(Vlan);
    wide.values[2] = Some(4096);
    assert_eq!(
        err(&[wide], 64).to_string(),
        "vlan.id: value 4096 does not fit in 12 bits (max 4095)"
    );
}
