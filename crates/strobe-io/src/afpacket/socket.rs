//! The packet socket's system calls, each wrapped once: the socket, its options, the
//! interface ioctls and the bind; and the port's name, which every error message carries
//! (missing privilege and a missing or down interface are said as such).

use std::fmt;
use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr;

use crate::IoError;

/// Ethernet header plus one VLAN tag: the kernel accepts frames up to MTU + this.
pub(super) const LINK_OVERHEAD: usize = 14 + 4;

/// `NETNS/IFACE` or `IFACE`, for messages.
#[derive(Clone, Debug)]
pub(super) struct PortName {
    pub(super) iface: String,
    pub(super) netns: Option<String>,
}

impl fmt::Display for PortName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.netns {
            Some(ns) => write!(f, "{ns}/{}", self.iface),
            None => f.write_str(&self.iface),
        }
    }
}

impl PortName {
    pub(super) fn new(iface: &str, netns: Option<&str>) -> Result<Self, IoError> {
        let bad = |why: &str| IoError::Other(format!("invalid interface name `{iface}`: {why}"));
        if iface.is_empty() {
            return Err(bad("it is empty"));
        }
        if iface.len() >= libc::IFNAMSIZ {
            return Err(bad("Linux interface names have at most 15 bytes"));
        }
        if iface
            .bytes()
            .any(|b| b == 0 || b == b'/' || b.is_ascii_whitespace())
        {
            return Err(bad("it contains `/`, whitespace or a NUL byte"));
        }
        Ok(PortName {
            iface: iface.to_string(),
            netns: netns.map(str::to_string),
        })
    }

    /// An error from syscall `call` on this port; missing privilege is named as such.
    pub(super) fn error(&self, call: &str, err: io::Error) -> IoError {
        match err.raw_os_error() {
            Some(libc::EPERM | libc::EACCES) => IoError::Other(format!(
                "AF_PACKET needs root or CAP_NET_RAW ({call} on `{self}`: {err})"
            )),
            Some(libc::ENETDOWN) => IoError::Other(format!(
                "{call} on `{self}` failed: the interface is down (`ip link set {} up`)",
                self.iface
            )),
            _ => IoError::Other(format!("{call} on `{self}` failed: {err}")),
        }
    }

    pub(super) fn not_found(&self) -> IoError {
        match &self.netns {
            Some(ns) => IoError::Other(format!(
                "interface `{}` not found in network namespace `{ns}` (`ip -n {ns} link` lists its interfaces)",
                self.iface
            )),
            None => IoError::Other(format!(
                "interface `{}` not found in the current network namespace (`ip link` lists its interfaces)",
                self.iface
            )),
        }
    }
}

pub(super) fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// A raw AF_PACKET socket bound to nothing yet. Protocol 0 receives nothing until `bind`
/// names one, so a ring is never filled with traffic from other interfaces.
pub(super) fn packet_socket(port: &PortName) -> Result<OwnedFd, IoError> {
    // SAFETY: plain socket creation; the result is checked before use.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    let fd = check(fd).map_err(|e| port.error("socket(AF_PACKET)", e))?;
    // SAFETY: `fd` is a freshly created descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub(super) fn set_option<T>(
    fd: &OwnedFd,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: `value` points to a live T and the length passed is its size; the kernel only
    // reads from it.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            ptr::from_ref(value).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    check(rc).map(drop)
}

pub(super) fn set_int_option(
    fd: &OwnedFd,
    port: &PortName,
    level: libc::c_int,
    name: libc::c_int,
    what: &str,
    value: libc::c_int,
) -> Result<(), IoError> {
    set_option(fd, level, name, &value).map_err(|e| port.error(&format!("setsockopt({what})"), e))
}

/// Issues an interface ioctl (`SIOCGIF*`) for `port` on socket `fd`.
fn interface_ioctl(
    fd: &OwnedFd,
    port: &PortName,
    request: libc::c_ulong,
    what: &str,
) -> Result<libc::ifreq, IoError> {
    // SAFETY: ifreq is plain old data; all zeroes is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    // PortName::new checked the name is shorter than IFNAMSIZ, so the NUL stays in place.
    for (dst, &src) in req.ifr_name.iter_mut().zip(port.iface.as_bytes()) {
        *dst = src as libc::c_char;
    }
    // SAFETY: `req` is a valid ifreq the kernel reads the name from and writes the answer to.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), request as _, &mut req) };
    match check(rc) {
        Ok(_) => Ok(req),
        Err(e) if e.raw_os_error() == Some(libc::ENODEV) => Err(port.not_found()),
        Err(e) => Err(port.error(&format!("ioctl({what})"), e)),
    }
}

pub(super) fn interface_index(fd: &OwnedFd, port: &PortName) -> Result<libc::c_int, IoError> {
    let req = interface_ioctl(fd, port, libc::SIOCGIFINDEX, "SIOCGIFINDEX")?;
    // SAFETY: SIOCGIFINDEX answers in the ifindex member of the union.
    Ok(unsafe { req.ifr_ifru.ifru_ifindex })
}

pub(super) fn interface_mtu(fd: &OwnedFd, port: &PortName) -> Result<usize, IoError> {
    let req = interface_ioctl(fd, port, libc::SIOCGIFMTU, "SIOCGIFMTU")?;
    // SAFETY: SIOCGIFMTU answers in the mtu member of the union.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu };
    Ok(usize::try_from(mtu).unwrap_or(0))
}

/// Frames of `len` bytes (without FCS) exceed what an interface of this MTU carries (MTU +
/// 18: the Ethernet header and one VLAN tag): the message names the MTU and the command
/// that raises it enough for an untagged frame.
pub(crate) fn mtu_too_small(iface: &str, netns: Option<&str>, mtu: usize, len: usize) -> String {
    let place = netns.map_or(String::new(), |ns| format!("ip netns exec {ns} "));
    let shown = netns.map_or(iface.to_string(), |ns| format!("{ns}/{iface}"));
    format!(
        "frames of {len} bytes ({} with FCS) do not fit the MTU of `{shown}`, {mtu}, which carries \
         frames of up to {} bytes ({} with FCS); raise it on this interface and on every hop to \
         the receiver: `{place}ip link set {iface} mtu {}`",
        len + 4,
        mtu + LINK_OVERHEAD,
        mtu + LINK_OVERHEAD + 4,
        len.saturating_sub(14)
    )
}

pub(super) fn bind_to(
    fd: &OwnedFd,
    port: &PortName,
    ifindex: libc::c_int,
    protocol: u16,
) -> Result<(), IoError> {
    let addr = libc::sockaddr_ll {
        sll_family: libc::AF_PACKET as u16,
        sll_protocol: protocol.to_be(),
        sll_ifindex: ifindex,
        sll_hatype: 0,
        sll_pkttype: 0,
        sll_halen: 0,
        sll_addr: [0; 8],
    };
    // SAFETY: `addr` is a valid sockaddr_ll and the length passed is its size.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            ptr::from_ref(&addr).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    check(rc).map(drop).map_err(|e| port.error("bind", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_names_are_checked_before_any_syscall() {
        let err = PortName::new("a-name-longer-than-15", None).unwrap_err();
        assert!(err.to_string().contains("at most 15 bytes"), "{err}");
        assert!(PortName::new("", None).is_err());
        assert!(PortName::new("ns/eth0", None).is_err());
        assert_eq!(
            PortName::new("eth0", Some("lab")).unwrap().to_string(),
            "lab/eth0"
        );
    }
}
