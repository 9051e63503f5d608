//! Which batch an unpaced run hands over: the backend's fastest one when nobody reads the
//! transmit stamps, a short one when a receiver measures latency (a batch shares a stamp);
//! and how a paced convoy of trains is handed over: each train's head alone, then the rest.

use std::sync::atomic::AtomicBool;

use strobe_engine::{run_port, Clock, RunOptions};
use strobe_io::test_support::TestPort;
use strobe_io::{TimeBase, UNPACED_BATCH};
use strobe_model::{load_scenario, LatencyMode, NoFiles};

/// A real-time port that prefers batches of 128 (it records the biggest request and the
/// frames of each call).
fn wide() -> TestPort<()> {
    TestPort::new((), 256, TimeBase::RealTime).with_throughput_batch(128)
}

/// Runs 1000 frames unpaced; `measured` gives the flow a receive port that measures latency.
fn unpaced_run(measured: bool) -> (usize, usize) {
    let text = "[[ports]]\nname = \"p\"\nlocation = \"null\"\n\n[[ports]]\nname = \"q\"\nlocation = \"null\"\n\n[[flows]]\nname = \"f\"\ntx = \"p\"\nsize = 64\nduration = { fixed_packets = { packets = 1000 } }\n[[flows.packet]]\nethernet = {}\n[[flows.packet]]\nipv4 = { src = \"198.18.0.1\", dst = \"198.18.1.1\" }\n[[flows.packet]]\nudp = { src_port = 1, dst_port = 2 }\n";
    let mut scenario = load_scenario(text, "t.toml", &NoFiles).unwrap();
    if measured {
        scenario.flows[0].rx_ports = vec!["q".into()];
        scenario.flows[0].metrics.latency = Some(LatencyMode::StoreForward);
    } else {
        scenario.flows[0].metrics.latency = None;
    }
    let mut backend = wide();
    let opts = RunOptions {
        unpaced: true,
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
    assert_eq!(report.frames, 1000);
    (report.batch, backend.largest_request)
}

#[test]
fn throughput_runs_take_the_backends_batch() {
    assert_eq!(unpaced_run(false), (128, 128));
}

#[test]
fn latency_runs_keep_batches_short() {
    assert_eq!(unpaced_run(true), (UNPACED_BATCH, UNPACED_BATCH));
}

#[test]
fn a_trains_head_is_handed_over_alone_then_the_rest_of_its_train() {
    // 3 trains of 10 frames at the port's line rate (67 ns apart), 100 µs apart, on a path
    // whose floor lets them all join one hand-over: each head still goes alone, its stamp
    // taken right before it leaves and no frame of its train processed ahead of it.
    let text = "[[ports]]\nname = \"p\"\nlocation = \"null\"\n\n[[flows]]\nname = \"f\"\ntx = \"p\"\nsize = 64\nrate = { percentage = 100 }\nduration = { burst = { bursts = 3, packets = 10, inter_burst_gap = { nanoseconds = 100000 } } }\n[[flows.packet]]\nethernet = {}\n[[flows.packet]]\nipv4 = { src = \"198.18.0.1\", dst = \"198.18.1.1\" }\n[[flows.packet]]\nudp = { src_port = 1, dst_port = 2 }\n";
    let scenario = load_scenario(text, "t.toml", &NoFiles).unwrap();
    assert!(
        matches!(
            scenario.flows[0].schedule.duration,
            strobe_timing::Duration::Bursts { packets: 10, .. }
        ),
        "{:?}",
        scenario.flows[0].schedule.duration
    );
    let mut backend = wide();
    let floor = strobe_timing::PathFloor {
        handover_ns: 2_000,
        spacing_ns: 10,
    };
    let known = strobe_engine::KnownFloor {
        floor,
        source: strobe_engine::FloorSource::Given,
    };
    let pacing = strobe_engine::PortPacing::new("p", "null", Some(known), 256, &[]);
    let report = run_port(
        "p",
        &mut backend,
        &scenario.flows,
        &Clock::monotonic(),
        &RunOptions::default(),
        Some(pacing),
        &AtomicBool::new(false),
    )
    .unwrap();
    assert_eq!(report.frames, 30);
    assert_eq!(backend.calls, [1, 9, 1, 9, 1, 9]);
}
