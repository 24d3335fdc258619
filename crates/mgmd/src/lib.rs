//! mgmd
