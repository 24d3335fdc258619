//! The SQL functions of JSON, with MySQL 8's arguments, results and
//! errors (docs/design/0041-json.md).
//!
//! Arguments come in three kinds. A *document* is JSON text (a JSON
//! column's value, a JSON function's result, or a string the function
//! reads as JSON: 3141 if it is not). A *path* is path text. A *value*
//! is what a function puts into a document: the compiler wraps a value
//! that is not already JSON in [`JsonFunction::FromSql`], which makes a
//! SQL string a JSON string and a number a JSON number, so a function
//! reads every value as JSON text (SQL NULL as JSON null).

use super::path::{Leg, Path, Position, Step};
use super::Json;
use crate::error::{codes, SqlError, SqlResult};
use crate::value::{self, Value};
use client::CompareOp;
use std::collections::HashSet;

/// A JSON function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonFunction {
    /// JSON_EXTRACT(doc, path, ...) and `doc->path`.
    Extract,
    /// JSON_UNQUOTE(text): a JSON string's contents (`->>` is this of
    /// `->`).
    Unquote,
    /// JSON_QUOTE(text).
    Quote,
    /// JSON_OBJECT(key, value, ...).
    Object,
    /// JSON_ARRAY(value, ...).
    Array,
    /// JSON_VALID(x).
    Valid,
    /// JSON_TYPE(doc).
    Type,
    /// JSON_LENGTH(doc[, path]).
    Length,
    /// JSON_DEPTH(doc).
    Depth,
    /// JSON_KEYS(doc[, path]).
    Keys,
    /// JSON_CONTAINS(target, candidate[, path]).
    Contains,
    /// JSON_CONTAINS_PATH(doc, 'one' | 'all', path, ...).
    ContainsPath,
    /// JSON_SET(doc, path, value, ...): replaces or adds.
    Set,
    /// JSON_INSERT(doc, path, value, ...): adds only.
    Insert,
    /// JSON_REPLACE(doc, path, value, ...): replaces only.
    Replace,
    /// JSON_REMOVE(doc, path, ...).
    Remove,
    /// JSON_ARRAY_APPEND(doc, path, value, ...).
    ArrayAppend,
    /// JSON_ARRAY_INSERT(doc, path, value, ...).
    ArrayInsert,
    /// JSON_MERGE_PATCH(doc, doc, ...): RFC 7396.
    MergePatch,
    /// JSON_MERGE_PRESERVE(doc, doc, ...) and JSON_MERGE.
    MergePreserve,
    /// JSON_SEARCH(doc, 'one' | 'all', pattern[, escape[, path ...]]).
    Search,
    /// JSON_PRETTY(doc).
    Pretty,
    /// JSON_OVERLAPS(doc, doc).
    Overlaps,
    /// `value MEMBER OF (doc)`.
    MemberOf,
    /// A SQL value as JSON (see the module's comment).
    FromSql,
    /// A truth value as JSON's true or false (NULL as NULL).
    FromBoolean,
    /// CAST(x AS JSON): text read as JSON, a number as a JSON number.
    Cast,
    /// `<=>` where either side is JSON: JSON's equality, NULL equal to
    /// NULL.
    NullSafeEqual,
    /// A comparison where either side is JSON, by JSON's rules: the
    /// other side a JSON scalar (`j->'$.name' = 'Bob'` is true for the
    /// JSON string "Bob").
    Compare(CompareOp),
}

impl JsonFunction {
    /// The function by its SQL name, with whether `count` arguments
    /// suit it.
    pub fn named(name: &str, count: usize) -> Option<Result<JsonFunction, ()>> {
        use JsonFunction::*;
        let (function, fits) = match name {
            "JSON_EXTRACT" => (Extract, count >= 2),
            "JSON_UNQUOTE" => (Unquote, count == 1),
            "JSON_QUOTE" => (Quote, count == 1),
            "JSON_OBJECT" => (Object, count.is_multiple_of(2)),
            "JSON_ARRAY" => (Array, true),
            "JSON_VALID" => (Valid, count == 1),
            "JSON_TYPE" => (Type, count == 1),
            "JSON_LENGTH" => (Length, (1..=2).contains(&count)),
            "JSON_DEPTH" => (Depth, count == 1),
            "JSON_KEYS" => (Keys, (1..=2).contains(&count)),
            "JSON_CONTAINS" => (Contains, (2..=3).contains(&count)),
            "JSON_CONTAINS_PATH" => (ContainsPath, count >= 3),
            "JSON_SET" => (Set, count >= 3 && count % 2 == 1),
            "JSON_INSERT" => (Insert, count >= 3 && count % 2 == 1),
            "JSON_REPLACE" => (Replace, count >= 3 && count % 2 == 1),
            "JSON_REMOVE" => (Remove, count >= 2),
            "JSON_ARRAY_APPEND" => (ArrayAppend, count >= 3 && count % 2 == 1),
            "JSON_ARRAY_INSERT" => (ArrayInsert, count >= 3 && count % 2 == 1),
            "JSON_MERGE_PATCH" => (MergePatch, count >= 2),
            "JSON_MERGE_PRESERVE" | "JSON_MERGE" => (MergePreserve, count >= 2),
            "JSON_SEARCH" => (Search, count >= 3),
            "JSON_PRETTY" => (Pretty, count == 1),
            "JSON_OVERLAPS" => (Overlaps, count == 2),
            _ => return None,
        };
        Some(if fits { Ok(function) } else { Err(()) })
    }

    /// The name errors give it.
    pub fn name(self) -> &'static str {
        use JsonFunction::*;
        match self {
            Extract => "json_extract",
            Unquote => "json_unquote",
            Quote => "json_quote",
            Object => "json_object",
            Array => "json_array",
            Valid => "json_valid",
            Type => "json_type",
            Length => "json_length",
            Depth => "json_depth",
            Keys => "json_keys",
            Contains => "json_contains",
            ContainsPath => "json_contains_path",
            Set => "json_set",
            Insert => "json_insert",
            Replace => "json_replace",
            Remove => "json_remove",
            ArrayAppend => "json_array_append",
            ArrayInsert => "json_array_insert",
            MergePatch => "json_merge_patch",
            MergePreserve => "json_merge_preserve",
            Search => "json_search",
            Pretty => "json_pretty",
            Overlaps => "json_overlaps",
            MemberOf => "member of",
            FromSql | FromBoolean => "json",
            Cast => "cast_as_json",
            Compare(_) | NullSafeEqual => "json comparison",
        }
    }

    /// Whether argument `index` is a value (wrapped in `FromSql` unless
    /// it is JSON already).
    pub fn takes_value_at(self, index: usize) -> bool {
        use JsonFunction::*;
        match self {
            Object => index % 2 == 1,
            Array | Compare(_) | NullSafeEqual => true,
            Set | Insert | Replace | ArrayAppend | ArrayInsert => {
                index >= 2 && index.is_multiple_of(2)
            }
            MemberOf => index == 0,
            _ => false,
        }
    }

    /// Whether its result is JSON (a JSON column's type, and a value
    /// another JSON function takes as JSON).
    pub fn returns_json(self) -> bool {
        use JsonFunction::*;
        matches!(
            self,
            Extract
                | Object
                | Array
                | Keys
                | Set
                | Insert
                | Replace
                | Remove
                | ArrayAppend
                | ArrayInsert
                | MergePatch
                | MergePreserve
                | Search
                | FromSql
                | FromBoolean
                | Cast
        )
    }

    /// Whether its result is an integer (a truth value, a count).
    pub fn returns_integer(self) -> bool {
        use JsonFunction::*;
        matches!(
            self,
            Valid
                | Length
                | Depth
                | Contains
                | ContainsPath
                | Overlaps
                | MemberOf
                | Compare(_)
                | NullSafeEqual
        )
    }
}

/// The longest JSON text a function makes (MySQL's max_allowed_packet,
/// 64 MiB here, as the other functions): a longer one is NULL.
const MAX_TEXT_BYTES: usize = 64 << 20;

/// The JSON text of `json`, as a SQL value.
fn json_value(json: &Json) -> Value {
    let text = json.to_text();
    match text.len() > MAX_TEXT_BYTES {
        true => Value::Null,
        false => Value::Bytes(text.into_bytes()),
    }
}

fn truth(holds: bool) -> Value {
    Value::Int(holds as i64)
}

/// The error for text that is not JSON in argument `index` (from 0).
pub fn invalid_argument(
    function: JsonFunction,
    index: usize,
    error: &super::ParseError,
) -> SqlError {
    if error.too_deep {
        return SqlError::new(
            codes::JSON_DOCUMENT_TOO_DEEP,
            "The JSON document exceeds the maximum depth of 100.",
        );
    }
    SqlError::new(
        codes::INVALID_JSON_TEXT_IN_PARAM,
        format!(
            "Invalid JSON text in argument {} to function {}: \"{}\" at position {}.",
            index + 1,
            function.name(),
            error.message,
            error.position
        ),
    )
}

/// Argument `index` as a document: `None` for NULL.
fn document(function: JsonFunction, values: &[Value], index: usize) -> SqlResult<Option<Json>> {
    match &values[index] {
        Value::Null => Ok(None),
        Value::Bytes(text) => Json::parse(text)
            .map(Some)
            .map_err(|error| invalid_argument(function, index, &error)),
        _ => Err(SqlError::new(
            codes::INVALID_TYPE_FOR_JSON,
            format!(
                "Invalid data type for JSON data in argument {} to function {}; a JSON string or JSON type is required.",
                index + 1,
                function.name()
            ),
        )),
    }
}

/// Argument `index` as a value put into a document (JSON text, or NULL
/// for JSON null).
fn value_argument(function: JsonFunction, values: &[Value], index: usize) -> SqlResult<Json> {
    Ok(document(function, values, index)?.unwrap_or(Json::Null))
}

/// Argument `index` as a path: `None` for NULL.
fn path(values: &[Value], index: usize) -> SqlResult<Option<Path>> {
    match &values[index] {
        Value::Null => Ok(None),
        other => {
            let mut text = Vec::new();
            value::write_text(other, &mut text);
            Path::parse(&text).map(Some)
        }
    }
}

/// A simple path at `index` (3149 for a wildcard): `None` for NULL.
fn simple_path(values: &[Value], index: usize) -> SqlResult<Option<Path>> {
    let path = path(values, index)?;
    if let Some(path) = &path {
        path.require_simple()?;
    }
    Ok(path)
}

/// The value the optional simple path at argument `index` names in
/// `doc` (`doc` itself without one): `None` when the path is NULL,
/// `Some(None)` when it names nothing.
fn at_path<'d>(
    doc: &'d Json,
    values: &[Value],
    index: usize,
) -> SqlResult<Option<Option<&'d Json>>> {
    if values.len() <= index {
        return Ok(Some(Some(doc)));
    }
    Ok(simple_path(values, index)?.map(|path| path.select(doc).into_iter().next()))
}

/// Argument `index` as text: `None` for NULL.
fn text(values: &[Value], index: usize) -> Option<String> {
    let mut out = Vec::new();
    value::write_text(&values[index], &mut out).then(|| String::from_utf8_lossy(&out).into_owned())
}

/// 'one' or 'all' (any case); 3150 otherwise.
fn one_or_all(function: JsonFunction, values: &[Value], index: usize) -> SqlResult<Option<bool>> {
    let Some(word) = text(values, index) else {
        return Ok(None);
    };
    match word.to_ascii_lowercase().as_str() {
        "one" => Ok(Some(false)),
        "all" => Ok(Some(true)),
        _ => Err(SqlError::new(
            3150,
            format!(
                "The oneOrAll argument to {} may take these values: 'one' or 'all'.",
                function.name()
            ),
        )),
    }
}

/// A SQL value as JSON: text a string, a number a number.
pub fn from_sql(value: &Value) -> Option<Json> {
    Some(match value {
        Value::Null => return None,
        Value::Int(x) => Json::Int(*x),
        Value::UInt(x) => Json::UInt(*x),
        Value::Double(x) => Json::Double(*x),
        Value::Decimal(x) => Json::Decimal(*x),
        Value::Bytes(bytes) => Json::String(String::from_utf8_lossy(bytes).into_owned()),
        // MySQL's JSON dates and times print with all six digits of a
        // second's fraction.
        Value::DateTime(datetime) => Json::String(value::display(&Value::DateTime(
            crate::temporal::DateTime {
                fsp: 6,
                ..*datetime
            },
        ))),
        Value::Time(time) => Json::String(value::display(&Value::Time(crate::temporal::Time {
            fsp: 6,
            ..*time
        }))),
        other => Json::String(value::display(other)),
    })
}

/// Applies `function` to its evaluated arguments (their count checked
/// when it was compiled).
pub fn apply(function: JsonFunction, values: &[Value]) -> SqlResult<Value> {
    use JsonFunction::*;
    let null = Ok(Value::Null);
    match function {
        FromSql => Ok(from_sql(&values[0]).map_or(Value::Null, |json| json_value(&json))),
        FromBoolean => Ok(match value::truth(&values[0]) {
            Some(truth) => json_value(&Json::Bool(truth)),
            None => Value::Null,
        }),
        Cast => match &values[0] {
            Value::Bytes(_) => {
                Ok(document(function, values, 0)?.map_or(Value::Null, |j| json_value(&j)))
            }
            other => Ok(from_sql(other).map_or(Value::Null, |json| json_value(&json))),
        },
        NullSafeEqual => Ok(match (&values[0], &values[1]) {
            (Value::Null, Value::Null) => truth(true),
            (Value::Null, _) | (_, Value::Null) => truth(false),
            _ => {
                let a = value_argument(function, values, 0)?;
                truth(a.compare(&value_argument(function, values, 1)?).is_eq())
            }
        }),
        Compare(op) => {
            if values.iter().any(Value::is_null) {
                return null;
            }
            let (a, b) = (
                value_argument(function, values, 0)?,
                value_argument(function, values, 1)?,
            );
            Ok(truth(crate::expr::compare_holds(op, a.compare(&b))))
        }
        Extract => {
            let Some(doc) = document(function, values, 0)? else {
                return null;
            };
            let mut paths = Vec::new();
            for index in 1..values.len() {
                match path(values, index)? {
                    Some(path) => paths.push(path),
                    None => return null,
                }
            }
            if let [path] = paths.as_slice() {
                if path.is_simple() {
                    return Ok(path
                        .select(&doc)
                        .first()
                        .map_or(Value::Null, |v| json_value(v)));
                }
            }
            let found: Vec<Json> = paths
                .iter()
                .flat_map(|path| path.select(&doc))
                .cloned()
                .collect();
            Ok(match found.is_empty() {
                true => Value::Null,
                false => json_value(&Json::Array(found)),
            })
        }
        Unquote => match &values[0] {
            Value::Null => null,
            Value::Bytes(text)
                if text.len() >= 2 && text[0] == b'"' && text[text.len() - 1] == b'"' =>
            {
                match Json::parse(text) {
                    Ok(Json::String(unquoted)) => Ok(Value::Bytes(unquoted.into_bytes())),
                    Ok(_) => Ok(Value::Bytes(text.clone())),
                    Err(error) => Err(invalid_argument(function, 0, &error)),
                }
            }
            other => Ok(Value::Bytes(value::display(other).into_bytes())),
        },
        Quote => Ok(match text(values, 0) {
            Some(text) => {
                let mut out = String::new();
                super::write_string(&text, &mut out);
                Value::Bytes(out.into_bytes())
            }
            None => Value::Null,
        }),
        Object => {
            let mut members = Vec::with_capacity(values.len() / 2);
            for pair in (0..values.len()).step_by(2) {
                let Some(key) = text(values, pair) else {
                    return Err(SqlError::new(
                        3158,
                        "JSON documents may not contain NULL member names.",
                    ));
                };
                members.push((key, value_argument(function, values, pair + 1)?));
            }
            Ok(json_value(&Json::object_of(members)))
        }
        Array => {
            let elements = (0..values.len())
                .map(|index| value_argument(function, values, index))
                .collect::<SqlResult<Vec<_>>>()?;
            Ok(json_value(&Json::Array(elements)))
        }
        Valid => Ok(match &values[0] {
            Value::Null => Value::Null,
            Value::Bytes(text) => truth(Json::parse(text).is_ok()),
            _ => truth(false),
        }),
        Type => Ok(match document(function, values, 0)? {
            Some(doc) => Value::Bytes(doc.type_name().as_bytes().to_vec()),
            None => Value::Null,
        }),
        Depth => Ok(match document(function, values, 0)? {
            Some(doc) => Value::Int(doc.depth() as i64),
            None => Value::Null,
        }),
        Pretty => Ok(match document(function, values, 0)? {
            Some(doc) => Value::Bytes(doc.to_pretty_text().into_bytes()),
            None => Value::Null,
        }),
        Length | Keys => {
            let Some(doc) = document(function, values, 0)? else {
                return null;
            };
            let Some(target) = at_path(&doc, values, 1)? else {
                return null;
            };
            Ok(match (function, target) {
                (_, None) => Value::Null,
                (Length, Some(Json::Array(elements))) => Value::Int(elements.len() as i64),
                (Length, Some(Json::Object(members))) => Value::Int(members.len() as i64),
                (Length, Some(_)) => Value::Int(1),
                (_, Some(Json::Object(members))) => json_value(&Json::Array(
                    members
                        .iter()
                        .map(|(k, _)| Json::String(k.clone()))
                        .collect(),
                )),
                (_, Some(_)) => Value::Null,
            })
        }
        Contains => {
            let (Some(target), Some(candidate)) = (
                document(function, values, 0)?,
                document(function, values, 1)?,
            ) else {
                return null;
            };
            let Some(target) = at_path(&target, values, 2)? else {
                return null;
            };
            Ok(target.map_or(Value::Null, |target| truth(contains(target, &candidate))))
        }
        ContainsPath => {
            let Some(doc) = document(function, values, 0)? else {
                return null;
            };
            let Some(all) = one_or_all(function, values, 1)? else {
                return null;
            };
            let mut found = Vec::new();
            for index in 2..values.len() {
                match path(values, index)? {
                    Some(path) => found.push(!path.select(&doc).is_empty()),
                    None => return null,
                }
            }
            Ok(truth(match all {
                true => found.iter().all(|f| *f),
                false => found.iter().any(|f| *f),
            }))
        }
        Set | Insert | Replace | ArrayAppend | ArrayInsert => {
            let Some(mut doc) = document(function, values, 0)? else {
                return null;
            };
            for pair in (1..values.len()).step_by(2) {
                let Some(path) = simple_path(values, pair)? else {
                    return null;
                };
                let value = value_argument(function, values, pair + 1)?;
                change(function, &mut doc, &path, value)?;
            }
            Ok(json_value(&doc))
        }
        Remove => {
            let Some(mut doc) = document(function, values, 0)? else {
                return null;
            };
            for index in 1..values.len() {
                let Some(path) = simple_path(values, index)? else {
                    return null;
                };
                let Some((last, parent)) = path.legs.split_last() else {
                    return Err(SqlError::new(
                        3153,
                        "The path expression '$' is not allowed in this context.",
                    ));
                };
                match (last, Path::find_mut(parent, &mut doc)) {
                    (Leg::Member(key), Some(Json::Object(members))) => {
                        members.retain(|(k, _)| k != key);
                    }
                    (Leg::Index(position), Some(Json::Array(elements))) => {
                        if let Some(at) = resolve(*position, elements.len()) {
                            elements.remove(at);
                        }
                    }
                    _ => {}
                }
            }
            Ok(json_value(&doc))
        }
        MergePatch | MergePreserve => {
            let mut merged: Option<Json> = None;
            for index in 0..values.len() {
                let Some(next) = document(function, values, index)? else {
                    return null;
                };
                merged = Some(match merged {
                    None => next,
                    Some(so_far) if function == MergePatch => merge_patch(so_far, next),
                    Some(so_far) => merge_preserve(so_far, next),
                });
            }
            Ok(merged.map_or(Value::Null, |m| json_value(&m)))
        }
        Search => search(values),
        Overlaps => {
            let (Some(a), Some(b)) = (
                document(function, values, 0)?,
                document(function, values, 1)?,
            ) else {
                return null;
            };
            Ok(truth(overlaps(&a, &b)))
        }
        MemberOf => {
            let Some(array) = document(function, values, 1)? else {
                return null;
            };
            if values[0].is_null() {
                return null;
            }
            let value = value_argument(function, values, 0)?;
            Ok(truth(match &array {
                Json::Array(elements) => elements.iter().any(|e| e.compare(&value).is_eq()),
                other => other.compare(&value).is_eq(),
            }))
        }
    }
}

/// JSON_ARRAYAGG's or JSON_OBJECTAGG's result from each row's value of
/// its argument: the text of a one-element array, or of a one-member
/// object, that a JSON function made. The parts are spliced as text (a
/// document made by functions may nest deeper than text is read).
pub fn aggregate(
    function: crate::expr::AggregateFunction,
    rows: &[(Vec<Value>, Vec<u8>)],
) -> Value {
    let inner = |text: &[u8]| {
        text.get(1..text.len().saturating_sub(1))
            .unwrap_or_default()
            .to_vec()
    };
    let mut out = Vec::new();
    if function != crate::expr::AggregateFunction::JsonObjectAgg {
        out.push(b'[');
        for (index, (_, text)) in rows.iter().enumerate() {
            if index > 0 {
                out.extend_from_slice(b", ");
            }
            out.extend_from_slice(&inner(text));
        }
        out.push(b']');
        return capped(out);
    }
    // `{"key": value}`: the key read as a JSON string, the value's text
    // after it; the last value of a key kept.
    let mut read: Vec<(String, Vec<u8>)> = Vec::with_capacity(rows.len());
    for (_, text) in rows {
        let member = inner(text);
        // JSON_OBJECT(key, value) always makes one member.
        let (key, length) = super::read_string(&member).unwrap_or_default();
        let value = member[length..]
            .strip_prefix(b": ")
            .unwrap_or_default()
            .to_vec();
        read.push((key, value));
    }
    read.sort_by(|(a, _), (b, _)| super::key_order(a, b));
    let mut members: Vec<(String, Vec<u8>)> = Vec::with_capacity(read.len());
    for (key, value) in read {
        match members.last_mut() {
            Some((last, kept)) if *last == key => *kept = value,
            _ => members.push((key, value)),
        }
    }
    out.push(b'{');
    for (index, (key, value)) in members.iter().enumerate() {
        if index > 0 {
            out.extend_from_slice(b", ");
        }
        let mut quoted = String::new();
        super::write_string(key, &mut quoted);
        out.extend_from_slice(quoted.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
    }
    out.push(b'}');
    capped(out)
}

/// JSON text as a SQL value, NULL past [`MAX_TEXT_BYTES`].
fn capped(text: Vec<u8>) -> Value {
    match text.len() > MAX_TEXT_BYTES {
        true => Value::Null,
        false => Value::Bytes(text),
    }
}

fn resolve(position: Position, length: usize) -> Option<usize> {
    match position {
        Position::FromStart(n) => usize::try_from(n).ok().filter(|n| *n < length),
        Position::FromEnd(n) => length.checked_sub(1)?.checked_sub(usize::try_from(n).ok()?),
    }
}

/// What JSON_SET, JSON_INSERT, JSON_REPLACE, JSON_ARRAY_APPEND and
/// JSON_ARRAY_INSERT do at one path.
fn change(function: JsonFunction, doc: &mut Json, path: &Path, value: Json) -> SqlResult<()> {
    use JsonFunction::*;
    if function == ArrayAppend {
        if let Some(target) = Path::find_mut(&path.legs, doc) {
            match target {
                Json::Array(elements) => elements.push(value),
                other => {
                    let old = std::mem::replace(other, Json::Null);
                    *other = Json::Array(vec![old, value]);
                }
            }
        }
        return Ok(());
    }
    let Some((last, parent_legs)) = path.legs.split_last() else {
        // `$` itself: replaced by SET and REPLACE, kept by INSERT.
        if matches!(function, Set | Replace) {
            *doc = value;
        }
        return match function {
            ArrayInsert => Err(not_an_array_cell()),
            _ => Ok(()),
        };
    };
    let Some(parent) = Path::find_mut(parent_legs, doc) else {
        return match (function, last) {
            (ArrayInsert, Leg::Member(_)) => Err(not_an_array_cell()),
            _ => Ok(()),
        };
    };
    let (replace, add) = match function {
        Set => (true, true),
        Insert => (false, true),
        Replace => (true, false),
        _ => (false, false),
    };
    match (last, parent) {
        (Leg::Member(_), _) if function == ArrayInsert => return Err(not_an_array_cell()),
        (Leg::Member(key), Json::Object(members)) => {
            let exists = members.iter().any(|(k, _)| k == key);
            if (exists && replace) || (!exists && add) {
                Json::set_member(members, key.clone(), value);
            }
        }
        (Leg::Index(position), Json::Array(elements)) if function == ArrayInsert => {
            let at = match *position {
                Position::FromStart(n) => {
                    usize::try_from(n).unwrap_or(usize::MAX).min(elements.len())
                }
                Position::FromEnd(n) => elements
                    .len()
                    .checked_sub(1)
                    .and_then(|last| last.checked_sub(n as usize))
                    .unwrap_or(0),
            };
            elements.insert(at, value);
        }
        (Leg::Index(position), Json::Array(elements)) => match resolve(*position, elements.len()) {
            Some(at) if replace => elements[at] = value,
            None if add && matches!(position, Position::FromStart(_)) => elements.push(value),
            _ => {}
        },
        // A value that is not an array, at an array position: itself at
        // [0], a new array of it and the value past it.
        (Leg::Index(position), other) if function != ArrayInsert => match resolve(*position, 1) {
            Some(_) if replace => *other = value,
            None if add && matches!(position, Position::FromStart(_)) => {
                let old = std::mem::replace(other, Json::Null);
                *other = Json::Array(vec![old, value]);
            }
            _ => {}
        },
        _ => {}
    }
    Ok(())
}

fn not_an_array_cell() -> SqlError {
    SqlError::new(
        3165,
        "A path expression is not a path to a cell in an array.",
    )
}

/// JSON_CONTAINS's rule: a scalar contains an equal scalar; an array
/// contains a value that one of its elements contains, and an array
/// whose every element it contains; an object contains an object whose
/// every member it has with a contained value.
fn contains(target: &Json, candidate: &Json) -> bool {
    match (target, candidate) {
        (Json::Array(elements), Json::Array(wanted)) => {
            let elements = Elements::of(elements);
            wanted.iter().all(|w| elements.contain(w))
        }
        (Json::Array(elements), other) => Elements::of(elements).contain(other),
        (Json::Object(_), Json::Object(wanted)) => wanted
            .iter()
            .all(|(key, w)| target.member(key).is_some_and(|value| contains(value, w))),
        (Json::Object(_), _) => false,
        (_, Json::Array(_) | Json::Object(_)) => false,
        (a, b) => a.compare(b).is_eq(),
    }
}

fn is_container(json: &Json) -> bool {
    matches!(json, Json::Array(_) | Json::Object(_))
}

/// An array's elements made quick to search: its scalars sorted (a
/// scalar is found by a binary search, not by comparing it with each),
/// its arrays and objects apart.
struct Elements<'a> {
    scalars: Vec<&'a Json>,
    containers: Vec<&'a Json>,
}

impl<'a> Elements<'a> {
    fn of(elements: &'a [Json]) -> Elements<'a> {
        let (containers, mut scalars): (Vec<&Json>, Vec<&Json>) =
            elements.iter().partition(|e| is_container(e));
        scalars.sort_by(|a, b| a.compare(b));
        Elements {
            scalars,
            containers,
        }
    }

    /// Whether one of the elements contains `candidate`.
    fn contain(&self, candidate: &Json) -> bool {
        (!is_container(candidate)
            && self
                .scalars
                .binary_search_by(|e| e.compare(candidate))
                .is_ok())
            || self.containers.iter().any(|e| contains(e, candidate))
    }
}

/// JSON_OVERLAPS: arrays sharing an element, objects sharing a member,
/// a scalar in an array or equal to a scalar.
fn overlaps(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Array(x), Json::Array(y)) => {
            let mut sorted: Vec<&Json> = y.iter().collect();
            sorted.sort_by(|p, q| p.compare(q));
            x.iter()
                .any(|e| sorted.binary_search_by(|f| f.compare(e)).is_ok())
        }
        (Json::Array(x), other) | (other, Json::Array(x)) => {
            x.iter().any(|e| e.compare(other).is_eq())
        }
        (Json::Object(x), Json::Object(_)) => x
            .iter()
            .any(|(key, value)| b.member(key).is_some_and(|v| v.compare(value).is_eq())),
        (a, b) => a.compare(b).is_eq(),
    }
}

/// Two objects' members (each sorted by key) merged in one pass: a key
/// of `patch` alone is `combine(None, value)`, of both `combine(Some(old),
/// value)`; `None` from `combine` leaves the key out.
fn merge_members(
    members: Vec<(String, Json)>,
    patch: Vec<(String, Json)>,
    combine: impl Fn(Option<Json>, Json) -> Option<Json>,
) -> Vec<(String, Json)> {
    let mut merged = Vec::with_capacity(members.len() + patch.len());
    let mut old = members.into_iter().peekable();
    for (key, value) in patch {
        while let Some(earlier) = old.next_if(|(k, _)| super::key_order(k, &key).is_lt()) {
            merged.push(earlier);
        }
        let previous = old.next_if(|(k, _)| *k == key).map(|(_, v)| v);
        if let Some(value) = combine(previous, value) {
            merged.push((key, value));
        }
    }
    merged.extend(old);
    merged
}

/// RFC 7396's merge: an object patch sets each member (null removes
/// it); anything else replaces the target.
fn merge_patch(target: Json, patch: Json) -> Json {
    let Json::Object(patch_members) = patch else {
        return patch;
    };
    let members = match target {
        Json::Object(members) => members,
        _ => Vec::new(),
    };
    Json::Object(merge_members(members, patch_members, |old, value| {
        (value != Json::Null).then(|| merge_patch(old.unwrap_or(Json::Null), value))
    }))
}

/// JSON_MERGE_PRESERVE: arrays joined, objects merged (a key in both
/// merged the same way), anything else made an array and joined.
fn merge_preserve(a: Json, b: Json) -> Json {
    match (a, b) {
        (Json::Object(members), Json::Object(more)) => {
            Json::Object(merge_members(members, more, |old, value| {
                Some(match old {
                    Some(old) => merge_preserve(old, value),
                    None => value,
                })
            }))
        }
        (a, b) => {
            let into_elements = |json: Json| match json {
                Json::Array(elements) => elements,
                other => vec![other],
            };
            let mut elements = into_elements(a);
            elements.extend(into_elements(b));
            Json::Array(elements)
        }
    }
}

/// JSON_SEARCH: the paths to the strings that match a LIKE pattern.
fn search(values: &[Value]) -> SqlResult<Value> {
    let function = JsonFunction::Search;
    let Some(doc) = document(function, values, 0)? else {
        return Ok(Value::Null);
    };
    let Some(all) = one_or_all(function, values, 1)? else {
        return Ok(Value::Null);
    };
    let Some(pattern) = text(values, 2) else {
        return Ok(Value::Null);
    };
    // The pattern with its escape character made the `\` LIKE reads.
    let escape = match values.get(3) {
        None | Some(Value::Null) => '\\',
        Some(_) => {
            let given = text(values, 3).unwrap_or_default();
            let mut chars = given.chars();
            match (chars.next(), chars.next()) {
                (None, _) => '\\',
                (Some(c), None) => c,
                _ => {
                    return Err(SqlError::new(
                        codes::WRONG_ARGUMENTS,
                        "Incorrect arguments to ESCAPE",
                    ))
                }
            }
        }
    };
    let pattern = with_backslash_escape(&pattern, escape);
    let mut scopes: Option<HashSet<*const Json>> = None;
    for index in 4..values.len() {
        let Some(path) = path(values, index)? else {
            return Ok(Value::Null);
        };
        let selected = path.select(&doc);
        scopes
            .get_or_insert_with(HashSet::new)
            .extend(selected.into_iter().map(|v| v as *const Json));
    }
    let mut found = Vec::new();
    let mut location = Vec::new();
    find_strings(
        &doc,
        pattern.as_bytes(),
        scopes.as_ref(),
        scopes.is_none(),
        &mut location,
        &mut found,
    );
    found.dedup();
    if !all {
        found.truncate(1);
    }
    Ok(match found.len() {
        0 => Value::Null,
        1 => json_value(&Json::String(found.remove(0))),
        _ => json_value(&Json::Array(found.into_iter().map(Json::String).collect())),
    })
}

/// A LIKE pattern whose escape character is `escape` as LIKE reads it
/// here, with `\\`: the escape and the character after it become `\\`
/// and that character; a `\\` that is not the escape is a literal one.
fn with_backslash_escape(pattern: &str, escape: char) -> String {
    if escape == '\\' {
        return pattern.to_string();
    }
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c == escape => {
                out.push('\\');
                // A trailing escape is itself.
                out.push(chars.next().unwrap_or(escape));
            }
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out
}

fn find_strings(
    value: &Json,
    pattern: &[u8],
    scopes: Option<&HashSet<*const Json>>,
    mut inside: bool,
    location: &mut Vec<Step>,
    found: &mut Vec<String>,
) {
    if let Some(scopes) = scopes {
        inside |= scopes.contains(&(value as *const Json));
    }
    match value {
        Json::String(text) if inside && crate::expr::like(text.as_bytes(), pattern) => {
            let mut path = String::new();
            super::path::write_location(location, &mut path);
            found.push(path);
        }
        Json::Array(elements) => {
            for (index, element) in elements.iter().enumerate() {
                location.push(Step::Element(index));
                find_strings(element, pattern, scopes, inside, location, found);
                location.pop();
            }
        }
        Json::Object(members) => {
            for (key, member) in members {
                location.push(Step::Member(key.clone()));
                find_strings(member, pattern, scopes, inside, location, found);
                location.pop();
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(value: &str) -> Value {
        Value::Bytes(value.as_bytes().to_vec())
    }

    fn call(function: JsonFunction, arguments: &[&str]) -> String {
        let values: Vec<Value> = arguments.iter().map(|a| text(a)).collect();
        value::display(&apply(function, &values).unwrap())
    }

    #[test]
    fn functions_give_mysql_answers() {
        use JsonFunction::*;
        let doc = r#"{"a": 1, "b": [2, 3, {"c": "x"}], "d": {"e": null}}"#;
        assert_eq!(call(Extract, &[doc, "$.b[2].c"]), "\"x\"");
        assert_eq!(call(Extract, &[doc, "$.a", "$.b[0]"]), "[1, 2]");
        assert_eq!(call(Extract, &[doc, "$.b[*]"]), r#"[2, 3, {"c": "x"}]"#);
        assert_eq!(call(Extract, &[doc, "$.nothing"]), "NULL");
        assert_eq!(call(Unquote, &["\"a\\tb\""]), "a\tb");
        assert_eq!(call(Unquote, &["abc"]), "abc");
        assert_eq!(call(Quote, &["a\"b"]), "\"a\\\"b\"");
        assert_eq!(call(Length, &[doc]), "3");
        assert_eq!(call(Length, &[doc, "$.b"]), "3");
        assert_eq!(call(Depth, &[doc]), "4");
        assert_eq!(call(Keys, &[doc]), r#"["a", "b", "d"]"#);
        assert_eq!(call(Type, &[doc]), "OBJECT");
        assert_eq!(call(Contains, &[doc, "1", "$.a"]), "1");
        assert_eq!(call(Contains, &[doc, r#"{"b": [3]}"#]), "1");
        assert_eq!(call(Contains, &[doc, r#"{"b": [4]}"#]), "0");
        assert_eq!(call(ContainsPath, &[doc, "one", "$.x", "$.a"]), "1");
        assert_eq!(call(ContainsPath, &[doc, "all", "$.x", "$.a"]), "0");
        assert_eq!(
            call(Set, &["[1, 2]", "$[5]", "9", "$[0]", "0"]),
            "[0, 2, 9]"
        );
        assert_eq!(
            call(Insert, &[r#"{"a": 1}"#, "$.a", "2", "$.b", "3"]),
            r#"{"a": 1, "b": 3}"#
        );
        assert_eq!(
            call(Replace, &[r#"{"a": 1}"#, "$.a", "2", "$.b", "3"]),
            r#"{"a": 2}"#
        );
        assert_eq!(call(Set, &["1", "$[1]", "2"]), "[1, 2]");
        assert_eq!(
            call(Remove, &[doc, "$.b[0]", "$.d"]),
            r#"{"a": 1, "b": [3, {"c": "x"}]}"#
        );
        assert_eq!(
            call(ArrayAppend, &[doc, "$.a", "5"]),
            r#"{"a": [1, 5], "b": [2, 3, {"c": "x"}], "d": {"e": null}}"#
        );
        assert_eq!(call(ArrayInsert, &["[1, 2]", "$[1]", "9"]), "[1, 9, 2]");
        assert_eq!(call(ArrayInsert, &["[1, 2]", "$[9]", "9"]), "[1, 2, 9]");
        assert_eq!(
            call(
                MergePatch,
                &[r#"{"a": 1, "b": 2}"#, r#"{"b": null, "c": 3}"#]
            ),
            r#"{"a": 1, "c": 3}"#
        );
        assert_eq!(
            call(MergePreserve, &[r#"{"a": 1}"#, r#"{"a": 2}"#, "[3]"]),
            r#"[{"a": [1, 2]}, 3]"#
        );
        assert_eq!(call(Search, &[doc, "one", "x"]), "\"$.b[2].c\"");
        assert_eq!(
            call(Search, &[r#"["ab", {"k": "abc"}]"#, "all", "ab%"]),
            r#"["$[0]", "$[1].k"]"#
        );
        assert_eq!(call(Search, &[doc, "all", "zzz"]), "NULL");
        // With `$` the escape: `$$` is a `$`, `$%` a `%`.
        let priced = r#"["a$b", "a%b", "a\\b", "axb"]"#;
        assert_eq!(call(Search, &[priced, "all", "a$$b", "$"]), "\"$[0]\"");
        assert_eq!(call(Search, &[priced, "all", "a$%b", "$"]), "\"$[1]\"");
        assert_eq!(call(Search, &[priced, "all", "a\\b", "$"]), "\"$[2]\"");
        assert_eq!(
            call(Search, &[priced, "all", "a_b", "$"]),
            r#"["$[0]", "$[1]", "$[2]", "$[3]"]"#
        );
        assert_eq!(call(Overlaps, &["[1, 3]", "[3, 4]"]), "1");
        assert_eq!(call(Overlaps, &[r#"{"a": 1}"#, r#"{"a": 2}"#]), "0");
        assert_eq!(
            call(Object, &["b", "1", "a", "\"x\""]),
            r#"{"a": "x", "b": 1}"#
        );
        assert_eq!(call(Array, &["1", "\"x\"", "null"]), r#"[1, "x", null]"#);
        assert_eq!(call(Valid, &["{"]), "0");
        assert_eq!(call(Valid, &["[]"]), "1");
        assert_eq!(call(Pretty, &["[1]"]), "[\n  1\n]");
    }

    #[test]
    fn bad_arguments_are_mysql_errors() {
        use JsonFunction::*;
        let error = |function, arguments: &[Value]| apply(function, arguments).unwrap_err();
        assert_eq!(
            error(Extract, &[text("{"), text("$")]).code,
            codes::INVALID_JSON_TEXT_IN_PARAM
        );
        assert_eq!(
            error(Extract, &[text("{x"), text("$")]).message,
            "Invalid JSON text in argument 1 to function json_extract: \"Missing a name for object member.\" at position 1."
        );
        assert_eq!(
            error(Extract, &[Value::Int(1), text("$")]).code,
            codes::INVALID_TYPE_FOR_JSON
        );
        assert_eq!(
            error(Extract, &[text("{}"), text("$.")]).code,
            codes::INVALID_JSON_PATH
        );
        assert_eq!(error(Set, &[text("{}"), text("$.*"), text("1")]).code, 3149);
        assert_eq!(error(Remove, &[text("{}"), text("$")]).code, 3153);
        assert_eq!(
            error(ContainsPath, &[text("{}"), text("some"), text("$")]).code,
            3150
        );
        assert_eq!(error(Object, &[Value::Null, text("1")]).code, 3158);
        assert_eq!(
            error(ArrayInsert, &[text("{}"), text("$.a"), text("1")]).code,
            3165
        );
        // NULL in, NULL out.
        assert_eq!(
            apply(Extract, &[Value::Null, text("$")]).unwrap(),
            Value::Null
        );
        assert_eq!(
            apply(Extract, &[text("{}"), Value::Null]).unwrap(),
            Value::Null
        );
    }

    #[test]
    fn comparisons_read_sql_values_as_json_scalars() {
        let equal = |json: &str, sql: Value| {
            let sql = apply(JsonFunction::FromSql, &[sql]).unwrap();
            apply(JsonFunction::Compare(CompareOp::Equal), &[text(json), sql]).unwrap()
        };
        assert_eq!(equal("\"Bob\"", text("Bob")), Value::Int(1));
        assert_eq!(equal("\"Bob\"", text("\"Bob\"")), Value::Int(0));
        assert_eq!(equal("2.0", Value::Int(2)), Value::Int(1));
        assert_eq!(equal("\"2\"", Value::Int(2)), Value::Int(0));
        assert_eq!(equal("1", Value::Null), Value::Null);
    }
}
