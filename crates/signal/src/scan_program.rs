//! What a scan does with each row it finds: the `program` section of a
//! [`ScanReq`](crate::signals::ScanReq), pure code over bytes
//! (docs/design/scans-and-indexes.md §4, design 0022).
//!
//! A program is a projection (the columns to return) and a filter (a
//! condition a row must meet to be returned or counted). The ldm decodes
//! it once per batch, checking it against the table, and evaluates the
//! filter on every row it walks, so rows the scan does not want never
//! leave the data node.
//!
//! ```text
//! program:    u16 column count (0: every column), that many u16 column ids,
//!             then the filter: nothing (every row) or one node
//! node:       AND      1  u16 n, n nodes      (n = 0: true)
//!             OR       2  u16 n, n nodes      (n = 0: false)
//!             NOT      3  one node
//!             COMPARE  4  u8 op, u16 column, u16 length (0xFFFF: NULL), value
//!             COLUMNS  5  u8 op, u16 column, u16 column
//!             IS NULL  6  u16 column
//!             LIKE     7  u16 column, u16 length, pattern
//! op:         = 0, <> 1, < 2, <= 3, > 4, >= 5
//! ```
//! Numbers are little-endian; a value is in its column's stored form (as
//! in the attribute encoding, `attr`).
//!
//! The filter follows SQL's three-valued logic: a comparison with NULL is
//! unknown, NOT unknown is unknown, AND is false if any part is false and
//! else unknown if any part is, OR the other way round; a row is taken only
//! when the filter is true. A comparison orders values as the ordered
//! indexes do (`order`: PAD SPACE text, integers of any width and sign as
//! numbers). LIKE matches `%` (any run) and `_` (one character; one byte of
//! a VARBINARY), `\` escaping the next pattern byte, case-sensitive, with
//! trailing spaces significant (as MySQL's LIKE).
//!
//! Refused when decoding: a column the table does not have
//! (`UnknownColumn`); a value of the wrong width for its column or a NaN
//! (`BadValue`); a malformed program, columns whose types do not compare,
//! LIKE on a number, a filter deeper than [`MAX_DEPTH`] or longer than
//! [`MAX_NODES`], a program over [`MAX_PROGRAM_BYTES`] or a pattern over
//! [`MAX_PATTERN_BYTES`] (`BadFilter`).
//!
//! Evaluation counts its work (a step per node, and per byte LIKE looks
//! at), so the ldm can end a batch on work as well as on rows: with the
//! limits above, one row costs at most a few million steps.

use crate::attr::NULL_LENGTH;
use crate::error::ErrorCode;
use crate::order;
use crate::schema::{ColumnDef, ColumnType};
use std::cmp::Ordering;

/// Deepest nesting of a filter.
pub const MAX_DEPTH: usize = 32;
/// Most nodes in a filter.
pub const MAX_NODES: usize = 1024;
/// Most bytes in a program.
pub const MAX_PROGRAM_BYTES: usize = 16 * 1024;
/// Most bytes in a LIKE pattern (matching costs up to the value's
/// length times the pattern's).
pub const MAX_PATTERN_BYTES: usize = 256;

const AND: u8 = 1;
const OR: u8 = 2;
const NOT: u8 = 3;
const COMPARE: u8 = 4;
const COLUMNS: u8 = 5;
const IS_NULL: u8 = 6;
const LIKE: u8 = 7;

/// A comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareOp {
    /// `=`
    Equal,
    /// `<>`
    NotEqual,
    /// `<`
    Less,
    /// `<=`
    LessOrEqual,
    /// `>`
    Greater,
    /// `>=`
    GreaterOrEqual,
}

impl CompareOp {
    fn code(self) -> u8 {
        self as u8
    }

    fn from_code(code: u8) -> Option<CompareOp> {
        Some(match code {
            0 => CompareOp::Equal,
            1 => CompareOp::NotEqual,
            2 => CompareOp::Less,
            3 => CompareOp::LessOrEqual,
            4 => CompareOp::Greater,
            5 => CompareOp::GreaterOrEqual,
            _ => return None,
        })
    }

    /// Whether `order` (left against right) meets the comparison.
    #[inline]
    pub fn holds(self, order: Ordering) -> bool {
        match self {
            CompareOp::Equal => order == Ordering::Equal,
            CompareOp::NotEqual => order != Ordering::Equal,
            CompareOp::Less => order == Ordering::Less,
            CompareOp::LessOrEqual => order != Ordering::Greater,
            CompareOp::Greater => order == Ordering::Greater,
            CompareOp::GreaterOrEqual => order != Ordering::Less,
        }
    }
}

/// Writes a program: the projection first, then the filter's nodes in
/// prefix order (a node's children right after it).
///
/// ```
/// use signal::scan_program::{CompareOp, ProgramWriter};
/// // Columns 0 and 2 of the rows where column 1 > 10 AND column 2 IS NULL.
/// let mut program = ProgramWriter::new(&[0, 2]);
/// program.and(2);
/// program.compare(CompareOp::Greater, 1, Some(&10i32.to_le_bytes()));
/// program.is_null(2);
/// let bytes = program.finish().unwrap();
/// assert_eq!(bytes.len(), 2 + 4 + 3 + 10 + 3);
/// ```
#[derive(Clone, Debug, Default)]
pub struct ProgramWriter {
    out: Vec<u8>,
    /// Something written does not fit the encoding: `finish` refuses.
    error: Option<ErrorCode>,
}

impl ProgramWriter {
    /// A program returning `columns` (empty: every column), with no filter
    /// until nodes are written.
    pub fn new(columns: &[u16]) -> ProgramWriter {
        let mut out = Vec::with_capacity(2 + 2 * columns.len());
        let error = match u16::try_from(columns.len()) {
            Ok(count) => {
                out.extend_from_slice(&count.to_le_bytes());
                None
            }
            Err(_) => Some(ErrorCode::BadFilter),
        };
        for column in columns {
            out.extend_from_slice(&column.to_le_bytes());
        }
        ProgramWriter { out, error }
    }

    /// AND of the next `parts` nodes.
    pub fn and(&mut self, parts: u16) {
        self.out.push(AND);
        self.out.extend_from_slice(&parts.to_le_bytes());
    }

    /// OR of the next `parts` nodes.
    pub fn or(&mut self, parts: u16) {
        self.out.push(OR);
        self.out.extend_from_slice(&parts.to_le_bytes());
    }

    /// NOT of the next node.
    pub fn not(&mut self) {
        self.out.push(NOT);
    }

    /// `column op value` (`None`: NULL, which no comparison meets).
    pub fn compare(&mut self, op: CompareOp, column: u16, value: Option<&[u8]>) {
        self.out.extend_from_slice(&[COMPARE, op.code()]);
        self.out.extend_from_slice(&column.to_le_bytes());
        self.push_bytes(value);
    }

    /// `left op right`, two columns of the row.
    pub fn compare_columns(&mut self, op: CompareOp, left: u16, right: u16) {
        self.out.extend_from_slice(&[COLUMNS, op.code()]);
        self.out.extend_from_slice(&left.to_le_bytes());
        self.out.extend_from_slice(&right.to_le_bytes());
    }

    /// `column IS NULL` (NOT of it: IS NOT NULL).
    pub fn is_null(&mut self, column: u16) {
        self.out.push(IS_NULL);
        self.out.extend_from_slice(&column.to_le_bytes());
    }

    /// `column LIKE pattern`.
    pub fn like(&mut self, column: u16, pattern: &[u8]) {
        self.out.push(LIKE);
        self.out.extend_from_slice(&column.to_le_bytes());
        self.push_bytes(Some(pattern));
    }

    /// The program's bytes; `ValueTooLong` when a value did not fit its
    /// length field, `BadFilter` for more columns than a count holds or a
    /// program over [`MAX_PROGRAM_BYTES`].
    pub fn finish(self) -> Result<Vec<u8>, ErrorCode> {
        match self.error {
            Some(error) => Err(error),
            None if self.out.len() > MAX_PROGRAM_BYTES => Err(ErrorCode::BadFilter),
            None => Ok(self.out),
        }
    }

    fn push_bytes(&mut self, value: Option<&[u8]>) {
        match value {
            Some(bytes) => match u16::try_from(bytes.len()) {
                Ok(length) if length != NULL_LENGTH => {
                    self.out.extend_from_slice(&length.to_le_bytes());
                    self.out.extend_from_slice(bytes);
                }
                // Written anyway, it would be read as other nodes.
                _ => self.error = Some(ErrorCode::ValueTooLong),
            },
            None => self.out.extend_from_slice(&NULL_LENGTH.to_le_bytes()),
        }
    }
}

/// A decoded, checked program.
#[derive(Clone, Debug, Default)]
pub struct Program {
    /// The columns to return as u16 LE ids (empty: every column), the
    /// form `RowLayout::encode_read` takes.
    projection: Vec<u8>,
    filter: Filter,
}

impl Program {
    /// Decodes and checks `bytes` against a table of `columns`.
    pub fn decode(bytes: &[u8], columns: &[ColumnDef]) -> Result<Program, ErrorCode> {
        if bytes.len() > MAX_PROGRAM_BYTES {
            return Err(ErrorCode::BadFilter);
        }
        let mut reader = Reader { bytes, at: 0 };
        let count = reader.u16()? as usize;
        let projection = reader.take(2 * count)?.to_vec();
        for pair in projection.chunks_exact(2) {
            if u16::from_le_bytes([pair[0], pair[1]]) as usize >= columns.len() {
                return Err(ErrorCode::UnknownColumn);
            }
        }
        let mut filter = Filter::default();
        if !reader.is_done() {
            filter.decode_node(&mut reader, columns, 1)?;
            if !reader.is_done() {
                return Err(ErrorCode::BadFilter);
            }
        }
        Ok(Program { projection, filter })
    }

    /// The projection, as `RowLayout::encode_read` takes it.
    pub fn projection(&self) -> &[u8] {
        &self.projection
    }

    /// The filter.
    pub fn filter(&self) -> &Filter {
        &self.filter
    }
}

/// A filter's nodes in prefix order, each with the index just past its
/// subtree so evaluation can skip a subtree it need not look at.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    nodes: Vec<(Node, u32)>,
    /// The constants and patterns, which nodes name by range.
    bytes: Vec<u8>,
}

#[derive(Clone, Copy, Debug)]
enum Node {
    And,
    Or,
    Not,
    Compare {
        op: CompareOp,
        column: u16,
        column_type: ColumnType,
        /// `None`: compared with NULL (unknown).
        value: Option<(u32, u32)>,
    },
    Columns {
        op: CompareOp,
        left: u16,
        left_type: ColumnType,
        right: u16,
        right_type: ColumnType,
    },
    IsNull {
        column: u16,
    },
    Like {
        column: u16,
        /// Text (`_` is one UTF-8 character) or binary (one byte).
        text: bool,
        /// CHAR: trailing spaces are not part of the value (MySQL takes
        /// them off CHAR values it reads).
        trim: bool,
        pattern: (u32, u32),
    },
}

impl Filter {
    /// Whether the filter takes every row (no nodes).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Whether the row whose column values `value` gives (`None`: NULL)
    /// meets the filter (true, not false or unknown); adds the steps it
    /// took to `work`.
    #[inline]
    pub fn matches<'r>(&self, value: impl Fn(usize) -> Option<&'r [u8]>, work: &mut u64) -> bool {
        self.nodes.is_empty() || self.evaluate(0, &value, work) == Some(true)
    }

    /// The truth of node `at`: `None` is unknown.
    fn evaluate<'r>(
        &self,
        at: usize,
        value: &impl Fn(usize) -> Option<&'r [u8]>,
        work: &mut u64,
    ) -> Option<bool> {
        *work += 1;
        let (node, end) = self.nodes[at];
        match node {
            Node::And | Node::Or => {
                // AND stops at false, OR at true; unknown otherwise wins
                // over the neutral value.
                let stop = matches!(node, Node::Or);
                let mut result = Some(!stop);
                let mut child = at + 1;
                while child < end as usize {
                    match self.evaluate(child, value, work) {
                        Some(truth) if truth == stop => return Some(stop),
                        Some(_) => {}
                        None => result = None,
                    }
                    child = self.nodes[child].1 as usize;
                }
                result
            }
            Node::Not => self.evaluate(at + 1, value, work).map(|truth| !truth),
            Node::Compare {
                op,
                column,
                column_type,
                value: constant,
            } => {
                let (start, end) = constant?;
                let stored = value(column as usize)?;
                let constant = &self.bytes[start as usize..end as usize];
                Some(op.holds(order::compare_values(column_type, stored, constant)))
            }
            Node::Columns {
                op,
                left,
                left_type,
                right,
                right_type,
            } => {
                let (a, b) = (value(left as usize)?, value(right as usize)?);
                let order = order::compare_across(left_type, a, right_type, b)
                    .expect("decoding let only comparable columns through");
                Some(op.holds(order))
            }
            Node::IsNull { column } => Some(value(column as usize).is_none()),
            Node::Like {
                column,
                text,
                trim,
                pattern: (start, end),
            } => {
                let mut stored = value(column as usize)?;
                if trim {
                    while let [rest @ .., b' '] = stored {
                        stored = rest;
                    }
                }
                let pattern = &self.bytes[start as usize..end as usize];
                Some(like(stored, pattern, text, work))
            }
        }
    }

    fn decode_node(
        &mut self,
        reader: &mut Reader<'_>,
        columns: &[ColumnDef],
        depth: usize,
    ) -> Result<(), ErrorCode> {
        if depth > MAX_DEPTH || self.nodes.len() >= MAX_NODES {
            return Err(ErrorCode::BadFilter);
        }
        let column_of = |id: u16| {
            columns
                .get(id as usize)
                .map(|def| def.column_type)
                .ok_or(ErrorCode::UnknownColumn)
        };
        let at = self.nodes.len();
        let node = match reader.u8()? {
            code @ (AND | OR) => {
                let parts = reader.u16()?;
                self.nodes
                    .push((if code == AND { Node::And } else { Node::Or }, 0));
                for _ in 0..parts {
                    self.decode_node(reader, columns, depth + 1)?;
                }
                None
            }
            NOT => {
                self.nodes.push((Node::Not, 0));
                self.decode_node(reader, columns, depth + 1)?;
                None
            }
            COMPARE => {
                let op = reader.op()?;
                let column = reader.u16()?;
                let column_type = column_of(column)?;
                let value = match reader.bytes()? {
                    None => None,
                    Some(bytes) => {
                        check_constant(column_type, bytes)?;
                        Some(self.keep(bytes))
                    }
                };
                Some(Node::Compare {
                    op,
                    column,
                    column_type,
                    value,
                })
            }
            COLUMNS => {
                let op = reader.op()?;
                let (left, right) = (reader.u16()?, reader.u16()?);
                let (left_type, right_type) = (column_of(left)?, column_of(right)?);
                if !order::comparable(left_type, right_type) {
                    return Err(ErrorCode::BadFilter);
                }
                Some(Node::Columns {
                    op,
                    left,
                    left_type,
                    right,
                    right_type,
                })
            }
            IS_NULL => {
                let column = reader.u16()?;
                column_of(column)?;
                Some(Node::IsNull { column })
            }
            LIKE => {
                let column = reader.u16()?;
                let column_type = column_of(column)?;
                let text = match column_type {
                    ColumnType::Char(_) | ColumnType::VarChar(_) => true,
                    ColumnType::VarBinary(_) => false,
                    _ => return Err(ErrorCode::BadFilter),
                };
                let pattern = reader.bytes()?.ok_or(ErrorCode::BadFilter)?;
                if pattern.len() > MAX_PATTERN_BYTES {
                    return Err(ErrorCode::BadFilter);
                }
                let pattern = self.keep(pattern);
                Some(Node::Like {
                    column,
                    text,
                    trim: matches!(column_type, ColumnType::Char(_)),
                    pattern,
                })
            }
            _ => return Err(ErrorCode::BadFilter),
        };
        match node {
            Some(node) => self.nodes.push((node, at as u32 + 1)),
            None => self.nodes[at].1 = self.nodes.len() as u32,
        }
        Ok(())
    }

    fn keep(&mut self, bytes: &[u8]) -> (u32, u32) {
        let start = self.bytes.len() as u32;
        self.bytes.extend_from_slice(bytes);
        (start, self.bytes.len() as u32)
    }
}

/// A constant compared with a column of `column_type`: numbers of the
/// column's width and no NaN. Text of any length compares (a value longer
/// than the column just never equals one of its values).
fn check_constant(column_type: ColumnType, value: &[u8]) -> Result<(), ErrorCode> {
    match column_type.fixed_width() {
        Some(width) if !column_type.pads_spaces() && value.len() != width => {
            Err(ErrorCode::BadValue)
        }
        _ => order::check_orderable(column_type, value),
    }
}

/// Whether `value` matches the LIKE `pattern` (module doc): the usual
/// wildcard walk, going back to just after the last `%` on a mismatch;
/// counts a step of `work` per pattern byte it tries.
fn like(value: &[u8], pattern: &[u8], text: bool, work: &mut u64) -> bool {
    // One character of `value` from `at`: a UTF-8 lead byte and its
    // continuation bytes for text, one byte for binary.
    let character = |at: usize| -> usize {
        let mut end = at + 1;
        if text {
            while end < value.len() && value[end] & 0xC0 == 0x80 {
                end += 1;
            }
        }
        end
    };
    let (mut v, mut p) = (0, 0);
    // Where to go back to: the pattern just after the last `%`, and the
    // value position that `%` now ends at.
    let mut back: Option<(usize, usize)> = None;
    loop {
        *work += 1;
        if p < pattern.len() {
            match pattern[p] {
                b'%' => {
                    p += 1;
                    back = Some((p, v));
                    continue;
                }
                b'_' if v < value.len() => {
                    v = character(v);
                    p += 1;
                    continue;
                }
                b'_' => {}
                byte => {
                    let (literal, next) = if byte == b'\\' && p + 1 < pattern.len() {
                        (pattern[p + 1], p + 2)
                    } else {
                        (byte, p + 1)
                    };
                    if v < value.len() && value[v] == literal {
                        v += 1;
                        p = next;
                        continue;
                    }
                }
            }
        } else if v == value.len() {
            return true;
        }
        // A mismatch: the last `%` takes one more character.
        match back {
            Some((after_percent, taken)) if taken < value.len() => {
                let taken = character(taken);
                back = Some((after_percent, taken));
                p = after_percent;
                v = taken;
            }
            _ => return false,
        }
    }
}

/// Reads a program's bytes; running short is `BadFilter`.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn is_done(&self) -> bool {
        self.at == self.bytes.len()
    }

    fn take(&mut self, count: usize) -> Result<&'a [u8], ErrorCode> {
        let end = self.at.checked_add(count).ok_or(ErrorCode::BadFilter)?;
        let bytes = self.bytes.get(self.at..end).ok_or(ErrorCode::BadFilter)?;
        self.at = end;
        Ok(bytes)
    }

    fn u8(&mut self) -> Result<u8, ErrorCode> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, ErrorCode> {
        let bytes = self.take(2)?;
        Ok(u16::from_le_bytes([bytes[0], bytes[1]]))
    }

    fn op(&mut self) -> Result<CompareOp, ErrorCode> {
        CompareOp::from_code(self.u8()?).ok_or(ErrorCode::BadFilter)
    }

    /// A length and that many bytes; `None` for the NULL length.
    fn bytes(&mut self) -> Result<Option<&'a [u8]>, ErrorCode> {
        match self.u16()? {
            NULL_LENGTH => Ok(None),
            length => self.take(length as usize).map(Some),
        }
    }
}

#[cfg(test)]
mod tests;
