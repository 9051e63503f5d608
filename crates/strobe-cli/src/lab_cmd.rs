//! `strobe lab up|status|down`, and `lab:tx` / `lab:rx` port names that resolve to the
//! lab's interfaces.

use clap::{Args, Subcommand};
use strobe_control::lab::{Dut, Endpoint, Lab, LabConfig};

use crate::failure::Failure;

/// The lab `strobe lab` and `--lab` use when no prefix is given.
pub use strobe_control::ports::{
    lab_up_command, resolve_lab_location, DEFAULT_LAB_PREFIX as DEFAULT_PREFIX,
};

/// `--help` text of a transmit port (`gen --port`): every location form strobe opens.
pub const TX_PORT_HELP: &str = "Port to send on, one of:
  lab:tx, lab:rx                 the lab's ends over AF_PACKET (`strobe lab up`; another lab: --lab PREFIX);
                                 lab:tx@afxdp, lab:tx@afpacket-gso, lab:tx@xdp-live for those backends
  afpacket:[NETNS/]IFACE         AF_PACKET on any interface (NETNS: a network namespace)
  afpacket-gso:[NETNS/]IFACE     AF_PACKET sending UDP segmentation batches (transmit only)
  afxdp:[NETNS/]IFACE[@QUEUE]    AF_XDP on one queue (default 0; --cores N takes QUEUE…QUEUE+N-1)
  xdp-live:[NETNS/]IFACE         the kernel's XDP live-frame mode: no socket, no skb (transmit only)
  auto:[NETNS/]IFACE[@QUEUE]     AF_XDP when it works there, else AF_PACKET
  pcap:FILE                      a nanosecond pcap with each frame's scheduled time (transmit only)
  null                           drops every frame after all per-packet work (engine cost)
(xdp-count: only receives)";

/// The port forms that receive, for the `--help` of receiving ports (`gen --rx`,
/// `reflect PORT`); a macro so that `concat!` can put each command's own first line above.
macro_rules! rx_port_forms {
    () => {
        "
  lab:rx, lab:tx                 the lab's ends over AF_PACKET (`strobe lab up`; another lab: --lab PREFIX);
                                 lab:rx@afxdp for AF_XDP, lab:rx@afxdp-all for AF_XDP on
                                 every queue (what xdp-live senders need)
  afpacket:[NETNS/]IFACE         AF_PACKET on any interface, kernel receive timestamps
  afxdp:[NETNS/]IFACE[@QUEUE]    AF_XDP on one queue (default 0); @* every queue
  auto:[NETNS/]IFACE[@QUEUE]     AF_XDP when it works there, else AF_PACKET
  xdp-count:[NETNS/]IFACE        every frame counted in the kernel by an XDP program, none
                                 copied to user space (gen --rx only; lab:rx@xdp-count)
(pcap:, null, afpacket-gso: and xdp-live: only transmit)"
    };
}
pub(crate) use rx_port_forms;

#[derive(Args)]
pub struct LabArgs {
    #[command(subcommand)]
    command: LabCommand,
    /// Name prefix of the lab's namespaces, to run several labs side by side.
    #[arg(long, default_value = DEFAULT_PREFIX, global = true)]
    prefix: String,
}

#[derive(Subcommand)]
enum LabCommand {
    /// Create the lab (idempotent): generator side, device under test, sink side.
    Up {
        /// Device under test: cable | bridge | router | tbf:RATE (e.g. tbf:100mbit) |
        /// nft:RULES (the router with RULES nftables forward rules, e.g. nft:1000) | xdp (an
        /// XDP forwarder) | testpmd[:afpacket|:afxdp][@CORE] (DPDK testpmd forwarding,
        /// busy-polling CORE; without one, a core strobe does not use when there is one) |
        /// ovs[:FLOWS_FILE] (an Open vSwitch bridge, learning or with the OpenFlow flows in
        /// FLOWS_FILE, `ovs-ofctl add-flows` syntax).
        #[arg(long, default_value = "router")]
        dut: String,
        /// Receive packet steering on the lab's veths: on moves receive work off the core
        /// strobe transmits from; off leaves it on the sending core, as a plain veth does
        /// (steadier paced timing in a VM, at a lower top rate). Applied to a lab that is
        /// already up as well. Unless given: on, but off for testpmd and ovs (user-space
        /// forwarders, whose core the steering would load).
        #[arg(long, value_parser = ["on", "off"])]
        rps: Option<String>,
    },
    /// Show the lab, its interfaces and addresses, and the port names to use.
    Status,
    /// Remove the lab and everything it created (idempotent).
    Down,
}

pub fn run(args: LabArgs) -> Result<(), Failure> {
    match args.command {
        LabCommand::Up { dut, rps } => {
            let dut: Dut = dut
                .parse()
                .map_err(|e| Failure::BadInput(format!("--dut {dut}: {e}")))?;
            let lab = strobe_control::lab::up(&LabConfig {
                prefix: args.prefix,
                dut: dut.clone(),
                receive_steering: match rps.as_deref() {
                    Some(rps) => rps == "on",
                    None => dut.steers_receive_by_default(),
                },
            })
            .map_err(lab_failure)?;
            print_lab(&lab);
        }
        LabCommand::Status => {
            match strobe_control::lab::status(&args.prefix).map_err(lab_failure)? {
                Some(lab) => print_lab(&lab),
                None => println!(
                    "no lab with prefix `{}` ({} creates one)",
                    args.prefix,
                    lab_up_command(&args.prefix)
                ),
            }
        }
        LabCommand::Down => {
            if strobe_control::lab::down(&args.prefix).map_err(lab_failure)? {
                println!("lab `{}` removed", args.prefix);
            } else {
                println!("no lab with prefix `{}`: nothing to remove", args.prefix);
            }
        }
    }
    Ok(())
}

/// Lab errors from missing privileges or bad names are the user's to fix.
pub fn lab_failure(e: strobe_control::lab::LabError) -> Failure {
    Failure::BadInput(e.to_string())
}

fn mac(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The backends a lab endpoint takes as `lab:ROLE@BACKEND` (the first: plain `lab:ROLE`).
fn lab_backends(role: &str) -> &'static [(&'static str, &'static str)] {
    if role == "tx" {
        &[
            ("", "AF_PACKET"),
            ("@afxdp", "AF_XDP"),
            ("@afpacket-gso", "AF_PACKET with UDP segmentation"),
            ("@xdp-live", "XDP live frames, generated in the kernel"),
        ]
    } else {
        &[
            ("", "AF_PACKET"),
            ("@afxdp", "AF_XDP on queue 0"),
            ("@afxdp-all", "AF_XDP on every queue"),
            ("@xdp-count", "counted in the kernel by XDP"),
        ]
    }
}

fn print_endpoint(role: &str, lab: &Lab, e: &Endpoint) {
    println!(
        "  {role}: {} in namespace {} — MAC {}, {}/{}, {}; send frames to MAC {}",
        e.iface,
        e.netns,
        mac(e.mac),
        e.ipv4,
        e.prefix_len_v4,
        e.ipv6,
        mac(e.next_hop_mac)
    );
    println!(
        "      port: {}  (or afxdp: {})",
        lab.port(e, "afpacket"),
        lab.port(e, "afxdp")
    );
    let shorthands: Vec<String> = lab_backends(role)
        .iter()
        .map(|(suffix, what)| format!("lab:{role}{suffix} ({what})"))
        .collect();
    println!("      as: {}", shorthands.join(", "));
}

fn print_lab(lab: &Lab) {
    println!(
        "lab `{}`, device under test: {} ({})",
        lab.prefix,
        lab.dut,
        lab.dut.describe()
    );
    let details = strobe_control::lab::details(lab);
    println!("  runs: {}, {}", details.software, details.runs_on);
    if let Some(log) = strobe_control::lab::process_log(lab) {
        println!("  log: {}", log.display());
    }
    print_endpoint("tx", lab, &lab.tx);
    print_endpoint("rx", lab, &lab.rx);
    match strobe_control::lab::steering(lab) {
        Ok(s) => println!(
            "  queues: {} per veth; receive steering (RPS): {}",
            s.queues,
            if s.receive_steering { "on" } else { "off" }
        ),
        Err(e) => println!("  queues: unknown ({e})"),
    }
    println!(
        "  e.g.: strobe gen{} --port lab:tx --rx lab:rx --udp {}:1000-{}:2000 --rate 100kpps --count 100000",
        lab_option(&lab.prefix),
        lab.tx.ipv4,
        lab.rx.ipv4
    );
}

/// The `--lab PREFIX` option that makes a command use the lab `prefix` (nothing for the
/// default lab), with a leading space.
pub fn lab_option(prefix: &str) -> String {
    if prefix == DEFAULT_PREFIX {
        String::new()
    } else {
        format!(" --lab {prefix}")
    }
}
