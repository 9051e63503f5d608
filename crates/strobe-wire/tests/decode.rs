//! Frames built by strobe-wire, decoded by an independent parser (etherparse) and compared
//! field by field, including lengths and checksums.

mod common;

use common::{be16, hdr, ipv4, ipv6, mac, residue};
use etherparse::{
    Icmpv4Type, Icmpv6Type, LinkHeader, NetHeaders, PacketHeaders, TransportHeader, VlanHeader,
};
use strobe_wire::bits::read_bits;
use strobe_wire::HeaderKind::*;
use strobe_wire::{build, Built, Header, Payload};

const DST: [u8; 6] = [0x02, 0x11, 0x22, 0x33, 0x44, 0x55];
const SRC: [u8; 6] = [0x02, 0xAA, 0xBB, 0xCC, 0xDD, 0xEE];
const IP4_SRC: [u8; 4] = [10, 1, 2, 3];
const IP4_DST: [u8; 4] = [192, 168, 200, 7];
const IP6_SRC: [u8; 16] = [
    0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01,
];
const IP6_DST: [u8; 16] = [
    0xfd, 0x00, 0xab, 0xcd, 0x12, 0x34, 0, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef, 0, 0x99,
];

fn eth() -> Header {
    hdr(Ethernet, &[("dst", mac(DST)), ("src", mac(SRC))])
}

fn ip4(extra: &[(&str, u128)]) -> Header {
    let mut header = hdr(Ipv4, &[("src", ipv4(IP4_SRC)), ("dst", ipv4(IP4_DST))]);
    for &(name, value) in extra {
        header.set(name, value).unwrap();
    }
    header
}

fn ip6(extra: &[(&str, u128)]) -> Header {
    let mut header = hdr(Ipv6, &[("src", ipv6(IP6_SRC)), ("dst", ipv6(IP6_DST))]);
    for &(name, value) in extra {
        header.set(name, value).unwrap();
    }
    header
}

fn built(stack: &[Header], frame_len: usize) -> Built {
    let built = build(stack, frame_len, &Payload::IncrementByte).expect("stack builds");
    assert_eq!(built.bytes.len(), frame_len);
    built
}

fn decode(bytes: &[u8]) -> PacketHeaders<'_> {
    PacketHeaders::from_ethernet_slice(bytes).expect("etherparse decodes the frame")
}

fn ethernet(headers: &PacketHeaders<'_>) -> etherparse::Ethernet2Header {
    match &headers.link {
        Some(LinkHeader::Ethernet2(eth)) => eth.clone(),
        other => panic!("expected Ethernet II, got {other:?}"),
    }
}

fn net_ipv4(headers: &PacketHeaders<'_>) -> etherparse::Ipv4Header {
    match &headers.net {
        Some(NetHeaders::Ipv4(ip, _)) => ip.clone(),
        other => panic!("expected IPv4, got {other:?}"),
    }
}

fn net_ipv6(headers: &PacketHeaders<'_>) -> etherparse::Ipv6Header {
    match &headers.net {
        Some(NetHeaders::Ipv6(ip, _)) => ip.clone(),
        other => panic!("expected IPv6, got {other:?}"),
    }
}

#[test]
fn ethernet_alone() {
    let frame = built(&[eth()], 60);
    let headers = decode(&frame.bytes);
    let eth = ethernet(&headers);
    assert_eq!(eth.destination, DST);
    assert_eq!(eth.source, SRC);
    // Nothing follows, so the OTG default EtherType stays.
    assert_eq!(eth.ether_type.0, 0xFFFF);
    assert_eq!(headers.payload.slice(), &frame.bytes[14..]);
    assert_eq!(frame.payload, 14..60);
}

#[test]
fn vlan_ipv4_udp() {
    let stack = [
        eth(),
        hdr(Vlan, &[("priority", 5), ("cfi", 1), ("id", 0x123)]),
        ip4(&[
            ("priority", 0xB9),
            ("identification", 0xBEEF),
            ("dont_fragment", 1),
            ("time_to_live", 17),
        ]),
        hdr(Udp, &[("src_port", 40000), ("dst_port", 5001)]),
    ];
    let frame = built(&stack, 124);
    let headers = decode(&frame.bytes);

    assert_eq!(ethernet(&headers).ether_type.0, 0x8100);
    let Some(VlanHeader::Single(vlan)) = &headers.vlan else {
        panic!("expected one VLAN tag, got {:?}", headers.vlan);
    };
    assert_eq!(vlan.pcp.value(), 5);
    assert!(vlan.drop_eligible_indicator);
    assert_eq!(vlan.vlan_id.value(), 0x123);
    assert_eq!(vlan.ether_type.0, 0x0800);

    let ip = net_ipv4(&headers);
    assert_eq!(ip.dscp.value(), 0xB9 >> 2);
    assert_eq!(ip.ecn.value(), 0xB9 & 3);
    assert_eq!(usize::from(ip.total_len), 124 - 18);
    assert_eq!(ip.identification, 0xBEEF);
    assert!(ip.dont_fragment && !ip.more_fragments);
    assert_eq!(ip.time_to_live, 17);
    assert_eq!(ip.protocol.0, 17);
    assert_eq!(ip.source, IP4_SRC);
    assert_eq!(ip.destination, IP4_DST);
    assert_eq!(ip.header_checksum, ip.calc_header_checksum());

    let Some(TransportHeader::Udp(udp)) = &headers.transport else {
        panic!("expected UDP, got {:?}", headers.transport);
    };
    assert_eq!(udp.source_port, 40000);
    assert_eq!(udp.destination_port, 5001);
    assert_eq!(usize::from(udp.length), 124 - 38);
    let payload = headers.payload.slice();
    assert_eq!(payload, &frame.bytes[46..]);
    assert_eq!(udp.checksum, udp.calc_checksum_ipv4(&ip, payload).unwrap());
    assert_ne!(udp.checksum, 0);
}

#[test]
fn qinq_ipv6_tcp_with_odd_payload() {
    let stack = [
        hdr(
            Ethernet,
            &[("dst", mac(DST)), ("src", mac(SRC)), ("ether_type", 0x88A8)],
        ),
        hdr(Vlan, &[("id", 100), ("priority", 3)]),
        hdr(Vlan, &[("id", 200), ("cfi", 1)]),
        ip6(&[
            ("traffic_class", 0xA4),
            ("flow_label", 0xABCDE),
            ("hop_limit", 9),
        ]),
        hdr(
            Tcp,
            &[
                ("src_port", 1234),
                ("dst_port", 80),
                ("seq_num", 0xDEAD_BEEF),
                ("ack_num", 0x0102_0304),
                ("ecn_ns", 1),
                ("ecn_echo", 1),
                ("ctl_ack", 1),
                ("ctl_psh", 1),
                ("ctl_fin", 1),
                ("window", 0xFACE),
                ("urgent_pointer", 0x0BAD),
            ],
        ),
    ];
    // 22 + 40 + 20 = 82 header bytes, 41 payload bytes: an odd checksum span.
    let frame = built(&stack, 123);
    let headers = decode(&frame.bytes);

    assert_eq!(ethernet(&headers).ether_type.0, 0x88A8);
    let Some(VlanHeader::Double(vlan)) = &headers.vlan else {
        panic!("expected two VLAN tags, got {:?}", headers.vlan);
    };
    assert_eq!(vlan.outer.vlan_id.value(), 100);
    assert_eq!(vlan.outer.pcp.value(), 3);
    assert_eq!(vlan.outer.ether_type.0, 0x8100);
    assert_eq!(vlan.inner.vlan_id.value(), 200);
    assert!(vlan.inner.drop_eligible_indicator);
    assert_eq!(vlan.inner.ether_type.0, 0x86DD);

    let ip = net_ipv6(&headers);
    assert_eq!(ip.traffic_class, 0xA4);
    assert_eq!(ip.flow_label.value(), 0xABCDE);
    assert_eq!(ip.hop_limit, 9);
    assert_eq!(usize::from(ip.payload_length), 123 - 22 - 40);
    assert_eq!(ip.next_header.0, 6);
    assert_eq!(ip.source, IP6_SRC);
    assert_eq!(ip.destination, IP6_DST);

    let Some(TransportHeader::Tcp(tcp)) = &headers.transport else {
        panic!("expected TCP, got {:?}", headers.transport);
    };
    assert_eq!(tcp.source_port, 1234);
    assert_eq!(tcp.destination_port, 80);
    assert_eq!(tcp.sequence_number, 0xDEAD_BEEF);
    assert_eq!(tcp.acknowledgment_number, 0x0102_0304);
    assert_eq!(tcp.header_len(), 20);
    assert_eq!(
        (tcp.ns, tcp.cwr, tcp.ece, tcp.urg, tcp.ack, tcp.psh, tcp.rst, tcp.syn, tcp.fin),
        (true, false, true, false, true, true, false, false, true)
    );
    assert_eq!(tcp.window_size, 0xFACE);
    assert_eq!(tcp.urgent_pointer, 0x0BAD);
    let payload = headers.payload.slice();
    assert_eq!(payload.len(), 41);
    assert_eq!(tcp.checksum, tcp.calc_checksum_ipv6(&ip, payload).unwrap());
}

#[test]
fn ipv4_tcp_syn_and_odd_payload() {
    let stack = [
        eth(),
        ip4(&[]),
        hdr(
            Tcp,
            &[
                ("ctl_syn", 1),
                ("ctl_urg", 1),
                ("ctl_rst", 1),
                ("ecn_cwr", 1),
            ],
        ),
    ];
    let frame = built(&stack, 77);
    let headers = decode(&frame.bytes);
    let ip = net_ipv4(&headers);
    assert_eq!(ip.protocol.0, 6);
    let Some(TransportHeader::Tcp(tcp)) = &headers.transport else {
        panic!("expected TCP, got {:?}", headers.transport);
    };
    assert!(tcp.syn && tcp.urg && tcp.rst && tcp.cwr);
    assert!(!tcp.ack && !tcp.fin && !tcp.ns && !tcp.ece && !tcp.psh);
    let payload = headers.payload.slice();
    assert_eq!(payload.len(), 77 - 54);
    assert_eq!(tcp.checksum, tcp.calc_checksum_ipv4(&ip, payload).unwrap());
}

#[test]
fn ipv4_fragment_fields_and_tos_aliases() {
    let stack = [
        eth(),
        ip4(&[
            ("dscp", 46),
            ("ecn", 1),
            ("reserved", 1),
            ("more_fragments", 1),
            ("fragment_offset", 0x1ABC),
            ("protocol", 253),
        ]),
    ];
    let frame = built(&stack, 64);
    let headers = decode(&frame.bytes);
    let ip = net_ipv4(&headers);
    assert_eq!(ip.dscp.value(), 46);
    assert_eq!(ip.ecn.value(), 1);
    assert!(ip.more_fragments && !ip.dont_fragment);
    assert_eq!(ip.fragment_offset.value(), 0x1ABC);
    assert_eq!(ip.protocol.0, 253);
    // etherparse drops the reserved flag (the top bit of byte 20), so its own checksum of
    // the decoded header would differ; verify the header bytes directly instead.
    assert_eq!(read_bits(&frame.bytes, 14 * 8 + 48, 1), 1);
    assert_eq!(frame.bytes[20] & 0x80, 0x80);
    assert_eq!(residue(&frame.bytes[14..34]), 0);
}

#[test]
fn ipv4_icmp_echo() {
    for (icmp_type, is_request) in [(8u128, true), (0, false)] {
        let stack = [
            eth(),
            ip4(&[]),
            hdr(
                Icmp,
                &[
                    ("type", icmp_type),
                    ("identifier", 0x4242),
                    ("sequence_number", 7),
                ],
            ),
        ];
        let frame = built(&stack, 99);
        let headers = decode(&frame.bytes);
        assert_eq!(net_ipv4(&headers).protocol.0, 1);
        let Some(TransportHeader::Icmpv4(icmp)) = &headers.transport else {
            panic!("expected ICMP, got {:?}", headers.transport);
        };
        let echo = match icmp.icmp_type {
            Icmpv4Type::EchoRequest(echo) if is_request => echo,
            Icmpv4Type::EchoReply(echo) if !is_request => echo,
            ref other => panic!("unexpected ICMP type {other:?}"),
        };
        assert_eq!((echo.id, echo.seq), (0x4242, 7));
        let payload = headers.payload.slice();
        assert_eq!(payload.len(), 99 - 42);
        assert_eq!(icmp.checksum, icmp.icmp_type.calc_checksum(payload));
    }
}

#[test]
fn ipv6_icmpv6_echo() {
    let stack = [
        eth(),
        ip6(&[]),
        hdr(
            Icmpv6,
            &[("identifier", 0x0101), ("sequence_number", 0xFFFF)],
        ),
    ];
    let frame = built(&stack, 101);
    let headers = decode(&frame.bytes);
    let ip = net_ipv6(&headers);
    assert_eq!(ip.next_header.0, 58);
    assert_eq!(usize::from(ip.payload_length), 101 - 54);
    let Some(TransportHeader::Icmpv6(icmp)) = &headers.transport else {
        panic!("expected ICMPv6, got {:?}", headers.transport);
    };
    let Icmpv6Type::EchoRequest(echo) = icmp.icmp_type else {
        panic!("unexpected ICMPv6 type {:?}", icmp.icmp_type);
    };
    assert_eq!((echo.id, echo.seq), (0x0101, 0xFFFF));
    let payload = headers.payload.slice();
    let expected = icmp
        .icmp_type
        .calc_checksum(ip.source, ip.destination, payload)
        .unwrap();
    assert_eq!(icmp.checksum, expected);
}

#[test]
fn ipv6_udp_odd_payload() {
    let stack = [
        eth(),
        ip6(&[]),
        hdr(Udp, &[("src_port", 9), ("dst_port", 7)]),
    ];
    let frame = built(&stack, 83);
    let headers = decode(&frame.bytes);
    let ip = net_ipv6(&headers);
    assert_eq!(ip.next_header.0, 17);
    let Some(TransportHeader::Udp(udp)) = &headers.transport else {
        panic!("expected UDP, got {:?}", headers.transport);
    };
    assert_eq!(usize::from(udp.length), 83 - 54);
    let payload = headers.payload.slice();
    assert_eq!(payload.len(), 83 - 62);
    assert_eq!(udp.checksum, udp.calc_checksum_ipv6(&ip, payload).unwrap());
}

#[test]
fn ipv6_extension_header_as_custom_bytes() {
    // A Destination Options header (next header 17 = UDP, length 0 = 8 bytes, PadN).
    let options = vec![17, 0, 1, 4, 0, 0, 0, 0];
    let stack = [
        eth(),
        ip6(&[("next_header", 60)]),
        Header::custom(options),
        hdr(Udp, &[("dst_port", 53)]),
    ];
    let frame = built(&stack, 100);
    let headers = decode(&frame.bytes);
    let ip = net_ipv6(&headers);
    assert_eq!(usize::from(ip.payload_length), 100 - 54);
    let Some(TransportHeader::Udp(udp)) = &headers.transport else {
        panic!(
            "expected UDP behind the extension header, got {:?}",
            headers.transport
        );
    };
    assert_eq!(usize::from(udp.length), 100 - 62);
    let payload = headers.payload.slice();
    assert_eq!(udp.checksum, udp.calc_checksum_ipv6(&ip, payload).unwrap());
}

#[test]
fn arp_over_ethernet() {
    let stack = [
        eth(),
        hdr(
            Arp,
            &[
                ("operation", 2),
                ("sender_hardware_addr", mac(SRC)),
                ("sender_protocol_addr", ipv4(IP4_SRC)),
                ("target_hardware_addr", mac(DST)),
                ("target_protocol_addr", ipv4(IP4_DST)),
            ],
        ),
    ];
    let frame = built(&stack, 60);
    let headers = decode(&frame.bytes);
    assert_eq!(ethernet(&headers).ether_type.0, 0x0806);
    // etherparse 0.16 does not decode ARP; compare with the RFC 826 layout by hand.
    let mut expected = vec![0x00, 0x01, 0x08, 0x00, 6, 4, 0x00, 0x02];
    expected.extend_from_slice(&SRC);
    expected.extend_from_slice(&IP4_SRC);
    expected.extend_from_slice(&DST);
    expected.extend_from_slice(&IP4_DST);
    assert_eq!(&frame.bytes[14..42], expected.as_slice());
    assert_eq!(headers.payload.slice(), &frame.bytes[14..]);
}

/// Inner frame of a VXLAN packet: Ethernet / IPv4 / UDP with a payload.
fn inner_frame() -> Vec<Header> {
    vec![
        hdr(
            Ethernet,
            &[
                ("dst", mac([2, 0, 0, 0, 0, 2])),
                ("src", mac([2, 0, 0, 0, 0, 1])),
            ],
        ),
        hdr(
            Ipv4,
            &[
                ("src", ipv4([172, 16, 0, 1])),
                ("dst", ipv4([172, 16, 0, 2])),
            ],
        ),
        hdr(Udp, &[("src_port", 1111), ("dst_port", 2222)]),
    ]
}

/// Checks the inner frame that starts after the 8-byte VXLAN header at `vxlan_at`.
fn check_inner(bytes: &[u8], vxlan_at: usize, vni: u32) {
    assert_eq!(bytes[vxlan_at], 0x08);
    assert_eq!(
        u32::from_be_bytes(bytes[vxlan_at + 4..vxlan_at + 8].try_into().unwrap()) >> 8,
        vni
    );
    let inner = &bytes[vxlan_at + 8..];
    let headers = decode(inner);
    assert_eq!(ethernet(&headers).ether_type.0, 0x0800);
    let ip = net_ipv4(&headers);
    assert_eq!(usize::from(ip.total_len), inner.len() - 14);
    assert_eq!(ip.header_checksum, ip.calc_header_checksum());
    let Some(TransportHeader::Udp(udp)) = &headers.transport else {
        panic!("expected inner UDP, got {:?}", headers.transport);
    };
    assert_eq!((udp.source_port, udp.destination_port), (1111, 2222));
    assert_eq!(usize::from(udp.length), inner.len() - 34);
    let payload = headers.payload.slice();
    assert_eq!(udp.checksum, udp.calc_checksum_ipv4(&ip, payload).unwrap());
}

#[test]
fn vxlan_over_ipv4_zero_outer_udp_checksum() {
    let mut stack = vec![
        eth(),
        ip4(&[]),
        hdr(Udp, &[("src_port", 49152)]),
        hdr(Vxlan, &[("vni", 0xABCDEF)]),
    ];
    stack.extend(inner_frame());
    let frame = built(&stack, 150);
    let headers = decode(&frame.bytes);
    let ip = net_ipv4(&headers);
    assert_eq!(usize::from(ip.total_len), 150 - 14);
    assert_eq!(ip.header_checksum, ip.calc_header_checksum());
    let Some(TransportHeader::Udp(udp)) = &headers.transport else {
        panic!("expected UDP, got {:?}", headers.transport);
    };
    assert_eq!(udp.destination_port, 4789);
    assert_eq!(usize::from(udp.length), 150 - 34);
    assert_eq!(
        udp.checksum, 0,
        "RFC 7348: outer UDP checksum zero over IPv4"
    );
    check_inner(&frame.bytes, 42, 0xABCDEF);
    // Inner specs come first: inner UDP, inner IPv4, then the outer IPv4 header.
    let owners: Vec<usize> = frame.checksums.iter().map(|c| c.header_index).collect();
    assert_eq!(owners, vec![6, 5, 1]);
}

#[test]
fn vxlan_over_ipv6_outer_udp_checksum_computed() {
    let mut stack = vec![eth(), ip6(&[]), hdr(Udp, &[]), hdr(Vxlan, &[("vni", 77)])];
    stack.extend(inner_frame());
    let frame = built(&stack, 171);
    let headers = decode(&frame.bytes);
    let ip = net_ipv6(&headers);
    let Some(TransportHeader::Udp(udp)) = &headers.transport else {
        panic!("expected UDP, got {:?}", headers.transport);
    };
    assert_eq!(udp.destination_port, 4789);
    let payload = headers.payload.slice();
    assert_eq!(payload.len(), 171 - 62);
    assert_eq!(udp.checksum, udp.calc_checksum_ipv6(&ip, payload).unwrap());
    check_inner(&frame.bytes, 62, 77);
    let owners: Vec<usize> = frame.checksums.iter().map(|c| c.header_index).collect();
    assert_eq!(owners, vec![6, 5, 2]);
    assert_eq!(be16(&frame.bytes, 54 + 6), udp.checksum);
}
