//! The in-kernel counting program against the user-space receiver (`RxTracker`) on the same
//! frames: random traffic of several flows with gaps, reordering, duplicates, frames older
//! than the window, a sequence wrapping at 2^32, latencies from 0 to beyond the histogram's
//! range and negative ones, frames that are not this run's, and frames after the end. The
//! program runs in `BPF_PROG_RUN`'s test mode with the receive stamps injected, so both see
//! the same stamps and must agree exactly: every counter, and the histogram bucket for
//! bucket. Needs root (skipped otherwise).

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use strobe_engine::latency::FlowLatency;
use strobe_engine::rx::RxTracker;
use strobe_io::xdp_count::{CountSetup, ProgramClock, XdpCounter, STAMP_MARGIN_NS};
use strobe_wire::trailer::{Trailer, LEN};

const TAG: u8 = 0x5a;
const FLOWS: usize = 3;

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("skipped: loading BPF programs needs root");
    }
    root
}

/// A frame of `len` bytes ending in `trailer`.
fn frame(len: usize, trailer: Trailer, rng: &mut impl Rng) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
    let at = len - LEN;
    trailer.write((&mut f[at..]).try_into().unwrap());
    f
}

/// The sequence numbers a flow's frames carry, in arrival order: mostly in order, with gaps,
/// jumps beyond the window, swaps, duplicates, and numbers older than the window.
fn arrivals(first: u32, n: usize, rng: &mut impl Rng) -> Vec<u32> {
    let mut out = Vec::with_capacity(n);
    let mut next = first;
    while out.len() < n {
        match rng.gen_range(0..100) {
            0..=74 => {
                out.push(next);
                next = next.wrapping_add(1);
            }
            75..=79 => next = next.wrapping_add(rng.gen_range(1..100)),
            80..=81 => next = next.wrapping_add(rng.gen_range(4_000..9_000)),
            82..=89 => {
                // Swapped with the one after.
                out.push(next.wrapping_add(1));
                out.push(next);
                next = next.wrapping_add(2);
            }
            90..=95 => out.push(next.wrapping_sub(rng.gen_range(1..300))),
            // About the window's edge, and far beyond it.
            96..=97 => out.push(next.wrapping_sub(rng.gen_range(4_000..4_200))),
            _ => out.push(next.wrapping_sub(rng.gen_range(4_200..20_000))),
        }
    }
    out
}

/// A latency: mostly micro- to milliseconds, some exactly 0, some negative (the receive
/// stamp before the transmit stamp), some beyond the histogram's 100 s.
fn latency_ns(rng: &mut impl Rng) -> i64 {
    match rng.gen_range(0..100) {
        0..=59 => rng.gen_range(500..50_000),
        60..=84 => rng.gen_range(50_000..20_000_000),
        85..=89 => rng.gen_range(0..3_000),
        90..=92 => 0,
        93..=96 => -rng.gen_range(1..50_000),
        _ => rng.gen_range(100_000_000_000..300_000_000_000),
    }
}

#[test]
fn any_bytes_are_classified_and_counted_as_the_user_space_receiver_does() {
    let Some((counter, mut tracker)) = pair() else {
        return;
    };
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(0xf022);
    // Random bytes of every length from the smallest frame a test run takes (14) up, their
    // trailer's marker, tag and flow id biased towards this run's so that every path is
    // taken; stamps anywhere in 64 bits (no run window here: traces may carry any stamp).
    for i in 0..20_000u32 {
        let len = rng.gen_range(14..400);
        let mut f: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        if len >= LEN && rng.gen_bool(0.8) {
            let t = &mut f[len - LEN..];
            t[0] = [b'S', b'R', b'S', t[0]][rng.gen_range(0..4)];
            t[1] = [TAG, TAG, TAG ^ 1, t[1]][rng.gen_range(0..4)];
            t[2] = 0;
            t[3] = rng.gen_range(0..=(FLOWS as u8 + 1));
            if rng.gen_bool(0.9) {
                // Sequence numbers near each other, so windows and duplicates are exercised.
                t[4..8].copy_from_slice(&(i / 3 + rng.gen_range(0..50)).to_be_bytes());
            }
        }
        feed(&counter, &mut tracker, &f, rng.gen(), i);
    }
    assert_agree(&counter, &tracker, false);
}

#[test]
fn the_kernel_counts_as_the_user_space_receiver_does() {
    let Some((counter, mut tracker)) = pair() else {
        return;
    };
    let t0: u64 = 1_750_000_000_000_000_000;
    counter.check_stamps_from(t0);
    tracker.check_stamps_from(t0);
    counter.set_latency(2, false);
    tracker.set_latency(2, false);

    let mut rng = Xoshiro256PlusPlus::seed_from_u64(0x5eed_c0de);
    // Flow 1 wraps at 2^32 early on.
    let firsts = [0u32, u32::MAX - 1_500, 77];
    let mut queues: Vec<std::collections::VecDeque<u32>> = firsts
        .iter()
        .map(|&f| arrivals(f, 6_000, &mut rng).into())
        .collect();
    let mut frames = Vec::new();
    let mut clock = t0 + 1_000_000;
    loop {
        let live: Vec<usize> = (0..FLOWS).filter(|&f| !queues[f].is_empty()).collect();
        if live.is_empty() {
            break;
        }
        let flow = live[rng.gen_range(0..live.len())];
        let seq = queues[flow].pop_front().unwrap();
        clock += rng.gen_range(100..10_000);
        let lat = latency_ns(&mut rng);
        let tx = if rng.gen_range(0..200) == 0 {
            // Not this run's time: stamped long before its start.
            t0 - STAMP_MARGIN_NS - rng.gen_range(1..1_000_000)
        } else {
            clock
        };
        let rx = (clock as i64 + lat) as u64;
        let len = rng.gen_range(60..1_600);
        frames.push((
            frame(len, Trailer::sent(TAG, flow as u16, seq, tx), &mut rng),
            rx,
        ));
        // Now and then, a frame that is not this run's flow.
        match rng.gen_range(0..60) {
            0 => frames.push((
                frame(80, Trailer::sent(TAG ^ 1, 0, 1, clock), &mut rng),
                clock,
            )),
            1 => frames.push((
                frame(
                    80,
                    Trailer::sent(TAG, 3 + rng.gen_range(0..9), 1, clock),
                    &mut rng,
                ),
                clock,
            )),
            2 => frames.push(((0..rng.gen_range(14..200)).map(|_| 0u8).collect(), clock)),
            3 => {
                let mut reflected = Trailer::sent(TAG, 0, 0, clock);
                reflected.reflected = true;
                frames.push((frame(64, reflected, &mut rng), clock + 10));
            }
            _ => {}
        }
    }
    let end = frames.len() - 300;
    for (i, (f, rx)) in frames.iter().enumerate() {
        if i == end {
            counter.finalise();
            tracker.finalise();
        }
        feed(&counter, &mut tracker, f, *rx, i);
    }

    assert_agree(&counter, &tracker, true);
    // Flow 2's latency was off: neither counted it.
    assert!(tracker.latency(2).is_none());
    assert_eq!(counter.snapshot().flows[2].latency.recorded, 0);
}

/// Asserts that the program's counts are the tracker's: frames that are no flow's, and per
/// flow every counter and the latency histogram bucket for bucket (`every_kind`: the traffic
/// had each kind of event, so the comparison covered them).
fn assert_agree(counter: &XdpCounter, tracker: &RxTracker, every_kind: bool) {
    let snap = counter.snapshot();
    let o = tracker.other;
    assert_eq!(
        (
            o.not_instrumented,
            o.unknown_flow,
            o.foreign,
            o.out_of_window
        ),
        (
            snap.other.not_instrumented,
            snap.other.unknown_flow,
            snap.other.foreign,
            snap.other.out_of_window
        )
    );
    if every_kind {
        assert!(
            o.unknown_flow > 0 && o.foreign > 0 && o.out_of_window > 0 && o.not_instrumented > 0
        );
    }
    for (flow, counted) in snap.flows.iter().enumerate() {
        let user = tracker.counters(flow as u16).unwrap();
        let kernel = (
            counted.frames,
            counted.bytes,
            counted.unique,
            counted.duplicates,
            counted.reordered,
            counted.late,
            counted.max_seq,
            counted.first_rx_ns,
            counted.last_rx_ns,
        );
        let expected = (
            user.frames,
            user.bytes,
            user.unique,
            user.duplicates,
            user.reordered,
            user.late,
            user.max_seq,
            user.first_rx_ns,
            user.last_rx_ns,
        );
        assert_eq!(kernel, expected, "flow {flow}");
        if every_kind {
            assert!(
                user.duplicates > 0 && user.reordered > 0 && user.late > 300 / 6,
                "{user:?}"
            );
        }

        let Some(user_latency) = tracker.latency(flow as u16) else {
            assert_eq!(
                counted.latency.recorded + counted.latency.negative,
                0,
                "flow {flow}"
            );
            continue;
        };
        assert!(!counted.latency.overflowed);
        let kernel_latency = FlowLatency::from_counted(&counted.latency);
        assert!(
            kernel_latency.histogram() == user_latency.histogram(),
            "flow {flow}: the histograms differ"
        );
        assert_eq!(kernel_latency.histogram().len(), counted.latency.recorded);
        assert_eq!(
            (
                kernel_latency.negative(),
                kernel_latency.clamped(),
                kernel_latency.sum_ns()
            ),
            (
                user_latency.negative(),
                user_latency.clamped(),
                user_latency.sum_ns()
            ),
            "flow {flow}"
        );
        if every_kind {
            assert!(user_latency.negative() > 0 && user_latency.clamped() > 0);
        }
        for q in [0.5, 0.9, 0.99, 0.999, 0.999_999] {
            assert_eq!(
                kernel_latency.histogram().value_at_quantile(q),
                user_latency.histogram().value_at_quantile(q)
            );
        }
        // The jitter filter in integers (16 J, truncated) against floating point; the
        // program takes transit times modulo 2^64, so only for stamps of one time.
        if every_kind {
            let (k, u) = (kernel_latency.jitter_ns(), user_latency.jitter_ns());
            assert!(
                (k - u).abs() <= 1.0 + u * 1e-6,
                "flow {flow}: jitter {k} vs {u}"
            );
        }
    }
}

/// The program (receive stamps injected) and the user-space tracker for this run's flows,
/// this thread pinned to one CPU: `BPF_PROG_RUN` runs on the calling CPU, so every frame of
/// a flow meets the same block, as the tracker has one window per flow. None without root.
fn pair() -> Option<(XdpCounter, RxTracker)> {
    if !root() {
        return None;
    }
    let core = strobe_engine::pin::allowed_cores()[0];
    assert!(strobe_engine::pin::pin_current_thread(core));
    let counter = XdpCounter::new(CountSetup {
        run_tag: TAG,
        flows: FLOWS,
        pass_counted: false,
        clock: ProgramClock::Injected,
    })
    .expect("the counting program loads");
    Some((counter, RxTracker::new(FLOWS, TAG)))
}

/// Frame `i` into both, received at `rx`: the program drops exactly the frames the tracker
/// counts as a flow's and passes the rest on.
fn feed(
    counter: &XdpCounter,
    tracker: &mut RxTracker,
    frame: &[u8],
    rx: u64,
    i: impl std::fmt::Display,
) {
    counter.inject_rx_ns(rx);
    let verdict = counter.run_frame(frame).expect("test run");
    let class = tracker.on_frame(frame, frame.len() as u32, Some(rx));
    let flow_frame = matches!(class, strobe_engine::rx::RxClass::Flow(_));
    assert_eq!(
        verdict,
        if flow_frame { 1 } else { 2 },
        "frame {i}: {class:?}"
    );
}
