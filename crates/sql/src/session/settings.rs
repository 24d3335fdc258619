//! A session's settings: SET of system and user variables (autocommit,
//! time_zone, transaction_allow_batching and the rest `variables` knows),
//! the values of @@ and @ names in expressions, and SHOW VARIABLES and
//! SHOW STATUS.

use super::{first_words, like_filter, Session, SessionView};
use crate::error::{codes, SqlError, SqlResult};
use crate::expr::SessionValue;
use crate::result::Response;
use crate::value::{self, Value};
use crate::variables;
use sqlparser::ast;
use std::sync::atomic::Ordering;

/// Switch variable `name`'s new `value`: ON, TRUE or 1 (any case, as a
/// word or a number) is on, OFF, FALSE or 0 off, anything else MySQL's
/// 1231.
fn switched_on(name: &str, value: &Value) -> SqlResult<bool> {
    let on = match value {
        Value::Bytes(text) => match text.to_ascii_uppercase().as_slice() {
            b"ON" | b"TRUE" | b"1" => Some(true),
            b"OFF" | b"FALSE" | b"0" => Some(false),
            _ => None,
        },
        Value::Null => None,
        other => match other.as_i64() {
            Some(1) => Some(true),
            Some(0) => Some(false),
            _ => None,
        },
    };
    on.ok_or_else(|| {
        SqlError::new(
            codes::WRONG_VALUE_FOR_VAR,
            format!(
                "Variable '{name}' can't be set to the value of '{}'",
                value::display(value)
            ),
        )
    })
}

/// The value an integer variable `name` takes from SET's `value`: a
/// switch's as [`switched_on`] reads it; for a count, an integer as it
/// is, ON or TRUE as 1, OFF or FALSE as 0, and other text or a number
/// that is not an integer MySQL's 1232 (NULL 1231). So the variable
/// reads back as the number its column is announced as.
fn integer_setting(name: &str, value: Value) -> SqlResult<Value> {
    if variables::is_switch(name) {
        return switched_on(name, &value).map(|on| Value::Int(on as i64));
    }
    match &value {
        Value::Int(_) | Value::UInt(_) => Ok(value),
        Value::Null => Err(SqlError::new(
            codes::WRONG_VALUE_FOR_VAR,
            format!("Variable '{name}' can't be set to the value of 'NULL'"),
        )),
        Value::Bytes(text) if matches!(text.to_ascii_uppercase().as_slice(), b"ON" | b"TRUE") => {
            Ok(Value::Int(1))
        }
        Value::Bytes(text) if matches!(text.to_ascii_uppercase().as_slice(), b"OFF" | b"FALSE") => {
            Ok(Value::Int(0))
        }
        _ => Err(SqlError::new(
            codes::WRONG_TYPE_FOR_VAR,
            format!("Incorrect argument type to variable '{name}'"),
        )),
    }
}

impl Session {
    pub(super) fn set(&mut self, set: &ast::Set) -> SqlResult<Response> {
        let assignments: Vec<(Option<ast::ContextModifier>, String, &ast::Expr)> = match set {
            ast::Set::SingleAssignment {
                scope,
                variable,
                values,
                ..
            } => {
                let [value] = values.as_slice() else {
                    return Err(SqlError::parse("SET takes one value"));
                };
                vec![(*scope, variable.to_string(), value)]
            }
            ast::Set::MultipleAssignments { assignments } => assignments
                .iter()
                .map(|a| (a.scope, a.name.to_string(), &a.value))
                .collect(),
            ast::Set::SetNames { .. } | ast::Set::SetNamesDefault {} => return Ok(Response::ok()),
            ast::Set::SetTransaction { .. } => return Ok(Response::ok()),
            other => return Err(SqlError::unsupported(first_words(&other.to_string()))),
        };
        for (scope, name, expr) in assignments {
            let lower = name.to_ascii_lowercase();
            let (global, name) = match lower.split_once('.') {
                Some(("@@global", rest)) => (true, rest.to_string()),
                Some(("@@session" | "@@local", rest)) => (false, rest.to_string()),
                _ => (
                    matches!(scope, Some(ast::ContextModifier::Global)),
                    lower.clone(),
                ),
            };
            let is_default = matches!(expr, ast::Expr::Identifier(word) if word.value.eq_ignore_ascii_case("DEFAULT"));
            let value = self.constant(expr)?;
            if let Some(user) = name.strip_prefix('@').filter(|n| !n.starts_with('@')) {
                self.user_variables.insert(user.to_string(), value);
                continue;
            }
            let name = name.trim_start_matches("@@").to_string();
            if global {
                return Err(SqlError::new(
                    codes::WRONG_VALUE_FOR_VAR,
                    format!("Variable '{name}' cannot be set globally on a SQL node: each SQL node keeps its own session settings"),
                ));
            }
            let Some(default) = variables::default_of(&name) else {
                return Err(SqlError::new(
                    codes::UNKNOWN_SYSTEM_VARIABLE,
                    format!("Unknown system variable '{name}'"),
                ));
            };
            // `= DEFAULT` sets the variable's default back.
            let value = match is_default {
                true => default.clone(),
                false => value,
            };
            let value = match default {
                Value::Int(_) | Value::UInt(_) => integer_setting(&name, value)?,
                _ => value,
            };
            if name == "time_zone" {
                let text = value::display(&value);
                self.zone = crate::temporal::zone_offset(&text).ok_or_else(|| {
                    SqlError::new(
                        1298,
                        format!("Unknown or incorrect time zone: '{text}' (a SQL node takes SYSTEM, UTC or an offset such as '+02:00')"),
                    )
                })?;
            }
            if name == "autocommit" {
                let on = switched_on(&name, &value)?;
                if on && !self.autocommit {
                    // Turning autocommit on commits the open transaction.
                    self.commit_open()?;
                    self.explicit = false;
                }
                self.autocommit = on;
                self.variables.insert(name, Value::Int(on as i64));
                continue;
            }
            if name == "transaction_allow_batching" {
                let on = switched_on(&name, &value)?;
                self.batch_inserts = on;
                self.variables.insert(name, Value::Int(on as i64));
                continue;
            }
            self.variables.insert(name, value);
        }
        Ok(Response::ok())
    }

    /// The session's time zone, seconds east of UTC.
    pub(super) fn zone_offset(&self) -> i64 {
        self.zone
    }

    pub(super) fn constant(&self, expr: &ast::Expr) -> SqlResult<Value> {
        // `SET sql_mode = STRICT_ALL_TABLES` names a value as a word.
        if let ast::Expr::Identifier(ident) = expr {
            if !ident.value.starts_with('@') {
                return Ok(Value::from(ident.value.as_str()));
            }
        }
        let mut compiler = crate::expr::Compiler::new(None, None);
        let compiled = compiler.compile(expr)?;
        let inputs = crate::expr::Inputs {
            row: &[],
            aggregates: &[],
            params: &[],
        };
        compiled.eval(&inputs, &SessionView { session: self })
    }

    pub(super) fn session_value(&self, value: &SessionValue) -> SqlResult<Value> {
        Ok(match value {
            SessionValue::SystemVariable { name, global } => {
                let session = (!global).then(|| self.variables.get(name)).flatten();
                match (session, name.as_str()) {
                    (Some(value), _) => value.clone(),
                    (None, "autocommit") => Value::Int(self.autocommit as i64),
                    (None, "warning_count") => Value::Int(self.diagnostics.borrow().count() as i64),
                    (None, "error_count") => Value::Int(self.diagnostics.borrow().errors() as i64),
                    (None, "in_transaction") => Value::Int(self.in_transaction() as i64),
                    (None, "last_insert_id" | "identity") => Value::UInt(self.last_insert_id),
                    (None, "hostname") => Value::from("tessera"),
                    (None, _) => variables::default_of(name).ok_or_else(|| {
                        SqlError::new(
                            codes::UNKNOWN_SYSTEM_VARIABLE,
                            format!("Unknown system variable '{name}'"),
                        )
                    })?,
                }
            }
            SessionValue::UserVariable(name) => self
                .user_variables
                .get(name)
                .cloned()
                .unwrap_or(Value::Null),
            SessionValue::Database => self
                .database
                .as_deref()
                .map(Value::from)
                .unwrap_or(Value::Null),
            SessionValue::LastInsertId => Value::UInt(self.last_insert_id),
            SessionValue::ConnectionId => Value::UInt(self.id as u64),
            SessionValue::Version => Value::from(variables::VERSION),
            SessionValue::User => {
                Value::from(format!("{}@{}", self.account.user, self.account.host))
            }
            SessionValue::RowCount => Value::Int(self.row_count),
            SessionValue::Now(fsp) => {
                crate::functions::now(self.statement_started, self.zone, *fsp)
            }
            SessionValue::UtcNow => crate::functions::now(self.statement_started, 0, 0),
            SessionValue::Today => crate::functions::today(self.statement_started, self.zone),
            SessionValue::TimeOfDay => {
                crate::functions::time_of_day(self.statement_started, self.zone)
            }
            SessionValue::Random(None) => {
                let mut random = self.random.get();
                let next = random.next_f64();
                self.random.set(random);
                Value::Double(next)
            }
            SessionValue::Random(Some(call)) => Value::Double(
                self.seeded_random
                    .borrow_mut()
                    .entry(*call)
                    .or_insert_with(|| crate::functions::math::MySqlRandom::seeded(call.seed))
                    .next_f64(),
            ),
            SessionValue::Uuid => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |since| since.as_nanos() as u64 / 100);
                let ticks = now.max(self.uuid_last.get() + 1);
                self.uuid_last.set(ticks);
                let mut random = self.random.get();
                let (a, b) = (random.next_f64(), random.next_f64());
                self.random.set(random);
                let noise =
                    ((a * (1u64 << 32) as f64) as u64) << 32 | (b * (1u64 << 32) as f64) as u64;
                Value::from(crate::functions::strings::uuid_v1(ticks, noise))
            }
        })
    }

    pub(super) fn show_variables(
        &self,
        filter: Option<&ast::ShowStatementFilter>,
        global: bool,
    ) -> Response {
        let pattern = like_filter(filter);
        let rows = variables::defaults()
            .into_iter()
            .filter(|(name, _)| variables::name_matches(name, pattern))
            .map(|(name, default)| {
                let value = match global {
                    true => default,
                    false => self
                        .session_value(&SessionValue::SystemVariable {
                            name: name.to_string(),
                            global: false,
                        })
                        .unwrap_or(default),
                };
                vec![
                    Value::from(name),
                    Value::from(value::display(&value).as_str()),
                ]
            })
            .collect();
        Response::text_rows(&["Variable_name", "Value"], rows)
    }

    pub(super) fn show_status(
        &self,
        filter: Option<&ast::ShowStatementFilter>,
        global: bool,
    ) -> Response {
        let statistics = self.statistics();
        let load = |counter: &std::sync::atomic::AtomicU64| counter.load(Ordering::Relaxed);
        let mut status: Vec<(String, u64)> = vec![
            ("Com_commit".into(), load(&statistics.commits)),
            ("Com_delete".into(), load(&statistics.deletes)),
            ("Com_insert".into(), load(&statistics.inserts)),
            ("Com_rollback".into(), load(&statistics.rollbacks)),
            ("Com_select".into(), load(&statistics.selects)),
            ("Com_update".into(), load(&statistics.updates)),
            ("Queries".into(), load(&statistics.queries)),
            ("Questions".into(), load(&statistics.queries)),
            ("Rows_sent".into(), load(&statistics.rows_sent)),
            (
                "Tessera_autocommit_retries".into(),
                load(&statistics.retries),
            ),
            (
                "Tessera_rows_fetched".into(),
                match global {
                    true => load(&statistics.rows_fetched),
                    false => self.fetched_total,
                },
            ),
            (
                "Tessera_last_statement_rows_fetched".into(),
                self.last_counts.fetched,
            ),
            (
                "Tessera_lookups_read_ahead".into(),
                load(&statistics.lookups_read_ahead),
            ),
            (
                "Tessera_locked_rows_reused".into(),
                load(&statistics.locked_rows_reused),
            ),
            (
                "Tessera_reads_at_primary".into(),
                load(&statistics.reads_at_primary),
            ),
            (
                "Tessera_execute_count".into(),
                self.engine.catalog.cluster().executes(),
            ),
            (
                "Threads_connected".into(),
                self.engine.server.processes().len() as u64,
            ),
            ("Uptime".into(), self.engine.uptime()),
        ];
        for (code, count) in statistics.errors.lock().expect("errors lock").iter() {
            status.push((format!("Tessera_errors_{code}"), *count));
        }
        status.sort();
        let pattern = like_filter(filter);
        let rows = status
            .into_iter()
            .filter(|(name, _)| variables::name_matches(name, pattern))
            .map(|(name, value)| {
                vec![
                    Value::from(name.as_str()),
                    Value::from(value.to_string().as_str()),
                ]
            })
            .collect();
        Response::text_rows(&["Variable_name", "Value"], rows)
    }
}
