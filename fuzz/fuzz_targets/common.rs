//! What the scenario targets share: a loaded scenario's flows compiled to their templates
//! and a few batches of frames written (sequence numbers from just below the 2^32 wrap).

use strobe_engine::generator::{BatchScratch, TxTime};
use strobe_engine::FlowGenerator;
use strobe_io::TxSlot;
use strobe_model::FlowSpec;

/// Frames written per flow: enough to run every field pattern and size a few steps.
const FRAMES_PER_FLOW: usize = 24;
const BATCH: usize = 8;

/// Compiles the first flows and writes a few batches of each.
pub fn write_frames(flows: &[FlowSpec]) {
    for flow in flows.iter().take(4) {
        let Ok(mut gen) = FlowGenerator::compile(flow, 0x5a, u32::MAX - 10) else {
            continue;
        };
        // A flow's templates have one layout: fields that decide a header's length (GRE's
        // checksum_present, the GTP flags) must not vary from packet to packet.
        let layout = |j: u64| -> Vec<usize> {
            flow.packet
                .iter()
                .map(|h| h.header_at(j).wire_len())
                .collect()
        };
        let first = layout(0);
        for j in 1..FRAMES_PER_FLOW as u64 {
            assert_eq!(layout(j), first, "packet {j} of a flow changes its layout");
        }
        let mut sizes = flow.size.sequence(flow.size_seed);
        let mut bufs: Vec<Vec<u8>> = (0..BATCH).map(|_| Vec::new()).collect();
        let mut holds = vec![u32::MAX; BATCH];
        let mut scratch = BatchScratch::new();
        for round in 0..FRAMES_PER_FLOW / BATCH {
            let templates: Vec<u16> = (0..BATCH)
                .map(|_| gen.template_for(sizes.next_size()))
                .collect();
            // Each buffer as large as its frame, as a backend's slot must be.
            for (buf, &t) in bufs.iter_mut().zip(&templates) {
                buf.resize(gen.frame_len(t).max(buf.len()), 0);
            }
            let mut slots: Vec<TxSlot> = bufs
                .iter_mut()
                .enumerate()
                .map(|(id, buf)| TxSlot {
                    id: id as u32,
                    buf,
                    len: 0,
                    scheduled_ns: 0,
                })
                .collect();
            let which: Vec<u16> = (0..BATCH as u16).collect();
            let tx_ns = 1_700_000_000_000_000_000 + round as u64 * 1000;
            gen.write_batch(
                &mut slots,
                &which,
                &templates,
                TxTime::Same(tx_ns),
                &mut holds,
                &mut scratch,
            );
            for slot in &slots {
                assert!(slot.len <= slot.buf.len());
            }
        }
    }
}
