use crate::{Backend, BackendStats, IoError, TimeBase, TxBatch, TxSlot, MAX_BATCH, MAX_FRAME_LEN};

/// Drops every frame after the engine has done all per-packet work on it: the way the
/// engine's own cost is measured. Slots keep their contents between calls, like ring frames.
pub struct NullBackend {
    slots: Vec<Box<[u8]>>,
    stats: BackendStats,
}

impl NullBackend {
    pub fn new(slot_count: usize) -> Self {
        NullBackend {
            slots: (0..slot_count.clamp(1, MAX_BATCH))
                .map(|_| vec![0u8; MAX_FRAME_LEN].into_boxed_slice())
                .collect(),
            stats: BackendStats::default(),
        }
    }
}

/// Puts the first `count` buffers of `slots` into `batch` (slot id = index). Filled in place:
/// a batch is kilobytes, too big to return by value on every call.
#[inline(always)]
pub fn slots_of<'a>(slots: &'a mut [Box<[u8]>], count: usize, batch: &mut TxBatch<'a>) {
    for (id, buf) in slots.iter_mut().take(count.min(MAX_BATCH)).enumerate() {
        batch.push(TxSlot::blank(id as u32, buf));
    }
}

impl Backend for NullBackend {
    fn describe(&self) -> String {
        "null (frames dropped after all per-packet work)".to_string()
    }
    fn slot_count(&self) -> usize {
        self.slots.len()
    }
    fn max_frame_len(&self) -> usize {
        MAX_FRAME_LEN
    }
    fn time_base(&self) -> TimeBase {
        TimeBase::RealTime
    }
    fn transmit<F>(&mut self, count: usize, fill: F) -> Result<usize, IoError>
    where
        F: FnOnce(&mut [TxSlot<'_>]),
    {
        let mut batch = TxBatch::new();
        slots_of(&mut self.slots, count, &mut batch);
        fill(&mut batch);
        for slot in &batch {
            // Keep the written frame observable so the compiler cannot drop the work.
            std::hint::black_box(&slot.buf[..slot.len]);
            self.stats.bytes += slot.len as u64;
        }
        self.stats.frames += batch.len() as u64;
        Ok(batch.len())
    }
    fn finish(&mut self) -> Result<BackendStats, IoError> {
        Ok(self.stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_keep_contents_and_ids_are_stable() {
        let mut b = NullBackend::new(4);
        let mut seen = Vec::new();
        b.transmit(4, |slots| {
            for s in slots.iter_mut() {
                s.buf[0] = s.id as u8 + 10;
                s.len = 60;
                seen.push(s.id);
            }
        })
        .unwrap();
        assert_eq!(seen, vec![0, 1, 2, 3]);
        b.transmit(2, |slots| {
            assert_eq!(slots.len(), 2);
            for s in slots.iter_mut() {
                assert_eq!(s.buf[0], s.id as u8 + 10, "slot {} lost its contents", s.id);
                s.len = 60;
            }
        })
        .unwrap();
        assert_eq!(
            b.finish().unwrap(),
            BackendStats {
                frames: 6,
                bytes: 360,
                segmentation: None,
                xmit_errors: None,
                tx_stamps: None,
            }
        );
    }
}
