//! The `nft` DUT's rule set, loaded with Debian's `nft` (nftables) inside the DUT's
//! namespace. The rule set is text in nft's own language; writing its netlink messages by
//! hand would re-implement libnftables for one table.

use std::io::{self, Write};
use std::process::{Command, Stdio};

use crate::netns::Netns;
use crate::LabError;

/// Loads `ruleset` (`nft -f -`) into namespace `ns`: the child process starts on this
/// thread while it is inside the namespace, and keeps it.
pub(crate) fn load(ns: &Netns, ruleset: &str) -> Result<(), LabError> {
    let object = format!("the nft DUT's rule set in namespace {}", ns.name);
    ns.run(|| {
        let mut child = Command::new("nft")
            .args(["-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                LabError::program(
                    "start nft to load",
                    object.clone(),
                    e,
                    "the nft program is missing (apt-get install nftables)",
                )
            })?;
        let written = child
            .stdin
            .take()
            .map(|mut stdin| stdin.write_all(ruleset.as_bytes()));
        let out = child
            .wait_with_output()
            .map_err(|e| LabError::os("wait for nft loading", object.clone(), e))?;
        if !out.status.success() {
            return Err(LabError::os(
                "load",
                object.clone(),
                io::Error::other(format!(
                    "nft said: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                )),
            ));
        }
        if let Some(Err(e)) = written {
            return Err(LabError::os("write to nft", object.clone(), e));
        }
        Ok(())
    })
}
