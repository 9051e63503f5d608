//! What the kernel counts for a receive socket: frames it dropped because the ring was full.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, OwnedFd};
use std::ptr;

use super::socket::{check, PortName};
use super::RxRing;
use crate::IoError;

/// The kernel's count of frames dropped since the last read (it resets on each read), from
/// PACKET_STATISTICS, whose layout depends on the ring version.
pub(super) fn kernel_drops(fd: &OwnedFd, port: &PortName, ring: RxRing) -> Result<u32, IoError> {
    /// Reads PACKET_STATISTICS into `stats`, whose layout depends on the ring version.
    fn read<T>(fd: &OwnedFd, stats: &mut T) -> io::Result<()> {
        let mut len = size_of::<T>() as libc::socklen_t;
        // SAFETY: `stats` and `len` are valid for writes and `len` is the size of `stats`.
        let rc = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                ptr::from_mut(stats).cast(),
                &mut len,
            )
        };
        check(rc).map(drop)
    }
    let dropped = match ring {
        RxRing::Blocks => {
            let mut stats = libc::tpacket_stats_v3 {
                tp_packets: 0,
                tp_drops: 0,
                tp_freeze_q_cnt: 0,
            };
            read(fd, &mut stats).map(|()| stats.tp_drops)
        }
        RxRing::Frames => {
            let mut stats = libc::tpacket_stats {
                tp_packets: 0,
                tp_drops: 0,
            };
            read(fd, &mut stats).map(|()| stats.tp_drops)
        }
    };
    dropped.map_err(|e| port.error("getsockopt(PACKET_STATISTICS)", e))
}
