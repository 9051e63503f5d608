//! A controller's lease on an agent's runs: a controller that starts runs on an agent
//! renews its lease while it lives; when the lease runs out (the controller was stopped,
//! crashed or lost its way to the agent), the agent stops its runs on its own, so that no
//! agent goes on sending for a controller that is gone.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Shortest and longest lease a controller may ask for.
pub const MIN_LEASE: Duration = Duration::from_millis(200);
pub const MAX_LEASE: Duration = Duration::from_secs(600);

#[derive(Default)]
pub struct Lease {
    /// When it runs out; None: no controller holds one.
    until: Mutex<Option<Instant>>,
}

impl Lease {
    /// Holds the runs for `length` from now (a start, or a renewal).
    pub fn renew(&self, length: Duration) {
        let until = Instant::now() + length.clamp(MIN_LEASE, MAX_LEASE);
        if let Ok(mut held) = self.until.lock() {
            *held = Some(until);
        }
    }

    /// True once, when a lease held ran out at `now` (it is then gone).
    pub fn ran_out(&self, now: Instant) -> bool {
        let Ok(mut held) = self.until.lock() else {
            return false;
        };
        match *held {
            Some(until) if now >= until => {
                *held = None;
                true
            }
            _ => false,
        }
    }
}

/// Reads a lease length in ms, as a controller gives it.
pub fn length(ms: &serde_json::Value) -> Result<Duration, String> {
    let ms = ms
        .as_u64()
        .ok_or_else(|| "lease_ms: give milliseconds".to_string())?;
    let length = Duration::from_millis(ms);
    if !(MIN_LEASE..=MAX_LEASE).contains(&length) {
        return Err(format!(
            "lease_ms: {ms} — give {} to {} ms",
            MIN_LEASE.as_millis(),
            MAX_LEASE.as_millis()
        ));
    }
    Ok(length)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_runs_out_once_unless_renewed() {
        let lease = Lease::default();
        let now = Instant::now();
        assert!(!lease.ran_out(now + Duration::from_secs(3600)), "none held");
        lease.renew(Duration::from_secs(1));
        assert!(!lease.ran_out(Instant::now()));
        assert!(lease.ran_out(now + Duration::from_secs(2)));
        assert!(!lease.ran_out(now + Duration::from_secs(3)), "said once");
        assert!(length(&serde_json::json!(5000)).is_ok());
        assert!(length(&serde_json::json!(5)).is_err());
        assert!(length(&serde_json::json!("x")).is_err());
    }
}
