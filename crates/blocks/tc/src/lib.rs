//! tc
