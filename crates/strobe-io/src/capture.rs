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
    let bad = |detail: String| IoError::BadCapture {
        path: path.to_string(),
        detail,
    };
    let meta = file.metadata().map_err(|source| IoError::File {
        what: "cannot read capture",
        path: path.to_string(),
        source,
    })?;
    if meta.is_dir() {
        return Err(bad("it is a folder, not a capture file".into()));
    }
    if meta.len() == 0 {
        return Err(bad("the file is empty (0 bytes)".into()));
    }
    let mut magic = [0u8; 4];
    let is_ng = file.read_exact(&mut magic).is_ok() && magic == PCAPNG_MAGIC;
    drop(file);
    // pcap-file names no offset and says "Error reading bytes" for most broken files: on
    // an error, the file's structure is walked to say where and what is wrong.
    let bad = |detail: String| {
        let diagnosis = if is_ng {
            diagnose_pcapng(path)
        } else {
            diagnose_pcap(path)
        };
        bad(diagnosis.unwrap_or(detail))
    };
    let reader = BufReader::with_capacity(
        1 << 20,
        File::open(path).map_err(|source| IoError::File {
            what: "cannot open capture",
            path: path.to_string(),
            source,
        })?,
    );
    if is_ng {
        read_pcapng(reader, keep_data, &mut each).map_err(bad)
    } else {
        let mut r = PcapReader::new(reader).map_err(|e| bad(e.to_string()))?;
        let resolution_ns = match r.header().ts_resolution {
            TsResolution::NanoSecond => 1,
            TsResolution::MicroSecond => 1000,
        };
        // Where each record starts, for messages about a field's value (e.g. a nanosecond
        // count of 10⁹ or more) that the structure walk does not catch.
        let (mut offset, mut record) = (24u64, 0u64);
        // Raw records, checked here: pcap-file 2.0's own check refuses a frame longer than
        // the snap length, which is what every capture cut short (`tcpdump -s 64`, OTG's
        // packet_size) holds.
        while let Some(packet) = r.next_raw_packet() {
            let at = |what: &str| format!("offset {offset}: record {record}: {what}");
            let packet = packet.map_err(|e| bad(at(&e.to_string())))?;
            let frac_ns = u64::from(packet.ts_frac) * resolution_ns;
            if frac_ns >= 1_000_000_000 {
                return Err(bad(at(
                    "ts_nanosecond >= 1000000000: the timestamp's fraction is a second or more",
                )));
            }
            if packet.incl_len > packet.orig_len {
                return Err(bad(at("more bytes kept than the frame's length")));
            }
            offset += 16 + packet.data.len() as u64;
            record += 1;
            each(CapturedFrame {
                ts_ns: u64::from(packet.ts_sec) * 1_000_000_000 + frac_ns,
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

/// Reads as many bytes as the file still has, up to `buf.len()`.
fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> usize {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    got
}

/// What is structurally wrong with a classic pcap file, with its offset; None when the
/// structure holds (the problem is then in a field's value).
fn diagnose_pcap(path: &str) -> Option<String> {
    let file = File::open(path).ok()?;
    let file_len = file.metadata().ok()?.len();
    let mut r = BufReader::new(file);
    let mut header = [0u8; 24];
    let got = read_up_to(&mut r, &mut header);
    let magic = [header[0], header[1], header[2], header[3]];
    let little = match u32::from_le_bytes(magic) {
        0xa1b2_c3d4 | 0xa1b2_3c4d => true,
        0xd4c3_b2a1 | 0x4d3c_b2a1 => false,
        _ => {
            return Some(format!(
                "offset 0: unknown magic number {:02x} {:02x} {:02x} {:02x} (a pcap starts with \
                 d4 c3 b2 a1 or a1 b2 c3 d4, a pcapng with 0a 0d 0d 0a)",
                magic[0], magic[1], magic[2], magic[3]
            ))
        }
    };
    if got < 24 {
        return Some(format!(
            "offset 0: truncated file header: {got} of its 24 bytes (the file is {file_len} bytes)"
        ));
    }
    let word = |b: &[u8]| {
        let b = [b[0], b[1], b[2], b[3]];
        if little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }
    };
    let snap_len = word(&header[16..20]);
    let mut offset: u64 = 24;
    let mut record = 0u64;
    while offset < file_len {
        let mut rec = [0u8; 16];
        let got = read_up_to(&mut r, &mut rec);
        if got < 16 {
            return Some(format!(
                "offset {offset}: record {record} is truncated: its header has {got} of 16 bytes \
                 (the file ends there)"
            ));
        }
        let (incl_len, orig_len) = (word(&rec[8..12]), word(&rec[12..16]));
        let left = file_len.saturating_sub(offset).saturating_sub(16);
        if incl_len > snap_len.max(MAX_PLAUSIBLE_FRAME) {
            return Some(format!(
                "offset {offset}: record {record} claims {incl_len} captured bytes, more than the \
                 file's snap length {snap_len} (a corrupt length field)"
            ));
        }
        if u64::from(incl_len) > left {
            return Some(format!(
                "offset {offset}: record {record} is truncated: it claims {incl_len} bytes of \
                 frame data, the file has {left} left"
            ));
        }
        if orig_len < incl_len {
            return Some(format!(
                "offset {offset}: record {record} has a captured length {incl_len} larger than \
                 its frame length {orig_len}"
            ));
        }
        std::io::copy(
            &mut (&mut r).take(u64::from(incl_len)),
            &mut std::io::sink(),
        )
        .ok()?;
        offset += 16 + u64::from(incl_len);
        record += 1;
    }
    None
}

/// Frames larger than this are no frames: a length field beyond it is corrupt even where a
/// file's snap length (often 262144, sometimes 0 or 2³²−1) would allow it.
const MAX_PLAUSIBLE_FRAME: u32 = 262_144;

/// What is structurally wrong with a pcapng file (block by block), with its offset; None
/// when every block's framing holds.
fn diagnose_pcapng(path: &str) -> Option<String> {
    let file = File::open(path).ok()?;
    let file_len = file.metadata().ok()?.len();
    let mut r = BufReader::new(file);
    let mut offset: u64 = 0;
    let mut little = true;
    let mut block = 0u64;
    while offset < file_len {
        let mut head = [0u8; 12];
        let got = read_up_to(&mut r, &mut head);
        if got < 12 {
            return Some(format!(
                "offset {offset}: block {block} is truncated: {got} bytes where a block needs at \
                 least 12"
            ));
        }
        let block_type = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        if block_type == 0x0a0d_0d0a {
            // A section header: its byte-order magic sets the endianness of what follows.
            little = head[8..12] == [0x4d, 0x3c, 0x2b, 0x1a];
            if !little && head[8..12] != [0x1a, 0x2b, 0x3c, 0x4d] {
                return Some(format!(
                    "offset {}: section header with an unknown byte-order magic",
                    offset + 8
                ));
            }
        }
        let len_bytes = [head[4], head[5], head[6], head[7]];
        let total = if little {
            u32::from_le_bytes(len_bytes)
        } else {
            u32::from_be_bytes(len_bytes)
        };
        if total < 12 || total % 4 != 0 {
            return Some(format!(
                "offset {offset}: block {block} has an invalid length {total} (at least 12 and a \
                 multiple of 4)"
            ));
        }
        let left = file_len - offset;
        if u64::from(total) > left {
            return Some(format!(
                "offset {offset}: block {block} claims {total} bytes, the file has {left} left \
                 (truncated, or a corrupt length field)"
            ));
        }
        std::io::copy(
            &mut (&mut r).take(u64::from(total) - 12),
            &mut std::io::sink(),
        )
        .ok()?;
        offset += u64::from(total);
        block += 1;
    }
    None
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
