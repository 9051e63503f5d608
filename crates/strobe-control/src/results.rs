//! A finished run's results in one serialisable shape: the command line's `--json` and
//! `--csv`, the server's detail and the tests all read this schema. Built from the engine's
//! report and the scenario; every verdict a front end shows (a port that missed its rate,
//! flows that lost every frame, frames that came from elsewhere) is collected into
//! [`Results::warnings`], never printed here.

use serde::{Deserialize, Serialize};
use strobe_analyze::latency::{LatencyStats, LoadPoint};
pub use strobe_analyze::trains::{Convoy, Summary as TrainSummary};
use strobe_engine::latency::FlowLatency;
use strobe_engine::{HandoverError, PortPacing, PortReport, RunReport};
use strobe_model::{FlowSpec, MeasuredFloor, Scenario, Warning};

use crate::calibration::Correction;
use crate::text::clock_name;

/// The layout of strobe's JSON documents ([`Document`]): raised when a field changes its
/// meaning or goes away; added fields keep it. 1: the first versioned layout (`bytes_tx`
/// without the FCS, as `bytes_rx`).
pub const SCHEMA_VERSION: u32 = 1;

/// A JSON result as strobe writes it (`--json`): which strobe wrote it, in which layout,
/// when, and the result's own fields beside these.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Document<T> {
    /// The version of strobe that wrote it, e.g. `0.1.0`.
    pub strobe_version: String,
    /// [`SCHEMA_VERSION`] of the strobe that wrote it.
    pub schema_version: u32,
    /// What wrote it: `gen`, `gen-rates` (`gen --rates`), `rfc2544`, `y1564`, `trains`,
    /// `reflect`, `analyze`, `runs-list`, `runs-show`, `study`. (Not `kind`: results such as a
    /// stored run have a `kind` of their own.)
    pub document: String,
    /// When the command started (before it read its input or opened a port), RFC 3339 in
    /// UTC with nanoseconds, e.g. `2026-11-28T19:45:02.123456789Z`.
    pub started_at: String,
    /// The same instant in ns since the Unix epoch (CLOCK_REALTIME).
    pub started_unix_ns: u64,
    #[serde(flatten)]
    pub result: T,
}

impl<T> Document<T> {
    /// `result` as command `kind`, started at `started`, writes it.
    pub fn new(kind: &str, started: std::time::SystemTime, result: T) -> Document<T> {
        Document {
            strobe_version: env!("CARGO_PKG_VERSION").to_string(),
            schema_version: SCHEMA_VERSION,
            document: kind.to_string(),
            started_at: humantime::format_rfc3339_nanos(started).to_string(),
            started_unix_ns: started
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
            result,
        }
    }
}

/// `strobe gen --rates`'s document: one run per rate, in the order run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RateSweep {
    pub steps: Vec<RateStep>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RateStep {
    /// The rate as given to `--rates`.
    pub rate: String,
    pub result: Results,
}

/// `strobe reflect`'s document: what the reflector received, sent back and left alone.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReflectResult {
    pub receiver: String,
    pub backend: String,
    /// Every frame taken from the receiver.
    pub received: u64,
    /// Frames sent back.
    pub reflected: u64,
    /// Frames without strobe's trailer, left alone.
    pub not_instrumented: u64,
    /// Frames addressed to another unicast MAC address than the port's.
    pub not_for_us: u64,
    /// Frames to a broadcast or multicast address.
    pub group_destination: u64,
    /// Frames from a broadcast or multicast source address.
    pub group_source: u64,
    /// Frames a reflector already sent back: never reflected again.
    pub already_reflected: u64,
    /// Frames that cannot be reflected intact (cut short, too long, IPv4 fragments).
    pub unfit: u64,
    /// Frames the backend would not take (its ring stayed full).
    pub tx_dropped: u64,
    /// Frames the kernel dropped before the reflector read them (its ring was full).
    pub rx_ring_full: u64,
    /// Why the reflector stopped before it was told to; the counts are those until then.
    pub failure: Option<String>,
}

impl From<&strobe_engine::reflect::ReflectReport> for ReflectResult {
    fn from(r: &strobe_engine::reflect::ReflectReport) -> Self {
        ReflectResult {
            receiver: r.receiver.clone(),
            backend: r.backend.clone(),
            received: r.received,
            reflected: r.reflected,
            not_instrumented: r.not_instrumented,
            not_for_us: r.not_for_us,
            group_destination: r.group_destination,
            group_source: r.group_source,
            already_reflected: r.already_reflected,
            unfit: r.unfit,
            tx_dropped: r.tx_dropped,
            rx_ring_full: r.rx_drops.ring_full,
            failure: r.failure.clone(),
        }
    }
}

/// `strobe runs list --json`'s document: the runs listed, oldest first.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct RunsList {
    pub runs: Vec<strobe_history::RunRow>,
}

/// `strobe runs show --json`'s document: one stored run, its config and results included.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunShow {
    pub run: strobe_history::StoredRun,
}

/// The kinds of document that have a published JSON Schema (docs/schema/KIND.schema.json).
pub const SCHEMA_KINDS: [&str; 10] = [
    "gen",
    "gen-rates",
    "rfc2544",
    "y1564",
    "trains",
    "analyze",
    "reflect",
    "runs-list",
    "runs-show",
    "study",
];

/// The JSON Schema (draft 2020-12) of document `kind`, generated from the Rust types, or
/// None for a kind without one.
pub fn json_schema(kind: &str) -> Option<serde_json::Value> {
    let schema = match kind {
        "gen" => schemars::schema_for!(Document<Results>),
        "gen-rates" => schemars::schema_for!(Document<RateSweep>),
        "rfc2544" => schemars::schema_for!(Document<crate::rfc2544::Rfc2544Report>),
        "y1564" => schemars::schema_for!(Document<crate::y1564::Y1564Report>),
        "trains" => schemars::schema_for!(Document<crate::trains::TrainsReport>),
        "analyze" => schemars::schema_for!(Document<strobe_analyze::Report>),
        "reflect" => schemars::schema_for!(Document<ReflectResult>),
        "runs-list" => schemars::schema_for!(Document<RunsList>),
        "runs-show" => schemars::schema_for!(Document<RunShow>),
        "study" => schemars::schema_for!(Document<crate::study::StudyReport>),
        _ => return None,
    };
    Some(schema.to_value())
}

/// Everything a finished run measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Results {
    /// The tag this run's trailers carried (frames with another tag are another run's).
    pub run_tag: u8,
    /// The clock the transmitters scheduled and stamped with, in words.
    pub clock: String,
    pub ticks_per_sec: f64,
    /// How long receivers kept counting after the last frame left.
    pub drain_ns: u64,
    /// Transmit side, one entry per sending port (or worker of a split port).
    pub ports: Vec<PortResult>,
    /// Receive side, one entry per receiving port.
    pub rx_ports: Vec<RxPortResult>,
    /// One entry per flow of the scenario, in its order.
    pub flows: Vec<FlowResult>,
    /// Verdicts on the run a user should read: missed rates, total loss, suspect counts.
    pub warnings: Vec<Warning>,
    /// Ports an error stopped before their end, transmit or receive: the results are
    /// incomplete and cover what went before.
    pub failures: Vec<Warning>,
    /// The device under test the run went through, on strobe's lab: its kind, the
    /// software and version that forwarded, and the cores it ran on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_under_test: Option<strobe_model::DeviceUnderTest>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PortResult {
    pub name: String,
    pub backend: String,
    /// Frames were timed by the schedule (a file backend), not sent in real time.
    pub scheduled_time: bool,
    pub batch: usize,
    pub core: Option<usize>,
    pub segmentation: Option<SegmentationResult>,
    /// Frames the driver refused after the hand-over (`xdp-live`: its transmit ring was
    /// full); they count as sent and lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xmit_errors: Option<u64>,
    /// Transmit stamps from AF_XDP TX metadata (`--tx-timestamps metadata`): how many of
    /// this run's frames came back stamped, and how long after their trailer stamp they left.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx_metadata_stamps: Option<TxMetadataStamps>,
    /// Who wrote the frames where the backend could generate them itself (`xdp-live`'s
    /// kernel program), with where stamps were taken, or why the engine did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<String>,
    /// The backend generated the frames itself (`generation` says how).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_kernel: bool,
    pub frames_tx: u64,
    /// Bytes of the frames as handed over, without their FCS (docs/results.md: bytes).
    pub bytes_tx: u64,
    /// `bytes_tx` plus the 4-byte FCS of each frame: the frames as the wire carries them.
    #[serde(default)]
    pub bytes_tx_with_fcs: u64,
    pub late_frames: u64,
    /// Of `late_frames`, those the host made late: the transmit worker lost its CPU across
    /// their deadline while waiting for it, or was woken after it. `late_frames` minus
    /// this is strobe's own lateness (or a loss of the CPU it could not see).
    #[serde(default)]
    pub late_host_frames: u64,
    pub max_late_ns: u64,
    pub shifted_ns: u64,
    /// Paced ports: the scheduling policy the transmit worker ran under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling: Option<SchedulingResult>,
    /// Paced ports: times the transmit worker lost its CPU while waiting for a deadline —
    /// the host's stalls (hypervisor, other processes), apart from strobe's own lateness.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_stalls: Option<HostStallsResult>,
    /// Paced ports: the spin margin before each deadline as the worker learned it from its
    /// wake-ups (20 µs .. 2 ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spin_margin_ns: Option<u64>,
    pub handover_error: Option<TimingError>,
    /// Paced by the backend's kernel program: frames by how late it sent them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_lateness: Option<KernelLateness>,
    pub pacing: Option<PacingResult>,
    pub handovers: u64,
    pub coalesced_frames: u64,
    pub departure_error: Option<TimingError>,
    pub departure_fit: Option<strobe_analyze::FloorFit>,
    pub elapsed_ns: u64,
    pub planned_ns: u64,
    /// Time the port was held paused (not part of `elapsed_ns`).
    pub paused_ns: u64,
    pub t0_unix_ns: Option<u64>,
    /// The first hand-over: when it went (CLOCK_REALTIME ns) and when it was due.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_handover_unix_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_due_unix_ns: Option<u64>,
    /// Set when the port sent clearly slower than asked: what it achieved and why.
    pub shortfall: Option<Warning>,
    pub stopped_early: bool,
    pub failure: Option<String>,
    pub flows: Vec<PortFlowResult>,
}

/// The scheduling policy a paced transmit worker ran under.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SchedulingResult {
    /// `SCHED_FIFO` or `SCHED_OTHER` (at the end of the run).
    pub policy: String,
    /// Why not SCHED_FIFO, or why it stopped being; absent when FIFO ran throughout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Losses of the CPU a paced transmit worker saw while waiting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostStallsResult {
    pub count: u64,
    pub worst_ns: u64,
    pub total_ns: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SegmentationResult {
    pub superframes: u64,
    pub frames: u64,
}

/// Frames a kernel program paced, by how late after its deadline it sent each (its clock
/// read when it decided; the kernel sends the frame with its batch, later still).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct KernelLateness {
    pub within_100ns: u64,
    pub within_1us: u64,
    pub within_10us: u64,
    pub within_100us: u64,
    pub within_1ms: u64,
    pub later: u64,
}

impl KernelLateness {
    fn from_decades(d: &[u64; 6]) -> KernelLateness {
        KernelLateness {
            within_100ns: d[0],
            within_1us: d[1],
            within_10us: d[2],
            within_100us: d[3],
            within_1ms: d[4],
            later: d[5],
        }
    }

    /// The decades in order with their names, for reports.
    pub fn decades(&self) -> [(&'static str, u64); 6] {
        [
            ("≤ 100 ns", self.within_100ns),
            ("≤ 1 µs", self.within_1us),
            ("≤ 10 µs", self.within_10us),
            ("≤ 100 µs", self.within_100us),
            ("≤ 1 ms", self.within_1ms),
            ("later", self.later),
        ]
    }
}

/// A distribution of scheduling errors (actual minus planned time), in ns.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TimingError {
    pub samples: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p99_9_ns: u64,
    pub p99_99_ns: u64,
    pub max_ns: u64,
    pub within_100ns: f64,
    pub within_1us: f64,
}

impl From<&HandoverError> for TimingError {
    fn from(h: &HandoverError) -> Self {
        TimingError {
            samples: h.samples,
            p50_ns: h.p50_ns,
            p90_ns: h.p90_ns,
            p99_ns: h.p99_ns,
            p99_9_ns: h.p99_9_ns,
            p99_99_ns: h.p99_99_ns,
            max_ns: h.max_ns,
            within_100ns: h.within_100ns,
            within_1us: h.within_1us,
        }
    }
}

/// A paced port's floor: what one hand-over costs, how closely frames handed over together
/// leave, and the highest rate that paces.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PacingResult {
    pub port: String,
    /// The floor known before the first frame (None when the run learned it).
    pub handover_ns: Option<u64>,
    pub spacing_ns: Option<u64>,
    /// `given` (`--floor`), `remembered` (an earlier run on this path) or `learned` (from
    /// the run's own first hand-overs). No run sends frames of its own to measure it.
    pub floor_source: String,
    pub max_batch: usize,
    /// The paced ceiling of the floor known before the first frame.
    pub ceiling_pps: Option<f64>,
    pub asked_pps: Option<f64>,
    /// The floor as the run's own hand-overs refined or learned it (a learned spacing only
    /// when calls of several frames measured it).
    pub observed_handover_ns: Option<u64>,
    pub observed_spacing_ns: Option<u64>,
    /// The paced ceiling of the observed floor.
    pub observed_ceiling_pps: Option<f64>,
}

impl From<&PortPacing> for PacingResult {
    fn from(c: &PortPacing) -> Self {
        PacingResult {
            port: c.port.clone(),
            handover_ns: c.floor.map(|f| f.handover_ns),
            spacing_ns: c.floor.map(|f| f.spacing_ns),
            floor_source: c.source.name().to_string(),
            max_batch: c.max_batch,
            ceiling_pps: c.ceiling_pps,
            asked_pps: c.asked_pps,
            observed_handover_ns: c.observed.map(|f| f.handover_ns),
            observed_spacing_ns: c
                .observed
                .filter(|_| c.observed_spacing_known)
                .map(|f| f.spacing_ns),
            observed_ceiling_pps: c.observed.map(|f| f.ceiling_pps(c.max_batch)),
        }
    }
}

/// One flow's share of a transmit port.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PortFlowResult {
    pub name: String,
    pub id: u16,
    pub frames_tx: u64,
    /// Without the FCS, as `PortResult::bytes_tx`.
    pub bytes_tx: u64,
    #[serde(default)]
    pub bytes_tx_with_fcs: u64,
    pub first_ns: Option<u64>,
    pub last_ns: Option<u64>,
    pub instrumented: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RxPortResult {
    pub name: String,
    pub receiver: String,
    pub frames_rx: u64,
    /// Which clock stamped the received frames: kernel, user, hardware, mixed or none.
    pub timestamps: String,
    pub timestamp_counts: TimestampCounts,
    /// Frames that were not this run's, by reason.
    pub not_instrumented: u64,
    pub unknown_flow: u64,
    pub foreign: u64,
    pub out_of_window: u64,
    pub truncated: u64,
    pub kernel_drops: u64,
    /// Frames the interface dropped on receive during the run before any socket saw them
    /// (its backlog was full), as the kernel counts them; None where it keeps no counter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface_drops: Option<u64>,
    pub hardware_clock: Option<String>,
    /// The receiver error that stopped the port before the run's end (its interface went
    /// away): its counts cover what arrived until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// With `--tx-timestamps metadata`: frames whose latency used their sender's transmit
    /// stamp, and frames left out of latency for want of one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transmit_stamps: Option<RxTransmitStamps>,
}

/// A transmit port's stamps from AF_XDP TX metadata.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TxMetadataStamps {
    /// This run's frames that came back with a stamp.
    pub stamped: u64,
    /// This run's frames that came back without one (the driver did not stamp them).
    pub unstamped: u64,
    /// How long after its trailer stamp a frame left (the stamp minus the trailer's), ns:
    /// the time latency no longer counts.
    pub handover_min_ns: Option<i64>,
    pub handover_mean_ns: Option<f64>,
    pub handover_max_ns: Option<i64>,
}

/// A receive port's use of transmit stamps from AF_XDP TX metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RxTransmitStamps {
    /// Frames whose latency ran from their sender's transmit stamp.
    pub stamped: u64,
    /// Frames with none in time: counted, but left out of latency.
    pub missing: u64,
}

#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct TimestampCounts {
    pub kernel: u64,
    pub user: u64,
    pub hardware: u64,
}

/// One flow, both sides; receive fields are None when no port receives it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FlowResult {
    pub name: String,
    pub id: u16,
    pub tx_port: String,
    pub rx_ports: Vec<String>,
    pub frames_tx: Option<u64>,
    /// Bytes of the frames sent, without their FCS: the same measure as `bytes_rx`, so a
    /// lossless flow has `bytes_tx == bytes_rx`.
    pub bytes_tx: Option<u64>,
    /// `bytes_tx` plus the 4-byte FCS of each frame (OTG's frame sizes include it).
    #[serde(default)]
    pub bytes_tx_with_fcs: Option<u64>,
    /// First and last transmit time (CLOCK_REALTIME ns, or the trace's time).
    pub first_tx_ns: Option<u64>,
    pub last_tx_ns: Option<u64>,
    pub instrumented: Option<bool>,
    pub frames_rx: Option<u64>,
    /// Bytes of the frames received as the receiver was handed them, without the FCS
    /// (veth has none, NICs strip it; a frame that kept it would not end in a trailer).
    pub bytes_rx: Option<u64>,
    /// `bytes_rx` plus 4 bytes a frame: the received frames as the wire carried them.
    #[serde(default)]
    pub bytes_rx_with_fcs: Option<u64>,
    pub frames_rx_unique: Option<u64>,
    pub loss: Option<u64>,
    pub excess_rx: Option<u64>,
    /// More unique frames arrived than were sent: counts and latency are not trustworthy.
    pub suspect: bool,
    pub reordered: Option<u64>,
    pub duplicates: Option<u64>,
    pub late: Option<u64>,
    pub first_rx_ns: Option<u64>,
    pub last_rx_ns: Option<u64>,
    pub latency: Option<FlowLatencyResult>,
    /// A flow sent as a convoy of trains (a count of bursts): train by train, and across
    /// trains head latency, bandwidth from each train's dispersion, and loss.
    pub convoy: Option<Convoy>,
    /// A flow with metric tags (OTG `metric_tags`): the figures of each combination of tag
    /// values the flow sent, in the order first sent. Absent for a flow without tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tagged: Option<Vec<TaggedResult>>,
}

/// The frames of a tagged flow that carried one value of each of its tags.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TaggedResult {
    /// Each tag's value, in the flow's tag order.
    pub tags: Vec<TagValue>,
    pub frames_tx: u64,
    /// Without FCS, as the flow's `bytes_tx`.
    pub bytes_tx: u64,
    pub bytes_tx_with_fcs: u64,
    pub frames_rx: Option<u64>,
    pub bytes_rx: Option<u64>,
    pub bytes_rx_with_fcs: Option<u64>,
    pub frames_rx_unique: Option<u64>,
    pub loss: Option<u64>,
    pub reordered: Option<u64>,
    pub duplicates: Option<u64>,
    pub late: Option<u64>,
    pub first_rx_ns: Option<u64>,
    pub last_rx_ns: Option<u64>,
    /// As measured (no calibration applied), with the exact average.
    pub latency: Option<LatencyStats>,
    pub latency_average_ns: Option<f64>,
}

impl TaggedResult {
    /// Percent of the frames sent with these tag values that did not arrive.
    pub fn loss_pct(&self) -> Option<f64> {
        self.loss.map(|lost| pct(lost, self.frames_tx))
    }
}

/// A metric tag's value in one combination: OTG writes it in hex.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TagValue {
    pub name: String,
    /// The tagged bits as a hex number, e.g. `0x1f`.
    pub value: String,
}

/// One combination's tag values, named, in hex.
pub fn tag_values(plan: &strobe_model::TagPlan, values: &[u128]) -> Vec<TagValue> {
    plan.names
        .iter()
        .zip(values)
        .map(|(name, v)| TagValue {
            name: name.clone(),
            value: format!("{v:#x}"),
        })
        .collect()
}

/// A tagged flow's figures per combination of tag values, its tag positions added up (see
/// [`strobe_model::TagPlan`]); None for a flow without tags in the run.
pub fn tagged_results(r: &RunReport, f: &FlowSpec) -> Option<Vec<TaggedResult>> {
    let report = r.tagged.iter().find(|t| t.flow_id == f.id)?;
    let plan = f.tag_plan().ok()??;
    let sent_elsewhere = report.positions.iter().all(|p| p.frames_tx == 0)
        && r.ports
            .iter()
            .all(|p| p.name != f.tx_port && !p.name.starts_with(&format!("{}#", f.tx_port)));
    let mut out = Vec::new();
    for (values, positions) in plan.groups() {
        let (mut frames_tx, mut bytes_tx) = (0u64, 0u64);
        let mut rx: Option<strobe_engine::rx::FlowRxReport> = None;
        for &p in &positions {
            let Some(pos) = report.positions.get(p) else {
                continue;
            };
            frames_tx += pos.frames_tx;
            bytes_tx += pos.bytes_tx;
            if let Some(theirs) = &pos.rx {
                match &mut rx {
                    Some(mine) => mine.add(theirs),
                    None => rx = Some(theirs.clone()),
                }
            }
        }
        let latency = rx.as_ref().and_then(|x| x.latency.as_ref());
        out.push(TaggedResult {
            tags: tag_values(&plan, &values),
            frames_tx,
            bytes_tx,
            bytes_tx_with_fcs: with_fcs(bytes_tx, frames_tx),
            frames_rx: rx.as_ref().map(|x| x.counters.frames),
            bytes_rx: rx.as_ref().map(|x| x.counters.bytes),
            bytes_rx_with_fcs: rx
                .as_ref()
                .map(|x| with_fcs(x.counters.bytes, x.counters.frames)),
            frames_rx_unique: rx.as_ref().map(|x| x.counters.unique),
            loss: rx.as_ref().filter(|_| !sent_elsewhere).and_then(|x| x.lost),
            reordered: rx.as_ref().map(|x| x.counters.reordered),
            duplicates: rx.as_ref().map(|x| x.counters.duplicates),
            late: rx.as_ref().map(|x| x.counters.late),
            first_rx_ns: rx.as_ref().and_then(|x| x.counters.first_rx_ns),
            last_rx_ns: rx.as_ref().and_then(|x| x.counters.last_rx_ns),
            latency: latency.and_then(|l| LatencyStats::from_histogram(l.histogram())),
            latency_average_ns: latency
                .filter(|l| !l.histogram().is_empty())
                .map(|l| l.sum_ns() as f64 / l.histogram().len() as f64),
        });
    }
    Some(out)
}

impl FlowResult {
    /// Percent of the frames sent that did not arrive, when the flow has a receiver.
    pub fn loss_pct(&self) -> Option<f64> {
        self.loss.map(|lost| pct(lost, self.frames_tx.unwrap_or(0)))
    }
}

/// Every instrumented frame's latency of one flow.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FlowLatencyResult {
    /// `one-way` or `round-trip`, as the flow's metrics asked.
    pub mode: Option<String>,
    pub timestamps: TimestampSources,
    pub raw: LatencyStats,
    /// RFC 3550 interarrival jitter.
    pub jitter_ns: f64,
    /// Frames that seemed to arrive before they left (clocks that disagree).
    pub negative: u64,
    /// Frames above the histogram's highest value (100 s).
    pub clamped: u64,
    /// `raw` less the calibration's offset, when a calibration is in use.
    pub corrected: Option<LatencyStats>,
    pub calibration: Option<CalibrationUsed>,
}

/// Where each side's timestamps were taken, in words.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TimestampSources {
    pub tx: String,
    pub rx: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CalibrationUsed {
    pub file: String,
    pub offset_ns: f64,
}

/// The columns of one train in CSV, after whatever says which convoy it belongs to.
pub const TRAIN_CSV_HEADER: &str = "train,frames_sent,frames_rx,lost,duplicates,reordered,head_latency_ns,dispersion_ns,l2_bps,l1_bps,second_half_l2_bps,second_half_l1_bps,head_run,tail_loss,burst_frames,after_burst_l2_bps,after_burst_l1_bps";

/// One train as CSV cells ([`TRAIN_CSV_HEADER`]'s columns), empty where there is no value.
pub fn train_csv_cells(t: &strobe_analyze::trains::TrainResult) -> Vec<String> {
    let cell = |v: Option<f64>| v.map(|x| format!("{x:.1}")).unwrap_or_default();
    let whole = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_default();
    vec![
        t.train.to_string(),
        t.frames_sent.to_string(),
        t.frames_rx.to_string(),
        t.lost.to_string(),
        t.duplicates.to_string(),
        t.reordered.to_string(),
        cell(t.head_latency_ns),
        whole(t.dispersion_ns),
        cell(t.l2_bps),
        cell(t.l1_bps),
        cell(t.second_half_l2_bps),
        cell(t.second_half_l1_bps),
        t.head_run.to_string(),
        t.tail_loss.to_string(),
        t.burst_frames.map(|b| b.to_string()).unwrap_or_default(),
        cell(t.after_burst_l2_bps),
        cell(t.after_burst_l1_bps),
    ]
}

/// CSV text as the `csv` crate writes it (RFC 4180: fields quoted where they need it, `\n`
/// after each record): `header`, then one record per row.
pub(crate) fn csv_text<R, F>(header: &[&str], rows: R) -> String
where
    R: IntoIterator,
    R::Item: IntoIterator<Item = F>,
    F: AsRef<[u8]>,
{
    // Into memory, records of any length allowed: writing cannot fail.
    let mut out = csv::WriterBuilder::new()
        .flexible(true)
        .from_writer(Vec::new());
    let _ = out.write_record(header);
    for row in rows {
        let _ = out.write_record(row);
    }
    let bytes = out.into_inner().unwrap_or_default();
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

impl Results {
    /// The results of `report`, a run of `scenario`; latency corrected by `correction` when
    /// one is in use.
    pub fn new(scenario: &Scenario, report: &RunReport, correction: Option<&Correction>) -> Self {
        let totals = tx_totals(report);
        let flows: Vec<FlowResult> = scenario
            .flows
            .iter()
            .map(|f| flow_result(report, f, &totals, correction))
            .collect();
        let mut warnings: Vec<Warning> = report.ports.iter().filter_map(shortfall).collect();
        warnings.extend(report.ports.iter().filter_map(|p| {
            let refused = p.xmit_errors.filter(|&n| n > 0)?;
            Some(Warning::TransmitRefused {
                port: p.name.clone(),
                refused,
                frames: p.frames,
            })
        }));
        warnings.extend(report.rx_ports.iter().filter_map(|p| {
            let c = p.tx_stamps.filter(|c| c.missing > 0)?;
            Some(Warning::TransmitStampsMissing {
                port: p.name.clone(),
                missing: c.missing,
                stamped: c.stamped,
            })
        }));
        warnings.extend(report.rx_ports.iter().filter_map(|p| {
            let dropped = p.interface_drops.filter(|&n| n > 0)?;
            Some(Warning::InterfaceDrops {
                port: p.name.clone(),
                dropped,
            })
        }));
        warnings.extend(report.setting_warnings.iter().cloned());
        warnings.extend(total_loss_warning(&flows));
        warnings.extend(
            flows
                .iter()
                .filter(|f| f.suspect)
                .map(|f| Warning::ExcessFrames {
                    flow: f.name.clone(),
                    excess: f.excess_rx.unwrap_or(0),
                }),
        );
        warnings.extend(flows.iter().filter_map(|f| {
            let l = f.latency.as_ref().filter(|l| l.negative > 0)?;
            Some(Warning::ClocksDisagree {
                flow: f.name.clone(),
                frames: l.negative,
            })
        }));
        Results {
            run_tag: report.run_tag,
            clock: clock_name(report.clock).to_string(),
            ticks_per_sec: report.ticks_per_sec,
            drain_ns: report.drain_ns,
            ports: report.ports.iter().map(port_result).collect(),
            rx_ports: report.rx_ports.iter().map(rx_port_result).collect(),
            flows,
            warnings,
            failures: report
                .ports
                .iter()
                .filter_map(|p| {
                    Some(Warning::PortStopped {
                        port: p.name.clone(),
                        error: p.failure.clone()?,
                    })
                })
                .chain(report.rx_ports.iter().filter_map(|p| {
                    Some(Warning::ReceivePortStopped {
                        port: p.name.clone(),
                        error: p.failure.clone()?,
                    })
                }))
                .collect(),
            device_under_test: report.device_under_test.clone(),
        }
    }

    pub fn flow(&self, name: &str) -> Option<&FlowResult> {
        self.flows.iter().find(|f| f.name == name)
    }

    /// The worst loss in percent of sent frames: per flow, and over the run (all flows with
    /// a receiver together). None when no flow has a receiver.
    pub fn worst_loss(&self) -> Option<(String, f64)> {
        let losses = flow_losses(&self.flows);
        if losses.is_empty() {
            return None;
        }
        let (sent, lost) = losses
            .iter()
            .fold((0, 0), |(s, l), &(_, tx, lo)| (s + tx, l + lo));
        let run = ("the run".to_string(), pct(lost, sent));
        losses
            .iter()
            .map(|&(name, tx, lost)| (format!("flow `{name}`"), pct(lost, tx)))
            .chain(std::iter::once(run))
            .max_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// The run as one point of a latency-against-load curve: its first flow with latency,
    /// offered (the flow's rate in `scenario`), sent and received rates over the sender's
    /// real time, loss, and latency percentiles. None when nothing was measured.
    pub fn load_point(&self, scenario: &Scenario) -> Option<LoadPoint> {
        let f = self.flows.iter().find(|f| f.latency.is_some())?;
        let spec = scenario.flows.iter().find(|s| s.id == f.id)?;
        let s = &f.latency.as_ref()?.raw;
        let elapsed_s = self.ports.iter().map(|p| p.elapsed_ns).max()? as f64 / 1e9;
        // A sender that could not keep up sent less than offered (sent_pps), which is not
        // loss: loss is what the receiver missed of what was sent.
        let sent = f.frames_tx.unwrap_or(0);
        (elapsed_s > 0.0).then(|| LoadPoint {
            offered_pps: spec.schedule.rate.packets_per_sec(spec.size.mean()),
            sent_pps: sent as f64 / elapsed_s,
            received_pps: f.frames_rx_unique.unwrap_or(0) as f64 / elapsed_s,
            loss_pct: pct(f.loss.unwrap_or(0), sent),
            p50_ns: s.p50_ns,
            p99_ns: s.p99_ns,
            p9999_ns: s.p99_99_ns,
        })
    }

    /// Every convoy's trains as CSV, one row per train.
    pub fn trains_csv(&self) -> String {
        let header: Vec<&str> = std::iter::once("flow")
            .chain(TRAIN_CSV_HEADER.split(','))
            .collect();
        let rows = self.flows.iter().flat_map(|f| {
            f.convoy.iter().flat_map(|c| &c.trains).map(|t| {
                let mut row = vec![f.name.clone()];
                row.extend(train_csv_cells(t));
                row
            })
        });
        csv_text(&header, rows)
    }

    /// Per-flow results as CSV, one row per flow (RFC 4180 quoting).
    pub fn to_csv(&self) -> String {
        const HEADER: [&str; 21] = [
            "flow",
            "id",
            "tx_port",
            "frames_tx",
            "bytes_tx",
            "frames_rx",
            "bytes_rx",
            "frames_rx_unique",
            "loss",
            "loss_pct",
            "reordered",
            "duplicates",
            "late",
            "latency_min_ns",
            "latency_p50_ns",
            "latency_p99_ns",
            "latency_p99_9_ns",
            "latency_p99_99_ns",
            "latency_max_ns",
            "latency_mean_ns",
            "latency_jitter_ns",
        ];
        let cell = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_default();
        let rows = self.flows.iter().map(|f| {
            let mut row = vec![
                f.name.clone(),
                f.id.to_string(),
                f.tx_port.clone(),
                f.frames_tx.unwrap_or(0).to_string(),
                f.bytes_tx.unwrap_or(0).to_string(),
                cell(f.frames_rx),
                cell(f.bytes_rx),
                cell(f.frames_rx_unique),
                cell(f.loss),
                f.loss_pct().map(|l| format!("{l:.6}")).unwrap_or_default(),
                cell(f.reordered),
                cell(f.duplicates),
                cell(f.late),
            ];
            match &f.latency {
                Some(l) => {
                    let s = &l.raw;
                    row.extend([
                        s.min_ns.to_string(),
                        s.p50_ns.to_string(),
                        s.p99_ns.to_string(),
                        s.p99_9_ns.to_string(),
                        s.p99_99_ns.to_string(),
                        s.max_ns.to_string(),
                        format!("{:.1}", s.mean_ns),
                        format!("{:.1}", l.jitter_ns),
                    ]);
                }
                None => row.resize(HEADER.len(), String::new()),
            }
            row
        });
        csv_text(&HEADER, rows)
    }
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

fn port_result(p: &PortReport) -> PortResult {
    PortResult {
        name: p.name.clone(),
        backend: p.backend.clone(),
        scheduled_time: p.scheduled_time,
        batch: p.batch,
        core: p.core,
        segmentation: p.segmentation.map(|s| SegmentationResult {
            superframes: s.superframes,
            frames: s.frames,
        }),
        xmit_errors: p.xmit_errors,
        tx_metadata_stamps: p.tx_metadata_stamps.map(|s| TxMetadataStamps {
            stamped: s.stamped,
            unstamped: s.unstamped,
            handover_min_ns: (s.stamped > 0).then_some(s.delay_min_ns),
            handover_mean_ns: s.delay_mean_ns(),
            handover_max_ns: (s.stamped > 0).then_some(s.delay_max_ns),
        }),
        generation: p.generation.clone(),
        in_kernel: p.in_kernel,
        frames_tx: p.frames,
        bytes_tx: p.bytes,
        bytes_tx_with_fcs: with_fcs(p.bytes, p.frames),
        late_frames: p.late_frames,
        late_host_frames: p.late_host_frames,
        max_late_ns: p.max_late_ns,
        shifted_ns: p.shifted_ns,
        scheduling: p.scheduling.as_ref().map(|s| SchedulingResult {
            policy: s.policy.to_string(),
            note: s.note.clone(),
        }),
        host_stalls: p.host_stalls.map(|h| HostStallsResult {
            count: h.count,
            worst_ns: h.worst_ns,
            total_ns: h.total_ns,
        }),
        spin_margin_ns: p.spin_margin_ns,
        handover_error: p.handover.as_ref().map(TimingError::from),
        kernel_lateness: p.kernel_lateness.as_ref().map(KernelLateness::from_decades),
        pacing: p.pacing.as_ref().map(PacingResult::from),
        handovers: p.handovers,
        coalesced_frames: p.coalesced_frames,
        departure_error: p.departure.as_ref().map(TimingError::from),
        departure_fit: p.departure_fit.clone(),
        elapsed_ns: p.elapsed_ns,
        planned_ns: p.planned_ns,
        paused_ns: p.paused_ns,
        t0_unix_ns: p.t0_unix_ns,
        first_handover_unix_ns: p.first_handover_unix_ns,
        first_due_unix_ns: p.t0_unix_ns.zip(p.first_deadline_ns).map(|(t0, d)| t0 + d),
        shortfall: shortfall(p),
        stopped_early: p.stopped_early,
        failure: p.failure.clone(),
        flows: p
            .flows
            .iter()
            .map(|f| PortFlowResult {
                name: f.name.clone(),
                id: f.id,
                frames_tx: f.frames,
                bytes_tx: f.bytes,
                bytes_tx_with_fcs: with_fcs(f.bytes, f.frames),
                first_ns: f.first_ns,
                last_ns: f.last_ns,
                instrumented: f.instrumented,
            })
            .collect(),
    }
}

/// Bytes of `frames` frames counted without their FCS, with it.
fn with_fcs(bytes: u64, frames: u64) -> u64 {
    bytes.saturating_add(frames.saturating_mul(u64::from(strobe_model::FCS_LEN)))
}

fn rx_port_result(p: &strobe_engine::rx_worker::RxPortReport) -> RxPortResult {
    RxPortResult {
        name: p.name.clone(),
        receiver: p.receiver.clone(),
        frames_rx: p.frames,
        timestamps: p.timestamps.to_string(),
        timestamp_counts: TimestampCounts {
            kernel: p.timestamp_counts.kernel,
            user: p.timestamp_counts.user,
            hardware: p.timestamp_counts.hardware,
        },
        not_instrumented: p.other.not_instrumented,
        unknown_flow: p.other.unknown_flow,
        foreign: p.other.foreign,
        out_of_window: p.other.out_of_window,
        truncated: p.other.truncated,
        kernel_drops: p.drops.ring_full,
        interface_drops: p.interface_drops,
        hardware_clock: p.hardware_clock.clone(),
        failure: p.failure.clone(),
        transmit_stamps: p.tx_stamps.map(|c| RxTransmitStamps {
            stamped: c.stamped,
            missing: c.missing,
        }),
    }
}

/// A flow's transmit totals over every worker that sent part of it.
#[derive(Default)]
struct TxTotals {
    frames: u64,
    bytes: u64,
    first_ns: Option<u64>,
    last_ns: Option<u64>,
    instrumented: bool,
    seen: bool,
}

/// Every flow's transmit totals, by flow id, in one pass over the ports (a port may carry
/// tens of thousands of flows: no search per flow).
fn tx_totals(r: &RunReport) -> Vec<TxTotals> {
    let ids = r
        .ports
        .iter()
        .flat_map(|p| p.flows.iter().map(|f| usize::from(f.id) + 1))
        .max()
        .unwrap_or(0);
    let mut totals: Vec<TxTotals> = std::iter::repeat_with(TxTotals::default)
        .take(ids)
        .collect();
    for p in &r.ports {
        for f in &p.flows {
            let t = &mut totals[usize::from(f.id)];
            t.seen = true;
            t.frames += f.frames;
            t.bytes += f.bytes;
            // On CLOCK_REALTIME, as receive timestamps are (trace times stay the trace's).
            let on_clock = |ns: Option<u64>| ns.map(|ns| ns + p.t0_unix_ns.unwrap_or(0));
            t.first_ns = match (t.first_ns, on_clock(f.first_ns)) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            t.last_ns = t.last_ns.max(on_clock(f.last_ns));
            t.instrumented |= f.instrumented;
        }
    }
    totals
}

fn flow_result(
    r: &RunReport,
    f: &FlowSpec,
    totals: &[TxTotals],
    correction: Option<&Correction>,
) -> FlowResult {
    let tx = totals.get(usize::from(f.id)).filter(|t| t.seen);
    let rx = r.rx_flows.get(usize::from(f.id)).and_then(Option::as_ref);
    FlowResult {
        name: f.name.clone(),
        id: f.id,
        tx_port: f.tx_port.clone(),
        rx_ports: f.rx_ports.clone(),
        frames_tx: tx.map(|t| t.frames),
        bytes_tx: tx.map(|t| t.bytes),
        bytes_tx_with_fcs: tx.map(|t| with_fcs(t.bytes, t.frames)),
        first_tx_ns: tx.and_then(|t| t.first_ns),
        last_tx_ns: tx.and_then(|t| t.last_ns),
        instrumented: tx.map(|t| t.instrumented),
        frames_rx: rx.map(|x| x.counters.frames),
        bytes_rx: rx.map(|x| x.counters.bytes),
        bytes_rx_with_fcs: rx.map(|x| with_fcs(x.counters.bytes, x.counters.frames)),
        frames_rx_unique: rx.map(|x| x.counters.unique),
        loss: rx.and_then(|x| x.lost),
        excess_rx: rx.map(|x| x.excess),
        suspect: rx.is_some_and(|x| x.excess > 0),
        reordered: rx.map(|x| x.counters.reordered),
        duplicates: rx.map(|x| x.counters.duplicates),
        late: rx.map(|x| x.counters.late),
        first_rx_ns: rx.and_then(|x| x.counters.first_rx_ns),
        last_rx_ns: rx.and_then(|x| x.counters.last_rx_ns),
        latency: rx
            .and_then(|x| x.latency.as_ref())
            .and_then(|l| latency_result(r, f, l, correction)),
        convoy: rx.and_then(|x| x.trains.as_deref()).map(Convoy::of),
        tagged: tagged_results(r, f),
    }
}

fn latency_result(
    r: &RunReport,
    flow: &FlowSpec,
    l: &FlowLatency,
    correction: Option<&Correction>,
) -> Option<FlowLatencyResult> {
    let raw = LatencyStats::from_histogram(l.histogram())?;
    Some(FlowLatencyResult {
        mode: flow.metrics.latency.map(|m| m.name().to_string()),
        timestamps: timestamp_sources(r, flow),
        jitter_ns: l.jitter_ns(),
        negative: l.negative(),
        clamped: l.clamped(),
        corrected: correction.map(|c| raw.subtract(c.offset_ns)),
        calibration: correction.map(|c| CalibrationUsed {
            file: c.source.clone(),
            offset_ns: c.offset_ns,
        }),
        raw,
    })
}

/// Which clock stamped a flow's frames on each side, in words.
pub fn timestamp_sources(r: &RunReport, flow: &FlowSpec) -> TimestampSources {
    let split_part = format!("{}#", flow.tx_port);
    let tx = match r
        .ports
        .iter()
        .find(|p| p.name == flow.tx_port || p.name.starts_with(&split_part))
    {
        Some(p) if p.scheduled_time => "scheduled departure time (trace)".to_string(),
        Some(p) if p.tx_stamps.is_some() => p.tx_stamps.clone().unwrap_or_default(),
        Some(_) => format!(
            "user space: CLOCK_REALTIME (TSC re-anchored every ms; kernel clocksource {}) taken \
             just before the hand-over to the backend",
            strobe_engine::clock::kernel_clocksource()
        ),
        // Sent by another host's agent (a multi-host run): stamped there, on its clock.
        None if r.rx_flows.get(usize::from(flow.id)).is_some_and(|f| {
            f.as_ref()
                .is_some_and(|f| f.lost.is_none() && f.counters.frames > 0)
        }) =>
        {
            "the sender's clock, on another host (its agent says which)".to_string()
        }
        None => "none".to_string(),
    };
    let mut rx: Vec<String> =
        r.rx_ports
            .iter()
            .filter(|p| flow.rx_ports.contains(&p.name))
            .map(|p| match p.timestamps {
                "kernel" if p.receiver.starts_with("xdp-count:") => {
                    "the XDP counting program's clock read as the frame arrives in the driver \
                     (bpf_ktime_get_ns moved to CLOCK_REALTIME)"
                        .to_string()
                }
                "kernel" => "kernel software receive timestamp (CLOCK_REALTIME)".to_string(),
                "user" => "user space: CLOCK_REALTIME right after taking the frame off the ring"
                    .to_string(),
                "hardware" => "NIC hardware receive timestamp (PTP hardware clock)".to_string(),
                "mixed" => {
                    let c = &p.timestamp_counts;
                    format!(
                        "mixed: {} frames NIC hardware, {} kernel software, {} user space",
                        c.hardware, c.kernel, c.user
                    )
                }
                _ => "none".to_string(),
            })
            .collect();
    rx.dedup();
    TimestampSources {
        tx,
        rx: if rx.is_empty() {
            "none".into()
        } else {
            rx.join("; ")
        },
    }
}

/// Per flow with a receiver: (name, frames sent, frames lost), for loss verdicts.
fn flow_losses(flows: &[FlowResult]) -> Vec<(&str, u64, u64)> {
    flows
        .iter()
        .filter_map(|f| Some((f.name.as_str(), f.frames_tx.unwrap_or(0), f.loss?)))
        .collect()
}

/// One line when flows lost every frame they sent (the run "worked" but measured nothing):
/// what was lost, the likely causes, and what to check.
fn total_loss_warning(flows: &[FlowResult]) -> Option<Warning> {
    let losses = flow_losses(flows);
    let lost_flows: Vec<String> = losses
        .iter()
        .filter(|&&(_, tx, lost)| tx > 0 && lost >= tx)
        .map(|&(name, _, _)| name.to_string())
        .collect();
    (!lost_flows.is_empty()).then(|| Warning::TotalLoss {
        lost_flows,
        flows: losses.len(),
        frames_sent: losses.iter().map(|l| l.1).sum(),
    })
}

/// Beyond this share (and [`SHORTFALL_MIN_NS`]), a paced port that took longer than its
/// schedule planned is said to have missed the asked rate.
const SHORTFALL_SHARE: f64 = 0.01;
const SHORTFALL_MIN_NS: u64 = 1_000_000;

/// One line when a paced port sent slower than asked (its frames took more than ~1 % longer
/// than the schedule planned): achieved against requested, why, and what to do.
fn shortfall(p: &PortReport) -> Option<Warning> {
    if p.scheduled_time || p.stopped_early || p.planned_ns == 0 || p.frames < 2 {
        return None;
    }
    let behind_ns = p.elapsed_ns.saturating_sub(p.planned_ns);
    if behind_ns <= SHORTFALL_MIN_NS || (behind_ns as f64) <= p.planned_ns as f64 * SHORTFALL_SHARE
    {
        return None;
    }
    let rate = |span_ns: u64| (p.frames - 1) as f64 / (span_ns as f64 / 1e9);
    Some(Warning::RateShortfall {
        port: p.name.clone(),
        frames: p.frames,
        sent_pps: rate(p.elapsed_ns),
        asked_pps: rate(p.planned_ns),
        elapsed_ns: p.elapsed_ns,
        planned_ns: p.planned_ns,
        late_frames: p.late_frames,
        max_late_ns: p.max_late_ns,
        // The floor as the run's own hand-overs measured it says what the path paces.
        floor: p.pacing.as_ref().and_then(|c| {
            c.observed.map(|f| MeasuredFloor {
                handover_ns: f.handover_ns,
                spacing_ns: f.spacing_ns,
                ceiling_pps: f.ceiling_pps(c.max_batch),
            })
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(name: &str, tx: u64, lost: Option<u64>) -> FlowResult {
        FlowResult {
            name: name.into(),
            id: 0,
            tx_port: "p,1".into(),
            rx_ports: vec!["rx".into()],
            frames_tx: Some(tx),
            bytes_tx: Some(tx * 60),
            bytes_tx_with_fcs: Some(tx * 64),
            first_tx_ns: None,
            last_tx_ns: None,
            instrumented: Some(true),
            frames_rx: lost.map(|l| tx - l),
            bytes_rx: lost.map(|l| (tx - l) * 60),
            bytes_rx_with_fcs: lost.map(|l| (tx - l) * 64),
            frames_rx_unique: lost.map(|l| tx - l),
            loss: lost,
            excess_rx: lost.map(|_| 0),
            suspect: false,
            reordered: lost.map(|_| 0),
            duplicates: lost.map(|_| 0),
            late: lost.map(|_| 0),
            first_rx_ns: None,
            last_rx_ns: None,
            latency: None,
            convoy: None,
            tagged: None,
        }
    }

    fn results(flows: Vec<FlowResult>) -> Results {
        Results {
            run_tag: 1,
            clock: "invariant TSC".into(),
            ticks_per_sec: 1e9,
            drain_ns: 0,
            ports: vec![],
            rx_ports: vec![],
            warnings: total_loss_warning(&flows).into_iter().collect(),
            failures: vec![],
            flows,
            device_under_test: None,
        }
    }

    #[test]
    fn the_worst_loss_is_a_flows_or_the_runs() {
        let r = results(vec![
            flow("a", 1000, Some(10)),
            flow("b", 1000, Some(0)),
            flow("c", 5, None),
        ]);
        assert_eq!(r.worst_loss(), Some(("flow `a`".into(), 1.0)));
        assert!(r.warnings.is_empty());
        assert_eq!(results(vec![flow("c", 5, None)]).worst_loss(), None);
    }

    #[test]
    fn total_loss_names_the_flows_that_lost_everything() {
        let r = results(vec![flow("a", 100, Some(100)), flow("b", 100, Some(1))]);
        assert_eq!(r.warnings.len(), 1);
        assert!(
            r.warnings[0]
                .to_string()
                .starts_with("100 % loss on 1 of 2 flows (a)"),
            "{}",
            r.warnings[0]
        );
        let all = results(vec![flow("a", 100, Some(100))]);
        assert!(all.warnings[0]
            .to_string()
            .starts_with("100 % loss: none of the 100 frames"));
    }

    #[test]
    fn csv_quotes_and_leaves_unmeasured_cells_empty() {
        let csv = results(vec![flow("x\"y", 10, None), flow("z", 10, Some(1))]).to_csv();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(
            lines[1].starts_with("\"x\"\"y\",0,\"p,1\",10,600,,,,,,,,,"),
            "{}",
            lines[1]
        );
        assert!(lines[2].contains(",1,10.000000,0,0,0,"), "{}", lines[2]);
    }

    #[test]
    fn trains_csv_is_one_row_per_train_after_its_flow() {
        let train = strobe_analyze::trains::TrainResult {
            train: 3,
            frames_sent: 10,
            frames_rx: 9,
            lost: 1,
            duplicates: 0,
            reordered: 0,
            head_latency_ns: Some(1234.56),
            dispersion_ns: Some(5000),
            l2_bps: Some(1e6),
            l1_bps: None,
            second_half_l2_bps: None,
            second_half_l1_bps: None,
            head_run: 9,
            tail_loss: true,
            burst_frames: Some(4),
            after_burst_l2_bps: None,
            after_burst_l1_bps: Some(2.26),
        };
        let mut convoy = Convoy::of(&[]);
        convoy.trains = vec![train, train];
        let mut with_trains = flow("a,b", 10, Some(1));
        with_trains.convoy = Some(convoy);
        let csv = results(vec![with_trains, flow("c", 10, Some(0))]).trains_csv();
        let row = "3,10,9,1,0,0,1234.6,5000,1000000.0,,,,9,true,4,,2.3";
        assert_eq!(train_csv_cells(&train).join(","), row);
        assert_eq!(
            csv,
            format!("flow,{TRAIN_CSV_HEADER}\n\"a,b\",{row}\n\"a,b\",{row}\n")
        );
    }

    #[test]
    fn csv_names_with_commas_and_quotes_read_back_through_a_csv_reader() {
        let name = "a, \"b\" c";
        let r = results(vec![flow(name, 10, Some(2))]);
        let csv = r.to_csv();
        let header = csv.lines().next().unwrap();
        assert_eq!(
            header,
            "flow,id,tx_port,frames_tx,bytes_tx,frames_rx,bytes_rx,frames_rx_unique,loss,\
             loss_pct,reordered,duplicates,late,latency_min_ns,latency_p50_ns,latency_p99_ns,\
             latency_p99_9_ns,latency_p99_99_ns,latency_max_ns,latency_mean_ns,latency_jitter_ns"
        );
        let mut reader = csv::Reader::from_reader(csv.as_bytes());
        let records: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
        assert_eq!(records.len(), 1);
        let row = &records[0];
        assert_eq!(row.len(), 21);
        assert_eq!((&row[0], &row[2]), (name, "p,1"));
        assert_eq!((&row[3], &row[8], &row[9]), ("10", "2", "20.000000"));
    }

    #[test]
    fn results_round_trip_through_json() {
        let r = results(vec![flow("a", 1000, Some(10))]);
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<Results>(&text).unwrap(), r);
    }
}
