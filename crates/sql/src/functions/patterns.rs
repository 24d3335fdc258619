//! Regular expressions: `REGEXP` / `RLIKE`, REGEXP_LIKE, REGEXP_REPLACE,
//! REGEXP_SUBSTR and REGEXP_INSTR. MySQL 8.0 matches with ICU, MariaDB
//! with PCRE; the `regex` crate here takes the syntax they share
//! (classes, `\d \w \s`, anchors, alternation, groups, `{m,n}`, lazy
//! quantifiers) but not backreferences or look-around, and it matches in
//! time linear in the text whatever the pattern, so a client's pattern
//! cannot hold a SQL node's loop. Matching is case-sensitive, as text
//! compares here (utf8mb4_bin), unless REGEXP_LIKE's match type says
//! `i`. A pattern that does not compile is MySQL's 3685.

use super::{characters, text, MAX_RESULT_BYTES};
use crate::error::{SqlError, SqlResult};
use crate::value::Value;
use regex::bytes::{Regex, RegexBuilder};
use std::cell::RefCell;

/// Which regular-expression function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegexpFunction {
    /// `x REGEXP p`, `RLIKE`, REGEXP_LIKE(x, p[, match_type]): 1 when `p`
    /// matches somewhere in `x`.
    Like,
    /// REGEXP_REPLACE(x, p, replacement): every match replaced (`$1` for
    /// a group).
    Replace,
    /// REGEXP_SUBSTR(x, p): the first match, NULL without one.
    Substring,
    /// REGEXP_INSTR(x, p): where the first match starts (characters from
    /// 1), 0 without one.
    Position,
}

/// How many compiled patterns a thread keeps: a statement's constant
/// pattern is compiled once, not per row.
const CACHED_PATTERNS: usize = 16;

/// MySQL's ER_REGEXP_ILLEGAL_ARGUMENT.
const ILLEGAL_ARGUMENT: u16 = 3685;

thread_local! {
    static COMPILED: RefCell<Vec<(Vec<u8>, Flags, Regex)>> = const { RefCell::new(Vec::new()) };
}

/// A match type's flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Flags {
    case_insensitive: bool,
    multi_line: bool,
    dot_matches_new_line: bool,
}

impl Flags {
    /// REGEXP_LIKE's match type: `c` case-sensitive, `i` not, `m` lines,
    /// `n` a dot matches a newline, `u` (Unix lines) accepted; the last
    /// of `c` and `i` wins, as MySQL's.
    fn of(match_type: &[u8]) -> SqlResult<Flags> {
        let mut flags = Flags::default();
        for letter in match_type {
            match letter {
                b'c' => flags.case_insensitive = false,
                b'i' => flags.case_insensitive = true,
                b'm' => flags.multi_line = true,
                b'n' => flags.dot_matches_new_line = true,
                b'u' => {}
                other => {
                    return Err(SqlError::new(
                        ILLEGAL_ARGUMENT,
                        format!(
                            "Illegal argument to a regular expression: match type '{}'",
                            char::from(*other)
                        ),
                    ))
                }
            }
        }
        Ok(flags)
    }
}

/// `pattern` compiled with `flags`, from the thread's cache when it is
/// there.
fn compiled(pattern: &[u8], flags: Flags) -> SqlResult<Regex> {
    if let Some(found) = COMPILED.with_borrow(|cache| {
        cache
            .iter()
            .find(|(text, with, _)| text == pattern && *with == flags)
            .map(|(_, _, regex)| regex.clone())
    }) {
        return Ok(found);
    }
    let source = std::str::from_utf8(pattern).map_err(|_| {
        SqlError::new(
            ILLEGAL_ARGUMENT,
            "Illegal argument to a regular expression: the pattern is not UTF-8",
        )
    })?;
    let regex = RegexBuilder::new(source)
        .case_insensitive(flags.case_insensitive)
        .multi_line(flags.multi_line)
        .dot_matches_new_line(flags.dot_matches_new_line)
        .build()
        .map_err(|error| {
            let reason = match error {
                regex::Error::Syntax(text) => text.lines().last().unwrap_or("").to_string(),
                regex::Error::CompiledTooBig(limit) => {
                    format!("the pattern compiles to more than {limit} bytes")
                }
                other => other.to_string(),
            };
            SqlError::new(
                ILLEGAL_ARGUMENT,
                format!("Illegal argument to a regular expression: {reason}"),
            )
        })?;
    COMPILED.with_borrow_mut(|cache| {
        if cache.len() == CACHED_PATTERNS {
            cache.remove(0);
        }
        cache.push((pattern.to_vec(), flags, regex.clone()));
    });
    Ok(regex)
}

/// A regular-expression function of `values` (text, pattern, then the
/// replacement or the match type).
pub fn apply(function: RegexpFunction, values: &[Value]) -> SqlResult<Value> {
    let (Some(subject), Some(pattern)) = (text(&values[0]), text(&values[1])) else {
        return Ok(Value::Null);
    };
    let flags = match (function, values.get(2)) {
        (RegexpFunction::Like, Some(match_type)) => match text(match_type) {
            Some(match_type) => Flags::of(&match_type)?,
            None => return Ok(Value::Null),
        },
        _ => Flags::default(),
    };
    let regex = compiled(&pattern, flags)?;
    Ok(match function {
        RegexpFunction::Like => Value::Int(regex.is_match(&subject) as i64),
        RegexpFunction::Substring => match regex.find(&subject) {
            Some(found) => Value::Bytes(found.as_bytes().to_vec()),
            None => Value::Null,
        },
        RegexpFunction::Position => match regex.find(&subject) {
            Some(found) => Value::Int(characters(&subject[..found.start()]).len() as i64 + 1),
            None => Value::Int(0),
        },
        RegexpFunction::Replace => {
            let Some(replacement) = text(&values[2]) else {
                return Ok(Value::Null);
            };
            // Built match by match, its length checked as it grows: a
            // pattern that matches everywhere (`x*`) with a long
            // replacement would otherwise build terabytes first.
            let mut out = Vec::with_capacity(subject.len());
            let mut at = 0;
            for captures in regex.captures_iter(&subject) {
                let whole = captures.get(0).expect("a match has its whole");
                out.extend_from_slice(&subject[at..whole.start()]);
                captures.expand(&replacement, &mut out);
                at = whole.end();
                if out.len() > MAX_RESULT_BYTES {
                    // Longer than a packet may be: NULL, as MySQL answers.
                    return Ok(Value::Null);
                }
            }
            out.extend_from_slice(&subject[at..]);
            match out.len() > MAX_RESULT_BYTES {
                true => Value::Null,
                false => Value::Bytes(out),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(function: RegexpFunction, values: &[&str]) -> SqlResult<Value> {
        let values: Vec<Value> = values.iter().map(|v| Value::from(*v)).collect();
        apply(function, &values)
    }

    #[test]
    fn matches_replaces_and_finds_as_mysql() {
        use RegexpFunction::*;
        assert_eq!(run(Like, &["apple pie", "^a.*e$"]).unwrap(), Value::Int(1));
        assert_eq!(run(Like, &["Apple", "^a"]).unwrap(), Value::Int(0));
        assert_eq!(run(Like, &["Apple", "^a", "i"]).unwrap(), Value::Int(1));
        assert_eq!(run(Like, &["Apple", "^a", "ic"]).unwrap(), Value::Int(0));
        assert_eq!(
            run(Replace, &["a1b22c333", "[0-9]+", "#"]).unwrap(),
            Value::from("a#b#c#")
        );
        assert_eq!(
            run(Replace, &["john smith", "(\\w+) (\\w+)", "$2, $1"]).unwrap(),
            Value::from("smith, john")
        );
        assert_eq!(
            run(Replace, &["abc", "x*", "-"]).unwrap(),
            Value::from("-a-b-c-")
        );
        assert_eq!(
            run(Substring, &["order 1234 ok", "[0-9]+"]).unwrap(),
            Value::from("1234")
        );
        assert_eq!(run(Substring, &["none", "[0-9]+"]).unwrap(), Value::Null);
        assert_eq!(run(Position, &["héllo wörld", "w"]).unwrap(), Value::Int(7));
        assert_eq!(run(Position, &["abc", "z"]).unwrap(), Value::Int(0));
        assert_eq!(
            apply(Like, &[Value::Null, Value::from("a")]).unwrap(),
            Value::Null
        );
    }

    #[test]
    fn a_bad_pattern_or_match_type_is_an_error_not_a_panic() {
        let error = run(RegexpFunction::Like, &["x", "(unclosed"]).unwrap_err();
        assert_eq!(error.code, ILLEGAL_ARGUMENT);
        let error = run(RegexpFunction::Like, &["x", "x", "q"]).unwrap_err();
        assert_eq!(error.code, ILLEGAL_ARGUMENT);
        // A pattern the size limit refuses.
        let huge = "(a{1000}){1000}";
        assert!(run(RegexpFunction::Like, &["a", huge]).is_err());
        // A result past the limit is NULL, found before it is all built:
        // a replacement of 1 MiB at each of 2 Mi places.
        let subject = "a".repeat(2 << 20);
        let replacement = "b".repeat(1 << 20);
        let values = [
            Value::from(subject),
            Value::from("x*"),
            Value::from(replacement),
        ];
        assert_eq!(
            apply(RegexpFunction::Replace, &values).unwrap(),
            Value::Null
        );
    }
}
