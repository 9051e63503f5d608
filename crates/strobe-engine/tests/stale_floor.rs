//! A paced sender that starts from a floor whose spacing is far too high (remembered from a
//! pattern whose frames cost more together) still reaches its rate on time: the spacing is
//! checked with the frames already due and corrected within the run.

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use strobe_engine::{run_port, Clock, FloorSource, KnownFloor, PortPacing, RunOptions};
use strobe_io::{Backend, BackendStats, IoError, TimeBase, TxBatch, TxSlot};
use strobe_model::{load_scenario, NoFiles};
use strobe_timing::PathFloor;

/// A path whose calls cost 20 µs plus 1 µs per frame (busy, like a syscall).
const CALL: Duration = Duration::from_micros(20);
const PER_FRAME: Duration = Duration::from_micros(1);

struct Costly {
    slots: Vec<Box<[u8]>>,
    frames: u64,
    calls: u64,
    frames_in_calls_of_several: u64,
}

impl Backend for Costly {
    fn describe(&self) -> String {
        "costly".into()
    }
    fn slot_count(&self) -> usize {
        self.slots.len()
    }
    fn max_frame_len(&self) -> usize {
        2048
    }
    fn time_base(&self) -> TimeBase {
        TimeBase::RealTime
    }
    fn transmit<F>(&mut self, count: usize, fill: F) -> Result<usize, IoError>
    where
        F: FnOnce(&mut [TxSlot<'_>]),
    {
        let start = Instant::now();
        let take = count.min(self.slots.len());
        let mut batch = TxBatch::new();
        strobe_io::slots_of(&mut self.slots, take, &mut batch);
        fill(&mut batch);
        let cost = CALL + PER_FRAME * take as u32;
        while start.elapsed() < cost {
            std::hint::spin_loop();
        }
        self.calls += 1;
        self.frames += take as u64;
        if take > 1 {
            self.frames_in_calls_of_several += take as u64;
        }
        Ok(take)
    }
    fn finish(&mut self) -> Result<BackendStats, IoError> {
        Ok(BackendStats {
            frames: self.frames,
            bytes: 0,
            segmentation: None,
            xmit_errors: None,
        })
    }
}

#[test]
fn a_spacing_remembered_far_too_high_does_not_keep_the_sender_behind() {
    // 20 000 frames at 100 kpps: 200 ms planned. One frame per call (what the stale floor
    // says) costs 21 µs a frame, so such a sender needs twice the time; calls of a few
    // frames keep up easily (10 frames: 30 µs).
    let text = "[[ports]]\nname = \"p\"\nlocation = \"null\"\n\n[[flows]]\nname = \"f\"\ntx = \"p\"\nsize = 64\nrate = \"100kpps\"\nduration = { fixed_packets = { packets = 20000 } }\n[[flows.packet]]\nethernet = {}\n[[flows.packet]]\nipv4 = { src = \"198.18.0.1\", dst = \"198.18.1.1\" }\n[[flows.packet]]\nudp = { src_port = 1, dst_port = 2 }\n";
    let scenario = load_scenario(text, "t.toml", &NoFiles).unwrap();
    let mut backend = Costly {
        slots: (0..256)
            .map(|_| vec![0u8; 2048].into_boxed_slice())
            .collect(),
        frames: 0,
        calls: 0,
        frames_in_calls_of_several: 0,
    };
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
        backend.frames_in_calls_of_several > 10_000,
        "{} of the frames went in calls of several ({} calls)",
        backend.frames_in_calls_of_several,
        backend.calls
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
