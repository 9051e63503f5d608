//! The resolved traffic model handed to the engine, and the checks every flow passes
//! whether it came from a scenario file or from the command line.

use strobe_timing::{Rate, Schedule, ScheduleSpec};
use strobe_wire::{build, trailer, Header, HeaderKind, Payload, WireError};

use crate::error::ModelError;
use crate::line_rate::{check_flow, TxLine};
use crate::location::PortLocation;
use crate::pattern::Pattern;
use crate::size::SizeSpec;
use crate::warning::Warning;

/// Line rate assumed for a port whose speed is not given: 10 Gbit/s.
pub const DEFAULT_PORT_SPEED_BPS: u64 = 10_000_000_000;
/// Largest frame size accepted, FCS included (the usual jumbo limit).
pub const MAX_FRAME_SIZE: u32 = 9216;
/// Flow ids are 16 bits wide in the trailer: ids 0 to 65 535, so 65 536 flows.
pub const MAX_FLOWS: usize = 1 << 16;
/// Transmit workers (cores) a port may have, in a scenario file and on the command line.
pub const MAX_CORES: usize = 256;
/// Bytes of FCS included in every OTG frame size but not in the frame strobe builds.
pub const FCS_LEN: u32 = 4;

/// A complete, validated traffic model.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// File name, or "command line".
    pub source: String,
    pub ports: Vec<PortSpec>,
    pub flows: Vec<FlowSpec>,
    /// Things adjusted on the user's behalf (e.g. the trailer switched off); show them.
    pub warnings: Vec<Warning>,
    /// How the frames are timed (a scenario file's `[run] pacing`).
    pub pacing: Pacing,
}

/// How a run's frames are timed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Pacing {
    /// Each frame at its scheduled departure (the flows' rates and patterns).
    #[default]
    Scheduled,
    /// As fast as the engine goes, deadlines ignored (the engine's cost, a DUT's
    /// throughput); a flow still sends the frames its duration makes, and a real-time
    /// limit may end the run first.
    Unpaced { time_limit_ns: Option<u64> },
}

#[derive(Clone, Debug)]
pub struct PortSpec {
    pub name: String,
    /// Where the port's frames go, e.g. `pcap:out.pcap` or `null`, parsed where it was
    /// read; a `lab:` end until the run-control layer resolves it.
    pub location: PortLocation,
    /// Line rate in bit/s, for percentage rates and byte-denominated gaps.
    pub speed_bps: u64,
    /// Transmit workers (cores) for this port; None = the run's default (`--cores`).
    pub cores: Option<usize>,
}

#[derive(Clone, Debug)]
pub struct FlowSpec {
    pub name: String,
    /// Index in the scenario; the flow id carried in the trailer.
    pub id: u16,
    pub tx_port: String,
    pub rx_ports: Vec<String>,
    pub packet: Vec<HeaderSpec>,
    /// Frame sizes, FCS included.
    pub size: SizeSpec,
    pub size_seed: u64,
    pub payload: Payload,
    /// Fully resolved: percentages and byte gaps already converted with the port speed.
    pub schedule: ScheduleSpec,
    pub metrics: Metrics,
    /// Trailer flow ids of the flow's tag positions (see [`FlowSpec::tag_plan`]), position
    /// 0 being `id`: assigned by the engine when it plans a run, empty until then.
    pub tag_ids: Vec<u16>,
}

/// Most tag positions a flow may have: the tagged fields' values must repeat together
/// within this many frames (each position is counted as a flow of its own).
pub const MAX_TAG_POSITIONS: u64 = 1024;

/// A flow's metric tags (OTG `metric_tags`), resolved: frame `j` of the flow is in position
/// `j % positions.len()`, and each position carries one value of every tag. The engine
/// gives each position a trailer flow id of its own, with its own sequence numbers
/// (`j / positions.len()`), so every position's loss, reordering and latency is counted
/// exactly as a flow's; positions with equal tag values are reported together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TagPlan {
    pub names: Vec<String>,
    /// Width of each tag in bits.
    pub widths: Vec<u32>,
    /// Per position, each tag's value (in `names` order).
    pub positions: Vec<Vec<u128>>,
}

impl TagPlan {
    /// Each distinct tag tuple with the positions that carry it, in order of first use.
    pub fn groups(&self) -> Vec<(Vec<u128>, Vec<usize>)> {
        let mut groups: Vec<(Vec<u128>, Vec<usize>)> = Vec::new();
        let mut index = std::collections::HashMap::new();
        for (r, values) in self.positions.iter().enumerate() {
            let g = *index.entry(values.clone()).or_insert_with(|| {
                groups.push((values.clone(), Vec::new()));
                groups.len() - 1
            });
            groups[g].1.push(r);
        }
        groups
    }
}

/// A tag on a field's bits (OTG's `Pattern.*.MetricTag`): `length` bits from bit `offset`,
/// counted from the field's most significant bit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldTag {
    pub name: String,
    pub field_index: usize,
    pub offset: u32,
    pub length: u32,
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl FlowSpec {
    /// The flow's tag positions, when any field carries a metric tag; an error when the
    /// tagged fields' values do not repeat together within [`MAX_TAG_POSITIONS`] frames.
    pub fn tag_plan(&self) -> Result<Option<TagPlan>, String> {
        let mut tags = Vec::new();
        for h in &self.packet {
            for tag in &h.metric_tags {
                let pattern = h.fields.iter().find(|f| f.field_index == tag.field_index);
                let def = &h.kind.fields()[tag.field_index];
                tags.push((tag, pattern.map(|f| &f.pattern), def));
            }
        }
        if tags.is_empty() {
            return Ok(None);
        }
        let mut period = 1u64;
        for (tag, pattern, _) in &tags {
            let p = pattern.map_or(1, |p| if p.is_constant() { 1 } else { p.period() });
            period = (period / gcd(period, p)).saturating_mul(p);
            if period > MAX_TAG_POSITIONS {
                return Err(format!(
                    "metric tag `{}`: the tagged fields' values repeat together only every {} frames; at most {MAX_TAG_POSITIONS} tag positions are counted — give the tagged fields patterns with fewer values (a smaller `count`, or `values`)",
                    tag.name,
                    if period == u64::MAX { "∞".to_string() } else { period.to_string() }
                ));
            }
        }
        let positions = (0..period)
            .map(|j| {
                tags.iter()
                    .map(|(tag, pattern, def)| {
                        let value = pattern.map_or(def.default, |p| p.value_at(j, def.bit_len));
                        let shift = def.bit_len - tag.offset - tag.length;
                        (value >> shift) & crate::pattern::width_mask(tag.length)
                    })
                    .collect()
            })
            .collect();
        Ok(Some(TagPlan {
            names: tags.iter().map(|(t, _, _)| t.name.clone()).collect(),
            widths: tags.iter().map(|(t, _, _)| t.length).collect(),
            positions,
        }))
    }

    /// The header stack of packet `j`.
    pub fn stack_at(&self, j: u64) -> Vec<Header> {
        self.packet.iter().map(|h| h.header_at(j)).collect()
    }

    /// Bytes of headers in front of the payload.
    pub fn header_len(&self) -> usize {
        self.packet.iter().map(HeaderSpec::wire_len).sum()
    }
}

/// One header of a flow's packet and the patterns of the fields the user set.
#[derive(Clone, Debug)]
pub struct HeaderSpec {
    pub kind: HeaderKind,
    /// Only fields the user set; the rest are computed (auto) or take their default.
    pub fields: Vec<FieldPattern>,
    /// The bytes of a `custom` header; empty otherwise.
    pub custom_bytes: Vec<u8>,
    /// Metric tags on this header's fields (OTG `metric_tags`).
    pub metric_tags: Vec<FieldTag>,
}

#[derive(Clone, Debug)]
pub struct FieldPattern {
    /// Index into `kind.fields()` and `Header::values`.
    pub field_index: usize,
    pub pattern: Pattern,
}

impl HeaderSpec {
    /// A header of `kind` with no field set.
    pub fn new(kind: HeaderKind) -> Self {
        HeaderSpec {
            kind,
            fields: Vec::new(),
            custom_bytes: Vec::new(),
            metric_tags: Vec::new(),
        }
    }

    /// Sets (or replaces) the pattern of one field.
    pub fn set(&mut self, field_index: usize, pattern: Pattern) {
        match self
            .fields
            .iter_mut()
            .find(|f| f.field_index == field_index)
        {
            Some(existing) => existing.pattern = pattern,
            None => self.fields.push(FieldPattern {
                field_index,
                pattern,
            }),
        }
    }

    /// The header of packet `j`: every set field at its `j`-th value; unset fields stay
    /// `None` so that auto fields are computed (a checksum the user set is a custom value).
    pub fn header_at(&self, j: u64) -> Header {
        let mut header = if self.kind == HeaderKind::Custom {
            Header::custom(self.custom_bytes.clone())
        } else {
            Header::new(self.kind)
        };
        let defs = self.kind.fields();
        for field in &self.fields {
            if let (Some(slot), Some(def)) = (
                header.values.get_mut(field.field_index),
                defs.get(field.field_index),
            ) {
                *slot = Some(field.pattern.value_at(j, def.bit_len));
            }
        }
        header
    }

    /// Bytes this header occupies (the same in every packet: fields that decide the length
    /// are refused a varying pattern).
    pub fn wire_len(&self) -> usize {
        match self.kind.fixed_len() {
            Some(len) => len,
            None if self.kind == HeaderKind::Custom => self.custom_bytes.len(),
            None => self.header_at(0).wire_len(),
        }
    }
}

/// What is measured for a flow (OTG `Flow.Metrics`, resolved).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Metrics {
    pub enable: bool,
    pub loss: bool,
    pub timestamps: bool,
    pub latency: Option<LatencyMode>,
    /// Resolved: write the instrumentation trailer into every frame.
    pub instrument: bool,
}

/// RFC 1242 latency definitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LatencyMode {
    /// Last bit out to first bit in.
    StoreForward,
    /// First bit out to first bit in.
    CutThrough,
}

impl LatencyMode {
    /// OTG spelling.
    pub fn name(self) -> &'static str {
        match self {
            LatencyMode::StoreForward => "store_forward",
            LatencyMode::CutThrough => "cut_through",
        }
    }
}

/// Files a scenario refers to (empirical gap tables, captures to replay). Paths are as
/// written in the scenario; the caller resolves them, typically relative to the file.
pub trait Resources {
    fn read_text(&self, path: &str) -> Result<String, String>;
    /// Departure timestamps, in nanoseconds, of every packet of a capture.
    fn read_capture_timestamps(&self, path: &str) -> Result<Vec<u64>, String>;
}

/// Resources for scenarios that refer to no files (tests, built-in flows): every read is
/// refused with a message naming the path.
pub struct NoFiles;

impl Resources for NoFiles {
    fn read_text(&self, path: &str) -> Result<String, String> {
        Err(format!("`{path}`: this scenario cannot read files"))
    }
    fn read_capture_timestamps(&self, path: &str) -> Result<Vec<u64>, String> {
        Err(format!("`{path}`: this scenario cannot read files"))
    }
}

/// The parts of a flow an error can point at; each front end maps them to its own
/// locations (a scenario path with line and column, or a command-line flag).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Part {
    Packet,
    Size,
    Metrics,
    Instrument,
    Rate,
    Timing,
    Duration,
}

/// Metrics as asked for, before the trailer decision.
#[derive(Clone, Debug)]
pub(crate) struct MetricsRequest {
    pub enable: bool,
    pub loss: bool,
    pub timestamps: bool,
    pub latency: Option<LatencyMode>,
    /// `Some` when the user said explicitly whether to write the trailer.
    pub instrument: Option<bool>,
    /// The user explicitly asked for a measurement that needs the trailer.
    pub demanded: bool,
}

impl MetricsRequest {
    /// strobe's default: measure everything, trailer on if it fits.
    pub fn measure_all() -> Self {
        MetricsRequest {
            enable: true,
            loss: true,
            timestamps: true,
            latency: Some(LatencyMode::StoreForward),
            instrument: None,
            demanded: false,
        }
    }
}

/// A flow as parsed, before the checks that need all of it at once.
pub(crate) struct FlowDraft {
    pub name: String,
    pub id: u16,
    pub tx_port: String,
    pub rx_ports: Vec<String>,
    pub packet: Vec<HeaderSpec>,
    pub size: SizeSpec,
    pub size_seed: u64,
    pub payload: Payload,
    pub schedule: ScheduleSpec,
    pub metrics: MetricsRequest,
    /// The tx port's line rate the schedule must fit; None skips the check.
    pub line: Option<TxLine>,
}

/// Validates a drafted flow and decides about the trailer, so the engine never trips.
pub(crate) fn finish_flow(
    draft: FlowDraft,
    at: &dyn Fn(Part, String) -> ModelError,
    warnings: &mut Vec<Warning>,
) -> Result<FlowSpec, ModelError> {
    if draft.packet.is_empty() {
        return Err(at(
            Part::Packet,
            "the packet has no headers — give at least one, e.g. ethernet".to_string(),
        ));
    }
    check_size_shape(&draft.size).map_err(|m| at(Part::Size, m))?;
    let header_len: usize = draft.packet.iter().map(HeaderSpec::wire_len).sum();
    let (min, max) = (draft.size.min(), draft.size.max());
    let smallest_fit = header_len as u32 + FCS_LEN;
    if min < smallest_fit {
        return Err(at(
            Part::Size,
            format!(
                "frame size {min} is too small for the {header_len} bytes of headers — sizes include the 4-byte FCS, so at least {smallest_fit} is needed (accepted: {smallest_fit} to {MAX_FRAME_SIZE})"
            ),
        ));
    }
    // Building both extremes proves every size in between builds too: only the payload
    // length changes.
    let stack: Vec<Header> = draft.packet.iter().map(|h| h.header_at(0)).collect();
    for size in [min, max] {
        build(&stack, (size - FCS_LEN) as usize, &draft.payload).map_err(|e| match e {
            WireError::FrameTooShort { .. } | WireError::FrameTooLong { .. } => {
                at(Part::Size, e.to_string())
            }
            _ => at(Part::Packet, e.to_string()),
        })?;
    }

    let metrics = resolve_metrics(&draft, header_len, min, at, warnings)?;
    check_tags(&draft, &metrics, at)?;
    check_rate(&draft.schedule.rate).map_err(|m| at(Part::Rate, m))?;
    check_schedule(&draft.schedule, at)?;
    if let Some(line) = &draft.line {
        check_flow(&draft.schedule, &draft.size, line).map_err(|(part, m)| at(part, m))?;
    }

    Ok(FlowSpec {
        name: draft.name,
        id: draft.id,
        tx_port: draft.tx_port,
        rx_ports: draft.rx_ports,
        packet: draft.packet,
        size: draft.size,
        size_seed: draft.size_seed,
        payload: draft.payload,
        schedule: draft.schedule,
        metrics,
        tag_ids: Vec::new(),
    })
}

/// Metric tags: unique names, and values that repeat within [`MAX_TAG_POSITIONS`] frames on
/// a flow whose frames carry the trailer (a tag position is told by its trailer flow id).
fn check_tags(
    draft: &FlowDraft,
    metrics: &Metrics,
    at: &dyn Fn(Part, String) -> ModelError,
) -> Result<(), ModelError> {
    let names: Vec<&str> = draft
        .packet
        .iter()
        .flat_map(|h| h.metric_tags.iter().map(|t| t.name.as_str()))
        .collect();
    let Some(first) = names.first() else {
        return Ok(());
    };
    if let Some(dup) = names
        .iter()
        .enumerate()
        .find(|(i, n)| names[..*i].contains(n))
        .map(|(_, n)| n)
    {
        return Err(at(
            Part::Packet,
            format!("metric tag `{dup}` is named twice in the flow — give each tag its own name"),
        ));
    }
    if !metrics.instrument {
        return Err(at(
            Part::Metrics,
            format!(
                "metric tag `{first}` needs the flow's metrics enabled (tagged frames are told apart by the instrumentation trailer) — enable metrics or remove the tags"
            ),
        ));
    }
    let probe = FlowSpec {
        name: draft.name.clone(),
        id: draft.id,
        tx_port: String::new(),
        rx_ports: Vec::new(),
        packet: draft.packet.clone(),
        size: draft.size.clone(),
        size_seed: 0,
        payload: draft.payload.clone(),
        schedule: draft.schedule.clone(),
        metrics: metrics.clone(),
        tag_ids: Vec::new(),
    };
    probe
        .tag_plan()
        .map(|_| ())
        .map_err(|m| at(Part::Packet, m))
}

fn check_size_shape(size: &SizeSpec) -> Result<(), String> {
    match size {
        SizeSpec::Fixed(_) => {}
        SizeSpec::Increment { start, end, step } => {
            if start > end {
                return Err(format!(
                    "increment start {start} is above end {end} — start must not exceed end"
                ));
            }
            if *step == 0 {
                return Err("increment step must be at least 1".to_string());
            }
        }
        SizeSpec::Random { min, max } => {
            if min > max {
                return Err(format!(
                    "random min {min} is above max {max} — min must not exceed max"
                ));
            }
        }
        SizeSpec::WeightPairs(pairs) => {
            if pairs.iter().all(|(_, w)| *w == 0) {
                return Err(
                    "weight_pairs needs at least one size with a weight above zero".to_string(),
                );
            }
        }
    }
    let max = size.max();
    if max > MAX_FRAME_SIZE {
        return Err(format!(
            "frame size {max} is above the largest accepted size {MAX_FRAME_SIZE} (sizes include the 4-byte FCS)"
        ));
    }
    Ok(())
}

fn resolve_metrics(
    draft: &FlowDraft,
    header_len: usize,
    min_size: u32,
    at: &dyn Fn(Part, String) -> ModelError,
    warnings: &mut Vec<Warning>,
) -> Result<Metrics, ModelError> {
    let request = &draft.metrics;
    let needed = header_len as u32 + trailer::LEN as u32 + FCS_LEN;
    let fits = min_size >= needed;
    let no_fit = || {
        format!(
            "the {}-byte instrumentation trailer does not fit in {min_size}-byte frames behind {header_len} bytes of headers — use frame sizes of at least {needed}",
            trailer::LEN
        )
    };
    let instrument = match request.instrument {
        Some(true) if !fits => {
            return Err(at(
                Part::Instrument,
                format!("{}, or set instrument = false", no_fit()),
            ))
        }
        Some(false) if request.demanded => {
            return Err(at(
                Part::Instrument,
                "loss, latency and timestamps are measured with the instrumentation trailer, which instrument = false turns off — remove one of the two".to_string(),
            ))
        }
        Some(explicit) => explicit,
        None if !request.enable => false,
        None if fits => true,
        None if request.demanded => {
            return Err(at(
                Part::Metrics,
                format!("{}, or turn off loss, latency and timestamps", no_fit()),
            ))
        }
        None => {
            warnings.push(Warning::TrailerDoesNotFit {
                flow: draft.name.clone(),
                trailer_bytes: trailer::LEN,
                smallest_frame_bytes: u64::from(min_size),
                header_bytes: header_len as u64,
                fitting_frame_bytes: u64::from(needed),
            });
            false
        }
    };
    Ok(if instrument {
        Metrics {
            enable: request.enable,
            loss: request.loss,
            timestamps: request.timestamps,
            latency: request.latency,
            instrument,
        }
    } else {
        // Receive-side measurements identify a flow's frames by the trailer.
        Metrics {
            enable: request.enable,
            loss: false,
            timestamps: false,
            latency: None,
            instrument,
        }
    })
}

fn check_rate(rate: &Rate) -> Result<(), String> {
    let (value, unit) = match rate {
        Rate::Pps(pps) => (*pps, "packets per second"),
        Rate::L1BitsPerSec(bps) => (*bps, "bits per second"),
    };
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(format!("the rate must be above zero — got {value} {unit}"))
    }
}

fn check_schedule(
    spec: &ScheduleSpec,
    at: &dyn Fn(Part, String) -> ModelError,
) -> Result<(), ModelError> {
    let Err(error) = Schedule::new(spec.clone()) else {
        return Ok(());
    };
    // Schedule::new names the problem but not which part of the flow holds it; trying the
    // parts on their own attributes the error to `rate`, `timing` or `duration`.
    let rate_alone = ScheduleSpec {
        rate: spec.rate,
        ..ScheduleSpec::default()
    };
    if let Err(e) = Schedule::new(rate_alone) {
        return Err(at(Part::Rate, e.to_string()));
    }
    let without_duration = ScheduleSpec {
        duration: ScheduleSpec::default().duration,
        start_delay_ns: 0,
        ..spec.clone()
    };
    if let Err(e) = Schedule::new(without_duration) {
        return Err(at(Part::Timing, e.to_string()));
    }
    Err(at(Part::Duration, error.to_string()))
}
