//! The lab's fixed layout: which namespaces, links, addresses, routes and neighbours each DUT
//! kind needs. Pure data, so `up` builds exactly what `status` expects to find.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::{queues, Dut, Endpoint, Lab};

/// Locally administered unicast MACs (0x02 first octet); 0x53 0x54 is "ST" for strobe.
const fn mac(last: u8) -> [u8; 6] {
    [0x02, 0x53, 0x54, 0x00, 0x00, last]
}
pub(crate) const MAC_TX: [u8; 6] = mac(0x01);
pub(crate) const MAC_RX: [u8; 6] = mac(0x02);
pub(crate) const MAC_DUT0: [u8; 6] = mac(0x10);
pub(crate) const MAC_DUT1: [u8; 6] = mac(0x11);
pub(crate) const MAC_BRIDGE: [u8; 6] = mac(0x1f);

const TX_IFACE: &str = "tx0";
const RX_IFACE: &str = "rx0";
pub(crate) const DUT_TX_SIDE: &str = "dut0";
pub(crate) const DUT_RX_SIDE: &str = "dut1";
const BRIDGE: &str = "br0";

/// The namespaces of a lab; every name is `{prefix}-{suffix}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    Tx,
    Rx,
    Dut,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Tx, Role::Rx, Role::Dut];

    fn suffix(self) -> &'static str {
        match self {
            Role::Tx => "tx",
            Role::Rx => "rx",
            Role::Dut => "dut",
        }
    }

    pub fn netns(self, prefix: &str) -> String {
        format!("{prefix}-{}", self.suffix())
    }
}

/// Longest name a prefix is part of: `{prefix}-dut`.
pub(crate) const LONGEST_SUFFIX: &str = "-dut";

/// One interface of the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Iface {
    pub role: Role,
    pub name: &'static str,
    pub mac: [u8; 6],
    /// Fixed, and different from every other lab interface's: the kernel handles a veth's
    /// carrier change at once only when its index differs from its peer's; with equal
    /// indexes (both 2 in fresh namespaces) link-watch delays it by up to a second.
    pub index: u32,
}

pub(crate) const TX0: Iface = Iface {
    role: Role::Tx,
    name: TX_IFACE,
    mac: MAC_TX,
    index: 10,
};
pub(crate) const RX0: Iface = Iface {
    role: Role::Rx,
    name: RX_IFACE,
    mac: MAC_RX,
    index: 20,
};
pub(crate) const DUT0: Iface = Iface {
    role: Role::Dut,
    name: DUT_TX_SIDE,
    mac: MAC_DUT0,
    index: 30,
};
pub(crate) const DUT1: Iface = Iface {
    role: Role::Dut,
    name: DUT_RX_SIDE,
    mac: MAC_DUT1,
    index: 31,
};
const BR0: Iface = Iface {
    role: Role::Dut,
    name: BRIDGE,
    mac: MAC_BRIDGE,
    index: 32,
};

/// An address on an interface.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Address {
    pub iface: Iface,
    pub ip: IpAddr,
    pub prefix_len: u8,
}

/// A static neighbour entry: `ip` on the link of `iface` is at `mac`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Neighbour {
    pub iface: Iface,
    pub ip: IpAddr,
    pub mac: [u8; 6],
}

/// A default route through `gateway` on `iface`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DefaultRoute {
    pub iface: Iface,
    pub gateway: IpAddr,
}

/// Everything `up` creates, in the order it creates it.
#[derive(Clone, Debug)]
pub(crate) struct Topology {
    pub lab: Lab,
    pub roles: Vec<Role>,
    /// veth pairs; the first end is created in its namespace, the peer straight in its own.
    pub veths: Vec<(Iface, Iface)>,
    /// Transmit queues and receive queues of every veth end (see `queues.rs`).
    pub queues: u32,
    /// The bridge and its ports, for the bridge and tbf DUTs.
    pub bridge: Option<(Iface, [Iface; 2])>,
    pub addresses: Vec<Address>,
    pub routes: Vec<DefaultRoute>,
    pub neighbours: Vec<Neighbour>,
    /// The shaped port and its rate, for the tbf DUT.
    pub tbf: Option<(Iface, u64)>,
}

/// IPv4 and IPv6 of one side of the L2 lab (cable, bridge, tbf): one shared /15 and /64.
const L2_PREFIX_V4: u8 = 15;
const V6_PREFIX: u8 = 64;
/// The router lab's subnets are /24s out of 198.18.0.0/15.
const ROUTED_PREFIX_V4: u8 = 24;

fn v4(c: u8, d: u8) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, c, d)
}

fn v6(subnet: u16, host: u16) -> Ipv6Addr {
    Ipv6Addr::new(0x2001, 0x2, 0, subnet, 0, 0, 0, host)
}

impl Topology {
    pub fn new(prefix: &str, dut: &Dut) -> Topology {
        let tx_v4 = v4(0, 1);
        let rx_v4 = v4(1, 1);
        let (tx_v6, rx_v6, prefix_len_v4) = if dut.is_l2() {
            (v6(0, 1), v6(0, 2), L2_PREFIX_V4)
        } else {
            (v6(0, 1), v6(1, 1), ROUTED_PREFIX_V4)
        };
        // Where frames from each endpoint go first: the peer itself on a shared segment,
        // the router's near port otherwise.
        let (tx_next_hop, rx_next_hop) = if dut.routes() {
            (DUT0, DUT1)
        } else {
            (RX0, TX0)
        };
        let endpoint = |iface: Iface, ipv4, ipv6, next_hop: Iface| Endpoint {
            netns: iface.role.netns(prefix),
            iface: iface.name.to_string(),
            mac: iface.mac,
            ipv4,
            ipv6,
            prefix_len_v4,
            next_hop_mac: next_hop.mac,
        };
        let lab = Lab {
            prefix: prefix.to_string(),
            dut: dut.clone(),
            tx: endpoint(TX0, tx_v4, tx_v6, tx_next_hop),
            rx: endpoint(RX0, rx_v4, rx_v6, rx_next_hop),
        };

        let addr = |iface, ip: IpAddr, prefix_len| Address {
            iface,
            ip,
            prefix_len,
        };
        let neigh = |iface, ip: IpAddr, peer: Iface| Neighbour {
            iface,
            ip,
            mac: peer.mac,
        };
        let mut plan = Topology {
            lab,
            roles: vec![Role::Tx, Role::Rx],
            veths: vec![(TX0, RX0)],
            queues: queues::per_veth(),
            bridge: None,
            addresses: vec![
                addr(TX0, tx_v4.into(), prefix_len_v4),
                addr(TX0, tx_v6.into(), V6_PREFIX),
                addr(RX0, rx_v4.into(), prefix_len_v4),
                addr(RX0, rx_v6.into(), V6_PREFIX),
            ],
            routes: Vec::new(),
            // On a shared segment the endpoints know each other from the start, so a run
            // never waits for (or sees) ARP and neighbour discovery.
            neighbours: vec![
                neigh(TX0, rx_v4.into(), RX0),
                neigh(TX0, rx_v6.into(), RX0),
                neigh(RX0, tx_v4.into(), TX0),
                neigh(RX0, tx_v6.into(), TX0),
            ],
            tbf: None,
        };
        if dut.has_namespace() {
            plan.roles.push(Role::Dut);
            plan.veths = vec![(TX0, DUT0), (DUT1, RX0)];
        }
        match *dut {
            // The forwarder's programs are attached after the links exist (`rtnl`).
            Dut::Cable | Dut::Xdp | Dut::Testpmd { .. } | Dut::Ovs { .. } => {}
            Dut::Bridge => plan.bridge = Some((BR0, [DUT0, DUT1])),
            Dut::Tbf { rate_bps } => {
                plan.bridge = Some((BR0, [DUT0, DUT1]));
                plan.tbf = Some((DUT1, rate_bps));
            }
            Dut::Router | Dut::Nft { .. } => {
                let (gw_tx_v4, gw_rx_v4) = (v4(0, 254), v4(1, 254));
                let (gw_tx_v6, gw_rx_v6) = (v6(0, 0xfe), v6(1, 0xfe));
                plan.addresses.extend([
                    addr(DUT0, gw_tx_v4.into(), ROUTED_PREFIX_V4),
                    addr(DUT0, gw_tx_v6.into(), V6_PREFIX),
                    addr(DUT1, gw_rx_v4.into(), ROUTED_PREFIX_V4),
                    addr(DUT1, gw_rx_v6.into(), V6_PREFIX),
                ]);
                let route = |iface, gateway: IpAddr| DefaultRoute { iface, gateway };
                plan.routes = vec![
                    route(TX0, gw_tx_v4.into()),
                    route(TX0, gw_tx_v6.into()),
                    route(RX0, gw_rx_v4.into()),
                    route(RX0, gw_rx_v6.into()),
                ];
                // Each hop knows the next one's MAC: tx0 and rx0 their gateway, the router
                // both endpoints.
                plan.neighbours = vec![
                    neigh(TX0, gw_tx_v4.into(), DUT0),
                    neigh(TX0, gw_tx_v6.into(), DUT0),
                    neigh(DUT0, tx_v4.into(), TX0),
                    neigh(DUT0, tx_v6.into(), TX0),
                    neigh(DUT1, rx_v4.into(), RX0),
                    neigh(DUT1, rx_v6.into(), RX0),
                    neigh(RX0, gw_rx_v4.into(), DUT1),
                    neigh(RX0, gw_rx_v6.into(), DUT1),
                ];
            }
        }
        plan
    }

    /// Both ends of every veth pair.
    pub fn veth_ends(&self) -> impl Iterator<Item = Iface> + '_ {
        self.veths.iter().flat_map(|&(a, b)| [a, b])
    }

    /// Every interface the plan creates, each once.
    pub fn interfaces(&self) -> Vec<Iface> {
        let mut all: Vec<Iface> = self.veth_ends().collect();
        all.extend(self.bridge.map(|(bridge, _)| bridge));
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cable_is_one_wire_in_one_subnet() {
        let plan = Topology::new("strobe", &Dut::Cable);
        assert_eq!(plan.roles, [Role::Tx, Role::Rx]);
        assert_eq!(plan.veths, [(TX0, RX0)]);
        let lab = &plan.lab;
        assert_eq!(lab.tx.netns, "strobe-tx");
        assert_eq!(lab.rx.iface, "rx0");
        assert_eq!(lab.tx.next_hop_mac, MAC_RX);
        assert_eq!(lab.rx.next_hop_mac, MAC_TX);
        assert_eq!(lab.tx.prefix_len_v4, 15);
        assert_eq!(lab.rx.ipv4, Ipv4Addr::new(198, 18, 1, 1));
        assert_eq!(lab.rx.ipv6, "2001:2::2".parse::<Ipv6Addr>().unwrap());
        assert!(plan.routes.is_empty() && plan.bridge.is_none() && plan.tbf.is_none());
    }

    #[test]
    fn every_veth_gets_a_queue_per_cpu_and_at_least_two() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        for dut in [Dut::Cable, Dut::Router] {
            let plan = Topology::new("p", &dut);
            assert!(plan.queues >= 2, "{dut}: {} queues", plan.queues);
            assert!(plan.queues as usize >= cpus.min(4096), "{dut}");
        }
    }

    #[test]
    fn router_sends_to_its_near_port_and_pins_neighbours() {
        let plan = Topology::new("p", &Dut::Router);
        let lab = &plan.lab;
        assert_eq!(lab.tx.next_hop_mac, MAC_DUT0);
        assert_eq!(lab.rx.next_hop_mac, MAC_DUT1);
        assert_eq!(lab.rx.ipv6, "2001:2:0:1::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(lab.tx.prefix_len_v4, 24);
        assert_eq!(plan.routes.len(), 4);
        // Every gateway has a static neighbour on the same interface, with the MAC of the
        // interface that owns the gateway address.
        for route in &plan.routes {
            let n = plan
                .neighbours
                .iter()
                .find(|n| n.ip == route.gateway)
                .unwrap();
            assert_eq!(n.iface, route.iface);
            let owner = plan
                .addresses
                .iter()
                .find(|a| a.ip == route.gateway)
                .unwrap();
            assert_eq!(n.mac, owner.iface.mac);
        }
    }

    #[test]
    fn tbf_is_a_bridge_with_a_shaped_sink_port() {
        let plan = Topology::new(
            "p",
            &Dut::Tbf {
                rate_bps: 1_000_000,
            },
        );
        assert_eq!(plan.bridge.map(|b| b.0.name), Some("br0"));
        assert_eq!(plan.tbf, Some((DUT1, 1_000_000)));
        assert_eq!(plan.interfaces().len(), 5);
        assert_eq!(plan.lab.tx.next_hop_mac, MAC_RX);
    }
}
