//! strobe-engine: turns a scenario into frames on backends.
//!
//! - [`generator`]: per-flow templates with incremental checksum updates (no per-packet
//!   rebuild, no allocation).
//! - [`worker`]: one transmit worker per port walking an absolute-deadline schedule on the
//!   TSC ([`clock`]), flows merged by deadline.
pub mod behind;
pub mod clock;
mod earliest;
pub mod generator;
pub mod intervals;
pub mod latency;
pub mod live;
pub mod pacer;
pub mod pin;
pub mod port_floor;
pub mod reflect;
pub mod rx;
pub mod rx_worker;
pub mod split;
pub mod text;
pub mod worker;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use std::sync::atomic::Ordering;

use live::LiveCounters;
use rx::{FlowRxReport, RxTracker};
use rx_worker::{run_rx, RxPortReport};
use strobe_io::xdp_count::{CountMode, CountSetup, ProgramClock, XdpCounter};
use strobe_io::{AnyBackend, AnyReceiver, Backend, Receiver, TimeBase};
use strobe_model::{Scenario, Warning};
use strobe_timing::{Duration, Pattern, ScheduleSpec};

pub use clock::{Clock, ClockSource, SimTime};
pub use generator::FlowGenerator;
pub use port_floor::{FloorSource, KnownFloor, PortPacing};
pub use worker::{
    run_port, FlowReport, HandoverError, LatePolicy, PortReport, RunOptions, StartGate,
};

/// Errors that stop a run.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("flow `{flow}`: {message}")]
    Flow { flow: String, message: String },
    #[error("port `{port}`: {source}")]
    Port {
        port: String,
        #[source]
        source: strobe_io::IoError,
    },
    #[error(transparent)]
    Io(#[from] strobe_io::IoError),
    #[error("backend: {0}")]
    Backend(String),
    #[error("port `{port}` cannot take several transmit workers (--cores): {reason}")]
    Workers { port: String, reason: String },
    #[error(
        "{0} flows — at most {max} are accepted (flow ids are 16 bits)",
        max = strobe_model::MAX_FLOWS
    )]
    TooManyFlows(usize),
    #[error("cannot start {thread}: {source} (too many threads for this process or user? check `ulimit -u` and the cgroup's pids.max)")]
    Spawn {
        thread: String,
        #[source]
        source: std::io::Error,
    },
    #[error("a worker of port `{0}` panicked")]
    WorkerPanicked(String),
    #[error(
        "flow `{flow}` never ends, but port `{port}` writes a trace in scheduled time, which would \
         fill the disk: give it a duration (fixed_packets, fixed_seconds, or burst with bursts > 0; \
         on the command line --count or --duration)"
    )]
    Endless { flow: String, port: String },
}

impl EngineError {
    /// Whether the error comes from what the user asked for (as opposed to a failure while
    /// running): the front end exits with a different code.
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            EngineError::Flow { .. }
                | EngineError::Port { .. }
                | EngineError::Endless { .. }
                | EngineError::Workers { .. }
                | EngineError::TooManyFlows(_)
        )
    }
}

/// A warning when the run's workers (transmit workers of every sending port plus one
/// receive worker per receiving port) outnumber the cores this process may use: they then
/// share cores, and paced timing suffers. None when every worker has a core of its own.
pub fn oversubscription(scenario: &Scenario, tx_workers: usize) -> Option<Warning> {
    // As `split::split` spreads them: Poisson flows over every worker, others one per worker.
    let tx: usize = scenario
        .ports
        .iter()
        .filter(|p| !p.location.is_remote())
        .map(|p| {
            let cores = p.cores.unwrap_or(tx_workers).max(1);
            let flows = scenario.flows.iter().filter(|f| f.tx_port == p.name);
            if flows
                .clone()
                .any(|f| matches!(f.schedule.pattern, Pattern::Poisson))
            {
                cores
            } else {
                cores.min(flows.count())
            }
        })
        .sum();
    let rx = scenario
        .ports
        .iter()
        .filter(|p| !p.location.is_remote())
        .filter(|p| scenario.flows.iter().any(|f| f.rx_ports.contains(&p.name)))
        .count();
    let cores = pin::allowed_cores().len();
    (cores > 0 && tx + rx > cores).then(|| Warning::CoresOversubscribed {
        tx_workers: tx,
        rx_workers: rx,
        cores,
        cores_to_ask: cores.saturating_sub(rx).max(1),
    })
}

/// A paced worker's floor: the one known for its port in `opts.floors` (given or
/// remembered), else learned from the run's own first hand-overs. Nothing is sent here.
fn port_pacing(
    worker: &str,
    port: &str,
    location: &str,
    backend: &AnyBackend,
    flows: &[strobe_model::FlowSpec],
    opts: &RunOptions,
) -> PortPacing {
    let max_batch = opts
        .batch
        .unwrap_or(strobe_io::MAX_BATCH)
        .clamp(1, backend.slot_count().clamp(1, strobe_io::MAX_BATCH));
    let known = opts
        .floors
        .iter()
        .find(|(name, _)| name == port)
        .map(|(_, known)| *known);
    PortPacing::new(worker, location, known, max_batch, flows)
}

/// Whether a flow's schedule comes to an end by itself.
fn schedule_ends(spec: &ScheduleSpec) -> bool {
    match spec.duration {
        Duration::Continuous => matches!(spec.pattern, Pattern::Replay { .. }),
        Duration::Bursts { bursts, .. } => bursts > 0,
        Duration::Packets(_) | Duration::Seconds(_) => true,
    }
}

/// How a NIC's hardware clock relates to CLOCK_REALTIME (the clock of the transmit stamps),
/// measured before a run so its hardware receive timestamps give latencies: 6 rounds of the
/// A-B-A median sync, 200 ms apart. The drift is fitted over a whole second so that its
/// error, extrapolated over the run, stays small (read noise of tens of ns over 1 s is tens
/// of ppb: about 1 µs after a minute).
fn sync_hardware_clock(
    phc: &str,
) -> Result<(String, strobe_io::clocksync::ClockSync), strobe_io::IoError> {
    use strobe_io::clocksync::{measure, PhcClock, SystemClock};
    let mut realtime = SystemClock::by_name("realtime").expect("CLOCK_REALTIME exists");
    let mut nic = PhcClock::open(phc)?;
    let sync = measure(
        &mut realtime,
        &mut nic,
        6,
        std::time::Duration::from_millis(200),
        std::thread::sleep,
    )?;
    Ok((phc.to_string(), sync))
}

/// CLOCK_REALTIME minus a NIC's clock now, by `sync` (measured as the NIC's minus
/// CLOCK_REALTIME): what a counting program adds to the device's receive stamps.
pub(crate) fn device_offset(sync: &strobe_io::clocksync::ClockSync) -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128);
    -(sync.offset_at(now) as i64)
}

/// The run tag of [`run_port`] when its caller chose none ([`run_scenario`] always does).
pub const DEFAULT_RUN_TAG: u8 = 0;

/// The run tag of a run's trailers: `requested`, else derived from the flows' seeds when a
/// port writes a trace in scheduled time (so traces stay reproducible), else random from the
/// OS's generator. Never [`strobe_wire::trailer::LEGACY_TAG`], so frames of strobe versions
/// before run tags read as another run's.
pub fn choose_run_tag(scenario: &Scenario, requested: Option<u8>) -> u8 {
    use rand::{RngCore, SeedableRng};
    use strobe_wire::trailer::LEGACY_TAG;
    if let Some(tag) = requested {
        return tag;
    }
    let trace = scenario
        .ports
        .iter()
        .any(|p| p.location.resolved().map(TimeBase::of) == Some(TimeBase::Scheduled));
    let tag = if trace {
        let seed = scenario.flows.iter().fold(0x5354_5241_4345u64, |acc, f| {
            acc.rotate_left(17) ^ f.schedule.seed ^ f.size_seed.rotate_left(32)
        });
        rand_xoshiro::SplitMix64::seed_from_u64(seed).next_u32() as u8
    } else {
        return random_run_tag();
    };
    if tag == LEGACY_TAG {
        tag.wrapping_add(1)
    } else {
        tag
    }
}

/// A random run tag from the OS's generator, never [`strobe_wire::trailer::LEGACY_TAG`].
pub fn random_run_tag() -> u8 {
    let tag = rand::random::<u8>();
    if tag == strobe_wire::trailer::LEGACY_TAG {
        tag.wrapping_add(1)
    } else {
        tag
    }
}

/// Results of a whole run.
#[derive(Clone, Debug)]
pub struct RunReport {
    /// The run tag its trailers carried.
    pub run_tag: u8,
    pub clock: ClockSource,
    pub ticks_per_sec: f64,
    /// Transmit side, one entry per port that sends.
    pub ports: Vec<PortReport>,
    /// Receive side, one entry per port that receives.
    pub rx_ports: Vec<RxPortReport>,
    /// Per flow (index = flow id): receive counters summed over its receive ports and the
    /// loss against what its transmit port sent; None for flows no port receives.
    pub rx_flows: Vec<Option<FlowRxReport>>,
    /// Receivers kept counting this long after the last frame was sent (less than asked when
    /// the drain was ended early).
    pub drain_ns: u64,
    /// Per-flow latency per interval (`RunOptions::latency_interval_ns`), in time order.
    pub latency_intervals: Vec<intervals::EncodedInterval>,
    /// What the layer that ran the engine knew of the run's setting and found to bear on
    /// these results (e.g. a lab whose receive steering made paced frames late), said with
    /// them. Empty from the engine.
    pub setting_warnings: Vec<Warning>,
    /// The device under test, when the layer that ran the engine knows it (a run on
    /// strobe's lab). None from the engine.
    pub device_under_test: Option<strobe_model::DeviceUnderTest>,
    /// Flows with metric tags, per tag position: the OTG `tagged_metrics` (the flow's own
    /// figures above are the sum of its positions).
    pub tagged: Vec<TaggedFlowReport>,
}

impl RunReport {
    /// Frames flow `flow_id` sent, over every port (and worker) that sent it.
    pub fn frames_sent(&self, flow_id: u16) -> u64 {
        self.ports
            .iter()
            .flat_map(|p| &p.flows)
            .filter(|f| f.id == flow_id)
            .map(|f| f.frames)
            .sum()
    }
}

/// What a watcher of a running run is shown, about once per `tick` interval.
pub struct Tick<'a> {
    /// Once, before the first frame: every paced port's floor and ceiling (the flows and
    /// counters are then empty). None on every other tick.
    pub ready: Option<&'a [PortPacing]>,
    /// Once, as soon as every worker has started (counters all zero): the run is under way.
    pub started: bool,
    /// Time since the transmitters started.
    pub elapsed_ns: u64,
    pub flows: &'a [live::FlowSnapshot],
    pub rx_other: u64,
    /// Per-flow latency intervals finished since the last tick, when the run hands them
    /// to its watcher ([`RunOptions::live_latency_intervals`]); empty otherwise.
    pub intervals: &'a [intervals::EncodedInterval],
    /// Every transmitter of this process has ended (a run holding its receivers for other
    /// hosts' frames goes on: its own flows are done).
    pub transmitters_done: bool,
    /// What the user should be told now, while the run goes on (a paced port that keeps
    /// falling behind its schedule, see [`behind`]); each said once, in a tick of its own
    /// whose `flows` are empty (not a sample of the counters).
    pub warnings: &'a [Warning],
    /// Flows with metric tags: each tag position's counters (see [`RunReport::tagged`]).
    pub tagged: &'a [TaggedSnapshot],
}

/// A tagged flow's counters at one instant, per tag position (scenario flow `flow_id`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaggedSnapshot {
    pub flow_id: u16,
    pub positions: Vec<live::FlowSnapshot>,
}

/// A tagged flow's results per tag position ([`strobe_model::TagPlan`]): what each sent
/// and, when a port receives the flow, what arrived of it.
#[derive(Clone, Debug)]
pub struct TaggedFlowReport {
    pub flow_id: u16,
    pub positions: Vec<TagPositionReport>,
}

#[derive(Clone, Debug)]
pub struct TagPositionReport {
    pub frames_tx: u64,
    /// Without FCS, as [`worker::FlowReport::bytes`].
    pub bytes_tx: u64,
    pub rx: Option<FlowRxReport>,
}

impl Tick<'_> {
    /// A tick that carries only warnings, not a sample of the counters.
    pub fn warnings_only(&self) -> bool {
        !self.warnings.is_empty() && self.flows.is_empty()
    }
}

/// A finished receive worker's report and counts.
fn join_rx(
    handle: std::thread::ScopedJoinHandle<'_, (RxPortReport, RxTracker)>,
    name: &str,
) -> Result<(RxPortReport, RxTracker), EngineError> {
    handle
        .join()
        .map_err(|_| EngineError::WorkerPanicked(name.to_string()))
}

/// Every port's location, as the scenario holds it (parsed where it was read): `lab:` ends
/// must have been resolved (`strobe-control`'s plan does); None for another host's port
/// (`remote:`), which this process neither opens nor reads.
fn port_locations(scenario: &Scenario) -> Result<Vec<Option<strobe_io::Location>>, EngineError> {
    scenario
        .ports
        .iter()
        .map(|p| {
            if p.location.is_remote() {
                return Ok(None);
            }
            p.location
                .resolved()
                .cloned()
                .map(Some)
                .ok_or_else(|| EngineError::Port {
                    port: p.name.clone(),
                    source: strobe_io::IoError::Other(format!(
                        "`{}` is one of the virtual lab's ends: resolve it to the lab's interface \
                     first (strobe-control's plan does)",
                        p.location
                    )),
                })
        })
        .collect()
}

/// Whether receivers count until told to stop rather than until this process's own
/// transmitters end: some flow is sent by another host's agent and received here (a
/// multi-host run, whose controller stops it once every sender is done).
pub fn receives_from_other_hosts(scenario: &Scenario) -> bool {
    let remote = |name: &str| {
        scenario
            .ports
            .iter()
            .any(|p| p.name == name && p.location.is_remote())
    };
    scenario
        .flows
        .iter()
        .any(|f| remote(&f.tx_port) && f.rx_ports.iter().any(|r| !remote(r)))
}

/// A transmit worker ready to start: its name, its open port, its flows and its pacing.
type TxJob = (
    String,
    AnyBackend,
    Vec<strobe_model::FlowSpec>,
    Option<PortPacing>,
);

/// Opens the transmit side of every port that sends, one backend per worker (flows split
/// over a port's workers get ids from `next_id`, their parents noted in `parent`), each
/// checked against its flows' frame sizes and given its pacing.
fn open_transmitters(
    scenario: &Scenario,
    locations: &[Option<strobe_io::Location>],
    opts: &RunOptions,
    tag_ids: &[Vec<u16>],
    next_id: &mut usize,
    parent: &mut Vec<u16>,
) -> Result<Vec<TxJob>, EngineError> {
    let mut tx_jobs = Vec::new();
    for (port, location) in scenario.ports.iter().zip(locations) {
        let flows: Vec<_> = scenario
            .flows
            .iter()
            .filter(|f| f.tx_port == port.name)
            .map(|f| strobe_model::FlowSpec {
                tag_ids: tag_ids[usize::from(f.id)].clone(),
                ..f.clone()
            })
            .collect();
        if flows.is_empty() {
            continue;
        }
        let workers = port.cores.unwrap_or(opts.tx_workers).max(1);
        if workers > strobe_model::MAX_CORES {
            return Err(EngineError::Workers {
                port: port.name.clone(),
                reason: format!(
                    "{workers} transmit workers asked; at most {} are accepted",
                    strobe_model::MAX_CORES
                ),
            });
        }
        let Some(location) = location else {
            // Another host sends these: their sub-flow ids are taken all the same, so that
            // ids here are those in the sender's trailers (agents split alike).
            split::split(&flows, workers, next_id, parent).ok_or_else(|| EngineError::Workers {
                port: port.name.clone(),
                reason: "splitting Poisson flows needs more than 65536 flow ids".into(),
            })?;
            continue;
        };
        let scheduled = TimeBase::of(location) == TimeBase::Scheduled;
        if scheduled {
            if let Some(f) = flows.iter().find(|f| !schedule_ends(&f.schedule)) {
                return Err(EngineError::Endless {
                    flow: f.name.clone(),
                    port: port.name.clone(),
                });
            }
            if workers > 1 {
                return Err(EngineError::Workers {
                    port: port.name.clone(),
                    reason: "a pcap trace is written by one worker".into(),
                });
            }
        }
        let per_worker =
            split::split(&flows, workers, next_id, parent).ok_or_else(|| EngineError::Workers {
                port: port.name.clone(),
                reason: "splitting Poisson flows needs more than 65536 flow ids".into(),
            })?;
        let batch = opts.batch.unwrap_or(strobe_io::MAX_BATCH);
        for (k, worker_flows) in per_worker.into_iter().enumerate() {
            if worker_flows.is_empty() {
                continue;
            }
            let backend = AnyBackend::open_with(
                &location.for_worker(k as u32),
                batch,
                opts.tx_metadata_stamps,
            )
            .map_err(|source| EngineError::Port {
                port: port.name.clone(),
                source,
            })?;
            // Every frame must fit the port (its MTU, its ring or UMEM frames): refused
            // here, before anything is sent, never cut short or overrun while sending.
            for f in &worker_flows {
                let len = (f.size.max() as usize).saturating_sub(strobe_model::FCS_LEN as usize);
                if len > backend.max_frame_len() {
                    return Err(EngineError::Flow {
                        flow: f.name.clone(),
                        message: format!("port `{}`: {}", port.name, backend.frame_too_long(len)),
                    });
                }
            }
            let name = if workers > 1 {
                format!("{}#{k}", port.name)
            } else {
                port.name.clone()
            };
            let mut backend = backend;
            backend
                .set_paced(!(scheduled || opts.unpaced))
                .map_err(|source| EngineError::Port {
                    port: port.name.clone(),
                    source,
                })?;
            let pacing = if scheduled
                || opts.unpaced
                || worker::paced_in_kernel(&mut backend, &worker_flows, opts)
            {
                None
            } else {
                Some(port_pacing(
                    &name,
                    &port.name,
                    &location.to_string(),
                    &backend,
                    &worker_flows,
                    opts,
                ))
            };
            tx_jobs.push((name, backend, worker_flows, pacing));
        }
    }
    Ok(tx_jobs)
}

/// A receive worker ready to start: its port's name, its open receiver, its tracker, its
/// hardware clock's sync and the interface's drop counter.
/// What a receive port counts with.
// One per receive port, moved once into its worker: the variants' sizes do not matter, and
// boxing the receiver would put a pointer between the worker and its ring.
#[allow(clippy::large_enum_variant)]
enum RxPort {
    /// Frames handed to user space, counted by the port's worker.
    Frames(AnyReceiver),
    /// Frames counted in the kernel by an XDP program (`xdp-count:`), and its description.
    Kernel(XdpCounter, String),
}

type RxJob = (
    String,
    RxPort,
    RxTracker,
    Option<(String, strobe_io::clocksync::ClockSync)>,
    Option<(strobe_io::ifdrops::InterfaceDrops, bool)>,
);

/// Trailer flow ids for every tagged flow's tag positions (index = flow id; empty for a
/// flow without tags): position 0 keeps the flow's id, the others take ids from `next_id`
/// on, their parent noted. In scenario order, before any flow is split, so that every host
/// of a run numbers them alike.
fn assign_tag_ids(
    scenario: &Scenario,
    next_id: &mut usize,
    parent: &mut Vec<u16>,
) -> Result<Vec<Vec<u16>>, EngineError> {
    let mut all = Vec::with_capacity(scenario.flows.len());
    for f in &scenario.flows {
        let plan = f.tag_plan().map_err(|message| EngineError::Flow {
            flow: f.name.clone(),
            message,
        })?;
        let Some(plan) = plan.filter(|_| f.metrics.instrument) else {
            all.push(Vec::new());
            continue;
        };
        let mut ids = vec![f.id];
        for _ in 1..plan.positions.len() {
            let id = u16::try_from(*next_id).map_err(|_| EngineError::Flow {
                flow: f.name.clone(),
                message: format!(
                    "its {} tag positions need more than 65536 flow ids in the run (each tag position is counted as a flow) — tag fewer values",
                    plan.positions.len()
                ),
            })?;
            *next_id += 1;
            parent.push(f.id);
            ids.push(id);
        }
        all.push(ids);
    }
    Ok(all)
}

/// What a receiver needs to tell this run's frames and their stamps: the run tag, the
/// earliest transmit stamp of the run, and the senders' stamps from TX metadata, if taken.
#[derive(Clone, Copy)]
struct RunStamps<'a> {
    run_tag: u8,
    run_start_ns: u64,
    tx_board: Option<&'a Arc<strobe_io::tx_stamps::TxStampBoard>>,
}

/// The transmit stamps of a run from AF_XDP TX metadata: the board its senders publish on,
/// where each transmit job's stamps come from, and the NICs' transmit stamping that was
/// turned on for the run (turned off again when this is dropped, after the receivers).
struct TxStampSetup {
    board: Arc<strobe_io::tx_stamps::TxStampBoard>,
    sources: Vec<String>,
    stamping: Vec<strobe_io::tsinfo::TransmitStamping>,
}

/// Has every transmit port publish its frames' transmit stamps from AF_XDP TX metadata on one
/// board for the run's receivers. Refused for a flow sent or received by another host: the
/// board is in this process.
fn stamp_transmits(
    scenario: &Scenario,
    locations: &[Option<strobe_io::Location>],
    tx_jobs: &mut [TxJob],
    ids: usize,
    run_tag: u8,
) -> Result<TxStampSetup, EngineError> {
    let elsewhere = |port: &str| {
        scenario
            .ports
            .iter()
            .zip(locations)
            .any(|(p, l)| p.name == port && l.is_none())
    };
    for f in &scenario.flows {
        let remote = std::iter::once(&f.tx_port)
            .chain(&f.rx_ports)
            .find(|p| elsewhere(p));
        if let Some(port) = remote {
            return Err(EngineError::Flow {
                flow: f.name.clone(),
                message: format!(
                    "port `{port}` is on another host, and transmit stamps from AF_XDP TX metadata reach only receivers in the same strobe process as their sender; leave --tx-timestamps at strobe"
                ),
            });
        }
    }
    let board = Arc::new(strobe_io::tx_stamps::TxStampBoard::new(ids));
    let completion_ok = strobe_io::tx_stamps::completion_stamps_for_tests();
    let mut sources = Vec::with_capacity(tx_jobs.len());
    let mut stamping = Vec::new();
    for (name, backend, _, _) in tx_jobs.iter_mut() {
        let on = backend
            .stamp_transmits(Arc::clone(&board), run_tag, completion_ok)
            .map_err(|source| EngineError::Port {
                port: name.clone(),
                source,
            })?;
        sources.push(format!(
            "{}, moved to CLOCK_REALTIME (a frame without one in time is left out of latency; the receive port counts them)",
            on.source
        ));
        stamping.extend(on.stamping);
    }
    Ok(TxStampSetup {
        board,
        sources,
        stamping,
    })
}

/// Opens a receiver on every port some flow names as a receiver, with a tracker for the
/// run's flow ids (`parent` maps each to its scenario flow) that takes this run's frames
/// (`run`), and its senders' stamps from TX metadata when they are taken.
fn open_receivers(
    scenario: &Scenario,
    locations: &[Option<strobe_io::Location>],
    opts: &RunOptions,
    parent: &[u16],
    ids: usize,
    run: &RunStamps<'_>,
) -> Result<Vec<RxJob>, EngineError> {
    let RunStamps {
        run_tag,
        run_start_ns,
        tx_board,
    } = *run;
    let mut rx_jobs = Vec::new();
    for (port, location) in scenario.ports.iter().zip(locations) {
        let Some(location) = location else {
            continue;
        };
        if !scenario
            .flows
            .iter()
            .any(|f| f.rx_ports.contains(&port.name))
        {
            continue;
        }
        let port_error = |source| EngineError::Port {
            port: port.name.clone(),
            source,
        };
        if let strobe_io::Location::XdpCount { netns, iface } = location {
            if tx_board.is_some() {
                return Err(port_error(strobe_io::IoError::Other(format!(
                    "xdp-count:{iface} keeps latency in the kernel, where transmit stamps from AF_XDP TX metadata cannot reach it: receive with afxdp:{iface} or afpacket:{iface}, or leave --tx-timestamps at strobe"
                ))));
            }
            let trains = scenario.flows.iter().find(|f| {
                f.rx_ports.contains(&port.name)
                    && matches!(
                        f.schedule.duration,
                        strobe_timing::Duration::Bursts { bursts, .. } if bursts > 0
                    )
            });
            if let Some(f) = trains {
                return Err(port_error(strobe_io::IoError::Other(format!(
                    "flow `{}` is a convoy of trains, followed train by train only by a receiver that sees each frame: receive it with afxdp:{iface} or afpacket:{iface}",
                    f.name
                ))));
            }
            if opts.hardware_timestamps {
                let info = strobe_io::tsinfo::query_ts_info(netns.as_deref(), iface)
                    .map_err(port_error)?;
                if info.every_frame_stamped_on().is_none() {
                    return Err(port_error(strobe_io::IoError::Other(format!(
                        "xdp-count:{iface}: hardware receive timestamps asked for, but the interface cannot stamp every frame in hardware ({}); leave them off to stamp frames with the kernel's clock",
                        info.summary()
                    ))));
                }
                let why_not =
                    match strobe_io::xdp_features::rx_metadata_timestamps(netns.as_deref(), iface)
                        .map_err(port_error)?
                    {
                        Some(true) => None,
                        Some(false) => Some("its driver gives no timestamp in its XDP RX metadata"),
                        None => Some(
                            "this kernel reports no XDP RX metadata (it needs Linux 6.3 or later)",
                        ),
                    };
                if let Some(why_not) = why_not {
                    return Err(port_error(strobe_io::IoError::Other(format!(
                        "xdp-count:{iface}: hardware receive timestamps asked for, but {why_not}; receive with afpacket:{iface} --hw-timestamps, or leave them off to stamp frames with the kernel's clock"
                    ))));
                }
            }
            let mut counter = XdpCounter::new(CountSetup {
                run_tag,
                flows: ids,
                pass_counted: opts.pass_counted,
                // The driver's stamp from its XDP RX metadata, the kernel's clock for any
                // frame it has none for.
                clock: if opts.hardware_timestamps {
                    ProgramClock::Device
                } else {
                    ProgramClock::Kernel
                },
            })
            .map_err(port_error)?;
            for (id, &p) in parent.iter().enumerate() {
                counter.set_latency(id, scenario.flows[p as usize].metrics.latency.is_some());
            }
            counter.check_stamps_from(run_start_ns);
            let (mode, note) = counter
                .attach(iface, netns.as_deref())
                .map_err(port_error)?;
            if let Some(note) = note {
                eprintln!("note: {note}");
            }
            let hardware_sync = match counter.device_clock() {
                Some(phc) => {
                    let (phc, sync) = sync_hardware_clock(phc).map_err(port_error)?;
                    counter.set_device_offset(device_offset(&sync));
                    Some((phc, sync))
                }
                None if opts.hardware_timestamps => {
                    return Err(port_error(strobe_io::IoError::Other(format!(
                        "xdp-count:{iface}: the interface's hardware clock was not found once the program was attached"
                    ))))
                }
                None => None,
            };
            let stamps = match &hardware_sync {
                Some((phc, _)) => format!(
                    "receive stamps from the driver's XDP RX metadata in {phc}'s time moved to CLOCK_REALTIME, from bpf_ktime_get_ns for frames it gives none"
                ),
                None => "receive stamps from bpf_ktime_get_ns moved to CLOCK_REALTIME".to_string(),
            };
            let described = format!(
                "{location} (an XDP program, {} mode, counts every frame in the kernel and {}; {stamps}; {} KiB of counters per CPU and flow id, {} × {})",
                match mode {
                    CountMode::Native => "native",
                    CountMode::Generic => "generic",
                },
                if opts.pass_counted { "passes it on" } else { "drops it" },
                strobe_io::xdp_count::BLOCK_BYTES >> 10,
                counter.cpus(),
                ids,
            );
            let mut tracker = RxTracker::new(ids, run_tag);
            tracker.check_stamps_from(run_start_ns);
            let interface_drops =
                strobe_io::ifdrops::InterfaceDrops::start(netns.as_deref(), iface)
                    .map(|d| (d, false));
            rx_jobs.push((
                port.name.clone(),
                RxPort::Kernel(counter, described),
                tracker,
                hardware_sync,
                interface_drops,
            ));
            continue;
        }
        let receiver =
            AnyReceiver::open_at(location, opts.hardware_timestamps).map_err(port_error)?;
        let hardware_sync = match receiver.hardware_clock() {
            Some(phc) => Some(
                sync_hardware_clock(&phc).map_err(|source| EngineError::Port {
                    port: port.name.clone(),
                    source,
                })?,
            ),
            None => None,
        };
        let mut tracker = RxTracker::new(ids, run_tag);
        tracker.check_stamps_from(run_start_ns);
        if let Some(board) = tx_board {
            tracker.take_tx_stamps_from(Arc::clone(board));
        }
        for (id, &p) in parent.iter().enumerate() {
            let spec = &scenario.flows[p as usize];
            tracker.set_latency(id as u16, spec.metrics.latency.is_some());
            // A convoy of trains (OTG's burst duration: a count of bursts) is followed
            // train by train; its sequence numbers say which train a frame belongs to.
            if let strobe_timing::Duration::Bursts {
                bursts, packets, ..
            } = spec.schedule.duration
            {
                // (A tagged flow's sequence numbers count per tag position, not per train.)
                let tagged = || spec.tag_plan().ok().flatten().is_some();
                if id == p as usize && bursts > 0 && spec.rx_ports.contains(&port.name) && !tagged()
                {
                    let bytes = spec.size.mean().round() as u32;
                    tracker.track_trains(id as u16, bursts, packets, opts.seq_start, bytes);
                }
            }
        }
        let interface_drops = location
            .interface()
            .and_then(|(netns, iface)| strobe_io::ifdrops::InterfaceDrops::start(netns, iface))
            .map(|d| (d, receiver.ring_drops_count_at_interface()));
        rx_jobs.push((
            port.name.clone(),
            RxPort::Frames(receiver),
            tracker,
            hardware_sync,
            interface_drops,
        ));
    }
    Ok(rx_jobs)
}

/// Runs every port of the scenario: a receive worker for each port that some flow names as
/// a receiver (started first), a transmit worker for each port with flows to send. After
/// the transmitters finish (or `stop` is set), receivers keep counting for
/// `opts.drain_ns`, then loss is final. `on_tick` is called about every `tick_ns` with the
/// live counters.
pub fn run_scenario(
    scenario: &Scenario,
    opts: &RunOptions,
    stop: Arc<AtomicBool>,
    tick_ns: u64,
    on_tick: &mut dyn FnMut(&Tick<'_>),
) -> Result<RunReport, EngineError> {
    let clock = Clock::calibrated();
    let n_flows = scenario.flows.len();
    if n_flows > strobe_model::MAX_FLOWS {
        return Err(EngineError::TooManyFlows(n_flows));
    }
    // Flow ids in use: the scenario's, then sub-flows of flows split over several workers.
    let mut parent: Vec<u16> = (0..=u16::MAX).take(n_flows).collect();
    let mut next_id = n_flows;
    let locations = port_locations(scenario)?;
    let tag_ids = assign_tag_ids(scenario, &mut next_id, &mut parent)?;
    // Open every port before any worker starts, so a bad port fails the run up front.
    let mut tx_jobs = open_transmitters(
        scenario,
        &locations,
        opts,
        &tag_ids,
        &mut next_id,
        &mut parent,
    )?;
    let pacings: Vec<PortPacing> = tx_jobs.iter().filter_map(|j| j.3.clone()).collect();
    if !pacings.is_empty() {
        on_tick(&Tick {
            ready: Some(&pacings),
            started: false,
            elapsed_ns: 0,
            flows: &[],
            rx_other: 0,
            intervals: &[],
            transmitters_done: false,
            warnings: &[],
            tagged: &[],
        });
    }
    let ids = next_id;
    let mut behind_watch = behind::BehindWatch::new(&pacings);
    let live = Arc::new(LiveCounters::new(ids).with_paced_workers(behind_watch.names()));
    let run_tag = choose_run_tag(scenario, opts.run_tag);
    let opts = &RunOptions {
        live: Some(live.clone()),
        run_tag: Some(run_tag),
        ..opts.clone()
    };
    // `_stamping` lives to the end of the run: the NICs' transmit stamping stays on until then.
    let (tx_board, stamp_sources, _stamping) = if opts.tx_metadata_stamps {
        let s = stamp_transmits(scenario, &locations, &mut tx_jobs, ids, run_tag)?;
        (Some(s.board), s.sources, s.stamping)
    } else {
        (None, Vec::new(), Vec::new())
    };
    // No transmitter has started: every stamp this run writes comes later.
    let run_start_ns = clock.realtime_now_ns();
    let rx_jobs = open_receivers(
        scenario,
        &locations,
        opts,
        &parent,
        ids,
        &RunStamps {
            run_tag,
            run_start_ns,
            tx_board: tx_board.as_ref(),
        },
    )?;

    let pins = if opts.pin {
        pin::plan(&pin::allowed_cores(), tx_jobs.len(), rx_jobs.len())
    } else {
        None
    };
    let (tx_cores, rx_cores) = pins.unwrap_or_default();
    let rx_stop = AtomicBool::new(false);
    // What the transmitters watch: the caller's `stop`, passed on by the watcher below, or
    // set when a receiver fails (sending on with nobody counting measures nothing).
    let tx_stop = AtomicBool::new(stop.load(Ordering::Relaxed));
    // Per-interval latency for interval logs: workers send snapshots, the watcher collects.
    let (interval_tx, interval_rx) = std::sync::mpsc::channel();
    let mut origin_ns = clock.realtime_now_ns();
    // Live intervals start on whole multiples of their length, so that the intervals of
    // runs that overlap (a server's) share their boundaries.
    if let (true, Some(step)) = (opts.live_latency_intervals, opts.latency_interval_ns) {
        origin_ns -= origin_ns % step.max(1);
    }
    let mut collector = opts
        .latency_interval_ns
        .map(|step| intervals::IntervalCollector::new(origin_ns, step, parent.clone()));
    let (tx_results, rx_results, drained_ns) = std::thread::scope(|scope| {
        // A worker that cannot be started ends the run: the ones already running are
        // stopped (and joined when the scope ends) and the error is returned.
        let rx_handles = rx_jobs
            .into_iter()
            .enumerate()
            .map(|(i, (name, mut receiver, mut tracker, hardware_sync, interface_drops))| {
                let (clock, live, rx_stop) = (&clock, &*live, &rx_stop);
                let sink = opts.latency_interval_ns.map(|interval_ns| rx_worker::IntervalSink {
                    worker: i,
                    origin_ns,
                    interval_ns,
                    sender: interval_tx.clone(),
                });
                let thread_name = name.clone();
                let core = rx_cores.get(i).copied();
                let handle = std::thread::Builder::new()
                    .name(format!("rx-{name}"))
                    .spawn_scoped(scope, move || {
                        if let Some(core) = core {
                            pin::pin_current_thread(core);
                        }
                        let ctx = rx_worker::RxContext {
                            live: Some(live),
                            clock,
                            hardware_clock: hardware_sync.as_ref().map(|(_, sync)| sync),
                            intervals: sink,
                            idle: if opts.rx_busy_poll {
                                rx_worker::IdlePolicy::busy()
                            } else {
                                rx_worker::IdlePolicy::default()
                            },
                        };
                        let mut report = match &mut receiver {
                            RxPort::Frames(receiver) => {
                                run_rx(&thread_name, receiver, &mut tracker, &ctx, rx_stop)
                            }
                            RxPort::Kernel(counter, described) => rx_worker::run_counted(
                                &thread_name,
                                counter,
                                described.clone(),
                                &mut tracker,
                                &ctx,
                                rx_stop,
                            ),
                        };
                        // Frames the receiver's own ring refused are counted by it.
                        report.interface_drops =
                            interface_drops.as_ref().and_then(|(d, includes_ring)| {
                                let n = d.since_start()?;
                                Some(if *includes_ring {
                                    n.saturating_sub(report.drops.ring_full)
                                } else {
                                    n
                                })
                            });
                        report.hardware_clock = hardware_sync.map(|(phc, sync)| {
                            format!(
                                "{phc} − CLOCK_REALTIME = {} ns, residual {:.0} ns, drift {:.0} ppb",
                                sync.offset_ns, sync.residual_ns, sync.drift_ppb
                            )
                        });
                        (report, tracker)
                    })
                    .map_err(|source| EngineError::Spawn {
                        thread: format!("the receive worker for port `{name}`"),
                        source,
                    })?;
                Ok((handle, name))
            })
            .collect::<Result<Vec<_>, EngineError>>();
        let mut rx_handles = match rx_handles {
            Ok(handles) => handles
                .into_iter()
                .map(|(handle, name)| (Some(handle), name, None))
                .collect::<Vec<_>>(),
            Err(e) => {
                rx_stop.store(true, Ordering::Relaxed);
                return Err(e);
            }
        };
        // Each transmitter says here that it ended, so the watch below ends with the last
        // of them, not up to one watch period later.
        let (tx_ended, tx_ending) = std::sync::mpsc::channel::<()>();
        let mut stamp_sources = stamp_sources.into_iter();
        let tx_handles = tx_jobs
            .into_iter()
            .enumerate()
            .map(|(i, (name, mut backend, flows, pacing))| {
                let stamp_source = stamp_sources.next();
                let (stop, clock) = (&tx_stop, &clock);
                let thread_name = name.clone();
                let core = tx_cores.get(i).copied();
                let ended = tx_ended.clone();
                let handle = std::thread::Builder::new()
                    .name(format!("tx-{name}"))
                    .spawn_scoped(scope, move || {
                        let _ended = EndSignal(ended);
                        let pinned = core.filter(|&c| pin::pin_current_thread(c));
                        if pinned.is_some() {
                            // The plan gives each worker a core no other worker has.
                            pacer::mark_own_core();
                        }
                        run_port(
                            &thread_name,
                            &mut backend,
                            &flows,
                            clock,
                            opts,
                            pacing,
                            stop,
                        )
                        .map(|mut report| {
                            report.core = pinned;
                            if stamp_source.is_some() {
                                report.tx_stamps = stamp_source;
                            }
                            report
                        })
                    })
                    .map_err(|source| EngineError::Spawn {
                        thread: format!("the transmit worker for port `{name}`"),
                        source,
                    })?;
                Ok((handle, name))
            })
            .collect::<Result<Vec<_>, EngineError>>();
        let tx_handles = match tx_handles {
            Ok(handles) => handles,
            Err(e) => {
                tx_stop.store(true, Ordering::Relaxed);
                rx_stop.store(true, Ordering::Relaxed);
                return Err(e);
            }
        };

        on_tick(&Tick {
            ready: None,
            started: true,
            elapsed_ns: 0,
            flows: &vec![live::FlowSnapshot::default(); n_flows],
            rx_other: 0,
            intervals: &[],
            transmitters_done: false,
            warnings: &[],
            tagged: &[],
        });
        // Watch until every transmitter is done, from a core no transmitter spins on.
        let _off_tx_cores = pin::KeepOff::cores(&tx_cores);
        let started = clock.now_ticks();
        let mut next_tick = tick_ns;
        drop(tx_ended);
        // Frames from other hosts' senders: counted until the caller stops the run.
        let hold = receives_from_other_hosts(scenario) && !rx_handles.is_empty();
        while !tx_handles.iter().all(|(h, _)| h.is_finished())
            || (hold && !stop.load(Ordering::Relaxed))
        {
            match tx_ending.recv_timeout(std::time::Duration::from_millis(20)) {
                // All signalled: the threads are returning; wait for them briefly.
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    // Or, holding for other hosts' frames with none of ours to send, wait
                    // for the stop at the pace of the watch.
                    let done = tx_handles.iter().all(|(h, _)| h.is_finished());
                    std::thread::sleep(std::time::Duration::from_micros(if hold && done {
                        20_000
                    } else {
                        100
                    }))
                }
                Ok(()) | Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            }
            if stop.load(Ordering::Relaxed) {
                tx_stop.store(true, Ordering::Relaxed);
            }
            if let Some(c) = &mut collector {
                c.extend(interval_rx.try_iter());
            }
            let elapsed_ns = clock.ticks_to_ns(clock.now_ticks() - started);
            let mut warnings = behind_watch.observe(elapsed_ns, &live.behind());
            // A receive worker ends before it is told to only when its receiver failed.
            for (handle, name, early) in &mut rx_handles {
                let Some(h) = handle.take_if(|h| h.is_finished()) else {
                    continue;
                };
                let result = join_rx(h, name);
                let why = match &result {
                    Ok((report, _)) => report.failure.clone().unwrap_or_default(),
                    Err(e) => e.to_string(),
                };
                warnings.push(Warning::ReceiverStoppedEarly {
                    port: name.to_string(),
                    error: why,
                });
                tx_stop.store(true, Ordering::Relaxed);
                *early = Some(result);
            }
            if !warnings.is_empty() {
                // Said at once, in a tick of its own: no counters, so that the regular
                // ticks' rates keep their spacing.
                on_tick(&Tick {
                    ready: None,
                    started: false,
                    elapsed_ns,
                    flows: &[],
                    rx_other: 0,
                    intervals: &[],
                    transmitters_done: tx_handles.iter().all(|(h, _)| h.is_finished()),
                    warnings: &warnings,
                    tagged: &[],
                });
            }
            if elapsed_ns >= next_tick {
                next_tick = elapsed_ns.saturating_add(tick_ns);
                let mut flows = vec![live::FlowSnapshot::default(); n_flows];
                let snapshot = live.snapshot();
                for (id, snap) in snapshot.iter().enumerate() {
                    flows[parent[id] as usize].add(snap);
                }
                let tagged: Vec<TaggedSnapshot> = tag_ids
                    .iter()
                    .enumerate()
                    .filter(|(_, ids)| !ids.is_empty())
                    .map(|(flow, ids)| TaggedSnapshot {
                        flow_id: flow as u16,
                        positions: ids
                            .iter()
                            .map(|&id| snapshot.get(id as usize).copied().unwrap_or_default())
                            .collect(),
                    })
                    .collect();
                let fresh = match (&mut collector, opts.live_latency_intervals) {
                    (Some(c), true) => c.take_finished(),
                    _ => Vec::new(),
                };
                on_tick(&Tick {
                    ready: None,
                    started: false,
                    elapsed_ns,
                    flows: &flows,
                    rx_other: live.rx_other.load(Ordering::Relaxed),
                    intervals: &fresh,
                    transmitters_done: tx_handles.iter().all(|(h, _)| h.is_finished()),
                    warnings: &[],
                    tagged: &tagged,
                });
            }
        }
        let tx_results: Vec<Result<PortReport, EngineError>> = tx_handles
            .into_iter()
            .map(|(h, name)| h.join().unwrap_or(Err(EngineError::WorkerPanicked(name))))
            .collect();
        // Frames still in flight (queues, the device under test) get the drain period,
        // unless asked to end it now.
        let drain_started = std::time::Instant::now();
        if !rx_handles.is_empty() {
            let drain = std::time::Duration::from_nanos(opts.drain_ns);
            let aborted = || {
                opts.drain_abort
                    .as_ref()
                    .is_some_and(|a| a.load(Ordering::Relaxed))
            };
            while !aborted() {
                let left = drain.saturating_sub(drain_started.elapsed());
                if left.is_zero() {
                    break;
                }
                std::thread::sleep(left.min(std::time::Duration::from_millis(10)));
            }
        }
        let drained_ns = if opts
            .drain_abort
            .as_ref()
            .is_some_and(|a| a.load(Ordering::Relaxed))
        {
            (drain_started.elapsed().as_nanos() as u64).min(opts.drain_ns)
        } else {
            opts.drain_ns
        };
        rx_stop.store(true, Ordering::Relaxed);
        // A worker without a handle was joined when it ended early.
        let rx_results: Vec<Result<(RxPortReport, RxTracker), EngineError>> = rx_handles
            .into_iter()
            .map(|(handle, name, early)| match (handle, early) {
                (Some(h), _) => join_rx(h, &name),
                (None, early) => early.unwrap_or(Err(EngineError::WorkerPanicked(name))),
            })
            .collect();
        if let Some(c) = &mut collector {
            c.extend(interval_rx.try_iter());
        }
        Ok((tx_results, rx_results, drained_ns))
    })?;
    let latency_intervals = collector.map(|c| c.finish()).unwrap_or_default();
    let mut ports = tx_results.into_iter().collect::<Result<Vec<_>, _>>()?;
    let mut rx_ports = Vec::new();
    let mut merged = RxTracker::new(ids, run_tag);
    for r in rx_results {
        let (report, tracker) = r?;
        merged.absorb(&tracker);
        rx_ports.push(report);
    }
    // Loss per flow id against what it sent, then everything under the scenario's flows.
    let mut sent = vec![0u64; ids];
    for p in &ports {
        for f in &p.flows {
            if let Some(s) = sent.get_mut(f.id as usize) {
                *s = f.frames;
            }
        }
    }
    // A tagged flow sent under each tag position's id.
    let mut tx_positions: Vec<Vec<(u64, u64)>> = vec![Vec::new(); n_flows];
    for p in &ports {
        for f in p.flows.iter().filter(|f| !f.tag_positions.is_empty()) {
            for &(id, frames, _) in &f.tag_positions {
                if let Some(s) = sent.get_mut(id as usize) {
                    *s = frames;
                }
            }
            if let Some(t) = tx_positions.get_mut(usize::from(f.id)) {
                *t = f.tag_positions.iter().map(|&(_, f, b)| (f, b)).collect();
            }
        }
    }
    for p in &mut ports {
        for f in &mut p.flows {
            f.id = parent[f.id as usize];
        }
    }
    let mut rx_flows: Vec<Option<FlowRxReport>> = scenario
        .flows
        .iter()
        .map(|f| {
            (!f.rx_ports.is_empty()).then(|| FlowRxReport {
                flow_id: f.id,
                counters: Default::default(),
                lost: Some(0),
                excess: 0,
                latency: None,
                trains: None,
            })
        })
        .collect();
    let per_id = merged.report(Some(&sent));
    for r in &per_id {
        if let Some(Some(total)) = rx_flows.get_mut(parent[r.flow_id as usize] as usize) {
            total.add(r);
        }
    }
    let tagged: Vec<TaggedFlowReport> = tag_ids
        .iter()
        .enumerate()
        .filter(|(_, ids)| !ids.is_empty())
        .map(|(flow, ids)| {
            let received = !scenario.flows[flow].rx_ports.is_empty();
            TaggedFlowReport {
                flow_id: flow as u16,
                positions: ids
                    .iter()
                    .enumerate()
                    .map(|(r, &id)| {
                        let (frames_tx, bytes_tx) =
                            tx_positions[flow].get(r).copied().unwrap_or_default();
                        TagPositionReport {
                            frames_tx,
                            bytes_tx,
                            rx: per_id.get(id as usize).filter(|_| received).cloned(),
                        }
                    })
                    .collect(),
            }
        })
        .collect();
    // Flows another host sends: what was sent is that host's to say, so no loss here.
    for (total, flow) in rx_flows.iter_mut().zip(&scenario.flows) {
        let sent_elsewhere = scenario
            .ports
            .iter()
            .any(|p| p.name == flow.tx_port && p.location.is_remote());
        if let Some(total) = total.as_mut().filter(|_| sent_elsewhere) {
            total.lost = None;
            total.excess = 0;
        }
    }
    // A flow received on several ports is counted once per port it reached: more frames
    // than it sent is then expected, not a sign of another sender.
    for (total, flow) in rx_flows.iter_mut().zip(&scenario.flows) {
        if let Some(total) = total.as_mut().filter(|_| flow.rx_ports.len() > 1) {
            total.excess = 0;
        }
    }
    Ok(RunReport {
        run_tag,
        clock: clock.source(),
        ticks_per_sec: clock.ticks_per_sec(),
        ports,
        rx_ports,
        rx_flows,
        drain_ns: drained_ns,
        latency_intervals,
        setting_warnings: Vec::new(),
        device_under_test: None,
        tagged,
    })
}

/// Sends on its channel when dropped: a worker thread's end, also when it unwinds.
struct EndSignal(std::sync::mpsc::Sender<()>);

impl Drop for EndSignal {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strobe_wire::trailer::LEGACY_TAG;

    fn scenario(location: &str, seed: u64) -> Scenario {
        let text = format!(
            "[[ports]]\nname = \"p\"\nlocation = \"{location}\"\n\n[[flows]]\nname = \"f\"\ntx = \"p\"\n\
             duration = {{ fixed_packets = {{ packets = 10 }} }}\ntiming = {{ seed = {seed} }}\n\
             [[flows.packet]]\nethernet = {{}}\n"
        );
        strobe_model::load_scenario(&text, "t.toml", &strobe_model::NoFiles)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn run_tags_are_asked_for_derived_for_traces_or_random_and_never_legacy() {
        let live = scenario("afpacket:eth9", 1);
        assert_eq!(choose_run_tag(&live, Some(7)), 7);
        let trace = scenario("pcap:x.pcap", 1);
        assert_eq!(choose_run_tag(&trace, None), choose_run_tag(&trace, None));
        let derived: std::collections::HashSet<u8> = (0..2000)
            .map(|seed| choose_run_tag(&scenario("pcap:x.pcap", seed), None))
            .collect();
        let random: std::collections::HashSet<u8> =
            (0..2000).map(|_| choose_run_tag(&live, None)).collect();
        for tags in [derived, random] {
            assert!(!tags.contains(&LEGACY_TAG));
            assert!(
                tags.len() > 200,
                "tags spread over the byte: {}",
                tags.len()
            );
        }
    }
}
