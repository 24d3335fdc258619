//! Scan filters as an application writes them (column names and values),
//! and their encoding into a scan program checked against the table
//! (`signal::scan_program`, which the data node evaluates on every row it
//! walks, so rows that do not match never leave it).

use crate::error::ClientError;
use crate::table::Table;
use crate::value::{filter_bytes, Value};
use signal::order;
use signal::scan_program::{CompareOp, ProgramWriter, MAX_PATTERN_BYTES};
use signal::ErrorCode;

/// A condition a scanned row must meet to be returned or counted, with
/// SQL's meaning: a comparison with NULL is unknown, NOT unknown is
/// unknown, and a row is taken only when the whole filter is true.
/// Comparisons order values as the ordered indexes do (PAD SPACE text,
/// integers of any width as numbers). A constant must fit its column's
/// type (a negative number against an UNSIGNED column, or one beyond an
/// INT's range, is a `BadValue`: the caller folds such comparisons);
/// text constants may be longer than the column. A whole program is at
/// most 16 KiB, a LIKE pattern at most 256 bytes.
///
/// ```
/// use client::{CompareOp, Filter, Value};
/// // v > 10 AND (s LIKE 'ab%' OR s IS NULL)
/// let filter = Filter::And(vec![
///     Filter::compare("v", CompareOp::Greater, Value::Int(10)),
///     Filter::Or(vec![Filter::like("s", "ab%"), Filter::IsNull("s".into())]),
/// ]);
/// # let _ = filter;
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum Filter {
    /// `column op value`.
    Compare {
        /// The column's name.
        column: String,
        /// The comparison.
        op: CompareOp,
        /// The constant, of the column's type (NULL: never true).
        value: Value,
    },
    /// `left op right`, two columns whose types compare (integers with
    /// integers, text with text, binary with binary, DOUBLE with DOUBLE).
    Columns {
        /// The left column's name.
        left: String,
        /// The comparison.
        op: CompareOp,
        /// The right column's name.
        right: String,
    },
    /// `column IS NULL`.
    IsNull(String),
    /// `column IS NOT NULL`.
    IsNotNull(String),
    /// `column LIKE pattern` on a text or binary column: `%` any run, `_`
    /// one character, `\` escapes; case-sensitive.
    Like {
        /// The column's name.
        column: String,
        /// The pattern.
        pattern: Vec<u8>,
    },
    /// Every part (none: true).
    And(Vec<Filter>),
    /// Any part (none: false).
    Or(Vec<Filter>),
    /// The opposite.
    Not(Box<Filter>),
}

impl Filter {
    /// `column op value`.
    pub fn compare(column: &str, op: CompareOp, value: Value) -> Filter {
        Filter::Compare {
            column: column.into(),
            op,
            value,
        }
    }

    /// `column LIKE pattern`.
    pub fn like(column: &str, pattern: &str) -> Filter {
        Filter::Like {
            column: column.into(),
            pattern: pattern.as_bytes().to_vec(),
        }
    }

    /// Writes the filter's nodes, checking names and values against `table`.
    pub(crate) fn encode(&self, table: &Table, out: &mut ProgramWriter) -> Result<(), ClientError> {
        let column = |name: &str| table.column_id(name);
        let type_of = |id: u16| table.def().columns[id as usize].column_type;
        let refuse = |detail: String| ClientError::Invalid {
            code: ErrorCode::BadFilter,
            detail,
        };
        let parts = |parts: &[Filter]| {
            u16::try_from(parts.len())
                .map_err(|_| refuse(format!("a filter of {} parts", parts.len())))
        };
        match self {
            Filter::Compare {
                column: name,
                op,
                value,
            } => {
                let id = column(name)?;
                let column_type = type_of(id);
                let bytes =
                    filter_bytes(value, column_type).map_err(|code| ClientError::Invalid {
                        code,
                        detail: format!(
                            "filter value {value} for column {name:?} ({column_type:?})"
                        ),
                    })?;
                out.compare(*op, id, bytes.as_deref());
            }
            Filter::Columns { left, op, right } => {
                let (left_id, right_id) = (column(left)?, column(right)?);
                let (left_type, right_type) = (type_of(left_id), type_of(right_id));
                if !order::comparable(left_type, right_type) {
                    return Err(refuse(format!(
                        "columns {left:?} ({left_type:?}) and {right:?} ({right_type:?}) do not compare"
                    )));
                }
                out.compare_columns(*op, left_id, right_id);
            }
            Filter::IsNull(name) => out.is_null(column(name)?),
            Filter::IsNotNull(name) => {
                out.not();
                out.is_null(column(name)?);
            }
            Filter::Like {
                column: name,
                pattern,
            } => {
                let id = column(name)?;
                let column_type = type_of(id);
                if column_type.fixed_width().is_some() && !column_type.pads_spaces() {
                    return Err(refuse(format!(
                        "LIKE on column {name:?}, a number ({column_type:?})"
                    )));
                }
                if pattern.len() > MAX_PATTERN_BYTES {
                    return Err(refuse(format!(
                        "a LIKE pattern of {} bytes: at most {MAX_PATTERN_BYTES}",
                        pattern.len()
                    )));
                }
                out.like(id, pattern);
            }
            Filter::And(all) => {
                out.and(parts(all)?);
                for part in all {
                    part.encode(table, out)?;
                }
            }
            Filter::Or(any) => {
                out.or(parts(any)?);
                for part in any {
                    part.encode(table, out)?;
                }
            }
            Filter::Not(inner) => {
                out.not();
                inner.encode(table, out)?;
            }
        }
        Ok(())
    }
}
