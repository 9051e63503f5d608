//! Turning a received frame around for a reflector: swap the source and destination of every
//! layer strobe understands (Ethernet, IPv4/IPv6, UDP/TCP ports), in place.
//!
//! Swapping two fields that are summed into the same checksum leaves the checksum valid (the
//! one's-complement sum does not depend on order), so no checksum is touched — the frame,
//! trailer included, goes back exactly as it came apart from the swapped addresses. The input
//! is untrusted: every access is bounds-checked and nothing here panics.
//!
//! [`mark_reflected`] rewrites the trailer's marker to 'R' so that no reflector sends the
//! frame back again, updating every checksum that covers it incrementally (RFC 1624).

const ETHERTYPE_VLAN: u16 = 0x8100;
const ETHERTYPE_QINQ: u16 = 0x88a8;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;
const PROTO_ICMP: u8 = 1;
const PROTO_ICMPV6: u8 = 58;
const VXLAN_PORT: u16 = 4789;

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

/// A transport checksum: the field at `field`, summing 16-bit words counted from `start`.
#[derive(Clone, Copy, Debug)]
struct Covering {
    field: usize,
    start: usize,
    /// UDP: a computed 0 goes as 0xFFFF, and 0 (IPv4: no checksum) stays 0.
    udp: bool,
}

/// Why [`mark_reflected`] left a frame alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkError {
    /// No trailer marked as the generator sent it ('S') at the end of the frame.
    NotSent,
    /// The trailer lies where its checksum cannot be found or kept valid: inside a header,
    /// or in an IPv4 fragment whose transport header travels in another fragment.
    Unfit,
}

/// Rewrites the marker of the trailer ending `frame` from 'S' to 'R' and updates every
/// checksum covering it (UDP, TCP, ICMP, ICMPv6 over IPv4/IPv6, and VXLAN's inner frame),
/// so they stay valid. On error the frame is untouched.
pub fn mark_reflected(frame: &mut [u8]) -> Result<(), MarkError> {
    let at = frame
        .len()
        .checked_sub(crate::trailer::LEN)
        .ok_or(MarkError::NotSent)?
        + crate::trailer::MARK_OFFSET;
    if frame[at] != crate::trailer::MARK_SENT {
        return Err(MarkError::NotSent);
    }
    // Outermost first; at most an outer and a VXLAN inner transport header.
    let mut covering = [None; 2];
    let mut eth = 0;
    let mut end = frame.len();
    for slot in &mut covering {
        match transport_covering(frame, eth, end, at)? {
            Some((c, inner)) => {
                *slot = Some(c);
                match inner {
                    Some((inner_eth, inner_end)) => (eth, end) = (inner_eth, inner_end),
                    None => break,
                }
            }
            None => break,
        }
    }
    // Changed bytes so far: (position, old, new). Each checksum, innermost first, takes in
    // every change inside its range, then its own rewrite is a change for the outer one.
    let mut changes = [(0usize, 0u8, 0u8); 5];
    changes[0] = (
        at,
        crate::trailer::MARK_SENT,
        crate::trailer::MARK_REFLECTED,
    );
    let mut n = 1;
    for c in covering.iter().rev().flatten() {
        let old = u16::from_be_bytes([frame[c.field], frame[c.field + 1]]);
        if c.udp && old == 0 {
            continue;
        }
        let mut sum = u64::from(!old);
        for &(pos, was, now) in &changes[..n] {
            if pos < c.start || pos == c.field || pos == c.field + 1 {
                continue;
            }
            let shift = if (pos - c.start) % 2 == 0 { 8 } else { 0 };
            sum += u64::from(!(u16::from(was) << shift)) + u64::from(u16::from(now) << shift);
        }
        let mut new = !crate::checksum::fold(sum);
        if c.udp && new == 0 {
            new = 0xFFFF;
        }
        let [hi, lo] = new.to_be_bytes();
        changes[n] = (c.field, frame[c.field], hi);
        changes[n + 1] = (c.field + 1, frame[c.field + 1], lo);
        n += 2;
    }
    for &(pos, _, now) in &changes[..n] {
        frame[pos] = now;
    }
    Ok(())
}

/// The transport checksum of the Ethernet frame at `eth` (ending at `end`) that covers
/// byte `at`, and the inner Ethernet frame when it carries VXLAN. None: no known checksum
/// covers `at` (not IP, another protocol, or `at` lies in padding).
#[allow(clippy::type_complexity)]
fn transport_covering(
    frame: &[u8],
    eth: usize,
    end: usize,
    at: usize,
) -> Result<Option<(Covering, Option<(usize, usize)>)>, MarkError> {
    let frame = &frame[..end.min(frame.len())];
    let mut et_at = eth + 12;
    let mut ethertype = be16(frame, et_at).ok_or(MarkError::Unfit)?;
    for _ in 0..2 {
        if ethertype != ETHERTYPE_VLAN && ethertype != ETHERTYPE_QINQ {
            break;
        }
        et_at += 4;
        ethertype = be16(frame, et_at).ok_or(MarkError::Unfit)?;
    }
    let l3 = et_at + 2;
    let (proto, l4, ip_end, ipv4) = match ethertype {
        ETHERTYPE_IPV4 => {
            let vihl = *frame.get(l3).ok_or(MarkError::Unfit)?;
            let ihl = (vihl & 0x0f) as usize * 4;
            let total = be16(frame, l3 + 2).ok_or(MarkError::Unfit)? as usize;
            if vihl >> 4 != 4 || ihl < 20 || frame.len() < l3 + ihl {
                return Ok(None);
            }
            let ip_end = (l3 + total).min(frame.len());
            if at >= ip_end {
                return Ok(None);
            }
            if at < l3 + ihl {
                return Err(MarkError::Unfit);
            }
            let flags_offset = be16(frame, l3 + 6).ok_or(MarkError::Unfit)?;
            if flags_offset & 0x3fff != 0 {
                return Err(MarkError::Unfit);
            }
            (frame[l3 + 9], l3 + ihl, ip_end, true)
        }
        ETHERTYPE_IPV6 => {
            if frame.len() < l3 + 40 || frame[l3] >> 4 != 6 {
                return Ok(None);
            }
            let ip_end = (l3 + 40 + be16(frame, l3 + 4).unwrap_or(0) as usize).min(frame.len());
            if at >= ip_end {
                return Ok(None);
            }
            if at < l3 + 40 {
                return Err(MarkError::Unfit);
            }
            (frame[l3 + 6], l3 + 40, ip_end, false)
        }
        _ => return Ok(None),
    };
    let (field, header_len, udp) = match proto {
        PROTO_UDP => (l4 + 6, 8, true),
        PROTO_TCP => {
            let offset = frame.get(l4 + 12).map_or(20, |b| (b >> 4) as usize * 4);
            (l4 + 16, offset.max(20), false)
        }
        PROTO_ICMP if ipv4 => (l4 + 2, 8, false),
        PROTO_ICMPV6 if !ipv4 => (l4 + 2, 8, false),
        _ => return Ok(None),
    };
    let mut end = ip_end;
    if udp {
        let udp_len = be16(frame, l4 + 4).ok_or(MarkError::Unfit)? as usize;
        end = end.min(l4 + udp_len);
        if at >= end {
            return Ok(None);
        }
    }
    if at < l4 + header_len || field + 2 > end {
        return Err(MarkError::Unfit);
    }
    let covering = Covering {
        field,
        start: l4,
        udp,
    };
    let vxlan = udp
        && (be16(frame, l4) == Some(VXLAN_PORT) || be16(frame, l4 + 2) == Some(VXLAN_PORT))
        && l4 + 16 + 14 <= end;
    Ok(Some((covering, vxlan.then_some((l4 + 16, end)))))
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

    /// Whether the outermost transport checksum is valid, checked by etherparse.
    fn transport_checksum_valid(f: &[u8]) -> bool {
        let p = SlicedPacket::from_ethernet(f).unwrap();
        match (&p.net, &p.transport) {
            (Some(NetSlice::Ipv4(ip)), Some(TransportSlice::Udp(udp))) => {
                udp.checksum() == 0
                    || udp
                        .to_header()
                        .calc_checksum_ipv4(&ip.header().to_header(), udp.payload())
                        .unwrap()
                        == udp.checksum()
            }
            (Some(NetSlice::Ipv6(ip)), Some(TransportSlice::Udp(udp))) => {
                udp.to_header()
                    .calc_checksum_ipv6(&ip.header().to_header(), udp.payload())
                    .unwrap()
                    == udp.checksum()
            }
            (Some(NetSlice::Ipv4(ip)), Some(TransportSlice::Tcp(tcp))) => {
                tcp.calc_checksum_ipv4(ip.header().source(), ip.header().destination())
                    .unwrap()
                    == tcp.checksum()
            }
            (Some(NetSlice::Ipv6(ip)), Some(TransportSlice::Tcp(tcp))) => {
                tcp.calc_checksum_ipv6(ip.header().source(), ip.header().destination())
                    .unwrap()
                    == tcp.checksum()
            }
            (Some(NetSlice::Ipv4(_)), Some(TransportSlice::Icmpv4(icmp))) => {
                icmp.header().icmp_type.calc_checksum(icmp.payload()) == icmp.checksum()
            }
            (Some(NetSlice::Ipv6(ip)), Some(TransportSlice::Icmpv6(icmp))) => {
                icmp.is_checksum_valid(ip.header().source(), ip.header().destination())
            }
            other => panic!("unexpected stack {other:?}"),
        }
    }

    /// A frame of `kind` (0 UDP/IPv4, 1 UDP/IPv6, 2 TCP/IPv4, 3 TCP/IPv6, 4 ICMPv4,
    /// 5 ICMPv6, 6 UDP/IPv4 without checksum) whose payload ends in an 'S' trailer.
    fn with_trailer(kind: u8, vlan: bool, payload_len: usize, fill: u8) -> Vec<u8> {
        let eth = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
        let (s4, d4) = ([198, 18, 0, 1], [198, 18, 1, 1]);
        let (s6, d6) = (
            [0x20, 0x01, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            [0x20, 0x01, 0, 2, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        );
        let mut payload = vec![fill; payload_len.max(crate::trailer::LEN)];
        let at = payload.len() - crate::trailer::LEN;
        let tail: &mut [u8; crate::trailer::LEN] = (&mut payload[at..]).try_into().unwrap();
        crate::trailer::Trailer::sent(0x9C, 3, 0xFFFF_FFF0, 0x1234_5678_9ABC_DEF0).write(tail);
        let mut v = Vec::new();
        macro_rules! put {
            ($b:expr) => {{
                let b = $b;
                b.write(&mut v, &payload).unwrap();
            }};
        }
        match (kind, vlan) {
            (0 | 6, false) => put!(eth.ipv4(s4, d4, 64).udp(1000, 2000)),
            (0 | 6, true) => put!(eth
                .single_vlan(7.try_into().unwrap())
                .ipv4(s4, d4, 64)
                .udp(1000, 2000)),
            (1, _) => put!(eth.ipv6(s6, d6, 64).udp(1000, 2000)),
            (2, _) => put!(eth.ipv4(s4, d4, 64).tcp(1000, 2000, 1, 1024)),
            (3, _) => put!(eth.ipv6(s6, d6, 64).tcp(1000, 2000, 1, 1024)),
            (4, _) => put!(eth.ipv4(s4, d4, 64).icmpv4_echo_request(1, 2)),
            _ => put!(eth.ipv6(s6, d6, 64).icmpv6_echo_request(1, 2)),
        }
        if kind == 6 {
            let udp = if vlan { 18 + 20 } else { 14 + 20 };
            v[udp + 6..udp + 8].fill(0);
        }
        v
    }

    #[test]
    fn the_marker_becomes_r_and_every_checksum_stays_valid() {
        for kind in 0..7 {
            for payload_len in [16, 17, 18, 31, 100, 1001] {
                let original = with_trailer(kind, kind == 0, payload_len, 0xC3);
                let mut f = original.clone();
                assert!(transport_checksum_valid(&f));
                mark_reflected(&mut f).unwrap();
                let t = crate::trailer::Trailer::from_frame(&f).unwrap();
                assert!(t.reflected, "kind {kind} len {payload_len}");
                assert_eq!((t.tag, t.flow_id, t.seq), (0x9C, 3, 0xFFFF_FFF0));
                assert!(
                    transport_checksum_valid(&f),
                    "kind {kind} len {payload_len}"
                );
                let changed = f.iter().zip(&original).filter(|(a, b)| a != b).count();
                assert!(changed <= 3, "only the marker and the checksum change");
                if kind == 6 {
                    assert_eq!(f[40..42], [0, 0], "no UDP checksum stays none");
                }
                // Never marked twice.
                assert_eq!(mark_reflected(&mut f), Err(MarkError::NotSent));
            }
        }
    }

    #[test]
    fn vxlan_inner_and_outer_checksums_stay_valid() {
        let inner = with_trailer(0, false, 40, 0x11);
        let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 3], [2, 0, 0, 0, 0, 4])
            .ipv4([198, 18, 0, 9], [198, 18, 1, 9], 64)
            .udp(5555, VXLAN_PORT);
        let mut payload = vec![0x08, 0, 0, 0, 0, 0, 1, 0];
        payload.extend_from_slice(&inner);
        let mut f = Vec::new();
        b.write(&mut f, &payload).unwrap();
        mark_reflected(&mut f).unwrap();
        assert!(transport_checksum_valid(&f), "outer");
        let inner_after = &f[14 + 20 + 8 + 8..];
        assert!(transport_checksum_valid(inner_after), "inner");
        assert!(crate::trailer::Trailer::from_frame(&f).unwrap().reflected);
    }

    #[test]
    fn frames_whose_checksum_cannot_be_kept_are_left_alone() {
        // A non-first IPv4 fragment: its transport header travels elsewhere.
        let mut f = with_trailer(0, false, 40, 0);
        f[14 + 6..14 + 8].copy_from_slice(&0x0010u16.to_be_bytes());
        let before = f.clone();
        assert_eq!(mark_reflected(&mut f), Err(MarkError::Unfit));
        assert_eq!(f, before);
        // No trailer at all.
        let mut f = udp4();
        assert_eq!(mark_reflected(&mut f), Err(MarkError::NotSent));
        assert_eq!(mark_reflected(&mut [0x53; 10]), Err(MarkError::NotSent));
        // Not IP: only the marker changes.
        let mut raw = vec![0u8; 60];
        raw[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
        raw[44] = b'S';
        mark_reflected(&mut raw).unwrap();
        assert_eq!(raw[44], b'R');
    }

    proptest! {
        #[test]
        fn marking_keeps_checksums_valid(kind in 0u8..7, vlan in any::<bool>(), len in 16usize..600, fill in any::<u8>()) {
            let mut f = with_trailer(kind, vlan && kind == 0, len, fill);
            prop_assert!(mark_reflected(&mut f).is_ok());
            prop_assert!(transport_checksum_valid(&f));
            prop_assert!(crate::trailer::Trailer::from_frame(&f).unwrap().reflected);
        }

        #[test]
        fn marking_never_panics(mut bytes in proptest::collection::vec(any::<u8>(), 0..200), mark_at_end in any::<bool>()) {
            if mark_at_end && bytes.len() >= 16 {
                let at = bytes.len() - 16;
                bytes[at] = b'S';
            }
            let before = bytes.clone();
            if mark_reflected(&mut bytes).is_err() {
                prop_assert_eq!(bytes, before);
            }
        }

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
