//! A TOML document as a tree in which every key and value keeps its byte span, so that
//! errors found while interpreting it (not only syntax errors) carry line and column.

use std::fmt;
use std::ops::Range;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use toml::Spanned;

use crate::error::{Locator, ModelError};

/// A value together with its byte span in the scenario text.
pub(crate) type Node = Spanned<Value>;

#[derive(Clone, Debug)]
pub(crate) enum Value {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    Array(Vec<Node>),
    Table(Vec<(Spanned<String>, Node)>),
}

impl Value {
    /// "a string", "an integer", … for "expected X, found Y" messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Str(_) => "a string",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a float",
            Value::Bool(_) => "a boolean",
            Value::Array(_) => "an array",
            Value::Table(_) => "a table",
        }
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a TOML value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Int(v))
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
        i64::try_from(v)
            .map(Value::Int)
            .map_err(|_| E::custom("integer too large"))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::Str(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::Str(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<Spanned<String>>()? {
            let value = map.next_value()?;
            entries.push((key, value));
        }
        Ok(Value::Table(entries))
    }
}

/// A JSON document (an OTG config) as a tree like a parsed TOML file's, every span empty
/// (errors then name the path, not a line). Nulls are left out, as TOML has none; integers
/// beyond i64 become decimal strings (fields that take field values read them; others say
/// what they accept).
pub(crate) fn from_json(value: &serde_json::Value) -> Option<Node> {
    use serde_json::Value as J;
    let v = match value {
        J::Null => return None,
        J::Bool(b) => Value::Bool(*b),
        J::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => Value::Int(i),
            (None, Some(u), _) => Value::Str(u.to_string()),
            (_, _, Some(f)) => Value::Float(f),
            _ => Value::Str(n.to_string()),
        },
        J::String(s) => Value::Str(s.clone()),
        J::Array(items) => Value::Array(items.iter().filter_map(from_json).collect()),
        J::Object(map) => Value::Table(
            map.iter()
                .filter_map(|(k, v)| Some((Spanned::new(0..0, k.clone()), from_json(v)?)))
                .collect(),
        ),
    };
    Some(Spanned::new(0..0, v))
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(ValueVisitor)
    }
}

/// Parses TOML text, turning syntax errors into located `ModelError`s.
pub(crate) fn parse_document(text: &str, loc: &Locator<'_>) -> Result<Node, ModelError> {
    toml::from_str::<Node>(text).map_err(|e| {
        // toml presents date-times to serde as a private one-key table, which a spanned
        // key cannot hold; no scenario value is a date, so say that plainly.
        let message = if e.message().contains("$__toml_private_datetime") {
            "dates and times are not accepted in a scenario; quote the value if it is text"
                .to_string()
        } else {
            format!("invalid TOML: {}", e.message().trim_end())
        };
        loc.error(e.span().as_ref(), "", message)
    })
}

/// Reads typed values out of the tree, producing errors that name the path, the
/// position and what was expected.
#[derive(Clone, Copy)]
pub(crate) struct Reader<'a> {
    pub loc: Locator<'a>,
}

/// A table being read: its entries, where it is, and its path in the model.
pub(crate) struct Table<'n> {
    pub entries: &'n [(Spanned<String>, Node)],
    pub span: Range<usize>,
    pub path: String,
}

impl<'n> Table<'n> {
    pub fn get(&self, key: &str) -> Option<&'n Node> {
        self.entries
            .iter()
            .find(|(k, _)| k.get_ref() == key)
            .map(|(_, v)| v)
    }

    /// The model path of one of this table's keys.
    pub fn child(&self, key: &str) -> String {
        join(&self.path, key)
    }

    /// Keys present in this table, in file order.
    pub fn keys(&self) -> impl Iterator<Item = &'n Spanned<String>> {
        self.entries.iter().map(|(k, _)| k)
    }
}

/// `parent.key`, or `key` at the top level.
pub(crate) fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

impl<'a> Reader<'a> {
    pub fn error(&self, span: &Range<usize>, path: &str, message: impl Into<String>) -> ModelError {
        self.loc.error(Some(span), path, message)
    }

    fn wrong_type(&self, node: &Node, path: &str, expected: &str) -> ModelError {
        self.error(
            &node.span(),
            path,
            format!("expected {expected}, found {}", node.get_ref().kind()),
        )
    }

    pub fn table<'n>(
        &self,
        node: &'n Node,
        path: &str,
        what: &str,
    ) -> Result<Table<'n>, ModelError> {
        match node.get_ref() {
            Value::Table(entries) => Ok(Table {
                entries,
                span: node.span(),
                path: path.to_string(),
            }),
            _ => Err(self.wrong_type(node, path, what)),
        }
    }

    /// Rejects any key outside `accepted`, naming the key and listing the accepted ones.
    pub fn only(&self, table: &Table<'_>, accepted: &[&str]) -> Result<(), ModelError> {
        match table
            .keys()
            .find(|k| !accepted.contains(&k.get_ref().as_str()))
        {
            None => Ok(()),
            Some(key) => Err(self.error(
                &key.span(),
                &table.child(key.get_ref()),
                format!(
                    "unknown key `{}` — accepted keys here: {}",
                    key.get_ref(),
                    accepted.join(", ")
                ),
            )),
        }
    }

    pub fn array<'n>(
        &self,
        node: &'n Node,
        path: &str,
        what: &str,
    ) -> Result<&'n [Node], ModelError> {
        match node.get_ref() {
            Value::Array(items) => Ok(items),
            _ => Err(self.wrong_type(node, path, what)),
        }
    }

    pub fn string<'n>(
        &self,
        node: &'n Node,
        path: &str,
        what: &str,
    ) -> Result<&'n str, ModelError> {
        match node.get_ref() {
            Value::Str(s) => Ok(s),
            _ => Err(self.wrong_type(node, path, what)),
        }
    }

    pub fn boolean(&self, node: &Node, path: &str) -> Result<bool, ModelError> {
        match node.get_ref() {
            Value::Bool(b) => Ok(*b),
            _ => Err(self.wrong_type(node, path, "true or false")),
        }
    }

    /// A non-negative integer no larger than `max`.
    pub fn uint(&self, node: &Node, path: &str, max: u64, what: &str) -> Result<u64, ModelError> {
        match node.get_ref() {
            Value::Int(i) if *i >= 0 && (*i as u64) <= max => Ok(*i as u64),
            Value::Int(i) => Err(self.error(
                &node.span(),
                path,
                format!("{i} is out of range — expected {what} from 0 to {max}"),
            )),
            _ => Err(self.wrong_type(node, path, what)),
        }
    }

    /// A finite number (integer or float) that is not negative.
    pub fn number(&self, node: &Node, path: &str, what: &str) -> Result<f64, ModelError> {
        let value = match node.get_ref() {
            Value::Int(i) => *i as f64,
            Value::Float(f) => *f,
            _ => return Err(self.wrong_type(node, path, what)),
        };
        if value.is_finite() && value >= 0.0 {
            Ok(value)
        } else {
            Err(self.error(
                &node.span(),
                path,
                format!("{value} is not accepted — expected {what} (a number ≥ 0)"),
            ))
        }
    }

    /// Optional key helpers: `None` when absent.
    pub fn opt_uint(
        &self,
        table: &Table<'_>,
        key: &str,
        max: u64,
        what: &str,
    ) -> Result<Option<u64>, ModelError> {
        table
            .get(key)
            .map(|n| self.uint(n, &table.child(key), max, what))
            .transpose()
    }

    pub fn opt_bool(&self, table: &Table<'_>, key: &str) -> Result<Option<bool>, ModelError> {
        table
            .get(key)
            .map(|n| self.boolean(n, &table.child(key)))
            .transpose()
    }

    pub fn opt_number(
        &self,
        table: &Table<'_>,
        key: &str,
        what: &str,
    ) -> Result<Option<f64>, ModelError> {
        table
            .get(key)
            .map(|n| self.number(n, &table.child(key), what))
            .transpose()
    }

    pub fn opt_string<'n>(
        &self,
        table: &Table<'n>,
        key: &str,
        what: &str,
    ) -> Result<Option<&'n str>, ModelError> {
        table
            .get(key)
            .map(|n| self.string(n, &table.child(key), what))
            .transpose()
    }

    /// The OTG "choice" idiom: a table holding one alternative, optionally named by a
    /// `choice` key (`{ choice = "fixed", fixed = 128 }` or `{ fixed = 128 }`).
    ///
    /// Returns the chosen alternative and its node (None when `choice` names an
    /// alternative whose table is omitted, meaning all its defaults). Rejects unknown
    /// keys, several alternatives at once, and a `choice` contradicting the key present.
    pub fn choice<'n>(
        &self,
        table: &Table<'n>,
        alternatives: &[&'static str],
        default: Option<&'static str>,
    ) -> Result<(&'static str, Option<&'n Node>), ModelError> {
        let mut accepted = vec!["choice"];
        accepted.extend_from_slice(alternatives);
        self.only(table, &accepted)?;
        let present: Vec<&Spanned<String>> =
            table.keys().filter(|k| k.get_ref() != "choice").collect();
        if present.len() > 1 {
            return Err(self.error(
                &present[1].span(),
                &table.path,
                format!(
                    "`{}` and `{}` are alternatives — give only one of: {}",
                    present[0].get_ref(),
                    present[1].get_ref(),
                    alternatives.join(", ")
                ),
            ));
        }
        let named = |key: &str| alternatives.iter().copied().find(|a| *a == key);
        if let Some(choice_node) = table.get("choice") {
            let path = table.child("choice");
            let text = self.string(choice_node, &path, "the name of an alternative")?;
            let chosen = named(text).ok_or_else(|| {
                self.error(
                    &choice_node.span(),
                    &path,
                    format!(
                        "unknown choice `{text}` — accepted: {}",
                        alternatives.join(", ")
                    ),
                )
            })?;
            if let Some(other) = present.first() {
                if other.get_ref() != chosen {
                    return Err(self.error(
                        &other.span(),
                        &table.child(other.get_ref()),
                        format!(
                            "choice = \"{chosen}\" but `{}` is given — give `{chosen}` or change the choice",
                            other.get_ref()
                        ),
                    ));
                }
            }
            return Ok((chosen, table.get(chosen)));
        }
        match present.first() {
            // `only` has already vetted the key, so it is one of the alternatives.
            Some(key) => {
                let chosen = named(key.get_ref()).unwrap_or(alternatives[0]);
                Ok((chosen, table.get(chosen)))
            }
            None => match default {
                Some(chosen) => Ok((chosen, None)),
                None => Err(self.error(
                    &table.span,
                    &table.path,
                    format!("empty table — give one of: {}", alternatives.join(", ")),
                )),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Node, ModelError> {
        parse_document(text, &Locator::new("t.toml", text))
    }

    #[test]
    fn keys_and_values_keep_their_spans() {
        let text = "a = 1\n[t]\nb = \"x\"\n";
        let root = parse(text).unwrap();
        let reader = Reader {
            loc: Locator::new("t.toml", text),
        };
        let top = reader.table(&root, "", "a table").unwrap();
        let t = reader.table(top.get("t").unwrap(), "t", "a table").unwrap();
        let b = t.get("b").unwrap();
        assert_eq!(&text[b.span()], "\"x\"");
        assert_eq!(reader.loc.line_column(&b.span()), (3, 5));
    }

    #[test]
    fn syntax_errors_and_dates_are_located() {
        let err = parse("a = 1\nb = \n").unwrap_err();
        assert_eq!(err.line, Some(2));
        assert!(err.message.starts_with("invalid TOML"), "{}", err.message);
        let err = parse("a = 1\nwhen = 1979-05-27\n").unwrap_err();
        assert_eq!(err.line, Some(2));
        assert!(err.message.contains("dates"), "{}", err.message);
    }

    #[test]
    fn choice_accepts_both_forms_and_rejects_conflicts() {
        let text = "x = { choice = \"b\", b = 2 }\ny = { b = 3 }\nz = { a = 1, b = 2 }\nw = { choice = \"a\", b = 1 }\n";
        let root = parse(text).unwrap();
        let reader = Reader {
            loc: Locator::new("t.toml", text),
        };
        let top = reader.table(&root, "", "a table").unwrap();
        let get = |k: &str| reader.table(top.get(k).unwrap(), k, "a table").unwrap();
        assert_eq!(reader.choice(&get("x"), &["a", "b"], None).unwrap().0, "b");
        assert_eq!(reader.choice(&get("y"), &["a", "b"], None).unwrap().0, "b");
        let both = reader.choice(&get("z"), &["a", "b"], None).unwrap_err();
        assert!(
            both.message.contains("give only one of: a, b"),
            "{}",
            both.message
        );
        let contradiction = reader.choice(&get("w"), &["a", "b"], None).unwrap_err();
        assert!(
            contradiction.message.contains("choice = \"a\""),
            "{}",
            contradiction.message
        );
        let unknown = reader.choice(&get("x"), &["a"], None).unwrap_err();
        assert!(
            unknown.message.contains("unknown key `b`"),
            "{}",
            unknown.message
        );
    }
}
