//! A running flow's rate and frame size changed live (OTG's update_config), in simulated
//! time: the transmitter picks the change up at its next hand-over; the gap after the last
//! frame its schedule handed out is the new one, and every frame not yet written has the new
//! size.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use strobe_engine::live::{FlowSwitches, FlowUpdate};
use strobe_engine::{run_port, Clock, RunOptions, SimTime};
use strobe_io::test_support::{TestPath, TestPort};
use strobe_io::{TimeBase, TxSlot};
use strobe_model::{load_scenario, FlowSpec, NoFiles};
use strobe_timing::Rate;

/// Notes each frame (scheduled ns, length without FCS) and publishes `change` once
/// `after` frames have left.
struct ChangingPath {
    sim: &'static SimTime,
    frames: Vec<(u64, usize)>,
    switches: Arc<FlowSwitches>,
    after: usize,
    change: FlowUpdate,
}

impl TestPath for ChangingPath {
    fn sent(&mut self, frames: &[TxSlot<'_>]) {
        for slot in frames {
            self.frames.push((slot.scheduled_ns, slot.len));
            if self.frames.len() == self.after {
                assert!(self.switches.update("f", self.change));
            }
        }
        self.sim.advance(1_000);
    }
}

fn flow(rate: &str, packets: u64) -> Vec<FlowSpec> {
    let text = format!(
        "[[ports]]\nname = \"p\"\nlocation = \"null\"\n\n[[flows]]\nname = \"f\"\ntx = \"p\"\n\
         size = 64\nrate = \"{rate}\"\nduration = {packets}\n[[flows.packet]]\nethernet = {{}}\n\
         [[flows.packet]]\nipv4 = {{ src = \"198.18.0.1\", dst = \"198.18.1.1\" }}\n\
         [[flows.packet]]\nudp = {{ src_port = 1, dst_port = 2 }}\n"
    );
    load_scenario(&text, "t.toml", &NoFiles).unwrap().flows
}

/// Sends `flows` paced in simulated time, `change` published after `after` frames.
fn run(flows: &[FlowSpec], after: usize, change: FlowUpdate) -> (Vec<(u64, usize)>, u64) {
    let sim = SimTime::new(20);
    let switches = Arc::new(FlowSwitches::new(["f".to_string()]));
    let mut port = TestPort::new(
        ChangingPath {
            sim,
            frames: Vec::new(),
            switches: switches.clone(),
            after,
            change,
        },
        64,
        TimeBase::RealTime,
    );
    let options = RunOptions {
        flow_switches: Some(switches),
        batch: Some(1),
        ..RunOptions::default()
    };
    let report = run_port(
        "p",
        &mut port,
        flows,
        &Clock::simulated(sim),
        &options,
        None,
        &AtomicBool::new(false),
    )
    .unwrap();
    (port.path.frames, report.flows[0].bytes)
}

#[test]
fn a_rate_and_size_change_applies_from_the_next_hand_over() {
    let change = FlowUpdate {
        rate: Some(Rate::Pps(4000.0)),
        base_rate: Some(Rate::Pps(1000.0)),
        size: Some(128),
    };
    let (frames, bytes) = run(&flow("1000pps", 10), 4, change);
    assert_eq!(frames.len(), 10, "a fixed count is kept: {frames:?}");
    let first = frames[0].0;
    let times: Vec<u64> = frames.iter().map(|f| f.0 - first).collect();
    // Four frames had left (the last at 3 ms) when the change came: the gap after it is
    // already 250 µs.
    assert_eq!(
        times,
        [0, 1, 2, 3]
            .map(|ms| ms * 1_000_000)
            .into_iter()
            .chain((1..=6).map(|k| 3_000_000 + k * 250_000))
            .collect::<Vec<_>>()
    );
    let lengths: Vec<usize> = frames.iter().map(|f| f.1).collect();
    assert_eq!(lengths, [60, 60, 60, 60, 124, 124, 124, 124, 124, 124]);
    // Bytes as the report counts them: without the FCS.
    assert_eq!(bytes, 4 * 60 + 6 * 124);
}

#[test]
fn a_worker_sending_a_share_of_a_flow_scales_the_new_rate_by_it() {
    // This worker was given 500 of the flow's 1000 pps (a Poisson flow split over two):
    // doubled to 2000 pps, its share is 1000 pps.
    let change = FlowUpdate {
        rate: Some(Rate::Pps(2000.0)),
        base_rate: Some(Rate::Pps(1000.0)),
        size: None,
    };
    let (frames, _) = run(&flow("500pps", 6), 2, change);
    let gaps: Vec<u64> = frames.windows(2).map(|w| w[1].0 - w[0].0).collect();
    assert_eq!(
        gaps,
        [2_000_000, 1_000_000, 1_000_000, 1_000_000, 1_000_000]
    );
    assert!(frames.iter().all(|f| f.1 == 60));
}
