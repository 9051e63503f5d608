//! An interface's own hardware (MAC) address, read with `SIOCGIFHWADDR` inside its network
//! namespace: a reflector answers only frames addressed to it.

use std::os::fd::AsRawFd;

use crate::netns::in_netns;
use crate::tsinfo::{control_socket, ifreq_for};
use crate::{IoError, Location};

/// The MAC address of the interface a port location names (`afpacket:`, `afxdp:`, `xdp-live:`, `auto:`).
pub fn port_mac(location: &str) -> Result<[u8; 6], IoError> {
    match Location::parse(location)?.interface() {
        Some((netns, iface)) => interface_mac(netns, iface),
        None => Err(IoError::Other(format!(
            "port `{location}` has no interface, so no MAC address"
        ))),
    }
}

/// The MAC address of `iface` in network namespace `netns` (None: this one).
pub fn interface_mac(netns: Option<&str>, iface: &str) -> Result<[u8; 6], IoError> {
    in_netns(netns, || {
        let sock = control_socket()?;
        let mut req = ifreq_for(iface)?;
        // SAFETY: SIOCGIFHWADDR reads the name from and writes a sockaddr into `req`, a
        // valid ifreq that lives across the call.
        let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFHWADDR as _, &mut req) };
        if rc != 0 {
            return Err(IoError::Other(format!(
                "cannot read the MAC address of `{iface}`: {}",
                std::io::Error::last_os_error()
            )));
        }
        // SAFETY: after SIOCGIFHWADDR succeeded the union holds ifru_hwaddr.
        let addr = unsafe { req.ifr_ifru.ifru_hwaddr };
        if addr.sa_family != libc::ARPHRD_ETHER {
            return Err(IoError::Other(format!(
                "`{iface}` is not an Ethernet interface (hardware type {}); give the address to answer to with --mac",
                addr.sa_family
            )));
        }
        let mut mac = [0u8; 6];
        for (dst, &src) in mac.iter_mut().zip(&addr.sa_data) {
            *dst = src as u8;
        }
        Ok(mac)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_interfaces_and_file_ports_are_clear_errors() {
        let err = interface_mac(None, "strobe-no-such0").unwrap_err();
        assert!(err.to_string().contains("strobe-no-such0"), "{err}");
        let err = port_mac("pcap:x.pcap").unwrap_err();
        assert!(err.to_string().contains("no interface"), "{err}");
    }
}
