//! The timing floor of a transmit path, and where a sender that keeps absolute deadlines
//! puts frames on such a path.
//!
//! A software sender hands frames to the kernel in calls. One call costs `handover_ns`
//! whatever it carries (system call, locks, the first frame), and every further frame of the
//! same call leaves `spacing_ns` after the one before it (the path's back-to-back spacing).
//! So the gaps a path can produce are `spacing_ns` (frames of one call) or `handover_ns` and
//! more (frames of separate calls): nothing in between. A schedule asking for gaps below
//! `handover_ns` is served best by *coalescing*: a frame joins the call of the frames before
//! it when it then leaves closer to its deadline than it could alone in the next call.
//!
//! [`PathFloor::joins`] is that decision; the engine makes it for every paced frame, and
//! [`perfect_departures`] applies it to a whole schedule: the departures of an ideal sender
//! on the path, which `strobe analyze` compares captures with. Deadlines stay absolute, so
//! a coalesced schedule keeps its long-run rate.

/// What a transmit path allows: the cost of one hand-over and the spacing of the frames
/// handed over together. Per port: given, remembered from an earlier run, or learned from a
/// run's own hand-overs ([`FloorEstimate`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathFloor {
    /// The closest two frames handed over in separate calls can leave: one call of one
    /// frame, from its start to the start of the next call.
    pub handover_ns: u64,
    /// The closest frames leave at all: the spacing of frames handed over in one call.
    pub spacing_ns: u64,
}

impl std::str::FromStr for PathFloor {
    type Err = crate::TimingError;

    /// `HANDOVER/SPACING` (e.g. `2.3us/0.9us`), or one duration for both.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (handover, spacing) = text.split_once('/').unwrap_or((text, text));
        let handover_ns = crate::parse_duration_ns(handover.trim())?;
        let spacing_ns = crate::parse_duration_ns(spacing.trim())?;
        if handover_ns == 0 || spacing_ns == 0 {
            return Err(crate::error::invalid(
                "floor",
                text,
                "both the hand-over cost and the spacing must be above zero \
                 (HANDOVER/SPACING, e.g. 2.3us/0.9us)",
            ));
        }
        Ok(PathFloor {
            handover_ns,
            spacing_ns,
        })
    }
}

impl PathFloor {
    /// The floor the help and the messages give as an example (`2.3us/0.9us`), and the one
    /// tests take as typical.
    pub const EXAMPLE: PathFloor = PathFloor {
        handover_ns: 2_300,
        spacing_ns: 900,
    };

    /// Time a call of `frames` frames keeps the sender busy.
    pub fn call_ns(&self, frames: usize) -> u64 {
        let extra = frames.saturating_sub(1) as u64;
        self.handover_ns
            .saturating_add(extra.saturating_mul(self.spacing_ns))
    }

    /// The highest rate a paced sender reaches on this path with calls of at most
    /// `max_batch` frames (frames per second).
    pub fn ceiling_pps(&self, max_batch: usize) -> f64 {
        let n = max_batch.max(1);
        let ns = self.call_ns(n).max(1);
        n as f64 * 1e9 / ns as f64
    }

    /// Whether the frame due at `deadline_ns` joins the call that starts at `start_ns` and
    /// holds `held` frames so far (`held` ≥ 1). Joined, it leaves at
    /// `start_ns + held × spacing_ns`; alone, at its deadline but not before the call ends
    /// (`start_ns + call_ns(held)`). It joins when that leaves it closer to its deadline;
    /// a tie goes to the separate call, which never sends a frame early.
    pub fn joins(&self, start_ns: u64, held: usize, deadline_ns: u64) -> bool {
        let start = i128::from(start_ns);
        let held = held as i128;
        let (h, s) = (i128::from(self.handover_ns), i128::from(self.spacing_ns));
        let joined = start + held * s;
        let alone_earliest = start + h + (held - 1) * s;
        let d = i128::from(deadline_ns);
        if d <= joined {
            // Late even in the call; alone it would be later still unless calls are cheaper
            // than the spacing.
            return h > s;
        }
        // Joined it leaves early by d - joined; alone late by alone_earliest - d (if > 0).
        d - joined < alone_earliest - d
    }
}

/// A floor kept up to date from the hand-overs a run makes: each call's duration refines
/// the hand-over cost (calls of one frame) or the spacing (calls of more). Exponentially
/// weighted (1/[`FloorEstimate::WEIGHT`] per call); a call more than 4× the estimate was
/// interrupted (preemption, an interrupt) and says nothing about the path, so it is skipped
/// — unless [`REJECTED_STREAK`] calls in a row are: then the estimate was wrong (a start
/// remembered from a faster day), and it starts over from that part's next calls.
///
/// A run that knows no floor before its first frame starts [`FloorEstimate::learning`]: it
/// learns the floor from its own first hand-overs instead of sending frames of its own to
/// measure it (a device under test would count, learn and log such frames). Until
/// [`LEARN_SINGLES`] one-frame calls are in, the sender makes one-frame calls
/// ([`FloorEstimate::wants_singles`]; a train's frames still join their head's call, from
/// the floor guessed so far); the hand-over cost is the median of the calls timed so far
/// (robust to a stall among them), and the spacing the median of the first
/// [`LEARN_SPACINGS`] calls of several frames (half the hand-over cost until then). Before
/// the first call is timed, a frame joins a call only when it is already due. The
/// exponential weighting takes over from those medians.
#[derive(Clone, Copy, Debug)]
pub struct FloorEstimate {
    handover_ns: f64,
    spacing_ns: f64,
    learning: Option<Learning>,
    /// Calls skipped in a row as interrupted: one-frame calls, calls of several.
    rejected_singles: u32,
    rejected_spacings: u32,
    /// Calls of several frames in a row whose frames cost under half the spacing.
    cheaper_spacings: u32,
    /// Calls of several frames timed in this run.
    spacings_seen: u64,
    /// Calls since the last call of several frames.
    calls_since_spacing: u32,
}

/// Calls without one of several frames after which a sender that is behind its schedule
/// hands its due frames over together once ([`FloorEstimate::wants_spacing_check`]): a
/// spacing estimated too high (remembered from a run whose frames cost more together, or
/// from another pattern) says frames never gain by joining, so no call would ever time it
/// again and the sender would stay behind, making one call per frame.
pub const SPACING_CHECK_EVERY: u32 = 256;

/// Calls of one kind skipped in a row after which the estimate of that part starts over.
pub const REJECTED_STREAK: u32 = 16;

/// One-frame calls timed before the hand-over cost is taken as known.
pub const LEARN_SINGLES: usize = 8;
/// Per-frame spacings of calls of several frames timed before the spacing is taken as known.
pub const LEARN_SPACINGS: usize = 4;

/// The first calls of a run that learns its floor (fixed arrays: no allocation while sending).
#[derive(Clone, Copy, Debug)]
struct Learning {
    singles: [u64; LEARN_SINGLES],
    n_singles: usize,
    spacings: [u64; LEARN_SPACINGS],
    n_spacings: usize,
}

impl Learning {
    fn new() -> Self {
        Learning {
            singles: [0; LEARN_SINGLES],
            n_singles: 0,
            spacings: [0; LEARN_SPACINGS],
            n_spacings: 0,
        }
    }
}

/// What a learning run coalesces to before it knows anything: calls cost next to nothing and
/// frames of one call leave half as far apart, so a frame joins a call only when it is due
/// by then (a late frame joins, one ahead of its time waits).
const UNKNOWN: PathFloor = PathFloor {
    handover_ns: 2,
    spacing_ns: 1,
};

impl FloorEstimate {
    pub const WEIGHT: f64 = 64.0;

    /// An estimate that starts from a known floor (given, or remembered from an earlier run).
    pub fn new(start: PathFloor) -> Self {
        FloorEstimate {
            handover_ns: start.handover_ns.max(1) as f64,
            spacing_ns: start.spacing_ns.max(1) as f64,
            learning: None,
            rejected_singles: 0,
            rejected_spacings: 0,
            cheaper_spacings: 0,
            spacings_seen: 0,
            calls_since_spacing: 0,
        }
    }

    /// An estimate that knows nothing yet and learns from the run's first hand-overs.
    pub fn learning() -> Self {
        FloorEstimate {
            handover_ns: UNKNOWN.handover_ns as f64,
            spacing_ns: UNKNOWN.spacing_ns as f64,
            learning: Some(Learning::new()),
            rejected_singles: 0,
            rejected_spacings: 0,
            cheaper_spacings: 0,
            spacings_seen: 0,
            calls_since_spacing: 0,
        }
    }

    /// Whether the next hand-over should carry one frame: the hand-over cost is still being
    /// learned from one-frame calls.
    pub fn wants_singles(&self) -> bool {
        self.learning.is_some_and(|l| l.n_singles < LEARN_SINGLES)
    }

    /// Whether the hand-over cost is known (given, remembered or learned).
    pub fn handover_known(&self) -> bool {
        !self.wants_singles()
    }

    /// Whether the spacing is known (given, remembered, or timed in at least one call of
    /// several frames; a run that never hands several frames over together never learns
    /// it). One call is enough to call it known: a path whose frames of one call cost more
    /// than separate calls makes no further such calls once its first one is timed.
    pub fn spacing_known(&self) -> bool {
        self.learning.is_none_or(|l| l.n_spacings >= 1)
    }

    /// Whether this run timed a call of several frames itself (else the spacing is what was
    /// given or remembered, or a guess).
    pub fn spacing_seen(&self) -> bool {
        self.spacings_seen > 0
    }

    /// Whether a sender that is behind its schedule should hand the frames already due over
    /// in one call, whatever the floor says of joining: no call of several frames for
    /// [`SPACING_CHECK_EVERY`] calls (see there).
    pub fn wants_spacing_check(&self) -> bool {
        self.handover_known() && self.calls_since_spacing >= SPACING_CHECK_EVERY
    }

    /// A call of `frames` frames took `call_ns`.
    pub fn observe(&mut self, frames: usize, call_ns: u64) {
        if frames > 1 {
            self.spacings_seen += 1;
            self.calls_since_spacing = 0;
        } else if frames == 1 {
            self.calls_since_spacing = self.calls_since_spacing.saturating_add(1);
        }
        if let Some(l) = &mut self.learning {
            match frames {
                0 => {}
                1 if l.n_singles < LEARN_SINGLES => {
                    l.singles[l.n_singles] = call_ns;
                    l.n_singles += 1;
                    self.handover_ns = median(&l.singles[..l.n_singles]).max(1) as f64;
                    if l.n_spacings == 0 {
                        self.spacing_ns = (self.handover_ns / 2.0).max(1.0);
                    }
                    return;
                }
                n if n > 1 && l.n_singles > 0 && l.n_spacings < LEARN_SPACINGS => {
                    let per_frame =
                        call_ns.saturating_sub(self.handover_ns as u64) / (n - 1) as u64;
                    l.spacings[l.n_spacings] = per_frame.max(1);
                    l.n_spacings += 1;
                    self.spacing_ns = median(&l.spacings[..l.n_spacings]).max(1) as f64;
                    return;
                }
                _ => {}
            }
            if l.n_singles >= LEARN_SINGLES && l.n_spacings >= LEARN_SPACINGS {
                self.learning = None;
            }
        }
        let call = call_ns as f64;
        match frames {
            0 => {}
            1 => {
                if call <= 4.0 * self.handover_ns {
                    self.handover_ns += (call - self.handover_ns) / Self::WEIGHT;
                    self.rejected_singles = 0;
                } else {
                    self.rejected_singles += 1;
                    if self.rejected_singles >= REJECTED_STREAK {
                        // Not a stall but a wrong start: take this call as the estimate.
                        self.handover_ns = call.max(1.0);
                        self.rejected_singles = 0;
                    }
                }
            }
            n => {
                let per_frame = (call - self.handover_ns) / (n - 1) as f64;
                // Several calls in a row far cheaper per frame than the estimate: it was
                // wrong (too high), not a lucky call; take the latest. (Calls of 3 frames
                // or more: the hand-over's own noise swamps the spacing of a pair.)
                if n >= 3 && per_frame > 0.0 && per_frame < self.spacing_ns / 2.0 {
                    self.cheaper_spacings += 1;
                    if self.cheaper_spacings as usize >= LEARN_SPACINGS {
                        self.spacing_ns = per_frame.max(1.0);
                        self.cheaper_spacings = 0;
                        return;
                    }
                } else {
                    self.cheaper_spacings = 0;
                }
                if per_frame > 0.0 && per_frame <= 4.0 * self.spacing_ns {
                    self.spacing_ns += (per_frame - self.spacing_ns) / Self::WEIGHT;
                    self.rejected_spacings = 0;
                } else if per_frame > 0.0 {
                    self.rejected_spacings += 1;
                    if self.rejected_spacings >= REJECTED_STREAK {
                        self.spacing_ns = per_frame.max(1.0);
                        self.rejected_spacings = 0;
                    }
                }
            }
        }
    }

    /// The floor hand-overs are coalesced to: before any call was timed what nothing known
    /// allows (only due frames join), the estimate after that.
    pub fn floor(&self) -> PathFloor {
        self.guess()
    }

    /// The best estimate so far, also while learning (the median of the calls timed so far;
    /// next to nothing before the first): what the sender judges its own lateness against.
    pub fn guess(&self) -> PathFloor {
        PathFloor {
            handover_ns: self.handover_ns.round().max(1.0) as u64,
            spacing_ns: self.spacing_ns.round().max(1.0) as u64,
        }
    }
}

/// The median of a few values (the upper one of an even count), without allocating.
fn median(values: &[u64]) -> u64 {
    let mut sorted = [0u64; LEARN_SINGLES];
    let sorted = &mut sorted[..values.len().min(LEARN_SINGLES)];
    sorted.copy_from_slice(&values[..sorted.len()]);
    sorted.sort_unstable();
    sorted[sorted.len() / 2]
}

/// Departures (ns) of an ideal sender on `floor` for `deadlines` (ascending): each call
/// starts at its first frame's deadline or when the previous call ends, whichever is later,
/// takes the following frames while [`PathFloor::joins`] says so (at most `max_batch`), and
/// its frames leave `spacing_ns` apart. The constant delay from call to wire is left out.
pub fn perfect_departures(deadlines: &[u64], floor: PathFloor, max_batch: usize) -> Vec<u64> {
    let max_batch = max_batch.max(1);
    let mut out = Vec::with_capacity(deadlines.len());
    let mut free_ns = 0u64;
    let mut i = 0;
    while i < deadlines.len() {
        let start = deadlines[i].max(free_ns);
        let mut held = 1;
        while i + held < deadlines.len()
            && held < max_batch
            && floor.joins(start, held, deadlines[i + held])
        {
            held += 1;
        }
        // Saturating: floors and deadlines may come from untrusted input (analyze's --floor).
        out.extend(
            (0..held as u64).map(|k| start.saturating_add(k.saturating_mul(floor.spacing_ns))),
        );
        free_ns = start.saturating_add(floor.call_ns(held));
        i += held;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATH: PathFloor = PathFloor::EXAMPLE;

    #[test]
    fn floors_are_read_as_handover_and_spacing() {
        assert_eq!("2.3us/0.9us".parse::<PathFloor>().unwrap(), PATH);
        let both: PathFloor = "500ns".parse().unwrap();
        assert_eq!((both.handover_ns, both.spacing_ns), (500, 500));
        assert!("0/1us".parse::<PathFloor>().is_err());
        assert!("fast".parse::<PathFloor>().is_err());
    }

    #[test]
    fn the_estimate_follows_the_calls_and_skips_interrupted_ones() {
        let mut e = FloorEstimate::new(PATH);
        for _ in 0..1_000 {
            e.observe(1, 2_000);
            e.observe(11, 2_000 + 10 * 1_200);
            e.observe(1, 1_000_000);
        }
        let f = e.floor();
        assert!((1_990..=2_010).contains(&f.handover_ns), "{f:?}");
        assert!((1_190..=1_210).contains(&f.spacing_ns), "{f:?}");
    }

    #[test]
    fn a_learning_estimate_takes_singles_first_then_medians_then_follows() {
        let mut e = FloorEstimate::learning();
        assert!(e.wants_singles() && !e.handover_known() && !e.spacing_known());
        // Before anything is known only due frames join: a frame 1 µs ahead waits.
        assert!(!e.floor().joins(0, 1, 1_000));
        assert!(e.floor().joins(10, 1, 5));
        // From the first call on, the floor guessed so far.
        e.observe(1, 3_000);
        assert_eq!(e.floor().handover_ns, 3_000);
        assert_eq!(e.floor().spacing_ns, 1_500);
        // Eight singles, one of them a stall: the median ignores it.
        for call in [3_100, 2_900, 900_000, 3_050, 2_950, 3_000, 3_020] {
            e.observe(1, call);
        }
        assert!(!e.wants_singles() && e.handover_known() && !e.spacing_known());
        assert_eq!(e.floor().handover_ns, 3_020);
        // Half the hand-over until a call of several frames is timed.
        assert_eq!(e.floor().spacing_ns, 1_510);
        e.observe(10, 3_000 + 9 * 700);
        assert!(e.spacing_known());
        for call in [3_000 + 9 * 710, 3_000 + 9 * 690, 3_000 + 9 * 700] {
            e.observe(10, call);
        }
        let f = e.floor();
        assert!((690..=712).contains(&f.spacing_ns), "{f:?}");
        // From here on it follows the path as a known start would.
        for _ in 0..2_000 {
            e.observe(1, 2_000);
            e.observe(11, 2_000 + 10 * 1_200);
        }
        let f = e.floor();
        assert!((1_990..=2_010).contains(&f.handover_ns), "{f:?}");
        assert!((1_190..=1_210).contains(&f.spacing_ns), "{f:?}");
    }

    #[test]
    fn a_start_far_below_the_path_is_left_after_a_streak_of_rejected_calls() {
        // Remembered 500/100 ns; the path takes 2.3 µs per call and 0.9 µs per further
        // frame: every call is more than 4× the start, so each alone looks interrupted.
        let mut e = FloorEstimate::new(PathFloor {
            handover_ns: 500,
            spacing_ns: 100,
        });
        for _ in 0..REJECTED_STREAK {
            e.observe(1, 2_300);
            e.observe(11, 2_300 + 10 * 900);
        }
        for _ in 0..2_000 {
            e.observe(1, 2_300);
            e.observe(11, 2_300 + 10 * 900);
        }
        let f = e.floor();
        assert!((2_250..=2_350).contains(&f.handover_ns), "{f:?}");
        assert!((880..=920).contains(&f.spacing_ns), "{f:?}");
        // One stall among good calls is still skipped.
        let before = e.floor();
        e.observe(1, 1_000_000);
        assert_eq!(e.floor(), before);
    }

    #[test]
    fn a_spacing_remembered_too_high_is_checked_and_corrected() {
        // Remembered 966 ns per call and 4.1 µs per further frame (timed in trains whose
        // frames cost more together): with the spacing above the hand-over nothing joins,
        // so only one-frame calls come, and no call times the spacing.
        let mut e = FloorEstimate::new(PathFloor {
            handover_ns: 966,
            spacing_ns: 4_118,
        });
        assert!(!e.floor().joins(0, 1, 0), "a due frame joined a call");
        for _ in 0..SPACING_CHECK_EVERY - 1 {
            e.observe(1, 900);
        }
        assert!(!e.wants_spacing_check() && !e.spacing_seen());
        e.observe(1, 900);
        assert!(e.wants_spacing_check());
        // The path's frames cost 0.53 µs together: a few checks of due frames say so.
        for _ in 0..LEARN_SPACINGS {
            e.observe(40, 900 + 39 * 530);
            assert!(
                !e.wants_spacing_check(),
                "checked again right after a call of several"
            );
            for _ in 0..SPACING_CHECK_EVERY {
                e.observe(1, 900);
            }
        }
        let f = e.floor();
        assert!((500..=560).contains(&f.spacing_ns), "{f:?}");
        assert!(e.spacing_seen());
        // Corrected, due frames join again.
        assert!(f.joins(0, 1, 0));
        // Noise in pairs of frames does not pull a right spacing down.
        let mut e = FloorEstimate::new(PATH);
        for _ in 0..=LEARN_SPACINGS {
            e.observe(2, PATH.handover_ns + 10);
        }
        assert!(
            e.floor().spacing_ns > PATH.spacing_ns / 2,
            "{:?}",
            e.floor()
        );
    }

    #[test]
    fn a_known_start_needs_no_learning() {
        let e = FloorEstimate::new(PATH);
        assert!(!e.wants_singles() && e.handover_known() && e.spacing_known());
        assert_eq!(e.floor(), PATH);
        assert_eq!(e.guess(), PATH);
    }

    #[test]
    fn frames_far_apart_leave_at_their_deadlines() {
        let deadlines: Vec<u64> = (0..100).map(|k| k * 10_000).collect();
        assert_eq!(perfect_departures(&deadlines, PATH, 256), deadlines);
    }

    #[test]
    fn a_close_frame_joins_when_that_is_nearer_its_deadline() {
        // 1.0 µs after the head: joined it leaves at 0.9 (0.1 early), alone at 2.3 (1.3 late).
        assert!(PATH.joins(0, 1, 1_000));
        // 2.0 µs: joined 1.1 early, alone 0.3 late.
        assert!(!PATH.joins(0, 1, 2_000));
        // The midpoint is 1.6 µs: 0.7 either way, a tie that stays alone.
        assert!(!PATH.joins(0, 1, 1_600));
        assert!(PATH.joins(0, 1, 1_599));
    }

    #[test]
    fn gaps_between_spacing_and_handover_do_not_exist() {
        let deadlines: Vec<u64> = (0..1000).map(|k| k * 1_500).collect();
        let out = perfect_departures(&deadlines, PATH, 256);
        for w in out.windows(2) {
            let gap = w[1] - w[0];
            assert!(gap == 900 || gap >= 2_300, "gap {gap}");
        }
    }

    #[test]
    fn long_run_rate_is_kept_above_the_handover_rate() {
        // 1 Mpps asks for 1 µs gaps: calls grow until the path keeps up.
        let deadlines: Vec<u64> = (0..100_000).map(|k| k * 1_000).collect();
        let out = perfect_departures(&deadlines, PATH, 256);
        let last = *out.last().unwrap();
        let lag = last as i64 - *deadlines.last().unwrap() as i64;
        assert!(lag.abs() < 30_000, "last frame {lag} ns off its deadline");
        assert!(PATH.ceiling_pps(256) > 1.05e6);
    }

    #[test]
    fn a_rate_above_the_ceiling_falls_behind() {
        let deadlines: Vec<u64> = (0..10_000).map(|k| k * 800).collect();
        let out = perfect_departures(&deadlines, PATH, 256);
        let span = out.last().unwrap() - out[0];
        assert!(span > 9_999 * 880, "span {span}");
    }

    #[test]
    fn a_batch_cap_of_one_sends_every_frame_alone() {
        let deadlines: Vec<u64> = (0..10).map(|k| k * 1_000).collect();
        let out = perfect_departures(&deadlines, PATH, 1);
        for w in out.windows(2) {
            assert_eq!(w[1] - w[0], 2_300);
        }
    }

    #[test]
    fn spacing_above_handover_only_joins_late_frames() {
        let slow_wire = PathFloor {
            handover_ns: 1_000,
            spacing_ns: 5_000,
        };
        assert!(!slow_wire.joins(0, 1, 2_000));
        assert_eq!(
            perfect_departures(&[0, 6_000, 12_000], slow_wire, 256),
            vec![0, 6_000, 12_000]
        );
    }
}
