//! What a flow's departure schedule is made of, and the generator that walks it.

use rand::SeedableRng;
use rand_distr::{Distribution, Exp1};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::dist::{Dist, GapSampler};
use crate::error::{invalid, TimingError};
use crate::exact_time::{ExactClock, FracClock, U64_LIMIT};
use crate::rate::{ExactRate, Rate};
use crate::NS_PER_SEC;

/// How departures are spaced. Every pattern sends its first packet at the start delay.
#[derive(Clone, Debug, PartialEq)]
pub enum Pattern {
    /// Constant gaps at the rate.
    Cbr,
    /// Exponential gaps with mean 1/rate: a Poisson process.
    Poisson,
    /// Repeating bursts of `packets` packets. Within a burst departures are `intra_gap_ns`
    /// apart (start to start), or back to back at the rate when None. The next burst starts
    /// `inter_burst_gap_ns` after the end of the last packet's slot, i.e. after its departure
    /// plus one intra-burst gap.
    Burst {
        packets: u64,
        intra_gap_ns: Option<u64>,
        inter_burst_gap_ns: u64,
    },
    /// CBR at the rate during `on_ns`, then silence for `off_ns`, repeating. Every on-period
    /// starts with a packet; a packet that would leave at or after the end of an on-period
    /// waits for the start of the next one.
    OnOff { on_ns: u64, off_ns: u64 },
    /// Independent gaps drawn from `Dist`; the rate is ignored.
    Distribution(Dist),
    /// A trace's own timing, relative to its first packet and divided by `speed`. It ends
    /// with the trace unless the duration asks for more packets or a time span; then the
    /// trace repeats, each pass starting one mean trace gap after the previous pass's last
    /// packet, and times never go backwards. The rate is ignored.
    Replay { timestamps_ns: Vec<u64>, speed: f64 },
}

impl Pattern {
    /// In words, for reports: `constant rate`, `Poisson`, `bursts`, …
    pub fn describe(&self) -> &'static str {
        match self {
            Pattern::Cbr => "constant rate",
            Pattern::Poisson => "Poisson",
            Pattern::Burst { .. } => "bursts",
            Pattern::OnOff { .. } => "on/off",
            Pattern::Distribution(_) => "i.i.d. gaps",
            Pattern::Replay { .. } => "capture replay",
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Pattern::Cbr => "cbr",
            Pattern::Poisson => "poisson",
            Pattern::Burst { .. } => "burst",
            Pattern::OnOff { .. } => "on-off",
            Pattern::Distribution(_) => "distribution",
            Pattern::Replay { .. } => "replay",
        }
    }
}

/// One change of a [`RateProfile::Steps`] profile.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateStep {
    /// When the rate changes, in ns after the schedule's start delay.
    pub at_ns: u64,
    pub rate: Rate,
}

/// A rate that changes over time; only for the Cbr and Poisson patterns. Times are measured
/// from the start delay.
///
/// When the rate changes while a gap is running, the part of that gap still to run is
/// rescaled to the new rate (a gap that was 3/4 done at 100 pps ends after 1/4 of a 200 pps
/// gap). For Poisson this is exactly an inhomogeneous Poisson process.
#[derive(Clone, Debug, PartialEq)]
pub enum RateProfile {
    /// The spec's rate until the first step, then each step's rate from its `at_ns` on.
    /// Steps must be in strictly increasing `at_ns` order and may mix units.
    Steps(Vec<RateStep>),
    /// `steps` equal steps from `from` to `to` spread evenly over `over_ns`, then `to`:
    /// rate from + k * (to - from) / steps from k * over_ns / steps on, for k = 0..=steps.
    /// The spec's rate is not used. `from` and `to` must be in the same unit.
    Ramp {
        from: Rate,
        to: Rate,
        over_ns: u64,
        steps: u32,
    },
}

/// Most steps a ramp may have; more cannot be told apart and would only cost time.
pub const MAX_RAMP_STEPS: u32 = 1_000_000;

/// When the schedule ends.
#[derive(Clone, Debug, PartialEq)]
pub enum Duration {
    /// Never (a replay still ends with its trace).
    Continuous,
    /// After this many packets (at least 1).
    Packets(u64),
    /// At the first packet whose departure would be at or after start delay + seconds.
    Seconds(f64),
    /// The OTG burst duration: bursts of `packets` packets back to back at the rate, the next
    /// burst starting `inter_burst_gap_ns` after the end of the previous burst's last slot;
    /// `bursts` = 0 repeats forever. It sets the pattern itself, so the pattern must be Cbr.
    Bursts {
        bursts: u64,
        packets: u64,
        inter_burst_gap_ns: u64,
    },
}

/// Everything that defines a flow's departure times.
#[derive(Clone, Debug, PartialEq)]
pub struct ScheduleSpec {
    pub rate: Rate,
    pub pattern: Pattern,
    pub duration: Duration,
    pub profile: Option<RateProfile>,
    /// Time of the first departure, in ns from the run's t0.
    pub start_delay_ns: u64,
    /// Seed of the random patterns (Poisson, Distribution).
    pub seed: u64,
}

impl Default for ScheduleSpec {
    /// OTG's defaults: 1000 packets per second, continuous, starting at once.
    fn default() -> Self {
        Self {
            rate: Rate::Pps(1000.0),
            pattern: Pattern::Cbr,
            duration: Duration::Continuous,
            profile: None,
            start_delay_ns: 0,
            seed: 0,
        }
    }
}

/// A flow's departure times, one per call to [`Schedule::next`].
#[derive(Clone, Debug)]
pub struct Schedule {
    generator: Generator,
    start_delay_ns: u64,
    /// u64::MAX when the duration sets no count.
    max_packets: u64,
    /// Relative to the start delay.
    end_ns: Option<u64>,
    sent: u64,
    /// The last departure handed out (ns from t0): a live rate change rescales the gap
    /// after it.
    last_departure_ns: u64,
    finished: bool,
    nominal: Nominal,
}

impl Schedule {
    /// Checks `spec` and prepares its schedule. Errors name the parameter at fault and what
    /// it accepts.
    pub fn new(spec: ScheduleSpec) -> Result<Schedule, TimingError> {
        let ScheduleSpec {
            rate,
            pattern,
            duration,
            profile,
            start_delay_ns,
            seed,
        } = spec;
        let base_rate = ExactRate::new(rate, "rate")?;
        check_combination(&pattern, &duration, profile.as_ref())?;
        let (max_packets, end_ns) = duration_limits(&duration)?;

        let (generator, nominal) = match (&duration, pattern) {
            (
                Duration::Bursts {
                    packets,
                    inter_burst_gap_ns,
                    ..
                },
                _,
            ) => burst(rate, base_rate, *packets, None, *inter_burst_gap_ns)?,
            (_, Pattern::Cbr) => paced(rate, profile, |rate| {
                PacedTiming::Constant(ExactClock::new(rate))
            })?,
            (_, Pattern::Poisson) => paced(rate, profile, |rate| PacedTiming::Poisson {
                clock: FracClock::default(),
                rate,
                rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            })?,
            (
                _,
                Pattern::Burst {
                    packets,
                    intra_gap_ns,
                    inter_burst_gap_ns,
                },
            ) => burst(rate, base_rate, packets, intra_gap_ns, inter_burst_gap_ns)?,
            (_, Pattern::OnOff { on_ns, off_ns }) => on_off(rate, base_rate, on_ns, off_ns)?,
            (_, Pattern::Distribution(dist)) => (
                Generator::Gaps(RandomGaps {
                    clock: FracClock::default(),
                    sampler: GapSampler::new(&dist)?,
                    rng: Xoshiro256PlusPlus::seed_from_u64(seed),
                }),
                Nominal::MeanGap(dist.mean_ns()),
            ),
            (
                _,
                Pattern::Replay {
                    timestamps_ns,
                    speed,
                },
            ) => (
                Generator::Replay(Replay::new(timestamps_ns, speed, &duration)?),
                Nominal::Unknown,
            ),
        };

        Ok(Schedule {
            generator,
            start_delay_ns,
            max_packets,
            end_ns,
            sent: 0,
            last_departure_ns: 0,
            finished: false,
            nominal,
        })
    }

    /// Departure time, in ns from t0, of the next packet, whose frame is `frame_len` bytes
    /// including the FCS; None once the duration is over (and from then on).
    #[inline(always)]
    pub fn next(&mut self, frame_len: u32) -> Option<u64> {
        if self.finished || self.sent >= self.max_packets {
            return None;
        }
        let departure = match self.generator.next(frame_len) {
            Some(t) if self.end_ns.is_none_or(|end| t < end) => t.checked_add(self.start_delay_ns),
            _ => None,
        };
        match departure {
            Some(t) => {
                self.sent += 1;
                self.last_departure_ns = t;
                Some(t)
            }
            None => {
                self.finished = true;
                None
            }
        }
    }

    /// Departures of the next packets, all `frame_len` bytes long, into `out`; returns how
    /// many were written (fewer than `out.len()` only when the duration ends). The same as
    /// calling [`Schedule::next`] repeatedly, in one tight loop.
    pub fn next_batch(&mut self, frame_len: u32, out: &mut [u64]) -> usize {
        for (n, slot) in out.iter_mut().enumerate() {
            match self.next(frame_len) {
                Some(t) => *slot = t,
                None => return n,
            }
        }
        out.len()
    }

    /// Packets scheduled so far.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// The long-run packet rate this schedule aims at for frames of `mean_frame_len` bytes
    /// (FCS included): the final rate of a profile, the average over bursts or on/off
    /// periods, or 1/mean gap of a distribution. None for a replay and for distributions
    /// without a finite mean.
    pub fn nominal_pps(&self, mean_frame_len: f64) -> Option<f64> {
        self.nominal.pps(mean_frame_len)
    }

    /// Whether [`Schedule::change_rate_live`] can change this schedule's rate: a constant
    /// rate or Poisson schedule that follows no rate profile (a profile would override the
    /// change at its next step; bursts, on/off, gap distributions and replays have no single
    /// rate to change).
    pub fn takes_live_rate(&self) -> bool {
        matches!(&self.generator, Generator::Paced(p) if p.profile.is_none())
    }

    /// Changes the rate of a running schedule (an update while the flow sends): the gap
    /// after the last departure handed out is rescaled to `rate`, and every later gap
    /// follows it, as a profile's step does. Errs when the rate is out of range or the
    /// schedule does not take live changes ([`Schedule::takes_live_rate`]).
    pub fn change_rate_live(&mut self, rate: Rate) -> Result<(), TimingError> {
        let new_rate = ExactRate::new(rate, "rate")?;
        let Generator::Paced(paced) = &mut self.generator else {
            return Err(TimingError::Incompatible(
                "only a constant-rate or Poisson schedule changes its rate while it runs".into(),
            ));
        };
        if paced.profile.is_some() {
            return Err(TimingError::Incompatible(
                "a schedule that follows a rate profile does not change its rate while it runs"
                    .into(),
            ));
        }
        // Before the first departure nothing is rescaled: the schedule starts at the new rate.
        let position = paced.timing.whole_ns();
        let at = match self.sent {
            0 => position,
            _ => self
                .last_departure_ns
                .saturating_sub(self.start_delay_ns)
                .min(position),
        };
        paced.timing.change_rate(at, new_rate, paced.last_len);
        self.nominal = Nominal::Rate(rate);
        Ok(())
    }
}

/// A schedule whose departures repeat with a fixed spacing, as a sender that only adds can
/// keep it: the first departure at the start, each next one `gap` later, and after every
/// `burst` departures `burst_gap_ns` more. See [`ScheduleSpec::periodic`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Periodic {
    /// Between departures: whole nanoseconds and a fraction in units of 2^-32 ns (the
    /// exact gap rounded down: at most 2^-32 ns early per departure).
    pub gap_ns: u64,
    pub gap_frac: u32,
    /// Departures per burst (1: a constant rate).
    pub burst: u64,
    pub burst_gap_ns: u64,
    /// Departures in all; None: until stopped.
    pub packets: Option<u64>,
}

impl Periodic {
    /// The first `n` departures (ns from the first), added up as a sender keeps them.
    pub fn departures(&self, n: usize) -> Vec<u64> {
        let (mut at, mut frac, mut k) = (0u64, 0u64, 0u64);
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(at);
            frac += u64::from(self.gap_frac);
            at += self.gap_ns + (frac >> 32);
            frac &= 0xFFFF_FFFF;
            k += 1;
            if k == self.burst {
                k = 0;
                at += self.burst_gap_ns;
            }
        }
        out
    }
}

impl ScheduleSpec {
    /// When the last departure is due, in ns from t0, where the schedule fixes it: a
    /// constant rate or bursts of a known count (frames of `frame_len` bytes, FCS
    /// included), or any pattern run for a time (its departures end before it). None for
    /// a continuous flow, or a count of random departures.
    pub fn last_departure_ns(&self, frame_len: u32) -> Option<u64> {
        if let Ok(p) = self.periodic(frame_len) {
            let n = p.packets?.checked_sub(1)?;
            let frac = ((u128::from(n) * u128::from(p.gap_frac)) >> 32) as u64;
            return n
                .checked_mul(p.gap_ns)?
                .checked_add(frac)?
                .checked_add((n / p.burst).checked_mul(p.burst_gap_ns)?);
        }
        match duration_limits(&self.duration) {
            Ok((_, Some(end_ns))) if matches!(self.duration, Duration::Seconds(_)) => {
                self.start_delay_ns.checked_add(end_ns)
            }
            _ => None,
        }
    }

    /// This schedule as [`Periodic`] for frames of `frame_len` bytes (FCS included), or
    /// why it is not: constant rates and bursts, without a start delay or a rate profile.
    pub fn periodic(&self, frame_len: u32) -> Result<Periodic, String> {
        if self.start_delay_ns > 0 || self.profile.is_some() {
            return Err("a start delay or a rate profile".into());
        }
        let rate = ExactRate::new(self.rate, "rate").map_err(|e| e.to_string())?;
        let (spacing, burst, burst_gap_ns) = match (&self.pattern, &self.duration) {
            (
                _,
                Duration::Bursts {
                    packets,
                    inter_burst_gap_ns,
                    ..
                },
            ) => (rate, *packets, *inter_burst_gap_ns),
            (Pattern::Cbr, _) => (rate, 1, 0),
            (
                Pattern::Burst {
                    packets,
                    intra_gap_ns,
                    inter_burst_gap_ns,
                },
                _,
            ) => (
                intra_gap_ns.map_or(rate, ExactRate::every_ns),
                *packets,
                *inter_burst_gap_ns,
            ),
            (other, _) => return Err(format!("{} departures", other.describe())),
        };
        let (whole, rem) = spacing
            .cost(frame_len)
            .ok_or("a gap longer than 584 years")?;
        let num = u128::from(spacing.num);
        let packets = match self.duration {
            Duration::Continuous | Duration::Bursts { bursts: 0, .. } => None,
            Duration::Packets(n) => Some(n),
            Duration::Bursts {
                bursts, packets, ..
            } => Some(bursts.saturating_mul(packets)),
            // The departures before the end: k·gap < end for k = 0, 1, …
            Duration::Seconds(_) if burst == 1 => {
                let (_, end_ns) = duration_limits(&self.duration).map_err(|e| e.to_string())?;
                let end = u128::from(end_ns.unwrap_or(0)) * num;
                let gap = (u128::from(whole) * num + u128::from(rem)).max(1);
                Some(u64::try_from(end.div_ceil(gap)).unwrap_or(u64::MAX))
            }
            Duration::Seconds(_) => return Err("bursts for a time".into()),
        };
        Ok(Periodic {
            gap_ns: whole,
            gap_frac: ((u128::from(rem) << 32) / num) as u32,
            burst: burst.max(1),
            burst_gap_ns,
            packets,
        })
    }
}

fn check_combination(
    pattern: &Pattern,
    duration: &Duration,
    profile: Option<&RateProfile>,
) -> Result<(), TimingError> {
    let is_bursts = matches!(duration, Duration::Bursts { .. });
    if is_bursts && *pattern != Pattern::Cbr {
        return Err(TimingError::Incompatible(format!(
            "a bursts duration sets the burst shape itself and needs the cbr pattern, \
             not {}",
            pattern.name()
        )));
    }
    if profile.is_some() {
        if is_bursts {
            return Err(TimingError::Incompatible(
                "a rate profile cannot be combined with a bursts duration".to_owned(),
            ));
        }
        if !matches!(pattern, Pattern::Cbr | Pattern::Poisson) {
            return Err(TimingError::Incompatible(format!(
                "a rate profile applies only to the cbr and poisson patterns, not {}",
                pattern.name()
            )));
        }
    }
    Ok(())
}

/// The most packets and the end time (relative to the start delay) a duration allows.
fn duration_limits(duration: &Duration) -> Result<(u64, Option<u64>), TimingError> {
    match *duration {
        Duration::Continuous => Ok((u64::MAX, None)),
        Duration::Packets(0) => Err(invalid(
            "duration packets",
            0,
            "accepted is a count of at least 1",
        )),
        Duration::Packets(packets) => Ok((packets, None)),
        Duration::Seconds(seconds) => {
            let end_ns = (seconds * NS_PER_SEC as f64).round();
            if !(1.0..U64_LIMIT).contains(&end_ns) {
                return Err(invalid(
                    "duration seconds",
                    seconds,
                    "accepted is a finite number of seconds from 1e-9 to 584 years",
                ));
            }
            Ok((u64::MAX, Some(end_ns as u64)))
        }
        Duration::Bursts {
            bursts, packets, ..
        } => {
            if packets == 0 {
                return Err(invalid(
                    "bursts duration packets",
                    0,
                    "accepted is at least 1 packet per burst",
                ));
            }
            if bursts == 0 {
                return Ok((u64::MAX, None));
            }
            let total = bursts.checked_mul(packets).ok_or_else(|| {
                invalid(
                    "bursts duration",
                    format!("{bursts} bursts of {packets} packets"),
                    "accepted is at most 2^64 - 1 packets in all, or bursts = 0 for no end",
                )
            })?;
            Ok((total, None))
        }
    }
}

fn paced(
    rate: Rate,
    profile: Option<RateProfile>,
    timing: impl FnOnce(ExactRate) -> PacedTiming,
) -> Result<(Generator, Nominal), TimingError> {
    let (initial, changes, final_rate) = match profile {
        None => (rate, None, rate),
        Some(RateProfile::Steps(steps)) => {
            let changes = checked_steps(&steps)?;
            let final_rate = steps.last().map_or(rate, |step| step.rate);
            (rate, Some(RateChanges::Steps(changes)), final_rate)
        }
        Some(RateProfile::Ramp {
            from,
            to,
            over_ns,
            steps,
        }) => {
            ExactRate::new(from, "ramp from")?;
            ExactRate::new(to, "ramp to")?;
            if !from.is_same_unit(&to) {
                return Err(TimingError::Incompatible(format!(
                    "a ramp must go from a packet rate to a packet rate or from a bit rate \
                     to a bit rate, not from {from} to {to}"
                )));
            }
            if !(1..=MAX_RAMP_STEPS).contains(&steps) {
                return Err(invalid(
                    "ramp steps",
                    steps,
                    format!("accepted is 1 to {MAX_RAMP_STEPS}"),
                ));
            }
            if over_ns == 0 {
                (to, None, to)
            } else {
                let ramp = RateChanges::Ramp {
                    from: from.value(),
                    to: to.value(),
                    per_bit: matches!(to, Rate::L1BitsPerSec(_)),
                    over_ns,
                    steps,
                };
                (from, Some(ramp), to)
            }
        }
    };
    let profile = changes.map(ProfileCursor::new);
    let generator = Paced {
        timing: timing(ExactRate::approximate(initial)),
        next_change_ns: profile
            .as_ref()
            .and_then(|p| p.upcoming)
            .map_or(u64::MAX, |(at_ns, _)| at_ns),
        profile,
        last_len: 0,
    };
    Ok((Generator::Paced(generator), Nominal::Rate(final_rate)))
}

fn checked_steps(steps: &[RateStep]) -> Result<Vec<(u64, ExactRate)>, TimingError> {
    if steps.is_empty() {
        return Err(invalid(
            "rate profile steps",
            "an empty list",
            "accepted is at least one step",
        ));
    }
    let mut previous: Option<u64> = None;
    steps
        .iter()
        .enumerate()
        .map(|(index, step)| {
            let rate = ExactRate::new(step.rate, &format!("rate profile step {index} rate"))?;
            if let Some(previous) = previous.filter(|&p| step.at_ns <= p) {
                return Err(invalid(
                    format!("rate profile step {index} at_ns"),
                    step.at_ns,
                    format!("accepted is a time later than the previous step's {previous}"),
                ));
            }
            previous = Some(step.at_ns);
            Ok((step.at_ns, rate))
        })
        .collect()
}

fn burst(
    rate: Rate,
    base_rate: ExactRate,
    packets: u64,
    intra_gap_ns: Option<u64>,
    inter_burst_gap_ns: u64,
) -> Result<(Generator, Nominal), TimingError> {
    if packets == 0 {
        return Err(invalid(
            "burst packets",
            0,
            "accepted is at least 1 packet per burst",
        ));
    }
    if intra_gap_ns == Some(0) && inter_burst_gap_ns == 0 {
        return Err(TimingError::Incompatible(
            "a burst pattern with intra_gap_ns 0 and inter_burst_gap_ns 0 would send every \
             packet at the same instant; give one of them a value above 0"
                .to_owned(),
        ));
    }
    let spacing = intra_gap_ns.map_or(base_rate, ExactRate::every_ns);
    let generator = Generator::Burst(Burst {
        clock: ExactClock::new(spacing),
        packets,
        position: 0,
        inter_burst_gap_ns,
    });
    let nominal = Nominal::Bursts {
        rate,
        packets,
        intra_gap_ns,
        inter_burst_gap_ns,
    };
    Ok((generator, nominal))
}

fn on_off(
    rate: Rate,
    base_rate: ExactRate,
    on_ns: u64,
    off_ns: u64,
) -> Result<(Generator, Nominal), TimingError> {
    if on_ns == 0 {
        return Err(invalid(
            "on-off on_ns",
            0,
            "accepted is an on-period of at least 1 ns",
        ));
    }
    let period_ns = on_ns.checked_add(off_ns).ok_or_else(|| {
        invalid(
            "on-off on_ns + off_ns",
            format!("{on_ns} + {off_ns}"),
            "accepted is a period of at most 2^64 - 1 ns",
        )
    })?;
    let generator = Generator::OnOff(OnOff {
        clock: ExactClock::new(base_rate),
        period_start_ns: 0,
        on_ns,
        period_ns,
    });
    Ok((
        generator,
        Nominal::OnOff {
            rate,
            on_ns,
            off_ns,
        },
    ))
}

/// The per-pattern state. A generator that returns None is never asked again.
#[derive(Clone, Debug)]
enum Generator {
    Paced(Paced),
    Burst(Burst),
    OnOff(OnOff),
    Gaps(RandomGaps),
    Replay(Replay),
}

impl Generator {
    /// Next departure relative to the start delay.
    #[inline(always)]
    fn next(&mut self, frame_len: u32) -> Option<u64> {
        match self {
            Generator::Paced(g) => g.next(frame_len),
            Generator::Burst(g) => g.next(frame_len),
            Generator::OnOff(g) => g.next(frame_len),
            Generator::Gaps(g) => g.next(),
            Generator::Replay(g) => g.next(),
        }
    }
}

/// Cbr and Poisson, optionally following a rate profile.
#[derive(Clone, Debug)]
struct Paced {
    timing: PacedTiming,
    /// When the profile's next change is due; u64::MAX when none is left, so the hot path
    /// needs one comparison.
    next_change_ns: u64,
    profile: Option<ProfileCursor>,
    /// The gap running now belongs to the last frame sent.
    last_len: u32,
}

#[derive(Clone, Debug)]
enum PacedTiming {
    Constant(ExactClock),
    Poisson {
        clock: FracClock,
        rate: ExactRate,
        rng: Xoshiro256PlusPlus,
    },
}

impl Paced {
    #[inline(always)]
    fn next(&mut self, frame_len: u32) -> Option<u64> {
        if self.timing.whole_ns() >= self.next_change_ns {
            self.apply_rate_changes();
        }
        let departure = self.timing.now()?;
        self.timing.advance(frame_len);
        self.last_len = frame_len;
        Some(departure)
    }

    #[cold]
    fn apply_rate_changes(&mut self) {
        let Some(profile) = self.profile.as_mut() else {
            self.next_change_ns = u64::MAX;
            return;
        };
        while let Some((at_ns, rate)) = profile.upcoming {
            if self.timing.now().is_none() || self.timing.whole_ns() < at_ns {
                break;
            }
            self.timing.change_rate(at_ns, rate, self.last_len);
            profile.advance();
        }
        self.next_change_ns = profile.upcoming.map_or(u64::MAX, |(at_ns, _)| at_ns);
    }
}

impl PacedTiming {
    #[inline]
    fn whole_ns(&self) -> u64 {
        match self {
            PacedTiming::Constant(clock) => clock.whole_ns(),
            PacedTiming::Poisson { clock, .. } => clock.whole_ns(),
        }
    }

    #[inline]
    fn now(&self) -> Option<u64> {
        match self {
            PacedTiming::Constant(clock) => clock.now(),
            PacedTiming::Poisson { clock, .. } => clock.now(),
        }
    }

    #[inline]
    fn advance(&mut self, frame_len: u32) {
        match self {
            PacedTiming::Constant(clock) => clock.advance(frame_len),
            PacedTiming::Poisson { clock, rate, rng } => {
                let unit: f64 = Exp1.sample(rng);
                clock.advance_by(unit * rate.gap_ns(frame_len));
            }
        }
    }

    /// Switches to `new_rate` at `at_ns`, which the running gap has reached or passed.
    fn change_rate(&mut self, at_ns: u64, new_rate: ExactRate, last_len: u32) {
        let old_rate = match self {
            PacedTiming::Constant(clock) => clock.rate(),
            PacedTiming::Poisson { rate, .. } => *rate,
        };
        let stretch = new_rate.gap_ns(last_len) / old_rate.gap_ns(last_len);
        match self {
            PacedTiming::Constant(clock) => {
                let rest = clock.excess_over(at_ns) * stretch;
                clock.restart(at_ns, rest, new_rate);
            }
            PacedTiming::Poisson { clock, rate, .. } => {
                let rest = clock.excess_over(at_ns) * stretch;
                clock.restart(at_ns, rest);
                *rate = new_rate;
            }
        }
    }
}

/// Walks a profile's rate changes in time order.
#[derive(Clone, Debug)]
struct ProfileCursor {
    changes: RateChanges,
    index: usize,
    upcoming: Option<(u64, ExactRate)>,
}

#[derive(Clone, Debug)]
enum RateChanges {
    Steps(Vec<(u64, ExactRate)>),
    /// Computed when reached, so a long ramp costs no memory.
    Ramp {
        from: f64,
        to: f64,
        per_bit: bool,
        over_ns: u64,
        steps: u32,
    },
}

impl ProfileCursor {
    fn new(changes: RateChanges) -> Self {
        let upcoming = changes.get(0);
        Self {
            changes,
            index: 0,
            upcoming,
        }
    }

    fn advance(&mut self) {
        self.index += 1;
        self.upcoming = self.changes.get(self.index);
    }
}

impl RateChanges {
    fn get(&self, index: usize) -> Option<(u64, ExactRate)> {
        match *self {
            RateChanges::Steps(ref steps) => steps.get(index).copied(),
            RateChanges::Ramp {
                from,
                to,
                per_bit,
                over_ns,
                steps,
            } => {
                // Change k (from 1) happens at k/steps of the way.
                let step = u64::try_from(index).ok()?.checked_add(1)?;
                if step > u64::from(steps) {
                    return None;
                }
                let at_ns = u128::from(step) * u128::from(over_ns) / u128::from(steps);
                let value = if step == u64::from(steps) {
                    to
                } else {
                    from + (to - from) * step as f64 / f64::from(steps)
                };
                let rate = if per_bit {
                    Rate::L1BitsPerSec(value)
                } else {
                    Rate::Pps(value)
                };
                // at_ns <= over_ns, so it fits in u64.
                Some((at_ns as u64, ExactRate::approximate(rate)))
            }
        }
    }
}

/// Bursts of a fixed size, spaced at a rate or a fixed gap.
#[derive(Clone, Debug)]
struct Burst {
    clock: ExactClock,
    packets: u64,
    /// Packets of the current burst already sent.
    position: u64,
    inter_burst_gap_ns: u64,
}

impl Burst {
    #[inline]
    fn next(&mut self, frame_len: u32) -> Option<u64> {
        let departure = self.clock.now()?;
        self.clock.advance(frame_len);
        self.position += 1;
        if self.position == self.packets {
            self.position = 0;
            self.clock.add_ns(self.inter_burst_gap_ns);
        }
        Some(departure)
    }
}

#[derive(Clone, Debug)]
struct OnOff {
    /// Time since the current on-period started.
    clock: ExactClock,
    period_start_ns: u64,
    on_ns: u64,
    period_ns: u64,
}

impl OnOff {
    #[inline]
    fn next(&mut self, frame_len: u32) -> Option<u64> {
        let offset = match self.clock.now() {
            Some(offset) if offset < self.on_ns => offset,
            _ => {
                self.period_start_ns = self.period_start_ns.checked_add(self.period_ns)?;
                self.clock.reset();
                0
            }
        };
        let departure = self.period_start_ns.checked_add(offset)?;
        self.clock.advance(frame_len);
        Some(departure)
    }
}

#[derive(Clone, Debug)]
struct RandomGaps {
    clock: FracClock,
    sampler: GapSampler,
    rng: Xoshiro256PlusPlus,
}

impl RandomGaps {
    #[inline]
    fn next(&mut self) -> Option<u64> {
        let departure = self.clock.now()?;
        self.clock.advance_by(self.sampler.sample(&mut self.rng));
        Some(departure)
    }
}

#[derive(Clone, Debug)]
struct Replay {
    /// Timestamps relative to the first, in the trace's own nanoseconds.
    offsets_ns: Vec<u64>,
    speed: f64,
    index: usize,
    repeats: bool,
    /// One pass of the trace plus one mean gap, in the trace's nanoseconds.
    pass_ns: f64,
    pass: u64,
    pass_start_ns: u64,
    last_ns: u64,
}

impl Replay {
    fn new(timestamps_ns: Vec<u64>, speed: f64, duration: &Duration) -> Result<Self, TimingError> {
        let Some(&first) = timestamps_ns.first() else {
            return Err(invalid(
                "replay timestamps_ns",
                "an empty list",
                "accepted is at least one timestamp",
            ));
        };
        if let Some(index) = timestamps_ns.windows(2).position(|pair| pair[1] < pair[0]) {
            return Err(invalid(
                format!("replay timestamps_ns[{}]", index + 1),
                timestamps_ns[index + 1],
                format!(
                    "accepted are timestamps in non-decreasing order; the one before is {}",
                    timestamps_ns[index]
                ),
            ));
        }
        if !(speed.is_finite() && speed > 0.0) {
            return Err(invalid(
                "replay speed",
                speed,
                "accepted is a finite factor above 0 (2 plays twice as fast)",
            ));
        }
        let offsets_ns: Vec<u64> = timestamps_ns.iter().map(|t| t - first).collect();
        let count = offsets_ns.len();
        let span_ns = offsets_ns[count - 1];
        let repeats = match *duration {
            Duration::Packets(packets) => packets > count as u64,
            Duration::Seconds(_) => true,
            Duration::Continuous | Duration::Bursts { .. } => false,
        };
        if repeats && span_ns == 0 {
            return Err(TimingError::Incompatible(
                "a replay trace that spans 0 ns cannot be repeated to fill the duration, as \
                 time would not advance; give a packets duration of at most the trace's \
                 length or a trace with distinct timestamps"
                    .to_owned(),
            ));
        }
        let mean_gap_ns = if count > 1 {
            span_ns as f64 / (count - 1) as f64
        } else {
            0.0
        };
        Ok(Self {
            offsets_ns,
            speed,
            index: 0,
            repeats,
            pass_ns: span_ns as f64 + mean_gap_ns,
            pass: 0,
            pass_start_ns: 0,
            last_ns: 0,
        })
    }

    fn scaled(&self, trace_ns: f64) -> Option<u64> {
        let ns = (trace_ns / self.speed).round();
        (ns < U64_LIMIT).then_some(ns as u64)
    }

    #[inline]
    fn next(&mut self) -> Option<u64> {
        if self.index == self.offsets_ns.len() {
            if !self.repeats {
                return None;
            }
            self.index = 0;
            self.pass += 1;
            self.pass_start_ns = self.scaled(self.pass as f64 * self.pass_ns)?;
        }
        let offset_ns = self.offsets_ns[self.index];
        self.index += 1;
        let offset_ns = if self.speed == 1.0 {
            offset_ns
        } else {
            self.scaled(offset_ns as f64)?
        };
        // Rounding the pass start and the offset separately could step back by a nanosecond.
        let departure = self.pass_start_ns.checked_add(offset_ns)?.max(self.last_ns);
        self.last_ns = departure;
        Some(departure)
    }
}

/// What [`Schedule::nominal_pps`] is computed from.
#[derive(Clone, Debug)]
enum Nominal {
    Rate(Rate),
    Bursts {
        rate: Rate,
        packets: u64,
        intra_gap_ns: Option<u64>,
        inter_burst_gap_ns: u64,
    },
    OnOff {
        rate: Rate,
        on_ns: u64,
        off_ns: u64,
    },
    MeanGap(Option<f64>),
    Unknown,
}

impl Nominal {
    fn pps(&self, mean_frame_len: f64) -> Option<f64> {
        let ns_per_sec = NS_PER_SEC as f64;
        let pps = match *self {
            Nominal::Rate(rate) => rate.packets_per_sec(mean_frame_len),
            Nominal::Bursts {
                rate,
                packets,
                intra_gap_ns,
                inter_burst_gap_ns,
            } => {
                let gap_ns = intra_gap_ns.map_or_else(
                    || ns_per_sec / rate.packets_per_sec(mean_frame_len),
                    |gap| gap as f64,
                );
                let packets = packets as f64;
                packets * ns_per_sec / (packets * gap_ns + inter_burst_gap_ns as f64)
            }
            Nominal::OnOff {
                rate,
                on_ns,
                off_ns,
            } => {
                let gap_ns = ns_per_sec / rate.packets_per_sec(mean_frame_len);
                let per_period = (on_ns as f64 / gap_ns).ceil();
                per_period * ns_per_sec / (on_ns as f64 + off_ns as f64)
            }
            Nominal::MeanGap(mean_ns) => ns_per_sec / mean_ns?,
            Nominal::Unknown => return None,
        };
        pps.is_finite().then_some(pps)
    }
}
