//! The traffic pattern a capture is expected to follow, parsed from `--expect`.

use std::fmt;
use std::str::FromStr;

/// Bytes the capture does not see but the wire carries per frame:
/// the 4-byte FCS (captures store frames without it).
pub const FCS_BYTES: u64 = 4;
/// Preamble (7) + start-of-frame delimiter (1) + minimum inter-frame gap (12).
pub const L1_OVERHEAD_BYTES: u64 = 20;

/// Bits a captured frame of `len` bytes occupies on the wire (layer 1).
pub fn l1_bits(len: u32) -> u64 {
    (u64::from(len) + FCS_BYTES + L1_OVERHEAD_BYTES) * 8
}

/// Expected traffic model of a capture.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, schemars::JsonSchema)]
#[serde(tag = "model", rename_all = "snake_case")]
pub enum Expectation {
    /// Constant packet rate: every gap is `1e9 / pps` ns.
    Cbr { pps: f64 },
    /// Constant layer-1 bit rate: the gap after a frame of `len` bytes is
    /// `(len + 4 FCS + 20 preamble/SFD/IFG) * 8 / bits_per_sec` seconds.
    CbrL1 { bits_per_sec: f64 },
    /// Poisson arrivals: gaps are exponentially distributed with mean `1e9 / pps` ns.
    Poisson { pps: f64 },
}

impl Expectation {
    /// Checks that the rate is usable (positive and finite); values built in code
    /// bypass the parser, so `analyze` calls this too.
    pub fn validate(&self) -> Result<(), String> {
        let (name, rate) = match *self {
            Expectation::Cbr { pps } | Expectation::Poisson { pps } => ("pps", pps),
            Expectation::CbrL1 { bits_per_sec } => ("bits_per_sec", bits_per_sec),
        };
        if rate.is_finite() && rate > 0.0 {
            Ok(())
        } else {
            Err(format!(
                "{name} must be a positive finite number, got {rate}"
            ))
        }
    }

    /// Target gap in ns after a frame of `len` captured bytes.
    pub fn target_gap_ns(&self, len: u32) -> f64 {
        match *self {
            Expectation::Cbr { pps } | Expectation::Poisson { pps } => 1e9 / pps,
            Expectation::CbrL1 { bits_per_sec } => l1_bits(len) as f64 * 1e9 / bits_per_sec,
        }
    }
}

/// Prints the canonical `--expect` form, which parses back to the same value.
impl fmt::Display for Expectation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Expectation::Cbr { pps } => write!(f, "cbr:{pps}pps"),
            Expectation::CbrL1 { bits_per_sec } => write!(f, "cbr:{bits_per_sec}bps"),
            Expectation::Poisson { pps } => write!(f, "poisson:{pps}pps"),
        }
    }
}

const ACCEPTED_FORMS: &str = "accepted: cbr:<rate> or poisson:<rate>, where <rate> is a positive \
number with a packet-rate unit pps, kpps, mpps or gpps (a bare number means pps) or, for cbr only, \
a layer-1 bit-rate unit bps, kbps, mbps, gbps or tbps; e.g. cbr:100kpps, cbr:1000, cbr:1.5mpps, \
poisson:1mpps, cbr:10gbps";

/// Why an `--expect` value was rejected; the message lists the accepted forms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseExpectationError {
    input: String,
    reason: String,
}

impl ParseExpectationError {
    fn new(input: &str, reason: impl Into<String>) -> Self {
        Self {
            input: input.to_owned(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for ParseExpectationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid expectation {:?}: {}; {ACCEPTED_FORMS}",
            self.input, self.reason
        )
    }
}

impl std::error::Error for ParseExpectationError {}

enum Rate {
    Packets(f64),
    L1Bits(f64),
}

/// Longer suffixes first so that "kpps" is not read as "k" + "pps".
const RATE_UNITS: [(&str, f64, bool); 9] = [
    ("gpps", 1e9, false),
    ("mpps", 1e6, false),
    ("kpps", 1e3, false),
    ("pps", 1.0, false),
    ("tbps", 1e12, true),
    ("gbps", 1e9, true),
    ("mbps", 1e6, true),
    ("kbps", 1e3, true),
    ("bps", 1.0, true),
];

fn parse_rate(text: &str) -> Result<Rate, String> {
    let lower = text.trim().to_ascii_lowercase();
    let (number, scale, is_bits) = RATE_UNITS
        .iter()
        .find_map(|&(unit, scale, is_bits)| {
            lower
                .strip_suffix(unit)
                .map(|number| (number.trim(), scale, is_bits))
        })
        .unwrap_or((lower.as_str(), 1.0, false));
    if number.is_empty() {
        return Err("the rate has no number".to_owned());
    }
    let value: f64 = number
        .parse()
        .map_err(|_| format!("rate {number:?} is not a number"))?;
    let rate = value * scale;
    if !(rate.is_finite() && rate > 0.0) {
        return Err(format!("rate {number:?} must be positive and finite"));
    }
    Ok(if is_bits {
        Rate::L1Bits(rate)
    } else {
        Rate::Packets(rate)
    })
}

impl FromStr for Expectation {
    type Err = ParseExpectationError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let err = |reason: String| ParseExpectationError::new(input, reason);
        let (model, rate) = input
            .split_once(':')
            .ok_or_else(|| err("missing ':' between model and rate".to_owned()))?;
        let rate = parse_rate(rate).map_err(err)?;
        match (model.trim().to_ascii_lowercase().as_str(), rate) {
            ("cbr", Rate::Packets(pps)) => Ok(Expectation::Cbr { pps }),
            ("cbr", Rate::L1Bits(bits_per_sec)) => Ok(Expectation::CbrL1 { bits_per_sec }),
            ("poisson", Rate::Packets(pps)) => Ok(Expectation::Poisson { pps }),
            ("poisson", Rate::L1Bits(_)) => {
                Err(err("poisson takes a packet rate, not a bit rate".to_owned()))
            }
            (other, _) => Err(err(format!("unknown model {other:?}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Expectation {
        s.parse()
            .unwrap_or_else(|e| panic!("{s} should parse: {e}"))
    }

    #[test]
    fn accepts_packet_rates() {
        assert_eq!(parse("cbr:100kpps"), Expectation::Cbr { pps: 100e3 });
        assert_eq!(parse("cbr:1000"), Expectation::Cbr { pps: 1000.0 });
        assert_eq!(parse("cbr:1.5mpps"), Expectation::Cbr { pps: 1.5e6 });
        assert_eq!(parse("CBR:2Mpps"), Expectation::Cbr { pps: 2e6 });
        assert_eq!(parse("cbr: 250 pps"), Expectation::Cbr { pps: 250.0 });
        assert_eq!(parse("poisson:1mpps"), Expectation::Poisson { pps: 1e6 });
        assert_eq!(parse("poisson:1gpps"), Expectation::Poisson { pps: 1e9 });
    }

    #[test]
    fn accepts_l1_bit_rates() {
        assert_eq!(
            parse("cbr:10gbps"),
            Expectation::CbrL1 { bits_per_sec: 10e9 }
        );
        assert_eq!(
            parse("cbr:100mbps"),
            Expectation::CbrL1 {
                bits_per_sec: 100e6
            }
        );
        assert_eq!(
            parse("cbr:64kbps"),
            Expectation::CbrL1 { bits_per_sec: 64e3 }
        );
        assert_eq!(
            parse("cbr:1tbps"),
            Expectation::CbrL1 { bits_per_sec: 1e12 }
        );
    }

    #[test]
    fn rejects_malformed_input_and_lists_accepted_forms() {
        for bad in [
            "cbr",
            "cbr:",
            "cbr:kpps",
            "cbr:fast",
            "cbr:0",
            "cbr:-5kpps",
            "cbr:infpps",
            "cbr:nan",
            "cbr:10furlongs",
            "vbr:10kpps",
            "poisson:1gbps",
        ] {
            let err = bad
                .parse::<Expectation>()
                .expect_err(&format!("{bad} should be rejected"));
            let message = err.to_string();
            assert!(message.contains(bad), "{message}");
            assert!(message.contains("accepted: cbr:<rate>"), "{message}");
        }
        let err = "poisson:1gbps".parse::<Expectation>().unwrap_err();
        assert!(err.to_string().contains("not a bit rate"));
        let err = "vbr:1".parse::<Expectation>().unwrap_err();
        assert!(err.to_string().contains("unknown model \"vbr\""));
    }

    #[test]
    fn display_round_trips() {
        for e in [
            Expectation::Cbr { pps: 1.5e6 },
            Expectation::CbrL1 { bits_per_sec: 25e9 },
            Expectation::Poisson { pps: 333.25 },
        ] {
            assert_eq!(parse(&e.to_string()), e);
        }
    }

    #[test]
    fn l1_target_gap_counts_fcs_and_preamble() {
        let e = Expectation::CbrL1 { bits_per_sec: 1e9 };
        // 60 + 4 + 20 = 84 bytes = 672 bits = 672 ns at 1 Gbit/s.
        assert_eq!(e.target_gap_ns(60), 672.0);
        assert_eq!(Expectation::Cbr { pps: 1e6 }.target_gap_ns(1500), 1000.0);
    }

    #[test]
    fn validate_rejects_unusable_rates() {
        assert!(Expectation::Cbr { pps: 0.0 }.validate().is_err());
        assert!(Expectation::Poisson { pps: f64::NAN }.validate().is_err());
        assert!(Expectation::CbrL1 {
            bits_per_sec: f64::INFINITY
        }
        .validate()
        .is_err());
        assert!(Expectation::Cbr { pps: 1.0 }.validate().is_ok());
    }
}
