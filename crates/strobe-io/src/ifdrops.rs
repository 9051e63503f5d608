//! Frames an interface dropped on receive before any socket saw them (a full per-CPU
//! backlog, no memory), as the kernel counts them: the loss a receiver cannot see, read
//! around a run so that a report can say where frames went.

use std::fs;

use crate::netns::in_netns;
use crate::IoError;

/// An interface's receive drop counter when a run started.
#[derive(Clone, Debug)]
pub struct InterfaceDrops {
    netns: Option<String>,
    iface: String,
    before: u64,
}

impl InterfaceDrops {
    /// Reads the counter of `iface` in `netns` now; None when the kernel does not list it.
    pub fn start(netns: Option<&str>, iface: &str) -> Option<InterfaceDrops> {
        let before = read(netns, iface).ok()??;
        Some(InterfaceDrops {
            netns: netns.map(str::to_string),
            iface: iface.to_string(),
            before,
        })
    }

    /// Drops since [`start`](Self::start).
    pub fn since_start(&self) -> Option<u64> {
        let now = read(self.netns.as_deref(), &self.iface).ok()??;
        Some(now.saturating_sub(self.before))
    }
}

/// The "drop" column of `iface`'s receive side in /proc/net/dev, as the calling thread's
/// network namespace sees it (rx_dropped plus rx_missed_errors).
fn read(netns: Option<&str>, iface: &str) -> Result<Option<u64>, IoError> {
    in_netns(netns, || {
        // thread-self: the namespace this thread was moved into, not the process's.
        let text = fs::read_to_string("/proc/thread-self/net/dev")
            .map_err(|e| IoError::Other(format!("cannot read /proc/net/dev: {e}")))?;
        Ok(parse_rx_drops(&text, iface))
    })
}

fn parse_rx_drops(text: &str, iface: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (name, fields) = line.split_once(':')?;
        (name.trim() == iface).then(|| fields.split_whitespace().nth(3)?.parse().ok())?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_receive_drop_column() {
        let text = "Inter-|   Receive                                                |  Transmit\n \
face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0\n   \
rx0: 474000540 7900006    0 273545    0     0          0         0      360       4    0    7    0     0       0          0\n";
        assert_eq!(parse_rx_drops(text, "rx0"), Some(273545));
        assert_eq!(parse_rx_drops(text, "lo"), Some(0));
        assert_eq!(parse_rx_drops(text, "rx"), None);
        assert_eq!(parse_rx_drops("rx0: 1 2", "rx0"), None);
    }
}
