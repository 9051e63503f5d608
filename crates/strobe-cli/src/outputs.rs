//! Output files: every path is checked before the first frame is sent, so a typo costs
//! nothing, and at the end one output that cannot be written never keeps the others from
//! being written.

use std::io::Write as _;
use std::os::fd::AsFd as _;
use std::path::Path;
use std::sync::OnceLock;
use std::time::SystemTime;

use crate::failure::Failure;

/// When the command started: every JSON document carries it.
static STARTED: OnceLock<SystemTime> = OnceLock::new();

/// The standard output as it was given to strobe, kept for the JSON document alone when
/// `--json -` asked for it there (everything else printed goes to stderr then).
static JSON_STDOUT: OnceLock<std::fs::File> = OnceLock::new();

/// Notes the command's start (first thing in `main`).
pub fn mark_start() {
    STARTED.get_or_init(SystemTime::now);
}

/// `result` as the JSON document command `kind` writes: strobe's version, the schema's,
/// the start time, then the result's own fields (it must serialise as an object).
pub fn document<T: serde::Serialize>(kind: &str, result: &T) -> String {
    let started = *STARTED.get_or_init(SystemTime::now);
    let document = strobe_control::results::Document::new(kind, started, result);
    let mut text = serde_json::to_string_pretty(&document).unwrap_or_default();
    text.push('\n');
    text
}

/// Whether the command line sends a JSON document to the standard output: `--json -`,
/// `--json=-`, or a bare `--json` (the commands where its value is optional).
pub fn json_goes_to_stdout(args: &[String]) -> bool {
    // Only the commands whose `--json` takes a FILE write through the JSON writer; the others'
    // bare `--json` (calc, ports, clocks) prints the document alone on stdout already.
    const TAKES_A_FILE: [&str; 8] = [
        "gen", "rfc2544", "y1564", "trains", "reflect", "analyze", "runs", "study",
    ];
    let command = args.iter().skip(1).find(|arg| !arg.starts_with('-'));
    if !command.is_some_and(|c| TAKES_A_FILE.contains(&c.as_str())) {
        return false;
    }
    args.iter().enumerate().any(|(i, arg)| match arg.as_str() {
        "--json=-" => true,
        "--json" => match args.get(i + 1).map(String::as_str) {
            None | Some("-") => true,
            Some(next) => next.starts_with("--"),
        },
        _ => false,
    })
}

/// Keeps the standard output for the JSON document and sends everything else printed
/// (tables, status, notes) to stderr, so that `strobe gen … --json - | jq .` reads one
/// clean document (as iperf3 -J's users expect).
pub fn claim_stdout_for_json() -> std::io::Result<()> {
    let stdout = std::io::stdout();
    let original = stdout.as_fd().try_clone_to_owned()?;
    // SAFETY: dup2 on two descriptors this process owns; fd 1 is replaced atomically.
    if unsafe { libc::dup2(libc::STDERR_FILENO, libc::STDOUT_FILENO) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let _ = JSON_STDOUT.set(std::fs::File::from(original));
    Ok(())
}

/// `-`: the standard output, as outputs that can go there name it.
pub fn is_stdout(path: &Path) -> bool {
    path == Path::new("-")
}

/// Checks that `path` (given with `flag`) can be written, without changing it: an existing
/// file is opened for appending, a new one is created and removed again. Devices and pipes
/// (/dev/stdout, a FIFO a reader has yet to open) are taken as they are: opening one could
/// block or have effects.
pub fn check_writable(flag: &str, path: &Path) -> Result<(), Failure> {
    if is_stdout(path) {
        return Ok(());
    }
    let bad = |why: String| {
        Failure::BadInput(format!(
            "{flag} {}: {why}; give a file in an existing folder you can write to (nothing was sent)",
            path.display()
        ))
    };
    if path.is_dir() {
        return Err(bad("is a folder, not a file".into()));
    }
    // Not `exists()`: a dangling symlink exists too, and must not be removed below.
    let existing = std::fs::symlink_metadata(path).ok();
    if existing
        .as_ref()
        .is_some_and(|m| !m.is_file() && !m.file_type().is_symlink())
    {
        return Ok(());
    }
    let existed = existing.is_some();
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| bad(format!("cannot be written: {e}")))?;
    if !existed {
        std::fs::remove_file(path)
            .map_err(|e| bad(format!("cannot remove the test file again: {e}")))?;
    }
    Ok(())
}

/// Checks every output that is given.
pub fn check_all(outputs: &[(&str, Option<&Path>)]) -> Result<(), Failure> {
    for (flag, path) in outputs {
        if let Some(path) = path {
            check_writable(flag, path)?;
        }
    }
    Ok(())
}

/// Writes `bytes` to `path`, naming the file in the error.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    if is_stdout(path) {
        let written = match JSON_STDOUT.get() {
            Some(mut out) => out.write_all(bytes).and_then(|()| out.flush()),
            None => {
                let mut out = std::io::stdout().lock();
                out.write_all(bytes).and_then(|()| out.flush())
            }
        };
        return written
            .map_err(|e| Failure::Runtime(format!("cannot write to the standard output: {e}")));
    }
    std::fs::write(path, bytes)
        .map_err(|e| Failure::Runtime(format!("cannot write {}: {e}", path.display())))
}

/// Outputs that could not be written at the end of a run, each reported on its own.
/// Failed verdicts are kept apart: strobe's own failures (exit 1) outrank them (exit 3).
#[derive(Default)]
pub struct WriteFailures(Vec<String>, Vec<String>);

impl WriteFailures {
    /// Keeps the failure of one output, if it failed, and goes on with the next.
    pub fn note(&mut self, result: Result<(), Failure>) {
        match result {
            Ok(()) | Err(Failure::Interrupted(_)) => {}
            Err(Failure::BadInput(msg) | Failure::Runtime(msg)) => self.0.push(msg),
            Err(Failure::Verdict(msg)) => self.1.push(msg),
        }
    }

    /// The command's outcome: a failed output fails it (exit 1, every failure named), else
    /// a failed verdict (exit 3), otherwise `then`.
    pub fn outcome(self, then: Result<(), Failure>) -> Result<(), Failure> {
        if self.0.is_empty() && self.1.is_empty() {
            return then;
        }
        if let Err(Failure::Interrupted(signal)) = then {
            let _ = writeln!(
                std::io::stderr(),
                "stopped by {}: the results cover the part that ran",
                crate::signals::name(signal)
            );
        }
        if self.0.is_empty() {
            return Err(Failure::Verdict(self.1.join("\nverdict: ")));
        }
        // The verdicts are still said, under the failure that decides the exit code.
        let all: Vec<String> = self.0.into_iter().chain(self.1).collect();
        Err(Failure::Runtime(all.join("\nerror: ")))
    }
}
