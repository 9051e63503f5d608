//! The TPACKET_V2 receive ring on veth pairs inside network namespaces each test creates
//! (and removes, also when it fails). Needs root and `ip`.

use std::process::Command;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use etherparse::PacketBuilder;

use super::{AfPacketOptions, AfPacketRx, AfPacketTx, RxRing};
use crate::{Backend, Receiver, RxTimestamp};

const SRC_MAC: [u8; 6] = [0x02, 0x53, 0x54, 0x00, 0x00, 0x11];
const DST_MAC: [u8; 6] = [0x02, 0x53, 0x54, 0x00, 0x00, 0x12];

fn run(args: &[&str]) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {args:?}: {e}"));
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A network namespace with a veth pair `a` <-> `b`, deleted on drop.
struct Lab {
    ns: String,
    a: String,
    b: String,
}

impl Lab {
    fn new(tag: &str) -> Lab {
        let ns = format!("sv2-{}-{tag}", std::process::id());
        run(&["ip", "netns", "add", &ns]);
        // From here on the guard deletes the namespace (and the veths in it) on any failure.
        let lab = Lab {
            ns,
            a: "sv2a".into(),
            b: "sv2b".into(),
        };
        // No IPv6 on the new links: router solicitations and MLD reports would be noise.
        for key in ["all", "default"] {
            let sysctl = format!("net.ipv6.conf.{key}.disable_ipv6=1");
            run(&["ip", "netns", "exec", &lab.ns, "sysctl", "-qw", &sysctl]);
        }
        run(&[
            "ip", "-n", &lab.ns, "link", "add", &lab.a, "type", "veth", "peer", "name", &lab.b,
        ]);
        run(&["ip", "-n", &lab.ns, "link", "set", &lab.a, "up"]);
        run(&["ip", "-n", &lab.ns, "link", "set", &lab.b, "up"]);
        lab
    }

    fn ns(&self) -> Option<&str> {
        Some(&self.ns)
    }

    fn set_mtu(&self, mtu: u32) {
        for iface in [&self.a, &self.b] {
            let mtu = mtu.to_string();
            run(&["ip", "-n", &self.ns, "link", "set", iface, "mtu", &mtu]);
        }
    }

    fn promiscuity(&self, iface: &str) -> String {
        let out = Command::new("ip")
            .args(["-n", &self.ns, "-d", "link", "show", iface])
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&out.stdout);
        let at = out.find("promiscuity ").expect("ip -d shows promiscuity");
        out[at + 12..]
            .split_whitespace()
            .next()
            .unwrap()
            .to_string()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
    }
}

fn frames_ring() -> AfPacketOptions {
    AfPacketOptions {
        rx_ring: RxRing::Frames,
        ..AfPacketOptions::default()
    }
}

/// An IPv4/UDP frame of `len` bytes (no FCS) whose payload is unique to `seq`.
fn frame(seq: u32, len: usize) -> Vec<u8> {
    let payload: Vec<u8> = seq
        .to_be_bytes()
        .into_iter()
        .chain((4..len - 14 - 20 - 8).map(|i| (seq as usize * 31 + i * 7) as u8))
        .collect();
    let builder = PacketBuilder::ethernet2(SRC_MAC, DST_MAC)
        .ipv4([198, 18, 0, 1], [198, 19, 0, 1], 64)
        .udp(1000 + (seq % 1000) as u16, 2000);
    let mut out = Vec::with_capacity(len);
    builder.write(&mut out, &payload).unwrap();
    assert_eq!(out.len(), len);
    out
}

/// Sizes 60..=1514 in a scrambled but repeatable order.
fn mixed_size(seq: u32) -> usize {
    60 + (seq as usize * 7919) % (1514 - 60 + 1)
}

fn is_ours(data: &[u8]) -> bool {
    data.len() >= 14 && data[6..12] == SRC_MAC
}

/// Pins the calling thread to one CPU, so veth delivers frames from one per-CPU backlog and
/// the kernel cannot reorder them (not the backend's doing).
fn pin_to_cpu(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is empty; CPU_SET and sched_setaffinity only touch it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set);
    }
}

fn send_all(tx: &mut AfPacketTx, frames: &[Vec<u8>]) {
    let mut next = 0;
    while next < frames.len() {
        let want = (frames.len() - next).min(32);
        let sent = tx
            .transmit(want, |slots| {
                for (slot, f) in slots.iter_mut().zip(&frames[next..]) {
                    slot.buf[..f.len()].copy_from_slice(f);
                    slot.len = f.len();
                }
            })
            .unwrap();
        assert!(sent >= 1, "transmit handed over no frame");
        next += sent;
    }
    tx.finish().unwrap();
}

struct Received {
    data: Vec<u8>,
    wire_len: u32,
    timestamp: Option<RxTimestamp>,
}

/// Takes every waiting frame of ours from `rx`.
fn take(rx: &mut AfPacketRx, into: &mut Vec<Received>) -> usize {
    rx.poll(64, |f| {
        if is_ours(f.data) {
            into.push(Received {
                data: f.data.to_vec(),
                wire_len: f.wire_len,
                timestamp: f.timestamp,
            });
        }
    })
    .unwrap()
}

/// Busy-polls `rx` on its own thread until `want` of our frames arrived or `limit` passed.
fn collect(
    mut rx: AfPacketRx,
    want: usize,
    limit: Duration,
) -> JoinHandle<(Vec<Received>, AfPacketRx)> {
    std::thread::spawn(move || {
        let start = Instant::now();
        let mut got = Vec::with_capacity(want);
        while got.len() < want && start.elapsed() < limit {
            take(&mut rx, &mut got);
        }
        (got, rx)
    })
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

#[test]
fn frame_ring_delivers_every_frame_intact_in_order_with_kernel_timestamps() {
    let lab = Lab::new("order");
    let rx = AfPacketRx::open(&lab.b, lab.ns(), &frames_ring()).unwrap();
    assert_eq!(rx.ring_kind(), RxRing::Frames);
    let describe = rx.describe();
    assert!(
        describe.contains("TPACKET_V2 RX ring") && describe.contains("promiscuous"),
        "{describe}"
    );
    assert_eq!(lab.promiscuity(&lab.b), "1");
    let mut tx = AfPacketTx::open(&lab.a, lab.ns(), &frames_ring()).unwrap();

    let frames: Vec<Vec<u8>> = (0..10_000).map(|s| frame(s, mixed_size(s))).collect();
    let started_ns = now_ns();
    let receiver = collect(rx, frames.len(), Duration::from_secs(60));
    pin_to_cpu(0);
    send_all(&mut tx, &frames);

    let (got, mut rx) = receiver.join().unwrap();
    let drops = rx.drops().unwrap();
    assert_eq!(
        got.len(),
        frames.len(),
        "received {} of {} frames (ring drops {})",
        got.len(),
        frames.len(),
        drops.ring_full
    );
    let mut last_ts = 0;
    for (i, (r, sent)) in got.iter().zip(&frames).enumerate() {
        assert!(r.data == *sent, "frame {i} differs from what was sent");
        assert_eq!(r.wire_len as usize, sent.len());
        let Some(RxTimestamp::Kernel(ts)) = r.timestamp else {
            panic!("frame {i} has no kernel timestamp: {:?}", r.timestamp);
        };
        assert!(ts >= last_ts, "timestamp of frame {i} goes back");
        last_ts = ts;
    }
    // CLOCK_REALTIME: within the test's own wall-clock window (generous).
    let first = got[0].timestamp.unwrap().ns();
    assert!(first + 1_000_000_000 >= started_ns && last_ts <= now_ns() + 1_000_000_000);
    assert_eq!(drops.ring_full, 0);
    assert_eq!(rx.malformed_frames(), 0);

    drop(rx);
    assert_eq!(
        lab.promiscuity(&lab.b),
        "0",
        "membership ends with the receiver"
    );
}

/// A block ring holds a lone frame until its block times out; the frame ring hands it over
/// as soon as the kernel wrote it. Both receive the same frame with a 60 s block timeout set:
/// the block ring shows the frame really is held back while the frame ring already has it.
#[test]
fn a_lone_frame_is_handed_over_without_waiting_for_a_block() {
    let lab = Lab::new("lone");
    let slow_blocks = AfPacketOptions {
        rx_block_timeout_ms: 60_000,
        ..AfPacketOptions::default()
    };
    let frames = AfPacketOptions {
        rx_ring: RxRing::Frames,
        ..slow_blocks.clone()
    };
    let mut frames_rx = AfPacketRx::open(&lab.b, lab.ns(), &frames).unwrap();
    let mut blocks_rx = AfPacketRx::open(&lab.b, lab.ns(), &slow_blocks).unwrap();
    assert_eq!(blocks_rx.ring_kind(), RxRing::Blocks);
    let mut tx = AfPacketTx::open(&lab.a, lab.ns(), &frames_ring()).unwrap();
    let lone = frame(7, 128);
    send_all(&mut tx, std::slice::from_ref(&lone));

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
    let lab = Lab::new("cut");
    let rx = AfPacketRx::open(&lab.b, lab.ns(), &frames_ring()).unwrap();
    lab.set_mtu(4000);
    let big_slots = AfPacketOptions {
        frame_size: 4096,
        ..AfPacketOptions::default()
    };
    let mut tx = AfPacketTx::open(&lab.a, lab.ns(), &big_slots).unwrap();
    let frames = [frame(1, 3000), frame(2, 100)];
    let receiver = collect(rx, 2, Duration::from_secs(10));
    send_all(&mut tx, &frames);
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
    let lab = Lab::new("drops");
    // Two one-page blocks of two 1600-byte slots each.
    let small = AfPacketOptions {
        rx_ring: RxRing::Frames,
        rx_block_size: 4096,
        rx_blocks: 2,
        qdisc_bypass: false,
        ..AfPacketOptions::default()
    };
    let mut rx = AfPacketRx::open(&lab.b, lab.ns(), &small).unwrap();
    assert!(
        rx.describe().contains("4 frames × 1600 B"),
        "{}",
        rx.describe()
    );
    let mut tx_b = AfPacketTx::open(&lab.b, lab.ns(), &small).unwrap();
    let mut tx_a = AfPacketTx::open(&lab.a, lab.ns(), &small).unwrap();

    let own: Vec<Vec<u8>> = (1000..1050).map(|s| frame(s, 200)).collect();
    send_all(&mut tx_b, &own);
    let from_peer: Vec<Vec<u8>> = (0..300).map(|s| frame(s, 1000)).collect();
    send_all(&mut tx_a, &from_peer);

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
    send_all(&mut tx_a, &from_peer[..1]);
    let receiver = collect(rx, 1, Duration::from_secs(10));
    let (got, _) = receiver.join().unwrap();
    assert!(got.len() == 1 && got[0].data == from_peer[0]);
}

/// The reflector's ports: `open_duplex` reads an AF_PACKET port through the frame ring.
#[test]
fn open_duplex_receives_afpacket_through_the_frame_ring() {
    let lab = Lab::new("duplex");
    let location = format!("afpacket:{}/{}", lab.ns, lab.b);
    let (mut back, rx) = crate::open_duplex(&location, 64).unwrap();
    let describe = rx.describe();
    assert!(describe.contains("TPACKET_V2 RX ring"), "{describe}");

    let crate::AnyReceiver::AfPacket(rx) = rx else {
        panic!("not an AF_PACKET receiver: {describe}");
    };
    let sent = frame(3, 200);
    let receiver = collect(rx, 1, Duration::from_secs(10));
    send_all(
        &mut AfPacketTx::open(&lab.a, lab.ns(), &frames_ring()).unwrap(),
        std::slice::from_ref(&sent),
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
    let lab = Lab::new("handover");
    for ring in [RxRing::Frames, RxRing::Blocks] {
        let opts = AfPacketOptions {
            rx_ring: ring,
            ..AfPacketOptions::default()
        };
        let mut rx = AfPacketRx::open(&lab.b, lab.ns(), &opts).unwrap();
        let mut tx = AfPacketTx::open(&lab.a, lab.ns(), &opts).unwrap();
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
        let template = frame(1, 128);
        for _ in 0..count {
            send_all(&mut tx, std::slice::from_ref(&template));
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
