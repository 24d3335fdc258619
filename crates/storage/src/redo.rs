//! redo (being written)
