//! Thin wrappers over the system calls the AF_XDP backend needs: mappings, interface
//! look-ups through ethtool ioctls, and the clock.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

use crate::IoError;

/// The privileges AF_XDP sockets, BPF maps and programs need together.
pub(super) const PRIVILEGE_HINT: &str = "AF_XDP needs root or CAP_NET_ADMIN+CAP_NET_RAW+CAP_BPF, \
     and CAP_IPC_LOCK or a locked-memory limit (RLIMIT_MEMLOCK) above its UMEM";

/// Turns a failed step into an error that says what failed and, when the kernel refused for
/// lack of privilege, which privileges are missing.
pub(crate) fn failed(step: impl std::fmt::Display, err: io::Error) -> IoError {
    match err.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            IoError::Other(format!("{step}: {err}: {PRIVILEGE_HINT}"))
        }
        _ => IoError::Other(format!("{step}: {err}")),
    }
}

/// UMEM bytes this process has registered: the kernel charges them to the user's locked
/// memory unless the process has CAP_IPC_LOCK.
static UMEM_REGISTERED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Raises the soft RLIMIT_MEMLOCK to the hard one when it is below what this process's UMEMs
/// need with `more` bytes added (raising the hard limit needs CAP_SYS_RESOURCE). Not just to
/// that sum: the kernel checks the limit against the locked memory of every process of the
/// user, which this process cannot see. Returns the limits in force afterwards (soft, hard).
pub(super) fn raise_memlock_for(more: u64) -> (u64, u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into `lim`.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) } != 0 {
        return (0, 0);
    }
    let needed = UMEM_REGISTERED
        .load(std::sync::atomic::Ordering::Relaxed)
        .saturating_add(more);
    if lim.rlim_cur != libc::RLIM_INFINITY && lim.rlim_cur < needed && lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit reads one rlimit; a soft limit up to the hard one is always allowed.
        if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &raised) } == 0 {
            lim = raised;
        }
    }
    (lim.rlim_cur, lim.rlim_max)
}

/// Counts `bytes` of UMEM as registered (see `raise_memlock_for`).
pub(super) fn umem_registered(bytes: u64) {
    UMEM_REGISTERED.fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
}

/// A shared or anonymous memory mapping, unmapped on drop.
pub(crate) struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; which parts each thread touches is
// governed by the ring protocol of its owner (TX frames by the TX half, RX frames by the RX
// half), never by this type.
unsafe impl Send for Mmap {}
// SAFETY: as above; `Mmap` itself only hands out raw pointers.
unsafe impl Sync for Mmap {}

impl Mmap {
    /// Zeroed anonymous memory, populated up front so the first frames do not page-fault.
    pub(super) fn anonymous(len: usize) -> io::Result<Mmap> {
        // SAFETY: a fresh private anonymous mapping aliases nothing.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        Self::checked(ptr, len)
    }

    /// Shared memory of a kernel object at a page offset: one of an AF_XDP socket's rings,
    /// or the values of a BPF array made mappable.
    pub(crate) fn shared(fd: &OwnedFd, len: usize, page_offset: u64) -> io::Result<Mmap> {
        // SAFETY: mapping a socket's ring creates new shared memory the kernel keeps alive
        // while the mapping exists; nothing in this process aliases it yet.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                page_offset as libc::off_t,
            )
        };
        Self::checked(ptr, len)
    }

    fn checked(ptr: *mut libc::c_void, len: usize) -> io::Result<Mmap> {
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(ptr.cast()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        Ok(Mmap { ptr, len })
    }

    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: ptr/len describe a mapping this value created and nobody uses after drop.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// Wraps a file descriptor returned by a system call, or the error it signalled.
pub(crate) fn owned_fd(rc: libc::c_long) -> io::Result<OwnedFd> {
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor to us and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(rc as libc::c_int) })
}

/// `setsockopt` with a plain-old-data value.
pub(super) fn setsockopt<T>(fd: &OwnedFd, level: i32, name: i32, value: &T) -> io::Result<()> {
    // SAFETY: `value` points at size_of::<T>() readable bytes for the duration of the call.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `getsockopt` into a plain-old-data value; returns how many bytes the kernel filled in
/// (older kernels fill shorter versions of some structures).
pub(super) fn getsockopt<T>(
    fd: &OwnedFd,
    level: i32,
    name: i32,
    value: &mut T,
) -> io::Result<usize> {
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `value` points at `len` writable bytes of a type valid for any bit pattern the
    // kernel writes (callers use integer-only C structs).
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (value as *mut T).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(len as usize)
}

/// Index of interface `name` in the calling thread's network namespace.
pub(crate) fn if_index(name: &str, netns: Option<&str>) -> Result<u32, IoError> {
    let place = match netns {
        Some(ns) => format!("network namespace `{ns}`"),
        None => "this network namespace".to_string(),
    };
    let missing = || {
        IoError::Other(format!(
            "no network interface `{name}` in {place} (list them with `ip link`)"
        ))
    };
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains('/') {
        return Err(IoError::Other(format!(
            "`{name}` is not a valid interface name (1 to 15 characters, no `/`)"
        )));
    }
    let c_name = CString::new(name).map_err(|_| missing())?;
    // SAFETY: c_name is a valid NUL-terminated string.
    let index = unsafe { libc::if_nametoindex(c_name.as_ptr()) };
    if index == 0 {
        return Err(missing());
    }
    Ok(index)
}

/// What ethtool tells about an interface; each part is None when the driver does not say.
#[derive(Clone, Debug, Default)]
pub(crate) struct LinkFacts {
    pub driver: Option<String>,
    pub rx_queues: Option<u32>,
    pub tx_queues: Option<u32>,
}

const ETHTOOL_GDRVINFO: u32 = 0x03;
const ETHTOOL_GCHANNELS: u32 = 0x3c;

#[repr(C)]
struct EthtoolDrvinfo {
    cmd: u32,
    driver: [u8; 32],
    version: [u8; 32],
    fw_version: [u8; 32],
    bus_info: [u8; 32],
    erom_version: [u8; 32],
    reserved2: [u8; 12],
    n_priv_flags: u32,
    n_stats: u32,
    testinfo_len: u32,
    eedump_len: u32,
    regdump_len: u32,
}

#[repr(C)]
#[derive(Default)]
struct EthtoolChannels {
    cmd: u32,
    max_rx: u32,
    max_tx: u32,
    max_other: u32,
    max_combined: u32,
    rx_count: u32,
    tx_count: u32,
    other_count: u32,
    combined_count: u32,
}

impl LinkFacts {
    /// Asks the driver of `name` (in the calling thread's namespace) for its name and queue
    /// counts. Failures only leave facts unknown: they are used for clearer messages.
    pub(crate) fn query(name: &str) -> LinkFacts {
        // SAFETY: plain socket creation; the result is checked.
        let Ok(sock) = owned_fd(unsafe {
            libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0)
        } as libc::c_long) else {
            return LinkFacts::default();
        };
        let mut facts = LinkFacts::default();

        // SAFETY: all-zero is a valid EthtoolDrvinfo (integers and byte arrays).
        let mut info: EthtoolDrvinfo = unsafe { std::mem::zeroed() };
        info.cmd = ETHTOOL_GDRVINFO;
        if ethtool(&sock, name, &mut info).is_ok() {
            let end = info.driver.iter().position(|&b| b == 0).unwrap_or(32);
            facts.driver = Some(String::from_utf8_lossy(&info.driver[..end]).into_owned());
        }

        let mut ch = EthtoolChannels {
            cmd: ETHTOOL_GCHANNELS,
            ..EthtoolChannels::default()
        };
        if ethtool(&sock, name, &mut ch).is_ok() {
            // ethtool counts combined channels separately from dedicated RX/TX ones.
            facts.rx_queues = Some(ch.combined_count + ch.rx_count);
            facts.tx_queues = Some(ch.combined_count + ch.tx_count);
        }
        facts
    }

    /// The driver name for messages, `?` when unknown.
    pub(crate) fn driver_name(&self) -> &str {
        self.driver.as_deref().unwrap_or("?")
    }
}

/// One SIOCETHTOOL request; `cmd` must start with the ethtool command word.
fn ethtool<T>(sock: &OwnedFd, name: &str, cmd: &mut T) -> io::Result<()> {
    // SAFETY: all-zero is a valid ifreq (a name array and a union of plain data).
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, &src) in req
        .ifr_name
        .iter_mut()
        .zip(name.as_bytes().iter().take(libc::IFNAMSIZ - 1))
    {
        *dst = src as libc::c_char;
    }
    req.ifr_ifru.ifru_data = (cmd as *mut T).cast();
    // SAFETY: req names the interface and points at a live ethtool command buffer of the
    // layout the command word announces.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCETHTOOL, &mut req) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// CLOCK_REALTIME in ns since the Unix epoch.
pub(crate) fn realtime_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec to write; CLOCK_REALTIME always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_for_lack_of_privilege_name_the_capabilities() {
        let err = failed(
            "cannot create an AF_XDP socket",
            io::Error::from_raw_os_error(libc::EPERM),
        );
        let msg = err.to_string();
        assert!(msg.starts_with("cannot create an AF_XDP socket: "), "{msg}");
        for cap in ["CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_BPF", "CAP_IPC_LOCK"] {
            assert!(msg.contains(cap), "{msg}");
        }
        let other = failed("x", io::Error::from_raw_os_error(libc::ENOMEM)).to_string();
        assert!(!other.contains("CAP_"), "{other}");
    }

    #[test]
    fn interface_names_are_checked_before_the_kernel_is_asked() {
        let msg = if_index("a/b", None).unwrap_err().to_string();
        assert!(msg.contains("not a valid interface name"), "{msg}");
        let msg = if_index("sxt-no-such-if", Some("lab"))
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("no network interface `sxt-no-such-if` in network namespace `lab`"),
            "{msg}"
        );
    }
}
