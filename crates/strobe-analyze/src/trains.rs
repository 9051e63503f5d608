//! The convoy of packet trains, after "Measuring latency of high-speed optical links with
//! DPDK" (../shared/papers/003): trains of frames sent back to back, of which only the head
//! is timestamped (it alone waits in no transmit queue), the rest dummies whose dispersion at
//! the receiver gives the bandwidth and whose losses give the loss ratio; many trains, and
//! across them the mean with its spread, the Interval Dispersion Index (IDI = variance /
//! mean, the study's Eq. 3) and the convergence of the mean (the variance of the mean of N
//! independent trains falls as σ²/N, its Eq. 6).
//!
//! Pure: the receiver's per-train counts and times go in, figures come out.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::{FCS_BYTES, L1_OVERHEAD_BYTES};

/// What the receiver saw of one train.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TrainArrival {
    /// The train's number in the convoy, from 0.
    pub train: u32,
    /// Frames the train was sent with.
    pub frames_sent: u32,
    /// Frames received, duplicates included.
    pub frames_rx: u32,
    pub duplicates: u32,
    /// Frames that arrived after a later frame of the same train.
    pub reordered: u32,
    /// Latency of the head frame (the only one timestamped), when it arrived.
    pub head_latency_ns: Option<f64>,
    /// Receive times of the train's first and last frame to arrive.
    pub first_rx_ns: Option<u64>,
    pub last_rx_ns: Option<u64>,
    /// The second half of the train (places from frames_sent / 2 on): when its first frame
    /// (that place) arrived, and how many of its frames arrived (duplicates left out).
    pub mid_rx_ns: Option<u64>,
    pub second_half_rx: u32,
    /// The second half's arrivals, fitted as they come (frames so far against time).
    pub second_half_fit: ArrivalFit,
    /// Frames that arrived from the head on with none missing (places 0, 1, … in a row):
    /// what got through before a bottleneck that drops a train's tail began to drop.
    pub head_run: u32,
    /// The arrivals but the head's, in the order they came, past the bottleneck's first
    /// burst.
    pub after_burst: AfterBurst,
    /// Size of each frame, FCS included (as OTG and strobe size frames).
    pub frame_bytes: u32,
}

/// A least-squares line through a train's arrivals, the k-th arrival at x = k: its slope
/// is the time per frame. Kept as running sums (constant time per frame, no storage), with
/// times relative to the first arrival so that the sums stay exact in an f64. Two endpoints
/// alone carry each one's timing jitter (a shaper's timer fires late by microseconds) into
/// the estimate; the line spreads it over every frame.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ArrivalFit {
    origin_ns: u64,
    n: u32,
    sum_x: f64,
    sum_xx: f64,
    sum_t: f64,
    sum_xt: f64,
    /// Two receivers each saw part of the train: their arrival counts do not interleave,
    /// so no line is fitted.
    mixed: bool,
}

impl ArrivalFit {
    /// Adds the next arrival, received at `rx_ns`.
    #[inline]
    pub fn add(&mut self, rx_ns: u64) {
        if self.mixed {
            return;
        }
        if self.n == 0 {
            self.origin_ns = rx_ns;
        }
        let x = f64::from(self.n);
        let t = (i128::from(rx_ns) - i128::from(self.origin_ns)) as f64;
        self.sum_x += x;
        self.sum_xx += x * x;
        self.sum_t += t;
        self.sum_xt += x * t;
        self.n += 1;
    }

    /// Another receiver's view of the same train.
    pub fn merge(&mut self, other: &ArrivalFit) {
        if other.n == 0 && !other.mixed {
            return;
        }
        if self.n == 0 && !self.mixed {
            *self = *other;
        } else {
            *self = ArrivalFit {
                mixed: true,
                ..ArrivalFit::default()
            };
        }
    }

    /// Arrivals fitted.
    pub fn arrivals(&self) -> u32 {
        self.n
    }

    /// Time per frame, ns: the line's slope, with at least 3 arrivals.
    pub fn ns_per_frame(&self) -> Option<f64> {
        if self.mixed || self.n < 3 {
            return None;
        }
        let n = f64::from(self.n);
        let den = n * self.sum_xx - self.sum_x * self.sum_x;
        let slope = (n * self.sum_xt - self.sum_x * self.sum_t) / den;
        (den > 0.0 && slope > 0.0).then_some(slope)
    }
}

/// A train's arrivals, in the order the receiver got them, past a bottleneck's first
/// burst: a token bucket (or an empty queue) lets a train's first frames through at once,
/// and only the frames after them come at the bottleneck's rate. The burst ends at a gap
/// much longer than the gaps before it ([`AfterBurst::GAP_RATIO`] times their mean, and
/// longer than the longest: the head, handed over alone, may come well before the rest):
/// the fit starts again there. A stall restarts it too; the rate is then read from the
/// longest run past the first. Counting arrivals, not planned places, keeps the
/// estimate right when the bottleneck dropped a train's tail (the places past its buffer
/// never arrive, but the frames it queued come at its rate). Constant time per frame.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AfterBurst {
    /// Arrivals before the current run.
    start: u32,
    last_ns: Option<u64>,
    /// The current run's longest gap.
    max_gap_ns: u64,
    fit: ArrivalFit,
    /// The longest run that a later gap ended, past the first (which began with the
    /// train's head, so holds the burst), and the arrivals before it. A sender that
    /// stalls mid-train lets the shaper's bucket fill: the train's rest then leaves at
    /// once, a burst of its own, and the run before the stall is the one at the rate.
    best: Option<(u32, ArrivalFit)>,
}

impl AfterBurst {
    /// A gap this many times the mean gap so far ends a burst. Back-to-back frames come
    /// microseconds apart, a shaper's frames one frame time apart; a shaper's timer that
    /// releases two frames at once leaves gaps of 0 and 2 frame times, short of it.
    pub const GAP_RATIO: f64 = 4.0;

    /// Adds the next arrival, received at `rx_ns`.
    #[inline]
    pub fn add(&mut self, rx_ns: u64) {
        if let Some(last) = self.last_ns {
            let n = self.fit.n;
            if n >= 2 && !self.fit.mixed {
                let span = last.saturating_sub(self.fit.origin_ns) as f64;
                let gap = rx_ns.saturating_sub(last);
                if gap > self.max_gap_ns && gap as f64 > Self::GAP_RATIO * span / f64::from(n - 1) {
                    if self.start > 0 && self.best.is_none_or(|(_, b)| n > b.n) {
                        self.best = Some((self.start, self.fit));
                    }
                    self.start += n;
                    self.fit = ArrivalFit::default();
                    self.max_gap_ns = 0;
                }
            }
            if self.fit.n > 0 {
                self.max_gap_ns = self.max_gap_ns.max(rx_ns.saturating_sub(last));
            }
        }
        self.fit.add(rx_ns);
        self.last_ns = Some(rx_ns);
    }

    /// The run the rate is read from: the longest past the first burst (the current one
    /// on a tie), and the arrivals before it.
    fn chosen(&self) -> (u32, &ArrivalFit) {
        match &self.best {
            Some((start, best)) if best.n > self.fit.n => (*start, best),
            _ => (self.start, &self.fit),
        }
    }

    /// Another receiver's view of the same train: the arrival order across the two is
    /// unknown, so none is kept.
    pub fn merge(&mut self, other: &AfterBurst) {
        if other.fit.n == 0 && !other.fit.mixed {
            return;
        }
        if self.fit.n == 0 && !self.fit.mixed {
            *self = *other;
        } else {
            self.fit.merge(&other.fit);
            self.best = None;
            self.start = 0;
        }
    }

    /// Arrivals before the fitted run: the burst (and any frames before a stall).
    pub fn burst(&self) -> u32 {
        self.chosen().0
    }

    /// Time per frame past the burst, ns (at least 3 arrivals past it).
    pub fn ns_per_frame(&self) -> Option<f64> {
        self.chosen().1.ns_per_frame()
    }

    /// Arrivals past the burst, fitted.
    pub fn arrivals(&self) -> u32 {
        self.chosen().1.n
    }
}

/// One train's figures.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TrainResult {
    pub train: u32,
    pub frames_sent: u32,
    pub frames_rx: u32,
    /// Frames that did not arrive (sent minus unique frames received).
    pub lost: u32,
    pub duplicates: u32,
    pub reordered: u32,
    pub head_latency_ns: Option<f64>,
    /// From the first frame's arrival to the last's.
    pub dispersion_ns: Option<u64>,
    /// Bandwidth from the dispersion: the bits of the frames that arrived after the first
    /// over the dispersion (the first frame's own bits were on the wire before its receive
    /// stamp). Layer 2 counts frames with their FCS; layer 1 adds 20 bytes per frame
    /// (preamble, start of frame, minimum inter-frame gap).
    pub l2_bps: Option<f64>,
    pub l1_bps: Option<f64>,
    /// The same over the train's second half only: the rate a path keeps once a shaper's
    /// bucket or a queue's first burst is spent (which lets a train's first frames through
    /// at once and shortens the whole train's dispersion). From the least-squares line
    /// through the second half's arrivals ([`ArrivalFit`]); from its first and last arrival
    /// when no line could be fitted.
    pub second_half_l2_bps: Option<f64>,
    pub second_half_l1_bps: Option<f64>,
    /// Frames that arrived from the head on with none missing.
    #[serde(default)]
    pub head_run: u32,
    /// The train lost frames, and most of those after its head run: a bottleneck whose
    /// buffer it overflowed dropped its tail.
    #[serde(default)]
    pub tail_loss: bool,
    /// Frames that arrived at once before the bottleneck's rate set in ([`AfterBurst`]).
    #[serde(default)]
    pub burst_frames: Option<u32>,
    /// Bandwidth from the frames that arrived past the burst, in arrival order (the
    /// least-squares line through them): robust to a token bucket and to tail loss.
    #[serde(default)]
    pub after_burst_l2_bps: Option<f64>,
    #[serde(default)]
    pub after_burst_l1_bps: Option<f64>,
}

impl TrainResult {
    pub fn of(a: &TrainArrival) -> TrainResult {
        let unique = a.frames_rx.saturating_sub(a.duplicates);
        let dispersion_ns = match (a.first_rx_ns, a.last_rx_ns) {
            (Some(first), Some(last)) if unique >= 2 && last > first => Some(last - first),
            _ => None,
        };
        let bps = |bytes_per_frame: u32| {
            dispersion_ns.map(|ns| {
                f64::from(unique - 1) * f64::from(bytes_per_frame) * 8.0 / (ns as f64 / 1e9)
            })
        };
        let half_ns = match (a.mid_rx_ns, a.last_rx_ns) {
            (Some(mid), Some(last)) if a.second_half_rx >= 2 && last > mid => Some(last - mid),
            _ => None,
        };
        let fitted = a.second_half_fit.ns_per_frame();
        let half_bps = |bytes_per_frame: u32| {
            let bits = f64::from(bytes_per_frame) * 8.0;
            match fitted {
                Some(ns_per_frame) => Some(bits / (ns_per_frame / 1e9)),
                None => {
                    half_ns.map(|ns| f64::from(a.second_half_rx - 1) * bits / (ns as f64 / 1e9))
                }
            }
        };
        let lost = a.frames_sent.saturating_sub(unique);
        let after_burst = a.after_burst.ns_per_frame();
        let after_burst_bps =
            |bytes_per_frame: u32| after_burst.map(|ns| f64::from(bytes_per_frame) * 8e9 / ns);
        TrainResult {
            train: a.train,
            frames_sent: a.frames_sent,
            frames_rx: a.frames_rx,
            lost,
            duplicates: a.duplicates,
            reordered: a.reordered,
            head_latency_ns: a.head_latency_ns,
            dispersion_ns,
            l2_bps: bps(a.frame_bytes),
            l1_bps: bps(a.frame_bytes + L1_OVERHEAD_BYTES as u32),
            second_half_l2_bps: half_bps(a.frame_bytes),
            second_half_l1_bps: half_bps(a.frame_bytes + L1_OVERHEAD_BYTES as u32),
            head_run: a.head_run,
            tail_loss: lost > 0
                && a.head_run > 0
                && 2 * u64::from(lost) >= u64::from(a.frames_sent.saturating_sub(a.head_run)),
            // The head, left out of the fit, left with the burst.
            burst_frames: after_burst.map(|_| a.after_burst.burst() + u32::from(a.head_run > 0)),
            after_burst_l2_bps: after_burst_bps(a.frame_bytes),
            after_burst_l1_bps: after_burst_bps(a.frame_bytes + L1_OVERHEAD_BYTES as u32),
        }
    }
}

/// Trains whose tails a bottleneck dropped: it let the head of each through and lost most
/// of what came after, as a queue or bucket does when a train overflows it. What got
/// through back to back from the head is the buffer the path has for a burst (the
/// back-to-back frame count of RFC 9004, here per train).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TailLoss {
    /// Trains that lost their tails, and the frames they lost.
    pub trains: usize,
    pub frames_lost: u64,
    /// Frames from the head on that got through before loss began: their median over those
    /// trains (a train's first frames can find the bucket not yet full, so the fewest
    /// reads low), and the fewest.
    pub frames_through_median: f64,
    pub frames_through_min: u32,
    /// The train length that fits: the median frames through, whole.
    pub fits_frames: u32,
    /// The buffer that implies, in bytes of the frames (FCS included).
    pub buffer_bytes: u64,
    /// Of those, frames that arrived at once (the bucket's burst), median over the trains.
    pub burst_frames_median: Option<f64>,
}

impl TailLoss {
    /// None unless trains lost frames and at least half of those that did lost their tails.
    pub fn of(trains: &[TrainResult], frame_bytes: u32) -> Option<TailLoss> {
        let lossy = trains.iter().filter(|t| t.lost > 0).count();
        let tails: Vec<&TrainResult> = trains.iter().filter(|t| t.tail_loss).collect();
        if tails.is_empty() || 2 * tails.len() < lossy {
            return None;
        }
        let through: Vec<f64> = tails.iter().map(|t| f64::from(t.head_run)).collect();
        let min = tails.iter().map(|t| t.head_run).min().unwrap_or(0);
        let median = Summary::of(&through).map_or(0.0, |s| s.median);
        let fits = median.floor() as u32;
        let bursts: Vec<f64> = trains
            .iter()
            .filter_map(|t| t.burst_frames.map(f64::from))
            .collect();
        Some(TailLoss {
            trains: tails.len(),
            frames_lost: tails.iter().map(|t| u64::from(t.lost)).sum(),
            frames_through_median: median,
            frames_through_min: min,
            fits_frames: fits,
            buffer_bytes: u64::from(fits) * u64::from(frame_bytes),
            burst_frames_median: Summary::of(&bursts).map(|s| s.median),
        })
    }
}

/// A figure across trains.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Summary {
    /// Trains that gave a value.
    pub trains: usize,
    pub mean: f64,
    pub median: f64,
    /// Sample standard deviation (N − 1).
    pub stddev: f64,
    pub min: f64,
    pub max: f64,
    /// 95 % confidence interval of the mean (Student's t with N − 1 degrees of freedom);
    /// None with fewer than two trains.
    pub ci95: Option<(f64, f64)>,
    /// Interval Dispersion Index: variance / mean, in the value's unit (the study's Eq. 3).
    pub idi: Option<f64>,
}

impl Summary {
    /// None when there is no value.
    pub fn of(values: &[f64]) -> Option<Summary> {
        let n = values.len();
        if n == 0 {
            return None;
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        let variance = if n > 1 {
            values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64
        } else {
            0.0
        };
        let stddev = variance.sqrt();
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        let ci95 = (n > 1).then(|| {
            let half = t_975(n - 1) * stddev / (n as f64).sqrt();
            (mean - half, mean + half)
        });
        Some(Summary {
            trains: n,
            mean,
            median,
            stddev,
            min: sorted[0],
            max: sorted[n - 1],
            ci95,
            idi: (n > 1 && mean != 0.0).then(|| variance / mean),
        })
    }
}

/// The 97.5 % quantile of Student's t with `df` degrees of freedom (two-sided 95 %).
fn t_975(df: usize) -> f64 {
    StudentsT::new(0.0, 1.0, df as f64)
        .map(|t| t.inverse_cdf(0.975))
        // Only a df of 0 is refused, and callers pass at least 1.
        .unwrap_or(f64::INFINITY)
}

/// How the mean settles as trains are added: after N trains, the mean so far and the
/// standard deviation of that mean (s_N / √N).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ConvergencePoint {
    pub trains: usize,
    pub mean: f64,
    pub stddev_of_mean: f64,
}

/// The convergence curve of `values` in train order, from 2 trains on (Welford's running
/// mean and variance: one pass, no cancellation).
pub fn convergence(values: &[f64]) -> Vec<ConvergencePoint> {
    let (mut mean, mut m2) = (0.0, 0.0);
    let mut out = Vec::with_capacity(values.len().saturating_sub(1));
    for (i, &v) in values.iter().enumerate() {
        let n = (i + 1) as f64;
        let delta = v - mean;
        mean += delta / n;
        m2 += delta * (v - mean);
        if i >= 1 {
            out.push(ConvergencePoint {
                trains: i + 1,
                mean,
                stddev_of_mean: (m2 / (n - 1.0)).sqrt() / n.sqrt(),
            });
        }
    }
    out
}

/// A convoy's results: every train, and across them head latency, bandwidth and loss.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Convoy {
    pub trains: Vec<TrainResult>,
    pub head_latency_ns: Option<Summary>,
    pub l2_bps: Option<Summary>,
    pub l1_bps: Option<Summary>,
    pub second_half_l2_bps: Option<Summary>,
    pub second_half_l1_bps: Option<Summary>,
    /// Bandwidth past each train's burst, in arrival order ([`AfterBurst`]): the headline.
    #[serde(default)]
    pub after_burst_l2_bps: Option<Summary>,
    #[serde(default)]
    pub after_burst_l1_bps: Option<Summary>,
    /// The bottleneck dropped the trains' tails: they overflowed its buffer.
    #[serde(default)]
    pub tail_loss: Option<TailLoss>,
    pub frames_sent: u64,
    pub frames_lost: u64,
    /// Frames lost over frames sent (0 to 1).
    pub loss_ratio: f64,
    pub latency_convergence: Vec<ConvergencePoint>,
    pub bandwidth_convergence: Vec<ConvergencePoint>,
}

impl Convoy {
    pub fn of(arrivals: &[TrainArrival]) -> Convoy {
        let trains: Vec<TrainResult> = arrivals.iter().map(TrainResult::of).collect();
        let latency: Vec<f64> = trains.iter().filter_map(|t| t.head_latency_ns).collect();
        let l2: Vec<f64> = trains.iter().filter_map(|t| t.l2_bps).collect();
        let l1: Vec<f64> = trains.iter().filter_map(|t| t.l1_bps).collect();
        let half_l2: Vec<f64> = trains.iter().filter_map(|t| t.second_half_l2_bps).collect();
        let half_l1: Vec<f64> = trains.iter().filter_map(|t| t.second_half_l1_bps).collect();
        let after_l2: Vec<f64> = trains.iter().filter_map(|t| t.after_burst_l2_bps).collect();
        let after_l1: Vec<f64> = trains.iter().filter_map(|t| t.after_burst_l1_bps).collect();
        let frame_bytes = arrivals.first().map_or(0, |a| a.frame_bytes);
        let frames_sent: u64 = trains.iter().map(|t| u64::from(t.frames_sent)).sum();
        let frames_lost: u64 = trains.iter().map(|t| u64::from(t.lost)).sum();
        Convoy {
            head_latency_ns: Summary::of(&latency),
            l2_bps: Summary::of(&l2),
            l1_bps: Summary::of(&l1),
            second_half_l2_bps: Summary::of(&half_l2),
            second_half_l1_bps: Summary::of(&half_l1),
            after_burst_l2_bps: Summary::of(&after_l2),
            after_burst_l1_bps: Summary::of(&after_l1),
            tail_loss: TailLoss::of(&trains, frame_bytes),
            frames_sent,
            frames_lost,
            loss_ratio: if frames_sent == 0 {
                0.0
            } else {
                frames_lost as f64 / frames_sent as f64
            },
            latency_convergence: convergence(&latency),
            bandwidth_convergence: convergence(&l2),
            trains,
        }
    }
}

/// Which bytes of a frame a bandwidth figure counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Counted {
    /// Frames with their FCS (strobe's layer 2).
    WithFcs,
    /// Frames without FCS, as the study counts (1514 of 1538 bytes on the wire for a
    /// 1518-byte frame), and as Linux shapers (tbf, htb) count what they send.
    WithoutFcs,
    /// What a frame takes on the wire: 20 bytes more (preamble, start of frame, minimum
    /// inter-frame gap), as a link's line rate counts.
    Wire,
}

impl Counted {
    /// The bytes counted of a frame of `frame_bytes` (FCS included).
    pub fn bytes(self, frame_bytes: u32) -> f64 {
        match self {
            Counted::WithFcs => f64::from(frame_bytes),
            Counted::WithoutFcs => f64::from(frame_bytes.saturating_sub(FCS_BYTES as u32)),
            Counted::Wire => f64::from(frame_bytes) + L1_OVERHEAD_BYTES as f64,
        }
    }

    /// In words, for reports.
    pub fn text(self) -> &'static str {
        match self {
            Counted::WithFcs => "frames with their FCS (layer 2)",
            Counted::WithoutFcs => "frames without their FCS",
            Counted::Wire => "frames on the wire (layer 1: 20 bytes a frame more)",
        }
    }
}

/// A path's bottleneck as a ground truth: a rate and which bytes of each frame it counts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Bottleneck {
    pub rate_bps: f64,
    pub counts: Counted,
    /// Where the figure comes from, e.g. "the lab's tbf shaper at 50 Mbit/s".
    pub source: String,
    /// What it holds of a burst, in the bytes it counts: a queue's limit (a tbf's
    /// includes its bucket). A train of more loses its tail. None: unknown.
    #[serde(default)]
    pub buffer_bytes: Option<u64>,
    /// What of it leaves at once, before the rate sets in (a token bucket's size).
    #[serde(default)]
    pub burst_bytes: Option<u64>,
}

impl Bottleneck {
    /// The rate frames of `frame_bytes` (FCS included) go through it at, counting `counted`
    /// bytes of each: the frames' share of what the bottleneck counts.
    pub fn expected_bps(&self, frame_bytes: u32, counted: Counted) -> f64 {
        let base = self.counts.bytes(frame_bytes);
        if base <= 0.0 {
            return 0.0;
        }
        self.rate_bps * counted.bytes(frame_bytes) / base
    }

    /// The most frames of `frame_bytes` (FCS included) its buffer holds, when known.
    pub fn fits_frames(&self, frame_bytes: u32) -> Option<u64> {
        let each = self.counts.bytes(frame_bytes);
        self.buffer_bytes
            .filter(|_| each > 0.0)
            .map(|b| (b as f64 / each).floor() as u64)
    }

    /// The frames of `frame_bytes` that leave at once, when its burst is known.
    pub fn burst_frames(&self, frame_bytes: u32) -> Option<u64> {
        let each = self.counts.bytes(frame_bytes);
        self.burst_bytes
            .filter(|_| each > 0.0)
            .map(|b| (b as f64 / each).floor() as u64)
    }

    /// How long a train of `frames` frames of `frame_bytes` takes to pass, in ns.
    pub fn train_ns(&self, frames: u64, frame_bytes: u32) -> f64 {
        frames as f64 * self.counts.bytes(frame_bytes) * 8.0 / self.rate_bps * 1e9
    }
}

/// What a link of `link_bps` carries of frames of `frame_bytes` (FCS included) sent back to
/// back: the share of the wire the counted bytes take, each frame costing 20 bytes more on
/// the wire (preamble, start of frame, minimum inter-frame gap).
pub fn expected_bandwidth_bps(link_bps: f64, frame_bytes: u32, counted: Counted) -> f64 {
    Bottleneck {
        rate_bps: link_bps,
        counts: Counted::Wire,
        source: String::new(),
        buffer_bytes: None,
        burst_bytes: None,
    }
    .expected_bps(frame_bytes, counted)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A train as a 10 GbE link delivers it: frames `spacing_ns` apart.
    fn train(train: u32, frames: u32, frame_bytes: u32, spacing_ns: f64) -> TrainArrival {
        TrainArrival {
            train,
            frames_sent: frames,
            frames_rx: frames,
            head_latency_ns: Some(5_000.0),
            first_rx_ns: Some(1_000_000),
            last_rx_ns: Some(1_000_000 + (f64::from(frames - 1) * spacing_ns).round() as u64),
            mid_rx_ns: Some(1_000_000 + (f64::from(frames / 2) * spacing_ns).round() as u64),
            second_half_rx: frames - frames / 2,
            frame_bytes,
            ..TrainArrival::default()
        }
    }

    /// A train as the receiver counts it from `(place, rx_ns)` arrivals in arrival order
    /// (no duplicates), as strobe-engine's receiver does.
    fn arrived(train: u32, frames_sent: u32, frame_bytes: u32, at: &[(u32, u64)]) -> TrainArrival {
        let mut a = TrainArrival {
            train,
            frames_sent,
            frames_rx: at.len() as u32,
            frame_bytes,
            ..TrainArrival::default()
        };
        for &(place, rx) in at {
            if place == a.head_run {
                a.head_run += 1;
            }
            if place != 0 {
                a.after_burst.add(rx);
            }
            if place >= frames_sent / 2 {
                a.second_half_rx += 1;
                if place == frames_sent / 2 {
                    a.mid_rx_ns = Some(rx);
                }
                a.second_half_fit.add(rx);
            }
            a.first_rx_ns = Some(a.first_rx_ns.map_or(rx, |f| f.min(rx)));
            a.last_rx_ns = Some(a.last_rx_ns.map_or(rx, |l| l.max(rx)));
        }
        a
    }

    /// What the lab's tbf at 50 Mbit/s makes of a 100-frame train of 1518-byte frames
    /// arriving 1 µs apart: a bucket of 6250 bytes lets 4 frames (1514 bytes as tbf counts)
    /// through at once, its queue of 62 500 bytes more holds 41 more, which leave one frame
    /// time (242.24 µs) apart, every fifth late by 30 µs and the next one early to catch up
    /// (a timer firing late); one freed queue slot lets place 50 in; the rest is dropped.
    fn tbf_train(train: u32) -> TrainArrival {
        let frame_ns = 1514.0 * 8.0 / 50e6 * 1e9;
        let mut at: Vec<(u32, u64)> = (0..4)
            .map(|p| (p, 1_000_000 + u64::from(p) * 1_000))
            .collect();
        for k in 0..42u32 {
            let jitter = match k % 5 {
                4 => 30_000.0,
                _ => 0.0,
            };
            let place = if k == 41 { 50 } else { 4 + k };
            let t = 1_003_000.0 + 0.87 * frame_ns + f64::from(k) * frame_ns + jitter;
            at.push((place, t.round() as u64));
        }
        arrived(train, 100, 1518, &at)
    }

    #[test]
    fn past_the_burst_in_arrival_order_reads_a_shaper_that_dropped_the_tail() {
        let a = tbf_train(0);
        let t = TrainResult::of(&a);
        assert_eq!((t.lost, t.head_run, t.tail_loss), (54, 45, true));
        assert_eq!(t.burst_frames, Some(4));
        // tbf counts 1514 of each 1518 bytes.
        let rate = t.after_burst_l2_bps.unwrap() * 1514.0 / 1518.0;
        assert!((rate / 50e6 - 1.0).abs() < 0.002, "{rate}");
        // The whole train reads the burst's head start; the second half by planned place
        // has one frame, so no figure.
        let whole = t.l2_bps.unwrap() * 1514.0 / 1518.0;
        assert!(whole > 1.05 * 50e6, "{whole}");
        assert_eq!(t.second_half_l2_bps, None);
    }

    #[test]
    fn a_burst_ends_at_the_first_much_longer_gap() {
        // Back-to-back frames, then frames 100 µs apart, every fifth 90 µs late (a late
        // timer: it and the next leave nearly together), and 500 µs when none came (a
        // stall, after which the queued frames leave at once): the burst ends once, and
        // the run before the stall, the longest, gives the rate.
        let mut b = AfterBurst::default();
        for k in 0..5 {
            b.add(k * 800);
        }
        for k in 1..=40u64 {
            let late = if k % 5 == 3 { 90_000 } else { 0 };
            let held = if (30..35).contains(&k) { 35 - k } else { 0 };
            b.add(3_200 + 100_000 * (k + held) + late);
        }
        assert_eq!((b.burst(), b.arrivals()), (5, 29));
        let ns = b.ns_per_frame().unwrap();
        assert!((ns / 100_000.0 - 1.0).abs() < 0.01, "{ns}");
        // No burst: every arrival is fitted.
        let mut even = AfterBurst::default();
        for k in 0..10 {
            even.add(1_000 + k * 500);
        }
        assert_eq!((even.burst(), even.ns_per_frame()), (0, Some(500.0)));
        // The head handed over alone, 40 µs before the rest (4 frames at once), then the
        // rate: the burst still ends where the rate sets in.
        let mut lone = AfterBurst::default();
        lone.add(0);
        for k in 0..4 {
            lone.add(40_000 + k * 1_300);
        }
        for k in 1..=20u64 {
            lone.add(43_900 + 60_000 * k);
        }
        assert_eq!((lone.burst(), lone.ns_per_frame()), (5, Some(60_000.0)));
        // A sender that stalled near the train's end: the shaper's bucket filled, and the
        // last 5 frames left at once. The run before the stall gives the rate.
        let mut stalled = AfterBurst::default();
        for k in 0..4 {
            stalled.add(k * 800);
        }
        for k in 1..=30u64 {
            stalled.add(2_400 + 100_000 * k);
        }
        for k in 0..5 {
            stalled.add(20_000_000 + k * 800);
        }
        assert_eq!((stalled.burst(), stalled.arrivals()), (4, 30));
        assert_eq!(stalled.ns_per_frame(), Some(100_000.0));
        // Two receivers' shares of one train have no arrival order.
        let mut merged = even;
        merged.merge(&AfterBurst::default());
        assert_eq!(merged, even);
        merged.merge(&b);
        assert_eq!(merged.ns_per_frame(), None);
    }

    #[test]
    fn a_convoy_that_overflowed_the_bottleneck_says_how_much_got_through() {
        let mut arrivals: Vec<TrainArrival> = (0..20).map(tbf_train).collect();
        // One train got one frame fewer through before the drop began, at the rate.
        let at: Vec<(u32, u64)> = (0..44u32)
            .map(|p| (p, 1_000_000 + u64::from(p) * 242_240))
            .collect();
        let short = arrived(20, 100, 1518, &at);
        arrivals.push(short);
        let c = Convoy::of(&arrivals);
        let tail = c.tail_loss.unwrap();
        assert_eq!((tail.trains, tail.frames_through_min), (21, 44));
        assert_eq!((tail.frames_through_median, tail.fits_frames), (45.0, 45));
        assert_eq!(tail.buffer_bytes, 45 * 1518);
        assert_eq!(tail.burst_frames_median, Some(4.0));
        assert_eq!(tail.frames_lost, 20 * 54 + 56);
        let rate = c.after_burst_l2_bps.unwrap().median * 1514.0 / 1518.0;
        assert!((rate / 50e6 - 1.0).abs() < 0.002, "{rate}");

        // Every tenth frame dropped across the train: loss, but not at the tails.
        let spread: Vec<TrainArrival> = (0..20)
            .map(|i| {
                let at: Vec<(u32, u64)> = (0..100u32)
                    .filter(|p| p % 10 != 3)
                    .map(|p| (p, 1_000_000 + u64::from(p) * 242_240))
                    .collect();
                arrived(i, 100, 1518, &at)
            })
            .collect();
        let c = Convoy::of(&spread);
        assert_eq!(c.frames_lost, 200);
        assert_eq!(c.tail_loss, None);
        assert!(c.trains.iter().all(|t| !t.tail_loss && t.head_run == 3));
    }

    #[test]
    fn the_studys_expected_bandwidths() {
        // Table 1 of the study: 9.844 Gbit/s for 1518-byte frames, 7.143 for 60 bytes
        // without FCS (64 with it), at 10 GbE, counting frames without their FCS.
        let big = expected_bandwidth_bps(10e9, 1518, Counted::WithoutFcs);
        assert!((big / 1e9 - 9.844).abs() < 0.0005, "{big}");
        let small = expected_bandwidth_bps(10e9, 64, Counted::WithoutFcs);
        assert!((small / 1e9 - 7.143).abs() < 0.0005, "{small}");
        assert_eq!(
            expected_bandwidth_bps(10e9, 1518, Counted::WithFcs),
            10e9 * 1518.0 / 1538.0
        );
    }

    #[test]
    fn the_second_half_line_spreads_an_endpoints_jitter() {
        // 30 arrivals 160 µs apart, the first of them 20 µs late (a timer that fired late):
        // the endpoints read 0.8 % fast, the line 0.2 %.
        let mut fit = ArrivalFit::default();
        for k in 0..30u64 {
            fit.add(1_000_000 + k * 160_000 + if k == 0 { 20_000 } else { 0 });
        }
        let ns = fit.ns_per_frame().unwrap();
        assert!((ns / 160_000.0 - 1.0).abs() < 0.003, "{ns}");
        let endpoints: f64 = (29.0 * 160_000.0 - 20_000.0) / 29.0;
        assert!((endpoints / 160_000.0 - 1.0).abs() > 0.004);
        // Two receivers' parts of one train fit no line; an empty part changes nothing.
        let mut merged = fit;
        merged.merge(&ArrivalFit::default());
        assert_eq!(merged, fit);
        merged.merge(&fit);
        assert_eq!(merged.ns_per_frame(), None);
    }

    #[test]
    fn a_shaper_counting_frames_without_fcs() {
        // tbf at 50 Mbit/s counts 996 of a 1000-byte frame: strobe's layer 2 reads more.
        let tbf = Bottleneck {
            rate_bps: 50e6,
            counts: Counted::WithoutFcs,
            source: "tbf".into(),
            buffer_bytes: Some(68_750),
            burst_bytes: Some(6_250),
        };
        // Its queue holds 45 frames of 1518 bytes (1514 as it counts), 4 leaving at once.
        assert_eq!(tbf.fits_frames(1518), Some(45));
        assert_eq!(tbf.burst_frames(1518), Some(4));
        let unknown = Bottleneck {
            buffer_bytes: None,
            ..tbf.clone()
        };
        assert_eq!(unknown.fits_frames(1518), None);
        assert_eq!(tbf.expected_bps(1000, Counted::WithoutFcs), 50e6);
        assert!((tbf.expected_bps(1000, Counted::WithFcs) - 50e6 * 1000.0 / 996.0).abs() < 1e-6);
        assert!((tbf.expected_bps(1000, Counted::Wire) - 50e6 * 1020.0 / 996.0).abs() < 1e-6);
        // 60 such frames take 60 × 996 × 8 bits at 50 Mbit/s: 9.5616 ms.
        assert!((tbf.train_ns(60, 1000) - 9_561_600.0).abs() < 1e-3);
    }

    #[test]
    fn a_train_at_line_rate_measures_the_line_rate() {
        // 1538 bytes on the wire per 1518-byte frame: 1230.4 ns apart at 10 Gbit/s.
        let t = TrainResult::of(&train(0, 100, 1518, 1230.4));
        let l1 = t.l1_bps.unwrap();
        assert!((l1 / 10e9 - 1.0).abs() < 1e-4, "{l1}");
        let l2 = t.l2_bps.unwrap();
        assert!((l2 - 10e9 * 1518.0 / 1538.0).abs() / l2 < 1e-4, "{l2}");
        assert_eq!(t.dispersion_ns, Some(121_810));
        assert_eq!(t.lost, 0);
        let half = t.second_half_l1_bps.unwrap();
        assert!((half / 10e9 - 1.0).abs() < 1e-4, "{half}");
    }

    #[test]
    fn the_second_half_reads_a_shaper_past_its_bucket() {
        // A shaper at 50 Mbit/s (layer 2, 1000-byte frames: 160 µs each) whose bucket lets
        // the first 6 frames of a 60-frame train through at once (1 µs apart).
        let arrival = |k: u32| {
            if k < 6 {
                u64::from(k) * 1_000
            } else {
                5_000 + u64::from(k - 5) * 160_000
            }
        };
        let a = TrainArrival {
            frames_sent: 60,
            frames_rx: 60,
            first_rx_ns: Some(arrival(0)),
            last_rx_ns: Some(arrival(59)),
            mid_rx_ns: Some(arrival(30)),
            second_half_rx: 30,
            frame_bytes: 1000,
            ..TrainArrival::default()
        };
        let t = TrainResult::of(&a);
        let (whole, half) = (t.l2_bps.unwrap(), t.second_half_l2_bps.unwrap());
        assert!((half / 50e6 - 1.0).abs() < 1e-9, "{half}");
        assert!(
            whole > 1.09 * 50e6,
            "the bucket inflates the whole train's figure: {whole}"
        );
    }

    #[test]
    fn losses_and_duplicates_are_counted_apart() {
        let mut a = train(3, 100, 64, 67.2);
        a.frames_rx = 95;
        a.duplicates = 2;
        let t = TrainResult::of(&a);
        assert_eq!(t.lost, 7, "93 unique of 100");
        // A train of which one frame arrived has no dispersion.
        a.frames_rx = 1;
        a.duplicates = 0;
        let lone = TrainResult::of(&a);
        assert_eq!(
            (lone.dispersion_ns, lone.l2_bps, lone.lost),
            (None, None, 99)
        );
    }

    #[test]
    fn summaries_match_hand_computation() {
        let s = Summary::of(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!((s.mean, s.median, s.min, s.max), (2.5, 2.5, 1.0, 4.0));
        let variance: f64 = 5.0 / 3.0;
        assert!((s.stddev - variance.sqrt()).abs() < 1e-12);
        assert!((s.idi.unwrap() - variance / 2.5).abs() < 1e-12);
        // t(0.975, 3) = 3.182446.
        let (lo, hi) = s.ci95.unwrap();
        let half = 3.182_446 * variance.sqrt() / 2.0;
        assert!((hi - 2.5 - half).abs() < 1e-5 && (2.5 - lo - half).abs() < 1e-5);
        let one = Summary::of(&[7.0]).unwrap();
        assert_eq!(
            (one.median, one.stddev, one.ci95, one.idi),
            (7.0, 0.0, None, None)
        );
        assert!(Summary::of(&[]).is_none());
    }

    #[test]
    fn the_mean_converges_as_one_over_root_n() {
        // Alternating values: s stays about 1, so the stddev of the mean falls as 1/√N.
        let values: Vec<f64> = (0..400)
            .map(|i| if i % 2 == 0 { 9.0 } else { 11.0 })
            .collect();
        let curve = convergence(&values);
        assert_eq!(curve.len(), 399);
        assert_eq!(curve[0].trains, 2);
        let at = |n: usize| curve[n - 2].stddev_of_mean;
        assert!(
            (at(100) / at(400) - 2.0).abs() < 0.01,
            "{} {}",
            at(100),
            at(400)
        );
        assert!((curve.last().unwrap().mean - 10.0).abs() < 1e-12);
        let flat = convergence(&[5.0; 10]);
        assert!(flat
            .iter()
            .all(|p| p.stddev_of_mean == 0.0 && p.mean == 5.0));
    }

    #[test]
    fn a_convoy_adds_its_trains_up() {
        let mut arrivals: Vec<TrainArrival> =
            (0..100).map(|i| train(i, 100, 1518, 1230.4)).collect();
        arrivals[10].frames_rx = 90;
        arrivals[20].head_latency_ns = None;
        let c = Convoy::of(&arrivals);
        assert_eq!((c.frames_sent, c.frames_lost), (10_000, 10));
        assert!((c.loss_ratio - 0.001).abs() < 1e-12);
        assert_eq!(c.head_latency_ns.unwrap().trains, 99);
        assert_eq!(c.l1_bps.unwrap().trains, 100);
        assert_eq!(c.latency_convergence.len(), 98);
        // The train that lost frames measured less: the bandwidth's spread is not zero.
        assert!(c.l2_bps.unwrap().stddev > 0.0);
    }
}
