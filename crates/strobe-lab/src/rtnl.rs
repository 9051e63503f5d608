//! Building and reading a lab over rtnetlink. Each namespace gets its own netlink socket,
//! opened from inside it: a netlink socket always talks to the namespace it was made in.
//! Must run inside the worker's tokio runtime (see `lib.rs`).

use std::io;
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::time::{Duration, Instant};

use futures_util::TryStreamExt;
use rtnetlink::packet_route::link::{
    BridgePortState, BridgeStpState, InfoBridgePort, InfoData, InfoKind, InfoPortData, InfoVeth,
    LinkAttribute, LinkInfo, LinkMessage, LinkXdp, State, XdpAttached,
};
use rtnetlink::packet_route::tc::{TcAttribute, TcHandle};
use rtnetlink::{
    Handle, LinkBridge, LinkMessageBuilder, LinkUnspec, LinkVeth, RouteMessageBuilder,
};

use crate::dut::tbf_params;
use crate::netns::{Netns, Sysctl};
use crate::topology::{Iface, Role, Topology, DUT0, DUT1, RX0, TX0};
use crate::{Dut, Lab, LabError};

/// Marks tx0 as a lab link and records the DUT kind, so `status` can read it back.
const ALIAS_PREFIX: &str = "strobe-lab dut=";

/// Open namespaces of one lab, each with a netlink handle bound to it.
pub(crate) struct Conns {
    conns: Vec<(Role, Netns, Handle)>,
}

fn connect(ns: &Netns) -> Result<Handle, LabError> {
    let (connection, handle, _) = ns.run(|| {
        rtnetlink::new_connection()
            .map_err(|e| LabError::os("open a netlink socket in namespace", &ns.name, e))
    })?;
    tokio::spawn(connection);
    Ok(handle)
}

impl Conns {
    pub fn new(namespaces: Vec<(Role, Netns)>) -> Result<Conns, LabError> {
        let conns = namespaces
            .into_iter()
            .map(|(role, ns)| connect(&ns).map(|handle| (role, ns, handle)))
            .collect::<Result<_, _>>()?;
        Ok(Conns { conns })
    }

    fn get(&self, role: Role) -> (&Netns, &Handle) {
        self.conns
            .iter()
            .find(|(r, _, _)| *r == role)
            .map(|(_, ns, handle)| (ns, handle))
            // Plans only name roles whose namespaces were opened for them.
            .expect("namespace of every planned role is open")
    }

    fn handle(&self, role: Role) -> &Handle {
        self.get(role).1
    }

    fn name(&self, iface: Iface) -> String {
        format!("{}@{}", iface.name, self.get(iface.role).0.name)
    }

    async fn link(&self, iface: Iface) -> Result<Option<LinkMessage>, LabError> {
        find_link(self.handle(iface.role), iface.name)
            .await
            .map_err(|e| LabError::netlink("look up interface", self.name(iface), e))
    }

    async fn index(&self, iface: Iface) -> Result<u32, LabError> {
        match self.link(iface).await? {
            Some(link) => Ok(link.header.index),
            None => Err(LabError::os(
                "look up interface",
                self.name(iface),
                io::Error::from_raw_os_error(nix::errno::Errno::ENODEV as i32),
            )),
        }
    }

    async fn set_link(
        &self,
        iface: Iface,
        step: &str,
        message: LinkMessage,
    ) -> Result<(), LabError> {
        self.handle(iface.role)
            .link()
            .set(message)
            .execute()
            .await
            .map_err(|e| LabError::netlink(step, self.name(iface), e))
    }
}

async fn find_link(handle: &Handle, name: &str) -> Result<Option<LinkMessage>, rtnetlink::Error> {
    let mut links = handle.link().get().match_name(name.to_string()).execute();
    match links.try_next().await {
        Ok(link) => Ok(link),
        Err(rtnetlink::Error::NetlinkError(e))
            if e.raw_code() == -(nix::errno::Errno::ENODEV as i32) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Per-namespace settings, written before any link exists so every new interface inherits
/// the `default` values (`all` covers those already there, like `lo`).
pub(crate) fn sysctls(role: Role, dut: &Dut) -> Vec<Sysctl> {
    let mut settings = Vec::new();
    let mut set = |key: &str, value: &'static str, skip_if_absent: bool| {
        settings.push(Sysctl {
            key: key.to_string(),
            value,
            skip_if_absent,
        });
    };
    let mut both = |key: &str, value: &'static str| {
        for scope in ["all", "default"] {
            set(&key.replace("{}", scope), value, false);
        }
    };
    // No duplicate address detection, router solicitations or router advertisements: with
    // them the kernel would send NDP frames of its own into a run.
    both("net.ipv6.conf.{}.accept_dad", "0");
    both("net.ipv6.conf.{}.dad_transmits", "0");
    both("net.ipv6.conf.{}.router_solicitations", "0");
    both("net.ipv6.conf.{}.accept_ra", "0");
    // Multicast listener reports cannot be switched off, but their repeats can be made to
    // follow at once (1 ms) instead of over the next second, so they are all sent while
    // `up` still runs. 0 would not do: the kernel draws the delay below it at random.
    both("net.ipv6.conf.{}.mldv1_unsolicited_report_interval", "1");
    both("net.ipv6.conf.{}.mldv2_unsolicited_report_interval", "1");
    // Generated flows may vary source addresses; reverse-path filtering would drop them.
    both("net.ipv4.conf.{}.rp_filter", "0");
    if role == Role::Dut && dut.is_l2() {
        // A switch needs no addresses of its own: no IPv6 means no link-local address and
        // no multicast listener reports from the bridge.
        both("net.ipv6.conf.{}.disable_ipv6", "1");
    }
    // No IGMP reports for the 224.0.0.x groups the stack joins on its own.
    set("net.ipv4.igmp_link_local_mcast_reports", "0", false);
    // A sink answers UDP to closed ports with port-unreachable, and such an error quotes the
    // whole frame, trailer included: in a round trip it would come back looking like a
    // duplicate. The error types are in the rate mask (IPv4 6168 = types 3, 4, 11, 12; IPv6
    // `0-1,3-127`), and a global budget of 0 messages (burst 0) never allows one, while echo
    // replies, which are outside the mask, still answer ping.
    set("net.ipv4.icmp_ratemask", "6168", false);
    set("net.ipv4.icmp_ratelimit", "60000", false);
    set("net.ipv6.icmp.ratelimit", "60000", false);
    set("net.ipv6.icmp.ratemask", "0-1,3-127", true);
    set("net.ipv4.icmp_msgs_per_sec", "0", true);
    set("net.ipv4.icmp_msgs_burst", "0", true);
    let forwarding = if role == Role::Dut && dut.routes() {
        "1"
    } else {
        "0"
    };
    set("net.ipv4.ip_forward", forwarding, false);
    set("net.ipv6.conf.all.forwarding", forwarding, false);
    settings
}

/// Creates the links, addresses, routes, neighbours and shaper of `plan` in namespaces that
/// already exist and carry their sysctls, and waits until frames cross. The lab is marked
/// complete apart, by [`mark_complete`].
pub(crate) async fn build(conns: &Conns, plan: &Topology) -> Result<(), LabError> {
    for &role in &plan.roles {
        let lo = Iface {
            role,
            name: "lo",
            mac: [0; 6],
            index: 1,
        };
        let index = conns.index(lo).await?;
        conns
            .set_link(
                lo,
                "bring up",
                LinkUnspec::new_with_index(index).up().build(),
            )
            .await?;
    }

    for &(near, far) in &plan.veths {
        // The peer is created straight inside its namespace: nothing ever appears in the
        // caller's namespace, so no name there can clash or be touched.
        // Both ends need the queue counts: the kernel gives a peer without them one queue.
        let peer = LinkUnspec::new_with_name(far.name)
            .index(far.index)
            .address(far.mac.to_vec())
            .append_extra_attribute(LinkAttribute::NumTxQueues(plan.queues))
            .append_extra_attribute(LinkAttribute::NumRxQueues(plan.queues))
            .setns_by_fd(conns.get(far.role).0.file.as_raw_fd())
            .build();
        let veth = LinkMessageBuilder::<LinkVeth>::new_with_info_kind(InfoKind::Veth)
            .name(near.name)
            .index(near.index)
            .address(near.mac.to_vec())
            .append_extra_attribute(LinkAttribute::NumTxQueues(plan.queues))
            .append_extra_attribute(LinkAttribute::NumRxQueues(plan.queues))
            .set_info_data(InfoData::Veth(InfoVeth::Peer(peer)))
            .build();
        conns
            .handle(near.role)
            .link()
            .add(veth)
            .execute()
            .await
            .map_err(|e| {
                LabError::netlink(
                    "create veth pair",
                    format!("{} <-> {}", conns.name(near), conns.name(far)),
                    e,
                )
            })?;
    }

    if let Some((bridge, ports)) = plan.bridge {
        // STP off and no forward delay: the ports forward the moment they are up.
        let message = LinkBridge::new(bridge.name)
            .index(bridge.index)
            .address(bridge.mac.to_vec())
            .stp_state(BridgeStpState::Disabled)
            .forward_delay(0)
            // Without snooping the bridge floods multicast like a plain switch and joins no
            // router-discovery group of its own (which would send IGMP/MLD reports).
            .mcast_snooping(false)
            .build();
        conns
            .handle(bridge.role)
            .link()
            .add(message)
            .execute()
            .await
            .map_err(|e| LabError::netlink("create bridge", conns.name(bridge), e))?;
        let bridge_index = conns.index(bridge).await?;
        for port in ports {
            let index = conns.index(port).await?;
            let message = LinkUnspec::new_with_index(index)
                .controller(bridge_index)
                .build();
            conns
                .set_link(port, "attach to bridge br0", message)
                .await?;
        }
    }

    for address in &plan.addresses {
        let index = conns.index(address.iface).await?;
        conns
            .handle(address.iface.role)
            .address()
            .add(index, address.ip, address.prefix_len)
            .execute()
            .await
            .map_err(|e| {
                LabError::netlink(
                    format!("add address {}/{} to", address.ip, address.prefix_len),
                    conns.name(address.iface),
                    e,
                )
            })?;
    }

    for iface in plan.interfaces() {
        let index = conns.index(iface).await?;
        conns
            .set_link(
                iface,
                "bring up",
                LinkUnspec::new_with_index(index).up().build(),
            )
            .await?;
    }

    for route in &plan.routes {
        let index = conns.index(route.iface).await?;
        let message = match route.gateway {
            IpAddr::V4(gateway) => RouteMessageBuilder::<std::net::Ipv4Addr>::new()
                .gateway(gateway)
                .output_interface(index)
                .build(),
            IpAddr::V6(gateway) => RouteMessageBuilder::<std::net::Ipv6Addr>::new()
                .gateway(gateway)
                .output_interface(index)
                .build(),
        };
        conns
            .handle(route.iface.role)
            .route()
            .add(message)
            .execute()
            .await
            .map_err(|e| {
                LabError::netlink(
                    format!("add default route via {} on", route.gateway),
                    conns.name(route.iface),
                    e,
                )
            })?;
    }

    for neighbour in &plan.neighbours {
        let index = conns.index(neighbour.iface).await?;
        // `add` makes permanent entries: never probed, never expired.
        conns
            .handle(neighbour.iface.role)
            .neighbours()
            .add(index, neighbour.ip)
            .link_layer_address(&neighbour.mac)
            .execute()
            .await
            .map_err(|e| {
                LabError::netlink(
                    format!("add static neighbour {} on", neighbour.ip),
                    conns.name(neighbour.iface),
                    e,
                )
            })?;
    }

    if let Some((port, rate_bps)) = plan.tbf {
        add_tbf(conns.get(port.role).0, port.name, rate_bps)?;
    }

    wait_until_forwarding(conns, plan).await
}

/// `XDP_FLAGS_DRV_MODE`: native XDP, in the driver (veth has it).
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// The `xdp` DUT: loads the forwarder in the DUT's namespace (where its DEVMAP resolves
/// dut0 and dut1) and attaches one program to each over netlink, natively: attached that
/// way they stay after strobe exits and go with the interfaces. The endpoints take the
/// frames it redirects to them only with their NAPI path on, which GRO turns on for a veth,
/// and complete their own stacks' checksums in software (see
/// [`prepare_endpoints_for_raw_frames`]).
pub(crate) async fn attach_forwarder(conns: &Conns) -> Result<(), LabError> {
    let ends = [DUT0, DUT1];
    let indexes = [conns.index(DUT0).await?, conns.index(DUT1).await?];
    let ns = conns.get(Role::Dut).0;
    let forwarder = ns.run(|| {
        strobe_io::xdp_forward::load(indexes).map_err(|e| {
            LabError::os(
                "load",
                format!("the XDP forwarder in namespace {}", ns.name),
                io::Error::other(e.to_string()),
            )
        })
    })?;
    for ((iface, index), program) in ends.into_iter().zip(indexes).zip(&forwarder.programs) {
        let mut message = LinkUnspec::new_with_index(index).build();
        message.attributes.push(LinkAttribute::Xdp(vec![
            LinkXdp::Fd(program.as_raw_fd()),
            LinkXdp::Flags(XDP_FLAGS_DRV_MODE),
        ]));
        conns
            .set_link(iface, "attach the XDP forwarder to", message)
            .await?;
    }
    prepare_endpoints_for_raw_frames(conns)
}

/// Readies the endpoints for frames a forwarder hands on as they came (the `xdp` and
/// `testpmd` DUTs): a veth takes XDP-redirected frames only with its NAPI path on, which
/// GRO turns on. And the endpoints' own stacks leave UDP and TCP checksums to the device (a
/// veth passes the socket buffer on with a "complete the checksum" mark); a frame that
/// crossed XDP or a packet socket has lost that mark, so they complete them themselves.
pub(crate) fn prepare_endpoints_for_raw_frames(conns: &Conns) -> Result<(), LabError> {
    let settings = [
        ("rx-gro", true, "turn GRO on (to take XDP frames) on"),
        (
            "tx-checksum-ip-generic",
            false,
            "turn checksum offload off (forwarded frames carry whole checksums) on",
        ),
    ];
    for end in [TX0, RX0] {
        let ns = conns.get(end.role).0;
        for (feature, on, step) in settings {
            strobe_io::netdev_features::set(Some(&ns.name), end.name, feature, on).map_err(
                |e| LabError::os(step, conns.name(end), io::Error::other(e.to_string())),
            )?;
        }
    }
    Ok(())
}

/// Whether `link` has an XDP program attached in the driver.
fn has_native_xdp(link: &LinkMessage) -> bool {
    link.attributes.iter().any(|a| match a {
        LinkAttribute::Xdp(xdp) => xdp.contains(&LinkXdp::Attached(XdpAttached::Driver)),
        _ => false,
    })
}

/// Records the DUT kind in tx0's alias: the mark `status` looks for. `up` sets it last, so
/// only a complete lab carries it.
/// Sets the link of the lab's tx0 (`rx` false) or rx0 administratively up or down.
pub(crate) async fn set_endpoint_link(conns: &Conns, rx: bool, up: bool) -> Result<(), LabError> {
    let iface = if rx { RX0 } else { TX0 };
    let index = conns.index(iface).await?;
    let change = LinkUnspec::new_with_index(index);
    let message = if up { change.up() } else { change.down() }.build();
    conns
        .set_link(iface, if up { "set up" } else { "set down" }, message)
        .await?;
    // Up means frames cross again: wait until the link is operationally up (its peer has
    // carrier and the kernel has activated its queues), as `up` does for a new lab.
    if up {
        let deadline = Instant::now() + READY_TIMEOUT;
        wait_until_ready(conns, iface, false, deadline).await?;
    }
    Ok(())
}

pub(crate) async fn mark_complete(conns: &Conns, plan: &Topology) -> Result<(), LabError> {
    let tx = TX0;
    let index = conns.index(tx).await?;
    let alias = format!("{ALIAS_PREFIX}{}", plan.lab.dut);
    conns
        .set_link(
            tx,
            "record the DUT kind in the alias of",
            LinkUnspec::new_with_index(index).alias(alias).build(),
        )
        .await
}

/// How long links may take to come up before `up` gives up.
const READY_TIMEOUT: Duration = Duration::from_secs(5);
/// After the links are up the kernel still sends its multicast listener reports (two timer
/// ticks later, 8 ms at HZ=250); waiting well beyond that hands over a lab gone quiet.
const SETTLE: Duration = Duration::from_millis(100);

/// Waits until `iface` is operationally up (and forwards, as a bridge port), or `deadline`.
async fn wait_until_ready(
    conns: &Conns,
    iface: Iface,
    bridge_port: bool,
    deadline: Instant,
) -> Result<(), LabError> {
    loop {
        let link = conns.link(iface).await?;
        let ready = link.is_some_and(|link| {
            let up = link
                .attributes
                .contains(&LinkAttribute::OperState(State::Up));
            up && (!bridge_port || port_state(&link) == Some(BridgePortState::Forwarding))
        });
        if ready {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(LabError::os(
                "wait for link to come up",
                conns.name(iface),
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("not forwarding after {READY_TIMEOUT:?}"),
                ),
            ));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits until every link is operationally up and every bridge port forwards: only then do
/// frames cross, and only then has IPv6 configured the links (and announced itself).
async fn wait_until_forwarding(conns: &Conns, plan: &Topology) -> Result<(), LabError> {
    let deadline = Instant::now() + READY_TIMEOUT;
    for iface in plan.interfaces() {
        let bridge_port = plan.bridge.is_some_and(|(_, ports)| ports.contains(&iface));
        wait_until_ready(conns, iface, bridge_port, deadline).await?;
    }
    tokio::time::sleep(SETTLE).await;
    Ok(())
}

fn port_state(link: &LinkMessage) -> Option<BridgePortState> {
    link.attributes.iter().find_map(|a| match a {
        LinkAttribute::LinkInfo(infos) => infos.iter().find_map(|info| match info {
            LinkInfo::PortData(InfoPortData::BridgePort(port)) => {
                port.iter().find_map(|p| match p {
                    InfoBridgePort::State(state) => Some(*state),
                    _ => None,
                })
            }
            _ => None,
        }),
        _ => None,
    })
}

/// Shapes `iface`'s egress with a token bucket. netlink-packet-route has no tbf options
/// (it would mean hand-encoding `tc_tbf_qopt` and rate tables), so this runs iproute2's
/// `tc`, which enters the namespace itself with `-n`.
fn add_tbf(ns: &Netns, iface: &str, rate_bps: u64) -> Result<(), LabError> {
    let params = tbf_params(rate_bps);
    let args = [
        "-n".to_string(),
        ns.name.clone(),
        "qdisc".into(),
        "replace".into(),
        "dev".into(),
        iface.into(),
        "root".into(),
        "tbf".into(),
        "rate".into(),
        // Explicit bits: in tc's own units `mbps` would mean megabytes.
        format!("{rate_bps}bit"),
        "burst".into(),
        params.burst_bytes.to_string(),
        "latency".into(),
        format!("{}ms", params.latency_ms),
    ];
    let object = format!("{iface}@{}", ns.name);
    let output = Command::new("tc").args(&args).output().map_err(|e| {
        LabError::program(
            "add tbf qdisc to",
            object.clone(),
            e,
            "`tc` not found; the tbf DUT needs iproute2 (apt-get install iproute2)",
        )
    })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(LabError::os(
            "add tbf qdisc to",
            object,
            io::Error::other(format!("`tc {}` said: {}", args.join(" "), stderr.trim())),
        ));
    }
    Ok(())
}

/// Reads back the lab whose namespaces are open in `conns`: the DUT kind from tx0's alias,
/// then checks that every planned interface exists with its MAC (and the shaper, for tbf).
pub(crate) async fn read(conns: &Conns, prefix: &str, has_dut_ns: bool) -> Result<Lab, LabError> {
    let broken = |detail: String| LabError::Broken {
        prefix: prefix.to_string(),
        detail,
    };
    let tx_ns = Role::Tx.netns(prefix);
    let tx = conns
        .link(TX0)
        .await?
        .ok_or_else(|| broken(format!("interface tx0 is missing in namespace {tx_ns}")))?;
    let alias = tx.attributes.iter().find_map(|a| match a {
        LinkAttribute::IfAlias(alias) => Some(alias.as_str()),
        _ => None,
    });
    let dut: Dut = alias
        .and_then(|a| a.strip_prefix(ALIAS_PREFIX))
        .ok_or_else(|| {
            broken(format!(
                "tx0 in {tx_ns} carries no `{ALIAS_PREFIX}…` alias (an unfinished `up`?)"
            ))
        })?
        .parse()
        .map_err(|e| broken(format!("tx0's alias names no DUT: {e}")))?;
    if dut.has_namespace() != has_dut_ns {
        let state = if has_dut_ns { "exists" } else { "is missing" };
        return Err(broken(format!(
            "the {dut} DUT's namespace {} {state}",
            Role::Dut.netns(prefix)
        )));
    }
    let plan = Topology::new(prefix, &dut);
    for iface in plan.interfaces() {
        let link = conns
            .link(iface)
            .await?
            .ok_or_else(|| broken(format!("interface {} is missing", conns.name(iface))))?;
        let mac = link.attributes.iter().find_map(|a| match a {
            LinkAttribute::Address(mac) => Some(mac.as_slice()),
            _ => None,
        });
        if mac != Some(&iface.mac[..]) {
            return Err(broken(format!(
                "interface {} has another MAC than the lab gave it",
                conns.name(iface)
            )));
        }
        if dut == Dut::Xdp && [DUT0, DUT1].contains(&iface) && !has_native_xdp(&link) {
            return Err(broken(format!(
                "interface {} has lost its XDP forwarder",
                conns.name(iface)
            )));
        }
    }
    if let Some(process) = crate::DutProcess::of(&dut, prefix) {
        if !process.running {
            return Err(broken(format!(
                "its {} is not running (its log: {})",
                process.name,
                process.log.display()
            )));
        }
    }
    if let Some((port, _)) = plan.tbf {
        let index = conns.index(port).await?;
        let qdiscs: Vec<_> = conns
            .handle(port.role)
            .qdisc()
            .get()
            .index(index as i32)
            .execute()
            .try_collect()
            .await
            .map_err(|e| LabError::netlink("list qdiscs of", conns.name(port), e))?;
        let shaped = qdiscs.iter().any(|q| {
            q.header.index == index as i32
                && q.header.parent == TcHandle::ROOT
                && q.attributes.contains(&TcAttribute::Kind("tbf".to_string()))
        });
        if !shaped {
            return Err(broken(format!("{} has no tbf qdisc", conns.name(port))));
        }
    }
    Ok(plan.lab)
}
