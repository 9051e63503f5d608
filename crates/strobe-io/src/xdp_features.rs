//! What an interface's driver can do with XDP frames right now, as the kernel's `netdev`
//! generic-netlink family reports it (Linux >= 6.3): above all whether it takes redirected
//! frames for transmit (`ndo_xdp_xmit`). A veth takes them only while its peer can receive
//! them (an XDP program or GRO on the peer); otherwise the kernel drops them before the
//! driver, where no counter sees them.
//!
//! Two requests over a raw netlink socket, written here: the rust-netlink crates have no
//! definition of the `netdev` family, and this is all of it strobe needs.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::IoError;

/// `NETDEV_XDP_ACT_NDO_XMIT`: the driver transmits frames redirected to it.
pub const XDP_ACT_NDO_XMIT: u64 = 4;
/// `NETDEV_XDP_RX_METADATA_TIMESTAMP`: the driver answers the XDP RX metadata timestamp
/// kfunc (`bpf_xdp_metadata_rx_timestamp`).
pub const XDP_RX_METADATA_TIMESTAMP: u64 = 1;
/// `NETDEV_XSK_FLAGS_TX_TIMESTAMP`: the driver stamps AF_XDP frames that ask for it in
/// their TX metadata (`XDP_TXMD_FLAGS_TIMESTAMP`) with its device clock.
pub const XSK_TX_TIMESTAMP: u64 = 1;

const NETLINK_GENERIC: i32 = 16;
const NLM_F_REQUEST: u16 = 1;
const NLMSG_ERROR: u16 = 2;
const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const NETDEV_CMD_DEV_GET: u8 = 1;
const NETDEV_A_DEV_IFINDEX: u16 = 1;
const NETDEV_A_DEV_XDP_FEATURES: u16 = 3;
const NETDEV_A_DEV_XDP_RX_METADATA_FEATURES: u16 = 5;
const NETDEV_A_DEV_XSK_FEATURES: u16 = 6;
const NLMSG_HDRLEN: usize = 16;
const GENL_HDRLEN: usize = 4;

/// One generic-netlink request: headers, then attributes (type, payload).
fn request(family: u16, cmd: u8, seq: u32, attrs: &[(u16, &[u8])]) -> Vec<u8> {
    let mut msg = vec![0u8; NLMSG_HDRLEN];
    msg.extend_from_slice(&[cmd, 1, 0, 0]);
    for (kind, payload) in attrs {
        let len = 4 + payload.len();
        msg.extend_from_slice(&(len as u16).to_ne_bytes());
        msg.extend_from_slice(&kind.to_ne_bytes());
        msg.extend_from_slice(payload);
        msg.resize(msg.len().next_multiple_of(4), 0);
    }
    let total = msg.len() as u32;
    msg[0..4].copy_from_slice(&total.to_ne_bytes());
    msg[4..6].copy_from_slice(&family.to_ne_bytes());
    msg[6..8].copy_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    msg[8..12].copy_from_slice(&seq.to_ne_bytes());
    msg
}

/// What a reply said: its attributes, or the kernel's error number.
#[derive(Debug, PartialEq, Eq)]
enum Reply<'a> {
    Attributes(Vec<(u16, &'a [u8])>),
    Error(i32),
}

/// Reads the first message of a reply; None when it is malformed (never panics: the bytes
/// come from the kernel, but are parsed as untrusted).
fn parse_reply(buf: &[u8]) -> Option<Reply<'_>> {
    let len = u32::from_ne_bytes(buf.get(0..4)?.try_into().ok()?) as usize;
    let kind = u16::from_ne_bytes(buf.get(4..6)?.try_into().ok()?);
    let msg = buf.get(..len)?;
    if kind == NLMSG_ERROR {
        let errno = i32::from_ne_bytes(msg.get(16..20)?.try_into().ok()?);
        return Some(Reply::Error(-errno));
    }
    let mut attrs = Vec::new();
    let mut rest = msg.get(NLMSG_HDRLEN + GENL_HDRLEN..)?;
    while rest.len() >= 4 {
        let alen = u16::from_ne_bytes(rest[0..2].try_into().ok()?) as usize;
        // The top bits of the type are flags (nested, byte order).
        let akind = u16::from_ne_bytes(rest[2..4].try_into().ok()?) & 0x3fff;
        if alen < 4 || alen > rest.len() {
            return None;
        }
        attrs.push((akind, &rest[4..alen]));
        rest = rest.get(alen.next_multiple_of(4)..).unwrap_or(&[]);
    }
    Some(Reply::Attributes(attrs))
}

fn attribute<'a>(attrs: &[(u16, &'a [u8])], kind: u16) -> Option<&'a [u8]> {
    attrs.iter().find(|(k, _)| *k == kind).map(|(_, v)| *v)
}

/// Sends `msg` and reads the answer into `buf`.
fn exchange<'a>(sock: &OwnedFd, msg: &[u8], buf: &'a mut [u8]) -> io::Result<&'a [u8]> {
    // SAFETY: msg is a live buffer of msg.len() bytes; the socket is connected to nothing
    // and sends to the kernel (address zero by default).
    let sent = unsafe { libc::send(sock.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: buf is a live, writable buffer of buf.len() bytes.
    let got = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(&buf[..got as usize])
}

/// What the `netdev` family says of a device's XDP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceXdp {
    /// `NETDEV_XDP_ACT_*` bits ([`XDP_ACT_NDO_XMIT`]), if reported.
    pub features: Option<u64>,
    /// `NETDEV_XDP_RX_METADATA_*` bits ([`XDP_RX_METADATA_TIMESTAMP`]): the RX metadata
    /// kfuncs the driver answers (0 before Linux 6.3's metadata, or none).
    pub rx_metadata: u64,
    /// `NETDEV_XSK_FLAGS_*` bits ([`XSK_TX_TIMESTAMP`]): the AF_XDP TX metadata the driver
    /// acts on in zero-copy mode (None before Linux 6.8, which added it).
    pub xsk: Option<u64>,
}

/// The XDP features of interface `ifindex` in the calling thread's network namespace, or
/// None when this kernel has no `netdev` family to ask (before Linux 6.3).
pub fn xdp_features(ifindex: u32) -> Result<Option<u64>, IoError> {
    Ok(device_xdp(ifindex)?.and_then(|d| d.features))
}

/// Whether the driver of `iface` (in `netns`) answers the XDP RX metadata timestamp
/// kfunc; None when this kernel has no `netdev` family to ask.
pub fn rx_metadata_timestamps(netns: Option<&str>, iface: &str) -> Result<Option<bool>, IoError> {
    crate::netns::in_netns(netns, || {
        let ifindex = crate::afxdp::sys::if_index(iface, netns)?;
        Ok(device_xdp(ifindex)?.map(|d| d.rx_metadata & XDP_RX_METADATA_TIMESTAMP != 0))
    })
}

/// Whether the driver of `iface` (in `netns`) stamps AF_XDP frames with its device clock
/// when their TX metadata asks (zero-copy mode); None when this kernel cannot say (before
/// Linux 6.8).
pub fn xsk_tx_timestamps(netns: Option<&str>, iface: &str) -> Result<Option<bool>, IoError> {
    crate::netns::in_netns(netns, || {
        let ifindex = crate::afxdp::sys::if_index(iface, netns)?;
        Ok(device_xdp(ifindex)?.and_then(|d| d.xsk.map(|x| x & XSK_TX_TIMESTAMP != 0)))
    })
}

/// [`DeviceXdp`] of interface `ifindex` in the calling thread's network namespace, or None
/// when this kernel has no `netdev` family to ask (before Linux 6.3).
pub fn device_xdp(ifindex: u32) -> Result<Option<DeviceXdp>, IoError> {
    let fail = |what: &str, e: io::Error| {
        IoError::Other(format!(
            "cannot ask the kernel for XDP features ({what}): {e}"
        ))
    };
    // SAFETY: plain socket creation; the result is checked.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            NETLINK_GENERIC,
        )
    };
    if fd < 0 {
        return Err(fail("netlink socket", io::Error::last_os_error()));
    }
    // SAFETY: fd is a fresh descriptor that nothing else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut buf = vec![0u8; 8192];

    let family = request(
        GENL_ID_CTRL,
        CTRL_CMD_GETFAMILY,
        1,
        &[(CTRL_ATTR_FAMILY_NAME, b"netdev\0")],
    );
    let reply = exchange(&sock, &family, &mut buf).map_err(|e| fail("family", e))?;
    let family_id = match parse_reply(reply) {
        Some(Reply::Error(e)) if e == libc::ENOENT => return Ok(None),
        Some(Reply::Attributes(attrs)) => attribute(&attrs, CTRL_ATTR_FAMILY_ID)
            .and_then(|v| Some(u16::from_ne_bytes(v.get(..2)?.try_into().ok()?))),
        _ => None,
    }
    .ok_or_else(|| IoError::Other("the kernel's netdev family answered oddly".into()))?;

    let get = request(
        family_id,
        NETDEV_CMD_DEV_GET,
        2,
        &[(NETDEV_A_DEV_IFINDEX, &ifindex.to_ne_bytes())],
    );
    let reply = exchange(&sock, &get, &mut buf).map_err(|e| fail("device", e))?;
    let word = |attrs: &[(u16, &[u8])], kind| {
        attribute(attrs, kind).and_then(|v| Some(u64::from_ne_bytes(v.get(..8)?.try_into().ok()?)))
    };
    match parse_reply(reply) {
        Some(Reply::Attributes(attrs)) => Ok(Some(DeviceXdp {
            features: word(&attrs, NETDEV_A_DEV_XDP_FEATURES),
            rx_metadata: word(&attrs, NETDEV_A_DEV_XDP_RX_METADATA_FEATURES).unwrap_or(0),
            xsk: word(&attrs, NETDEV_A_DEV_XSK_FEATURES),
        })),
        Some(Reply::Error(e)) => Err(fail("device", io::Error::from_raw_os_error(e))),
        None => Err(IoError::Other(
            "the kernel's netdev family answered oddly".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_padded_and_sized() {
        let msg = request(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 7, &[(2, b"netdev\0")]);
        // 16 + 4 + (4 + 7, padded to 12)
        assert_eq!(msg.len(), 32);
        assert_eq!(u32::from_ne_bytes(msg[0..4].try_into().unwrap()), 32);
        assert_eq!(msg[16], CTRL_CMD_GETFAMILY);
        assert_eq!(u16::from_ne_bytes(msg[20..22].try_into().unwrap()), 11);
        assert_eq!(&msg[24..31], b"netdev\0");
    }

    #[test]
    fn replies_never_panic_on_bad_bytes() {
        for bad in [
            &[][..],
            &[1, 2, 3][..],
            &[255, 255, 255, 255, 0, 0][..],
            &[
                24, 0, 0, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 200, 0, 3, 0,
            ][..],
        ] {
            let _ = parse_reply(bad);
        }
        // An error reply carries the negated errno after the header.
        let mut err = vec![0u8; 36];
        err[0..4].copy_from_slice(&36u32.to_ne_bytes());
        err[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        err[16..20].copy_from_slice(&(-libc::ENOENT).to_ne_bytes());
        assert_eq!(parse_reply(&err), Some(Reply::Error(libc::ENOENT)));
    }

    #[test]
    fn veth_answers_the_timestamp_kfunc_and_loopback_does_not() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: needs root (a namespace with a veth pair)");
            return;
        }
        let ns = format!("stest-{}-xfmeta", std::process::id());
        let ip = |args: &[&str]| {
            let ok = std::process::Command::new("ip")
                .args(args)
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "ip {args:?}");
        };
        ip(&["netns", "add", &ns]);
        let result = std::panic::catch_unwind(|| {
            ip(&[
                "-n", &ns, "link", "add", "xfa", "type", "veth", "peer", "name", "xfb",
            ]);
            assert_eq!(
                rx_metadata_timestamps(Some(&ns), "xfa").unwrap(),
                Some(true)
            );
            assert_eq!(
                rx_metadata_timestamps(Some(&ns), "lo").unwrap(),
                Some(false)
            );
            let e = rx_metadata_timestamps(Some(&ns), "nonesuch").unwrap_err();
            assert!(e.to_string().contains("nonesuch"), "{e}");
        });
        ip(&["netns", "del", &ns]);
        result.unwrap();
    }

    #[test]
    fn the_loopback_device_answers() {
        // Loopback (ifindex 1) exists in every namespace; on Linux >= 6.3 its features are
        // reported (it takes no redirected frames).
        match xdp_features(1) {
            Ok(Some(features)) => assert_eq!(features & XDP_ACT_NDO_XMIT, 0),
            Ok(None) => eprintln!("this kernel has no netdev family"),
            Err(e) => panic!("{e}"),
        }
    }
}
