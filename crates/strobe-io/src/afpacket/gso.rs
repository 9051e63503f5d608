//! UDP segmentation batches (GSO): consecutive IPv4/UDP frames that differ only where the
//! kernel's segmentation writes — IP total length and identification (counting up by one
//! per segment), the checksums, the UDP length — leave as one superframe with a virtio-net
//! header, and the kernel cuts it back into exactly those frames. One skb and one pass
//! through the packet socket then carries up to [`MAX_SEGMENTS`] frames.
//!
//! Hand-written because it is a few byte comparisons on strobe's own frames; no crate
//! builds virtio-net GSO headers for packet sockets.

/// Segments per superframe (UDP_MAX_SEGMENTS was 64 when packet sockets learned UDP
/// segmentation in their virtio-net header, Linux 6.2).
pub const MAX_SEGMENTS: usize = 64;
/// An skb's IP total length is 16 bits.
const MAX_SUPERFRAME: usize = 65_535 + 14;
/// Ethernet + IPv4 (no options) + UDP.
pub const HEADERS: usize = 42;

const VIRTIO_NET_HDR_F_NEEDS_CSUM: u8 = 1;
const VIRTIO_NET_HDR_GSO_UDP_L4: u8 = 5;
/// Where the UDP checksum starts (the UDP header) and where in it the checksum field is.
const CSUM_START: u16 = 34;
const CSUM_OFFSET: u16 = 6;

fn be16(frame: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([frame[at], frame[at + 1]])
}

/// Whether `frame` can lead a superframe: untagged IPv4 without options, not a fragment,
/// UDP with a checksum (the segments get computed ones), lengths that match the frame (no
/// Ethernet padding), and some payload.
pub fn can_lead(frame: &[u8]) -> bool {
    frame.len() > HEADERS
        && frame[12..14] == [0x08, 0x00]
        && frame[14] == 0x45
        && frame[23] == 17
        && be16(frame, 20) & 0x3fff == 0
        && usize::from(be16(frame, 16)) == frame.len() - 14
        && usize::from(be16(frame, 38)) == frame.len() - 34
        && frame[40..42] != [0, 0]
        && checksums_valid(frame)
}

/// Whether both checksums are what segmentation will write: a checksum set by hand to
/// another value must reach the wire as it is, so such a frame goes alone.
fn checksums_valid(frame: &[u8]) -> bool {
    let udp_len = u32::from(be16(frame, 38));
    sum16(&frame[14..34], 0) == 0xffff
        && sum16(&frame[34..], sum16(&frame[26..34], 17 + udp_len).into()) == 0xffff
}

/// Most segments one superframe of frames of `len` bytes may carry within `room` bytes.
pub fn most_segments(len: usize, room: usize) -> usize {
    let payload = len - HEADERS;
    MAX_SEGMENTS.min((room.min(MAX_SUPERFRAME) - HEADERS) / payload)
}

/// Whether `next` is what segmentation would make segment `k` of the superframe `first`
/// leads: the same length and headers but for the identification (`first`'s plus `k`) and
/// the two checksums. Payloads differ freely.
pub fn follows(first: &[u8], next: &[u8], k: usize) -> bool {
    next.len() == first.len()
        && next[..18] == first[..18]
        && next[20..24] == first[20..24]
        && next[26..40] == first[26..40]
        && be16(next, 18) == be16(first, 18).wrapping_add(k as u16)
        && checksums_valid(next)
}

/// Ones' complement sum of big-endian 16-bit words, folded.
fn sum16(bytes: &[u8], mut acc: u32) -> u16 {
    for pair in bytes.chunks(2) {
        acc += u32::from(u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]));
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// Writes the superframe of `segments` (led by a frame that [`can_lead`], each following
/// it) into `out`, which must hold `HEADERS + segments.len() * payload` bytes. Returns its
/// length. The UDP checksum field holds the pseudo-header sum, as the kernel expects of a
/// checksum it is to complete per segment.
pub fn write_superframe<'a>(
    segments: impl ExactSizeIterator<Item = &'a [u8]>,
    out: &mut [u8],
) -> usize {
    let mut total = HEADERS;
    for (i, frame) in segments.enumerate() {
        if i == 0 {
            out[..HEADERS].copy_from_slice(&frame[..HEADERS]);
        }
        let payload = &frame[HEADERS..];
        out[total..total + payload.len()].copy_from_slice(payload);
        total += payload.len();
    }
    let ip_len = (total - 14) as u16;
    let udp_len = (total - 34) as u16;
    out[16..18].copy_from_slice(&ip_len.to_be_bytes());
    out[24..26].copy_from_slice(&[0, 0]);
    let ip_sum = !sum16(&out[14..34], 0);
    out[24..26].copy_from_slice(&ip_sum.to_be_bytes());
    out[38..40].copy_from_slice(&udp_len.to_be_bytes());
    // Pseudo header: addresses, protocol, UDP length.
    let pseudo = sum16(&out[26..34], 17 + u32::from(udp_len));
    out[40..42].copy_from_slice(&pseudo.to_be_bytes());
    total
}

/// The virtio-net header (little-endian fields, as packet sockets read them on every
/// little-endian machine) of a superframe whose segments carry `payload` bytes each.
pub fn vnet_header(payload: usize) -> [u8; 10] {
    let mut h = [0u8; 10];
    h[0] = VIRTIO_NET_HDR_F_NEEDS_CSUM;
    h[1] = VIRTIO_NET_HDR_GSO_UDP_L4;
    h[2..4].copy_from_slice(&(HEADERS as u16).to_le_bytes());
    h[4..6].copy_from_slice(&(payload as u16).to_le_bytes());
    h[6..8].copy_from_slice(&CSUM_START.to_le_bytes());
    h[8..10].copy_from_slice(&CSUM_OFFSET.to_le_bytes());
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame built by etherparse: identification `id`, payload from `seed`.
    fn frame(id: u16, seed: u8, payload_len: usize) -> Vec<u8> {
        let payload: Vec<u8> = (0..payload_len)
            .map(|i| seed.wrapping_mul(7).wrapping_add(i as u8))
            .collect();
        let mut ip = etherparse::Ipv4Header::new(
            (8 + payload_len) as u16,
            64,
            etherparse::IpNumber::UDP,
            [198, 18, 0, 1],
            [198, 18, 1, 1],
        )
        .unwrap();
        ip.identification = id;
        let builder = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ip(etherparse::IpHeaders::Ipv4(ip, Default::default()))
            .udp(1000, 2000);
        let mut out = Vec::new();
        builder.write(&mut out, &payload).unwrap();
        out
    }

    /// What the kernel's UDP segmentation makes of a superframe, modelled step by step:
    /// segment `i` gets the leading headers with identification + i and its own lengths
    /// (the IPv4 header and its checksum written by etherparse), and its UDP checksum is
    /// finished from the superframe's checksum field the way the kernel does it: the
    /// pseudo-header sum adjusted from the superframe's UDP length to the segment's, then
    /// the complement of the sum over the UDP header and payload.
    fn segment(superframe: &[u8], payload_len: usize) -> Vec<Vec<u8>> {
        let sliced = etherparse::SlicedPacket::from_ethernet(superframe).unwrap();
        let Some(etherparse::NetSlice::Ipv4(ipv4)) = sliced.net else {
            panic!("not IPv4")
        };
        let base = ipv4.header().to_header();
        let field = u32::from(be16(superframe, 40));
        let super_len = u32::from(be16(superframe, 38));
        superframe[HEADERS..]
            .chunks(payload_len)
            .enumerate()
            .map(|(i, chunk)| {
                let mut ip = base.clone();
                ip.identification = base.identification.wrapping_add(i as u16);
                ip.set_payload_len(8 + chunk.len()).unwrap();
                ip.header_checksum = ip.calc_header_checksum();
                let seg_len = 8 + chunk.len() as u32;
                // csum16_add(csum16_sub(check, old len), new len)
                let adjusted = sum16(&[], field + (0xffff - super_len) + seg_len);
                let mut out = superframe[..14].to_vec();
                out.extend_from_slice(&ip.to_bytes());
                out.extend_from_slice(&superframe[34..38]);
                out.extend_from_slice(&(seg_len as u16).to_be_bytes());
                out.extend_from_slice(&adjusted.to_be_bytes());
                out.extend_from_slice(chunk);
                let folded = !sum16(&out[34..], 0);
                out[40..42]
                    .copy_from_slice(&(if folded == 0 { 0xffff } else { folded }).to_be_bytes());
                out
            })
            .collect()
    }

    #[test]
    fn segmenting_the_superframe_gives_back_every_frame() {
        for (payload_len, count) in [(18, 64), (1, 2), (1000, 3), (19, 5), (17, 33)] {
            let frames: Vec<Vec<u8>> = (0..count)
                .map(|k| frame(65_534u16.wrapping_add(k as u16), k as u8, payload_len))
                .collect();
            assert!(can_lead(&frames[0]));
            for (k, f) in frames.iter().enumerate() {
                assert!(follows(&frames[0], f, k), "frame {k}");
            }
            let mut out = vec![0u8; HEADERS + count * payload_len];
            let len = write_superframe(frames.iter().map(Vec::as_slice), &mut out);
            assert_eq!(len, out.len());
            // The superframe's own IP header is valid as written.
            let sliced = etherparse::SlicedPacket::from_ethernet(&out).unwrap();
            let Some(etherparse::NetSlice::Ipv4(ipv4)) = sliced.net else {
                panic!()
            };
            let h = ipv4.header().to_header();
            assert_eq!(h.header_checksum, h.calc_header_checksum());
            assert_eq!(
                segment(&out, payload_len),
                frames,
                "{payload_len} × {count}"
            );
        }
    }

    #[test]
    fn the_udp_field_holds_the_pseudo_header_sum() {
        let frames = [frame(7, 1, 18), frame(8, 2, 18)];
        let mut out = vec![0u8; HEADERS + 36];
        write_superframe(frames.iter().map(Vec::as_slice), &mut out);
        // Folding the pseudo header by hand: 198.18 + 0.1 + 198.18 + 1.1 + 17 + 44.
        let words = [0xc612u32, 0x0001, 0xc612, 0x0101, 17, 44];
        let mut acc: u32 = words.iter().sum();
        while acc > 0xffff {
            acc = (acc & 0xffff) + (acc >> 16);
        }
        assert_eq!(be16(&out, 40), acc as u16);
        assert_eq!(vnet_header(18), [1, 5, 42, 0, 18, 0, 34, 0, 6, 0]);
    }

    #[test]
    fn frames_that_segmentation_would_not_reproduce_are_refused() {
        let first = frame(100, 0, 18);
        assert!(
            !follows(&first, &frame(100, 1, 18), 1),
            "constant identification"
        );
        assert!(
            !follows(&first, &frame(102, 1, 18), 1),
            "a gap in identifications"
        );
        assert!(!follows(&first, &frame(101, 1, 19), 1), "another length");
        let mut other_port = frame(101, 1, 18);
        other_port[35] ^= 1;
        assert!(!follows(&first, &other_port, 1), "another header");
        let mut fragment = first.clone();
        fragment[20] |= 0x20;
        assert!(!can_lead(&fragment), "more fragments");
        let mut no_checksum = first.clone();
        no_checksum[40..42].copy_from_slice(&[0, 0]);
        assert!(!can_lead(&no_checksum), "UDP without checksum");
        let mut padded = first.clone();
        padded.extend_from_slice(&[0; 4]);
        assert!(!can_lead(&padded), "Ethernet padding");
        assert!(!can_lead(&first[..HEADERS]), "no payload");
        let mut tagged = first.clone();
        tagged[12..14].copy_from_slice(&[0x81, 0x00]);
        assert!(!can_lead(&tagged), "VLAN tag");
        // Checksums set by hand must reach the wire as set: such frames go alone.
        let mut udp_by_hand = frame(101, 1, 18);
        udp_by_hand[41] ^= 0x5a;
        assert!(
            !follows(&first, &udp_by_hand, 1),
            "a UDP checksum set by hand"
        );
        let mut ip_by_hand = frame(101, 1, 18);
        ip_by_hand[25] ^= 0x5a;
        assert!(
            !follows(&first, &ip_by_hand, 1),
            "an IPv4 checksum set by hand"
        );
        assert!(follows(&first, &frame(101, 1, 18), 1));
    }
}
