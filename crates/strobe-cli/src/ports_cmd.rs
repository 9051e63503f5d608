//! `strobe ports`: the interfaces of a namespace (or of a lab's three), what timestamps each
//! can give, and which source strobe's latency measurement will use there.

use std::collections::BTreeMap;
use std::path::Path;

use clap::Args;
use serde_json::{json, Value};
use strobe_control::host::{
    interfaces, query_ts_info, rx_metadata_timestamps, xsk_tx_timestamps, TsInfo, NETNS_DIR,
};

use strobe_control::floor_memory::{FloorMemory, MeasuredBy, RememberedFloor};

use crate::failure::Failure;

#[derive(Args)]
pub struct PortsArgs {
    /// List the interfaces of this network namespace (default: the one strobe runs in).
    #[arg(long, value_name = "NS", conflicts_with = "lab")]
    netns: Option<String>,
    /// List the interfaces of a strobe lab's namespaces PREFIX-tx, PREFIX-rx, PREFIX-dut.
    #[arg(
        long,
        value_name = "PREFIX",
        num_args = 0..=1,
        default_missing_value = "strobe"
    )]
    lab: Option<String>,
    /// Measure the transmit floor of this port instead: what one hand-over costs and how
    /// closely frames handed over together leave (sends a few hundred 60-byte probe frames
    /// from and to one locally administered MAC), e.g. lab:tx, afpacket:NS/IFACE, afxdp:IFACE.
    /// The floor is remembered for later paced runs on the path (runs themselves never send
    /// probe frames: they start from the remembered floor or learn it from their own frames).
    #[arg(long, value_name = "PORT")]
    floor: Option<String>,
    /// With --floor: most frames per hand-over, for the paced ceiling.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u16).range(1..=256))]
    batch: u16,
    /// Print machine-readable JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// `strobe ports --floor PORT`: the port's floor and the paced ceiling it gives.
fn floor(args: &PortsArgs, port: &str) -> Result<(), Failure> {
    let prefix = args.lab.as_deref().unwrap_or("strobe");
    let location = crate::lab_cmd::resolve_lab_location(port, prefix)?;
    let (floor, sent) = strobe_control::ports::probe_floor(&location)
        .map_err(|e| Failure::Runtime(format!("--floor {port}: {e}")))?;
    let batch = usize::from(args.batch);
    let ceiling = floor.ceiling_pps(batch);
    let memory = FloorMemory::open();
    // The measurement stands even where it cannot be kept: said, not refused.
    if let Err(e) = memory.remember(&[(location.clone(), floor)], MeasuredBy::Probe) {
        eprintln!(
            "warning: --floor {port}: cannot remember the floor in {}: {e}; later runs \
             learn it from their own frames (or give it with --floor)",
            memory
                .path()
                .map_or("(no state directory)".into(), |p| p.display().to_string())
        );
    }
    if args.json {
        let doc = json!({
            "port": port,
            "location": location,
            "handover_ns": floor.handover_ns,
            "spacing_ns": floor.spacing_ns,
            "max_batch": batch,
            "ceiling_pps": ceiling,
            "probe_frames": sent,
        });
        println!("{doc:#}");
    } else {
        println!(
            "{port} ({location}): one hand-over {}, frames handed over together {} apart; \
             paced ceiling {:.0} pps with up to {batch} frames per hand-over ({sent} probe \
             frames; remembered for later paced runs on this path, or give it to gen as \
             --floor {}ns/{}ns)",
            strobe_control::text::duration_text(floor.handover_ns),
            strobe_control::text::duration_text(floor.spacing_ns),
            ceiling,
            floor.handover_ns,
            floor.spacing_ns
        );
    }
    Ok(())
}

/// The interfaces of one namespace (None = strobe's own).
struct Namespace {
    name: Option<String>,
    interfaces: Vec<TsInfo>,
    /// Per interface: whether its driver answers the XDP RX metadata timestamp kfunc
    /// (`xdp-count --hw-timestamps` needs it); None where the kernel cannot say.
    xdp_rx_timestamps: Vec<Option<bool>>,
    /// Per interface: whether its driver stamps AF_XDP frames that ask in their TX metadata
    /// (zero-copy); None where the kernel cannot say.
    xsk_tx_timestamps: Vec<Option<bool>>,
}

fn netns_exists(ns: &str) -> bool {
    Path::new(NETNS_DIR).join(ns).exists()
}

fn scan(netns: Option<&str>) -> Result<Namespace, Failure> {
    if let Some(ns) = netns {
        if !netns_exists(ns) {
            return Err(Failure::BadInput(format!(
                "network namespace `{ns}` not found in {NETNS_DIR} (`ip netns list` shows them)"
            )));
        }
    }
    let runtime = |e: strobe_control::host::IoError| Failure::Runtime(e.to_string());
    let names = interfaces(netns).map_err(runtime)?;
    let interfaces = names
        .iter()
        .map(|iface| query_ts_info(netns, iface))
        .collect::<Result<Vec<_>, _>>()
        .map_err(runtime)?;
    // An interface gone between the listing and the question reads as "cannot say".
    let xdp_rx_timestamps = names
        .iter()
        .map(|iface| rx_metadata_timestamps(netns, iface).ok().flatten())
        .collect();
    let xsk_tx_timestamps = names
        .iter()
        .map(|iface| xsk_tx_timestamps(netns, iface).ok().flatten())
        .collect();
    Ok(Namespace {
        name: netns.map(str::to_string),
        interfaces,
        xdp_rx_timestamps,
        xsk_tx_timestamps,
    })
}

pub fn run(args: PortsArgs) -> Result<(), Failure> {
    if let Some(port) = &args.floor {
        return floor(&args, port);
    }
    let namespaces = match (&args.netns, &args.lab) {
        (_, Some(prefix)) => {
            let names = ["tx", "rx"].map(|side| format!("{prefix}-{side}"));
            if let Some(missing) = names.iter().find(|ns| !netns_exists(ns)) {
                return Err(Failure::BadInput(format!(
                    "no lab with prefix `{prefix}` is up (namespace `{missing}` not found): \
                     `strobe lab up --prefix {prefix}` creates it"
                )));
            }
            // A cable lab has no DUT namespace.
            let dut = format!("{prefix}-dut");
            names
                .iter()
                .chain(netns_exists(&dut).then_some(&dut))
                .map(|ns| scan(Some(ns)))
                .collect::<Result<Vec<_>, _>>()?
        }
        (netns, None) => vec![scan(netns.as_deref())?],
    };
    let floors = FloorMemory::open().all();
    if args.json {
        let doc = json!({ "namespaces": namespaces.iter().map(|ns| namespace_json(ns, &floors)).collect::<Vec<_>>() });
        println!("{doc:#}");
    } else {
        for ns in &namespaces {
            print_table(ns, &floors);
        }
    }
    Ok(())
}

/// The remembered floors of paths through `iface` in `netns` (one per backend).
fn floors_of<'a>(
    floors: &'a BTreeMap<String, RememberedFloor>,
    netns: Option<&str>,
    iface: &str,
) -> Vec<(&'a String, &'a RememberedFloor)> {
    floors
        .iter()
        .filter(|(location, _)| {
            strobe_control::Location::parse(location)
                .is_ok_and(|l| l.interface() == Some((netns, iface)))
        })
        .collect()
}

/// A remembered floor in words: its two figures, how and how long ago it was measured.
fn floor_text(location: &str, f: &RememberedFloor) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!(
        "{location}: floor {} per hand-over, {} back to back (measured by {} {} ago)",
        strobe_control::text::duration_text(f.handover_ns),
        strobe_control::text::duration_text(f.spacing_ns),
        match f.measured_by {
            MeasuredBy::Run => "a paced run",
            MeasuredBy::Probe => "strobe ports --floor",
        },
        strobe_control::text::duration_text(
            now.saturating_sub(f.unix_s).saturating_mul(1_000_000_000)
        ),
    )
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

fn print_table(ns: &Namespace, floors: &BTreeMap<String, RememberedFloor>) {
    match &ns.name {
        Some(name) => println!("network namespace {name}:"),
        None => println!("this network namespace:"),
    }
    let width = ns
        .interfaces
        .iter()
        .map(|i| i.iface.len())
        .max()
        .unwrap_or(0)
        .max("interface".len());
    println!(
        "  {:<width$}  sw-tx  sw-rx  hw-tx  hw-rx  {:<10}  xdp-rx-ts  xsk-tx-ts  latency timestamps",
        "interface", "PHC"
    );
    let xdp = ns.xdp_rx_timestamps.iter().zip(&ns.xsk_tx_timestamps);
    for (info, (xdp_ts, xsk_ts)) in ns.interfaces.iter().zip(xdp) {
        println!(
            "  {:<width$}  {:<5}  {:<5}  {:<5}  {:<5}  {:<10}  {:<9}  {:<9}  {}",
            info.iface,
            yes_no(info.software_tx()),
            yes_no(info.software_rx()),
            yes_no(info.hardware_tx()),
            yes_no(info.hardware_rx()),
            info.phc_path().unwrap_or_else(|| "none".into()),
            xdp_ts.map_or("?", yes_no),
            xsk_ts.map_or("?", yes_no),
            info.latency_source(),
        );
    }
    let remembered: Vec<String> = ns
        .interfaces
        .iter()
        .flat_map(|info| floors_of(floors, ns.name.as_deref(), &info.iface))
        .map(|(location, f)| floor_text(location, f))
        .collect();
    if !remembered.is_empty() {
        println!("  remembered transmit floors (where paced runs on these paths start):");
        for line in remembered {
            println!("    {line}");
        }
    }
}

fn namespace_json(ns: &Namespace, floors: &BTreeMap<String, RememberedFloor>) -> Value {
    json!({
        "netns": ns.name,
        "interfaces": ns.interfaces.iter().zip(ns.xdp_rx_timestamps.iter().zip(&ns.xsk_tx_timestamps)).map(|(info, (xdp_ts, xsk_ts))| json!({
            "name": info.iface,
            "software_tx": info.software_tx(),
            "software_rx": info.software_rx(),
            "hardware_tx": info.hardware_tx(),
            "hardware_rx": info.hardware_rx(),
            "hardware_rx_all": info.hardware_rx_all(),
            "capabilities": info.capabilities(),
            "so_timestamping": info.so_timestamping,
            "hardware_tx_modes": info.tx_type_names(),
            "hardware_rx_filters": info.rx_filter_names(),
            "phc": info.phc_path(),
            "xdp_rx_metadata_timestamp": xdp_ts,
            "xsk_tx_metadata_timestamp": xsk_ts,
            "latency_source": info.latency_source().name(),
            "latency_source_detail": info.latency_source().to_string(),
            "floors": floors_of(floors, ns.name.as_deref(), &info.iface)
                .into_iter()
                .map(|(location, f)| json!({ "location": location, "floor": f }))
                .collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}
