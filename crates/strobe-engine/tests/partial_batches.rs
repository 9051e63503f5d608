//! A backend that takes fewer frames than asked (a full ring) still gets every planned frame
//! exactly once and in order.

use std::sync::atomic::AtomicBool;

use strobe_engine::{run_port, Clock, RunOptions};
use strobe_io::test_support::{TestPath, TestPort};
use strobe_io::{TimeBase, TxSlot};
use strobe_model::{load_scenario, NoFiles};
use strobe_wire::trailer::Trailer;

/// Accepts at most 3 frames per call, and none on every fourth call; keeps the frames.
#[derive(Default)]
struct Stingy {
    asked: u64,
    frames: Vec<Vec<u8>>,
}

impl TestPath for Stingy {
    fn take(&mut self, asked: usize) -> usize {
        self.asked += 1;
        if self.asked % 4 == 0 {
            0
        } else {
            asked.min(3)
        }
    }
    fn sent(&mut self, frames: &[TxSlot<'_>]) {
        self.frames
            .extend(frames.iter().map(|s| s.buf[..s.len].to_vec()));
    }
}

#[test]
fn short_batches_are_completed_in_order() {
    let text = "[[ports]]\nname = \"p\"\nlocation = \"null\"\n\n[[flows]]\nname = \"f\"\ntx = \"p\"\nsize = 64\nduration = { fixed_packets = { packets = 100 } }\n[[flows.packet]]\nethernet = {}\n[[flows.packet]]\nipv4 = { src = \"198.18.0.1\", dst = \"198.18.1.1\" }\n[[flows.packet]]\nudp = { src_port = 1, dst_port = 2 }\n";
    let scenario = load_scenario(text, "t.toml", &NoFiles).unwrap();
    let mut backend = TestPort::new(Stingy::default(), 32, TimeBase::Scheduled);
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
        .path
        .frames
        .iter()
        .map(|f| Trailer::from_frame(f).expect("trailer").seq)
        .collect();
    assert_eq!(seqs, (0..100).collect::<Vec<u32>>());
}
