//! Turning a received frame around for a reflector: swap the source and destination of every
//! layer strobe understands (Ethernet, IPv4/IPv6, UDP/TCP ports), in place.
//!
//! Swapping two fields that are summed into the same checksum leaves the checksum valid (the
//! one's-complement sum does not depend on order), so no checksum is touched — the frame,
//! trailer included, goes back exactly as it came apart from the swapped addresses. The input
//! is untrusted: every access is bounds-checked and nothing here panics.

const ETHERTYPE_VLAN: u16 = 0x8100;
const ETHERTYPE_QINQ: u16 = 0x88a8;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;

/// What [`swap_addresses`] swapped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Swapped {
    pub ip: bool,
    pub ports: bool,
}

/// Swaps `a` and `b` (equal length, not overlapping) inside `frame`.
fn swap_ranges(frame: &mut [u8], a: usize, b: usize, len: usize) {
    let (lo, hi) = frame.split_at_mut(b);
    lo[a..a + len].swap_with_slice(&mut hi[..len]);
}

fn be16(frame: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(frame.get(at..at + 2)?.try_into().ok()?))
}

/// Swaps addresses and ports in place. Returns None (frame untouched) when the frame is too
/// short for an Ethernet header; otherwise what was swapped besides the MAC addresses.
pub fn swap_addresses(frame: &mut [u8]) -> Option<Swapped> {
    if frame.len() < 14 {
        return None;
    }
    swap_ranges(frame, 0, 6, 6);
    let mut at = 12;
    let mut ethertype = be16(frame, at)?;
    // At most two VLAN tags (QinQ), as strobe generates.
    for _ in 0..2 {
        if ethertype != ETHERTYPE_VLAN && ethertype != ETHERTYPE_QINQ {
            break;
        }
        at += 4;
        let Some(t) = be16(frame, at) else {
            return Some(Swapped::default());
        };
        ethertype = t;
    }
    let l3 = at + 2;
    let (proto, l4) = match ethertype {
        ETHERTYPE_IPV4 => {
            let Some(&vihl) = frame.get(l3) else {
                return Some(Swapped::default());
            };
            let ihl = (vihl & 0x0f) as usize * 4;
            if vihl >> 4 != 4 || ihl < 20 || frame.len() < l3 + ihl {
                return Some(Swapped::default());
            }
            swap_ranges(frame, l3 + 12, l3 + 16, 4);
            // Only the first fragment carries the transport header.
            let fragment_offset = be16(frame, l3 + 6).unwrap_or(0) & 0x1fff;
            let proto = if fragment_offset == 0 {
                frame[l3 + 9]
            } else {
                0
            };
            (proto, l3 + ihl)
        }
        ETHERTYPE_IPV6 => {
            if frame.len() < l3 + 40 || frame[l3] >> 4 != 6 {
                return Some(Swapped::default());
            }
            swap_ranges(frame, l3 + 8, l3 + 24, 16);
            (frame[l3 + 6], l3 + 40)
        }
        _ => return Some(Swapped::default()),
    };
    let ports = matches!(proto, PROTO_UDP | PROTO_TCP) && frame.len() >= l4 + 4;
    if ports {
        swap_ranges(frame, l4, l4 + 2, 2);
    }
    Some(Swapped { ip: true, ports })
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{NetSlice, PacketBuilder, SlicedPacket, TransportSlice};
    use proptest::prelude::*;

    fn udp4() -> Vec<u8> {
        let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .single_vlan(7.try_into().unwrap())
            .ipv4([198, 18, 0, 1], [198, 18, 1, 1], 64)
            .udp(1000, 2000);
        let payload = [0x5a; 30];
        let mut v = Vec::with_capacity(b.size(payload.len()));
        b.write(&mut v, &payload).unwrap();
        v
    }

    fn tcp6() -> Vec<u8> {
        let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv6(
                [0x20, 0x01, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
                [0x20, 0x01, 0, 2, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
                64,
            )
            .tcp(1000, 2000, 1, 1024);
        let payload = [0x11; 20];
        let mut v = Vec::with_capacity(b.size(payload.len()));
        b.write(&mut v, &payload).unwrap();
        v
    }

    #[test]
    fn udp_over_vlan_ipv4_is_turned_around_with_valid_checksums() {
        let mut f = udp4();
        assert_eq!(
            swap_addresses(&mut f),
            Some(Swapped {
                ip: true,
                ports: true
            })
        );
        let p = SlicedPacket::from_ethernet(&f).unwrap();
        let Some(etherparse::LinkSlice::Ethernet2(eth)) = &p.link else {
            panic!("no ethernet")
        };
        assert_eq!(eth.source(), [2, 0, 0, 0, 0, 2]);
        assert_eq!(eth.destination(), [2, 0, 0, 0, 0, 1]);
        let Some(NetSlice::Ipv4(ip)) = &p.net else {
            panic!("no ipv4")
        };
        let h = ip.header();
        assert_eq!(h.source(), [198, 18, 1, 1]);
        assert_eq!(h.destination(), [198, 18, 0, 1]);
        assert_eq!(h.to_header().calc_header_checksum(), h.header_checksum());
        let Some(TransportSlice::Udp(udp)) = &p.transport else {
            panic!("no udp")
        };
        assert_eq!((udp.source_port(), udp.destination_port()), (2000, 1000));
        let expected = udp
            .to_header()
            .calc_checksum_ipv4(&h.to_header(), udp.payload())
            .unwrap();
        assert_eq!(udp.checksum(), expected);
    }

    #[test]
    fn tcp_over_ipv6_is_turned_around_with_a_valid_checksum() {
        let original = tcp6();
        let mut f = original.clone();
        swap_addresses(&mut f).unwrap();
        let p = SlicedPacket::from_ethernet(&f).unwrap();
        let Some(NetSlice::Ipv6(ip)) = &p.net else {
            panic!("no ipv6")
        };
        assert_eq!(ip.header().source(), original[38..54]);
        let Some(TransportSlice::Tcp(tcp)) = &p.transport else {
            panic!("no tcp")
        };
        assert_eq!((tcp.source_port(), tcp.destination_port()), (2000, 1000));
        let expected = tcp
            .to_header()
            .calc_checksum_ipv6(&ip.header().to_header(), tcp.payload())
            .unwrap();
        assert_eq!(tcp.checksum(), expected);
        // Swapping twice restores the frame exactly.
        swap_addresses(&mut f).unwrap();
        assert_eq!(f, original);
    }

    #[test]
    fn non_ip_and_short_frames() {
        let mut arp = vec![0u8; 42];
        arp[..6].copy_from_slice(&[0xff; 6]);
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert_eq!(swap_addresses(&mut arp), Some(Swapped::default()));
        assert_eq!(arp[6..12], [0xff; 6]);
        assert_eq!(swap_addresses(&mut [0u8; 13]), None);
        // Truncated inside the IPv4 header: MACs swapped, nothing else touched.
        let mut f = udp4();
        f.truncate(30);
        assert_eq!(swap_addresses(&mut f), Some(Swapped::default()));
    }

    proptest! {
        #[test]
        fn never_panics_and_is_an_involution(mut bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let original = bytes.clone();
            let first = swap_addresses(&mut bytes);
            let second = swap_addresses(&mut bytes);
            prop_assert_eq!(first, second);
            prop_assert_eq!(bytes, original);
        }
    }
}
