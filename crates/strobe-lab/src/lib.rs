//! strobe-lab: the embedded virtual lab. Network namespaces and veth pairs put a generator
//! (`{prefix}-tx`), a device under test (`{prefix}-dut`) and a sink (`{prefix}-rx`) on one
//! machine, with fixed MACs and addresses from 198.18.0.0/15 and 2001:2::/48 so flows can
//! target them.
//!
//! | DUT      | links                                          | addressing                     |
//! |----------|------------------------------------------------|--------------------------------|
//! | cable    | tx0 <-> rx0                                    | one subnet: /15 and /64        |
//! | bridge   | tx0 <-> dut0, dut1 <-> rx0, br0 over dut0+dut1 | one subnet: /15 and /64        |
//! | router   | tx0 <-> dut0, dut1 <-> rx0, forwarding on      | 198.18.0.0/24 and 198.18.1.0/24, 2001:2::/64 and 2001:2:0:1::/64, gateways .254 / ::fe |
//! | tbf:RATE | the bridge, plus a token bucket on dut1        | as the bridge                  |
//! | nft:N    | the router, plus N nftables forward rules      | as the router                  |
//! | xdp      | tx0 <-> dut0, dut1 <-> rx0, an XDP program on each DUT port redirecting to the other | one subnet |
//! | testpmd  | tx0 <-> dut0, dut1 <-> rx0, DPDK testpmd forwarding between dut0 and dut1 (a process the lab starts and stops) | one subnet |
//! | ovs      | tx0 <-> dut0, dut1 <-> rx0, an Open vSwitch bridge over dut0 and dut1 (the lab's own ovsdb-server and ovs-vswitchd) | one subnet |
//!
//! MACs: tx0 02:53:54:00:00:01, rx0 …:02, dut0 …:10, dut1 …:11, br0 …:1f. The generator is
//! 198.18.0.1 / 2001:2::1, the sink 198.18.1.1 / 2001:2::2 (router: 2001:2:0:1::1). Static
//! neighbour entries on every hop mean a run never waits for ARP or neighbour discovery.
//!
//! Every veth has one transmit and one receive queue per CPU (at least two), so AF_XDP
//! workers can take a queue each; everything that does not name its queue stays on queue 0
//! (see `queues.rs`).
//!
//! The API is synchronous. Each call runs on a short-lived worker thread with its own
//! single-threaded tokio runtime driving rtnetlink: the worker moves between namespaces
//! (setns) to open a netlink socket in each, so the caller's thread never changes namespace.
//! Nothing is ever created outside the lab's own namespaces.

mod daemon;
mod details;
mod dut;
mod error;
mod netns;
mod nft;
pub mod ovs;
mod queues;
mod rtnl;
pub mod testpmd;
mod topology;

use std::net::{Ipv4Addr, Ipv6Addr};

pub use details::{details, DutDetails};
pub use dut::{Dut, TbfParams, TestpmdDriver};
pub use error::LabError;

use netns::Netns;
use rtnl::Conns;
use topology::{Role, Topology};

/// The prefix of the lab's namespace names unless told otherwise.
pub const DEFAULT_PREFIX: &str = "strobe";

/// Interface names are at most 15 bytes (IFNAMSIZ less the terminating NUL); the lab keeps
/// its namespace names within the same bound so they read like interface names everywhere.
const MAX_NAME_LEN: usize = 15;

/// What `up` builds.
#[derive(Clone, Debug, PartialEq)]
pub struct LabConfig {
    /// Namespaces are named `{prefix}-tx`, `{prefix}-rx` and `{prefix}-dut`.
    pub prefix: String,
    pub dut: Dut,
    /// Receive packet steering (RPS) on every receive queue: the lab's receive work runs on
    /// the cores below the highest, where strobe pins its transmitter. Off, a veth delivers
    /// on the sending core, as it does unconfigured: no inter-processor interrupt per frame
    /// (in a VM each costs the sender a VM exit, so paced timing is steadier), but the
    /// sending core does the receive work as well.
    pub receive_steering: bool,
}

impl LabConfig {
    /// A lab with the default prefix around `dut`, receive steering as
    /// [`Dut::steers_receive_by_default`] says.
    pub fn new(dut: Dut) -> Self {
        LabConfig {
            prefix: DEFAULT_PREFIX.to_string(),
            receive_steering: dut.steers_receive_by_default(),
            dut,
        }
    }
}

/// How the lab's veths queue, read back from sysfs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Steering {
    /// Receive queues of the sink's veth end (transmit queues are as many).
    pub queues: u32,
    /// Whether any of those queues steers its receive work to other cores (RPS).
    pub receive_steering: bool,
}

impl Default for LabConfig {
    /// The default prefix with the plainest DUT, a cable.
    fn default() -> Self {
        LabConfig::new(Dut::Cable)
    }
}

/// One end of the lab: where a port opens and what its frames must carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub netns: String,
    pub iface: String,
    pub mac: [u8; 6],
    pub ipv4: Ipv4Addr,
    /// Always in a /64.
    pub ipv6: Ipv6Addr,
    pub prefix_len_v4: u8,
    /// The MAC frames from this endpoint must be addressed to: the peer endpoint for cable,
    /// bridge and tbf, the DUT's near interface for the router.
    pub next_hop_mac: [u8; 6],
}

/// A lab that is up. Both directions work: `rx` can send to `tx` as well.
#[derive(Clone, Debug, PartialEq)]
pub struct Lab {
    pub prefix: String,
    pub dut: Dut,
    /// The generator side.
    pub tx: Endpoint,
    /// The sink side.
    pub rx: Endpoint,
}

impl Lab {
    /// The port location of `e` for a backend, e.g. `afpacket:strobe-tx/tx0`.
    pub fn port(&self, e: &Endpoint, backend: &str) -> String {
        format!("{backend}:{}/{}", e.netns, e.iface)
    }

    /// The other end of `e`'s veth (namespace, interface): the DUT's near port, or on a
    /// cable the other endpoint. XDP frames sent into a veth need that end set up to take
    /// them.
    pub fn veth_peer(&self, e: &Endpoint) -> (String, String) {
        let from_tx = e.iface == self.tx.iface && e.netns == self.tx.netns;
        if self.dut.has_namespace() {
            let near = if from_tx {
                topology::DUT_TX_SIDE
            } else {
                topology::DUT_RX_SIDE
            };
            (Role::Dut.netns(&self.prefix), near.to_string())
        } else {
            let other = if from_tx { &self.rx } else { &self.tx };
            (other.netns.clone(), other.iface.clone())
        }
    }

    /// The lab's namespaces: generator, sink, and the DUT's if it has one.
    pub fn namespaces(&self) -> Vec<String> {
        let mut names = vec![self.tx.netns.clone(), self.rx.netns.clone()];
        if self.dut.has_namespace() {
            names.push(Role::Dut.netns(&self.prefix));
        }
        names
    }
}

fn check_prefix(prefix: &str) -> Result<(), LabError> {
    let invalid = |reason: String| {
        Err(LabError::InvalidPrefix {
            prefix: prefix.to_string(),
            reason,
        })
    };
    if prefix.is_empty() {
        return invalid("it is empty".to_string());
    }
    if prefix.contains('/') {
        return invalid("it contains `/`, and namespace names are file names".to_string());
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if !prefix.chars().all(allowed) || prefix.starts_with('.') {
        return invalid("use ASCII letters, digits, `-`, `_` and `.` (not first) only".to_string());
    }
    let longest = prefix.len() + topology::LONGEST_SUFFIX.len();
    if longest > MAX_NAME_LEN {
        return invalid(format!(
            "`{prefix}{}` would be {longest} bytes, more than the {MAX_NAME_LEN} of an interface name (IFNAMSIZ); \
             use at most {} bytes",
            topology::LONGEST_SUFFIX,
            MAX_NAME_LEN - topology::LONGEST_SUFFIX.len()
        ));
    }
    Ok(())
}

/// Runs `work` on a fresh thread with a single-threaded runtime; the thread may change its
/// namespace freely and is gone afterwards.
fn on_worker<T: Send>(
    work: impl FnOnce(&tokio::runtime::Runtime) -> Result<T, LabError> + Send,
) -> Result<T, LabError> {
    std::thread::scope(|scope| {
        let worker = std::thread::Builder::new()
            .name("strobe-lab".to_string())
            .spawn_scoped(scope, || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_io()
                    .enable_time()
                    .build()
                    .map_err(|e| LabError::os("start", "the netlink runtime", e))?;
                work(&runtime)
            })
            .map_err(|e| LabError::os("start", "the lab worker thread", e))?;
        worker
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// Builds the lab, or returns it unchanged if it is already up with the same DUT (also one
/// built before the veths were multi-queue: `down` and `up` give it more queues), only
/// setting its receive steering as asked. A lab with another DUT, or a damaged one, is
/// removed and rebuilt. On failure everything this call created is removed again.
pub fn up(cfg: &LabConfig) -> Result<Lab, LabError> {
    let prefix = cfg.prefix.as_str();
    check_prefix(prefix)?;
    cfg.dut.validate()?;
    on_worker(|runtime| {
        match read(runtime, prefix) {
            Ok(Some(lab)) if lab.dut == cfg.dut => {
                queues::steer(&Topology::new(prefix, &cfg.dut), cfg.receive_steering)?;
                // The file may have changed since: the switch takes it as it is now.
                if let Dut::Ovs { flows: Some(path) } = &cfg.dut {
                    ovs::load_flows(prefix, path)?;
                }
                return Ok(lab);
            }
            Ok(None) => {}
            Ok(Some(_)) | Err(LabError::Broken { .. }) => {
                remove(prefix)?;
            }
            Err(e) => return Err(e),
        }
        let plan = Topology::new(prefix, &cfg.dut);
        let mut created = Rollback {
            prefix: prefix.to_string(),
            names: Vec::new(),
        };
        let mut namespaces = Vec::new();
        for &role in &plan.roles {
            let ns = Netns::create(&role.netns(prefix))?;
            created.names.push(ns.name.clone());
            netns::set_sysctls(&ns, &rtnl::sysctls(role, &cfg.dut))?;
            namespaces.push((role, ns));
        }
        let dut_ns = match cfg.dut {
            Dut::Nft { .. } | Dut::Testpmd { .. } | Dut::Ovs { .. } => {
                Netns::open(&Role::Dut.netns(prefix))?
            }
            _ => None,
        };
        runtime.block_on(async {
            let conns = Conns::new(namespaces)?;
            rtnl::build(&conns, &plan).await?;
            // Before the lab is marked complete: a lab without its rules is not this DUT.
            if let (Some(ns), Some(ruleset)) = (&dut_ns, cfg.dut.nft_ruleset()) {
                nft::load(ns, &ruleset)?;
            }
            if cfg.dut == Dut::Xdp {
                rtnl::attach_forwarder(&conns).await?;
            }
            // The user-space forwarders: each reads the DUT's veths through sockets.
            match (&dut_ns, &cfg.dut) {
                (Some(ns), Dut::Testpmd { driver, core }) => {
                    rtnl::prepare_endpoints_for_raw_frames(&conns)?;
                    testpmd::start(ns, prefix, *driver, *core)?;
                }
                (Some(ns), Dut::Ovs { flows }) => {
                    rtnl::prepare_endpoints_for_raw_frames(&conns)?;
                    ovs::start(ns, prefix, flows.as_deref())?;
                }
                _ => {}
            }
            // Blocks the runtime briefly, which is fine: no netlink request is in flight.
            queues::steer(&plan, cfg.receive_steering)?;
            rtnl::mark_complete(&conns, &plan).await
        })?;
        #[cfg(test)]
        test_hooks::fail_if_asked(prefix)?;
        created.names.clear();
        Ok(plan.lab)
    })
}

/// Removes the namespaces `up` created in this call unless it finished (also on panic),
/// and the processes it started.
struct Rollback {
    prefix: String,
    names: Vec<String>,
}

impl Drop for Rollback {
    fn drop(&mut self) {
        // Nothing without processes: `stop` finds no PID of this prefix's and returns.
        if !self.names.is_empty() {
            let _ = stop_processes(&self.prefix);
        }
        for name in self.names.drain(..).rev() {
            // Best effort: the error being returned says what went wrong first.
            let _ = netns::delete(&name);
        }
    }
}

/// The lab with this prefix as it exists: `None` if none of its namespaces exist,
/// [`LabError::Broken`] if some parts are missing or not as `up` made them.
pub fn status(prefix: &str) -> Result<Option<Lab>, LabError> {
    check_prefix(prefix)?;
    on_worker(|runtime| read(runtime, prefix))
}

fn read(runtime: &tokio::runtime::Runtime, prefix: &str) -> Result<Option<Lab>, LabError> {
    let mut open = Vec::new();
    for role in Role::ALL {
        if let Some(ns) = Netns::open(&role.netns(prefix))? {
            open.push((role, ns));
        }
    }
    if open.is_empty() {
        return Ok(None);
    }
    for role in [Role::Tx, Role::Rx] {
        if !open.iter().any(|(r, _)| *r == role) {
            return Err(LabError::Broken {
                prefix: prefix.to_string(),
                detail: format!("namespace {} is missing", role.netns(prefix)),
            });
        }
    }
    let has_dut_ns = open.iter().any(|(r, _)| *r == Role::Dut);
    runtime
        .block_on(async {
            let conns = Conns::new(open)?;
            rtnl::read(&conns, prefix, has_dut_ns).await
        })
        .map(Some)
}

/// Sets the link of the lab's generator end (tx0, `rx` false) or sink end (rx0)
/// administratively up or down, as an OTG port link state does.
pub fn set_endpoint_link(prefix: &str, rx: bool, up: bool) -> Result<(), LabError> {
    check_prefix(prefix)?;
    let role = if rx { Role::Rx } else { Role::Tx };
    on_worker(|runtime| {
        let ns = Netns::open(&role.netns(prefix))?.ok_or_else(|| LabError::Broken {
            prefix: prefix.to_string(),
            detail: format!("namespace {} is missing", role.netns(prefix)),
        })?;
        runtime.block_on(async {
            let conns = Conns::new(vec![(role, ns)])?;
            rtnl::set_endpoint_link(&conns, rx, up).await
        })
    })
}

/// The queues and receive steering of a lab that is up (read from the sink's veth end).
pub fn steering(lab: &Lab) -> Result<Steering, LabError> {
    queues::read(&lab.rx.netns, &lab.rx.iface)
}

/// Removes the lab's namespaces, which takes their links, addresses and qdiscs with them.
/// Returns whether anything was there; removing an absent lab is fine.
pub fn down(prefix: &str) -> Result<bool, LabError> {
    check_prefix(prefix)?;
    remove(prefix)
}

fn remove(prefix: &str) -> Result<bool, LabError> {
    // Before its interfaces go: a forwarder polling vanished ports would spin on errors.
    let mut removed = stop_processes(prefix)?;
    for role in Role::ALL {
        removed |= netns::delete(&role.netns(prefix))?;
    }
    Ok(removed)
}

/// The process a lab's DUT runs as (testpmd, Open vSwitch's switch and database).
pub(crate) struct DutProcess {
    /// What it is, in words.
    pub name: &'static str,
    /// Whether it runs (for Open vSwitch: both daemons).
    pub running: bool,
    /// Its log.
    pub log: std::path::PathBuf,
}

impl DutProcess {
    /// `dut`'s process in lab `prefix`; `None` for a DUT in the kernel.
    pub(crate) fn of(dut: &Dut, prefix: &str) -> Option<DutProcess> {
        let (name, running, log) = match dut {
            Dut::Testpmd { .. } => (
                "testpmd",
                testpmd::running(prefix),
                testpmd::log_file(prefix),
            ),
            Dut::Ovs { .. } => ("Open vSwitch", ovs::running(prefix), ovs::log_file(prefix)),
            _ => return None,
        };
        Some(DutProcess {
            name,
            running: running.is_some(),
            log,
        })
    }
}

/// The log of the process lab `lab`'s DUT runs as, for a DUT that is one.
pub fn process_log(lab: &Lab) -> Option<std::path::PathBuf> {
    DutProcess::of(&lab.dut, &lab.prefix).map(|p| p.log)
}

/// Whether the process lab `lab`'s DUT runs as still runs; `None` for a DUT in the kernel.
pub fn process_running(lab: &Lab) -> Option<bool> {
    DutProcess::of(&lab.dut, &lab.prefix).map(|p| p.running)
}

/// Stops whatever DUT process lab `prefix` runs (finding none is fine) and removes its run
/// directory. Returns whether one was running.
fn stop_processes(prefix: &str) -> Result<bool, LabError> {
    let testpmd_ran = testpmd::stop(prefix)?;
    let ovs_ran = ovs::stop(prefix)?;
    daemon::remove_run_dir(prefix)?;
    Ok(testpmd_ran || ovs_ran)
}

/// Failure injection for the tests: makes `up` fail after it built everything.
#[cfg(test)]
pub(crate) mod test_hooks {
    use std::sync::Mutex;

    use crate::LabError;

    static FAIL_UP: Mutex<Vec<String>> = Mutex::new(Vec::new());

    pub fn fail_up(prefix: &str) {
        FAIL_UP.lock().unwrap().push(prefix.to_string());
    }

    pub fn fail_if_asked(prefix: &str) -> Result<(), LabError> {
        if FAIL_UP.lock().unwrap().iter().any(|p| p == prefix) {
            return Err(LabError::Failed {
                step: "injected test failure after building".to_string(),
                object: prefix.to_string(),
                source: std::io::Error::other("test hook"),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
