//! Header kinds and their field tables.
//!
//! Every header except `custom` has a fixed layout described by a static table of
//! [`FieldDef`]s, named after the Open Traffic Generator (OTG) header fields. Field values are
//! plain unsigned integers whatever their display format; a [`Header`] holds one optional
//! value per table entry, `None` meaning "compute it (auto) or use the default".

use crate::WireError;

/// How a field's value is meant to be read and written by people (the wire sees integers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldFormat {
    Integer,
    /// 48-bit MAC address.
    Mac,
    /// 32-bit IPv4 address.
    Ipv4,
    /// 128-bit IPv6 address.
    Ipv6,
    /// 16-bit Internet checksum; computed by `build` unless set explicitly.
    Checksum,
}

/// One field of a header's fixed layout.
#[derive(Clone, Copy, Debug)]
pub struct FieldDef {
    pub name: &'static str,
    /// Offset from the header start, MSB first; [`FieldDef::OFF_WIRE`] for fields that are
    /// not part of the header bytes (see [`FieldDef::on_wire`]).
    pub bit_offset: u32,
    pub bit_len: u32,
    pub format: FieldFormat,
    /// OTG default, used when the field is unset and not auto.
    pub default: u128,
    /// Computed from the stack when the user leaves the field unset.
    pub auto: bool,
    /// Set for a field that is another view of bits owned by the named field (IPv4 `dscp`
    /// and `ecn` overlay `priority`). `build` writes such a field only when it is set
    /// explicitly, after the field it overlays, so it overrides just its own bits.
    pub alias_of: Option<&'static str>,
    /// Set for a flag that says whether optional fields are present (GRE
    /// `checksum_present`, the GTP flags): it decides the header's length, so it must keep
    /// one value for every packet of a flow (templates have one layout).
    pub shapes_layout: bool,
}

impl FieldDef {
    /// `bit_offset` of a field that never appears in the header bytes. It is deliberately
    /// far out of range so that writing it through a bit offset panics instead of silently
    /// corrupting a neighbour.
    pub const OFF_WIRE: u32 = u32::MAX;

    /// Largest value the field holds: 2^bit_len - 1.
    pub fn max(&self) -> u128 {
        if self.bit_len >= 128 {
            u128::MAX
        } else {
            (1u128 << self.bit_len) - 1
        }
    }

    /// False for fields that carry metadata only (Ethernet `pfc_queue`, which selects the
    /// priority queue a frame is sent on but is not a header bit).
    pub fn on_wire(&self) -> bool {
        self.bit_offset != Self::OFF_WIRE
    }

    const fn new(
        name: &'static str,
        bit_offset: u32,
        bit_len: u32,
        format: FieldFormat,
        default: u128,
    ) -> Self {
        FieldDef {
            name,
            bit_offset,
            bit_len,
            format,
            default,
            auto: false,
            alias_of: None,
            shapes_layout: false,
        }
    }

    const fn computed(mut self) -> Self {
        self.auto = true;
        self
    }

    const fn alias(mut self, of: &'static str) -> Self {
        self.alias_of = Some(of);
        self
    }

    const fn layout_flag(mut self) -> Self {
        self.shapes_layout = true;
        self
    }
}

const fn int(name: &'static str, bit_offset: u32, bit_len: u32, default: u128) -> FieldDef {
    FieldDef::new(name, bit_offset, bit_len, FieldFormat::Integer, default)
}

const fn mac(name: &'static str, bit_offset: u32) -> FieldDef {
    FieldDef::new(name, bit_offset, 48, FieldFormat::Mac, 0)
}

/// A MAC field with a default other than zero (the pause frames' multicast destination).
const fn mac_default(name: &'static str, bit_offset: u32, default: u128) -> FieldDef {
    FieldDef::new(name, bit_offset, 48, FieldFormat::Mac, default)
}

const fn ipv4(name: &'static str, bit_offset: u32) -> FieldDef {
    FieldDef::new(name, bit_offset, 32, FieldFormat::Ipv4, 0)
}

const fn ipv6(name: &'static str, bit_offset: u32) -> FieldDef {
    FieldDef::new(name, bit_offset, 128, FieldFormat::Ipv6, 0)
}

const fn checksum(name: &'static str, bit_offset: u32) -> FieldDef {
    FieldDef::new(name, bit_offset, 16, FieldFormat::Checksum, 0).computed()
}

static ETHERNET: &[FieldDef] = &[
    mac("dst", 0),
    mac("src", 48),
    int("ether_type", 96, 16, 0xFFFF).computed(),
    FieldDef::new("pfc_queue", FieldDef::OFF_WIRE, 3, FieldFormat::Integer, 0),
];

// OTG's VLAN `tpid` is the EtherType of what follows the tag, so the tag's wire layout
// (TCI, then EtherType) maps onto the fields in order.
static VLAN: &[FieldDef] = &[
    int("priority", 0, 3, 0),
    int("cfi", 3, 1, 0),
    int("id", 4, 12, 0),
    int("tpid", 16, 16, 0xFFFF).computed(),
];

static ARP: &[FieldDef] = &[
    int("hardware_type", 0, 16, 1),
    int("protocol_type", 16, 16, 0x0800),
    int("hardware_length", 32, 8, 6),
    int("protocol_length", 40, 8, 4),
    int("operation", 48, 16, 1),
    mac("sender_hardware_addr", 64),
    ipv4("sender_protocol_addr", 112),
    mac("target_hardware_addr", 144),
    ipv4("target_protocol_addr", 192),
];

// The TOS byte is OTG's `priority` (raw choice); `dscp` and `ecn` are views of its upper six
// and lower two bits so that either spelling can be used.
static IPV4: &[FieldDef] = &[
    int("version", 0, 4, 4),
    int("header_length", 4, 4, 5).computed(),
    int("priority", 8, 8, 0),
    int("dscp", 8, 6, 0).alias("priority"),
    int("ecn", 14, 2, 0).alias("priority"),
    int("total_length", 16, 16, 46).computed(),
    int("identification", 32, 16, 0),
    int("reserved", 48, 1, 0),
    int("dont_fragment", 49, 1, 0),
    int("more_fragments", 50, 1, 0),
    // OTG declares 5 bits, but the fragment offset on the wire (RFC 791) is 13 bits wide
    // and fills the rest of the 16-bit word after the three flags.
    int("fragment_offset", 51, 13, 0),
    int("time_to_live", 64, 8, 64),
    int("protocol", 72, 8, 61).computed(),
    checksum("header_checksum", 80),
    ipv4("src", 96),
    ipv4("dst", 128),
];

static IPV6: &[FieldDef] = &[
    int("version", 0, 4, 6),
    int("traffic_class", 4, 8, 0),
    int("flow_label", 12, 20, 0),
    int("payload_length", 32, 16, 0).computed(),
    int("next_header", 48, 8, 59).computed(),
    int("hop_limit", 56, 8, 64),
    ipv6("src", 64),
    ipv6("dst", 192),
];

static UDP: &[FieldDef] = &[
    int("src_port", 0, 16, 0),
    int("dst_port", 16, 16, 0).computed(),
    int("length", 32, 16, 0).computed(),
    checksum("checksum", 48),
];

// Bits 100..103 are the reserved bits between data offset and the flags; they stay zero.
static TCP: &[FieldDef] = &[
    int("src_port", 0, 16, 0),
    int("dst_port", 16, 16, 0),
    int("seq_num", 32, 32, 0),
    int("ack_num", 64, 32, 0),
    int("data_offset", 96, 4, 0).computed(),
    int("ecn_ns", 103, 1, 0),
    int("ecn_cwr", 104, 1, 0),
    int("ecn_echo", 105, 1, 0),
    int("ctl_urg", 106, 1, 0),
    int("ctl_ack", 107, 1, 0),
    int("ctl_psh", 108, 1, 0),
    int("ctl_rst", 109, 1, 0),
    int("ctl_syn", 110, 1, 0),
    int("ctl_fin", 111, 1, 0),
    int("window", 112, 16, 0),
    checksum("checksum", 128),
    // Not in OTG; exposed so that the whole fixed header is controllable.
    int("urgent_pointer", 144, 16, 0),
];

static ICMP: &[FieldDef] = &[
    int("type", 0, 8, 8),
    int("code", 8, 8, 0),
    checksum("checksum", 16),
    int("identifier", 32, 16, 0),
    int("sequence_number", 48, 16, 0),
];

static ICMPV6: &[FieldDef] = &[
    int("type", 0, 8, 128),
    int("code", 8, 8, 0),
    checksum("checksum", 16),
    int("identifier", 32, 16, 0),
    int("sequence_number", 48, 16, 0),
];

// PTPv2 (IEEE 1588) common header followed by the 10-byte origin timestamp that Sync,
// Delay_Req and Follow_Up bodies share. OTG has no PTP header; names are strobe's.
static PTP: &[FieldDef] = &[
    int("transport_specific", 0, 4, 0),
    int("message_type", 4, 4, 0),
    int("reserved0", 8, 4, 0),
    int("version", 12, 4, 2),
    int("message_length", 16, 16, PTP_LEN as u128).computed(),
    int("domain_number", 32, 8, 0),
    int("reserved1", 40, 8, 0),
    int("flags", 48, 16, 0),
    int("correction", 64, 64, 0),
    int("reserved2", 128, 32, 0),
    int("clock_identity", 160, 64, 0),
    int("source_port", 224, 16, 0),
    int("sequence_id", 240, 16, 0),
    int("control", 256, 8, 0),
    int("log_message_interval", 264, 8, 0),
    int("origin_seconds", 272, 48, 0),
    int("origin_nanoseconds", 320, 32, 0),
];

static VXLAN: &[FieldDef] = &[
    int("flags", 0, 8, 0x08),
    int("reserved0", 8, 24, 0),
    int("vni", 32, 24, 0),
    int("reserved1", 56, 8, 0),
];

// RFC 2784 GRE. The checksum and reserved1 words follow only when checksum_present is 1
// (see [`Header::field_bit_offset`]); checksum_present is computed from whether a checksum
// value was given, so a custom checksum is never silently left out.
static GRE: &[FieldDef] = &[
    int("checksum_present", 0, 1, 0).computed().layout_flag(),
    int("reserved0", 1, 12, 0),
    int("version", 13, 3, 0),
    int("protocol", 16, 16, 0x0800).computed(),
    checksum("checksum", 32),
    int("reserved1", 48, 16, 0),
];

// RFC 3032 label stack entry. OTG's auto label is a constant 16 (the first unreserved one).
static MPLS: &[FieldDef] = &[
    int("label", 0, 20, 16).computed(),
    int("traffic_class", 20, 3, 0),
    int("bottom_of_stack", 23, 1, 1).computed(),
    int("time_to_live", 24, 8, 64),
];

// 3GPP TS 29.281 GTPv1-U. The sequence number, N-PDU number and next extension type word
// is present when any of e_flag, s_flag, pn_flag is 1; each flag is computed from whether
// its field was given. OTG spells the sequence number `squence_number`.
static GTPV1: &[FieldDef] = &[
    int("version", 0, 3, 1),
    int("protocol_type", 3, 1, 1),
    int("reserved", 4, 1, 0),
    int("e_flag", 5, 1, 0).computed().layout_flag(),
    int("s_flag", 6, 1, 0).computed().layout_flag(),
    int("pn_flag", 7, 1, 0).computed().layout_flag(),
    int("message_type", 8, 8, 0).computed(),
    int("message_length", 16, 16, 0).computed(),
    int("teid", 32, 32, 0),
    int("squence_number", 64, 16, 0),
    int("n_pdu_number", 80, 8, 0),
    int("next_extension_header_type", 88, 8, 0),
];

// One GTPv1 extension header as OTG models it: length, six bytes of contents, next type.
static GTP_EXTENSION: &[FieldDef] = &[
    int("extension_length", 0, 8, 2).computed(),
    int("contents", 8, 48, 0),
    int("next_extension_header", 56, 8, 0),
];

// 3GPP TS 29.274 GTPv2-C. The TEID is present when teid_flag is 1, computed from whether a
// TEID was given; the fields after it move up four bytes when it is absent.
static GTPV2: &[FieldDef] = &[
    int("version", 0, 3, 2),
    int("piggybacking_flag", 3, 1, 0),
    int("teid_flag", 4, 1, 0).computed().layout_flag(),
    int("spare1", 5, 3, 0),
    int("message_type", 8, 8, 0),
    int("message_length", 16, 16, 0).computed(),
    int("teid", 32, 32, 0),
    int("sequence_number", 64, 24, 0),
    int("spare2", 88, 8, 0),
];

/// 01:80:C2:00:00:01, the MAC control multicast address pause frames go to.
const PAUSE_DST: u128 = 0x0180_C200_0001;

// IEEE 802.1Qbb priority flow control: a whole MAC control frame (addresses included), as
// OTG models it in place of an ethernet header.
static PFC_PAUSE: &[FieldDef] = &[
    mac_default("dst", 0, PAUSE_DST),
    mac("src", 48),
    int("ether_type", 96, 16, 0x8808),
    int("control_op_code", 112, 16, 0x0101),
    int("class_enable_vector", 128, 16, 0),
    int("pause_class_0", 144, 16, 0),
    int("pause_class_1", 160, 16, 0),
    int("pause_class_2", 176, 16, 0),
    int("pause_class_3", 192, 16, 0),
    int("pause_class_4", 208, 16, 0),
    int("pause_class_5", 224, 16, 0),
    int("pause_class_6", 240, 16, 0),
    int("pause_class_7", 256, 16, 0),
];

// IEEE 802.3x global pause, likewise a whole MAC control frame.
static ETHERNET_PAUSE: &[FieldDef] = &[
    mac_default("dst", 0, PAUSE_DST),
    mac("src", 48),
    int("ether_type", 96, 16, 0x8808),
    int("control_op_code", 112, 16, 1),
    int("time", 128, 16, 0),
];

// RFC 1112 IGMPv1: version and type share the first byte (0x11 query, 0x12 report).
static IGMPV1: &[FieldDef] = &[
    int("version", 0, 4, 1),
    int("type", 4, 4, 1),
    int("unused", 8, 8, 0),
    checksum("checksum", 16),
    ipv4("group_address", 32),
];

// RFC 1661/1662 PPP in HDLC-like framing: address 0xFF, control 0x03, protocol.
static PPP: &[FieldDef] = &[
    int("address", 0, 8, 0xFF),
    int("control", 8, 8, 0x03),
    int("protocol_type", 16, 16, 0x0021).computed(),
];

/// Length of the PTP header: 34-byte common header plus a 10-byte timestamp body.
pub(crate) const PTP_LEN: usize = 44;

/// The protocol headers strobe can lay out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HeaderKind {
    Ethernet,
    Vlan,
    Arp,
    Ipv4,
    Ipv6,
    Udp,
    Tcp,
    Icmp,
    Icmpv6,
    Ptp,
    Vxlan,
    Gre,
    Mpls,
    Gtpv1,
    /// A GTPv1 extension header; OTG nests these in `gtpv1.extension_headers`, strobe's
    /// stack holds each after its `gtpv1`.
    GtpExtension,
    Gtpv2,
    PfcPause,
    EthernetPause,
    Igmpv1,
    Ppp,
    /// Raw user bytes ([`Header::bytes`]); no fields.
    Custom,
}

impl HeaderKind {
    pub const ALL: [HeaderKind; 21] = [
        HeaderKind::Ethernet,
        HeaderKind::Vlan,
        HeaderKind::Arp,
        HeaderKind::Ipv4,
        HeaderKind::Ipv6,
        HeaderKind::Udp,
        HeaderKind::Tcp,
        HeaderKind::Icmp,
        HeaderKind::Icmpv6,
        HeaderKind::Ptp,
        HeaderKind::Vxlan,
        HeaderKind::Gre,
        HeaderKind::Mpls,
        HeaderKind::Gtpv1,
        HeaderKind::GtpExtension,
        HeaderKind::Gtpv2,
        HeaderKind::PfcPause,
        HeaderKind::EthernetPause,
        HeaderKind::Igmpv1,
        HeaderKind::Ppp,
        HeaderKind::Custom,
    ];

    /// Lower-case name, as in OTG (`ptp` is strobe's own; `gtp_extension` is OTG's
    /// `Flow.GtpExtension`, written inside `gtpv1` rather than as a header of its own).
    pub fn name(self) -> &'static str {
        match self {
            HeaderKind::Ethernet => "ethernet",
            HeaderKind::Vlan => "vlan",
            HeaderKind::Arp => "arp",
            HeaderKind::Ipv4 => "ipv4",
            HeaderKind::Ipv6 => "ipv6",
            HeaderKind::Udp => "udp",
            HeaderKind::Tcp => "tcp",
            HeaderKind::Icmp => "icmp",
            HeaderKind::Icmpv6 => "icmpv6",
            HeaderKind::Ptp => "ptp",
            HeaderKind::Vxlan => "vxlan",
            HeaderKind::Gre => "gre",
            HeaderKind::Mpls => "mpls",
            HeaderKind::Gtpv1 => "gtpv1",
            HeaderKind::GtpExtension => "gtp_extension",
            HeaderKind::Gtpv2 => "gtpv2",
            HeaderKind::PfcPause => "pfcpause",
            HeaderKind::EthernetPause => "ethernetpause",
            HeaderKind::Igmpv1 => "igmpv1",
            HeaderKind::Ppp => "ppp",
            HeaderKind::Custom => "custom",
        }
    }

    /// Inverse of [`HeaderKind::name`] (exact, lower case).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.name() == name)
    }

    /// The field table, in wire order (aliases follow the field they overlay).
    pub fn fields(self) -> &'static [FieldDef] {
        match self {
            HeaderKind::Ethernet => ETHERNET,
            HeaderKind::Vlan => VLAN,
            HeaderKind::Arp => ARP,
            HeaderKind::Ipv4 => IPV4,
            HeaderKind::Ipv6 => IPV6,
            HeaderKind::Udp => UDP,
            HeaderKind::Tcp => TCP,
            HeaderKind::Icmp => ICMP,
            HeaderKind::Icmpv6 => ICMPV6,
            HeaderKind::Ptp => PTP,
            HeaderKind::Vxlan => VXLAN,
            HeaderKind::Gre => GRE,
            HeaderKind::Mpls => MPLS,
            HeaderKind::Gtpv1 => GTPV1,
            HeaderKind::GtpExtension => GTP_EXTENSION,
            HeaderKind::Gtpv2 => GTPV2,
            HeaderKind::PfcPause => PFC_PAUSE,
            HeaderKind::EthernetPause => ETHERNET_PAUSE,
            HeaderKind::Igmpv1 => IGMPV1,
            HeaderKind::Ppp => PPP,
            HeaderKind::Custom => &[],
        }
    }

    /// Looks a field up by name; the index is its position in [`HeaderKind::fields`] and in
    /// [`Header::values`].
    pub fn field(self, name: &str) -> Option<(usize, &'static FieldDef)> {
        self.fields()
            .iter()
            .enumerate()
            .find(|(_, def)| def.name == name)
    }

    /// Whether OTG writes this header only inside another one (`gtp_extension` inside
    /// `gtpv1`), so a scenario cannot name it as a header of its own.
    pub fn nested(self) -> bool {
        self == HeaderKind::GtpExtension
    }

    /// Header length in bytes when it never changes; `None` for `custom` (the length of its
    /// bytes) and for headers whose flags add optional fields ([`Header::wire_len`]).
    pub fn fixed_len(self) -> Option<usize> {
        match self {
            HeaderKind::Gre | HeaderKind::Gtpv1 | HeaderKind::Gtpv2 => None,
            other => other.table_len(),
        }
    }

    /// Bytes the field table spans: the header with every optional field present; `None`
    /// for `custom`.
    pub fn table_len(self) -> Option<usize> {
        match self {
            HeaderKind::Ethernet => Some(14),
            HeaderKind::Vlan => Some(4),
            HeaderKind::Arp => Some(28),
            HeaderKind::Ipv4 => Some(20),
            HeaderKind::Ipv6 => Some(40),
            HeaderKind::Udp => Some(8),
            HeaderKind::Tcp => Some(20),
            HeaderKind::Icmp | HeaderKind::Icmpv6 => Some(8),
            HeaderKind::Ptp => Some(PTP_LEN),
            HeaderKind::Vxlan => Some(8),
            HeaderKind::Gre => Some(8),
            HeaderKind::Mpls => Some(4),
            HeaderKind::Gtpv1 | HeaderKind::Gtpv2 => Some(12),
            HeaderKind::GtpExtension => Some(8),
            HeaderKind::PfcPause => Some(34),
            HeaderKind::EthernetPause => Some(18),
            HeaderKind::Igmpv1 => Some(8),
            HeaderKind::Ppp => Some(4),
            HeaderKind::Custom => None,
        }
    }
}

/// One header of a stack: its kind and the values the user chose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub kind: HeaderKind,
    /// One entry per field of `kind.fields()`; `None` = auto (if the field is auto) or default.
    pub values: Vec<Option<u128>>,
    /// The header bytes of a `custom` header; empty for every other kind.
    pub bytes: Vec<u8>,
}

impl Header {
    /// A header of `kind` with every field unset.
    pub fn new(kind: HeaderKind) -> Self {
        Header {
            kind,
            values: vec![None; kind.fields().len()],
            bytes: Vec::new(),
        }
    }

    /// A `custom` header made of `bytes`.
    pub fn custom(bytes: Vec<u8>) -> Self {
        Header {
            kind: HeaderKind::Custom,
            values: Vec::new(),
            bytes,
        }
    }

    /// Sets a field explicitly (an auto field then keeps this value).
    pub fn set(&mut self, field: &str, value: u128) -> Result<(), WireError> {
        let (index, def) = self.kind.field(field).ok_or_else(|| self.unknown(field))?;
        if value > def.max() {
            return Err(WireError::ValueTooLarge {
                header: self.kind.name(),
                field: def.name,
                value,
                bits: def.bit_len,
                max: def.max(),
            });
        }
        if self.values.len() != self.kind.fields().len() {
            self.values.resize(self.kind.fields().len(), None);
        }
        self.values[index] = Some(value);
        Ok(())
    }

    /// The explicitly set value of `field`; `None` if it is unset (auto/default) or unknown.
    pub fn get(&self, field: &str) -> Option<u128> {
        let (index, _) = self.kind.field(field)?;
        self.values.get(index).copied().flatten()
    }

    /// Bytes this header occupies in a frame: optional fields count only when their flag
    /// is (or is computed to be) 1.
    pub fn wire_len(&self) -> usize {
        match self.kind {
            HeaderKind::Custom => self.bytes.len(),
            HeaderKind::Gre if self.flag("checksum_present") == 0 => 4,
            HeaderKind::Gtpv1 if !self.gtpv1_has_optional_word() => 8,
            HeaderKind::Gtpv2 if self.flag("teid_flag") == 0 => 8,
            kind => kind.table_len().unwrap_or(0),
        }
    }

    /// Bit offset of field `index` from the header start, or `None` when this header's
    /// flags leave the field out (or it is not on the wire at all).
    pub fn field_bit_offset(&self, index: usize) -> Option<u32> {
        let def = self.kind.fields().get(index)?;
        if !def.on_wire() {
            return None;
        }
        let end = def.bit_offset + def.bit_len;
        let len_bits = self.wire_len() as u32 * 8;
        match (self.kind, def.name) {
            // Without the TEID the sequence number and spare byte move up four bytes.
            (HeaderKind::Gtpv2, "teid") if len_bits < 96 => None,
            (HeaderKind::Gtpv2, "sequence_number" | "spare2") if len_bits < 96 => {
                Some(def.bit_offset - 32)
            }
            _ if end > len_bits => None,
            _ => Some(def.bit_offset),
        }
    }

    /// The value a layout flag takes in this header: as set, or computed from whether the
    /// optional fields it announces were given. Other fields: as set, else their default.
    pub fn flag(&self, name: &str) -> u128 {
        if let Some(value) = self.get(name) {
            return value;
        }
        let given = |field: &str| u128::from(self.get(field).is_some());
        match (self.kind, name) {
            (HeaderKind::Gre, "checksum_present") => given("checksum"),
            (HeaderKind::Gtpv1, "e_flag") => given("next_extension_header_type"),
            (HeaderKind::Gtpv1, "s_flag") => given("squence_number"),
            (HeaderKind::Gtpv1, "pn_flag") => given("n_pdu_number"),
            (HeaderKind::Gtpv2, "teid_flag") => given("teid"),
            _ => self.kind.field(name).map_or(0, |(_, def)| def.default),
        }
    }

    /// GTPv1's optional word (sequence number, N-PDU number, next extension type) is there
    /// when any of the three flags is set (TS 29.281 5.1).
    fn gtpv1_has_optional_word(&self) -> bool {
        ["e_flag", "s_flag", "pn_flag"]
            .iter()
            .any(|flag| self.flag(flag) != 0)
    }

    fn unknown(&self, field: &str) -> WireError {
        let names: Vec<&str> = self.kind.fields().iter().map(|def| def.name).collect();
        WireError::UnknownField {
            header: self.kind.name(),
            field: field.to_owned(),
            accepted: if names.is_empty() {
                "none (custom headers are raw bytes)".to_owned()
            } else {
                names.join(", ")
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for kind in HeaderKind::ALL {
            assert_eq!(HeaderKind::from_name(kind.name()), Some(kind));
        }
        assert_eq!(HeaderKind::from_name("IPv4"), None);
        assert_eq!(HeaderKind::from_name("gre"), Some(HeaderKind::Gre));
        assert_eq!(HeaderKind::from_name("gtpv3"), None);
    }

    /// Every table tiles its header exactly: wire fields (aliases and off-wire fields aside)
    /// do not overlap, and together with documented reserved gaps cover every bit.
    #[test]
    fn tables_tile_the_header() {
        for kind in HeaderKind::ALL {
            let Some(len) = kind.table_len() else {
                assert!(kind.fields().is_empty());
                continue;
            };
            let mut owner: Vec<Option<&str>> = vec![None; len * 8];
            for def in kind.fields() {
                assert!(
                    (1..=128).contains(&def.bit_len),
                    "{}.{}",
                    kind.name(),
                    def.name
                );
                assert!(def.default <= def.max(), "{}.{}", kind.name(), def.name);
                if !def.on_wire() {
                    continue;
                }
                let range = def.bit_offset as usize..(def.bit_offset + def.bit_len) as usize;
                assert!(
                    range.end <= len * 8,
                    "{}.{} overruns",
                    kind.name(),
                    def.name
                );
                if let Some(base) = def.alias_of {
                    let (_, base) = kind.field(base).expect("alias target exists");
                    let base_range = base.bit_offset..base.bit_offset + base.bit_len;
                    assert!(base_range.contains(&def.bit_offset));
                    assert!(def.bit_offset + def.bit_len <= base_range.end);
                    continue;
                }
                for bit in range {
                    assert_eq!(owner[bit], None, "{}.{} overlaps", kind.name(), def.name);
                    owner[bit] = Some(def.name);
                }
            }
            let gaps: Vec<usize> = (0..len * 8).filter(|&bit| owner[bit].is_none()).collect();
            let expected_gaps: Vec<usize> = match kind {
                HeaderKind::Tcp => (100..103).collect(),
                _ => Vec::new(),
            };
            assert_eq!(gaps, expected_gaps, "{}", kind.name());
        }
    }

    #[test]
    fn field_names_are_unique() {
        for kind in HeaderKind::ALL {
            for (index, def) in kind.fields().iter().enumerate() {
                assert_eq!(kind.field(def.name).map(|(i, _)| i), Some(index));
            }
        }
    }

    #[test]
    fn otg_defaults_and_widths() {
        let check = |kind: HeaderKind, name: &str, bits: u32, default: u128| {
            let (_, def) = kind.field(name).expect(name);
            assert_eq!((def.bit_len, def.default), (bits, default), "{name}");
        };
        check(HeaderKind::Ethernet, "ether_type", 16, 0xFFFF);
        check(HeaderKind::Ethernet, "pfc_queue", 3, 0);
        check(HeaderKind::Vlan, "tpid", 16, 0xFFFF);
        check(HeaderKind::Arp, "protocol_type", 16, 0x0800);
        check(HeaderKind::Ipv4, "total_length", 16, 46);
        check(HeaderKind::Ipv4, "protocol", 8, 61);
        check(HeaderKind::Ipv4, "time_to_live", 8, 64);
        check(HeaderKind::Ipv4, "fragment_offset", 13, 0);
        check(HeaderKind::Ipv6, "next_header", 8, 59);
        check(HeaderKind::Ipv6, "flow_label", 20, 0);
        check(HeaderKind::Icmp, "type", 8, 8);
        check(HeaderKind::Icmpv6, "type", 8, 128);
        check(HeaderKind::Vxlan, "flags", 8, 8);
        check(HeaderKind::Ptp, "version", 4, 2);
        check(HeaderKind::Gre, "protocol", 16, 0x0800);
        check(HeaderKind::Gre, "reserved0", 12, 0);
        check(HeaderKind::Mpls, "label", 20, 16);
        check(HeaderKind::Mpls, "bottom_of_stack", 1, 1);
        check(HeaderKind::Mpls, "time_to_live", 8, 64);
        check(HeaderKind::Gtpv1, "version", 3, 1);
        check(HeaderKind::Gtpv1, "protocol_type", 1, 1);
        check(HeaderKind::Gtpv1, "teid", 32, 0);
        check(HeaderKind::GtpExtension, "contents", 48, 0);
        check(HeaderKind::Gtpv2, "version", 3, 2);
        check(HeaderKind::Gtpv2, "sequence_number", 24, 0);
        check(HeaderKind::PfcPause, "dst", 48, 0x0180_C200_0001);
        check(HeaderKind::PfcPause, "ether_type", 16, 0x8808);
        check(HeaderKind::PfcPause, "control_op_code", 16, 0x0101);
        check(HeaderKind::EthernetPause, "control_op_code", 16, 1);
        check(HeaderKind::Igmpv1, "version", 4, 1);
        check(HeaderKind::Igmpv1, "type", 4, 1);
        check(HeaderKind::Ppp, "address", 8, 0xFF);
        check(HeaderKind::Ppp, "control", 8, 3);
        check(HeaderKind::Ppp, "protocol_type", 16, 0x21);
        assert!(!HeaderKind::Ethernet.field("pfc_queue").unwrap().1.on_wire());
    }

    #[test]
    fn set_validates_name_and_width() {
        let mut udp = Header::new(HeaderKind::Udp);
        udp.set("dst_port", 4791).unwrap();
        assert_eq!(udp.get("dst_port"), Some(4791));
        assert_eq!(udp.get("src_port"), None);
        assert_eq!(udp.get("nope"), None);

        let err = udp.set("port", 1).unwrap_err();
        assert_eq!(
            err.to_string(),
            "udp: unknown field `port`; accepted fields: src_port, dst_port, length, checksum"
        );
        let err = udp.set("src_port", 0x1_0000).unwrap_err();
        assert_eq!(
            err.to_string(),
            "udp.src_port: value 65536 does not fit in 16 bits (max 65535)"
        );
        let err = Header::custom(vec![1]).set("x", 1).unwrap_err();
        assert!(err.to_string().contains("none"), "{err}");
    }

    #[test]
    fn optional_fields_follow_their_flags() {
        let mut gre = Header::new(HeaderKind::Gre);
        assert_eq!(gre.wire_len(), 4);
        assert_eq!(gre.field_bit_offset(4), None, "no checksum word");
        gre.set("checksum", 0x1234).unwrap();
        assert_eq!((gre.flag("checksum_present"), gre.wire_len()), (1, 8));
        assert_eq!(gre.field_bit_offset(4), Some(32));
        gre.set("checksum_present", 0).unwrap();
        assert_eq!(gre.wire_len(), 4, "an explicit flag wins");

        let mut gtp = Header::new(HeaderKind::Gtpv1);
        assert_eq!(gtp.wire_len(), 8);
        gtp.set("n_pdu_number", 7).unwrap();
        assert_eq!((gtp.flag("pn_flag"), gtp.flag("s_flag")), (1, 0));
        assert_eq!(gtp.wire_len(), 12);

        let mut gtp2 = Header::new(HeaderKind::Gtpv2);
        let (seq, _) = HeaderKind::Gtpv2.field("sequence_number").unwrap();
        let (teid, _) = HeaderKind::Gtpv2.field("teid").unwrap();
        assert_eq!((gtp2.wire_len(), gtp2.field_bit_offset(seq)), (8, Some(32)));
        assert_eq!(gtp2.field_bit_offset(teid), None);
        gtp2.set("teid", 9).unwrap();
        assert_eq!(
            (gtp2.wire_len(), gtp2.field_bit_offset(seq)),
            (12, Some(64))
        );
        assert!(HeaderKind::ALL
            .iter()
            .flat_map(|kind| kind.fields())
            .filter(|def| def.shapes_layout)
            .all(|def| def.bit_len == 1 && def.auto));
    }

    #[test]
    fn full_width_address_fits() {
        let mut ip = Header::new(HeaderKind::Ipv6);
        ip.set("src", u128::MAX).unwrap();
        assert_eq!(ip.get("src"), Some(u128::MAX));
    }
}
