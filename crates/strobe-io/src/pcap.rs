use std::fs::File;
use std::io::BufWriter;
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{Endianness, TsResolution};

use crate::{slots_of, Backend, BackendStats, IoError, TimeBase, TxBatch, TxSlot, MAX_FRAME_LEN};

/// Frames a trace is written in at once.
const PCAP_SLOTS: usize = 64;

/// Writes every frame with its *scheduled* departure time into a nanosecond pcap: a
/// deterministic trace of exactly what the engine would send, and how timing models are
/// checked. Time starts at the pcap epoch (t0 = 0 s) so traces are byte-for-byte repeatable.
pub struct PcapBackend {
    path: String,
    writer: Option<PcapWriter<BufWriter<File>>>,
    slots: Vec<Box<[u8]>>,
    stats: BackendStats,
}

impl PcapBackend {
    pub fn create(path: &str) -> Result<Self, IoError> {
        let file = File::create(path).map_err(|source| IoError::File {
            what: "cannot create pcap file",
            path: path.to_string(),
            source,
        })?;
        let header = PcapHeader {
            ts_resolution: TsResolution::NanoSecond,
            endianness: Endianness::native(),
            snaplen: MAX_FRAME_LEN as u32,
            ..PcapHeader::default()
        };
        let writer = PcapWriter::with_header(BufWriter::with_capacity(1 << 20, file), header)
            .map_err(|e| write_error(path, e))?;
        Ok(PcapBackend {
            path: path.to_string(),
            writer: Some(writer),
            slots: (0..PCAP_SLOTS)
                .map(|_| vec![0u8; MAX_FRAME_LEN].into_boxed_slice())
                .collect(),
            stats: BackendStats::default(),
        })
    }
}

fn write_error(path: &str, e: pcap_file::PcapError) -> IoError {
    let source = match e {
        pcap_file::PcapError::IoError(io) => io,
        other => std::io::Error::other(other.to_string()),
    };
    IoError::File {
        what: "cannot write pcap file",
        path: path.to_string(),
        source,
    }
}

impl Backend for PcapBackend {
    fn describe(&self) -> String {
        format!(
            "pcap:{} (nanosecond pcap, scheduled departure times)",
            self.path
        )
    }
    fn slot_count(&self) -> usize {
        PCAP_SLOTS
    }
    fn max_frame_len(&self) -> usize {
        MAX_FRAME_LEN
    }
    fn time_base(&self) -> TimeBase {
        TimeBase::Scheduled
    }
    fn transmit<F>(&mut self, count: usize, fill: F) -> Result<usize, IoError>
    where
        F: FnOnce(&mut [TxSlot<'_>]),
    {
        let Some(writer) = self.writer.as_mut() else {
            return Err(IoError::Other(format!(
                "pcap:{} is already closed",
                self.path
            )));
        };
        let mut batch = TxBatch::new();
        slots_of(&mut self.slots, count, &mut batch);
        fill(&mut batch);
        for slot in &batch {
            let packet = PcapPacket::new(
                Duration::from_nanos(slot.scheduled_ns),
                slot.len as u32,
                &slot.buf[..slot.len],
            );
            writer
                .write_packet(&packet)
                .map_err(|e| write_error(&self.path, e))?;
            self.stats.frames += 1;
            self.stats.bytes += slot.len as u64;
        }
        Ok(batch.len())
    }
    fn finish(&mut self) -> Result<BackendStats, IoError> {
        if let Some(writer) = self.writer.take() {
            use std::io::Write;
            writer
                .into_writer()
                .flush()
                .map_err(|source| IoError::File {
                    what: "cannot write pcap file",
                    path: self.path.clone(),
                    source,
                })?;
        }
        Ok(self.stats)
    }
}

impl Drop for PcapBackend {
    fn drop(&mut self) {
        // Best effort: a run cut short still leaves a readable file behind.
        let _ = self.finish();
    }
}
