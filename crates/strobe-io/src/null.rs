use crate::{Backend, BackendStats, Filled, IoError, TimeBase, MAX_FRAME_LEN};

/// Drops every frame after the engine has done all per-packet work on it: the way the
/// engine's own cost is measured. Slots keep their contents between calls, like ring frames.
pub struct NullBackend {
    slots: Vec<Box<[u8]>>,
    stats: BackendStats,
}

impl NullBackend {
    pub fn new(slot_count: usize) -> Self {
        NullBackend {
            slots: (0..slot_count.max(1))
                .map(|_| vec![0u8; MAX_FRAME_LEN].into_boxed_slice())
                .collect(),
            stats: BackendStats::default(),
        }
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
    fn transmit<F>(&mut self, count: usize, mut fill: F) -> Result<usize, IoError>
    where
        F: FnMut(u32, &mut [u8]) -> Filled,
    {
        let count = count.min(self.slots.len());
        for (id, slot) in self.slots[..count].iter_mut().enumerate() {
            let filled = fill(id as u32, slot);
            // Keep the written frame observable so the compiler cannot drop the work.
            std::hint::black_box(&slot[..filled.len]);
            self.stats.frames += 1;
            self.stats.bytes += filled.len as u64;
        }
        Ok(count)
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
        b.transmit(4, |id, buf| {
            buf[0] = id as u8 + 10;
            seen.push(id);
            Filled {
                len: 60,
                scheduled_ns: 0,
            }
        })
        .unwrap();
        assert_eq!(seen, vec![0, 1, 2, 3]);
        b.transmit(2, |id, buf| {
            assert_eq!(buf[0], id as u8 + 10, "slot {id} lost its contents");
            Filled {
                len: 60,
                scheduled_ns: 0,
            }
        })
        .unwrap();
        assert_eq!(
            b.finish().unwrap(),
            BackendStats {
                frames: 6,
                bytes: 360
            }
        );
    }
}
