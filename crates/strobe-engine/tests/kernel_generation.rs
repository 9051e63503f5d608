//! The engine's side of backends that generate frames themselves (xdp-live's kernel
//! program), against a model backend: which runs it hands over (and with which stamp), the
//! report it makes of them, and the fall-back to writing frames itself when the backend's
//! generator cannot start. The kernel program itself is tested in tests/generator.rs.

use std::sync::atomic::AtomicBool;

use strobe_engine::{run_port, Clock, LatePolicy, RunOptions};
use strobe_io::kernel_frames::{KernelFlow, KernelGenerator, KernelPace, KernelRun, KernelValues};
use strobe_io::{Backend, BackendStats, IoError, TimeBase, TxBatch, TxSlot};
use strobe_model::{load_scenario, FlowSpec, LatencyMode, NoFiles};
use strobe_timing::{Pattern, Rate};

/// A backend with a model generator: it "sends" its flows' frames at once when started,
/// or refuses to start when `fail` says so.
struct Generating {
    slots: Vec<Box<[u8]>>,
    engine_frames: u64,
    fail: bool,
    /// The first flow handed over, and all of them.
    started: Option<KernelFlow>,
    all: Vec<KernelFlow>,
    generated: u64,
    /// Flows ended by `end_flow`.
    ended: Vec<usize>,
}

impl Generating {
    fn new(fail: bool) -> Generating {
        Generating {
            slots: (0..64)
                .map(|_| vec![0u8; 2048].into_boxed_slice())
                .collect(),
            engine_frames: 0,
            fail,
            started: None,
            all: Vec::new(),
            generated: 0,
            ended: Vec::new(),
        }
    }
}

impl KernelGenerator for Generating {
    fn refuses(&self, _: &[KernelFlow]) -> Option<String> {
        None
    }
    fn start(&mut self, flows: &[KernelFlow]) -> Result<(), IoError> {
        if self.fail {
            return Err(IoError::Other("no live frames here".into()));
        }
        self.started = flows.first().cloned();
        self.all = flows.to_vec();
        self.generated = flows.iter().map(|f| f.frames.unwrap_or(0)).sum();
        Ok(())
    }
    fn generated(&self, flow: usize) -> u64 {
        self.all.get(flow).and_then(|f| f.frames).unwrap_or(0)
    }
    fn done(&self) -> bool {
        (0..self.all.len()).all(|f| self.all[f].frames.is_some() || self.ended.contains(&f))
    }
    fn end_flow(&mut self, flow: usize) {
        self.ended.push(flow);
    }
    fn hold(&mut self, _: bool) {}
    fn stop(&mut self) -> Result<Vec<KernelRun>, IoError> {
        Ok(self
            .all
            .iter()
            .map(|f| KernelRun {
                frames: f.frames.unwrap_or(0),
                first_ns: None,
                last_ns: None,
                late_frames: 3,
                max_late_ns: f.frames.unwrap_or(0),
                lateness: [1, 2, 0, 0, 0, 0],
            })
            .collect())
    }
    fn stamp_source(&self) -> String {
        "the model's".into()
    }
}

impl Backend for Generating {
    fn describe(&self) -> String {
        "generating".into()
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
    fn kernel_generator(&mut self) -> Option<&mut dyn KernelGenerator> {
        Some(self)
    }
    fn transmit<F>(&mut self, count: usize, fill: F) -> Result<usize, IoError>
    where
        F: FnOnce(&mut [TxSlot<'_>]),
    {
        let mut batch = TxBatch::new();
        strobe_io::slots_of(&mut self.slots, count, &mut batch);
        fill(&mut batch);
        self.engine_frames += batch.len() as u64;
        Ok(batch.len())
    }
    fn finish(&mut self) -> Result<BackendStats, IoError> {
        Ok(BackendStats {
            frames: self.engine_frames + self.generated,
            ..BackendStats::default()
        })
    }
}

fn flow(vary: &str, latency: bool) -> Vec<FlowSpec> {
    flow_of_size("64", vary, latency)
}

fn flow_of_size(size: &str, vary: &str, latency: bool) -> Vec<FlowSpec> {
    let text = format!(
        "[[ports]]\nname = \"p\"\nlocation = \"null\"\n\n[[ports]]\nname = \"q\"\nlocation = \"null\"\n\n[[flows]]\nname = \"f\"\ntx = \"p\"\nsize = {size}\nduration = {{ fixed_packets = {{ packets = 1000 }} }}\n[[flows.packet]]\nethernet = {{}}\n[[flows.packet]]\nipv4 = {{ src = \"198.18.0.1\", dst = \"198.18.1.1\" }}\n[[flows.packet]]\nudp = {{ src_port = {vary}, dst_port = 2 }}\n"
    );
    let mut scenario = load_scenario(&text, "t.toml", &NoFiles).unwrap();
    scenario.flows[0].rx_ports = vec!["q".into()];
    scenario.flows[0].metrics.latency = latency.then_some(LatencyMode::StoreForward);
    scenario.flows
}

fn run(
    backend: &mut Generating,
    flows: &[FlowSpec],
    opts: RunOptions,
) -> strobe_engine::PortReport {
    run_port(
        "p",
        backend,
        flows,
        &Clock::monotonic(),
        &opts,
        None,
        &AtomicBool::new(false),
    )
    .unwrap()
}

fn unpaced() -> RunOptions {
    RunOptions {
        unpaced: true,
        ..RunOptions::default()
    }
}

#[test]
fn an_unpaced_counter_flow_is_handed_over_whole() {
    let counting = "{ increment = { start = 1000, step = 1, count = 10 } }";
    for (latency, per_frame) in [(true, true), (false, false)] {
        let mut backend = Generating::new(false);
        let report = run(&mut backend, &flow(counting, latency), unpaced());
        let flow = backend.started.expect("the flow was handed over");
        assert_eq!(flow.frames, Some(1000));
        assert_eq!(flow.fields.len(), 1);
        assert_eq!(flow.seq_start, 0);
        assert_eq!(
            flow.stamped_per_frame(),
            per_frame,
            "a stamp per frame only where latency is measured"
        );
        assert_eq!(backend.engine_frames, 0, "the engine wrote no frame");
        assert!(report.in_kernel);
        assert_eq!((report.frames, report.flows[0].frames), (1000, 1000));
        assert_eq!(report.bytes, 60_000, "frames as written, without the FCS");
        assert_eq!(report.tx_stamps.is_some(), per_frame, "{report:?}");
        assert!(report
            .generation
            .unwrap()
            .contains("generated in the kernel"));
    }
}

#[test]
fn random_and_listed_values_are_handed_over_with_their_seed() {
    let random = "{ random = { min = 1024, max = 2047, seed = 99, count = 5 } }";
    let mut backend = Generating::new(false);
    let report = run(&mut backend, &flow(random, true), unpaced());
    let handed = backend.started.expect("the flow was handed over");
    assert_eq!(
        handed.fields[0].values,
        KernelValues::Random {
            seed: 99,
            lo: 1024,
            hi: 2047,
            count: 5
        }
    );
    assert!(report.in_kernel && backend.engine_frames == 0);
    let mut backend = Generating::new(false);
    run(
        &mut backend,
        &flow("{ values = [7, 9, 11] }", true),
        unpaced(),
    );
    let handed = backend.started.expect("the flow was handed over");
    assert_eq!(
        handed.fields[0].values,
        KernelValues::Listed(vec![7, 9, 11])
    );
}

#[test]
fn several_sizes_are_handed_over_as_a_cycle_and_their_bytes_counted() {
    let flows = flow_of_size("\"imix\"", "7", false);
    let mut sizes = flows[0].size.sequence(flows[0].size_seed);
    let bytes: u64 = (0..1000).map(|_| u64::from(sizes.next_size()) - 4).sum();
    let mut backend = Generating::new(false);
    let report = run(&mut backend, &flows, unpaced());
    let handed = backend.started.expect("the flow was handed over");
    assert_eq!(handed.templates.len(), 3);
    assert_eq!(handed.cycle.len(), 12, "IMIX repeats after 12 frames");
    let lens: Vec<usize> = handed
        .cycle
        .iter()
        .map(|&t| handed.templates[t as usize].frame.len())
        .collect();
    assert_eq!(lens.iter().filter(|&&l| l == 60).count(), 7, "{lens:?}");
    assert!(report.in_kernel && backend.engine_frames == 0);
    assert_eq!((report.frames, report.bytes), (1000, bytes));
    assert!(report.generation.unwrap().contains("3 frame sizes"));

    // Paced at a rate in frames per second, every size has the same gap: handed over
    // with it, the cycle starting at the frame the engine had planned first.
    let mut backend = Generating::new(false);
    let report = run(&mut backend, &flows, RunOptions::default());
    let handed = backend.started.expect("the paced flow was handed over");
    assert!(handed.pace.is_some() && report.in_kernel);
    assert_eq!(handed.frames, Some(1000));
    let mut sizes = flows[0].size.sequence(flows[0].size_seed);
    for (j, &t) in handed.cycle.iter().enumerate() {
        let len = handed.templates[t as usize].frame.len() as u32 + 4;
        assert_eq!(len, sizes.next_size(), "size of frame {j}");
    }
    assert_eq!(report.bytes, bytes);

    // At a rate in bits each size has its own gap: the engine's.
    let flows = flow_of_size("\"imix\"\nrate = { mbps = 100 }", "7", false);
    let mut backend = Generating::new(false);
    let report = run(&mut backend, &flows, RunOptions::default());
    assert!(backend.started.is_none() && !report.in_kernel);
    assert!(report
        .generation
        .unwrap()
        .contains("several frame sizes at a rate in bits"));
}

#[test]
fn what_the_generator_cannot_do_the_engine_does_and_says_why() {
    // Random frame sizes: refused before starting.
    let mut backend = Generating::new(false);
    let random = "{ random = { min = 64, max = 1500 } }";
    let report = run(&mut backend, &flow_of_size(random, "7", true), unpaced());
    assert!(backend.started.is_none());
    assert_eq!(backend.engine_frames, 1000);
    assert!(!report.in_kernel);
    assert!(report.generation.unwrap().contains("frame sizes"));

    // A generator that fails to start: the engine's frames after all.
    let mut backend = Generating::new(true);
    let report = run(&mut backend, &flow("7", true), unpaced());
    assert_eq!((backend.engine_frames, report.frames), (1000, 1000));
    assert!(!report.in_kernel);
    assert!(report.generation.unwrap().contains("failed to start"));

    // --engine-frames never hands the flow over.
    let mut backend = Generating::new(false);
    let opts = RunOptions {
        engine_frames: true,
        ..unpaced()
    };
    let report = run(&mut backend, &flow("7", true), opts);
    assert!(backend.started.is_none());
    assert_eq!(backend.engine_frames, 1000);
    assert!(!report.in_kernel && report.generation.is_none());

    // Paced: random departures, and the late policy that shifts the schedule, stay with
    // the engine, which says why.
    let mut poisson = fast(flow("7", true));
    poisson[0].schedule.pattern = Pattern::Poisson;
    for (flows, late_policy, why) in [
        (poisson, LatePolicy::Smooth, "Poisson"),
        (fast(flow("7", true)), LatePolicy::Shift, "shift"),
    ] {
        let mut backend = Generating::new(false);
        let opts = RunOptions {
            late_policy,
            ..RunOptions::default()
        };
        let report = run(&mut backend, &flows, opts);
        assert!(backend.started.is_none());
        assert_eq!(backend.engine_frames, 1000);
        assert!(report.generation.unwrap().contains(why));
    }
}

/// The flows at 1 Mpps (a paced run the engine writes ends in a millisecond).
fn fast(mut flows: Vec<FlowSpec>) -> Vec<FlowSpec> {
    flows[0].schedule.rate = Rate::Pps(1e6);
    flows
}

/// A paced flow at a constant rate or in bursts goes to the generator with its deadlines,
/// and the report says the program paced it.
#[test]
fn a_paced_flow_is_handed_over_with_its_deadlines() {
    let mut bursts = fast(flow("7", true));
    bursts[0].schedule.pattern = Pattern::Burst {
        packets: 10,
        intra_gap_ns: Some(2_500),
        inter_burst_gap_ns: 50_000,
    };
    let tolerance = RunOptions::default().late_tolerance_ns;
    for (flows, pace) in [
        (
            fast(flow("7", true)),
            KernelPace {
                gap_ns: 1_000,
                gap_frac: 0,
                burst: 1,
                burst_gap_ns: 0,
                late_tolerance_ns: tolerance,
            },
        ),
        (
            bursts,
            KernelPace {
                gap_ns: 2_500,
                gap_frac: 0,
                burst: 10,
                burst_gap_ns: 50_000,
                late_tolerance_ns: tolerance,
            },
        ),
    ] {
        let mut backend = Generating::new(false);
        let report = run(&mut backend, &flows, RunOptions::default());
        let flow = backend.started.expect("the flow was handed over");
        assert_eq!((flow.frames, flow.pace), (Some(1000), Some(pace)));
        assert_eq!(backend.engine_frames, 0);
        assert!(report.in_kernel);
        assert!(report.generation.unwrap().contains("paced by the program"));
    }
}

/// Several paced flows on one port go to the generator together, each with its deadlines,
/// sizes and fields; the report counts each flow's frames and bytes and sums the port's.
#[test]
fn several_paced_flows_are_handed_over_together() {
    let mut flows = fast(flow("7", true));
    let mut second = flow_of_size(
        "500",
        "{ increment = { start = 10, step = 1, count = 5 } }",
        true,
    )
    .remove(0);
    second.name = "g".into();
    second.id += 1;
    second.schedule.rate = Rate::Pps(250e3);
    second.schedule.duration = strobe_timing::Duration::Packets(300);
    flows.push(second);
    let mut backend = Generating::new(false);
    let report = run(&mut backend, &flows, RunOptions::default());
    assert_eq!(backend.engine_frames, 0);
    assert!(report.in_kernel, "{:?}", report.generation);
    let generation = report.generation.unwrap();
    assert!(generation.contains("2 flows"), "{generation}");
    let [a, b] = &backend.all[..] else {
        panic!("two flows handed over: {:?}", backend.all.len())
    };
    assert_eq!((a.frames, b.frames), (Some(1000), Some(300)));
    assert_eq!(a.pace.unwrap().gap_ns, 1_000);
    assert_eq!(b.pace.unwrap().gap_ns, 4_000);
    assert_eq!(b.templates[0].frame.len(), 496);
    assert_eq!(b.fields.len(), 1);
    assert!(matches!(
        b.fields[0].values,
        KernelValues::Counter {
            start: 10,
            count: 5,
            ..
        }
    ));
    assert_eq!(report.flows.len(), 2);
    assert_eq!(
        (report.flows[0].frames, report.flows[1].frames),
        (1000, 300)
    );
    assert_eq!(
        (report.flows[0].bytes, report.flows[1].bytes),
        (60_000, 148_800)
    );
    assert_eq!((report.frames, report.bytes), (1300, 208_800));
    // Lateness summed over the flows, the latest of both.
    assert_eq!(report.late_frames, 6);
    assert_eq!(report.max_late_ns, 1000);
    assert_eq!(report.kernel_lateness, Some([2, 4, 0, 0, 0, 0]));

    // One flow the program cannot pace keeps the port with the engine, which names it.
    flows[1].schedule.pattern = Pattern::Poisson;
    let mut backend = Generating::new(false);
    let report = run(&mut backend, &flows, RunOptions::default());
    assert!(backend.started.is_none() && !report.in_kernel);
    assert_eq!(backend.engine_frames, 1300);
    let why = report.generation.unwrap();
    assert!(why.contains("flow g") && why.contains("Poisson"), "{why}");
}

/// A flow switched off during a run ends alone in the generator (the other flows go on);
/// the port's run ends once every flow has.
#[test]
fn a_flow_switched_off_ends_alone_in_the_generator() {
    let mut flows = fast(flow("7", true));
    let mut second = flow("9", true).remove(0);
    second.name = "g".into();
    second.id += 1;
    second.schedule.duration = strobe_timing::Duration::Continuous;
    flows.push(second);
    let switches = strobe_engine::live::FlowSwitches::new(["f".to_string(), "g".to_string()]);
    switches.stop("g");
    let opts = RunOptions {
        flow_switches: Some(std::sync::Arc::new(switches)),
        // Ends the run should the switch not end the continuous flow.
        time_limit_ns: Some(5_000_000_000),
        ..RunOptions::default()
    };
    let mut backend = Generating::new(false);
    let report = run(&mut backend, &flows, opts);
    assert!(report.in_kernel, "{:?}", report.generation);
    assert_eq!(backend.ended, vec![1]);
    assert!(
        !report.stopped_early,
        "ended by the switch, not the time limit"
    );
}
