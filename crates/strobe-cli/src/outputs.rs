//! Output files: every path is checked before the first frame is sent, so a typo costs
//! nothing, and at the end one output that cannot be written never keeps the others from
//! being written.

use std::io::Write as _;
use std::path::Path;

use crate::failure::Failure;

/// Checks that `path` (given with `flag`) can be written, without changing it: an existing
/// file is opened for appending, a new one is created and removed again. Devices and pipes
/// (/dev/stdout, a FIFO a reader has yet to open) are taken as they are: opening one could
/// block or have effects.
pub fn check_writable(flag: &str, path: &Path) -> Result<(), Failure> {
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
    std::fs::write(path, bytes)
        .map_err(|e| Failure::Runtime(format!("cannot write {}: {e}", path.display())))
}

/// Outputs that could not be written at the end of a run, each reported on its own.
#[derive(Default)]
pub struct WriteFailures(Vec<String>);

impl WriteFailures {
    /// Keeps the failure of one output, if it failed, and goes on with the next.
    pub fn note(&mut self, result: Result<(), Failure>) {
        match result {
            Ok(()) | Err(Failure::Interrupted(_)) => {}
            Err(Failure::BadInput(msg) | Failure::Runtime(msg)) => self.0.push(msg),
        }
    }

    /// The command's outcome: a failed output fails it (exit 1, every failure named),
    /// otherwise `then`.
    pub fn outcome(self, then: Result<(), Failure>) -> Result<(), Failure> {
        if self.0.is_empty() {
            return then;
        }
        if let Err(Failure::Interrupted(signal)) = then {
            let _ = writeln!(
                std::io::stderr(),
                "stopped by {}: the results cover the part that ran",
                crate::signals::name(signal)
            );
        }
        Err(Failure::Runtime(self.0.join("\nerror: ")))
    }
}
