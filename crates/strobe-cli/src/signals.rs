//! SIGINT, SIGTERM and SIGHUP end a long-running command the same way: the first stops
//! sending (the results of what ran are still drained, printed and written), a second ends
//! the drain at once, a third exits at once without results. `timeout`, systemd, CI runners and container stops send SIGTERM; a
//! closed terminal sends SIGHUP.

use std::io::{IsTerminal, Write as _};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, OnceLock};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::failure::Failure;

/// What the signals of this process have asked for so far.
pub struct Interruption {
    /// Set by the first signal: stop sending, drain, write the results.
    pub stop: Arc<AtomicBool>,
    /// Set by the second: end the drain now (the results are still written).
    pub abort_drain: Arc<AtomicBool>,
    /// The first signal's number, 0 while none came.
    first: AtomicI32,
}

impl Interruption {
    /// The signal that stopped the run, if one did.
    pub fn signal(&self) -> Option<i32> {
        match self.first.load(Ordering::Relaxed) {
            0 => None,
            s => Some(s),
        }
    }

    /// Whether a second signal cut the drain short.
    pub fn drain_cut_short(&self) -> bool {
        self.abort_drain.load(Ordering::Relaxed)
    }

    /// The command's outcome after its results were written: a run a signal stopped ends
    /// with 128 + the signal's number, as a shell reports a process the signal killed.
    pub fn outcome(&self) -> Result<(), Failure> {
        match self.signal() {
            Some(signal) => Err(Failure::Interrupted(signal)),
            None => Ok(()),
        }
    }
}

/// What a third signal says as it exits: what the command leaves behind that its normal end
/// would have removed, and how to remove it.
static LEFT_BEHIND: OnceLock<String> = OnceLock::new();

/// Has a third signal say `note` before it exits (the first note given is kept).
pub fn on_exit_say(note: String) {
    let _ = LEFT_BEHIND.set(note);
}

/// The signal's name, e.g. "SIGTERM".
pub fn name(signal: i32) -> &'static str {
    match signal {
        SIGINT => "SIGINT",
        SIGTERM => "SIGTERM",
        SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

/// Catches SIGINT, SIGTERM and SIGHUP from now on (installed once per process: a sweep runs
/// several generators).
pub fn install() -> Result<&'static Interruption, Failure> {
    static STATE: OnceLock<Interruption> = OnceLock::new();
    if let Some(state) = STATE.get() {
        return Ok(state);
    }
    let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP])
        .map_err(|e| Failure::Runtime(format!("cannot install the signal handlers: {e}")))?;
    let state = STATE.get_or_init(|| Interruption {
        stop: Arc::new(AtomicBool::new(false)),
        abort_drain: Arc::new(AtomicBool::new(false)),
        first: AtomicI32::new(0),
    });
    // Asked now: once the terminal has hung up, it no longer answers as one.
    let terminals = [
        (libc::STDOUT_FILENO, std::io::stdout().is_terminal()),
        (libc::STDERR_FILENO, std::io::stderr().is_terminal()),
    ];
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                if signal == SIGHUP {
                    detach_from_a_hung_up_terminal(&terminals);
                }
                if state
                    .first
                    .compare_exchange(0, signal, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
                {
                    state.stop.store(true, Ordering::Relaxed);
                    // After a SIGHUP the terminal may be gone: a failed write is no reason
                    // to stop (eprintln! would panic).
                    let _ = writeln!(
                        std::io::stderr(),
                        "\n{}: stopping; the results so far follow (send it again to end the drain at once)",
                        name(signal)
                    );
                } else if !state.abort_drain.swap(true, Ordering::Relaxed) {
                    let _ = writeln!(
                        std::io::stderr(),
                        "\n{}: ending the drain now (a third signal exits at once, without results)",
                        name(signal)
                    );
                } else {
                    // The escape hatch when something does not notice the first two (a port
                    // that will not open, a hung write): the user should never need SIGKILL.
                    let _ = writeln!(std::io::stderr(), "\n{}: exiting now", name(signal));
                    if let Some(note) = LEFT_BEHIND.get() {
                        let _ = writeln!(std::io::stderr(), "{note}");
                    }
                    std::process::exit(128 + signal);
                }
            }
        })
        .map_err(|e| Failure::Runtime(format!("cannot start the signal thread: {e}")))?;
    Ok(state)
}

/// A SIGHUP usually means the terminal is gone, and every write to it would fail (and
/// `println!` panic before the results are out): output that went to a terminal goes to
/// /dev/null from now on; files and pipes are kept.
fn detach_from_a_hung_up_terminal(terminals: &[(libc::c_int, bool)]) {
    use std::os::fd::AsRawFd;
    let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") else {
        return;
    };
    for &(fd, terminal) in terminals {
        if terminal {
            // SAFETY: dup2 of an open descriptor onto a standard one; std's handles keep
            // using the descriptor number, now /dev/null.
            unsafe { libc::dup2(null.as_raw_fd(), fd) };
        }
    }
}
