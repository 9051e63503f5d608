//! A packet ring's memory, shared with the kernel: the mapping, its status words (atomics, the
//! one place where ownership of a frame or block changes hands) and the alignment the
//! kernel lays rings out by.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::ptr::{self, NonNull};
use std::sync::atomic::AtomicU32;

use super::socket::PortName;
use crate::IoError;

/// Frames whose header and data are rounded to this (the kernel's TPACKET_ALIGNMENT).
pub(super) const TPACKET_ALIGNMENT: usize = 16;

pub(super) const fn align_up(value: usize, to: usize) -> usize {
    value.div_ceil(to) * to
}

pub(super) fn page_size() -> usize {
    // SAFETY: sysconf only reads a system constant.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(page).unwrap_or(4096)
}

/// A packet ring mapped into our address space.
pub(super) struct Mapping {
    pub(super) base: NonNull<u8>,
    pub(super) len: usize,
}

// SAFETY: the mapping is owned by exactly one Mapping and freed once in Drop; nothing about
// it is tied to the thread that created it.
unsafe impl Send for Mapping {}

impl Mapping {
    pub(super) fn map(fd: &OwnedFd, port: &PortName, len: usize) -> Result<Self, IoError> {
        // SAFETY: maps the socket's ring (set up just before, `len` bytes) at an address the
        // kernel picks; the result is checked before use.
        let addr = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(port.error("mmap of the packet ring", io::Error::last_os_error()));
        }
        let base = NonNull::new(addr.cast::<u8>()).ok_or_else(|| {
            IoError::Other(format!("mmap of the packet ring on `{port}` returned NULL"))
        })?;
        Ok(Mapping { base, len })
    }

    /// The status word at byte `offset` of the ring.
    ///
    /// # Safety
    /// `offset` must be 4-byte aligned and `offset + 4 <= len`.
    pub(super) unsafe fn status(&self, offset: usize) -> &AtomicU32 {
        debug_assert!(offset % 4 == 0 && offset + 4 <= self.len);
        // SAFETY: in bounds and aligned per the caller; the word is only ever accessed
        // atomically, by us and by the kernel.
        unsafe { AtomicU32::from_ptr(self.base.as_ptr().add(offset).cast()) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the region mmap returned; no references into it outlive self.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}
