//! Port locations at the run-control boundary: the lab's `lab:tx` / `lab:rx` names resolved
//! to its interfaces (and its MACs filled in where a flow leaves them unset).

use strobe_lab::{Endpoint, Lab};
use strobe_model::{LabBackend, LabPort, LabSide, Location, PortLocation, Scenario};

use crate::ControlError;

/// The lab `strobe lab` and `--lab` use when no prefix is given.
pub const DEFAULT_LAB_PREFIX: &str = "strobe";

/// How to bring up the lab `prefix`, for messages about a lab that is not up.
pub fn lab_up_command(prefix: &str) -> String {
    if prefix == DEFAULT_LAB_PREFIX {
        "strobe lab up".to_string()
    } else {
        format!("strobe lab up --prefix {prefix}")
    }
}

/// Resolves `lab:tx`, `lab:rx` (AF_PACKET) and `lab:tx@afxdp`, `lab:rx@afxdp` port
/// locations to the lab's interfaces. Returns the lab when any port used it.
pub fn resolve_lab_ports(
    scenario: &mut Scenario,
    prefix: &str,
) -> Result<Option<Lab>, ControlError> {
    if !scenario.ports.iter().any(|p| p.location.lab().is_some()) {
        return Ok(None);
    }
    let lab = strobe_lab::status(prefix)?.ok_or_else(|| {
        ControlError::BadInput(format!(
            "a port uses the lab, but no lab with prefix `{prefix}` is up: run `{}` first",
            lab_up_command(prefix)
        ))
    })?;
    for port in &mut scenario.ports {
        if let PortLocation::Lab(lab_port) = port.location {
            let endpoint = lab_endpoint(&lab, lab_port.side);
            port.location = PortLocation::Direct(lab_location(
                &lab,
                &format!("port `{}`", port.name),
                lab_port,
            )?);
            // As in one-flow runs: frames leave from the endpoint's MAC to its next hop
            // unless the scenario says otherwise (all-zero MACs would be dropped).
            for flow in scenario.flows.iter_mut().filter(|f| f.tx_port == port.name) {
                strobe_model::fill_unset_macs(flow, endpoint.mac, endpoint.next_hop_mac);
            }
        }
    }
    Ok(Some(lab))
}

/// The lab end on `side`.
fn lab_endpoint(lab: &Lab, side: LabSide) -> &Endpoint {
    match side {
        LabSide::Tx => &lab.tx,
        LabSide::Rx => &lab.rx,
    }
}

/// The interface `port` names on `lab`; `what` names the location in errors.
fn lab_location(lab: &Lab, what: &str, port: LabPort) -> Result<Location, ControlError> {
    let endpoint = lab_endpoint(lab, port.side);
    let (netns, iface) = (Some(endpoint.netns.clone()), endpoint.iface.clone());
    Ok(match port.backend() {
        LabBackend::AfPacket => Location::AfPacket {
            netns,
            iface,
            gso: false,
        },
        LabBackend::AfPacketGso => Location::AfPacket {
            netns,
            iface,
            gso: true,
        },
        LabBackend::AfXdp => Location::AfXdp {
            netns,
            iface,
            queue: 0,
        },
        // A socket on every receive queue: veth puts XDP frames (xdp-live's) on the queue
        // of the CPU that sent them, not on queue 0 as the lab steers everything else.
        LabBackend::AfXdpAll => Location::AfXdpAllQueues { netns, iface },
        LabBackend::XdpCount => Location::XdpCount { netns, iface },
        LabBackend::XdpLive => {
            // A veth transmits XDP frames only while its peer can take them: GRO on gives
            // the peer the NAPI instance that does (the lab's own ports, so strobe may set
            // them).
            let (peer_netns, peer) = lab.veth_peer(endpoint);
            strobe_io::netdev_features::set(Some(&peer_netns), &peer, "rx-gro", true).map_err(
                |e| {
                    ControlError::BadInput(format!(
                        "{what}: cannot turn GRO on at {peer_netns}/{peer}, which xdp-live needs: {e}"
                    ))
                },
            )?;
            Location::XdpLive { netns, iface }
        }
    })
}

/// Resolves one port location as a front end was given it: `lab:…` names become the lab's
/// interfaces (the lab must be up), anything else is returned as it is.
pub fn resolve_lab_location(location: &str, prefix: &str) -> Result<String, ControlError> {
    if !location.starts_with("lab:") {
        return Ok(location.to_string());
    }
    let port = PortLocation::parse(location)
        .map_err(|e| ControlError::BadInput(format!("`{location}`: {e}")))?;
    Ok(resolve_port_location(&port, prefix)?.to_string())
}

/// A port's location ready to open: a `lab:` end resolved on the lab `prefix` (which must be
/// up), any other as it is.
pub fn resolve_port_location(
    location: &PortLocation,
    prefix: &str,
) -> Result<Location, ControlError> {
    let lab_port = match location {
        PortLocation::Direct(location) => return Ok(location.clone()),
        PortLocation::Lab(lab_port) => *lab_port,
        PortLocation::Remote(at) => {
            return Err(ControlError::BadInput(format!(
                "`{location}` is a port of the agent at `{at}`, not of this host: ask its \
                 agent (or the controller) for it"
            )))
        }
    };
    let lab = strobe_lab::status(prefix)?.ok_or_else(|| {
        ControlError::BadInput(format!(
            "`{location}` uses the lab, but no lab with prefix `{prefix}` is up: run `{}` first",
            lab_up_command(prefix)
        ))
    })?;
    lab_location(&lab, &format!("`{location}`"), lab_port)
}

/// Location forms strobe opens as they are written.
const LOCATION_KINDS: [&str; 8] = [
    "afpacket:",
    // Another host's port, written by a multi-host run's controller.
    "remote:",
    "afpacket-gso:",
    "afxdp:",
    "xdp-live:",
    "auto:",
    "pcap:",
    "lab:",
];

/// A port location as an OTG config gives it: a name from `map` (the user's own names),
/// one of strobe's location forms (`afxdp:eth1@0`, `lab:tx`, `null`, …), or a bare
/// interface `IFACE` / `NETNS/IFACE`, opened with AF_PACKET (it works on every interface
/// and gives kernel receive timestamps).
pub fn otg_location(location: &str, map: &[(String, String)]) -> Result<String, String> {
    if let Some((_, mapped)) = map.iter().find(|(name, _)| name == location) {
        return Ok(mapped.clone());
    }
    if location.starts_with("pcap:") {
        // A server must not write files wherever a request says.
        return Err(format!(
            "`{location}`: pcap: ports are not offered through the API (a request would choose \
             a file to write) — use strobe gen for traces, or a real interface here"
        ));
    }
    if location == "null" || LOCATION_KINDS.iter().any(|k| location.starts_with(k)) {
        return Ok(location.to_string());
    }
    let (netns, iface) = location.split_once('/').unwrap_or(("", location));
    let name_ok = |s: &str| {
        !s.is_empty()
            && s.len() < 16
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@'))
    };
    if name_ok(iface) && (netns.is_empty() || name_ok(netns)) && !location.starts_with('/') {
        return Ok(format!("afpacket:{location}"));
    }
    Err(format!(
        "`{location}` is not a port location strobe knows — give an interface (eth1, \
         NETNS/IFACE), afpacket:IFACE, afxdp:IFACE@QUEUE, the lab's lab:tx / lab:rx, null, or a \
         name from the location map"
    ))
}

/// Sets a port's link administratively up or down: the lab's own ends (`lab:tx`,
/// `lab:rx`) only; strobe does not take other interfaces down.
pub fn set_port_link(location: &PortLocation, prefix: &str, up: bool) -> Result<(), ControlError> {
    let rx = lab_link_side(location)?;
    Ok(strobe_lab::set_endpoint_link(prefix, rx, up)?)
}

/// Which lab end a location's link is (false: tx, true: rx), or why strobe does not set it.
pub fn lab_link_side(location: &PortLocation) -> Result<bool, ControlError> {
    match location.lab() {
        Some(port) => Ok(port.side == LabSide::Rx),
        None => Err(ControlError::BadInput(format!(
            "`{location}`: strobe sets links only on its lab's ends (lab:tx, lab:rx); set \
             another interface's link with `ip link set IFACE up|down`"
        ))),
    }
}

/// Checks that every port of `scenario` (its `lab:` ports resolved) names, for interfaces,
/// one that exists: a server refuses such a config when it is set, not when traffic
/// starts. Ports are not opened here.
pub fn check_locations(scenario: &Scenario) -> Result<(), ControlError> {
    for port in scenario.ports.iter().filter(|p| !p.location.is_remote()) {
        let Some(location) = port.location.resolved() else {
            return Err(ControlError::BadInput(format!(
                "port `{}`: `{}` is not resolved to the lab's interface yet",
                port.name, port.location
            )));
        };
        let Some((netns, iface)) = location.interface() else {
            continue;
        };
        if let Err(e) = strobe_io::ifaddr::interface_mac(netns, iface) {
            let place = netns.map_or(String::new(), |ns| format!(" in network namespace `{ns}`"));
            return Err(ControlError::BadInput(format!(
                "port `{}` ({}): no usable interface `{iface}`{place} ({e}) — check the name \
                 with `ip link`{}",
                port.name,
                port.location,
                netns.map_or(String::new(), |ns| format!(" (ip -n {ns} link)"))
            )));
        }
    }
    Ok(())
}

/// Measures the transmit floor of `location` (a resolved port, not `lab:`) with a few hundred
/// probe frames from and to one locally administered MAC: `strobe ports --floor`, the only
/// place strobe sends frames of its own. Returns the floor and the frames sent.
pub fn probe_floor(location: &str) -> Result<(strobe_timing::PathFloor, u64), ControlError> {
    strobe_engine::port_floor::probe_location(location)
        .map_err(|e| ControlError::Runtime(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn otg_locations_are_mapped_named_or_opened_with_af_packet() {
        let map = [("p1".to_string(), "afxdp:eth1@2".to_string())];
        assert_eq!(otg_location("p1", &map).unwrap(), "afxdp:eth1@2");
        assert_eq!(otg_location("lab:tx", &map).unwrap(), "lab:tx");
        assert!(otg_location("pcap:/etc/passwd", &map).is_err());
        assert_eq!(otg_location("veth-a", &map).unwrap(), "afpacket:veth-a");
        assert_eq!(
            otg_location("ns1/veth-a", &map).unwrap(),
            "afpacket:ns1/veth-a"
        );
        for bad in ["", "/x", "a b", "toolonginterfacename0", "x/y/z"] {
            assert!(otg_location(bad, &map).is_err(), "{bad}");
        }
    }
}
