//! The queues of the lab's veths. Every veth end gets one transmit and one receive queue per
//! CPU, so AF_XDP can bind one socket per queue (`--cores N` takes queues 0…N-1); a frame
//! sent on transmit queue k arrives on the peer's receive queue k. Two settings keep all
//! other traffic where it was on single-queue veths:
//!
//! - XPS (transmit packet steering) maps every CPU to transmit queue 0. Without it an
//!   AF_PACKET sender, the kernel's own stack or a forwarding DUT picks the queue by its CPU
//!   or a flow hash, and an AF_XDP receiver bound to queue 0 on the far side (`strobe
//!   reflect`, `--rx lab:rx@afxdp`) would never see the frames landing on other queues.
//!   AF_XDP senders name their queue and are not subject to XPS.
//! - RPS (receive packet steering) on every receive queue moves the lab's receive processing
//!   off the highest core, where strobe pins its transmit worker. A veth delivers a frame on
//!   the sending core, so without it the peer's (and a software DUT's) softirq work lands on
//!   the transmitter's core and, once it overflows into ksoftirqd, takes whole scheduler
//!   slices from it: millisecond stalls in a paced run. RPS is best effort: a lab without it
//!   works, only with less precise pacing, whereas one without XPS could lose frames.
//!
//! Both live in sysfs, which shows a namespace's interfaces only when mounted inside it;
//! `ip netns exec` does that, hence one shell command per namespace.

use std::fs;
use std::io;
use std::process::Command;

use crate::topology::Topology;
use crate::LabError;

/// The most queues the kernel gives one device.
const MAX_QUEUES: usize = 4096;

/// Lists the CPU numbers the kernel may ever use; masks must not name any beyond them.
const POSSIBLE_CPUS: &str = "/sys/devices/system/cpu/possible";

/// Queues per direction on every lab veth: one per CPU strobe may run on, and at least two
/// so that a multi-queue run can be tried on any machine.
pub(crate) fn per_veth() -> u32 {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Within 2..=4096, so the conversion is exact.
    cpus.clamp(2, MAX_QUEUES) as u32
}

/// Sets XPS, and RPS on or off, on every veth end of `plan`, whose links must exist.
pub(crate) fn steer(plan: &Topology, receive_steering: bool) -> Result<(), LabError> {
    let every_cpu = cpu_mask(0..possible_cpus()?);
    let receive_mask = if receive_steering {
        receive_cpus().map(cpu_mask)
    } else {
        // An empty mask turns RPS off, also on a lab that had it.
        Some(cpu_mask([]))
    };
    for role in &plan.roles {
        let ifaces: Vec<&str> = plan
            .veth_ends()
            .filter(|iface| iface.role == *role)
            .map(|iface| iface.name)
            .collect();
        if ifaces.is_empty() {
            continue;
        }
        let netns = role.netns(&plan.lab.prefix);
        run_in(
            &netns,
            &steering_script(&ifaces, &every_cpu, receive_mask.as_deref()),
        )?;
    }
    Ok(())
}

/// The CPUs that take the lab's receive work: all that strobe may use but the highest.
/// `None` on a single CPU, where there is nowhere else to move it.
fn receive_cpus() -> Option<std::ops::Range<usize>> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cores >= 2).then(|| 0..cores - 1)
}

/// The shell commands that steer `ifaces` (all in one namespace): XPS must succeed, RPS
/// may fail quietly.
fn steering_script(ifaces: &[&str], every_cpu: &str, receive_mask: Option<&str>) -> String {
    let mut lines = vec!["set -e".to_string()];
    for iface in ifaces {
        let queues = format!("/sys/class/net/{iface}/queues");
        lines.push(format!("echo {every_cpu} > {queues}/tx-0/xps_cpus"));
        if let Some(mask) = receive_mask {
            lines.push(format!(
                "for f in {queues}/rx-*/rps_cpus; do {{ echo {mask} > \"$f\"; }} 2>/dev/null || true; done"
            ));
        }
    }
    lines.join("\n")
}

/// Reads the queue count and RPS masks of `iface` in `netns`.
pub(crate) fn read(netns: &str, iface: &str) -> Result<crate::Steering, LabError> {
    let step = "read the veth queues in namespace";
    let script = format!(
        "cd /sys/class/net/{iface}/queues && for q in rx-*; do cat $q/rps_cpus || exit 1; done"
    );
    let output = Command::new("ip")
        .args(["netns", "exec", netns, "sh", "-c", &script])
        .output()
        .map_err(|e| LabError::os(step, netns, e))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(LabError::os(
            step,
            netns,
            io::Error::other(format!("{iface}: {}", stderr.trim())),
        ));
    }
    Ok(parse_queue_masks(&String::from_utf8_lossy(&output.stdout)))
}

/// One rps_cpus mask per line (`00000000,00000001`), one line per receive queue.
fn parse_queue_masks(text: &str) -> crate::Steering {
    let masks: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    crate::Steering {
        queues: masks.len() as u32,
        receive_steering: masks
            .iter()
            .any(|m| m.chars().any(|c| c.is_ascii_hexdigit() && c != '0')),
    }
}

fn run_in(netns: &str, script: &str) -> Result<(), LabError> {
    let step = "steer the veth queues (XPS) in namespace";
    let output = Command::new("ip")
        .args(["netns", "exec", netns, "sh", "-c", script])
        .output()
        .map_err(|e| {
            LabError::program(
                step,
                netns,
                e,
                "`ip` not found; the lab needs iproute2 (apt-get install iproute2)",
            )
        })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(LabError::os(
            step,
            netns,
            io::Error::other(format!(
                "writing xps_cpus failed ({}); the kernel needs XPS (CONFIG_XPS) for the lab's \
                 multi-queue veths",
                stderr.trim()
            )),
        ));
    }
    Ok(())
}

/// How many CPU numbers the kernel may use (its `nr_cpu_ids`).
fn possible_cpus() -> Result<usize, LabError> {
    let text = fs::read_to_string(POSSIBLE_CPUS)
        .map_err(|e| LabError::os("read the CPU list", POSSIBLE_CPUS, e))?;
    highest_cpu(&text).map(|cpu| cpu + 1).ok_or_else(|| {
        LabError::os(
            "read the CPU list",
            POSSIBLE_CPUS,
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("`{}` is not a CPU list like 0-7", text.trim()),
            ),
        )
    })
}

/// The highest CPU of a kernel CPU list such as `0-7` or `0,2-5`, which is in ascending
/// order: its last number.
fn highest_cpu(list: &str) -> Option<usize> {
    list.trim().rsplit([',', '-']).next()?.parse().ok()
}

/// `cpus` in the kernel's cpumask notation: hexadecimal 32-bit words, most significant
/// first, separated by commas. Written here because it is a few lines and no maintained
/// crate formats it.
fn cpu_mask(cpus: impl IntoIterator<Item = usize>) -> String {
    let mut words = vec![0u32];
    for cpu in cpus {
        let word = cpu / 32;
        if word >= words.len() {
            words.resize(word + 1, 0);
        }
        words[word] |= 1 << (cpu % 32);
    }
    let hex: Vec<String> = words.iter().rev().map(|w| format!("{w:08x}")).collect();
    hex.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_masks_use_the_kernels_word_notation() {
        assert_eq!(cpu_mask(0..2), "00000003");
        assert_eq!(cpu_mask(0..1), "00000001");
        assert_eq!(cpu_mask([]), "00000000");
        assert_eq!(cpu_mask(0..32), "ffffffff");
        assert_eq!(cpu_mask(0..33), "00000001,ffffffff");
        assert_eq!(cpu_mask([5, 70]), "00000040,00000000,00000020");
    }

    #[test]
    fn the_highest_possible_cpu_is_the_last_number() {
        assert_eq!(highest_cpu("0-7\n"), Some(7));
        assert_eq!(highest_cpu("0\n"), Some(0));
        assert_eq!(highest_cpu("0,2-5"), Some(5));
        assert_eq!(highest_cpu("0-"), None);
        assert_eq!(highest_cpu(""), None);
    }

    #[test]
    fn the_script_pins_transmits_to_queue_zero_and_spreads_every_receive_queue() {
        let script = steering_script(&["dut0", "dut1"], "00000003", Some("00000001"));
        let lines: Vec<&str> = script.lines().collect();
        assert_eq!(lines[0], "set -e", "an XPS failure must fail the script");
        for iface in ["dut0", "dut1"] {
            let xps = format!("echo 00000003 > /sys/class/net/{iface}/queues/tx-0/xps_cpus");
            assert!(lines.contains(&xps.as_str()), "{script}");
            let rps = format!("for f in /sys/class/net/{iface}/queues/rx-*/rps_cpus;");
            assert!(
                lines
                    .iter()
                    .any(|l| l.starts_with(&rps) && l.contains("|| true")),
                "{script}"
            );
        }
        let single_cpu = steering_script(&["tx0"], "00000001", None);
        assert!(!single_cpu.contains("rps_cpus"), "{single_cpu}");
    }

    #[test]
    fn queue_masks_read_back_as_count_and_steering() {
        let off = parse_queue_masks("00000000\n00000000\n");
        assert_eq!((off.queues, off.receive_steering), (2, false));
        let on = parse_queue_masks("00000000,00000001\n00000000,00000000\n");
        assert_eq!((on.queues, on.receive_steering), (2, true));
        assert_eq!(parse_queue_masks("").queues, 0);
    }
}
