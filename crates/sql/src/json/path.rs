//! JSON path expressions as MySQL reads them: `$`, then legs `.key`,
//! `."quoted key"`, `.*`, `[n]`, `[last]`, `[last-n]`, `[m to n]`,
//! `[*]` and `**` (any depth); what a path names in a document; and the
//! changes JSON_SET and its kin make at a path.
//!
//! An array leg on a value that is not an array treats the value as an
//! array of one element, as MySQL does: `$[0]` of `5` is `5`.

use super::Json;
use crate::error::{codes, SqlError, SqlResult};

const INVALID_PATH: u16 = codes::INVALID_JSON_PATH;
/// The most legs a path has (a document nests at most 100 deep; a
/// longer path can name something only through `[0]` of a scalar).
const MAX_LEGS: usize = 1000;
/// ER_INVALID_JSON_PATH_WILDCARD.
const WILDCARD_NOT_ALLOWED: u16 = 3149;

/// An array position: from the start, or `last - n`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Position {
    /// `n`.
    FromStart(u64),
    /// `last - n` (`last` is `last - 0`).
    FromEnd(u64),
}

impl Position {
    /// The index it names in an array of `length` elements, if any.
    fn resolve(self, length: usize) -> Option<usize> {
        match self {
            Position::FromStart(n) => usize::try_from(n).ok().filter(|n| *n < length),
            Position::FromEnd(n) => length
                .checked_sub(1)
                .and_then(|last| last.checked_sub(usize::try_from(n).ok()?)),
        }
    }
}

/// One step of a path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Leg {
    /// `.key`.
    Member(String),
    /// `.*`.
    AnyMember,
    /// `[n]`.
    Index(Position),
    /// `[m to n]`.
    Range(Position, Position),
    /// `[*]`.
    AnyIndex,
    /// `**`: the value and every value under it.
    AnyDescendant,
}

/// A parsed path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Path {
    /// Its legs after `$`.
    pub legs: Vec<Leg>,
}

impl Path {
    /// Reads a path; 3143 where it is not one.
    pub fn parse(text: &[u8]) -> SqlResult<Path> {
        let invalid = |at: usize| {
            SqlError::new(
                INVALID_PATH,
                format!(
                    "Invalid JSON path expression. The error is around character position {at}."
                ),
            )
        };
        let text = std::str::from_utf8(text).map_err(|error| invalid(error.valid_up_to()))?;
        let bytes = text.as_bytes();
        let mut at = 0;
        let skip = |at: &mut usize| {
            while bytes.get(*at).is_some_and(|b| b.is_ascii_whitespace()) {
                *at += 1;
            }
        };
        skip(&mut at);
        if bytes.get(at) != Some(&b'$') {
            return Err(invalid(at));
        }
        at += 1;
        let mut legs = Vec::new();
        loop {
            skip(&mut at);
            let Some(&byte) = bytes.get(at) else { break };
            // Paths are walked recursively: their length is bounded, as a
            // document's depth is.
            if legs.len() == MAX_LEGS {
                return Err(invalid(at));
            }
            match byte {
                b'.' => {
                    at += 1;
                    skip(&mut at);
                    match bytes.get(at) {
                        Some(b'*') => {
                            at += 1;
                            legs.push(Leg::AnyMember);
                        }
                        Some(b'"') => {
                            // A quoted key reads as a JSON string does.
                            let end = closing_quote(bytes, at).ok_or_else(|| invalid(at))?;
                            let key = match Json::parse(&bytes[at..=end]) {
                                Ok(Json::String(key)) => key,
                                _ => return Err(invalid(at)),
                            };
                            at = end + 1;
                            legs.push(Leg::Member(key));
                        }
                        _ => {
                            let start = at;
                            for c in text[at..].chars() {
                                if !(c == '_' || c == '$' || c.is_alphanumeric()) {
                                    break;
                                }
                                at += c.len_utf8();
                            }
                            let key = &text[start..at];
                            if key.is_empty() || key.starts_with(|c: char| c.is_ascii_digit()) {
                                return Err(invalid(start));
                            }
                            legs.push(Leg::Member(key.to_string()));
                        }
                    }
                }
                b'[' => {
                    at += 1;
                    skip(&mut at);
                    if bytes.get(at) == Some(&b'*') {
                        at += 1;
                        legs.push(Leg::AnyIndex);
                    } else {
                        let first = position(text, &mut at).ok_or_else(|| invalid(at))?;
                        skip(&mut at);
                        if text[at..].starts_with("to")
                            && bytes.get(at + 2).is_some_and(|b| b.is_ascii_whitespace())
                        {
                            at += 2;
                            skip(&mut at);
                            let last = position(text, &mut at).ok_or_else(|| invalid(at))?;
                            if let (Position::FromStart(m), Position::FromStart(n)) = (first, last)
                            {
                                if m > n {
                                    return Err(invalid(at));
                                }
                            }
                            legs.push(Leg::Range(first, last));
                        } else {
                            legs.push(Leg::Index(first));
                        }
                    }
                    skip(&mut at);
                    if bytes.get(at) != Some(&b']') {
                        return Err(invalid(at));
                    }
                    at += 1;
                }
                // `**` twice running names nothing more (MySQL refuses it).
                b'*' if bytes.get(at + 1) == Some(&b'*')
                    && legs.last() != Some(&Leg::AnyDescendant) =>
                {
                    at += 2;
                    legs.push(Leg::AnyDescendant);
                }
                _ => return Err(invalid(at)),
            }
        }
        // `**` must lead somewhere.
        if legs.last() == Some(&Leg::AnyDescendant) {
            return Err(invalid(text.len()));
        }
        Ok(Path { legs })
    }

    /// Whether it names at most one value (no wildcard, no range).
    pub fn is_simple(&self) -> bool {
        self.legs
            .iter()
            .all(|leg| matches!(leg, Leg::Member(_) | Leg::Index(_)))
    }

    /// 3149 unless it is simple: what the functions that change a
    /// document, and those that take one value, ask of their paths.
    pub fn require_simple(&self) -> SqlResult<()> {
        match self.is_simple() {
            true => Ok(()),
            false => Err(SqlError::new(
                WILDCARD_NOT_ALLOWED,
                "In this situation, path expressions may not contain the * and ** tokens or an array range.",
            )),
        }
    }

    /// Every value the path names in `document`, each once, in document
    /// order. The legs are taken one at a time over the set of values
    /// reached so far, each value once (`**` after `**` reaches a value by
    /// many routes): the work is at most the document's values times the
    /// legs.
    pub fn select<'a>(&self, document: &'a Json) -> Vec<&'a Json> {
        let mut current = vec![document];
        for leg in &self.legs {
            let mut next = Vec::new();
            for value in &current {
                step(value, leg, &mut next);
            }
            if current.len() > 1 {
                let mut seen = std::collections::HashSet::with_capacity(next.len());
                next.retain(|value| seen.insert(*value as *const Json));
            }
            current = next;
            if current.is_empty() {
                break;
            }
        }
        current
    }

    /// The value a simple path names, to change.
    pub fn find_mut<'a>(legs: &[Leg], document: &'a mut Json) -> Option<&'a mut Json> {
        let Some((leg, rest)) = legs.split_first() else {
            return Some(document);
        };
        let next = match (leg, document) {
            (Leg::Member(key), Json::Object(members)) => members
                .binary_search_by(|(k, _)| super::key_order(k, key))
                .ok()
                .map(|at| &mut members[at].1)?,
            (Leg::Index(position), Json::Array(elements)) => {
                let at = position.resolve(elements.len())?;
                &mut elements[at]
            }
            (Leg::Index(position), other) if position.resolve(1) == Some(0) => other,
            _ => return None,
        };
        Path::find_mut(rest, next)
    }
}

/// Where the quoted key starting at `start` ends (its closing quote).
fn closing_quote(bytes: &[u8], start: usize) -> Option<usize> {
    let mut at = start + 1;
    while let Some(&byte) = bytes.get(at) {
        match byte {
            b'\\' => at += 2,
            b'"' => return Some(at),
            _ => at += 1,
        }
    }
    None
}

/// An array position at `at`: digits, or `last` with an optional `- n`.
fn position(text: &str, at: &mut usize) -> Option<Position> {
    let bytes = text.as_bytes();
    let digits = |at: &mut usize| -> Option<u64> {
        let start = *at;
        while bytes.get(*at).is_some_and(u8::is_ascii_digit) {
            *at += 1;
        }
        text[start..*at].parse().ok()
    };
    if text[*at..].starts_with("last") {
        *at += 4;
        let mut after = *at;
        while bytes.get(after).is_some_and(|b| b.is_ascii_whitespace()) {
            after += 1;
        }
        if bytes.get(after) == Some(&b'-') {
            after += 1;
            while bytes.get(after).is_some_and(|b| b.is_ascii_whitespace()) {
                after += 1;
            }
            *at = after;
            return digits(at).map(Position::FromEnd);
        }
        return Some(Position::FromEnd(0));
    }
    digits(at).map(Position::FromStart)
}

/// The values one leg reaches from `value`, in document order.
fn step<'a>(value: &'a Json, leg: &Leg, found: &mut Vec<&'a Json>) {
    // An array leg reads a value that is not an array as an array of it.
    let elements: &'a [Json] = match value {
        Json::Array(elements) => elements,
        other => std::slice::from_ref(other),
    };
    match leg {
        Leg::Member(key) => found.extend(value.member(key)),
        Leg::AnyMember => {
            if let Json::Object(members) = value {
                found.extend(members.iter().map(|(_, member)| member));
            }
        }
        Leg::Index(position) => {
            if let Some(at) = position.resolve(elements.len()) {
                found.push(&elements[at]);
            }
        }
        Leg::Range(first, last) => {
            let length = elements.len();
            let start = match *first {
                Position::FromStart(n) => usize::try_from(n).unwrap_or(usize::MAX),
                Position::FromEnd(n) => length
                    .saturating_sub(1)
                    .saturating_sub(usize::try_from(n).unwrap_or(usize::MAX)),
            };
            let end = match last.resolve(length) {
                Some(end) => end,
                None => match last {
                    Position::FromStart(_) if length > 0 => length - 1,
                    _ => return,
                },
            };
            found.extend(elements.iter().take(end + 1).skip(start));
        }
        Leg::AnyIndex => {
            if let Json::Array(elements) = value {
                found.extend(elements.iter());
            }
        }
        Leg::AnyDescendant => descendants(value, found),
    }
}

/// `value` and every value under it, in document order.
fn descendants<'a>(value: &'a Json, found: &mut Vec<&'a Json>) {
    found.push(value);
    match value {
        Json::Array(elements) => elements.iter().for_each(|e| descendants(e, found)),
        Json::Object(members) => members.iter().for_each(|(_, m)| descendants(m, found)),
        _ => {}
    }
}

/// The text of the path to a value JSON_SEARCH found: `.key` where the
/// key reads as a bare name, `."key"` otherwise, `[n]` for an element.
pub fn write_location(location: &[Step], out: &mut String) {
    out.push('$');
    for step in location {
        match step {
            Step::Member(key) => {
                out.push('.');
                let bare = key
                    .chars()
                    .next()
                    .is_some_and(|c| c == '_' || c == '$' || c.is_alphabetic())
                    && key
                        .chars()
                        .all(|c| c == '_' || c == '$' || c.is_alphanumeric());
                match bare {
                    true => out.push_str(key),
                    false => super::write_string(key, out),
                }
            }
            Step::Element(at) => {
                out.push('[');
                out.push_str(&at.to_string());
                out.push(']');
            }
        }
    }
}

/// A step of a found value's location.
#[derive(Clone, Debug)]
pub enum Step {
    /// An object's member.
    Member(String),
    /// An array's element.
    Element(usize),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selected(document: &str, path: &str) -> Vec<String> {
        let document = Json::parse(document.as_bytes()).unwrap();
        let path = Path::parse(path.as_bytes()).unwrap();
        path.select(&document).iter().map(|v| v.to_text()).collect()
    }

    #[test]
    fn paths_name_what_mysql_names() {
        let doc = r#"{"a": [10, 20, {"b": 30}], "c d": {"b": 40}, "e": 5}"#;
        assert_eq!(selected(doc, "$.a[1]"), ["20"]);
        assert_eq!(selected(doc, "$.a[last]"), [r#"{"b": 30}"#]);
        assert_eq!(selected(doc, "$.a[last - 1]"), ["20"]);
        assert_eq!(selected(doc, "$.a[0 to 1]"), ["10", "20"]);
        assert_eq!(selected(doc, "$.a[1 to last]").len(), 2);
        assert_eq!(selected(doc, "$.a[*]").len(), 3);
        assert_eq!(selected(doc, r#"$."c d".b"#), ["40"]);
        assert_eq!(selected(doc, "$**.b"), ["30", "40"]);
        assert_eq!(selected(doc, "$.*").len(), 3);
        assert_eq!(selected(doc, "$.e[0]"), ["5"]);
        assert!(selected(doc, "$.e[1]").is_empty());
        assert!(selected(doc, "$.a[7]").is_empty());
        assert!(selected(doc, "$.nope").is_empty());
        assert_eq!(selected(doc, " $ . e "), ["5"]);
    }

    #[test]
    fn bad_paths_are_3143() {
        for bad in [
            "",
            "a",
            "$.",
            "$[",
            "$[x]",
            "$.1a",
            "$**",
            "$a",
            "$[1 to]",
            "$.\"a",
            "$****.a",
            "$[3 to 1]",
        ] {
            let error = Path::parse(bad.as_bytes()).unwrap_err();
            assert_eq!(error.code, INVALID_PATH, "{bad}");
        }
        assert!(Path::parse(b"$.a[*]").unwrap().require_simple().is_err());
        let long = format!("${}", "[0]".repeat(MAX_LEGS));
        assert_eq!(selected("7", &long), ["7"]);
        let too_long = format!("${}", "[0]".repeat(MAX_LEGS + 1));
        assert_eq!(
            Path::parse(too_long.as_bytes()).unwrap_err().code,
            INVALID_PATH
        );
        assert!(Path::parse(b"$.a[1].b").unwrap().require_simple().is_ok());
        // `**` again and again on a deep chain: each value once, no
        // blow-up.
        let deep = format!("{}1{}", "[".repeat(30), "]".repeat(30));
        let many = format!("${}", "**[0]".repeat(30));
        assert_eq!(selected(&deep, &many), ["1"]);
        assert_eq!(selected(&deep, "$**[0]").len(), 30);
    }
}
