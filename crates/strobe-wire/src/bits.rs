//! Big-endian bit fields, as protocol headers lay them out: bit 0 is the most significant
//! bit of `buf[0]`, and a field's most significant bit comes first.

/// Writes the low `bit_len` bits of `value` at `bit_offset`, leaving every other bit of
/// `buf` untouched. Bits of `value` above `bit_len` are ignored.
///
/// # Panics
/// If `bit_len` is not in `1..=128` or the field does not lie inside `buf` (caller bug).
pub fn write_bits(buf: &mut [u8], bit_offset: usize, bit_len: u32, value: u128) {
    let end = field_end(buf.len(), bit_offset, bit_len);
    let (first, last) = (bit_offset / 8, (end - 1) / 8);
    for (index, byte) in (first..).zip(&mut buf[first..=last]) {
        let span = ByteSpan::new(index, bit_offset, end);
        let chunk = ((value >> span.value_shift) as u8) & span.mask;
        *byte = (*byte & !(span.mask << span.byte_shift)) | (chunk << span.byte_shift);
    }
}

/// Reads the `bit_len`-bit field at `bit_offset`.
///
/// # Panics
/// If `bit_len` is not in `1..=128` or the field does not lie inside `buf` (caller bug).
pub fn read_bits(buf: &[u8], bit_offset: usize, bit_len: u32) -> u128 {
    let end = field_end(buf.len(), bit_offset, bit_len);
    let mut value = 0u128;
    let (first, last) = (bit_offset / 8, (end - 1) / 8);
    for (index, byte) in (first..).zip(&buf[first..=last]) {
        let span = ByteSpan::new(index, bit_offset, end);
        let chunk = (byte >> span.byte_shift) & span.mask;
        value |= u128::from(chunk) << span.value_shift;
    }
    value
}

/// Validates the field and returns its exclusive end bit.
fn field_end(buf_len: usize, bit_offset: usize, bit_len: u32) -> usize {
    assert!(
        (1..=128).contains(&bit_len),
        "bit field length {bit_len} is outside 1..=128"
    );
    let end = bit_offset
        .checked_add(bit_len as usize)
        .expect("bit offset overflows usize");
    assert!(
        end <= buf_len * 8,
        "bit field {bit_offset}..{end} lies outside a buffer of {buf_len} bytes"
    );
    end
}

/// The part of a field `[start, end)` (in bits) that falls into one byte.
struct ByteSpan {
    /// Mask of the span's width, right-aligned.
    mask: u8,
    /// How far the span sits from the byte's least significant bit.
    byte_shift: u32,
    /// How far the span sits from the field value's least significant bit.
    value_shift: u32,
}

impl ByteSpan {
    fn new(index: usize, start: usize, end: usize) -> Self {
        let byte_start = index * 8;
        let lo = start.max(byte_start);
        let hi = end.min(byte_start + 8);
        let width = (hi - lo) as u32;
        ByteSpan {
            mask: (0xFFu16 >> (8 - width)) as u8,
            byte_shift: (byte_start + 8 - hi) as u32,
            value_shift: (end - hi) as u32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_layouts() {
        // IPv4 version/IHL nibbles and a 13-bit fragment offset behind three flag bits.
        let mut buf = [0u8; 4];
        write_bits(&mut buf, 0, 4, 4);
        write_bits(&mut buf, 4, 4, 5);
        write_bits(&mut buf, 17, 1, 1);
        write_bits(&mut buf, 19, 13, 0x1ABC);
        assert_eq!(buf, [0x45, 0x00, 0x5A, 0xBC]);
        assert_eq!(read_bits(&buf, 19, 13), 0x1ABC);
        assert_eq!(read_bits(&buf, 0, 32), 0x4500_5ABC);
    }

    #[test]
    fn excess_value_bits_are_ignored() {
        let mut buf = [0u8; 2];
        write_bits(&mut buf, 4, 4, 0xFF);
        assert_eq!(buf, [0x0F, 0x00]);
    }

    #[test]
    fn full_width_128_bits_unaligned() {
        let mut buf = [0u8; 17];
        let value = 0x0123_4567_89AB_CDEF_FEDC_BA98_7654_3210u128;
        write_bits(&mut buf, 3, 128, value);
        assert_eq!(read_bits(&buf, 3, 128), value);
        assert_eq!(read_bits(&buf, 0, 3), 0);
        assert_eq!(read_bits(&buf, 131, 5), 0);
    }

    #[test]
    #[should_panic(expected = "outside a buffer")]
    fn out_of_range_panics() {
        write_bits(&mut [0u8; 2], 9, 8, 1);
    }

    #[test]
    #[should_panic(expected = "outside 1..=128")]
    fn zero_length_panics() {
        read_bits(&[0u8; 2], 0, 0);
    }

    proptest! {
        #[test]
        fn round_trip_leaves_neighbours_untouched(
            background in proptest::collection::vec(any::<u8>(), 18),
            bit_offset in 0usize..16,
            bit_len in 1u32..=128,
            value in any::<u128>(),
        ) {
            let mut buf = background.clone();
            write_bits(&mut buf, bit_offset, bit_len, value);
            let mask = if bit_len == 128 { u128::MAX } else { (1u128 << bit_len) - 1 };
            prop_assert_eq!(read_bits(&buf, bit_offset, bit_len), value & mask);
            let end = bit_offset + bit_len as usize;
            for bit in (0..bit_offset).chain(end..buf.len() * 8) {
                prop_assert_eq!(
                    read_bits(&buf, bit, 1),
                    read_bits(&background, bit, 1),
                    "bit {} changed", bit
                );
            }
        }
    }
}
