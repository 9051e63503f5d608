//! `[[flows.packet]]`: the header stack, every field's value or pattern (`value`, `values`,
//! `increment`, `decrement`, `random`, `auto`, checksums), and the payload.

use strobe_wire::{FieldDef, FieldFormat, HeaderKind, Payload};

use crate::error::ModelError;
use crate::model::{FieldTag, HeaderSpec};
use crate::node::{Node, Table, Value};
use crate::pattern::Pattern;
use crate::value::{
    check_pattern, format_hint, parse_field_int, parse_field_text, parse_hex_bytes,
    COUNT_AT_LEAST_ONE,
};

use super::Loader;

/// The `gtpv1` key that nests its extension headers (OTG `Flow.Gtpv1.extension_headers`).
const EXTENSION_HEADERS: &str = "extension_headers";
/// The key of a pattern table that tags the field's values (OTG `metric_tags`).
const METRIC_TAGS: &str = "metric_tags";

/// Whether an ipv4 `priority` value is OTG's nested form rather than a pattern of the
/// whole TOS byte.
pub(super) fn is_otg_priority(node: &Node) -> bool {
    let Value::Table(entries) = node.get_ref() else {
        return false;
    };
    entries.iter().any(|(key, value)| match key.get_ref().as_str() {
        "raw" | "tos" | "dscp" => true,
        "choice" => matches!(value.get_ref(), Value::Str(c) if ["raw", "tos", "dscp"].contains(&c.as_str())),
        _ => false,
    })
}

impl Loader<'_> {
    pub(super) fn packet(&self, node: &Node, path: &str) -> Result<Vec<HeaderSpec>, ModelError> {
        let items = self
            .r
            .array(node, path, "an array of [[flows.packet]] tables")?;
        if items.is_empty() {
            return Err(self.err(
                &node.span(),
                path,
                "the packet has no headers — add [[flows.packet]] tables such as ethernet, ipv4, udp",
            ));
        }
        let mut stack = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            stack.extend(self.header(item, &format!("{path}[{i}]"))?);
        }
        Ok(stack)
    }

    /// One `packet` entry: its header, followed by the extension headers a `gtpv1` nests.
    pub(super) fn header(&self, node: &Node, path: &str) -> Result<Vec<HeaderSpec>, ModelError> {
        let header_names: Vec<&str> = HeaderKind::ALL
            .into_iter()
            .filter(|kind| !kind.nested())
            .map(HeaderKind::name)
            .collect();
        let t = self.r.table(
            node,
            path,
            "a header table such as { ipv4 = { src = \"198.18.0.1\" } }",
        )?;
        if let Some(key) = t
            .keys()
            .find(|k| k.get_ref() != "choice" && !header_names.contains(&k.get_ref().as_str()))
        {
            return Err(self.err(
                &key.span(),
                &t.child(key.get_ref()),
                format!(
                    "unknown header `{}` — accepted headers: {}",
                    key.get_ref(),
                    header_names.join(", ")
                ),
            ));
        }
        let (name, body) = self.r.choice(&t, &header_names, None)?;
        let kind = HeaderKind::from_name(name)
            .filter(|kind| !kind.nested())
            .ok_or_else(|| self.err(&t.span, path, format!("unknown header `{name}`")))?;
        let hpath = format!("{path}.{name}");
        let mut spec = HeaderSpec::new(kind);
        let Some(body) = body else {
            if kind == HeaderKind::Custom {
                return Err(self.err(
                    &t.span,
                    &hpath,
                    "missing custom header bytes — give custom = { bytes = \"deadbeef\" }",
                ));
            }
            return Ok(vec![spec]);
        };
        let fields = self
            .r
            .table(body, &hpath, &format!("a table of {name} fields"))?;
        if kind == HeaderKind::Custom {
            self.r.only(&fields, &["bytes"])?;
            let bytes_path = fields.child("bytes");
            let bytes_node = fields.get("bytes").ok_or_else(|| {
                self.err(
                    &fields.span,
                    &bytes_path,
                    "missing bytes — give the header as hex, e.g. bytes = \"deadbeef\"",
                )
            })?;
            let text = self
                .r
                .string(bytes_node, &bytes_path, "hex bytes such as \"deadbeef\"")?;
            spec.custom_bytes =
                parse_hex_bytes(text).map_err(|m| self.err(&bytes_node.span(), &bytes_path, m))?;
            return Ok(vec![spec]);
        }
        let fields = match fields.get("echo") {
            // OTG nests ICMP and ICMPv6 echo fields under a choice: { echo = { identifier = 1 } }.
            Some(echo) if matches!(kind, HeaderKind::Icmp | HeaderKind::Icmpv6) => {
                self.r.only(&fields, &["choice", "echo"])?;
                self.r
                    .table(echo, &fields.child("echo"), "a table of echo fields")?
            }
            _ => fields,
        };
        let mut accepted: Vec<&str> = kind.fields().iter().map(|d| d.name).collect();
        if kind == HeaderKind::Gtpv1 {
            accepted.push(EXTENSION_HEADERS);
        }
        self.r.only(&fields, &accepted)?;
        let mut extensions = Vec::new();
        for (key, value) in fields.entries {
            let field_path = fields.child(key.get_ref());
            if kind == HeaderKind::Ipv4 && key.get_ref() == "priority" && is_otg_priority(value) {
                self.otg_priority(value, &field_path, &mut spec)?;
                continue;
            }
            if key.get_ref() == EXTENSION_HEADERS {
                extensions = self.gtp_extensions(value, &field_path)?;
                continue;
            }
            // `only` has vetted every key.
            let Some((index, def)) = kind.field(key.get_ref()) else {
                continue;
            };
            self.set_field(value, &field_path, kind, index, def, &mut spec)?;
        }
        let mut stack = vec![spec];
        stack.extend(extensions);
        Ok(stack)
    }

    /// OTG's `gtpv1.extension_headers`: a list of `Flow.GtpExtension` tables, each becoming
    /// a `gtp_extension` header right after its `gtpv1`.
    fn gtp_extensions(&self, node: &Node, path: &str) -> Result<Vec<HeaderSpec>, ModelError> {
        let kind = HeaderKind::GtpExtension;
        let accepted: Vec<&str> = kind.fields().iter().map(|d| d.name).collect();
        let items = self.r.array(
            node,
            path,
            "an array of extension header tables such as [{ contents = 1, next_extension_header = 0 }]",
        )?;
        let mut specs = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let item_path = format!("{path}[{i}]");
            let fields = self
                .r
                .table(item, &item_path, "a table of extension header fields")?;
            self.r.only(&fields, &accepted)?;
            let mut spec = HeaderSpec::new(kind);
            for (key, value) in fields.entries {
                let Some((index, def)) = kind.field(key.get_ref()) else {
                    continue;
                };
                let field_path = fields.child(key.get_ref());
                self.set_field(value, &field_path, kind, index, def, &mut spec)?;
            }
            specs.push(spec);
        }
        Ok(specs)
    }

    /// OTG's nested IPv4 priority: `{ raw = N }` (the TOS byte) or
    /// `{ dscp = { phb = N, ecn = N } }`, each a field pattern.
    pub(super) fn otg_priority(
        &self,
        node: &Node,
        path: &str,
        spec: &mut HeaderSpec,
    ) -> Result<(), ModelError> {
        let t = self.r.table(node, path, "a priority table")?;
        let (choice, body) = self.r.choice(&t, &["raw", "tos", "dscp"], Some("dscp"))?;
        let cpath = format!("{path}.{choice}");
        let mut set = |field: &str, node: &Node, field_path: &str| -> Result<(), ModelError> {
            let (index, def) = HeaderKind::Ipv4.field(field).ok_or_else(|| {
                self.err(
                    &node.span(),
                    field_path,
                    format!("ipv4 has no field `{field}`"),
                )
            })?;
            self.set_field(node, field_path, HeaderKind::Ipv4, index, def, spec)
        };
        match (choice, body) {
            (_, None) => Ok(()),
            ("raw", Some(n)) => set("priority", n, &cpath),
            ("tos", Some(n)) => Err(self.err(
                &n.span(),
                &cpath,
                "the tos form is not supported — write the whole byte as priority = { raw = N }, or use dscp = { phb, ecn }",
            )),
            (_, Some(n)) => {
                let d = self.r.table(n, &cpath, "a table with phb and ecn")?;
                self.r.only(&d, &["phb", "ecn"])?;
                if let Some(phb) = d.get("phb") {
                    set("dscp", phb, &d.child("phb"))?;
                }
                if let Some(ecn) = d.get("ecn") {
                    set("ecn", ecn, &d.child("ecn"))?;
                }
                Ok(())
            }
        }
    }

    /// Sets one field of `spec` from its value or pattern, with the metric tags it carries.
    fn set_field(
        &self,
        node: &Node,
        path: &str,
        kind: HeaderKind,
        index: usize,
        def: &FieldDef,
        spec: &mut HeaderSpec,
    ) -> Result<(), ModelError> {
        let tags = self.metric_tags(node, path, index, def)?;
        match self.field(node, path, kind, def)? {
            Some(pattern) => spec.set(index, pattern),
            None if !tags.is_empty() => {
                return Err(self.err(
                    &node.span(),
                    path,
                    format!(
                        "metric tag `{}` on a field strobe computes (auto) — give the field a value or a pattern to tag it",
                        tags[0].name
                    ),
                ))
            }
            None => {}
        }
        spec.metric_tags.extend(tags);
        Ok(())
    }

    /// A pattern table's `metric_tags` (OTG): `[{ name, offset = 0, length = width }]`.
    fn metric_tags(
        &self,
        node: &Node,
        path: &str,
        field_index: usize,
        def: &FieldDef,
    ) -> Result<Vec<FieldTag>, ModelError> {
        let Value::Table(entries) = node.get_ref() else {
            return Ok(Vec::new());
        };
        let Some(list) = entries
            .iter()
            .find(|(k, _)| k.get_ref() == METRIC_TAGS)
            .map(|(_, v)| v)
        else {
            return Ok(Vec::new());
        };
        let list_path = format!("{path}.{METRIC_TAGS}");
        let items = self.r.array(
            list,
            &list_path,
            "an array of tags such as [{ name = \"dst\", offset = 0, length = 8 }]",
        )?;
        let width = def.bit_len;
        let mut tags = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let item_path = format!("{list_path}[{i}]");
            let t = self
                .r
                .table(item, &item_path, "a tag table such as { name = \"dst\" }")?;
            self.r.only(&t, &["name", "offset", "length"])?;
            let name = match t.get("name") {
                Some(n) => self
                    .r
                    .string(n, &t.child("name"), "a tag name")?
                    .to_string(),
                None => {
                    return Err(self.err(
                        &t.span,
                        &t.child("name"),
                        "missing name — every metric tag needs a name",
                    ))
                }
            };
            if name.is_empty() {
                return Err(self.err(&t.span, &t.child("name"), "a metric tag's name is empty"));
            }
            let offset = match t.get("offset") {
                Some(n) => {
                    self.r
                        .uint(n, &t.child("offset"), u64::from(width) - 1, "a bit offset")?
                        as u32
                }
                None => 0,
            };
            let length = match t.get("length") {
                Some(n) => {
                    self.r
                        .uint(n, &t.child("length"), u64::from(width), "a length in bits")?
                        as u32
                }
                None => width - offset,
            };
            if length == 0 || offset + length > width {
                return Err(self.err(
                    &item.span(),
                    &item_path,
                    format!(
                        "bits {offset} to {} are not inside the {width}-bit field — offset + length must be at most {width}, length at least 1",
                        i64::from(offset) + i64::from(length) - 1
                    ),
                ));
            }
            tags.push(FieldTag {
                name,
                field_index,
                offset,
                length,
            });
        }
        Ok(tags)
    }

    /// One field value or pattern; `None` means auto (computed).
    pub(super) fn field(
        &self,
        node: &Node,
        path: &str,
        kind: HeaderKind,
        def: &FieldDef,
    ) -> Result<Option<Pattern>, ModelError> {
        let pattern = match node.get_ref() {
            Value::Str(s) if s == "auto" => return self.auto(node, path, kind, def).map(|()| None),
            Value::Str(_) | Value::Int(_) => Pattern::Value(self.scalar(node, path, def)?),
            Value::Array(_) => Pattern::Values(self.scalars(node, path, def)?),
            Value::Table(_) if def.format == FieldFormat::Checksum => {
                return self.checksum(node, path, def)
            }
            Value::Table(entries) => {
                // Tags are read by `metric_tags`; the pattern is the rest of the table.
                let kept: Vec<_> = entries
                    .iter()
                    .filter(|(k, _)| k.get_ref() != METRIC_TAGS)
                    .cloned()
                    .collect();
                let t = Table {
                    entries: &kept,
                    span: node.span(),
                    path: path.to_string(),
                };
                let default = if def.auto { "auto" } else { "value" };
                let (choice, body) = self.r.choice(
                    &t,
                    &[
                        "value",
                        "values",
                        "increment",
                        "decrement",
                        "random",
                        "auto",
                    ],
                    Some(default),
                )?;
                let cpath = format!("{path}.{choice}");
                match choice {
                    "auto" => return self.auto(node, path, kind, def).map(|()| None),
                    "value" => Pattern::Value(match body {
                        Some(n) => self.scalar(n, &cpath, def)?,
                        None => def.default,
                    }),
                    "values" => Pattern::Values(match body {
                        Some(n) => self.scalars(n, &cpath, def)?,
                        None => vec![def.default],
                    }),
                    "increment" | "decrement" => {
                        self.counter(body, &cpath, def, choice == "increment")?
                    }
                    _ => self.random(body, &cpath, def)?,
                }
            }
            other => {
                return Err(self.err(
                    &node.span(),
                    path,
                    format!(
                        "expected {}, a pattern table or \"auto\", found {}",
                        format_hint(def),
                        other.kind()
                    ),
                ))
            }
        };
        check_pattern(kind, def, &pattern).map_err(|m| self.err(&node.span(), path, m))?;
        Ok(Some(pattern))
    }

    pub(super) fn auto(
        &self,
        node: &Node,
        path: &str,
        kind: HeaderKind,
        def: &FieldDef,
    ) -> Result<(), ModelError> {
        if def.auto {
            Ok(())
        } else {
            let computed: Vec<&str> = kind
                .fields()
                .iter()
                .filter(|d| d.auto)
                .map(|d| d.name)
                .collect();
            let which = if computed.is_empty() {
                format!("{} has no computed fields", kind.name())
            } else {
                format!("computed {} fields: {}", kind.name(), computed.join(", "))
            };
            Err(self.err(
                &node.span(),
                path,
                format!(
                    "`{}` is not computed by strobe, so it cannot be auto — give {} ({which})",
                    def.name,
                    format_hint(def)
                ),
            ))
        }
    }

    pub(super) fn scalar(
        &self,
        node: &Node,
        path: &str,
        def: &FieldDef,
    ) -> Result<u128, ModelError> {
        let parsed = match node.get_ref() {
            Value::Str(s) => parse_field_text(s, def),
            Value::Int(i) => parse_field_int(*i, def),
            other => Err(format!(
                "expected {}, found {}",
                format_hint(def),
                other.kind()
            )),
        };
        parsed.map_err(|m| self.err(&node.span(), path, m))
    }

    pub(super) fn scalars(
        &self,
        node: &Node,
        path: &str,
        def: &FieldDef,
    ) -> Result<Vec<u128>, ModelError> {
        let items = self.r.array(node, path, "an array of values")?;
        items
            .iter()
            .enumerate()
            .map(|(i, n)| self.scalar(n, &format!("{path}[{i}]"), def))
            .collect()
    }

    pub(super) fn counter(
        &self,
        body: Option<&Node>,
        path: &str,
        def: &FieldDef,
        up: bool,
    ) -> Result<Pattern, ModelError> {
        let (mut start, mut step, mut count) = (def.default, 1, 1);
        if let Some(node) = body {
            let t = self
                .r
                .table(node, path, "a table with start, step and count")?;
            self.r.only(&t, &["start", "step", "count"])?;
            if let Some(n) = t.get("start") {
                start = self.scalar(n, &t.child("start"), def)?;
            }
            if let Some(n) = t.get("step") {
                step = self.scalar(n, &t.child("step"), def)?;
            }
            if let Some(n) = self
                .r
                .opt_uint(&t, "count", u64::MAX, "a count of values")?
            {
                count = n;
            }
            if count == 0 {
                let span = t.get("count").map_or(t.span.clone(), Node::span);
                return Err(self.err(&span, &t.child("count"), COUNT_AT_LEAST_ONE));
            }
        }
        Ok(if up {
            Pattern::Increment { start, step, count }
        } else {
            Pattern::Decrement { start, step, count }
        })
    }

    pub(super) fn random(
        &self,
        body: Option<&Node>,
        path: &str,
        def: &FieldDef,
    ) -> Result<Pattern, ModelError> {
        // OTG defaults, except count: OTG's 1 would repeat one value forever, so strobe's
        // default 0 means "never repeats".
        let (mut min, mut max, mut seed, mut count) = (0, def.max(), 1, 0);
        if let Some(node) = body {
            let t = self
                .r
                .table(node, path, "a table with min, max, seed and count")?;
            self.r.only(&t, &["min", "max", "seed", "count"])?;
            if let Some(n) = t.get("min") {
                min = self.scalar(n, &t.child("min"), def)?;
            }
            if let Some(n) = t.get("max") {
                max = self.scalar(n, &t.child("max"), def)?;
            }
            if let Some(n) = self.r.opt_uint(&t, "seed", i64::MAX as u64, "a seed")? {
                seed = n;
            }
            if let Some(n) = self.r.opt_uint(
                &t,
                "count",
                i64::MAX as u64,
                "a count of values (0 = never repeat)",
            )? {
                count = n;
            }
        }
        Ok(Pattern::Random {
            min,
            max,
            seed,
            count,
        })
    }

    /// OTG checksum fields: `{ choice = "generated", generated = "good" }` or
    /// `{ choice = "custom", custom = 0x1234 }`.
    pub(super) fn checksum(
        &self,
        node: &Node,
        path: &str,
        def: &FieldDef,
    ) -> Result<Option<Pattern>, ModelError> {
        let t = self.r.table(node, path, "a checksum table")?;
        let (choice, body) = self
            .r
            .choice(&t, &["generated", "custom"], Some("generated"))?;
        let cpath = format!("{path}.{choice}");
        match (choice, body) {
            ("custom", Some(n)) => Ok(Some(Pattern::Value(self.scalar(n, &cpath, def)?))),
            ("custom", None) => {
                let message = "missing custom checksum value — give custom = 0x1234";
                Err(self.err(&t.span, &cpath, message))
            }
            (_, None) => Ok(None),
            (_, Some(n)) => match self.r.string(n, &cpath, "\"good\"")? {
                "good" => Ok(None),
                other => Err(self.err(
                    &n.span(),
                    &cpath,
                    format!("generated = \"{other}\" is not supported — accepted: \"good\" (computed), or custom = a fixed value"),
                )),
            },
        }
    }

    pub(super) fn payload(&self, node: &Node, path: &str) -> Result<Payload, ModelError> {
        const SIMPLE: [(&str, Payload); 4] = [
            ("increment_byte", Payload::IncrementByte),
            ("decrement_byte", Payload::DecrementByte),
            ("increment_word", Payload::IncrementWord),
            ("decrement_word", Payload::DecrementWord),
        ];
        if let Value::Str(s) = node.get_ref() {
            return SIMPLE
                .iter()
                .find(|(n, _)| n == s)
                .map(|(_, p)| p.clone())
                .ok_or_else(|| {
                    let accepted = "increment_byte, decrement_byte, increment_word, decrement_word, or { fixed = { pattern = \"00ff\", repeat = true } }";
                    let message = format!("unknown payload `{s}` — accepted: {accepted}");
                    self.err(&node.span(), path, message)
                });
        }
        let t = self.r.table(
            node,
            path,
            "a payload table such as { increment_byte = {} }",
        )?;
        let (choice, body) = self.r.choice(
            &t,
            &[
                "fixed",
                "increment_byte",
                "decrement_byte",
                "increment_word",
                "decrement_word",
            ],
            Some("fixed"),
        )?;
        let cpath = format!("{path}.{choice}");
        if let Some((_, simple)) = SIMPLE.iter().find(|(n, _)| *n == choice) {
            if let Some(n) = body {
                let b = self.r.table(n, &cpath, "an empty table {}")?;
                self.r.only(&b, &[])?;
            }
            return Ok(simple.clone());
        }
        let Some(n) = body else {
            return Ok(Payload::default());
        };
        let b = self.r.table(n, &cpath, "a table with pattern and repeat")?;
        self.r.only(&b, &["pattern", "repeat"])?;
        let pattern = match b.get("pattern") {
            None => vec![0],
            Some(p) => {
                let text = self
                    .r
                    .string(p, &b.child("pattern"), "hex bytes such as \"00ff\"")?;
                parse_hex_bytes(text).map_err(|m| self.err(&p.span(), &b.child("pattern"), m))?
            }
        };
        let repeat = self.r.opt_bool(&b, "repeat")?.unwrap_or(true);
        Ok(Payload::Fixed { pattern, repeat })
    }
}
