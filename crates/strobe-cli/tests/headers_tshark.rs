//! Every header stack of examples/headers.toml, written to pcaps by `strobe gen` and decoded
//! by tshark (an independent decoder): field values per packet (OTG pattern cycling),
//! lengths, and checksums.

mod common;
use common::*;

const GOOD: &str = "1"; // tshark's checksum status: 0 bad, 1 good, 2 unverified

fn rows(dir: &Scratch, stack: &str, fields: &[&str]) -> Vec<Vec<String>> {
    let r = tshark(&dir.path(&format!("headers-{stack}.pcap")), fields);
    assert_eq!(r.len(), 100, "{stack}: expected 100 frames");
    r
}

fn ipv4_plus(base: [u8; 4], k: u32) -> String {
    std::net::Ipv4Addr::from(u32::from_be_bytes(base) + k).to_string()
}

#[test]
fn every_header_stack_decodes_field_by_field() {
    let dir = Scratch::new("headers");
    gen_example("headers.toml", &dir);

    // Single VLAN: id increments over 10 values, MAC alternates, random IPv4 dst in range,
    // TOS byte set, frames of 128 bytes (124 without FCS), checksums good.
    for (j, r) in rows(
        &dir,
        "vlan",
        &[
            "frame.len",
            "vlan.id",
            "vlan.priority",
            "eth.dst",
            "ip.dst",
            "ip.dsfield",
            "ip.checksum.status",
            "udp.checksum.status",
            "ip.len",
            "udp.length",
        ],
    )
    .iter()
    .enumerate()
    {
        assert_eq!(r[0], "124");
        assert_eq!(r[1], (100 + j % 10).to_string(), "vlan id of frame {j}");
        assert_eq!(r[2], "5");
        let mac = if j % 2 == 0 {
            "02:00:00:00:00:02"
        } else {
            "02:00:00:00:00:03"
        };
        assert_eq!(r[3], mac);
        assert!(
            r[4].starts_with("198.18.1."),
            "random dst {} out of range",
            r[4]
        );
        assert_eq!(r[5], "0xb8");
        assert_eq!(
            (r[6].as_str(), r[7].as_str()),
            (GOOD, GOOD),
            "checksums of frame {j}"
        );
        assert_eq!(r[8], "106"); // 124 - 14 - 4
        assert_eq!(r[9], "86");
    }

    // QinQ: outer 802.1ad tag (0x88a8) then 802.1Q, inner id decrements by 2 over 5 values.
    for (j, r) in rows(
        &dir,
        "qinq",
        &[
            "eth.type",
            "ieee8021ad.id",
            "vlan.id",
            "ip.checksum.status",
            "udp.checksum.status",
        ],
    )
    .iter()
    .enumerate()
    {
        assert_eq!(r[0], "0x88a8");
        assert_eq!(r[1], "10");
        assert_eq!(
            r[2],
            (200 - 2 * (j % 5)).to_string(),
            "inner vlan id of frame {j}"
        );
        assert_eq!((r[3].as_str(), r[4].as_str()), (GOOD, GOOD));
    }

    // ARP: target protocol address increments over 50 values.
    for (j, r) in rows(
        &dir,
        "arp",
        &[
            "arp.opcode",
            "arp.src.proto_ipv4",
            "arp.dst.proto_ipv4",
            "arp.src.hw_mac",
        ],
    )
    .iter()
    .enumerate()
    {
        assert_eq!(r[0], "1");
        assert_eq!(r[1], "198.18.0.1");
        assert_eq!(r[2], ipv4_plus([198, 18, 0, 2], (j % 50) as u32));
        assert_eq!(r[3], "02:00:00:00:00:01");
    }

    // IPv6 + TCP: source cycles over 4 addresses, sequence number increments, SYN, checksum.
    for (j, r) in rows(
        &dir,
        "ipv6-tcp",
        &[
            "ipv6.src",
            "ipv6.hlim",
            "ipv6.plen",
            "tcp.seq_raw",
            "tcp.flags.syn",
            "tcp.window_size_value",
            "tcp.checksum.status",
            "tcp.hdr_len",
        ],
    )
    .iter()
    .enumerate()
    {
        assert_eq!(r[0], format!("2001:2::{:x}", 1 + j % 4));
        assert_eq!(r[1], "32");
        assert_eq!(r[2], "198"); // 252 - 14 - 40
        assert_eq!(r[3], (1000 + 100 * j).to_string());
        assert_eq!(r[4], "1");
        assert_eq!(r[5], "65535");
        assert_eq!(r[6], GOOD, "tcp checksum of frame {j}");
        assert_eq!(r[7], "20");
    }

    // ICMP echo: sequence increments from 1, identifier fixed, checksum good.
    for (j, r) in rows(
        &dir,
        "icmp",
        &[
            "icmp.type",
            "icmp.ident",
            "icmp.seq",
            "icmp.checksum.status",
            "ip.proto",
        ],
    )
    .iter()
    .enumerate()
    {
        assert_eq!(r[0], "8");
        assert_eq!(r[1], "77");
        assert_eq!(r[2], (j + 1).to_string());
        assert_eq!(r[3], GOOD, "icmp checksum of frame {j}");
        assert_eq!(r[4], "1");
    }

    // ICMPv6 echo.
    for (j, r) in rows(
        &dir,
        "icmpv6",
        &[
            "icmpv6.type",
            "icmpv6.echo.identifier",
            "icmpv6.echo.sequence_number",
            "icmpv6.checksum.status",
            "ipv6.nxt",
        ],
    )
    .iter()
    .enumerate()
    {
        assert_eq!(r[0], "128");
        assert_eq!(r[1], "0x004e"); // tshark shows the identifier in hex
        assert_eq!(r[2], (j + 1).to_string());
        assert_eq!(r[3], GOOD, "icmpv6 checksum of frame {j}");
        assert_eq!(r[4], "58");
    }

    // PTP over Ethernet (0x88F7) and over UDP (port 319).
    for (j, r) in rows(
        &dir,
        "ptp-l2",
        &[
            "eth.type",
            "ptp.v2.messagetype",
            "ptp.v2.versionptp",
            "ptp.v2.sequenceid",
            "ptp.v2.messagelength",
        ],
    )
    .iter()
    .enumerate()
    {
        assert_eq!(r[0], "0x88f7");
        assert_eq!(r[1], "0x00");
        assert_eq!(r[2], "2");
        assert_eq!(r[3], j.to_string());
        assert_eq!(r[4], "44");
    }
    for (j, r) in rows(
        &dir,
        "ptp-udp",
        &[
            "udp.dstport",
            "ptp.v2.sequenceid",
            "ptp.v2.domainnumber",
            "udp.checksum.status",
        ],
    )
    .iter()
    .enumerate()
    {
        assert_eq!(r[0], "319");
        assert_eq!(r[1], (100 + j).to_string());
        assert_eq!(r[2], "4");
        assert_eq!(r[3], GOOD);
    }

    // VXLAN: outer UDP to 4789 with source port cycling, VNI from a list, inner frame with
    // its own incrementing source address and a good inner UDP checksum.
    for (j, r) in rows(
        &dir,
        "vxlan",
        &[
            "udp.dstport",
            "udp.srcport",
            "vxlan.vni",
            "ip.src",
            "udp.checksum.status",
            "ip.checksum.status",
        ],
    )
    .iter()
    .enumerate()
    {
        assert_eq!(r[0], "4789,6000");
        assert_eq!(r[1], format!("{},5000", 49152 + j % 64));
        assert_eq!(r[2], ["100", "200", "300"][j % 3]);
        assert_eq!(
            r[3],
            format!("198.18.0.1,{}", ipv4_plus([198, 19, 0, 1], j as u32))
        );
        // RFC 7348: outer UDP checksum zero over IPv4 (tshark: 3, not present); inner good.
        assert_eq!(r[4], format!("3,{GOOD}"));
        assert_eq!(r[5], format!("{GOOD},{GOOD}"));
    }

    // Custom bytes after Ethernet, then the fixed payload pattern repeated.
    for r in rows(&dir, "custom", &["eth.type", "data.data"]) {
        assert_eq!(r[0], "0x88b5");
        let expected: String = "0102030405060708"
            .chars()
            .chain("c0ffee".chars().cycle().take((92 - 14 - 8 - 16) * 2))
            .collect();
        assert!(r[1].starts_with(&expected), "custom payload {}", r[1]);
    }
}
