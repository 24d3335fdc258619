//! tpcc's terminal: one connection running the mix until a deadline, with
//! keying and think times off; each transaction retried with the same
//! input after a deadlock or lock wait timeout, the connection made again
//! when it breaks, and outcomes and latencies counted per transaction
//! kind (`MixStats`).

use super::random::Random;
use super::transactions::{Deck, Failure, Home, Input, Outcome, TransactionKind};
use crate::mysql::{ConnectOptions, Connection, MysqlError};
use hdrhistogram::Histogram;
use std::time::{Duration, Instant};

/// Attempts of one transaction before it counts as an error.
const MAX_ATTEMPTS: u32 = 10;
/// Distinct error messages kept for the report.
const ERROR_MESSAGES: usize = 5;
/// The pause after a failure on a broken connection, so a terminal whose
/// server is gone does not spin.
const RECONNECT_PAUSE: Duration = Duration::from_millis(100);

/// One transaction kind's figures.
pub(super) struct KindStats {
    /// Transactions committed.
    pub(super) committed: u64,
    /// New-Orders rolled back on purpose (clause 2.4.2.3): completed, but
    /// not in tpmC.
    pub(super) rolled_back: u64,
    /// Attempts that failed with a deadlock, lock wait timeout or other
    /// retryable rollback and were run again.
    pub(super) retried: u64,
    /// Transactions given up: any other error, or `MAX_ATTEMPTS`
    /// retryable ones.
    pub(super) errors: u64,
    /// Latency of committed and rolled back transactions, microseconds,
    /// from the first attempt's start (retries included).
    pub(super) latency_us: Histogram<u64>,
}

impl Default for KindStats {
    fn default() -> KindStats {
        KindStats {
            committed: 0,
            rolled_back: 0,
            retried: 0,
            errors: 0,
            // 1 us .. 60 s at 3 significant digits; longer ones saturate.
            latency_us: Histogram::new_with_bounds(1, 60_000_000, 3)
                .expect("constant histogram bounds are valid"),
        }
    }
}

impl KindStats {
    fn merge(&mut self, other: &KindStats) {
        self.committed += other.committed;
        self.rolled_back += other.rolled_back;
        self.retried += other.retried;
        self.errors += other.errors;
        // Both histograms share bounds, so adding cannot fail.
        let _ = self.latency_us.add(&other.latency_us);
    }
}

/// The figures of one terminal, or of all of them merged.
#[derive(Default)]
pub(super) struct MixStats {
    /// Per kind, in `TransactionKind::ALL` order.
    kinds: [KindStats; 5],
    /// The first few distinct error messages, each naming its transaction.
    pub(super) error_messages: Vec<String>,
}

impl MixStats {
    /// `kind`'s figures.
    pub(super) fn kind(&self, kind: TransactionKind) -> &KindStats {
        &self.kinds[kind.index()]
    }

    fn kind_mut(&mut self, kind: TransactionKind) -> &mut KindStats {
        &mut self.kinds[kind.index()]
    }

    /// Adds `other`'s figures.
    pub(super) fn merge(&mut self, other: &MixStats) {
        for (mine, theirs) in self.kinds.iter_mut().zip(&other.kinds) {
            mine.merge(theirs);
        }
        for message in &other.error_messages {
            self.keep_message(message);
        }
    }

    /// Counts an error of `kind` and keeps its message if it is new and
    /// there is room.
    fn error(&mut self, kind: TransactionKind, message: &str) {
        self.kind_mut(kind).errors += 1;
        self.keep_message(&format!("{}: {message}", kind.name()));
    }

    fn keep_message(&mut self, message: &str) {
        if self.error_messages.len() < ERROR_MESSAGES
            && !self.error_messages.iter().any(|kept| kept == message)
        {
            self.error_messages.push(message.to_string());
        }
    }
}

/// One connection and the inputs it draws.
pub(super) struct Terminal {
    /// `None` after the connection broke, until it is made again.
    connection: Option<Connection>,
    connect_options: ConnectOptions,
    random: Random,
    deck: Deck,
    home: Home,
    stats: MixStats,
}

impl Terminal {
    /// A terminal working at `home` on `connection`, drawing from `seed`'s
    /// stream.
    pub(super) fn new(
        connection: Connection,
        connect_options: ConnectOptions,
        home: Home,
        seed: u64,
    ) -> Terminal {
        let mut random = Random::new(seed);
        let deck = Deck::new(&mut random);
        Terminal {
            connection: Some(connection),
            connect_options,
            random,
            deck,
            home,
            stats: MixStats::default(),
        }
    }

    /// Runs transactions back to back until `deadline`; the figures.
    pub(super) fn run_until(mut self, deadline: Instant) -> MixStats {
        while Instant::now() < deadline {
            let kind = self.deck.draw(&mut self.random);
            let input = self.home.input(kind, &mut self.random);
            self.execute(&input);
        }
        self.stats
    }

    /// Runs `input`'s transaction to an outcome, retrying what the server
    /// asks to retry, and counts it.
    fn execute(&mut self, input: &Input) {
        let kind = input.kind();
        let started = Instant::now();
        let mut attempt = 1;
        let failure = loop {
            let result = match self.connected() {
                Ok(connection) => input.run(connection),
                Err(error) => Err(Failure::Sql(error)),
            };
            let failure = match result {
                Ok(outcome) => {
                    self.finished(kind, outcome, started.elapsed());
                    return;
                }
                Err(failure) => failure,
            };
            self.roll_back(&failure);
            if !failure.is_retryable() || attempt == MAX_ATTEMPTS {
                break failure;
            }
            self.stats.kind_mut(kind).retried += 1;
            attempt += 1;
            // A short random pause, so the transactions that collided do
            // not collide again at once.
            let pause = self.random.between(1, 10);
            std::thread::sleep(Duration::from_millis(u64::from(pause)));
        };
        let message = if failure.is_retryable() {
            format!("gave up after {MAX_ATTEMPTS} attempts: {failure}")
        } else {
            failure.to_string()
        };
        self.stats.error(kind, &message);
        if self.connection.is_none() {
            std::thread::sleep(RECONNECT_PAUSE);
        }
    }

    /// Counts a transaction that ended as `outcome` after `latency`.
    fn finished(&mut self, kind: TransactionKind, outcome: Outcome, latency: Duration) {
        let stats = self.stats.kind_mut(kind);
        match outcome {
            Outcome::Committed => stats.committed += 1,
            Outcome::RolledBack => stats.rolled_back += 1,
        }
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        stats.latency_us.saturating_record(micros);
    }

    /// The connection, made again if it broke.
    fn connected(&mut self) -> Result<&mut Connection, MysqlError> {
        if self.connection.is_none() {
            self.connection = Some(Connection::connect(&self.connect_options)?);
        }
        self.connection.as_mut().ok_or_else(|| MysqlError {
            code: 0,
            message: "no connection".to_string(),
        })
    }

    /// Ends the failed attempt's transaction (its error is ignored: the
    /// server may have ended it already); forgets a broken connection.
    fn roll_back(&mut self, failure: &Failure) {
        let broken = failure.connection_lost()
            || match self.connection.as_mut() {
                Some(connection) => connection
                    .query("ROLLBACK")
                    .err()
                    .is_some_and(|error| error.code == 0),
                None => true,
            };
        if broken {
            self.connection = None;
        }
    }
}
