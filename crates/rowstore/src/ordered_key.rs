//! The key an ordered index orders a partition's rows by: its columns,
//! the prefix of a row's key kept in the index entry, and how two rows'
//! keys compare (docs/design/0021-ordered-index.md).
//!
//! An index entry stands for a row; two entries compare by their prefixes
//! and, where those are equal and the key is longer than its prefix, by the
//! key values read from the rows, then by row id.

use crate::layout::{RowLayout, RowView};
use crate::ordered_index::Entry;
use signal::attr::{self, AttrIter};
use signal::order::{self, KeyColumn, KeyPrefix, KeyPrefixBuilder};
use signal::schema::ColumnType;
use signal::ErrorCode;
use std::cmp::Ordering;

/// The columns of one ordered index.
#[derive(Debug, Clone)]
pub struct OrderedKey {
    /// Column ids in key order, with how the key sees each.
    columns: Vec<(u16, KeyColumn)>,
    /// Whether every prefix holds the whole key (numbers of 8 bytes in
    /// all): then equal prefixes are equal keys and rows are never read.
    exact: bool,
}

impl OrderedKey {
    /// The key of the table's primary-key index.
    pub fn primary(layout: &RowLayout) -> OrderedKey {
        OrderedKey::new(layout, layout.primary_key())
    }

    /// The key over `columns` (column ids in key order).
    pub fn new(layout: &RowLayout, columns: &[u16]) -> OrderedKey {
        let columns: Vec<(u16, KeyColumn)> = columns
            .iter()
            .map(|&column| (column, layout.key_column(column as usize)))
            .collect();
        let mut bytes = 0;
        let mut exact = true;
        for (_, column) in &columns {
            bytes += usize::from(column.nullable);
            match column.column_type.fixed_width() {
                // CHAR compares padded: never whole in a prefix.
                Some(width) if !matches!(column.column_type, ColumnType::Char(_)) => bytes += width,
                _ => exact = false,
            }
        }
        OrderedKey {
            columns,
            exact: exact && bytes <= order::PREFIX_BYTES,
        }
    }

    /// Whether the prefix of every key is the whole key.
    pub fn is_exact(&self) -> bool {
        self.exact
    }

    /// The prefix of the key of the row `view`.
    #[inline]
    pub fn prefix(&self, layout: &RowLayout, view: RowView<'_>) -> u64 {
        let mut builder = KeyPrefixBuilder::new();
        for &(column, key_column) in &self.columns {
            if !builder.push(key_column, layout.value(view, column as usize)) {
                break;
            }
        }
        builder.finish().value
    }

    /// How the keys of rows `a` and `b` compare, column by column.
    #[inline]
    pub fn compare(&self, layout: &RowLayout, a: RowView<'_>, b: RowView<'_>) -> Ordering {
        for &(column, key_column) in &self.columns {
            let order = order::compare(
                key_column.column_type,
                layout.value(a, column as usize),
                layout.value(b, column as usize),
            );
            if order != Ordering::Equal {
                return order;
            }
        }
        Ordering::Equal
    }

    /// How `entry` stands relative to `target` (an entry whose row
    /// `target_view` reads): prefixes, then the keys in full where the
    /// prefix does not decide (`view_of` reads an entry's row), then row
    /// ids. Rows are read only when the prefixes tie.
    #[inline]
    pub fn order<'a, 'b>(
        &self,
        layout: &RowLayout,
        entry: Entry,
        target: Entry,
        target_view: impl FnOnce() -> RowView<'b>,
        view_of: impl FnOnce(u32) -> RowView<'a>,
    ) -> Ordering {
        entry
            .prefix
            .cmp(&target.prefix)
            .then_with(|| {
                if self.exact {
                    Ordering::Equal
                } else {
                    self.compare(layout, view_of(entry.row), target_view())
                }
            })
            .then(entry.row.cmp(&target.row))
    }

    /// Checks `entries` (attribute entries, as a request carries them) as
    /// a bound on a leading run of the key's columns: each entry names the
    /// next key column, holds a well-formed value of its type (a DOUBLE not
    /// NaN) and is NULL only in a NULL-able column. An empty bound is no
    /// bound.
    pub fn bound<'a>(&self, entries: &'a [u8]) -> Result<KeyBound<'a>, ErrorCode> {
        let mut builder = KeyPrefixBuilder::new();
        let mut columns = 0;
        for entry in AttrIter::new(entries) {
            let entry = entry?;
            let Some(&(column, key_column)) = self.columns.get(columns) else {
                return Err(ErrorCode::BadRequest);
            };
            if entry.column != column {
                return Err(ErrorCode::BadRequest);
            }
            match entry.value {
                None if !key_column.nullable => return Err(ErrorCode::NullNotAllowed),
                None => {}
                Some(value) => {
                    attr::check_value(key_column.column_type, value)?;
                    order::check_orderable(key_column.column_type, value)?;
                }
            }
            builder.push(key_column, entry.value);
            columns += 1;
        }
        Ok(KeyBound {
            entries,
            columns,
            prefix: builder.finish(),
        })
    }

    /// How the key of `entry`'s row stands relative to `bound`, on the
    /// bound's columns only (`Equal`: its first values are the bound's).
    /// Decided on the prefixes where they differ; else, unless the bound's
    /// prefix holds its values whole, on the row (`view_of`).
    #[inline]
    pub fn compare_bound<'a>(
        &self,
        layout: &RowLayout,
        entry: Entry,
        bound: &KeyBound<'_>,
        view_of: impl FnOnce(u32) -> RowView<'a>,
    ) -> Ordering {
        let bytes = bound.prefix.bytes;
        if bytes > 0 {
            let shift = 64 - 8 * bytes as u32;
            let (ours, theirs) = if shift == 0 {
                (entry.prefix, bound.prefix.value)
            } else {
                (entry.prefix >> shift, bound.prefix.value >> shift)
            };
            if ours != theirs {
                return ours.cmp(&theirs);
            }
        }
        if bound.prefix.exact {
            return Ordering::Equal;
        }
        let view = view_of(entry.row);
        for (bound_entry, &(column, key_column)) in AttrIter::new(bound.entries).zip(&self.columns)
        {
            let bound_value = bound_entry
                .expect("a bound's entries were checked when it was made")
                .value;
            let order = order::compare(
                key_column.column_type,
                layout.value(view, column as usize),
                bound_value,
            );
            if order != Ordering::Equal {
                return order;
            }
        }
        Ordering::Equal
    }

    /// Columns in the key.
    pub fn columns(&self) -> usize {
        self.columns.len()
    }

    /// The most bytes `write_entries` writes.
    pub fn entries_max_bytes(&self) -> usize {
        self.columns
            .iter()
            .map(|(_, column)| attr::entry_bytes(column.column_type.max_value_bytes()))
            .sum()
    }

    /// Writes the key of the row `view` as attribute entries (its columns
    /// in key order) into `out` (at least `entries_max_bytes` long): a
    /// scan's resume key. Returns the bytes written.
    pub fn write_entries(
        &self,
        layout: &RowLayout,
        view: RowView<'_>,
        out: &mut [u8],
    ) -> Result<usize, ErrorCode> {
        let mut writer = attr::AttrWriter::new(out);
        for &(column, _) in &self.columns {
            writer.push(column, layout.value(view, column as usize))?;
        }
        Ok(writer.len())
    }

    /// The key's column ids, in key order.
    pub fn column_ids(&self) -> impl Iterator<Item = usize> + '_ {
        self.columns.iter().map(|&(column, _)| column as usize)
    }
}

/// A checked bound on a leading run of an ordered key's columns
/// ([`OrderedKey::bound`]).
#[derive(Clone, Copy, Debug)]
pub struct KeyBound<'a> {
    entries: &'a [u8],
    columns: usize,
    prefix: KeyPrefix,
}

impl KeyBound<'_> {
    /// How many leading columns it bounds (0: no bound).
    pub fn columns(&self) -> usize {
        self.columns
    }
}
