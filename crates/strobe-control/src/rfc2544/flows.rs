//! The flows trials send, typed: the request's flow is resolved into the model once per
//! frame size (its text parsed and checked there, once; [`crate::methodology::resolve_flow`]),
//! and every trial sets its rate and length on that flow as numbers
//! ([`crate::methodology::sending`]); the learning frames are the same flow reversed. No
//! trial writes or re-parses command-line text.

use strobe_model::{HeaderSpec, Metrics, Pattern, PortSpec, Scenario, DEFAULT_PORT_SPEED_BPS};
use strobe_timing::{Duration, Rate};
use strobe_wire::HeaderKind;

use super::report::FrameSize;
use super::request::Rfc2544Request;
use super::session::Offer;
use crate::methodology::{check_schedule, resolve_flow, sending};
use crate::plan::Pacing;
use crate::source::{lab_endpoint, UNPACED_PPS};
use crate::ControlError;

/// Learning frames go this fast: enough to be over in a few ms, slow enough for any DUT.
const LEARNING_PPS: f64 = 10_000.0;

/// One frame size's flows, resolved once from the request.
#[derive(Clone, Debug)]
pub(crate) struct SizedFlow {
    pub size: FrameSize,
    /// The test flow as every trial of this size sends it, towards the receive port, its
    /// port as fast as the link (the link, not the model's default port speed, says what
    /// the line rate is); each trial sets its rate and length.
    pub test: Scenario,
    /// The learning frames sent before each trial; None when the request asks for none.
    pub learning: Option<Scenario>,
}

impl SizedFlow {
    /// The request's flow at `size` (checked with the model's own messages), its mean frame
    /// length and line rate, and its learning frames.
    pub(crate) fn resolve(request: &Rfc2544Request, size: &str) -> Result<Self, ControlError> {
        let mut flow = request.flow.clone();
        flow.flow.size = size.to_string();
        let mut test = resolve_flow(&flow, &request.lab_prefix)?;
        let mean_bytes = test
            .flows
            .first()
            .map(|f| f.size.mean())
            .ok_or_else(|| ControlError::BadInput(format!("frame size `{size}`: no flow")))?;
        if let Some(p) = test.ports.first_mut() {
            p.speed_bps = request.settings.link_bps as u64;
        }
        let learning = (request.settings.learning_frames > 0)
            .then(|| learning_flow(request, &test))
            .transpose()?;
        Ok(SizedFlow {
            size: FrameSize {
                size: size.to_string(),
                mean_bytes,
                line_rate_pps: request.settings.link_bps / ((mean_bytes + 20.0) * 8.0),
            },
            test,
            learning,
        })
    }

    /// A trial's scenario and pacing: paced at a rate for the trial's time, unpaced for the
    /// trial's time, or a burst of frames as fast as the generator goes.
    pub(crate) fn trial(
        &self,
        offer: Offer,
        trial_ns: u64,
    ) -> Result<(Scenario, Pacing), ControlError> {
        match offer {
            Offer::Paced(pps) => {
                let frames = ((pps * trial_ns as f64 / 1e9).round() as u64).max(2);
                self.paced(pps, frames)
            }
            Offer::Unpaced => self.sending(
                UNPACED_PPS,
                Duration::Continuous,
                Pacing::Unpaced {
                    time_limit_ns: Some(trial_ns),
                },
            ),
            Offer::Burst(frames) => self.sending(
                UNPACED_PPS,
                Duration::Packets(frames),
                Pacing::Unpaced {
                    time_limit_ns: None,
                },
            ),
        }
    }

    /// The test flow sending `frames` frames at `pps`.
    pub(crate) fn paced(&self, pps: f64, frames: u64) -> Result<(Scenario, Pacing), ControlError> {
        self.sending(pps, Duration::Packets(frames), Pacing::Scheduled)
    }

    fn sending(
        &self,
        pps: f64,
        duration: Duration,
        pacing: Pacing,
    ) -> Result<(Scenario, Pacing), ControlError> {
        Ok((sending(&self.test, Rate::Pps(pps), duration)?, pacing))
    }
}

/// Learning frames (RFC 2544 §23): the test flow reversed, from the receive port back
/// towards the transmit port, so that a switching DUT knows where the test frames go before
/// they come. Addresses, UDP ports and MACs swap sides; MACs the user left to a `lab:`
/// receive port are that port's own (a router DUT's near side differs from the far one).
/// Nothing is measured: the trailer is off.
pub(crate) fn learning_flow(
    request: &Rfc2544Request,
    test: &Scenario,
) -> Result<Scenario, ControlError> {
    let udp = request.flow.flow.udp.as_deref().unwrap_or_default();
    let unreversible = || {
        ControlError::BadInput(format!(
            "the UDP flow `{udp}`: give it as SRC:PORT-DST:PORT (learning frames go back from \
             DST to SRC)"
        ))
    };
    let (Some(port), Some(mut flow)) = (test.ports.first(), test.flows.first().cloned()) else {
        return Err(unreversible());
    };
    let has = |kinds: &[HeaderKind]| flow.packet.iter().any(|h| kinds.contains(&h.kind));
    if !has(&[HeaderKind::Ipv4, HeaderKind::Ipv6]) || !has(&[HeaderKind::Udp]) {
        return Err(unreversible());
    }
    for header in &mut flow.packet {
        match header.kind {
            HeaderKind::Ethernet | HeaderKind::Ipv4 | HeaderKind::Ipv6 => {
                swap_fields(header, "src", "dst")
            }
            HeaderKind::Udp | HeaderKind::Tcp => swap_fields(header, "src_port", "dst_port"),
            _ => {}
        }
    }
    // The learning frames leave from the port the test flow is received on.
    let rx_port = flow
        .rx_ports
        .first()
        .and_then(|name| test.ports.iter().find(|p| &p.name == name))
        .ok_or_else(|| {
            ControlError::BadInput(
                "learning frames go back from the receive port: give it (--rx PORT)".into(),
            )
        })?;
    let rx = request.flow.rx.as_deref().unwrap_or_default();
    if let Some(end) = lab_endpoint(rx, &request.lab_prefix)? {
        if let Some(eth) = flow
            .packet
            .first_mut()
            .filter(|h| h.kind == HeaderKind::Ethernet)
        {
            let given = &request.flow.flow;
            if given.dst_mac.is_none() {
                set_mac(eth, "src", end.mac);
            }
            if given.src_mac.is_none() {
                set_mac(eth, "dst", end.next_hop_mac);
            }
        }
    }
    flow.rx_ports.clear();
    flow.schedule.rate = Rate::Pps(LEARNING_PPS);
    flow.schedule.duration = Duration::Packets(request.settings.learning_frames);
    check_schedule(&flow.schedule)?;
    flow.metrics = Metrics {
        enable: flow.metrics.enable,
        loss: false,
        timestamps: false,
        latency: None,
        instrument: false,
    };
    Ok(Scenario {
        source: test.source.clone(),
        ports: vec![PortSpec {
            name: port.name.clone(),
            location: rx_port.location.clone(),
            speed_bps: DEFAULT_PORT_SPEED_BPS,
            cores: None,
        }],
        flows: vec![flow],
        // The one warning a flow of the model gets is the trailer's, and it is off here.
        warnings: Vec::new(),
        pacing: test.pacing,
    })
}

/// Swaps two fields of a header: the pattern set on each moves to the other (a field left
/// unset stays unset, on the other side).
fn swap_fields(header: &mut HeaderSpec, a: &str, b: &str) {
    let (Some((a, _)), Some((b, _))) = (header.kind.field(a), header.kind.field(b)) else {
        return;
    };
    let at = |index: usize| header.fields.iter().position(|f| f.field_index == index);
    match (at(a), at(b)) {
        (Some(i), Some(j)) => {
            let pattern = header.fields[i].pattern.clone();
            header.fields[i].pattern = std::mem::replace(&mut header.fields[j].pattern, pattern);
        }
        (Some(i), None) => header.fields[i].field_index = b,
        (None, Some(j)) => header.fields[j].field_index = a,
        (None, None) => {}
    }
}

fn set_mac(header: &mut HeaderSpec, field: &str, mac: [u8; 6]) {
    if let Some((index, _)) = header.kind.field(field) {
        let value = mac.iter().fold(0u128, |v, &b| (v << 8) | u128::from(b));
        header.set(index, Pattern::Value(value));
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::net::Ipv4Addr;

    use strobe_model::{Pattern, Scenario};
    use strobe_timing::{Duration, Rate};
    use strobe_wire::HeaderKind;

    use super::super::request::{Rfc2544Request, Rfc2544Spec};
    use super::*;

    fn request() -> Rfc2544Request {
        Rfc2544Spec {
            port: "null".into(),
            rx: "null".into(),
            ..Rfc2544Spec::default()
        }
        .request("strobe")
        .unwrap()
    }

    /// A field's value in the first flow's header of `kind` (set to one value, not a pattern).
    pub(crate) fn field(s: &Scenario, kind: HeaderKind, name: &str) -> u128 {
        let header = s.flows[0]
            .packet
            .iter()
            .find(|h| h.kind == kind)
            .unwrap_or_else(|| panic!("no {kind:?} header"));
        let (index, _) = kind.field(name).unwrap();
        match header.fields.iter().find(|f| f.field_index == index) {
            Some(f) => match &f.pattern {
                Pattern::Value(v) => *v,
                other => panic!("{kind:?}.{name}: {other:?}"),
            },
            None => panic!("{kind:?}.{name} is not set"),
        }
    }

    /// An IPv4 address as its field value.
    pub(crate) fn v4(text: &str) -> u128 {
        u128::from(u32::from(text.parse::<Ipv4Addr>().unwrap()))
    }

    /// The learning flow is the test flow reversed, on the typed values: addresses, UDP ports
    /// and MACs swapped, from the receive port, the trailer off, `learning_frames` frames.
    #[test]
    fn the_learning_flow_is_the_test_flow_reversed() {
        let mut r = request();
        r.flow.rx = Some("pcap:/tmp/strobe-learning-test.pcap".into());
        r.settings.learning_frames = 7;
        let sized = SizedFlow::resolve(&r, "256").unwrap();
        let (test, learning) = (&sized.test, sized.learning.as_ref().unwrap());
        for (kind, a, b) in [
            (HeaderKind::Ethernet, "src", "dst"),
            (HeaderKind::Ipv4, "src", "dst"),
            (HeaderKind::Udp, "src_port", "dst_port"),
        ] {
            assert_eq!(
                field(learning, kind, a),
                field(test, kind, b),
                "{kind:?}.{a}"
            );
            assert_eq!(
                field(learning, kind, b),
                field(test, kind, a),
                "{kind:?}.{b}"
            );
        }
        // Default MACs too: from the destination's, to the source's.
        assert_eq!(
            (
                field(learning, HeaderKind::Ethernet, "src"),
                field(learning, HeaderKind::Ethernet, "dst")
            ),
            (0x02_00_00_00_00_02, 0x02_00_00_00_00_01)
        );
        let (t, l) = (&test.flows[0], &learning.flows[0]);
        assert!(t.metrics.instrument && !l.metrics.instrument);
        assert!(!l.metrics.loss && !l.metrics.timestamps && l.metrics.latency.is_none());
        assert_eq!(l.schedule.duration, Duration::Packets(7));
        assert_eq!(l.schedule.rate, Rate::Pps(10_000.0));
        assert_eq!(l.size, t.size);
        // Sent from the port the test flow is received on, and received nowhere.
        assert_eq!(learning.ports.len(), 1);
        assert_eq!(l.tx_port, learning.ports[0].name);
        let rx = test.ports.iter().find(|p| p.name == t.rx_ports[0]).unwrap();
        assert_eq!(learning.ports[0].location, rx.location);
        assert!(l.rx_ports.is_empty());
        assert!(learning.warnings.is_empty());
    }

    /// Each trial sets its rate and length on the typed flow; the scenario is the one the
    /// command-line text (`--rate 1234.5 --count N`, `--rate max --duration …`) made before.
    #[test]
    fn trials_set_rate_and_length_on_the_typed_flow_as_the_text_did() {
        let r = request();
        let sized = SizedFlow::resolve(&r, "512").unwrap();
        assert_eq!(sized.size.mean_bytes, 512.0);
        let trial_ns = r.settings.trial_ns;
        let by_text = |rate: &str, count: Option<u64>, duration: Option<String>| {
            let mut flow = r.flow.clone();
            flow.flow.size = "512".into();
            flow.flow.rate = rate.into();
            flow.flow.count = count;
            flow.flow.duration = duration;
            let (mut scenario, pacing) = flow.scenario(&r.lab_prefix, false).unwrap();
            scenario.ports[0].speed_bps = r.settings.link_bps as u64;
            (format!("{scenario:?}"), pacing)
        };
        let typed = |(scenario, pacing): (Scenario, Pacing)| (format!("{scenario:?}"), pacing);
        assert_eq!(
            typed(sized.trial(Offer::Paced(1234.5), trial_ns).unwrap()),
            by_text("1234.500", Some(12_345), None)
        );
        assert_eq!(
            typed(sized.trial(Offer::Unpaced, trial_ns).unwrap()),
            by_text("max", None, Some(format!("{trial_ns}ns")))
        );
        assert_eq!(
            typed(sized.trial(Offer::Burst(300), trial_ns).unwrap()),
            by_text("max", Some(300), None)
        );
        assert_eq!(
            typed(sized.paced(99.25, 40).unwrap()),
            by_text("99.250", Some(40), None)
        );
        // The learning frames as the reversed text made them, MACs aside (the text left both
        // to their defaults, unswapped).
        let mut learning = r.flow.clone();
        learning.rx = None;
        learning.flow.port = "null".into();
        learning.flow.udp = Some("198.18.1.1:2000-198.18.0.1:1000".into());
        learning.flow.no_trailer = true;
        learning.flow.src_mac = Some("02:00:00:00:00:02".into());
        learning.flow.dst_mac = Some("02:00:00:00:00:01".into());
        learning.flow.size = "512".into();
        learning.flow.rate = "10000".into();
        learning.flow.count = Some(r.settings.learning_frames);
        let (by_text, _) = learning.scenario(&r.lab_prefix, false).unwrap();
        assert_eq!(
            format!("{:?}", sized.learning.unwrap()),
            format!("{by_text:?}")
        );
    }
}
