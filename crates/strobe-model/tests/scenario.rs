//! Loading scenario files: where every value lands, and what errors say.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use strobe_model::{
    default_size_seed, default_timing_seed, load_scenario, FlowSpec, HeaderSpec, LabPort, LabSide,
    LatencyMode, Location, ModelError, Pattern, PortLocation, Resources, Scenario, SizeSpec,
};
use strobe_timing::{Dist, Duration, Pattern as Departures, Rate, RateProfile};
use strobe_wire::{HeaderKind, Payload};

#[derive(Default)]
struct Files {
    text: HashMap<String, String>,
    captures: HashMap<String, Vec<u64>>,
}

impl Resources for Files {
    fn read_text(&self, path: &str) -> Result<String, String> {
        self.text
            .get(path)
            .cloned()
            .ok_or_else(|| "no such file".to_string())
    }
    fn read_capture_timestamps(&self, path: &str) -> Result<Vec<u64>, String> {
        self.captures
            .get(path)
            .cloned()
            .ok_or_else(|| "no such file".to_string())
    }
}

const PORTS: &str = r#"
[[ports]]
name = "tx"
location = "null"

[[ports]]
name = "rx"
location = "null"
"#;

fn load(text: &str) -> Result<Scenario, ModelError> {
    load_scenario(text, "scenario.toml", &Files::default())
}

/// A one-flow scenario: `flow` holds keys of the [[flows]] table, `packet` the headers.
fn one_flow(flow: &str, packet: &str) -> String {
    format!("{PORTS}\n[[flows]]\nname = \"f\"\ntx = \"tx\"\n{flow}\n{packet}")
}

const UDP4: &str = r#"
[[flows.packet]]
ethernet = {}
[[flows.packet]]
ipv4 = { src = "198.18.0.1", dst = "198.18.1.1" }
[[flows.packet]]
udp = { src_port = 1000, dst_port = 2000 }
"#;

const UDP6: &str = r#"
[[flows.packet]]
ethernet = {}
[[flows.packet]]
ipv6 = { src = "2001:db8::1", dst = "2001:db8::2" }
[[flows.packet]]
udp = {}
"#;

fn load_flow(flow: &str, packet: &str) -> FlowSpec {
    let scenario = load(&one_flow(flow, packet)).unwrap_or_else(|e| panic!("{e}"));
    scenario.flows.into_iter().next().expect("one flow")
}

/// The line (1-based) of the first occurrence of `needle` in `text`.
fn line_of(text: &str, needle: &str) -> usize {
    let offset = text.find(needle).expect("needle in text");
    text[..offset].matches('\n').count() + 1
}

fn field<'a>(header: &'a HeaderSpec, name: &str) -> Option<&'a Pattern> {
    let (index, _) = header.kind.field(name).expect("field exists");
    header
        .fields
        .iter()
        .find(|f| f.field_index == index)
        .map(|f| &f.pattern)
}

fn ip(text: &str) -> u128 {
    u128::from(u32::from(text.parse::<Ipv4Addr>().unwrap()))
}

/// The full example of SCENARIO.md, so the documentation cannot drift from the loader.
fn documented_example() -> String {
    let doc = include_str!("../SCENARIO.md");
    let section = &doc[doc.find("## Full example").expect("example section")..];
    let start = section.find("```toml\n").expect("toml block") + "```toml\n".len();
    let end = section[start..].find("```").expect("block end");
    section[start..start + end].to_string()
}

#[test]
fn documented_example_lands_every_value() {
    let scenario = load(&documented_example()).unwrap_or_else(|e| panic!("{e}"));
    assert!(scenario.warnings.is_empty(), "{:?}", scenario.warnings);
    assert_eq!(scenario.source, "scenario.toml");
    assert_eq!(scenario.ports.len(), 2);
    assert_eq!(scenario.ports[0].name, "tx");
    // A lab end stays symbolic until the run-control layer finds the lab.
    assert_eq!(
        scenario.ports[0].location,
        PortLocation::Lab(LabPort {
            side: LabSide::Tx,
            backend: None
        })
    );
    assert_eq!(scenario.ports[0].location.to_string(), "lab:tx");
    assert_eq!(scenario.ports[0].speed_bps, 1_000_000_000);
    assert_eq!(scenario.ports[1].speed_bps, 10_000_000_000);

    let flow = &scenario.flows[0];
    assert_eq!((flow.name.as_str(), flow.id), ("udp-poisson", 0));
    assert_eq!(flow.tx_port, "tx");
    assert_eq!(flow.rx_ports, ["rx"]);
    assert_eq!(flow.size, SizeSpec::Fixed(128));
    assert_eq!(flow.size_seed, default_size_seed(0));
    assert_eq!(flow.payload, Payload::IncrementByte);
    assert_eq!(flow.schedule.rate, Rate::Pps(50_000.0));
    assert_eq!(flow.schedule.duration, Duration::Packets(50_000));
    assert_eq!(flow.schedule.start_delay_ns, 10_000);
    assert_eq!(flow.schedule.pattern, Departures::Poisson);
    assert_eq!(flow.schedule.seed, 7);
    assert!(flow.metrics.enable && flow.metrics.loss && flow.metrics.timestamps);
    assert_eq!(flow.metrics.latency, Some(LatencyMode::StoreForward));
    assert!(flow.metrics.instrument);

    let kinds: Vec<HeaderKind> = flow.packet.iter().map(|h| h.kind).collect();
    assert_eq!(
        kinds,
        [HeaderKind::Ethernet, HeaderKind::Ipv4, HeaderKind::Udp]
    );
    let [eth, ipv4, udp] = &flow.packet[..] else {
        unreachable!()
    };
    assert_eq!(field(eth, "src"), Some(&Pattern::Value(0x0253_5400_0001)));
    assert_eq!(field(eth, "dst"), Some(&Pattern::Value(0x0253_5400_0010)));
    assert_eq!(eth.fields.len(), 2);
    assert_eq!(
        field(ipv4, "src"),
        Some(&Pattern::Increment {
            start: ip("198.18.0.1"),
            step: 1,
            count: 200
        })
    );
    assert_eq!(field(ipv4, "dst"), Some(&Pattern::Value(ip("198.18.1.1"))));
    assert_eq!(field(ipv4, "time_to_live"), Some(&Pattern::Value(32)));
    assert_eq!(ipv4.fields.len(), 3);
    assert_eq!(
        field(udp, "src_port"),
        Some(&Pattern::Values(vec![1000, 1001]))
    );
    assert_eq!(
        field(udp, "dst_port"),
        Some(&Pattern::Random {
            min: 1024,
            max: 65535,
            seed: 1,
            count: 0
        })
    );

    let v6 = &scenario.flows[1];
    assert_eq!((v6.name.as_str(), v6.id), ("v6-tcp-steps", 1));
    assert_eq!(v6.rx_ports, ["rx"]);
    assert_eq!(
        v6.size,
        SizeSpec::WeightPairs(vec![(128, 7), (570, 4), (1518, 1)])
    );
    assert_eq!(v6.schedule.rate, Rate::L1BitsPerSec(2e7));
    assert_eq!(v6.schedule.duration, Duration::Seconds(3.0));
    assert_eq!(v6.schedule.seed, default_timing_seed(1));
    assert_eq!(
        v6.schedule.profile,
        Some(RateProfile::Steps(vec![
            strobe_timing::RateStep {
                at_ns: 1_000_000_000,
                rate: Rate::L1BitsPerSec(4e7)
            },
            strobe_timing::RateStep {
                at_ns: 2_000_000_000,
                rate: Rate::Pps(10_000.0)
            },
        ]))
    );
    assert!(v6.packet[0].fields.is_empty(), "ethernet = {{}}");
    assert_eq!(
        field(&v6.packet[1], "src"),
        Some(&Pattern::Value(0x2001_0002_u128 << 96 | 1))
    );
    assert!(matches!(
        field(&v6.packet[1], "flow_label"),
        Some(Pattern::Random {
            min: 0,
            max: 1_048_575,
            ..
        })
    ));
    assert_eq!(field(&v6.packet[2], "ctl_syn"), Some(&Pattern::Value(1)));

    let tagged = &scenario.flows[2];
    assert_eq!(tagged.name, "tagged");
    assert!(tagged.rx_ports.is_empty());
    let vlan = &tagged.packet[1];
    assert_eq!(field(vlan, "id"), Some(&Pattern::Value(100)));
    assert_eq!(field(vlan, "priority"), Some(&Pattern::Value(5)));
}

#[test]
fn frames_built_from_the_example_carry_the_patterns() {
    let scenario = load(&documented_example()).unwrap();
    let flow = &scenario.flows[0];
    for j in [0u64, 1, 3, 199, 200] {
        let built = strobe_wire::build(&flow.stack_at(j), 124, &flow.payload).unwrap();
        let packet = etherparse::SlicedPacket::from_ethernet(&built.bytes).unwrap();
        let Some(etherparse::NetSlice::Ipv4(ipv4)) = packet.net else {
            panic!("not IPv4")
        };
        let header = ipv4.header();
        let expected_src = Ipv4Addr::from(0xC612_0001 + (j % 200) as u32);
        assert_eq!(header.source_addr(), expected_src, "packet {j}");
        assert_eq!(header.destination_addr(), Ipv4Addr::new(198, 18, 1, 1));
        assert_eq!(header.ttl(), 32);
        let Some(etherparse::TransportSlice::Udp(udp)) = packet.transport else {
            panic!("not UDP")
        };
        assert_eq!(udp.source_port(), [1000, 1001][(j % 2) as usize]);
        assert!(udp.destination_port() >= 1024);
    }
}

#[test]
fn otg_choice_form_and_shorthand_agree() {
    let otg = load_flow(
        r#"
size = { choice = "increment", increment = { start = 64, end = 128, step = 4 } }
rate = { choice = "kbps", kbps = 5000 }
duration = { choice = "fixed_packets", fixed_packets = { packets = 10, delay = { choice = "nanoseconds", nanoseconds = 40 } } }
payload = { choice = "fixed", fixed = { pattern = "0a0b", repeat = false } }
"#,
        r#"
[[flows.packet]]
choice = "ethernet"
ethernet = { src = { choice = "value", value = "02:00:00:00:00:09" } }
[[flows.packet]]
choice = "ipv4"
ipv4 = { src = { choice = "increment", increment = { start = "10.0.0.1", step = "0.0.1.0", count = 3 } }, dst = { choice = "values", values = ["10.0.0.9", "10.0.0.8"] }, header_checksum = { choice = "custom", custom = 4660 } }
[[flows.packet]]
udp = { src_port = { choice = "random", random = { min = 5, max = 9, seed = 3, count = 4 } }, dst_port = { choice = "decrement", decrement = { start = 100, step = 2, count = 5 } } }
"#,
    );
    let short = load_flow(
        r#"
size = { increment = { start = 64, end = 128, step = 4 } }
rate = { kbps = 5000 }
duration = { fixed_packets = { packets = 10, delay = { nanoseconds = 40 } } }
payload = { fixed = { pattern = "0a0b", repeat = false } }
"#,
        r#"
[[flows.packet]]
ethernet = { src = "02:00:00:00:00:09" }
[[flows.packet]]
ipv4 = { src = { increment = { start = "10.0.0.1", step = 256, count = 3 } }, dst = ["10.0.0.9", "10.0.0.8"], header_checksum = "0x1234" }
[[flows.packet]]
udp = { src_port = { random = { min = 5, max = 9, seed = 3, count = 4 } }, dst_port = { decrement = { start = 100, step = 2, count = 5 } } }
"#,
    );
    assert_eq!(format!("{:?}", otg.packet), format!("{:?}", short.packet));
    assert_eq!(otg.size, short.size);
    assert_eq!(otg.schedule, short.schedule);
    assert_eq!(otg.payload, short.payload);
    assert_eq!(otg.schedule.rate, Rate::L1BitsPerSec(5e6));
    assert_eq!(otg.schedule.start_delay_ns, 40);
    assert_eq!(
        otg.payload,
        Payload::Fixed {
            pattern: vec![0x0a, 0x0b],
            repeat: false
        }
    );
    assert_eq!(
        field(&otg.packet[1], "header_checksum"),
        Some(&Pattern::Value(0x1234))
    );
    assert_eq!(
        field(&otg.packet[1], "src"),
        Some(&Pattern::Increment {
            start: ip("10.0.0.1"),
            step: 256,
            count: 3
        })
    );
}

#[test]
fn shorthands_for_endpoints_size_rate_and_duration() {
    let otg_text = format!(
        "{PORTS}\n[[flows]]\nname = \"f\"\ntx_rx = {{ port = {{ tx_name = \"tx\", rx_name = \"rx\" }} }}\n{UDP4}"
    );
    let otg = load(&otg_text).unwrap().flows.remove(0);
    let text = format!(
        "{PORTS}\n[[flows]]\nname = \"f\"\ntx = \"tx\"\nrx = \"rx\"\nsize = \"imix\"\nrate = \"1.5mpps\"\nduration = \"2s\"\n{UDP4}"
    );
    let short = load(&text).unwrap().flows.remove(0);
    assert_eq!(
        (otg.tx_port.as_str(), otg.rx_ports.clone()),
        ("tx", vec!["rx".to_string()])
    );
    assert_eq!((short.tx_port, short.rx_ports), (otg.tx_port, otg.rx_ports));
    assert_eq!(short.size, SizeSpec::imix());
    assert_eq!(short.schedule.rate, Rate::Pps(1_500_000.0));
    assert_eq!(short.schedule.duration, Duration::Seconds(2.0));
    assert_eq!(
        load_flow("duration = 500", UDP4).schedule.duration,
        Duration::Packets(500)
    );
    assert_eq!(load_flow("size = 200", UDP4).size, SizeSpec::Fixed(200));
    assert_eq!(
        load_flow("size = { weight_pairs = { predefined = \"imix\" } }", UDP4).size,
        SizeSpec::imix()
    );
}

#[test]
fn defaults_follow_otg_and_strobe() {
    let flow = load_flow("", UDP4);
    assert_eq!(flow.size, SizeSpec::Fixed(64));
    assert_eq!(flow.schedule.rate, Rate::Pps(1000.0));
    assert_eq!(flow.schedule.duration, Duration::Continuous);
    assert_eq!(flow.schedule.pattern, Departures::Cbr);
    assert_eq!(flow.schedule.seed, default_timing_seed(0));
    assert_eq!(flow.payload, Payload::default());
    assert!(flow.rx_ports.is_empty());
    // strobe measures by default: 42 bytes of headers + 16 + 4 fit in 64.
    assert!(flow.metrics.enable && flow.metrics.instrument && flow.metrics.loss);
    assert_eq!(flow.metrics.latency, Some(LatencyMode::StoreForward));
    // Unset fields stay unset (computed or OTG default at build time).
    assert!(field(&flow.packet[1], "time_to_live").is_none());
    assert_ne!(default_timing_seed(0), default_timing_seed(1));
    assert_ne!(default_timing_seed(3), default_size_seed(3));
}

#[test]
fn percentage_and_byte_times_use_the_port_speed() {
    let text = r#"
[[ports]]
name = "slow"
location = "null"
speed = "1gbps"

[[flows]]
name = "f"
tx = "slow"
rate = { percentage = 50 }
duration = { burst = { bursts = 3, packets = 8, inter_burst_gap = { bytes = 1250 } } }

[[flows.packet]]
ethernet = {}
"#;
    let flow = load(text).unwrap().flows.remove(0);
    assert_eq!(flow.schedule.rate, Rate::L1BitsPerSec(5e8));
    // 1250 bytes at 1 Gbit/s = 10 µs.
    assert_eq!(
        flow.schedule.duration,
        Duration::Bursts {
            bursts: 3,
            packets: 8,
            inter_burst_gap_ns: 10_000
        }
    );
    let delayed = load(&text.replace(
        "duration = { burst = { bursts = 3, packets = 8, inter_burst_gap = { bytes = 1250 } } }",
        "duration = { continuous = { delay = { bytes = 125 } } }",
    ))
    .unwrap();
    assert_eq!(delayed.flows[0].schedule.start_delay_ns, 1000);
    let speed_as_int = load(&text.replace("\"1gbps\"", "2000000000")).unwrap();
    assert_eq!(speed_as_int.ports[0].speed_bps, 2_000_000_000);
    assert_eq!(speed_as_int.flows[0].schedule.rate, Rate::L1BitsPerSec(1e9));
}

#[test]
fn timing_patterns_and_profiles() {
    let burst = load_flow(
        "timing = { pattern = \"burst\", packets = 32, inter_burst_gap = \"10us\", intra_gap = \"100ns\" }",
        UDP4,
    );
    assert_eq!(
        burst.schedule.pattern,
        Departures::Burst {
            packets: 32,
            intra_gap_ns: Some(100),
            inter_burst_gap_ns: 10_000
        }
    );
    let on_off = load_flow(
        "timing = { pattern = \"on_off\", on = \"1ms\", off = \"9ms\" }",
        UDP4,
    );
    assert_eq!(
        on_off.schedule.pattern,
        Departures::OnOff {
            on_ns: 1_000_000,
            off_ns: 9_000_000
        }
    );
    let pareto = load_flow(
        "timing = { pattern = \"pareto\", scale = \"1us\", shape = 1.5 }",
        UDP4,
    );
    assert_eq!(
        pareto.schedule.pattern,
        Departures::Distribution(Dist::Pareto {
            scale_ns: 1000.0,
            shape: 1.5
        })
    );
    let ramp = load_flow(
        "timing = { pattern = \"poisson\", seed = 9, ramp = { from = \"100kpps\", to = \"1mpps\", over = \"10s\", steps = 5 } }",
        UDP4,
    );
    assert_eq!(ramp.schedule.seed, 9);
    assert_eq!(
        ramp.schedule.profile,
        Some(RateProfile::Ramp {
            from: Rate::Pps(1e5),
            to: Rate::Pps(1e6),
            over_ns: 10_000_000_000,
            steps: 5
        })
    );
    assert_eq!(
        load_flow("timing = \"poisson\"", UDP4).schedule.pattern,
        Departures::Poisson
    );
}

#[test]
fn files_are_read_through_resources() {
    let mut files = Files::default();
    files
        .text
        .insert("gaps.csv".into(), "1000,1\n3000,1\n".into());
    files
        .captures
        .insert("trace.pcap".into(), vec![0, 100, 250]);
    let empirical = one_flow(
        "timing = { pattern = \"empirical\", file = \"gaps.csv\" }",
        UDP4,
    );
    let flow = load_scenario(&empirical, "s.toml", &files)
        .unwrap()
        .flows
        .remove(0);
    assert!(matches!(
        flow.schedule.pattern,
        Departures::Distribution(Dist::Empirical(ref t)) if t.len() == 2
    ));
    let replay = one_flow(
        "timing = { pattern = \"replay\", file = \"trace.pcap\", speed = 2.0 }",
        UDP4,
    );
    let flow = load_scenario(&replay, "s.toml", &files)
        .unwrap()
        .flows
        .remove(0);
    assert_eq!(
        flow.schedule.pattern,
        Departures::Replay {
            timestamps_ns: vec![0, 100, 250],
            speed: 2.0
        }
    );
    let missing = one_flow(
        "timing = { pattern = \"empirical\", file = \"nope.csv\" }",
        UDP4,
    );
    let err = load_scenario(&missing, "s.toml", &files).unwrap_err();
    assert_eq!(err.path, "flows[0].timing.file");
    assert!(
        err.message
            .contains("cannot read gap table `nope.csv`: no such file"),
        "{err}"
    );
    assert_eq!(err.line, Some(line_of(&missing, "file = \"nope.csv\"")));
}

#[test]
fn custom_headers_weights_and_metrics_options() {
    let flow = load_flow(
        r#"
size = { weight_pairs = { custom = [{ size = 100, weight = 58.67 }, { size = 200, weight = 41.33 }] } }
metrics = { enable = true, latency = { enable = true, mode = "cut_through" }, loss = false }
"#,
        "[[flows.packet]]\nethernet = {}\n[[flows.packet]]\ncustom = { bytes = \"de ad:be:ef\" }\n",
    );
    assert_eq!(flow.packet[1].custom_bytes, [0xde, 0xad, 0xbe, 0xef]);
    assert_eq!(flow.header_len(), 18);
    assert_eq!(
        flow.size,
        SizeSpec::WeightPairs(vec![(100, 5867), (200, 4133)])
    );
    assert_eq!(flow.metrics.latency, Some(LatencyMode::CutThrough));
    assert!(!flow.metrics.loss && flow.metrics.timestamps);

    let off = load_flow("metrics = { enable = false }", UDP4);
    assert!(!off.metrics.enable && !off.metrics.instrument);
    assert_eq!(off.metrics.latency, None);
    let no_trailer = load_flow("metrics = { instrument = false }", UDP4);
    assert!(no_trailer.metrics.enable && !no_trailer.metrics.instrument);
    assert!(!no_trailer.metrics.loss && no_trailer.metrics.latency.is_none());
}

// ---- errors ----

fn assert_located(err: &ModelError, text: &str, needle: &str, path: &str) {
    assert_eq!(err.source, "scenario.toml");
    assert_eq!(err.line, Some(line_of(text, needle)), "{err}");
    assert!(err.column.is_some());
    assert_eq!(err.path, path, "{err}");
    let shown = err.to_string();
    assert!(
        shown.starts_with(&format!("scenario.toml:{}:", line_of(text, needle))),
        "{shown}"
    );
    assert!(shown.contains(path), "{shown}");
}

#[test]
fn unknown_key_is_named_with_the_accepted_keys() {
    let text = one_flow("rat = \"1mpps\"", UDP4);
    let err = load(&text).unwrap_err();
    assert_located(&err, &text, "rat =", "flows[0].rat");
    assert!(err.message.contains("unknown key `rat`"), "{err}");
    assert!(
        err.message
            .contains("accepted keys here: name, tx_rx, tx, rx, packet, size, rate"),
        "{err}"
    );

    let nested = one_flow("metrics = { latency = { enabled = true } }", UDP4);
    let err = load(&nested).unwrap_err();
    assert_eq!(err.path, "flows[0].metrics.latency.enabled");
    assert!(
        err.message.contains("accepted keys here: enable, mode"),
        "{err}"
    );

    let field = one_flow("", &UDP4.replace("src_port = 1000", "source_port = 1000"));
    let err = load(&field).unwrap_err();
    assert_located(
        &err,
        &field,
        "source_port",
        "flows[0].packet[2].udp.source_port",
    );
    assert!(
        err.message.contains("src_port, dst_port, length, checksum"),
        "{err}"
    );
}

#[test]
fn bad_ipv4_address() {
    let text = one_flow("", &UDP4.replace("198.18.0.1", "198.18.0.300"));
    let err = load(&text).unwrap_err();
    assert_located(
        &err,
        &text,
        "\"198.18.0.300\"",
        "flows[0].packet[1].ipv4.src",
    );
    let line = line_of(&text, "198.18.0.300");
    let column = text
        .lines()
        .nth(line - 1)
        .unwrap()
        .find("\"198.18.0.300\"")
        .unwrap()
        + 1;
    assert_eq!(
        err.to_string(),
        format!("scenario.toml:{line}:{column}: flows[0].packet[1].ipv4.src: invalid IPv4 address `198.18.0.300` — expected a dotted quad such as 198.18.0.1")
    );
}

#[test]
fn value_too_large_for_the_field() {
    let text = one_flow(
        "",
        &UDP4.replace(
            "dst = \"198.18.1.1\"",
            "dst = \"198.18.1.1\", time_to_live = 300",
        ),
    );
    let err = load(&text).unwrap_err();
    assert_located(&err, &text, "300 }", "flows[0].packet[1].ipv4.time_to_live");
    assert!(
        err.message
            .contains("does not fit in the 8-bit field `time_to_live` — accepted: 0 to 255"),
        "{err}"
    );

    let step = one_flow(
        "",
        &UDP4.replace(
            "src_port = 1000",
            "src_port = { increment = { start = 1, step = 70000 } }",
        ),
    );
    let err = load(&step).unwrap_err();
    assert_eq!(err.path, "flows[0].packet[2].udp.src_port.increment.step");
    assert!(err.message.contains("0 to 65535"), "{err}");
}

#[test]
fn unknown_header() {
    let text = one_flow(
        "",
        "[[flows.packet]]\nethernet = {}\n[[flows.packet]]\nsnmpv2c = {}\n",
    );
    let err = load(&text).unwrap_err();
    assert_located(&err, &text, "snmpv2c", "flows[0].packet[1].snmpv2c");
    assert!(err.message.contains("unknown header `snmpv2c`"), "{err}");
    assert!(
        !err.message.contains("gtp_extension"),
        "extension headers are written inside gtpv1: {err}"
    );
    assert!(
        err.message
            .contains("accepted headers: ethernet, vlan, arp, ipv4, ipv6, udp, tcp"),
        "{err}"
    );
}

#[test]
fn size_too_small_for_the_stack() {
    let text = one_flow("size = 64", UDP6);
    let err = load(&text).unwrap_err();
    assert_located(&err, &text, "64", "flows[0].size");
    // 14 + 40 + 8 = 62 bytes of headers, plus 4 of FCS.
    assert!(
        err.message
            .contains("too small for the 62 bytes of headers"),
        "{err}"
    );
    assert!(err.message.contains("at least 66"), "{err}");
    assert!(err.message.contains("accepted: 66 to 9216"), "{err}");

    let jumbo = one_flow("size = 9217", UDP4);
    let err = load(&jumbo).unwrap_err();
    assert!(
        err.message.contains("above the largest accepted size 9216"),
        "{err}"
    );
    let range = load(&one_flow(
        "size = { increment = { start = 60, end = 100 } }",
        UDP6,
    ))
    .unwrap_err();
    assert!(range.message.contains("frame size 60"), "{range}");
}

#[test]
fn unknown_port() {
    let text = format!("{PORTS}\n[[flows]]\nname = \"f\"\ntx_rx = {{ port = {{ tx_name = \"tx\", rx_names = [\"rx\", \"rx9\"] }} }}\n{UDP4}");
    let err = load(&text).unwrap_err();
    assert_located(&err, &text, "\"rx9\"", "flows[0].tx_rx.port.rx_names[1]");
    assert!(
        err.message
            .contains("unknown port `rx9` — defined ports: rx, tx"),
        "{err}"
    );
    let tx = one_flow("", UDP4).replace("tx = \"tx\"", "tx = \"eth9\"");
    let err = load(&tx).unwrap_err();
    assert_eq!(err.path, "flows[0].tx");
}

#[test]
fn bad_rate_string() {
    let text = one_flow("rate = \"fast\"", UDP4);
    let err = load(&text).unwrap_err();
    assert_located(&err, &text, "\"fast\"", "flows[0].rate");
    assert!(err.message.starts_with("invalid rate `fast`"), "{err}");
    assert!(err.message.contains("1.5mpps, 10gbps"), "{err}");
    assert!(err.message.contains("\"50%\""), "{err}");
    let zero = load(&one_flow("rate = { pps = 0 }", UDP4)).unwrap_err();
    assert_eq!(zero.path, "flows[0].rate");
    assert!(zero.message.contains("above zero"), "{zero}");
    let pct = load(&one_flow("rate = { percentage = 120 }", UDP4)).unwrap_err();
    assert_eq!(pct.path, "flows[0].rate.percentage");
    assert!(pct.message.contains("at most 100"), "{pct}");
}

#[test]
fn trailer_is_switched_off_with_a_warning_when_it_does_not_fit() {
    // 62 bytes of headers + 16 trailer + 4 FCS = 82 > 80.
    let scenario = load(&one_flow("size = 80", UDP6)).unwrap();
    let flow = &scenario.flows[0];
    assert!(!flow.metrics.instrument);
    assert!(!flow.metrics.loss && flow.metrics.latency.is_none());
    assert!(flow.metrics.enable);
    assert_eq!(scenario.warnings.len(), 1);
    assert!(matches!(
        &scenario.warnings[0],
        strobe_model::Warning::TrailerDoesNotFit { flow, fitting_frame_bytes: 82, .. } if flow == "f"
    ));
    let warning = scenario.warnings[0].to_string();
    assert!(warning.contains("flow `f`"), "{warning}");
    assert!(warning.contains("at least 82"), "{warning}");

    let fits = load(&one_flow("size = 82", UDP6)).unwrap();
    assert!(fits.flows[0].metrics.instrument && fits.warnings.is_empty());
}

#[test]
fn trailer_asked_for_explicitly_is_an_error_when_it_does_not_fit() {
    let text = one_flow("size = 80\nmetrics = { instrument = true }", UDP6);
    let err = load(&text).unwrap_err();
    assert_located(&err, &text, "true }", "flows[0].metrics.instrument");
    assert!(err.message.contains("frame sizes of at least 82"), "{err}");

    let latency = one_flow("size = 80\nmetrics = { latency = { enable = true } }", UDP6);
    let err = load(&latency).unwrap_err();
    assert_eq!(err.path, "flows[0].metrics");
    assert!(err.message.contains("at least 82"), "{err}");

    let contradiction = load(&one_flow(
        "metrics = { loss = true, instrument = false }",
        UDP4,
    ))
    .unwrap_err();
    assert_eq!(contradiction.path, "flows[0].metrics.instrument");
    let disabled = load(&one_flow(
        "metrics = { enable = false, latency = true }",
        UDP4,
    ))
    .unwrap_err();
    assert_eq!(disabled.path, "flows[0].metrics.latency");
}

#[test]
fn schedule_errors_point_at_the_part_at_fault() {
    let both = load(&one_flow(
        "timing = \"poisson\"\nduration = { burst = { packets = 4 } }",
        UDP4,
    ))
    .unwrap_err();
    assert_eq!(both.path, "flows[0].duration");
    let uniform = load(&one_flow(
        "timing = { pattern = \"uniform\", min = \"5us\", max = \"1us\" }",
        UDP4,
    ))
    .unwrap_err();
    assert_eq!(uniform.path, "flows[0].timing");
    let bad_time = load(&one_flow(
        "timing = { pattern = \"on_off\", on = \"1 fortnight\", off = \"1ms\" }",
        UDP4,
    ))
    .unwrap_err();
    assert_eq!(bad_time.path, "flows[0].timing.on");
    assert!(
        bad_time.message.starts_with("invalid time `1 fortnight`"),
        "{bad_time}"
    );
    assert!(bad_time.message.contains("250us"), "{bad_time}");
    let unknown = load(&one_flow("timing = { pattern = \"chaos\" }", UDP4)).unwrap_err();
    assert!(
        unknown.message.contains("accepted: cbr, poisson, burst"),
        "{unknown}"
    );
}

#[test]
fn pattern_and_field_errors() {
    let random_mac = load(&one_flow(
        "",
        "[[flows.packet]]\nethernet = { src = { random = { min = 1, max = 5 } } }\n",
    ))
    .unwrap_err();
    assert_eq!(random_mac.path, "flows[0].packet[0].ethernet.src");
    assert!(
        random_mac
            .message
            .contains("random is not available for ethernet.src"),
        "{random_mac}"
    );

    let auto_ttl = load(&one_flow(
        "",
        &UDP4.replace("dst = \"198.18.1.1\"", "time_to_live = \"auto\""),
    ))
    .unwrap_err();
    assert!(auto_ttl.message.contains("cannot be auto"), "{auto_ttl}");
    assert!(
        auto_ttl.message.contains(
            "computed ipv4 fields: header_length, total_length, protocol, header_checksum"
        ),
        "{auto_ttl}"
    );

    let two = load(&one_flow(
        "size = { fixed = 64, random = { min = 64, max = 128 } }",
        UDP4,
    ))
    .unwrap_err();
    assert!(
        two.message
            .contains("give only one of: fixed, increment, random, weight_pairs"),
        "{two}"
    );

    let count = load(&one_flow(
        "",
        &UDP4.replace(
            "src_port = 1000",
            "src_port = { increment = { start = 1, count = 0 } }",
        ),
    ))
    .unwrap_err();
    assert_eq!(
        count.path,
        "flows[0].packet[2].udp.src_port.increment.count"
    );

    let empty = load(&one_flow(
        "",
        &UDP4.replace("src_port = 1000", "src_port = []"),
    ))
    .unwrap_err();
    assert!(empty.message.contains("give at least one value"), "{empty}");

    let auto_ok = load_flow(
        "",
        &UDP4.replace(
            "dst_port = 2000",
            "dst_port = \"auto\", checksum = { generated = \"good\" }",
        ),
    );
    assert!(field(&auto_ok.packet[2], "dst_port").is_none());
    assert!(field(&auto_ok.packet[2], "checksum").is_none());
}

#[test]
fn scenario_level_errors() {
    let dup = format!(
        "{}\n[[flows]]\nname = \"f\"\ntx = \"tx\"\n{UDP4}",
        one_flow("", UDP4)
    );
    let err = load(&dup).unwrap_err();
    assert_eq!(err.path, "flows[1].name");
    assert!(err.message.contains("already used by flows[0]"), "{err}");

    let no_flows = load(PORTS).unwrap_err();
    assert_eq!(no_flows.path, "flows");
    assert!(
        no_flows.to_string().starts_with("scenario.toml: flows:"),
        "{no_flows}"
    );

    let no_ports = load(&format!("[[flows]]\nname = \"f\"\ntx = \"tx\"\n{UDP4}")).unwrap_err();
    assert_eq!(no_ports.path, "ports");

    let top = load(&format!("lags = []\n{}", one_flow("", UDP4))).unwrap_err();
    assert!(
        top.message.contains("accepted keys here: ports, flows"),
        "{top}"
    );
    assert_eq!(top.line, Some(1));

    let syntax = load("[[ports]\n").unwrap_err();
    assert_eq!(syntax.line, Some(1));
    assert!(syntax.message.starts_with("invalid TOML"), "{syntax}");
}

#[test]
fn ipv4_priority_accepts_the_otg_nested_forms() {
    let tos_byte = |priority: &str| {
        let packet = UDP4.replace(
            "dst = \"198.18.1.1\"",
            &format!("dst = \"198.18.1.1\", {priority}"),
        );
        let flow = load_flow("", &packet);
        let built = strobe_wire::build(&flow.stack_at(0), 60, &flow.payload).unwrap();
        // The TOS byte follows version/IHL in the IPv4 header at offset 14.
        built.bytes[15]
    };
    assert_eq!(tos_byte("priority = 184"), 0xB8);
    assert_eq!(tos_byte("priority = { raw = 184 }"), 0xB8);
    assert_eq!(
        tos_byte("priority = { choice = \"raw\", raw = { value = 184 } }"),
        0xB8
    );
    assert_eq!(
        tos_byte("priority = { dscp = { phb = 46, ecn = 1 } }"),
        0xB9
    );
    assert_eq!(
        tos_byte("priority = { choice = \"dscp\", dscp = { phb = { value = 10 } } }"),
        10 << 2
    );
    assert_eq!(tos_byte("dscp = 46"), 46 << 2);
    let tos = load(&one_flow(
        "",
        &UDP4.replace(
            "dst = \"198.18.1.1\"",
            "dst = \"198.18.1.1\", priority = { tos = {} }",
        ),
    ))
    .unwrap_err();
    assert_eq!(tos.path, "flows[0].packet[1].ipv4.priority.tos");
    assert!(tos.message.contains("priority = { raw = N }"), "{tos}");
    let wide = load(&one_flow(
        "",
        &UDP4.replace(
            "dst = \"198.18.1.1\"",
            "dst = \"198.18.1.1\", priority = { dscp = { phb = 64 } }",
        ),
    ))
    .unwrap_err();
    assert_eq!(wide.path, "flows[0].packet[1].ipv4.priority.dscp.phb");
    assert!(wide.message.contains("0 to 63"), "{wide}");
}

// ---- line rate ----

/// A scenario with one port `tx` (with `port_extra` lines) and the given flows, each a
/// `(name, keys)` pair sending UDP4 on `tx`.
fn port_with_flows(port_extra: &str, flows: &[(&str, &str)]) -> String {
    let mut text = format!("[[ports]]\nname = \"tx\"\nlocation = \"null\"\n{port_extra}\n");
    for (name, keys) in flows {
        text.push_str(&format!(
            "\n[[flows]]\nname = \"{name}\"\ntx = \"tx\"\n{keys}\n{UDP4}"
        ));
    }
    text
}

#[test]
fn packet_rate_above_the_line_rate_is_rejected_at_the_rate() {
    let text = one_flow("size = 64\nrate = \"20mpps\"", UDP4);
    let err = load(&text).unwrap_err();
    assert_located(&err, &text, "rate = \"20mpps\"", "flows[0].rate");
    assert_eq!(err.column, Some(8), "{err}");
    for part in [
        "rate 20 Mpps of 64-byte frames needs 13.44 Gbit/s at layer 1 (64 + 20 bytes per frame)",
        "above port `tx`'s line rate of 10 Gbit/s",
        "lower the rate, or set the port's speed (e.g. speed = \"25gbps\")",
    ] {
        assert!(err.message.contains(part), "{err}");
    }

    // Mean sizes count: IMIX averages 353.833 bytes, 373.833 bytes of line time.
    let imix = one_flow("size = \"imix\"\nrate = \"4mpps\"", UDP4);
    let err = load(&imix).unwrap_err();
    assert_located(&err, &imix, "rate = \"4mpps\"", "flows[0].rate");
    assert!(
        err.message
            .contains("rate 4 Mpps of frames averaging 353.833 bytes needs 11.963 Gbit/s"),
        "{err}"
    );
}

#[test]
fn bit_rate_above_the_line_rate_is_rejected() {
    let text = port_with_flows(
        "speed = \"10gbps\"",
        &[("f", "rate = { choice = \"gbps\", gbps = 40 }")],
    );
    let err = load(&text).unwrap_err();
    // The rate table's value, as for other rate errors.
    assert_located(&err, &text, "rate = {", "flows[0].rate");
    assert!(
        err.message.starts_with(
            "rate 40 Gbit/s (layer 1) is above port `tx`'s line rate of 10 Gbit/s — lower the rate, or raise the port's speed (e.g. speed = \"40gbps\")"
        ),
        "{err}"
    );
}

#[test]
fn a_flow_without_a_rate_key_is_located_at_its_table() {
    // No rate key: the default 1000 pps of 64-byte frames needs 672 kbit/s.
    let text = port_with_flows("speed = 500000", &[("f", "size = 64")]);
    let err = load(&text).unwrap_err();
    assert_eq!(err.path, "flows[0].rate", "{err}");
    assert_eq!(err.line, Some(line_of(&text, "[[flows]]")), "{err}");
    assert!(
        err.message
            .contains("1 kpps of 64-byte frames needs 672 kbit/s"),
        "{err}"
    );
    assert!(err.message.contains("line rate of 500 kbit/s"), "{err}");
    assert!(
        err.message
            .contains("raise the port's speed (e.g. speed = \"10mbps\")"),
        "{err}"
    );
}

#[test]
fn the_top_of_a_rate_profile_is_checked_not_only_its_end() {
    let ramp = one_flow(
        "timing = { pattern = \"cbr\", ramp = { from = \"20mpps\", to = \"1mpps\", over = \"10s\" } }",
        UDP4,
    );
    let err = load(&ramp).unwrap_err();
    assert_located(&err, &ramp, "timing = {", "flows[0].timing");
    assert!(
        err.message.starts_with(
            "the ramp's top rate 20 Mpps of 64-byte frames needs 13.44 Gbit/s at layer 1"
        ),
        "{err}"
    );
    assert!(err.message.contains("lower the ramp's rates"), "{err}");

    let steps = one_flow(
        "rate = \"1mpps\"\ntiming = { pattern = \"poisson\", steps = [{ at = \"1s\", rate = \"16gbps\" }, { at = \"2s\", rate = \"1mpps\" }] }",
        UDP4,
    );
    let err = load(&steps).unwrap_err();
    assert_located(&err, &steps, "timing = {", "flows[0].timing");
    assert!(
        err.message
            .starts_with("steps[0] rate 16 Gbit/s (layer 1) is above port `tx`'s line rate"),
        "{err}"
    );

    // A profile that stays below the line everywhere is fine.
    load_flow(
        "timing = { pattern = \"cbr\", ramp = { from = \"1mpps\", to = \"14mpps\", over = \"10s\" } }",
        UDP4,
    );
}

#[test]
fn bursts_are_checked_at_their_rate_within_the_burst() {
    // 20 Mpps within each burst averages far less, but no burst can be sent that fast.
    let text = one_flow(
        "rate = \"20mpps\"\ntiming = { pattern = \"burst\", packets = 8, inter_burst_gap = \"1ms\" }",
        UDP4,
    );
    let err = load(&text).unwrap_err();
    assert_located(&err, &text, "rate = \"20mpps\"", "flows[0].rate");
    assert!(err.message.contains("13.44 Gbit/s"), "{err}");

    let gap = one_flow(
        "timing = { pattern = \"burst\", packets = 8, inter_burst_gap = \"1ms\", intra_gap = \"50ns\" }",
        UDP4,
    );
    let err = load(&gap).unwrap_err();
    assert_located(&err, &gap, "timing = {", "flows[0].timing");
    assert!(
        err.message
            .starts_with("intra_gap = 50 ns (20 Mpps within a burst) of 64-byte frames"),
        "{err}"
    );
}

#[test]
fn exactly_the_line_rate_is_accepted() {
    let bits = load_flow("rate = { gbps = 10 }", UDP4);
    assert_eq!(bits.schedule.rate, Rate::L1BitsPerSec(1e10));
    // 10 Gbit/s / (84 bytes × 8) = 14 880 952.38… pps, rounded up a little.
    load_flow("size = 64\nrate = 14880952.381", UDP4);
    load_flow("rate = \"100%\"", UDP4);
    // Two flows sharing the line exactly.
    load(&port_with_flows(
        "",
        &[("a", "rate = \"4gbps\""), ("b", "rate = \"6gbps\"")],
    ))
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn a_faster_port_makes_room() {
    let flow = "size = 64\nrate = \"20mpps\"";
    let scenario = load(&port_with_flows("speed = \"25gbps\"", &[("f", flow)]))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(scenario.ports[0].speed_bps, 25_000_000_000);
    let scenario = load(&port_with_flows(
        "speed = \"40gbps\"",
        &[("f", "rate = { gbps = 40 }")],
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(scenario.flows[0].schedule.rate, Rate::L1BitsPerSec(4e10));
}

#[test]
fn flows_of_a_port_must_fit_its_line_together() {
    let text = port_with_flows(
        "",
        &[
            ("a", "rate = \"6gbps\""),
            ("b", "size = 64\nrate = \"7440476pps\""),
        ],
    );
    let err = load(&text).unwrap_err();
    assert_located(&err, &text, "[[ports]]", "ports[0]");
    assert!(
        err.message.starts_with(
            "the 2 flows sending on port `tx` need 11 Gbit/s together at layer 1 (`a` 6 Gbit/s, `b` 5 Gbit/s), above its line rate of 10 Gbit/s — lower their rates, or set the port's speed (e.g. speed = \"25gbps\")"
        ),
        "{err}"
    );

    // With a speed, the error points at it.
    let text = port_with_flows(
        "speed = \"1gbps\"",
        &[("a", "rate = \"600mbps\""), ("b", "rate = \"600mbps\"")],
    );
    let err = load(&text).unwrap_err();
    assert_located(&err, &text, "speed = \"1gbps\"", "ports[0].speed");
    assert!(err.message.contains("need 1.2 Gbit/s together"), "{err}");
    assert!(
        err.message
            .contains("raise the port's speed (e.g. speed = \"2.5gbps\")"),
        "{err}"
    );

    // Bursty flows count with their average rate: 8 packets at 10 Mpps every 10.8 µs
    // average about 740 kpps each.
    let bursty = "size = 64\nrate = \"10mpps\"\ntiming = { pattern = \"burst\", packets = 8, inter_burst_gap = \"10us\" }";
    load(&port_with_flows("", &[("a", bursty), ("b", bursty)])).unwrap_or_else(|e| panic!("{e}"));

    // Flows on different ports do not add up.
    let two_ports = format!(
        "{PORTS}\n[[flows]]\nname = \"a\"\ntx = \"tx\"\nrate = \"6gbps\"\n{UDP4}\n[[flows]]\nname = \"b\"\ntx = \"rx\"\nrate = \"6gbps\"\n{UDP4}"
    );
    load(&two_ports).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn flows_that_take_turns_share_a_line() {
    // `a` ends after 1 s; `b` starts 2 s in.
    let turns = port_with_flows(
        "",
        &[
            ("a", "rate = \"8gbps\"\nduration = \"1s\""),
            (
                "b",
                "rate = \"8gbps\"\nduration = { continuous = { delay = { microseconds = 2000000 } } }",
            ),
        ],
    );
    load(&turns).unwrap_or_else(|e| panic!("{e}"));

    // Steps that hand the line over at the same instant.
    let handover = port_with_flows(
        "",
        &[
            (
                "up",
                "rate = \"1gbps\"\ntiming = { pattern = \"cbr\", steps = [{ at = \"1s\", rate = \"8gbps\" }] }",
            ),
            (
                "down",
                "rate = \"8gbps\"\ntiming = { pattern = \"cbr\", steps = [{ at = \"1s\", rate = \"1gbps\" }] }",
            ),
        ],
    );
    load(&handover).unwrap_or_else(|e| panic!("{e}"));

    // Overlapping at 1 s: the message says when.
    let overlap = port_with_flows(
        "",
        &[
            ("steady", "rate = \"5gbps\""),
            (
                "late",
                "rate = \"1gbps\"\ntiming = { pattern = \"cbr\", steps = [{ at = \"1.5s\", rate = \"6gbps\" }] }",
            ),
        ],
    );
    let err = load(&overlap).unwrap_err();
    assert_located(&err, &overlap, "[[ports]]", "ports[0]");
    assert!(
        err.message
            .contains("need 11 Gbit/s together at layer 1 from 1.5 s into the run (`steady` 5 Gbit/s, `late` 6 Gbit/s)"),
        "{err}"
    );
}

#[test]
fn port_cores_are_read_and_checked() {
    let text = "[[ports]]\nname = \"tx\"\nlocation = \"null\"\ncores = 3\n\n[[flows]]\nname = \"f\"\ntx = \"tx\"\n[[flows.packet]]\nethernet = {}\n";
    assert_eq!(load(text).unwrap().ports[0].cores, Some(3));
    let err = load(&text.replace("cores = 3", "cores = 0"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("scenario.toml:4:") && err.contains("cores"),
        "{err}"
    );
    let without = load(&text.replace("cores = 3\n", "")).unwrap();
    assert_eq!(without.ports[0].cores, None);
}

#[test]
fn a_run_table_asks_for_unpaced_pacing() {
    let with_run = |run: &str| load(&format!("[run]\n{run}\n{}", one_flow("", UDP4)));
    assert_eq!(
        load(&one_flow("", UDP4)).unwrap().pacing,
        strobe_model::Pacing::Scheduled
    );
    assert_eq!(
        with_run("pacing = \"unpaced\"").unwrap().pacing,
        strobe_model::Pacing::Unpaced {
            time_limit_ns: None
        }
    );
    assert_eq!(
        with_run("pacing = \"unpaced\"\ntime_limit = \"2.5s\"")
            .unwrap()
            .pacing,
        strobe_model::Pacing::Unpaced {
            time_limit_ns: Some(2_500_000_000)
        }
    );
    assert_eq!(
        with_run("pacing = \"scheduled\"").unwrap().pacing,
        strobe_model::Pacing::Scheduled
    );
    let refused = |run: &str, needle: &str| {
        let e = with_run(run).unwrap_err().to_string();
        assert!(e.contains(needle), "{run}: {e}");
    };
    refused("pacing = \"fast\"", "`fast` — accepted: \"scheduled\"");
    refused("time_limit = \"1s\"", "applies to unpaced runs");
    refused(
        "pacing = \"unpaced\"\ntime_limit = \"soon\"",
        "run.time_limit",
    );
    refused("speed = 1", "run.speed");
}

#[test]
fn port_locations_are_parsed_where_they_are_read() {
    let text = "[[ports]]\nname = \"tx\"\nlocation = \"afxdp:ns/eth1@2\"\n\n[[ports]]\nname = \"rx\"\nlocation = \"lab:rx@afxdp-all\"\n";
    let flow = format!("\n[[flows]]\nname = \"f\"\ntx = \"tx\"\n{UDP4}");
    let scenario = load(&format!("{text}{flow}")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        scenario.ports[0].location,
        PortLocation::Direct(Location::AfXdp {
            netns: Some("ns".into()),
            iface: "eth1".into(),
            queue: 2
        })
    );
    assert_eq!(scenario.ports[1].location.to_string(), "lab:rx@afxdp-all");
    // Refused with the file position of the value and what is accepted.
    for (location, message) in [
        (
            "carrier-pigeon:coop",
            "unknown port `carrier-pigeon:coop`: accepted forms are `pcap:FILE`",
        ),
        (
            "afxdp:eth1@x",
            "unknown port `afxdp:eth1@x`: accepted forms",
        ),
        (
            "lab:dut",
            "unknown lab side `dut` — accepted: lab:tx, lab:rx",
        ),
        ("lab:tx@dpdk", "unknown backend `dpdk` — accepted: afpacket"),
    ] {
        let text = format!("[[ports]]\nname = \"tx\"\nlocation = \"{location}\"\n{flow}");
        let err = load(&text).unwrap_err();
        assert_eq!(err.path, "ports[0].location", "{err}");
        assert_eq!((err.line, err.column), (Some(3), Some(12)), "{err}");
        assert!(
            err.to_string()
                .starts_with(&format!("scenario.toml:3:12: ports[0].location: {message}")),
            "{err}"
        );
    }
}

/// A tagged UDP/IPv4 flow: `udp` holds the udp table's fields.
fn tagged(flow: &str, udp: &str) -> Result<Scenario, ModelError> {
    load(&one_flow(
        flow,
        &format!(
            "[[flows.packet]]\nethernet = {{}}\n[[flows.packet]]\nipv4 = {{ src = \"198.18.0.1\", dst = \"198.18.1.1\" }}\n[[flows.packet]]\nudp = {{ {udp} }}\n"
        ),
    ))
}

#[test]
fn metric_tags_group_positions_by_the_tagged_bits() {
    // The port's top 15 bits: 1000 and 1001 share one value, 1002 and 1003 the next; the
    // second tag (the low bit) tells them apart again.
    let s = tagged(
        "",
        "src_port = { values = [1000, 1001, 1002, 1003], metric_tags = [{ name = \"hi\", length = 15 }, { name = \"lo\", offset = 15, length = 1 }] }",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let plan = s.flows[0].tag_plan().unwrap().unwrap();
    assert_eq!(plan.names, ["hi", "lo"]);
    assert_eq!(plan.widths, [15, 1]);
    assert_eq!(
        plan.positions,
        vec![vec![500, 0], vec![500, 1], vec![501, 0], vec![501, 1]]
    );
    let only_hi = tagged(
        "",
        "src_port = { values = [1000, 1001, 1002, 1003], metric_tags = [{ name = \"hi\", length = 15 }] }",
    )
    .unwrap();
    let groups = only_hi.flows[0].tag_plan().unwrap().unwrap().groups();
    assert_eq!(
        groups,
        vec![(vec![500], vec![0, 1]), (vec![501], vec![2, 3])]
    );
    // Untagged flows have no plan; a tag on a constant field is one position.
    assert!(tagged("", "src_port = 1").unwrap().flows[0]
        .tag_plan()
        .unwrap()
        .is_none());
    let constant = tagged(
        "",
        "dst_port = { value = 9, metric_tags = [{ name = \"d\" }] }",
    )
    .unwrap();
    assert_eq!(
        constant.flows[0].tag_plan().unwrap().unwrap().positions,
        vec![vec![9]]
    );
}

#[test]
fn metric_tags_that_cannot_be_counted_are_refused_naming_the_tag() {
    let refused = |flow: &str, udp: &str| tagged(flow, udp).unwrap_err().to_string();
    let endless = refused(
        "",
        "src_port = { random = { min = 1, max = 9000, count = 0 }, metric_tags = [{ name = \"r\" }] }",
    );
    assert!(
        endless.contains("metric tag `r`") && endless.contains("at most 1024"),
        "{endless}"
    );
    // 600 and 7 values repeat together only every 4200 frames.
    let long = refused(
        "",
        "src_port = { increment = { start = 1, count = 600 }, metric_tags = [{ name = \"a\" }] }, dst_port = { values = [1, 2, 3, 4, 5, 6, 7], metric_tags = [{ name = \"b\" }] }",
    );
    assert!(long.contains("every 4200 frames"), "{long}");
    let twice = refused(
        "",
        "src_port = { value = 1, metric_tags = [{ name = \"p\" }] }, dst_port = { value = 2, metric_tags = [{ name = \"p\" }] }",
    );
    assert!(twice.contains("`p` is named twice"), "{twice}");
    let outside = refused(
        "",
        "src_port = { value = 1, metric_tags = [{ name = \"p\", offset = 10, length = 8 }] }",
    );
    assert!(
        outside.contains("flows[0].packet[2].udp.src_port.metric_tags[0]")
            && outside.contains("at most 16"),
        "{outside}"
    );
    let unnamed = refused(
        "",
        "src_port = { value = 1, metric_tags = [{ offset = 1 }] }",
    );
    assert!(
        unnamed.contains("every metric tag needs a name"),
        "{unnamed}"
    );
    let auto = refused(
        "",
        "length = { choice = \"auto\", metric_tags = [{ name = \"l\" }] }",
    );
    assert!(
        auto.contains("metric tag `l` on a field strobe computes"),
        "{auto}"
    );
    let untraced = refused(
        "metrics = { enable = false }",
        "src_port = { values = [1, 2], metric_tags = [{ name = \"p\" }] }",
    );
    assert!(
        untraced.contains("needs the flow's metrics enabled"),
        "{untraced}"
    );
}
