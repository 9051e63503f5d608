//! PTP frames compared with hand-assembled IEEE 1588 v2 Sync messages.

mod common;

use common::{hdr, ipv4, mac};
use strobe_wire::HeaderKind::*;
use strobe_wire::{build, Header, Payload};

fn sync() -> Header {
    hdr(
        Ptp,
        &[
            ("transport_specific", 1),
            ("domain_number", 24),
            ("flags", 0x0200),
            ("correction", 0x0000_0000_0001_8000),
            ("clock_identity", 0x0011_22FF_FE33_4455),
            ("source_port", 1),
            ("sequence_id", 0x1234),
            ("log_message_interval", 0xFD),
            ("origin_seconds", 0x0000_6543_2100),
            ("origin_nanoseconds", 999_999_999),
        ],
    )
}

/// The same Sync message written out byte by byte from IEEE 1588-2008 clause 13.
fn expected_sync() -> Vec<u8> {
    let mut bytes = vec![
        0x10, // transportSpecific 1, messageType 0 (Sync)
        0x02, // reserved, versionPTP 2
        0x00, 44,   // messageLength
        24,   // domainNumber
        0x00, // reserved
        0x02, 0x00, // flagField (twoStepFlag)
        0, 0, 0, 0, 0, 1, 0x80, 0x00, // correctionField
        0, 0, 0, 0, // reserved
        0x00, 0x11, 0x22, 0xFF, 0xFE, 0x33, 0x44, 0x55, // clockIdentity
        0x00, 0x01, // sourcePortNumber
        0x12, 0x34, // sequenceId
        0x00, // controlField (Sync)
        0xFD, // logMessageInterval (-3)
        0x00, 0x00, 0x65, 0x43, 0x21, 0x00, // originTimestamp.seconds
    ];
    bytes.extend_from_slice(&999_999_999u32.to_be_bytes());
    bytes
}

#[test]
fn ptp_over_ethernet() {
    let stack = [
        hdr(Ethernet, &[("dst", mac([0x01, 0x1B, 0x19, 0, 0, 0]))]),
        sync(),
    ];
    let frame = build(&stack, 60, &Payload::default()).unwrap();
    assert_eq!(&frame.bytes[..6], &[0x01, 0x1B, 0x19, 0, 0, 0]);
    assert_eq!(&frame.bytes[12..14], &[0x88, 0xF7]);
    assert_eq!(&frame.bytes[14..58], expected_sync().as_slice());
    assert_eq!(&frame.bytes[58..], &[0, 0]);
    assert!(frame.checksums.is_empty());
}

#[test]
fn ptp_over_udp_uses_event_port() {
    let stack = [
        hdr(Ethernet, &[]),
        hdr(
            Ipv4,
            &[
                ("src", ipv4([10, 0, 0, 1])),
                ("dst", ipv4([224, 0, 1, 129])),
            ],
        ),
        hdr(Udp, &[("src_port", 319)]),
        sync(),
    ];
    let frame = build(&stack, 86, &Payload::default()).unwrap();
    assert_eq!(&frame.bytes[36..38], &319u16.to_be_bytes());
    assert_eq!(&frame.bytes[38..40], &52u16.to_be_bytes());
    assert_eq!(&frame.bytes[42..86], expected_sync().as_slice());
}

#[test]
fn general_ptp_messages_use_port_320() {
    let mut follow_up = sync();
    follow_up.set("message_type", 8).unwrap();
    let stack = [hdr(Ethernet, &[]), hdr(Ipv4, &[]), hdr(Udp, &[]), follow_up];
    let frame = build(&stack, 86, &Payload::default()).unwrap();
    assert_eq!(&frame.bytes[36..38], &320u16.to_be_bytes());
    assert_eq!(frame.bytes[42], 0x18);
}
