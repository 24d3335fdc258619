//! The key an ordered index orders a partition's rows by: its columns,
//! the prefix of a row's key kept in the index entry, and how two rows'
//! keys compare (docs/design/0021-ordered-index.md).
//!
//! An index entry stands for a row; two entries compare by their prefixes
//! and, where those are equal and the key is longer than its prefix, by the
//! key values read from the rows, then by row id.

use crate::layout::{RowLayout, RowView};
use crate::ordered_index::Entry;
use signal::order::{self, KeyColumn, KeyPrefixBuilder};
use signal::schema::ColumnType;
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

    /// How `entry` stands relative to `target` (an entry whose row is
    /// `target_view`): prefixes, then the keys in full where the prefix
    /// does not decide (`view_of` reads an entry's row), then row ids.
    #[inline]
    pub fn order<'a>(
        &self,
        layout: &RowLayout,
        entry: Entry,
        target: Entry,
        target_view: RowView<'_>,
        view_of: impl FnOnce(u32) -> RowView<'a>,
    ) -> Ordering {
        entry
            .prefix
            .cmp(&target.prefix)
            .then_with(|| {
                if self.exact {
                    Ordering::Equal
                } else {
                    self.compare(layout, view_of(entry.row), target_view)
                }
            })
            .then(entry.row.cmp(&target.row))
    }
}
