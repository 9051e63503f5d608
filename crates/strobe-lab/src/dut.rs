//! The device under test between the generator and the sink, and its text form.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::LabError;

/// Lowest and highest token-bucket rate the lab accepts, in bit/s: below 8 kbit/s a single
/// full-size frame takes more than a second; above 100 Gbit/s veth cannot carry it anyway.
const MIN_TBF_BPS: u64 = 8_000;
const MAX_TBF_BPS: u64 = 100_000_000_000;
/// Most rules an `nft` DUT's forward chain takes: loading more takes nft seconds, and at
/// about 10 ns a rule such a chain already costs a frame around a millisecond.
pub const MAX_NFT_RULES: u32 = 100_000;
/// Longest path of an `ovs` DUT's flow table: the DUT's text form is kept in an interface
/// alias (at most 255 bytes), with the lab's mark before it.
const MAX_FLOWS_PATH: usize = 200;

/// What sits between the generator namespace and the sink namespace.
#[derive(Clone, Debug, PartialEq)]
pub enum Dut {
    /// A plain veth pair: generator and sink share one wire.
    Cable,
    /// A Linux bridge (no STP, forwarding at once) in its own namespace.
    Bridge,
    /// A Linux router (IPv4 and IPv6 forwarding) between two subnets.
    Router,
    /// The bridge plus a token-bucket shaper at `rate_bps` (layer 2 bits per second) on the
    /// sink-facing port.
    Tbf { rate_bps: u64 },
    /// The router with an nftables forward chain of `rules` rules that match none of the
    /// lab's frames, each looked at in turn: a firewall whose cost grows with its rules.
    Nft { rules: u32 },
    /// An XDP program on each DUT interface that redirects every frame to the other one
    /// (`bpf_redirect_map` through a DEVMAP): the kernel's fast path, no bridge, no socket
    /// buffer in the DUT.
    Xdp,
    /// DPDK's testpmd forwarding in `io` mode between the DUT's two interfaces through
    /// `driver`, its forwarding loop pinned to `core`: the user-space forwarder.
    Testpmd { driver: TestpmdDriver, core: u32 },
    /// An Open vSwitch bridge (the user-space `netdev` datapath) over the DUT's two
    /// interfaces, run by an ovsdb-server and ovs-vswitchd of the lab's own: the switch's
    /// own learning (`NORMAL`), or the OpenFlow flow table in the file `flows`
    /// (`ovs-ofctl add-flows` syntax, an absolute path).
    Ovs { flows: Option<PathBuf> },
}

/// How testpmd reaches the DUT's veths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TestpmdDriver {
    /// `net_af_packet`: a packet socket with a memory-mapped ring per port.
    AfPacket,
    /// `net_af_xdp`: an AF_XDP socket per queue (copy mode on a veth).
    AfXdp,
}

impl TestpmdDriver {
    fn text(self) -> &'static str {
        match self {
            TestpmdDriver::AfPacket => "afpacket",
            TestpmdDriver::AfXdp => "afxdp",
        }
    }

    /// DPDK's name of the poll-mode driver.
    pub fn pmd(self) -> &'static str {
        match self {
            TestpmdDriver::AfPacket => "net_af_packet",
            TestpmdDriver::AfXdp => "net_af_xdp",
        }
    }
}

impl Dut {
    /// What the DUT is, in words (`lab up` and `lab status` print it beside its name).
    pub fn describe(&self) -> String {
        match self {
            Dut::Cable => "a plain veth pair: generator and sink on one wire".into(),
            Dut::Bridge => "a Linux bridge between generator and sink".into(),
            Dut::Router => "a Linux router (IPv4 and IPv6 forwarding) between two subnets".into(),
            Dut::Xdp => "an XDP forwarder: each of dut0 and dut1 redirects every frame to the \
                         other in the driver (bpf_redirect_map through a DEVMAP), without a \
                         bridge or a socket buffer"
                .into(),
            Dut::Testpmd { driver, core } => format!(
                "DPDK testpmd forwarding (io mode) between dut0 and dut1 through {}, its \
                 forwarding loop busy-polling core {core}",
                driver.pmd()
            ),
            Dut::Ovs { flows } => format!(
                "an Open vSwitch bridge (user-space datapath) between dut0 and dut1, run by \
                 the lab's own ovsdb-server and ovs-vswitchd, {}",
                match flows {
                    Some(path) => format!("with the flow table in {}", path.display()),
                    None => "switching as a learning bridge (NORMAL)".to_string(),
                }
            ),
            Dut::Nft { rules } => format!(
                "a Linux router whose nftables forward chain has {rules} rule{} for other \
                 addresses, each checked for every frame before it is forwarded",
                if *rules == 1 { "" } else { "s" }
            ),
            Dut::Tbf { .. } => {
                let p = self.tbf().expect("a tbf DUT has tbf parameters");
                format!(
                    "a Linux bridge with a token-bucket shaper at {} bit/s toward the sink                      (bucket {} bytes, queue limit {} bytes)",
                    p.rate_bps,
                    p.burst_bytes,
                    p.limit_bytes()
                )
            }
        }
    }

    /// The DUT in a few words, for reports and verdicts ("through a Linux router").
    pub fn name(&self) -> String {
        match self {
            Dut::Cable => "a cable (the two ends joined, no device)".into(),
            Dut::Bridge => "a Linux bridge".into(),
            Dut::Router => "a Linux router".into(),
            Dut::Tbf { rate_bps } => format!(
                "a Linux bridge shaped to {} Mbit/s (token bucket)",
                *rate_bps as f64 / 1e6
            ),
            Dut::Nft { rules } => format!("a Linux router with {rules} nftables forward rules"),
            Dut::Xdp => "an XDP forwarder (redirect between two veths)".into(),
            Dut::Testpmd { driver, core } => {
                format!(
                    "DPDK testpmd (io forwarding, {}, core {core})",
                    driver.pmd()
                )
            }
            Dut::Ovs { flows: None } => "Open vSwitch (user-space datapath)".into(),
            Dut::Ovs { flows: Some(path) } => format!(
                "Open vSwitch (user-space datapath, flows from {})",
                path.display()
            ),
        }
    }

    /// Whether the lab steers receive work to other cores (RPS) unless told: yes, but for
    /// the user-space forwarders (`testpmd`, `ovs`). Steering puts the kernel's receive work
    /// for the DUT's ports on the cores below the sender's, on a two-core machine the core
    /// the forwarder shares with strobe's receiver: a million frames at 100 kpps through
    /// testpmd had a median latency of 5.9–6.1 µs with steering on against 2.6–3.1 µs with
    /// it off, and 300 000 frames at 100 kpps through Open vSwitch lost 13 % (its packet
    /// socket overflowing) with steering on against 0.013 % with it off, here.
    pub fn steers_receive_by_default(&self) -> bool {
        !matches!(self, Dut::Testpmd { .. } | Dut::Ovs { .. })
    }

    /// Whether the DUT lives in a namespace of its own (everything but the cable).
    pub fn has_namespace(&self) -> bool {
        !matches!(self, Dut::Cable)
    }

    /// Whether the DUT switches at layer 2 (generator and sink share one subnet).
    pub(crate) fn is_l2(&self) -> bool {
        !self.routes()
    }

    /// Whether the DUT routes between two subnets (the router, with or without rules).
    pub(crate) fn routes(&self) -> bool {
        matches!(self, Dut::Router | Dut::Nft { .. })
    }

    /// The nftables rule set an `nft` DUT loads into its namespace (`nft -f -`): one table,
    /// one forward chain, `rules` rules matching destinations in 198.19.0.0/16, which the
    /// lab never uses, so each frame is checked against all of them and none drops it.
    pub fn nft_ruleset(&self) -> Option<String> {
        let Dut::Nft { rules } = *self else {
            return None;
        };
        let mut text = String::with_capacity(64 + 40 * rules as usize);
        text.push_str(&format!(
            "table inet {NFT_TABLE} {{\n  chain forward {{\n    type filter hook forward priority 0; policy accept;\n"
        ));
        for i in 0..rules {
            text.push_str(&format!(
                "    ip daddr 198.19.{}.{} drop\n",
                i / 256,
                i % 256
            ));
        }
        text.push_str("  }\n}\n");
        Some(text)
    }

    /// The token bucket's settings, for a tbf DUT.
    pub fn tbf(&self) -> Option<TbfParams> {
        match *self {
            Dut::Tbf { rate_bps } => Some(tbf_params(rate_bps)),
            _ => None,
        }
    }

    /// What to install when the software this DUT runs is missing here, if it is.
    pub fn missing_software(&self) -> Option<&'static str> {
        match self {
            Dut::Testpmd { .. } if !crate::testpmd::installed() => {
                Some("dpdk-testpmd is not installed (apt-get install dpdk-dev)")
            }
            Dut::Ovs { .. } if !crate::ovs::installed() => {
                Some("Open vSwitch is not installed (apt-get install openvswitch-switch)")
            }
            _ => None,
        }
    }

    /// Rejects values that cannot be built here: a rate or a number of rules out of range
    /// (reachable by constructing the value directly), a core this process may not use.
    pub fn validate(&self) -> Result<(), LabError> {
        match *self {
            Dut::Tbf { rate_bps } => check_rate(&self.to_string(), rate_bps),
            Dut::Nft { rules } => check_rules(&self.to_string(), rules),
            Dut::Testpmd { core, .. } => check_core(&self.to_string(), core),
            Dut::Ovs { ref flows } => flows
                .as_deref()
                .map_or(Ok(()), |path| check_flows_file(&self.to_string(), path)),
            _ => Ok(()),
        }
    }
}

/// The nftables table an `nft` DUT loads (in the DUT's own namespace).
pub const NFT_TABLE: &str = "strobe_dut";

fn check_rules(input: &str, rules: u32) -> Result<(), LabError> {
    if !(1..=MAX_NFT_RULES).contains(&rules) {
        return Err(LabError::InvalidDut {
            input: input.to_string(),
            reason: format!("an nft DUT takes 1 to {MAX_NFT_RULES} rules, not {rules}"),
        });
    }
    Ok(())
}

/// The cores this process may run on (its affinity), lowest first: testpmd's core must be
/// one of them.
fn allowed_cores() -> Vec<u32> {
    use nix::sched::{sched_getaffinity, CpuSet};
    use nix::unistd::Pid;
    let Ok(set) = sched_getaffinity(Pid::from_raw(0)) else {
        return vec![0];
    };
    (0..CpuSet::count() as u32)
        .filter(|&c| set.is_set(c as usize).unwrap_or(false))
        .collect()
}

/// testpmd's core unless one is named: one strobe's own threads do not use when there is
/// one (strobe sends from the highest core and receives on the lowest), else the lowest.
fn default_testpmd_core() -> u32 {
    let cores = allowed_cores();
    match cores.len() {
        0 => 0,
        1 | 2 => cores[0],
        _ => cores[1],
    }
}

fn check_core(input: &str, core: u32) -> Result<(), LabError> {
    let cores = allowed_cores();
    if !cores.contains(&core) {
        let list: Vec<String> = cores.iter().map(u32::to_string).collect();
        return Err(LabError::InvalidDut {
            input: input.to_string(),
            reason: format!(
                "core {core} is not one this process may use (its cores: {})",
                list.join(",")
            ),
        });
    }
    Ok(())
}

/// A flow table must be there to be read (the lab reads it when it is built).
fn check_flows_file(input: &str, path: &Path) -> Result<(), LabError> {
    std::fs::File::open(path)
        .map(drop)
        .map_err(|e| LabError::InvalidDut {
            input: input.to_string(),
            reason: format!("its flow table {} cannot be read: {e}", path.display()),
        })
}

/// `ovs:FLOWS_FILE`'s file as an absolute path (the lab is read back from anywhere).
fn parse_flows_path(text: &str) -> Result<PathBuf, String> {
    if text.is_empty() {
        return Err("`ovs:` names no flow table file (write `ovs` for a learning bridge)".into());
    }
    if text.chars().any(char::is_control) {
        return Err("the flow table's path has a control character".into());
    }
    let path = std::path::absolute(text)
        .map_err(|e| format!("the flow table's path cannot be made absolute: {e}"))?;
    if path.as_os_str().len() > MAX_FLOWS_PATH {
        return Err(format!(
            "the flow table's path is longer than {MAX_FLOWS_PATH} bytes (the lab keeps it in \
             an interface alias): move the file to a shorter path"
        ));
    }
    Ok(path)
}

/// `testpmd[:afpacket|:afxdp][@CORE]`, lower case already.
fn parse_testpmd(rest: &str) -> Result<Dut, String> {
    let (driver, core) = match rest.split_once('@') {
        Some((driver, core)) => (
            driver,
            core.parse::<u32>()
                .map_err(|_| format!("`{core}` is not a core number"))?,
        ),
        None => (rest, default_testpmd_core()),
    };
    let driver = match driver {
        "" | ":afpacket" => TestpmdDriver::AfPacket,
        ":afxdp" => TestpmdDriver::AfXdp,
        other => {
            return Err(format!(
                "testpmd takes `:afpacket` or `:afxdp` before its `@CORE`, not `{other}`"
            ))
        }
    };
    Ok(Dut::Testpmd { driver, core })
}

fn check_rate(input: &str, bps: u64) -> Result<(), LabError> {
    if !(MIN_TBF_BPS..=MAX_TBF_BPS).contains(&bps) {
        return Err(LabError::InvalidDut {
            input: input.to_string(),
            reason: format!("the tbf rate must be between 8kbit and 100gbit, got {bps} bit/s"),
        });
    }
    Ok(())
}

/// Unit suffixes for rates, longest first so `kbit` is not read as `bit` after `k`.
/// strobe writes bit rates as `bps` everywhere (as OTG does), so unlike tc, `mbps` is megabits.
const RATE_UNITS: [(&str, u64); 8] = [
    ("kbit", 1_000),
    ("mbit", 1_000_000),
    ("gbit", 1_000_000_000),
    ("kbps", 1_000),
    ("mbps", 1_000_000),
    ("gbps", 1_000_000_000),
    ("bit", 1),
    ("bps", 1),
];

/// Parses `100mbit`, `1.5gbit`, `50mbps`, `64000` (bit/s) into bit/s, exactly.
fn parse_rate(text: &str) -> Result<u64, String> {
    let lower = text.trim().to_ascii_lowercase();
    let (number, unit) = RATE_UNITS
        .iter()
        .find_map(|&(suffix, unit)| lower.strip_suffix(suffix).map(|n| (n, unit)))
        .unwrap_or((lower.as_str(), 1));
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !all_digits(whole) || !all_digits(fraction) {
        return Err(format!("`{text}` is not a rate"));
    }
    let too_big = || format!("`{text}` is too large");
    let mut bps = whole
        .parse::<u64>()
        .ok()
        .and_then(|w| w.checked_mul(unit))
        .ok_or_else(too_big)?;
    // Each fractional digit is worth a tenth of the previous one; digits below 1 bit/s are
    // refused rather than rounded away.
    let mut place = unit;
    for digit in fraction.bytes().map(|b| u64::from(b - b'0')) {
        if place % 10 != 0 {
            return Err(format!(
                "`{text}` has more decimals than whole bits per second"
            ));
        }
        place /= 10;
        bps = bps.checked_add(digit * place).ok_or_else(too_big)?;
    }
    Ok(bps)
}

impl FromStr for Dut {
    type Err = LabError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = |reason: String| LabError::InvalidDut {
            input: s.to_string(),
            reason,
        };
        // Before the text is lowered: a flow table's path keeps its case.
        let trimmed = s.trim();
        if trimmed.len() >= 4 && trimmed[..4].eq_ignore_ascii_case("ovs:") {
            let flows = parse_flows_path(&trimmed[4..]).map_err(invalid)?;
            return Ok(Dut::Ovs { flows: Some(flows) });
        }
        match trimmed.to_ascii_lowercase().as_str() {
            "cable" => Ok(Dut::Cable),
            "bridge" => Ok(Dut::Bridge),
            "router" => Ok(Dut::Router),
            "xdp" => Ok(Dut::Xdp),
            "ovs" => Ok(Dut::Ovs { flows: None }),
            other => {
                if let Some(rest) = other.strip_prefix("testpmd") {
                    // The core is checked where the lab is built (`validate`), not here:
                    // a lab read back under another CPU affinity is still the same lab.
                    return parse_testpmd(rest).map_err(invalid);
                }
                if let Some(rules) = other.strip_prefix("nft:") {
                    let rules = rules
                        .parse::<u32>()
                        .map_err(|_| invalid(format!("`{rules}` is not a number of rules")))?;
                    check_rules(s, rules)?;
                    return Ok(Dut::Nft { rules });
                }
                let Some(rate) = other.strip_prefix("tbf:") else {
                    return Err(invalid("unknown DUT kind".to_string()));
                };
                let rate_bps = parse_rate(rate).map_err(invalid)?;
                check_rate(s, rate_bps)?;
                Ok(Dut::Tbf { rate_bps })
            }
        }
    }
}

/// The canonical text form, which `from_str` reads back to the same value: the rate uses the
/// largest unit that keeps it a whole number.
impl fmt::Display for Dut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dut::Cable => f.write_str("cable"),
            Dut::Bridge => f.write_str("bridge"),
            Dut::Router => f.write_str("router"),
            Dut::Nft { rules } => write!(f, "nft:{rules}"),
            Dut::Ovs { flows: None } => f.write_str("ovs"),
            Dut::Ovs { flows: Some(path) } => write!(f, "ovs:{}", path.display()),
            Dut::Xdp => f.write_str("xdp"),
            Dut::Testpmd { driver, core } => {
                f.write_str("testpmd")?;
                if *driver != TestpmdDriver::AfPacket {
                    write!(f, ":{}", driver.text())?;
                }
                write!(f, "@{core}")
            }
            Dut::Tbf { rate_bps } => {
                let rate_bps = *rate_bps;
                let (value, unit) = [
                    (1_000_000_000, "gbit"),
                    (1_000_000, "mbit"),
                    (1_000, "kbit"),
                ]
                .into_iter()
                .find(|&(scale, _)| rate_bps != 0 && rate_bps % scale == 0)
                .map_or((rate_bps, "bit"), |(scale, unit)| (rate_bps / scale, unit));
                write!(f, "tbf:{value}{unit}")
            }
        }
    }
}

/// Token-bucket settings for a rate; see [`tbf_params`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TbfParams {
    pub rate_bps: u64,
    /// Bucket size in bytes: how much may leave back to back at line speed.
    pub burst_bytes: u64,
    /// Longest time a frame may wait in the queue before it is dropped.
    pub latency_ms: u64,
}

impl TbfParams {
    /// The queue's limit in bytes, as `tc` sets it from the latency: what the rate sends
    /// in that time, plus the bucket. A burst of more is dropped (tbf counts frames without
    /// FCS).
    pub fn limit_bytes(&self) -> u64 {
        self.rate_bps / 8 * self.latency_ms / 1000 + self.burst_bytes
    }
}

/// Largest frame on a 1500-byte MTU veth (Ethernet header included, no FCS).
const MAX_FRAME_BYTES: u64 = 1514;

/// The bucket holds 1 ms of traffic at the rate, but never less than two full-size frames
/// (a smaller bucket would drop every frame larger than it). 1 ms is far above the timer
/// slack of a busy machine, so the shaper reaches its rate, yet short enough that bursts
/// stay small. The queue holds 10 ms of traffic: a shallow shaper buffer, so overload
/// shows as loss quickly instead of latency growing without bound.
pub(crate) fn tbf_params(rate_bps: u64) -> TbfParams {
    TbfParams {
        rate_bps,
        burst_bytes: (rate_bps / 8 / 1000).max(2 * MAX_FRAME_BYTES),
        latency_ms: 10,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_documented_form() {
        assert_eq!("cable".parse::<Dut>().unwrap(), Dut::Cable);
        assert_eq!("Bridge".parse::<Dut>().unwrap(), Dut::Bridge);
        assert_eq!("router".parse::<Dut>().unwrap(), Dut::Router);
        let tbf = |s: &str| match s.parse::<Dut>().unwrap() {
            Dut::Tbf { rate_bps } => rate_bps,
            other => panic!("{s} parsed as {other:?}"),
        };
        assert_eq!(tbf("tbf:100mbit"), 100_000_000);
        assert_eq!(tbf("tbf:1gbit"), 1_000_000_000);
        assert_eq!(tbf("tbf:50mbps"), 50_000_000);
        assert_eq!(tbf("tbf:1.5gbit"), 1_500_000_000);
        assert_eq!(tbf("tbf:800kbit"), 800_000);
        assert_eq!(tbf("tbf:64000"), 64_000);
        assert_eq!(tbf("tbf:64000bit"), 64_000);
        assert_eq!("nft:1000".parse::<Dut>().unwrap(), Dut::Nft { rules: 1000 });
        assert_eq!("NFT:1".parse::<Dut>().unwrap(), Dut::Nft { rules: 1 });
        assert_eq!("xdp".parse::<Dut>().unwrap(), Dut::Xdp);
        let testpmd = |driver, core| Dut::Testpmd { driver, core };
        assert_eq!(
            "testpmd".parse::<Dut>().unwrap(),
            testpmd(TestpmdDriver::AfPacket, default_testpmd_core())
        );
        assert_eq!(
            "testpmd:afxdp@0".parse::<Dut>().unwrap(),
            testpmd(TestpmdDriver::AfXdp, 0)
        );
        assert_eq!(
            "testpmd:afpacket@1".parse::<Dut>().unwrap().to_string(),
            "testpmd@1"
        );
        for bad in ["testpmd:dpdk", "testpmd@x", "testpmdx", "testpmd:"] {
            let e = bad.parse::<Dut>().unwrap_err().to_string();
            assert!(e.contains(bad) && e.contains("testpmd"), "{bad}: {e}");
        }
        assert_eq!("OVS".parse::<Dut>().unwrap(), Dut::Ovs { flows: None });
        // A flow table's path keeps its case and is made absolute.
        let Dut::Ovs { flows: Some(path) } = "Ovs:My.Flows".parse::<Dut>().unwrap() else {
            panic!("ovs:FILE is an ovs DUT with flows")
        };
        assert!(path.is_absolute() && path.ends_with("My.Flows"), "{path:?}");
        assert_eq!(
            "ovs:/etc/Lab.flows".parse::<Dut>().unwrap().to_string(),
            "ovs:/etc/Lab.flows"
        );
        for bad in ["ovs:", "ovsx"] {
            let e = bad.parse::<Dut>().unwrap_err().to_string();
            assert!(
                e.contains(bad) && e.contains("ovs[:FLOWS_FILE]"),
                "{bad}: {e}"
            );
        }
        let long = format!("ovs:/{}", "d".repeat(250));
        let e = long.parse::<Dut>().unwrap_err().to_string();
        assert!(e.contains("longer than 200 bytes"), "{e}");
        // A core out of this process's reach parses (a lab read back is what it is) but is
        // refused where a lab would be built.
        let far = "testpmd@100000".parse::<Dut>().unwrap();
        let e = far.validate().unwrap_err().to_string();
        assert!(
            e.contains("core 100000") && e.contains("its cores: 0"),
            "{e}"
        );
    }

    /// The rule set: one rule per index, distinct addresses, none of the lab's.
    #[test]
    fn the_nft_rule_set_has_its_rules_and_matches_none_of_the_labs_addresses() {
        let set = Dut::Nft { rules: 300 }.nft_ruleset().unwrap();
        let rules: Vec<&str> = set.lines().filter(|l| l.contains(" drop")).collect();
        assert_eq!(rules.len(), 300);
        assert_eq!(rules[0].trim(), "ip daddr 198.19.0.0 drop");
        assert_eq!(rules[299].trim(), "ip daddr 198.19.1.43 drop");
        let distinct: std::collections::BTreeSet<_> = rules.iter().collect();
        assert_eq!(distinct.len(), 300);
        assert!(!set.contains("198.18."));
        assert!(set.contains("hook forward") && set.contains("policy accept"));
        assert_eq!(Dut::Router.nft_ruleset(), None);
    }

    #[test]
    fn bad_forms_are_clear_errors() {
        for bad in [
            "switch",
            "tbf:",
            "tbf:fast",
            "tbf:-5mbit",
            "tbf:1.2.3mbit",
            "tbf:1.5bit",
            "nft:",
            "nft:many",
            "nft:0",
            "nft:100001",
        ] {
            let err = bad.parse::<Dut>().unwrap_err().to_string();
            assert!(err.contains(bad), "{err}");
            assert!(err.contains("cable, bridge, router, tbf:RATE"), "{err}");
        }
        let err = "tbf:0mbit".parse::<Dut>().unwrap_err().to_string();
        assert!(err.contains("between 8kbit and 100gbit"), "{err}");
        let err = "tbf:99999999999999999999gbit"
            .parse::<Dut>()
            .unwrap_err()
            .to_string();
        assert!(err.contains("too large"), "{err}");
        assert!(Dut::Tbf { rate_bps: 0 }.validate().is_err());
    }

    #[test]
    fn display_round_trips() {
        for dut in [
            Dut::Cable,
            Dut::Bridge,
            Dut::Router,
            Dut::Tbf {
                rate_bps: 50_000_000,
            },
            Dut::Tbf {
                rate_bps: 1_500_000_000,
            },
            Dut::Tbf { rate_bps: 12_345 },
            Dut::Nft { rules: 1000 },
            Dut::Xdp,
            Dut::Testpmd {
                driver: TestpmdDriver::AfPacket,
                core: 0,
            },
            Dut::Testpmd {
                driver: TestpmdDriver::AfXdp,
                core: 1,
            },
            Dut::Ovs { flows: None },
            Dut::Ovs {
                flows: Some(PathBuf::from("/srv/Flow Tables/a.flows")),
            },
        ] {
            assert_eq!(dut.to_string().parse::<Dut>().unwrap(), dut);
        }
        assert_eq!(
            Dut::Tbf {
                rate_bps: 50_000_000
            }
            .to_string(),
            "tbf:50mbit"
        );
        assert_eq!(
            Dut::Tbf {
                rate_bps: 1_500_000_000
            }
            .to_string(),
            "tbf:1500mbit"
        );
    }

    #[test]
    fn bucket_fits_full_frames_and_scales_with_rate() {
        assert_eq!(tbf_params(8_000).burst_bytes, 3028);
        assert_eq!(tbf_params(50_000_000).burst_bytes, 6250);
        assert_eq!(tbf_params(1_000_000_000).burst_bytes, 125_000);
        // tc's limit from `latency 10ms`: 10 ms at the rate plus the bucket.
        assert_eq!(tbf_params(50_000_000).limit_bytes(), 68_750);
        assert_eq!(
            "tbf:10mbit"
                .parse::<Dut>()
                .unwrap()
                .tbf()
                .map(|t| t.limit_bytes()),
            Some(15_528)
        );
        assert_eq!(Dut::Bridge.tbf(), None);
    }
}
