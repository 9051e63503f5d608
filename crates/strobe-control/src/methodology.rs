//! What the test methodologies ([`crate::rfc2544`], [`crate::y1564`], [`crate::trains`])
//! share: the one flow their specs describe, and the rules for a run that a stop cuts short.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::source::OneFlow;

/// The flow a methodology's spec describes, from `port` to the receive port `rx`; each
/// trial or step sets what it sends. Its seed is fixed, so that every trial draws the same
/// frame sizes and timing.
pub(crate) fn spec_flow(
    port: &str,
    rx: &str,
    src_mac: &Option<String>,
    dst_mac: &Option<String>,
) -> OneFlow {
    OneFlow {
        flow: strobe_model::quick::QuickArgs {
            port: port.to_string(),
            src_mac: src_mac.clone(),
            dst_mac: dst_mac.clone(),
            seed: 1,
            ..Default::default()
        },
        rx: Some(rx.to_string()),
    }
}

/// A run's outcome, None when it failed and `stopped` says a stop came meanwhile: a stop
/// that comes as a run starts may fail it, and the stop is what happened.
pub(crate) fn unless_stopped<T, E>(
    ran: Result<T, E>,
    stopped: impl FnOnce() -> bool,
) -> Result<Option<T>, E> {
    match ran {
        Ok(ran) => Ok(Some(ran)),
        Err(_) if stopped() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Sleeps `ns`, or until `stop` is set.
pub(crate) fn sleep_unless_stopped(ns: u64, stop: &AtomicBool) {
    let until = Instant::now() + Duration::from_nanos(ns);
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= until {
            break;
        }
        std::thread::sleep((until - now).min(Duration::from_millis(50)));
    }
}
