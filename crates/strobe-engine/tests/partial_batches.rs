//! A backend that takes fewer frames than asked (a full ring) still gets every planned frame
//! exactly once and in order.

use std::sync::atomic::AtomicBool;

use strobe_engine::{run_port, Clock, RunOptions};
use strobe_io::{Backend, BackendStats, IoError, TimeBase, TxBatch, TxSlot};
use strobe_model::{load_scenario, NoFiles};
use strobe_wire::trailer::Trailer;

/// Accepts at most 3 frames per call, and none on every fourth call.
struct Stingy {
    slots: Vec<Box<[u8]>>,
    calls: u64,
    frames: Vec<Vec<u8>>,
}

impl Backend for Stingy {
    fn describe(&self) -> String {
        "stingy".into()
    }
    fn slot_count(&self) -> usize {
        self.slots.len()
    }
    fn max_frame_len(&self) -> usize {
        2048
    }
    fn time_base(&self) -> TimeBase {
        TimeBase::Scheduled
    }
    fn transmit<F>(&mut self, count: usize, fill: F) -> Result<usize, IoError>
    where
        F: FnOnce(&mut [TxSlot<'_>]),
    {
        self.calls += 1;
        let take = if self.calls % 4 == 0 { 0 } else { count.min(3) };
        if take == 0 {
            return Ok(0);
        }
        let mut batch = TxBatch::new();
        strobe_io::slots_of(&mut self.slots, take, &mut batch);
        fill(&mut batch);
        for s in &batch {
            self.frames.push(s.buf[..s.len].to_vec());
        }
        Ok(batch.len())
    }
    fn finish(&mut self) -> Result<BackendStats, IoError> {
        Ok(BackendStats {
            frames: self.frames.len() as u64,
            bytes: 0,
            segmentation: None,
            xmit_errors: None,
        })
    }
}

#[test]
fn short_batches_are_completed_in_order() {
    let text = "[[ports]]\nname = \"p\"\nlocation = \"null\"\n\n[[flows]]\nname = \"f\"\ntx = \"p\"\nsize = 64\nduration = { fixed_packets = { packets = 100 } }\n[[flows.packet]]\nethernet = {}\n[[flows.packet]]\nipv4 = { src = \"198.18.0.1\", dst = \"198.18.1.1\" }\n[[flows.packet]]\nudp = { src_port = 1, dst_port = 2 }\n";
    let scenario = load_scenario(text, "t.toml", &NoFiles).unwrap();
    let mut backend = Stingy {
        slots: (0..32)
            .map(|_| vec![0u8; 2048].into_boxed_slice())
            .collect(),
        calls: 0,
        frames: Vec::new(),
    };
    let opts = RunOptions {
        batch: Some(32),
        ..RunOptions::default()
    };
    let report = run_port(
        "p",
        &mut backend,
        &scenario.flows,
        &Clock::monotonic(),
        &opts,
        None,
        &AtomicBool::new(false),
    )
    .unwrap();
    assert_eq!(report.frames, 100);
    assert_eq!(report.flows[0].frames, 100);
    let seqs: Vec<u32> = backend
        .frames
        .iter()
        .map(|f| Trailer::from_frame(f).expect("trailer").seq)
        .collect();
    assert_eq!(seqs, (0..100).collect::<Vec<u32>>());
}
