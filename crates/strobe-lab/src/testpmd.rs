//! The `testpmd` DUT: DPDK's testpmd (Debian's dpdk-dev) forwarding in `io` mode between
//! dut0 and dut1, the user-space forwarder of the forwarder study. The lab starts it as a
//! process of its own in the DUT's namespace, pinned to one core, and keeps its PID and log
//! in a run directory of the lab's own (`/run/strobe-lab/PREFIX`); `lab down` stops it by
//! that PID, after checking the PID still names this lab's testpmd. DPDK's files go under
//! its own `--file-prefix`, one per lab, so it never meets another DPDK process.
//!
//! Its counters are read over DPDK's telemetry socket (`/ethdev/stats`), which testpmd
//! serves while it forwards: the DUT's own count of what it took in and sent on.

use std::io;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::socket::{connect, recv, send, socket, AddressFamily, MsgFlags, SockFlag};
use nix::sys::socket::{setsockopt, sockopt, SockType, UnixAddr};
use nix::sys::time::TimeVal;

use crate::daemon::{self, Daemon};
use crate::dut::TestpmdDriver;
use crate::netns::Netns;
use crate::topology::{DUT0, DUT1};
use crate::LabError;

/// The program, as Debian's dpdk-dev installs it.
pub(crate) const PROGRAM: &str = "dpdk-testpmd";
/// Where DPDK keeps each `--file-prefix`'s runtime files (and its telemetry socket).
const DPDK_RUN_ROOT: &str = "/var/run/dpdk";
/// How long testpmd may take to start forwarding: it maps its memory and opens both ports
/// in well under a second here, but a busy machine may take longer.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// What testpmd prints once it forwards (`fwd_config_display`).
const FORWARDING_MARK: &str = "packet forwarding - ports=";
/// Seconds between the port statistics testpmd writes to its log. A period is what keeps
/// testpmd running: without one, non-interactive testpmd waits for a key on its standard
/// input, which is /dev/null here, and exits at once. A minute makes about 2 MB of log a day.
const STATS_PERIOD_S: u32 = 60;
/// How long a telemetry request may take: testpmd answers in microseconds; one that does not
/// (stopped, hung) must not hold up the end of a run that reads its counters.
const TELEMETRY_TIMEOUT: Duration = Duration::from_secs(2);
/// Frames each port's receive and transmit rings hold. On a machine with fewer cores than
/// busy threads testpmd shares its core (here with strobe's receiver), and the scheduler
/// may keep it off for milliseconds: at 100 kpps the packet socket's default ring of 512
/// frames then overflowed here, losing 0.65–1.6 % of a million frames (with receive
/// steering on and off alike) where no DPDK counter sees it. 4096 frames bridge 40 ms at
/// that rate; the gap shows in the latency tail instead, where it belongs.
const RING_FRAMES: u32 = 4096;
/// Mbufs in its pool: both ports' rings full and a burst in flight, with room to spare.
const MBUFS: u32 = 32_768;

/// The DPDK file prefix of lab `prefix`'s testpmd: its runtime directory's name, and the
/// argument by which its command line is told apart from any other process.
fn file_prefix(prefix: &str) -> String {
    format!("strobe-lab-{prefix}")
}

fn daemon(prefix: &str) -> Daemon {
    Daemon::new(
        prefix,
        "testpmd",
        format!("--file-prefix={}", file_prefix(prefix)),
    )
}

/// testpmd's own output: its port set-up, then its port statistics every minute.
pub fn log_file(prefix: &str) -> PathBuf {
    daemon(prefix).log_file()
}

fn telemetry_socket(prefix: &str) -> PathBuf {
    PathBuf::from(DPDK_RUN_ROOT)
        .join(file_prefix(prefix))
        .join("dpdk_telemetry.v2")
}

/// testpmd's arguments: EAL's (no huge pages, no PCI, both lcores on `core`: the main one
/// only sleeps between statistics), the two ports, then io forwarding without a prompt.
fn arguments(prefix: &str, driver: TestpmdDriver, core: u32) -> Vec<String> {
    let mut args: Vec<String> = [
        "--no-huge",
        "--no-pci",
        "-m",
        "256",
        "--lcores",
        &format!("0@{core},1@{core}"),
        &format!("--file-prefix={}", file_prefix(prefix)),
    ]
    .map(String::from)
    .to_vec();
    for (i, port) in [DUT0, DUT1].iter().enumerate() {
        args.push(match driver {
            // One packet socket sees every queue; qdisc bypass as DPDK's own benchmarks use.
            TestpmdDriver::AfPacket => format!(
                "--vdev=net_af_packet{i},iface={},qdisc_bypass=1,framecnt={RING_FRAMES}",
                port.name
            ),
            // One AF_XDP socket on queue 0, where the lab steers every sender that does not
            // name its queue (the PMD takes a veth for single-queue: it reads the combined
            // channel count, which a veth leaves at one).
            TestpmdDriver::AfXdp => format!("--vdev=net_af_xdp{i},iface={}", port.name),
        });
    }
    args.extend([
        "--".to_string(),
        "--forward-mode=io".to_string(),
        format!("--rxd={RING_FRAMES}"),
        format!("--txd={RING_FRAMES}"),
        format!("--stats-period={STATS_PERIOD_S}"),
        format!("--total-num-mbufs={MBUFS}"),
    ]);
    args
}

/// Starts testpmd in namespace `ns` and waits until it forwards.
pub(crate) fn start(
    ns: &Netns,
    prefix: &str,
    driver: TestpmdDriver,
    core: u32,
) -> Result<u32, LabError> {
    // A testpmd left from an earlier lab of this prefix would hold the ports.
    stop(prefix)?;
    let testpmd = daemon(prefix);
    let mut command = Command::new(PROGRAM);
    command.args(arguments(prefix, driver, core));
    testpmd.start(
        ns,
        command,
        "dpdk-testpmd is missing (apt-get install dpdk-dev)",
        START_TIMEOUT,
        || testpmd.read_log().contains(FORWARDING_MARK),
    )
}

/// The PID of lab `prefix`'s testpmd if it runs (and is still this lab's testpmd).
pub fn running(prefix: &str) -> Option<u32> {
    daemon(prefix).running()
}

/// Whether `dpdk-testpmd` is on the PATH (to refuse up front what would fail later).
pub fn installed() -> bool {
    daemon::on_path(PROGRAM)
}

/// Stops lab `prefix`'s testpmd if it runs and removes DPDK's files of it. Returns whether
/// one was running.
pub(crate) fn stop(prefix: &str) -> Result<bool, LabError> {
    let was_running = daemon(prefix).stop()?;
    daemon::remove_dir(PathBuf::from(DPDK_RUN_ROOT).join(file_prefix(prefix)))?;
    Ok(was_running)
}

/// One testpmd port's counters as DPDK's ethdev keeps them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortCounters {
    /// Frames the port took in.
    pub ipackets: u64,
    /// Frames it sent.
    pub opackets: u64,
    /// Frames the port's receive path lost before testpmd saw them.
    pub imissed: u64,
    pub ierrors: u64,
    pub oerrors: u64,
    /// Frames dropped for want of a buffer.
    pub rx_nombuf: u64,
}

/// What lab `prefix`'s testpmd says about itself over DPDK telemetry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counters {
    /// DPDK's version, e.g. `DPDK 22.11.11`.
    pub version: String,
    /// dut0 (from the generator) and dut1 (toward the sink).
    pub ports: [PortCounters; 2],
}

impl Counters {
    /// Frames that entered testpmd from the generator's side and did not leave toward the
    /// sink: lost in its receive path, or taken in and not sent on.
    pub fn lost_toward_sink(&self) -> u64 {
        let [from_tx, to_rx] = self.ports;
        (from_tx.ipackets + from_tx.imissed).saturating_sub(to_rx.opackets)
    }
}

/// Reads the counters of lab `prefix`'s testpmd over its telemetry socket.
pub fn counters(prefix: &str) -> Result<Counters, LabError> {
    let path = telemetry_socket(prefix);
    let object = path.display().to_string();
    let fail = |step: &str, e: Errno| LabError::errno(step, &object, e);
    let sock = socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(|e| fail("open a socket for", e))?;
    let addr = UnixAddr::new(&path).map_err(|e| fail("address", e))?;
    let timeout = TimeVal::new(TELEMETRY_TIMEOUT.as_secs() as _, 0);
    setsockopt(&sock, sockopt::ReceiveTimeout, &timeout)
        .and_then(|()| setsockopt(&sock, sockopt::SendTimeout, &timeout))
        .map_err(|e| fail("set a timeout on", e))?;
    use std::os::fd::AsRawFd;
    connect(sock.as_raw_fd(), &addr).map_err(|e| fail("connect to testpmd's telemetry at", e))?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut ask = |command: &str| -> Result<serde_json::Value, LabError> {
        if !command.is_empty() {
            send(sock.as_raw_fd(), command.as_bytes(), MsgFlags::empty())
                .map_err(|e| fail("ask testpmd's telemetry at", e))?;
        }
        let n = recv(sock.as_raw_fd(), &mut buf, MsgFlags::empty())
            .map_err(|e| fail("read testpmd's telemetry at", e))?;
        serde_json::from_slice(&buf[..n]).map_err(|e| {
            LabError::os(
                "read",
                &object,
                io::Error::other(format!("telemetry answered no JSON: {e}")),
            )
        })
    };
    // The socket greets each client with the version, the PID and the longest answer.
    let hello = ask("")?;
    let version = hello["version"].as_str().unwrap_or("DPDK").to_string();
    let mut ports = [PortCounters::default(); 2];
    for (id, port) in ports.iter_mut().enumerate() {
        let answer = ask(&format!("/ethdev/stats,{id}"))?;
        let stats = &answer["/ethdev/stats"];
        // A counter that is not there is an error, not a zero: every loss figure built on
        // these counters would be wrong.
        let get = |name: &str| {
            stats[name].as_u64().ok_or_else(|| {
                LabError::os(
                    "read",
                    &object,
                    io::Error::other(format!("port {id}'s stats have no `{name}`: {answer}")),
                )
            })
        };
        *port = PortCounters {
            ipackets: get("ipackets")?,
            opackets: get("opackets")?,
            imissed: get("imissed")?,
            ierrors: get("ierrors")?,
            oerrors: get("oerrors")?,
            rx_nombuf: get("rx_nombuf")?,
        };
    }
    Ok(Counters { version, ports })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_pin_both_lcores_and_name_both_ports() {
        let args = arguments("p", TestpmdDriver::AfPacket, 1).join(" ");
        assert!(args.contains("--lcores 0@1,1@1"), "{args}");
        assert!(args.contains("--file-prefix=strobe-lab-p"), "{args}");
        assert!(args.contains("net_af_packet0,iface=dut0"), "{args}");
        assert!(args.contains("net_af_packet1,iface=dut1"), "{args}");
        assert!(args.contains("-- --forward-mode=io"), "{args}");
        let xdp = arguments("p", TestpmdDriver::AfXdp, 0).join(" ");
        assert!(xdp.contains("--vdev=net_af_xdp1,iface=dut1 "), "{xdp}");
    }

    #[test]
    fn the_loss_toward_the_sink_counts_both_misses_and_unsent_frames() {
        let port = |ipackets, opackets, imissed| PortCounters {
            ipackets,
            opackets,
            imissed,
            ..PortCounters::default()
        };
        let c = Counters {
            version: "DPDK".into(),
            ports: [port(100, 0, 5), port(0, 97, 0)],
        };
        assert_eq!(c.lost_toward_sink(), 8);
    }
}
