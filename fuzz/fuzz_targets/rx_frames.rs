//! The received-frame path: trailer decoding, flow lookup and per-flow counting in the
//! receive tracker (run tag, stamp window, excess), and the reflector's address swap and
//! marker rewrite. Received frames are untrusted: nothing
//! here may panic, whatever the bytes.
//!
//! Input: byte 0 picks the run tag (its low bits also the number of flows (1 to 8: each has a latency histogram, and
//! executions per second matter more than flow ids past the first few)); the rest is a sequence of frames, each a 2-byte
//! big-endian length followed by that many bytes (the last one takes what is left).
#![no_main]

use libfuzzer_sys::fuzz_target;
use strobe_engine::rx::RxTracker;
use strobe_wire::reflect::{mark_reflected, swap_addresses};

fuzz_target!(|data: &[u8]| {
    let Some((&flows, mut rest)) = data.split_first() else {
        return;
    };
    let mut tracker = RxTracker::new(usize::from(flows % 8) + 1, flows);
    let mut rx_ns = 1_700_000_000_000_000_000u64;
    while !rest.is_empty() {
        let (frame, tail) = match rest {
            [a, b, tail @ ..] => {
                let len = usize::from(u16::from_be_bytes([*a, *b])).min(tail.len());
                tail.split_at(len)
            }
            _ => (rest, &[][..]),
        };
        rest = tail;
        // Wire lengths both as captured and larger (a snapped frame).
        tracker.on_frame(frame, frame.len() as u32, Some(rx_ns));
        tracker.on_frame(frame, frame.len() as u32 + 4, None);
        rx_ns = rx_ns.wrapping_add(u64::from(frame.first().copied().unwrap_or(1)) << 20);

        // Swapping twice gives the frame back: the swap is an involution on any bytes.
        let mut swapped = frame.to_vec();
        if swap_addresses(&mut swapped).is_some() {
            swap_addresses(&mut swapped);
            assert_eq!(swapped, frame, "swapping twice changed the frame");
        } else {
            assert_eq!(swapped, frame, "a refused swap changed the frame");
        }
        // The reflector's marker rewrite changes the frame only when it succeeds.
        if mark_reflected(&mut swapped).is_err() {
            assert_eq!(swapped, frame, "a refused mark changed the frame");
        }
    }
    let sent: Vec<u64> = (0..tracker.flow_count() as u64).collect();
    let _ = tracker.report(Some(&sent));
    tracker.finalise();
    let copy = tracker.clone();
    tracker.absorb(&copy);
});
