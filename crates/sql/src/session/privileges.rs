//! What a session's account may do: its grants, read again from the
//! cluster when a second old, and the checks a statement passes before it
//! runs (docs/design/0031-users-and-grants.md).

use super::{Session, GRANTS_FRESH};
use crate::accounts::Privileges;
use crate::error::{codes, SqlError, SqlResult};
use crate::plan::Plan;
use std::sync::Arc;
use std::time::Instant;

impl Session {
    /// The account's grants, read again from the cluster when a second
    /// old: a GRANT or REVOKE on any SQL node reaches open sessions
    /// within a second (docs/design/0031-users-and-grants.md).
    pub(super) fn refresh_grants(&mut self) -> SqlResult<()> {
        if self.account.is_root() || self.grants_read.elapsed() < GRANTS_FRESH {
            return Ok(());
        }
        self.grants = self.engine.accounts.grants(&self.account)?;
        self.grants_read = Instant::now();
        Ok(())
    }

    pub(super) fn database_denied(&self, database: &str) -> SqlError {
        SqlError::new(
            codes::ACCESS_DENIED_FOR_DB,
            format!(
                "Access denied for user {} to database '{database}'",
                self.account.quoted()
            ),
        )
    }

    /// Error 1142 unless the account holds `needed` at `database`.`table`
    /// (`command` names the statement in the message).
    pub(super) fn require(
        &mut self,
        command: &str,
        database: &str,
        table: &str,
        needed: Privileges,
    ) -> SqlResult<()> {
        if crate::information_schema::is_it(database) {
            // Everyone reads it (each sees what it may); no one changes it.
            return match needed == Privileges::SELECT {
                true => Ok(()),
                false => crate::catalog::refuse_information_schema(database),
            };
        }
        self.refresh_grants()?;
        if self.grants.allows(database, table, needed) {
            return Ok(());
        }
        if table == "*" {
            return Err(self.database_denied(database));
        }
        Err(SqlError::new(
            codes::TABLE_ACCESS_DENIED,
            format!(
                "{command} command denied to user {} for table '{table}'",
                self.account.quoted()
            ),
        ))
    }

    /// Checks a data statement's privileges on every table it reads or
    /// writes.
    pub(super) fn authorize(&mut self, plan: &Plan) -> SqlResult<()> {
        let written = match plan {
            Plan::Select(_) => None,
            Plan::Insert(insert) => Some(&insert.table),
            Plan::Update(write) | Plan::Delete(write) => Some(&write.table),
        };
        if let Some(table) = written {
            crate::catalog::refuse_information_schema(&table.database)?;
        }
        if self.account.is_root() {
            return Ok(());
        }
        let mut checks: Vec<Check> = Vec::new();
        match plan {
            Plan::Select(select) => reads_of(select, &mut checks),
            Plan::Insert(insert) => {
                let needed = match insert.conflict {
                    crate::plan::Conflict::Replace => Privileges::INSERT.union(Privileges::DELETE),
                    crate::plan::Conflict::Update(_) => {
                        Privileges::INSERT.union(Privileges::UPDATE)
                    }
                    _ => Privileges::INSERT,
                };
                checks.push(("INSERT", Arc::clone(&insert.table), needed));
                if let Some(select) = &insert.select {
                    reads_of(select, &mut checks);
                }
            }
            Plan::Update(write) | Plan::Delete(write) => {
                let (command, needed) = match plan {
                    Plan::Update(_) => ("UPDATE", Privileges::UPDATE),
                    _ => ("DELETE", Privileges::DELETE),
                };
                checks.push((command, Arc::clone(&write.table), needed));
                for subquery in &write.subqueries {
                    reads_of(&subquery.plan, &mut checks);
                }
                // A multi-table write reads every table it joins.
                if let Some(join) = &write.joined {
                    reads_of(join, &mut checks);
                }
            }
        }
        for (command, table, needed) in checks {
            self.require(command, &table.database, &table.name, needed)?;
        }
        Ok(())
    }

    /// Error 1142 unless the account holds some privilege on the table
    /// (what SHOW CREATE TABLE and DESCRIBE need).
    pub(super) fn require_any(&mut self, database: &str, table: &str) -> SqlResult<()> {
        self.refresh_grants()?;
        if !self
            .grants
            .at(database, table)
            .without(Privileges::GRANT_OPTION)
            .is_empty()
        {
            return Ok(());
        }
        Err(SqlError::new(
            codes::TABLE_ACCESS_DENIED,
            format!(
                "SELECT command denied to user {} for table '{table}'",
                self.account.quoted()
            ),
        ))
    }
}

/// A privilege a statement needs: its command's name, the table, what.
type Check = (&'static str, Arc<crate::catalog::SqlTable>, Privileges);

/// SELECT on every table `select` reads, its subqueries' at any depth
/// included.
fn reads_of(select: &crate::plan::SelectPlan, checks: &mut Vec<Check>) {
    // A derived table's tables are its query's, among the subqueries; a
    // view is read with the reader's privileges on it and on its tables
    // (SQL SECURITY INVOKER).
    for table in select
        .table
        .iter()
        .chain(select.joins.iter().map(|j| &j.table))
        .filter(|table| table.derived.is_none() || table.is_view())
    {
        checks.push(("SELECT", Arc::clone(table), Privileges::SELECT));
    }
    for subquery in &select.subqueries {
        reads_of(&subquery.plan, checks);
    }
    for part in select.union.iter().flat_map(|union| union.all_parts()) {
        reads_of(part, checks);
    }
    for step in select.recursive.iter().flat_map(|r| &r.steps) {
        reads_of(step, checks);
    }
}
