//! Every stack of examples/tunnels.toml (GRE, MPLS, GTPv1 with an extension header, GTPv2,
//! PPP, IGMPv1, PFC and global pause), written to pcaps by `strobe gen` and decoded by
//! tshark (an independent decoder) frame by frame: computed fields, field patterns,
//! lengths, checksums — and strobe's trailer still at the end of every frame.

mod common;
use common::*;

const GOOD: &str = "1"; // tshark's checksum status: 0 bad, 1 good, 2 unverified

fn rows(dir: &Scratch, stack: &str, fields: &[&str]) -> Vec<Vec<String>> {
    let r = tshark(&dir.path(&format!("tunnels-{stack}.pcap")), fields);
    assert_eq!(r.len(), 100, "{stack}: expected 100 frames");
    r
}

/// The frames of a pcap written by strobe (classic pcap, either byte order of timestamps),
/// read by hand so that the trailer bytes can be checked whatever tshark makes of them.
fn pcap_frames(path: &str) -> Vec<Vec<u8>> {
    let data = std::fs::read(path).expect("pcap written");
    let little = match data[..4] {
        [0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1] => true,
        [0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d] => false,
        _ => panic!("{path}: not a classic pcap"),
    };
    let u32_at = |at: usize| {
        let b: [u8; 4] = data[at..at + 4].try_into().unwrap();
        if little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }
    };
    let mut frames = Vec::new();
    let mut at = 24;
    while at + 16 <= data.len() {
        let len = u32_at(at + 8) as usize;
        frames.push(data[at + 16..at + 16 + len].to_vec());
        at += 16 + len;
    }
    frames
}

/// Every frame ends with strobe's trailer: marker 'S', the flow's id, sequence j.
fn assert_trailers(dir: &Scratch, stack: &str, flow_id: u16) {
    let frames = pcap_frames(&dir.path(&format!("tunnels-{stack}.pcap")));
    assert_eq!(frames.len(), 100, "{stack}");
    for (j, frame) in frames.iter().enumerate() {
        let t = &frame[frame.len() - 16..];
        assert_eq!(t[0], b'S', "{stack}: trailer marker of frame {j}");
        assert_eq!(
            u16::from_be_bytes([t[2], t[3]]),
            flow_id,
            "{stack}: flow id"
        );
        assert_eq!(
            u32::from_be_bytes([t[4], t[5], t[6], t[7]]),
            j as u32,
            "{stack}: trailer sequence of frame {j}"
        );
    }
}

#[test]
fn every_tunnel_stack_decodes_field_by_field() {
    let dir = Scratch::new("tunnels");
    gen_example("tunnels.toml", &dir);
    for (id, stack) in [
        "gre",
        "gre-ipv6",
        "mpls",
        "gtpv1",
        "gtpv2",
        "pfcpause",
        "ethernetpause",
        "igmpv1",
        "ppp",
        "gre-ppp",
    ]
    .iter()
    .enumerate()
    {
        assert_trailers(&dir, stack, id as u16);
    }

    // IPv4/GRE/IPv4/UDP: outer protocol 47, GRE checksum present and good over frames of
    // 100..199 bytes, GRE protocol 0x0800, inner source and destination port patterns.
    for (j, r) in rows(
        &dir,
        "gre",
        &[
            "frame.len",
            "ip.proto",
            "gre.flags.checksum",
            "gre.proto",
            "gre.checksum.status",
            "ip.len",
            "ip.src",
            "udp.dstport",
            "udp.checksum.status",
            "ip.checksum.status",
            "udp.length",
        ],
    )
    .iter()
    .enumerate()
    {
        let len = 96 + j; // sizes 100.. include the 4-byte FCS
        assert_eq!(r[0], len.to_string());
        assert_eq!(r[1], "47,17");
        assert_eq!(r[2], "1");
        assert_eq!(r[3], "0x0800");
        assert_eq!(r[4], GOOD, "gre checksum of frame {j}");
        assert_eq!(r[5], format!("{},{}", len - 14, len - 14 - 20 - 8));
        assert_eq!(r[6], format!("198.18.0.1,10.0.0.{}", 1 + j));
        assert_eq!(r[7], (5000 - j).to_string());
        assert_eq!(r[8], GOOD);
        assert_eq!(r[9], format!("{GOOD},{GOOD}"));
        assert_eq!(r[10], (len - 14 - 20 - 8 - 20).to_string());
    }
    // The GRE reserved1 word (present with the checksum) increments by 3 over 50 values:
    // read from the frame, tshark does not show it.
    let frames = pcap_frames(&dir.path("tunnels-gre.pcap"));
    for (j, frame) in frames.iter().enumerate() {
        let reserved1 = u16::from_be_bytes([frame[14 + 20 + 6], frame[14 + 20 + 7]]);
        assert_eq!(
            reserved1 as usize,
            7 + 3 * (j % 50),
            "gre.reserved1 of frame {j}"
        );
    }

    // GRE without checksum carrying IPv6: protocol 0x86DD, 4-byte header, reserved0 cycling.
    for (j, r) in rows(
        &dir,
        "gre-ipv6",
        &[
            "gre.flags_and_version",
            "gre.proto",
            "gre.flags.checksum",
            "ipv6.src",
            "ipv6.plen",
            "udp.checksum.status",
        ],
    )
    .iter()
    .enumerate()
    {
        assert_eq!(r[0], ["0x0000", "0x0038"][j % 2], "reserved0 of frame {j}");
        assert_eq!(r[1], "0x86dd");
        assert_eq!(r[2], "0");
        assert_eq!(r[3], "2001:db8::1");
        assert_eq!(r[4], (156 - 14 - 20 - 4 - 40).to_string());
        assert_eq!(r[5], GOOD);
    }

    // MPLS: EtherType 0x8847, outer label incrementing by 10 over 20 values with a traffic
    // class list, inner label fixed with a decrementing TTL; bottom of stack computed.
    for (j, r) in rows(
        &dir,
        "mpls",
        &[
            "eth.type",
            "mpls.label",
            "mpls.exp",
            "mpls.bottom",
            "mpls.ttl",
            "ip.src",
            "ip.checksum.status",
            "udp.checksum.status",
        ],
    )
    .iter()
    .enumerate()
    {
        assert_eq!(r[0], "0x8847");
        assert_eq!(r[1], format!("{},2000", 1000 + 10 * (j % 20)));
        assert_eq!(r[2], format!("{},0", [0, 5, 7][j % 3]));
        assert_eq!(r[3], "0,1");
        assert_eq!(r[4], format!("64,{}", 200 - j));
        assert_eq!(r[5], "198.18.0.1");
        assert_eq!((r[6].as_str(), r[7].as_str()), (GOOD, GOOD));
    }

    // GTPv1-U with a PDU session container: UDP port 2152, flags E and S computed (0x36),
    // T-PDU message type computed, length = bytes after the mandatory 8, TEID and sequence
    // incrementing, extension length 2 with QFI 9, inner IPv4 destination random in range.
    for (j, r) in rows(
        &dir,
        "gtpv1",
        &[
            "udp.dstport",
            "gtp.flags",
            "gtp.message",
            "gtp.length",
            "gtp.teid",
            "gtp.seq_number",
            "gtp.ext_hdr.length",
            "gtp.ext_hdr.pdu_ses_con.qos_flow_id",
            "ip.dst",
            "udp.checksum.status",
            "ip.checksum.status",
        ],
    )
    .iter()
    .enumerate()
    {
        assert_eq!(r[0], "2152,2000");
        assert_eq!(r[1], "0x36");
        assert_eq!(r[2], "0xff");
        assert_eq!(r[3], (188 - 14 - 20 - 8 - 8).to_string());
        assert_eq!(r[4], format!("0x{:08x}", 0x10000 + j));
        assert_eq!(r[5], format!("0x{:04x}", 1 + j));
        assert_eq!(r[6], "2");
        assert_eq!(r[7], "9");
        let inner = r[8].split(',').nth(1).expect("inner ipv4 decoded");
        assert!(
            inner.starts_with("10.9.0."),
            "random dst {inner} out of range"
        );
        assert_eq!(r[9], format!("{GOOD},{GOOD}"));
        assert_eq!(r[10], format!("{GOOD},{GOOD}"));
    }

    // GTPv2-C: UDP port 2123, teid_flag computed from the TEID list, length after the
    // first 4 bytes, sequence numbers by 2.
    for (j, r) in rows(
        &dir,
        "gtpv2",
        &[
            "udp.dstport",
            "gtpv2.flags",
            "gtpv2.t",
            "gtpv2.message_type",
            "gtpv2.msg_length",
            "gtpv2.teid",
            "gtpv2.seq",
            "udp.checksum.status",
        ],
    )
    .iter()
    .enumerate()
    {
        assert_eq!(r[0], "2123");
        assert_eq!(r[1], "0x48");
        assert_eq!(r[2], "1");
        assert_eq!(r[3], "32");
        assert_eq!(r[4], (92 - 14 - 20 - 8 - 4).to_string());
        assert_eq!(r[5], format!("0x{:08x}", 1 + j % 4));
        assert_eq!(r[6], format!("0x{:06x}", 500 + 2 * j));
        assert_eq!(r[7], GOOD);
    }

    // PFC: OTG's defaults (01:80:C2:00:00:01, 0x8808, opcode 0x0101), the class vector and
    // two class times, one incrementing; padded to the minimum frame.
    for (j, r) in rows(
        &dir,
        "pfcpause",
        &[
            "frame.len",
            "eth.dst",
            "eth.type",
            "macc.opcode",
            "macc.cbfc.enbv",
            "macc.cbfc.pause_time.c3",
            "macc.cbfc.pause_time.c5",
            "macc.cbfc.pause_time.c0",
        ],
    )
    .iter()
    .enumerate()
    {
        assert_eq!(r[0], "60");
        assert_eq!(r[1], "01:80:c2:00:00:01");
        assert_eq!(r[2], "0x8808");
        assert_eq!(r[3], "0x0101");
        assert_eq!(r[4], "0x0028");
        assert_eq!(r[5], (100 + j).to_string());
        assert_eq!(r[6], "65535");
        assert_eq!(r[7], "0");
    }

    // Global pause: opcode 1 by default, pause time from a list.
    for (j, r) in rows(
        &dir,
        "ethernetpause",
        &["eth.dst", "eth.type", "macc.opcode", "macc.pause_time"],
    )
    .iter()
    .enumerate()
    {
        assert_eq!(r[0], "01:80:c2:00:00:01");
        assert_eq!(r[1], "0x8808");
        assert_eq!(r[2], "0x0001");
        assert_eq!(r[3], ["0", "1", "65535"][j % 3]);
    }

    // IGMPv1 reports: IP protocol 2 computed, checksum over the 8-byte message good, group
    // incrementing.
    for (j, r) in rows(
        &dir,
        "igmpv1",
        &[
            "ip.proto",
            "igmp.version",
            "igmp.type",
            "igmp.checksum.status",
            "igmp.maddr",
            "ip.checksum.status",
        ],
    )
    .iter()
    .enumerate()
    {
        assert_eq!(r[0], "2");
        assert_eq!(r[1], "1");
        assert_eq!(r[2], "0x12");
        assert_eq!(r[3], GOOD, "igmp checksum of frame {j}");
        assert_eq!(r[4], format!("239.1.1.{}", 1 + j));
        assert_eq!(r[5], GOOD);
    }

    // PPP in GRE (PPTP's encapsulation): GRE protocol 0x880B, address 0xFF, control 0x03,
    // protocol 0x0057 (IPv6) computed.
    for r in rows(
        &dir,
        "gre-ppp",
        &[
            "gre.proto",
            "ppp.address",
            "ppp.control",
            "ppp.protocol",
            "ipv6.src",
            "udp.checksum.status",
        ],
    ) {
        assert_eq!(r[0], "0x880b");
        assert_eq!((r[1].as_str(), r[2].as_str()), ("0xff", "0x03"));
        assert_eq!(r[3], "0x0057");
        assert_eq!(r[4], "2001:db8::1");
        assert_eq!(r[5], GOOD);
    }

    // PPP straight after Ethernet: tshark has no dissector on EtherType 0x880B, so it shows
    // the bytes: FF 03, protocol 0x0021, then the IPv4 header (0x45).
    for r in rows(&dir, "ppp", &["eth.type", "data.data"]) {
        assert_eq!(r[0], "0x880b");
        assert!(r[1].starts_with("ff03002145"), "ppp bytes {}", r[1]);
    }
}
