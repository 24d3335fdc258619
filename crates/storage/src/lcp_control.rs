//! lcp_control (being written)
