//! The `ovs` DUT: an Open vSwitch bridge (Debian's openvswitch-switch) over dut0 and dut1,
//! with the user-space `netdev` datapath (packet sockets on the veths; no kernel module).
//! The lab runs an ovsdb-server and an ovs-vswitchd of its own in the DUT's namespace, with
//! their database, sockets and logs in the lab's run directory
//! (`/run/strobe-lab/PREFIX/ovs`): a system Open vSwitch, if there is one, is never touched.
//!
//! The bridge switches as a learning bridge (`NORMAL`) unless the DUT names a flow table,
//! which replaces the bridge's flows (`ovs-ofctl add-flows`). Its port counters are read
//! over OpenFlow (the switch's own count of what it took in, sent and dropped), beside the
//! kernel's count of frames dropped at its packet sockets.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::daemon::{self, Daemon};
use crate::netns::Netns;
use crate::topology::{DUT0, DUT1};
use crate::LabError;

/// The programs, as Debian's openvswitch-switch and openvswitch-common install them.
const SWITCH: &str = "ovs-vswitchd";
const DATABASE: &str = "ovsdb-server";
/// The database schema the switch needs (openvswitch-common).
const SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";
/// The bridge's name in the switch (and of its internal port, which stays down).
const BRIDGE: &str = "br0";
/// What to do when a program is missing.
const INSTALL: &str = "Open vSwitch is missing (apt-get install openvswitch-switch)";
/// How long each daemon may take to come up, and `ovs-vsctl` to see the bridge built: well
/// under a second here, but a busy machine may take longer.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The directory of lab `prefix`'s Open vSwitch: database, sockets, PID and log files.
fn dir(prefix: &str) -> PathBuf {
    daemon::run_dir(prefix).join("ovs")
}

fn db_socket(prefix: &str) -> PathBuf {
    dir(prefix).join("db.sock")
}

fn control_socket(prefix: &str, program: &str) -> PathBuf {
    dir(prefix).join(format!("{program}.ctl"))
}

/// The bridge's OpenFlow management socket, which ovs-vswitchd creates in its run directory.
fn bridge_socket(prefix: &str) -> PathBuf {
    dir(prefix).join(format!("{BRIDGE}.mgmt"))
}

/// The database server and the switch: each known by its control socket, a path in this
/// lab's run directory that no other Open vSwitch has on its command line.
fn database(prefix: &str) -> Daemon {
    Daemon::new(prefix, DATABASE, control_argument(prefix, DATABASE))
}

fn switch(prefix: &str) -> Daemon {
    Daemon::new(prefix, SWITCH, control_argument(prefix, SWITCH))
}

fn control_argument(prefix: &str, program: &str) -> String {
    format!("--unixctl={}", control_socket(prefix, program).display())
}

/// Every Open vSwitch program finds its files in the lab's directory, never the system's.
fn command(prefix: &str, program: &str) -> Command {
    let mut command = Command::new(program);
    for var in ["OVS_RUNDIR", "OVS_LOGDIR", "OVS_DBDIR", "OVS_SYSCONFDIR"] {
        command.env(var, dir(prefix));
    }
    command
}

/// Runs an Open vSwitch tool to its end; a failure quotes what it said.
fn tool(prefix: &str, program: &str, args: &[&str]) -> Result<String, LabError> {
    let what = format!("{program} {}", args.join(" "));
    let out = command(prefix, program)
        .args(args)
        .output()
        .map_err(|e| LabError::program("run", &what, e, INSTALL))?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stderr);
        return Err(LabError::os(
            "run",
            what,
            io::Error::other(format!("it failed ({}): {}", out.status, said.trim())),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn db_argument(prefix: &str) -> String {
    format!("--db=unix:{}", db_socket(prefix).display())
}

/// `ovs-vsctl` on the lab's database; waits for the switch to apply a change unless told.
fn vsctl(prefix: &str, args: &[&str]) -> Result<String, LabError> {
    let db = db_argument(prefix);
    let timeout = format!("--timeout={}", START_TIMEOUT.as_secs());
    let mut all = vec![db.as_str(), timeout.as_str()];
    all.extend_from_slice(args);
    tool(prefix, "ovs-vsctl", &all)
}

/// Starts lab `prefix`'s Open vSwitch in namespace `ns`: a fresh database, its server, the
/// switch, and the bridge over dut0 and dut1, with the flow table in `flows` if given. On
/// any failure everything started is stopped again.
pub(crate) fn start(ns: &Netns, prefix: &str, flows: Option<&Path>) -> Result<(), LabError> {
    // Daemons left from an earlier lab of this prefix would hold the ports.
    stop(prefix)?;
    let started = build(ns, prefix, flows);
    if started.is_err() {
        let _ = stop(prefix);
    }
    started
}

fn build(ns: &Netns, prefix: &str, flows: Option<&Path>) -> Result<(), LabError> {
    let dir = dir(prefix);
    std::fs::create_dir_all(&dir)
        .map_err(|e| LabError::os("create the run directory", dir.display().to_string(), e))?;
    let db_file = dir.join("conf.db");
    tool(
        prefix,
        "ovsdb-tool",
        &["create", &db_file.to_string_lossy(), SCHEMA],
    )?;
    // Both log to their standard error, which the lab keeps; nothing goes to the system log.
    let quiet = ["-vconsole:info", "-vsyslog:off", "--no-chdir"];
    let mut db = command(prefix, DATABASE);
    db.arg(&db_file)
        .arg(format!("--remote=punix:{}", db_socket(prefix).display()))
        .arg(control_argument(prefix, DATABASE))
        .args(quiet);
    let db_ready = || db_socket(prefix).exists();
    database(prefix).start(ns, db, INSTALL, START_TIMEOUT, db_ready)?;
    vsctl(prefix, &["--no-wait", "init"])?;
    let mut sw = command(prefix, SWITCH);
    sw.arg(format!("unix:{}", db_socket(prefix).display()))
        .arg(control_argument(prefix, SWITCH))
        .args(quiet);
    let sw_ready = || control_socket(prefix, SWITCH).exists();
    switch(prefix).start(ns, sw, INSTALL, START_TIMEOUT, sw_ready)?;
    // Without `--no-wait`: returns once the switch has opened both ports.
    vsctl(
        prefix,
        &[
            "add-br",
            BRIDGE,
            "--",
            "set",
            "bridge",
            BRIDGE,
            "datapath_type=netdev",
            "--",
            "add-port",
            BRIDGE,
            DUT0.name,
            "--",
            "add-port",
            BRIDGE,
            DUT1.name,
        ],
    )?;
    if let Some(path) = flows {
        load_flows(prefix, path)?;
    }
    Ok(())
}

/// Replaces the bridge's flows with those in `path` (read again each time, so `lab up`
/// of the same DUT takes an edited file).
pub(crate) fn load_flows(prefix: &str, path: &Path) -> Result<(), LabError> {
    let bridge = format!("unix:{}", bridge_socket(prefix).display());
    tool(prefix, "ovs-ofctl", &["del-flows", &bridge])?;
    tool(
        prefix,
        "ovs-ofctl",
        &["add-flows", &bridge, &path.to_string_lossy()],
    )
    .map_err(|e| LabError::InvalidDut {
        input: format!("ovs:{}", path.display()),
        reason: format!("Open vSwitch refused its flow table: {e}"),
    })?;
    Ok(())
}

/// Whether both of lab `prefix`'s Open vSwitch daemons run; the switch's PID if so.
pub fn running(prefix: &str) -> Option<u32> {
    database(prefix).running()?;
    switch(prefix).running()
}

/// Whether Open vSwitch is installed (to refuse up front what would fail later).
pub fn installed() -> bool {
    [SWITCH, DATABASE, "ovs-vsctl", "ovs-ofctl", "ovsdb-tool"]
        .iter()
        .all(|p| daemon::on_path(p))
}

/// The switch's log (its standard error).
pub fn log_file(prefix: &str) -> PathBuf {
    switch(prefix).log_file()
}

/// Stops lab `prefix`'s switch, then its database server, and removes their files.
/// Returns whether either was running.
pub(crate) fn stop(prefix: &str) -> Result<bool, LabError> {
    let switch_ran = switch(prefix).stop()?;
    let database_ran = database(prefix).stop()?;
    daemon::remove_dir(dir(prefix))?;
    Ok(switch_ran || database_ran)
}

/// `Open vSwitch 3.1.0`, from `ovs-vswitchd --version`.
pub fn version() -> Result<String, LabError> {
    let text = tool("", SWITCH, &["--version"])?;
    let first = text.lines().next().unwrap_or_default();
    Ok(match first.rsplit_once(' ') {
        Some((_, number)) => format!("Open vSwitch {number}"),
        None => "Open vSwitch".to_string(),
    })
}

/// One bridge port's counters as the switch keeps them (OpenFlow port statistics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortCounters {
    pub rx_packets: u64,
    /// The interface's receive drops (for a port over a packet socket, the kernel's count
    /// for the interface, as `/proc/net/dev` has it).
    pub rx_dropped: u64,
    pub rx_errors: u64,
    pub tx_packets: u64,
    pub tx_dropped: u64,
    pub tx_errors: u64,
    /// Frames the kernel dropped at the switch's packet socket on the port because the
    /// switch did not read them in time (the socket's `sk_drops`): not in the switch's own
    /// counters, which count what the interface received.
    pub socket_drops: u64,
}

/// dut0's (from the generator) and dut1's (toward the sink) counters, as the switch has
/// them now (over OpenFlow: OVSDB's copy is refreshed only every few seconds).
pub fn counters(prefix: &str) -> Result<[PortCounters; 2], LabError> {
    let drops = socket_drops(prefix)?;
    let bridge = format!("unix:{}", bridge_socket(prefix).display());
    let mut ports = [PortCounters::default(); 2];
    for (port, iface) in ports.iter_mut().zip([DUT0, DUT1]) {
        let text = tool(prefix, "ovs-ofctl", &["dump-ports", &bridge, iface.name])?;
        *port = parse_port_stats(&text).map_err(|e| {
            LabError::os(
                "read the counters of",
                format!("{} in lab {prefix}'s Open vSwitch", iface.name),
                io::Error::other(e),
            )
        })?;
        port.socket_drops = drops
            .iter()
            .filter(|(name, _)| name == iface.name)
            .map(|(_, d)| d)
            .sum();
    }
    Ok(ports)
}

/// The drops of every packet socket in lab `prefix`'s DUT namespace, by interface, as `ss`
/// (iproute2, over sock_diag) reads them there.
fn socket_drops(prefix: &str) -> Result<Vec<(String, u64)>, LabError> {
    let name = crate::topology::Role::Dut.netns(prefix);
    let ns = Netns::open(&name)?.ok_or_else(|| LabError::Broken {
        prefix: prefix.to_string(),
        detail: format!("namespace {name} is missing"),
    })?;
    let what = format!("ss -0 -a -m -n in namespace {name}");
    let out = ns.run(|| {
        Command::new("ss")
            .args(["-0", "-a", "-m", "-n"])
            .output()
            .map_err(|e| {
                LabError::program("run", &what, e, "ss is missing (apt-get install iproute2)")
            })
    })?;
    if !out.status.success() {
        return Err(LabError::os(
            "run",
            what,
            io::Error::other(String::from_utf8_lossy(&out.stderr).trim().to_string()),
        ));
    }
    Ok(parse_socket_drops(&String::from_utf8_lossy(&out.stdout)))
}

/// `p_raw UNCONN 0 0 *:dut0 * skmem:(r0,rb212992,…,bl0,d220514)` → `("dut0", 220514)`;
/// a socket bound to no interface (`[0]:*`) or without memory figures is left out.
fn parse_socket_drops(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let local = words.nth(4)?;
            let iface = local.rsplit_once(':')?.1;
            let skmem = line.split_once("skmem:(")?.1.split(')').next()?;
            let drops = skmem.split(',').find_map(|f| f.strip_prefix('d'))?;
            (iface != "*").then(|| Some((iface.to_string(), drops.parse().ok()?)))?
        })
        .collect()
}

/// Reads one port of `ovs-ofctl dump-ports`:
/// `port  1: rx pkts=6, bytes=540, drop=0, errs=0, …` then `tx pkts=4, bytes=600, drop=0,
/// errs=0, …`. A counter that is not there is an error, not a zero: a loss figure built on
/// it would be wrong.
fn parse_port_stats(text: &str) -> Result<PortCounters, String> {
    let fields = |direction: &str| -> Result<[u64; 3], String> {
        let mark = format!("{direction} pkts=");
        let rest = text
            .lines()
            .find_map(|l| l.split_once(mark.as_str()).map(|(_, rest)| rest))
            .ok_or_else(|| format!("no `{mark}` in `{}`", text.trim()))?;
        // `6, bytes=540, drop=0, ...`: the packets first, then named counters.
        let mut parts = rest.split(',').map(str::trim);
        let number = |v: Option<&str>, name: &str| {
            v.and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| format!("no {direction} `{name}` in `{}`", text.trim()))
        };
        let packets = number(parts.next(), "pkts")?;
        let named: Vec<(&str, &str)> = parts.filter_map(|p| p.split_once('=')).collect();
        let get = |name: &str| {
            number(
                named.iter().find(|(k, _)| *k == name).map(|(_, v)| *v),
                name,
            )
        };
        Ok([packets, get("drop")?, get("errs")?])
    };
    let [rx_packets, rx_dropped, rx_errors] = fields("rx")?;
    let [tx_packets, tx_dropped, tx_errors] = fields("tx")?;
    Ok(PortCounters {
        rx_packets,
        rx_dropped,
        rx_errors,
        tx_packets,
        tx_dropped,
        tx_errors,
        // Not the switch's: `counters` adds the kernel's.
        socket_drops: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_counters_are_read_from_dump_ports_and_a_missing_counter_is_an_error() {
        let text = "OFPST_PORT reply (xid=0x4): 1 ports\n  port  1: rx pkts=16814, bytes=540, \
                    drop=2, errs=0, frame=0, over=0, crc=0\n           tx pkts=16811, \
                    bytes=600, drop=3, errs=1, coll=0\n";
        let c = parse_port_stats(text).unwrap();
        assert_eq!(
            c,
            PortCounters {
                rx_packets: 16814,
                rx_dropped: 2,
                rx_errors: 0,
                tx_packets: 16811,
                tx_dropped: 3,
                tx_errors: 1,
                socket_drops: 0,
            }
        );
        let e = parse_port_stats("  port  1: rx pkts=6, bytes=540, drop=0, errs=0").unwrap_err();
        assert!(e.contains("tx pkts="), "{e}");
        let e =
            parse_port_stats("rx pkts=6, drop=0, errs=0\ntx pkts=1, bytes=5, errs=0").unwrap_err();
        assert!(e.contains("tx `drop`"), "{e}");
        let ss = "Netid State  Recv-Q Send-Q Local Address:Port Peer Address:PortProcess\n\
                  p_raw UNCONN 0 0 *:dut0 * skmem:(r0,rb212992,t0,tb212992,f0,w0,o176,bl0,d220514)\n\
                  p_raw UNCONN 0 0 *:dut1 * skmem:(r0,rb212992,t0,tb212992,f0,w0,o176,bl0,d0)\n\
                  p_raw UNCONN 0 0 [0]:* * skmem:(r0,rb212992,t0,tb212992,f0,w0,o0,bl0,d7)\n";
        assert_eq!(
            parse_socket_drops(ss),
            vec![("dut0".to_string(), 220_514), ("dut1".to_string(), 0)]
        );
        assert!(parse_port_stats("rx pkts=x, drop=0, errs=0\ntx pkts=1, drop=0, errs=0").is_err());
    }

    #[test]
    fn every_file_of_the_labs_switch_is_in_its_own_directory() {
        let base = dir("p");
        assert!(base.starts_with("/run/strobe-lab/p"));
        for path in [
            db_socket("p"),
            bridge_socket("p"),
            control_socket("p", SWITCH),
        ] {
            assert!(path.starts_with(&base), "{}", path.display());
        }
        assert_eq!(
            switch("p").log_file(),
            PathBuf::from("/run/strobe-lab/p/ovs-vswitchd.log")
        );
        let c = command("p", "ovs-vsctl");
        let dirs: Vec<_> = c.get_envs().map(|(_, v)| v.map(PathBuf::from)).collect();
        assert_eq!(dirs, vec![Some(base); 4]);
    }
}
