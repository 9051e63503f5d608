//! A paced port's floor: what one hand-over costs and how closely frames handed over
//! together leave, and where the run got it from.
//!
//! A run sends nothing but its flows' frames: it never probes the path before its first
//! frame (a device under test counts, learns and logs every frame it sees). A paced port
//! takes its floor from `--floor` ([`FloorSource::Given`]), from an earlier run on the same
//! interface ([`FloorSource::Remembered`], kept by the run control), or learns it from its
//! own first hand-overs ([`FloorSource::Learned`], see [`strobe_timing::FloorEstimate`]).
//! Every run refines its floor from its own hand-overs as it goes.
//!
//! [`probe`] is the explicit, opt-in measurement of `strobe ports --floor PORT`: it sends a
//! few hundred probe frames that go nowhere beyond the first hop (60 bytes from and to one
//! locally administered MAC, the IEEE local experimental EtherType 0x88B5, ending in the
//! probe trailer, which `strobe analyze` leaves out).

use strobe_io::{Backend, IoError, MAX_BATCH};
use strobe_model::FlowSpec;
use strobe_timing::{PathFloor, Schedule};

use crate::clock::Clock;

/// Single-frame hand-overs timed (after as many warm-up calls).
const SINGLES: usize = 32;
/// Hand-overs of [`BATCH`] frames timed.
const BATCHES: usize = 4;
const BATCH: usize = 64;

/// Where a port's floor came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloorSource {
    /// Given by the user (`--floor`, or the run options).
    Given,
    /// Measured by an earlier run on the same interface (or `strobe ports --floor`).
    Remembered,
    /// Nothing known before the run: learned from its own first hand-overs.
    Learned,
}

impl FloorSource {
    pub fn name(self) -> &'static str {
        match self {
            FloorSource::Given => "given",
            FloorSource::Remembered => "remembered",
            FloorSource::Learned => "learned",
        }
    }
}

/// A floor known before a run, for a port (given or remembered).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnownFloor {
    pub floor: PathFloor,
    pub source: FloorSource,
}

/// A paced port's floor and what it allows, as reported before and after the run.
#[derive(Clone, Debug, PartialEq)]
pub struct PortPacing {
    /// The transmit worker (`port` or `port#k` when a port has several).
    pub port: String,
    /// Where it sends (`afpacket:NS/IFACE`, …): the path the floor belongs to.
    pub location: String,
    /// The floor known before the first frame; None when the run learns it.
    pub floor: Option<PathFloor>,
    pub source: FloorSource,
    /// Most frames one hand-over may carry (`--batch`; 1 turns coalescing off).
    pub max_batch: usize,
    /// The highest paced rate the known floor allows with that many frames per hand-over.
    pub ceiling_pps: Option<f64>,
    /// The long-run rate the worker's flows ask for together, when it is known.
    pub asked_pps: Option<f64>,
    /// After the run: the floor as the run's own hand-overs refined (or learned) it; None
    /// when the run made too few hand-overs to learn its hand-over cost.
    pub observed: Option<PathFloor>,
    /// Whether the observed spacing was measured (calls of several frames were made) rather
    /// than assumed.
    pub observed_spacing_known: bool,
}

impl PortPacing {
    pub fn new(
        port: &str,
        location: &str,
        known: Option<KnownFloor>,
        max_batch: usize,
        flows: &[FlowSpec],
    ) -> PortPacing {
        PortPacing {
            port: port.to_string(),
            location: location.to_string(),
            floor: known.map(|k| k.floor),
            source: known.map_or(FloorSource::Learned, |k| k.source),
            max_batch,
            ceiling_pps: known.map(|k| k.floor.ceiling_pps(max_batch)),
            asked_pps: asked_pps(flows),
            observed: None,
            observed_spacing_known: false,
        }
    }

    /// The ceiling of the floor the run ended with (or started from, if it learned none).
    pub fn best_ceiling_pps(&self) -> Option<f64> {
        self.observed
            .map(|f| f.ceiling_pps(self.max_batch))
            .or(self.ceiling_pps)
    }

    /// A warning when the flows ask for more than the known floor can pace, with what to do
    /// (none when the floor is learned during the run: the falling-behind watch tells then).
    pub fn warning(&self) -> Option<String> {
        let asked = self.asked_pps?;
        let (floor, ceiling) = (self.floor?, self.ceiling_pps?);
        // Within 2 %: a floor's own noise.
        if asked <= ceiling * 1.02 {
            return None;
        }
        let batch_hint = if self.max_batch < MAX_BATCH {
            format!(
                "raise --batch (now {}, up to {MAX_BATCH}), ",
                self.max_batch
            )
        } else {
            String::new()
        };
        Some(format!(
            "port `{}`: {} asked, but this path paces at most {} (one hand-over {}, frames \
             handed over together {} apart, up to {} per hand-over; floor {}): the run will \
             fall behind and take longer than asked. {batch_hint}spread the flows over more \
             cores (--cores), use another backend (afxdp: is usually faster than af_packet:), \
             or ask for --rate max to send unpaced",
            self.port,
            crate::text::pps_text(asked),
            crate::text::pps_text(ceiling),
            ns_text(floor.handover_ns),
            ns_text(floor.spacing_ns),
            self.max_batch,
            self.source.name()
        ))
    }
}

/// The long-run rate `flows` ask for together (None when a flow's is unknown, as for a
/// replay).
fn asked_pps(flows: &[FlowSpec]) -> Option<f64> {
    flows.iter().try_fold(0.0, |sum, f| {
        let schedule = Schedule::new(f.schedule.clone()).ok()?;
        Some(sum + schedule.nominal_pps(f.size.mean())?)
    })
}

pub(crate) fn ns_text(ns: u64) -> String {
    if ns >= 1_000 {
        format!("{:.2} µs", ns as f64 / 1e3)
    } else {
        format!("{ns} ns")
    }
}

/// Measures `backend`'s floor with `frame`: the median time of a one-frame hand-over, and
/// the median per-frame time of the further frames of [`BATCH`]-frame hand-overs. Returns
/// the floor and the frames sent.
pub fn probe<B: Backend>(
    backend: &mut B,
    clock: &Clock,
    frame: &[u8],
) -> Result<(PathFloor, u64), IoError> {
    let batch = BATCH.min(backend.slot_count()).max(2);
    let mut sent = 0u64;
    let (mut singles, mut per_frame) = ([0u64; SINGLES], [0u64; BATCHES]);
    let (mut handover_ns, mut spacing_ns) = (1, 1);
    // The first round warms caches, ring pages and the path up; the second is kept.
    for _ in 0..2 {
        for t in singles.iter_mut() {
            let start = clock.now_ticks();
            sent += hand_over(backend, frame, 1)?;
            *t = clock.ticks_to_ns(clock.now_ticks() - start);
        }
        handover_ns = median(&mut singles).max(1);
        for t in per_frame.iter_mut() {
            let start = clock.now_ticks();
            sent += hand_over(backend, frame, batch)?;
            let total = clock.ticks_to_ns(clock.now_ticks() - start);
            *t = total.saturating_sub(handover_ns) / (batch as u64 - 1);
        }
        spacing_ns = median(&mut per_frame).max(1);
    }
    Ok((
        PathFloor {
            handover_ns,
            spacing_ns,
        },
        sent,
    ))
}

/// A probe frame: 60 bytes from and to `mac`, the IEEE local experimental EtherType 0x88B5,
/// ending in the probe trailer.
pub fn probe_frame(mac: [u8; 6]) -> Vec<u8> {
    let mut frame = vec![0u8; 60];
    frame[0..6].copy_from_slice(&mac);
    frame[6..12].copy_from_slice(&mac);
    frame[12..14].copy_from_slice(&0x88B5u16.to_be_bytes());
    let at = frame.len() - strobe_wire::trailer::LEN;
    frame[at..].copy_from_slice(&strobe_wire::trailer::PROBE);
    frame
}

/// A locally administered MAC for probes on a port with no flow (`strobe ports --floor`).
pub const PROBE_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0];

/// Opens the transmit side of `location` and measures its floor with probe frames from and
/// to [`PROBE_MAC`]; returns it with the frames sent.
pub fn probe_location(location: &str) -> Result<(PathFloor, u64), IoError> {
    if strobe_io::AnyBackend::time_base_of(location) == Some(strobe_io::TimeBase::Scheduled) {
        return Err(IoError::Other(format!(
            "{location} writes a trace in scheduled time: it has no floor to measure"
        )));
    }
    let mut backend = strobe_io::AnyBackend::open(location, MAX_BATCH)?;
    let clock = Clock::calibrate(std::time::Duration::from_millis(20));
    let result = probe(&mut backend, &clock, &probe_frame(PROBE_MAC))?;
    backend.finish()?;
    Ok(result)
}

/// Hands `count` copies of `frame` over, in as many calls as the backend needs.
fn hand_over<B: Backend>(backend: &mut B, frame: &[u8], count: usize) -> Result<u64, IoError> {
    let mut done = 0;
    let mut stalls = 0u32;
    while done < count {
        let sent = backend.transmit(count - done, |slots| {
            for slot in slots.iter_mut() {
                slot.buf[..frame.len()].copy_from_slice(frame);
                slot.len = frame.len();
                slot.scheduled_ns = 0;
            }
        })?;
        done += sent;
        if sent == 0 {
            stalls += 1;
            if stalls > 1_000_000 {
                return Err(IoError::Other(format!(
                    "{} accepts no frames while measuring its floor",
                    backend.describe()
                )));
            }
            std::hint::spin_loop();
        }
    }
    Ok(done as u64)
}

fn median(values: &mut [u64]) -> u64 {
    values.sort_unstable();
    values[values.len() / 2]
}

#[cfg(test)]
mod tests {
    use super::*;
    use strobe_io::NullBackend;

    #[test]
    fn the_probe_sends_what_it_says_and_measures_something() {
        let clock = Clock::calibrate(std::time::Duration::from_millis(10));
        let mut backend = NullBackend::new(MAX_BATCH);
        let (floor, sent) = probe(&mut backend, &clock, &[0u8; 60]).unwrap();
        assert_eq!(sent, 2 * (SINGLES + BATCHES * BATCH) as u64);
        assert_eq!(backend.finish().unwrap().frames, sent);
        assert!(floor.handover_ns >= 1 && floor.spacing_ns >= 1);
    }

    #[test]
    fn a_rate_above_the_ceiling_is_warned_about_with_what_to_do() {
        let floor = PathFloor {
            handover_ns: 2_300,
            spacing_ns: 900,
        };
        let known = KnownFloor {
            floor,
            source: FloorSource::Given,
        };
        let mut pacing = PortPacing::new("p1", "null", Some(known), 8, &[]);
        pacing.asked_pps = Some(1e6);
        let warning = pacing
            .warning()
            .expect("8 frames per hand-over cannot reach 1 Mpps");
        assert!(warning.contains("1.000 Mpps asked"), "{warning}");
        assert!(warning.contains("raise --batch"), "{warning}");
        pacing.max_batch = MAX_BATCH;
        pacing.ceiling_pps = Some(floor.ceiling_pps(MAX_BATCH));
        assert_eq!(pacing.warning(), None);
        pacing.asked_pps = Some(2e6);
        assert!(!pacing.warning().unwrap().contains("raise --batch"));
        // A floor learned while running gives nothing to warn with before the first frame.
        let learned = PortPacing::new("p1", "null", None, 8, &[]);
        assert_eq!(learned.source, FloorSource::Learned);
        assert_eq!(
            PortPacing {
                asked_pps: Some(1e9),
                ..learned
            }
            .warning(),
            None
        );
    }
}
