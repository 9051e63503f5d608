//! The AF_PACKET ring parsers over arbitrary bytes: a TPACKET_V3 block and a TPACKET_V2
//! slot as the kernel would hand them over. Headers are read from shared memory; a bad
//! offset or length must be refused, never followed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strobe_io::afpacket::fuzzing::{read_v2_slot, walk_v3_block};

fuzz_target!(|data: &[u8]| {
    let _ = walk_v3_block(data, &mut |frame, _wire_len, _ts| {
        assert!(frame.len() <= data.len());
    });
    if let Some((frame, wire_len)) = read_v2_slot(data) {
        assert!(frame.len() <= data.len());
        assert!(
            frame.len() as u64 <= u64::from(wire_len),
            "snapped frame longer than on the wire"
        );
    }
});
