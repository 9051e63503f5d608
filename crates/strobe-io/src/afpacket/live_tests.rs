//! The TPACKET_V2 receive ring on veth pairs inside network namespaces each test creates
//! (and removes, also when it fails). Needs root and `ip`.

use std::time::{Duration, Instant};

use super::{AfPacketOptions, AfPacketRx, AfPacketTx, RxRing};
use crate::test_support::{
    assert_all_arrived_in_order, collect, is_ours, mixed_size, now_ns, pin_to_cpu, send_all, take,
    udp_frame, VethPair,
};
use crate::{Backend, Receiver};

fn frames_ring() -> AfPacketOptions {
    AfPacketOptions {
        rx_ring: RxRing::Frames,
        ..AfPacketOptions::default()
    }
}

#[test]
fn frame_ring_delivers_every_frame_intact_in_order_with_kernel_timestamps() {
    let lab = VethPair::new("order");
    let rx = AfPacketRx::open(&lab.b, lab.netns(), &frames_ring()).unwrap();
    assert_eq!(rx.ring_kind(), RxRing::Frames);
    let describe = rx.describe();
    assert!(
        describe.contains("TPACKET_V2 RX ring") && describe.contains("promiscuous"),
        "{describe}"
    );
    assert_eq!(lab.promiscuity(&lab.b), 1);
    let mut tx = AfPacketTx::open(&lab.a, lab.netns(), &frames_ring()).unwrap();

    let frames: Vec<Vec<u8>> = (0..10_000).map(|s| udp_frame(s, mixed_size(s))).collect();
    let started_ns = now_ns();
    let receiver = collect(rx, frames.len(), Duration::from_secs(60));
    pin_to_cpu(0);
    send_all(&mut tx, &frames, 32);

    let (got, mut rx) = receiver.join().unwrap();
    let drops = rx.drops().unwrap();
    assert_all_arrived_in_order(&got, &frames, drops.ring_full, started_ns);
    assert_eq!(drops.ring_full, 0);
    assert_eq!(rx.malformed_frames(), 0);

    drop(rx);
    assert_eq!(
        lab.promiscuity(&lab.b),
        0,
        "membership ends with the receiver"
    );
}

/// A block ring holds a lone frame until its block times out; the frame ring hands it over
/// as soon as the kernel wrote it. Both receive the same frame with a 60 s block timeout set:
/// the block ring shows the frame really is held back while the frame ring already has it.
#[test]
fn a_lone_frame_is_handed_over_without_waiting_for_a_block() {
    let lab = VethPair::new("lone");
    let slow_blocks = AfPacketOptions {
        rx_block_timeout_ms: 60_000,
        ..AfPacketOptions::default()
    };
    let frames = AfPacketOptions {
        rx_ring: RxRing::Frames,
        ..slow_blocks.clone()
    };
    let mut frames_rx = AfPacketRx::open(&lab.b, lab.netns(), &frames).unwrap();
    let mut blocks_rx = AfPacketRx::open(&lab.b, lab.netns(), &slow_blocks).unwrap();
    assert_eq!(blocks_rx.ring_kind(), RxRing::Blocks);
    let mut tx = AfPacketTx::open(&lab.a, lab.netns(), &frames_ring()).unwrap();
    let lone = udp_frame(7, 128);
    send_all(&mut tx, std::slice::from_ref(&lone), 32);

    // A generous bound: the block ring would hold the frame for up to 60 s.
    let window = Duration::from_millis(100);
    let mut from_frames = Vec::new();
    let start = Instant::now();
    while from_frames.is_empty() && start.elapsed() < window {
        take(&mut frames_rx, &mut from_frames);
    }
    assert_eq!(
        from_frames.len(),
        1,
        "the frame ring did not hand the frame over within {window:?}"
    );
    assert!(from_frames[0].data == lone);

    let mut from_blocks = Vec::new();
    let start = Instant::now();
    while start.elapsed() < window {
        take(&mut blocks_rx, &mut from_blocks);
    }
    assert!(
        from_blocks.is_empty(),
        "the block ring handed a lone frame over before its block timed out"
    );
}

/// A frame longer than a slot (the MTU grew after the ring was made) arrives cut, with its
/// length on the wire.
#[test]
fn a_frame_longer_than_its_slot_arrives_cut_with_its_wire_length() {
    let lab = VethPair::new("cut");
    let rx = AfPacketRx::open(&lab.b, lab.netns(), &frames_ring()).unwrap();
    for iface in [&lab.a, &lab.b] {
        lab.ip(&["link", "set", iface, "mtu", "4000"]);
    }
    let big_slots = AfPacketOptions {
        frame_size: 4096,
        ..AfPacketOptions::default()
    };
    let mut tx = AfPacketTx::open(&lab.a, lab.netns(), &big_slots).unwrap();
    let frames = [udp_frame(1, 3000), udp_frame(2, 100)];
    let receiver = collect(rx, 2, Duration::from_secs(10));
    send_all(&mut tx, &frames, 32);
    let (got, rx) = receiver.join().unwrap();

    assert_eq!(got.len(), 2);
    let cut = &got[0];
    assert_eq!(cut.wire_len, 3000);
    assert!(
        cut.data.len() < 1600 && frames[0].starts_with(&cut.data),
        "{} bytes kept",
        cut.data.len()
    );
    assert!(got[1].data == frames[1] && got[1].wire_len == 100);
    assert_eq!(rx.malformed_frames(), 0);
}

/// With no one reading, the ring keeps its first frames and the kernel counts the rest as
/// drops; frames the port itself sends are neither received nor counted.
#[test]
fn a_full_frame_ring_counts_drops_and_ignores_outgoing_frames() {
    let lab = VethPair::new("drops");
    // Two one-page blocks of two 1600-byte slots each.
    let small = AfPacketOptions {
        rx_ring: RxRing::Frames,
        rx_block_size: 4096,
        rx_blocks: 2,
        qdisc_bypass: false,
        ..AfPacketOptions::default()
    };
    let mut rx = AfPacketRx::open(&lab.b, lab.netns(), &small).unwrap();
    assert!(
        rx.describe().contains("4 frames × 1600 B"),
        "{}",
        rx.describe()
    );
    let mut tx_b = AfPacketTx::open(&lab.b, lab.netns(), &small).unwrap();
    let mut tx_a = AfPacketTx::open(&lab.a, lab.netns(), &small).unwrap();

    let own: Vec<Vec<u8>> = (1000..1050).map(|s| udp_frame(s, 200)).collect();
    send_all(&mut tx_b, &own, 32);
    let from_peer: Vec<Vec<u8>> = (0..300).map(|s| udp_frame(s, 1000)).collect();
    send_all(&mut tx_a, &from_peer, 32);

    // Drop counts accumulate over reads; wait until the kernel has counted them all.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut dropped = 0;
    while dropped < 296 && Instant::now() < deadline {
        dropped = rx.drops().unwrap().ring_full;
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut kept = Vec::new();
    // Bounded: a ring that never got its slots back would hand the same frames out forever.
    for _ in 0..8 {
        if take(&mut rx, &mut kept) == 0 {
            break;
        }
    }
    assert_eq!(kept.len(), 4, "the ring keeps one frame per slot");
    assert_eq!(dropped, 296, "every frame was either kept or counted");
    for (k, sent) in kept.iter().zip(&from_peer) {
        assert!(k.data == *sent, "the first frames from the peer are kept");
    }
    assert_eq!(rx.drops().unwrap().ring_full, 296, "the total stays");

    // The slots are free again: the next frame is received.
    send_all(&mut tx_a, &from_peer[..1], 32);
    let receiver = collect(rx, 1, Duration::from_secs(10));
    let (got, _) = receiver.join().unwrap();
    assert!(got.len() == 1 && got[0].data == from_peer[0]);
}

/// The reflector's ports: `open_duplex` reads an AF_PACKET port through the frame ring.
#[test]
fn open_duplex_receives_afpacket_through_the_frame_ring() {
    let lab = VethPair::new("duplex");
    let location = format!("afpacket:{}/{}", lab.ns(), lab.b);
    let (mut back, rx) = crate::open_duplex(&location, 64).unwrap();
    let describe = rx.describe();
    assert!(describe.contains("TPACKET_V2 RX ring"), "{describe}");

    let crate::AnyReceiver::AfPacket(rx) = rx else {
        panic!("not an AF_PACKET receiver: {describe}");
    };
    let sent = udp_frame(3, 200);
    let receiver = collect(rx, 1, Duration::from_secs(10));
    send_all(
        &mut AfPacketTx::open(&lab.a, lab.netns(), &frames_ring()).unwrap(),
        std::slice::from_ref(&sent),
        32,
    );
    let (got, _) = receiver.join().unwrap();
    assert!(got.len() == 1 && got[0].data == sent);
    assert!(back.describe().contains("TX ring"), "{}", back.describe());
    back.finish().unwrap();
}

/// Not a test: how long a frame waits in the ring, as CLOCK_REALTIME right after `poll` hands
/// it over minus its kernel receive timestamp, for each ring kind; one frame every 200 µs
/// from another CPU. `cargo test --release -p strobe-io --lib hand_over -- --ignored --nocapture`
#[test]
#[ignore = "measurement, run by hand"]
fn measure_hand_over_delay() {
    let lab = VethPair::new("handover");
    for ring in [RxRing::Frames, RxRing::Blocks] {
        let opts = AfPacketOptions {
            rx_ring: ring,
            ..AfPacketOptions::default()
        };
        let mut rx = AfPacketRx::open(&lab.b, lab.netns(), &opts).unwrap();
        let mut tx = AfPacketTx::open(&lab.a, lab.netns(), &opts).unwrap();
        let count = 5_000;
        let receiver = std::thread::spawn(move || {
            pin_to_cpu(1);
            let mut waits = Vec::with_capacity(count);
            let start = Instant::now();
            while waits.len() < count && start.elapsed() < Duration::from_secs(30) {
                let mut stamps = Vec::new();
                rx.poll(64, |f| {
                    if is_ours(f.data) {
                        stamps.push(f.timestamp.unwrap().ns());
                    }
                })
                .unwrap();
                let now = now_ns();
                waits.extend(stamps.iter().map(|&ts| now.saturating_sub(ts)));
            }
            waits
        });
        pin_to_cpu(0);
        let template = udp_frame(1, 128);
        for _ in 0..count {
            send_all(&mut tx, std::slice::from_ref(&template), 32);
            let until = Instant::now() + Duration::from_micros(200);
            while Instant::now() < until {
                std::hint::spin_loop();
            }
        }
        let mut waits = receiver.join().unwrap();
        waits.sort_unstable();
        let at = |q: f64| waits[((waits.len() - 1) as f64 * q) as usize] as f64 / 1000.0;
        println!(
            "{ring:?}: {} frames, wait in ring p50 {:.1} µs, p99 {:.1} µs, p99.9 {:.1} µs",
            waits.len(),
            at(0.5),
            at(0.99),
            at(0.999)
        );
    }
}

/// A link that goes down comes back by itself (the kernel rebinds the socket when it is up
/// again); an interface that is deleted does not, and the receiver says so.
#[test]
fn a_receiver_tells_an_interface_gone_from_a_link_down() {
    let lab = VethPair::new("rxfail");
    for ring in [RxRing::Blocks, RxRing::Frames] {
        let opts = AfPacketOptions {
            rx_ring: ring,
            ..AfPacketOptions::default()
        };
        let mut rx = AfPacketRx::open(&lab.b, lab.netns(), &opts).unwrap();
        rx.check_alive().unwrap();
        lab.ip(&["link", "set", &lab.b, "down"]);
        rx.check_alive().unwrap();
        lab.ip(&["link", "set", &lab.b, "up"]);
        rx.check_alive().unwrap();
        if ring == RxRing::Frames {
            lab.ip(&["link", "del", &lab.b]);
            let gone = rx.check_alive().unwrap_err().to_string();
            assert!(
                gone.contains(&lab.b) && gone.contains("went away"),
                "{gone}"
            );
        }
    }
}
