//! rowstore: the rows of an ldm's partitions in memory, without signals
//! (NDB's DBTUP and DBACC storage, and later dbtux's trees):
//! DataMemory pages, rows in slots, the row layout, the primary-key hash
//! and ordered indexes and the walk over a partition's row ids
//! (docs/design/data-and-routing.md §1-§4, docs/design/scans-and-indexes.md §3).
//!
//! The ldm block (`crates/blocks/ldm`) owns one `PageMemory` per thread and
//! one `Partition` per partition it holds, and drives them from its
//! signals; everything here is synchronous code over memory that the ldm
//! passes in, so it is tested without a block, a context or a thread.
//!
//! - `zeroed`: large zeroed memory from the OS, on transparent huge pages;
//! - `page_memory`: one ldm thread's DataMemory, fixed pages allocated at
//!   start, handed out and taken back;
//! - `slots`: pages cut into equal slots, with free lists, holes and the
//!   GCI a freed slot keeps; a fixed-part slot reference is the row id;
//! - `layout`: where each column lives in a row, after-images, reads;
//! - `hash_index`: the primary-key index (linear hashing) of a partition;
//! - `ordered_index`: an ordered index (a B+tree of row ids with key
//!   prefixes, in DataMemory nodes) of a partition; `ordered_key`: the
//!   columns it orders by, a row's prefix and key comparisons;
//! - `partition`: one partition's rows: the row header, var parts in size
//!   classes, the hash index, and the row changes commit, restore and
//!   abort make;
//! - `scan`: `RowIdCursor`, the resumable walk over a partition's row ids
//!   shared by local checkpoints, the replica checker's partition scan and
//!   (later) node-restart copy and client scans.
//!
//! Architecture invariant: `rowstore` depends only on `stdx` and `signal`
//! (the schema, the attribute encoding, the key hash): no kernel, no
//! blocks, no I/O. No heap allocation on the paths a warm ldm runs:
//! memory for rows and index comes from `PageMemory`, sized at start.

pub mod hash_index;
pub mod layout;
pub mod ordered_index;
pub mod ordered_key;
pub mod page_memory;
pub mod partition;
pub mod scan;
pub mod slots;
pub mod zeroed;

pub use layout::{RowLayout, RowView};
pub use ordered_index::{Entry, OrderedIndex, Position};
pub use page_memory::{PageId, PageMemory, PAGE_SIZE};
pub use partition::{OutOfDataMemory, Partition, RowState};
pub use scan::{Budget, RowIdCursor, RowSlot, SlotHolds};
