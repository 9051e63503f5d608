//! The far end of a round-trip measurement as a front end drives it: a port opened for both
//! directions, the engine's reflect loop on a thread of its own, stopped by a signal, a
//! duration or a frame count, with live counters for a status line.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use strobe_engine::reflect::{run_reflect, ReflectOptions};
pub use strobe_engine::reflect::{ReflectCounters, ReflectReport};
use strobe_engine::rx_worker::IdlePolicy;

use crate::ControlError;

/// What to reflect and for how long.
#[derive(Clone, Debug, Default)]
pub struct ReflectorOptions {
    /// The MAC address to answer to (None: the interface's own).
    pub mac: Option<[u8; 6]>,
    /// Every frame addressed to the port, not only those with strobe's trailer.
    pub all_frames: bool,
    /// Never yield the core while idle.
    pub busy_poll: bool,
    /// Stop after this long.
    pub limit: Option<Duration>,
    /// Stop after reflecting this many frames.
    pub max_frames: Option<u64>,
}

/// A reflector on one port, opened and ready to run.
pub struct Reflector {
    location: String,
    mac: [u8; 6],
    tx: strobe_io::AnyBackend,
    rx: strobe_io::AnyReceiver,
    options: ReflectorOptions,
}

impl Reflector {
    /// Opens `location` (a resolved port location, not `lab:`) for receiving and sending.
    pub fn open(location: &str, options: ReflectorOptions) -> Result<Self, ControlError> {
        let bad = |e: strobe_io::IoError| ControlError::BadInput(e.to_string());
        let (tx, rx) = strobe_io::open_duplex(location, 64).map_err(bad)?;
        let mac = match options.mac {
            Some(mac) => mac,
            None => strobe_io::ifaddr::port_mac(location).map_err(bad)?,
        };
        Ok(Reflector {
            location: location.to_string(),
            mac,
            tx,
            rx,
            options,
        })
    }

    /// The port it reflects on.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// The MAC address frames must be sent to for it to reflect them.
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// Reflects until `stop` is set, the duration or the frame count is reached, or the
    /// port fails (the report then names the failure and keeps the counts). `status` is
    /// called about every `status_every` with the live counters and the time since start.
    pub fn run(
        mut self,
        stop: &AtomicBool,
        status_every: Duration,
        status: &mut dyn FnMut(&ReflectCounters, Duration),
    ) -> Result<ReflectReport, ControlError> {
        let opts = ReflectOptions {
            mac: self.mac,
            all_frames: self.options.all_frames,
            idle: if self.options.busy_poll {
                IdlePolicy::busy()
            } else {
                IdlePolicy::default()
            },
            max_frames: self.options.max_frames,
        };
        let live = ReflectCounters::default();
        let limit = self.options.limit;
        let (rx, tx) = (&mut self.rx, &mut self.tx);
        std::thread::scope(|scope| {
            let worker = std::thread::Builder::new()
                .name("reflect".into())
                .spawn_scoped(scope, || run_reflect(rx, tx, &opts, stop, Some(&live)))
                .map_err(|e| {
                    ControlError::Runtime(format!(
                        "cannot start the reflector thread: {e} (too many threads for this \
                         process or user? check `ulimit -u` and the cgroup's pids.max)"
                    ))
                })?;
            let started = Instant::now();
            let mut last_status = started;
            while !worker.is_finished() {
                std::thread::sleep(Duration::from_millis(20));
                if limit.is_some_and(|l| started.elapsed() >= l) {
                    stop.store(true, Ordering::Relaxed);
                }
                if last_status.elapsed() >= status_every {
                    status(&live, started.elapsed());
                    last_status = Instant::now();
                }
            }
            worker
                .join()
                .map_err(|_| ControlError::Runtime("the reflector worker panicked".into()))
        })
    }
}

/// A unicast MAC address written as six hex bytes separated by `:` or `-` (None for a
/// group address: a reflector never answers to one).
pub fn parse_unicast_mac(text: &str) -> Option<[u8; 6]> {
    strobe_model::parse_mac(text).filter(|mac| mac[0] & 1 == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_addresses_parse_and_group_addresses_are_refused() {
        assert_eq!(
            parse_unicast_mac("02:00:0a:ff:00:01"),
            Some([2, 0, 10, 255, 0, 1])
        );
        assert_eq!(
            parse_unicast_mac("02-00-0A-FF-00-01"),
            Some([2, 0, 10, 255, 0, 1])
        );
        assert_eq!(
            strobe_model::mac_string([2, 0, 10, 255, 0, 1]),
            "02:00:0a:ff:00:01"
        );
        for bad in [
            "",
            "02:00:00:00:00",
            "02:00:00:00:00:01:02",
            "ff:ff:ff:ff:ff:ff",
            "01:00:5e:00:00:01",
            "02:00:00:00:00:100",
            "zz:00:00:00:00:01",
            "02:00-00:00:00:01",
        ] {
            assert_eq!(parse_unicast_mac(bad), None, "{bad}");
        }
    }
}
