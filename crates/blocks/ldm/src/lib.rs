//! ldm: the local data manager block (row storage, hash index, locks, operations).
pub mod hash_index;
pub mod page_memory;
