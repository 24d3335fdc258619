//! dih
