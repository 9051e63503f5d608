//! The incremental generator against two references: a frame rebuilt from scratch for every
//! packet (strobe-wire's full build, pattern values from the model's reference semantics),
//! and etherparse, an independent decoder that verifies every checksum.

use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use strobe_engine::generator::{BatchScratch, TxTime};
use strobe_engine::FlowGenerator;
use strobe_io::TxSlot;
use strobe_model::{load_scenario, FlowSpec, NoFiles};
use strobe_wire::trailer::{self, Trailer};

fn flow(body: &str) -> FlowSpec {
    let text = format!(
        "[[ports]]\nname = \"p\"\nlocation = \"null\"\n\n[[flows]]\nname = \"f\"\ntx = \"p\"\n{body}"
    );
    let s = load_scenario(&text, "test.toml", &NoFiles).unwrap_or_else(|e| panic!("{e}"));
    s.flows.into_iter().next().unwrap()
}

/// The run tag of these frames.
const TAG: u8 = 0xE1;
/// Sequence numbers start just below the 2^32 wrap, so every flow crosses it (and the
/// incremental checksums with it).
const SEQ_START: u32 = u32::MAX - 40;

/// The j-th frame built from scratch: all headers at their j-th values, trailer, checksums.
fn reference(f: &FlowSpec, j: u64, size: u32, tx_ns: u64) -> Vec<u8> {
    let headers: Vec<_> = f.packet.iter().map(|h| h.header_at(j)).collect();
    let built = strobe_wire::build(&headers, size as usize - 4, &f.payload).unwrap();
    let mut bytes = built.bytes.clone();
    if f.metrics.instrument {
        let at = bytes.len() - trailer::LEN;
        let dst: &mut [u8; trailer::LEN] = (&mut bytes[at..]).try_into().unwrap();
        let (id, seq) = trailer_ids(f, j);
        Trailer::sent(TAG, id, seq, tx_ns).write(dst);
    }
    for spec in &built.checksums {
        spec.write(&mut bytes);
    }
    bytes
}

/// The flow id and sequence number frame `j` carries: a tagged flow's tag position's id,
/// and the number of times that position was used before.
fn trailer_ids(f: &FlowSpec, j: u64) -> (u16, u32) {
    match f.tag_ids.len() as u64 {
        0 => (f.id, SEQ_START.wrapping_add(j as u32)),
        n => (
            f.tag_ids[(j % n) as usize],
            SEQ_START.wrapping_add((j / n) as u32),
        ),
    }
}

/// Generates `n` packets in batches of `batch` through `slots` rotating buffers, checking
/// each one against a full rebuild and etherparse.
fn check_flow(f: &FlowSpec, n: u64, slots: usize, mut extra: impl FnMut(u64, &[u8])) {
    for batch in [1usize, 7, 32] {
        let mut gen = FlowGenerator::compile(f, TAG, SEQ_START).unwrap();
        let mut sizes = f.size.sequence(f.size_seed);
        // (slot id, buffer): ids stay attached to their memory, as in a backend.
        let mut bufs: Vec<(u32, Box<[u8]>)> = (0..slots.max(batch) as u32)
            .map(|id| (id, vec![0u8; 9216].into_boxed_slice()))
            .collect();
        let mut holds = vec![u32::MAX; bufs.len()];
        let mut scratch = BatchScratch::new();
        let mut j = 0u64;
        let mut round = 0usize;
        while j < n {
            let k = batch.min((n - j) as usize);
            // Rotate which buffers a batch gets, so slots change templates and hold stale frames.
            let m = bufs.len();
            bufs.rotate_left(round % m);
            round += 1;
            let mut batch_slots: Vec<TxSlot> = bufs
                .iter_mut()
                .take(k)
                .map(|(id, buf)| TxSlot {
                    id: *id,
                    buf,
                    len: 0,
                    scheduled_ns: 0,
                })
                .collect();
            let sizes_k: Vec<u32> = (0..k).map(|_| sizes.next_size()).collect();
            let templates: Vec<u16> = sizes_k.iter().map(|&s| gen.template_for(s)).collect();
            let which: Vec<u16> = (0..k as u16).collect();
            let tx_ns = 1_700_000_000_000_000_000 + j * 1_234_567;
            gen.write_batch(
                &mut batch_slots,
                &which,
                &templates,
                TxTime::Same(tx_ns),
                &mut holds,
                &mut scratch,
            );
            for (i, slot) in batch_slots.iter().enumerate() {
                let jj = j + i as u64;
                let frame = &slot.buf[..slot.len];
                assert_eq!(slot.len, sizes_k[i] as usize - 4);
                let want = reference(f, jj, sizes_k[i], tx_ns);
                assert_eq!(
                    frame,
                    &want[..],
                    "packet {jj} (batch {batch}) differs from a full rebuild"
                );
                verify_checksums(frame, jj);
                if f.metrics.instrument {
                    let t = Trailer::from_frame(frame).expect("trailer present");
                    let (id, seq) = trailer_ids(f, jj);
                    assert_eq!(
                        (t.tag, t.reflected, t.flow_id, t.seq, t.tx_ns),
                        (TAG, false, id, seq, tx_ns)
                    );
                }
                extra(jj, frame);
            }
            j += k as u64;
        }
    }
}

/// Independent check of the IP and L4 checksums with etherparse.
fn verify_checksums(frame: &[u8], j: u64) {
    let p = SlicedPacket::from_ethernet(frame).unwrap_or_else(|e| panic!("packet {j}: {e}"));
    let payload_of = |t: &TransportSlice| -> Vec<u8> {
        match t {
            TransportSlice::Udp(u) => u.payload().to_vec(),
            TransportSlice::Tcp(t) => t.payload().to_vec(),
            _ => Vec::new(),
        }
    };
    match (&p.net, &p.transport) {
        (Some(NetSlice::Ipv4(ip)), t) => {
            let h = ip.header().to_header();
            assert_eq!(
                h.header_checksum,
                h.calc_header_checksum(),
                "packet {j}: IPv4 header checksum"
            );
            match t {
                Some(TransportSlice::Udp(u)) => {
                    let uh = u.to_header();
                    let calc = uh
                        .calc_checksum_ipv4(&h, &payload_of(t.as_ref().unwrap()))
                        .unwrap();
                    assert_eq!(uh.checksum, calc, "packet {j}: UDP checksum");
                }
                Some(TransportSlice::Tcp(tc)) => {
                    let th = tc.to_header();
                    let calc = th
                        .calc_checksum_ipv4(&h, &payload_of(t.as_ref().unwrap()))
                        .unwrap();
                    assert_eq!(th.checksum, calc, "packet {j}: TCP checksum");
                }
                _ => {}
            }
        }
        (Some(NetSlice::Ipv6(ip)), t) => {
            let h = ip.header().to_header();
            match t {
                Some(TransportSlice::Udp(u)) => {
                    let uh = u.to_header();
                    let calc = uh
                        .calc_checksum_ipv6(&h, &payload_of(t.as_ref().unwrap()))
                        .unwrap();
                    assert_eq!(uh.checksum, calc, "packet {j}: UDP/IPv6 checksum");
                }
                Some(TransportSlice::Tcp(tc)) => {
                    let th = tc.to_header();
                    let calc = th
                        .calc_checksum_ipv6(&h, &payload_of(t.as_ref().unwrap()))
                        .unwrap();
                    assert_eq!(th.checksum, calc, "packet {j}: TCP/IPv6 checksum");
                }
                _ => {}
            }
        }
        _ => {}
    }
}

const ETH: &str =
    "[[flows.packet]]\nethernet = { src = \"02:00:00:00:00:01\", dst = \"02:00:00:00:00:02\" }\n";

#[test]
fn udp_ipv4_counter_random_and_values_fields() {
    let f = flow(&format!(
        "size = 64\n{ETH}[[flows.packet]]\nipv4 = {{ src = {{ increment = {{ start = \"198.18.0.250\", step = \"0.0.0.3\", count = 300 }} }}, dst = {{ random = {{ min = \"198.18.0.0\", max = \"198.19.255.255\", seed = 5, count = 0 }} }}, identification = {{ decrement = {{ start = 3, step = 1, count = 7 }} }} }}\n[[flows.packet]]\nudp = {{ src_port = {{ values = [1, 65535, 7] }}, dst_port = {{ random = {{ min = 1024, max = 65535, seed = 9, count = 5 }} }} }}\n"
    ));
    assert!(
        f.metrics.instrument,
        "64-byte IPv4/UDP frames carry the trailer"
    );
    let src_pattern = f.packet[1]
        .fields
        .iter()
        .find(|p| p.field_index == 13 || p.field_index == 14);
    assert!(src_pattern.is_some());
    check_flow(&f, 2000, 1, |j, frame| {
        let p = SlicedPacket::from_ethernet(frame).unwrap();
        let Some(NetSlice::Ipv4(ip)) = &p.net else {
            panic!()
        };
        let src = u32::from_be_bytes(ip.header().source());
        // j-th value = start + (j % count) * step, wrapping within 32 bits.
        assert_eq!(
            src,
            0xC6_12_00_FA_u32.wrapping_add(3 * (j % 300) as u32),
            "ip.src of packet {j}"
        );
        assert_eq!(
            ip.header().identification(),
            (3 - (j % 7) as i64).rem_euclid(65536) as u16
        );
        let dst = u32::from_be_bytes(ip.header().destination());
        assert!((0xC612_0000..=0xC613_FFFF).contains(&dst));
        let Some(TransportSlice::Udp(u)) = &p.transport else {
            panic!()
        };
        assert_eq!(u.source_port(), [1, 65535, 7][(j % 3) as usize]);
    });
}

#[test]
fn tagged_flows_carry_each_positions_id_and_sequence_under_valid_checksums() {
    // Tags on udp.src_port (3 values) and 8 bits of ipv4.dst (an increment of 4): the tuple
    // repeats every 12 frames. IMIX sizes move the trailer between templates.
    let mut f = flow(&format!(
        "size = {{ weight_pairs = {{ predefined = \"imix\" }} }}\n{ETH}[[flows.packet]]\nipv4 = {{ src = \"198.18.0.1\", dst = {{ increment = {{ start = \"198.18.1.1\", step = \"0.0.0.1\", count = 4 }}, metric_tags = [{{ name = \"dst\", offset = 24, length = 8 }}] }} }}\n[[flows.packet]]\nudp = {{ src_port = {{ values = [7, 8, 9], metric_tags = [{{ name = \"sport\" }}] }}, dst_port = 2000 }}\n"
    ));
    let plan = f.tag_plan().unwrap().expect("tagged");
    assert_eq!(plan.names, ["dst", "sport"]);
    assert_eq!(plan.widths, [8, 16]);
    assert_eq!(plan.positions.len(), 12);
    for (j, values) in plan.positions.iter().enumerate() {
        assert_eq!(values, &vec![1 + (j as u128 % 4), 7 + (j as u128 % 3)]);
    }
    assert_eq!(plan.groups().len(), 12);
    f.tag_ids = (0..12).map(|r| if r == 0 { 0 } else { 100 + r }).collect();
    let mut per_id = std::collections::BTreeMap::new();
    check_flow(&f, 1000, 5, |j, frame| {
        let t = Trailer::from_frame(frame).unwrap();
        assert_eq!(t.flow_id, f.tag_ids[(j % 12) as usize]);
        *per_id.entry(t.flow_id).or_insert(0u64) += 1;
    });
    // Three runs (batch sizes 1, 7, 32) of 1000 frames: 83 rounds, and 4 frames more.
    for (r, id) in f.tag_ids.iter().enumerate() {
        assert_eq!(per_id[id], 3 * (83 + u64::from(r < 4)), "position {r}");
    }
}

#[test]
fn bit_fields_inside_checksums_vlan_dscp_and_flags() {
    let f = flow(&format!(
        "size = 128\n{ETH}[[flows.packet]]\nvlan = {{ id = {{ increment = {{ start = 4090, step = 1, count = 12 }} }}, priority = {{ values = [0, 7, 3] }} }}\n[[flows.packet]]\nipv4 = {{ src = \"198.18.0.1\", dst = \"198.18.1.1\", dscp = {{ increment = {{ start = 0, step = 5, count = 13 }} }}, dont_fragment = {{ values = [0, 1] }}, fragment_offset = {{ increment = {{ start = 8190, step = 1, count = 4 }} }} }}\n[[flows.packet]]\ntcp = {{ src_port = 1, dst_port = 2, ctl_syn = {{ values = [1, 0] }}, data_offset = 5, seq_num = {{ increment = {{ start = 4294967290, step = 1, count = 100 }} }} }}\n"
    ));
    check_flow(&f, 500, 3, |j, frame| {
        let p = SlicedPacket::from_ethernet(frame).unwrap();
        let vlan = p.vlan.clone().expect("vlan tag");
        let tci = match vlan {
            etherparse::VlanSlice::SingleVlan(v) => v.to_header(),
            etherparse::VlanSlice::DoubleVlan(v) => v.outer().to_header(),
        };
        // 12-bit field wraps modulo 4096.
        assert_eq!(u16::from(tci.vlan_id), ((4090 + j % 12) % 4096) as u16);
        assert_eq!(u8::from(tci.pcp), [0, 7, 3][(j % 3) as usize]);
    });
}

#[test]
fn imix_sizes_use_several_templates_in_shared_slots() {
    let f = flow(&format!(
        "size = {{ weight_pairs = {{ predefined = \"imix\" }} }}\n{ETH}[[flows.packet]]\nipv4 = {{ src = {{ increment = {{ start = \"198.18.0.1\", step = \"0.0.0.1\", count = 1000 }} }}, dst = \"198.18.1.1\" }}\n[[flows.packet]]\nudp = {{ src_port = 1000, dst_port = 2000 }}\n"
    ));
    let mut counts = std::collections::BTreeMap::new();
    check_flow(&f, 1200, 4, |_, frame| {
        *counts.entry(frame.len()).or_insert(0) += 1
    });
    // check_flow runs the flow three times (batch sizes 1, 7, 32).
    assert_eq!(
        counts.into_iter().collect::<Vec<_>>(),
        vec![(60, 2100), (566, 1200), (1514, 300)]
    );
}

#[test]
fn ipv6_tcp_and_icmpv6() {
    let f = flow(&format!(
        "size = 200\n{ETH}[[flows.packet]]\nipv6 = {{ src = {{ increment = {{ start = \"2001:2::ffff:fffe\", step = \"::1\", count = 5 }} }}, dst = {{ values = [\"2001:2::ffff\", \"2001:2::1:0\", \"::\"] }}, flow_label = {{ increment = {{ start = 1048570, step = 1, count = 20 }} }} }}\n[[flows.packet]]\ntcp = {{ src_port = {{ increment = {{ start = 65530, step = 1, count = 10 }} }}, dst_port = 80 }}\n"
    ));
    check_flow(&f, 300, 2, |_, _| {});
    let f = flow(&format!(
        "size = 100\n{ETH}[[flows.packet]]\nipv6 = {{ src = \"2001:2::1\", dst = \"2001:2::2\" }}\n[[flows.packet]]\nicmpv6 = {{ echo = {{ sequence_number = {{ increment = {{ start = 0, step = 1, count = 65536 }} }} }} }}\n"
    ));
    check_flow(&f, 300, 1, |_, _| {});
}

#[test]
fn vxlan_over_ipv6_nests_checksums() {
    // Outer UDP over IPv6 has a real checksum that covers the inner IPv4 and UDP checksums,
    // which change with the inner fields: the nested-checksum path.
    let f = flow(&format!(
        "size = 200\n{ETH}[[flows.packet]]\nipv6 = {{ src = \"2001:2::1\", dst = \"2001:2::2\" }}\n[[flows.packet]]\nudp = {{ src_port = {{ increment = {{ start = 49152, step = 7, count = 100 }} }} }}\n[[flows.packet]]\nvxlan = {{ vni = {{ increment = {{ start = 1, step = 1, count = 1000 }} }} }}\n{ETH}[[flows.packet]]\nipv4 = {{ src = {{ increment = {{ start = \"198.18.0.1\", step = \"0.0.1.0\", count = 77 }} }}, dst = \"198.18.1.1\" }}\n[[flows.packet]]\nudp = {{ src_port = 1, dst_port = {{ values = [2, 3, 4] }} }}\n"
    ));
    check_flow(&f, 500, 2, |_, _| {});
}

/// Flows for the kernel program's tests: fields of 1, 2, 4 and 6 bytes counting, odd frame
/// lengths, random and listed values, several sizes, deep encapsulation.
fn kernel_bodies() -> Vec<String> {
    vec![
        "size = 64\n[[flows.packet]]\nethernet = { src = \"02:00:00:00:00:01\", dst = { increment = { start = \"02:00:00:00:ff:fe\", step = \"00:00:00:00:00:01\", count = 5 } } }\n[[flows.packet]]\nipv4 = { src = { increment = { start = \"198.18.0.250\", step = \"0.0.0.3\", count = 300 } }, dst = \"198.19.0.1\", time_to_live = { increment = { start = 250, step = 2, count = 9 } }, identification = { decrement = { start = 3, step = 1, count = 7 } } }\n[[flows.packet]]\nudp = { src_port = { increment = { start = 65530, step = 1, count = 100 } }, dst_port = 7 }\n"
        .to_string(),
        format!(
            "size = 131\n{ETH}[[flows.packet]]\nipv6 = {{ src = \"2001:2::1\", dst = \"2001:2::2\" }}\n[[flows.packet]]\nudp = {{ dst_port = {{ increment = {{ start = 1000, step = 7, count = 11 }} }} }}\n"
        ),
        // Random and listed values: addresses from a range with a cycle and over all 2^32
        // (the span's high half in the product), a port over its whole width, an
        // identification from a range, listed ports and TTLs.
        "size = 90\n[[flows.packet]]\nethernet = { src = \"02:00:00:00:00:01\", dst = \"02:00:00:00:00:02\" }\n[[flows.packet]]\nipv4 = { src = { random = { min = \"198.18.0.0\", max = \"198.19.255.255\", seed = 5, count = 37 } }, dst = { random = { min = \"0.0.0.0\", max = \"255.255.255.255\", seed = 11 } }, time_to_live = { values = [64, 1, 255] }, identification = { random = { min = 17, max = 60000, seed = 3 } } }\n[[flows.packet]]\nudp = { src_port = { random = {} }, dst_port = { values = [7, 65535, 0, 4789, 53] } }\n"
            .to_string(),
        // Several sizes, in one recycled page: IMIX (its trailers far apart), an increment
        // through odd lengths (the trailer off the checksum's word grid in every other
        // size), weights over sizes with a random port.
        "size = { weight_pairs = { predefined = \"imix\" } }\n[[flows.packet]]\nethernet = { src = \"02:00:00:00:00:01\", dst = \"02:00:00:00:00:02\" }\n[[flows.packet]]\nipv4 = { src = { increment = { start = \"198.18.0.1\", step = \"0.0.0.1\", count = 50 } }, dst = \"198.19.0.1\" }\n[[flows.packet]]\nudp = { src_port = 1000, dst_port = 2000 }\n"
            .to_string(),
        format!(
            "size = {{ increment = {{ start = 90, end = 1518, step = 101 }} }}\n{ETH}[[flows.packet]]\nipv6 = {{ src = \"2001:2::1\", dst = \"2001:2::2\" }}\n[[flows.packet]]\nudp = {{ dst_port = {{ increment = {{ start = 1000, step = 7, count = 11 }} }} }}\n"
        ),
        // Headers past the first 128 bytes that differ with the size (the inner UDP
        // length at 128 behind VXLAN over IPv6 twice).
        format!(
            "size = {{ weight_pairs = {{ custom = [{{ size = 594, weight = 1 }}, {{ size = 1518, weight = 1 }}] }} }}\n{ETH}[[flows.packet]]\nipv6 = {{ src = \"2001:2::1\", dst = \"2001:2::2\" }}\n[[flows.packet]]\nudp = {{ src_port = {{ increment = {{ start = 49152, step = 7, count = 100 }} }} }}\n[[flows.packet]]\nvxlan = {{ vni = 5 }}\n{ETH}[[flows.packet]]\nipv6 = {{ src = \"2001:2::3\", dst = \"2001:2::4\" }}\n[[flows.packet]]\nudp = {{ src_port = 1, dst_port = {{ values = [2, 3, 4] }} }}\n"
        ),
        "size = { weight_pairs = { custom = [{ size = 1500, weight = 2 }, { size = 77, weight = 3 }, { size = 300, weight = 1 }] } }\n[[flows.packet]]\nethernet = { src = \"02:00:00:00:00:01\", dst = \"02:00:00:00:00:02\" }\n[[flows.packet]]\nipv4 = { src = \"198.18.0.1\", dst = \"198.19.0.1\" }\n[[flows.packet]]\nudp = { src_port = { random = { min = 1024, max = 65535, seed = 9 } }, dst_port = 2000 }\n"
            .to_string(),
    ]
}

/// One period of `f`'s frame sizes.
fn size_period(f: &FlowSpec) -> Vec<u32> {
    let mut sequence = f.size.sequence(f.size_seed);
    (0..f.size.period().unwrap())
        .map(|_| sequence.next_size())
        .collect()
}

/// xdp-live's kernel generator against the same references: the frames its XDP program
/// writes (run in the kernel's test mode, needs root) are the full rebuilds, byte for byte,
/// with the stamp the kernel took, and etherparse agrees with every checksum. Fields of 1,
/// 2, 4 and 6 bytes count (IPv4 source, identification counting down, UDP port, MAC), the
/// sequence number crosses the 2^32 wrap, and frames of odd length put the trailer off the
/// checksum's word grid. Random and listed values are the engine's too.
#[test]
fn kernel_program_writes_the_engines_frames() {
    use strobe_io::kernel_frames::KernelStamp;
    let bodies = kernel_bodies();
    for body in &bodies {
        let f = flow(body);
        let gen = FlowGenerator::compile(&f, TAG, SEQ_START).unwrap();
        let cycle = size_period(&f);
        let size = |j: usize| cycle[j % cycle.len()];
        let kflow = gen
            .kernel_flow(Some(100), KernelStamp::PerFrame, &cycle)
            .unwrap_or_else(|why| panic!("the kernel should take this flow: {why}"));
        let frames = strobe_io::xdplive::generated_frames(&kflow, 100)
            .unwrap_or_else(|e| panic!("the generator program runs: {e}"));
        let mut last_ns = 0;
        for (j, frame) in frames.iter().enumerate() {
            let t = Trailer::from_frame(frame).expect("trailer present");
            assert!(t.tx_ns >= last_ns, "stamps never go back (packet {j})");
            last_ns = t.tx_ns;
            let want = reference(&f, j as u64, size(j), t.tx_ns);
            assert_eq!(
                &frame[..],
                &want[..],
                "packet {j} from the kernel program differs from a full rebuild"
            );
            verify_checksums(frame, j as u64);
        }
        // A fixed stamp stays in every frame, and still counts in the checksums.
        let fixed = gen
            .kernel_flow(
                Some(10),
                KernelStamp::Fixed(1_800_000_000_123_456_789),
                &cycle,
            )
            .unwrap();
        for (j, frame) in strobe_io::xdplive::generated_frames(&fixed, 10)
            .unwrap()
            .iter()
            .enumerate()
        {
            let want = reference(&f, j as u64, size(j), 1_800_000_000_123_456_789);
            assert_eq!(&frame[..], &want[..], "packet {j} with a fixed stamp");
        }
    }
}

/// Several paced flows in one program (xdp-live with a port's flows): each flow's frames
/// are its own full rebuilds, byte for byte, in pages that other flows' frames of other
/// sizes and stacks used before (a 64-byte flow, IMIX, VXLAN over IPv6 at 594 and 1518
/// bytes, random and listed values), and the program takes the flow whose deadline comes
/// first: all four are due at the start, then each at its own rate.
#[test]
fn kernel_program_interleaves_several_flows_by_their_deadlines() {
    use strobe_io::kernel_frames::{KernelPace, KernelStamp};
    // A 64-byte flow, IMIX, VXLAN over IPv6 at 594 and 1518 bytes, random and listed values.
    let all = kernel_bodies();
    let bodies = [&all[0], &all[3], &all[5], &all[2]];
    const EACH: usize = 40;
    let mut specs = Vec::new();
    let mut kflows = Vec::new();
    for (i, body) in bodies.iter().enumerate() {
        let f = flow(body);
        let gen = FlowGenerator::compile(&f, TAG, SEQ_START).unwrap();
        let cycle = size_period(&f);
        let mut kflow = gen
            .kernel_flow(Some(EACH as u64), KernelStamp::PerFrame, &cycle)
            .unwrap();
        // Gaps far above a test run's few µs per repetition: every deadline is kept.
        kflow.pace = Some(KernelPace {
            gap_ns: 150_000 * (i as u64 + 1),
            gap_frac: 0,
            burst: 1,
            burst_gap_ns: 0,
            late_tolerance_ns: u64::MAX,
        });
        specs.push((f, cycle));
        kflows.push(kflow);
    }
    let frames = strobe_io::xdplive::generated_frames_of(&kflows, bodies.len() * EACH)
        .unwrap_or_else(|e| panic!("the generator program runs: {e}"));
    let order: Vec<usize> = frames.iter().map(|(f, _)| *f).collect();
    assert_eq!(
        &order[..4],
        &[0, 1, 2, 3],
        "all due at the start: {order:?}"
    );
    // Flow 0's gap is a quarter of flow 3's: its deadlines 150, 300 and 450 µs after its
    // start come before flow 3's second, 600 µs after flow 3's later start.
    let second_of_3 = order
        .iter()
        .enumerate()
        .filter(|(_, &f)| f == 3)
        .nth(1)
        .unwrap()
        .0;
    let zeros = order[4..second_of_3].iter().filter(|&&f| f == 0).count();
    assert!(zeros >= 3, "{order:?}");
    let mut seen = vec![0usize; bodies.len()];
    for (i, frame) in &frames {
        let (f, cycle) = &specs[*i];
        let j = seen[*i];
        seen[*i] += 1;
        let t = Trailer::from_frame(frame).expect("trailer present");
        let want = reference(f, j as u64, cycle[j % cycle.len()], t.tx_ns);
        assert_eq!(
            &frame[..],
            &want[..],
            "flow {i}'s packet {j} from the kernel program differs from a full rebuild"
        );
        verify_checksums(frame, j as u64);
    }
    assert_eq!(seen, vec![EACH; bodies.len()]);
}

/// Two flows with the same deep stack (VXLAN over IPv6 twice: the innermost Ethernet
/// destination at bytes 140-145, past the headers every frame rewrites and clear of every
/// checksum) where only one varies that address: the other's frames carry its own constant
/// address, not what the first left in the page.
#[test]
fn kernel_program_rewrites_what_another_flow_varies_past_the_headers() {
    use strobe_io::kernel_frames::{KernelPace, KernelStamp};
    let body = |mac: &str| {
        format!(
            "size = 256\n{ETH}[[flows.packet]]\nipv6 = {{ src = \"2001:2::1\", dst = \"2001:2::2\" }}\n[[flows.packet]]\nudp = {{ src_port = 49152 }}\n[[flows.packet]]\nvxlan = {{ vni = 5 }}\n{ETH}[[flows.packet]]\nipv6 = {{ src = \"2001:2::3\", dst = \"2001:2::4\" }}\n[[flows.packet]]\nudp = {{ src_port = 49153 }}\n[[flows.packet]]\nvxlan = {{ vni = 6 }}\n[[flows.packet]]\nethernet = {{ src = \"02:00:00:00:00:01\", dst = {mac} }}\n[[flows.packet]]\nipv4 = {{ src = \"198.18.0.1\", dst = \"198.18.1.1\" }}\n[[flows.packet]]\nudp = {{ src_port = 1, dst_port = 2 }}\n"
        )
    };
    let specs = [
        flow(&body(
            "{ increment = { start = \"02:00:00:00:10:00\", step = \"00:00:00:00:00:01\", count = 50 } }",
        )),
        flow(&body("\"02:00:00:00:10:00\"")),
    ];
    let kflows: Vec<_> = specs
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let gen = FlowGenerator::compile(f, TAG, SEQ_START).unwrap();
            let mut kflow = gen
                .kernel_flow(Some(20), KernelStamp::PerFrame, &[256])
                .unwrap();
            let mac = [2, 0, 0, 0, 0x10, 0];
            assert_eq!(kflow.templates[0].frame[140..146], mac, "address at 140");
            kflow.pace = Some(KernelPace {
                gap_ns: 100_000 + 50_000 * i as u64,
                gap_frac: 0,
                burst: 1,
                burst_gap_ns: 0,
                late_tolerance_ns: u64::MAX,
            });
            kflow
        })
        .collect();
    let frames = strobe_io::xdplive::generated_frames_of(&kflows, 40).unwrap();
    let mut seen = [0u64; 2];
    for (i, frame) in &frames {
        let t = Trailer::from_frame(frame).expect("trailer present");
        let want = reference(&specs[*i], seen[*i], 256, t.tx_ns);
        assert_eq!(&frame[..], &want[..], "flow {i}'s packet {}", seen[*i]);
        seen[*i] += 1;
    }
    assert_eq!(seen, [20, 20]);
}

/// Flows only the engine can write are refused with the reason, not generated wrong.
#[test]
fn kernel_flow_refuses_what_the_program_cannot_write() {
    use strobe_io::kernel_frames::KernelStamp;
    let cases = [
        ("size = 100\n[[flows.packet]]\nethernet = { src = \"02:00:00:00:00:01\", dst = \"02:00:00:00:00:02\" }\n[[flows.packet]]\nipv6 = { src = { increment = { start = \"2001:2::1\", step = \"::1\", count = 9 } }, dst = \"2001:2::2\" }\n", "128 bits"),
        ("size = 64\n[[flows.packet]]\nethernet = { src = \"02:00:00:00:00:01\", dst = \"02:00:00:00:00:02\" }\n[[flows.packet]]\nipv4 = { src = \"198.18.0.1\", dst = \"198.18.0.2\", dscp = { increment = { start = 0, step = 1, count = 8 } } }\n", "bits"),
    ];
    for (body, why) in cases {
        let f = flow(body);
        let gen = FlowGenerator::compile(&f, TAG, SEQ_START).unwrap();
        let err = gen
            .kernel_flow(None, KernelStamp::PerFrame, &[f.size.max()])
            .expect_err("refused");
        assert!(err.contains(why), "{err}");
    }
}
