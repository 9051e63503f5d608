//! The processes a lab runs for its DUT (testpmd, Open vSwitch's database and switch). Each
//! runs in the DUT's namespace in a process group of its own (a Ctrl-C meant for `strobe lab
//! up` never reaches it) and outlives strobe until `lab down`. Its PID and log are kept in a
//! run directory of the lab's own, `/run/strobe-lab/PREFIX`, and it is stopped by that PID
//! only after its command line shows it is still this lab's process (an argument naming the
//! lab), never by its program's name.

use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag};
use nix::unistd::Pid;

use crate::netns::Netns;
use crate::LabError;

/// Where the lab keeps the PIDs and logs of the processes it starts.
const RUN_ROOT: &str = "/run/strobe-lab";
/// How long a process gets to exit on SIGTERM (and again on SIGKILL).
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// Lab `prefix`'s run directory.
pub(crate) fn run_dir(prefix: &str) -> PathBuf {
    PathBuf::from(RUN_ROOT).join(prefix)
}

/// Removes lab `prefix`'s run directory, once its processes are stopped.
pub(crate) fn remove_run_dir(prefix: &str) -> Result<(), LabError> {
    remove_dir(run_dir(prefix))
}

/// Removes `dir` and everything in it; an absent directory is fine.
pub(crate) fn remove_dir(dir: PathBuf) -> Result<(), LabError> {
    match fs::remove_dir_all(&dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(LabError::os("remove", dir.display().to_string(), e)),
    }
}

/// Whether `program` is on the PATH (to refuse up front what would fail later).
pub(crate) fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// One process of lab `prefix`: `name` names its PID and log files, `mark` is an argument
/// only this lab's instance has on its command line.
pub(crate) struct Daemon {
    prefix: String,
    name: &'static str,
    mark: String,
}

impl Daemon {
    pub(crate) fn new(prefix: &str, name: &'static str, mark: String) -> Daemon {
        Daemon {
            prefix: prefix.to_string(),
            name,
            mark,
        }
    }

    fn pid_file(&self) -> PathBuf {
        run_dir(&self.prefix).join(format!("{}.pid", self.name))
    }

    /// Its standard output and error.
    pub(crate) fn log_file(&self) -> PathBuf {
        run_dir(&self.prefix).join(format!("{}.log", self.name))
    }

    fn object(&self, ns: &Netns) -> String {
        format!("{} in namespace {}", self.name, ns.name)
    }

    /// Starts `command` in namespace `ns` (the child starts on this thread while it is
    /// inside the namespace) and waits until `ready` says it is, for at most `timeout`.
    /// `missing` is the advice when the program is not there. On any failure the process
    /// is ended and the error quotes the end of its log.
    pub(crate) fn start(
        &self,
        ns: &Netns,
        mut command: Command,
        missing: &str,
        timeout: Duration,
        mut ready: impl FnMut() -> bool,
    ) -> Result<u32, LabError> {
        let dir = run_dir(&self.prefix);
        fs::create_dir_all(&dir)
            .map_err(|e| LabError::os("create the run directory", dir.display().to_string(), e))?;
        let log_path = self.log_file();
        let log = File::create(&log_path)
            .map_err(|e| LabError::os("create", log_path.display().to_string(), e))?;
        let log_err = log
            .try_clone()
            .map_err(|e| LabError::os("open", log_path.display().to_string(), e))?;
        let object = self.object(ns);
        command
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .process_group(0);
        // Kept outside the namespace switch: if coming back fails, the child is still ended.
        let mut spawned: Option<Child> = None;
        let entered = ns.run(|| {
            let child = command
                .spawn()
                .map_err(|e| LabError::program("start", object.clone(), e, missing))?;
            spawned = Some(child);
            Ok(())
        });
        let Some(mut child) = spawned else {
            return Err(entered.err().unwrap_or_else(|| {
                LabError::os("start", &object, io::Error::other("no process was started"))
            }));
        };
        let pid = child.id();
        let started =
            entered.and_then(|()| self.wait_until_ready(&mut child, &object, timeout, &mut ready));
        match started {
            Ok(()) => Ok(pid),
            Err(e) => {
                // Nothing else knows this process yet: it goes with the error.
                let _ = child.kill();
                let _ = child.wait();
                let _ = fs::remove_file(self.pid_file());
                Err(e)
            }
        }
    }

    /// Records the PID and waits until `ready`; any error leaves the process to the caller.
    fn wait_until_ready(
        &self,
        child: &mut Child,
        object: &str,
        timeout: Duration,
        ready: &mut impl FnMut() -> bool,
    ) -> Result<(), LabError> {
        let pid_path = self.pid_file();
        fs::write(&pid_path, format!("{}\n", child.id()))
            .map_err(|e| LabError::os("write", pid_path.display().to_string(), e))?;
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(LabError::os(
                    "start",
                    object,
                    io::Error::other(format!(
                        "it exited ({status}) before it was ready; its last words ({}): {}",
                        self.log_file().display(),
                        self.log_tail()
                    )),
                ));
            }
            if ready() {
                return Ok(());
            }
            if started.elapsed() > timeout {
                return Err(LabError::os(
                    "start",
                    object,
                    io::Error::other(format!(
                        "it was not ready within {} s; its log ({}): {}",
                        timeout.as_secs(),
                        self.log_file().display(),
                        self.log_tail()
                    )),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub(crate) fn read_log(&self) -> String {
        let mut text = String::new();
        if let Ok(mut file) = File::open(self.log_file()) {
            let _ = file.read_to_string(&mut text);
        }
        text
    }

    /// The last lines of the log that say something.
    pub(crate) fn log_tail(&self) -> String {
        let text = self.read_log();
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        lines[lines.len().saturating_sub(4)..].join(" | ")
    }

    /// Its PID if it runs: the PID the run directory records, still alive, and still this
    /// lab's process (not one that took over the number).
    pub(crate) fn running(&self) -> Option<u32> {
        let pid = self.recorded_pid()?;
        self.is_ours(pid).then_some(pid)
    }

    fn recorded_pid(&self) -> Option<u32> {
        fs::read_to_string(self.pid_file())
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    fn is_ours(&self, pid: u32) -> bool {
        let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else {
            return false;
        };
        let ours = cmdline
            .split(|&b| b == 0)
            .any(|arg| arg == self.mark.as_bytes());
        ours && !is_zombie(pid)
    }

    /// Stops it if it runs (SIGTERM, then SIGKILL) and removes its PID file. Returns
    /// whether it was running.
    pub(crate) fn stop(&self) -> Result<bool, LabError> {
        let running = self.running();
        if let (None, Some(pid)) = (running, self.recorded_pid()) {
            // A process that died as this process's own child (a long-lived strobe started
            // it) is reaped; for any other process this fails with ECHILD and does nothing.
            let _ = waitpid(Pid::from_raw(pid as i32), Some(WaitPidFlag::WNOHANG));
        }
        if let Some(pid) = running {
            let target = Pid::from_raw(pid as i32);
            let object = format!("{} (pid {pid}) of lab {}", self.name, self.prefix);
            for signal in [Signal::SIGTERM, Signal::SIGKILL] {
                match kill(target, signal) {
                    Ok(()) | Err(Errno::ESRCH) => {}
                    Err(e) => return Err(LabError::errno("stop", &object, e)),
                }
                let since = Instant::now();
                // Reaps it if it is this process's child (strobe's own tests start it
                // in-process).
                while self.is_ours(pid) && since.elapsed() < STOP_TIMEOUT {
                    let _ = waitpid(target, Some(WaitPidFlag::WNOHANG));
                    std::thread::sleep(Duration::from_millis(20));
                }
                if !self.is_ours(pid) {
                    // Gone, or a zombie of this process's own: reaped now, not left behind.
                    let _ = waitpid(target, Some(WaitPidFlag::WNOHANG));
                    break;
                }
            }
            if self.is_ours(pid) {
                return Err(LabError::os(
                    "stop",
                    object,
                    io::Error::other("it is still running after SIGKILL"),
                ));
            }
        }
        match fs::remove_file(self.pid_file()) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(LabError::os(
                    "remove",
                    self.pid_file().display().to_string(),
                    e,
                ))
            }
        }
        Ok(running.is_some())
    }
}

/// A process that exited but was not reaped yet (a test's own child) still has its PID.
fn is_zombie(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let state = stat.rsplit_once(')')?.1.trim_start().chars().next()?;
            Some(state == 'Z' || state == 'X')
        })
        .unwrap_or(true)
}

/// The cores `pid` may run on, from its status (`Cpus_allowed_list`, e.g. `0-1,4`).
pub(crate) fn allowed_cores(pid: u32) -> Option<Vec<u32>> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?
        .trim();
    let mut cores = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((lo, hi)) => cores.extend(lo.parse::<u32>().ok()?..=hi.parse::<u32>().ok()?),
            None => cores.push(part.parse().ok()?),
        }
    }
    Some(cores)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pid_that_is_not_this_labs_process_is_not_running() {
        let daemon = Daemon::new("p", "testpmd", "--file-prefix=strobe-lab-p".into());
        assert!(!daemon.is_ours(std::process::id()));
        assert!(!daemon.is_ours(u32::MAX));
    }

    #[test]
    fn this_process_may_run_on_its_allowed_cores() {
        let cores = allowed_cores(std::process::id()).unwrap();
        assert!(!cores.is_empty());
        assert!(cores.windows(2).all(|w| w[0] < w[1]), "{cores:?}");
        assert_eq!(allowed_cores(u32::MAX), None);
    }
}
