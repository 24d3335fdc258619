//! What a file request is for. The ldm sends every file request with
//! `Context::fs_request(from, token, operation)` and gets an FSCONF back
//! with the same token and the result. The token says which of the ldm's
//! file work the answer belongs to, as a [`FileToken`] packed into the u64;
//! `Ldm::fs_answer` below is the one place every FSCONF is dispatched
//! from.
//!
//! ```text
//! bits 63..56  kind (1..=9)
//!      55..48  the ldm's local redo part index (redo kinds)
//!      47..32  redo file number within the part (redo kinds)
//!      31..0   table id (LcpCreate)
//! ```
//!
//! A field a kind does not use is zero. The io service echoes tokens, so
//! an FSCONF whose token does not decode is a broken invariant of this
//! node and panics.

use crate::redo_log::{Completed, RedoLog};
use crate::Ldm;
use kernel::{send, Context};
use signal::fs::{FsDone, FsError};
use signal::signals::GcpSaveConf;
use signal::{BlockRef, Gci};

/// What an FSCONF answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FileToken {
    /// A piece of a page write to redo file `file` of local part `part`.
    RedoWrite { part: usize, file: u32 },
    /// An fsync of a redo file, after a GCI marker or a resume.
    RedoSync { part: usize, file: u32 },
    /// A step of formatting a redo file (open, truncate, header, fsync).
    RedoFormat { part: usize, file: u32 },
    /// The open of a redo file during a restore (gives its size).
    RedoRestoreOpen { part: usize, file: u32 },
    /// A read of a redo file during a restore.
    RedoRestoreRead { part: usize, file: u32 },
    /// A step of the running local checkpoint's data file (open,
    /// truncate, write, fsync) or control file (`lcp::files`).
    LcpWrite,
    /// The delete of a data file no restorable LCP needs any more.
    LcpDelete,
    /// A step of a new table's first (empty) LCPs.
    LcpCreate { table: u32 },
    /// A step of restoring the local checkpoints (`lcp_restore.rs`).
    LcpRestore,
}

const REDO_WRITE: u64 = 1;
const REDO_SYNC: u64 = 2;
const REDO_FORMAT: u64 = 3;
const REDO_RESTORE_READ: u64 = 4;
const REDO_RESTORE_OPEN: u64 = 5;
const LCP_WRITE: u64 = 6;
const LCP_DELETE: u64 = 7;
const LCP_CREATE: u64 = 8;
const LCP_RESTORE: u64 = 9;

const KIND_SHIFT: u32 = 56;
const PART_SHIFT: u32 = 48;
const FILE_SHIFT: u32 = 32;
const PART_MASK: u64 = 0xFF;
const FILE_MASK: u64 = 0xFFFF;

impl FileToken {
    /// The token as sent with a file request.
    pub(crate) fn encode(self) -> u64 {
        let redo = |kind: u64, part: usize, file: u32| {
            // Config bounds: at most 64 parts and 1024 files per part.
            assert!(
                part as u64 <= PART_MASK && u64::from(file) <= FILE_MASK,
                "redo part index {part} or file {file} too large for a file token"
            );
            kind << KIND_SHIFT | (part as u64) << PART_SHIFT | u64::from(file) << FILE_SHIFT
        };
        match self {
            FileToken::RedoWrite { part, file } => redo(REDO_WRITE, part, file),
            FileToken::RedoSync { part, file } => redo(REDO_SYNC, part, file),
            FileToken::RedoFormat { part, file } => redo(REDO_FORMAT, part, file),
            FileToken::RedoRestoreOpen { part, file } => redo(REDO_RESTORE_OPEN, part, file),
            FileToken::RedoRestoreRead { part, file } => redo(REDO_RESTORE_READ, part, file),
            FileToken::LcpWrite => LCP_WRITE << KIND_SHIFT,
            FileToken::LcpDelete => LCP_DELETE << KIND_SHIFT,
            FileToken::LcpCreate { table } => LCP_CREATE << KIND_SHIFT | u64::from(table),
            FileToken::LcpRestore => LCP_RESTORE << KIND_SHIFT,
        }
    }

    /// The token `encode` made, or `None` for one it never makes.
    pub(crate) fn decode(token: u64) -> Option<FileToken> {
        let kind = token >> KIND_SHIFT;
        let part = ((token >> PART_SHIFT) & PART_MASK) as usize;
        let file = ((token >> FILE_SHIFT) & FILE_MASK) as u32;
        let low = token as u32;
        let redo_fields = low == 0;
        let no_fields = token & ((1 << KIND_SHIFT) - 1) == 0;
        let decoded = match kind {
            REDO_WRITE if redo_fields => FileToken::RedoWrite { part, file },
            REDO_SYNC if redo_fields => FileToken::RedoSync { part, file },
            REDO_FORMAT if redo_fields => FileToken::RedoFormat { part, file },
            REDO_RESTORE_OPEN if redo_fields => FileToken::RedoRestoreOpen { part, file },
            REDO_RESTORE_READ if redo_fields => FileToken::RedoRestoreRead { part, file },
            LCP_WRITE if no_fields => FileToken::LcpWrite,
            LCP_DELETE if no_fields => FileToken::LcpDelete,
            LCP_CREATE if token >> FILE_SHIFT == LCP_CREATE << (KIND_SHIFT - FILE_SHIFT) => {
                FileToken::LcpCreate { table: low }
            }
            LCP_RESTORE if no_fields => FileToken::LcpRestore,
            _ => return None,
        };
        Some(decoded)
    }
}

impl Ldm {
    /// FSCONF: an answer to one of this ldm's file requests, passed to the
    /// work that sent it.
    pub(crate) fn fs_answer(
        &mut self,
        token: u64,
        result: Result<FsDone, FsError>,
        ctx: &mut dyn Context,
    ) {
        let Some(decoded) = FileToken::decode(token) else {
            panic!(
                "ldm {}: FSCONF with token {token:#x}, which this ldm never sends: the file \
                 service echoes the tokens of requests",
                self.address
            );
        };
        match decoded {
            FileToken::RedoWrite { part, .. } => {
                self.redo_answered(result, ctx, |redo, me, ctx| {
                    redo.write_answered(part, me, ctx)
                })
            }
            FileToken::RedoSync { part, .. } => {
                self.redo_answered(result, ctx, |redo, _, _| redo.sync_answered(part))
            }
            FileToken::RedoFormat { .. } => {
                self.redo_answered(result, ctx, |redo, _, _| redo.format_answered())
            }
            FileToken::RedoRestoreOpen { part, file } => {
                self.restore_redo_opened(part, file, result, ctx)
            }
            FileToken::RedoRestoreRead { part, file } => {
                self.restore_redo_read(part, file, result, ctx)
            }
            FileToken::LcpWrite => self.lcp_write_answered(result, ctx),
            FileToken::LcpDelete => self.lcp_delete_answered(result, ctx),
            FileToken::LcpCreate { table } => self.lcp_creation_answered(table, result, ctx),
            FileToken::LcpRestore => self.lcp_restore_answered(result, ctx),
        }
    }

    /// An answer to the redo log's own writes, fsyncs or format steps: an
    /// error stops the node (redo I/O is never retried,
    /// docs/design/durability.md §6); otherwise `step` moves the log on,
    /// and the ldm acts on what that completed.
    fn redo_answered(
        &mut self,
        result: Result<FsDone, FsError>,
        ctx: &mut dyn Context,
        step: impl FnOnce(&mut RedoLog, BlockRef, &mut dyn Context) -> Completed,
    ) {
        if let Err(error) = result {
            ctx.fatal(format!(
                "ldm {}: redo log I/O failed, the node stops: {error}",
                self.address
            ));
        }
        let redo = self
            .redo
            .as_mut()
            .expect("redo answers come only to an ldm with a redo log");
        match step(redo, self.address, ctx) {
            Completed::Nothing => {}
            Completed::Saved { gci, from } => {
                send(ctx, self.address, from, GcpSaveConf { gci: Gci(gci) })
            }
            Completed::Ready => self.restore_finished(ctx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_kind() -> Vec<FileToken> {
        vec![
            FileToken::RedoWrite { part: 0, file: 0 },
            FileToken::RedoWrite { part: 3, file: 17 },
            FileToken::RedoSync {
                part: 255,
                file: 0xFFFF,
            },
            FileToken::RedoFormat {
                part: 1,
                file: 1023,
            },
            FileToken::RedoRestoreOpen { part: 63, file: 2 },
            FileToken::RedoRestoreRead { part: 2, file: 9 },
            FileToken::LcpWrite,
            FileToken::LcpDelete,
            FileToken::LcpCreate { table: 0 },
            FileToken::LcpCreate { table: u32::MAX },
            FileToken::LcpRestore,
        ]
    }

    #[test]
    fn every_token_round_trips() {
        for token in every_kind() {
            assert_eq!(FileToken::decode(token.encode()), Some(token), "{token:?}");
        }
    }

    #[test]
    fn tokens_keep_the_bit_layout_of_the_hand_packed_ones() {
        // kind << 56 | part << 48 | file << 32 | sequence, as before the enum.
        assert_eq!(
            FileToken::RedoWrite { part: 2, file: 5 }.encode(),
            1 << 56 | 2 << 48 | 5 << 32
        );
        assert_eq!(FileToken::LcpCreate { table: 7 }.encode(), 8 << 56 | 7);
        assert_eq!(FileToken::LcpRestore.encode(), 9 << 56);
    }

    #[test]
    fn tokens_this_ldm_never_makes_do_not_decode() {
        let never = [
            0,
            10 << 56,
            u64::MAX,
            // An LCP write with a part index; an LCP create with a file.
            6 << 56 | 1 << 48,
            8 << 56 | 1 << 32 | 3,
            // A redo write with a sequence.
            1 << 56 | 1,
        ];
        for token in never {
            assert_eq!(FileToken::decode(token), None, "{token:#x}");
        }
    }

    #[test]
    #[should_panic(expected = "too large for a file token")]
    fn a_part_index_beyond_the_token_panics() {
        FileToken::RedoWrite { part: 256, file: 0 }.encode();
    }
}
