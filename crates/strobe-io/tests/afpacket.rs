//! The AF_PACKET backend on veth pairs inside network namespaces each test creates itself
//! (and removes, also when it fails). Needs root, `ip` and `tcpdump`.

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use strobe_io::afpacket::{AfPacketOptions, AfPacketRx, AfPacketTx};
use strobe_io::test_support::{
    assert_all_arrived_in_order, collect, is_ours, mixed_size, now_ns, pin_to_cpu, send_all,
    tcpdump_around, udp_frame, VethPair, DST_MAC, SRC_MAC,
};
use strobe_io::{Backend, Receiver};

#[test]
fn ten_thousand_mixed_frames_arrive_intact_and_in_order() {
    let lab = VethPair::new("order");
    let opts = AfPacketOptions {
        rx_block_size: 1 << 20,
        rx_blocks: 32,
        ..AfPacketOptions::default()
    };
    let rx = AfPacketRx::open(&lab.b, lab.netns(), &opts).unwrap();
    let mut tx = AfPacketTx::open(&lab.a, lab.netns(), &opts).unwrap();
    assert_eq!(tx.time_base(), strobe_io::TimeBase::RealTime);
    assert!(tx.max_frame_len() >= 1514, "{}", tx.max_frame_len());
    assert!(tx.describe().contains(&lab.a), "{}", tx.describe());

    let frames: Vec<Vec<u8>> = (0..10_000).map(|s| udp_frame(s, mixed_size(s))).collect();
    let started_ns = now_ns();
    let receiver = collect(rx, frames.len(), Duration::from_secs(60));
    pin_to_cpu(0);
    let stats = send_all(&mut tx, &frames, 32);
    assert_eq!(stats.frames, 10_000);
    assert_eq!(
        stats.bytes,
        frames.iter().map(|f| f.len() as u64).sum::<u64>()
    );

    let (got, mut rx) = receiver.join().unwrap();
    let drops = rx.drops().unwrap();
    assert_all_arrived_in_order(&got, &frames, drops.ring_full, started_ns);
    assert_eq!(drops.ring_full, 0);
    assert_eq!(rx.malformed_blocks(), 0);
}

/// An Ethernet/IPv4/UDP frame of `len` bytes with IP identification `id`, one source port
/// and a payload from `seq`, built by etherparse: frames with consecutive identifications
/// and equal lengths are what UDP segmentation makes of one superframe.
fn segmentable_frame(seq: u32, id: u16, len: usize) -> Vec<u8> {
    let payload: Vec<u8> = seq
        .to_be_bytes()
        .into_iter()
        .chain((4..len - 42).map(|i| (seq as usize * 13 + i) as u8))
        .collect();
    let mut ip = etherparse::Ipv4Header::new(
        (8 + payload.len()) as u16,
        64,
        etherparse::IpNumber::UDP,
        [198, 18, 0, 1],
        [198, 19, 0, 1],
    )
    .unwrap();
    ip.identification = id;
    let mut out = Vec::with_capacity(len);
    etherparse::PacketBuilder::ethernet2(SRC_MAC, DST_MAC)
        .ip(etherparse::IpHeaders::Ipv4(ip, Default::default()))
        .udp(1000, 2000)
        .write(&mut out, &payload)
        .unwrap();
    out
}

/// `afpacket-gso`: refused (with the fix) while the device would pass superframes on uncut;
/// once the kernel segments and checksums, every frame arrives exactly as written, whether
/// it travelled in a superframe (consecutive identifications) or alone (a constant one).
#[test]
fn udp_segmentation_batches_arrive_as_the_frames_written() {
    let lab = VethPair::new("gso");
    let opts = AfPacketOptions {
        gso: true,
        rx_block_size: 1 << 20,
        rx_blocks: 32,
        ..AfPacketOptions::default()
    };
    let err = tx_err(&lab.a, lab.netns(), &opts);
    assert!(
        err.contains("tx-udp-segmentation on")
            && err.contains(&format!(
                "ethtool -K {} tx-udp-segmentation off tx-checksumming off",
                lab.a
            )),
        "{err}"
    );
    lab.exec(&[
        "ethtool",
        "-K",
        &lab.a,
        "tx-udp-segmentation",
        "off",
        "tx-checksumming",
        "off",
    ]);
    let rx = AfPacketRx::open(&lab.b, lab.netns(), &opts).unwrap();
    let mut tx = AfPacketTx::open(&lab.a, lab.netns(), &opts).unwrap();
    assert!(
        tx.describe().contains("UDP segmentation"),
        "{}",
        tx.describe()
    );
    assert!(!tx.describe().contains("qdisc bypass"), "{}", tx.describe());

    // 60-byte frames in runs up to 64, 1000-byte ones in pairs (a ring frame holds two),
    // and a stretch with a constant identification that must go one by one.
    let frames: Vec<Vec<u8>> = (0..3000u32)
        .map(|s| {
            let len = if (s / 500) % 2 == 0 { 60 } else { 1000 };
            // Counting up from 65 000, so runs cross the wrap to 0.
            let id = if (2000..2500).contains(&s) {
                7
            } else {
                (65_000 + s) as u16
            };
            segmentable_frame(s, id, len)
        })
        .collect();
    let started_ns = now_ns();
    let receiver = collect(rx, frames.len(), Duration::from_secs(60));
    pin_to_cpu(0);
    let stats = send_all(&mut tx, &frames, 256);
    assert_eq!(stats.frames, 3000);
    // 60-byte runs of up to 64, 1000-byte pairs, the constant stretch alone.
    let seg = stats
        .segmentation
        .expect("gso mode reports its superframes");
    assert_eq!(
        seg.frames, 2500,
        "all but the constant-identification stretch"
    );
    assert!(
        (1000 / 64 + 750..=800).contains(&seg.superframes),
        "{} superframes",
        seg.superframes
    );
    let (got, mut rx) = receiver.join().unwrap();
    let drops = rx.drops().unwrap();
    assert_all_arrived_in_order(&got, &frames, drops.ring_full, started_ns);
    // The kernel's checksums, checked by an independent decoder.
    for r in &got {
        let sliced = SlicedPacket::from_ethernet(&r.data).unwrap();
        let Some(NetSlice::Ipv4(ip)) = sliced.net else {
            panic!("not IPv4")
        };
        let h = ip.header().to_header();
        assert_eq!(h.header_checksum, h.calc_header_checksum());
    }
}

/// What the engine wrote is what the wire carried, as an independent capture and decoder
/// see it. With the qdisc bypassed, taps on the sending interface never see the frames, so
/// that case is captured on the peer.
#[test]
fn tcpdump_capture_matches_what_was_written() {
    let lab = VethPair::new("dump");
    for (bypass, capture_on) in [(true, lab.b.clone()), (false, lab.a.clone())] {
        let opts = AfPacketOptions {
            qdisc_bypass: bypass,
            ..AfPacketOptions::default()
        };
        let mut tx = AfPacketTx::open(&lab.a, lab.netns(), &opts).unwrap();
        let frames: Vec<Vec<u8>> = (0..300).map(|s| udp_frame(s, mixed_size(s * 13))).collect();
        let (captured, pcap) = tcpdump_around(&lab, &capture_on, frames.len(), || {
            send_all(&mut tx, &frames, 16);
        });
        let _ = std::fs::remove_file(pcap);
        for (seq, (c, sent)) in captured.iter().zip(&frames).enumerate() {
            assert!(
                c == sent,
                "bypass {bypass}: frame {seq} differs in the capture"
            );
            let packet = SlicedPacket::from_ethernet(c).unwrap();
            let Some(NetSlice::Ipv4(ip)) = &packet.net else {
                panic!("frame {seq} is not IPv4")
            };
            assert_eq!(ip.header().source(), [198, 18, 0, 1]);
            assert_eq!(ip.header().destination(), [198, 19, 0, 1]);
            let Some(TransportSlice::Udp(udp)) = &packet.transport else {
                panic!("frame {seq} is not UDP")
            };
            assert_eq!(udp.destination_port(), 2000);
            assert_eq!(udp.payload()[..4], (seq as u32).to_be_bytes());
        }
    }
}

/// The engine keeps templates in slots: what it wrote into a ring frame must still be there
/// when that frame comes back, and it must go out again unchanged.
#[test]
fn slot_contents_persist_across_transmit_calls() {
    let lab = VethPair::new("slots");
    let opts = AfPacketOptions {
        ring_frames: 8,
        ..AfPacketOptions::default()
    };
    let mut tx = AfPacketTx::open(&lab.a, lab.netns(), &opts).unwrap();
    assert_eq!(tx.slot_count(), 8);
    let rx = AfPacketRx::open(&lab.b, lab.netns(), &opts).unwrap();
    let receiver = collect(rx, 60, Duration::from_secs(20));

    let templates: Vec<Vec<u8>> = (0..8)
        .map(|id| udp_frame(1000 + id, 100 + id as usize))
        .collect();
    let mut written = [false; 8];
    let mut expected_id = 0u32;
    let mut sent_ids = Vec::new();
    while sent_ids.len() < 60 {
        let want = (60 - sent_ids.len()).min(3);
        let sent = tx
            .transmit(want, |slots| {
                for slot in slots.iter_mut() {
                    assert_eq!(slot.id, expected_id, "slots come in ring order");
                    expected_id = (expected_id + 1) % 8;
                    let template = &templates[slot.id as usize];
                    if written[slot.id as usize] {
                        assert!(
                            slot.buf[..template.len()] == template[..],
                            "slot {} lost its contents",
                            slot.id
                        );
                    } else {
                        slot.buf[..template.len()].copy_from_slice(template);
                        written[slot.id as usize] = true;
                    }
                    slot.len = template.len();
                    sent_ids.push(slot.id);
                }
            })
            .unwrap();
        assert!(sent >= 1);
    }
    tx.finish().unwrap();
    assert!(written.iter().all(|&w| w), "every ring frame was used");

    let (got, _) = receiver.join().unwrap();
    assert_eq!(got.len(), 60);
    for (r, id) in got.iter().zip(&sent_ids) {
        assert!(
            r.data == templates[*id as usize],
            "frame from slot {id} changed on the wire"
        );
    }
}

#[test]
fn a_port_does_not_receive_what_it_sends() {
    let lab = VethPair::new("ignout");
    // Through the qdisc, so taps on `a` would see its outgoing frames if not told to ignore.
    let opts = AfPacketOptions {
        qdisc_bypass: false,
        ..AfPacketOptions::default()
    };
    let rx_a = AfPacketRx::open(&lab.a, lab.netns(), &opts).unwrap();
    let mut tx_a = AfPacketTx::open(&lab.a, lab.netns(), &opts).unwrap();
    let mut tx_b = AfPacketTx::open(&lab.b, lab.netns(), &opts).unwrap();
    let receiver = collect(rx_a, 100, Duration::from_secs(5));

    let own: Vec<Vec<u8>> = (0..100).map(|s| udp_frame(s, 200)).collect();
    let from_peer: Vec<Vec<u8>> = (500..600).map(|s| udp_frame(s, 300)).collect();
    send_all(&mut tx_a, &own, 32);
    send_all(&mut tx_b, &from_peer, 32);

    let (got, _) = receiver.join().unwrap();
    assert_eq!(got.len(), 100, "the frames from the peer arrive");
    for (r, sent) in got.iter().zip(&from_peer) {
        assert!(r.data == *sent, "only the peer's frames are received");
    }
}

#[test]
fn ring_drops_are_counted_and_accumulate() {
    let lab = VethPair::new("drops");
    // Two one-page blocks: room for a handful of 1000-byte frames.
    let opts = AfPacketOptions {
        rx_block_size: 4096,
        rx_blocks: 2,
        rx_block_timeout_ms: 1,
        ..AfPacketOptions::default()
    };
    let mut rx = AfPacketRx::open(&lab.b, lab.netns(), &opts).unwrap();
    let mut tx = AfPacketTx::open(&lab.a, lab.netns(), &opts).unwrap();
    let frames: Vec<Vec<u8>> = (0..300).map(|s| udp_frame(s, 1000)).collect();

    send_all(&mut tx, &frames, 32);
    // The kernel counts as it delivers: wait for it (on a loaded machine that can take
    // longer than a fixed pause), then read once more with nothing in flight.
    let counted_drops = |rx: &mut AfPacketRx, above: u64| {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let n = rx.drops().unwrap().ring_full;
            if n > above || Instant::now() > deadline {
                return n;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    counted_drops(&mut rx, 250);
    std::thread::sleep(Duration::from_millis(20));
    let first = rx.drops().unwrap().ring_full;
    assert!(first > 250, "only {first} drops counted with a full ring");
    // Reading resets the kernel's counter; ours must keep the total.
    assert_eq!(rx.drops().unwrap().ring_full, first);

    // Drain what the ring kept (intact, in order), then overflow it again.
    let mut kept = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        rx.poll(64, |f| {
            if is_ours(f.data) {
                kept.push(f.data.to_vec())
            }
        })
        .unwrap();
    }
    assert!(
        !kept.is_empty() && kept.len() < 20,
        "{} frames kept",
        kept.len()
    );
    assert_eq!(
        first + kept.len() as u64,
        300,
        "every frame was either kept or counted"
    );
    assert!(kept.iter().zip(&frames).all(|(k, f)| k == f));

    send_all(&mut tx, &frames, 32);
    assert!(counted_drops(&mut rx, first + 250) > first + 250);
}

#[test]
fn promiscuous_membership_lasts_as_long_as_the_receiver() {
    let lab = VethPair::new("promisc");
    let promiscuity = || lab.promiscuity(&lab.b);
    assert_eq!(promiscuity(), 0);
    let rx = AfPacketRx::open(&lab.b, lab.netns(), &AfPacketOptions::default()).unwrap();
    assert_eq!(promiscuity(), 1);
    assert!(rx.describe().contains("promiscuous"));
    drop(rx);
    assert_eq!(promiscuity(), 0);
    let opts = AfPacketOptions {
        promiscuous: false,
        ..AfPacketOptions::default()
    };
    let _rx = AfPacketRx::open(&lab.b, lab.netns(), &opts).unwrap();
    assert_eq!(promiscuity(), 0);
}

fn tx_err(iface: &str, ns: Option<&str>, opts: &AfPacketOptions) -> String {
    match AfPacketTx::open(iface, ns, opts) {
        Ok(_) => panic!("opening TX on {iface} in {ns:?} succeeded"),
        Err(e) => e.to_string(),
    }
}

fn rx_err(iface: &str, ns: Option<&str>, opts: &AfPacketOptions) -> String {
    match AfPacketRx::open(iface, ns, opts) {
        Ok(_) => panic!("opening RX on {iface} in {ns:?} succeeded"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn errors_say_what_is_wrong() {
    let lab = VethPair::new("errors");
    let opts = AfPacketOptions::default();

    let want = format!(
        "interface `nope0` not found in network namespace `{}`",
        lab.ns()
    );
    let err = tx_err("nope0", lab.netns(), &opts);
    assert!(err.contains(&want), "{err}");
    let err = rx_err("nope0", lab.netns(), &opts);
    assert!(err.contains(&want), "{err}");

    let missing_ns = format!("sxa-{}-missing", std::process::id());
    let err = tx_err("eth0", Some(&missing_ns), &opts);
    assert!(
        err.contains(&missing_ns) && err.contains("not found"),
        "{err}"
    );
    let err = rx_err("eth0", Some(&missing_ns), &opts);
    assert!(err.contains(&missing_ns), "{err}");

    let small = AfPacketOptions {
        frame_size: 1024,
        ..AfPacketOptions::default()
    };
    let err = tx_err(&lab.a, lab.netns(), &small);
    assert!(
        err.contains("frame_size 1024") && err.contains("2048"),
        "{err}"
    );
    let odd_block = AfPacketOptions {
        rx_block_size: 5000,
        ..AfPacketOptions::default()
    };
    let err = rx_err(&lab.b, lab.netns(), &odd_block);
    assert!(
        err.contains("rx_block_size 5000") && err.contains("page size"),
        "{err}"
    );

    // A frame longer than the link takes is refused before it reaches the kernel.
    let mut tx = AfPacketTx::open(&lab.a, lab.netns(), &opts).unwrap();
    let max = tx.max_frame_len();
    assert_eq!(
        max,
        1500 + 18,
        "MTU 1500 plus Ethernet header and one VLAN tag"
    );
    let err = tx
        .transmit(1, |slots| slots[0].len = max + 1)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&lab.a) && err.contains(&format!("{}", max + 1)),
        "{err}"
    );

    // Sending on a link that is down names the interface and the fix.
    lab.ip(&["link", "set", &lab.a, "down"]);
    let mut tx = AfPacketTx::open(&lab.a, lab.netns(), &opts).unwrap();
    let frame = udp_frame(1, 60);
    let err = tx
        .transmit(1, |slots| {
            slots[0].buf[..60].copy_from_slice(&frame);
            slots[0].len = 60;
        })
        .unwrap_err()
        .to_string();
    assert!(err.contains(&lab.a) && err.contains("down"), "{err}");
}

/// Capabilities are per thread on Linux: drop CAP_NET_RAW on a fresh thread and open there.
#[test]
fn missing_privilege_is_named() {
    let lab = VethPair::new("perm");
    let (a, b, ns) = (lab.a.clone(), lab.b.clone(), lab.ns().to_owned());
    let errors = std::thread::spawn(move || {
        drop_cap_net_raw();
        let opts = AfPacketOptions::default();
        (tx_err(&a, Some(&ns), &opts), rx_err(&b, Some(&ns), &opts))
    })
    .join()
    .unwrap();
    for err in [errors.0, errors.1] {
        assert!(err.contains("AF_PACKET needs root or CAP_NET_RAW"), "{err}");
    }
}

fn drop_cap_net_raw() {
    const CAP_NET_RAW: u32 = 13;
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut header = Header {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: capget/capset with a v3 header and the two data words v3 expects; pid 0 is this
    // thread only.
    unsafe {
        assert_eq!(
            libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()),
            0
        );
        data[0].effective &= !(1 << CAP_NET_RAW);
        data[0].permitted &= !(1 << CAP_NET_RAW);
        assert_eq!(
            libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()),
            0
        );
    }
}

/// CPU time this thread used, user and system, in ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes the calling thread's CPU clock into `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn tx_packets(lab: &VethPair) -> u64 {
    let path = format!("/sys/class/net/{}/statistics/tx_packets", lab.a);
    lab.exec(&["cat", &path]).trim().parse().unwrap()
}

/// Not a test: TX rate with 64-byte frames (60 without FCS) for 3 s against a busy receiver,
/// from the sending veth's counters after a warm-up. Knobs: RING_FRAMES, BATCH, RX=0 (no
/// receiver), RPS=MASK (receive processing of the peer on those CPUs), PEER='command with {a}
/// for the interface' (measure another generator, e.g. dpdk-testpmd or trafgen, instead).
/// `cargo test --release -p strobe-io --test afpacket measure -- --ignored --nocapture`
#[test]
#[ignore = "measurement, run by hand"]
fn measure_tx_rate_64_byte_frames() {
    let lab = VethPair::new("rate");
    let ring_frames: usize = std::env::var("RING_FRAMES").map_or(1024, |v| v.parse().unwrap());
    let batch: usize = std::env::var("BATCH").map_or(64, |v| v.parse().unwrap());
    let with_receiver = std::env::var("RX").map_or(true, |v| v != "0");
    let peer = std::env::var("PEER").ok();
    let opts = AfPacketOptions {
        ring_frames,
        ..AfPacketOptions::default()
    };
    if let Ok(cpus) = std::env::var("RPS") {
        // Receive processing of `b` on these CPUs (hex mask) instead of the sender's.
        let path = format!("/sys/class/net/{}/queues/rx-0/rps_cpus", lab.b);
        lab.exec(&["sh", "-c", &format!("echo {cpus} > {path}")]);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let received = Arc::new(AtomicU64::new(0));
    let mut rx = with_receiver.then(|| AfPacketRx::open(&lab.b, lab.netns(), &opts).unwrap());
    let receiver = {
        let (stop, received) = (stop.clone(), received.clone());
        std::thread::spawn(move || {
            pin_to_cpu(1);
            let Some(rx) = rx.as_mut() else { return 0 };
            while !stop.load(Ordering::Relaxed) {
                let n = rx
                    .poll(256, |f| {
                        std::hint::black_box(f.data);
                    })
                    .unwrap();
                received.fetch_add(n as u64, Ordering::Relaxed);
            }
            rx.drops().unwrap().ring_full
        })
    };

    let (what, generator): (String, Box<dyn FnOnce()>) = match peer {
        Some(cmd) => {
            let cmd = cmd.replace("{a}", &lab.a);
            let mut child = Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    lab.ns(),
                    "sh",
                    "-c",
                    &format!("exec {cmd}"),
                ])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                // Its own process group: some generators fork workers.
                .process_group(0)
                .spawn()
                .unwrap();
            (
                cmd,
                Box::new(move || {
                    // SAFETY: signals only the process group of the child started above.
                    unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGINT) };
                    child.wait().unwrap();
                }),
            )
        }
        None => {
            let mut tx = AfPacketTx::open(&lab.a, lab.netns(), &opts).unwrap();
            let stop = stop.clone();
            let sender = std::thread::spawn(move || {
                pin_to_cpu(0);
                let template = udp_frame(0, 60);
                let cpu0 = thread_cpu_ns();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n += tx
                        .transmit(batch, |slots| {
                            for s in slots.iter_mut() {
                                // Ring frames keep their contents: write each one once.
                                if s.buf[..12] != template[..12] {
                                    s.buf[..60].copy_from_slice(&template);
                                }
                                s.len = 60;
                            }
                        })
                        .unwrap() as u64;
                }
                tx.finish().unwrap();
                println!(
                    "sender CPU {:.0} ns/frame",
                    (thread_cpu_ns() - cpu0) as f64 / n as f64
                );
            });
            (
                format!("strobe ring {ring_frames} batch {batch}"),
                Box::new(move || sender.join().unwrap()),
            )
        }
    };
    std::thread::sleep(Duration::from_millis(1500));
    let (tx0, rx0, t0) = (
        tx_packets(&lab),
        received.load(Ordering::Relaxed),
        Instant::now(),
    );
    std::thread::sleep(Duration::from_secs(3));
    let (tx1, rx1, secs) = (
        tx_packets(&lab),
        received.load(Ordering::Relaxed),
        t0.elapsed().as_secs_f64(),
    );
    stop.store(true, Ordering::Relaxed);
    generator();
    let ring_drops = receiver.join().unwrap();
    println!(
        "{what}: TX {:.3} Mpps, RX {:.3} Mpps, ring drops {ring_drops}",
        (tx1 - tx0) as f64 / secs / 1e6,
        (rx1 - rx0) as f64 / secs / 1e6
    );
}

#[test]
fn an_interface_mac_is_read_inside_its_namespace() {
    let lab = VethPair::with_macs("mac", [0x02, 0, 0, 0, 0xAA, 1], [0x02, 0, 0, 0, 0xAA, 2]);
    let ns = lab.ns();
    assert_eq!(
        strobe_io::ifaddr::interface_mac(lab.netns(), &lab.b).unwrap(),
        [0x02, 0, 0, 0, 0xAA, 2]
    );
    let port = format!("afpacket:{ns}/{}", lab.a);
    assert_eq!(
        strobe_io::ifaddr::port_mac(&port).unwrap(),
        [0x02, 0, 0, 0, 0xAA, 1]
    );
}
