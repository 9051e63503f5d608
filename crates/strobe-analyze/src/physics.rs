//! The physical ground truth of a fibre loop: the least latency any meter can report for a
//! frame sent through it. Light needs `length × n / c` to cross the fibre, and a receiver
//! that stores the frame before timestamping it (as every NIC and kernel does) sees it only
//! after its last bit arrives, one serialisation time after the first left. Comparing a
//! measured minimum with this budget shows what the measurement path itself adds.

use std::fmt;

use serde::Serialize;
use strobe_timing::Rate;

/// Speed of light in vacuum, m/s (exact by the definition of the metre).
pub const SPEED_OF_LIGHT_M_PER_S: f64 = 299_792_458.0;
/// Group index of standard single-mode fibre (ITU-T G.652, e.g. SMF-28) at 1550 nm: a
/// signal travels at the group velocity, c / 1.4682 ≈ 4.9 µs per km.
pub const SINGLE_MODE_GROUP_INDEX: f64 = 1.4682;
/// Frame check sequence the MAC appends to every frame.
pub const FCS_BYTES: u32 = 4;
/// Preamble (7) and start-of-frame delimiter (1) before every frame.
pub const PREAMBLE_SFD_BYTES: u32 = 8;
/// Shortest Ethernet frame, FCS included; the MAC pads shorter frames up to it.
pub const MIN_FRAME_BYTES: u32 = 64;

/// A frame sent once through a fibre of some length at some line rate.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct FiberLoop {
    pub length_m: f64,
    pub refractive_index: f64,
    /// Line (layer-1) rate in bits per second.
    pub line_rate_bps: f64,
    /// Frame length including the 4-byte FCS, as `strobe gen --size` and OTG count it (a
    /// capture, which has no FCS, shows 4 bytes less).
    #[serde(rename = "frame_bytes_with_fcs")]
    pub frame_bytes: u32,
}

/// The least one-way latency of a [`FiberLoop`], and how it is made up.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct LatencyBudget {
    #[serde(flatten)]
    pub fiber: FiberLoop,
    /// `frame_bytes` after the MAC's padding to [`MIN_FRAME_BYTES`], FCS included.
    #[serde(rename = "padded_frame_bytes_with_fcs")]
    pub padded_frame_bytes: u32,
    /// [`FCS_BYTES`] (part of the frame) and [`PREAMBLE_SFD_BYTES`], so that the JSON form
    /// says what it counts.
    pub fcs_bytes: u32,
    pub preamble_sfd_bytes: u32,
    /// Bytes serialised per frame: padded frame (FCS included) + preamble/SFD. The inter-frame gap
    /// follows the frame and delays the next one, not this one, so it is not counted.
    pub wire_bytes: u64,
    /// Time for light to cross the fibre.
    pub propagation_ns: f64,
    /// Time to put `wire_bytes` on the wire at the line rate.
    pub serialization_ns: f64,
    /// First bit out to last bit in: propagation + serialisation.
    pub total_ns: f64,
}

/// Why a fibre-loop calculation could not be made.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PhysicsError {
    #[error("cannot read length {input:?}: {reason}; {LENGTH_ACCEPTED}")]
    ParseLength { input: String, reason: String },
    #[error("cannot read line rate {input:?}: {reason}; {LINE_RATE_ACCEPTED}")]
    ParseLineRate { input: String, reason: String },
    #[error("fibre length {0} m is not a finite, non-negative number of metres")]
    Length(f64),
    #[error(
        "refractive index {0} is not physical: it must be finite and at least 1 \
         ({SINGLE_MODE_GROUP_INDEX} is the group index of standard single-mode fibre at 1550 nm)"
    )]
    RefractiveIndex(f64),
    #[error("line rate {0} bit/s is not a positive, finite number of bits per second")]
    LineRate(f64),
    #[error("the frame length must be at least 1 byte, got 0")]
    EmptyFrame,
}

const LENGTH_ACCEPTED: &str = "accepted is a non-negative number with an optional unit m or \
    km; a plain number is metres (for example 2km, 150m, 0.5km, 35)";

const LINE_RATE_ACCEPTED: &str = "accepted is a bit rate with a unit k, m, g or t (kilo-, \
    mega-, giga-, terabits per second), which may be followed by bps, bit or bit/s, or bps \
    alone (for example 1g, 10g, 25g, 40g, 100g, 100m, 2.5gbit/s, 10gbps, 9600bps)";

/// Seconds light needs through `length_m` of fibre with refractive index `refractive_index`,
/// in nanoseconds.
pub fn propagation_ns(length_m: f64, refractive_index: f64) -> f64 {
    length_m * refractive_index / SPEED_OF_LIGHT_M_PER_S * 1e9
}

/// Nanoseconds to serialise `wire_bytes` at `line_rate_bps`.
pub fn serialization_ns(wire_bytes: u64, line_rate_bps: f64) -> f64 {
    wire_bytes as f64 * 8.0 / line_rate_bps * 1e9
}

impl FiberLoop {
    /// The latency budget, after checking that every quantity is physical.
    pub fn budget(&self) -> Result<LatencyBudget, PhysicsError> {
        if !(self.length_m.is_finite() && self.length_m >= 0.0) {
            return Err(PhysicsError::Length(self.length_m));
        }
        if !(self.refractive_index.is_finite() && self.refractive_index >= 1.0) {
            return Err(PhysicsError::RefractiveIndex(self.refractive_index));
        }
        if !(self.line_rate_bps.is_finite() && self.line_rate_bps > 0.0) {
            return Err(PhysicsError::LineRate(self.line_rate_bps));
        }
        if self.frame_bytes == 0 {
            return Err(PhysicsError::EmptyFrame);
        }
        let padded_frame_bytes = self.frame_bytes.max(MIN_FRAME_BYTES);
        let wire_bytes = u64::from(padded_frame_bytes) + u64::from(PREAMBLE_SFD_BYTES);
        let propagation_ns = propagation_ns(self.length_m, self.refractive_index);
        let serialization_ns = serialization_ns(wire_bytes, self.line_rate_bps);
        Ok(LatencyBudget {
            fiber: *self,
            padded_frame_bytes,
            fcs_bytes: FCS_BYTES,
            preamble_sfd_bytes: PREAMBLE_SFD_BYTES,
            wire_bytes,
            propagation_ns,
            serialization_ns,
            total_ns: propagation_ns + serialization_ns,
        })
    }
}

/// Human-readable breakdown, stating what is counted on the wire.
impl fmt::Display for LatencyBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fiber = &self.fiber;
        let rate = format_bit_rate(fiber.line_rate_bps);
        writeln!(
            f,
            "fibre loop: {} m at refractive index {}, {rate} line rate, {}-byte frame (FCS included)",
            fiber.length_m, fiber.refractive_index, fiber.frame_bytes
        )?;
        writeln!(
            f,
            "  propagation    {:>12.1} ns   length × n / c",
            self.propagation_ns
        )?;
        let padding = if self.padded_frame_bytes > fiber.frame_bytes {
            format!(" (padded to {} B)", self.padded_frame_bytes)
        } else {
            String::new()
        };
        writeln!(
            f,
            "  serialisation  {:>12.1} ns   {} B on the wire at {rate}: frame {} B{padding} \
             incl. FCS {FCS_BYTES} B + preamble/SFD {PREAMBLE_SFD_BYTES} B",
            self.serialization_ns, self.wire_bytes, fiber.frame_bytes
        )?;
        write!(
            f,
            "  total          {:>12.1} ns   first bit sent to last bit received \
             (store-and-forward receive; the inter-frame gap is not counted)",
            self.total_ns
        )
    }
}

/// `10000000000` → `10 Gbit/s`; `2500000000` → `2.5 Gbit/s`.
fn format_bit_rate(bps: f64) -> String {
    let (scale, unit) = [
        (1e12, "Tbit/s"),
        (1e9, "Gbit/s"),
        (1e6, "Mbit/s"),
        (1e3, "kbit/s"),
    ]
    .into_iter()
    .find(|&(scale, _)| bps >= scale)
    .unwrap_or((1.0, "bit/s"));
    format!("{} {unit}", bps / scale)
}

/// Reads a fibre length such as `2km`, `150m`, `0.5 km` or `35` (metres) into metres.
pub fn parse_length_m(input: &str) -> Result<f64, PhysicsError> {
    let error = |reason: String| PhysicsError::ParseLength {
        input: input.to_owned(),
        reason,
    };
    let text = input.trim().to_lowercase();
    let (number, unit) = split_unit(&text);
    let scale = match unit {
        "" | "m" => 1.0,
        "km" => 1000.0,
        other => return Err(error(format!("unknown unit {other:?}"))),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| error(format!("{number:?} is not a number")))?;
    let metres = value * scale;
    if !(metres.is_finite() && metres >= 0.0) {
        return Err(error(
            "the length must be finite and not negative".to_owned(),
        ));
    }
    Ok(metres)
}

/// Reads a line rate such as `10g`, `25G`, `100m`, `2.5gbit/s`, `10gbps` or `9600bps` into
/// bits per second, with the same reader and meaning as `strobe gen --rate`: a plain number
/// or a pps unit is a packet rate there, so it is refused here.
pub fn parse_line_rate_bps(input: &str) -> Result<f64, PhysicsError> {
    let error = |reason: String| PhysicsError::ParseLineRate {
        input: input.to_owned(),
        reason,
    };
    match strobe_timing::parse_rate(input) {
        Ok(Rate::L1BitsPerSec(bps)) => Ok(bps),
        Ok(Rate::Pps(_)) => Err(error(
            "that is a packet rate (a plain number or a pps unit means packets per second, as \
             in strobe gen --rate); give the line's bit rate"
                .to_owned(),
        )),
        Err(strobe_timing::TimingError::ParseRate { reason, .. }) => Err(error(
            reason.split(';').next().unwrap_or_default().to_owned(),
        )),
        Err(other) => Err(error(other.to_string())),
    }
}

/// Splits trimmed lower-case text into its number and its trailing alphabetic unit.
fn split_unit(text: &str) -> (&str, &str) {
    let unit_len: usize = text
        .chars()
        .rev()
        .take_while(|c| c.is_alphabetic())
        .map(char::len_utf8)
        .sum();
    let (number, unit) = text.split_at(text.len() - unit_len);
    (number.trim_end(), unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(
        length_m: f64,
        refractive_index: f64,
        line_rate_bps: f64,
        frame_bytes: u32,
    ) -> LatencyBudget {
        FiberLoop {
            length_m,
            refractive_index,
            line_rate_bps,
            frame_bytes,
        }
        .budget()
        .unwrap()
    }

    #[test]
    fn two_km_of_fibre_and_a_minimum_frame_at_10g() {
        let b = budget(2000.0, 1.4444, 10e9, 64);
        // 2000 m × 1.4444 / 299 792 458 m/s = 9.6359996 µs.
        assert!(
            (b.propagation_ns - 9_635.999_582).abs() < 1e-3,
            "{}",
            b.propagation_ns
        );
        // 64 (FCS included) + 8 = 72 bytes = 576 bits at 10 Gbit/s.
        assert_eq!(b.wire_bytes, 72);
        assert!(
            (b.serialization_ns - 57.6).abs() < 1e-9,
            "{}",
            b.serialization_ns
        );
        assert!((b.total_ns - 9_693.599_582).abs() < 1e-3);
        let text = b.to_string();
        for part in [
            "9636.0 ns",
            "57.6 ns",
            "9693.6 ns",
            "10 Gbit/s",
            "FCS 4 B",
            "preamble/SFD 8 B",
            "72 B",
        ] {
            assert!(text.contains(part), "{part} missing from:\n{text}");
        }
    }

    #[test]
    fn short_frames_are_padded_and_large_ones_scale() {
        let b = budget(0.0, 1.0, 1e9, 14);
        assert_eq!((b.padded_frame_bytes, b.wire_bytes), (64, 72));
        assert_eq!(b.propagation_ns, 0.0);
        assert!((b.serialization_ns - 576.0).abs() < 1e-9);
        assert!(b.to_string().contains("padded to 64 B"));
        let jumbo = budget(1.0, 1.5, 100e9, 9004);
        assert_eq!(jumbo.wire_bytes, 9012);
        assert!((jumbo.serialization_ns - 720.96).abs() < 1e-9);
        assert!((jumbo.propagation_ns - 1.5 / SPEED_OF_LIGHT_M_PER_S * 1e9).abs() < 1e-12);
    }

    #[test]
    fn unphysical_quantities_are_rejected() {
        let base = FiberLoop {
            length_m: 1.0,
            refractive_index: 1.5,
            line_rate_bps: 1e9,
            frame_bytes: 60,
        };
        let with = |f: fn(&mut FiberLoop)| {
            let mut fiber = base;
            f(&mut fiber);
            fiber.budget().unwrap_err()
        };
        assert_eq!(with(|f| f.length_m = -1.0), PhysicsError::Length(-1.0));
        assert_eq!(
            with(|f| f.refractive_index = 0.9),
            PhysicsError::RefractiveIndex(0.9)
        );
        assert_eq!(with(|f| f.line_rate_bps = 0.0), PhysicsError::LineRate(0.0));
        assert_eq!(with(|f| f.frame_bytes = 0), PhysicsError::EmptyFrame);
        assert!(matches!(
            with(|f| f.length_m = f64::INFINITY),
            PhysicsError::Length(_)
        ));
    }

    #[test]
    fn lengths_in_metres_and_kilometres() {
        assert_eq!(parse_length_m("2km").unwrap(), 2000.0);
        assert_eq!(parse_length_m("0.5 KM").unwrap(), 500.0);
        assert_eq!(parse_length_m("150m").unwrap(), 150.0);
        assert_eq!(parse_length_m("35").unwrap(), 35.0);
        assert_eq!(parse_length_m("0").unwrap(), 0.0);
        for bad in ["2 miles", "km", "-3m", "", "inf"] {
            let err = parse_length_m(bad).unwrap_err().to_string();
            assert!(
                err.contains("accepted is") && err.contains("2km"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn line_rates_in_the_usual_forms() {
        for (text, bps) in [
            ("1g", 1e9),
            ("10g", 10e9),
            ("25G", 25e9),
            ("40g", 40e9),
            ("100g", 100e9),
            ("100m", 100e6),
            ("2.5gbit/s", 2.5e9),
            ("10gbps", 10e9),
            ("10 Gbit/s", 10e9),
            ("9600bps", 9600.0),
            ("1.1g", 1.1e9),
            ("1t", 1e12),
        ] {
            assert_eq!(parse_line_rate_bps(text).unwrap(), bps, "{text}");
        }
        for bad in ["10gpps", "fast", "g", "-10g", "0", "10x", "9600", "10kpps"] {
            let err = parse_line_rate_bps(bad).unwrap_err().to_string();
            assert!(
                err.contains("accepted is") && err.contains("10g"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn budget_serializes_flat() {
        let json = serde_json::to_value(budget(2000.0, 1.4444, 10e9, 64)).unwrap();
        assert_eq!(json["length_m"], 2000.0);
        assert_eq!(json["frame_bytes_with_fcs"], 64);
        assert_eq!(json["wire_bytes"], 72);
        assert_eq!(
            (
                json["fcs_bytes"].as_u64(),
                json["preamble_sfd_bytes"].as_u64()
            ),
            (Some(4), Some(8))
        );
        assert!(json["total_ns"].as_f64().unwrap() > 9693.0);
    }
}
