//! The convoy-of-packet-trains experiments (../shared/papers/003, "Measuring latency of
//! high-speed optical links with DPDK"), one request each: a convoy (head latency,
//! bandwidth and loss in one measurement), a frame-size sweep (how the IDI depends on the
//! frame size) and a train-length sweep. Each step is one run of a train flow; what the
//! path's bottleneck predicts (a known link rate, or the lab's tbf shaper) is put beside
//! what was measured, and so is, on request, a constant-rate baseline at the heads' own
//! rate (the heads wait in no queue, so their latency should be the baseline's).
//!
//! Front ends run each step their own way (a status line, a server's run handle) through
//! the runner they pass to [`run_experiment`]; everything else happens here.

use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};
use strobe_analyze::latency::LatencyStats;
use strobe_analyze::trains::{Bottleneck, Convoy, Counted, TailLoss};
use strobe_engine::RunReport;
use strobe_model::{Scenario, Warning, DEFAULT_PORT_SPEED_BPS};
use strobe_timing::{Duration, Rate};

use crate::methodology::{resolve_flow, sending, spec_flow};
use crate::plan::Pacing;
use crate::results::{csv_text, train_csv_cells, TRAIN_CSV_HEADER};
use crate::source::OneFlow;
use crate::text::{bps_text, duration_text};
use crate::{ControlError, Results};

/// Gap between trains when nothing says how long a train takes to pass: 1 ms, as long as a
/// 100-frame train of 1518-byte frames takes at 1.2 Gbit/s.
pub const DEFAULT_GAP_NS: u64 = 1_000_000;

/// The frame sizes of a frame-size sweep unless told otherwise (RFC 2544's, without 1280).
pub const DEFAULT_SIZES: [u32; 6] = [64, 128, 256, 512, 1024, 1518];

/// Frames per train when the bottleneck's buffer does not ask for fewer (the study's).
pub const DEFAULT_FRAMES: u64 = 100;

/// The fewest frames a train may have past a bottleneck's burst: the bandwidth is the
/// line through the frames that arrive after it, and a line needs three.
pub const MIN_FRAMES_PAST_BURST: u64 = 3;

/// Trains of the first, short convoy that measures a bottleneck's buffer when its rate is
/// known but its buffer is not (`--shaper` or `--link` without `--buffer`).
pub const PROBE_TRAINS: u64 = 5;

/// Of what got through from each probe train's head, the share a train is made of: the rest
/// spares the sender's own speed varying from train to train (a slower train lets a little
/// more drain while it comes in, a faster one less).
pub const PROBE_SPARE: f64 = 0.9;

/// The train lengths of a train-length sweep unless told otherwise.
pub const DEFAULT_LENGTHS: [u64; 6] = [10, 20, 50, 100, 200, 500];

/// Which of the study's experiments to run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", tag = "kind", content = "values")]
pub enum Experiment {
    /// One convoy: latency, bandwidth and loss.
    Convoy,
    /// One convoy per frame size (FCS included).
    FrameSizes(Vec<u32>),
    /// One convoy per train length (frames per train).
    TrainLengths(Vec<u64>),
}

/// Which experiment a [`TrainsSpec`] asks for.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ExperimentKind {
    #[default]
    Convoy,
    Sizes,
    Lengths,
}

/// An experiment as a user writes it: the command line's options, the server's request
/// body (JSON, these names), with the same defaults and checks for both.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct TrainsSpec {
    pub experiment: ExperimentKind,
    /// Transmit and receive port locations (`lab:tx`, `afpacket:NETNS/IFACE`, …).
    pub port: String,
    pub rx: String,
    /// The UDP flow, SRC:PORT-DST:PORT.
    pub udp: String,
    pub src_mac: Option<String>,
    pub dst_mac: Option<String>,
    /// Frame size, FCS included (convoy and train-length sweep).
    pub size: u32,
    /// Frame sizes of a frame-size sweep (empty: [`DEFAULT_SIZES`]).
    pub sizes: Vec<u32>,
    /// Train lengths of a train-length sweep (empty: [`DEFAULT_LENGTHS`]).
    pub lengths: Vec<u64>,
    pub trains: u64,
    /// Frames per train (convoy and frame-size sweep). None: as many as the bottleneck's
    /// buffer holds, at most [`DEFAULT_FRAMES`].
    pub frames: Option<u64>,
    /// Between a train's last frame and the next one's first, e.g. `1ms`.
    pub gap: Option<String>,
    /// The bottleneck is a link of this line rate (layer 1), e.g. `10g`.
    pub link: Option<String>,
    /// The bottleneck is a shaper of this rate counting frames without FCS, e.g. `50mbit`.
    pub shaper: Option<String>,
    /// The shaper's buffer (queue limit plus bucket): bytes (`68750`, `64k`) or a time at
    /// its rate (`10ms`). Sets the default train length.
    pub buffer: Option<String>,
    pub baseline: bool,
}

impl Default for TrainsSpec {
    fn default() -> Self {
        TrainsSpec {
            experiment: ExperimentKind::Convoy,
            port: "lab:tx".into(),
            rx: "lab:rx".into(),
            udp: "198.18.0.1:1000-198.18.1.1:2000".into(),
            src_mac: None,
            dst_mac: None,
            size: 1518,
            sizes: Vec::new(),
            lengths: Vec::new(),
            trains: 100,
            frames: None,
            gap: None,
            link: None,
            shaper: None,
            buffer: None,
            baseline: false,
        }
    }
}

impl TrainsSpec {
    /// The request this spec makes, on the lab `lab_prefix` (for `lab:` ports).
    pub fn request(&self, lab_prefix: &str) -> Result<TrainsRequest, ControlError> {
        let bad = |what: &str, text: &str, e: String| {
            ControlError::BadInput(format!("{what} `{text}`: {e}"))
        };
        let rate = |what: &str, text: &str| {
            strobe_analyze::physics::parse_line_rate_bps(text)
                .map_err(|e| bad(what, text, e.to_string()))
        };
        let bottleneck = match (&self.link, &self.shaper) {
            (Some(_), Some(_)) => {
                return Err(ControlError::BadInput(
                    "give the bottleneck as a link or as a shaper, not both".into(),
                ))
            }
            (Some(link), None) => Some(Bottleneck {
                rate_bps: rate("link", link)?,
                counts: Counted::Wire,
                source: format!("a {link} link (counts frames on the wire)"),
                buffer_bytes: None,
                burst_bytes: None,
            }),
            (None, Some(shaper)) => {
                let rate_bps = rate("shaper", shaper)?;
                Some(Bottleneck {
                    rate_bps,
                    counts: Counted::WithoutFcs,
                    source: format!("a {shaper} shaper (counts frames without FCS)"),
                    buffer_bytes: self
                        .buffer
                        .as_deref()
                        .map(|b| buffer_bytes(b, rate_bps).map_err(|e| bad("buffer", b, e)))
                        .transpose()?,
                    burst_bytes: None,
                })
            }
            (None, None) => None,
        };
        if self.buffer.is_some() && self.shaper.is_none() {
            return Err(ControlError::BadInput(
                "--buffer is the shaper's: give its rate too (--shaper RATE)".into(),
            ));
        }
        let gap_ns = self
            .gap
            .as_deref()
            .map(|g| {
                strobe_timing::parse_duration_ns(g)
                    .ok()
                    .filter(|&ns| ns > 0)
                    .ok_or_else(|| bad("gap", g, "give a positive duration, e.g. 1ms".into()))
            })
            .transpose()?;
        let experiment = match self.experiment {
            ExperimentKind::Convoy => Experiment::Convoy,
            ExperimentKind::Sizes => {
                Experiment::FrameSizes(or_default(&self.sizes, &DEFAULT_SIZES))
            }
            ExperimentKind::Lengths => {
                Experiment::TrainLengths(or_default(&self.lengths, &DEFAULT_LENGTHS))
            }
        };
        let mut flow = spec_flow(&self.port, &self.rx, &self.src_mac, &self.dst_mac);
        flow.flow.udp = Some(self.udp.clone());
        Ok(TrainsRequest {
            flow,
            lab_prefix: lab_prefix.to_string(),
            experiment,
            frame_bytes: self.size,
            trains: self.trains,
            frames_per_train: self.frames,
            gap_ns,
            bottleneck,
            baseline: self.baseline,
        })
    }
}

/// A buffer as bytes (`68750`, `64k`, `1m`: powers of 1024) or as a time at `rate_bps`.
fn buffer_bytes(text: &str, rate_bps: f64) -> Result<u64, String> {
    let t = text.trim();
    let (digits, unit) = match t.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => t.split_at(i),
        None => (t, ""),
    };
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => Some(1),
        "k" | "kb" | "kib" => Some(1 << 10),
        "m" | "mb" | "mib" => Some(1 << 20),
        _ => None,
    };
    let bytes = match (digits.parse::<u64>(), scale) {
        (Ok(n), Some(scale)) => n.checked_mul(scale),
        _ => strobe_timing::parse_duration_ns(t)
            .ok()
            .map(|ns| (rate_bps / 8.0 * ns as f64 / 1e9).floor() as u64),
    };
    bytes.filter(|&b| b > 0).ok_or_else(|| {
        "give the shaper's buffer as bytes (68750, 64k) or as a time at its rate (10ms)".into()
    })
}

/// The values given, or the defaults when none are.
fn or_default<T: Copy>(given: &[T], default: &[T]) -> Vec<T> {
    if given.is_empty() { default } else { given }.to_vec()
}

/// An experiment as asked.
#[derive(Clone, Debug)]
pub struct TrainsRequest {
    /// The flow: ports, addresses, the receive port. Its size, rate and pattern are set by
    /// each step.
    pub flow: OneFlow,
    pub lab_prefix: String,
    pub experiment: Experiment,
    pub frame_bytes: u32,
    pub trains: u64,
    /// Frames per train as given; None: chosen to fit the bottleneck's buffer.
    pub frames_per_train: Option<u64>,
    /// Between a train's last frame and the next one's first; None: long enough for a
    /// train to pass the bottleneck twice, at least [`DEFAULT_GAP_NS`].
    pub gap_ns: Option<u64>,
    /// The path's bottleneck; None: the lab's tbf shaper when the flow goes through one.
    pub bottleneck: Option<Bottleneck>,
    /// Also run a constant-rate flow at the heads' rate and compare its latency.
    pub baseline: bool,
}

/// One convoy of an experiment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Step {
    pub frame_bytes: u32,
    pub trains: u64,
    pub frames_per_train: u64,
    pub gap_ns: u64,
}

impl Step {
    /// `1518 B × 100 frames`, for status lines and tables.
    pub fn label(&self) -> String {
        format!("{} B × {} frames", self.frame_bytes, self.frames_per_train)
    }
}

/// What the bottleneck predicts for a step's frames, in each layer.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Expected {
    pub l1_bps: f64,
    pub l2_bps: f64,
    pub l2_without_fcs_bps: f64,
}

impl Expected {
    fn of(b: &Bottleneck, frame_bytes: u32) -> Expected {
        Expected {
            l1_bps: b.expected_bps(frame_bytes, Counted::Wire),
            l2_bps: b.expected_bps(frame_bytes, Counted::WithFcs),
            l2_without_fcs_bps: b.expected_bps(frame_bytes, Counted::WithoutFcs),
        }
    }
}

/// A constant-rate flow's latency, at the heads' rate, for comparison with the heads'.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Baseline {
    pub rate_pps: f64,
    pub frames_tx: u64,
    pub frames_rx: u64,
    pub latency: Option<LatencyStats>,
}

/// One step's results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StepResult {
    pub step: Step,
    /// None when nothing came back to count trains by.
    pub convoy: Option<Convoy>,
    pub expected: Option<Expected>,
    /// Every frame's latency, as the naive method (timestamping every frame of a
    /// saturating train) reads it: the frames behind the head queued in the sender.
    pub every_frame_latency: Option<LatencyStats>,
    pub baseline: Option<Baseline>,
    /// Why the train has the length it has (the bottleneck's buffer, the default, or
    /// as given).
    #[serde(default)]
    pub train_length: String,
    /// The run's warnings and failures (a port that stopped, a missed rate, …).
    pub warnings: Vec<Warning>,
    pub failures: Vec<Warning>,
}

/// An experiment's results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TrainsReport {
    pub experiment: Experiment,
    pub bottleneck: Option<Bottleneck>,
    pub steps: Vec<StepResult>,
    /// Steps asked for; fewer ran when the experiment was stopped.
    pub steps_asked: usize,
    /// The first, short convoy that measured the bottleneck's buffer, when it ran.
    #[serde(default)]
    pub buffer_probe: Option<BufferProbe>,
    /// The lab's device under test the trains went through (its kind, software and
    /// version, cores); absent off a lab.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_under_test: Option<strobe_model::DeviceUnderTest>,
}

/// A first, short convoy of the flow's own frames, sent when the bottleneck's rate is known
/// but its buffer is not: trains of [`DEFAULT_FRAMES`] that overflow it lose their tails,
/// and what got through from each head is the buffer (RFC 9004's back-to-back frames).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BufferProbe {
    pub step: Step,
    pub frames_sent: u64,
    pub frames_lost: u64,
    /// The trains' lost tails; None when none overflowed (or nothing arrived).
    pub tail_loss: Option<TailLoss>,
    /// The buffer the steps' trains are made to fit, in the bytes the bottleneck counts:
    /// [`PROBE_SPARE`] of the frames that got through (median). None: no train overflowed.
    pub buffer_bytes: Option<u64>,
    /// What of it left at once (the median burst), in the bytes the bottleneck counts.
    pub burst_bytes: Option<u64>,
    /// What it found, in words.
    pub finding: String,
    pub warnings: Vec<Warning>,
    pub failures: Vec<Warning>,
}

impl BufferProbe {
    /// What `convoy`, sent as `step` through `bottleneck`, says of its buffer.
    fn of(step: Step, convoy: Option<&Convoy>, bottleneck: &Bottleneck) -> BufferProbe {
        let shape = probe_shape(&step);
        let each = bottleneck.counts.bytes(step.frame_bytes);
        let mut probe = BufferProbe {
            step,
            frames_sent: convoy.map_or(0, |c| c.frames_sent),
            frames_lost: convoy.map_or(0, |c| c.frames_lost),
            tail_loss: convoy.and_then(|c| c.tail_loss),
            buffer_bytes: None,
            burst_bytes: None,
            finding: String::new(),
            warnings: Vec::new(),
            failures: Vec::new(),
        };
        probe.finding = match (convoy, &probe.tail_loss) {
            (None, _) => format!("{shape}: nothing arrived to measure the buffer by"),
            (Some(_), Some(t)) => {
                let frames = (t.frames_through_median * PROBE_SPARE).floor();
                probe.buffer_bytes = Some((frames * each) as u64);
                probe.burst_bytes = t.burst_frames_median.map(|b| (b * each) as u64);
                format!(
                    "{shape}: {} of them lost their tails after {:.0} frames (median) got \
                     through, so the bottleneck's buffer holds about {:.0} bytes; trains are \
                     made to fit {:.0} frames' worth, a tenth spared",
                    t.trains,
                    t.frames_through_median,
                    t.frames_through_median * each,
                    frames
                )
            }
            (Some(c), None) if c.frames_lost == 0 => {
                format!("{shape}: no frame lost, the buffer holds at least a train")
            }
            (Some(c), None) => format!(
                "{shape}: {} of {} frames lost, but not trains' tails: the buffer holds at least \
                 a train, and the path loses frames of its own",
                c.frames_lost, c.frames_sent
            ),
        };
        probe
    }
}

/// A step as planned: why its trains have the length they have, and a warning when they
/// overflow the bottleneck's buffer.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedStep {
    pub step: Step,
    pub train_length: String,
    pub warning: Option<Warning>,
}

impl TrainsRequest {
    /// Checks the request and works out its steps and the bottleneck it is judged against.
    pub fn plan(&self) -> Result<(Vec<PlannedStep>, Option<Bottleneck>), ControlError> {
        self.plan_with(None)
    }

    /// The first, short convoy that measures the bottleneck's buffer, when the trains' length
    /// is left to strobe and the bottleneck has a known rate but no known buffer.
    pub fn probe_step(&self, bottleneck: Option<&Bottleneck>) -> Option<Step> {
        let b = bottleneck.filter(|b| b.buffer_bytes.is_none())?;
        let frame_bytes = match &self.experiment {
            _ if self.frames_per_train.is_some() => return None,
            Experiment::Convoy => self.frame_bytes,
            // The largest frames overflow the buffer soonest.
            Experiment::FrameSizes(sizes) => sizes.iter().copied().max()?,
            Experiment::TrainLengths(_) => return None,
        };
        let gap_ns = self.gap_ns.unwrap_or_else(|| {
            ((2.0 * b.train_ns(DEFAULT_FRAMES, frame_bytes)).ceil() as u64).max(DEFAULT_GAP_NS)
        });
        Some(Step {
            frame_bytes,
            trains: PROBE_TRAINS,
            frames_per_train: DEFAULT_FRAMES,
            gap_ns,
        })
    }

    /// [`plan`](Self::plan), with the buffer a first convoy measured.
    pub fn plan_with(
        &self,
        probe: Option<&BufferProbe>,
    ) -> Result<(Vec<PlannedStep>, Option<Bottleneck>), ControlError> {
        let bad = |m: String| Err(ControlError::BadInput(m));
        if self.trains == 0 || self.frames_per_train == Some(0) {
            return bad("a convoy needs at least one train of at least one frame".into());
        }
        if self.trains > strobe_engine::rx::MAX_TRACKED_TRAINS {
            return bad(format!(
                "{} trains: at most {} are counted train by train; run several convoys",
                self.trains,
                strobe_engine::rx::MAX_TRACKED_TRAINS
            ));
        }
        if self.flow.rx.is_none() {
            return bad(
                "a convoy is measured where it arrives: give the receive port (--rx PORT)".into(),
            );
        }
        let mut bottleneck = match &self.bottleneck {
            Some(b) => Some(b.clone()),
            None => lab_bottleneck(&self.lab_prefix, &self.flow.flow.port)?,
        };
        if let (Some(b), Some(p)) = (bottleneck.as_mut(), probe) {
            if b.buffer_bytes.is_none() {
                b.buffer_bytes = p.buffer_bytes;
                b.burst_bytes = p.burst_bytes;
            }
        }
        let shapes: Vec<(u32, Option<u64>)> = match &self.experiment {
            Experiment::Convoy => vec![(self.frame_bytes, self.frames_per_train)],
            Experiment::FrameSizes(sizes) => {
                sizes.iter().map(|&s| (s, self.frames_per_train)).collect()
            }
            Experiment::TrainLengths(lengths) => lengths
                .iter()
                .map(|&n| (self.frame_bytes, Some(n)))
                .collect(),
        };
        if shapes.is_empty() {
            return bad("the sweep has no step: give at least one value".into());
        }
        let mut steps = Vec::with_capacity(shapes.len());
        for (frame_bytes, given) in shapes {
            if !(64..=strobe_model::MAX_FRAME_SIZE).contains(&frame_bytes) {
                return bad(format!(
                    "frame size {frame_bytes}: give sizes from 64 to {} bytes, FCS included",
                    strobe_model::MAX_FRAME_SIZE
                ));
            }
            let (frames_per_train, train_length, warning) =
                train_length(bottleneck.as_ref(), probe, frame_bytes, given)?;
            if frames_per_train < 2 {
                return bad(format!(
                    "trains of {frames_per_train} frame: a train's bandwidth needs at least 2 \
                     frames"
                ));
            }
            let gap_ns = self.gap_ns.unwrap_or_else(|| {
                bottleneck.as_ref().map_or(DEFAULT_GAP_NS, |b| {
                    ((2.0 * b.train_ns(frames_per_train, frame_bytes)).ceil() as u64)
                        .max(DEFAULT_GAP_NS)
                })
            });
            steps.push(PlannedStep {
                step: Step {
                    frame_bytes,
                    trains: self.trains,
                    frames_per_train,
                    gap_ns,
                },
                train_length,
                warning,
            });
        }
        Ok((steps, bottleneck))
    }

    /// The request's flows, resolved into the model once per frame size as steps ask.
    pub(crate) fn flows(&self) -> TrainFlows<'_> {
        TrainFlows {
            request: self,
            sized: Vec::new(),
        }
    }
}

/// A request's flow resolved into the model once per frame size (its ports, addresses and
/// UDP flow parsed and checked there, with that size); each step sets its trains, and each
/// baseline its rate and length, on it as numbers.
pub(crate) struct TrainFlows<'a> {
    request: &'a TrainsRequest,
    sized: Vec<(u32, Scenario)>,
}

impl TrainFlows<'_> {
    /// The flow with frames of `frame_bytes`, resolved (its schedule a placeholder).
    fn resolved(&mut self, frame_bytes: u32) -> Result<&Scenario, ControlError> {
        let at = match self.sized.iter().position(|(b, _)| *b == frame_bytes) {
            Some(at) => at,
            None => {
                let mut flow = self.request.flow.clone();
                flow.flow.size = frame_bytes.to_string();
                let resolved = resolve_flow(&flow, &self.request.lab_prefix)?;
                self.sized.push((frame_bytes, resolved));
                self.sized.len() - 1
            }
        };
        Ok(&self.sized[at].1)
    }

    /// The train flow of `step`: its trains of frames back to back at the port's line rate,
    /// `gap_ns` apart.
    pub(crate) fn step(&mut self, step: &Step) -> Result<(Scenario, Pacing), ControlError> {
        let scenario = sending(
            self.resolved(step.frame_bytes)?,
            Rate::L1BitsPerSec(DEFAULT_PORT_SPEED_BPS as f64),
            Duration::Bursts {
                bursts: step.trains,
                packets: step.frames_per_train,
                inter_burst_gap_ns: step.gap_ns,
            },
        )?;
        Ok((scenario, Pacing::Scheduled))
    }

    /// The baseline of `step`: a constant-rate flow of the same frames at the heads' rate
    /// (one frame per train and gap), as many frames as there are trains; with that rate.
    pub(crate) fn baseline(
        &mut self,
        step: &Step,
    ) -> Result<(Scenario, Pacing, f64), ControlError> {
        let pps = 1e9 / step.gap_ns as f64;
        let scenario = sending(
            self.resolved(step.frame_bytes)?,
            Rate::Pps(pps),
            Duration::Packets(step.trains.max(2)),
        )?;
        // The model's own line-rate check, with what a convoy's user can change.
        for (flow, port) in scenario.flows.iter().zip(&scenario.ports) {
            if let Some(excess) = strobe_model::line_rate_excess(
                &flow.schedule,
                &flow.size,
                "the port",
                port.speed_bps,
            ) {
                return Err(ControlError::BadInput(format!(
                    "--baseline sends one frame per train gap of {}: {excess} — lengthen \
                     --gap, or leave --baseline out",
                    duration_text(step.gap_ns)
                )));
            }
        }
        Ok((scenario, Pacing::Scheduled, pps))
    }
}

/// Frames per train for frames of `frame_bytes` through `bottleneck`: as `given`, or as
/// many as its buffer holds (at most [`DEFAULT_FRAMES`]); with why, and a warning when a
/// given length overflows the buffer. Refused when the buffer holds too few frames to
/// measure past its burst.
fn train_length(
    bottleneck: Option<&Bottleneck>,
    probe: Option<&BufferProbe>,
    frame_bytes: u32,
    given: Option<u64>,
) -> Result<(u64, String, Option<Warning>), ControlError> {
    let fits = bottleneck.and_then(|b| Some((b, b.fits_frames(frame_bytes)?)));
    let measured = probe.filter(|p| p.buffer_bytes.is_some());
    let holds = |b: &Bottleneck, fits: u64| match measured {
        Some(p) => format!(
            "the bottleneck's buffer as {} measured it, less a tenth ({} bytes), holds {fits} \
             frames of {frame_bytes} B",
            probe_shape(&p.step),
            b.buffer_bytes.unwrap_or(0)
        ),
        None => format!(
            "{}'s buffer of {} bytes holds {fits} frames of {frame_bytes} B",
            b.source,
            b.buffer_bytes.unwrap_or(0)
        ),
    };
    match (given, fits) {
        (Some(n), Some((b, fits))) if n > fits => Ok((
            n,
            format!("{n} frames, as given"),
            Some(Warning::TrainsOverflowBuffer {
                frames: n,
                fitting_frames: fits,
                buffer: holds(b, fits),
            }),
        )),
        (Some(n), _) => Ok((n, format!("{n} frames, as given"), None)),
        (None, Some((b, fits))) => {
            let burst = b.burst_frames(frame_bytes).unwrap_or(0);
            let fewest = burst + MIN_FRAMES_PAST_BURST;
            if fits < fewest {
                return Err(ControlError::BadInput(format!(
                    "{}: a train needs at least {fewest} ({burst} leave at once, then \
                     {MIN_FRAMES_PAST_BURST} to measure the rate by); use smaller frames \
                     (--size) or a larger buffer, or give --frames to run overflowing trains",
                    holds(b, fits)
                )));
            }
            let n = fits.min(DEFAULT_FRAMES);
            let why = if n < DEFAULT_FRAMES {
                format!("{n} frames, chosen to fit: {}", holds(b, fits))
            } else {
                format!("{n} frames (the default), which fit: {}", holds(b, fits))
            };
            Ok((n, why, None))
        }
        (None, None) => Ok((
            DEFAULT_FRAMES,
            match probe {
                Some(p) => format!("{DEFAULT_FRAMES} frames (the default): {}", p.finding),
                None => format!(
                    "{DEFAULT_FRAMES} frames (the default): the bottleneck's buffer is unknown \
                     (give --buffer with --shaper); overflowing trains are reported as tail loss"
                ),
            },
            None,
        )),
    }
}

/// `a first convoy of 5 trains of 1518 B × 100 frames`.
fn probe_shape(step: &Step) -> String {
    format!(
        "a first convoy of {} trains of {}",
        step.trains,
        step.label()
    )
}

/// What a convoy's tail loss means, for its warnings.
fn tail_loss_warning(t: &TailLoss, trains: usize, frame_bytes: u32) -> Warning {
    Warning::TailLoss {
        trains_lost: t.trains,
        trains,
        frames_lost: t.frames_lost,
        through_median: t.frames_through_median,
        through_fewest: t.frames_through_min,
        buffer_bytes: t.buffer_bytes,
        frame_bytes,
        burst_median: t.burst_frames_median,
        fitting_frames: t.fits_frames,
    }
}

/// The bottleneck of a flow sent from a `lab:` port through the lab's tbf shaper.
fn lab_bottleneck(prefix: &str, port: &str) -> Result<Option<Bottleneck>, ControlError> {
    if !port.starts_with("lab:") {
        return Ok(None);
    }
    Ok(match strobe_lab::status(prefix)?.map(|lab| lab.dut) {
        Some(dut @ strobe_lab::Dut::Tbf { rate_bps }) => Some(Bottleneck {
            rate_bps: rate_bps as f64,
            counts: Counted::WithoutFcs,
            source: format!(
                "the lab's tbf shaper at {} (Linux shapers count frames without FCS)",
                bps_text(rate_bps as f64)
            ),
            buffer_bytes: dut.tbf().map(|t| t.limit_bytes()),
            burst_bytes: dut.tbf().map(|t| t.burst_bytes),
        }),
        _ => None,
    })
}

/// Runs `request`'s steps one after the other through `runner` (which prepares and runs a
/// scenario as the front end does, with the step's label for its status), until all ran or
/// `stop` is set.
pub fn run_experiment<E: From<ControlError>>(
    request: &TrainsRequest,
    stop: &AtomicBool,
    mut runner: impl FnMut(&str, Scenario, Pacing) -> Result<(Scenario, RunReport), E>,
) -> Result<TrainsReport, E> {
    let mut device_under_test = None;
    let mut report = run_steps(request, stop, |label, scenario, pacing| {
        let ran = runner(label, scenario, pacing);
        if let (None, Ok((_, run))) = (&device_under_test, &ran) {
            device_under_test = run.device_under_test.clone();
        }
        ran
    })?;
    report.device_under_test = device_under_test;
    Ok(report)
}

/// [`run_experiment`]'s steps, the buffer's probe first when it runs.
fn run_steps<E: From<ControlError>>(
    request: &TrainsRequest,
    stop: &AtomicBool,
    mut runner: impl FnMut(&str, Scenario, Pacing) -> Result<(Scenario, RunReport), E>,
) -> Result<TrainsReport, E> {
    let (mut steps, mut bottleneck) = request.plan()?;
    let mut flows = request.flows();
    let mut buffer_probe = None;
    if let Some((step, b)) = request
        .probe_step(bottleneck.as_ref())
        .zip(bottleneck.clone())
    {
        if stop.load(Ordering::Relaxed) {
            return Ok(TrainsReport {
                experiment: request.experiment.clone(),
                bottleneck,
                steps: Vec::new(),
                steps_asked: steps.len(),
                buffer_probe: None,
                device_under_test: None,
            });
        }
        let (scenario, pacing) = flows.step(&step)?;
        let label = format!("measuring the buffer: {}", probe_shape(&step));
        let (scenario, run) = runner(&label, scenario, pacing)?;
        let results = Results::new(&scenario, &run, None);
        let convoy = results.flows.first().and_then(|f| f.convoy.as_ref());
        let mut probe = BufferProbe::of(step, convoy, &b);
        probe.warnings = results.warnings.clone();
        probe.failures = results.failures.clone();
        (steps, bottleneck) = request.plan_with(Some(&probe))?;
        buffer_probe = Some(probe);
    }
    let mut report = TrainsReport {
        experiment: request.experiment.clone(),
        bottleneck: bottleneck.clone(),
        steps: Vec::with_capacity(steps.len()),
        steps_asked: steps.len(),
        buffer_probe,
        device_under_test: None,
    };
    for PlannedStep {
        step,
        train_length,
        warning,
    } in steps
    {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let (scenario, pacing) = flows.step(&step)?;
        let label = format!(
            "{}, {} trains {} apart",
            step.label(),
            step.trains,
            duration_text(step.gap_ns)
        );
        let (scenario, run) = runner(&label, scenario, pacing)?;
        let results = Results::new(&scenario, &run, None);
        let flow = results.flows.first();
        let convoy = flow.and_then(|f| f.convoy.clone());
        let mut warnings: Vec<Warning> = warning.into_iter().collect();
        if let Some(t) = convoy
            .as_ref()
            .and_then(|c| c.tail_loss.as_ref().map(|t| (c, t)))
        {
            warnings.push(tail_loss_warning(t.1, t.0.trains.len(), step.frame_bytes));
        }
        warnings.extend(results.warnings.iter().cloned());
        let mut result = StepResult {
            step,
            convoy,
            expected: bottleneck
                .as_ref()
                .map(|b| Expected::of(b, step.frame_bytes)),
            every_frame_latency: flow.and_then(|f| f.latency.as_ref()).map(|l| l.raw),
            baseline: None,
            train_length,
            warnings,
            failures: results.failures.clone(),
        };
        if request.baseline && !stop.load(Ordering::Relaxed) {
            let (scenario, pacing, rate_pps) = flows.baseline(&step)?;
            let label = format!("baseline: {} at {rate_pps:.0} pps", step.frame_bytes);
            let (scenario, run) = runner(&label, scenario, pacing)?;
            let base = Results::new(&scenario, &run, None);
            if let Some(f) = base.flows.first() {
                result.baseline = Some(Baseline {
                    rate_pps,
                    frames_tx: f.frames_tx.unwrap_or(0),
                    frames_rx: f.frames_rx_unique.unwrap_or(0),
                    latency: f.latency.as_ref().map(|l| l.raw),
                });
            }
            result
                .warnings
                .extend(base.warnings.iter().cloned().map(Warning::of_baseline));
            result
                .failures
                .extend(base.failures.iter().cloned().map(Warning::of_baseline));
        }
        report.steps.push(result);
    }
    Ok(report)
}

impl TrainsReport {
    /// Every step's trains as CSV, one row per train, the step's shape in front.
    pub fn trains_csv(&self) -> String {
        let header: Vec<&str> = ["frame_bytes", "frames_per_train", "gap_ns"]
            .into_iter()
            .chain(TRAIN_CSV_HEADER.split(','))
            .collect();
        let rows = self.steps.iter().flat_map(|s| {
            s.convoy.iter().flat_map(|c| &c.trains).map(|t| {
                [
                    s.step.frame_bytes.to_string(),
                    s.step.frames_per_train.to_string(),
                    s.step.gap_ns.to_string(),
                ]
                .into_iter()
                .chain(train_csv_cells(t))
            })
        });
        csv_text(&header, rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strobe_model::quick;

    fn request(experiment: Experiment) -> TrainsRequest {
        TrainsRequest {
            flow: OneFlow {
                flow: quick::QuickArgs {
                    port: "null".into(),
                    udp: Some("198.18.0.1:1000-198.18.1.1:2000".into()),
                    ..Default::default()
                },
                rx: Some("null".into()),
            },
            lab_prefix: "strobe".into(),
            experiment,
            frame_bytes: 1000,
            trains: 20,
            frames_per_train: Some(60),
            gap_ns: None,
            bottleneck: Some(Bottleneck {
                rate_bps: 50e6,
                counts: Counted::WithoutFcs,
                source: "a shaper".into(),
                buffer_bytes: None,
                burst_bytes: None,
            }),
            baseline: false,
        }
    }

    #[test]
    fn the_gap_lets_a_train_pass_the_bottleneck_twice() {
        let (steps, b) = request(Experiment::Convoy).plan().unwrap();
        assert!(b.is_some());
        // 60 × 996 bytes at 50 Mbit/s pass in 9.5616 ms.
        assert_eq!(steps[0].step.gap_ns, 19_123_200);
        let mut r = request(Experiment::FrameSizes(vec![64, 1518]));
        r.bottleneck = None;
        let (steps, _) = r.plan().unwrap();
        assert_eq!(
            steps
                .iter()
                .map(|s| (s.step.frame_bytes, s.step.gap_ns))
                .collect::<Vec<_>>(),
            [(64, DEFAULT_GAP_NS), (1518, DEFAULT_GAP_NS)]
        );
    }

    #[test]
    fn a_step_is_a_train_flow_and_its_baseline_one_frame_per_gap() {
        let mut r = request(Experiment::TrainLengths(vec![10, 50]));
        r.gap_ns = Some(2_000_000);
        let (steps, _) = r.plan().unwrap();
        let steps: Vec<Step> = steps.into_iter().map(|s| s.step).collect();
        assert_eq!(steps[1].frames_per_train, 50);
        let mut flows = r.flows();
        let (scenario, pacing) = flows.step(&steps[1]).unwrap();
        assert_eq!(pacing, Pacing::Scheduled);
        match scenario.flows[0].schedule.duration {
            strobe_timing::Duration::Bursts {
                bursts,
                packets,
                inter_burst_gap_ns,
            } => assert_eq!((bursts, packets, inter_burst_gap_ns), (20, 50, 2_000_000)),
            ref other => panic!("{other:?}"),
        }
        assert_eq!(scenario.flows[0].rx_ports, ["rx"]);
        let (scenario, _, pps) = flows.baseline(&steps[1]).unwrap();
        assert_eq!(pps, 500.0);
        assert_eq!(
            scenario.flows[0].schedule.duration,
            strobe_timing::Duration::Packets(20)
        );
    }

    /// Each step sets its trains, and each baseline its rate and length, on the flow resolved
    /// once per frame size; the scenario is the one the command-line text
    /// (`--size N --pattern train:TxF/Gns`, `--size N --pattern cbr --rate PPS --count N`)
    /// made before, and so is the error of a baseline faster than the port.
    #[test]
    fn steps_set_trains_and_rates_on_the_typed_flow_as_the_text_did() {
        let by_text = |r: &TrainsRequest, step: &Step, baseline: bool| {
            let mut flow = r.flow.clone();
            flow.flow.size = step.frame_bytes.to_string();
            flow.flow.duration = None;
            if baseline {
                flow.flow.pattern = "cbr".into();
                flow.flow.rate = format!("{:.3}", 1e9 / step.gap_ns as f64);
                flow.flow.count = Some(step.trains.max(2));
            } else {
                flow.flow.pattern = format!(
                    "train:{}x{}/{}ns",
                    step.trains, step.frames_per_train, step.gap_ns
                );
                flow.flow.count = None;
            }
            flow.scenario(&r.lab_prefix, false)
                .map(|(scenario, pacing)| (format!("{scenario:?}"), pacing))
                .map_err(|e| e.to_string())
        };
        let mut r = request(Experiment::FrameSizes(vec![64, 1518, 512]));
        r.gap_ns = Some(1_600_000);
        let (steps, _) = r.plan().unwrap();
        let mut flows = r.flows();
        for PlannedStep { step, .. } in &steps {
            let (scenario, pacing) = flows.step(step).unwrap();
            assert_eq!(
                Ok((format!("{scenario:?}"), pacing)),
                by_text(&r, step, false),
                "{step:?}"
            );
            let (scenario, pacing, pps) = flows.baseline(step).unwrap();
            assert_eq!(pps, 625.0);
            assert_eq!(
                Ok((format!("{scenario:?}"), pacing)),
                by_text(&r, step, true),
                "{step:?}"
            );
        }
        // Resolved once per size, however many steps send it.
        assert_eq!(flows.sized.len(), 3);
        // The 64-byte frames carry the trailer too, and each size its own frames.
        assert_eq!(
            flows
                .sized
                .iter()
                .map(|(b, s)| (*b, s.flows[0].size.mean(), s.flows[0].metrics.instrument))
                .collect::<Vec<_>>(),
            [(64, 64.0, true), (1518, 1518.0, true), (512, 512.0, true)]
        );
        // Baselines faster than the port: refused as the text was, whatever the
        // suggested port.
        for (frame_bytes, gap_ns) in [(1518, 1_000), (64, 10), (64, 1), (1518, 1)] {
            let step = Step {
                frame_bytes,
                trains: 5,
                frames_per_train: 10,
                gap_ns,
            };
            let typed = flows.baseline(&step).map(|_| ()).map_err(|e| e.to_string());
            let text = by_text(&r, &step, true).map(|_| ());
            assert!(text.is_err(), "{frame_bytes} B every {gap_ns} ns");
            let why = typed.unwrap_err();
            assert!(
                why.starts_with("--baseline sends one frame per train gap")
                    && why.contains("above the port's line rate of 10 Gbit/s")
                    && why.ends_with("lengthen --gap, or leave --baseline out"),
                "{why}"
            );
        }
    }

    #[test]
    fn a_spec_reads_as_json_with_defaults_and_names_what_is_wrong() {
        let spec: TrainsSpec = serde_json::from_str(
            r#"{"experiment": "lengths", "lengths": [5, 9], "shaper": "50mbit"}"#,
        )
        .unwrap();
        let r = spec.request("lab").unwrap();
        assert_eq!(r.experiment, Experiment::TrainLengths(vec![5, 9]));
        assert_eq!((r.frame_bytes, r.trains), (1518, 100));
        assert_eq!(r.flow.flow.port, "lab:tx");
        let b = r.bottleneck.unwrap();
        assert_eq!((b.rate_bps, b.counts), (50e6, Counted::WithoutFcs));
        let sizes: TrainsSpec = serde_json::from_str(r#"{"experiment": "sizes"}"#).unwrap();
        assert_eq!(
            sizes.request("lab").unwrap().experiment,
            Experiment::FrameSizes(DEFAULT_SIZES.to_vec())
        );
        assert!(serde_json::from_str::<TrainsSpec>(r#"{"trainz": 5}"#).is_err());
        let wrong = TrainsSpec {
            link: Some("fast".into()),
            ..TrainsSpec::default()
        };
        assert!(wrong
            .request("lab")
            .unwrap_err()
            .to_string()
            .contains("link `fast`"));
        let both = TrainsSpec {
            link: Some("10g".into()),
            shaper: Some("1g".into()),
            ..TrainsSpec::default()
        };
        assert!(both
            .request("lab")
            .unwrap_err()
            .to_string()
            .contains("not both"));
    }

    #[test]
    fn trains_fit_the_bottlenecks_buffer_unless_told_otherwise() {
        // The lab's tbf at 50 Mbit/s: a queue of 68 750 bytes, a bucket of 6250.
        let tbf = |rate_bps: f64, buffer: u64, burst: u64| Bottleneck {
            rate_bps,
            counts: Counted::WithoutFcs,
            source: "the tbf".into(),
            buffer_bytes: Some(buffer),
            burst_bytes: Some(burst),
        };
        let mut r = request(Experiment::Convoy);
        r.frame_bytes = 1518;
        r.frames_per_train = None;
        r.bottleneck = Some(tbf(50e6, 68_750, 6_250));
        let (steps, _) = r.plan().unwrap();
        assert_eq!(steps[0].step.frames_per_train, 45);
        assert!(
            steps[0].train_length.contains("chosen to fit"),
            "{:?}",
            steps[0]
        );
        assert_eq!(steps[0].warning, None);
        // A deep buffer: the default 100.
        r.bottleneck = Some(tbf(200e6, 275_000, 25_000));
        let (steps, _) = r.plan().unwrap();
        assert_eq!(steps[0].step.frames_per_train, 100);
        assert!(steps[0].train_length.contains("the default"));
        // Given: kept, with a warning that names the length that fits.
        r.bottleneck = Some(tbf(50e6, 68_750, 6_250));
        r.frames_per_train = Some(100);
        let (steps, _) = r.plan().unwrap();
        assert_eq!(steps[0].step.frames_per_train, 100);
        let warning = steps[0].warning.clone().unwrap().to_string();
        assert!(warning.contains("--frames 45 or fewer"), "{warning}");
        // A frame-size sweep fits each size on its own.
        r.frames_per_train = None;
        r.experiment = Experiment::FrameSizes(vec![64, 1518]);
        let (steps, _) = r.plan().unwrap();
        assert_eq!(
            steps
                .iter()
                .map(|s| s.step.frames_per_train)
                .collect::<Vec<_>>(),
            [100, 45]
        );
        // A buffer too small for a line past the bucket: refused, saying what to change.
        r.experiment = Experiment::Convoy;
        r.bottleneck = Some(tbf(8_000.0, 3_038, 3_028));
        let err = r.plan().unwrap_err().to_string();
        assert!(err.contains("--size") && err.contains("--frames"), "{err}");
        // Unknown buffer: the default, saying how to give it.
        r.bottleneck = None;
        let (steps, _) = r.plan().unwrap();
        assert_eq!(steps[0].step.frames_per_train, 100);
        assert!(steps[0].train_length.contains("--buffer"));
    }

    #[test]
    fn an_unknown_buffer_is_measured_by_a_first_short_convoy_and_trains_fit_it() {
        use strobe_analyze::trains::TrainArrival;
        let mut r = request(Experiment::Convoy);
        r.frame_bytes = 1518;
        r.frames_per_train = None;
        let shaper = r.bottleneck.clone();
        // A shaper's rate without its buffer: 5 trains of 100 frames, twice their passage
        // apart.
        let step = r.probe_step(shaper.as_ref()).unwrap();
        assert_eq!((step.trains, step.frames_per_train), (5, 100));
        assert_eq!(step.gap_ns, 48_448_000);
        // Not when the length is given, the buffer known, or no rate to judge against.
        r.frames_per_train = Some(45);
        assert_eq!(r.probe_step(shaper.as_ref()), None);
        r.frames_per_train = None;
        let known = Bottleneck {
            buffer_bytes: Some(68_750),
            ..shaper.clone().unwrap()
        };
        assert_eq!(r.probe_step(Some(&known)), None);
        assert_eq!(r.probe_step(None), None);
        let mut lengths = request(Experiment::TrainLengths(vec![10, 20]));
        lengths.frames_per_train = None;
        assert_eq!(lengths.probe_step(shaper.as_ref()), None);
        // A sweep probes with its largest frames, which overflow soonest.
        let mut sizes = request(Experiment::FrameSizes(vec![64, 1518, 512]));
        sizes.frames_per_train = None;
        assert_eq!(sizes.probe_step(shaper.as_ref()).unwrap().frame_bytes, 1518);

        // Each probe train got 50 frames through from its head, then lost the rest.
        let overflowed = TrainArrival {
            frames_sent: 100,
            frames_rx: 50,
            head_run: 50,
            first_rx_ns: Some(1_000),
            last_rx_ns: Some(12_000_000),
            frame_bytes: 1518,
            ..Default::default()
        };
        let convoy = Convoy::of(&[overflowed; 5]);
        let probe = BufferProbe::of(step, Some(&convoy), shaper.as_ref().unwrap());
        // A tenth spared: 45 frames' worth, in the bytes the shaper counts.
        assert_eq!(probe.buffer_bytes, Some(45 * 1514));
        assert!(probe.finding.contains("50 frames"), "{}", probe.finding);
        let (steps, b) = r.plan_with(Some(&probe)).unwrap();
        assert_eq!(steps[0].step.frames_per_train, 45);
        assert!(
            steps[0]
                .train_length
                .contains("as a first convoy of 5 trains"),
            "{}",
            steps[0].train_length
        );
        assert_eq!(b.unwrap().buffer_bytes, Some(45 * 1514));
        // Other sizes of a sweep fit the same bytes.
        sizes.frames_per_train = None;
        let (steps, _) = sizes.plan_with(Some(&probe)).unwrap();
        let lengths: Vec<u64> = steps.iter().map(|s| s.step.frames_per_train).collect();
        assert_eq!(lengths, [100, 45, 100]);

        // Nothing lost: the default length, saying the probe found the buffer deep enough.
        let whole = TrainArrival {
            frames_rx: 100,
            head_run: 100,
            ..overflowed
        };
        let probe = BufferProbe::of(step, Some(&Convoy::of(&[whole; 5])), &known);
        assert_eq!(probe.buffer_bytes, None);
        let (steps, _) = r.plan_with(Some(&probe)).unwrap();
        assert_eq!(steps[0].step.frames_per_train, 100);
        assert!(
            steps[0].train_length.contains("no frame lost"),
            "{}",
            steps[0].train_length
        );
    }

    #[test]
    fn a_shapers_buffer_is_bytes_or_a_time_at_its_rate() {
        let spec = |buffer: &str| TrainsSpec {
            shaper: Some("50mbit".into()),
            buffer: Some(buffer.into()),
            ..TrainsSpec::default()
        };
        let bytes = |buffer: &str| {
            spec(buffer)
                .request("lab")
                .unwrap()
                .bottleneck
                .unwrap()
                .buffer_bytes
        };
        assert_eq!(bytes("68750"), Some(68_750));
        assert_eq!(bytes("64k"), Some(65_536));
        assert_eq!(bytes("10ms"), Some(62_500));
        let err = spec("lots").request("lab").unwrap_err().to_string();
        assert!(
            err.contains("buffer `lots`") && err.contains("10ms"),
            "{err}"
        );
        let alone = TrainsSpec {
            buffer: Some("10ms".into()),
            ..TrainsSpec::default()
        };
        assert!(alone
            .request("lab")
            .unwrap_err()
            .to_string()
            .contains("--shaper"));
    }

    #[test]
    fn bad_requests_say_what_to_change() {
        let mut r = request(Experiment::FrameSizes(vec![32]));
        let err = r.plan().unwrap_err().to_string();
        assert!(err.contains("from 64 to"), "{err}");
        r.experiment = Experiment::TrainLengths(vec![1]);
        let err = r.plan().unwrap_err().to_string();
        assert!(err.contains("at least 2"), "{err}");
        r.experiment = Experiment::TrainLengths(vec![]);
        assert!(r.plan().unwrap_err().to_string().contains("no step"));
        r.experiment = Experiment::Convoy;
        r.flow.rx = None;
        assert!(r.plan().unwrap_err().to_string().contains("--rx"));
    }
}
