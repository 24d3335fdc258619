//! A statement's subqueries: the environment that answers them while
//! its expressions are evaluated (each run once, or once per distinct
//! enclosing row for a correlated one), in the statement's transaction
//! when it stays open (design 0033, design 0035).

use super::{select, Run, StatementCounts};
use crate::catalog::SqlTable;
use crate::error::{codes, SqlError, SqlResult};
use crate::expr::Environment;
use crate::locked_rows::LockedRows;
use crate::plan::{SelectPlan, SubqueryPlan};
use crate::result::Response;
use crate::value::{self, Value};
use client::{Commit, Transaction};
use foldhash::{HashMap, HashMapExt};
use std::cell::RefCell;
use std::rc::Rc;

/// An environment that answers a statement's subqueries (design 0033):
/// each runs as a query of its own, once when it reads nothing of the
/// enclosing row, else once for each distinct set of the enclosing row's
/// values it reads. In an open transaction they all run in it, so they
/// see its writes as the statement does (design 0035): one that reads
/// nothing of the row ran before the statement (`with_subqueries`), a
/// correlated one runs here. In autocommit they run in a cluster
/// transaction of their own (reads of committed rows). Everything else
/// is asked of the statement's environment.
struct WithSubqueries<'a> {
    inner: &'a dyn Environment,
    subqueries: &'a [SubqueryPlan],
    /// For each slot, the enclosing row's columns it reads.
    reads: Vec<Vec<usize>>,
    cluster: &'static client::Cluster,
    /// The statement's transaction when it stays open after the
    /// statement (None in autocommit).
    open: Option<&'a RefCell<Transaction<'static>>>,
    /// For each slot, its rows by the values it read of the enclosing row.
    results: RefCell<Vec<HashMap<Vec<u8>, SubqueryRows>>>,
}

/// A subquery's rows, shared by the rows of the enclosing query that
/// asked for them.
type SubqueryRows = Rc<Vec<Vec<Value>>>;

impl<'a> WithSubqueries<'a> {
    fn new(
        inner: &'a dyn Environment,
        subqueries: &'a [SubqueryPlan],
        cluster: &'static client::Cluster,
        open: Option<&'a RefCell<Transaction<'static>>>,
    ) -> WithSubqueries<'a> {
        WithSubqueries {
            inner,
            subqueries,
            reads: subqueries
                .iter()
                .map(|s| crate::plan::outer_columns(&s.plan))
                .collect(),
            cluster,
            open,
            results: RefCell::new(vec![HashMap::new(); subqueries.len()]),
        }
    }
}

impl Environment for WithSubqueries<'_> {
    fn session_value(&self, value: &crate::expr::SessionValue) -> SqlResult<Value> {
        self.inner.session_value(value)
    }

    fn interrupted(&self) -> bool {
        self.inner.interrupted()
    }

    fn read_ahead(
        &self,
        table: &client::Table,
        key: &[client::Value],
    ) -> Option<Option<Vec<Value>>> {
        self.inner.read_ahead(table, key)
    }

    fn table_changed(&self, table: &SqlTable) {
        self.inner.table_changed(table)
    }

    fn set_last_insert_id(&self, id: u64) {
        self.inner.set_last_insert_id(id)
    }

    fn warn(&self, code: u16, message: &str) -> SqlResult<()> {
        self.inner.warn(code, message)
    }

    fn set_storing(&self, storing: bool) {
        self.inner.set_storing(storing)
    }

    fn raise(&self, level: crate::diagnostics::Level, code: u16, message: &str) {
        self.inner.raise(level, code, message)
    }

    fn warning_count(&self) -> usize {
        self.inner.warning_count()
    }

    fn zone_offset(&self) -> i64 {
        self.inner.zone_offset()
    }

    fn batches_inserts(&self) -> bool {
        self.inner.batches_inserts()
    }

    fn view_rows(
        &self,
        view: crate::information_schema::View,
        needed: Option<&[usize]>,
    ) -> SqlResult<Vec<Vec<Value>>> {
        self.inner.view_rows(view, needed)
    }

    fn subquery_rows(
        &self,
        slot: usize,
        row: &[Value],
        params: &[Value],
    ) -> SqlResult<Rc<Vec<Vec<Value>>>> {
        let subquery = self.subqueries.get(slot).ok_or_else(|| {
            SqlError::new(
                codes::UNKNOWN_ERROR,
                format!("internal: no subquery {slot}"),
            )
        })?;
        let mut key = Vec::new();
        for column in &self.reads[slot] {
            value::group_key(row.get(*column).unwrap_or(&Value::Null), &mut key);
        }
        if let Some(rows) = self.results.borrow()[slot].get(&key) {
            return Ok(Rc::clone(rows));
        }
        assert!(
            !subquery.plan.working_table,
            "a recursive expression's rows of the step before are given before its SELECT runs"
        );
        let bound;
        let plan = match subquery.correlated {
            true => {
                bound = subquery.plan.bind_outer(row);
                &bound
            }
            false => &*subquery.plan,
        };
        let own;
        let (transaction, commit) = match self.open {
            Some(open) => {
                settle_for_subquery(open)?;
                (open, Commit::No)
            }
            None => {
                own = RefCell::new(self.cluster.transaction());
                (&own, Commit::Yes)
            }
        };
        let mut counts = StatementCounts::default();
        let mut run = Run {
            transaction,
            commit,
            params,
            environment: self,
            counts: &mut counts,
            // Empty: no images to reuse (a subquery reads without a
            // lock), and nothing waits once settled.
            locked: &mut LockedRows::default(),
            // A recursive expression's name is read only where its
            // recursive SELECTs name it, never in a subquery.
            working: None,
        };
        let Response::Rows { rows, .. } = select(plan, &mut run)? else {
            unreachable!("a query answers rows")
        };
        let rows = Rc::new(rows);
        self.results.borrow_mut()[slot].insert(key, Rc::clone(&rows));
        Ok(rows)
    }
}

/// Readies the open transaction for a correlated subquery run in it
/// while the statement evaluates an expression: the writes queued in it
/// (a statement's earlier rows, or writes deferred by earlier
/// statements: `locked_rows`) go to the data nodes first, so the
/// subquery's reads see them and no batch holds two operations on one
/// row. The subquery runs with no images of locked rows, and this keeps
/// the statement's own images true: they go on saying "nothing waits"
/// once the queue is empty. An internal error, not a panic, if the
/// statement holds the transaction borrowed across an evaluation.
fn settle_for_subquery(open: &RefCell<Transaction<'static>>) -> SqlResult<()> {
    let Ok(mut transaction) = open.try_borrow_mut() else {
        return Err(SqlError::new(
            codes::UNKNOWN_ERROR,
            "internal: a subquery ran while its statement held the transaction",
        ));
    };
    if transaction.pending_operations() > 0 {
        transaction
            .execute(Commit::No)
            .map_err(|error| SqlError::from_client(&error, ""))?;
    }
    Ok(())
}

/// Runs a query in the statement's transaction without ending it (for a
/// statement that goes on to use its rows): its rows.
pub(super) fn query_in_transaction(
    plan: &SelectPlan,
    run: &mut Run<'_>,
) -> SqlResult<Vec<Vec<Value>>> {
    let mut query = Run {
        transaction: run.transaction,
        commit: Commit::No,
        params: run.params,
        environment: run.environment,
        counts: run.counts,
        locked: run.locked,
        working: run.working.clone(),
    };
    let Response::Rows { rows, .. } = select(plan, &mut query)? else {
        unreachable!("a query answers rows")
    };
    Ok(rows)
}

/// Runs `body` with `subqueries` answered by the run's environment.
pub(super) fn with_subqueries(
    subqueries: &[SubqueryPlan],
    run: &mut Run<'_>,
    body: impl FnOnce(&mut Run<'_>) -> SqlResult<Response>,
) -> SqlResult<Response> {
    if subqueries.is_empty() {
        return body(run);
    }
    let cluster = run.transaction.borrow().cluster();
    let open = (run.commit == Commit::No).then_some(run.transaction);
    let environment = WithSubqueries::new(run.environment, subqueries, cluster, open);
    // A recursive SELECT's reading of its expression: the step before's
    // rows, given, never run.
    for (slot, subquery) in subqueries.iter().enumerate() {
        if subquery.plan.working_table {
            let rows = run.working.clone().ok_or_else(|| {
                SqlError::new(
                    codes::UNKNOWN_ERROR,
                    "internal: a recursive expression's rows read outside its recursion",
                )
            })?;
            environment.results.borrow_mut()[slot].insert(Vec::new(), rows);
        }
    }
    if run.commit == Commit::No {
        // In an open transaction, a subquery that reads nothing of the
        // enclosing row runs first, in the transaction, so that it sees
        // the transaction's own writes as the statement does (design
        // 0035); a correlated one runs in it row by row, as the
        // statement evaluates it.
        for (slot, subquery) in subqueries.iter().enumerate() {
            if subquery.correlated
                || subquery.plan.working_table
                || !environment.reads[slot].is_empty()
            {
                continue;
            }
            let _storing = subquery
                .stored
                .then(|| super::Storing::begin(run.environment));
            let rows = query_in_transaction(&subquery.plan, run)?;
            environment.results.borrow_mut()[slot].insert(Vec::new(), Rc::new(rows));
        }
    }
    let mut inner = Run {
        transaction: run.transaction,
        commit: run.commit,
        params: run.params,
        environment: &environment,
        counts: run.counts,
        locked: run.locked,
        working: run.working.clone(),
    };
    body(&mut inner)
}
