//! What a statement's expressions ask of their session: its values,
//! KILL QUERY, the rows read ahead, the time zone, the
//! information_schema views as the account may see them, and where
//! their warnings go.

use super::Session;
use crate::diagnostics::Level;
use crate::error::{SqlError, SqlResult};
use crate::expr::{Environment, SessionValue};
use crate::value::Value;
use std::sync::atomic::Ordering;

/// An environment answering session values.
pub(super) struct SessionView<'a> {
    pub(super) session: &'a Session,
}

impl Environment for SessionView<'_> {
    fn session_value(&self, value: &SessionValue) -> SqlResult<Value> {
        self.session.session_value(value)
    }

    fn interrupted(&self) -> bool {
        self.session.interrupt.load(Ordering::Relaxed)
    }

    fn table_changed(&self, table: &crate::catalog::SqlTable) {
        self.session
            .engine
            .catalog
            .invalidate(&table.database, &table.name);
    }

    fn set_last_insert_id(&self, id: u64) {
        self.session.insert_id_set.set(Some(id));
    }

    fn read_ahead(
        &self,
        table: &client::Table,
        key: &[client::Value],
    ) -> Option<Option<Vec<Value>>> {
        self.session
            .read_ahead
            .iter()
            .find(|read| std::ptr::eq(&*read.table, table) && read.key == key)
            .map(|read| read.row.clone())
    }

    fn zone_offset(&self) -> i64 {
        self.session.zone_offset()
    }

    fn warn(&self, code: u16, message: &str) -> SqlResult<()> {
        match self.session.storing.get() {
            true => Err(SqlError::new(code, message)),
            false => {
                self.raise(Level::Warning, code, message);
                Ok(())
            }
        }
    }

    fn raise(&self, level: Level, code: u16, message: &str) {
        self.session
            .diagnostics
            .borrow_mut()
            .raise(level, code, message);
    }

    fn set_storing(&self, storing: bool) {
        self.session.storing.set(storing);
    }

    fn warning_count(&self) -> usize {
        self.session.diagnostics.borrow().count()
    }

    fn user_lock(
        &self,
        function: crate::user_locks::UserLockFunction,
        arguments: &[Value],
    ) -> SqlResult<Value> {
        let interrupted = || self.interrupted();
        self.session
            .engine
            .user_locks
            .call(function, self.session.id, arguments, &interrupted)
    }

    fn batches_inserts(&self) -> bool {
        self.session.batch_inserts
    }

    fn view_rows(
        &self,
        view: crate::information_schema::View,
        needed: Option<&[usize]>,
    ) -> SqlResult<Vec<Vec<Value>>> {
        let source = crate::information_schema::Source {
            catalog: &self.session.engine.catalog,
            grants: &self.session.grants,
            needed,
        };
        crate::information_schema::rows(view, &source)
    }
}

/// A RAND() generator seeded from the process's randomness (std's
/// per-hasher random keys).
pub(super) fn entropy_random() -> crate::functions::math::MySqlRandom {
    use std::hash::{BuildHasher, Hasher};
    let seed = |salt: u64| {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(salt);
        hasher.finish()
    };
    crate::functions::math::MySqlRandom::from_seeds(seed(1), seed(2))
}
