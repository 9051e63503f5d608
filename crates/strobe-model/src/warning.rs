//! What a user should be told about a config, a run or a test: one type for every warning
//! and failure strobe reports, with the figures it was judged by.
//!
//! A [`Warning`] keeps its facts as fields (which flow or port, the counts and times), so
//! `--json`, the history and the server hand them on structured; its `Display` renders them
//! into the words a front end shows. In JSON each is an object with its `kind`, its fields
//! and `text` (the words), so a reader that only shows it needs no copy of the wording.
//! Lives in the model, the lowest layer that warns, so that every layer above speaks it.

use crate::text::{bps_text, duration_text, pps_text};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// One thing a user should be told, with its figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", tag = "kind", rename_all = "snake_case")]
pub enum Warning {
    // -- the config, as read ------------------------------------------------------------
    /// A flow's destination MAC is all zero: a switch or router will drop its frames.
    ZeroDestinationMac {
        /// Where the MAC was given (a flag or a scenario path).
        field: String,
        /// It was left unset rather than written as zero.
        unset: bool,
    },
    /// The instrumentation trailer does not fit the flow's smallest frames, so it is off.
    TrailerDoesNotFit {
        flow: String,
        trailer_bytes: usize,
        smallest_frame_bytes: u64,
        header_bytes: u64,
        fitting_frame_bytes: u64,
    },
    /// A scenario's inter-frame gap is not used: flows are spaced by rate and pattern.
    GapNotUsed {
        flow: String,
        path: String,
        gap_bytes: u64,
    },
    /// An OTG flow asks for loss, timestamps or latency with its metrics off.
    MetricsOff { path: String },
    /// An OTG layer-1 setting strobe does not apply (it sets the speed only).
    Layer1SettingIgnored { path: String, key: String },

    // -- the run, as planned --------------------------------------------------------------
    /// More trains than strobe follows one by one.
    TrainsNotFollowed {
        flow: String,
        trains: u64,
        followed: u64,
    },
    /// More workers than usable cores: they will share, and paced timing suffers.
    CoresOversubscribed {
        tx_workers: usize,
        rx_workers: usize,
        cores: usize,
        cores_to_ask: usize,
    },
    /// Convoy trains given longer than the bottleneck's buffer holds.
    TrainsOverflowBuffer {
        frames: u64,
        fitting_frames: u64,
        /// What holds how many frames, in words (the buffer and where it was learned).
        buffer: String,
    },

    // -- the run, while it goes -----------------------------------------------------------
    /// A paced port keeps falling behind its schedule.
    FallingBehind {
        port: String,
        behind_ns: u64,
        elapsed_ns: u64,
        /// Share of the time lost over the windows it fell behind in (0 … 1).
        lost_share: f64,
        over_ns: u64,
        asked_pps: Option<f64>,
        /// What the floor known before the run let it pace up to.
        ceiling_pps: Option<f64>,
    },
    /// A receive port stopped during the run; its transmitters were stopped too.
    ReceiverStoppedEarly { port: String, error: String },

    // -- the run's results ----------------------------------------------------------------
    /// A paced port sent slower than asked.
    RateShortfall {
        port: String,
        frames: u64,
        sent_pps: f64,
        asked_pps: f64,
        elapsed_ns: u64,
        planned_ns: u64,
        late_frames: u64,
        max_late_ns: u64,
        /// The path's floor as the run's own hand-overs measured it.
        floor: Option<MeasuredFloor>,
    },
    /// The driver refused frames after the hand-over (a full transmit ring).
    TransmitRefused {
        port: String,
        refused: u64,
        frames: u64,
    },
    /// The receiving interface dropped frames before any socket saw them.
    InterfaceDrops { port: String, dropped: u64 },
    /// With transmit stamps from AF_XDP TX metadata: frames whose stamp did not reach the
    /// receive port in time, left out of latency.
    TransmitStampsMissing {
        port: String,
        missing: u64,
        stamped: u64,
    },
    /// Paced frames were late on a lab whose receive steering is on.
    LateOnSteeringLab {
        port: String,
        late_frames: u64,
        late_share: f64,
        lab_prefix: String,
        dut: String,
    },
    /// Flows lost every frame they sent.
    TotalLoss {
        /// The flows that lost everything (all of them when as many as `flows`).
        lost_flows: Vec<String>,
        flows: usize,
        frames_sent: u64,
    },
    /// More unique frames arrived than were sent: frames with the run's tag came from
    /// elsewhere.
    ExcessFrames { flow: String, excess: u64 },
    /// Frames arrived before they were sent by their stamps: the clocks disagree.
    ClocksDisagree { flow: String, frames: u64 },
    /// An RFC 2544 trial received more unique frames than it sent.
    SuspectTrial,
    /// A convoy's trains lost their tails in the bottleneck's buffer.
    TailLoss {
        trains_lost: usize,
        trains: usize,
        frames_lost: u64,
        through_median: f64,
        through_fewest: u32,
        buffer_bytes: u64,
        frame_bytes: u32,
        burst_median: Option<f64>,
        fitting_frames: u32,
    },
    /// Said of a convoy step's baseline run.
    Baseline { of: Box<Warning> },

    // -- failures: results incomplete ---------------------------------------------------------
    /// The run failed as a whole: no results.
    RunFailed { error: String },
    /// A transmit port an error stopped before its end.
    PortStopped { port: String, error: String },
    /// A receive port an error stopped before the run's end.
    ReceivePortStopped { port: String, error: String },

    // -- Y.1564 criteria that failed ------------------------------------------------------
    /// The information rate below what it is judged against.
    RateBelow {
        ir_bps: f64,
        /// What it is judged against, in words (`the CIR`, `the offered`, …).
        against: String,
        want_bps: f64,
    },
    /// The frame loss ratio above the limit (ratios, not percent).
    LossAbove { flr: f64, max_flr: f64 },
    /// The mean frame transfer delay above the limit.
    DelayAbove { ftd_ns: u64, max_ns: u64 },
    /// No frame arrived, so no delay was measured.
    NoDelayMeasured,
    /// The frame delay variation above the limit.
    DelayVariationAbove { fdv_ns: u64, max_ns: u64 },
    /// More than CIR + EIR got through: the DUT does not police.
    NotPoliced { ir_bps: f64, most_bps: f64 },

    /// Words recorded without a kind: a run stored before warnings were typed.
    Recorded { text: String },
}

/// A path's floor as a run's own hand-overs measured it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct MeasuredFloor {
    pub handover_ns: u64,
    pub spacing_ns: u64,
    pub ceiling_pps: f64,
}

impl Warning {
    /// The flow it is about, when one.
    pub fn flow(&self) -> Option<&str> {
        match self {
            Warning::TrailerDoesNotFit { flow, .. }
            | Warning::GapNotUsed { flow, .. }
            | Warning::TrainsNotFollowed { flow, .. }
            | Warning::ExcessFrames { flow, .. }
            | Warning::ClocksDisagree { flow, .. } => Some(flow),
            Warning::Baseline { of } => of.flow(),
            _ => None,
        }
    }

    /// The port it is about, when one.
    pub fn port(&self) -> Option<&str> {
        match self {
            Warning::FallingBehind { port, .. }
            | Warning::ReceiverStoppedEarly { port, .. }
            | Warning::RateShortfall { port, .. }
            | Warning::TransmitRefused { port, .. }
            | Warning::InterfaceDrops { port, .. }
            | Warning::TransmitStampsMissing { port, .. }
            | Warning::LateOnSteeringLab { port, .. }
            | Warning::PortStopped { port, .. }
            | Warning::ReceivePortStopped { port, .. } => Some(port),
            Warning::Baseline { of } => of.port(),
            _ => None,
        }
    }

    /// The warning as said of a baseline run.
    pub fn of_baseline(self) -> Warning {
        Warning::Baseline { of: Box::new(self) }
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::ZeroDestinationMac { field, unset } => write!(
                f,
                "{field}: the destination MAC is 00:00:00:00:00:00{}: a switch or router in \
                 the path will most likely drop these frames — set it to the next hop's MAC",
                if *unset { " (left unset)" } else { "" }
            ),
            Warning::TrailerDoesNotFit {
                flow,
                trailer_bytes,
                smallest_frame_bytes,
                header_bytes,
                fitting_frame_bytes,
            } => write!(
                f,
                "flow `{flow}`: the {trailer_bytes}-byte instrumentation trailer does not fit \
                 in its smallest frames ({smallest_frame_bytes} bytes behind {header_bytes} \
                 bytes of headers), so it is off and loss, latency and timestamps are not \
                 measured; frame sizes of at least {fitting_frame_bytes} would fit it"
            ),
            Warning::GapNotUsed {
                flow,
                path,
                gap_bytes,
            } => write!(
                f,
                "flow `{flow}`: {path}.gap = {gap_bytes} bytes is not used — strobe spaces \
                 packets by the flow's rate and timing pattern"
            ),
            Warning::MetricsOff { path } => write!(
                f,
                "{path}.metrics: loss, timestamps or latency asked for while metrics.enable is \
                 false — nothing is measured for this flow (set metrics.enable too)"
            ),
            Warning::Layer1SettingIgnored { path, key } => write!(
                f,
                "{path}.{key} is not applied: strobe sets only the port speed (the interface \
                 keeps its own MTU, media and flow control)"
            ),
            Warning::TrainsNotFollowed {
                flow,
                trains,
                followed,
            } => write!(
                f,
                "flow `{flow}`: {trains} trains are more than strobe follows train by train \
                 ({followed}); the flow's totals and latency are still measured"
            ),
            Warning::CoresOversubscribed {
                tx_workers,
                rx_workers,
                cores,
                cores_to_ask,
            } => write!(
                f,
                "{tx_workers} transmit and {rx_workers} receive workers on {cores} usable \
                 cores: workers will share cores and paced timing will suffer; use --cores \
                 {cores_to_ask} or fewer (or `cores` per port)"
            ),
            Warning::TrainsOverflowBuffer {
                frames,
                fitting_frames,
                buffer,
            } => write!(
                f,
                "trains of {frames} frames overflow the bottleneck: {buffer}; expect the tails \
                 of the trains lost (run with --frames {fitting_frames} or fewer, or leave \
                 --frames out)"
            ),
            Warning::FallingBehind {
                port,
                behind_ns,
                elapsed_ns,
                lost_share,
                over_ns,
                asked_pps,
                ceiling_pps,
            } => {
                let sends = match asked_pps {
                    Some(asked) => format!(
                        "it sends about {} of the {} asked",
                        pps_text(asked * (1.0 - lost_share)),
                        pps_text(*asked)
                    ),
                    None => format!(
                        "it sends about {:.0} % of its schedule",
                        (1.0 - lost_share) * 100.0
                    ),
                };
                let why = match ceiling_pps {
                    Some(ceiling) => format!(
                        "the floor known before the run let it pace up to {}: the path costs \
                         more now than then, or other work takes the core",
                        pps_text(*ceiling)
                    ),
                    None => "the path cannot keep up with the rate asked, or other work takes \
                             the core"
                        .to_string(),
                };
                write!(
                    f,
                    "port `{port}` keeps falling behind its schedule: {} behind after {}, \
                     losing {:.1} % of the time over the last {}: {sends}, so the run will \
                     take longer than asked ({why}). Lower the rate, spread the flows over \
                     more cores (--cores), use another backend, or ask for --rate max to send \
                     unpaced",
                    duration_text(*behind_ns),
                    duration_text(*elapsed_ns),
                    lost_share * 100.0,
                    duration_text(*over_ns),
                )
            }
            Warning::ReceiverStoppedEarly { port, error } => write!(
                f,
                "port `{port}` stopped receiving: {error}; the transmitters are stopped \
                 (nothing counts what they send) and the results cover what arrived until then"
            ),
            Warning::RateShortfall {
                port,
                frames,
                sent_pps,
                asked_pps,
                elapsed_ns,
                planned_ns,
                late_frames,
                max_late_ns,
                floor,
            } => {
                let why = if *late_frames > 0 {
                    format!(
                        "{late_frames} frames were handed over late (worst {}): the sender \
                         could not keep up",
                        duration_text(*max_late_ns)
                    )
                } else {
                    "the backend could not take the frames as fast as asked".to_string()
                };
                let why = match floor {
                    Some(floor) => format!(
                        "{why}; the path's floor as the run measured it ({} per hand-over, {} \
                         back to back) paces at most {}",
                        duration_text(floor.handover_ns),
                        duration_text(floor.spacing_ns),
                        pps_text(floor.ceiling_pps)
                    ),
                    None => why,
                };
                write!(
                    f,
                    "tx port {port}: sent {frames} frames at {} in {}, {:.1} % of the asked {} \
                     over {}; {why} — lower the rate, give strobe more cores (--cores N, 2 or \
                     more CPUs), use afxdp:, or run on a quieter machine",
                    pps_text(*sent_pps),
                    duration_text(*elapsed_ns),
                    *planned_ns as f64 * 100.0 / (*elapsed_ns).max(1) as f64,
                    pps_text(*asked_pps),
                    duration_text(*planned_ns),
                )
            }
            Warning::TransmitRefused {
                port,
                refused,
                frames,
            } => write!(
                f,
                "port `{port}`: the driver refused {refused} of {frames} frames after the \
                 hand-over (its transmit ring was full: the receiver or the path behind it \
                 fell behind); they count as sent and lost"
            ),
            Warning::InterfaceDrops { port, dropped } => write!(
                f,
                "rx port `{port}`: the interface dropped {dropped} frames on receive before \
                 any socket saw them (a full backlog: the receiving side's CPU fell behind, or \
                 other traffic arrived there); strobe's frames among them count as lost"
            ),
            Warning::TransmitStampsMissing {
                port,
                missing,
                stamped,
            } => write!(
                f,
                "rx port `{port}`: {missing} frames got no transmit stamp from AF_XDP TX \
                 metadata in time (the driver did not stamp them, or their completion came \
                 more than ten seconds late) and are left out of latency, which covers the \
                 other {stamped}"
            ),
            Warning::LateOnSteeringLab {
                port,
                late_frames,
                late_share,
                lab_prefix,
                dut,
            } => write!(
                f,
                "port `{port}`: strobe itself handed {late_frames} frames ({:.2} %) over late, \
                 on a lab whose receive steering (RPS) is on: each hand-over then wakes \
                 another core with an inter-processor interrupt, which in a virtual machine \
                 costs microseconds and also delays the receive stamps; for paced timing and \
                 latency bring the lab up with `strobe lab up --prefix {lab_prefix} --dut \
                 {dut} --rps off`",
                late_share * 100.0
            ),
            Warning::TotalLoss {
                lost_flows,
                flows,
                frames_sent,
            } => {
                if lost_flows.len() >= *flows {
                    write!(
                        f,
                        "100 % loss: none of the {frames_sent} frames sent was received"
                    )?;
                } else {
                    let mut names = lost_flows
                        .iter()
                        .take(5)
                        .map(String::as_str)
                        .collect::<Vec<_>>()
                        .join(", ");
                    if lost_flows.len() > 5 {
                        names += &format!(" and {} more", lost_flows.len() - 5);
                    }
                    write!(
                        f,
                        "100 % loss on {} of {flows} flows ({names})",
                        lost_flows.len()
                    )?;
                }
                f.write_str(
                    " — likely the frames do not reach the receiver: wrong destination MAC \
                     (the DUT drops frames not addressed to it), wrong IP addresses or no \
                     route on the DUT, or the receive port is not where the DUT sends; check \
                     the flows' MACs and addresses against the DUT's (`strobe lab status` on \
                     the lab) and the rx port",
                )
            }
            Warning::ExcessFrames { flow, excess } => write!(
                f,
                "flow `{flow}` received {excess} more unique frames than it sent: frames with \
                 this run's tag came from elsewhere; its counts and latency are not \
                 trustworthy"
            ),
            Warning::ClocksDisagree { flow, frames } => write!(
                f,
                "flow `{flow}`: {frames} frames arrived before they were sent by the \
                 timestamps: the two sides' clocks disagree"
            ),
            Warning::SuspectTrial => f.write_str(
                "more unique frames arrived than were sent: this trial's counts are suspect",
            ),
            Warning::TailLoss {
                trains_lost,
                trains,
                frames_lost,
                through_median,
                through_fewest,
                buffer_bytes,
                frame_bytes,
                burst_median,
                fitting_frames,
            } => {
                let burst = burst_median.map_or(String::new(), |b| {
                    format!(", of which {b:.0} arrived at once (a bucket's burst)")
                });
                write!(
                    f,
                    "{trains_lost} of {trains} trains lost their tails ({frames_lost} frames): \
                     the bottleneck let {through_median:.0} frames (median; fewest \
                     {through_fewest}) through back to back from each train's head, then \
                     dropped the rest: it buffers about {buffer_bytes} bytes of \
                     {frame_bytes}-byte frames{burst}. Trains of at most {fitting_frames} \
                     frames fit (--frames {fitting_frames}); the loss counts the overflow, not \
                     the path, while the bandwidth past the burst still reads the \
                     bottleneck's rate"
                )
            }
            Warning::Baseline { of } => write!(f, "baseline: {of}"),
            Warning::RunFailed { error } => write!(f, "the run failed: {error}"),
            Warning::PortStopped { port, error } => {
                write!(f, "port `{port}` stopped before its end: {error}")
            }
            Warning::ReceivePortStopped { port, error } => write!(
                f,
                "port `{port}` stopped receiving before the run's end: {error}; the results \
                 are incomplete: they count what it received until then, and frames sent \
                 after count as lost"
            ),
            Warning::RateBelow {
                ir_bps,
                against,
                want_bps,
            } => write!(
                f,
                "IR {} below {against} {}",
                bps_text(*ir_bps),
                bps_text(*want_bps)
            ),
            Warning::LossAbove { flr, max_flr } => {
                write!(f, "FLR {:.4} % above {:.4} %", flr * 100.0, max_flr * 100.0)
            }
            Warning::DelayAbove { ftd_ns, max_ns } => write!(
                f,
                "FTD {} above {}",
                duration_text(*ftd_ns),
                duration_text(*max_ns)
            ),
            Warning::NoDelayMeasured => f.write_str("no frame delay measured (nothing arrived)"),
            Warning::DelayVariationAbove { fdv_ns, max_ns } => write!(
                f,
                "FDV {} above {}",
                duration_text(*fdv_ns),
                duration_text(*max_ns)
            ),
            Warning::NotPoliced { ir_bps, most_bps } => write!(
                f,
                "IR {} above CIR + EIR {}: not policed",
                bps_text(*ir_bps),
                bps_text(*most_bps)
            ),
            Warning::Recorded { text } => f.write_str(text),
        }
    }
}

impl Serialize for Warning {
    /// The kind and fields, and `text`: the words.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::Error;
        let mut value =
            Warning::serialize(self, serde_json::value::Serializer).map_err(S::Error::custom)?;
        if let serde_json::Value::Object(fields) = &mut value {
            fields.insert("text".into(), serde_json::Value::String(self.to_string()));
        }
        value.serialize(serializer)
    }
}

/// In a JSON Schema: an object with its `kind` (a variant's snake_case name) and `text`
/// (the words), and the figures of its kind beside them. The figures differ per kind and
/// kinds are added over time, so the schema requires only those two.
impl schemars::JsonSchema for Warning {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Warning".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A warning or failure: its kind, the figures it was judged by, and its words.",
            "type": "object",
            "required": ["kind", "text"],
            "properties": {
                "kind": { "type": "string", "description": "e.g. rate_shortfall, total_loss, port_stopped" },
                "text": { "type": "string", "description": "the words the terminal shows" }
            }
        })
    }
}

impl<'de> Deserialize<'de> for Warning {
    /// A typed warning; also a plain string or a kind this build does not know (a run stored
    /// by an older or newer strobe), kept as its words.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        Ok(match value {
            serde_json::Value::String(text) => Warning::Recorded { text },
            serde_json::Value::Object(mut fields) => {
                let text = fields.remove("text");
                let typed = Warning::deserialize(serde_json::Value::Object(fields));
                match (typed, text) {
                    (Ok(w), _) => w,
                    (Err(_), Some(serde_json::Value::String(text))) => Warning::Recorded { text },
                    (Err(e), _) => return Err(serde::de::Error::custom(e)),
                }
            }
            other => {
                return Err(serde::de::Error::custom(format!(
                    "a warning is an object with a kind, or words; got {other}"
                )))
            }
        })
    }
}

/// Each warning's words, in order: what OTG replies carry (its schema holds strings).
pub fn warning_texts(warnings: &[Warning]) -> Vec<String> {
    warnings.iter().map(Warning::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_carries_kind_fields_and_words_and_reads_back() {
        let w = Warning::InterfaceDrops {
            port: "rx0".into(),
            dropped: 407,
        };
        let json = serde_json::to_value(&w).unwrap();
        assert_eq!(json["kind"], "interface_drops");
        assert_eq!(json["port"], "rx0");
        assert_eq!(json["dropped"], 407);
        assert!(json["text"]
            .as_str()
            .unwrap()
            .starts_with("rx port `rx0`: the interface dropped 407 frames"));
        assert_eq!(serde_json::from_value::<Warning>(json).unwrap(), w);
    }

    #[test]
    fn nested_and_fieldless_kinds_round_trip() {
        for w in [
            Warning::SuspectTrial,
            Warning::NoDelayMeasured,
            Warning::ExcessFrames {
                flow: "f".into(),
                excess: 3,
            }
            .of_baseline(),
        ] {
            let text = serde_json::to_string(&w).unwrap();
            assert_eq!(serde_json::from_str::<Warning>(&text).unwrap(), w, "{text}");
        }
        let nested = serde_json::to_value(
            Warning::PortStopped {
                port: "p".into(),
                error: "gone".into(),
            }
            .of_baseline(),
        )
        .unwrap();
        assert_eq!(nested["kind"], "baseline");
        assert_eq!(nested["of"]["kind"], "port_stopped");
        assert_eq!(
            nested["text"],
            "baseline: port `p` stopped before its end: gone"
        );
    }

    #[test]
    fn words_stored_by_older_runs_and_unknown_kinds_are_kept_as_words() {
        let old: Vec<Warning> = serde_json::from_str(r#"["a warning in words"]"#).unwrap();
        assert_eq!(old[0].to_string(), "a warning in words");
        let newer: Warning =
            serde_json::from_str(r#"{"kind":"from_the_future","x":1,"text":"said so"}"#).unwrap();
        assert_eq!(
            newer,
            Warning::Recorded {
                text: "said so".into()
            }
        );
        assert!(serde_json::from_str::<Warning>(r#"{"kind":"from_the_future"}"#).is_err());
        assert!(serde_json::from_str::<Warning>("12").is_err());
    }

    #[test]
    fn words_name_the_figures() {
        let loss = Warning::TotalLoss {
            lost_flows: (0..7).map(|i| format!("f{i}")).collect(),
            flows: 9,
            frames_sent: 10,
        };
        assert!(loss
            .to_string()
            .starts_with("100 % loss on 7 of 9 flows (f0, f1, f2, f3, f4 and 2 more) — likely"));
        let all = Warning::TotalLoss {
            lost_flows: vec!["a".into()],
            flows: 1,
            frames_sent: 100,
        };
        assert!(all
            .to_string()
            .starts_with("100 % loss: none of the 100 frames sent was received"));
        let below = Warning::RateBelow {
            ir_bps: 38.8e6,
            against: "the CIR".into(),
            want_bps: 40e6,
        };
        assert_eq!(
            below.to_string(),
            "IR 38.800 Mbit/s below the CIR 40.000 Mbit/s"
        );
        assert_eq!(
            Warning::ClocksDisagree {
                flow: "f".into(),
                frames: 2
            }
            .flow(),
            Some("f")
        );
    }
}
