//! The device under test a run went through, as far as strobe knows it: said with the run's
//! results, so a result read months later still names what it measured.

use serde::{Deserialize, Serialize};

/// The device under test of a run on strobe's lab: what it was, which software forwarded
/// and where that ran.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DeviceUnderTest {
    /// The DUT as `strobe lab up --dut` takes it, e.g. `router`, `nft:100`, `testpmd@1`.
    pub kind: String,
    /// The DUT in words, e.g. `a Linux router`.
    pub name: String,
    /// The lab's prefix (its namespaces are PREFIX-tx, PREFIX-dut, PREFIX-rx).
    pub lab: String,
    /// The software that forwarded, with its version: the kernel's release for the kernel's
    /// DUTs (and nftables' version for `nft`), DPDK's for `testpmd`.
    pub software: String,
    /// The cores its forwarding is pinned to; empty when the kernel forwards each frame
    /// wherever it is received.
    pub cores: Vec<u32>,
    /// Where its forwarding runs, in words.
    pub runs_on: String,
}

impl DeviceUnderTest {
    /// One line for a report: `a Linux router (router on lab strobe: Linux 6.18; …)`.
    pub fn described(&self) -> String {
        format!(
            "{} ({} on lab {}: {}; {})",
            self.name, self.kind, self.lab, self.software, self.runs_on
        )
    }
}
