//! GRE, MPLS, GTPv1/v2, PPP, IGMPv1 and the pause frames: computed fields, optional fields
//! that follow their flags, refused stacks, and (as properties) random tunnel stacks whose
//! checksums, lengths and field offsets hold, with the tunnelled packet decoded by etherparse.

mod common;

use common::{be16, hdr, ipv4, reference_checksum, residue};
use etherparse::{NetHeaders, PacketHeaders, TransportHeader};
use proptest::prelude::*;
use strobe_wire::bits::read_bits;
use strobe_wire::HeaderKind::{self, *};
use strobe_wire::{build, Built, Header, Payload, WireError};

fn inner_ip() -> Header {
    hdr(
        Ipv4,
        &[("src", ipv4([10, 0, 0, 1])), ("dst", ipv4([10, 0, 0, 2]))],
    )
}

fn udp() -> Header {
    hdr(Udp, &[("src_port", 1000), ("dst_port", 2000)])
}

fn built(stack: &[Header], frame_len: usize) -> Built {
    build(stack, frame_len, &Payload::IncrementByte).expect("stack builds")
}

fn offset_of(b: &Built, kind: HeaderKind) -> usize {
    b.headers.iter().find(|p| p.kind == kind).unwrap().offset
}

/// The IPv4/UDP packet starting at `at` decodes with good checksums (etherparse).
fn assert_inner_udp_ok(frame: &[u8], at: usize) {
    let headers = PacketHeaders::from_ip_slice(&frame[at..]).expect("inner packet decodes");
    let Some(NetHeaders::Ipv4(ip, _)) = &headers.net else {
        panic!("inner IPv4 expected");
    };
    assert_eq!(ip.header_checksum, ip.calc_header_checksum());
    let Some(TransportHeader::Udp(u)) = &headers.transport else {
        panic!("inner UDP expected");
    };
    let payload = headers.payload.slice();
    assert_eq!(u.checksum, u.calc_checksum_ipv4(ip, payload).unwrap());
}

#[test]
fn gre_protocols_checksum_and_ip_protocol() {
    let stack = [
        Header::new(Ethernet),
        inner_ip(),
        hdr(Gre, &[("checksum_present", 1)]),
        inner_ip(),
        udp(),
    ];
    let b = built(&stack, 120);
    let gre = offset_of(&b, Gre);
    assert_eq!(b.bytes[14 + 9], 47, "ipv4 protocol before gre");
    assert_eq!(b.headers[2].len, 8, "checksum word present");
    assert_eq!(be16(&b.bytes, gre), 0x8000);
    assert_eq!(be16(&b.bytes, gre + 2), 0x0800);
    assert_eq!(
        residue(&b.bytes[gre..]),
        0,
        "GRE checksum covers header and payload"
    );
    assert_inner_udp_ok(&b.bytes, gre + 8);

    let protocol = |next: Header| {
        let b = built(&[inner_ip(), Header::new(Gre), next], 100);
        assert_eq!(b.headers[1].len, 4, "no checksum word by default");
        be16(&b.bytes, 22)
    };
    assert_eq!(protocol(Header::new(Ipv6)), 0x86DD);
    assert_eq!(protocol(Header::new(Ethernet)), 0x6558);
    assert_eq!(protocol(Header::new(Mpls)), 0x8847);
    assert_eq!(protocol(Header::new(Ppp)), 0x880B);
    assert_eq!(protocol(Header::custom(vec![1])), 0x0800);
    let b = built(&[Header::new(Ipv6), Header::new(Gre)], 80);
    assert_eq!(b.bytes[6], 47, "ipv6 next header before gre");

    // A custom checksum makes the checksum word present and is sent as given.
    let b = built(&[hdr(Gre, &[("checksum", 0xBEEF)])], 40);
    assert_eq!((be16(&b.bytes, 0), be16(&b.bytes, 4)), (0x8000, 0xBEEF));
    assert!(b.checksums.is_empty());
}

#[test]
fn mpls_ether_type_and_bottom_of_stack() {
    let stack = [
        Header::new(Ethernet),
        hdr(Mpls, &[("label", 1000), ("traffic_class", 5)]),
        hdr(Mpls, &[("time_to_live", 9)]),
        inner_ip(),
        udp(),
    ];
    let b = built(&stack, 100);
    assert_eq!(be16(&b.bytes, 12), 0x8847);
    let entry = |at: usize| u32::from_be_bytes(b.bytes[at..at + 4].try_into().unwrap());
    assert_eq!(
        entry(14),
        1000 << 12 | 5 << 9 | 64,
        "outer: not bottom, TTL 64"
    );
    assert_eq!(entry(18), 16 << 12 | 1 << 8 | 9, "inner: label 16, bottom");
    assert_inner_udp_ok(&b.bytes, 22);

    let mut too_many = vec![Header::new(Ethernet)];
    too_many.extend(std::iter::repeat_n(Header::new(Mpls), 21));
    let err = build(&too_many, 200, &Payload::default()).unwrap_err();
    assert!(err.to_string().contains("at most 20"), "{err}");
}

#[test]
fn gtpv1_with_extension_over_udp() {
    let stack = [
        Header::new(Ethernet),
        inner_ip(),
        hdr(Udp, &[("src_port", 2152)]),
        hdr(
            Gtpv1,
            &[("teid", 0xABCD), ("next_extension_header_type", 0x85)],
        ),
        hdr(GtpExtension, &[("contents", 0x1009_0000_0000)]),
        inner_ip(),
        udp(),
    ];
    let b = built(&stack, 150);
    let gtp = offset_of(&b, Gtpv1);
    assert_eq!(be16(&b.bytes, gtp - 6), 2152, "udp dst port before gtpv1");
    assert_eq!(
        b.bytes[gtp], 0x34,
        "version 1, PT 1, E computed, S and PN 0"
    );
    assert_eq!(b.bytes[gtp + 1], 0xFF, "G-PDU before IPv4");
    assert_eq!(be16(&b.bytes, gtp + 2) as usize, 150 - gtp - 8);
    assert_eq!(b.headers[3].len, 12);
    assert_eq!(b.bytes[gtp + 11], 0x85);
    assert_eq!(b.bytes[gtp + 12], 2, "extension length in 4-byte units");
    assert_eq!(b.bytes[gtp + 19], 0, "no next extension");
    assert_inner_udp_ok(&b.bytes, gtp + 20);

    // No optional field given: the 8-byte header, message type 0 with nothing carried.
    let b = built(&[Header::new(Gtpv1)], 20);
    assert_eq!((b.headers[0].len, b.bytes[0], b.bytes[1]), (8, 0x30, 0));
    assert_eq!(be16(&b.bytes, 2), 12);
    let b = built(&[hdr(Gtpv1, &[("squence_number", 7)])], 20);
    assert_eq!((b.bytes[0], be16(&b.bytes, 8)), (0x32, 7));
}

#[test]
fn gtpv2_teid_follows_its_flag() {
    let stack = [
        inner_ip(),
        Header::new(Udp),
        hdr(Gtpv2, &[("sequence_number", 0x123456)]),
    ];
    let b = built(&stack, 60);
    assert_eq!(be16(&b.bytes, 22), 2123, "udp dst port before gtpv2");
    assert_eq!((b.headers[2].len, b.bytes[28]), (8, 0x40));
    assert_eq!(be16(&b.bytes, 30) as usize, 60 - 28 - 4);
    assert_eq!(
        read_bits(&b.bytes, 32 * 8, 24),
        0x123456,
        "sequence right after length"
    );

    let with_teid = hdr(Gtpv2, &[("teid", 0xDEAD_BEEF), ("sequence_number", 5)]);
    let b = built(&[with_teid], 30);
    assert_eq!((b.headers[0].len, b.bytes[0]), (12, 0x48));
    assert_eq!(read_bits(&b.bytes, 32, 32), 0xDEAD_BEEF);
    assert_eq!(read_bits(&b.bytes, 64, 24), 5);
    assert_eq!(b.field_bit_offset(0, 7), 64);
}

#[test]
fn ppp_igmp_and_pause_frames() {
    let b = built(
        &[Header::new(Ethernet), Header::new(Ppp), Header::new(Ipv6)],
        80,
    );
    assert_eq!(be16(&b.bytes, 12), 0x880B);
    assert_eq!(&b.bytes[14..18], &[0xFF, 0x03, 0x00, 0x57]);
    let b = built(&[Header::new(Ppp), inner_ip()], 40);
    assert_eq!(be16(&b.bytes, 2), 0x0021);

    let igmp = hdr(
        Igmpv1,
        &[("type", 2), ("group_address", ipv4([239, 1, 1, 1]))],
    );
    let b = built(&[inner_ip(), igmp], 60);
    assert_eq!((b.bytes[9], b.bytes[20]), (2, 0x12));
    assert_eq!(
        residue(&b.bytes[20..28]),
        0,
        "checksum over the 8-byte message"
    );

    let b = built(&[Header::new(PfcPause)], 60);
    assert_eq!(&b.bytes[..6], &[0x01, 0x80, 0xC2, 0, 0, 1]);
    assert_eq!((be16(&b.bytes, 12), be16(&b.bytes, 14)), (0x8808, 0x0101));
    let b = built(&[hdr(EthernetPause, &[("time", 0xFFFF)])], 60);
    assert_eq!((be16(&b.bytes, 14), be16(&b.bytes, 16)), (1, 0xFFFF));
}

#[test]
fn optional_fields_and_extensions_out_of_place_are_refused() {
    let bad = |stack: &[Header]| match build(stack, 100, &Payload::default()) {
        Err(WireError::BadStack(message)) => message,
        other => panic!("expected a refusal, got {other:?}"),
    };
    let m = bad(&[hdr(Gre, &[("checksum_present", 0), ("reserved1", 1)])]);
    assert!(
        m.contains("gre.reserved1") && m.contains("checksum_present is 0"),
        "{m}"
    );
    let m = bad(&[hdr(Gtpv2, &[("teid_flag", 0), ("teid", 1)])]);
    assert!(
        m.contains("gtpv2.teid") && m.contains("teid_flag is 0"),
        "{m}"
    );
    let m = bad(&[hdr(Gtpv1, &[("s_flag", 0), ("squence_number", 1)])]);
    assert!(m.contains("gtpv1.squence_number"), "{m}");
    let m = bad(&[Header::new(Gtpv1), Header::new(GtpExtension)]);
    assert!(m.contains("e_flag is 0"), "{m}");
    let m = bad(&[Header::new(Udp), Header::new(GtpExtension)]);
    assert!(m.contains("does not follow a gtpv1"), "{m}");
    // Extensions chain: a second one may follow the first.
    let announced = hdr(Gtpv1, &[("e_flag", 1)]);
    let ext = || Header::new(GtpExtension);
    assert!(build(&[announced, ext(), ext()], 100, &Payload::default()).is_ok());
}

/// A random tunnel: what carries it, and how its optional fields are set.
fn tunnel_stack() -> impl Strategy<Value = Vec<Header>> {
    (
        0usize..4,
        any::<bool>(),
        0usize..4,
        any::<[bool; 3]>(),
        any::<[u32; 4]>(),
    )
        .prop_map(|(which, flag, count, gtp_flags, seeds)| {
            let mut stack = vec![Header::new(Ethernet)];
            match which {
                0 => {
                    stack.push(inner_ip());
                    let set = [("checksum_present", u128::from(flag))];
                    stack.push(hdr(Gre, &set));
                    if flag {
                        stack[2]
                            .set("reserved1", u128::from(seeds[0] & 0xFFFF))
                            .unwrap();
                    }
                }
                1 => {
                    for k in 0..=count {
                        let label = u128::from(seeds[k % 4] & 0xF_FFFF);
                        stack.push(hdr(Mpls, &[("label", label)]));
                    }
                }
                2 => {
                    stack.extend([inner_ip(), Header::new(Udp)]);
                    let mut gtp = hdr(Gtpv1, &[("teid", u128::from(seeds[0]))]);
                    for (name, on) in ["e_flag", "s_flag", "pn_flag"].iter().zip(gtp_flags) {
                        gtp.set(name, u128::from(on || (*name == "e_flag" && count > 0)))
                            .unwrap();
                    }
                    stack.push(gtp);
                    for seed in &seeds[..count] {
                        let contents = u128::from(*seed) << 16;
                        stack.push(hdr(GtpExtension, &[("contents", contents)]));
                    }
                }
                _ => {
                    stack.extend([inner_ip(), Header::new(Udp)]);
                    let mut gtp = hdr(Gtpv2, &[("sequence_number", u128::from(seeds[1] >> 8))]);
                    if flag {
                        gtp.set("teid", u128::from(seeds[2])).unwrap();
                    }
                    stack.push(gtp);
                }
            }
            stack.extend([inner_ip(), udp()]);
            stack
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn tunnel_stacks_hold_together(stack in tunnel_stack(), extra in 0usize..100) {
        let header_len: usize = stack.iter().map(Header::wire_len).sum();
        let frame_len = header_len + extra;
        let b = build(&stack, frame_len, &Payload::IncrementByte).unwrap();
        for spec in &b.checksums {
            let stored = be16(&b.bytes, spec.at);
            prop_assert_eq!(reference_checksum(spec, &b.bytes), stored);
        }
        // Every value set lands where field_bit_offset says.
        for (h, header) in stack.iter().enumerate() {
            for (f, (value, def)) in header.values.iter().zip(header.kind.fields()).enumerate() {
                if let (Some(value), true) = (*value, def.on_wire() && def.alias_of.is_none()) {
                    let at = b.field_bit_offset(h, f);
                    prop_assert_eq!(read_bits(&b.bytes, at, def.bit_len), value);
                }
            }
        }
        for (placed, header) in b.headers.iter().zip(&stack) {
            let at = placed.offset;
            let to_end = frame_len - at;
            match placed.kind {
                Gre if placed.len == 8 => prop_assert_eq!(residue(&b.bytes[at..]), 0),
                Gtpv1 => prop_assert_eq!(be16(&b.bytes, at + 2) as usize, to_end - 8),
                Gtpv2 => {
                    prop_assert_eq!(be16(&b.bytes, at + 2) as usize, to_end - 4);
                    prop_assert_eq!(placed.len, if header.get("teid").is_some() { 12 } else { 8 });
                }
                Mpls => {
                    let bottom = b.bytes[at + 2] & 1;
                    let last = b.headers.iter().rposition(|p| p.kind == Mpls).unwrap();
                    prop_assert_eq!(bottom == 1, b.headers[last].offset == at);
                }
                _ => {}
            }
        }
        // The tunnelled packet (the last IPv4 header on) decodes with good checksums.
        let inner = b.headers.iter().rposition(|p| p.kind == Ipv4).unwrap();
        assert_inner_udp_ok(&b.bytes, b.headers[inner].offset);
    }
}
