//! The TOML document as a tree of values that each remember their byte span,
//! plus `Table`, a reader that turns those values into checked settings.
//!
//! Why not typed serde structs with `deny_unknown_fields`: serde's errors
//! name a field but not the table it sits in, and a `Spanned` field can only
//! point at values that exist. Walking a spanned tree ourselves lets every
//! error carry its full key path (`cluster.replicas`) and its line, including
//! "missing key" (reported at the table header) and cross-field checks.

use std::fmt;
use std::ops::Range;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use toml::Spanned;

use crate::ConfigError;

/// Entries of a TOML table, in file order.
pub(crate) type Entries = Vec<(String, Spanned<Value>)>;

/// An error found while parsing: its byte span (if known) and message.
pub(crate) type ParseError = (Option<Range<usize>>, String);

/// One TOML value. Table entries keep file order (needed for node groups).
#[derive(Debug)]
pub(crate) enum Value {
    Table(Vec<(String, Spanned<Value>)>),
    Array(Vec<Spanned<Value>>),
    Integer(i64),
    String(String),
    Boolean(bool),
    /// Floats are never valid in this format; only the type is reported.
    Float,
}

impl Value {
    fn kind(&self) -> &'static str {
        match self {
            Value::Table(_) => "a table",
            Value::Array(_) => "an array",
            Value::Integer(_) => "an integer",
            Value::String(_) => "a string",
            Value::Boolean(_) => "a boolean",
            Value::Float => "a float",
        }
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ValueVisitor;
        impl<'de> Visitor<'de> for ValueVisitor {
            type Value = Value;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a TOML value")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
                Ok(Value::Boolean(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
                Ok(Value::Integer(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
                // TOML integers are i64, so this only fires for values the
                // parser already accepted as i64; keep the check anyway.
                i64::try_from(v)
                    .map(Value::Integer)
                    .map_err(|_| E::custom("integer too large"))
            }
            fn visit_f64<E: de::Error>(self, _v: f64) -> Result<Value, E> {
                Ok(Value::Float)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
                Ok(Value::String(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
                Ok(Value::String(v))
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
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Value::Table(entries))
            }
        }
        deserializer.deserialize_any(ValueVisitor)
    }
}

/// Parses `text` into the root table's entries, or an error with a byte span.
pub(crate) fn parse_document(text: &str) -> Result<Entries, ParseError> {
    // First as a plain table: this reports TOML syntax errors (and duplicate
    // keys) with toml's own, precise messages.
    if let Err(e) = toml::from_str::<toml::Table>(text) {
        let message = e.message().trim().replace('\n', "; ");
        // toml gives no message for some errors, such as a key with no
        // value at the very end of the text.
        let message = if message.is_empty() {
            "malformed TOML here (a key without a value?)".to_owned()
        } else {
            message
        };
        return Err((e.span(), message));
    }
    // toml only knows spans for values written out explicitly; a table made
    // implicitly by a dotted key (`a.b = 1`, `[a.b]`) or a date has none, and
    // deserializing it as `Spanned` fails with an internal-sounding message.
    // None of those belong in this format, so say that instead.
    match toml::from_str::<Value>(text) {
        Ok(Value::Table(entries)) => Ok(entries),
        Ok(other) => Err((
            None,
            format!("expected a table at the top level, found {}", other.kind()),
        )),
        Err(e) => Err((
            e.span(),
            "unsupported TOML here: write plain `key = value` lines under the [mgmd], \
             [cluster], [threads] and [[data_node]] headers (dotted keys, nested tables \
             and dates are not part of this format)"
                .to_owned(),
        )),
    }
}

/// The file text and its name: turns byte offsets into lines for errors.
pub(crate) struct Ctx<'a> {
    pub text: &'a str,
    pub source: &'a str,
}

impl Ctx<'_> {
    /// 1-based line of a byte offset (clamped to the text).
    pub fn line_of(&self, offset: usize) -> usize {
        let bytes = self.text.as_bytes();
        let end = offset.min(bytes.len());
        bytes[..end].iter().filter(|&&b| b == b'\n').count() + 1
    }

    pub fn error(&self, key: &str, line: Option<usize>, message: impl Into<String>) -> ConfigError {
        ConfigError {
            source_name: self.source.to_owned(),
            line,
            key: key.to_owned(),
            message: message.into(),
        }
    }

    pub fn error_at(
        &self,
        key: &str,
        span: Option<Range<usize>>,
        message: impl Into<String>,
    ) -> ConfigError {
        self.error(key, span.map(|s| self.line_of(s.start)), message)
    }
}

/// A setting's value and the line it was written on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Located<T> {
    pub value: T,
    pub line: usize,
}

/// A TOML table being read: every key was checked against the allowed ones
/// on construction, so the getters only deal with types and ranges.
pub(crate) struct Table<'a> {
    ctx: &'a Ctx<'a>,
    path: String,
    /// Line of the table header (or inline table), for "missing key".
    line: Option<usize>,
    entries: &'a [(String, Spanned<Value>)],
}

impl<'a> Table<'a> {
    /// The root of the document (no header, no path prefix).
    pub fn root(
        ctx: &'a Ctx<'a>,
        entries: &'a [(String, Spanned<Value>)],
        allowed: &[&str],
    ) -> Result<Self, ConfigError> {
        let table = Table {
            ctx,
            path: String::new(),
            line: None,
            entries,
        };
        table.check_keys(allowed)?;
        Ok(table)
    }

    /// Reads `value` as the table at `path`, rejecting unknown keys.
    pub fn new(
        ctx: &'a Ctx<'a>,
        path: &str,
        value: &'a Spanned<Value>,
        allowed: &[&str],
    ) -> Result<Self, ConfigError> {
        let line = Some(ctx.line_of(value.span().start));
        match value.get_ref() {
            Value::Table(entries) => {
                let table = Table {
                    ctx,
                    path: path.to_owned(),
                    line,
                    entries,
                };
                table.check_keys(allowed)?;
                Ok(table)
            }
            other => Err(ctx.error(
                path,
                line,
                format!("expected a table, found {}", other.kind()),
            )),
        }
    }

    fn check_keys(&self, allowed: &[&str]) -> Result<(), ConfigError> {
        for (name, value) in self.entries {
            if !allowed.contains(&name.as_str()) {
                return Err(self.ctx.error_at(
                    &self.key(name),
                    Some(value.span()),
                    format!(
                        "unknown {}; expected one of: {}",
                        if matches!(value.get_ref(), Value::Table(_)) {
                            "table"
                        } else {
                            "key"
                        },
                        allowed.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Full dotted path of a key in this table.
    pub fn key(&self, name: &str) -> String {
        if self.path.is_empty() {
            name.to_owned()
        } else {
            format!("{}.{}", self.path, name)
        }
    }

    pub fn get(&self, name: &str) -> Option<&'a Spanned<Value>> {
        self.entries.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    fn line_of(&self, value: &Spanned<Value>) -> usize {
        self.ctx.line_of(value.span().start)
    }

    fn wrong_type(&self, name: &str, value: &Spanned<Value>, expected: &str) -> ConfigError {
        self.ctx.error(
            &self.key(name),
            Some(self.line_of(value)),
            format!("expected {expected}, found {}", value.get_ref().kind()),
        )
    }

    /// The error for a key that must be present but is not.
    pub fn missing(&self, name: &str) -> ConfigError {
        let header = if self.path.is_empty() {
            String::new()
        } else {
            format!(" in [{}]", self.path)
        };
        self.ctx.error(
            &self.key(name),
            self.line,
            format!("missing required key{header}"),
        )
    }

    /// An integer in `min..=max`, converted to `T` (the range must fit `T`).
    pub fn integer<T: TryFrom<i64>>(
        &self,
        name: &str,
        min: i64,
        max: i64,
    ) -> Result<Option<Located<T>>, ConfigError> {
        let Some(value) = self.get(name) else {
            return Ok(None);
        };
        let Value::Integer(n) = *value.get_ref() else {
            return Err(self.wrong_type(name, value, "an integer"));
        };
        let line = self.line_of(value);
        let out_of_range = || {
            let message = if min == max {
                format!("must be {min}, got {n}")
            } else if max == i64::MAX {
                format!("must be at least {min}, got {n}")
            } else {
                format!("must be between {min} and {max}, got {n}")
            };
            self.ctx.error(&self.key(name), Some(line), message)
        };
        if n < min || n > max {
            return Err(out_of_range());
        }
        // The range check above is the real check; a failed conversion can
        // only mean the caller passed a range wider than `T`.
        let value = T::try_from(n).map_err(|_| out_of_range())?;
        Ok(Some(Located { value, line }))
    }

    pub fn string(&self, name: &str) -> Result<Option<Located<&'a str>>, ConfigError> {
        let Some(value) = self.get(name) else {
            return Ok(None);
        };
        match value.get_ref() {
            Value::String(s) => Ok(Some(Located {
                value: s.as_str(),
                line: self.line_of(value),
            })),
            _ => Err(self.wrong_type(name, value, "a string")),
        }
    }

    /// A string that must be present and not empty.
    pub fn required_string(&self, name: &str) -> Result<Located<&'a str>, ConfigError> {
        let s = self.string(name)?.ok_or_else(|| self.missing(name))?;
        if s.value.trim().is_empty() {
            return Err(self
                .ctx
                .error(&self.key(name), Some(s.line), "must not be empty"));
        }
        Ok(s)
    }

    pub fn boolean(&self, name: &str) -> Result<Option<Located<bool>>, ConfigError> {
        let Some(value) = self.get(name) else {
            return Ok(None);
        };
        match *value.get_ref() {
            Value::Boolean(b) => Ok(Some(Located {
                value: b,
                line: self.line_of(value),
            })),
            _ => Err(self.wrong_type(name, value, "a boolean (true or false)")),
        }
    }

    /// A memory size: integer bytes, or a string such as "256M".
    pub fn memory(&self, name: &str) -> Result<Option<Located<u64>>, ConfigError> {
        let Some(value) = self.get(name) else {
            return Ok(None);
        };
        let line = self.line_of(value);
        let bytes = match value.get_ref() {
            Value::Integer(n) => u64::try_from(*n).map_err(|_| {
                self.ctx.error(
                    &self.key(name),
                    Some(line),
                    format!("must not be negative, got {n}"),
                )
            })?,
            Value::String(s) => parse_memory(s)
                .map_err(|message| self.ctx.error(&self.key(name), Some(line), message))?,
            _ => {
                return Err(self.wrong_type(name, value, "a byte count or a string like \"256M\""))
            }
        };
        Ok(Some(Located { value: bytes, line }))
    }

    pub fn ctx(&self) -> &'a Ctx<'a> {
        self.ctx
    }
}

/// Parses "64M", "1G", "512K", "2T" or "1048576" (binary units, any case).
pub(crate) fn parse_memory(text: &str) -> Result<u64, String> {
    let bad = || {
        format!(
            "bad memory size \"{text}\": expected bytes or a number followed by K, M, G or T \
             (binary units), like \"256M\""
        )
    };
    let trimmed = text.trim();
    let digits_end = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (digits, unit) = trimmed.split_at(digits_end);
    if digits.is_empty() {
        return Err(bad());
    }
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return Err(bad()),
    };
    let number: u64 = digits
        .parse()
        .map_err(|_| format!("memory size \"{text}\" is too large"))?;
    number
        .checked_mul(1u64 << shift)
        .ok_or_else(|| format!("memory size \"{text}\" is too large"))
}
