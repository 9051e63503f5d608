//! The transmit worker in simulated time: pacing, coalescing, the late policies and the
//! falling-behind watcher, deterministic, without sleeping and without root. The clock is a
//! [`SimTime`]; the path is a backend that advances it by what a hand-over costs there (its
//! floor) and notes when each frame left.

use std::sync::atomic::AtomicBool;

use strobe_engine::behind::BehindWatch;
use strobe_engine::{
    run_port, Clock, FloorSource, KnownFloor, LatePolicy, PortPacing, PortReport, RunOptions,
    SimTime,
};
use strobe_io::test_support::{TestPath, TestPort};
use strobe_io::{TimeBase, TxSlot};
use strobe_model::{load_scenario, FlowSpec, NoFiles};
use strobe_timing::PathFloor;

/// A clock read costs this much simulated time (a spin on the clock moves on by it).
const READ_NS: u64 = 20;

/// A path whose hand-over of n frames costs `handover_ns + (n - 1) * spacing_ns`, its frames
/// leaving `spacing_ns` apart from the call's start.
struct SimPath {
    sim: &'static SimTime,
    floor: PathFloor,
    /// Each frame: when it left and when it was scheduled, simulated ns.
    frames: Vec<(u64, u64)>,
}

impl TestPath for SimPath {
    fn sent(&mut self, frames: &[TxSlot<'_>]) {
        let start = self.sim.now_ns();
        for (k, slot) in frames.iter().enumerate() {
            let left = start + k as u64 * self.floor.spacing_ns;
            self.frames.push((left, slot.scheduled_ns));
        }
        self.sim.advance(self.floor.call_ns(frames.len()));
    }
}

/// One flow of 64-byte UDP frames at `rate`, `packets` of them.
fn flow(rate: &str, packets: u64) -> Vec<FlowSpec> {
    let text = format!(
        "[[ports]]\nname = \"p\"\nlocation = \"null\"\n\n[[flows]]\nname = \"f\"\ntx = \"p\"\n\
         size = 64\nrate = \"{rate}\"\nduration = {packets}\n[[flows.packet]]\nethernet = {{}}\n\
         [[flows.packet]]\nipv4 = {{ src = \"198.18.0.1\", dst = \"198.18.1.1\" }}\n\
         [[flows.packet]]\nudp = {{ src_port = 1, dst_port = 2 }}\n"
    );
    load_scenario(&text, "t.toml", &NoFiles).unwrap().flows
}

/// What a paced run did on the simulated path: its report, and each frame's departure and
/// first planned deadline on the run's timeline (t0 = 0).
struct Run {
    report: PortReport,
    /// (left, scheduled as handed over, as first planned)
    frames: Vec<(u64, u64, u64)>,
    calls: Vec<usize>,
    sleeps: u64,
}

/// Runs `flows` paced on a path of `floor` (known before the run), with `policy`;
/// `stall` is a host stall (from when after the start, how long).
fn paced(
    flows: &[FlowSpec],
    floor: PathFloor,
    policy: LatePolicy,
    stall: Option<(u64, u64)>,
) -> Run {
    let sim = SimTime::new(READ_NS);
    if let Some((after, late)) = stall {
        sim.stall_at(sim.now_ns() + after, late);
    }
    let mut path = TestPort::new(
        SimPath {
            sim,
            floor,
            frames: Vec::new(),
        },
        256,
        TimeBase::RealTime,
    );
    let pacing = PortPacing::new(
        "p",
        "sim",
        Some(KnownFloor {
            floor,
            source: FloorSource::Given,
        }),
        256,
        flows,
    );
    let options = RunOptions {
        late_policy: policy,
        ..RunOptions::default()
    };
    let report = run_port(
        "p",
        &mut path,
        flows,
        &Clock::simulated(sim),
        &options,
        Some(pacing),
        &AtomicBool::new(false),
    )
    .unwrap();
    let t0 = report.t0_unix_ns.unwrap() - SimTime::REALTIME_AT_ZERO_NS;
    let period = match flows[0].schedule.rate {
        strobe_timing::Rate::Pps(pps) => (1e9 / pps).round() as u64,
        other => panic!("a rate in pps, not {other:?}"),
    };
    let first = path.path.frames[0].1;
    let frames = path
        .path
        .frames
        .iter()
        .enumerate()
        .map(|(i, &(left, scheduled))| (left - t0, scheduled, first + i as u64 * period))
        .collect();
    Run {
        report,
        frames,
        calls: path.calls,
        sleeps: sim.sleeps(),
    }
}

const PATH: PathFloor = PathFloor {
    handover_ns: 2_000,
    spacing_ns: 500,
};

#[test]
fn a_constant_rate_leaves_on_its_deadlines_one_frame_a_hand_over() {
    // 100 µs apart: the worker sleeps to its spin margin before each frame, then spins.
    let run = paced(&flow("10kpps", 2_000), PATH, LatePolicy::Smooth, None);
    assert_eq!(run.report.frames, 2_000);
    assert_eq!(run.report.late_frames, 0, "{:?}", run.report);
    assert!(run.calls.iter().all(|&n| n == 1));
    assert!(run.sleeps >= 2_000, "{} sleeps", run.sleeps);
    for &(left, scheduled, planned) in &run.frames {
        assert_eq!(scheduled, planned);
        assert!(
            left >= planned && left - planned < 1_000,
            "left {left}, due {planned}"
        );
    }
    // 10 µs apart, inside the spin margin: spun for, never slept, still on time.
    let run = paced(&flow("100kpps", 2_000), PATH, LatePolicy::Smooth, None);
    assert_eq!(run.report.late_frames, 0, "{:?}", run.report);
    assert!(run.sleeps < 100, "{} sleeps", run.sleeps);
    for &(left, _, planned) in &run.frames {
        assert!(
            left >= planned && left - planned < 1_000,
            "left {left}, due {planned}"
        );
    }
}

#[test]
fn frames_closer_than_a_hand_over_go_together_and_keep_the_rate() {
    // 1 Mpps on a path whose hand-over costs 2 µs: one frame a call would fall behind at
    // once; calls of several keep the schedule, none of their frames early by more than the
    // hand-over a perfect sender on the path would need.
    let run = paced(&flow("1mpps", 20_000), PATH, LatePolicy::Smooth, None);
    assert_eq!(run.report.frames, 20_000);
    let mean = 20_000.0 / run.calls.len() as f64;
    assert!(mean > 2.0, "{mean:.2} frames a hand-over");
    assert_eq!(run.report.shifted_ns, 0, "{:?}", run.report);
    let (last_left, _, last_planned) = *run.frames.last().unwrap();
    assert!(
        last_left.abs_diff(last_planned) < 5_000,
        "the last frame left at {last_left}, planned {last_planned}"
    );
    for &(left, _, planned) in &run.frames {
        assert!(
            left + PATH.handover_ns >= planned,
            "left {left}, due {planned}"
        );
    }
}

/// The rate of the stalled runs, and their frames' gap.
const STALLED_RATE: &str = "10kpps";
const PERIOD_NS: u64 = 100_000;

/// 2 000 frames at 10 kpps (200 ms) and a 2 ms host stall 100 ms in (`spinning`: while the
/// worker spins before a deadline, else in its sleep).
fn stalled(policy: LatePolicy, spinning: bool) -> Run {
    let sim_start_to_stall = 100_000_000 + if spinning { PERIOD_NS - 5_000 } else { 0 };
    let run = paced(
        &flow(STALLED_RATE, 2_000),
        PATH,
        policy,
        Some((sim_start_to_stall, 2_000_000)),
    );
    assert_eq!(run.report.frames, 2_000);
    assert!(run.report.late_frames > 0, "{:?}", run.report);
    // The stall was the host's, not strobe's.
    assert_eq!(
        run.report.late_host_frames, run.report.late_frames,
        "{:?}",
        run.report
    );
    assert!(run.report.max_late_ns >= 1_000_000, "{:?}", run.report);
    run
}

/// The smallest gap between frames after the first late one.
fn min_gap_after_the_stall(run: &Run) -> u64 {
    let late = run
        .frames
        .iter()
        .position(|&(left, _, planned)| left > planned + 500_000)
        .unwrap();
    run.frames[late..]
        .windows(2)
        .map(|w| w[1].0 - w[0].0)
        .min()
        .unwrap()
}

#[test]
fn catch_up_sends_the_backlog_at_once_and_ends_on_time() {
    for spinning in [false, true] {
        let run = stalled(LatePolicy::CatchUp, spinning);
        assert_eq!(run.report.shifted_ns, 0);
        // The 20 frames due during the stall went together, as fast as the path takes them.
        assert!(
            run.calls.iter().any(|&n| n >= 10),
            "{:?}",
            run.calls.iter().max()
        );
        assert!(min_gap_after_the_stall(&run) <= PATH.spacing_ns);
        let (left, _, planned) = *run.frames.last().unwrap();
        assert!(
            left - planned < 1_000,
            "last left {left}, planned {planned}"
        );
    }
}

#[test]
fn shift_moves_the_rest_of_the_schedule_by_the_stall() {
    for spinning in [false, true] {
        let run = stalled(LatePolicy::Shift, spinning);
        assert!(
            run.report.shifted_ns.abs_diff(2_000_000) < 50_000,
            "shifted {}",
            run.report.shifted_ns
        );
        // No burst: the gaps after the stall are the rate's.
        assert!(min_gap_after_the_stall(&run) >= PERIOD_NS * 9 / 10);
        let (left, scheduled, planned) = *run.frames.last().unwrap();
        assert_eq!(scheduled, planned + run.report.shifted_ns);
        assert!(
            left - scheduled < 1_000,
            "last left {left}, scheduled {scheduled}"
        );
    }
}

#[test]
fn smooth_repays_the_stall_in_slightly_shorter_gaps_and_ends_on_time() {
    for spinning in [false, true] {
        let run = stalled(LatePolicy::Smooth, spinning);
        // Repaid by the end: 1/50 of each 100 µs gap, 2 µs, so 2 ms in 1 000 gaps.
        assert_eq!(run.report.shifted_ns, 0, "{:?}", run.report);
        let gap = min_gap_after_the_stall(&run);
        assert!(
            (PERIOD_NS * 9 / 10..PERIOD_NS).contains(&gap),
            "smallest gap {gap}"
        );
        let (left, _, planned) = *run.frames.last().unwrap();
        assert!(
            left - planned < 1_000,
            "last left {left}, planned {planned}"
        );
    }
}

#[test]
fn a_path_slower_than_the_rate_is_told_within_half_a_second() {
    // Every hand-over costs 20 µs and frames 20 µs apart: the path carries 50 kpps, and
    // 100 kpps are asked for 1 s. The watcher, fed the worker's lag every 20 ms of simulated
    // time (as the run's watcher reads it), says so within a few of its 100 ms windows.
    let slow = PathFloor {
        handover_ns: 20_000,
        spacing_ns: 20_000,
    };
    let flows = flow("100kpps", 100_000);
    let run = paced(&flows, slow, LatePolicy::Shift, None);
    assert!(run.report.elapsed_ns > 1_800_000_000, "{:?}", run.report);
    let pacing = PortPacing::new(
        "p",
        "sim",
        Some(KnownFloor {
            floor: slow,
            source: FloorSource::Given,
        }),
        256,
        &flows,
    );
    let mut watch = BehindWatch::new(&[pacing]);
    let mut told = None;
    let mut next = 0u64;
    for &(left, _, planned) in &run.frames {
        if left >= next {
            next = left + 20_000_000;
            let said = watch.observe(left, &[left.saturating_sub(planned)]);
            if let Some(what) = said.into_iter().next() {
                told = Some((left, what));
                break;
            }
        }
    }
    let (when, what) = told.expect("the watcher never said the port falls behind");
    assert!(when < 500_000_000, "told after {when} ns");
    assert!(what.to_string().contains("keeps falling behind"), "{what}");
    // Said with its figures: the port, and a lag that grows with the time.
    let strobe_model::Warning::FallingBehind {
        port, behind_ns, ..
    } = &what
    else {
        panic!("{what:?}")
    };
    assert_eq!(port, "p");
    assert!(*behind_ns > 0, "{what:?}");
}
