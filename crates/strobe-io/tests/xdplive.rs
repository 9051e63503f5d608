//! The `xdp-live` backend on veth pairs in network namespaces each test creates and removes.
//! Needs root (skipped with a message otherwise); traffic stays inside the namespace and uses
//! 198.18.0.0/15 only.

use std::time::{Duration, Instant};

use strobe_io::afxdp::{AfXdpOptions, AfXdpPort, AfXdpRx};
use strobe_io::kernel_frames::{
    KernelField, KernelFlow, KernelPace, KernelStamp, KernelTemplate, KernelValues,
};
use strobe_io::test_support::{
    is_ours, mixed_size, now_ns, send_all, tcpdump_around, udp_frame, VethPair,
};
use strobe_io::xdplive::{XdpDropSink, XdpLiveTx};
use strobe_io::{Backend, Receiver};

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("skipped: xdp-live tests need root (namespaces, veth, BPF)");
    }
    root
}

/// strobe's AF_XDP receiver on `iface`: its XDP program also gives the veth peer the NAPI
/// instance that XDP transmit into a veth needs.
fn xdp_receiver(lab: &VethPair, iface: &str) -> AfXdpRx {
    let opts = AfXdpOptions {
        rx: true,
        ..AfXdpOptions::default()
    };
    AfXdpPort::open(iface, 0, lab.netns(), &opts)
        .unwrap_or_else(|e| panic!("cannot open AF_XDP on {iface}: {e}"))
        .split()
        .1
        .unwrap()
}

/// Takes frames until `n` of ours arrived or 10 s passed.
fn receive(rx: &mut AfXdpRx, n: usize) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut got = Vec::new();
    while got.len() < n && Instant::now() < deadline {
        rx.poll(64, |f| {
            if is_ours(f.data) {
                got.push(f.data.to_vec());
            }
        })
        .unwrap();
    }
    got
}

#[test]
fn mixed_frames_arrive_intact_and_in_order() {
    if !is_root() {
        return;
    }
    let lab = VethPair::new("m");
    let mut rx = xdp_receiver(&lab, &lab.b);
    let mut tx = XdpLiveTx::open(&lab.a, lab.netns()).unwrap();
    assert!(tx.describe().starts_with("xdp-live:"), "{}", tx.describe());
    assert_eq!(tx.max_frame_len(), 1500 + 14 + 4);
    // Batches of several sizes, frames of every size up to the MTU, each batch taken before
    // the next leaves. At most 200 frames at once: the veth peer's ring has 256 entries,
    // of which a few may still be held by its consumer.
    let frames: Vec<Vec<u8>> = (0..3000).map(|s| udp_frame(s, mixed_size(s))).collect();
    let mut sent = 0;
    let mut got = Vec::new();
    for batch in [1usize, 7, 64, 200].into_iter().cycle() {
        if sent == frames.len() {
            break;
        }
        let end = (sent + batch).min(frames.len());
        let chunk = &frames[sent..end];
        let mut next = 0;
        while next < chunk.len() {
            let n = tx
                .transmit(chunk.len() - next, |slots| {
                    for (slot, f) in slots.iter_mut().zip(&chunk[next..]) {
                        slot.buf[..f.len()].copy_from_slice(f);
                        slot.len = f.len();
                    }
                })
                .unwrap();
            next += n;
        }
        got.extend(receive(&mut rx, chunk.len()));
        sent = end;
    }
    let stats = tx.finish().unwrap();
    assert_eq!(stats.frames, frames.len() as u64);
    assert_eq!(stats.xmit_errors, Some(0), "veth counts its refusals");
    assert_eq!(
        stats.bytes,
        frames.iter().map(|f| f.len() as u64).sum::<u64>()
    );
    assert_eq!(got.len(), frames.len(), "frames lost");
    for (i, (g, f)) in got.iter().zip(&frames).enumerate() {
        assert!(g == f, "frame {i} differs from what was sent");
    }
}

#[test]
fn a_full_speed_run_is_counted_exactly_by_the_peer() {
    if !is_root() {
        return;
    }
    let lab = VethPair::new("f");
    let rx = xdp_receiver(&lab, &lab.b);
    let mut tx = XdpLiveTx::open(&lab.a, lab.netns()).unwrap();
    // A receiver on its own thread counts while the sender goes as fast as it can.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let counter = {
        let stop = stop.clone();
        let mut rx = rx;
        std::thread::spawn(move || {
            let mut n = 0u64;
            let mut idle_since = None;
            loop {
                let got = rx.poll(256, |f| n += is_ours(f.data) as u64).unwrap();
                if got > 0 {
                    idle_since = None;
                } else if stop.load(std::sync::atomic::Ordering::Acquire) {
                    let since = *idle_since.get_or_insert_with(Instant::now);
                    if since.elapsed() > Duration::from_millis(500) {
                        break;
                    }
                }
            }
            (n, rx.drops().unwrap())
        })
    };
    let frames: Vec<Vec<u8>> = (0..256).map(|s| udp_frame(s, 60)).collect();
    let mut total = 0u64;
    for _ in 0..400 {
        let mut sent = 0;
        while sent < frames.len() {
            sent += send_all_keep(&mut tx, &frames[sent..]);
        }
        total += sent as u64;
    }
    let stats = tx.finish().unwrap();
    stop.store(true, std::sync::atomic::Ordering::Release);
    let (received, drops) = counter.join().unwrap();
    assert_eq!(stats.frames, total);
    // Every frame is accounted for: it arrived, the receiver's ring had no room for it, or
    // the veth's ring refused it at transmit (XDP transmit drops instead of waiting, as
    // the driver counts).
    let refused = stats.xmit_errors.expect("veth counts XDP transmit errors");
    assert_eq!(
        received + drops.ring_full + refused,
        total,
        "received {received}, receiver ring drops {}, refused at transmit {refused}",
        drops.ring_full
    );
    assert!(received > 0);
    eprintln!(
        "xdp-live: {total} sent, {received} received, {} receiver ring drops, {refused} refused at transmit",
        drops.ring_full
    );
}

/// Sends one full batch of `frames` (no finish).
fn send_all_keep(tx: &mut XdpLiveTx, frames: &[Vec<u8>]) -> usize {
    tx.transmit(frames.len(), |slots| {
        for (slot, f) in slots.iter_mut().zip(frames) {
            slot.buf[..f.len()].copy_from_slice(f);
            slot.len = f.len();
        }
    })
    .unwrap()
}

#[test]
fn errors_name_what_is_wrong() {
    if !is_root() {
        return;
    }
    let lab = VethPair::new("e");
    let err = XdpLiveTx::open("sxt-nonesuch", lab.netns())
        .err()
        .expect("a missing interface is refused")
        .to_string();
    assert!(err.contains("no network interface `sxt-nonesuch`"), "{err}");
    let err = XdpLiveTx::open(&lab.a, Some("sxt-no-such-ns"))
        .err()
        .expect("a missing namespace is refused")
        .to_string();
    assert!(err.contains("sxt-no-such-ns"), "{err}");
    let _rx = xdp_receiver(&lab, &lab.b);
    let mut tx = XdpLiveTx::open(&lab.a, lab.netns()).unwrap();
    let msg = tx.frame_too_long(9000);
    assert!(msg.contains("up to 1518 bytes"), "{msg}");
    // A whole send through the shared helper finishes cleanly.
    let frames: Vec<Vec<u8>> = (0..10).map(|s| udp_frame(s, 100)).collect();
    assert_eq!(send_all(&mut tx, &frames, 4).frames, 10);
}

#[test]
fn a_peer_that_would_drop_is_refused_and_one_with_gro_gets_frames_tshark_decodes() {
    if !is_root() {
        return;
    }
    let lab = VethPair::new("g");
    // Nothing on the peer: the kernel would drop every frame before the driver, uncounted.
    let err = XdpLiveTx::open(&lab.a, lab.netns())
        .err()
        .expect("a veth whose peer cannot take XDP frames is refused")
        .to_string();
    assert!(
        err.contains("does not take redirected XDP frames") && err.contains("gro on"),
        "{err}"
    );
    // GRO on the peer gives it the NAPI instance that takes them, into its stack, where a
    // capture sees them.
    lab.exec(&["ethtool", "-K", &lab.b, "gro", "on"]);
    let mut tx = XdpLiveTx::open(&lab.a, lab.netns()).unwrap();
    let frames: Vec<Vec<u8>> = (0..40).map(|s| udp_frame(s, mixed_size(s))).collect();
    let (captured, pcap) = tcpdump_around(&lab, &lab.b, frames.len(), || {
        assert_eq!(send_all(&mut tx, &frames, 16).xmit_errors, Some(0));
    });
    assert!(captured == frames, "the capture differs from what was sent");
    let fields = std::process::Command::new("tshark")
        .args(["-r"])
        .arg(&pcap)
        .args(["-T", "fields", "-E", "separator=,"])
        .args(["-e", "frame.len", "-e", "ip.src", "-e", "ip.dst"])
        .args([
            "-e",
            "udp.srcport",
            "-e",
            "udp.dstport",
            "-e",
            "ip.checksum.status",
        ])
        .args(["-o", "ip.check_checksum:TRUE"])
        .output()
        .expect("tshark is needed for this test (apt-get install -y tshark)");
    let _ = std::fs::remove_file(&pcap);
    let text = String::from_utf8_lossy(&fields.stdout);
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(rows.len(), frames.len(), "tshark: {text}");
    for (seq, row) in rows.iter().enumerate() {
        let want = format!(
            "{},198.18.0.1,198.19.0.1,{},2000,1",
            mixed_size(seq as u32),
            1000 + seq
        );
        // ip.checksum.status 1 = good.
        assert_eq!(*row, want, "frame {seq} as tshark decodes it");
    }
}

#[test]
fn into_a_peer_that_drops_in_xdp_every_frame_is_counted() {
    if !is_root() {
        return;
    }
    let lab = VethPair::new("d");
    let sink = XdpDropSink::attach(&lab.b, lab.netns()).unwrap();
    let mut tx = XdpLiveTx::open(&lab.a, lab.netns()).unwrap();
    let frames: Vec<Vec<u8>> = (0..256).map(|s| udp_frame(s, 60)).collect();
    let started = Instant::now();
    let mut total = 0u64;
    while started.elapsed() < Duration::from_millis(500) {
        total += send_all_keep(&mut tx, &frames) as u64;
    }
    let stats = tx.finish().unwrap();
    let elapsed = started.elapsed().as_secs_f64();
    assert_eq!(stats.frames, total);
    let refused = stats.xmit_errors.expect("veth counts XDP transmit errors");
    assert_eq!(
        accounted(&sink, total, refused),
        total,
        "dropped by the sink {} + refused at transmit {refused}",
        sink.dropped().unwrap()
    );
    eprintln!(
        "xdp-live into an XDP drop: {total} frames, {:.2} Mpps, {refused} refused",
        total as f64 / elapsed / 1e6
    );
    drop(sink);
    lab.assert_no_xdp(&lab.b);
}

/// Frames the sink dropped plus `refused` at transmit, once that reaches `want` (the sink's
/// counter moves once the peer's NAPI ran) or 5 s passed.
fn accounted(sink: &XdpDropSink, want: u64, refused: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(5);
    while sink.dropped().unwrap() + refused < want && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    sink.dropped().unwrap() + refused
}

/// A frame whose UDP source port counts, with a sequence number and a stamp in its payload
/// (UDP checksum 0, "none", so the rewritten port keeps the frame valid).
fn counting_flow(frames: Option<u64>) -> KernelFlow {
    let mut frame = udp_frame(0, 60);
    frame[40..42].copy_from_slice(&[0, 0]);
    KernelFlow {
        templates: vec![KernelTemplate {
            frame,
            trailer: None,
            seq_at: Some(44),
            stamp_at: Some(48),
            checksums: Vec::new(),
        }],
        cycle: vec![0],
        fields: vec![KernelField::counter(34, 2, 1000, 1, 1000)],
        seq_start: u32::MAX - 5,
        stamp: KernelStamp::PerFrame,
        frames,
        pace: None,
    }
}

/// Frames generated in the kernel, into a peer that drops them in XDP: the generator stops
/// at its count, every frame is dropped by the sink or counted as refused at transmit, a
/// continuous flow stops when told and holds while held, and the programs detach.
#[test]
fn kernel_generation_counts_every_frame_and_stops() {
    if !is_root() {
        return;
    }
    let lab = VethPair::new("g");
    let sink = XdpDropSink::attach(&lab.b, lab.netns()).unwrap();
    let settle = |want: u64, refused: u64| accounted(&sink, want, refused);

    const N: u64 = 3_000_000;
    let mut total = 0;
    let fixed = KernelStamp::Fixed(now_ns());
    for (stamp, random) in [
        (KernelStamp::PerFrame, false),
        (fixed, false),
        (fixed, true),
    ] {
        let mut flow = counting_flow(Some(N));
        flow.stamp = stamp;
        if random {
            // A random source port and listed destination ports (OTG random and values).
            flow.fields[0].values = KernelValues::Random {
                seed: 7,
                lo: 1024,
                hi: 65535,
                count: 0,
            };
            flow.fields.push(KernelField {
                at: 36,
                bytes: 2,
                values: KernelValues::Listed(vec![7, 9, 53, 4789]),
            });
        }
        let mut tx = XdpLiveTx::open(&lab.a, lab.netns()).unwrap();
        tx.set_paced(false).unwrap();
        let (run, took) = {
            let g = tx
                .kernel_generator()
                .expect("xdp-live generates in the kernel");
            assert_eq!(g.refuses(std::slice::from_ref(&flow)), None);
            g.start(std::slice::from_ref(&flow)).unwrap();
            let started = Instant::now();
            let deadline = started + Duration::from_secs(30);
            while !g.done() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            assert!(g.done(), "{} of {N} frames in 30 s", g.generated(0));
            (g.stop().unwrap().remove(0), started.elapsed())
        };
        let stats = tx.finish().unwrap();
        assert_eq!((run.frames, stats.frames), (N, N));
        total += N;
        let refused = stats.xmit_errors.expect("veth counts XDP transmit errors");
        assert_eq!(
            settle(total, refused),
            total,
            "dropped by the sink + refused ({refused})"
        );
        let secs = match (run.first_ns, run.last_ns) {
            (Some(first), Some(last)) => {
                assert!(last > first, "stamps of the first and last frame");
                (last - first) as f64 / 1e9
            }
            // A fixed stamp: timed from the first frame (start returns once frames flow)
            // to the count reached, within the 1 ms poll.
            _ => {
                assert!(
                    matches!(stamp, KernelStamp::Fixed(_)),
                    "per-frame stamps reported"
                );
                took.as_secs_f64()
            }
        };
        eprintln!(
            "kernel generation into an XDP drop, stamps {stamp:?}, {} port: {N} frames, {:.2} Mpps, {refused} refused",
            if random { "random" } else { "counting" },
            N as f64 / secs / 1e6
        );
    }

    // Continuous: held, nothing leaves; released, frames flow until stopped.
    let before = sink.dropped().unwrap();
    let mut tx = XdpLiveTx::open(&lab.a, lab.netns()).unwrap();
    tx.set_paced(false).unwrap();
    let run = {
        let g = tx.kernel_generator().unwrap();
        g.hold(true);
        g.start(&[counting_flow(None)]).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(g.generated(0), 0, "held generation sends nothing");
        g.hold(false);
        std::thread::sleep(Duration::from_millis(200));
        assert!(!g.done());
        g.stop().unwrap().remove(0)
    };
    let stats = tx.finish().unwrap();
    assert!(run.frames > 1000, "{} frames in 200 ms", run.frames);
    let refused = stats.xmit_errors.unwrap();
    assert_eq!(settle(before + run.frames, refused) - before, run.frames);
    drop(tx);
    drop(sink);
    lab.assert_no_xdp(&lab.b);
}

/// Several paced flows in one kernel program, into a peer that drops them in XDP: each flow
/// sends its own count at its own rate, a hold holds both, a flow ended alone stops while
/// the other goes on, and every frame is accounted for.
#[test]
fn kernel_generation_paces_several_flows() {
    if !is_root() {
        return;
    }
    let lab = VethPair::new("m");
    let sink = XdpDropSink::attach(&lab.b, lab.netns()).unwrap();
    let paced = |frames: Option<u64>, gap_ns: u64, len: usize| {
        let mut flow = counting_flow(frames);
        let mut frame = udp_frame(0, len);
        frame[40..42].copy_from_slice(&[0, 0]);
        flow.templates[0].frame = frame;
        flow.stamp = KernelStamp::Fixed(now_ns());
        flow.pace = Some(KernelPace {
            gap_ns,
            gap_frac: 0,
            burst: 1,
            burst_gap_ns: 0,
            late_tolerance_ns: 100_000,
        });
        flow
    };
    // 100 and 25 kpps for 0.2 s each.
    let flows = [
        paced(Some(20_000), 10_000, 60),
        paced(Some(5_000), 40_000, 300),
    ];
    let mut tx = XdpLiveTx::open(&lab.a, lab.netns()).unwrap();
    let (runs, took) = {
        let g = tx.kernel_generator().unwrap();
        assert_eq!(g.refuses(&flows), None);
        g.start(&flows).unwrap();
        let started = Instant::now();
        let deadline = started + Duration::from_secs(20);
        while !g.done() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(g.done(), "{} and {} frames", g.generated(0), g.generated(1));
        (g.stop().unwrap(), started.elapsed())
    };
    let stats = tx.finish().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(
        (runs[0].frames, runs[1].frames, stats.frames),
        (20_000, 5_000, 25_000)
    );
    assert_eq!(stats.bytes, 20_000 * 60 + 5_000 * 300);
    // Both at their rates: the same span from first to last frame (generous bounds).
    for r in &runs {
        let span = (r.last_ns.unwrap() - r.first_ns.unwrap()) as f64 / 1e9;
        assert!(span > 0.15 && span < 1.0, "span {span} s: {r:?}");
    }
    assert!(took > Duration::from_millis(150), "{took:?}");
    let refused = stats.xmit_errors.unwrap();
    assert_eq!(accounted(&sink, 25_000, refused), 25_000);

    // Continuous: one flow ended, the other goes on.
    let mut tx = XdpLiveTx::open(&lab.a, lab.netns()).unwrap();
    let flows = [paced(None, 20_000, 60), paced(None, 20_000, 60)];
    let runs = {
        let g = tx.kernel_generator().unwrap();
        g.start(&flows).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        // Held: neither flow sends (the first block's switch holds both).
        g.hold(true);
        std::thread::sleep(Duration::from_millis(10));
        let held = (g.generated(0), g.generated(1));
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(
            (g.generated(0), g.generated(1)),
            held,
            "held flows send nothing"
        );
        g.hold(false);
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            g.generated(0) > held.0 && g.generated(1) > held.1,
            "both resumed"
        );
        g.end_flow(1);
        std::thread::sleep(Duration::from_millis(10));
        let ended_at = g.generated(1);
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(g.generated(1), ended_at, "an ended flow sends no more");
        assert!(!g.done(), "the other flow goes on");
        g.end_flow(0);
        std::thread::sleep(Duration::from_millis(10));
        assert!(g.done());
        g.stop().unwrap()
    };
    tx.finish().unwrap();
    assert!(runs[1].frames > 1_000, "{runs:?}");
    assert!(runs[0].frames > runs[1].frames + 2_000, "{runs:?}");
    drop(tx);
    drop(sink);
    lab.assert_no_xdp(&lab.b);
}

/// A flow the program cannot write is refused with the reason, before anything runs.
#[test]
fn kernel_generation_refuses_fields_it_cannot_write() {
    if !is_root() {
        return;
    }
    let lab = VethPair::new("r");
    let _sink = XdpDropSink::attach(&lab.b, lab.netns()).unwrap();
    let mut tx = XdpLiveTx::open(&lab.a, lab.netns()).unwrap();
    let g = tx.kernel_generator().unwrap();
    let mut flow = counting_flow(Some(10));
    flow.fields[0].bytes = 3;
    let why = g
        .refuses(std::slice::from_ref(&flow))
        .expect("a 3-byte field is refused");
    assert!(why.contains("1, 2, 4, 6 or 8 bytes"), "{why}");
    let err = g
        .start(std::slice::from_ref(&flow))
        .expect_err("and not started")
        .to_string();
    assert!(
        err.contains("cannot generate this flow in the kernel"),
        "{err}"
    );
    let mut flow = counting_flow(Some(10));
    flow.templates[0].frame.truncate(40);
    assert!(
        g.refuses(std::slice::from_ref(&flow)).is_some(),
        "fields outside the frame"
    );
}
