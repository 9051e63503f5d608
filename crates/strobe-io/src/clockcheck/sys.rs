//! The socket syscalls of the clock check, and nothing else: switching on kernel receive
//! timestamps (SO_TIMESTAMPNS), receiving a datagram with its stamp (poll + recvmsg and the
//! SCM_TIMESTAMPNS control message), and sending a datagram stamped with the clock read
//! immediately before sendto. Everything above this works on bytes and numbers and is
//! tested without sockets.
//!
//! Both ends of the check send through [`send_stamped`] and receive through
//! [`recv_stamped`], so the two directions of an exchange run the same code: user-space
//! clock read → sendto → (network) → the kernel's receive stamp. Over veth and loopback that
//! stamp is taken in `netif_rx`, still inside the sender's sendto, so neither end's wake-up
//! latency enters either direction.

use std::io;
use std::mem::{size_of, MaybeUninit};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Duration;

use crate::test_clock;

/// One datagram as it arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Datagram {
    /// Bytes copied into the buffer (a longer datagram is cut to the buffer's length).
    pub len: usize,
    /// Whether the datagram was longer than the buffer.
    pub truncated: bool,
    /// Who sent it.
    pub from: Option<SocketAddr>,
    /// The kernel's receive stamp (CLOCK_REALTIME, ns) through [`test_clock::shift`]; None
    /// when the kernel attached none.
    pub kernel_ns: Option<u64>,
}

/// Asks the kernel to stamp every datagram `sock` receives (SO_TIMESTAMPNS: CLOCK_REALTIME
/// in ns, taken when the packet entered the stack).
pub(crate) fn enable_rx_timestamps(sock: &UdpSocket) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: setsockopt reads one c_int from `on`, which outlives the call; the fd is open
    // for as long as `sock` is borrowed.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Reads the clock ([`test_clock::realtime_ns`]), writes it little-endian into
/// `frame[field..field + 8]` and sends `frame` to `to`, with nothing between the read and
/// the syscall but those 8 bytes and the address conversion. Returns the stamp.
pub(crate) fn send_stamped(
    sock: &UdpSocket,
    frame: &mut [u8],
    field: usize,
    to: SocketAddr,
) -> io::Result<u64> {
    let stamp = test_clock::realtime_ns();
    frame[field..field + 8].copy_from_slice(&stamp.to_le_bytes());
    let sent = sock.send_to(frame, to)?;
    if sent != frame.len() {
        return Err(io::Error::other(format!(
            "sent {sent} of {} bytes",
            frame.len()
        )));
    }
    Ok(stamp)
}

/// Waits up to `wait` for a datagram and receives it into `buf` with its kernel stamp.
/// Ok(None) when none came in time (or the wait was interrupted): the caller keeps its own
/// deadline.
pub(crate) fn recv_stamped(
    sock: &UdpSocket,
    buf: &mut [u8],
    wait: Duration,
) -> io::Result<Option<Datagram>> {
    let fd = sock.as_raw_fd();
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // Whole ms, rounded up, so a wait shorter than a ms does not become a busy loop.
    let ms = wait
        .as_micros()
        .div_ceil(1000)
        .min(libc::c_int::MAX as u128) as libc::c_int;
    // SAFETY: poll reads and writes the one pollfd it is given, which outlives the call.
    let ready = unsafe { libc::poll(&mut pfd, 1, ms) };
    if ready < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(None)
        } else {
            Err(e)
        };
    }
    if ready == 0 {
        return Ok(None);
    }

    let mut from = MaybeUninit::<libc::sockaddr_storage>::zeroed();
    // u64s, so the control buffer is aligned for cmsghdr; room for several messages.
    let mut control = [0u64; 16];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: an all-zero msghdr is a valid empty one; the fields that matter are set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = from.as_mut_ptr().cast();
    msg.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = size_of::<[u64; 16]>() as _;
    // SAFETY: every pointer in `msg` points at a live buffer of the length given beside it
    // (`buf`, `from`, `control`), all of which outlive the call.
    let got = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) };
    if got < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
            _ => Err(e),
        };
    }
    // SAFETY: recvmsg filled `from` up to msg_namelen (it was zeroed before, so the rest
    // is zero); sockaddr_storage has no invalid bit patterns.
    let from = socket_addr(unsafe { &from.assume_init() }, msg.msg_namelen);
    Ok(Some(Datagram {
        len: got as usize,
        truncated: msg.msg_flags & libc::MSG_TRUNC != 0,
        from,
        kernel_ns: kernel_stamp(&msg).map(test_clock::shift),
    }))
}

/// The SCM_TIMESTAMPNS stamp among the control messages recvmsg returned, in ns.
fn kernel_stamp(msg: &libc::msghdr) -> Option<u64> {
    // SAFETY: `msg` is the msghdr recvmsg just filled: msg_control and msg_controllen
    // describe the control buffer, still alive in the caller, and the CMSG_* macros stay
    // within msg_controllen.
    let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(msg) };
    while !cmsg.is_null() {
        // SAFETY: CMSG_FIRSTHDR/CMSG_NXTHDR return a pointer to a whole cmsghdr within the
        // buffer, or null.
        let header = unsafe { &*cmsg };
        if header.cmsg_level == libc::SOL_SOCKET && header.cmsg_type == libc::SCM_TIMESTAMPNS {
            // SAFETY: a SCM_TIMESTAMPNS message carries one struct timespec as its data,
            // which may be unaligned in the buffer, hence read_unaligned.
            let ts: libc::timespec =
                unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast()) };
            let secs = u64::try_from(ts.tv_sec).ok()?;
            let nanos = u64::try_from(ts.tv_nsec).ok()?;
            return secs.checked_mul(1_000_000_000)?.checked_add(nanos);
        }
        // SAFETY: as for CMSG_FIRSTHDR above.
        cmsg = unsafe { libc::CMSG_NXTHDR(msg, cmsg) };
    }
    None
}

/// A sockaddr the kernel wrote, as a SocketAddr (IPv4 and IPv6 only).
fn socket_addr(storage: &libc::sockaddr_storage, len: libc::socklen_t) -> Option<SocketAddr> {
    let len = len as usize;
    match libc::c_int::from(storage.ss_family) {
        libc::AF_INET if len >= size_of::<libc::sockaddr_in>() => {
            // SAFETY: the family says the storage holds a sockaddr_in, which fits in it.
            let sin =
                unsafe { &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 if len >= size_of::<libc::sockaddr_in6>() => {
            // SAFETY: the family says the storage holds a sockaddr_in6, which fits in it.
            let sin6 = unsafe {
                &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>()
            };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_datagram_arrives_with_its_sender_and_a_kernel_stamp_near_now() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        enable_rx_timestamps(&rx).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut frame = [7u8; 16];
        let before = send_stamped(&tx, &mut frame, 8, rx.local_addr().unwrap()).unwrap();
        assert_eq!(frame[8..16], before.to_le_bytes());
        let mut buf = [0u8; 8];
        let got = recv_stamped(&rx, &mut buf, Duration::from_secs(5))
            .unwrap()
            .expect("the datagram arrives");
        let after = test_clock::realtime_ns();
        assert_eq!(got.len, 8, "cut to the buffer");
        assert!(got.truncated);
        assert_eq!(got.from, Some(tx.local_addr().unwrap()));
        let stamp = got.kernel_ns.expect("a kernel stamp");
        assert!(
            before <= stamp && stamp <= after,
            "{before} {stamp} {after}"
        );
        assert_eq!(
            recv_stamped(&rx, &mut buf, Duration::from_millis(1)).unwrap(),
            None
        );
    }
}
