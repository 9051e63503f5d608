//! Running a plan: [`start`] returns a [`RunHandle`] at once; the engine runs on its own
//! threads (the workers pinned to cores as always) and a watcher thread copies the live
//! counters into a [`Metrics`] view about every [`TICK_NS`]. Whoever reads [`RunHandle::metrics`]
//! takes a lock that only that watcher contends for, never a worker: a front end polling
//! metrics cannot slow the data path.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use serde::Serialize;
use strobe_engine::live::{FlowSnapshot, FlowSwitches};
use strobe_engine::{run_scenario, PortPacing, RunReport, Tick};
use strobe_model::{Scenario, Warning};
use strobe_timing::Duration;

use crate::plan::Plan;
use crate::results::Results;
use crate::ControlError;

/// How often the watcher refreshes the live view while traffic runs.
pub const TICK_NS: u64 = 100_000_000;

/// Where a run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Opening ports and probing their floors: no frame sent yet.
    Starting,
    /// Sending.
    Running,
    /// Every transmitter is done; receivers still count frames in flight.
    Draining,
    /// Done: the metrics are final.
    Finished,
    /// The run failed (see [`RunHandle::wait`]).
    Failed,
}

/// A flow's or port's transmit state, in OTG's words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Transmit {
    Started,
    Stopped,
    Paused,
}

/// Latency of a flow so far, in ns.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct LatencySummary {
    pub minimum_ns: f64,
    pub maximum_ns: f64,
    pub average_ns: f64,
    /// Frames measured.
    pub frames: u64,
}

/// One flow's counters.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FlowMetrics {
    pub name: String,
    pub tx_port: String,
    pub rx_ports: Vec<String>,
    pub transmit: Transmit,
    #[serde(flatten)]
    pub counters: Counters,
    /// Percent of the frames sent that did not arrive (unique frames); None when no port
    /// receives the flow.
    pub loss_pct: Option<f64>,
    /// Present once a frame of the flow was measured: latency so far while the run goes on
    /// (min and max as the histograms bucket them, an exact average), then the final figures.
    pub latency: Option<LatencySummary>,
    /// When the flow's first and last frames arrived (CLOCK_REALTIME ns), once final.
    pub first_rx_ns: Option<u64>,
    pub last_rx_ns: Option<u64>,
    /// A flow with metric tags: the same figures per combination of tag values (OTG
    /// `tagged_metrics`), in the order first sent; empty without tags.
    pub tagged: Vec<TaggedMetrics>,
}

/// One combination of a tagged flow's tag values and the counters of its frames.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TaggedMetrics {
    pub tags: Vec<crate::results::TagValue>,
    #[serde(flatten)]
    pub counters: Counters,
    pub loss_pct: Option<f64>,
    pub latency: Option<LatencySummary>,
    pub first_rx_ns: Option<u64>,
    pub last_rx_ns: Option<u64>,
    /// Frames received once each (duplicates apart), once final.
    pub frames_rx_unique: Option<u64>,
}

impl FlowMetrics {
    /// A flow of `spec` that has sent nothing (not started, or not in the run).
    pub fn idle(spec: &strobe_model::FlowSpec) -> FlowMetrics {
        FlowMetrics {
            name: spec.name.clone(),
            tx_port: spec.tx_port.clone(),
            rx_ports: spec.rx_ports.clone(),
            transmit: Transmit::Stopped,
            counters: Counters::default(),
            loss_pct: None,
            latency: None,
            first_rx_ns: None,
            last_rx_ns: None,
            // Every combination of its tag values, at zero.
            tagged: live_tagged(spec, None, None),
        }
    }
}

/// What a flow or a port sent and received (a port's are the sum of its flows', or with
/// a receive port, every frame it saw).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Counters {
    pub frames_tx: u64,
    pub frames_rx: u64,
    /// Bytes as OTG counts them: frame sizes including the 4-byte FCS.
    pub bytes_tx: u64,
    pub bytes_rx: u64,
    /// Frames per second over the last watcher interval (0 once the run is finished).
    pub frames_tx_rate: f64,
    pub frames_rx_rate: f64,
    /// Bytes per second (FCS included, as `bytes_tx`) over the same interval.
    pub bytes_tx_rate: f64,
    pub bytes_rx_rate: f64,
}

/// One port's counters: its flows' frames sent, and frames received on it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PortMetrics {
    pub name: String,
    pub location: String,
    pub transmit: Transmit,
    #[serde(flatten)]
    pub counters: Counters,
}

/// What a run has done so far.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Metrics {
    pub state: RunState,
    /// Time since the transmitters started.
    pub elapsed_ns: u64,
    pub flows: Vec<FlowMetrics>,
    pub ports: Vec<PortMetrics>,
}

/// The watcher's copy of the counters.
struct LiveView {
    state: RunState,
    pacing: Vec<PortPacing>,
    /// The latest tick and the one before (rates are their difference).
    last: Option<Sample>,
    previous: Option<Sample>,
    /// Set when the run ended well.
    report: Option<Arc<RunReport>>,
    /// Its results, built once.
    results: Option<Arc<Results>>,
    /// Why it failed, when it did.
    error: Option<String>,
    /// Each flow's latency per interval, oldest first (live runs, see
    /// [`crate::PlanOptions::live_latency`]), at most [`MAX_LIVE_INTERVALS`].
    intervals: Vec<IntervalLatency>,
    /// Intervals dropped from the front to keep within the bound.
    intervals_dropped: u64,
    /// What the engine said while the run went on (a port falling behind its schedule),
    /// and how many of them [`RunHandle::take_problems`] has handed out.
    live_warnings: Vec<Warning>,
    live_warnings_taken: usize,
}

/// Latency intervals a run keeps for its live view (the oldest go first): an hour of one
/// flow at 500 ms, or a minute of 120 flows.
pub const MAX_LIVE_INTERVALS: usize = 7200;

/// One flow's latency during one interval of a live run, in ns.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IntervalLatency {
    /// Its position among the run's intervals so far (a cursor for `since`).
    pub index: u64,
    pub flow: String,
    /// Start of the interval, CLOCK_REALTIME ns.
    pub start_ns: u64,
    pub duration_ns: u64,
    pub frames: u64,
    pub min_ns: f64,
    pub p50_ns: f64,
    pub p90_ns: f64,
    pub p99_ns: f64,
    pub p99_9_ns: f64,
    pub max_ns: f64,
}

impl LiveView {
    /// Decodes finished intervals into the live series (on the watcher thread).
    fn add_intervals(
        &mut self,
        scenario: &Scenario,
        intervals: &[strobe_engine::intervals::EncodedInterval],
    ) {
        for i in intervals {
            let Some(hist) = strobe_analyze::latency::decode_histogram(&i.encoded) else {
                continue;
            };
            let Some(stats) = strobe_analyze::latency::LatencyStats::from_histogram(&hist) else {
                continue;
            };
            let flow = scenario
                .flows
                .iter()
                .find(|f| f.id == i.flow_id)
                .map(|f| f.name.clone())
                .unwrap_or_else(|| format!("flow {}", i.flow_id));
            let index = self.intervals_dropped + self.intervals.len() as u64;
            self.intervals.push(IntervalLatency {
                index,
                flow,
                start_ns: i.start_ns,
                duration_ns: i.duration_ns,
                frames: stats.count,
                min_ns: stats.min_ns,
                p50_ns: stats.p50_ns,
                p90_ns: stats.p90_ns,
                p99_ns: stats.p99_ns,
                p99_9_ns: stats.p99_9_ns,
                max_ns: stats.max_ns,
            });
        }
        if self.intervals.len() > MAX_LIVE_INTERVALS {
            let excess = self.intervals.len() - MAX_LIVE_INTERVALS;
            self.intervals.drain(..excess);
            self.intervals_dropped += excess as u64;
        }
    }
}

#[derive(Clone)]
struct Sample {
    elapsed_ns: u64,
    flows: Vec<FlowSnapshot>,
    /// Tagged flows' counters per tag position.
    tagged: Vec<strobe_engine::TaggedSnapshot>,
    /// This process's transmitters have all ended (the run may hold its receivers on).
    senders_done: bool,
}

/// A running (or finished) plan.
pub struct RunHandle {
    scenario: Arc<Scenario>,
    stop: Arc<AtomicBool>,
    pause: Arc<AtomicBool>,
    switches: Arc<FlowSwitches>,
    /// Set once [`RunHandle::take_problems`] has handed the problems out.
    problems_taken: AtomicBool,
    view: Arc<Mutex<LiveView>>,
    thread: Option<JoinHandle<Result<Arc<RunReport>, ControlError>>>,
}

/// Starts `plan` and returns at once; `stop` ends it early (results are kept).
pub fn start(plan: Plan) -> Result<RunHandle, ControlError> {
    start_then(plan, |_| {})
}

/// How a run ended, for whoever [`start_then`] was given.
pub struct RunEnd<'a> {
    pub scenario: &'a Scenario,
    /// The engine's report, or why the run failed.
    pub report: Result<&'a RunReport, &'a ControlError>,
    pub results: Option<&'a Results>,
    /// [`RunHandle::stop`] ended it (not its own end).
    pub stopped: bool,
}

/// [`start`], and `after` is called on the run's watcher thread (never a worker) once the
/// run is over, before the handle's [`RunHandle::wait`] or drop returns: for work with the
/// final results that must not be lost when the handle goes (recording the run).
pub fn start_then(
    mut plan: Plan,
    after: impl FnOnce(RunEnd<'_>) + Send + 'static,
) -> Result<RunHandle, ControlError> {
    let stop = Arc::new(AtomicBool::new(false));
    let pause = Arc::new(AtomicBool::new(false));
    plan.options.pause = Some(pause.clone());
    let switches = Arc::new(FlowSwitches::new(
        plan.scenario.flows.iter().map(|f| f.name.clone()),
    ));
    plan.options.flow_switches = Some(switches.clone());
    let view = Arc::new(Mutex::new(LiveView {
        state: RunState::Starting,
        pacing: Vec::new(),
        last: None,
        previous: None,
        report: None,
        results: None,
        error: None,
        intervals: Vec::new(),
        intervals_dropped: 0,
        live_warnings: Vec::new(),
        live_warnings_taken: 0,
    }));
    let scenario = Arc::new(plan.scenario.clone());
    let live_latency = plan.options.live_latency_intervals;
    let thread = {
        let (stop, view, scenario) = (stop.clone(), view.clone(), scenario.clone());
        std::thread::Builder::new()
            .name("run-control".into())
            .spawn(move || {
                let result = run_blocking(&plan, stop.clone(), TICK_NS, &mut |tick| {
                    let mut v = lock(&view);
                    if let Some(pacing) = tick.ready {
                        v.pacing = pacing.to_vec();
                        return;
                    }
                    if !tick.intervals.is_empty() {
                        v.add_intervals(&scenario, tick.intervals);
                    }
                    v.live_warnings.extend_from_slice(tick.warnings);
                    if tick.warnings_only() {
                        // Only warnings: not a sample of the counters.
                        return;
                    }
                    v.state = RunState::Running;
                    if tick.started {
                        return;
                    }
                    v.previous = v.last.take();
                    v.last = Some(Sample {
                        elapsed_ns: tick.elapsed_ns,
                        flows: tick.flows.to_vec(),
                        tagged: tick.tagged.to_vec(),
                        senders_done: tick.transmitters_done,
                    });
                })
                .map(Arc::new);
                // Built before the view says finished, so that a finished run has results.
                let results = result
                    .as_ref()
                    .ok()
                    .map(|report| Arc::new(Results::new(&scenario, report, None)));
                {
                    let mut v = lock(&view);
                    match &result {
                        Ok(report) => {
                            // A live run's last intervals finished after its last tick.
                            if live_latency {
                                v.add_intervals(&scenario, &report.latency_intervals);
                            }
                            v.state = RunState::Finished;
                            v.report = Some(report.clone());
                            v.results = results.clone();
                        }
                        Err(e) => {
                            v.state = RunState::Failed;
                            v.error = Some(e.to_string());
                        }
                    }
                }
                after(RunEnd {
                    scenario: &scenario,
                    report: result.as_ref().map(|r| &**r),
                    results: results.as_deref(),
                    stopped: stop.load(Ordering::Relaxed),
                });
                result
            })
            .map_err(|e| {
                ControlError::Runtime(format!("cannot start the run's watcher thread: {e}"))
            })?
    };
    Ok(RunHandle {
        scenario,
        stop,
        pause,
        switches,
        problems_taken: AtomicBool::new(false),
        view,
        thread: Some(thread),
    })
}

/// Runs `plan` on this thread until it ends or `stop` is set; `on_tick` sees the live
/// counters about every `tick_ns` (and once, before the first frame, every paced port's
/// floor).
pub fn run_blocking(
    plan: &Plan,
    stop: Arc<AtomicBool>,
    tick_ns: u64,
    on_tick: &mut dyn FnMut(&Tick<'_>),
) -> Result<RunReport, ControlError> {
    let mut report = run_scenario(&plan.scenario, &plan.options, stop, tick_ns, on_tick)?;
    if let Some(lab) = &plan.lab {
        // Read after the run: its steering is what the run met.
        let steering = strobe_lab::steering(lab).is_ok_and(|s| s.receive_steering);
        report
            .setting_warnings
            .extend(steering_warnings(&report.ports, steering, lab));
        report.device_under_test = Some(device_under_test(lab));
    }
    // What the run learned of its paths is where the next run on them starts from.
    let measured = crate::floor_memory::measured_floors(
        &report
            .ports
            .iter()
            .filter_map(|p| p.pacing.clone())
            .collect::<Vec<_>>(),
    );
    // A state directory that cannot be written costs only the next run's head start: it
    // learns the floor from its own hand-overs again (`strobe ports` shows what is kept).
    let _ = crate::floor_memory::FloorMemory::open()
        .remember(&measured, crate::floor_memory::MeasuredBy::Run);
    Ok(report)
}

/// Of a paced port's frames, the share strobe itself handed over late (not the host's)
/// above which a lab's receive steering is named as the likely cause.
const STEERING_LATE_SHARE: f64 = 0.01;

/// One line per paced port that made more than [`STEERING_LATE_SHARE`] of its frames late
/// itself, on a lab (`prefix`) whose receive steering (RPS) is on: in a virtual machine every
/// hand-over then wakes another core with an inter-processor interrupt, which costs
/// microseconds (measured here: 16–19 % of 100 kpps late with it on, 0.6–1.2 % with it off,
/// almost all of those the host's).
fn steering_warnings(
    ports: &[strobe_engine::PortReport],
    steering: bool,
    lab: &strobe_lab::Lab,
) -> Vec<Warning> {
    if !steering {
        return Vec::new();
    }
    ports
        .iter()
        .filter(|p| p.pacing.is_some() && p.frames > 0)
        .filter_map(|p| {
            let own = p.late_frames.saturating_sub(p.late_host_frames);
            let share = own as f64 / p.frames as f64;
            (share > STEERING_LATE_SHARE).then(|| Warning::LateOnSteeringLab {
                port: p.name.clone(),
                late_frames: own,
                late_share: share,
                lab_prefix: lab.prefix.clone(),
                dut: lab.dut.to_string(),
            })
        })
        .collect()
}

/// What the run's lab DUT was and ran, for its results.
pub fn device_under_test(lab: &strobe_lab::Lab) -> strobe_model::DeviceUnderTest {
    let details = strobe_lab::details(lab);
    strobe_model::DeviceUnderTest {
        kind: lab.dut.to_string(),
        name: lab.dut.name(),
        lab: lab.prefix.clone(),
        software: details.software,
        cores: details.cores,
        runs_on: details.runs_on,
    }
}

/// The view's lock; a watcher that panicked while holding it left plain counters behind,
/// which are still worth reading.
fn lock(view: &Mutex<LiveView>) -> MutexGuard<'_, LiveView> {
    view.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl RunHandle {
    /// Asks the run to stop: transmitters end after their current batch, receivers drain.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Stops the flows named while the others go on (each after the hand-over in
    /// progress); the run ends when all its flows are done. Unknown names are ignored.
    pub fn stop_flows(&self, names: &[String]) {
        for name in names {
            self.switches.stop(name);
        }
    }

    /// Gives the flow named `name` a live change (its transmitters apply it at their next
    /// hand-over); false when the run has no such flow. [`crate::session::Session::update_step`]
    /// says which changes a run can take.
    pub fn update_flow(&self, name: &str, update: strobe_engine::live::FlowUpdate) -> bool {
        self.switches.update(name, update)
    }

    /// Pauses every transmitter (after its current hand-over); [`RunHandle::resume`] goes
    /// on with the schedule where it stopped.
    pub fn pause(&self) {
        self.pause.store(true, Ordering::Relaxed);
    }

    pub fn resume(&self) {
        self.pause.store(false, Ordering::Relaxed);
    }

    pub fn is_paused(&self) -> bool {
        self.pause.load(Ordering::Relaxed)
    }

    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(JoinHandle::is_finished)
    }

    pub fn scenario(&self) -> &Scenario {
        &self.scenario
    }

    /// Every paced port's floor and ceiling, once measured (before the first frame).
    pub fn pacing(&self) -> Vec<PortPacing> {
        lock(&self.view).pacing.clone()
    }

    /// The counters now: live while the run goes on, final once it has finished.
    pub fn metrics(&self) -> Metrics {
        let v = lock(&self.view);
        if let (Some(report), Some(results)) = (&v.report, &v.results) {
            return final_metrics(&self.scenario, report, results);
        }
        let draining = v.state == RunState::Running && self.stop.load(Ordering::Relaxed);
        live_metrics(
            &self.scenario,
            if draining {
                RunState::Draining
            } else {
                v.state
            },
            self.is_paused(),
            &self.switches,
            v.last.as_ref(),
            v.previous.as_ref(),
        )
    }

    /// Each flow's latency per interval from `since` (an [`IntervalLatency::index`]) on, for
    /// a run with live latency intervals; empty for others.
    pub fn latency_intervals(&self, since: u64) -> Vec<IntervalLatency> {
        let v = lock(&self.view);
        let skip = since.saturating_sub(v.intervals_dropped) as usize;
        v.intervals.iter().skip(skip).cloned().collect()
    }

    /// The engine's full report once the run has finished well (None before).
    pub fn report(&self) -> Option<Arc<RunReport>> {
        lock(&self.view).report.clone()
    }

    /// What a user should be told about the run once it is over: why it failed, or its
    /// results' failures and warnings (a port an error stopped, a missed rate, total loss).
    pub fn problems(&self) -> Vec<Warning> {
        let v = lock(&self.view);
        match (&v.error, &v.results) {
            (Some(error), _) => vec![Warning::RunFailed {
                error: error.to_string(),
            }],
            (None, Some(r)) => r.failures.iter().chain(&r.warnings).cloned().collect(),
            (None, None) => Vec::new(),
        }
    }

    /// What the user has not been told yet, each once (a front end reports them with its
    /// next reply): the warnings said while the run goes on as they come, and
    /// [`RunHandle::problems`] when the run is over.
    pub fn take_problems(&self) -> Vec<Warning> {
        let (over, mut told) = {
            let mut v = lock(&self.view);
            let fresh = v.live_warnings[v.live_warnings_taken..].to_vec();
            v.live_warnings_taken = v.live_warnings.len();
            (
                matches!(v.state, RunState::Finished | RunState::Failed),
                fresh,
            )
        };
        if over && !self.problems_taken.swap(true, Ordering::Relaxed) {
            told.extend(self.problems());
        }
        told
    }

    /// The run's results once it has finished well (None before).
    pub fn results(&self) -> Option<Arc<Results>> {
        lock(&self.view).results.clone()
    }

    /// Waits until the run is over (finished or failed) without taking the handle: for
    /// front ends that share it while waiting (its thread is joined when it is dropped).
    pub fn wait_over(&self) {
        while !matches!(
            lock(&self.view).state,
            RunState::Finished | RunState::Failed
        ) {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    /// Waits for the run to end and returns its report.
    pub fn wait(mut self) -> Result<Arc<RunReport>, ControlError> {
        self.wait_finished()
    }

    /// Waits for the run to end, keeping the handle (its metrics are then final).
    pub fn wait_finished(&mut self) -> Result<Arc<RunReport>, ControlError> {
        match self.thread.take() {
            Some(thread) => thread.join().unwrap_or_else(|_| {
                Err(ControlError::Runtime(
                    "the run's watcher thread panicked".into(),
                ))
            }),
            None => self
                .report()
                .ok_or_else(|| ControlError::Runtime("the run failed".into())),
        }
    }
}

impl Drop for RunHandle {
    /// A handle dropped while its run goes on stops the run and waits for it: no worker
    /// outlives the handle that owns its ports.
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.stop();
            let _ = self.wait_finished();
        }
    }
}

/// Frames a flow sends in all, when its duration says (None: until stopped, or set by time).
fn planned_frames(duration: &Duration) -> Option<u64> {
    match *duration {
        Duration::Packets(n) => Some(n),
        Duration::Bursts {
            bursts, packets, ..
        } if bursts > 0 => Some(bursts.saturating_mul(packets)),
        _ => None,
    }
}

/// Bytes as OTG counts them (its frame sizes include the FCS): the engine's counts, of frames
/// without their 4-byte FCS on both sides, plus an FCS per frame.
fn with_fcs(bytes: u64, frames: u64) -> u64 {
    bytes.saturating_add(frames.saturating_mul(u64::from(strobe_model::FCS_LEN)))
}

fn per_second(delta: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        delta as f64 * 1e9 / ns as f64
    }
}

/// A flow that other hosts send and receive (a multi-host run gives every agent every
/// flow): nothing of it happens here, so it is never "started" here.
fn sent_elsewhere(scenario: &Scenario, flow: &strobe_model::FlowSpec) -> bool {
    scenario
        .ports
        .iter()
        .any(|p| p.name == flow.tx_port && p.location.is_remote())
}

fn elsewhere(scenario: &Scenario, flow: &strobe_model::FlowSpec) -> bool {
    let remote = |name: &str| {
        scenario
            .ports
            .iter()
            .any(|p| p.name == name && p.location.is_remote())
    };
    remote(&flow.tx_port) && flow.rx_ports.iter().all(|r| remote(r))
}

fn live_metrics(
    scenario: &Scenario,
    state: RunState,
    paused: bool,
    switches: &FlowSwitches,
    last: Option<&Sample>,
    previous: Option<&Sample>,
) -> Metrics {
    let zero = FlowSnapshot::default();
    let flows: Vec<FlowMetrics> = scenario
        .flows
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let now = last.and_then(|s| s.flows.get(i)).unwrap_or(&zero);
            let before = match (last, previous) {
                (Some(a), Some(b)) => Some((
                    b.flows.get(i).copied().unwrap_or(zero),
                    a.elapsed_ns.saturating_sub(b.elapsed_ns),
                )),
                _ => None,
            };
            let done = planned_frames(&f.schedule.duration).is_some_and(|n| now.tx_frames >= n)
                || switches.is_stopped(&f.name)
                || elsewhere(scenario, f)
                // Its sender has ended (a run holding receivers for other hosts goes on).
                || (last.is_some_and(|s| s.senders_done) && !sent_elsewhere(scenario, f));
            FlowMetrics {
                name: f.name.clone(),
                tx_port: f.tx_port.clone(),
                rx_ports: f.rx_ports.clone(),
                transmit: match state {
                    RunState::Starting => Transmit::Started,
                    RunState::Running if done => Transmit::Stopped,
                    RunState::Running if paused => Transmit::Paused,
                    RunState::Running => Transmit::Started,
                    _ => Transmit::Stopped,
                },
                counters: live_counters(now, before.as_ref()),
                // Frames in flight are not lost yet: loss is final only after the drain.
                loss_pct: None,
                latency: live_latency(now),
                first_rx_ns: None,
                last_rx_ns: None,
                tagged: live_tagged(f, last, previous),
            }
        })
        .collect();
    Metrics {
        state,
        elapsed_ns: last.map_or(0, |s| s.elapsed_ns),
        ports: port_metrics(scenario, &flows),
        flows,
    }
}

/// Counters from a snapshot, and rates against the one before (with the ns between).
fn live_counters(now: &FlowSnapshot, before: Option<&(FlowSnapshot, u64)>) -> Counters {
    let (rate_tx, rate_rx, bytes_rate_tx, bytes_rate_rx) = match before {
        Some((before, ns)) => {
            let frames_tx = now.tx_frames.saturating_sub(before.tx_frames);
            let frames_rx = now.rx_frames.saturating_sub(before.rx_frames);
            let bytes_tx = now.tx_bytes.saturating_sub(before.tx_bytes);
            let bytes_rx = now.rx_bytes.saturating_sub(before.rx_bytes);
            (
                per_second(frames_tx, *ns),
                per_second(frames_rx, *ns),
                per_second(with_fcs(bytes_tx, frames_tx), *ns),
                per_second(with_fcs(bytes_rx, frames_rx), *ns),
            )
        }
        None => (0.0, 0.0, 0.0, 0.0),
    };
    Counters {
        frames_tx: now.tx_frames,
        frames_rx: now.rx_frames,
        bytes_tx: with_fcs(now.tx_bytes, now.tx_frames),
        bytes_rx: with_fcs(now.rx_bytes, now.rx_frames),
        frames_tx_rate: rate_tx,
        frames_rx_rate: rate_rx,
        bytes_tx_rate: bytes_rate_tx,
        bytes_rx_rate: bytes_rate_rx,
    }
}

fn live_latency(now: &FlowSnapshot) -> Option<LatencySummary> {
    now.latency.map(|l| LatencySummary {
        minimum_ns: l.min_ns as f64,
        maximum_ns: l.max_ns as f64,
        average_ns: l.mean_ns(),
        frames: l.frames,
    })
}

/// A tagged flow's live counters per combination of tag values: its tag positions' added up.
fn live_tagged(
    f: &strobe_model::FlowSpec,
    last: Option<&Sample>,
    previous: Option<&Sample>,
) -> Vec<TaggedMetrics> {
    let Some(plan) = f.tag_plan().ok().flatten() else {
        return Vec::new();
    };
    let positions = |s: Option<&Sample>| {
        s.and_then(|s| s.tagged.iter().find(|t| t.flow_id == f.id))
            .map(|t| t.positions.clone())
    };
    let (now, before) = (positions(last), positions(previous));
    let ns = match (last, previous) {
        (Some(a), Some(b)) => a.elapsed_ns.saturating_sub(b.elapsed_ns),
        _ => 0,
    };
    let sum = |snaps: &Option<Vec<FlowSnapshot>>, members: &[usize]| {
        let mut total = FlowSnapshot::default();
        for snap in members.iter().filter_map(|&p| snaps.as_ref()?.get(p)) {
            total.add(snap);
        }
        total
    };
    plan.groups()
        .into_iter()
        .map(|(values, members)| {
            let now = sum(&now, &members);
            let before = before.as_ref().map(|_| (sum(&before, &members), ns));
            TaggedMetrics {
                tags: crate::results::tag_values(&plan, &values),
                counters: live_counters(&now, before.as_ref()),
                loss_pct: None,
                latency: live_latency(&now),
                first_rx_ns: None,
                last_rx_ns: None,
                frames_rx_unique: None,
            }
        })
        .collect()
}

/// The final counters: counts, loss and times from the run's results; latency from the
/// report's histograms with the exact average the live view gives too.
fn final_metrics(scenario: &Scenario, report: &RunReport, results: &Results) -> Metrics {
    let flows: Vec<FlowMetrics> = scenario
        .flows
        .iter()
        .map(|f| {
            let Some(r) = results.flow(&f.name) else {
                return FlowMetrics::idle(f);
            };
            let latency = report
                .rx_flows
                .get(usize::from(f.id))
                .and_then(Option::as_ref)
                .and_then(|rx| rx.latency.as_ref())
                .and_then(|l| {
                    let h = l.histogram();
                    (!h.is_empty()).then(|| LatencySummary {
                        minimum_ns: h.min() as f64,
                        maximum_ns: h.max() as f64,
                        average_ns: l.sum_ns() as f64 / h.len() as f64,
                        frames: h.len(),
                    })
                });
            let frames_rx = r.frames_rx.unwrap_or(0);
            FlowMetrics {
                counters: Counters {
                    frames_tx: r.frames_tx.unwrap_or(0),
                    frames_rx,
                    bytes_tx: with_fcs(r.bytes_tx.unwrap_or(0), r.frames_tx.unwrap_or(0)),
                    bytes_rx: with_fcs(r.bytes_rx.unwrap_or(0), frames_rx),
                    ..Counters::default()
                },
                loss_pct: r.loss_pct(),
                latency,
                first_rx_ns: r.first_rx_ns,
                last_rx_ns: r.last_rx_ns,
                tagged: r
                    .tagged
                    .iter()
                    .flatten()
                    .map(|t| TaggedMetrics {
                        tags: t.tags.clone(),
                        counters: Counters {
                            frames_tx: t.frames_tx,
                            frames_rx: t.frames_rx.unwrap_or(0),
                            bytes_tx: t.bytes_tx_with_fcs,
                            bytes_rx: t.bytes_rx_with_fcs.unwrap_or(0),
                            ..Counters::default()
                        },
                        loss_pct: t.loss_pct(),
                        latency: t.latency.map(|l| LatencySummary {
                            minimum_ns: l.min_ns,
                            maximum_ns: l.max_ns,
                            average_ns: t.latency_average_ns.unwrap_or(l.mean_ns),
                            frames: l.count,
                        }),
                        first_rx_ns: t.first_rx_ns,
                        last_rx_ns: t.last_rx_ns,
                        frames_rx_unique: t.frames_rx_unique,
                    })
                    .collect(),
                ..FlowMetrics::idle(f)
            }
        })
        .collect();
    let mut ports = port_metrics(scenario, &flows);
    // A receive port counts every frame it saw, the flows' and any other.
    for rx in &report.rx_ports {
        if let Some(p) = ports.iter_mut().find(|p| p.name == rx.name) {
            p.counters.frames_rx = rx.frames;
        }
    }
    Metrics {
        state: RunState::Finished,
        elapsed_ns: report.ports.iter().map(|p| p.elapsed_ns).max().unwrap_or(0),
        flows,
        ports,
    }
}

/// Ports' counters from their flows': sent on the flow's tx port, received on its rx ports.
pub fn port_metrics(scenario: &Scenario, flows: &[FlowMetrics]) -> Vec<PortMetrics> {
    scenario
        .ports
        .iter()
        .map(|p| {
            let mut m = PortMetrics {
                name: p.name.clone(),
                location: p.location.to_string(),
                transmit: Transmit::Stopped,
                counters: Counters::default(),
            };
            let port = &mut m.counters;
            for f in flows {
                let flow = &f.counters;
                if f.tx_port == p.name {
                    port.frames_tx += flow.frames_tx;
                    port.bytes_tx += flow.bytes_tx;
                    port.frames_tx_rate += flow.frames_tx_rate;
                    port.bytes_tx_rate += flow.bytes_tx_rate;
                    if f.transmit == Transmit::Started {
                        m.transmit = Transmit::Started;
                    }
                }
                if f.rx_ports.contains(&p.name) {
                    port.frames_rx += flow.frames_rx;
                    port.bytes_rx += flow.bytes_rx;
                    port.frames_rx_rate += flow.frames_rx_rate;
                    port.bytes_rx_rate += flow.bytes_rx_rate;
                }
            }
            m
        })
        .collect()
}
