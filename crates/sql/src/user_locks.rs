//! User-level locks: GET_LOCK, RELEASE_LOCK, RELEASE_ALL_LOCKS,
//! IS_FREE_LOCK and IS_USED_LOCK (docs/design/0043-user-locks.md).
//!
//! A lock is a row of the system table `tessera$user_locks` held
//! exclusively by a cluster transaction of its own, one per lock a
//! session holds, kept open until the lock is released or the session
//! ends. So every SQL node sees the same locks, and a SQL node that dies
//! frees its sessions' locks with its transactions. Waiting is polling
//! with NOWAIT reads: a lock wait in the data nodes would end at their
//! lock-wait timeout, not the caller's, and would not hear KILL QUERY.
//! A thread of the SQL node touches every held lock's transaction once
//! a second, so that an idle holder's transaction never reaches the data
//! nodes' inactivity timeout.

use crate::error::{codes, SqlError, SqlResult};
use crate::value::{self, Value};
use client::{Cluster, ColumnDef, ColumnType, Commit, LockMode, LockWait, TableDef, Transaction};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// The system table of user-level locks.
pub const USER_LOCKS: &str = "tessera$user_locks";

/// The longest lock name, in characters (MySQL's).
const MAX_NAME_CHARS: usize = 64;

/// A lock's row (`kind` 0), held locked by its holder's transaction.
const LOCK_ROW: u64 = 0;
/// A lock's holder row (`kind` 1): the connection id of its last holder,
/// written once the lock is taken, for IS_USED_LOCK on other SQL nodes.
const HOLDER_ROW: u64 = 1;

/// How often the held locks' transactions are touched; well inside the
/// data nodes' `inactive_transaction_timeout_ms` (60 s by default).
const KEEPALIVE_EVERY: Duration = Duration::from_secs(1);

/// How long GET_LOCK tries at least, whatever its timeout.
const SHORTEST_WAIT: Duration = Duration::from_millis(10);

/// Longest pause between two tries of a lock another session holds.
const LONGEST_PAUSE: Duration = Duration::from_millis(50);

/// The functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UserLockFunction {
    /// GET_LOCK(name, timeout): 1 once taken, 0 when the timeout passed.
    Get,
    /// RELEASE_LOCK(name): 1 released, 0 held by another, NULL not held.
    Release,
    /// RELEASE_ALL_LOCKS(): how many holds the session released.
    ReleaseAll,
    /// IS_FREE_LOCK(name): 1 when nobody holds it.
    IsFree,
    /// IS_USED_LOCK(name): the holder's connection id, or NULL.
    IsUsed,
}

impl UserLockFunction {
    /// The function SQL names `name` (upper case) with `arguments`
    /// arguments: `None` when it is none of these, `Some(Err(()))` when
    /// it is one with the wrong number of arguments.
    pub fn named(name: &str, arguments: usize) -> Option<Result<UserLockFunction, ()>> {
        let (function, wanted) = match name {
            "GET_LOCK" => (UserLockFunction::Get, 2),
            "RELEASE_LOCK" => (UserLockFunction::Release, 1),
            "RELEASE_ALL_LOCKS" => (UserLockFunction::ReleaseAll, 0),
            "IS_FREE_LOCK" => (UserLockFunction::IsFree, 1),
            "IS_USED_LOCK" => (UserLockFunction::IsUsed, 1),
            _ => return None,
        };
        Some(if arguments == wanted {
            Ok(function)
        } else {
            Err(())
        })
    }
}

/// The definition of `tessera$user_locks`.
pub fn system_table() -> TableDef {
    TableDef {
        name: USER_LOCKS.into(),
        columns: vec![
            // 64 characters of utf8mb4.
            ColumnDef::new(
                "name",
                ColumnType::VarChar(4 * MAX_NAME_CHARS as u16),
                false,
            ),
            ColumnDef::new("kind", ColumnType::Int { unsigned: true }, false),
            ColumnDef::new("holder", ColumnType::BigInt { unsigned: true }, false),
        ],
        primary_key: vec![0, 1],
        ..crate::catalog::empty_def()
    }
}

/// One lock a session of this SQL node holds.
struct Held {
    /// The session's connection id.
    owner: u32,
    /// GET_LOCKs not yet matched by a RELEASE_LOCK.
    count: u64,
    /// The transaction holding the lock's row.
    transaction: Arc<Mutex<Transaction<'static>>>,
}

/// The user-level locks of this SQL node's sessions.
pub struct UserLocks {
    cluster: &'static Cluster,
    /// What is held, by lock name (lower case).
    held: Mutex<HashMap<String, Held>>,
    /// The lock each waiting session waits for: a wait that would close
    /// a cycle of this SQL node's sessions is a deadlock.
    waits: Mutex<HashMap<u32, String>>,
    /// The keepalive thread was started.
    keeping: std::sync::Once,
}

impl UserLocks {
    /// The locks of a SQL node on `cluster`.
    pub fn new(cluster: &'static Cluster) -> Arc<UserLocks> {
        Arc::new(UserLocks {
            cluster,
            held: Mutex::new(HashMap::new()),
            waits: Mutex::new(HashMap::new()),
            keeping: std::sync::Once::new(),
        })
    }

    /// Runs `function` for session `session` with `arguments`;
    /// `interrupted` says whether KILL QUERY stopped the statement.
    pub fn call(
        self: &Arc<Self>,
        function: UserLockFunction,
        session: u32,
        arguments: &[Value],
        interrupted: &dyn Fn() -> bool,
    ) -> SqlResult<Value> {
        if function == UserLockFunction::ReleaseAll {
            return Ok(Value::Int(self.release_all(session) as i64));
        }
        let name = lock_name(arguments.first().unwrap_or(&Value::Null))?;
        match function {
            UserLockFunction::Get => {
                let timeout = arguments.get(1).unwrap_or(&Value::Null);
                self.get(session, &name, wait_of(timeout), interrupted)
            }
            UserLockFunction::Release => self.release(session, &name),
            UserLockFunction::IsFree => Ok(match self.holder(&name)? {
                Some(_) => Value::Int(0),
                None => Value::Int(1),
            }),
            UserLockFunction::IsUsed => Ok(match self.holder(&name)? {
                Some(Some(id)) => Value::UInt(id),
                Some(None) | None => Value::Null,
            }),
            UserLockFunction::ReleaseAll => unreachable!("answered above"),
        }
    }

    /// GET_LOCK: takes `name` for `session`, waiting up to `wait` (`None`:
    /// as long as it takes).
    fn get(
        self: &Arc<Self>,
        session: u32,
        name: &str,
        wait: Option<Duration>,
        interrupted: &dyn Fn() -> bool,
    ) -> SqlResult<Value> {
        if let Some(held) = self.held().get_mut(name) {
            if held.owner == session {
                held.count += 1;
                return Ok(Value::Int(1));
            }
        }
        // An IS_FREE_LOCK or IS_USED_LOCK elsewhere holds the row shared
        // for a round trip; a GET_LOCK that met only that would answer 0
        // for a free lock, so even a timeout of 0 tries for a moment.
        let deadline = wait.map(|wait| Instant::now() + wait.max(SHORTEST_WAIT));
        let mut pause = Duration::from_millis(1);
        let waiting = Waiting::new(self, session, name);
        loop {
            if self.closes_a_cycle(session, name) {
                return Err(SqlError::new(
                    codes::USER_LOCK_DEADLOCK,
                    "Deadlock found when trying to get user-level lock; try rolling back \
                     transaction/releasing locks and restarting lock acquisition.",
                ));
            }
            // A lock another session here holds needs no round trip to
            // be found taken.
            if !self.held().contains_key(name) {
                if let Some(transaction) = self.try_take(name)? {
                    let mut held = self.held();
                    // Taken in the cluster while a session here is noted
                    // as its holder: that holder's transaction was ended
                    // by the cluster (a data node failure) and the
                    // keepalive thread has not seen it yet.
                    if let Some(lost) = held.remove(name) {
                        eprintln!(
                            "sql node: user-level lock '{name}' of connection {} lost: \
                             its transaction ended",
                            lost.owner
                        );
                    }
                    held.insert(
                        name.to_string(),
                        Held {
                            owner: session,
                            count: 1,
                            transaction: Arc::new(Mutex::new(transaction)),
                        },
                    );
                    drop(held);
                    drop(waiting);
                    self.note_holder(name, session);
                    self.keep_alive();
                    return Ok(Value::Int(1));
                }
            }
            if interrupted() {
                return Err(SqlError::new(
                    codes::QUERY_INTERRUPTED,
                    "Query execution was interrupted",
                ));
            }
            let now = Instant::now();
            let left = match deadline {
                Some(deadline) if now >= deadline => return Ok(Value::Int(0)),
                Some(deadline) => deadline - now,
                None => LONGEST_PAUSE,
            };
            client::cooperative::sleep(pause.min(left));
            pause = (pause * 2).min(LONGEST_PAUSE);
        }
    }

    /// Tries once to hold `name`'s row in a new transaction: the
    /// transaction when taken, `None` when another holds it.
    fn try_take(&self, name: &str) -> SqlResult<Option<Transaction<'static>>> {
        let table = self.table()?;
        let key = key_of(name, LOCK_ROW);
        // The first GET_LOCK of a name makes its row; a second try finds it.
        for _ in 0..2 {
            let mut transaction = self
                .cluster
                .transaction_with_hint(&table, &key)
                .map_err(|error| SqlError::from_client(&error, USER_LOCKS))?;
            let read = transaction
                .read_locking(&table, &key, LockMode::Exclusive, LockWait::NoWait)
                .map_err(|error| SqlError::from_client(&error, USER_LOCKS))?;
            match transaction.execute(Commit::No) {
                Ok(_) if transaction.get(read).is_some() => return Ok(Some(transaction)),
                Ok(_) => {
                    let _ = transaction.rollback();
                    self.make_row(name)?;
                }
                Err(error) if error.code() == Some(client::ErrorCode::LockNotAvailable) => {
                    return Ok(None)
                }
                Err(error) => return Err(SqlError::from_client(&error, USER_LOCKS)),
            }
        }
        Err(SqlError::new(
            codes::UNKNOWN_ERROR,
            format!("user-level lock '{name}': its row was made but is not there"),
        ))
    }

    /// Writes `name`'s lock row, unless another session just did.
    fn make_row(&self, name: &str) -> SqlResult<()> {
        let table = self.table()?;
        let mut transaction = self.cluster.transaction();
        let written = transaction
            .insert(&table, &row_of(name, LOCK_ROW, 0))
            .and_then(|_| transaction.execute(Commit::Yes));
        match written {
            Ok(_) => Ok(()),
            Err(error) if error.code() == Some(client::ErrorCode::DuplicateKey) => Ok(()),
            Err(error) => Err(SqlError::from_client(&error, USER_LOCKS)),
        }
    }

    /// Records `session` as `name`'s holder for IS_USED_LOCK elsewhere
    /// (best effort: the lock is held whether or not this lands).
    fn note_holder(&self, name: &str, session: u32) {
        let Ok(table) = self.table() else {
            return;
        };
        let mut transaction = self.cluster.transaction();
        let _ = transaction
            .write(&table, &row_of(name, HOLDER_ROW, session as u64))
            .and_then(|_| transaction.execute(Commit::Yes));
    }

    /// RELEASE_LOCK.
    fn release(&self, session: u32, name: &str) -> SqlResult<Value> {
        let released = {
            let mut held = self.held();
            match held.get_mut(name) {
                Some(lock) if lock.owner == session => {
                    lock.count -= 1;
                    if lock.count > 0 {
                        return Ok(Value::Int(1));
                    }
                    held.remove(name)
                }
                Some(_) => return Ok(Value::Int(0)),
                None => None,
            }
        };
        if let Some(lock) = released {
            let _ = client::cooperative::lock(&lock.transaction).rollback();
            return Ok(Value::Int(1));
        }
        Ok(match self.holder(name)? {
            Some(_) => Value::Int(0),
            None => Value::Null,
        })
    }

    /// RELEASE_ALL_LOCKS, and the end of a session: releases every lock
    /// `session` holds; how many GET_LOCKs they answered.
    pub fn release_all(&self, session: u32) -> u64 {
        let released: Vec<Held> = {
            let mut held = self.held();
            let names: Vec<String> = held
                .iter()
                .filter(|(_, lock)| lock.owner == session)
                .map(|(name, _)| name.clone())
                .collect();
            names.iter().filter_map(|name| held.remove(name)).collect()
        };
        let mut count = 0;
        for lock in released {
            count += lock.count;
            let _ = client::cooperative::lock(&lock.transaction).rollback();
        }
        count
    }

    /// Who holds `name`: `None` nobody; `Some(id)` a session, with its
    /// connection id when known.
    fn holder(&self, name: &str) -> SqlResult<Option<Option<u64>>> {
        if let Some(lock) = self.held().get(name) {
            return Ok(Some(Some(lock.owner as u64)));
        }
        let table = self.table()?;
        let key = key_of(name, LOCK_ROW);
        let mut probe = self
            .cluster
            .transaction_with_hint(&table, &key)
            .map_err(|error| SqlError::from_client(&error, USER_LOCKS))?;
        probe
            .read_locking(&table, &key, LockMode::Shared, LockWait::NoWait)
            .map_err(|error| SqlError::from_client(&error, USER_LOCKS))?;
        match probe.execute(Commit::No) {
            Ok(_) => {
                let _ = probe.rollback();
                Ok(None)
            }
            Err(error) if error.code() == Some(client::ErrorCode::LockNotAvailable) => {
                Ok(Some(self.noted_holder(name)?))
            }
            Err(error) => Err(SqlError::from_client(&error, USER_LOCKS)),
        }
    }

    /// The holder row of `name`: its last holder's connection id.
    fn noted_holder(&self, name: &str) -> SqlResult<Option<u64>> {
        let table = self.table()?;
        let mut transaction = self.cluster.transaction();
        let read = transaction
            .read_if_exists(&table, &key_of(name, HOLDER_ROW), LockMode::CommittedRead)
            .map_err(|error| SqlError::from_client(&error, USER_LOCKS))?;
        transaction
            .execute(Commit::Yes)
            .map_err(|error| SqlError::from_client(&error, USER_LOCKS))?;
        Ok(transaction.get(read).and_then(|row| row.get_u64("holder")))
    }

    /// Whether `session` waiting for `name` closes a cycle of sessions
    /// here, each waiting for a lock the next holds.
    fn closes_a_cycle(&self, session: u32, name: &str) -> bool {
        let held = self.held();
        let waits = self.waits.lock().expect("user lock waits");
        let mut wanted = name;
        // Each step visits another session; more steps than sessions wait
        // means a cycle that does not pass through this one.
        for _ in 0..=waits.len() {
            let Some(holder) = held.get(wanted).map(|lock| lock.owner) else {
                return false;
            };
            if holder == session {
                return true;
            }
            match waits.get(&holder) {
                Some(next) => wanted = next,
                None => return false,
            }
        }
        false
    }

    /// Starts the thread that keeps the held locks' transactions alive,
    /// once.
    fn keep_alive(self: &Arc<Self>) {
        self.keeping.call_once(|| {
            let locks = Arc::downgrade(self);
            let started = std::thread::Builder::new()
                .name("sql-user-locks".into())
                .spawn(move || keep_alive(locks));
            if let Err(error) = started {
                eprintln!("sql node: no thread to keep user-level locks alive: {error}");
            }
        });
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<String, Held>> {
        self.held.lock().expect("user locks")
    }

    fn table(&self) -> SqlResult<Arc<client::Table>> {
        self.cluster
            .table(USER_LOCKS)
            .map_err(|error| SqlError::from_client(&error, USER_LOCKS))
    }
}

/// A session's wait for a lock, noted for deadlock detection while it
/// lasts.
struct Waiting<'a> {
    locks: &'a UserLocks,
    session: u32,
}

impl<'a> Waiting<'a> {
    fn new(locks: &'a UserLocks, session: u32, name: &str) -> Waiting<'a> {
        locks
            .waits
            .lock()
            .expect("user lock waits")
            .insert(session, name.to_string());
        Waiting { locks, session }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.locks
            .waits
            .lock()
            .expect("user lock waits")
            .remove(&self.session);
    }
}

/// The keepalive thread's body: until the SQL node's locks are gone,
/// reads every held lock's row again in its transaction each second. A
/// transaction the cluster ended (a data node failure it did not survive)
/// is a lock lost: said in the log, and forgotten, so its holder's
/// RELEASE_LOCK answers as for a lock it does not hold.
fn keep_alive(locks: Weak<UserLocks>) {
    loop {
        std::thread::sleep(KEEPALIVE_EVERY);
        let Some(locks) = locks.upgrade() else {
            return;
        };
        let Ok(table) = locks.table() else {
            continue;
        };
        let held: Vec<(String, u32, Arc<Mutex<Transaction<'static>>>)> = locks
            .held()
            .iter()
            .map(|(name, lock)| (name.clone(), lock.owner, Arc::clone(&lock.transaction)))
            .collect();
        for (name, owner, transaction) in held {
            let touched = {
                let mut transaction = transaction.lock().unwrap_or_else(|p| p.into_inner());
                let key = key_of(&name, LOCK_ROW);
                transaction
                    .read_locking(&table, &key, LockMode::Exclusive, LockWait::NoWait)
                    .and_then(|_| transaction.execute(Commit::No))
            };
            if let Err(error) = touched {
                let mut held = locks.held();
                let same = held
                    .get(&name)
                    .is_some_and(|lock| Arc::ptr_eq(&lock.transaction, &transaction));
                if same {
                    held.remove(&name);
                    eprintln!(
                        "sql node: user-level lock '{name}' of connection {owner} lost: {error}"
                    );
                }
            }
        }
    }
}

/// A lock name as MySQL takes it: text of 1 to 64 characters, compared
/// without case.
fn lock_name(name: &Value) -> SqlResult<String> {
    let text = match name {
        Value::Null => {
            return Err(SqlError::new(
                codes::USER_LOCK_WRONG_NAME,
                "Incorrect user-level lock name 'NULL'.",
            ))
        }
        other => value::display(other),
    };
    if text.is_empty() {
        return Err(SqlError::new(
            codes::USER_LOCK_WRONG_NAME,
            "Incorrect user-level lock name ''.",
        ));
    }
    if text.chars().count() > MAX_NAME_CHARS {
        return Err(SqlError::new(
            codes::USER_LOCK_OVERLONG_NAME,
            format!(
                "User-level lock name '{text}' should not be longer than {MAX_NAME_CHARS} characters."
            ),
        ));
    }
    Ok(text.to_lowercase())
}

/// GET_LOCK's timeout as a wait: a negative one waits as long as it
/// takes, NULL is 0, fractions of a second count.
fn wait_of(timeout: &Value) -> Option<Duration> {
    let seconds = match timeout {
        Value::Null => 0.0,
        other => value::to_f64(other),
    };
    if seconds < 0.0 {
        return None;
    }
    // Not a number is 0 seconds; past a year is as good as forever, and
    // fits a Duration.
    let seconds = if seconds.is_nan() {
        0.0
    } else {
        seconds.min(365.0 * 86_400.0)
    };
    Some(Duration::from_secs_f64(seconds))
}

fn key_of(name: &str, kind: u64) -> [client::Value; 2] {
    [client::Value::from(name), client::Value::UInt(kind)]
}

fn row_of(name: &str, kind: u64, holder: u64) -> [(&'static str, client::Value); 3] {
    [
        ("name", client::Value::from(name)),
        ("kind", client::Value::UInt(kind)),
        ("holder", client::Value::UInt(holder)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_folded() {
        assert_eq!(lock_name(&Value::from("Migrations")).unwrap(), "migrations");
        assert_eq!(
            lock_name(&Value::Null).unwrap_err().code,
            codes::USER_LOCK_WRONG_NAME
        );
        assert_eq!(
            lock_name(&Value::from("")).unwrap_err().code,
            codes::USER_LOCK_WRONG_NAME
        );
        assert_eq!(
            lock_name(&Value::from("é".repeat(64))).unwrap(),
            "é".repeat(64)
        );
        assert_eq!(
            lock_name(&Value::from("x".repeat(65))).unwrap_err().code,
            codes::USER_LOCK_OVERLONG_NAME
        );
        assert_eq!(lock_name(&Value::Int(7)).unwrap(), "7");
    }

    #[test]
    fn timeouts_become_waits() {
        assert_eq!(wait_of(&Value::Int(0)), Some(Duration::ZERO));
        assert_eq!(wait_of(&Value::Null), Some(Duration::ZERO));
        assert_eq!(wait_of(&Value::Int(-1)), None);
        assert_eq!(
            wait_of(&Value::Double(0.25)),
            Some(Duration::from_millis(250))
        );
        assert!(wait_of(&Value::Int(i64::MAX)).is_some());
        assert_eq!(wait_of(&Value::Double(f64::NAN)), Some(Duration::ZERO));
        assert_eq!(
            wait_of(&Value::Double(f64::INFINITY)).map(|w| w.as_secs()),
            Some(365 * 86_400)
        );
    }

    #[test]
    fn functions_are_named_with_their_arguments() {
        assert_eq!(
            UserLockFunction::named("GET_LOCK", 2),
            Some(Ok(UserLockFunction::Get))
        );
        assert_eq!(UserLockFunction::named("GET_LOCK", 1), Some(Err(())));
        assert_eq!(
            UserLockFunction::named("RELEASE_ALL_LOCKS", 0),
            Some(Ok(UserLockFunction::ReleaseAll))
        );
        assert_eq!(UserLockFunction::named("LOCK", 1), None);
    }
}
