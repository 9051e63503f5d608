//! AF_XDP backend on veth pairs in network namespaces that each test creates and removes.
//! Needs root (skipped with a message otherwise); traffic stays inside the namespace and uses
//! 198.18.0.0/15 only.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use strobe_io::afxdp::{AfXdpOptions, AfXdpPort, AfXdpRx, AfXdpTx, XdpMode, XdpModeInUse};
use strobe_io::test_support::{mac_text, mixed_size, now_ns, pin_to_cpu, VethPair};
use strobe_io::{read_capture, Backend, Receiver, RxTimestamp};

const MAC_A: [u8; 6] = [0x02, 0x53, 0x54, 0x00, 0x00, 0x0a];
const MAC_B: [u8; 6] = [0x02, 0x53, 0x54, 0x00, 0x00, 0x0b];
const SRC_IP: [u8; 4] = [198, 18, 0, 1];
const DST_IP: [u8; 4] = [198, 18, 0, 2];
const SRC_PORT: u16 = 4000;
const DST_PORT: u16 = 5000;
/// Ethernet + IPv4 + UDP headers.
const HEADERS: usize = 14 + 20 + 8;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("skipped: AF_XDP tests need root (namespaces, veth, BPF)");
    }
    root
}

/// The test link: a veth pair whose MAC addresses the frames below carry.
fn new_lab(tag: &str) -> VethPair {
    VethPair::with_macs(tag, MAC_A, MAC_B)
}

fn open(lab: &VethPair, iface: &str, opts: &AfXdpOptions) -> AfXdpPort {
    AfXdpPort::open(iface, 0, lab.netns(), opts)
        .unwrap_or_else(|e| panic!("cannot open AF_XDP on {iface}: {e}"))
}

/// TX on `a` (copy mode) and RX on `b`.
fn pair(lab: &VethPair, tx_opts: &AfXdpOptions, rx_opts: &AfXdpOptions) -> (AfXdpTx, AfXdpRx) {
    let rx = open(lab, &lab.b, rx_opts)
        .split()
        .1
        .expect("opened with rx");
    let (tx, no_rx) = open(lab, &lab.a, tx_opts).split();
    assert!(no_rx.is_none(), "a port opened without rx has no RX half");
    (tx, rx)
}

fn copy_opts() -> AfXdpOptions {
    AfXdpOptions {
        mode: XdpMode::Copy,
        ..AfXdpOptions::default()
    }
}

fn rx_opts() -> AfXdpOptions {
    AfXdpOptions {
        rx: true,
        ..AfXdpOptions::default()
    }
}

/// An Ethernet/IPv4/UDP frame whose payload starts with `seq` and continues with bytes
/// derived from it, built by etherparse (checksums included).
fn frame(seq: u32) -> Vec<u8> {
    let len = mixed_size(seq);
    let mut payload = vec![0u8; len - HEADERS];
    payload[..4].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in payload.iter_mut().enumerate().skip(4) {
        *b = (seq as usize * 31 + i) as u8;
    }
    let builder = etherparse::PacketBuilder::ethernet2(MAC_A, MAC_B)
        .ipv4(SRC_IP, DST_IP, 64)
        .udp(SRC_PORT, DST_PORT);
    let mut out = Vec::with_capacity(len);
    builder.write(&mut out, &payload).unwrap();
    assert_eq!(out.len(), len);
    out
}

/// The sequence number of one of our frames, None for anything else.
fn seq_of(data: &[u8]) -> Option<u32> {
    let ours = data.len() >= HEADERS + 4
        && data[..6] == MAC_B
        && data[6..12] == MAC_A
        && data[26..30] == SRC_IP
        && data[30..34] == DST_IP;
    ours.then(|| u32::from_be_bytes(data[HEADERS..HEADERS + 4].try_into().unwrap()))
}

/// Sends frames `seqs` in batches of at most `batch`, writing each in full.
fn send(tx: &mut AfXdpTx, seqs: std::ops::Range<u32>, batch: usize) {
    let mut next = seqs.start;
    while next < seqs.end {
        let k = batch.min((seqs.end - next) as usize);
        let sent = tx
            .transmit(k, |slots| {
                for (slot, seq) in slots.iter_mut().zip(next..) {
                    let f = frame(seq);
                    slot.buf[..f.len()].copy_from_slice(&f);
                    slot.len = f.len();
                }
            })
            .unwrap();
        assert_eq!(sent, k);
        next += k as u32;
    }
}

/// Polls until `n` of our frames arrived (others are ignored) or 10 s passed.
fn receive(rx: &mut AfXdpRx, n: usize) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut got = Vec::new();
    while got.len() < n && Instant::now() < deadline {
        rx.poll(64, |f| {
            if seq_of(f.data).is_some() {
                got.push(f.data.to_vec());
            }
        })
        .unwrap();
    }
    got
}

#[test]
fn ten_thousand_mixed_frames_arrive_intact_and_in_order() {
    if !is_root() {
        return;
    }
    let lab = new_lab("t");
    let (mut tx, mut rx) = pair(&lab, &copy_opts(), &rx_opts());
    assert_eq!(tx.mode(), XdpModeInUse::Copy);
    assert!(rx.native_xdp(), "veth runs XDP natively: {}", rx.describe());
    assert!(
        rx.describe().contains("CLOCK_REALTIME"),
        "{}",
        rx.describe()
    );

    const N: u32 = 10_000;
    let received = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&received);
    let receiver = std::thread::spawn(move || {
        let mut seqs = Vec::with_capacity(N as usize);
        let mut damaged = Vec::new();
        let mut last_ts = 0u64;
        let deadline = Instant::now() + Duration::from_secs(30);
        while seqs.len() < N as usize && Instant::now() < deadline {
            rx.poll(64, |f| {
                let Some(seq) = seq_of(f.data) else { return };
                if f.data != frame(seq).as_slice() || f.wire_len as usize != f.data.len() {
                    damaged.push(seq);
                }
                match f.timestamp {
                    Some(RxTimestamp::User(ns)) => {
                        assert!(ns >= last_ts, "timestamps go back");
                        last_ts = ns;
                    }
                    other => panic!("expected a user-space timestamp, got {other:?}"),
                }
                seqs.push(seq);
                counter.fetch_add(1, Ordering::Release);
            })
            .unwrap();
        }
        (seqs, damaged, rx.drops().unwrap(), last_ts)
    });

    // Keep at most 1024 frames between sender and receiver, so a slow receiver thread on
    // this 2-core machine cannot legitimately overflow its 2048-entry ring.
    let mut sent = 0u32;
    let deadline = Instant::now() + Duration::from_secs(30);
    while sent < N {
        while sent as u64 - received.load(Ordering::Acquire) > 1024 {
            assert!(
                Instant::now() < deadline,
                "receiver stopped at {received:?}"
            );
            std::thread::yield_now();
        }
        let k = 32.min(N - sent);
        send(&mut tx, sent..sent + k, 32);
        sent += k;
    }
    let stats = tx.finish().unwrap();
    assert_eq!(stats.frames, N as u64);
    let bytes: u64 = (0..N).map(|s| mixed_size(s) as u64).sum();
    assert_eq!(stats.bytes, bytes);

    let (seqs, damaged, drops, last_ts) = receiver.join().unwrap();
    assert_eq!(seqs.len(), N as usize, "lost frames (drops: {drops:?})");
    assert!(damaged.is_empty(), "frames damaged: {damaged:?}");
    assert!(seqs.iter().copied().eq(0..N), "frames out of order");
    assert_eq!(drops.ring_full, 0);
    assert!(
        now_ns() - last_ts < 60_000_000_000,
        "timestamp is not CLOCK_REALTIME"
    );
}

#[test]
fn copy_mode_sends_full_batches_of_256_where_the_kernel_allows_it() {
    if !is_root() {
        return;
    }
    let lab = new_lab("b");
    let (mut tx, mut rx) = pair(&lab, &copy_opts(), &rx_opts());
    // XDP_MAX_TX_SKB_BUDGET exists since Linux 6.17; before, a kick sends 32 frames.
    if strobe_io::kernel_release().expect("kernel release in /proc") >= (6, 17) {
        assert_eq!(tx.tx_budget(), Some(256), "{}", tx.describe());
        assert_eq!(tx.throughput_batch(), 256);
        assert!(
            tx.describe().contains("256 frames per kick"),
            "{}",
            tx.describe()
        );
    } else {
        assert_eq!(tx.tx_budget(), None);
        assert_eq!(tx.throughput_batch(), 32);
    }
    // Four full batches (1024 frames: the receiver's ring holds them all) go out whole,
    // intact and in order.
    send(&mut tx, 0..1024, 256);
    let stats = tx.finish().unwrap();
    assert_eq!(stats.frames, 1024);
    let got = receive(&mut rx, 1024);
    assert_eq!(got.len(), 1024, "drops: {:?}", rx.drops());
    for (seq, data) in (0u32..).zip(&got) {
        assert_eq!(data.as_slice(), frame(seq).as_slice(), "frame {seq}");
    }
}

#[test]
fn receives_what_the_peers_kernel_stack_sends_with_nothing_on_the_peer() {
    if !is_root() {
        return;
    }
    let lab = new_lab("k");
    // Plain IPv4 on `a`, with `b`'s MAC given statically: b's ARP replies would go to the
    // AF_XDP socket, not to b's stack.
    lab.ip(&["addr", "add", "198.18.0.1/30", "dev", &lab.a]);
    lab.ip(&[
        "neigh",
        "add",
        "198.18.0.2",
        "lladdr",
        &mac_text(MAC_B),
        "dev",
        &lab.a,
    ]);
    let mut rx = open(&lab, &lab.b, &rx_opts()).split().1.unwrap();
    assert!(rx.native_xdp());

    let payload = b"strobe: from a's stack, no XDP and no GRO on a";
    strobe_io::netns::in_netns(lab.netns(), || {
        let sock = std::net::UdpSocket::bind("198.18.0.1:4000").unwrap();
        for _ in 0..5 {
            sock.send_to(payload, "198.18.0.2:5000").unwrap();
        }
        Ok(())
    })
    .unwrap();

    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while got.len() < 5 && Instant::now() < deadline {
        rx.poll(64, |f| {
            if let Ok(p) = etherparse::SlicedPacket::from_ethernet(f.data) {
                if let Some(etherparse::TransportSlice::Udp(udp)) = p.transport {
                    got.push(udp.payload().to_vec());
                }
            }
        })
        .unwrap();
    }
    assert_eq!(got, vec![payload.to_vec(); 5]);
}

#[test]
fn transmitted_frames_decode_on_the_peer_capture() {
    if !is_root() {
        return;
    }
    let lab = new_lab("c");
    let (mut tx, _) = open(&lab, &lab.a, &copy_opts()).split();
    const N: u32 = 40;
    let path = std::env::temp_dir().join(format!("sxt-{}-afxdp.pcap", std::process::id()));
    let mut tcpdump = Command::new("ip")
        .args([
            "netns",
            "exec",
            lab.ns(),
            "tcpdump",
            "-i",
            &lab.b,
            "-n",
            "-U",
        ])
        // Not --immediate-mode: with it, this tcpdump/kernel pair holds back frames
        // after the first 32 (seen with AF_PACKET senders too).
        .arg("-w")
        .arg(&path)
        .args(["udp", "and", "src", "host", "198.18.0.1"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tcpdump is needed: apt-get install -y tcpdump");
    // tcpdump says "listening on" once its socket is attached.
    let mut stderr = BufReader::new(tcpdump.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    assert!(line.contains("listening on"), "tcpdump: {line}");

    send(&mut tx, 0..N, 8);
    tx.finish().unwrap();
    // -U writes each frame as it arrives: wait until all are in the file (or 10 s), then
    // stop tcpdump and judge what it wrote.
    let deadline = Instant::now() + Duration::from_secs(10);
    let captured = |path: &std::path::Path| {
        let mut n = 0;
        let _ = read_capture(path.to_str().unwrap(), false, |_| n += 1);
        n
    };
    while captured(&path) < N as usize && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    tcpdump.kill().unwrap();
    tcpdump.wait().unwrap();

    let mut frames = Vec::new();
    read_capture(path.to_str().unwrap(), true, |f| frames.push(f)).unwrap();
    let _ = std::fs::remove_file(&path);
    let seqs: Vec<_> = frames.iter().map(|f| seq_of(&f.data)).collect();
    assert_eq!(frames.len(), N as usize, "tcpdump captured {seqs:?}");
    for (seq, captured) in (0..N).zip(&frames) {
        let packet = etherparse::SlicedPacket::from_ethernet(&captured.data)
            .unwrap_or_else(|e| panic!("frame {seq} does not decode: {e}"));
        let Some(etherparse::NetSlice::Ipv4(ip)) = packet.net else {
            panic!("frame {seq} is not IPv4");
        };
        assert_eq!(ip.header().source(), SRC_IP);
        assert_eq!(ip.header().destination(), DST_IP);
        let header = ip.header().to_header();
        assert_eq!(header.header_checksum, header.calc_header_checksum());
        let Some(etherparse::TransportSlice::Udp(udp)) = packet.transport else {
            panic!("frame {seq} is not UDP");
        };
        assert_eq!(
            (udp.source_port(), udp.destination_port()),
            (SRC_PORT, DST_PORT)
        );
        assert_eq!(
            udp.checksum(),
            udp.to_header()
                .calc_checksum_ipv4(&header, udp.payload())
                .unwrap()
        );
        assert_eq!(captured.orig_len as usize, mixed_size(seq));
        assert_eq!(
            captured.data,
            frame(seq),
            "frame {seq} differs from what was sent"
        );
    }
}

#[test]
fn slots_keep_their_contents_and_come_back_in_rotation() {
    if !is_root() {
        return;
    }
    let lab = new_lab("s");
    let small = AfXdpOptions {
        frames: 64,
        ring_size: 64,
        ..copy_opts()
    };
    let (mut tx, mut rx) = pair(&lab, &small, &rx_opts());
    let slots = tx.slot_count() as u32;
    assert_eq!(slots, 64);

    // Round one writes frame `id` into slot `id`.
    let mut ids = Vec::new();
    tx.transmit(slots as usize, |batch| {
        for slot in batch.iter_mut() {
            let f = frame(slot.id);
            slot.buf[..f.len()].copy_from_slice(&f);
            slot.len = f.len();
            ids.push(slot.id);
        }
    })
    .unwrap();
    assert_eq!(ids, (0..slots).collect::<Vec<_>>());
    assert_eq!(receive(&mut rx, slots as usize).len(), slots as usize);

    // Later rounds only set the length: what leaves must still be frame `id`.
    ids.clear();
    for _ in 0..20 {
        tx.transmit(16, |batch| {
            for slot in batch.iter_mut() {
                let len = mixed_size(slot.id);
                assert_eq!(
                    &slot.buf[..len],
                    frame(slot.id),
                    "slot {} lost its frame",
                    slot.id
                );
                slot.len = len;
                ids.push(slot.id);
            }
        })
        .unwrap();
        let got = receive(&mut rx, 16);
        let want: Vec<_> = ids[ids.len() - 16..].iter().map(|&id| frame(id)).collect();
        assert_eq!(got, want, "the peer did not receive the slots' frames");
    }
    let rotation: Vec<u32> = (0..slots).cycle().take(ids.len()).collect();
    assert_eq!(ids, rotation, "slot ids do not rotate");
    tx.finish().unwrap();
}

#[test]
fn dropping_the_receiver_detaches_the_xdp_program() {
    if !is_root() {
        return;
    }
    let lab = new_lab("d");
    let (tx, rx) = open(&lab, &lab.b, &rx_opts()).split();
    let rx = rx.unwrap();
    let shown = lab.ip(&["link", "show", "dev", &lab.b]);
    assert!(
        shown.contains("prog/xdp"),
        "no XDP program on {}: {shown}",
        lab.b
    );
    assert!(shown.contains("strobe_xsk"), "{shown}");
    drop(rx);
    lab.assert_no_xdp(&lab.b);
    drop(tx);
}

#[test]
fn drivers_without_native_xdp_get_the_generic_hook() {
    if !is_root() {
        return;
    }
    let lab = new_lab("g");
    // A bridge has no native XDP: the program must attach through the generic hook, say
    // so, and still detach on drop.
    let br = format!("{}g", lab.a);
    lab.ip(&["link", "add", &br, "type", "bridge"]);
    lab.ip(&["link", "set", &br, "up"]);
    let port = open(&lab, &br, &rx_opts());
    assert!(
        port.notes()
            .iter()
            .any(|n| n.contains("generic (SKB) mode")),
        "{:?}",
        port.notes()
    );
    let rx = port.split().1.unwrap();
    assert!(!rx.native_xdp());
    assert!(rx.describe().contains("XDP generic"), "{}", rx.describe());
    let shown = lab.ip(&["link", "show", "dev", &br]);
    assert!(shown.contains("prog/xdp"), "{shown}");
    drop(rx);
    lab.assert_no_xdp(&br);
}

#[test]
fn errors_name_what_is_wrong() {
    if !is_root() {
        return;
    }
    let lab = new_lab("e");
    let err = |iface: &str, queue: u32, opts: &AfXdpOptions| match AfXdpPort::open(
        iface,
        queue,
        lab.netns(),
        opts,
    ) {
        Ok(_) => panic!("opening {iface} queue {queue} with {opts:?} succeeded"),
        Err(e) => e.to_string(),
    };

    let msg = err("sxt-nonesuch", 0, &copy_opts());
    assert!(msg.contains("no network interface `sxt-nonesuch`"), "{msg}");
    assert!(msg.contains(lab.ns()), "{msg}");

    let msg = err(&lab.a, 7, &copy_opts());
    assert!(
        msg.contains("queue 7") && msg.contains("out of range"),
        "{msg}"
    );

    let forced = AfXdpOptions {
        mode: XdpMode::ZeroCopy,
        ..AfXdpOptions::default()
    };
    let msg = err(&lab.a, 0, &forced);
    assert!(msg.contains("zero-copy") && msg.contains("veth"), "{msg}");

    let msg = match AfXdpPort::open(&lab.a, 0, Some("sxt-no-such-ns"), &copy_opts()) {
        Ok(_) => panic!("opened in a missing namespace"),
        Err(e) => e.to_string(),
    };
    assert!(msg.contains("sxt-no-such-ns"), "{msg}");

    // One socket per queue: a second one is refused while the first is open.
    let first = open(&lab, &lab.a, &copy_opts());
    let msg = err(&lab.a, 0, &copy_opts());
    assert!(
        msg.contains("already used by another AF_XDP socket"),
        "{msg}"
    );
    drop(first);

    // A TX port whose interface goes down says so instead of waiting.
    let (mut tx, _) = open(&lab, &lab.a, &copy_opts()).split();
    lab.ip(&["link", "set", &lab.a, "down"]);
    let msg = tx
        .transmit(4, |slots| {
            for slot in slots.iter_mut() {
                slot.len = 60;
            }
        })
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains(&format!("interface {} is down", lab.a)),
        "{msg}"
    );
    drop(tx);
    lab.ip(&["link", "set", &lab.a, "up"]);

    // Auto falls back to copy mode on veth and says why.
    let port = open(&lab, &lab.a, &AfXdpOptions::default());
    assert_eq!(port.mode(), XdpModeInUse::Copy);
    assert!(
        port.notes()
            .iter()
            .any(|n| n.contains("zero-copy is not available")),
        "{:?}",
        port.notes()
    );
}

#[test]
fn rejects_frames_it_cannot_send_without_losing_slots() {
    if !is_root() {
        return;
    }
    let lab = new_lab("r");
    let opts = AfXdpOptions {
        frames: 8,
        ring_size: 8,
        ..copy_opts()
    };
    let (mut tx, _) = open(&lab, &lab.a, &opts).split();
    let err = tx
        .transmit(4, |slots| {
            for slot in slots.iter_mut() {
                slot.len = 0;
            }
        })
        .unwrap_err();
    assert!(err.to_string().contains("frame of 0 bytes"), "{err}");
    // All 8 slots are still usable afterwards.
    send(&mut tx, 0..64, 8);
    assert_eq!(tx.finish().unwrap().frames, 64);
}

/// Sends 60-byte frames (64 with FCS) in batches of `batch` for `secs`; returns Mpps.
fn tx_rate(tx: &mut AfXdpTx, batch: usize, secs: u64) -> f64 {
    let mut template = frame(0);
    template.truncate(60);
    // Like testpmd's txonly default: a destination MAC that is not the peer's, so the
    // peer's stack drops the frame on arrival instead of routing it.
    template[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0]);
    let before = tx.finish().unwrap().frames;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(secs) {
        tx.transmit(batch, |slots| {
            for slot in slots.iter_mut() {
                slot.buf[..60].copy_from_slice(&template);
                slot.len = 60;
            }
        })
        .unwrap();
    }
    let frames = tx.finish().unwrap().frames - before;
    frames as f64 / start.elapsed().as_secs_f64() / 1e6
}

/// Runs dpdk-testpmd's af_xdp txonly on `a` for 6 s; returns its last Tx-pps reports.
fn testpmd_rate(lab: &VethPair) -> String {
    let vdev = format!(
        "--vdev=net_af_xdp0,iface={},start_queue=0,queue_count=1",
        lab.a
    );
    let prefix = format!("sxt-{}", std::process::id());
    let out = Command::new("timeout")
        .args([
            "-s",
            "INT",
            "6",
            "ip",
            "netns",
            "exec",
            lab.ns(),
            "dpdk-testpmd",
        ])
        .args([
            "--no-huge",
            "--no-pci",
            "-m",
            "512",
            "-l",
            "0,1",
            "--file-prefix",
            &prefix,
        ])
        .arg(&vdev)
        .args([
            "--",
            "--forward-mode=txonly",
            "--stats-period",
            "1",
            "--txpkts=60",
        ])
        .arg("--total-num-mbufs=16384")
        .stdin(Stdio::null())
        .output()
        .expect("cannot run dpdk-testpmd");
    let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{prefix}"));
    let text = String::from_utf8_lossy(&out.stdout);
    let rates: Vec<_> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Tx-pps:"))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    format!("Tx-pps per second {rates:?}")
}

/// Not a test: TX rate of 64-byte frames for 3 s, first into the peer's kernel stack, then
/// with a busy AF_XDP receiver on the peer (sender on CPU 1, receiver on CPU 0, like
/// testpmd's forwarding lcore and the same receiver).
/// `cargo test --release -p strobe-io --test afxdp -- --ignored --nocapture`
#[test]
#[ignore]
fn measure_tx_rate_64_byte_frames() {
    if !is_root() {
        return;
    }
    let lab = new_lab("m");
    pin_to_cpu(1);
    let (mut tx, _) = open(&lab, &lab.a, &copy_opts()).split();
    println!("{}", tx.describe());
    for batch in [32usize, 64] {
        let mpps = tx_rate(&mut tx, batch, 3);
        println!("peer stack drops, batch {batch}: {mpps:.3} Mpps");
    }

    let rx = open(&lab, &lab.b, &rx_opts()).split().1.unwrap();
    let stop = Arc::new(AtomicU64::new(0));
    let stop_rx = Arc::clone(&stop);
    let receiver = std::thread::spawn(move || {
        let mut rx = rx;
        pin_to_cpu(0);
        let mut n = 0u64;
        while stop_rx.load(Ordering::Relaxed) == 0 {
            n += rx.poll(256, |_| {}).unwrap() as u64;
        }
        (n, rx.drops().unwrap())
    });
    for batch in [32usize, 64, 32] {
        let mpps = tx_rate(&mut tx, batch, 3);
        println!("busy AF_XDP receiver, batch {batch}: {mpps:.3} Mpps");
    }
    // The peer tool under the same conditions, when it is installed: testpmd's af_xdp txonly
    // on the same queue (so strobe's TX port closes first), 64-byte frames.
    drop(tx);
    if Command::new("dpdk-testpmd")
        .arg("--version")
        .output()
        .is_ok()
    {
        println!(
            "dpdk-testpmd net_af_xdp txonly, busy AF_XDP receiver: {}",
            testpmd_rate(&lab)
        );
    }
    stop.store(1, Ordering::Relaxed);
    let (n, drops) = receiver.join().unwrap();
    println!("receiver: {n} frames, drops {drops:?}");
}

#[test]
fn a_receiver_says_when_its_interface_goes_away_but_not_when_its_link_goes_down() {
    if !is_root() {
        return;
    }
    let lab = new_lab("rxfail");
    let (tx, rx) = open(&lab, &lab.b, &rx_opts()).split();
    let mut rx = rx.unwrap();
    rx.check_alive().unwrap();
    lab.ip(&["link", "set", &lab.b, "down"]);
    rx.check_alive().unwrap();
    lab.ip(&["link", "set", &lab.b, "up"]);
    rx.check_alive().unwrap();
    lab.ip(&["link", "del", &lab.b]);
    let gone = rx.check_alive().unwrap_err().to_string();
    assert!(
        gone.contains(&lab.b) && gone.contains("went away"),
        "{gone}"
    );
    drop((tx, rx));
}

/// AF_XDP TX metadata in copy mode: the kernel writes each frame's completion time into its
/// metadata, and the port publishes every frame's hand-over delay by flow and sequence
/// number. On a veth, copy mode's "completion" is when the receiving stack frees the frame
/// (here: the peer has no address, so IP drops it), just after the peer's kernel stamped its
/// arrival and before the next frame arrives. Those receive stamps, taken independently by
/// the peer's kernel, check the join: each frame's stamp must come after its own arrival,
/// and before the next frame's for most frames (a frame whose stack work was deferred can
/// see the next one arrive first). A delay read for the next frame would never come before
/// that frame's arrival; one read for the previous frame would come before its own.
#[test]
fn tx_metadata_stamps_every_frame_between_its_arrival_and_the_next() {
    use strobe_io::afpacket::{AfPacketOptions, AfPacketRx};
    use strobe_io::tx_stamps::TxStampBoard;
    use strobe_wire::trailer::{Trailer, LEN};
    if !is_root() {
        return;
    }
    if strobe_io::kernel_release().is_some_and(|r| r < (6, 8)) {
        eprintln!("skipped: AF_XDP TX metadata needs Linux 6.8 or later");
        return;
    }
    const FLOWS: u16 = 3;
    const TAG: u8 = 7;
    const N: u32 = 3000;
    let lab = new_lab("txmd");
    let rx = AfPacketRx::open(&lab.b, lab.netns(), &AfPacketOptions::default()).unwrap();
    let opts = AfXdpOptions {
        tx_metadata: true,
        ..copy_opts()
    };
    let (mut tx, _) = open(&lab, &lab.a, &opts).split();
    let board = Arc::new(TxStampBoard::new(FLOWS as usize));
    let source = tx
        .stamp_transmits(Arc::clone(&board), TAG, true)
        .unwrap()
        .source;
    assert!(source.contains("completion"), "{source}");
    let receiving = std::thread::spawn(move || {
        let mut rx = rx;
        let mut got = Vec::new();
        let started = Instant::now();
        while got.len() < N as usize && started.elapsed() < Duration::from_secs(20) {
            rx.poll(64, |f| {
                if let (Some(_), Some(RxTimestamp::Kernel(at))) = (seq_of(f.data), f.timestamp) {
                    got.push((Trailer::from_frame(f.data).unwrap(), at as i64));
                }
            })
            .unwrap();
        }
        got
    });

    // Each frame's trailer: its flow, its sequence number in the flow, and the time it was
    // written, as the engine writes them just before the hand-over.
    let mut seq = [0u32; FLOWS as usize];
    let mut sent = 0u32;
    while sent < N {
        let want = 32.min(N - sent) as usize;
        let n = tx
            .transmit(want, |slots| {
                for (i, slot) in slots.iter_mut().enumerate() {
                    let f = frame(sent + i as u32);
                    slot.buf[..f.len()].copy_from_slice(&f);
                    let flow = ((sent + i as u32) % FLOWS as u32) as u16;
                    let at = f.len() - LEN;
                    Trailer::sent(TAG, flow, seq[flow as usize], now_ns())
                        .write((&mut slot.buf[at..f.len()]).try_into().unwrap());
                    seq[flow as usize] += 1;
                    slot.len = f.len();
                }
            })
            .unwrap();
        sent += n as u32;
    }
    let stats = tx.finish().unwrap();
    let stamps = stats.tx_stamps.expect("stamp statistics");
    assert_eq!((stamps.stamped, stamps.unstamped), (N as u64, 0));
    assert!(stamps.delay_min_ns >= 0, "{stamps:?}");

    let got = receiving.join().unwrap();
    assert_eq!(got.len(), N as usize, "frames received");
    let stamped: Vec<(i64, i64)> = got
        .iter()
        .map(|(t, arrived)| {
            let delay = board.delay_ns(t.flow_id, t.seq).unwrap_or_else(|| {
                panic!("no transmit stamp for flow {} seq {}", t.flow_id, t.seq)
            });
            assert!(
                (0..1_000_000_000).contains(&delay),
                "{t:?}: delay {delay} ns"
            );
            (t.tx_ns as i64 + delay, *arrived)
        })
        .collect();
    for (i, (completed, arrived)) in stamped.iter().enumerate() {
        assert!(
            completed >= arrived,
            "frame {i}: completed {} ns before it arrived",
            arrived - completed
        );
    }
    let before_next = stamped.windows(2).filter(|w| w[0].0 <= w[1].1).count();
    assert!(
        before_next * 2 > stamped.len(),
        "only {before_next} of {} frames completed before the next one arrived",
        stamped.len()
    );
}

/// A port opened without metadata cannot stamp, and copy mode's completion stamps are
/// refused unless asked for.
#[test]
fn tx_metadata_needs_the_port_opened_for_it() {
    use strobe_io::tx_stamps::TxStampBoard;
    if !is_root() {
        return;
    }
    let lab = new_lab("txmdno");
    let (mut tx, _) = open(&lab, &lab.a, &copy_opts()).split();
    let err = tx
        .stamp_transmits(Arc::new(TxStampBoard::new(1)), 1, true)
        .unwrap_err()
        .to_string();
    assert!(err.contains("without TX metadata"), "{err}");
    drop(tx);
    // Copy mode's completion time is refused as a departure time unless asked for.
    if strobe_io::kernel_release().is_some_and(|r| r >= (6, 8)) {
        let opts = AfXdpOptions {
            tx_metadata: true,
            ..copy_opts()
        };
        let (mut tx, _) = open(&lab, &lab.a, &opts).split();
        let err = tx
            .stamp_transmits(Arc::new(TxStampBoard::new(1)), 1, false)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("copy mode") && err.contains("xsk-tx-ts"),
            "{err}"
        );
    }
}
