//! Property tests: `build` never panics, and every ChecksumSpec it returns is honest.

mod common;

use common::{hdr, reference_checksum};
use etherparse::{NetHeaders, PacketHeaders, TransportHeader};
use proptest::prelude::*;
use strobe_wire::HeaderKind::{self, *};
use strobe_wire::{build, Header, Payload};

fn any_payload() -> impl Strategy<Value = Payload> {
    prop_oneof![
        (proptest::collection::vec(any::<u8>(), 0..6), any::<bool>())
            .prop_map(|(pattern, repeat)| Payload::Fixed { pattern, repeat }),
        Just(Payload::IncrementByte),
        Just(Payload::DecrementByte),
        Just(Payload::IncrementWord),
        Just(Payload::DecrementWord),
    ]
}

/// A header of any kind with random fields set to random (possibly too large) values.
fn any_header() -> impl Strategy<Value = Header> {
    (
        proptest::sample::select(HeaderKind::ALL.to_vec()),
        proptest::collection::vec(
            (any::<prop::sample::Index>(), any::<u128>(), 0u32..=128),
            0..5,
        ),
        proptest::collection::vec(any::<u8>(), 0..12),
    )
        .prop_map(|(kind, sets, bytes)| {
            if kind == Custom {
                return Header::custom(bytes);
            }
            let mut header = Header::new(kind);
            for (index, value, shift) in sets {
                let def = &kind.fields()[index.index(kind.fields().len())];
                // Mostly in range, sometimes too large (set() then refuses it).
                let value = value.checked_shr(shift).unwrap_or(0);
                let _ = header.set(def.name, value);
            }
            header
        })
}

/// Well-formed L4 stacks, possibly tunnelled through VXLAN, with random field values.
fn l4_stack() -> impl Strategy<Value = Vec<Header>> {
    let ip = prop_oneof![Just(Ipv4), Just(Ipv6)];
    let l4 = prop_oneof![Just(Udp), Just(Tcp), Just(Icmp), Just(Icmpv6)];
    (
        ip.clone(),
        l4.clone(),
        any::<bool>(),
        ip,
        l4,
        any::<[u128; 4]>(),
    )
        .prop_map(|(outer_ip, outer_l4, tunnel, inner_ip, inner_l4, seeds)| {
            let fix = |ip: HeaderKind, l4: HeaderKind| match (ip, l4) {
                (Ipv4, Icmpv6) => Icmp,
                (Ipv6, Icmp) => Icmpv6,
                _ => l4,
            };
            let addr = |ip: HeaderKind, seed: u128| {
                let mut header = Header::new(ip);
                let bits = if ip == Ipv4 { 32 } else { 128 };
                let mask = u128::MAX >> (128 - bits);
                header.set("src", seed & mask).unwrap();
                header.set("dst", seed.rotate_left(37) & mask).unwrap();
                header
            };
            let ports = |l4: HeaderKind, seed: u128| match l4 {
                Udp | Tcp => hdr(
                    l4,
                    &[
                        ("src_port", seed & 0xFFFF),
                        ("dst_port", (seed >> 16) & 0xFFFF),
                    ],
                ),
                _ => hdr(l4, &[("identifier", seed & 0xFFFF)]),
            };
            let mut stack = vec![Header::new(Ethernet), addr(outer_ip, seeds[0])];
            if tunnel {
                stack.push(hdr(Udp, &[("src_port", seeds[1] & 0xFFFF)]));
                stack.push(Header::new(Vxlan));
                stack.push(Header::new(Ethernet));
                stack.push(addr(inner_ip, seeds[2]));
                stack.push(ports(fix(inner_ip, inner_l4), seeds[3]));
            } else {
                stack.push(ports(fix(outer_ip, outer_l4), seeds[1]));
            }
            stack
        })
}

/// Verifies the innermost-to-outermost L3/L4 checksums of an Ethernet frame with etherparse.
fn verify_with_etherparse(frame: &[u8]) -> Result<(), TestCaseError> {
    let headers = PacketHeaders::from_ethernet_slice(frame)
        .map_err(|e| TestCaseError::fail(format!("etherparse: {e}")))?;
    let payload = headers.payload.slice();
    match (&headers.net, &headers.transport) {
        (Some(NetHeaders::Ipv4(ip, _)), transport) => {
            prop_assert_eq!(ip.header_checksum, ip.calc_header_checksum());
            match transport {
                Some(TransportHeader::Udp(udp)) if udp.checksum != 0 => {
                    prop_assert_eq!(udp.checksum, udp.calc_checksum_ipv4(ip, payload).unwrap())
                }
                Some(TransportHeader::Tcp(tcp)) => {
                    prop_assert_eq!(tcp.checksum, tcp.calc_checksum_ipv4(ip, payload).unwrap())
                }
                Some(TransportHeader::Icmpv4(icmp)) => {
                    prop_assert_eq!(icmp.checksum, icmp.icmp_type.calc_checksum(payload))
                }
                _ => {}
            }
        }
        (Some(NetHeaders::Ipv6(ip, _)), transport) => match transport {
            Some(TransportHeader::Udp(udp)) => {
                prop_assert_eq!(udp.checksum, udp.calc_checksum_ipv6(ip, payload).unwrap())
            }
            Some(TransportHeader::Tcp(tcp)) => {
                prop_assert_eq!(tcp.checksum, tcp.calc_checksum_ipv6(ip, payload).unwrap())
            }
            Some(TransportHeader::Icmpv6(icmp)) => prop_assert_eq!(
                icmp.checksum,
                icmp.icmp_type
                    .calc_checksum(ip.source, ip.destination, payload)
                    .unwrap()
            ),
            _ => {}
        },
        _ => {}
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn build_never_panics(
        stack in proptest::collection::vec(any_header(), 0..6),
        frame_len in prop_oneof![8 => 0usize..400, 1 => Just(usize::MAX), 1 => 65_000usize..70_000],
        payload in any_payload(),
    ) {
        if let Ok(built) = build(&stack, frame_len, &payload) {
            prop_assert_eq!(built.bytes.len(), frame_len);
            prop_assert_eq!(built.headers.len(), stack.len());
            prop_assert_eq!(built.payload.end, frame_len);
            for spec in &built.checksums {
                let stored = u16::from_be_bytes([built.bytes[spec.at], built.bytes[spec.at + 1]]);
                prop_assert_eq!(reference_checksum(spec, &built.bytes), stored);
            }
        }
    }

    #[test]
    fn checksum_specs_are_honest(
        stack in l4_stack(),
        extra in 0usize..120,
        payload in any_payload(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
    ) {
        let header_len: usize = stack.iter().map(Header::wire_len).sum();
        let built = build(&stack, header_len + extra, &payload).unwrap();
        for spec in &built.checksums {
            let stored = u16::from_be_bytes([built.bytes[spec.at], built.bytes[spec.at + 1]]);
            prop_assert_eq!(reference_checksum(spec, &built.bytes), stored);
            prop_assert!(spec.covers.iter().all(|r| r.end <= built.bytes.len()));
            prop_assert!(spec.covers.iter().any(|r| r.contains(&spec.at) && r.contains(&(spec.at + 1))));
        }
        verify_with_etherparse(&built.bytes)?;
        let inner_at = built.headers.iter().rposition(|p| p.kind == Ethernet).unwrap();
        verify_with_etherparse(&built.bytes[built.headers[inner_at].offset..])?;

        // Rewrite payload bytes as the engine does, recompute in order: still consistent.
        let mut bytes = built.bytes.clone();
        if !built.payload.is_empty() {
            for (index, value) in edits {
                let at = built.payload.start + index.index(built.payload.len());
                bytes[at] = value;
            }
        }
        for spec in &built.checksums {
            spec.write(&mut bytes);
        }
        verify_with_etherparse(&bytes)?;
        verify_with_etherparse(&bytes[built.headers[inner_at].offset..])?;
    }
}
