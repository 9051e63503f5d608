use std::io;

use nix::errno::Errno;

/// Everything that can go wrong building, reading or removing a lab. Each message names the
/// step and the object it failed on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LabError {
    #[error("invalid lab prefix `{prefix}`: {reason}")]
    InvalidPrefix { prefix: String, reason: String },
    #[error(
        "invalid DUT `{input}`: {reason}; accepted forms: cable, bridge, router, tbf:RATE \
         (RATE like 100mbit, 1gbit, 1.5gbit, 50mbps; k/m/g are powers of 1000 and bps means bits per second), \
         nft:RULES (the router with RULES nftables rules, 1 to 100000), xdp (an XDP forwarder), \
         testpmd[:afpacket|:afxdp][@CORE] (DPDK testpmd forwarding on CORE, by default one strobe does not use), \
         ovs[:FLOWS_FILE] (an Open vSwitch bridge, learning or with the OpenFlow flows in FLOWS_FILE)"
    )]
    InvalidDut { input: String, reason: String },
    #[error(
        "the lab needs root (network namespaces): {step} `{object}` was refused ({source}); \
         run as root or with CAP_SYS_ADMIN and CAP_NET_ADMIN"
    )]
    NeedsRoot {
        step: String,
        object: String,
        #[source]
        source: io::Error,
    },
    #[error("{step} `{object}` failed: {source}")]
    Failed {
        step: String,
        object: String,
        #[source]
        source: io::Error,
    },
    #[error(
        "lab `{prefix}` is incomplete or was changed by hand: {detail}; \
         `strobe lab down` removes it, `strobe lab up` rebuilds it"
    )]
    Broken { prefix: String, detail: String },
}

impl LabError {
    /// Wraps an OS error from `step` on `object`, telling a missing privilege apart.
    pub(crate) fn os(
        step: impl Into<String>,
        object: impl Into<String>,
        source: io::Error,
    ) -> Self {
        let (step, object) = (step.into(), object.into());
        let refused = [Errno::EPERM, Errno::EACCES]
            .iter()
            .any(|&e| source.raw_os_error() == Some(e as i32));
        if refused {
            LabError::NeedsRoot {
                step,
                object,
                source,
            }
        } else {
            LabError::Failed {
                step,
                object,
                source,
            }
        }
    }

    /// A program the lab runs (`tc`, `ip`, `nft`) that could not be started: a missing one
    /// is said with `missing` (what to install), any other failure as it is.
    pub(crate) fn program(
        step: impl Into<String>,
        object: impl Into<String>,
        source: io::Error,
        missing: &str,
    ) -> Self {
        let source = if source.kind() == io::ErrorKind::NotFound {
            io::Error::new(source.kind(), missing.to_string())
        } else {
            source
        };
        LabError::os(step, object, source)
    }

    pub(crate) fn errno(step: impl Into<String>, object: impl Into<String>, errno: Errno) -> Self {
        LabError::os(step, object, io::Error::from(errno))
    }

    /// Wraps a netlink failure; kernel refusals keep their errno so EPERM is recognised.
    pub(crate) fn netlink(
        step: impl Into<String>,
        object: impl Into<String>,
        source: rtnetlink::Error,
    ) -> Self {
        let source = match source {
            rtnetlink::Error::NetlinkError(message) => message.to_io(),
            other => io::Error::other(other.to_string()),
        };
        LabError::os(step, object, source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permission_errors_say_root_is_needed() {
        let err = LabError::errno("create namespace", "strobe-tx", nix::errno::Errno::EPERM);
        let text = err.to_string();
        assert!(matches!(err, LabError::NeedsRoot { .. }));
        assert!(
            text.contains("the lab needs root (network namespaces)"),
            "{text}"
        );
        assert!(text.contains("create namespace `strobe-tx`"), "{text}");
        let err = LabError::errno("create namespace", "strobe-tx", nix::errno::Errno::EEXIST);
        assert!(matches!(err, LabError::Failed { .. }));
    }
}
