//! The receive worker of one port: busy-polls its receiver, recognises strobe's frames and
//! counts them per flow until told to stop (after the run's drain period).

use std::sync::atomic::{AtomicBool, Ordering};

use strobe_io::clocksync::ClockSync;
use strobe_io::xdp_count::{CountSnapshot, XdpCounter};
use strobe_io::{Receiver, RxDrops, RxTimestamp};

use std::sync::mpsc::Sender;

use crate::clock::Clock;
use crate::intervals::Snapshot;
use crate::live::LiveCounters;
use crate::rx::{OtherFrames, RxTracker};

/// Frames taken from the receiver per poll.
const POLL_BATCH: usize = 256;
/// Publish live counters at least every this many frames.
const PUBLISH_EVERY: u64 = 8192;
/// While nothing arrives, ask the receiver this often whether it can still receive (a ring
/// whose interface went away just stays empty).
pub(crate) const ALIVE_CHECK_NS: u64 = 50_000_000;

/// What one receive port saw besides the per-flow counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RxPortReport {
    pub name: String,
    pub receiver: String,
    pub frames: u64,
    pub other: OtherFrames,
    pub drops: RxDrops,
    /// Frames the interface dropped on receive during the run before any socket saw them
    /// (a full backlog), as the kernel counts them; None where it keeps no such counter.
    /// Another run or traffic on the same interface counts here too.
    pub interface_drops: Option<u64>,
    /// How the receive timestamps were taken: "kernel", "user", "hardware", "mixed" (see
    /// `timestamp_counts`), or "none".
    pub timestamps: &'static str,
    /// Frames per receive timestamp source.
    pub timestamp_counts: TimestampCounts,
    /// For hardware timestamps: the NIC clock and how it was mapped to CLOCK_REALTIME.
    pub hardware_clock: Option<String>,
    /// The receiver error that stopped this port before the run's end (its interface went
    /// away, a ring error), if one did: the counts cover what arrived until then.
    pub failure: Option<String>,
    /// With transmit stamps from the senders (AF_XDP TX metadata): how many frames' latency
    /// used one, and how many got none in time (left out of latency).
    pub tx_stamps: Option<crate::rx::TxStampCounts>,
}

/// Counts frames from `rx` into `tracker` until `stop` is set. Frames already waiting when
/// `stop` is seen are still drained (one last poll round). A receiver that fails ends the
/// worker early: what was counted until then is kept, and the report names the failure.
///
/// Hardware timestamps are in the NIC's clock: `hardware_clock` maps them to CLOCK_REALTIME,
/// the clock of the transmit stamps (without it they cannot give a latency and are left out).
pub fn run_rx<R: Receiver>(
    port_name: &str,
    rx: &mut R,
    tracker: &mut RxTracker,
    ctx: &RxContext<'_>,
    stop: &AtomicBool,
) -> RxPortReport {
    let (live, clock, hardware_clock) = (ctx.live, ctx.clock, ctx.hardware_clock);
    let mut intervals = ctx
        .intervals
        .as_ref()
        .map(|i| IntervalClock::new(i, clock, tracker));
    let mut report = RxPortReport {
        name: port_name.to_string(),
        receiver: rx.describe(),
        frames: 0,
        other: OtherFrames::default(),
        drops: RxDrops::default(),
        interface_drops: None,
        timestamps: "none",
        timestamp_counts: TimestampCounts::default(),
        hardware_clock: None,
        failure: None,
        tx_stamps: None,
    };
    let mut publisher = Publisher::new(tracker);
    let mut since_publish = 0u64;
    let mut last_publish = clock.now_ticks();
    let publish_ticks = clock.ns_to_ticks(10_000_000);
    let mut idle_polls = 0u32;
    let idle = ctx.idle;
    let alive_check_ticks = clock.ns_to_ticks(ALIVE_CHECK_NS);
    let mut last_alive_check = last_publish;
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        let counts = &mut report.timestamp_counts;
        let n = rx.poll(POLL_BATCH, |f| {
            let ns = match f.timestamp {
                Some(RxTimestamp::Hardware(ns)) => {
                    counts.hardware += 1;
                    hardware_to_realtime(hardware_clock, ns)
                }
                Some(RxTimestamp::Kernel(ns)) => {
                    counts.kernel += 1;
                    Some(ns)
                }
                Some(RxTimestamp::User(ns)) => {
                    counts.user += 1;
                    Some(ns)
                }
                None => None,
            };
            // In debug builds, the test-only clock offset (see `strobe_io::test_clock`).
            let ns = ns.map(strobe_io::test_clock::shift);
            tracker.on_frame(f.data, f.wire_len, ns);
        });
        let n = match n {
            Ok(n) => n,
            Err(e) => {
                report.failure = Some(e.to_string());
                break;
            }
        };
        if n > 0 {
            report.frames += n as u64;
            since_publish += n as u64;
        }
        if tracker.awaits_tx_stamps() {
            tracker.settle_tx_stamps(clock.realtime_now_ns(), false);
        }
        if let Some(live) = live {
            let now = clock.now_ticks();
            if let Some(iv) = &mut intervals {
                if now >= iv.next_ticks {
                    iv.send(tracker);
                    iv.index += 1;
                    iv.next_ticks += iv.step_ticks;
                }
            }
            if since_publish >= PUBLISH_EVERY
                || (since_publish > 0 && now - last_publish > publish_ticks)
            {
                publisher.publish(tracker, live);
                since_publish = 0;
                last_publish = now;
            }
        }
        if n == 0 {
            if stopping {
                break;
            }
            let now = clock.now_ticks();
            if now.saturating_sub(last_alive_check) > alive_check_ticks {
                last_alive_check = now;
                if let Err(e) = rx.check_alive() {
                    report.failure = Some(e.to_string());
                    break;
                }
            }
            idle_polls += 1;
            idle.back_off(idle_polls);
        } else {
            idle_polls = 0;
        }
    }
    // The senders finished before the receivers were stopped: every stamp that will come
    // has come.
    tracker.settle_tx_stamps(clock.realtime_now_ns(), true);
    report.tx_stamps = tracker.tx_stamp_counts();
    if let Some(live) = live {
        publisher.publish(tracker, live);
    }
    if let Some(iv) = &mut intervals {
        iv.send(tracker);
    }
    report.timestamps = report.timestamp_counts.summary();
    report.other = tracker.other;
    match rx.drops() {
        Ok(drops) => report.drops = drops,
        Err(e) => {
            report.failure.get_or_insert(e.to_string());
        }
    }
    report
}

/// How many frames each receive timestamp source stamped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimestampCounts {
    pub kernel: u64,
    pub user: u64,
    pub hardware: u64,
}

impl TimestampCounts {
    /// The one source that stamped every stamped frame, "mixed", or "none".
    pub fn summary(&self) -> &'static str {
        match (self.kernel > 0, self.user > 0, self.hardware > 0) {
            (false, false, false) => "none",
            (true, false, false) => "kernel",
            (false, true, false) => "user",
            (false, false, true) => "hardware",
            _ => "mixed",
        }
    }
}

/// What a receive worker works with besides its receiver and tracker.
pub struct RxContext<'a> {
    /// Live counters to publish to (status lines).
    pub live: Option<&'a LiveCounters>,
    pub clock: &'a Clock,
    /// Maps hardware receive timestamps to CLOCK_REALTIME.
    pub hardware_clock: Option<&'a ClockSync>,
    /// Where to send per-interval latency snapshots (HdrHistogram interval logs).
    pub intervals: Option<IntervalSink>,
    /// What to do while nothing arrives.
    pub idle: IdlePolicy,
}

/// A receive worker's end of the interval channel.
pub struct IntervalSink {
    pub worker: usize,
    /// Interval boundaries: origin + k × interval, CLOCK_REALTIME ns.
    pub origin_ns: u64,
    pub interval_ns: u64,
    pub sender: Sender<Snapshot>,
}

/// Interval boundaries on the worker's tick clock, and what was last sent per flow.
struct IntervalClock<'a> {
    sink: &'a IntervalSink,
    index: u64,
    next_ticks: u64,
    step_ticks: u64,
    sent_frames: Vec<u64>,
}

impl<'a> IntervalClock<'a> {
    fn new(sink: &'a IntervalSink, clock: &Clock, tracker: &RxTracker) -> Self {
        let (now_ticks, now_ns) = (clock.now_ticks(), clock.realtime_now_ns());
        let step = sink.interval_ns.max(1);
        let index = now_ns.saturating_sub(sink.origin_ns) / step;
        let next_ns = sink.origin_ns + (index + 1) * step;
        IntervalClock {
            sink,
            index,
            next_ticks: now_ticks + clock.ns_to_ticks(next_ns.saturating_sub(now_ns)),
            step_ticks: clock.ns_to_ticks(step),
            sent_frames: vec![0; tracker.flow_count()],
        }
    }

    /// Sends the cumulative histogram of every flow that measured something new (a copy per
    /// flow and interval; nothing per frame).
    fn send(&mut self, tracker: &RxTracker) {
        for (id, sent) in self.sent_frames.iter_mut().enumerate() {
            let Some(l) = tracker.latency(id as u16) else {
                continue;
            };
            let frames = l.histogram().len();
            if frames == *sent {
                continue;
            }
            *sent = frames;
            let _ = self.sink.sender.send(Snapshot {
                worker: self.sink.worker,
                flow_id: id as u16,
                index: self.index,
                cumulative: l.histogram().clone(),
            });
        }
    }
}

/// A hardware timestamp on CLOCK_REALTIME, by the measured relation of the NIC's clock to it.
#[inline]
fn hardware_to_realtime(sync: Option<&ClockSync>, ns: u64) -> Option<u64> {
    u64::try_from(sync?.b_to_a(ns as i128)).ok()
}

/// What a receive worker does when its receiver has nothing: spin first (lowest latency
/// while traffic flows), then yield, then nap. A worker that spins forever starves the
/// kernel's own packet processing (ksoftirqd, a software DUT) when cores are few.
#[derive(Clone, Copy, Debug)]
pub struct IdlePolicy {
    /// Empty polls spent spinning before yielding the CPU.
    pub spin_polls: u32,
    /// Empty polls spent yielding before napping.
    pub yield_polls: u32,
    /// Length of a nap.
    pub nap: std::time::Duration,
}

impl Default for IdlePolicy {
    fn default() -> Self {
        IdlePolicy {
            spin_polls: 64,
            yield_polls: 256,
            nap: std::time::Duration::from_micros(50),
        }
    }
}

impl IdlePolicy {
    /// Spin forever: the lowest latency, at the cost of a whole core.
    pub fn busy() -> Self {
        IdlePolicy {
            spin_polls: u32::MAX,
            ..IdlePolicy::default()
        }
    }

    pub(crate) fn back_off(&self, idle_polls: u32) {
        if idle_polls <= self.spin_polls {
            // The next poll is the spin. No PAUSE hint: under KVM a PAUSE loop trips
            // pause-loop exiting and loses the vCPU for microseconds (see the transmit
            // worker's wait).
            return;
        }
        if idle_polls <= self.spin_polls + self.yield_polls {
            std::thread::yield_now();
        } else {
            std::thread::sleep(self.nap);
        }
    }
}

/// Publishes this worker's counts as increments, so several receive ports can feed the same
/// flow's live counters.
struct Publisher {
    sent: Vec<(u64, u64, u64)>,
    /// Latency frames and sum published so far, per flow.
    latency_sent: Vec<(u64, u128)>,
    other: u64,
}

impl Publisher {
    fn new(tracker: &RxTracker) -> Self {
        Publisher {
            sent: vec![(0, 0, 0); tracker.flow_count()],
            latency_sent: vec![(0, 0); tracker.flow_count()],
            other: 0,
        }
    }

    fn publish(&mut self, tracker: &RxTracker, live: &LiveCounters) {
        for id in 0..self.sent.len() {
            let Some(c) = tracker.counters(id as u16) else {
                continue;
            };
            let latency = tracker.latency(id as u16).map(|lat| {
                let h = lat.histogram();
                (h.len(), lat.sum_ns(), h.min(), h.max())
            });
            self.publish_flow(id, live, (c.frames, c.bytes, c.unique), latency);
        }
        self.publish_other(tracker.other.total(), live);
    }

    /// Publishes what an in-kernel counting program counted (its counters, no histograms).
    fn publish_counted(&mut self, counted: &CountSnapshot, live: &LiveCounters) {
        for (id, c) in counted.flows.iter().enumerate().take(self.sent.len()) {
            let l = &c.latency;
            let latency = l
                .min_ns
                .zip(l.max_ns)
                .map(|(min, max)| (l.recorded, l.sum_ns, min, max));
            self.publish_flow(id, live, (c.frames, c.bytes, c.unique), latency);
        }
        let o = &counted.other;
        self.publish_other(
            o.not_instrumented + o.unknown_flow + o.foreign + o.out_of_window,
            live,
        );
    }

    /// One flow's counts (frames, bytes, unique) and latency (frames, sum, min, max) so
    /// far, published as what was added since the last time.
    fn publish_flow(
        &mut self,
        id: usize,
        live: &LiveCounters,
        now: (u64, u64, u64),
        latency: Option<(u64, u128, u64, u64)>,
    ) {
        let Some(l) = live.flow(id as u16) else {
            return;
        };
        let sent = &mut self.sent[id];
        if now != *sent {
            l.rx_frames.fetch_add(now.0 - sent.0, Ordering::Relaxed);
            l.rx_bytes.fetch_add(now.1 - sent.1, Ordering::Relaxed);
            l.rx_unique.fetch_add(now.2 - sent.2, Ordering::Relaxed);
            *sent = now;
        }
        if let (Some((frames, sum, min, max)), Some(published)) =
            (latency, self.latency_sent.get_mut(id))
        {
            if frames > published.0 {
                // The live sum wraps only past 584 years of summed latency.
                let added = u64::try_from(sum - published.1).unwrap_or(u64::MAX);
                l.latency_sum_ns.fetch_add(added, Ordering::Relaxed);
                l.latency_min_ns.fetch_min(min, Ordering::Relaxed);
                l.latency_max_ns.fetch_max(max, Ordering::Relaxed);
                // Frames last, released: a reader that acquires them sees the sum and
                // bounds of at least those frames.
                l.latency_frames
                    .fetch_add(frames - published.0, Ordering::Release);
                *published = (frames, sum);
            }
        }
    }

    fn publish_other(&mut self, other: u64, live: &LiveCounters) {
        live.rx_other
            .fetch_add(other - self.other, Ordering::Relaxed);
        self.other = other;
    }
}

/// How often a counting port's worker reads the program's counters for the live view.
const COUNTED_READ_NS: u64 = 10_000_000;

/// The receive worker of a port counted in the kernel (`xdp-count:`): no frame reaches it.
/// It reads the program's counters for the live view, its histograms at each interval's end
/// (interval logs) and once more when `stop` is set, into `tracker`, which then holds the
/// port's results as a frame-by-frame receiver's would.
pub fn run_counted(
    port_name: &str,
    counter: &XdpCounter,
    receiver: String,
    tracker: &mut RxTracker,
    ctx: &RxContext<'_>,
    stop: &AtomicBool,
) -> RxPortReport {
    let (live, clock) = (ctx.live, ctx.clock);
    let mut intervals = ctx
        .intervals
        .as_ref()
        .map(|i| IntervalClock::new(i, clock, tracker));
    let mut publisher = Publisher::new(tracker);
    let read_every = std::time::Duration::from_nanos(COUNTED_READ_NS);
    let mut failure = None;
    let mut reads = 0u64;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(read_every);
        reads += 1;
        // An interface that went away took the program with it; about once a second.
        if reads % 100 == 0 {
            if let Err(e) = counter.check_attached() {
                failure = Some(e.to_string());
                break;
            }
        }
        // NTP may slew CLOCK_REALTIME against the program's CLOCK_MONOTONIC; a NIC's
        // clock drifts against CLOCK_REALTIME (by the drift measured before the run: at
        // 100 ppm, 1 µs between two updates).
        counter.refresh_clock();
        if let Some(sync) = ctx.hardware_clock {
            counter.set_device_offset(crate::device_offset(sync));
        }
        if let Some(live) = live {
            publisher.publish_counted(&counter.counters(), live);
        }
        if let Some(iv) = &mut intervals {
            if clock.now_ticks() >= iv.next_ticks {
                tracker.absorb_counted(&counter.snapshot());
                iv.send(tracker);
                iv.index += 1;
                iv.next_ticks += iv.step_ticks;
            }
        }
    }
    // Frames from now on count as late, as a frame-by-frame receiver stops seeing them.
    counter.finalise();
    let counted = counter.snapshot();
    tracker.absorb_counted(&counted);
    if let Some(live) = live {
        publisher.publish(tracker, live);
    }
    if let Some(iv) = &mut intervals {
        iv.send(tracker);
    }
    // Frames with a latency, by the clock that stamped them (a flow without latency has
    // frames the device stamped but none stamped for a latency).
    let mut timestamp_counts = TimestampCounts::default();
    for f in &counted.flows {
        let stamped = f.latency.recorded + f.latency.negative;
        let by_device = f.device_stamped.min(stamped);
        timestamp_counts.hardware += by_device;
        timestamp_counts.kernel += stamped - by_device;
    }
    let overflowed: Vec<String> = counted
        .flows
        .iter()
        .enumerate()
        .filter(|(_, f)| f.latency.overflowed)
        .map(|(id, _)| id.to_string())
        .collect();
    let failure = if failure.is_some() {
        failure
    } else if counted.other.stray > 0 {
        Some(format!(
            "{} frames arrived on a CPU the counting program has no block for (CPUs added during the run): they were not counted",
            counted.other.stray
        ))
    } else if !overflowed.is_empty() {
        Some(format!(
            "a latency bucket of flow id(s) {} passed 2^32 frames on one CPU: those flows' histograms undercount",
            overflowed.join(", ")
        ))
    } else {
        None
    };
    RxPortReport {
        name: port_name.to_string(),
        receiver,
        frames: counted.flows.iter().map(|f| f.frames).sum::<u64>() + tracker.other.total(),
        other: tracker.other,
        drops: RxDrops::default(),
        interface_drops: None,
        timestamps: timestamp_counts.summary(),
        timestamp_counts,
        hardware_clock: None,
        failure,
        tx_stamps: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use strobe_io::{IoError, RxFrame};
    use strobe_wire::trailer::{Trailer, LEN as TRAILER_LEN};

    const TAG: u8 = 0x42;

    /// A receiver that hands out `frames` of flow 0, 1 µs after they were sent, then fails
    /// the way it is told: on its next poll, or only when asked whether it is alive.
    struct Failing {
        frames: VecDeque<Vec<u8>>,
        poll_fails: bool,
        alive_checks: u32,
    }

    impl Failing {
        fn new(frames: u32, poll_fails: bool) -> Failing {
            let frames = (0..frames)
                .map(|seq| {
                    let mut f = vec![0x5A; 64];
                    let tail: &mut [u8; TRAILER_LEN] =
                        (&mut f[64 - TRAILER_LEN..]).try_into().unwrap();
                    Trailer::sent(TAG, 0, seq, 1_000_000 + u64::from(seq)).write(tail);
                    f
                })
                .collect();
            Failing {
                frames,
                poll_fails,
                alive_checks: 0,
            }
        }
    }

    impl Receiver for Failing {
        fn describe(&self) -> String {
            "failing".into()
        }
        fn poll<F: FnMut(&RxFrame<'_>)>(
            &mut self,
            max: usize,
            mut each: F,
        ) -> Result<usize, IoError> {
            if self.frames.is_empty() && self.poll_fails {
                return Err(IoError::Other("the ring broke".into()));
            }
            let n = max.min(self.frames.len());
            for f in self.frames.drain(..n) {
                let tx_ns = Trailer::read(f[64 - TRAILER_LEN..].try_into().unwrap())
                    .unwrap()
                    .tx_ns;
                each(&RxFrame {
                    data: &f,
                    wire_len: 64,
                    timestamp: Some(RxTimestamp::Kernel(tx_ns + 1_000)),
                    vlan: None,
                });
            }
            Ok(n)
        }
        fn drops(&mut self) -> Result<RxDrops, IoError> {
            Ok(RxDrops { ring_full: 7 })
        }
        fn check_alive(&mut self) -> Result<(), IoError> {
            self.alive_checks += 1;
            match self.frames.is_empty() {
                true => Err(IoError::Other("interface `rx0` went away".into())),
                false => Ok(()),
            }
        }
    }

    /// Runs a receive worker on `rx` that nobody stops (a watchdog does after 20 s, so a
    /// worker that misses its receiver's failure fails the test instead of hanging it).
    fn run_unstopped(rx: &mut Failing, tracker: &mut RxTracker) -> RxPortReport {
        let clock = Clock::monotonic();
        let ctx = RxContext {
            live: None,
            clock: &clock,
            hardware_clock: None,
            intervals: None,
            idle: IdlePolicy::default(),
        };
        let (stop, done) = (AtomicBool::new(false), AtomicBool::new(false));
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
                while !done.load(Ordering::Relaxed) && std::time::Instant::now() < deadline {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                stop.store(true, Ordering::Relaxed);
            });
            let report = run_rx("rx", rx, tracker, &ctx, &stop);
            done.store(true, Ordering::Relaxed);
            report
        })
    }

    #[test]
    fn a_receiver_that_fails_keeps_every_count_and_latency_before_the_failure() {
        let mut rx = Failing::new(1000, true);
        let mut tracker = RxTracker::new(1, TAG);
        tracker.set_latency(0, true);
        let report = run_unstopped(&mut rx, &mut tracker);
        assert_eq!(report.failure.as_deref(), Some("the ring broke"));
        assert_eq!(report.frames, 1000);
        assert_eq!(report.drops.ring_full, 7, "drop counters still read");
        assert_eq!(tracker.counters(0).unwrap().frames, 1000);
        let latency = tracker.latency(0).unwrap().histogram();
        assert_eq!(latency.len(), 1000);
        assert_eq!(latency.max(), 1_000);
    }

    #[test]
    fn an_interface_that_goes_away_is_noticed_while_nothing_arrives() {
        let mut rx = Failing::new(300, false);
        let mut tracker = RxTracker::new(1, TAG);
        tracker.set_latency(0, true);
        let report = run_unstopped(&mut rx, &mut tracker);
        assert_eq!(
            report.failure.as_deref(),
            Some("interface `rx0` went away"),
            "the worker ran until the watchdog stopped it"
        );
        assert_eq!(report.frames, 300);
        assert_eq!(tracker.latency(0).unwrap().histogram().len(), 300);
        // Asked while idle, not per frame: once its 300 frames (two polls) were taken.
        assert_eq!(rx.alive_checks, 1);
    }

    #[test]
    fn sources_are_counted_and_summarised() {
        let mut c = TimestampCounts::default();
        assert_eq!(c.summary(), "none");
        c.kernel = 5;
        assert_eq!(c.summary(), "kernel");
        c.hardware = 1;
        assert_eq!(c.summary(), "mixed");
    }

    #[test]
    fn hardware_stamps_are_mapped_to_realtime_or_left_out() {
        // The NIC's clock runs 37 s ahead of CLOCK_REALTIME (TAI-style), no drift.
        let sync = ClockSync {
            offset_ns: 37_000_000_000,
            residual_ns: 0.0,
            drift_ppb: 0.0,
            uncertainty_ns: 0,
            rounds: 1,
            at_ns: 1_800_000_000_000_000_000,
        };
        let hw = 1_800_000_037_000_000_500u64;
        assert_eq!(
            hardware_to_realtime(Some(&sync), hw),
            Some(1_800_000_000_000_000_500)
        );
        assert_eq!(hardware_to_realtime(None, hw), None);
    }
}
