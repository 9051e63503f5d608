//! Which timestamps an interface can give: detection through the ethtool `GET_TS_INFO`
//! ioctl, and switching hardware timestamping on through `SIOCSHWTSTAMP`.
//!
//! Decoding the flag words ([`TsInfo::from_words`]) is kept apart from the ioctl, so the
//! hardware paths are tested with hand-made words on machines that have no such hardware.
//!
//! The two ioctls are called directly: the ethtool netlink crates are asynchronous and pull
//! in a runtime for what is one fixed-size request per interface, and `libc` has no
//! `ethtool_ts_info`, so that one struct is declared here from the kernel's uapi header.

use std::ffi::CStr;
use std::fmt;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::netns::in_netns;
use crate::IoError;

/// `ETHTOOL_GET_TS_INFO` from `<linux/ethtool.h>`.
const ETHTOOL_GET_TS_INFO: u32 = 0x41;

/// `struct ethtool_ts_info` from `<linux/ethtool.h>` (stable uapi layout).
#[repr(C)]
#[derive(Default)]
struct EthtoolTsInfo {
    cmd: u32,
    so_timestamping: u32,
    phc_index: i32,
    tx_types: u32,
    tx_reserved: [u32; 3],
    rx_filters: u32,
    rx_reserved: [u32; 3],
}

/// Names of the `HWTSTAMP_TX_*` modes, by bit number in `tx_types`.
const TX_TYPE_NAMES: [&str; 4] = ["off", "on", "onestep-sync", "onestep-p2p"];

/// Names of the `HWTSTAMP_FILTER_*` receive filters, by bit number in `rx_filters`.
const RX_FILTER_NAMES: [&str; 16] = [
    "none",
    "all",
    "some",
    "ptp-v1-l4-event",
    "ptp-v1-l4-sync",
    "ptp-v1-l4-delay-req",
    "ptp-v2-l4-event",
    "ptp-v2-l4-sync",
    "ptp-v2-l4-delay-req",
    "ptp-v2-l2-event",
    "ptp-v2-l2-sync",
    "ptp-v2-l2-delay-req",
    "ptp-v2-event",
    "ptp-v2-sync",
    "ptp-v2-delay-req",
    "ntp-all",
];

/// What an interface's driver says about timestamping (`ethtool -T`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TsInfo {
    pub iface: String,
    /// `SOF_TIMESTAMPING_*` flags the interface supports.
    pub so_timestamping: u32,
    /// Index of the interface's PTP hardware clock (`/dev/ptpN`), if it has one.
    pub phc_index: Option<u32>,
    /// Bit set of the supported `HWTSTAMP_TX_*` modes.
    pub tx_types: u32,
    /// Bit set of the supported `HWTSTAMP_FILTER_*` receive filters.
    pub rx_filters: u32,
}

/// Which receive timestamps strobe's latency measurement can use on an interface. Transmit
/// stamps are always strobe's CLOCK_REALTIME reading at the hand-over to the backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LatencySource {
    /// The NIC can stamp every received frame on its PTP hardware clock: used with
    /// `--hw-timestamps` (AF_PACKET); otherwise as `Software`.
    Hardware,
    /// AF_PACKET receivers use the kernel's software stamp, AF_XDP ones strobe's own
    /// CLOCK_REALTIME right after dequeue.
    Software,
}

impl LatencySource {
    /// Short machine-readable name.
    pub fn name(self) -> &'static str {
        match self {
            LatencySource::Hardware => "hardware",
            LatencySource::Software => "software",
        }
    }
}

impl fmt::Display for LatencySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LatencySource::Hardware => {
                "rx: NIC hardware with --hw-timestamps (AF_PACKET), else as software; tx: CLOCK_REALTIME at hand-over"
            }
            LatencySource::Software => {
                "rx: kernel software (AF_PACKET) or user space (AF_XDP); tx: CLOCK_REALTIME at hand-over"
            }
        })
    }
}

fn names_of(bits: u32, names: &'static [&'static str]) -> Vec<&'static str> {
    names
        .iter()
        .enumerate()
        .filter(|(bit, _)| bits & (1 << bit) != 0)
        .map(|(_, name)| *name)
        .collect()
}

impl TsInfo {
    /// Decodes the words of an `ethtool_ts_info` answer (`phc_index` −1 means no PHC).
    pub fn from_words(
        iface: &str,
        so_timestamping: u32,
        phc_index: i32,
        tx_types: u32,
        rx_filters: u32,
    ) -> TsInfo {
        TsInfo {
            iface: iface.to_string(),
            so_timestamping,
            phc_index: u32::try_from(phc_index).ok(),
            tx_types,
            rx_filters,
        }
    }

    fn has(&self, flag: libc::c_uint) -> bool {
        self.so_timestamping & flag != 0
    }

    /// The NIC can stamp transmitted frames (and has a mode that switches it on).
    pub fn hardware_tx(&self) -> bool {
        self.has(libc::SOF_TIMESTAMPING_TX_HARDWARE)
            && self.tx_types & (1 << libc::HWTSTAMP_TX_ON) != 0
    }

    /// The NIC can stamp at least some received frames (see [`Self::hardware_rx_all`]).
    pub fn hardware_rx(&self) -> bool {
        self.has(libc::SOF_TIMESTAMPING_RX_HARDWARE)
            && self.rx_filters & !(1 << libc::HWTSTAMP_FILTER_NONE) != 0
    }

    /// The NIC can stamp every received frame, not only PTP messages: what latency needs.
    pub fn hardware_rx_all(&self) -> bool {
        self.has(libc::SOF_TIMESTAMPING_RX_HARDWARE)
            && self.rx_filters & (1 << libc::HWTSTAMP_FILTER_ALL) != 0
    }

    /// Hardware timestamps can be reported to a socket (in the PHC's time base).
    pub fn raw_hardware(&self) -> bool {
        self.has(libc::SOF_TIMESTAMPING_RAW_HARDWARE)
    }

    pub fn software_tx(&self) -> bool {
        self.has(libc::SOF_TIMESTAMPING_TX_SOFTWARE)
    }

    pub fn software_rx(&self) -> bool {
        self.has(libc::SOF_TIMESTAMPING_RX_SOFTWARE)
    }

    /// Short names of what the interface can do, in a fixed order:
    /// `hw-tx`, `hw-rx`, `hw-rx-all`, `raw-hw`, `sw-tx`, `sw-rx`.
    pub fn capabilities(&self) -> Vec<&'static str> {
        [
            (self.hardware_tx(), "hw-tx"),
            (self.hardware_rx(), "hw-rx"),
            (self.hardware_rx_all(), "hw-rx-all"),
            (self.raw_hardware(), "raw-hw"),
            (self.software_tx(), "sw-tx"),
            (self.software_rx(), "sw-rx"),
        ]
        .into_iter()
        .filter_map(|(present, name)| present.then_some(name))
        .collect()
    }

    /// Names of the supported hardware transmit modes (`off`, `on`, …).
    pub fn tx_type_names(&self) -> Vec<&'static str> {
        names_of(self.tx_types, &TX_TYPE_NAMES)
    }

    /// Names of the supported hardware receive filters (`none`, `all`, `ptp-v2-event`, …).
    pub fn rx_filter_names(&self) -> Vec<&'static str> {
        names_of(self.rx_filters, &RX_FILTER_NAMES)
    }

    /// The PHC device path, e.g. `/dev/ptp0`.
    pub fn phc_path(&self) -> Option<String> {
        self.phc_index.map(|i| format!("/dev/ptp{i}"))
    }

    /// The PHC the NIC stamps every received frame on, reported raw (what `--hw-timestamps`
    /// needs); None for a NIC that stamps only PTP messages, which would leave strobe's
    /// frames unstamped, or none at all.
    pub fn every_frame_stamped_on(&self) -> Option<String> {
        if self.hardware_rx_all() && self.raw_hardware() {
            self.phc_path()
        } else {
            None
        }
    }

    /// Hardware when the NIC stamps every received frame on a PHC
    /// ([`TsInfo::every_frame_stamped_on`]).
    pub fn latency_source(&self) -> LatencySource {
        match self.every_frame_stamped_on() {
            Some(_) => LatencySource::Hardware,
            None => LatencySource::Software,
        }
    }

    /// One-line summary of what the driver reports, for messages.
    pub fn summary(&self) -> String {
        let list = |v: Vec<&str>| {
            if v.is_empty() {
                "none".to_string()
            } else {
                v.join(", ")
            }
        };
        format!(
            "capabilities: {}; PHC: {}; hardware tx modes: {}; hardware rx filters: {}",
            list(self.capabilities()),
            self.phc_path().unwrap_or_else(|| "none".into()),
            list(self.tx_type_names()),
            list(self.rx_filter_names()),
        )
    }
}

fn where_(netns: Option<&str>) -> String {
    match netns {
        Some(ns) => format!(" in network namespace `{ns}`"),
        None => String::new(),
    }
}

fn ports_hint(netns: Option<&str>) -> String {
    match netns {
        Some(ns) => format!("`strobe ports --netns {ns}` lists the interfaces"),
        None => "`strobe ports` lists the interfaces".to_string(),
    }
}

/// An `ifreq` naming `iface`, or a clear error when the name cannot be one.
pub(crate) fn ifreq_for(iface: &str) -> Result<libc::ifreq, IoError> {
    let bytes = iface.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(IoError::Other(format!(
            "`{iface}` is not an interface name: names are 1 to {} bytes without NUL",
            libc::IFNAMSIZ - 1
        )));
    }
    // SAFETY: ifreq is plain old data (a name array and a union of integers and pointers);
    // all zeroes is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, &src) in req.ifr_name.iter_mut().zip(bytes) {
        *dst = src as libc::c_char;
    }
    Ok(req)
}

/// A datagram socket in the current thread's namespace: the handle ioctls go through.
pub(crate) fn control_socket() -> Result<OwnedFd, IoError> {
    // SAFETY: plain socket(2) call; the result is checked before use.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(IoError::Other(format!(
            "cannot open a socket for interface ioctls: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: fd is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The MTU of `iface` in the current thread's namespace (SIOCGIFMTU).
pub(crate) fn interface_mtu(iface: &str) -> Result<usize, IoError> {
    let sock = control_socket()?;
    let mut req = ifreq_for(iface)?;
    // SAFETY: SIOCGIFMTU reads the name from `req` and writes the MTU into its union.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFMTU, &mut req) };
    if rc != 0 {
        return Err(IoError::Other(format!(
            "cannot read the MTU of `{iface}`: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: SIOCGIFMTU answers in the mtu member of the union.
    Ok(usize::try_from(unsafe { req.ifr_ifru.ifru_mtu }).unwrap_or(0))
}

/// Points `req` at `data` and runs ioctl `request` on `sock`.
fn ioctl_with_data<T>(
    sock: &OwnedFd,
    request: libc::c_ulong,
    req: &mut libc::ifreq,
    data: &mut T,
) -> Result<(), std::io::Error> {
    req.ifr_ifru.ifru_data = (data as *mut T).cast();
    // SAFETY: `req` names an interface and points at `data`, which is the struct this
    // request reads and writes and lives for the whole call.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), request as _, req as *mut libc::ifreq) };
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn not_found(netns: Option<&str>, iface: &str) -> IoError {
    IoError::Other(format!(
        "interface `{iface}` not found{}: {}",
        where_(netns),
        ports_hint(netns)
    ))
}

/// The ioctl itself, in the current thread's namespace.
fn query_here(netns: Option<&str>, iface: &str) -> Result<TsInfo, IoError> {
    let mut req = ifreq_for(iface)?;
    let sock = control_socket()?;
    let mut info = EthtoolTsInfo {
        cmd: ETHTOOL_GET_TS_INFO,
        ..EthtoolTsInfo::default()
    };
    match ioctl_with_data(&sock, libc::SIOCETHTOOL, &mut req, &mut info) {
        Ok(()) => Ok(TsInfo::from_words(
            iface,
            info.so_timestamping,
            info.phc_index,
            info.tx_types,
            info.rx_filters,
        )),
        Err(e) if e.raw_os_error() == Some(libc::ENODEV) => Err(not_found(netns, iface)),
        Err(e) => Err(IoError::Other(format!(
            "cannot read the timestamping capabilities of interface `{iface}`{}: {e}",
            where_(netns)
        ))),
    }
}

/// Asks the driver of `iface` (inside namespace `netns`, or here) what timestamps it gives.
pub fn query_ts_info(netns: Option<&str>, iface: &str) -> Result<TsInfo, IoError> {
    in_netns(netns, || query_here(netns, iface))
}

/// Names of the interfaces of namespace `netns` (or of this one), by interface index.
/// Asks the kernel through a socket (`if_nameindex`) because /sys/class/net shows the
/// namespace sysfs was mounted in, not the one this thread entered.
pub fn interfaces(netns: Option<&str>) -> Result<Vec<String>, IoError> {
    in_netns(netns, || {
        // SAFETY: if_nameindex returns a heap array ending in a zero entry, or null.
        let list = unsafe { libc::if_nameindex() };
        if list.is_null() {
            return Err(IoError::Other(format!(
                "cannot list the interfaces{}: {}",
                where_(netns),
                std::io::Error::last_os_error()
            )));
        }
        let mut names = Vec::new();
        let mut entry = list;
        // SAFETY: walks the array up to its terminating zero entry; every name before it
        // is a NUL-terminated string; the array is freed once, after the last read.
        unsafe {
            while (*entry).if_index != 0 {
                names.push(
                    CStr::from_ptr((*entry).if_name)
                        .to_string_lossy()
                        .into_owned(),
                );
                entry = entry.add(1);
            }
            libc::if_freenameindex(list);
        }
        Ok(names)
    })
}

/// An interface's hardware timestamping setting (SIOCGHWTSTAMP / SIOCSHWTSTAMP), kept so it
/// can be put back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HwTimestampConfig {
    flags: libc::c_int,
    tx_type: libc::c_int,
    rx_filter: libc::c_int,
}

/// Makes the NIC stamp every received frame (receive filter `all`), keeping its transmit
/// mode as it is (a PTP daemon may use it). Returns the setting it replaced, for
/// [`restore_hw_timestamps`].
pub fn enable_hw_timestamps(
    netns: Option<&str>,
    iface: &str,
) -> Result<HwTimestampConfig, IoError> {
    set_hw_timestamps(netns, iface, Stamping::ReceiveAll)
}

/// Makes the NIC stamp sent frames (transmit mode `on`, what AF_XDP TX metadata stamps
/// need), keeping its receive filter as it is. Returns a guard that turns transmit stamping
/// off again when dropped, or None when it was on already (another port of the run, or a
/// PTP daemon, turned it on: it stays on).
pub fn enable_hw_tx_timestamps(
    netns: Option<&str>,
    iface: &str,
) -> Result<Option<TransmitStamping>, IoError> {
    let previous = set_hw_timestamps(netns, iface, Stamping::Transmit)?;
    Ok(
        (previous.tx_type != libc::HWTSTAMP_TX_ON as libc::c_int).then(|| TransmitStamping {
            netns: netns.map(str::to_string),
            iface: iface.to_string(),
            tx_type: previous.tx_type,
        }),
    )
}

/// Transmit stamping turned on by [`enable_hw_tx_timestamps`]: dropping it puts the
/// transmit mode back as it was and leaves the receive filter as it is then (a receiver
/// on the same NIC may have set it since, and puts it back itself).
#[derive(Debug)]
pub struct TransmitStamping {
    netns: Option<String>,
    iface: String,
    tx_type: libc::c_int,
}

impl Drop for TransmitStamping {
    fn drop(&mut self) {
        let (netns, iface, tx_type) = (self.netns.as_deref(), self.iface.as_str(), self.tx_type);
        // Best effort: the interface may be gone.
        let _ = in_netns(netns, || {
            let sock = control_socket()?;
            let mut now = libc::hwtstamp_config {
                flags: 0,
                tx_type,
                rx_filter: libc::HWTSTAMP_FILTER_NONE as libc::c_int,
            };
            let mut req = ifreq_for(iface)?;
            let _ = ioctl_with_data(&sock, libc::SIOCGHWTSTAMP, &mut req, &mut now);
            now.tx_type = tx_type;
            let mut req = ifreq_for(iface)?;
            ioctl_with_data(&sock, libc::SIOCSHWTSTAMP, &mut req, &mut now)
                .map_err(|e| IoError::Other(e.to_string()))
        });
    }
}

/// Which half of a NIC's stamping to turn on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stamping {
    ReceiveAll,
    Transmit,
}

fn set_hw_timestamps(
    netns: Option<&str>,
    iface: &str,
    stamping: Stamping,
) -> Result<HwTimestampConfig, IoError> {
    in_netns(netns, || {
        let sock = control_socket()?;
        let mut previous = libc::hwtstamp_config {
            flags: 0,
            tx_type: libc::HWTSTAMP_TX_OFF as libc::c_int,
            rx_filter: libc::HWTSTAMP_FILTER_NONE as libc::c_int,
        };
        // Drivers without SIOCGHWTSTAMP have stamping off until someone sets it.
        let mut req = ifreq_for(iface)?;
        let _ = ioctl_with_data(&sock, libc::SIOCGHWTSTAMP, &mut req, &mut previous);
        let mut config = match stamping {
            Stamping::ReceiveAll => libc::hwtstamp_config {
                flags: previous.flags,
                tx_type: previous.tx_type,
                rx_filter: libc::HWTSTAMP_FILTER_ALL as libc::c_int,
            },
            Stamping::Transmit => libc::hwtstamp_config {
                flags: previous.flags,
                tx_type: libc::HWTSTAMP_TX_ON as libc::c_int,
                rx_filter: previous.rx_filter,
            },
        };
        let driver_says = || {
            query_here(netns, iface)
                .map(|info| info.summary())
                .unwrap_or_else(|e| e.to_string())
        };
        let mut req = ifreq_for(iface)?;
        if let Err(e) = ioctl_with_data(&sock, libc::SIOCSHWTSTAMP, &mut req, &mut config) {
            let why = match e.raw_os_error() {
                Some(libc::ENODEV) => return Err(not_found(netns, iface)),
                Some(libc::EOPNOTSUPP | libc::EINVAL) => format!(
                    "interface `{iface}`{} has no hardware timestamping (driver reports {}); \
                         strobe uses kernel software timestamps",
                    where_(netns),
                    driver_says()
                ),
                Some(libc::ERANGE) => format!(
                    "interface `{iface}`{} cannot timestamp {} in hardware (driver reports {}); \
                         strobe uses kernel software timestamps",
                    where_(netns),
                    match stamping {
                        Stamping::ReceiveAll => "every received frame",
                        Stamping::Transmit => "sent frames",
                    },
                    driver_says()
                ),
                Some(libc::EPERM) => {
                    format!("enabling hardware timestamps on `{iface}` needs root or CAP_NET_ADMIN")
                }
                _ => format!(
                    "cannot enable hardware timestamps on interface `{iface}`{}: {e}",
                    where_(netns)
                ),
            };
            return Err(IoError::Other(why));
        }
        // The driver writes back what it applied; it may not narrow the request silently.
        if stamping == Stamping::Transmit && config.tx_type != libc::HWTSTAMP_TX_ON as libc::c_int {
            let mut req = ifreq_for(iface)?;
            let _ = ioctl_with_data(&sock, libc::SIOCSHWTSTAMP, &mut req, &mut previous);
            return Err(IoError::Other(format!(
                "interface `{iface}`{} did not turn hardware transmit stamping on (it applied \
                 transmit mode {}); leave --tx-timestamps at strobe",
                where_(netns),
                config.tx_type
            )));
        }
        if stamping == Stamping::ReceiveAll
            && config.rx_filter != libc::HWTSTAMP_FILTER_ALL as libc::c_int
        {
            let mut req = ifreq_for(iface)?;
            let _ = ioctl_with_data(&sock, libc::SIOCSHWTSTAMP, &mut req, &mut previous);
            return Err(IoError::Other(format!(
                "interface `{iface}`{} applied hardware rx filter {} instead of all; strobe \
                 uses kernel software timestamps",
                where_(netns),
                RX_FILTER_NAMES
                    .get(config.rx_filter as usize)
                    .unwrap_or(&"unknown"),
            )));
        }
        Ok(HwTimestampConfig {
            flags: previous.flags,
            tx_type: previous.tx_type,
            rx_filter: previous.rx_filter,
        })
    })
}

/// Puts back a setting [`enable_hw_timestamps`] replaced (best effort: the interface may be
/// gone).
pub fn restore_hw_timestamps(netns: Option<&str>, iface: &str, previous: HwTimestampConfig) {
    let _ = in_netns(netns, || {
        let sock = control_socket()?;
        let mut req = ifreq_for(iface)?;
        let mut config = libc::hwtstamp_config {
            flags: previous.flags,
            tx_type: previous.tx_type,
            rx_filter: previous.rx_filter,
        };
        ioctl_with_data(&sock, libc::SIOCSHWTSTAMP, &mut req, &mut config)
            .map_err(|e| IoError::Other(e.to_string()))
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::VethPair;
    use std::process::Command;

    const SW_ONLY: u32 = libc::SOF_TIMESTAMPING_TX_SOFTWARE
        | libc::SOF_TIMESTAMPING_RX_SOFTWARE
        | libc::SOF_TIMESTAMPING_SOFTWARE;
    const HW_FLAGS: u32 = libc::SOF_TIMESTAMPING_TX_HARDWARE
        | libc::SOF_TIMESTAMPING_RX_HARDWARE
        | libc::SOF_TIMESTAMPING_RAW_HARDWARE;

    fn bit(n: u32) -> u32 {
        1 << n
    }

    #[test]
    fn software_only_words_decode_to_software() {
        let info = TsInfo::from_words("veth0", SW_ONLY, -1, 0, 0);
        assert_eq!(info.phc_index, None);
        assert_eq!(info.phc_path(), None);
        assert!(info.software_tx() && info.software_rx());
        assert!(!info.hardware_tx() && !info.hardware_rx() && !info.raw_hardware());
        assert_eq!(info.capabilities(), ["sw-tx", "sw-rx"]);
        assert_eq!(info.latency_source(), LatencySource::Software);
        assert!(info.summary().contains("PHC: none"), "{}", info.summary());
    }

    #[test]
    fn full_hardware_words_decode_to_hardware() {
        // As a NIC like i210 or mlx5 reports it: PHC 2, tx off/on, rx none/all.
        let tx = bit(libc::HWTSTAMP_TX_OFF) | bit(libc::HWTSTAMP_TX_ON);
        let rx = bit(libc::HWTSTAMP_FILTER_NONE) | bit(libc::HWTSTAMP_FILTER_ALL);
        let info = TsInfo::from_words("eth1", SW_ONLY | HW_FLAGS, 2, tx, rx);
        assert_eq!(info.phc_index, Some(2));
        assert_eq!(info.phc_path().as_deref(), Some("/dev/ptp2"));
        assert_eq!(
            info.capabilities(),
            ["hw-tx", "hw-rx", "hw-rx-all", "raw-hw", "sw-tx", "sw-rx"]
        );
        assert_eq!(info.tx_type_names(), ["off", "on"]);
        assert_eq!(info.rx_filter_names(), ["none", "all"]);
        assert_eq!(info.latency_source(), LatencySource::Hardware);
        assert!(info
            .latency_source()
            .to_string()
            .contains("NIC hardware with --hw-timestamps"));
        // Receive stamping alone is what strobe needs: a NIC that cannot stamp sent frames
        // still gives hardware receive stamps.
        let rx_only = TsInfo::from_words(
            "eth1",
            SW_ONLY | HW_FLAGS,
            2,
            bit(libc::HWTSTAMP_TX_OFF),
            rx,
        );
        assert_eq!(rx_only.latency_source(), LatencySource::Hardware);
    }

    #[test]
    fn ptp_only_receive_filters_are_not_enough_for_latency() {
        let tx = bit(libc::HWTSTAMP_TX_OFF) | bit(libc::HWTSTAMP_TX_ON);
        let rx = bit(libc::HWTSTAMP_FILTER_NONE) | bit(libc::HWTSTAMP_FILTER_PTP_V2_EVENT);
        let info = TsInfo::from_words("eth2", SW_ONLY | HW_FLAGS, 0, tx, rx);
        assert!(info.hardware_tx() && info.hardware_rx());
        assert!(!info.hardware_rx_all());
        assert_eq!(info.rx_filter_names(), ["none", "ptp-v2-event"]);
        assert_eq!(info.latency_source(), LatencySource::Software);
    }

    #[test]
    fn hardware_flags_without_modes_do_not_count() {
        // Flags set but only "off" / "none" modes: nothing can actually be switched on.
        let tx = bit(libc::HWTSTAMP_TX_OFF);
        let rx = bit(libc::HWTSTAMP_FILTER_NONE);
        let info = TsInfo::from_words("eth3", HW_FLAGS, 0, tx, rx);
        assert!(!info.hardware_tx() && !info.hardware_rx());
        assert_eq!(info.capabilities(), ["raw-hw"]);
        assert!(info
            .latency_source()
            .to_string()
            .contains("rx: kernel software (AF_PACKET)"));
    }

    #[test]
    fn bad_interface_names_are_refused_before_any_ioctl() {
        for bad in ["", "a-name-that-is-far-too-long", "nul\0x"] {
            let err = query_ts_info(None, bad).unwrap_err().to_string();
            assert!(err.contains("not an interface name"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn veth_in_a_namespace_reports_software_timestamps_and_no_phc() {
        let lab = VethPair::new("q");
        let names = interfaces(lab.netns()).unwrap();
        assert!(names.contains(&lab.a), "{names:?}");
        assert!(names.contains(&lab.b), "{names:?}");
        assert!(names.iter().any(|n| n == "lo"), "{names:?}");
        // Cross-check against ethtool, an independent reader of the same ioctl.
        let ethtool = Command::new("ip")
            .args(["netns", "exec", lab.ns(), "ethtool", "-T", &lab.a])
            .output()
            .expect("ethtool is the independent reader here: apt-get install ethtool");
        let ethtool = String::from_utf8_lossy(&ethtool.stdout);
        let info = query_ts_info(lab.netns(), &lab.a).unwrap();
        assert_eq!(info.iface, lab.a);
        assert!(info.software_tx() && info.software_rx(), "{info:?}");
        assert!(!info.hardware_tx() && !info.hardware_rx(), "{info:?}");
        assert_eq!(info.phc_index, None);
        assert_eq!(info.latency_source(), LatencySource::Software);
        assert!(ethtool.contains("software-transmit"), "{ethtool}");
        assert!(ethtool.contains("software-receive"), "{ethtool}");
        assert!(ethtool.contains("PTP Hardware Clock: none"), "{ethtool}");
        // The veth lives only in the namespace: from here it is unknown.
        assert!(!interfaces(None).unwrap().contains(&lab.a));
    }

    #[test]
    fn loopback_reports_software_timestamps_and_no_phc() {
        let info = query_ts_info(None, "lo").unwrap();
        assert!(info.software_tx() && info.software_rx(), "{info:?}");
        assert!(!info.hardware_tx() && !info.hardware_rx(), "{info:?}");
        assert_eq!(info.phc_index, None);
    }

    #[test]
    fn unknown_interface_is_a_clear_error_naming_it() {
        let err = query_ts_info(None, "strobe-nope0").unwrap_err().to_string();
        assert!(err.contains("interface `strobe-nope0` not found"), "{err}");
        assert!(err.contains("strobe ports"), "{err}");
    }

    #[test]
    fn enabling_hardware_timestamps_on_veth_says_why_not() {
        let lab = VethPair::new("hw");
        let err = enable_hw_timestamps(lab.netns(), &lab.a)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("interface `{}`", lab.a))
                && err.contains("has no hardware timestamping")
                && err.contains("sw-tx, sw-rx")
                && err.contains("strobe uses kernel software timestamps"),
            "{err}"
        );
        let err = enable_hw_timestamps(lab.netns(), "strobe-nope0")
            .unwrap_err()
            .to_string();
        assert!(err.contains("`strobe-nope0` not found"), "{err}");
    }
}
