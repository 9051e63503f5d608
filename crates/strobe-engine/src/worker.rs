//! The transmit worker of one port: merges its flows by deadline, waits for each deadline on
//! the TSC, and hands frames to the backend.
//!
//! Paced runs coalesce: one hand-over to the backend costs more than the spacing of frames
//! handed over together (on a veth AF_PACKET path about 2.3 µs against 0.9 µs), so a frame
//! whose deadline comes before the previous hand-over could end joins it when that puts it
//! closer to its deadline ([`PathFloor::joins`], with the port's floor: given, remembered,
//! or learned from the run's first hand-overs). Deadlines
//! stay absolute, so the rate is kept up to the path's ceiling, and gaps are as close to
//! the schedule as the path allows. `batch` caps the frames of one hand-over (1 = every
//! frame alone, the behaviour before coalescing). Without a floor (a caller that gives none)
//! a paced batch of N is handed over whole at its first frame's deadline.
//! Unpaced runs (pcap traces, `--rate max`) hand over batches of 32 or the backend's best.
//!
//! Falling behind: a batch is *late* when it is handed over more than `late_tolerance_ns`
//! after its deadline. `LatePolicy::Shift` moves the whole remaining schedule back
//! by the lateness, so gaps keep their shape and the rate dips; `LatePolicy::CatchUp` keeps
//! the schedule, so late frames go out back to back until the worker is on time again.
//! `LatePolicy::Smooth` (default) shifts like `Shift` at the stall, then pays the shift back by
//! shortening each following gap by at most 1/50 of its length until the schedule is on
//! time again: one long gap at the stall, every other gap within 2 % of its target (0.2 µs
//! at 100 kpps), and the long-run rate kept. Where the port's last deadline is fixed (a
//! constant rate for a count or a time), what is still owed near the end is spread over the
//! gaps left (each at most 5 % shorter), so the last frame leaves when planned: the run keeps
//! its asked duration and mean rate. Either way late frames are counted.
//!
//! [`run_port`] runs in named stages, one room each:
//! - set-up: each flow compiled into its sending state (`flow_state.rs`), and what the port
//!   is (`PortShape`);
//! - frames the backend's own program can generate are handed to it, and the worker only
//!   watches (`in_kernel.rs`);
//! - the hand-overs planned: how many frames each, coalesced to which floor (`Handovers`);
//! - the send loop (`send.rs`): plan a batch (`batch.rs`), wait for its deadline
//!   (`wait.rs`), judge its lateness (`late.rs`), write and hand it over;
//! - the end of the run: the backend drained and the report drawn up (`finish.rs`,
//!   `report.rs`).

mod batch;
mod finish;
mod flow_state;
mod in_kernel;
mod late;
mod report;
mod send;
mod wait;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use strobe_io::{Backend, TimeBase, MAX_BATCH};
use strobe_model::FlowSpec;
use strobe_timing::{FloorEstimate, PathFloor};

use crate::clock::Clock;
use crate::live::LiveCounters;
use crate::port_floor::PortPacing;
use crate::EngineError;

use self::flow_state::{flow_states, FlowState};
use self::in_kernel::{run_in_kernel, start_in_kernel, KernelStart};
use self::send::{send_loop, Sending};

pub(crate) use self::in_kernel::paced_in_kernel;
pub use self::report::{FlowReport, HandoverError, PortReport};

/// What to do when the worker falls behind its schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LatePolicy {
    Shift,
    CatchUp,
    Smooth,
}

/// Options of a transmit run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Frames handed to the backend at once; None = 1 when paced, 32 otherwise.
    pub batch: Option<usize>,
    pub late_policy: LatePolicy,
    pub late_tolerance_ns: u64,
    /// Ignore deadlines and send as fast as possible (engine cost, `--rate max`).
    pub unpaced: bool,
    /// Stop after this much real time (unpaced runs with a time limit).
    pub time_limit_ns: Option<u64>,
    /// Lead time between starting the worker and the schedule's t0.
    pub start_lead_ns: u64,
    /// Start the schedule at this CLOCK_REALTIME time instead (a multi-host run's
    /// synchronized start: every agent's senders take one t0); a time already past, or
    /// closer than `start_lead_ns`, starts `start_lead_ns` after the worker is ready, and the
    /// port's report says when it did start (`t0_unix_ns`).
    pub start_at_unix_ns: Option<u64>,
    /// Or wait, ready, until the gate is given that time (a controller opens every agent's
    /// gate once every agent's receivers are open, see [`StartGate`]).
    pub start_gate: Option<Arc<StartGate>>,
    /// Live counters to publish to (status lines), if anyone watches.
    pub live: Option<Arc<LiveCounters>>,
    /// How long receivers keep counting after the last frame was sent.
    pub drain_ns: u64,
    /// When set during the drain, ends it at once (a second Ctrl-C).
    pub drain_abort: Option<Arc<std::sync::atomic::AtomicBool>>,
    /// Pin each worker to its own core when there are enough cores.
    pub pin: bool,
    /// Transmit workers per transmit port (cores): constant-rate flows stay whole on one
    /// worker, Poisson flows are split over all of them.
    pub tx_workers: usize,
    /// Receive with the NIC's hardware timestamps (mapped to CLOCK_REALTIME by a clock sync
    /// before the run).
    pub hardware_timestamps: bool,
    /// Keep each flow's latency per interval of this length too (interval logs).
    pub latency_interval_ns: Option<u64>,
    /// Hand each finished interval to the watcher's next tick (a live view) rather than
    /// keep it for the report; the report keeps only those finished after the last tick.
    pub live_latency_intervals: bool,
    /// Receive workers never yield their core (user-space receive timestamps, as on AF_XDP,
    /// then do not wait for a worker's wake-up).
    pub rx_busy_poll: bool,
    /// The run tag in every trailer (see [`strobe_wire::trailer`]); receivers count frames
    /// with another tag apart. [`run_scenario`](crate::run_scenario) picks one when None.
    pub run_tag: Option<u8>,
    /// First sequence number of every flow (tests start near the 2^32 wrap).
    pub seq_start: u32,
    /// Floors known per port name before the run (given with `--floor`, or remembered from
    /// an earlier run); paced ports without one learn theirs from their own first
    /// hand-overs (see [`crate::port_floor`]).
    pub floors: Vec<(String, crate::port_floor::KnownFloor)>,
    /// While set, transmitters hand nothing over; when cleared, the schedule resumes where
    /// it stopped, later by the pause (a pause is neither late nor a stall).
    pub pause: Option<Arc<std::sync::atomic::AtomicBool>>,
    /// Flows stopped while the others go on: a stopped flow's schedule ends after the
    /// hand-over in progress; a port whose flows are all stopped ends.
    pub flow_switches: Option<Arc<crate::live::FlowSwitches>>,
    /// Write every frame in the engine, even where the backend could generate the flow
    /// itself (`xdp-live`'s kernel program): for comparing the two.
    pub engine_frames: bool,
    /// Ports counted in the kernel (`xdp-count:`) pass the frames they counted on to the
    /// stack rather than drop them (a capture on the port needs them).
    pub pass_counted: bool,
    /// Latency runs from the time each frame left as AF_XDP TX metadata stamps it (the
    /// NIC's stamp, zero-copy on a driver that stamps), not from its trailer's stamp: every
    /// transmit port must be `afxdp:`, every receiver in this process.
    pub tx_metadata_stamps: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            batch: None,
            late_policy: LatePolicy::Smooth,
            late_tolerance_ns: 1_000,
            unpaced: false,
            time_limit_ns: None,
            start_lead_ns: 200_000,
            start_at_unix_ns: None,
            start_gate: None,
            live: None,
            drain_ns: 500_000_000,
            drain_abort: None,
            pin: true,
            tx_workers: 1,
            hardware_timestamps: false,
            latency_interval_ns: None,
            live_latency_intervals: false,
            rx_busy_poll: false,
            run_tag: None,
            seq_start: 0,
            floors: Vec::new(),
            pause: None,
            flow_switches: None,
            engine_frames: false,
            pass_counted: false,
            tx_metadata_stamps: false,
        }
    }
}

/// A synchronized start's time, given once the run is ready everywhere: transmit workers
/// wait at the gate (ports open, nothing sent) until it is opened with a CLOCK_REALTIME time,
/// then start their schedules there.
#[derive(Debug, Default)]
pub struct StartGate(std::sync::atomic::AtomicU64);

impl StartGate {
    /// Lets the workers start at `unix_ns` (0 is taken as 1 ns: any time already past).
    pub fn open_at(&self, unix_ns: u64) {
        self.0
            .store(unix_ns.max(1), std::sync::atomic::Ordering::SeqCst);
    }

    pub fn is_open(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::SeqCst) != 0
    }

    /// Waits until the gate is opened (its time) or `stop` is set (None).
    fn wait(&self, stop: &AtomicBool) -> Option<u64> {
        loop {
            let at = self.0.load(std::sync::atomic::Ordering::SeqCst);
            if at != 0 {
                return Some(at);
            }
            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                return None;
            }
            std::thread::sleep(std::time::Duration::from_micros(500));
        }
    }
}

/// Runs one port's flows on `backend` until every flow's duration is over or `stop` is set.
///
/// `pacing` is the port's floor (paced runs coalesce their hand-overs to it; without a known
/// floor they learn it from their first hand-overs).
pub fn run_port<B: Backend>(
    port_name: &str,
    backend: &mut B,
    flows: &[FlowSpec],
    clock: &Clock,
    opts: &RunOptions,
    pacing: Option<PortPacing>,
    stop: &AtomicBool,
) -> Result<PortReport, EngineError> {
    // A gated start: ready, wait for the time (a stop while waiting sends nothing).
    let opened;
    let opts = match opts.start_gate.as_ref().map(|g| g.wait(stop)) {
        Some(Some(at)) => {
            opened = RunOptions {
                start_at_unix_ns: Some(at),
                start_gate: None,
                ..opts.clone()
            };
            &opened
        }
        // Stopped at the gate: nothing was sent, and nothing starts (not even a kernel
        // program).
        Some(None) => {
            return Ok(PortReport {
                name: port_name.to_string(),
                backend: backend.describe(),
                stopped_early: true,
                ..PortReport::default()
            })
        }
        None => opts,
    };
    // Set-up: every flow compiled, and what the port is.
    let states = flow_states(flows, backend.time_base(), opts)?;
    let shape = PortShape::of(backend, flows, &states, opts);
    // Frames the backend's own program can generate are handed to it; else the engine
    // writes them, and the report says why when the program could not.
    let generation = match start_in_kernel(backend, &states, flows, clock, opts, &shape, stop) {
        KernelStart::Started(handed) => {
            let mut report = run_in_kernel(port_name, backend, states, &handed, clock, opts, stop);
            // The program paces: the engine's floor plays no part (see `paced_in_kernel`).
            report.pacing = pacing.filter(|_| shape.paced);
            return Ok(report);
        }
        KernelStart::Engine(generation) => generation,
    };
    // The hand-overs: how many frames each, coalesced to which floor.
    let handovers = Handovers::plan(backend, &states, opts, pacing.as_ref(), &shape);
    let batch = handovers.batch;
    let report = PortReport {
        name: port_name.to_string(),
        backend: backend.describe(),
        scheduled_time: shape.scheduled_time,
        batch,
        generation,
        pacing: pacing.filter(|_| shape.paced).map(|p| PortPacing {
            max_batch: batch,
            ceiling_pps: p.floor.map(|f| f.ceiling_pps(batch)),
            ..p
        }),
        ..PortReport::default()
    };
    // The send loop, from t0 (taken once everything is ready) to the last frame.
    let sending = Sending::start(backend, clock, opts, &shape, stop);
    let sent = send_loop(
        port_name, backend, states, flows, clock, opts, stop, &shape, handovers, report, sending,
    )?;
    // The end of the run: what the backend still holds leaves, then the figures.
    let sent = finish::drain(backend, sent);
    Ok(finish::final_report(sent, flows, clock, &shape, batch))
}

/// What a port and its flows are, fixed before the first frame; every later stage reads it.
#[derive(Clone, Copy, Debug)]
struct PortShape {
    /// The backend writes a trace in scheduled time (no clock to wait for).
    scheduled_time: bool,
    /// Hand-overs wait for their deadlines.
    paced: bool,
    /// Some flow's latency is measured: every batch shares one transmit stamp, so unpaced
    /// runs keep batches short.
    latency_measured: bool,
    /// When the port's last frame is due, where every flow's schedule fixes it.
    last_deadline_ns: Option<u64>,
}

impl PortShape {
    /// Reads what the port is from its backend, its flows and the run's options.
    fn of<B: Backend>(
        backend: &B,
        flows: &[FlowSpec],
        states: &[FlowState],
        opts: &RunOptions,
    ) -> PortShape {
        let scheduled_time = backend.time_base() == TimeBase::Scheduled;
        let paced = !scheduled_time && !opts.unpaced;
        // When the port's last frame is due, where every flow's schedule fixes it: `Smooth`
        // pays a shift back by then, so the run keeps its asked duration and mean rate.
        let last_deadline_ns = flows
            .iter()
            .zip(states)
            .map(|(f, s)| {
                s.fixed
                    .and_then(|(size, _)| f.schedule.last_departure_ns(size))
            })
            .collect::<Option<Vec<u64>>>()
            .and_then(|ends| ends.into_iter().max());
        // A batch shares one transmit stamp: unpaced runs that measure latency keep batches
        // short; pure throughput runs take the batch that sends fastest.
        let latency_measured = flows
            .iter()
            .any(|f| !f.rx_ports.is_empty() && f.metrics.latency.is_some());
        PortShape {
            scheduled_time,
            paced,
            latency_measured,
            last_deadline_ns,
        }
    }
}

/// How the port hands frames over: at most `batch` at once, and for a paced port with a
/// floor, coalesced to it (the floor, and the estimate the run's own calls refine).
struct Handovers {
    batch: usize,
    coalesce: Option<(PathFloor, FloorEstimate)>,
    /// Some flow sends convoys of trains (each train's head goes alone).
    has_trains: bool,
}

impl Handovers {
    /// Paced ports with a floor coalesce up to the longest batch; paced ones without, one
    /// frame a hand-over; unpaced ones take a short batch when latency is measured (one
    /// stamp a batch), else the backend's fastest. `opts.batch` overrides; the backend's
    /// slots cap it.
    fn plan<B: Backend>(
        backend: &B,
        states: &[FlowState],
        opts: &RunOptions,
        pacing: Option<&PortPacing>,
        shape: &PortShape,
    ) -> Handovers {
        let PortShape {
            paced,
            latency_measured,
            ..
        } = *shape;
        let has_trains = states.iter().any(|s| s.train.is_some());
        let coalesce = pacing.filter(|_| paced).map(|p| {
            let estimate = p
                .floor
                .map_or_else(FloorEstimate::learning, FloorEstimate::new);
            (estimate.floor(), estimate)
        });
        let batch = opts
            .batch
            .unwrap_or(if coalesce.is_some() {
                MAX_BATCH
            } else if paced {
                1
            } else if latency_measured {
                strobe_io::UNPACED_BATCH
            } else {
                backend.throughput_batch()
            })
            .clamp(1, backend.slot_count().clamp(1, MAX_BATCH));
        Handovers {
            batch,
            coalesce,
            has_trains,
        }
    }
}
