//! A network device's offload features by name, as `ethtool -k` shows them
//! (ETHTOOL_GSSET_INFO, ETHTOOL_GSTRINGS and ETHTOOL_GFEATURES), and setting one, as
//! `ethtool -K` does (ETHTOOL_SFEATURES).
//!
//! strobe reads them to know who cuts a UDP segmentation (GSO) batch into frames and who
//! completes their checksums: the device (a NIC with USO) or the kernel before the driver.

use std::os::fd::AsRawFd;

use crate::netns::in_netns;
use crate::tsinfo::{control_socket, ifreq_for};
use crate::IoError;

const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GFEATURES: u32 = 0x3a;
const ETHTOOL_SFEATURES: u32 = 0x3b;
const ETH_SS_FEATURES: u32 = 4;
const ETH_GSTRING_LEN: usize = 32;

/// The features a device has switched on, by the kernel's names (`tx-udp-segmentation`,
/// `tx-checksum-ip-generic`, …).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NetdevFeatures {
    active: Vec<String>,
}

impl NetdevFeatures {
    /// From the feature names and the `active` bit words ETHTOOL_GFEATURES returns.
    pub fn from_words(names: &[String], active: &[u32]) -> Self {
        let on = |i: usize| active.get(i / 32).is_some_and(|w| w & (1 << (i % 32)) != 0);
        NetdevFeatures {
            active: names
                .iter()
                .enumerate()
                .filter(|&(i, _)| on(i))
                .map(|(_, n)| n.clone())
                .collect(),
        }
    }

    pub fn is_on(&self, name: &str) -> bool {
        self.active.iter().any(|n| n == name)
    }

    /// Whether the device takes UDP segmentation batches whole (`tx-udp-segmentation`).
    pub fn udp_segmentation(&self) -> bool {
        self.is_on("tx-udp-segmentation")
    }

    /// Whether the device completes IPv4 UDP checksums itself (any transmit checksum
    /// offload that covers them).
    pub fn tx_checksum(&self) -> bool {
        self.is_on("tx-checksum-ip-generic") || self.is_on("tx-checksum-ipv4")
    }
}

/// Runs one SIOCETHTOOL request whose data is `words` (a command header and its payload).
pub(crate) fn ethtool_words(
    sock: &std::os::fd::OwnedFd,
    iface: &str,
    words: &mut [u32],
) -> std::io::Result<()> {
    let mut req = ifreq_for(iface).map_err(|e| std::io::Error::other(e.to_string()))?;
    req.ifr_ifru.ifru_data = words.as_mut_ptr().cast();
    // SAFETY: `req` names an interface and points at `words`, which holds the request's
    // header and room for everything the kernel writes back (sized from its own counts).
    let rc = unsafe {
        libc::ioctl(
            sock.as_raw_fd(),
            libc::SIOCETHTOOL as _,
            &mut req as *mut libc::ifreq,
        )
    };
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn fail(iface: &str, what: &str, e: std::io::Error) -> IoError {
    if e.raw_os_error() == Some(libc::ENODEV) {
        IoError::Other(format!("interface `{iface}` not found"))
    } else {
        IoError::Other(format!("ethtool {what} on interface `{iface}`: {e}"))
    }
}

/// The names of string set `set` of `iface` (ETH_SS_FEATURES, ETH_SS_STATS, …), in the
/// kernel's order: bit or counter `i` has name `i`.
pub(crate) fn string_set(
    sock: &std::os::fd::OwnedFd,
    iface: &str,
    set: u32,
) -> Result<Vec<String>, IoError> {
    // ethtool_sset_info: cmd, reserved, sset_mask (u64), then one u32 per set in the mask.
    let mask = (1u64 << set).to_ne_bytes();
    let word = |i: usize| u32::from_ne_bytes([mask[i], mask[i + 1], mask[i + 2], mask[i + 3]]);
    let mut info = [ETHTOOL_GSSET_INFO, 0, word(0), word(4), 0];
    ethtool_words(sock, iface, &mut info).map_err(|e| fail(iface, "GSSET_INFO", e))?;
    let count = info[4] as usize;
    if [info[2], info[3]] != [word(0), word(4)] || count == 0 || count > 1 << 16 {
        return Ok(Vec::new());
    }
    // ethtool_gstrings: cmd, string_set, len, then len names of 32 bytes.
    let mut strings = vec![0u32; 3 + count * ETH_GSTRING_LEN / 4];
    strings[..3].copy_from_slice(&[ETHTOOL_GSTRINGS, set, count as u32]);
    ethtool_words(sock, iface, &mut strings).map_err(|e| fail(iface, "GSTRINGS", e))?;
    let bytes: Vec<u8> = strings[3..].iter().flat_map(|w| w.to_ne_bytes()).collect();
    Ok(bytes
        .chunks(ETH_GSTRING_LEN)
        .map(|c| {
            let end = c.iter().position(|&b| b == 0).unwrap_or(c.len());
            String::from_utf8_lossy(&c[..end]).into_owned()
        })
        .collect())
}

fn feature_names(sock: &std::os::fd::OwnedFd, iface: &str) -> Result<Vec<String>, IoError> {
    let names = string_set(sock, iface, ETH_SS_FEATURES)?;
    if names.is_empty() {
        return Err(fail(
            iface,
            "GSSET_INFO",
            std::io::Error::other("the kernel lists no features"),
        ));
    }
    Ok(names)
}

fn query_here(iface: &str) -> Result<NetdevFeatures, IoError> {
    let sock = control_socket()?;
    let names = feature_names(&sock, iface)?;
    // ethtool_gfeatures: cmd, size (blocks), then per block: available, requested, active,
    // never_changed.
    let blocks = names.len().div_ceil(32);
    let mut features = vec![0u32; 2 + blocks * 4];
    features[..2].copy_from_slice(&[ETHTOOL_GFEATURES, blocks as u32]);
    ethtool_words(&sock, iface, &mut features).map_err(|e| fail(iface, "GFEATURES", e))?;
    let active: Vec<u32> = features[2..].chunks(4).map(|b| b[2]).collect();
    Ok(NetdevFeatures::from_words(&names, &active))
}

/// Switches feature `name` (`rx-gro`, …) of `iface` (inside namespace `netns`, or here) on
/// or off, as `ethtool -K` does.
pub fn set(netns: Option<&str>, iface: &str, name: &str, on: bool) -> Result<(), IoError> {
    in_netns(netns, || {
        let sock = control_socket()?;
        let names = feature_names(&sock, iface)?;
        let bit = names.iter().position(|n| n == name).ok_or_else(|| {
            IoError::Other(format!("interface `{iface}` has no feature `{name}`"))
        })?;
        // ethtool_sfeatures: cmd, size (blocks), then per block: valid, requested.
        let blocks = names.len().div_ceil(32);
        let mut request = vec![0u32; 2 + blocks * 2];
        request[..2].copy_from_slice(&[ETHTOOL_SFEATURES, blocks as u32]);
        let (block, mask) = (bit / 32, 1u32 << (bit % 32));
        request[2 + block * 2] = mask;
        request[3 + block * 2] = if on { mask } else { 0 };
        ethtool_words(&sock, iface, &mut request).map_err(|e| fail(iface, "SFEATURES", e))
    })
}

/// The active features of `iface` (inside namespace `netns`, or here).
pub fn query(netns: Option<&str>, iface: &str) -> Result<NetdevFeatures, IoError> {
    in_netns(netns, || query_here(iface))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn active_bits_select_names_across_words() {
        let names: Vec<String> = (0..40).map(|i| format!("f{i}")).collect();
        let f = NetdevFeatures::from_words(&names, &[1 | 1 << 31, 1 << 3]);
        assert!(f.is_on("f0") && f.is_on("f31") && f.is_on("f35"));
        assert!(!f.is_on("f1") && !f.is_on("f32") && !f.is_on("nope"));
        let short = NetdevFeatures::from_words(&names, &[]);
        assert!(!short.is_on("f0"));
    }

    #[test]
    fn udp_segmentation_and_checksum_by_kernel_names() {
        let names = ["tx-checksum-ip-generic", "tx-udp-segmentation"].map(String::from);
        let both = NetdevFeatures::from_words(&names, &[0b11]);
        assert!(both.udp_segmentation() && both.tx_checksum());
        let none = NetdevFeatures::from_words(&names, &[0]);
        assert!(!none.udp_segmentation() && !none.tx_checksum());
    }
}
