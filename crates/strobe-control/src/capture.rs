//! Port captures, as OTG defines them: every frame a port receives, kept until the capture
//! is read, written as pcap or pcapng with the FCS the wire carried (a 128-byte OTG frame
//! is 128 bytes in the capture; receivers are not handed the FCS, so it is computed again).
//!
//! A capture keeps the frames its OTG `filters` match (see `capture_filter`), each cut to
//! its `packet_size` when one is given (the pcap records keep the frame's full length).
//!
//! A capture has an AF_PACKET socket of its own, so a run's receive worker on the same port
//! keeps its own copy of every frame and is not slowed by the capture's. An AF_XDP port's
//! frames go to its XDP socket before AF_PACKET sees them, so such ports are not captured
//! (the error says to use an AF_PACKET location for the port).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::{DataLink, Endianness, TsResolution};
use strobe_io::{AnyReceiver, Location, Receiver};

use crate::capture_filter::FrameFilter;
use crate::ControlError;

/// Most bytes of frames one capture keeps; later frames are counted, not kept.
pub const MAX_CAPTURE_BYTES: usize = 1 << 30;

/// pcap or pcapng, as OTG's `captures[].format` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaptureFormat {
    Pcap,
    PcapNg,
}

/// What a config's capture keeps and how it writes it: OTG's `format`, `filters` and
/// `packet_size`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaptureSettings {
    pub format: CaptureFormat,
    pub filter: FrameFilter,
    /// Most bytes kept of each frame (FCS included); None keeps whole frames.
    pub packet_size: Option<u32>,
}

/// One captured frame: its bytes with FCS (cut to the capture's packet size), how long it
/// was, and when it arrived (CLOCK_REALTIME ns).
struct Frame {
    ts_ns: u64,
    len: u32,
    bytes: Vec<u8>,
}

/// What a capture thread gathered.
#[derive(Default)]
struct Gathered {
    frames: Vec<Frame>,
    kept_bytes: usize,
    /// Frames received but not kept (the byte limit was reached).
    missed: u64,
}

/// A capture that is running.
pub struct Capture {
    settings: CaptureSettings,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<Gathered, ControlError>>>,
}

/// The receive location a capture opens for a port location: AF_PACKET on its interface.
fn capture_location(location: &Location) -> Result<Location, ControlError> {
    let bad = |why: &str| ControlError::BadInput(format!("`{location}` cannot be captured: {why}"));
    match location {
        Location::AfXdp { .. } | Location::AfXdpAllQueues { .. } | Location::Auto { .. } => Err(bad(
            "its frames go to an AF_XDP socket, which AF_PACKET captures do not see — give the \
             port an AF_PACKET location (an interface name, afpacket:IFACE or lab:rx)",
        )),
        // The counting program passes the frames it counted on while a capture runs (see
        // the engine's `pass_counted`), so AF_PACKET sees them.
        Location::AfPacket { netns, iface, .. } | Location::XdpCount { netns, iface } => {
            Ok(Location::AfPacket {
                netns: netns.clone(),
                iface: iface.clone(),
                gso: false,
            })
        }
        Location::XdpLive { .. } => Err(bad(
            "xdp-live frames leave through the driver's XDP path, which AF_PACKET captures on \
             the sending side do not see — capture at the receiving port instead",
        )),
        Location::Pcap(_) => Err(bad("a pcap: port only writes frames")),
        Location::Null => Err(bad("a null port has no wire")),
    }
}

impl Capture {
    /// Starts capturing on the port at `location` (its `lab:` name resolved).
    pub fn start(location: &Location, settings: CaptureSettings) -> Result<Capture, ControlError> {
        let rx_location = capture_location(location)?;
        let mut receiver = AnyReceiver::open_at(&rx_location, false)
            .map_err(|e| ControlError::BadInput(format!("cannot capture on `{location}`: {e}")))?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let (filter, packet_size) = (settings.filter.clone(), settings.packet_size);
        let thread = std::thread::Builder::new()
            .name("capture".into())
            .spawn(move || gather(&mut receiver, &flag, &filter, packet_size))
            .map_err(|e| ControlError::Runtime(format!("cannot start a capture thread: {e}")))?;
        Ok(Capture {
            settings,
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the capture and returns its frames as bytes of its format, and how many
    /// frames it matched but did not keep (its byte limit was reached).
    pub fn finish(mut self) -> Result<(Vec<u8>, u64), ControlError> {
        self.stop.store(true, Ordering::Relaxed);
        let gathered = match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| ControlError::Runtime("the capture thread panicked".into()))??,
            None => Gathered::default(),
        };
        let missed = gathered.missed;
        let s = &self.settings;
        Ok((write(&gathered.frames, s.format, s.packet_size)?, missed))
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn gather(
    receiver: &mut AnyReceiver,
    stop: &AtomicBool,
    filter: &FrameFilter,
    packet_size: Option<u32>,
) -> Result<Gathered, ControlError> {
    let mut g = Gathered::default();
    // After the stop, what the ring holds is still taken, a bounded number of rounds: a
    // port receiving faster than this thread keeps never has an empty ring.
    let mut rounds_left: Option<u32> = None;
    loop {
        if let Some(n) = rounds_left.as_mut() {
            if *n == 0 {
                return Ok(g);
            }
            *n -= 1;
        } else if stop.load(Ordering::Relaxed) {
            rounds_left = Some(64);
        }
        let got = receiver
            .poll(256, |f| {
                let mut bytes = Vec::with_capacity(f.data.len() + 8);
                // Frames the kernel took the VLAN tag out of get it back, as on the wire.
                match f.vlan {
                    Some(tag) if f.data.len() >= 12 => {
                        bytes.extend_from_slice(&f.data[..12]);
                        bytes.extend_from_slice(&tag.bytes());
                        bytes.extend_from_slice(&f.data[12..]);
                    }
                    _ => bytes.extend_from_slice(f.data),
                }
                if !filter.matches(&bytes) {
                    return;
                }
                let fcs = crc32fast::hash(&bytes);
                bytes.extend_from_slice(&fcs.to_le_bytes());
                let len = bytes.len() as u32;
                if let Some(size) = packet_size {
                    bytes.truncate(size as usize);
                }
                if g.kept_bytes + bytes.len() > MAX_CAPTURE_BYTES {
                    g.missed += 1;
                    return;
                }
                g.kept_bytes += bytes.len();
                g.frames.push(Frame {
                    ts_ns: f.timestamp.map_or(0, |t| t.ns()),
                    len,
                    bytes,
                });
            })
            .map_err(|e| ControlError::Runtime(format!("capture: {e}")))?;
        if got == 0 {
            if rounds_left.is_some() {
                return Ok(g);
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }
}

/// Ethernet with a 4-byte FCS at the end of every frame, as pcap's link-type field says it
/// (libpcap's layout: FCS length present bit 26, the length in 16-bit words in bits 28-31),
/// so that Wireshark decodes the FCS instead of showing it as a 4-byte trailer.
const PCAP_ETHERNET_WITH_FCS: u32 = 1 | 0x0400_0000 | (2 << 28);

/// The FCS length in bytes, as pcapng's `if_fcslen` option says it.
const FCS_BYTES: u8 = 4;

fn write(
    frames: &[Frame],
    format: CaptureFormat,
    packet_size: Option<u32>,
) -> Result<Vec<u8>, ControlError> {
    let failed = |e: pcap_file::PcapError| ControlError::Runtime(format!("capture: {e}"));
    let snaplen = packet_size.unwrap_or_else(|| {
        frames
            .iter()
            .map(|f| f.bytes.len())
            .max()
            .unwrap_or(0)
            .max(65_535) as u32
    });
    match format {
        CaptureFormat::Pcap => {
            let header = PcapHeader {
                ts_resolution: TsResolution::NanoSecond,
                endianness: Endianness::Little,
                snaplen,
                datalink: DataLink::Unknown(PCAP_ETHERNET_WITH_FCS),
                ..PcapHeader::default()
            };
            let mut w = PcapWriter::with_header(Vec::new(), header).map_err(failed)?;
            for f in frames {
                let ts = std::time::Duration::from_nanos(f.ts_ns);
                w.write_packet(&PcapPacket::new(ts, f.len, &f.bytes))
                    .map_err(failed)?;
            }
            Ok(w.into_writer())
        }
        CaptureFormat::PcapNg => {
            let mut w =
                PcapNgWriter::with_endianness(Vec::new(), Endianness::Little).map_err(failed)?;
            // Nanosecond timestamps: if_tsresol 9 (10^-9 s).
            let interface = InterfaceDescriptionBlock {
                linktype: DataLink::ETHERNET,
                snaplen,
                options: vec![
                    pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption::IfTsResol(9),
                    pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption::IfFcsLen(FCS_BYTES),
                ],
            };
            w.write_pcapng_block(interface).map_err(failed)?;
            for f in frames {
                let block = EnhancedPacketBlock {
                    interface_id: 0,
                    timestamp: std::time::Duration::from_nanos(f.ts_ns),
                    original_len: f.len,
                    data: std::borrow::Cow::Borrowed(&f.bytes),
                    options: vec![],
                };
                w.write_pcapng_block(block).map_err(failed)?;
            }
            Ok(w.into_inner())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captures_open_af_packet_on_the_ports_interface() {
        let at = |text: &str| capture_location(&Location::parse(text).unwrap());
        assert!(at("afxdp:ns/eth1@3").is_err());
        assert!(at("auto:eth1").is_err());
        assert_eq!(
            at("afpacket:ns/eth1").unwrap().to_string(),
            "afpacket:ns/eth1"
        );
        assert_eq!(
            at("afpacket-gso:ns/eth1").unwrap().to_string(),
            "afpacket:ns/eth1"
        );
        assert!(at("null").is_err());
        assert!(at("pcap:x.pcap").is_err());
    }

    #[test]
    fn frames_are_written_with_their_fcs_and_nanoseconds() {
        let frames = |kept: usize| {
            vec![Frame {
                ts_ns: 1_700_000_000_123_456_789,
                len: 128,
                bytes: vec![0xab; kept],
            }]
        };
        // Whole frames, and frames cut to a packet_size of 64 keeping their length of 128.
        for (kept, packet_size) in [(128, None), (64, Some(64))] {
            for format in [CaptureFormat::Pcap, CaptureFormat::PcapNg] {
                let bytes = write(&frames(kept), format, packet_size).unwrap();
                let file = tempfile::NamedTempFile::new().unwrap();
                std::fs::write(file.path(), bytes).unwrap();
                let mut read = Vec::new();
                strobe_io::read_capture(&file.path().to_string_lossy(), true, |f| {
                    read.push((f.ts_ns, f.orig_len as usize, f.data.len()))
                })
                .unwrap();
                assert_eq!(
                    read,
                    vec![(1_700_000_000_123_456_789, 128, kept)],
                    "{format:?}"
                );
            }
        }
    }

    /// Wireshark (tshark, the independent decoder) reads the last 4 bytes as the frame's FCS,
    /// checks it good, and shows no trailer: the capture says it carries an FCS.
    #[test]
    fn tshark_decodes_the_fcs_as_an_fcs() {
        // Ethernet to a local experimental EtherType, 60 bytes, then its FCS.
        let mut bytes = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x88, 0xb5];
        bytes.resize(60, 0x5a);
        let fcs = crc32fast::hash(&bytes);
        bytes.extend_from_slice(&fcs.to_le_bytes());
        let frames = vec![Frame {
            ts_ns: 1_700_000_000_000_000_000,
            len: bytes.len() as u32,
            bytes,
        }];
        for format in [CaptureFormat::Pcap, CaptureFormat::PcapNg] {
            let file = tempfile::NamedTempFile::new().unwrap();
            std::fs::write(file.path(), write(&frames, format, None).unwrap()).unwrap();
            let out = std::process::Command::new("tshark")
                .args(["-n", "-o", "eth.check_fcs:TRUE", "-r"])
                .arg(file.path())
                .args(["-T", "fields", "-E", "separator=|"])
                .args(["-e", "eth.fcs", "-e", "eth.fcs.status", "-e", "eth.trailer"])
                .output()
                .expect(
                    "tshark decodes the capture: apt-get install tshark (scripts/test.sh does)",
                );
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let fields = String::from_utf8_lossy(&out.stdout).trim().to_string();
            assert_eq!(
                fields,
                format!("0x{:08x}|1|", u32::from_be_bytes(fcs.to_le_bytes())),
                "{format:?}: eth.fcs, eth.fcs.status (1: good), no eth.trailer"
            );
        }
    }
}
