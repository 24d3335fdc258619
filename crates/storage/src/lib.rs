//! storage: Tessera's on-disk formats (docs/design/durability.md), as pure
//! encoders and decoders over bytes: the redo log parts (`redo`), the system
//! file that records complete GCIs (`system_file`), and the local checkpoint
//! control file (`lcp_control`). Nothing here opens a file or reads a clock:
//! blocks reach disks through their context (an io thread in production, the
//! simulator's disk model in `sim`), and hand these modules the bytes.
//!
//! Architecture invariant: `storage` depends only on `stdx`; blocks and the
//! io thread depend on it, never the other way round.

pub mod lcp_control;
pub mod redo;
pub mod schema_file;
pub mod system_file;
