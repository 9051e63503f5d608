//! The one-flow command-line shorthand.

use std::net::{Ipv4Addr, Ipv6Addr};

use strobe_model::quick::{build, QuickArgs, PORT_NAME};
use strobe_model::{FlowSpec, HeaderSpec, ModelError, Pattern, Resources, Scenario, SizeSpec};
use strobe_timing::{Dist, Duration, Pattern as Departures, Rate};
use strobe_wire::HeaderKind;

struct Files;

impl Resources for Files {
    fn read_text(&self, path: &str) -> Result<String, String> {
        match path {
            "gaps.csv" => Ok("100,1\n300,3\n".to_string()),
            _ => Err("no such file".to_string()),
        }
    }
    fn read_capture_timestamps(&self, path: &str) -> Result<Vec<u64>, String> {
        match path {
            "trace.pcap" => Ok(vec![5, 10, 40]),
            _ => Err("no such file".to_string()),
        }
    }
}

fn udp_args() -> QuickArgs {
    QuickArgs {
        port: "pcap:out.pcap".to_string(),
        udp: Some("198.18.0.1:1000-198.18.1.1:2000".to_string()),
        ..QuickArgs::default()
    }
}

fn ok(args: &QuickArgs) -> Scenario {
    build(args, &Files).unwrap_or_else(|e| panic!("{e}"))
}

fn flow(args: &QuickArgs) -> FlowSpec {
    ok(args).flows.remove(0)
}

fn err(args: &QuickArgs) -> ModelError {
    match build(args, &Files) {
        Ok(s) => panic!("expected an error, got {:?}", s.flows[0].packet),
        Err(e) => e,
    }
}

fn field<'a>(header: &'a HeaderSpec, name: &str) -> Option<&'a Pattern> {
    let (index, _) = header.kind.field(name).expect("field exists");
    header
        .fields
        .iter()
        .find(|f| f.field_index == index)
        .map(|f| &f.pattern)
}

fn kinds(flow: &FlowSpec) -> Vec<HeaderKind> {
    flow.packet.iter().map(|h| h.kind).collect()
}

fn v4(text: &str) -> u128 {
    u128::from(u32::from(text.parse::<Ipv4Addr>().unwrap()))
}

fn v6(text: &str) -> u128 {
    u128::from(text.parse::<Ipv6Addr>().unwrap())
}

#[test]
fn udp_flow_from_the_documented_command() {
    let args = QuickArgs {
        size: "128".to_string(),
        rate: "1mpps".to_string(),
        pattern: "poisson".to_string(),
        count: Some(1_000_000),
        vary: vec!["ip.src=inc:198.18.0.1/0.0.0.1/256".to_string()],
        seed: 42,
        ..udp_args()
    };
    let scenario = ok(&args);
    assert_eq!(scenario.source, "command line");
    assert!(scenario.warnings.is_empty());
    assert_eq!(scenario.ports.len(), 1);
    assert_eq!(scenario.ports[0].name, PORT_NAME);
    assert_eq!(scenario.ports[0].location.to_string(), "pcap:out.pcap");
    let flow = &scenario.flows[0];
    assert_eq!((flow.name.as_str(), flow.id), ("udp", 0));
    assert_eq!(flow.tx_port, PORT_NAME);
    assert_eq!(
        kinds(flow),
        [HeaderKind::Ethernet, HeaderKind::Ipv4, HeaderKind::Udp]
    );
    assert_eq!(
        field(&flow.packet[0], "src"),
        Some(&Pattern::Value(0x0200_0000_0001))
    );
    assert_eq!(
        field(&flow.packet[0], "dst"),
        Some(&Pattern::Value(0x0200_0000_0002))
    );
    assert_eq!(
        field(&flow.packet[1], "src"),
        Some(&Pattern::Increment {
            start: v4("198.18.0.1"),
            step: 1,
            count: 256
        })
    );
    assert_eq!(
        field(&flow.packet[1], "dst"),
        Some(&Pattern::Value(v4("198.18.1.1")))
    );
    assert_eq!(
        field(&flow.packet[2], "src_port"),
        Some(&Pattern::Value(1000))
    );
    assert_eq!(
        field(&flow.packet[2], "dst_port"),
        Some(&Pattern::Value(2000))
    );
    assert_eq!(flow.size, SizeSpec::Fixed(128));
    assert_eq!(flow.schedule.rate, Rate::Pps(1e6));
    assert_eq!(flow.schedule.pattern, Departures::Poisson);
    assert_eq!(flow.schedule.duration, Duration::Packets(1_000_000));
    assert_eq!(flow.schedule.seed, 42);
    assert_ne!(flow.size_seed, 42);
    assert!(flow.metrics.instrument && flow.metrics.enable);
}

#[test]
fn tcp_over_ipv6_in_brackets() {
    let flow = flow(&QuickArgs {
        udp: None,
        tcp: Some("[2001:2::1]:1000-[2001:2::2]:2000".to_string()),
        size: "128".to_string(),
        ..udp_args()
    });
    assert_eq!(flow.name, "tcp");
    assert_eq!(
        kinds(&flow),
        [HeaderKind::Ethernet, HeaderKind::Ipv6, HeaderKind::Tcp]
    );
    assert_eq!(
        field(&flow.packet[1], "src"),
        Some(&Pattern::Value(v6("2001:2::1")))
    );
    assert_eq!(
        field(&flow.packet[1], "dst"),
        Some(&Pattern::Value(v6("2001:2::2")))
    );
    assert_eq!(
        field(&flow.packet[2], "dst_port"),
        Some(&Pattern::Value(2000))
    );
}

#[test]
fn icmp_picks_the_version_from_the_addresses() {
    let icmp4 = flow(&QuickArgs {
        udp: None,
        icmp: Some("198.18.0.1-198.18.1.1".to_string()),
        ..udp_args()
    });
    assert_eq!(icmp4.name, "icmp");
    assert_eq!(
        kinds(&icmp4),
        [HeaderKind::Ethernet, HeaderKind::Ipv4, HeaderKind::Icmp]
    );
    assert!(icmp4.packet[2].fields.is_empty());
    let icmp6 = flow(&QuickArgs {
        udp: None,
        icmp: Some("[2001:2::1]-2001:2::2".to_string()),
        size: "128".to_string(),
        ..udp_args()
    });
    assert_eq!(
        kinds(&icmp6),
        [HeaderKind::Ethernet, HeaderKind::Ipv6, HeaderKind::Icmpv6]
    );
}

#[test]
fn vlan_tags_and_macs() {
    let flow = flow(&QuickArgs {
        vlan: vec![100, 200],
        src_mac: Some("02:aa:00:00:00:01".to_string()),
        dst_mac: Some("02-bb-00-00-00-02".to_string()),
        size: "128".to_string(),
        ..udp_args()
    });
    assert_eq!(
        kinds(&flow),
        [
            HeaderKind::Ethernet,
            HeaderKind::Vlan,
            HeaderKind::Vlan,
            HeaderKind::Ipv4,
            HeaderKind::Udp
        ]
    );
    assert_eq!(field(&flow.packet[1], "id"), Some(&Pattern::Value(100)));
    assert_eq!(field(&flow.packet[2], "id"), Some(&Pattern::Value(200)));
    assert_eq!(
        field(&flow.packet[0], "src"),
        Some(&Pattern::Value(0x02aa_0000_0001))
    );
    assert_eq!(
        field(&flow.packet[0], "dst"),
        Some(&Pattern::Value(0x02bb_0000_0002))
    );

    let three = err(&QuickArgs {
        vlan: vec![1, 2, 3],
        ..udp_args()
    });
    assert_eq!(three.path, "--vlan");
    assert!(three.message.contains("at most 2"), "{three}");
    let wide = err(&QuickArgs {
        vlan: vec![4096],
        ..udp_args()
    });
    assert!(wide.message.contains("0 to 4095"), "{wide}");
    let mac = err(&QuickArgs {
        src_mac: Some("02:00:00".to_string()),
        ..udp_args()
    });
    assert_eq!(mac.path, "--src-mac");
    assert!(mac.message.contains("02:00:00:00:00:01"), "{mac}");
}

#[test]
fn vary_forms() {
    let flow = flow(&QuickArgs {
        udp: None,
        tcp: Some("[2001:2::1]:1000-[2001:2::2]:2000".to_string()),
        size: "128".to_string(),
        vary: vec![
            "ip.dst=dec:2001:2::ff/::1/16".to_string(),
            "ipv6.flow_label=rand:1-1000/9".to_string(),
            "tcp.src_port=values:1,2,3".to_string(),
            "tcp.dst_port=0x50".to_string(),
            "eth.src=inc:02:00:00:00:00:01/0x100/4".to_string(),
        ],
        ..udp_args()
    });
    assert_eq!(
        field(&flow.packet[1], "dst"),
        Some(&Pattern::Decrement {
            start: v6("2001:2::ff"),
            step: 1,
            count: 16
        })
    );
    assert_eq!(
        field(&flow.packet[1], "flow_label"),
        Some(&Pattern::Random {
            min: 1,
            max: 1000,
            seed: 9,
            count: 0
        })
    );
    assert_eq!(
        field(&flow.packet[2], "src_port"),
        Some(&Pattern::Values(vec![1, 2, 3]))
    );
    assert_eq!(
        field(&flow.packet[2], "dst_port"),
        Some(&Pattern::Value(80))
    );
    assert_eq!(
        field(&flow.packet[0], "src"),
        Some(&Pattern::Increment {
            start: 0x0200_0000_0001,
            step: 0x100,
            count: 4
        })
    );
    // Packet 2 of the flow carries the third values of each pattern.
    let stack = flow.stack_at(2);
    assert_eq!(stack[1].get("dst"), Some(v6("2001:2::fd")));
    assert_eq!(stack[2].get("src_port"), Some(3));
    // A second --vary of the same field is refused, both named (it used to replace the
    // first silently).
    let e = err(&QuickArgs {
        vary: vec![
            "ip.src=values:198.18.0.1,198.18.0.2".to_string(),
            "ipv4.src=inc:198.18.0.9/0.0.0.1/2".to_string(),
        ],
        ..udp_args()
    })
    .to_string();
    assert!(e.contains("`ip.src=values:198.18.0.1,198.18.0.2` and `ipv4.src=inc:198.18.0.9/0.0.0.1/2` both vary ip.src"), "{e}");
}

#[test]
fn vary_errors_name_the_flag_and_the_accepted_forms() {
    let with = |vary: &str| {
        err(&QuickArgs {
            vary: vec![vary.to_string()],
            ..udp_args()
        })
    };
    let layer = with("gre.key=1");
    assert_eq!(
        (layer.source.as_str(), layer.path.as_str()),
        ("command line", "--vary")
    );
    assert!(layer.message.contains("unknown layer `gre`"), "{layer}");
    assert!(layer.message.contains("eth, ethernet, vlan, ip"), "{layer}");
    assert!(
        layer
            .to_string()
            .starts_with("command line: --vary: `gre.key=1`:"),
        "{layer}"
    );
    let missing = with("tcp.src_port=1");
    assert!(missing.message.contains("no tcp header"), "{missing}");
    assert!(missing.message.contains("ethernet, ipv4, udp"), "{missing}");
    let field = with("udp.port=1");
    assert!(
        field
            .message
            .contains("src_port, dst_port, length, checksum"),
        "{field}"
    );
    let form = with("ip.src");
    assert!(form.message.contains("LAYER.FIELD=SPEC"), "{form}");
    let value = with("ip.src=inc:198.18.0.300/0.0.0.1/2");
    assert!(
        value
            .message
            .contains("invalid IPv4 address `198.18.0.300`"),
        "{value}"
    );
    let random_mac = with("eth.src=rand:1-5");
    assert!(
        random_mac.message.contains("random is not available"),
        "{random_mac}"
    );
    let reversed = with("udp.src_port=rand:9-1");
    assert!(reversed.message.contains("greater than max"), "{reversed}");
    let zero = with("udp.src_port=inc:1/1/0");
    assert!(zero.message.contains("at least 1"), "{zero}");
}

#[test]
fn size_forms() {
    let size = |s: &str| {
        flow(&QuickArgs {
            size: s.to_string(),
            ..udp_args()
        })
        .size
    };
    assert_eq!(size("imix"), SizeSpec::imix());
    assert_eq!(
        size("64-1518"),
        SizeSpec::Increment {
            start: 64,
            end: 1518,
            step: 1
        }
    );
    assert_eq!(
        size("64-1518/64"),
        SizeSpec::Increment {
            start: 64,
            end: 1518,
            step: 64
        }
    );
    assert_eq!(
        size("random:64-1518"),
        SizeSpec::Random { min: 64, max: 1518 }
    );
    let bad = err(&QuickArgs {
        size: "big".to_string(),
        ..udp_args()
    });
    assert_eq!(bad.path, "--size");
    assert!(bad.message.contains("64-1518/64 (step)"), "{bad}");
    let reversed = err(&QuickArgs {
        size: "1518-64".to_string(),
        ..udp_args()
    });
    assert!(
        reversed.message.contains("start 1518 is above end 64"),
        "{reversed}"
    );
}

#[test]
fn pattern_forms() {
    let pattern = |p: &str| {
        flow(&QuickArgs {
            pattern: p.to_string(),
            ..udp_args()
        })
        .schedule
        .pattern
    };
    assert_eq!(pattern("cbr"), Departures::Cbr);
    assert_eq!(
        pattern("burst:32/10us"),
        Departures::Burst {
            packets: 32,
            intra_gap_ns: None,
            inter_burst_gap_ns: 10_000
        }
    );
    assert_eq!(
        pattern("on_off:1ms/9ms"),
        Departures::OnOff {
            on_ns: 1_000_000,
            off_ns: 9_000_000
        }
    );
    assert!(matches!(
        pattern("empirical:gaps.csv"),
        Departures::Distribution(Dist::Empirical(_))
    ));
    assert_eq!(
        pattern("replay:trace.pcap"),
        Departures::Replay {
            timestamps_ns: vec![5, 10, 40],
            speed: 1.0
        }
    );
    for bad in [
        "sometimes",
        "burst:32",
        "on_off:1ms/forever",
        "replay:missing.pcap",
    ] {
        let e = err(&QuickArgs {
            pattern: bad.to_string(),
            ..udp_args()
        });
        assert_eq!(e.path, "--pattern", "{bad}");
    }
    let unknown = err(&QuickArgs {
        pattern: "sometimes".to_string(),
        ..udp_args()
    });
    assert!(unknown.message.contains("burst:32/10us"), "{unknown}");
}

#[test]
fn rate_duration_and_trailer_options() {
    let pct = flow(&QuickArgs {
        rate: "10%".to_string(),
        duration: Some("1.5s".to_string()),
        no_trailer: true,
        ..udp_args()
    });
    assert_eq!(pct.schedule.rate, Rate::L1BitsPerSec(1e9));
    assert_eq!(pct.schedule.duration, Duration::Seconds(1.5));
    assert!(!pct.metrics.instrument && pct.metrics.latency.is_none());

    let rate = err(&QuickArgs {
        rate: "lots".to_string(),
        ..udp_args()
    });
    assert_eq!(rate.path, "--rate");
    assert!(rate.message.contains("invalid rate `lots`"), "{rate}");
    let both = err(&QuickArgs {
        count: Some(5),
        duration: Some("1s".to_string()),
        ..udp_args()
    });
    assert_eq!(both.path, "--duration");
    assert!(both.message.contains("not both"), "{both}");
    let zero = err(&QuickArgs {
        count: Some(0),
        ..udp_args()
    });
    assert_eq!(zero.path, "--count");

    // IPv6/UDP at 80 bytes has no room for the trailer: switched off with a warning.
    let scenario = ok(&QuickArgs {
        udp: Some("[::1]:1-[::2]:2".to_string()),
        size: "80".to_string(),
        ..udp_args()
    });
    assert!(!scenario.flows[0].metrics.instrument);
    assert_eq!(scenario.warnings.len(), 1);
    assert!(
        scenario.warnings[0].to_string().contains("at least 82"),
        "{:?}",
        scenario.warnings
    );
}

#[test]
fn endpoint_errors() {
    let bad = err(&QuickArgs {
        udp: Some("198.18.0.1-198.18.1.1".to_string()),
        ..udp_args()
    });
    assert_eq!(bad.path, "--udp");
    assert!(bad.message.contains("SRC_IP:PORT-DST_IP:PORT"), "{bad}");
    let mixed = err(&QuickArgs {
        udp: Some("198.18.0.1:1-[::2]:2".to_string()),
        ..udp_args()
    });
    assert!(mixed.message.contains("mixes IPv4 and IPv6"), "{mixed}");
    let two = err(&QuickArgs {
        tcp: Some("198.18.0.1:1-198.18.0.2:2".to_string()),
        ..udp_args()
    });
    assert_eq!(two.path, "--tcp");
    assert!(
        two.message.contains("choose one of --udp, --tcp, --icmp"),
        "{two}"
    );
    let icmp = err(&QuickArgs {
        udp: None,
        icmp: Some("198.18.0.1".to_string()),
        ..udp_args()
    });
    assert_eq!(icmp.path, "--icmp");
    let port = err(&QuickArgs {
        port: " ".to_string(),
        ..udp_args()
    });
    assert_eq!(port.path, "--port");
    // Parsed where it enters: an unknown form names the flag and what is accepted; a lab
    // end waits for the run-control layer.
    let port = err(&QuickArgs {
        port: "carrier-pigeon:coop".to_string(),
        ..udp_args()
    });
    assert_eq!(port.path, "--port");
    assert!(
        port.message
            .starts_with("unknown port `carrier-pigeon:coop`: accepted forms are"),
        "{port}"
    );
    let lab = ok(&QuickArgs {
        port: "lab:tx@afxdp".to_string(),
        ..udp_args()
    });
    assert_eq!(lab.ports[0].location.to_string(), "lab:tx@afxdp");
    assert!(lab.ports[0].location.resolved().is_none());
}

#[test]
fn defaults_build_a_plain_ethernet_flow() {
    let scenario = ok(&QuickArgs::default());
    let flow = &scenario.flows[0];
    assert_eq!(flow.name, "ethernet");
    assert_eq!(kinds(flow), [HeaderKind::Ethernet]);
    assert_eq!(flow.size, SizeSpec::Fixed(64));
    assert_eq!(flow.schedule.rate, Rate::Pps(1000.0));
    assert_eq!(flow.schedule.duration, Duration::Continuous);
    assert_eq!(
        scenario.ports[0].location,
        strobe_model::PortLocation::Direct(strobe_model::Location::Null)
    );
}

#[test]
fn rates_above_the_line_rate_are_rejected_unless_unbounded() {
    let fast = QuickArgs {
        rate: "20mpps".to_string(),
        ..udp_args()
    };
    let e = err(&fast);
    assert_eq!(e.source, "command line");
    assert_eq!((e.line, e.column), (None, None));
    assert_eq!(e.path, "--rate");
    assert!(
        e.to_string().starts_with(
            "command line: --rate: rate 20 Mpps of 64-byte frames needs 13.44 Gbit/s at layer 1 (64 + 20 bytes per frame), above the command-line port's line rate of 10 Gbit/s — lower the rate"
        ),
        "{e}"
    );
    assert!(e.message.contains("--rate max"), "{e}");

    let bits = err(&QuickArgs {
        rate: "40gbps".to_string(),
        ..udp_args()
    });
    assert_eq!(bits.path, "--rate");
    assert!(
        bits.message
            .starts_with("rate 40 Gbit/s (layer 1) is above the command-line port's line rate"),
        "{bits}"
    );

    // On/off periods shorter than a packet gap still send one packet each: 1 pps turns
    // into 500 Mpps.
    let on_off = err(&QuickArgs {
        rate: "1".to_string(),
        pattern: "on_off:1ns/1ns".to_string(),
        ..udp_args()
    });
    assert_eq!(on_off.path, "--rate");
    assert!(
        on_off.message.contains("flow `udp` needs") && on_off.message.contains("on average"),
        "{on_off}"
    );

    // What `--rate max` becomes: a placeholder rate for an unpaced run.
    let unpaced = QuickArgs {
        rate: "1000000000000".to_string(),
        unbounded: true,
        ..udp_args()
    };
    assert_eq!(flow(&unpaced).schedule.rate, Rate::Pps(1e12));
    assert_eq!(
        err(&QuickArgs {
            unbounded: false,
            ..unpaced
        })
        .path,
        "--rate"
    );

    // Exactly the line rate is fine.
    assert_eq!(
        flow(&QuickArgs {
            rate: "10gbps".to_string(),
            ..udp_args()
        })
        .schedule
        .rate,
        Rate::L1BitsPerSec(1e10)
    );
    assert!(!QuickArgs::default().unbounded);
}

#[test]
fn a_train_pattern_is_a_convoy_at_line_rate() {
    let f = flow(&QuickArgs {
        pattern: "train:100x60/1ms".into(),
        ..udp_args()
    });
    assert_eq!(
        f.schedule.duration,
        strobe_timing::Duration::Bursts {
            bursts: 100,
            packets: 60,
            inter_burst_gap_ns: 1_000_000
        }
    );
    assert_eq!(
        f.schedule.rate,
        strobe_timing::Rate::L1BitsPerSec(strobe_model::DEFAULT_PORT_SPEED_BPS as f64)
    );
    for (pattern, needle) in [
        ("train:100/1ms", "invalid train counts"),
        ("train:0x60/1ms", "number of trains `0`"),
        ("train:5x60", "invalid train"),
        ("train:5x60/soon", "soon"),
    ] {
        let e = err(&QuickArgs {
            pattern: pattern.into(),
            ..udp_args()
        })
        .to_string();
        assert!(
            e.contains(needle) && e.contains("--pattern"),
            "{pattern}: {e}"
        );
    }
    let e = err(&QuickArgs {
        pattern: "train:5x60/1ms".into(),
        count: Some(10),
        ..udp_args()
    })
    .to_string();
    assert!(e.contains("leave out --count"), "{e}");
}
