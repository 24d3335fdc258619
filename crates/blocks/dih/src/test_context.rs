//! A recording [`Context`] for golden-trace tests: it keeps every signal a
//! block sends (with its delay) and every report, lets a test set the time,
//! and renders envelopes as one-line strings so a test can compare the exact
//! sequence a block produced with the one the protocol prescribes.

use kernel::{Context, Report};
use signal::{BlockRef, Envelope, SectionPool, Signal};

/// One signal a block sent.
pub(crate) struct Sent {
    pub(crate) envelope: Envelope,
    /// `Some` for `send_delayed`.
    pub(crate) delay_ms: Option<u64>,
}

/// Records what a block does to the world.
pub(crate) struct RecordingContext {
    pub(crate) now_ms: u64,
    pub(crate) sent: Vec<Sent>,
    pub(crate) reports: Vec<Report>,
    pool: &'static SectionPool,
}

impl RecordingContext {
    pub(crate) fn new() -> RecordingContext {
        RecordingContext {
            now_ms: 0,
            sent: Vec::new(),
            reports: Vec::new(),
            pool: SectionPool::leak([64, 16, 8, 4, 2, 2]),
        }
    }

    /// The signals sent since the last call, rendered by [`line`].
    pub(crate) fn take_trace(&mut self) -> Vec<String> {
        self.sent
            .drain(..)
            .map(|sent| render(&sent.envelope, sent.delay_ms))
            .collect()
    }

    /// The reports made since the last call.
    pub(crate) fn take_reports(&mut self) -> Vec<Report> {
        std::mem::take(&mut self.reports)
    }
}

impl Context for RecordingContext {
    fn now_ms(&self) -> u64 {
        self.now_ms
    }

    fn random(&mut self) -> u64 {
        panic!("this block must not use randomness");
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
}

fn render(envelope: &Envelope, delay_ms: Option<u64>) -> String {
    let mut text = format!("{} -> {} {:?}", envelope.from, envelope.to, envelope.signal);
    if let Some(delay_ms) = delay_ms {
        text.push_str(&format!(" after {delay_ms} ms"));
    }
    text
}

/// The trace line of a signal sent at once.
pub(crate) fn line(from: BlockRef, to: BlockRef, signal: impl Into<Signal>) -> String {
    let envelope = Envelope {
        from,
        to,
        signal: signal.into(),
    };
    render(&envelope, None)
}

/// The trace line of a signal sent with `send_delayed`.
pub(crate) fn delayed_line(
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

/// Hands `signal` from `from` to `block`.
pub(crate) fn deliver(
    block: &mut dyn kernel::Block,
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
