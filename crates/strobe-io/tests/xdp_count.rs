//! The counting program (`xdp_count`) on a veth pair in a network namespace the test creates
//! and removes: receive stamps asked of the driver's XDP RX metadata. Needs root (skipped
//! with a message otherwise); traffic stays inside the namespace and uses 198.18.0.0/15.

use std::time::{Duration, Instant};

use strobe_io::afpacket::{AfPacketOptions, AfPacketTx};
use strobe_io::test_support::{now_ns, send_all, udp_frame, VethPair};
use strobe_io::xdp_count::{CountMode, CountSetup, ProgramClock, XdpCounter};
use strobe_io::xdplive::XdpLiveTx;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("skipped: counting in XDP needs root (namespaces, veth, BPF)");
    }
    root
}

/// A frame of `len` bytes whose last 16 carry this run's trailer.
fn instrumented(tag: u8, flow: u16, seq: u32, tx_ns: u64, len: usize) -> Vec<u8> {
    let mut f = udp_frame(seq, len);
    let t = &mut f[len - 16..];
    t[0] = b'S';
    t[1] = tag;
    t[2..4].copy_from_slice(&flow.to_be_bytes());
    t[4..8].copy_from_slice(&seq.to_be_bytes());
    t[8..].copy_from_slice(&tx_ns.to_be_bytes());
    f
}

/// veth implements the RX metadata timestamp kfunc but has no hardware clock: for a socket
/// buffer it answers a stamp of 0, for a redirected frame "no data". The program, bound to
/// the device, calls it for every frame, finds no stamp, and stamps each frame with the
/// kernel's clock instead: every frame counted with a plausible latency, none counted as
/// stamped by the device.
#[test]
fn a_device_without_receive_stamps_falls_back_to_the_kernel_clock() {
    if !is_root() {
        return;
    }
    let lab = VethPair::new("xcmeta");
    let tag = 0x5a;
    let mut counter = XdpCounter::new(CountSetup {
        run_tag: tag,
        flows: 2,
        pass_counted: false,
        clock: ProgramClock::Device,
    })
    .unwrap();
    let start = now_ns();
    counter.check_stamps_from(start);
    let refused = counter.run_frame(&instrumented(tag, 0, 0, start, 64));
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.to_string().contains("runs only on that device")),
        "{refused:?}"
    );
    let (mode, note) = counter.attach(&lab.b, lab.netns()).unwrap();
    assert_eq!(mode, CountMode::Native, "{note:?}");

    // Socket buffers (AF_PACKET: the driver answers a stamp of 0), then frames generated
    // in the kernel and redirected into the veth (xdp-live: it answers "no data").
    let mut afpacket = AfPacketTx::open(&lab.a, lab.netns(), &AfPacketOptions::default()).unwrap();
    let mut xdplive = XdpLiveTx::open(&lab.a, lab.netns()).unwrap();
    for round in 0..2u32 {
        let frames: Vec<Vec<u8>> = (round * 2000..(round + 1) * 2000)
            .map(|s| {
                let len = 64 + (s as usize % 7) * 100;
                instrumented(tag, (s % 2) as u16, s / 2, now_ns(), len)
            })
            .collect();
        // At most 100 frames at once: the veth peer's ring has 256 entries.
        let sent = match round {
            0 => send_all(&mut afpacket, &frames, 32),
            _ => send_all(&mut xdplive, &frames, 100),
        };
        assert_eq!(sent.frames, 2000, "round {round}");
        let expected = u64::from(round + 1) * 1000;
        let deadline = Instant::now() + Duration::from_secs(10);
        let snapshot = loop {
            let s = counter.snapshot();
            if s.flows.iter().all(|f| f.frames >= expected) || Instant::now() > deadline {
                break s;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let end = now_ns();
        for (id, flow) in snapshot.flows.iter().enumerate() {
            assert_eq!(
                (flow.frames, flow.unique, flow.duplicates, flow.reordered),
                (expected, expected, 0, 0),
                "round {round}, flow {id}: {flow:?}"
            );
            assert_eq!(
                flow.device_stamped, 0,
                "flow {id}: veth has no hardware stamp"
            );
            let l = &flow.latency;
            assert_eq!(
                (l.recorded, l.negative, l.clamped),
                (expected, 0, 0),
                "{l:?}"
            );
            // Stamped by the kernel's clock on CLOCK_REALTIME: inside the test's own span.
            assert!(
                l.max_ns.unwrap() < end - start && l.min_ns.unwrap() >= 1,
                "latency {:?}..{:?} outside the test's {} ns",
                l.min_ns,
                l.max_ns,
                end - start
            );
            let (first, last) = (flow.first_rx_ns.unwrap(), flow.last_rx_ns.unwrap());
            assert!(start <= first && first <= last && last <= end, "{flow:?}");
        }
        assert_eq!(snapshot.other.not_instrumented, 0, "{:?}", snapshot.other);
    }
    drop(counter);
    lab.assert_no_xdp(&lab.b);
}

/// Deleting the interface detaches the program with it; the counter says so, naming it.
#[test]
fn an_interface_that_goes_away_is_noticed() {
    if !is_root() {
        return;
    }
    let lab = VethPair::new("xcgone");
    let mut counter = XdpCounter::new(CountSetup {
        run_tag: 1,
        flows: 1,
        pass_counted: false,
        clock: ProgramClock::Kernel,
    })
    .unwrap();
    assert!(
        counter.check_attached().is_ok(),
        "not attached: nothing to miss"
    );
    counter.attach(&lab.b, lab.netns()).unwrap();
    counter.check_attached().unwrap();
    lab.ip(&["link", "del", &lab.b]);
    let err = counter.check_attached().unwrap_err().to_string();
    assert!(
        err.contains(&format!("interface `{}` went away", lab.b)),
        "{err}"
    );
}
