//! A recording [`Context`] for block tests (docs/design/testing.md §2):
//! feed a block signals, then compare what it sent with what the protocol
//! prescribes, as golden traces.
//!
//! It lives in the kernel rather than in each block's tests so that every
//! block is tested against one implementation of the context; it is small
//! and touches nothing of the world, so compiling it into non-test builds
//! costs nothing.
//!
//! ```
//! use kernel::testing::{deliver, line, RecordingContext};
//! use kernel::Block;
//! use signal::signals::ContinueB;
//! use signal::{BlockKind, BlockRef, Envelope, NodeId};
//!
//! /// Echoes every signal back to its sender.
//! struct Echo(BlockRef);
//! impl Block for Echo {
//!     fn address(&self) -> BlockRef {
//!         self.0
//!     }
//!     fn handle(&mut self, envelope: Envelope, ctx: &mut dyn kernel::Context) {
//!         ctx.send(Envelope { from: self.0, to: envelope.from, signal: envelope.signal });
//!     }
//! }
//!
//! let me = BlockRef::new(NodeId(2), BlockKind::Dih, 0);
//! let peer = BlockRef::new(NodeId(2), BlockKind::Dict, 0);
//! let mut ctx = RecordingContext::new();
//! deliver(&mut Echo(me), &mut ctx, peer, ContinueB { job: 1 });
//! assert_eq!(ctx.take_trace(), vec![line(me, peer, ContinueB { job: 1 })]);
//! ```

use crate::{Block, Context, Report};
use signal::fs::FsOperation;
use signal::partition::{default_partition_of_bucket, BUCKETS};
use signal::schema::{ColumnDef, ColumnType, TableDef};
use signal::signals::{PartitionMap, PartitionPlacement};
use signal::{BlockRef, Envelope, NodeId, SectionPool, Signal};
use stdx::mix::XorShift;

/// One signal a block sent.
#[derive(Debug)]
pub struct Sent {
    /// The signal with its addresses.
    pub envelope: Envelope,
    /// `Some(delay)` when sent with `send_delayed`, `None` for `send`.
    pub delay_ms: Option<u64>,
}

/// One file operation a block asked for.
#[derive(Debug)]
pub struct FsRequest {
    /// The requesting block (the answer would go to it).
    pub from: BlockRef,
    /// The block's token.
    pub token: u64,
    /// The operation.
    pub operation: FsOperation,
}

/// A [`Context`] that records what a block does to the world instead of
/// doing it: sent signals stay in [`RecordingContext::sent`] in send order
/// (delayed ones with their delay, never delivered), reports in
/// [`RecordingContext::reports`], file operations in
/// [`RecordingContext::fs_requests`] (never performed: the test answers
/// with an `FsConf` of its choosing). The test sets the time by assigning
/// [`RecordingContext::now_ms`].
pub struct RecordingContext {
    /// What `now_ms()` answers; tests move it forward by hand.
    pub now_ms: u64,
    /// Every signal sent since the last [`RecordingContext::take_trace`].
    pub sent: Vec<Sent>,
    /// Every report since the last [`RecordingContext::take_reports`].
    pub reports: Vec<Report>,
    /// Every file operation since the last
    /// [`RecordingContext::take_fs_requests`], in request order.
    pub fs_requests: Vec<FsRequest>,
    /// `None`: `random()` panics, because most blocks must not need
    /// randomness and a test should notice if one starts to.
    rng: Option<XorShift>,
    pool: &'static SectionPool,
}

impl Default for RecordingContext {
    fn default() -> RecordingContext {
        RecordingContext::new()
    }
}

impl RecordingContext {
    /// A context at time 0 whose `random()` panics, with a small pool of its
    /// own. Each call leaks one pool (a few hundred KiB, mapped lazily): a
    /// `'static` pool is what lets sections drop without an `Arc`.
    pub fn new() -> RecordingContext {
        RecordingContext {
            now_ms: 0,
            sent: Vec::new(),
            reports: Vec::new(),
            fs_requests: Vec::new(),
            rng: None,
            pool: SectionPool::leak([64, 16, 8, 4, 2, 2]),
        }
    }

    /// Like [`RecordingContext::new`], but `random()` answers from a
    /// generator seeded with `seed`, for blocks that use randomness.
    pub fn with_random_seed(seed: u64) -> RecordingContext {
        RecordingContext {
            rng: Some(XorShift::new(seed)),
            ..RecordingContext::new()
        }
    }

    /// The signals sent since the last call, rendered as [`line`] and
    /// [`delayed_line`] render them, and forgotten.
    pub fn take_trace(&mut self) -> Vec<String> {
        self.sent
            .drain(..)
            .map(|sent| render(&sent.envelope, sent.delay_ms))
            .collect()
    }

    /// The reports made since the last call, and forgotten.
    pub fn take_reports(&mut self) -> Vec<Report> {
        std::mem::take(&mut self.reports)
    }

    /// The file operations asked for since the last call, and forgotten.
    pub fn take_fs_requests(&mut self) -> Vec<FsRequest> {
        std::mem::take(&mut self.fs_requests)
    }
}

impl Context for RecordingContext {
    fn now_ms(&self) -> u64 {
        self.now_ms
    }

    fn random(&mut self) -> u64 {
        match &mut self.rng {
            Some(rng) => rng.next_u64(),
            None => panic!(
                "this block used randomness; build the context with \
                 RecordingContext::with_random_seed if it should"
            ),
        }
    }

    fn send(&mut self, envelope: Envelope) {
        self.sent.push(Sent {
            envelope,
            delay_ms: None,
        });
    }

    fn send_delayed(&mut self, envelope: Envelope, delay_ms: u64) {
        self.sent.push(Sent {
            envelope,
            delay_ms: Some(delay_ms),
        });
    }

    fn report(&mut self, report: Report) {
        self.reports.push(report);
    }

    fn pool(&self) -> &'static SectionPool {
        self.pool
    }

    fn fs_request(&mut self, from: BlockRef, token: u64, operation: FsOperation) {
        self.fs_requests.push(FsRequest {
            from,
            token,
            operation,
        });
    }
}

/// One trace line: sender, receiver and the signal's `Debug` form, so that
/// a golden trace shows every field.
fn render(envelope: &Envelope, delay_ms: Option<u64>) -> String {
    let mut text = format!("{} -> {} {:?}", envelope.from, envelope.to, envelope.signal);
    if let Some(delay_ms) = delay_ms {
        text.push_str(&format!(" after {delay_ms} ms"));
    }
    text
}

/// The trace line of a signal sent at once.
pub fn line(from: BlockRef, to: BlockRef, signal: impl Into<Signal>) -> String {
    let envelope = Envelope {
        from,
        to,
        signal: signal.into(),
    };
    render(&envelope, None)
}

/// The trace line of a signal sent with `send_delayed`.
pub fn delayed_line(
    from: BlockRef,
    to: BlockRef,
    signal: impl Into<Signal>,
    delay_ms: u64,
) -> String {
    let envelope = Envelope {
        from,
        to,
        signal: signal.into(),
    };
    render(&envelope, Some(delay_ms))
}

/// Hands `signal` from `from` to `block`, as the runtime would.
pub fn deliver(
    block: &mut dyn Block,
    ctx: &mut RecordingContext,
    from: BlockRef,
    signal: impl Into<Signal>,
) {
    let to = block.address();
    block.handle(
        Envelope {
            from,
            to,
            signal: signal.into(),
        },
        ctx,
    );
}

/// A column of a test table.
pub fn column(name: &str, column_type: ColumnType, nullable: bool) -> ColumnDef {
    ColumnDef {
        name: name.into(),
        column_type,
        nullable,
    }
}

/// The partition map dih makes for a one-node cluster (node `node`, node
/// group 0): buckets spread over `table`'s partitions as dih spreads them,
/// partition p on ldm instance `p % ldm_instances` and in redo part
/// `redo_part(p)`. Shared by the block tests that play dih.
pub fn one_node_map(
    table: &TableDef,
    node: NodeId,
    ldm_instances: u16,
    redo_part: impl Fn(u32) -> u32,
) -> PartitionMap {
    PartitionMap {
        table_id: table.id,
        version: 1,
        bucket_partitions: (0..BUCKETS)
            .map(|bucket| default_partition_of_bucket(bucket, table.partitions))
            .collect(),
        partitions: (0..table.partitions)
            .map(|partition| PartitionPlacement {
                node_group: 0,
                replicas: vec![node],
                ldm_instance: (partition % u32::from(ldm_instances)) as u16,
                redo_part: redo_part(partition),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use signal::signals::ContinueB;
    use signal::{BlockKind, NodeId};

    const DIH: BlockRef = BlockRef::new(NodeId(2), BlockKind::Dih, 0);

    #[test]
    fn delayed_sends_keep_their_delay_and_reports_are_taken_once() {
        let mut ctx = RecordingContext::new();
        ctx.now_ms = 7;
        assert_eq!(ctx.now_ms(), 7);
        let envelope = |job| Envelope {
            from: DIH,
            to: DIH,
            signal: ContinueB { job }.into(),
        };
        ctx.send(envelope(1));
        ctx.send_delayed(envelope(2), 100);
        ctx.report(Report::NodeStarted);
        assert_eq!(
            ctx.take_trace(),
            vec![
                line(DIH, DIH, ContinueB { job: 1 }),
                delayed_line(DIH, DIH, ContinueB { job: 2 }, 100),
            ]
        );
        assert!(ctx.take_trace().is_empty());
        assert_eq!(ctx.take_reports(), vec![Report::NodeStarted]);
        assert!(ctx.take_reports().is_empty());
    }

    #[test]
    fn file_operations_are_recorded_in_order_and_taken_once() {
        use signal::fs::{FileName, OpenMode};
        let mut ctx = RecordingContext::new();
        let file = FileName::Redo { part: 0, file: 1 };
        let data = ctx.pool().copy_from(b"redo").expect("room");
        ctx.fs_request(
            DIH,
            7,
            FsOperation::Open {
                file,
                mode: OpenMode::Create,
            },
        );
        ctx.fs_request(
            DIH,
            8,
            FsOperation::Write {
                file,
                offset: 512,
                data,
            },
        );
        let requests = ctx.take_fs_requests();
        assert_eq!(requests.len(), 2);
        assert_eq!((requests[0].from, requests[0].token), (DIH, 7));
        match &requests[1].operation {
            FsOperation::Write {
                file: written,
                offset: 512,
                data,
            } => {
                assert_eq!(*written, file);
                assert_eq!(data.as_slice(), b"redo");
            }
            other => panic!("recorded {other:?}"),
        }
        assert!(ctx.take_fs_requests().is_empty());
        assert!(
            ctx.take_trace().is_empty(),
            "file requests are not signals sent"
        );
    }

    /// A context that does not override `fs_request` refuses clearly.
    #[test]
    #[should_panic(expected = "has no file service")]
    fn the_default_fs_request_panics() {
        struct Bare(RecordingContext);
        impl Context for Bare {
            fn now_ms(&self) -> u64 {
                0
            }
            fn random(&mut self) -> u64 {
                0
            }
            fn send(&mut self, _: Envelope) {}
            fn send_delayed(&mut self, _: Envelope, _: u64) {}
            fn report(&mut self, _: Report) {}
            fn pool(&self) -> &'static SectionPool {
                self.0.pool()
            }
        }
        let mut bare = Bare(RecordingContext::new());
        bare.fs_request(
            DIH,
            1,
            FsOperation::Sync {
                file: signal::fs::FileName::System { copy: 0 },
            },
        );
    }

    #[test]
    fn randomness_is_seeded_when_asked_for() {
        let mut a = RecordingContext::with_random_seed(3);
        let mut b = RecordingContext::with_random_seed(3);
        assert_eq!(a.random(), b.random());
    }

    #[test]
    #[should_panic(expected = "used randomness")]
    fn randomness_panics_by_default() {
        RecordingContext::new().random();
    }
}
