//! Internet checksum (RFC 1071) building blocks.
//!
//! Sums are kept unfolded in a `u64` so that partial sums of separate byte ranges (pseudo
//! header, header, payload) can simply be added; fold once at the end.

/// Sums `bytes` as big-endian 16-bit words starting at `bytes[0]`; an odd trailing byte is
/// padded with a zero low byte.
pub fn sum_words(bytes: &[u8]) -> u64 {
    let mut words = bytes.chunks_exact(2);
    let mut sum: u64 = words
        .by_ref()
        .map(|pair| u64::from(u16::from_be_bytes([pair[0], pair[1]])))
        .sum();
    if let [last] = words.remainder() {
        sum += u64::from(*last) << 8;
    }
    sum
}

/// Folds carries back into the low 16 bits (end-around carry). Not complemented.
pub fn fold(mut sum: u64) -> u16 {
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    sum as u16
}

/// The checksum field value for `sum`: the ones' complement of the folded sum.
pub fn checksum(sum: u64) -> u16 {
    !fold(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // The worked example of RFC 1071 section 3: words 0001 f203 f4f5 f6f7.
        let bytes = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(sum_words(&bytes), 0x2_ddf0);
        assert_eq!(fold(sum_words(&bytes)), 0xddf2);
        assert_eq!(checksum(sum_words(&bytes)), 0x220d);
    }

    #[test]
    fn odd_byte_is_padded_low() {
        assert_eq!(sum_words(&[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
        assert_eq!(sum_words(&[]), 0);
    }

    #[test]
    fn fold_handles_multiple_carries() {
        assert_eq!(fold(0xFFFF_FFFF_FFFF), 0xFFFF);
        assert_eq!(fold(0x1_0000), 1);
    }

    #[test]
    fn data_with_its_checksum_sums_to_all_ones() {
        let mut bytes = vec![0x45, 0x00, 0x00, 0x54, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11];
        bytes.extend_from_slice(&[0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
        let value = checksum(sum_words(&bytes));
        bytes[10..12].copy_from_slice(&value.to_be_bytes());
        assert_eq!(fold(sum_words(&bytes)), 0xFFFF);
    }
}
