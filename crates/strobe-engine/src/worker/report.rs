//! What a transmit worker reports: per port and per flow, the hand-over and departure
//! figures drawn from its histograms, and the fit of the estimated departures against the
//! flows' model (computed after the last frame, never on the hot path).

use hdrhistogram::Histogram;
use strobe_model::FlowSpec;
use strobe_timing::PathFloor;

use crate::pacer::{HostStalls, Scheduling};
use crate::port_floor::PortPacing;

/// Per-flow transmit results.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowReport {
    pub name: String,
    pub id: u16,
    pub frames: u64,
    /// Bytes of the frames as written, without the 4-byte FCS the NIC appends (a frame of
    /// OTG size 64 counts 60), as receivers count what they are handed.
    pub bytes: u64,
    /// Scheduled departure of the first and last frame, ns from t0 (after any shift).
    pub first_ns: Option<u64>,
    pub last_ns: Option<u64>,
    pub instrumented: bool,
    /// A flow with metric tags: per tag position, its trailer flow id and the frames and
    /// bytes (without FCS) it sent.
    pub tag_positions: Vec<(u16, u64, u64)>,
}

/// Distribution of hand-over errors (actual minus scheduled time), in ns.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HandoverError {
    pub samples: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p99_9_ns: u64,
    pub p99_99_ns: u64,
    pub max_ns: u64,
    /// Share of hand-overs within 100 ns and within 1 µs of their deadline.
    pub within_100ns: f64,
    pub within_1us: f64,
}

impl HandoverError {
    pub(super) fn from_histogram(h: &Histogram<u64>) -> Option<Self> {
        if h.is_empty() {
            return None;
        }
        let share = |ns: u64| h.count_between(0, ns) as f64 / h.len() as f64;
        Some(HandoverError {
            samples: h.len(),
            p50_ns: h.value_at_quantile(0.5),
            p90_ns: h.value_at_quantile(0.9),
            p99_ns: h.value_at_quantile(0.99),
            p99_9_ns: h.value_at_quantile(0.999),
            p99_99_ns: h.value_at_quantile(0.9999),
            max_ns: h.max(),
            within_100ns: share(100),
            within_1us: share(1_000),
        })
    }
}

/// Per-port transmit results.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PortReport {
    pub name: String,
    pub backend: String,
    pub scheduled_time: bool,
    pub batch: usize,
    pub frames: u64,
    pub bytes: u64,
    /// Frames handed over later than the tolerance, and the worst lateness seen.
    pub late_frames: u64,
    pub max_late_ns: u64,
    /// Of the late frames, those the host made late: the worker lost its CPU across their
    /// deadline while waiting for it, or was woken after it (see [`crate::pacer`]). The
    /// rest were late for strobe's own work (or a loss it could not see).
    pub late_host_frames: u64,
    /// Paced runs: the policy the worker ran under (SCHED_FIFO where allowed).
    pub scheduling: Option<Scheduling>,
    /// Paced runs: times the worker lost its CPU while waiting for a deadline (the host's
    /// doing, not strobe's; see [`crate::pacer`]).
    pub host_stalls: Option<HostStalls>,
    /// Paced runs: the spin margin before each deadline as learned by the end of the run.
    pub spin_margin_ns: Option<u64>,
    /// Schedule shift still in force at the end (`Shift`: all of it; `Smooth`: what was not
    /// yet paid back).
    pub shifted_ns: u64,
    /// Paced runs: how far after its deadline each batch was handed to the backend — the
    /// engine's own timing precision (the wire adds the backend's and the NIC's).
    pub handover: Option<HandoverError>,
    /// Real time from the first to the last hand-over (0 for scheduled-time backends).
    pub elapsed_ns: u64,
    /// The schedule's t0 (where the flows' `first_ns`/`last_ns` count from) on
    /// CLOCK_REALTIME, ns since the Unix epoch, the clock receive timestamps use; None for
    /// scheduled-time backends, whose times are the trace's own.
    pub t0_unix_ns: Option<u64>,
    /// The first hand-over: when it went (CLOCK_REALTIME ns) and its deadline (ns from t0).
    pub first_handover_unix_ns: Option<u64>,
    pub first_deadline_ns: Option<u64>,
    /// Paced runs: the same span as the schedule planned it (first to last hand-over's
    /// deadline, before any shift); `elapsed_ns` beyond it is time the run fell behind.
    pub planned_ns: u64,
    pub stopped_early: bool,
    /// The backend error that stopped the port before its end (a full disk, an interface
    /// gone), if one did: the counts cover what was handed over until then.
    pub failure: Option<String>,
    /// The core the worker was pinned to, if it was.
    pub core: Option<usize>,
    /// UDP segmentation batches, for backends that send them.
    pub segmentation: Option<strobe_io::Segmentation>,
    /// Frames the driver refused after the hand-over (`xdp-live`: its transmit ring was
    /// full), as it counts them; None where the backend waits for room instead.
    pub xmit_errors: Option<u64>,
    /// Transmit stamps from AF_XDP TX metadata, when the run took them: frames stamped and
    /// not, and how long after their trailer stamp they left.
    pub tx_metadata_stamps: Option<strobe_io::tx_stamps::TxStampStats>,
    /// Paced ports: the floor the hand-overs were coalesced to, and the ceiling it gives.
    pub pacing: Option<PortPacing>,
    /// Paced runs: hand-overs made, and frames that left in a hand-over with others.
    pub handovers: u64,
    pub coalesced_frames: u64,
    /// Time the run was paused (the schedule resumed later by as much).
    pub paused_ns: u64,
    /// Coalesced runs: how far each frame's estimated departure (its hand-over's start plus
    /// its position times the floor's spacing) was from its deadline, early or late.
    pub departure: Option<HandoverError>,
    /// Who wrote the frames, when the backend could have generated them itself: the
    /// backend's kernel program (and where stamps were taken), or the engine and why.
    pub generation: Option<String>,
    /// The backend generated the frames itself (see `generation`): no hand-overs, batch 0.
    pub in_kernel: bool,
    /// Paced by the backend's program: frames by how late it sent them, in decades
    /// ([`strobe_io::kernel_frames::KernelRun::lateness`]).
    pub kernel_lateness: Option<[u64; strobe_io::kernel_frames::LATENESS_DECADES]>,
    /// Where transmit stamps were taken, when not by the engine before the hand-over (a
    /// backend's kernel program).
    pub tx_stamps: Option<String>,
    /// Coalesced runs with a random or bursty flow: the gaps between the estimated
    /// departures judged against the port's flows' merged model as a perfect sender on the
    /// refined floor sends it, and against the plain model (as `strobe analyze` judges a
    /// capture). Computed after the last frame, never on the hot path.
    pub departure_fit: Option<strobe_analyze::FloorFit>,
    pub flows: Vec<FlowReport>,
}

/// Most estimated departure gaps a fit reads (a histogram holding more is scaled down).
const DEPARTURE_FIT_GAPS: usize = 2_000_000;

/// The estimated departure gaps of a port's flows judged through `floor` (see
/// [`PortReport::departure_fit`]); None when every flow is at a constant rate (judged by
/// the hand-over figures) or for fewer than 20 gaps.
pub(super) fn departure_fit(
    flows: &[FlowSpec],
    gaps: &Histogram<u64>,
    floor: PathFloor,
    max_batch: usize,
) -> Option<strobe_analyze::FloorFit> {
    let varies = |f: &FlowSpec| {
        f.schedule.pattern != strobe_timing::Pattern::Cbr
            || matches!(f.schedule.duration, strobe_timing::Duration::Bursts { .. })
    };
    if !flows.iter().any(varies) || gaps.len() < 20 {
        return None;
    }
    let scale = (DEPARTURE_FIT_GAPS as f64 / gaps.len() as f64).min(1.0);
    let mut sorted = Vec::with_capacity(DEPARTURE_FIT_GAPS.min(gaps.len() as usize));
    for v in gaps.iter_recorded() {
        let count = (v.count_at_value() as f64 * scale).round() as usize;
        sorted.extend(std::iter::repeat_n(v.value_iterated_to(), count));
    }
    let name = match flows {
        [flow] => format!("flow {}'s {}", flow.name, pattern_label(&flow.schedule)),
        _ => format!(
            "the port's {} flows merged ({})",
            flows.len(),
            flows
                .iter()
                .map(|f| format!("{}: {}", f.name, pattern_label(&f.schedule)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let model = strobe_analyze::FloorModel {
        specs: flows.iter().map(|f| f.schedule.clone()).collect(),
        name,
        floor: strobe_analyze::FloorChoice::Given(floor),
        max_batch,
        tolerance_ns: None,
    };
    // Estimated departures are on a 1 ns grid; judged at the usual significance.
    strobe_analyze::fit_through_floor(&sorted, &model, 1, 0.01)
        .ok()
        .flatten()
}

fn pattern_label(spec: &strobe_timing::ScheduleSpec) -> String {
    match spec.duration {
        strobe_timing::Duration::Bursts { packets, .. } => {
            format!("bursts of {packets} at {}", spec.rate)
        }
        _ => format!("{} at {}", spec.pattern.describe(), spec.rate),
    }
}
