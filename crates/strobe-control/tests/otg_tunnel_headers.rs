//! OTG configs with the tunnel and control headers, as snappi sends them: every header read
//! (GTPv1's nested extension headers become headers of the stack), and what cannot be built
//! refused with the path of the field.

use serde_json::{json, Value};
use strobe_control::otg::scenario_from_otg;
use strobe_wire::HeaderKind;

fn config(packet: Value) -> Value {
    json!({
        "ports": [{"name": "a", "location": "null"}, {"name": "b", "location": "null"}],
        "flows": [{
            "name": "f",
            "tx_rx": {"choice": "port", "port": {"tx_name": "a", "rx_names": ["b"]}},
            "packet": packet,
            "size": {"choice": "fixed", "fixed": 256},
        }]
    })
}

fn seed() -> Value {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fuzz/seeds/otg-tunnels.json"
    ))
    .unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn every_tunnel_header_of_the_seed_config_is_read() {
    let read = scenario_from_otg(&seed(), &[]).unwrap();
    let kinds = |name: &str| -> Vec<HeaderKind> {
        let flow = read.scenario.flows.iter().find(|f| f.name == name).unwrap();
        flow.packet.iter().map(|h| h.kind).collect()
    };
    use HeaderKind::*;
    assert_eq!(kinds("gre"), [Ethernet, Ipv4, Gre, Ipv4, Udp]);
    assert_eq!(kinds("mpls"), [Ethernet, Mpls, Mpls, Ipv4, Udp]);
    assert_eq!(
        kinds("gtpv1"),
        [Ethernet, Ipv4, Udp, Gtpv1, GtpExtension, Ipv4, Udp]
    );
    assert_eq!(kinds("gtpv2"), [Ethernet, Ipv4, Udp, Gtpv2]);
    assert_eq!(kinds("pause"), [PfcPause]);
    assert_eq!(kinds("global-pause"), [EthernetPause]);
    assert_eq!(kinds("igmp"), [Ethernet, Ipv4, Igmpv1]);
    assert_eq!(kinds("ppp"), [Ethernet, Ipv4, Gre, Ppp, Ipv6]);

    // The extension header's fields land in its own header.
    let gtp = read
        .scenario
        .flows
        .iter()
        .find(|f| f.name == "gtpv1")
        .unwrap();
    let ext = gtp.packet[4].header_at(0);
    assert_eq!(ext.get("contents"), Some(0x1009_0000_0000));
    assert_eq!(ext.get("extension_length"), Some(2));
}

fn first_error(packet: Value) -> String {
    let errors = scenario_from_otg(&config(packet), &[]).unwrap_err().0;
    errors[0].clone()
}

#[test]
fn what_cannot_be_built_is_refused_by_path() {
    let eth = json!({"choice": "ethernet", "ethernet": {}});
    let ip = json!({"choice": "ipv4", "ipv4": {}});

    // A flag that decides the header's length cannot vary from packet to packet.
    let gre = json!({"choice": "gre", "gre": {"checksum_present":
        {"choice": "values", "values": [0, 1]}}});
    let e = first_error(json!([eth, ip, gre]));
    assert!(e.contains("packet[2].gre.checksum_present"), "{e}");
    assert!(e.contains("one value"), "{e}");

    // Out of range for the field's width.
    let mpls =
        json!({"choice": "mpls", "mpls": {"label": {"choice": "value", "value": 1_048_576}}});
    let e = first_error(json!([eth, mpls]));
    assert!(e.contains("packet[1].mpls.label"), "{e}");
    assert!(e.contains("0 to 1048575"), "{e}");

    // An unknown field of a nested extension header.
    let gtp = json!({"choice": "gtpv1", "gtpv1": {"next_extension_header_type": {"choice": "value", "value": 133},
        "extension_headers": [{"length": {"choice": "value", "value": 2}}]}});
    let e = first_error(json!([eth, ip, {"choice": "udp", "udp": {}}, gtp]));
    assert!(e.contains("extension_headers[0]"), "{e}");
    assert!(e.contains("length"), "{e}");

    // Extension headers under a GTPv1 header that says there are none.
    let gtp = json!({"choice": "gtpv1", "gtpv1": {"e_flag": {"choice": "value", "value": 0},
        "extension_headers": [{}]}});
    let e = first_error(json!([eth, ip, {"choice": "udp", "udp": {}}, gtp]));
    assert!(e.contains("e_flag is 0"), "{e}");

    // An extension header is not a header of its own in OTG.
    let e = first_error(json!([eth, {"choice": "gtp_extension", "gtp_extension": {}}]));
    assert!(e.contains("gtp_extension"), "{e}");
}
