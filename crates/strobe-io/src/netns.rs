//! Running socket set-up inside a named network namespace (`ip netns` style, bind-mounted
//! under /var/run/netns). A socket belongs to the namespace of the thread that created it
//! and stays there, so a backend can enter the namespace, open its sockets, and return.

use std::fs::File;
use std::os::fd::AsRawFd;

use crate::IoError;

/// Where `ip netns` (and strobe's lab) keep named namespaces.
pub const NETNS_DIR: &str = "/var/run/netns";

fn enter(ns: &File, what: &str) -> Result<(), IoError> {
    // SAFETY: setns on a valid namespace fd only changes this thread's network namespace.
    let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        return Err(IoError::Other(format!(
            "cannot enter network namespace {what}: {} (entering a namespace needs root or CAP_SYS_ADMIN)",
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

/// Runs `f` on this thread inside network namespace `name` (None = stay where we are),
/// then returns to the original namespace, also when `f` fails.
pub fn in_netns<T>(
    name: Option<&str>,
    f: impl FnOnce() -> Result<T, IoError>,
) -> Result<T, IoError> {
    let Some(name) = name else { return f() };
    let path = format!("{NETNS_DIR}/{name}");
    let target = File::open(&path).map_err(|e| {
        IoError::Other(format!(
            "network namespace `{name}` not found ({path}: {e}); `strobe lab up` creates the lab's namespaces"
        ))
    })?;
    let home = File::open("/proc/thread-self/ns/net").map_err(|source| IoError::File {
        what: "cannot open this thread's network namespace",
        path: "/proc/thread-self/ns/net".into(),
        source,
    })?;
    enter(&target, name)?;
    let result = f();
    // Returning must not fail silently: a thread left in the wrong namespace would open the
    // next port in the wrong place.
    enter(&home, "of origin")?;
    result
}

/// Splits an interface reference `NETNS/IFACE` (or just `IFACE`) into its parts.
pub fn split_netns(spec: &str) -> (Option<&str>, &str) {
    match spec.split_once('/') {
        Some((ns, iface)) => (Some(ns), iface),
        None => (None, spec),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_namespace_and_interface() {
        assert_eq!(split_netns("strobe-gen/tx0"), (Some("strobe-gen"), "tx0"));
        assert_eq!(split_netns("eth1"), (None, "eth1"));
    }

    #[test]
    fn missing_namespace_is_a_clear_error() {
        let err = in_netns(Some("strobe-no-such-ns"), || Ok(())).unwrap_err();
        assert!(err.to_string().contains("strobe-no-such-ns"), "{err}");
    }

    #[test]
    fn no_namespace_runs_in_place() {
        assert_eq!(in_netns(None, || Ok(7)).unwrap(), 7);
    }
}
