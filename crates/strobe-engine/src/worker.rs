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

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration as StdDuration;

use hdrhistogram::Histogram;
use strobe_io::kernel_frames::{KernelFlow, KernelPace, KernelStamp};
use strobe_io::{Backend, TimeBase, TxSlot, MAX_BATCH};
use strobe_model::{FlowSpec, SizeSequence};
use strobe_timing::{FloorEstimate, PathFloor, Schedule};

use crate::clock::Clock;
use crate::clock::WallClock;
use crate::earliest::{EarliestFlow, SCAN_MAX_FLOWS};
use crate::generator::{BatchScratch, FlowGenerator, TxTime};
use crate::live::LiveCounters;
use crate::pacer::{HostStalls, Pacer, Scheduling};
use crate::port_floor::PortPacing;
use crate::EngineError;

/// What to do when the worker falls behind its schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LatePolicy {
    Shift,
    CatchUp,
    Smooth,
}

/// `LatePolicy::Smooth` shortens a gap by at most 1/SMOOTH_REPAY of its length…
const SMOOTH_REPAY: u64 = 50;
/// …and, to have the shift paid back by a fixed last deadline, by at most 1/SMOOTH_END_REPAY
/// (5 %: a tenth was enough to overfill a shaper at 90 % of its rate in a Y.1564 step).
const SMOOTH_END_REPAY: u64 = 20;

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
    /// Every port's location, parsed, in the scenario's port order (the run-control layer
    /// parses them once); None: the engine parses the scenario's.
    pub locations: Option<Vec<strobe_io::Location>>,
    /// Write every frame in the engine, even where the backend could generate the flow
    /// itself (`xdp-live`'s kernel program): for comparing the two.
    pub engine_frames: bool,
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
            locations: None,
            engine_frames: false,
        }
    }
}

/// Per-flow transmit results.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowReport {
    pub name: String,
    pub id: u16,
    pub frames: u64,
    /// Bytes counted as OTG frame sizes (including the 4-byte FCS).
    pub bytes: u64,
    /// Scheduled departure of the first and last frame, ns from t0 (after any shift).
    pub first_ns: Option<u64>,
    pub last_ns: Option<u64>,
    pub instrumented: bool,
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
    fn from_histogram(h: &Histogram<u64>) -> Option<Self> {
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
fn departure_fit(
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

struct FlowState {
    gen: FlowGenerator,
    sizes: SizeSequence,
    schedule: Schedule,
    /// The next frame: (deadline ns, template), or None when the flow is done.
    next: Option<(u64, u16)>,
    /// (size, template) when the flow has a single frame size: no size sequence to step.
    fixed: Option<(u32, u16)>,
    /// Unpaced runs have no schedule to follow: frames left to send (u64::MAX = no end),
    /// when the duration is a packet count or continuous.
    unpaced_budget: Option<u64>,
    /// Where the counters are published for watchers of the run.
    live: Option<Arc<LiveCounters>>,
    /// Stopped by its switch: no frame is planned any more.
    stopped: bool,
    /// A convoy of trains: frames per train, and frames planned so far. Each train's head
    /// is handed over alone, ahead of its train: its stamp is then taken right before it
    /// leaves, and it leaves before the kernel processes the frames behind it (through a
    /// DUT on veth the whole hand-over is processed before any of it is forwarded).
    train: Option<(u64, u64)>,
    report: FlowReport,
}

impl FlowState {
    /// Ends the flow's schedule now (its switch was turned off).
    fn stop(&mut self) {
        self.stopped = true;
        self.next = None;
        self.unpaced_budget = self.unpaced_budget.map(|_| 0);
    }

    /// Counts the frames just written for this flow.
    #[inline]
    fn record(&mut self, slots: &[TxSlot<'_>], which: &[u16], templates: &[u16]) {
        let (Some(&first), Some(&last)) = (which.first(), which.last()) else {
            return;
        };
        let r = &mut self.report;
        r.frames += which.len() as u64;
        r.bytes += match self.fixed {
            Some((size, _)) => size as u64 * which.len() as u64,
            None => templates
                .iter()
                .map(|&t| self.gen.frame_size(t) as u64)
                .sum(),
        };
        r.first_ns.get_or_insert(slots[first as usize].scheduled_ns);
        r.last_ns = Some(slots[last as usize].scheduled_ns);
        if let Some(live) = &self.live {
            live.publish_tx(r.id, r.frames, r.bytes);
        }
    }

    #[inline(always)]
    fn advance(&mut self) {
        let (size, template) = match self.fixed {
            Some(fixed) => fixed,
            None => {
                let size = self.sizes.next_size();
                (size, self.gen.template_for(size))
            }
        };
        self.next = self
            .schedule
            .next(size)
            .map(|deadline| (deadline, template));
    }

    /// Whether the next frame is the head of a train.
    #[inline]
    fn next_is_train_head(&self) -> bool {
        self.train
            .is_some_and(|(frames, planned)| planned % frames == 0)
    }

    /// Plans the next frame: counts it and steps to the one after.
    #[inline]
    fn take(&mut self) {
        if let Some((_, planned)) = &mut self.train {
            *planned += 1;
        }
        self.advance();
    }
}

/// The flow whose next frame is due first (ties: the lowest index) and its deadline, by a
/// scan: cheapest for the handful of flows a port usually carries.
#[inline(always)]
fn scan_earliest(states: &[FlowState]) -> Option<(usize, u64)> {
    let mut best: Option<(usize, u64)> = None;
    for (i, s) in states.iter().enumerate() {
        if let Some((d, _)) = s.next {
            if best.is_none_or(|(_, bd)| d < bd) {
                best = Some((i, d));
            }
        }
    }
    best
}

/// The frames of one batch, struct-of-arrays, allocated once per worker.
struct BatchPlan {
    deadlines: Vec<u64>,
    templates: Vec<u16>,
    flows: Vec<u16>,
    /// 0, 1, 2, …: the slot order of a batch that holds a single flow.
    identity: Vec<u16>,
    /// Scratch for grouping a mixed batch by flow.
    order: Vec<u32>,
    which: Vec<u16>,
    group_templates: Vec<u16>,
    /// Which flow's frame is due first.
    earliest: EarliestFlow,
}

impl BatchPlan {
    fn new() -> BatchPlan {
        BatchPlan {
            earliest: EarliestFlow::default(),
            deadlines: vec![0; MAX_BATCH],
            templates: vec![0; MAX_BATCH],
            flows: vec![0; MAX_BATCH],
            identity: (0..MAX_BATCH as u16).collect(),
            order: vec![0; MAX_BATCH],
            which: vec![0; MAX_BATCH],
            group_templates: vec![0; MAX_BATCH],
        }
    }

    /// The flow whose next frame is due first (ties: the lowest index) and its deadline.
    #[inline(always)]
    fn earliest(&mut self, states: &[FlowState]) -> Option<(usize, u64)> {
        if states.len() > SCAN_MAX_FLOWS {
            return self.earliest.earliest(states, |s| s.next.map(|(d, _)| d));
        }
        scan_earliest(states)
    }

    /// Flow `i`, just named by [`earliest`](Self::earliest), moved on.
    #[inline(always)]
    fn advanced(&mut self, states: &[FlowState], i: usize) {
        if states.len() > SCAN_MAX_FLOWS {
            self.earliest.advanced(i, states[i].next.map(|(d, _)| d));
        }
    }

    /// Plans up to `batch` frames: the earliest across flows, merged by deadline. Returns
    /// how many (0 when every flow is done).
    fn fill(&mut self, states: &mut [FlowState], batch: usize) -> usize {
        if let [s] = states {
            return self.fill_single(s, batch);
        }
        // One loop per way of choosing, the choice made once per batch: one shared loop
        // that asks per frame (as `fill_coalesced` does) sent 0.90-0.96x as fast at 8 to
        // 4 096 flows (unpaced, null port; bench/run flows, run flows-20261128T112601Z).
        if states.len() > SCAN_MAX_FLOWS {
            self.fill_merged::<true>(states, batch)
        } else {
            self.fill_merged::<false>(states, batch)
        }
    }

    /// [`fill`](Self::fill) for several flows: by the heap or by a scan.
    fn fill_merged<const HEAP: bool>(&mut self, states: &mut [FlowState], batch: usize) -> usize {
        let mut n = 0;
        while n < batch {
            let found = if HEAP {
                self.earliest.earliest(states, |s| s.next.map(|(d, _)| d))
            } else {
                scan_earliest(states)
            };
            let Some((i, _)) = found else { break };
            let s = &mut states[i];
            let Some((deadline, template)) = s.next else {
                break;
            };
            self.deadlines[n] = deadline;
            self.templates[n] = template;
            self.flows[n] = i as u16;
            s.advance();
            if HEAP {
                self.earliest.advanced(i, s.next.map(|(d, _)| d));
            }
            n += 1;
        }
        n
    }

    /// Plans the frames of one coalesced hand-over: the earliest frame, then each next one
    /// while it is better off in the same hand-over ([`PathFloor::joins`]), up to `cap`.
    /// `now_ns` is the current time on the deadlines' timeline: a late hand-over starts
    /// then, not at its first deadline. Returns how many (0 when every flow is done).
    /// `join_due`: frames already due join whatever the floor says (a check of the spacing,
    /// [`FloorEstimate::wants_spacing_check`]).
    fn fill_coalesced(
        &mut self,
        states: &mut [FlowState],
        cap: usize,
        floor: &PathFloor,
        now_ns: u64,
        join_due: bool,
    ) -> usize {
        let mut n = 0;
        let mut start_ns = 0;
        while n < cap {
            let Some((i, deadline)) = self.earliest(states) else {
                break;
            };
            let Some((_, template)) = states[i].next else {
                break;
            };
            // A train's head goes alone: it starts a hand-over and ends it.
            let head = states[i].next_is_train_head();
            if n == 0 {
                start_ns = deadline.max(now_ns);
            } else if head
                || !(floor.joins(start_ns, n, deadline) || join_due && deadline <= now_ns)
            {
                break;
            }
            self.deadlines[n] = deadline;
            self.templates[n] = template;
            self.flows[n] = i as u16;
            states[i].take();
            self.advanced(states, i);
            n += 1;
            if head {
                break;
            }
        }
        n
    }

    /// One flow: no merge, and for a fixed frame size the schedule runs in one tight loop.
    fn fill_single(&mut self, s: &mut FlowState, batch: usize) -> usize {
        if s.stopped {
            return 0;
        }
        let mut n = 0;
        if let Some((deadline, template)) = s.next.take() {
            self.deadlines[0] = deadline;
            self.templates[0] = template;
            n = 1;
        }
        if let (Some(budget), Some((_, template))) = (s.unpaced_budget.as_mut(), s.fixed) {
            // Deadlines mean nothing here: count frames, leave departure times at zero.
            let got = (batch - n).min(*budget as usize);
            *budget -= got as u64;
            self.deadlines[n..n + got].fill(0);
            self.templates[n..n + got].fill(template);
            return n + got;
        }
        match s.fixed {
            Some((size, template)) => {
                let got = s.schedule.next_batch(size, &mut self.deadlines[n..batch]);
                self.templates[n..n + got].fill(template);
                n += got;
            }
            None => {
                while n < batch {
                    let size = s.sizes.next_size();
                    let Some(deadline) = s.schedule.next(size) else {
                        break;
                    };
                    self.deadlines[n] = deadline;
                    self.templates[n] = s.gen.template_for(size);
                    n += 1;
                }
            }
        }
        self.flows[..n].fill(0);
        n
    }

    /// Writes the planned frames into the backend's slots, flow by flow.
    /// Writes planned frames `from..from + slots.len()` into `slots`.
    fn write(
        &mut self,
        from: usize,
        slots: &mut [TxSlot<'_>],
        states: &mut [FlowState],
        tx_time: TxTime,
        holds: &mut [u32],
        scratch: &mut BatchScratch,
    ) {
        let n = slots.len();
        if let [s] = states {
            let (which, templates) = (&self.identity[..n], &self.templates[from..from + n]);
            s.gen
                .write_batch(slots, which, templates, tx_time, holds, scratch);
            s.record(slots, which, templates);
            return;
        }
        // Group the batch by flow, keeping each flow's packets in order.
        for j in 0..n {
            self.order[j] = ((self.flows[from + j] as u32) << 16) | j as u32;
        }
        self.order[..n].sort_unstable();
        let mut start = 0;
        while start < n {
            let flow = self.order[start] >> 16;
            let mut end = start;
            while end < n && self.order[end] >> 16 == flow {
                let j = (self.order[end] & 0xFFFF) as usize;
                self.which[end - start] = j as u16;
                self.group_templates[end - start] = self.templates[from + j];
                end += 1;
            }
            let k = end - start;
            let (which, templates) = (&self.which[..k], &self.group_templates[..k]);
            let s = &mut states[flow as usize];
            s.gen
                .write_batch(slots, which, templates, tx_time, holds, scratch);
            s.record(slots, which, templates);
            start = end;
        }
    }
}

/// Each flow's sending state on a port: its schedule, its compiled frames, its sizes, and
/// its first deadline planned (an unpaced single flow counts frames instead).
fn flow_states(
    flows: &[FlowSpec],
    time_base: TimeBase,
    opts: &RunOptions,
) -> Result<Vec<FlowState>, EngineError> {
    let mut states = Vec::with_capacity(flows.len());
    for f in flows {
        let schedule = Schedule::new(f.schedule.clone()).map_err(|e| EngineError::Flow {
            flow: f.name.clone(),
            message: e.to_string(),
        })?;
        let tag = opts.run_tag.unwrap_or(crate::DEFAULT_RUN_TAG);
        let gen = FlowGenerator::compile(f, tag, opts.seq_start)?;
        let sizes = f.size.distinct_sizes();
        let fixed = (sizes.len() == 1).then(|| (sizes[0], gen.template_for(sizes[0])));
        let unpaced_budget = match f.schedule.duration {
            _ if !opts.unpaced || flows.len() > 1 || time_base == TimeBase::Scheduled => None,
            strobe_timing::Duration::Continuous => Some(u64::MAX),
            strobe_timing::Duration::Packets(n) => Some(n),
            _ => None,
        };
        let mut s = FlowState {
            live: opts.live.clone(),
            unpaced_budget,
            fixed,
            report: FlowReport {
                name: f.name.clone(),
                id: f.id,
                instrumented: gen.instrumented(),
                ..FlowReport::default()
            },
            gen,
            sizes: f.size.sequence(f.size_seed),
            schedule,
            next: None,
            stopped: false,
            train: match f.schedule.duration {
                strobe_timing::Duration::Bursts { packets, .. } if packets > 1 => {
                    Some((packets, 0))
                }
                _ => None,
            },
        };
        if s.unpaced_budget.is_none() {
            s.advance();
        }
        states.push(s);
    }
    Ok(states)
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
    let mut states = flow_states(flows, backend.time_base(), opts)?;
    let scheduled_time = backend.time_base() == TimeBase::Scheduled;
    let paced = !scheduled_time && !opts.unpaced;
    // When the port's last frame is due, where every flow's schedule fixes it: `Smooth`
    // pays a shift back by then, so the run keeps its asked duration and mean rate.
    let last_deadline_ns = flows
        .iter()
        .zip(&states)
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
    let mut generation = None;
    if let (false, false, Some(generator)) = (
        scheduled_time,
        opts.engine_frames,
        backend.kernel_generator(),
    ) {
        // Every frame is stamped where latency is measured; elsewhere receivers only check
        // that a frame's stamp belongs to the run.
        let stamp = if latency_measured {
            KernelStamp::PerFrame
        } else {
            KernelStamp::Fixed(clock.realtime_now_ns())
        };
        if let Some(handed) = kernel_flows(&states, flows, paced, opts, stamp) {
            let handed = handed.and_then(|f| generator.refuses(&f).map_or(Ok(f), Err));
            // Held from the start when the run starts paused.
            generator.hold(
                opts.pause
                    .as_deref()
                    .is_some_and(|p| p.load(Ordering::Relaxed)),
            );
            match handed.map(|f| generator.start(&f).map(|()| f)) {
                Ok(Ok(handed)) => {
                    let mut report =
                        run_in_kernel(port_name, backend, states, &handed, clock, opts, stop);
                    // The program paces: the engine's floor plays no part (see `paced_in_kernel`).
                    report.pacing = pacing.filter(|_| paced);
                    return Ok(report);
                }
                // The engine's ring path still works: fall back to it, saying why.
                Ok(Err(e)) => {
                    generation = Some(format!(
                        "frames written by the engine: generating them in the kernel failed to start ({e})"
                    ))
                }
                Err(why) => {
                    generation = Some(format!(
                        "frames written by the engine, not in the kernel: its program cannot generate {why}"
                    ))
                }
            }
        }
    }
    let has_trains = states.iter().any(|s| s.train.is_some());
    let mut coalesce = pacing.as_ref().filter(|_| paced).map(|p| {
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
    let mut holds = vec![u32::MAX; backend.slot_count()];
    let mut scratch = BatchScratch::new();
    let mut plan = BatchPlan::new();
    let mut report = PortReport {
        name: port_name.to_string(),
        backend: backend.describe(),
        scheduled_time,
        batch,
        generation,
        pacing: pacing.filter(|_| paced).map(|p| PortPacing {
            max_batch: batch,
            ceiling_pps: p.floor.map(|f| f.ceiling_pps(batch)),
            ..p
        }),
        ..PortReport::default()
    };
    // Paced: this thread's timer slack, scheduling policy and learned spin margin.
    let mut pacer = paced.then(|| {
        let mut pacer = Pacer::enter_on(clock, clock.now_ticks());
        pacer.warm_up(clock);
        pacer
    });
    let mut shift_ns = 0u64;
    // Coalesced runs: when a perfect sender on the path would end its last hand-over, on the
    // deadlines' timeline (before any shift).
    let mut ideal_free_ns = 0u64;
    // Coalesced runs: time the sender lost to stalls since its last hand-over.
    let mut stalled_ns = 0u64;
    let mut previous_deadline = 0u64;
    let mut first_deadline = None;
    // 1 ns to 100 s at 3 significant digits; allocated once, recording never allocates.
    let mut handover = Histogram::<u64>::new_with_bounds(1, 100_000_000_000, 3)
        .expect("static histogram bounds are valid");
    let mut departure = handover.clone();
    // Coalesced runs: gaps between consecutive estimated departures.
    let mut departure_gaps = handover.clone();
    let mut last_leaves: Option<u64> = None;
    let mut first_tx_ticks = None;
    let mut paused_while_sending_ns = 0u64;
    let mut wall = WallClock::new(clock);
    // t0 after every set-up above (histograms, the wall clock's anchor, the pacer's warm-up),
    // so the lead is all the first hand-over has to get ready: a t0 taken earlier made the
    // first frame of a run near the path's ceiling ~160 µs late, and the run that much short.
    let mut t0_ticks = clock.now_ticks() + clock.ns_to_ticks(opts.start_lead_ns);
    let mut limit_ticks = opts
        .time_limit_ns
        .map(|ns| t0_ticks + clock.ns_to_ticks(ns));
    let mut last_tx_ticks = t0_ticks;
    if !scheduled_time {
        let (now_ticks, now_unix) = (clock.now_ticks(), wall.now_ns(clock));
        report.t0_unix_ns = Some(if t0_ticks >= now_ticks {
            now_unix + clock.ticks_to_ns(t0_ticks - now_ticks)
        } else {
            now_unix.saturating_sub(clock.ticks_to_ns(now_ticks - t0_ticks))
        });
    }

    // After a pause of `paused` ticks the whole timeline moves by it: deadlines, the last
    // hand-over (time away from the path that is not a stall) and a real-time limit; a
    // pause after the first frame is not sending time.
    macro_rules! after_pause {
        ($paused:expr) => {{
            let paused: u64 = $paused;
            t0_ticks += paused;
            last_tx_ticks += paused;
            limit_ticks = limit_ticks.map(|l| l + paused);
            report.paused_ns += clock.ticks_to_ns(paused);
            if first_tx_ticks.is_some() {
                paused_while_sending_ns += clock.ticks_to_ns(paused);
            }
        }};
    }

    let mut switch_changes = 0u64;
    // Where this worker says how far behind its schedule it is (a paced worker of a watched
    // run), at most once a millisecond: the watcher reads it every 20 ms, and per hand-over
    // the hot path only compares two clock readings.
    let behind_slot = opts
        .live
        .as_ref()
        .filter(|_| paced)
        .and_then(|live| Some((live.clone(), live.behind_slot(port_name)?)));
    let behind_every = clock.ns_to_ticks(1_000_000);
    // How late the host last made the sender (see `late_for_the_host`), until it is back on
    // time.
    let mut host_debt_ns = 0u64;
    let mut next_behind = 0u64;
    'batches: loop {
        if stop.load(Ordering::Relaxed) {
            report.stopped_early = true;
            break;
        }
        if let Some(switches) = &opts.flow_switches {
            let changes = switches.changes();
            if changes != switch_changes {
                switch_changes = changes;
                for s in states.iter_mut().filter(|s| !s.stopped) {
                    if switches.is_stopped(&s.report.name) {
                        s.stop();
                    }
                }
            }
        }
        let paused = hold_while_paused(clock, opts.pause.as_deref(), stop);
        if paused > 0 {
            after_pause!(paused);
            if let Some(pacer) = pacer.as_mut() {
                pacer.woke(clock.now_ticks());
            }
            continue;
        }
        let mut now = clock.now_ticks();
        let n = match &coalesce {
            Some((floor, estimate)) => {
                // Now on the deadlines' timeline (before any shift).
                let now_ns = clock
                    .ticks_to_ns(now.saturating_sub(t0_ticks))
                    .saturating_sub(shift_ns);
                // A run still learning its hand-over cost times one-frame calls (a train's
                // frames join their head's call: its heads are one-frame calls already).
                let cap = if estimate.wants_singles() && !has_trains {
                    1
                } else {
                    batch
                };
                // Behind with a spacing no call has timed for long: the frames already
                // due go together once, so a wrong spacing cannot keep the sender behind.
                let join_due = estimate.wants_spacing_check();
                plan.fill_coalesced(&mut states, cap, floor, now_ns, join_due)
            }
            None => plan.fill(&mut states, batch),
        };
        if n == 0 {
            break;
        }

        if let Some(pacer) = pacer.as_mut() {
            if opts.late_policy == LatePolicy::Smooth && shift_ns > 0 {
                let gap = plan.deadlines[0].saturating_sub(previous_deadline);
                let repay = smooth_repay_ns(shift_ns, gap, plan.deadlines[0], last_deadline_ns);
                shift_ns = shift_ns.saturating_sub(repay);
            }
            previous_deadline = plan.deadlines[0];
            first_deadline.get_or_insert(plan.deadlines[0]);
            let mut due = t0_ticks + clock.ns_to_ticks(plan.deadlines[0] + shift_ns);
            let mut host_late_ns = 0;
            if now < due {
                // Renewing the transmit stamp's anchor takes a few clock reads (under 1 µs):
                // do it in the slack before the deadline, not between it and the hand-over.
                if due - now > clock.ns_to_ticks(RENEW_SLACK_NS) {
                    wall.renew_if_due(clock);
                }
                let waited = wait_until(clock, pacer, due, stop, opts.pause.as_deref());
                (now, host_late_ns) = (waited.now, waited.host_late_ns);
                let paused = waited.paused;
                if paused > 0 {
                    // Paused while waiting for this hand-over: it and everything after it
                    // leave later by the pause.
                    after_pause!(paused);
                    due += paused;
                }
            }
            pacer.check_awake(clock, now);
            if now >= next_behind {
                if let Some((live, slot)) = &behind_slot {
                    next_behind = now + behind_every;
                    let since_t0 = clock.ticks_to_ns(now.saturating_sub(t0_ticks));
                    live.publish_behind(*slot, since_t0.saturating_sub(plan.deadlines[0]));
                }
            }
            let error_ns = clock.ticks_to_ns(now.saturating_sub(due));
            handover.saturating_record(error_ns);
            report.handovers += 1;
            if n > 1 {
                report.coalesced_frames += n as u64;
            }
            if let Some((floor, _)) = &coalesce {
                // Frame k leaves about k spacings after the hand-over starts.
                let start_ns = clock.ticks_to_ns(now.saturating_sub(t0_ticks));
                for (k, &d) in plan.deadlines[..n].iter().enumerate() {
                    let leaves = start_ns + k as u64 * floor.spacing_ns;
                    departure.saturating_record(leaves.abs_diff(d + shift_ns));
                    if let Some(previous) = last_leaves {
                        departure_gaps.saturating_record(leaves.saturating_sub(previous));
                    }
                    last_leaves = Some(leaves);
                }
            }
            // Coalesced, the hand-over is owed when a perfect sender on the path would make
            // it: at its first deadline, or when that sender's previous hand-over ends. Waiting
            // for the hand-over before is the path's floor; only lateness beyond it is the
            // sender falling behind (a stall, or a floor the path no longer keeps), which
            // the late policy handles.
            let owed = match &coalesce {
                Some((_, estimate)) if !estimate.handover_known() => {
                    // Still learning what a hand-over costs: owed at its deadline, but not
                    // before this sender's own previous hand-over ended; the perfect sender
                    // starts from here once the cost is known.
                    let now_ns = clock
                        .ticks_to_ns(now.saturating_sub(t0_ticks))
                        .saturating_sub(shift_ns);
                    ideal_free_ns = now_ns.max(plan.deadlines[0]) + estimate.guess().call_ns(n);
                    due.max(last_tx_ticks)
                }
                Some((_, estimate)) => {
                    let floor = &estimate.guess();
                    let start_ns = plan.deadlines[0].max(ideal_free_ns);
                    ideal_free_ns = start_ns + floor.call_ns(n);
                    // Away between hand-overs for longer than waiting for this one's deadline
                    // explains: a stall.
                    let ready = due.max(last_tx_ticks);
                    if now > ready {
                        let away = clock.ticks_to_ns(now - ready);
                        if away > stall_min_ns(floor, opts) {
                            stalled_ns += away;
                        }
                    }
                    t0_ticks + clock.ns_to_ticks(start_ns + shift_ns)
                }
                None => due,
            };
            // A backlog the host left (with catch-up, the frames due during a stall follow
            // it late) stays the host's until the sender is back on time.
            host_debt_ns = host_debt_ns.max(host_late_ns);
            let late = clock.ticks_to_ns(now.saturating_sub(owed));
            if late <= opts.late_tolerance_ns {
                host_debt_ns = 0;
            }
            if now > owed {
                report.max_late_ns = report.max_late_ns.max(late);
                if late > opts.late_tolerance_ns {
                    report.late_frames += n as u64;
                    if late_for_the_host(late, host_debt_ns, opts.late_tolerance_ns) {
                        report.late_host_frames += n as u64;
                    }
                    // Coalesced, only the part a stall caused is shifted: a backlog within
                    // the path's floor is repaid by coalescing, as a perfect sender would.
                    let shift = match coalesce {
                        Some(_) => late.min(stalled_ns),
                        None => late,
                    };
                    if opts.late_policy != LatePolicy::CatchUp {
                        shift_ns += shift;
                    }
                }
            }
            stalled_ns = 0;
        }
        if let Some(limit) = limit_ticks {
            if now >= limit {
                report.stopped_early = true;
                break;
            }
        }
        first_tx_ticks.get_or_insert(now);

        // A backend may take fewer frames than asked when its ring is full: hand over the
        // rest of the planned batch in further calls, in order.
        let mut done = 0;
        let mut stalls = 0u32;
        while done < n {
            let (plan, states, holds, scratch) = (&mut plan, &mut states, &mut holds, &mut scratch);
            let wall = &mut wall;
            let sent = backend.transmit(n - done, move |slots| {
                for (slot, &d) in slots.iter_mut().zip(&plan.deadlines[done..]) {
                    slot.scheduled_ns = d + shift_ns;
                }
                // Frames of one batch are handed over together: one reading, taken last
                // before the frames are written and handed to the backend.
                // A coalesced hand-over shares one stamp too: taken before any of its frames
                // leaves, so it never claims a frame left later than it did; the wait of
                // frame k (about k spacings) counts in its latency.
                let tx_time = if scheduled_time {
                    TxTime::Scheduled
                } else {
                    TxTime::Same(wall.now_ns(clock))
                };
                plan.write(done, slots, states, tx_time, holds, scratch);
            });
            let sent = match sent {
                Ok(sent) => sent,
                Err(e) => {
                    // Stop here and keep the results of what went before.
                    report.failure = Some(e.to_string());
                    report.stopped_early = true;
                    break 'batches;
                }
            };
            done += sent;
            if sent == 0 {
                stalls += 1;
                if stalls > 1_000_000 {
                    return Err(EngineError::Backend(format!(
                        "{} accepts no frames ({done} of {n} of a batch sent)",
                        backend.describe()
                    )));
                }
                std::hint::spin_loop();
            }
        }
        // Elapsed time runs to the end of the last hand-over.
        last_tx_ticks = clock.now_ticks();
        if let Some((floor, estimate)) = &mut coalesce {
            let call_ns = clock.ticks_to_ns(last_tx_ticks - now);
            // A call far longer than the floor says (twice, and by more than the stall
            // minimum) was interrupted: a stall. Not judged before the hand-over cost is known.
            let expected = floor.call_ns(n);
            if estimate.handover_known() && call_ns > 2 * expected + stall_min_ns(floor, opts) {
                stalled_ns += call_ns - expected;
            }
            // The call just made refines the floor the next ones are coalesced to.
            estimate.observe(n, call_ns);
            *floor = estimate.floor();
        }
    }
    match backend.finish() {
        Ok(stats) if report.failure.is_none() => {
            report.frames = stats.frames;
            report.segmentation = stats.segmentation;
            report.xmit_errors = stats.xmit_errors;
        }
        finished => {
            if let Err(e) = finished {
                report.failure.get_or_insert(e.to_string());
                report.stopped_early = true;
            }
            // The frames written for each flow, up to the failing batch.
            report.frames = states.iter().map(|s| s.report.frames).sum();
        }
    }
    report.bytes = states.iter().map(|s| s.report.bytes).sum();
    report.shifted_ns = shift_ns;
    if let (Some(p), Some((_, estimate))) = (&mut report.pacing, &coalesce) {
        p.observed = estimate.handover_known().then(|| estimate.guess());
        // Only a spacing this run timed is remembered and reported as observed.
        p.observed_spacing_known = estimate.spacing_known() && estimate.spacing_seen();
    }
    if let Some(pacer) = pacer.take() {
        report.scheduling = Some(pacer.scheduling());
        report.host_stalls = Some(pacer.stalls());
        report.spin_margin_ns = Some(pacer.margin_ns());
    }
    report.handover = HandoverError::from_histogram(&handover);
    report.departure = HandoverError::from_histogram(&departure);
    if let Some((_, estimate)) = &coalesce {
        report.departure_fit = departure_fit(flows, &departure_gaps, estimate.guess(), batch);
    }
    // A pause after the first frame is not sending time.
    report.elapsed_ns = match (scheduled_time, first_tx_ticks) {
        (false, Some(first)) => clock
            .ticks_to_ns(last_tx_ticks.saturating_sub(first))
            .saturating_sub(paused_while_sending_ns),
        _ => 0,
    };
    report.planned_ns = first_deadline.map_or(0, |first| previous_deadline.saturating_sub(first));
    report.flows = states.into_iter().map(|s| s.report).collect();
    Ok(report)
}

/// How often a port whose frames the kernel generates looks at the stop switch, the time
/// limit and the counters.
const KERNEL_POLL: StdDuration = StdDuration::from_millis(1);

/// A paced flow's deadlines as a backend's program keeps them ([`KernelPace`]), and its
/// frame count (None: until stopped); or why the program cannot keep them: constant rates
/// and bursts of one frame size from the run's start, on the absolute schedule.
fn kernel_pace(
    spec: &FlowSpec,
    opts: &RunOptions,
) -> Result<(Option<u64>, Option<KernelPace>), String> {
    if opts.late_policy == LatePolicy::Shift {
        return Err(
            "departures under the late policy `shift` (its schedule catches up instead)".into(),
        );
    }
    // The program keeps one gap: several sizes only where the gap does not depend on the
    // size (a rate in frames per second, not in bits).
    let mut periodic = None;
    for size in spec.size.distinct_sizes() {
        let p = spec.schedule.periodic(size)?;
        match periodic {
            None => periodic = Some(p),
            Some(q) if q == p => {}
            Some(_) => {
                return Err(
                    "several frame sizes at a rate in bits (each size has its own gap; the program keeps one)"
                        .into(),
                )
            }
        }
    }
    let p = periodic.ok_or("a flow without frame sizes (a strobe bug)")?;
    Ok((
        p.packets,
        Some(KernelPace {
            gap_ns: p.gap_ns,
            gap_frac: p.gap_frac,
            burst: p.burst,
            burst_gap_ns: p.burst_gap_ns,
            late_tolerance_ns: opts.late_tolerance_ns,
        }),
    ))
}

/// Most frames in a size sequence handed to a backend (longer ones stay with the engine).
const MAX_SIZE_CYCLE: u64 = 1 << 16;

/// The flow's next frame sizes, one period of its sequence: `first` (the size of a frame
/// already planned) and then what `sizes` gives (the sequence repeats them over and over),
/// for a backend that generates frames itself.
fn size_cycle(
    spec: &FlowSpec,
    first: Option<u32>,
    mut sizes: SizeSequence,
) -> Result<Vec<u32>, String> {
    match spec.size.period() {
        None => Err("random frame sizes (a sequence that never repeats)".into()),
        Some(n) if n > MAX_SIZE_CYCLE => Err(format!(
            "a sequence of frame sizes that repeats only after {n} frames"
        )),
        Some(n) => Ok(first
            .into_iter()
            .chain(std::iter::from_fn(|| Some(sizes.next_size())))
            .take(n as usize)
            .collect()),
    }
}

/// Whether `backend`'s own program will pace `flows` (flows it can generate, paced at
/// constant rates or in bursts), by the checks [`run_port`] makes: the engine's floor, for
/// pacing hand-overs itself, is then not needed. Should the program fail to start after
/// all, the engine paces one frame per hand-over.
pub(crate) fn paced_in_kernel<B: Backend>(
    backend: &mut B,
    flows: &[FlowSpec],
    opts: &RunOptions,
) -> bool {
    if flows.is_empty()
        || opts.engine_frames
        || opts.unpaced
        || backend.time_base() == TimeBase::Scheduled
    {
        return false;
    }
    let Some(generator) = backend.kernel_generator() else {
        return false;
    };
    let handed: Result<Vec<KernelFlow>, String> = flows
        .iter()
        .map(|spec| {
            let plan = kernel_pace(spec, opts)?;
            let gen = FlowGenerator::compile(spec, crate::DEFAULT_RUN_TAG, opts.seq_start)
                .map_err(|e| e.to_string())?;
            let sizes = (None, spec.size.sequence(spec.size_seed));
            handed_over(spec, &gen, sizes, plan, KernelStamp::PerFrame)
        })
        .collect();
    handed.is_ok_and(|f| generator.refuses(&f).is_none())
}

/// The port's flows as the engine hands them to a backend that generates them itself: one
/// flow, paced or with an unpaced frame budget, or several paced ones; Err says why one
/// cannot be. None: not a case for it (several flows unpaced: the engine orders them by
/// their schedules).
fn kernel_flows(
    states: &[FlowState],
    flows: &[FlowSpec],
    paced: bool,
    opts: &RunOptions,
    stamp: KernelStamp,
) -> Option<Result<Vec<KernelFlow>, String>> {
    let mut handed = Vec::with_capacity(flows.len());
    for (s, spec) in states.iter().zip(flows) {
        // Unpaced: the frame budget; paced: the deadlines too, when the program can keep
        // them.
        let plan = match (paced, s.unpaced_budget) {
            (true, _) => kernel_pace(spec, opts),
            (false, Some(budget)) => Ok(((budget != u64::MAX).then_some(budget), None)),
            (false, None) => return None,
        };
        // A paced flow has planned its first frame already (its size drawn).
        let first = match (s.fixed, s.next) {
            (Some((size, _)), _) => Some(size),
            (None, Some((_, template))) => Some(s.gen.frame_size(template)),
            (None, None) => None,
        };
        let flow =
            plan.and_then(|plan| handed_over(spec, &s.gen, (first, s.sizes.clone()), plan, stamp));
        match flow {
            Ok(flow) => handed.push(flow),
            Err(why) if flows.len() > 1 => return Some(Err(format!("flow {}: {why}", spec.name))),
            Err(why) => return Some(Err(why)),
        }
    }
    Some(Ok(handed))
}

/// The flow as the engine hands it to a backend that generates it: its sizes from `first`
/// and `sizes` on ([`size_cycle`]), `frames` of them paced by `pace`, stamped with `stamp`.
fn handed_over(
    spec: &FlowSpec,
    gen: &FlowGenerator,
    (first, sizes): (Option<u32>, SizeSequence),
    (frames, pace): (Option<u64>, Option<KernelPace>),
    stamp: KernelStamp,
) -> Result<KernelFlow, String> {
    let sizes = size_cycle(spec, first, sizes)?;
    let flow = gen.kernel_flow(frames, stamp, &sizes)?;
    Ok(KernelFlow { pace, ..flow })
}

/// Runs the flows that the backend generates itself (`xdp-live`'s kernel program) until
/// their frame counts, the time limit or `stop`: the worker only watches, and publishes
/// counters.
fn run_in_kernel<B: Backend>(
    port_name: &str,
    backend: &mut B,
    mut states: Vec<FlowState>,
    flows: &[KernelFlow],
    clock: &Clock,
    opts: &RunOptions,
    stop: &AtomicBool,
) -> PortReport {
    let mut report = PortReport {
        name: port_name.to_string(),
        backend: backend.describe(),
        batch: 0,
        ..PortReport::default()
    };
    // The generator runs already (started by the caller, which waited for its first frame):
    // the run's time counts from here.
    let mut wall = WallClock::new(clock);
    let started = (clock.now_ticks(), wall.now_ns(clock));
    report.t0_unix_ns = Some(started.1);
    let mut ended = started.0;
    let mut run = Err("the backend no longer offers to generate frames (a strobe bug)".to_string());
    let mut generated = vec![0; flows.len()];
    if let Some(generator) = backend.kernel_generator() {
        report.in_kernel = true;
        report.generation = Some(generation_text(flows));
        report.tx_stamps = flows
            .iter()
            .any(KernelFlow::stamped_per_frame)
            .then(|| generator.stamp_source());
        let (result, watched_until) = run_generator(
            generator,
            flows,
            &mut states,
            clock,
            opts,
            stop,
            &mut report,
        );
        run = result.map_err(|e| e.to_string());
        ended = watched_until;
        // What the program counted, also when its run failed.
        for (f, n) in generated.iter_mut().enumerate() {
            *n = generator.generated(f);
        }
    }
    let runs = match &run {
        Ok(runs) if runs.len() == flows.len() => runs.clone(),
        Ok(_) => {
            run = Err("the backend reported another number of flows (a strobe bug)".into());
            Vec::new()
        }
        Err(_) => Vec::new(),
    };
    for (r, pace) in runs.iter().zip(flows.iter().map(|f| f.pace)) {
        let Some(pace) = pace else { continue };
        report.late_frames += r.late_frames;
        report.max_late_ns = report.max_late_ns.max(r.max_late_ns);
        let lateness = report
            .kernel_lateness
            .get_or_insert([0; strobe_io::kernel_frames::LATENESS_DECADES]);
        for (sum, n) in lateness.iter_mut().zip(r.lateness) {
            *sum += n;
        }
        // The schedule's span from the first deadline to the last frame's.
        let gap = pace.gap_ns as f64 + f64::from(pace.gap_frac) / 4_294_967_296.0;
        let frames = r.frames.saturating_sub(1);
        let bursts = frames / pace.burst.max(1);
        let planned = (frames as f64 * gap) as u64 + bursts * pace.burst_gap_ns;
        report.planned_ns = report.planned_ns.max(planned);
    }
    if let Err(e) = &run {
        report.failure = Some(e.clone());
        report.stopped_early = true;
    }
    match backend.finish() {
        Ok(stats) => report.xmit_errors = stats.xmit_errors,
        Err(e) => {
            report.failure.get_or_insert(e.to_string());
            report.stopped_early = true;
        }
    }
    let frames: Vec<u64> = match runs.is_empty() {
        false => runs.iter().map(|r| r.frames).collect(),
        true => generated,
    };
    let first = runs.iter().filter_map(|r| r.first_ns).min();
    let last = runs.iter().filter_map(|r| r.last_ns).max();
    report.frames = frames.iter().sum();
    report.bytes = flows
        .iter()
        .zip(&frames)
        .map(|(f, &n)| f.wire_bytes(n))
        .sum();
    // From the first stamp to the last where frames carry their own, else the worker's
    // view of the run (within the poll interval); a pause is not sending time.
    report.elapsed_ns = match (first, last) {
        (Some(first), Some(last)) => last.saturating_sub(first).saturating_sub(report.paused_ns),
        _ => clock
            .ticks_to_ns(ended.saturating_sub(started.0))
            .saturating_sub(report.paused_ns),
    };
    for (f, state) in states.iter_mut().enumerate() {
        let r = &mut state.report;
        let run = runs.get(f);
        r.frames = frames[f];
        r.bytes = flows[f].wire_bytes(r.frames);
        // A flow that sent nothing has no first or last frame (as the engine reports it).
        let sent = r.frames > 0;
        r.first_ns = sent.then(|| {
            run.and_then(|r| r.first_ns)
                .map_or(0, |ns| ns.saturating_sub(started.1))
        });
        r.last_ns = sent.then(|| {
            run.and_then(|r| r.last_ns)
                .map_or(report.elapsed_ns, |ns| ns.saturating_sub(started.1))
        });
        if let Some(live) = &state.live {
            live.publish_tx(r.id, r.frames, r.bytes);
        }
    }
    report.flows = states.into_iter().map(|s| s.report).collect();
    report
}

/// What the report says about frames generated in the kernel.
fn generation_text(flows: &[KernelFlow]) -> String {
    let flow_text = |flow: &KernelFlow| {
        let sizes = match flow.templates.len() {
            1 => String::new(),
            n => format!("{n} frame sizes (a cycle of {} frames), ", flow.cycle.len()),
        };
        format!(
            "{sizes}{} varying field{}, sequence numbers, {}",
            flow.fields.len(),
            if flow.fields.len() == 1 { "" } else { "s" },
            if flow.stamped_per_frame() {
                "a transmit stamp per frame"
            } else {
                "one fixed transmit stamp (latency not measured)"
            },
        )
    };
    let what = match flows {
        [flow] => flow_text(flow),
        _ => format!(
            "{} flows, each frame from the flow whose deadline comes first ({})",
            flows.len(),
            flows.iter().map(flow_text).collect::<Vec<_>>().join("; ")
        ),
    };
    format!(
        "generated in the kernel by the backend's program: {what}{}",
        if flows.iter().any(|f| f.pace.is_some()) {
            "; paced by the program: a frame is sent at the first repetition at or after \
             its deadline, late frames back to back until the schedule is met (catch-up)"
        } else {
            ""
        }
    )
}

/// Watches the running generator until the flows' ends, the time limit, `stop` or every
/// flow's switch (a flow switched off ends alone), holding it while the run is paused;
/// then stops it. Returns what each flow sent and when the watch ended (before the stop,
/// which waits for the kernel).
fn run_generator(
    generator: &mut dyn strobe_io::kernel_frames::KernelGenerator,
    flows: &[KernelFlow],
    states: &mut [FlowState],
    clock: &Clock,
    opts: &RunOptions,
    stop: &AtomicBool,
    report: &mut PortReport,
) -> (
    Result<Vec<strobe_io::kernel_frames::KernelRun>, strobe_io::IoError>,
    u64,
) {
    let mut limit = opts
        .time_limit_ns
        .map(|ns| clock.now_ticks() + clock.ns_to_ticks(ns));
    loop {
        if stop.load(Ordering::Relaxed) {
            report.stopped_early = true;
            break;
        }
        if let Some(switches) = &opts.flow_switches {
            for (f, state) in states.iter_mut().enumerate() {
                if !state.stopped && switches.is_stopped(&state.report.name) {
                    state.stopped = true;
                    generator.end_flow(f);
                }
            }
        }
        if generator.done() {
            break;
        }
        if limit.is_some_and(|l| clock.now_ticks() >= l) {
            report.stopped_early = true;
            break;
        }
        if opts
            .pause
            .as_deref()
            .is_some_and(|p| p.load(Ordering::Relaxed))
        {
            generator.hold(true);
            let paused = hold_while_paused(clock, opts.pause.as_deref(), stop);
            generator.hold(false);
            limit = limit.map(|l| l + paused);
            report.paused_ns += clock.ticks_to_ns(paused);
            continue;
        }
        for (f, (state, flow)) in states.iter().zip(flows).enumerate() {
            if let Some(live) = &state.live {
                let frames = generator.generated(f);
                live.publish_tx(state.report.id, frames, flow.wire_bytes(frames));
            }
        }
        std::thread::sleep(KERNEL_POLL);
    }
    let watched_until = clock.now_ticks();
    (generator.stop(), watched_until)
}

/// In coalesced runs, the sender counts as stalled when it was away (or a call took longer
/// than the floor says) by more than this many hand-overs, or the late tolerance if longer.
const STALL_HANDOVERS: u64 = 8;

fn stall_min_ns(floor: &PathFloor, opts: &RunOptions) -> u64 {
    opts.late_tolerance_ns
        .max(STALL_HANDOVERS * floor.handover_ns)
}

/// Slack before a deadline that is enough to renew the transmit stamp's anchor first.
const RENEW_SLACK_NS: u64 = 4_000;

/// Waits until the clock reaches `due`: sleeps while far away (saving the core), then
/// spins for the last stretch so the wake-up jitter of the kernel never reaches the wire.
///
/// The spin reads the clock without a PAUSE hint: under KVM, a PAUSE loop trips pause-loop
/// exiting, and each exit takes the vCPU away for 2–10 µs (on our 2-vCPU guest a PAUSE spin
/// saw ~200 more such stalls per second than a plain one). The thread owns its core while
/// it spins, so the hint's usual benefits (a hyperthread sibling, power) do not apply.
/// While `pause` is set (and `stop` is not), sleeps; returns the ticks it held.
fn hold_while_paused(clock: &Clock, pause: Option<&AtomicBool>, stop: &AtomicBool) -> u64 {
    let Some(pause) = pause.filter(|p| p.load(Ordering::Relaxed)) else {
        return 0;
    };
    let paused_at = clock.now_ticks();
    while pause.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(StdDuration::from_millis(1));
    }
    clock.now_ticks().saturating_sub(paused_at)
}

/// What `LatePolicy::Smooth` pays back of a schedule shift of `shift_ns` over a gap of
/// `gap_ns` ending at `deadline_ns`: 1/[`SMOOTH_REPAY`] of the gap, or more where the rest
/// of the shift would otherwise outlast the port's last deadline — the gaps left share it
/// evenly, so the last frame still leaves when it was planned and the run keeps its asked
/// duration and mean rate — but never more than 1/[`SMOOTH_END_REPAY`] of the gap: a shift
/// the end cannot absorb so is left, rather than sent as a burst (a catch-up burst at the
/// end of a trial fills a DUT's queue that the asked rate never would).
fn smooth_repay_ns(shift_ns: u64, gap_ns: u64, deadline_ns: u64, last_ns: Option<u64>) -> u64 {
    let steady = gap_ns / SMOOTH_REPAY;
    let Some(last_ns) = last_ns else {
        return steady;
    };
    let left_ns = last_ns.saturating_sub(deadline_ns);
    let by_the_end = if left_ns <= gap_ns {
        shift_ns
    } else {
        (u128::from(shift_ns) * u128::from(gap_ns) / u128::from(left_ns)) as u64
    };
    steady.max(by_the_end.min(gap_ns / SMOOTH_END_REPAY))
}

/// Two reads of a deadline's spin at least this far apart: the worker lost its CPU between
/// them (the spin reads the clock every few tens of ns).
const SPIN_LOSS_NS: u64 = 500;

/// Of the time past `due` at `now`, what the host took: all of it when the spin's previous
/// read came before `due` and the two reads are `loss_ticks` or more apart (the CPU was
/// away across the deadline), else none.
fn lost_across_deadline(previous: u64, now: u64, due: u64, loss_ticks: u64) -> u64 {
    if previous < due && due <= now && now - previous >= loss_ticks {
        now - due
    } else {
        0
    }
}

/// A frame `late_ns` after its deadline is the host's when the host took the worker at
/// least that long past the deadline (within the late tolerance: the hand-over's own
/// few hundred ns after the wait are not strobe falling behind).
fn late_for_the_host(late_ns: u64, host_late_ns: u64, tolerance_ns: u64) -> bool {
    host_late_ns > 0 && late_ns <= host_late_ns + tolerance_ns
}

/// How a wait for a deadline ended ([`wait_until`]).
struct Waited {
    now: u64,
    paused: u64,
    /// Of the time past the deadline, how much the host took (0: none seen).
    host_late_ns: u64,
}

/// Waits until `due` (or `stop`): sleeps to the margin before it, then spins on the clock
/// (see [`crate::pacer`]); a pause met while waiting holds the wait and moves `due` by its
/// length. Returns the time it ended, the ticks paused, and how far past `due` the host
/// took the worker: the CPU lost across the deadline while spinning (two reads of the spin
/// [`SPIN_LOSS_NS`] or more apart, the first before `due`), or a wake-up that came after it.
fn wait_until(
    clock: &Clock,
    pacer: &mut Pacer,
    mut due: u64,
    stop: &AtomicBool,
    pause: Option<&AtomicBool>,
) -> Waited {
    let mut paused = 0;
    let mut previous = clock.now_ticks();
    // The gap the margin may take half of: from now, when the worker starts waiting.
    let mut gap = clock.ticks_to_ns(due.saturating_sub(previous));
    let loss_ticks = clock.ns_to_ticks(SPIN_LOSS_NS);
    loop {
        let now = clock.now_ticks();
        if now >= due {
            pacer.spin_gap(clock.ticks_to_ns(now - previous));
            return Waited {
                now,
                paused,
                host_late_ns: clock
                    .ticks_to_ns(lost_across_deadline(previous, now, due, loss_ticks)),
            };
        }
        let left = clock.ticks_to_ns(due - now);
        if left > pacer.margin_for_gap_ns(gap) {
            if stop.load(Ordering::Relaxed) {
                return Waited {
                    now,
                    paused,
                    host_late_ns: 0,
                };
            }
            let held = hold_while_paused(clock, pause, stop);
            if held > 0 {
                paused += held;
                due += held;
                pacer.woke(clock.now_ticks());
                previous = clock.now_ticks();
                gap = clock.ticks_to_ns(due.saturating_sub(previous));
                continue;
            }
            pacer.sleep(clock, left, gap);
            previous = clock.now_ticks();
            if previous >= due {
                // Woken after the deadline: beyond the learned margin, the host's doing.
                return Waited {
                    now: previous,
                    paused,
                    host_late_ns: clock.ticks_to_ns(previous - due),
                };
            }
            continue;
        }
        // Two reads of the spin far apart: the thread lost its CPU in between.
        pacer.spin_gap(clock.ticks_to_ns(now - previous));
        previous = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_loss_of_the_cpu_across_the_deadline_is_the_hosts() {
        // Reads 2 ticks apart (the spin): never the host's, however late.
        assert_eq!(lost_across_deadline(999, 1_001, 1_000, 500), 0);
        // Away from 600 to 1 400 across the deadline at 1 000: the 400 past it are the host's.
        assert_eq!(lost_across_deadline(600, 1_400, 1_000, 500), 400);
        // Away as long, but ended before the deadline: nothing past it.
        assert_eq!(lost_across_deadline(100, 900, 1_000, 500), 0);
        // Already past the deadline before the loss: strobe was late on its own.
        assert_eq!(lost_across_deadline(1_100, 1_900, 1_000, 500), 0);
        // A short loss across the deadline is the spin's own granularity.
        assert_eq!(lost_across_deadline(900, 1_300, 1_000, 500), 0);
    }

    #[test]
    fn smooth_pays_the_shift_back_by_the_last_deadline() {
        // Far from the end: 1/50 of each gap, as before.
        assert_eq!(smooth_repay_ns(5_000, 10_000, 0, Some(1_000_000_000)), 200);
        assert_eq!(smooth_repay_ns(5_000, 10_000, 0, None), 200);
        // 1 ms behind with 40 ms left: each 10 µs gap repays 0.25 µs, 2.5 % shorter.
        let last = 1_000_000_000;
        assert_eq!(
            smooth_repay_ns(1_000_000, 10_000, last - 40_000_000, Some(last)),
            250
        );
        // Never more than a twentieth of a gap, even at the very end: no catch-up burst.
        assert_eq!(
            smooth_repay_ns(1_000_000, 10_000, last - 10_000_000, Some(last)),
            500
        );
        assert_eq!(
            smooth_repay_ns(1_000_000, 10_000, last - 5_000, Some(last)),
            500
        );
        // Repaid step by step from far enough before the end, the shift is gone at the
        // last deadline; too close to it, what a twentieth of the gaps left cannot absorb
        // stays.
        for (shift_ns, before_ns, left_ns) in [
            (3_000_000u64, 80_000_000u64, 0u64),
            (3_000_000, 40_000_000, 1_000_000),
        ] {
            let (mut shift, mut t) = (shift_ns, last - before_ns);
            while t < last {
                t += 10_000;
                shift -= smooth_repay_ns(shift, 10_000, t, Some(last)).min(shift);
            }
            assert_eq!(
                shift, left_ns,
                "{shift_ns} ns owed {before_ns} ns before the end"
            );
        }
    }

    #[test]
    fn a_frame_is_the_hosts_when_the_host_took_at_least_its_lateness() {
        assert!(late_for_the_host(5_000, 5_000, 1_000));
        // The hand-over after the wait adds its own few hundred ns.
        assert!(late_for_the_host(5_800, 5_000, 1_000));
        // Later than the host explains: strobe's own work made it late.
        assert!(!late_for_the_host(9_000, 5_000, 1_000));
        assert!(!late_for_the_host(2_000, 0, 1_000));
    }
}
