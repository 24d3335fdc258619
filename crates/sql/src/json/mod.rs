//! JSON documents as MySQL 8 keeps them (docs/design/0041-json.md): the
//! value model, reading JSON text with MySQL's rules and errors, the
//! normalized text a JSON column stores and a client is sent, and the
//! order MySQL compares JSON values in.
//!
//! A JSON column holds the normalized text of its document: objects'
//! members sorted by key (shorter keys first, then byte order), each
//! key once (the last one written wins), `", "` between elements and
//! `": "` after a key. Every JSON value an expression makes is that
//! text too, so a value is `Value::Bytes` everywhere and only the
//! functions that look inside read it (`path` finds what a path names,
//! `functions` are the SQL functions).

pub mod compile;
pub mod functions;
pub mod path;

use crate::decimal::Decimal;
use std::cmp::Ordering;
use std::fmt::Write as _;

/// MySQL's limit on the nesting of arrays and objects.
pub const MAX_DEPTH: usize = 100;

/// A JSON value.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// An integer that fits a BIGINT.
    Int(i64),
    /// An integer above BIGINT's range that fits a BIGINT UNSIGNED.
    UInt(u64),
    /// Any other number read from text, or a DOUBLE.
    Double(f64),
    /// A DECIMAL made into JSON by a function (JSON_OBJECT('p', 9.90)):
    /// it prints with its scale. Read back from text it is a double.
    Decimal(Decimal),
    /// A string.
    String(String),
    /// An array.
    Array(Vec<Json>),
    /// An object: its members sorted by [`key_order`], each key once.
    Object(Vec<(String, Json)>),
}

/// How MySQL orders an object's keys: shorter first, then by bytes.
pub fn key_order(a: &str, b: &str) -> Ordering {
    a.len()
        .cmp(&b.len())
        .then_with(|| a.as_bytes().cmp(b.as_bytes()))
}

/// Why text is not JSON: rapidjson's message, as MySQL quotes it, and
/// the byte offset where reading stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// The message.
    pub message: &'static str,
    /// Offset in the text.
    pub position: usize,
    /// The document nests deeper than [`MAX_DEPTH`] (MySQL's 3157, not
    /// an invalid-text error).
    pub too_deep: bool,
}

impl Json {
    /// Reads JSON text (RFC 8259, as MySQL's reader: exactly one value,
    /// whitespace around it, UTF-8).
    pub fn parse(text: &[u8]) -> Result<Json, ParseError> {
        let mut reader = Reader { text, at: 0 };
        reader.skip_whitespace();
        if reader.at == text.len() {
            return Err(reader.error("The document is empty."));
        }
        let value = reader.value(0)?;
        reader.skip_whitespace();
        if reader.at != text.len() {
            return Err(reader.error("The document root must not be followed by other values."));
        }
        Ok(value)
    }

    /// The normalized text (what a JSON column stores).
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }

    /// Appends the normalized text.
    pub fn write(&self, out: &mut String) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(true) => out.push_str("true"),
            Json::Bool(false) => out.push_str("false"),
            Json::Int(x) => {
                let _ = write!(out, "{x}");
            }
            Json::UInt(x) => {
                let _ = write!(out, "{x}");
            }
            Json::Double(x) => write_double(*x, out),
            Json::Decimal(x) => {
                let mut text = Vec::new();
                x.write_text(&mut text);
                out.push_str(&String::from_utf8_lossy(&text));
            }
            Json::String(text) => write_string(text, out),
            Json::Array(elements) => {
                out.push('[');
                for (index, element) in elements.iter().enumerate() {
                    if index > 0 {
                        out.push_str(", ");
                    }
                    element.write(out);
                }
                out.push(']');
            }
            Json::Object(members) => {
                out.push('{');
                for (index, (key, value)) in members.iter().enumerate() {
                    if index > 0 {
                        out.push_str(", ");
                    }
                    write_string(key, out);
                    out.push_str(": ");
                    value.write(out);
                }
                out.push('}');
            }
        }
    }

    /// JSON_PRETTY's text: each element and member on a line of its
    /// own, indented by two spaces a level.
    pub fn to_pretty_text(&self) -> String {
        let mut out = String::new();
        self.write_pretty(&mut out, 0);
        out
    }

    fn write_pretty(&self, out: &mut String, level: usize) {
        let indent = |out: &mut String, level: usize| {
            out.push('\n');
            (0..level * 2).for_each(|_| out.push(' '));
        };
        match self {
            Json::Array(elements) if !elements.is_empty() => {
                out.push('[');
                for (index, element) in elements.iter().enumerate() {
                    if index > 0 {
                        out.push(',');
                    }
                    indent(out, level + 1);
                    element.write_pretty(out, level + 1);
                }
                indent(out, level);
                out.push(']');
            }
            Json::Object(members) if !members.is_empty() => {
                out.push('{');
                for (index, (key, value)) in members.iter().enumerate() {
                    if index > 0 {
                        out.push(',');
                    }
                    indent(out, level + 1);
                    write_string(key, out);
                    out.push_str(": ");
                    value.write_pretty(out, level + 1);
                }
                indent(out, level);
                out.push('}');
            }
            other => other.write(out),
        }
    }

    /// JSON_TYPE's name of the value's type.
    pub fn type_name(&self) -> &'static str {
        match self {
            Json::Null => "NULL",
            Json::Bool(_) => "BOOLEAN",
            Json::Int(_) => "INTEGER",
            Json::UInt(_) => "UNSIGNED INTEGER",
            Json::Double(_) => "DOUBLE",
            Json::Decimal(_) => "DECIMAL",
            Json::String(_) => "STRING",
            Json::Array(_) => "ARRAY",
            Json::Object(_) => "OBJECT",
        }
    }

    /// JSON_DEPTH: 1 for a scalar or an empty array or object, else one
    /// more than its deepest element.
    pub fn depth(&self) -> usize {
        match self {
            Json::Array(elements) => 1 + elements.iter().map(Json::depth).max().unwrap_or(0),
            Json::Object(members) => 1 + members.iter().map(|(_, v)| v.depth()).max().unwrap_or(0),
            _ => 1,
        }
    }

    /// The member `key` of an object.
    pub fn member(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(members) => members
                .binary_search_by(|(k, _)| key_order(k, key))
                .ok()
                .map(|at| &members[at].1),
            _ => None,
        }
    }

    /// Sets the member `key` of an object (which this must be), keeping
    /// the members in order.
    pub fn set_member(members: &mut Vec<(String, Json)>, key: String, value: Json) {
        match members.binary_search_by(|(k, _)| key_order(k, &key)) {
            Ok(at) => members[at].1 = value,
            Err(at) => members.insert(at, (key, value)),
        }
    }

    /// Members in any order made an object's: sorted by key, the last
    /// of a key kept (a sort, not one insertion each: an object read
    /// from text may have a million members).
    pub fn object_of(mut members: Vec<(String, Json)>) -> Json {
        members.sort_by(|(a, _), (b, _)| key_order(a, b));
        let mut kept: Vec<(String, Json)> = Vec::with_capacity(members.len());
        for (key, value) in members {
            match kept.last_mut() {
                Some((last, kept_value)) if *last == key => *kept_value = value,
                _ => kept.push((key, value)),
            }
        }
        Json::Object(kept)
    }

    /// A number as a double, for comparing numbers of different kinds.
    fn number(&self) -> Option<f64> {
        match self {
            Json::Int(x) => Some(*x as f64),
            Json::UInt(x) => Some(*x as f64),
            Json::Double(x) => Some(*x),
            Json::Decimal(x) => Some(x.to_f64()),
            _ => None,
        }
    }

    /// Where its type sorts among JSON values of other types (MySQL's
    /// order, lowest first: null, numbers, strings, objects, arrays,
    /// booleans).
    fn type_rank(&self) -> u8 {
        match self {
            Json::Null => 0,
            Json::Int(_) | Json::UInt(_) | Json::Double(_) | Json::Decimal(_) => 1,
            Json::String(_) => 2,
            Json::Object(_) => 3,
            Json::Array(_) => 4,
            Json::Bool(_) => 5,
        }
    }

    /// How two JSON values compare, by MySQL's rules: values of
    /// different types by the types' order; numbers by value (an integer
    /// and a double alike); strings by their bytes; arrays element by
    /// element, a prefix first; objects equal when they have the same
    /// members, otherwise in an order that is consistent but means
    /// nothing (MySQL's is unspecified too).
    pub fn compare(&self, other: &Json) -> Ordering {
        let by_type = self.type_rank().cmp(&other.type_rank());
        if by_type != Ordering::Equal {
            return by_type;
        }
        match (self, other) {
            (Json::Int(a), Json::Int(b)) => a.cmp(b),
            (Json::UInt(a), Json::UInt(b)) => a.cmp(b),
            (Json::Int(a), Json::UInt(b)) => (*a as i128).cmp(&(*b as i128)),
            (Json::UInt(a), Json::Int(b)) => (*a as i128).cmp(&(*b as i128)),
            (a, b) if a.type_rank() == 1 => {
                let (x, y) = (a.number().unwrap_or(0.0), b.number().unwrap_or(0.0));
                x.partial_cmp(&y).unwrap_or(Ordering::Equal)
            }
            (Json::String(a), Json::String(b)) => a.as_bytes().cmp(b.as_bytes()),
            (Json::Bool(a), Json::Bool(b)) => a.cmp(b),
            (Json::Array(a), Json::Array(b)) => {
                for (x, y) in a.iter().zip(b) {
                    let ordering = x.compare(y);
                    if ordering != Ordering::Equal {
                        return ordering;
                    }
                }
                a.len().cmp(&b.len())
            }
            (Json::Object(a), Json::Object(b)) => {
                let by_length = a.len().cmp(&b.len());
                if by_length != Ordering::Equal {
                    return by_length;
                }
                for ((ka, va), (kb, vb)) in a.iter().zip(b) {
                    let ordering = key_order(ka, kb).then_with(|| va.compare(vb));
                    if ordering != Ordering::Equal {
                        return ordering;
                    }
                }
                Ordering::Equal
            }
            _ => Ordering::Equal,
        }
    }
}

/// A double as MySQL's JSON prints one: as a SQL double prints, with
/// `.0` after a whole number so it reads back as a double.
fn write_double(x: f64, out: &mut String) {
    let mut text = Vec::new();
    crate::value::write_double(x, &mut text);
    let text = String::from_utf8_lossy(&text);
    out.push_str(&text);
    if !text.contains(['.', 'e', 'E', 'i', 'n', 'N']) {
        out.push_str(".0");
    }
}

/// A string in JSON's quotes, escaped as MySQL escapes it.
pub fn write_string(text: &str, out: &mut String) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The JSON string at the start of `text` and the bytes it takes.
pub fn read_string(text: &[u8]) -> Option<(String, usize)> {
    let mut reader = Reader { text, at: 0 };
    if reader.peek() != Some(b'"') {
        return None;
    }
    let string = reader.string().ok()?;
    Some((string, reader.at))
}

/// A reader of JSON text.
struct Reader<'a> {
    text: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn error(&self, message: &'static str) -> ParseError {
        ParseError {
            message,
            position: self.at,
            too_deep: false,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.at).copied()
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json, ParseError> {
        match self.peek() {
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => self.string().map(Json::String),
            Some(b't') => self.literal("true", Json::Bool(true)),
            Some(b'f') => self.literal("false", Json::Bool(false)),
            Some(b'n') => self.literal("null", Json::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(self.error("Invalid value.")),
        }
    }

    fn deeper(&self, depth: usize) -> Result<(), ParseError> {
        match depth > MAX_DEPTH {
            true => Err(ParseError {
                message: "The JSON document exceeds the maximum depth.",
                position: self.at,
                too_deep: true,
            }),
            false => Ok(()),
        }
    }

    fn literal(&mut self, word: &str, value: Json) -> Result<Json, ParseError> {
        match self.text[self.at..].starts_with(word.as_bytes()) {
            true => {
                self.at += word.len();
                Ok(value)
            }
            false => Err(self.error("Invalid value.")),
        }
    }

    fn object(&mut self, depth: usize) -> Result<Json, ParseError> {
        self.deeper(depth)?;
        self.at += 1;
        let mut members = Vec::new();
        self.skip_whitespace();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(Json::Object(members));
        }
        loop {
            if self.peek() != Some(b'"') {
                return Err(self.error("Missing a name for object member."));
            }
            let key = self.string()?;
            self.skip_whitespace();
            if self.peek() != Some(b':') {
                return Err(self.error("Missing a colon after a name of object member."));
            }
            self.at += 1;
            self.skip_whitespace();
            let value = self.value(depth)?;
            members.push((key, value));
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => {
                    self.at += 1;
                    self.skip_whitespace();
                }
                Some(b'}') => {
                    self.at += 1;
                    return Ok(Json::object_of(members));
                }
                _ => return Err(self.error("Missing a comma or '}' after an object member.")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Json, ParseError> {
        self.deeper(depth)?;
        self.at += 1;
        let mut elements = Vec::new();
        self.skip_whitespace();
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(Json::Array(elements));
        }
        loop {
            elements.push(self.value(depth)?);
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => {
                    self.at += 1;
                    self.skip_whitespace();
                }
                Some(b']') => {
                    self.at += 1;
                    return Ok(Json::Array(elements));
                }
                _ => return Err(self.error("Missing a comma or ']' after an array element.")),
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, ParseError> {
        let digits = self
            .text
            .get(self.at..self.at + 4)
            .and_then(|d| std::str::from_utf8(d).ok())
            .filter(|d| d.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|d| u32::from_str_radix(d, 16).ok());
        match digits {
            Some(value) => {
                self.at += 4;
                Ok(value)
            }
            None => Err(self.error("Incorrect hex digit after \\u escape in string.")),
        }
    }

    fn string(&mut self) -> Result<String, ParseError> {
        self.at += 1;
        let mut out = Vec::new();
        loop {
            let Some(byte) = self.peek() else {
                return Err(self.error("Missing a closing quotation mark in string."));
            };
            match byte {
                b'"' => {
                    self.at += 1;
                    break;
                }
                b'\\' => {
                    self.at += 1;
                    let escaped = match self.peek() {
                        Some(b'"') => b'"',
                        Some(b'\\') => b'\\',
                        Some(b'/') => b'/',
                        Some(b'b') => 8,
                        Some(b'f') => 12,
                        Some(b'n') => b'\n',
                        Some(b'r') => b'\r',
                        Some(b't') => b'\t',
                        Some(b'u') => {
                            self.at += 1;
                            let mut code = self.hex4()?;
                            if (0xD800..0xDC00).contains(&code) {
                                let surrogate = self.text.get(self.at..self.at + 2);
                                if surrogate != Some(b"\\u") {
                                    return Err(
                                        self.error("The surrogate pair in string is invalid.")
                                    );
                                }
                                self.at += 2;
                                let low = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&low) {
                                    return Err(
                                        self.error("The surrogate pair in string is invalid.")
                                    );
                                }
                                code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                            } else if (0xDC00..0xE000).contains(&code) {
                                return Err(self.error("The surrogate pair in string is invalid."));
                            }
                            let c = char::from_u32(code).ok_or_else(|| {
                                self.error("The surrogate pair in string is invalid.")
                            })?;
                            let mut buffer = [0u8; 4];
                            out.extend_from_slice(c.encode_utf8(&mut buffer).as_bytes());
                            continue;
                        }
                        _ => return Err(self.error("Invalid escape character in string.")),
                    };
                    out.push(escaped);
                    self.at += 1;
                }
                0..=0x1f => return Err(self.error("Invalid encoding in string.")),
                _ => {
                    out.push(byte);
                    self.at += 1;
                }
            }
        }
        String::from_utf8(out).map_err(|_| self.error("Invalid encoding in string."))
    }

    fn digits(&mut self) -> usize {
        let start = self.at;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.at += 1;
        }
        self.at - start
    }

    fn number(&mut self) -> Result<Json, ParseError> {
        let start = self.at;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.at += 1;
        }
        match self.peek() {
            Some(b'0') => self.at += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.error("Invalid value.")),
        }
        let mut whole = true;
        if self.peek() == Some(b'.') {
            self.at += 1;
            whole = false;
            if self.digits() == 0 {
                return Err(self.error("Miss fraction part in number."));
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            whole = false;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            if self.digits() == 0 {
                return Err(self.error("Miss exponent in number."));
            }
        }
        let text = std::str::from_utf8(&self.text[start..self.at]).expect("ASCII digits");
        if whole {
            if let Ok(x) = text.parse::<i64>() {
                return Ok(Json::Int(x));
            }
            if let Ok(x) = text.parse::<u64>() {
                return Ok(Json::UInt(x));
            }
        }
        match text.parse::<f64>() {
            Ok(x) if x.is_finite() => Ok(Json::Double(x)),
            _ => {
                self.at = start;
                Err(self.error("Number too big to be stored in double."))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normalized(text: &str) -> String {
        Json::parse(text.as_bytes()).unwrap().to_text()
    }

    #[test]
    fn text_is_normalized_as_mysql_stores_it() {
        assert_eq!(
            normalized(r#" {"bb":1,"a" : [true,false,null], "ccc":{"x":"y"}, "b":2.50} "#),
            r#"{"a": [true, false, null], "b": 2.5, "bb": 1, "ccc": {"x": "y"}}"#
        );
        // The last of a key written twice wins.
        assert_eq!(normalized(r#"{"a":1,"a":2}"#), r#"{"a": 2}"#);
        assert_eq!(normalized("3.0"), "3.0");
        assert_eq!(normalized("1e2"), "100.0");
        assert_eq!(normalized("-0"), "0");
        assert_eq!(normalized("18446744073709551615"), "18446744073709551615");
        assert_eq!(normalized("18446744073709551616"), "1.8446744073709552e19");
        assert_eq!(
            normalized(r#""a\"b\\c\/d\u00e9\ud83d\ude00\n\u0001""#),
            "\"a\\\"b\\\\c/dé😀\\n\\u0001\""
        );
    }

    #[test]
    fn invalid_text_says_what_and_where() {
        let error = |text: &str| Json::parse(text.as_bytes()).unwrap_err();
        assert_eq!(error("").message, "The document is empty.");
        assert_eq!(
            error("{\"a\" 1}").message,
            "Missing a colon after a name of object member."
        );
        assert_eq!(error("{\"a\" 1}").position, 5);
        assert_eq!(error("[1,]").message, "Invalid value.");
        assert_eq!(
            error("[1 2]").message,
            "Missing a comma or ']' after an array element."
        );
        assert_eq!(
            error("1 2").message,
            "The document root must not be followed by other values."
        );
        assert_eq!(
            error("\"abc").message,
            "Missing a closing quotation mark in string."
        );
        assert_eq!(
            error("01").message,
            "The document root must not be followed by other values."
        );
        assert_eq!(error("1.").message, "Miss fraction part in number.");
        assert_eq!(
            error("1e400").message,
            "Number too big to be stored in double."
        );
        assert_eq!(
            error("\"\\ud800\"").message,
            "The surrogate pair in string is invalid."
        );
        assert_eq!(
            error("{'a': 1}").message,
            "Missing a name for object member."
        );
        assert!(error(&"[".repeat(101)).too_deep);
        assert!(Json::parse(format!("{}{}", "[".repeat(100), "]".repeat(100)).as_bytes()).is_ok());
        assert_eq!(error("\"\u{1}\"").message, "Invalid encoding in string.");
        assert_eq!(
            Json::parse(b"\"\xff\"").unwrap_err().message,
            "Invalid encoding in string."
        );
    }

    #[test]
    fn values_compare_in_mysql_order() {
        let json = |text: &str| Json::parse(text.as_bytes()).unwrap();
        let order = [
            "null", "-1", "1", "1.5", "2", "\"a\"", "\"b\"", "{}", "[]", "[1]", "[1, 2]", "false",
            "true",
        ];
        for pair in order.windows(2) {
            assert_eq!(
                json(pair[0]).compare(&json(pair[1])),
                Ordering::Less,
                "{pair:?}"
            );
        }
        assert_eq!(json("1").compare(&json("1.0")), Ordering::Equal);
        assert_eq!(
            json(r#"{"a": 1, "b": 2}"#).compare(&json(r#"{"b":2,"a":1}"#)),
            Ordering::Equal
        );
        assert_ne!(
            json(r#"{"a": 1}"#).compare(&json(r#"{"a": 2}"#)),
            Ordering::Equal
        );
    }

    #[test]
    fn pretty_text_indents_by_level() {
        let json = Json::parse(br#"{"a":[1,{"b":null}],"c":[],"d":{}}"#).unwrap();
        assert_eq!(
            json.to_pretty_text(),
            "{\n  \"a\": [\n    1,\n    {\n      \"b\": null\n    }\n  ],\n  \"c\": [],\n  \"d\": {}\n}"
        );
    }
}
