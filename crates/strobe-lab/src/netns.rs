//! Named network namespaces the way `ip netns` keeps them: a file under /var/run/netns with
//! the namespace bind-mounted onto it, so it outlives the thread that made it and other
//! tools (`ip netns exec`, `tc -n`) find it.
//!
//! Everything here changes the namespace of the calling thread, so it only runs on the lab's
//! own worker thread (see `lib.rs`), never on a caller's thread.

use std::fs::{self, File};
use std::io;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::Mutex;

use nix::errno::Errno;
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sched::{setns, unshare, CloneFlags};

use crate::LabError;

/// Where `ip netns` keeps named namespaces (and where strobe's backends look for them).
pub(crate) const NETNS_DIR: &str = "/var/run/netns";
/// This thread's network namespace (not the process's: only this thread ever moves).
const THREAD_NETNS: &str = "/proc/thread-self/ns/net";

pub(crate) fn path(name: &str) -> PathBuf {
    PathBuf::from(NETNS_DIR).join(name)
}

/// A named namespace, held open so links can be moved into it by file descriptor.
#[derive(Debug)]
pub(crate) struct Netns {
    pub name: String,
    pub file: File,
}

impl Netns {
    /// Opens an existing named namespace; `None` if there is none by that name.
    pub fn open(name: &str) -> Result<Option<Netns>, LabError> {
        match File::open(path(name)) {
            Ok(file) => Ok(Some(Netns {
                name: name.to_string(),
                file,
            })),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(LabError::os("open network namespace", name, e)),
        }
    }

    /// Creates a new, empty namespace named `name`; fails if the name is taken.
    pub fn create(name: &str) -> Result<Netns, LabError> {
        prepare_dir()?;
        let target = path(name);
        // The mount point must exist as a file; create_new refuses to reuse someone's name.
        fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&target)
            .map_err(|e| LabError::os("create namespace file", target.display().to_string(), e))?;
        if let Err(e) = bind_new_namespace(name, &target) {
            // The file is ours, and so is whatever may already be mounted on it.
            let _ = delete(name);
            return Err(e);
        }
        Netns::open(name)?.ok_or_else(|| {
            LabError::os(
                "open network namespace",
                name,
                io::Error::from(io::ErrorKind::NotFound),
            )
        })
    }

    /// Runs `f` with this thread inside the namespace, then returns to where it was.
    pub fn run<T>(&self, f: impl FnOnce() -> Result<T, LabError>) -> Result<T, LabError> {
        let home = File::open(THREAD_NETNS)
            .map_err(|e| LabError::os("open this thread's namespace", THREAD_NETNS, e))?;
        enter(&self.file, &self.name)?;
        let result = f();
        enter(&home, "of origin")?;
        result
    }
}

fn enter(ns: &impl AsFd, name: &str) -> Result<(), LabError> {
    setns(ns, CloneFlags::CLONE_NEWNET)
        .map_err(|e| LabError::errno("enter network namespace", name, e))
}

/// Moves this thread into a fresh namespace, pins it on `target`, and moves back.
fn bind_new_namespace(name: &str, target: &PathBuf) -> Result<(), LabError> {
    let home = File::open(THREAD_NETNS)
        .map_err(|e| LabError::os("open this thread's namespace", THREAD_NETNS, e))?;
    unshare(CloneFlags::CLONE_NEWNET)
        .map_err(|e| LabError::errno("create network namespace", name, e))?;
    let pinned = mount(
        Some(THREAD_NETNS),
        target,
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .map_err(|e| {
        LabError::errno(
            "bind-mount network namespace",
            target.display().to_string(),
            e,
        )
    });
    // Back home even when the mount failed: the new namespace then vanishes with no user.
    enter(&home, "of origin")?;
    pinned
}

/// Makes /var/run/netns a shared mount, as `ip netns add` does, so a namespace removed here
/// is also unmounted in mount namespaces that copied it (e.g. from `ip netns exec`).
fn prepare_dir() -> Result<(), LabError> {
    // Two threads making it a bind mount of itself at once would stack two mounts.
    static PREPARED: Mutex<bool> = Mutex::new(false);
    let mut prepared = PREPARED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if *prepared {
        return Ok(());
    }
    fs::create_dir_all(NETNS_DIR).map_err(|e| LabError::os("create directory", NETNS_DIR, e))?;
    let make_shared = || {
        mount(
            None::<&str>,
            NETNS_DIR,
            None::<&str>,
            MsFlags::MS_SHARED | MsFlags::MS_REC,
            None::<&str>,
        )
    };
    match make_shared() {
        Ok(()) => {}
        // EINVAL: not a mount point yet; make it one by mounting it onto itself.
        Err(Errno::EINVAL) => {
            mount(
                Some(NETNS_DIR),
                NETNS_DIR,
                None::<&str>,
                MsFlags::MS_BIND | MsFlags::MS_REC,
                None::<&str>,
            )
            .map_err(|e| LabError::errno("bind-mount directory", NETNS_DIR, e))?;
            make_shared().map_err(|e| LabError::errno("make mount shared", NETNS_DIR, e))?;
        }
        Err(e) => return Err(LabError::errno("make mount shared", NETNS_DIR, e)),
    }
    *prepared = true;
    Ok(())
}

/// Removes a named namespace; its links go with it once nothing else uses it.
/// Returns whether there was one.
pub(crate) fn delete(name: &str) -> Result<bool, LabError> {
    let target = path(name);
    match umount2(&target, MntFlags::MNT_DETACH) {
        // EINVAL: the file exists but nothing is mounted on it (a half-made namespace).
        Ok(()) | Err(Errno::EINVAL) | Err(Errno::ENOENT) => {}
        Err(e) => {
            return Err(LabError::errno(
                "unmount network namespace",
                target.display().to_string(),
                e,
            ))
        }
    }
    match fs::remove_file(&target) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(LabError::os(
            "remove namespace file",
            target.display().to_string(),
            e,
        )),
    }
}

/// One sysctl setting, e.g. `net.ipv4.ip_forward = 1`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Sysctl {
    pub key: String,
    pub value: &'static str,
    /// Skipped where the namespace has no such file: kernels before 6.x keep some ICMP
    /// limits global only, and the lab never changes a host-wide value.
    pub skip_if_absent: bool,
}

/// Writes the settings inside `ns`: /proc/sys/net shows the namespace of the thread that
/// opens it.
pub(crate) fn set_sysctls(ns: &Netns, settings: &[Sysctl]) -> Result<(), LabError> {
    ns.run(|| {
        for setting in settings {
            let file = format!("/proc/sys/{}", setting.key.replace('.', "/"));
            match fs::write(&file, setting.value) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound && setting.skip_if_absent => {}
                Err(e) => {
                    return Err(LabError::os(
                        format!("set sysctl in namespace {}", ns.name),
                        format!("{} = {}", setting.key, setting.value),
                        e,
                    ))
                }
            }
        }
        Ok(())
    })
}
