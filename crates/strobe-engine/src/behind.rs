//! Paced workers that keep falling behind their schedule, told while the run goes on.
//!
//! A floor known before a run can overrate the path (remembered from a run whose frames cost
//! the far side less, a receiver's stack on the same machine, a capture), a floor learned
//! while running gives no ceiling before the first frame, and other work can take the
//! sender's core. A run asking more than the path then paces falls behind
//! steadily and would say so only after it ended, however long it was asked to be. The
//! watcher reads each paced worker's lag behind its schedule (published per hand-over) and
//! says so within a few tenths of a second. A stall (the machine stops the sender for a
//! while) moves the lag once, and the late policy repays or keeps it: that is not a steady
//! fall. So the lag must grow by more than [`LOSING`] of the time in [`WINDOWS`] windows of
//! [`WINDOW_NS`] in a row, and be above [`MIN_BEHIND_NS`].

use crate::port_floor::PortPacing;
use strobe_model::Warning;

/// Length of one window the lag's growth is judged over.
pub const WINDOW_NS: u64 = 100_000_000;
/// Windows in a row the lag must grow in.
pub const WINDOWS: u32 = 3;
/// Share of the time a worker must lose to its schedule in each window.
pub const LOSING: f64 = 0.02;
/// Lag below which nothing is said (a backlog the path's floor explains).
pub const MIN_BEHIND_NS: u64 = 5_000_000;

#[derive(Clone, Debug)]
struct Watched {
    name: String,
    asked_pps: Option<f64>,
    /// The ceiling of the floor known before the run (None when the run learns it).
    ceiling_pps: Option<f64>,
    /// (elapsed, lag) when the current window began.
    window_start: Option<(u64, u64)>,
    /// Windows in a row the lag grew in, and what it grew by over them.
    growing: u32,
    lost_ns: u64,
    over_ns: u64,
    told: bool,
}

/// Watches the paced workers of a run (in the order of the pacings given).
#[derive(Clone, Debug, Default)]
pub struct BehindWatch {
    workers: Vec<Watched>,
}

impl BehindWatch {
    pub fn new(pacings: &[PortPacing]) -> Self {
        BehindWatch {
            workers: pacings
                .iter()
                .map(|p| Watched {
                    name: p.port.clone(),
                    asked_pps: p.asked_pps,
                    ceiling_pps: p.ceiling_pps,
                    window_start: None,
                    growing: 0,
                    lost_ns: 0,
                    over_ns: 0,
                    told: false,
                })
                .collect(),
        }
    }

    /// The watched workers' names, in order: the lag slots to publish into.
    pub fn names(&self) -> impl Iterator<Item = String> + '_ {
        self.workers.iter().map(|w| w.name.clone())
    }

    /// Takes each worker's lag `elapsed_ns` into the run; returns what to tell the user now
    /// (at most once per worker).
    pub fn observe(&mut self, elapsed_ns: u64, behind_ns: &[u64]) -> Vec<Warning> {
        let mut told = Vec::new();
        for (w, &behind) in self.workers.iter_mut().zip(behind_ns) {
            let Some((start, start_behind)) = w.window_start else {
                w.window_start = Some((elapsed_ns, behind));
                continue;
            };
            let span = elapsed_ns.saturating_sub(start);
            if span < WINDOW_NS {
                continue;
            }
            w.window_start = Some((elapsed_ns, behind));
            let grew = behind.saturating_sub(start_behind);
            if grew as f64 > LOSING * span as f64 && behind > MIN_BEHIND_NS {
                w.growing += 1;
                w.lost_ns += grew;
                w.over_ns += span;
            } else {
                (w.growing, w.lost_ns, w.over_ns) = (0, 0, 0);
            }
            if w.growing >= WINDOWS && !w.told {
                w.told = true;
                told.push(w.message(elapsed_ns, behind));
            }
        }
        told
    }
}

impl Watched {
    fn message(&self, elapsed_ns: u64, behind_ns: u64) -> Warning {
        // The lag is read when hand-overs start, not at the windows' edges: bounded.
        Warning::FallingBehind {
            port: self.name.clone(),
            behind_ns,
            elapsed_ns,
            lost_share: (self.lost_ns as f64 / self.over_ns.max(1) as f64).min(1.0),
            over_ns: self.over_ns,
            asked_pps: self.asked_pps,
            ceiling_pps: self.ceiling_pps,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port_floor::FloorSource;
    use strobe_timing::PathFloor;

    /// A worker asked 1 Mpps whose remembered floor allowed 1.9 Mpps.
    fn pacing(name: &str) -> PortPacing {
        PortPacing {
            port: name.into(),
            location: "null".into(),
            floor: Some(PathFloor {
                handover_ns: 1_000,
                spacing_ns: 500,
            }),
            source: FloorSource::Remembered,
            max_batch: 256,
            ceiling_pps: Some(1.9e6),
            asked_pps: Some(1e6),
            observed: None,
            observed_spacing_known: false,
        }
    }

    fn watch() -> BehindWatch {
        BehindWatch::new(&[pacing("port0")])
    }

    /// Feeds `lag(t)` every 20 ms (as the engine's watcher loop does) up to `end_ns`;
    /// returns the elapsed times at which something was told, with the texts.
    fn feed(w: &mut BehindWatch, end_ns: u64, lag: impl Fn(u64) -> u64) -> Vec<(u64, String)> {
        let mut told = Vec::new();
        let mut t = 0;
        while t <= end_ns {
            for warning in w.observe(t, &[lag(t)]) {
                told.push((t, warning.to_string()));
            }
            t += 20_000_000;
        }
        told
    }

    #[test]
    fn a_steady_fall_is_told_once_within_half_a_second() {
        let mut w = watch();
        // The path paces 800 kpps of the 1 Mpps asked: a fifth of the time lost.
        let told = feed(&mut w, 3_000_000_000, |t| t / 5);
        assert_eq!(told.len(), 1, "{told:?}");
        let (at, text) = &told[0];
        assert!(*at <= 500_000_000, "told at {at} ns");
        assert!(text.contains("port `port0` keeps falling behind"), "{text}");
        assert!(text.contains("losing 20.0 %"), "{text}");
        assert!(
            text.contains("800.00 kpps of the 1.000 Mpps asked"),
            "{text}"
        );
        assert!(text.contains("up to 1.900 Mpps"), "{text}");
    }

    #[test]
    fn stalls_and_a_bounded_backlog_are_not_a_fall() {
        // One 30 ms stall at 0.5 s, kept (the shift policy) or repaid at 1/50 (smooth).
        let kept = |t: u64| if t >= 500_000_000 { 30_000_000 } else { 0 };
        assert!(feed(&mut watch(), 3_000_000_000, kept).is_empty());
        let repaid = |t: u64| match t {
            0..=499_999_999 => 0,
            _ => 30_000_000u64.saturating_sub((t - 500_000_000) / 50),
        };
        assert!(feed(&mut watch(), 3_000_000_000, repaid).is_empty());
        // A 10 ms stall every 300 ms: the lag jumps in some windows, never three in a row.
        let stalls = |t: u64| (t / 300_000_000) * 10_000_000;
        assert!(feed(&mut watch(), 3_000_000_000, stalls).is_empty());
        // Falling behind by 1 % of the time (under the 2 % asked), or by 3 % while the lag
        // is still under 5 ms: nothing.
        assert!(feed(&mut watch(), 3_000_000_000, |t| t / 100).is_empty());
        assert!(feed(&mut watch(), 150_000_000, |t| t * 3 / 100).is_empty());
    }

    #[test]
    fn only_workers_that_fall_are_told() {
        let mut w = BehindWatch::new(&[pacing("a"), pacing("b")]);
        let mut told = Vec::new();
        for k in 0..100u64 {
            let t = k * 20_000_000;
            told.extend(w.observe(t, &[0, t / 4]));
        }
        assert_eq!(told.len(), 1);
        assert_eq!(told[0].port(), Some("b"), "{told:?}");
        assert!(told[0].to_string().contains("port `b`"), "{told:?}");
        assert_eq!(w.names().collect::<Vec<_>>(), ["a", "b"]);
    }
}
