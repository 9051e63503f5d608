//! `size`: fixed, increment, random, weighted pairs and OTG's predefined distributions.

use crate::error::ModelError;
use crate::node::{Node, Value};
use crate::size::SizeSpec;

use super::{default_size_seed, Loader};

/// OTG's predefined size distributions. Fractional OTG weights are kept to two decimals
/// by scaling them by 100.
pub(super) const PREDEFINED_SIZES: [(&str, &[(u32, u32)]); 5] = [
    ("imix", &[(64, 7), (570, 4), (1518, 1)]),
    (
        "ipsec_imix",
        &[(90, 5867), (92, 200), (594, 2366), (1418, 1567)],
    ),
    (
        "ipv6_imix",
        &[(60, 5867), (496, 200), (594, 2366), (1518, 1567)],
    ),
    (
        "standard_imix",
        &[(58, 5867), (62, 200), (594, 2366), (1518, 1567)],
    ),
    (
        "tcp_imix",
        &[(90, 5867), (92, 200), (594, 2366), (1518, 1567)],
    ),
];

/// Names of OTG's predefined size distributions.
pub(crate) const PREDEFINED_SIZE_NAMES: [&str; 5] = [
    PREDEFINED_SIZES[0].0,
    PREDEFINED_SIZES[1].0,
    PREDEFINED_SIZES[2].0,
    PREDEFINED_SIZES[3].0,
    PREDEFINED_SIZES[4].0,
];

/// One of OTG's predefined size distributions, by name.
pub(crate) fn predefined_size(name: &str) -> Option<SizeSpec> {
    PREDEFINED_SIZES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, pairs)| SizeSpec::WeightPairs(pairs.to_vec()))
}

/// OTG weights are floats; strobe interleaves sizes by integer weights. Whole weights are
/// kept as they are, others are kept to two decimals (scaled by 100); the result is
/// reduced by the common divisor.
pub(super) fn integer_weights(weights: &[f64]) -> Result<Vec<u32>, String> {
    if let Some(bad) = weights.iter().find(|w| !w.is_finite() || **w < 0.0) {
        return Err(format!(
            "weight {bad} is not accepted — weights are numbers ≥ 0"
        ));
    }
    let whole = weights.iter().all(|w| w.fract() == 0.0);
    let scale = if whole { 1.0 } else { 100.0 };
    let scaled: Vec<f64> = weights.iter().map(|w| (w * scale).round()).collect();
    if scaled.iter().any(|w| *w > f64::from(u32::MAX)) {
        return Err(format!(
            "weights above {} are not accepted",
            u32::MAX as f64 / scale
        ));
    }
    let ints: Vec<u32> = scaled.iter().map(|w| *w as u32).collect();
    let divisor = ints.iter().fold(0, |g, w| gcd(g, *w)).max(1);
    Ok(ints.iter().map(|w| w / divisor).collect())
}

pub(super) fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl Loader<'_> {
    pub(super) fn size(
        &self,
        node: &Node,
        path: &str,
        index: usize,
    ) -> Result<(SizeSpec, u64), ModelError> {
        let seed = default_size_seed(index);
        let size_u32 = |n: &Node, p: &str| -> Result<u32, ModelError> {
            self.r
                .uint(n, p, u64::from(u32::MAX), "a frame size in bytes")
                .map(|v| v as u32)
        };
        match node.get_ref() {
            Value::Int(_) => Ok((SizeSpec::Fixed(size_u32(node, path)?), seed)),
            Value::Str(s) => Ok((self.predefined_size(s, node, path)?, seed)),
            Value::Table(_) => {
                let t = self.r.table(node, path, "a size table")?;
                let (choice, body) = self.r.choice(
                    &t,
                    &["fixed", "increment", "random", "weight_pairs"],
                    Some("fixed"),
                )?;
                let cpath = format!("{path}.{choice}");
                match choice {
                    "fixed" => Ok((
                        SizeSpec::Fixed(
                            body.map(|n| size_u32(n, &cpath)).transpose()?.unwrap_or(64),
                        ),
                        seed,
                    )),
                    "increment" => {
                        let (mut start, mut end, mut step) = (64, 1518, 1);
                        if let Some(n) = body {
                            let b = self
                                .r
                                .table(n, &cpath, "a table with start, end and step")?;
                            self.r.only(&b, &["start", "end", "step"])?;
                            if let Some(v) = b.get("start") {
                                start = size_u32(v, &b.child("start"))?;
                            }
                            if let Some(v) = b.get("end") {
                                end = size_u32(v, &b.child("end"))?;
                            }
                            if let Some(v) = b.get("step") {
                                step = size_u32(v, &b.child("step"))?;
                            }
                        }
                        Ok((SizeSpec::Increment { start, end, step }, seed))
                    }
                    "random" => {
                        let (mut min, mut max, mut seed) = (64, 1518, seed);
                        if let Some(n) = body {
                            let b = self.r.table(n, &cpath, "a table with min and max")?;
                            self.r.only(&b, &["min", "max", "seed"])?;
                            if let Some(v) = b.get("min") {
                                min = size_u32(v, &b.child("min"))?;
                            }
                            if let Some(v) = b.get("max") {
                                max = size_u32(v, &b.child("max"))?;
                            }
                            if let Some(v) =
                                self.r.opt_uint(&b, "seed", i64::MAX as u64, "a seed")?
                            {
                                seed = v;
                            }
                        }
                        Ok((SizeSpec::Random { min, max }, seed))
                    }
                    _ => Ok((self.weight_pairs(body, &cpath)?, seed)),
                }
            }
            other => Err(self.err(
                &node.span(),
                path,
                format!(
                    "expected a frame size such as 128, \"imix\" or a size table, found {}",
                    other.kind()
                ),
            )),
        }
    }

    pub(super) fn predefined_size(
        &self,
        name: &str,
        node: &Node,
        path: &str,
    ) -> Result<SizeSpec, ModelError> {
        predefined_size(name).ok_or_else(|| {
            self.err(
                &node.span(),
                path,
                format!(
                    "unknown size `{name}` — accepted: a size in bytes such as 128, or one of {}",
                    PREDEFINED_SIZE_NAMES.join(", ")
                ),
            )
        })
    }

    pub(super) fn weight_pairs(
        &self,
        body: Option<&Node>,
        path: &str,
    ) -> Result<SizeSpec, ModelError> {
        let Some(node) = body else {
            return Ok(SizeSpec::imix());
        };
        let t = self
            .r
            .table(node, path, "a table with predefined or custom")?;
        let (choice, inner) = self
            .r
            .choice(&t, &["predefined", "custom"], Some("predefined"))?;
        let cpath = format!("{path}.{choice}");
        if choice == "predefined" {
            return match inner {
                None => Ok(SizeSpec::imix()),
                Some(n) => {
                    let name = self.r.string(
                        n,
                        &cpath,
                        "a predefined distribution name such as \"imix\"",
                    )?;
                    self.predefined_size(name, n, &cpath)
                }
            };
        }
        let inner = inner.ok_or_else(|| {
            self.err(
                &t.span,
                &cpath,
                "missing custom list — give custom = [{ size = 64, weight = 7 }, …]",
            )
        })?;
        let items = self
            .r
            .array(inner, &cpath, "an array of { size, weight } tables")?;
        let mut sizes = Vec::with_capacity(items.len());
        let mut weights = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let ipath = format!("{cpath}[{i}]");
            let pair = self.r.table(item, &ipath, "a { size, weight } table")?;
            self.r.only(&pair, &["size", "weight"])?;
            let size = self
                .r
                .opt_uint(&pair, "size", u64::from(u32::MAX), "a frame size in bytes")?
                .unwrap_or(64);
            let weight = self
                .r
                .opt_number(&pair, "weight", "a weight")?
                .unwrap_or(1.0);
            sizes.push(size as u32);
            weights.push(weight);
        }
        if items.is_empty() {
            return Err(self.err(
                &inner.span(),
                &cpath,
                "the custom list is empty — give at least one { size, weight }",
            ));
        }
        let weights = integer_weights(&weights).map_err(|m| self.err(&inner.span(), &cpath, m))?;
        Ok(SizeSpec::WeightPairs(
            sizes.into_iter().zip(weights).collect(),
        ))
    }
}
