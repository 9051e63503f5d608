//! What a lab's DUT runs and where: the software and version that forward, and the cores,
//! read from the running lab (results and `lab status` carry them).

use std::fs;
use std::process::Command;

use crate::{daemon, ovs, testpmd, Dut, Lab};

/// The forwarding software of a lab's DUT and where it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DutDetails {
    /// Which software forwards, with its version, e.g. `Linux 6.18.0`, `DPDK 22.11.11`.
    pub software: String,
    /// The cores its forwarding may run on: the one it is pinned to, or a process's allowed
    /// cores; empty when the kernel forwards each frame on whichever core receives it.
    pub cores: Vec<u32>,
    /// Where the forwarding runs, in words.
    pub runs_on: String,
    /// The forwarding process, for a DUT that is one (`testpmd`, `ovs`).
    pub pid: Option<u32>,
}

/// Where the kernel forwards a frame in the lab: a veth hands a frame to its peer on the
/// sending core, whose receive softirq forwards it unless receive steering moves it.
const KERNEL_PLACEMENT: &str = "in the kernel's receive softirq, on the core that received \
                                each frame (on a veth the sending core, or the receive-steering \
                                cores when steering is on)";

/// Reads what lab `lab`'s DUT runs. Never fails: what cannot be read says so in the text.
pub fn details(lab: &Lab) -> DutDetails {
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|r| format!("Linux {}", r.trim()))
        .unwrap_or_else(|e| format!("Linux (release unread: {e})"));
    let in_kernel = |software: String| DutDetails {
        software,
        cores: Vec::new(),
        runs_on: KERNEL_PLACEMENT.to_string(),
        pid: None,
    };
    match &lab.dut {
        Dut::Cable => DutDetails {
            software: kernel,
            cores: Vec::new(),
            runs_on: "no device: the veth pair joins generator and sink".to_string(),
            pid: None,
        },
        Dut::Bridge | Dut::Router | Dut::Tbf { .. } => in_kernel(kernel),
        Dut::Xdp => in_kernel(format!("{kernel}, XDP in the veth driver")),
        Dut::Nft { .. } => in_kernel(format!("{kernel}, {}", nft_version())),
        Dut::Ovs { flows } => {
            let version =
                ovs::version().unwrap_or_else(|e| format!("Open vSwitch (version unread: {e})"));
            let table = match flows {
                Some(path) => format!("flows from {}", path.display()),
                None => "learning bridge".to_string(),
            };
            let pid = ovs::running(&lab.prefix);
            let cores = pid.and_then(daemon::allowed_cores).unwrap_or_default();
            let list: Vec<String> = cores.iter().map(u32::to_string).collect();
            DutDetails {
                software: format!("{version}, user-space datapath, {table}"),
                runs_on: format!(
                    "a user-space process{}, not pinned: ovs-vswitchd's main thread polls both \
                     ports' packet sockets on whichever of cores {} the scheduler picks",
                    pid.map(|p| format!(" (pid {p})")).unwrap_or_default(),
                    list.join(",")
                ),
                cores,
                pid,
            }
        }
        Dut::Testpmd { driver, core } => {
            let software = match testpmd::counters(&lab.prefix) {
                Ok(c) => format!("{} testpmd, {}", c.version, driver.pmd()),
                Err(e) => format!("DPDK testpmd, {} (version unread: {e})", driver.pmd()),
            };
            let pid = testpmd::running(&lab.prefix);
            DutDetails {
                software,
                cores: vec![*core],
                runs_on: format!(
                    "a user-space process{} busy-polling both ports on core {core}",
                    pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
                ),
                pid,
            }
        }
    }
}

/// `nftables v1.0.6`, from `nft --version`.
fn nft_version() -> String {
    Command::new("nft")
        .arg("--version")
        .output()
        .ok()
        .and_then(|out| {
            let text = String::from_utf8_lossy(&out.stdout);
            let words: Vec<&str> = text.split_whitespace().take(2).collect();
            (words.len() == 2).then(|| words.join(" "))
        })
        .unwrap_or_else(|| "nftables (version unread)".to_string())
}
