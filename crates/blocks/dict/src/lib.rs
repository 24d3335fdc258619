//! dict
