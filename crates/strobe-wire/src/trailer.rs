//! Instrumentation trailer: the last [`LEN`] bytes of an instrumented frame, written by the
//! engine at send time and read back by the receiver to count per flow and measure latency.
//!
//! Layout, big-endian: 0 marker, 1 run tag, 2..4 flow_id (u16), 4..8 sequence (u32),
//! 8..16 tx timestamp (u64 ns).
//!
//! The marker says who sent the frame last: [`MARK_SENT`] ('S') the generator,
//! [`MARK_REFLECTED`] ('R') a strobe reflector (which never reflects such a frame again, so
//! two reflectors cannot bounce a frame between them). The run tag tells this run's frames
//! from those of other runs (stale frames still in a device's buffers, another generator on
//! the same wire, forged frames): receivers count frames with another tag apart.

pub const LEN: usize = 16;
/// Byte 0 of a frame as the generator sent it.
pub const MARK_SENT: u8 = b'S';
/// Byte 0 of a frame a strobe reflector sent back.
pub const MARK_REFLECTED: u8 = b'R';
pub const MARK_OFFSET: usize = 0;
pub const TAG_OFFSET: usize = 1;
pub const FLOW_ID_OFFSET: usize = 2;
pub const SEQ_OFFSET: usize = 4;
pub const TIMESTAMP_OFFSET: usize = 8;
/// The second byte of the constant "ST" signature of strobe versions before run tags. No
/// run uses it as its tag, so frames of those versions read as another run's.
pub const LEGACY_TAG: u8 = b'T';

/// The trailer of a floor probe frame (sent by `strobe ports --floor` to measure a path, see
/// the engine's `floor`; runs never send them): its marker is neither [`MARK_SENT`] nor [`MARK_REFLECTED`], so no
/// receiver or reflector takes it for traffic, and `strobe analyze` leaves such frames out.
pub const PROBE: [u8; LEN] = *b"P-strobe-floor-P";

/// Whether `frame` (as captured, without FCS) is a floor probe frame.
pub fn is_probe(frame: &[u8]) -> bool {
    frame.len() >= LEN && frame[frame.len() - LEN..] == PROBE
}

/// The values carried in a trailer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trailer {
    /// Marked [`MARK_REFLECTED`] (sent back by a reflector) rather than [`MARK_SENT`].
    pub reflected: bool,
    /// The run tag of the generator that sent the frame.
    pub tag: u8,
    pub flow_id: u16,
    pub seq: u32,
    /// Transmit time in nanoseconds (clock chosen by the engine).
    pub tx_ns: u64,
}

impl Trailer {
    /// A trailer as the generator sends it (marked [`MARK_SENT`]).
    pub fn sent(tag: u8, flow_id: u16, seq: u32, tx_ns: u64) -> Trailer {
        Trailer {
            reflected: false,
            tag,
            flow_id,
            seq,
            tx_ns,
        }
    }

    pub fn write(&self, dst: &mut [u8; LEN]) {
        dst[MARK_OFFSET] = if self.reflected {
            MARK_REFLECTED
        } else {
            MARK_SENT
        };
        dst[TAG_OFFSET] = self.tag;
        dst[FLOW_ID_OFFSET..SEQ_OFFSET].copy_from_slice(&self.flow_id.to_be_bytes());
        dst[SEQ_OFFSET..TIMESTAMP_OFFSET].copy_from_slice(&self.seq.to_be_bytes());
        dst[TIMESTAMP_OFFSET..].copy_from_slice(&self.tx_ns.to_be_bytes());
    }

    /// Decodes a trailer of any run; `None` if byte 0 is no marker.
    pub fn read(src: &[u8; LEN]) -> Option<Trailer> {
        let [mark, tag, f0, f1, q0, q1, q2, q3, t @ ..] = *src;
        matches!(mark, MARK_SENT | MARK_REFLECTED).then(|| Trailer {
            reflected: mark == MARK_REFLECTED,
            tag,
            flow_id: u16::from_be_bytes([f0, f1]),
            seq: u32::from_be_bytes([q0, q1, q2, q3]),
            tx_ns: u64::from_be_bytes(t),
        })
    }

    /// Decodes the trailer in the last [`LEN`] bytes of `frame`; `None` if the frame is
    /// shorter than that or carries no marker there.
    pub fn from_frame(frame: &[u8]) -> Option<Trailer> {
        let start = frame.len().checked_sub(LEN)?;
        let tail: &[u8; LEN] = frame[start..].try_into().ok()?;
        Trailer::read(tail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn layout_is_big_endian_at_documented_offsets() {
        let mut bytes = [0u8; LEN];
        Trailer::sent(0xA5, 0x0102, 0x0304_0506, 0x0708_090A_0B0C_0D0E).write(&mut bytes);
        assert_eq!(
            bytes,
            [0x53, 0xA5, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]
        );
        let reflected = Trailer {
            reflected: true,
            ..Trailer::read(&bytes).unwrap()
        };
        reflected.write(&mut bytes);
        assert_eq!(bytes[..2], [0x52, 0xA5]);
    }

    #[test]
    fn bytes_without_a_marker_are_rejected() {
        let mut bytes = [0u8; LEN];
        Trailer::sent(9, 1, 2, 3).write(&mut bytes);
        bytes[0] ^= 4;
        assert_eq!(Trailer::read(&bytes), None);
    }

    #[test]
    fn frames_of_versions_before_run_tags_read_with_the_legacy_tag() {
        let mut old = [0u8; LEN];
        old[..4].copy_from_slice(&[0x53, 0x54, 0, 1]);
        let t = Trailer::read(&old).unwrap();
        assert_eq!((t.tag, t.flow_id, t.reflected), (LEGACY_TAG, 1, false));
    }

    #[test]
    fn from_frame_reads_the_tail() {
        let trailer = Trailer::sent(1, 7, u32::MAX, u64::MAX);
        let mut frame = vec![0xAA; 60];
        let tail: &mut [u8; LEN] = (&mut frame[60 - LEN..]).try_into().unwrap();
        trailer.write(tail);
        assert_eq!(Trailer::from_frame(&frame), Some(trailer));
        assert_eq!(Trailer::from_frame(&frame[..59]), None);
        assert_eq!(Trailer::from_frame(&frame[44..]), Some(trailer));
        assert_eq!(Trailer::from_frame(&frame[45..]), None);
    }

    proptest! {
        #[test]
        fn round_trip(reflected in any::<bool>(), tag in any::<u8>(), flow_id in any::<u16>(), seq in any::<u32>(), tx_ns in any::<u64>()) {
            let trailer = Trailer { reflected, tag, flow_id, seq, tx_ns };
            let mut bytes = [0u8; LEN];
            trailer.write(&mut bytes);
            prop_assert_eq!(Trailer::read(&bytes), Some(trailer));
        }

        #[test]
        fn from_frame_never_panics(frame in proptest::collection::vec(any::<u8>(), 0..40)) {
            let decoded = Trailer::from_frame(&frame);
            let marked = frame.len() >= LEN
                && matches!(frame[frame.len() - LEN], MARK_SENT | MARK_REFLECTED);
            prop_assert_eq!(decoded.is_some(), marked);
        }
    }
}
