//! A paced sender that starts from a floor whose spacing is far too high (remembered from a
//! pattern whose frames cost more together) still reaches its rate on time: the spacing is
//! checked with the frames already due and corrected within the run.

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use strobe_engine::{run_port, Clock, FloorSource, KnownFloor, PortPacing, RunOptions};
use strobe_io::test_support::{TestPath, TestPort};
use strobe_io::{TimeBase, TxSlot};
use strobe_model::{load_scenario, NoFiles};
use strobe_timing::PathFloor;

/// A path whose calls cost 20 µs plus 1 µs per frame (busy, like a syscall).
const CALL: Duration = Duration::from_micros(20);
const PER_FRAME: Duration = Duration::from_micros(1);

#[derive(Default)]
struct Costly {
    frames_in_calls_of_several: u64,
}

impl TestPath for Costly {
    fn sent(&mut self, frames: &[TxSlot<'_>]) {
        let start = Instant::now();
        let cost = CALL + PER_FRAME * frames.len() as u32;
        while start.elapsed() < cost {
            std::hint::spin_loop();
        }
        if frames.len() > 1 {
            self.frames_in_calls_of_several += frames.len() as u64;
        }
    }
}

#[test]
fn a_spacing_remembered_far_too_high_does_not_keep_the_sender_behind() {
    // 20 000 frames at 100 kpps: 200 ms planned. One frame per call (what the stale floor
    // says) costs 21 µs a frame, so such a sender needs twice the time; calls of a few
    // frames keep up easily (10 frames: 30 µs).
    let text = "[[ports]]\nname = \"p\"\nlocation = \"null\"\n\n[[flows]]\nname = \"f\"\ntx = \"p\"\nsize = 64\nrate = \"100kpps\"\nduration = { fixed_packets = { packets = 20000 } }\n[[flows.packet]]\nethernet = {}\n[[flows.packet]]\nipv4 = { src = \"198.18.0.1\", dst = \"198.18.1.1\" }\n[[flows.packet]]\nudp = { src_port = 1, dst_port = 2 }\n";
    let scenario = load_scenario(text, "t.toml", &NoFiles).unwrap();
    let mut backend = TestPort::new(Costly::default(), 256, TimeBase::RealTime);
    let stale = PathFloor {
        handover_ns: 20_000,
        spacing_ns: 50_000,
    };
    let pacing = PortPacing::new(
        "p",
        "costly",
        Some(KnownFloor {
            floor: stale,
            source: FloorSource::Remembered,
        }),
        256,
        &scenario.flows,
    );
    let report = run_port(
        "p",
        &mut backend,
        &scenario.flows,
        &Clock::calibrated(),
        &RunOptions::default(),
        Some(pacing),
        &AtomicBool::new(false),
    )
    .unwrap();
    assert_eq!(report.frames, 20_000);
    assert!(
        backend.path.frames_in_calls_of_several > 10_000,
        "{} of the frames went in calls of several ({} calls)",
        backend.path.frames_in_calls_of_several,
        backend.calls.len()
    );
    // Generous: a loaded test machine may stall the sender, but one frame per call would
    // take twice the planned time.
    let ratio = report.elapsed_ns as f64 / report.planned_ns.max(1) as f64;
    assert!(ratio < 1.5, "took {ratio:.2}× the planned time: {report:?}");
    let observed = report.pacing.unwrap().observed.unwrap();
    assert!(
        observed.spacing_ns < 5_000,
        "the spacing stayed at {} ns",
        observed.spacing_ns
    );
}
