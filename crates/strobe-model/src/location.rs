//! Port locations, parsed once where they enter (a scenario file, the one-flow options, an
//! OTG config): [`Location`], a place strobe opens (`afpacket:eth1`, `pcap:out.pcap`, …), and
//! [`PortLocation`], what a port may say — a [`Location`], or one of the virtual lab's ends
//! (`lab:tx`, `lab:rx@afxdp`) that the run-control layer resolves to a [`Location`] once it
//! has found the lab. The written form is the [`Display`](std::fmt::Display) form: both
//! read back what they write, and serialize as that string.

use std::fmt;
use std::str::FromStr;

/// A port location, parsed: where frames go and through which backend.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Location {
    Pcap(String),
    Null,
    AfPacket {
        netns: Option<String>,
        iface: String,
        /// `afpacket-gso:`: transmit in UDP segmentation batches.
        gso: bool,
    },
    AfXdp {
        netns: Option<String>,
        iface: String,
        queue: u32,
    },
    /// `afxdp:[NETNS/]IFACE@*`: receive on every queue of the interface (a socket each).
    AfXdpAllQueues {
        netns: Option<String>,
        iface: String,
    },
    /// `xdp-live:`: the kernel's XDP live-frame mode (transmit only).
    XdpLive {
        netns: Option<String>,
        iface: String,
    },
    /// `xdp-count:`: counted by an XDP program in the kernel (receive only): per flow
    /// counts and latency without copying a frame to user space.
    XdpCount {
        netns: Option<String>,
        iface: String,
    },
    /// The best backend that works on the interface: AF_XDP, else AF_PACKET.
    Auto {
        netns: Option<String>,
        iface: String,
        queue: u32,
    },
}

/// The location forms [`Location::parse`] accepts, for messages.
pub const LOCATION_FORMS: &str =
    "`pcap:FILE` (write a nanosecond pcap), `null` (drop after all per-packet work), \
`afpacket:[NETNS/]IFACE`, `afpacket-gso:[NETNS/]IFACE` (AF_PACKET sending UDP segmentation \
batches), `afxdp:[NETNS/]IFACE[@QUEUE]` (`@*`: receive on every queue), `xdp-live:[NETNS/]IFACE` (the kernel's XDP live-frame mode, \
transmit only), `xdp-count:[NETNS/]IFACE` (counted in the kernel by an XDP program, receive only), \
`auto:[NETNS/]IFACE[@QUEUE]`";

/// The lab forms [`PortLocation::parse`] accepts besides [`LOCATION_FORMS`], for messages.
const LAB_SIDES: &str =
    "lab:tx, lab:rx, lab:tx@afxdp, lab:rx@afxdp, lab:rx@afxdp-all, lab:tx@afpacket-gso, lab:tx@xdp-live, lab:rx@xdp-count";
const LAB_BACKENDS: &str =
    "afpacket, afxdp, afxdp-all (AF_XDP receiving on every queue), afpacket-gso, xdp-live, xdp-count (counting in the kernel)";

/// Why a location was refused; the message lists what is accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LocationError {
    /// Not one of [`LOCATION_FORMS`] (the whole location as written).
    Unknown(String),
    /// `lab:SIDE`: a side other than `tx` or `rx`.
    LabSide(String),
    /// `lab:SIDE@BACKEND`: a backend the lab does not offer.
    LabBackend(String),
}

impl fmt::Display for LocationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LocationError::Unknown(location) => {
                write!(
                    f,
                    "unknown port `{location}`: accepted forms are {LOCATION_FORMS}"
                )
            }
            LocationError::LabSide(side) => {
                write!(f, "unknown lab side `{side}` — accepted: {LAB_SIDES}")
            }
            LocationError::LabBackend(backend) => {
                write!(f, "unknown backend `{backend}` — accepted: {LAB_BACKENDS}")
            }
        }
    }
}

impl std::error::Error for LocationError {}

impl fmt::Display for Location {
    /// The location as written (`Location::parse` reads it back).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = |netns: &Option<String>, iface: &str| match netns {
            Some(ns) => format!("{ns}/{iface}"),
            None => iface.to_string(),
        };
        match self {
            Location::Pcap(path) => write!(f, "pcap:{path}"),
            Location::Null => f.write_str("null"),
            Location::AfPacket { netns, iface, gso } => write!(
                f,
                "{}:{}",
                if *gso { "afpacket-gso" } else { "afpacket" },
                at(netns, iface)
            ),
            Location::AfXdp {
                netns,
                iface,
                queue,
            } => write!(f, "afxdp:{}@{queue}", at(netns, iface)),
            Location::AfXdpAllQueues { netns, iface } => {
                write!(f, "afxdp:{}@*", at(netns, iface))
            }
            Location::XdpLive { netns, iface } => write!(f, "xdp-live:{}", at(netns, iface)),
            Location::XdpCount { netns, iface } => write!(f, "xdp-count:{}", at(netns, iface)),
            Location::Auto {
                netns,
                iface,
                queue,
            } => write!(f, "auto:{}@{queue}", at(netns, iface)),
        }
    }
}

impl Location {
    /// The location transmit worker `k` of a port opens: AF_XDP binds one socket per
    /// queue, so worker k takes the port's queue + k; AF_PACKET sockets (and `null`) can
    /// simply be opened again.
    pub fn for_worker(&self, k: u32) -> Location {
        let mut location = self.clone();
        if let Location::AfXdp { queue, .. } | Location::Auto { queue, .. } = &mut location {
            *queue += k;
        }
        location
    }

    /// The interface a location sends on, with its network namespace; None for files and
    /// `null`.
    pub fn interface(&self) -> Option<(Option<&str>, &str)> {
        match self {
            Location::AfPacket { netns, iface, .. }
            | Location::AfXdp { netns, iface, .. }
            | Location::AfXdpAllQueues { netns, iface }
            | Location::XdpLive { netns, iface }
            | Location::XdpCount { netns, iface }
            | Location::Auto { netns, iface, .. } => Some((netns.as_deref(), iface.as_str())),
            Location::Pcap(_) | Location::Null => None,
        }
    }

    pub fn parse(location: &str) -> Result<Location, LocationError> {
        let unknown = || LocationError::Unknown(location.to_string());
        if location == "null" {
            return Ok(Location::Null);
        }
        let (kind, rest) = location.split_once(':').ok_or_else(unknown)?;
        if rest.is_empty() {
            return Err(unknown());
        }
        if kind == "pcap" {
            return Ok(Location::Pcap(rest.to_string()));
        }
        let (iface_part, queue, all_queues) = match rest.rsplit_once('@') {
            Some((i, "*")) if kind == "afxdp" => (i, None, true),
            Some((i, q)) => (i, Some(q.parse::<u32>().map_err(|_| unknown())?), false),
            None => (rest, None, false),
        };
        // `NETNS/IFACE` or just `IFACE`.
        let (netns, iface) = match iface_part.split_once('/') {
            Some((ns, iface)) => (Some(ns), iface),
            None => (None, iface_part),
        };
        if iface.is_empty() || netns == Some("") {
            return Err(unknown());
        }
        let (netns, iface) = (netns.map(str::to_string), iface.to_string());
        match kind {
            "afpacket" | "afpacket-gso" if queue.is_none() => Ok(Location::AfPacket {
                netns,
                iface,
                gso: kind == "afpacket-gso",
            }),
            "xdp-live" if queue.is_none() => Ok(Location::XdpLive { netns, iface }),
            "xdp-count" if queue.is_none() => Ok(Location::XdpCount { netns, iface }),
            "afxdp" if all_queues => Ok(Location::AfXdpAllQueues { netns, iface }),
            "afxdp" => Ok(Location::AfXdp {
                netns,
                iface,
                queue: queue.unwrap_or(0),
            }),
            "auto" => Ok(Location::Auto {
                netns,
                iface,
                queue: queue.unwrap_or(0),
            }),
            _ => Err(unknown()),
        }
    }
}

impl FromStr for Location {
    type Err = LocationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Location::parse(s)
    }
}

/// One of the virtual lab's two ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LabSide {
    /// The generator's end (`lab:tx`).
    Tx,
    /// The sink's end, behind the device under test (`lab:rx`).
    Rx,
}

/// The backend a `lab:SIDE@BACKEND` port opens on the lab's interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LabBackend {
    AfPacket,
    AfXdp,
    /// AF_XDP receiving on every queue of the interface.
    AfXdpAll,
    AfPacketGso,
    XdpLive,
    /// Counting in the kernel's XDP program (receive only).
    XdpCount,
}

impl LabBackend {
    /// The name written after `@`.
    pub fn name(self) -> &'static str {
        match self {
            LabBackend::AfPacket => "afpacket",
            LabBackend::AfXdp => "afxdp",
            LabBackend::AfXdpAll => "afxdp-all",
            LabBackend::AfPacketGso => "afpacket-gso",
            LabBackend::XdpLive => "xdp-live",
            LabBackend::XdpCount => "xdp-count",
        }
    }
}

/// A port on the virtual lab (`lab:SIDE[@BACKEND]`), before the lab is looked up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LabPort {
    pub side: LabSide,
    /// None: not written, AF_PACKET.
    pub backend: Option<LabBackend>,
}

impl LabPort {
    /// The backend the port opens (AF_PACKET when none was written).
    pub fn backend(&self) -> LabBackend {
        self.backend.unwrap_or(LabBackend::AfPacket)
    }

    /// Reads what follows `lab:`.
    fn parse_rest(rest: &str) -> Result<LabPort, LocationError> {
        let (side, backend) = match rest.split_once('@') {
            Some((side, backend)) => (side, Some(backend)),
            None => (rest, None),
        };
        let side = match side {
            "tx" => LabSide::Tx,
            "rx" => LabSide::Rx,
            other => return Err(LocationError::LabSide(other.to_string())),
        };
        let backend = match backend {
            None => None,
            Some(name) => Some(
                [
                    LabBackend::AfPacket,
                    LabBackend::AfXdp,
                    LabBackend::AfXdpAll,
                    LabBackend::AfPacketGso,
                    LabBackend::XdpLive,
                    LabBackend::XdpCount,
                ]
                .into_iter()
                .find(|b| b.name() == name)
                .ok_or_else(|| LocationError::LabBackend(name.to_string()))?,
            ),
        };
        Ok(LabPort { side, backend })
    }
}

impl fmt::Display for LabPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.side {
            LabSide::Tx => "lab:tx",
            LabSide::Rx => "lab:rx",
        })?;
        match self.backend {
            Some(backend) => write!(f, "@{}", backend.name()),
            None => Ok(()),
        }
    }
}

/// Where a port is, as a scenario says it: a [`Location`] strobe opens, or one of the lab's
/// ends, which only the run-control layer can resolve (it looks the lab up) — the engine and
/// the backends take [`Location`]s alone.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PortLocation {
    Direct(Location),
    Lab(LabPort),
    /// `remote:AGENT/LOCATION`: a port another host's agent opens (a multi-host run's
    /// controller writes it into each agent's config). This process neither sends nor
    /// receives on it; its flows keep their ids so that every agent reads the same trailers.
    Remote(String),
}

impl PortLocation {
    /// A [`Location`], or `lab:SIDE[@BACKEND]`.
    pub fn parse(location: &str) -> Result<PortLocation, LocationError> {
        if let Some(rest) = location.strip_prefix("remote:") {
            if rest.is_empty() {
                return Err(LocationError::Unknown(location.to_string()));
            }
            return Ok(PortLocation::Remote(rest.to_string()));
        }
        match location.strip_prefix("lab:") {
            Some(rest) => LabPort::parse_rest(rest).map(PortLocation::Lab),
            None => Location::parse(location).map(PortLocation::Direct),
        }
    }

    /// The location to open; None for a lab end not resolved yet, or another host's port.
    pub fn resolved(&self) -> Option<&Location> {
        match self {
            PortLocation::Direct(location) => Some(location),
            PortLocation::Lab(_) | PortLocation::Remote(_) => None,
        }
    }

    /// The lab end, for a port not resolved yet.
    pub fn lab(&self) -> Option<&LabPort> {
        match self {
            PortLocation::Lab(lab) => Some(lab),
            PortLocation::Direct(_) | PortLocation::Remote(_) => None,
        }
    }

    /// Another host's port (`remote:`): not opened here.
    pub fn is_remote(&self) -> bool {
        matches!(self, PortLocation::Remote(_))
    }

    /// A `pcap:` trace file.
    pub fn pcap_file(&self) -> Option<&str> {
        match self {
            PortLocation::Direct(Location::Pcap(path)) => Some(path),
            _ => None,
        }
    }
}

impl From<Location> for PortLocation {
    fn from(location: Location) -> Self {
        PortLocation::Direct(location)
    }
}

impl fmt::Display for PortLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PortLocation::Direct(location) => location.fmt(f),
            PortLocation::Lab(lab) => lab.fmt(f),
            PortLocation::Remote(at) => write!(f, "remote:{at}"),
        }
    }
}

impl FromStr for PortLocation {
    type Err = LocationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PortLocation::parse(s)
    }
}

/// Both serialize as the written form, and deserialize by parsing it.
macro_rules! as_text {
    ($t:ty) => {
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = String::deserialize(d)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}
as_text!(Location);
as_text!(PortLocation);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_are_written_back_as_read_and_split_by_queue() {
        for text in [
            "null",
            "pcap:a/b.pcap",
            "afpacket:lab-tx/tx0",
            "afpacket-gso:tx0",
            "afxdp:ns/eth1@2",
            "xdp-live:ns/eth1",
            "auto:eth1@0",
            "afxdp:ns/eth1@*",
        ] {
            let parsed = Location::parse(text).unwrap();
            assert_eq!(parsed.to_string(), text);
            assert_eq!(Location::parse(&parsed.to_string()).unwrap(), parsed);
            let port = PortLocation::parse(text).unwrap();
            assert_eq!(port, PortLocation::Direct(parsed));
            assert_eq!(port.to_string(), text);
        }
        let remote = PortLocation::parse("remote:hostb/afpacket:eth1").unwrap();
        assert_eq!(remote, PortLocation::Remote("hostb/afpacket:eth1".into()));
        assert_eq!(remote.to_string(), "remote:hostb/afpacket:eth1");
        assert!(remote.is_remote() && remote.resolved().is_none());
        assert!(PortLocation::parse("remote:").is_err());
        let xdp = Location::parse("afxdp:ns/eth1@2").unwrap();
        assert_eq!(xdp.for_worker(3).to_string(), "afxdp:ns/eth1@5");
        let packet = Location::parse("afpacket:eth1").unwrap();
        assert_eq!(packet.for_worker(3), packet);
        // Every queue is a receive form of AF_XDP only.
        assert!(matches!(
            Location::parse("afxdp:eth1@*").unwrap(),
            Location::AfXdpAllQueues { .. }
        ));
        for text in ["auto:eth1@*", "afpacket:eth1@*", "xdp-live:eth1@*"] {
            assert!(Location::parse(text).is_err(), "{text}");
        }
    }

    #[test]
    fn parses_every_form() {
        assert_eq!(Location::parse("null").unwrap(), Location::Null);
        assert_eq!(
            Location::parse("pcap:a/b.pcap").unwrap(),
            Location::Pcap("a/b.pcap".into())
        );
        assert_eq!(
            Location::parse("afpacket:lab-tx/tx0").unwrap(),
            Location::AfPacket {
                netns: Some("lab-tx".into()),
                iface: "tx0".into(),
                gso: false,
            }
        );
        assert_eq!(
            Location::parse("afpacket-gso:tx0").unwrap(),
            Location::AfPacket {
                netns: None,
                iface: "tx0".into(),
                gso: true,
            }
        );
        assert!(Location::parse("afpacket-gso:tx0@1").is_err());
        assert_eq!(
            Location::parse("xdp-live:lab/tx0").unwrap(),
            Location::XdpLive {
                netns: Some("lab".into()),
                iface: "tx0".into(),
            }
        );
        assert!(Location::parse("xdp-live:tx0@1").is_err());
        assert_eq!(
            Location::parse("xdp-count:lab/rx0").unwrap(),
            Location::XdpCount {
                netns: Some("lab".into()),
                iface: "rx0".into(),
            }
        );
        assert_eq!(
            Location::parse("xdp-count:lab/rx0").unwrap().to_string(),
            "xdp-count:lab/rx0"
        );
        assert!(Location::parse("xdp-count:rx0@1").is_err());
        assert_eq!(
            Location::parse("afxdp:eth1@3").unwrap(),
            Location::AfXdp {
                netns: None,
                iface: "eth1".into(),
                queue: 3
            }
        );
        assert_eq!(
            Location::parse("auto:ns/veth0").unwrap(),
            Location::Auto {
                netns: Some("ns".into()),
                iface: "veth0".into(),
                queue: 0
            }
        );
        for bad in [
            "",
            "pcap:",
            "bogus:x",
            "afpacket:",
            "afpacket:eth0@1",
            "afxdp:eth0@x",
            "afxdp:/eth0",
            "afxdp:ns/",
            "lab:tx",
        ] {
            let err = Location::parse(bad).unwrap_err().to_string();
            assert!(err.contains("accepted forms"), "{bad}: {err}");
        }
    }

    #[test]
    fn lab_ends_are_read_as_written_and_resolved_later() {
        for (text, side, backend) in [
            ("lab:tx", LabSide::Tx, None),
            ("lab:rx", LabSide::Rx, None),
            ("lab:tx@afpacket", LabSide::Tx, Some(LabBackend::AfPacket)),
            ("lab:rx@afxdp", LabSide::Rx, Some(LabBackend::AfXdp)),
            ("lab:rx@afxdp-all", LabSide::Rx, Some(LabBackend::AfXdpAll)),
            (
                "lab:tx@afpacket-gso",
                LabSide::Tx,
                Some(LabBackend::AfPacketGso),
            ),
            ("lab:tx@xdp-live", LabSide::Tx, Some(LabBackend::XdpLive)),
            ("lab:rx@xdp-count", LabSide::Rx, Some(LabBackend::XdpCount)),
        ] {
            let parsed = PortLocation::parse(text).unwrap();
            assert_eq!(parsed, PortLocation::Lab(LabPort { side, backend }));
            assert_eq!(parsed.to_string(), text);
            assert!(parsed.resolved().is_none());
        }
        assert_eq!(
            PortLocation::parse("lab:tx")
                .unwrap()
                .lab()
                .unwrap()
                .backend(),
            LabBackend::AfPacket
        );
        let side = PortLocation::parse("lab:dut").unwrap_err().to_string();
        assert!(
            side.starts_with("unknown lab side `dut` — accepted: lab:tx, lab:rx"),
            "{side}"
        );
        let backend = PortLocation::parse("lab:tx@dpdk").unwrap_err().to_string();
        assert!(
            backend.starts_with("unknown backend `dpdk` — accepted: afpacket"),
            "{backend}"
        );
        let unknown = PortLocation::parse("carrier-pigeon:coop")
            .unwrap_err()
            .to_string();
        assert!(
            unknown.starts_with("unknown port `carrier-pigeon:coop`: accepted forms are"),
            "{unknown}"
        );
    }

    #[test]
    fn serialized_as_the_written_string() {
        for text in ["afxdp:ns/eth1@*", "lab:rx@afxdp", "null", "pcap:a b.pcap"] {
            let port = PortLocation::parse(text).unwrap();
            let json = serde_json::to_string(&port).unwrap();
            assert_eq!(json, serde_json::to_string(text).unwrap());
            assert_eq!(serde_json::from_str::<PortLocation>(&json).unwrap(), port);
        }
        let location = Location::parse("afpacket:ns/eth1").unwrap();
        assert_eq!(
            serde_json::to_value(&location).unwrap(),
            serde_json::json!("afpacket:ns/eth1")
        );
        let err = serde_json::from_str::<Location>("\"lab:tx\"").unwrap_err();
        assert!(err.to_string().contains("accepted forms"), "{err}");
    }
}
