//! system_file (being written)
