use std::fs::File;
use std::io::{BufReader, Read};

use pcap_file::pcap::PcapReader;
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
use pcap_file::pcapng::{Block, PcapNgReader};
use pcap_file::TsResolution;

use crate::IoError;

/// One frame read from a capture file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapturedFrame {
    /// Capture timestamp in ns since the Unix epoch.
    pub ts_ns: u64,
    /// Length of the frame on the wire (may exceed `data.len()` when the capture was snapped).
    pub orig_len: u32,
    pub data: Vec<u8>,
}

/// Facts about a capture file as a whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaptureInfo {
    /// "pcap" or "pcapng".
    pub format: &'static str,
    /// Finest timestamp step the file can express, in ns (1 for nanosecond pcaps).
    pub resolution_ns: u64,
}

const PCAPNG_MAGIC: [u8; 4] = [0x0A, 0x0D, 0x0D, 0x0A];

/// Reads every frame of a pcap or pcapng file, calling `each` in file order.
/// `keep_data = false` skips copying frame bytes (timestamps and lengths only).
pub fn read_capture(
    path: &str,
    keep_data: bool,
    mut each: impl FnMut(CapturedFrame),
) -> Result<CaptureInfo, IoError> {
    let mut file = File::open(path).map_err(|source| IoError::File {
        what: "cannot open capture",
        path: path.to_string(),
        source,
    })?;
    let mut magic = [0u8; 4];
    let is_ng = file.read_exact(&mut magic).is_ok() && magic == PCAPNG_MAGIC;
    drop(file);
    let reader = BufReader::with_capacity(
        1 << 20,
        File::open(path).map_err(|source| IoError::File {
            what: "cannot open capture",
            path: path.to_string(),
            source,
        })?,
    );
    let bad = |detail: String| IoError::BadCapture {
        path: path.to_string(),
        detail,
    };
    if is_ng {
        read_pcapng(reader, keep_data, &mut each).map_err(bad)
    } else {
        let mut r = PcapReader::new(reader).map_err(|e| bad(e.to_string()))?;
        let resolution_ns = match r.header().ts_resolution {
            TsResolution::NanoSecond => 1,
            TsResolution::MicroSecond => 1000,
        };
        while let Some(packet) = r.next_packet() {
            let packet = packet.map_err(|e| bad(e.to_string()))?;
            each(CapturedFrame {
                ts_ns: packet.timestamp.as_nanos() as u64,
                orig_len: packet.orig_len,
                data: if keep_data {
                    packet.data.into_owned()
                } else {
                    Vec::new()
                },
            });
        }
        Ok(CaptureInfo {
            format: "pcap",
            resolution_ns,
        })
    }
}

/// pcapng stores timestamps in per-interface units (if_tsresol, default µs). pcap-file 2.0
/// hands the raw count back as if it were ns, so the units are converted here.
fn read_pcapng(
    reader: impl Read,
    keep_data: bool,
    each: &mut impl FnMut(CapturedFrame),
) -> Result<CaptureInfo, String> {
    let mut r = PcapNgReader::new(reader).map_err(|e| e.to_string())?;
    // Units per second of each interface, indexed by interface id.
    let mut units: Vec<u128> = Vec::new();
    while let Some(block) = r.next_block() {
        match block.map_err(|e| e.to_string())? {
            Block::InterfaceDescription(idb) => {
                let mut per_second: u128 = 1_000_000;
                for opt in &idb.options {
                    if let InterfaceDescriptionOption::IfTsResol(v) = opt {
                        let exp = u32::from(v & 0x7f);
                        per_second = if v & 0x80 == 0 {
                            10u128.checked_pow(exp).ok_or("if_tsresol out of range")?
                        } else {
                            2u128.checked_pow(exp).ok_or("if_tsresol out of range")?
                        };
                    }
                }
                units.push(per_second);
            }
            Block::EnhancedPacket(epb) => {
                let per_second = *units
                    .get(epb.interface_id as usize)
                    .ok_or("packet names an interface that was never described")?;
                let raw = epb.timestamp.as_nanos();
                each(CapturedFrame {
                    ts_ns: (raw * 1_000_000_000 / per_second) as u64,
                    orig_len: epb.original_len,
                    data: if keep_data {
                        epb.data.into_owned()
                    } else {
                        Vec::new()
                    },
                });
            }
            _ => {}
        }
    }
    let finest = units.iter().copied().max().unwrap_or(1_000_000);
    Ok(CaptureInfo {
        format: "pcapng",
        resolution_ns: (1_000_000_000 / finest).max(1) as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Backend, PcapBackend};

    #[test]
    fn pcap_round_trip_keeps_nanoseconds() {
        let dir = std::env::temp_dir().join(format!("strobe-io-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("rt.pcap");
        let path = path.to_str().unwrap();
        let mut b = PcapBackend::create(path).unwrap();
        let times = [1u64, 1_000_000_007, 5_000_000_123];
        b.transmit(3, |slots| {
            for (i, slot) in slots.iter_mut().enumerate() {
                slot.buf[..60].fill(i as u8);
                slot.len = 60 + i;
                slot.scheduled_ns = times[i];
            }
        })
        .unwrap();
        b.finish().unwrap();
        let mut got = Vec::new();
        let info = read_capture(path, true, |f| got.push(f)).unwrap();
        assert_eq!(info.resolution_ns, 1);
        assert_eq!(got.len(), 3);
        for (i, f) in got.iter().enumerate() {
            assert_eq!(f.ts_ns, times[i]);
            assert_eq!(f.orig_len as usize, 60 + i);
            assert_eq!(f.data[0], i as u8);
        }
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn garbage_file_is_a_clear_error() {
        let path = std::env::temp_dir().join(format!("strobe-io-bad-{}.pcap", std::process::id()));
        std::fs::write(&path, b"this is not a capture").unwrap();
        let err = read_capture(path.to_str().unwrap(), false, |_| {}).unwrap_err();
        assert!(err.to_string().contains("not a readable pcap"), "{err}");
        std::fs::remove_file(path).unwrap();
    }
}
