//! Instrumentation trailer: the last [`LEN`] bytes of an instrumented frame, written by the
//! engine at send time and read back by the receiver to count per flow and measure latency.
//!
//! Layout, big-endian: 0..2 signature, 2..4 flow_id (u16), 4..8 sequence (u32),
//! 8..16 tx timestamp (u64 ns).

pub const LEN: usize = 16;
/// "ST"; tells instrumented frames from others.
pub const SIGNATURE: u16 = 0x5354;
pub const FLOW_ID_OFFSET: usize = 2;
pub const SEQ_OFFSET: usize = 4;
pub const TIMESTAMP_OFFSET: usize = 8;

/// The values carried in a trailer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trailer {
    pub flow_id: u16,
    pub seq: u32,
    /// Transmit time in nanoseconds (clock chosen by the engine).
    pub tx_ns: u64,
}

impl Trailer {
    pub fn write(&self, dst: &mut [u8; LEN]) {
        dst[..FLOW_ID_OFFSET].copy_from_slice(&SIGNATURE.to_be_bytes());
        dst[FLOW_ID_OFFSET..SEQ_OFFSET].copy_from_slice(&self.flow_id.to_be_bytes());
        dst[SEQ_OFFSET..TIMESTAMP_OFFSET].copy_from_slice(&self.seq.to_be_bytes());
        dst[TIMESTAMP_OFFSET..].copy_from_slice(&self.tx_ns.to_be_bytes());
    }

    /// Decodes a trailer; `None` if the signature does not match.
    pub fn read(src: &[u8; LEN]) -> Option<Trailer> {
        let [s0, s1, f0, f1, q0, q1, q2, q3, t @ ..] = *src;
        (u16::from_be_bytes([s0, s1]) == SIGNATURE).then(|| Trailer {
            flow_id: u16::from_be_bytes([f0, f1]),
            seq: u32::from_be_bytes([q0, q1, q2, q3]),
            tx_ns: u64::from_be_bytes(t),
        })
    }

    /// Decodes the trailer in the last [`LEN`] bytes of `frame`; `None` if the frame is
    /// shorter than that or carries no signature there.
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
        Trailer {
            flow_id: 0x0102,
            seq: 0x0304_0506,
            tx_ns: 0x0708_090A_0B0C_0D0E,
        }
        .write(&mut bytes);
        assert_eq!(
            bytes,
            [0x53, 0x54, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]
        );
    }

    #[test]
    fn wrong_signature_is_rejected() {
        let mut bytes = [0u8; LEN];
        Trailer {
            flow_id: 1,
            seq: 2,
            tx_ns: 3,
        }
        .write(&mut bytes);
        bytes[1] ^= 1;
        assert_eq!(Trailer::read(&bytes), None);
    }

    #[test]
    fn from_frame_reads_the_tail() {
        let trailer = Trailer {
            flow_id: 7,
            seq: u32::MAX,
            tx_ns: u64::MAX,
        };
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
        fn round_trip(flow_id in any::<u16>(), seq in any::<u32>(), tx_ns in any::<u64>()) {
            let trailer = Trailer { flow_id, seq, tx_ns };
            let mut bytes = [0u8; LEN];
            trailer.write(&mut bytes);
            prop_assert_eq!(Trailer::read(&bytes), Some(trailer));
        }

        #[test]
        fn from_frame_never_panics(frame in proptest::collection::vec(any::<u8>(), 0..40)) {
            let decoded = Trailer::from_frame(&frame);
            let signed = frame.len() >= LEN
                && frame[frame.len() - LEN..frame.len() - LEN + 2] == SIGNATURE.to_be_bytes();
            prop_assert_eq!(decoded.is_some(), signed);
        }
    }
}
