//! Receive timestamps: which clock stamped a ring frame (the NIC's or the kernel's), and
//! turning the NIC's hardware stamping on for a receiver that asks for it.

use crate::{IoError, RxTimestamp};

use super::socket::PortName;

/// `PACKET_TIMESTAMP` (linux/if_packet.h; not in the libc crate): which stamp the ring reports.
pub(super) const PACKET_TIMESTAMP: libc::c_int = 17;
/// The tp_status bit saying the NIC stamped a ring frame (linux/if_packet.h; software stamps
/// set bit 29 instead).
const TP_STATUS_TS_RAW_HARDWARE: u32 = 1 << 31;

/// The timestamp of a ring frame, by the status bits the kernel set with it: a raw hardware
/// stamp is in the NIC's clock, anything else is the kernel's CLOCK_REALTIME.
pub(super) fn ring_timestamp(status: u32, ns: u64) -> RxTimestamp {
    if status & TP_STATUS_TS_RAW_HARDWARE != 0 {
        RxTimestamp::Hardware(ns)
    } else {
        RxTimestamp::Kernel(ns)
    }
}

/// Checks that `iface` stamps every received frame in hardware and turns stamping on;
/// returns the PTP hardware clock the stamps are in and the setting it replaced.
pub(super) fn hardware_clock_for(
    iface: &str,
    netns: Option<&str>,
    port: &PortName,
) -> Result<(String, crate::tsinfo::HwTimestampConfig), IoError> {
    let info = crate::tsinfo::query_ts_info(netns, iface)?;
    let phc = match info.every_frame_stamped_on() {
        Some(phc) => phc,
        None => {
            return Err(IoError::Other(format!(
                "AF_PACKET on `{port}`: hardware receive timestamps asked for, but the interface cannot stamp every frame in hardware ({}); leave them off to use kernel software timestamps",
                info.summary()
            )))
        }
    };
    let previous = crate::tsinfo::enable_hw_timestamps(netns, iface)?;
    Ok((phc, previous))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_status_bits_say_which_clock_stamped_a_frame() {
        let user = libc::TP_STATUS_USER;
        assert_eq!(
            ring_timestamp(user | 1 << 29, 7), // TP_STATUS_TS_SOFTWARE
            RxTimestamp::Kernel(7)
        );
        assert_eq!(
            ring_timestamp(user | TP_STATUS_TS_RAW_HARDWARE, 7),
            RxTimestamp::Hardware(7)
        );
        // A frame the NIC did not stamp (no bit, or only the deprecated system-hardware one)
        // keeps the kernel's stamp.
        assert_eq!(ring_timestamp(user | 1 << 30, 9), RxTimestamp::Kernel(9));
        assert_eq!(ring_timestamp(user, 0), RxTimestamp::Kernel(0));
    }
}
