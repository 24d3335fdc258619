//! What blocks report about themselves to the node's status, beyond the
//! node-level state the kernel's `Report` carries: the ldm's local
//! checkpoint counters and pacing (`all report checkpoints`). They live
//! here, with the rest of the vocabulary blocks share with the outside,
//! so that the kernel defines no block's types.

/// One ldm instance's local checkpoint counters (design 0005). Every counter
/// only grows from the node's start, so a script can take differences
/// over a window; the pacing fields are the controls chosen last.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct CheckpointReport {
    /// The ldm instance (0-based) reporting.
    pub instance: u32,
    /// LCPs of a partition that counted (control file durable), empty
    /// first LCPs of created tables included.
    pub lcp_count: u64,
    /// Bytes written to LCP data and control files.
    pub lcp_bytes_written: u64,
    /// Bytes of row changes committed (the row image of an insert or
    /// update, the deleted row's image for a delete).
    pub changed_row_bytes: u64,
    /// Bytes of LCP files on disk now (data files of every chain still
    /// kept, and control files). Not a counter: it goes down as files are
    /// deleted.
    pub checkpoint_disk_bytes: u64,
    /// Bytes of the committed rows' images held now. Not a counter.
    pub live_data_bytes: u64,
    /// What the adaptive pacing chose.
    pub pacing: PacingReport,
}

/// The LCP pacing of one ldm: its inputs and the speed it chose.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct PacingReport {
    /// The LCP write speed chosen, bytes per second.
    pub speed_bytes_per_second: u64,
    /// The speed needed to keep up with the change rate, bytes per second.
    pub keep_up_bytes_per_second: u64,
    /// Committed row change bytes per second (smoothed).
    pub change_bytes_per_second: u64,
    /// The fullest redo part of this ldm, percent.
    pub redo_fill_percent: u32,
    /// The ldm thread's busy share, percent (0 where unknown).
    pub busy_percent: u32,
    /// Why the speed is what it is: "idle", "keep up", "busy", "redo
    /// filling", "redo full".
    pub reason: &'static str,
}
