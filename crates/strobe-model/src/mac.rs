//! The outer Ethernet addresses a flow sends from and to: filling in the ones a scenario
//! left unset, and refusing source addresses no device forwards.
//!
//! A frame whose source MAC is all zero or a group (multicast/broadcast) address is dropped
//! by switches, bridges and routers (IEEE 802.1Q forbids learning it, Linux drops it on
//! ingress), so such a run would report 100 % loss for a reason the user never sees.

use strobe_wire::HeaderKind;

use crate::model::{FlowSpec, Scenario};
use crate::pattern::Pattern;
use crate::warning::Warning;

/// Field width of a MAC address.
const MAC_BITS: u32 = 48;
/// The I/G bit (lowest bit of the first octet) as a bit of the 48-bit field value.
const GROUP_BIT: u128 = 1 << 40;
/// A pattern's values are checked up to this many (MAC lists and counters are short in
/// practice; the bound keeps loading 65 536 flows quick).
const CHECK_EACH_UP_TO: u64 = 1 << 12;

/// Sets the outermost Ethernet header's `src` and `dst` where the flow left them unset.
/// Returns whether anything was set. Flows whose stack does not start with Ethernet are
/// left as they are.
pub fn fill_unset_macs(flow: &mut FlowSpec, src: [u8; 6], dst: [u8; 6]) -> bool {
    let Some(eth) = flow.packet.first_mut() else {
        return false;
    };
    if eth.kind != HeaderKind::Ethernet {
        return false;
    }
    let mut changed = false;
    for (name, mac) in [("src", src), ("dst", dst)] {
        let Some((index, _)) = HeaderKind::Ethernet.field(name) else {
            continue;
        };
        if !eth.fields.iter().any(|f| f.field_index == index) {
            eth.set(index, Pattern::Value(mac_value(mac)));
            changed = true;
        }
    }
    changed
}

/// Checks every flow's outer Ethernet addresses: an all-zero or group source is an error
/// (naming the flow and field), an all-zero destination a warning (returned).
pub fn check_macs(scenario: &Scenario) -> Result<Vec<Warning>, String> {
    let mut warnings = Vec::new();
    for flow in &scenario.flows {
        let Some(eth) = flow
            .packet
            .first()
            .filter(|h| h.kind == HeaderKind::Ethernet)
        else {
            continue;
        };
        let pattern_of = |name: &str| {
            let index = HeaderKind::Ethernet.field(name).map(|(i, _)| i);
            eth.fields
                .iter()
                .find(|f| Some(f.field_index) == index)
                .map(|f| &f.pattern)
        };
        let field = |name: &str| {
            if scenario.source == "command line" {
                format!("--{name}-mac")
            } else {
                format!(
                    "{}: flow `{}`: packet[0].ethernet.{name}",
                    scenario.source, flow.name
                )
            }
        };
        let unset = Pattern::Value(0);
        let src = pattern_of("src").unwrap_or(&unset);
        if let Some(mac) = first_bad(src, |v| v == 0) {
            return Err(format!(
                "{}: the source MAC is {} (all zero{}): devices drop such frames, so every \
                 frame would be lost — set it to the sending interface's MAC, e.g. \
                 src = \"02:00:00:00:00:01\" (on a lab: port, unset MACs take the lab's)",
                field("src"),
                mac_text(mac),
                if pattern_of("src").is_none() {
                    ", as left unset"
                } else {
                    ""
                }
            ));
        }
        if let Some(mac) = first_bad(src, |v| v & GROUP_BIT != 0) {
            return Err(format!(
                "{}: the source MAC {} is a group (multicast/broadcast) address: a frame's \
                 source must be a unicast address (lowest bit of the first octet clear), e.g. \
                 02:00:00:00:00:01",
                field("src"),
                mac_text(mac)
            ));
        }
        let dst = pattern_of("dst").unwrap_or(&unset);
        if first_bad(dst, |v| v == 0).is_some() {
            warnings.push(Warning::ZeroDestinationMac {
                field: field("dst"),
                unset: pattern_of("dst").is_none(),
            });
        }
    }
    Ok(warnings)
}

/// The first value of `pattern` (as a 48-bit MAC) for which `bad` holds, among its first
/// [`CHECK_EACH_UP_TO`] values (MAC fields take value, values, increment and decrement,
/// which repeat after their count).
fn first_bad(pattern: &Pattern, bad: impl Fn(u128) -> bool) -> Option<u128> {
    (0..pattern.period().min(CHECK_EACH_UP_TO))
        .map(|j| pattern.value_at(j, MAC_BITS))
        .find(|&v| bad(v))
}

/// A MAC address written as six hex bytes separated by `:` or `-` (e.g. 02:00:00:00:00:01).
pub fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let value = crate::value::parse_mac(text.trim())?;
    Some(std::array::from_fn(|i| (value >> (8 * (5 - i))) as u8))
}

/// A MAC address as six lower-case hex bytes separated by `:`.
pub fn mac_string(mac: [u8; 6]) -> String {
    mac_text(mac_value(mac))
}

fn mac_value(mac: [u8; 6]) -> u128 {
    mac.iter().fold(0u128, |acc, &b| (acc << 8) | u128::from(b))
}

fn mac_text(value: u128) -> String {
    (0..6)
        .rev()
        .map(|i| format!("{:02x}", (value >> (8 * i)) & 0xff))
        .collect::<Vec<_>>()
        .join(":")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{load_scenario, NoFiles};

    fn scenario(ethernet: &str) -> Scenario {
        let text = format!(
            "[[ports]]\nname = \"p\"\nlocation = \"null\"\n\n[[flows]]\nname = \"f\"\ntx = \"p\"\n\
             [[flows.packet]]\nethernet = {ethernet}\n[[flows.packet]]\n\
             ipv4 = {{ src = \"198.18.0.1\", dst = \"198.18.1.1\" }}\n"
        );
        load_scenario(&text, "s.toml", &NoFiles).unwrap()
    }

    #[test]
    fn unset_macs_are_refused_and_warned_about() {
        let err = check_macs(&scenario("{}")).unwrap_err();
        assert!(
            err.contains("s.toml: flow `f`: packet[0].ethernet.src")
                && err.contains("00:00:00:00:00:00"),
            "{err}"
        );
        let ok = scenario("{ src = \"02:00:00:00:00:01\" }");
        let warnings = check_macs(&ok).unwrap();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].to_string().contains("ethernet.dst"),
            "{warnings:?}"
        );
    }

    #[test]
    fn group_sources_are_refused_in_every_pattern_form() {
        for src in [
            "\"ff:ff:ff:ff:ff:ff\"",
            "\"01:00:5e:00:00:01\"",
            "{ values = [\"02:00:00:00:00:01\", \"03:00:00:00:00:01\"] }",
            "{ increment = { start = \"02:00:00:00:00:fe\", step = \"01:00:00:00:00:00\", count = 3 } }",
        ] {
            let err = check_macs(&scenario(&format!("{{ src = {src}, dst = \"02:00:00:00:00:02\" }}")))
                .unwrap_err();
            assert!(err.contains("group (multicast/broadcast)"), "{src}: {err}");
        }
        let fine = scenario(
            "{ src = { increment = { start = \"02:00:00:00:00:00\", step = \"00:00:00:00:00:01\", count = 4096 } }, dst = \"02:00:00:00:00:02\" }",
        );
        assert_eq!(check_macs(&fine).unwrap(), Vec::<Warning>::new());
    }

    #[test]
    fn lab_addresses_fill_only_unset_fields() {
        let mut s = scenario("{ dst = \"02:00:00:00:00:09\" }");
        let flow = &mut s.flows[0];
        assert!(fill_unset_macs(
            flow,
            [2, 0, 0, 0, 0, 7],
            [2, 0, 0, 0, 0, 8]
        ));
        let header = flow.packet[0].header_at(0);
        let value = |name: &str| header.values[HeaderKind::Ethernet.field(name).unwrap().0];
        assert_eq!(value("src"), Some(0x0200_0000_0007));
        assert_eq!(value("dst"), Some(0x0200_0000_0009), "a set field is kept");
        assert!(
            !fill_unset_macs(flow, [2; 6], [2; 6]),
            "nothing left to fill"
        );
        assert_eq!(check_macs(&s).unwrap(), Vec::<Warning>::new());
    }
}
