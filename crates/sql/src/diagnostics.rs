//! The diagnostics area: the conditions (notes, warnings, the error) the
//! session's last statement raised, which SHOW WARNINGS, SHOW ERRORS,
//! `@@warning_count`, `@@error_count` and the warning count of the OK
//! and EOF packets report (docs/design/0027-sql-node.md, "Warnings").

use crate::value::Value;

/// How grave a condition is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// Something worth knowing that changed nothing (`DROP TABLE IF
    /// EXISTS` of a table that is not there).
    Note,
    /// A value was changed or left out (a division by zero is NULL).
    Warning,
    /// The statement failed.
    Error,
}

impl Level {
    fn name(self) -> &'static str {
        match self {
            Level::Note => "Note",
            Level::Warning => "Warning",
            Level::Error => "Error",
        }
    }
}

/// One condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    /// Note, warning or error.
    pub level: Level,
    /// The MySQL error number.
    pub code: u16,
    /// The text.
    pub message: String,
}

/// The conditions of one statement. At most [`Diagnostics::KEPT`] are
/// kept (MySQL's `max_error_count`); the counts count them all.
#[derive(Debug, Default)]
pub struct Diagnostics {
    conditions: Vec<Condition>,
    raised: usize,
    errors: usize,
}

impl Diagnostics {
    /// The most conditions kept for SHOW WARNINGS.
    pub const KEPT: usize = 64;

    /// Forgets the last statement's conditions: a statement that is not
    /// itself a diagnostic one begins.
    pub fn clear(&mut self) {
        self.conditions.clear();
        self.raised = 0;
        self.errors = 0;
    }

    /// Records a condition.
    pub fn raise(&mut self, level: Level, code: u16, message: impl Into<String>) {
        self.raised += 1;
        if level == Level::Error {
            self.errors += 1;
        }
        if self.conditions.len() < Self::KEPT {
            self.conditions.push(Condition {
                level,
                code,
                message: message.into(),
            });
        }
    }

    /// Notes, warnings and errors raised (`@@warning_count`, the OK
    /// packet's warning count).
    pub fn count(&self) -> usize {
        self.raised
    }

    /// Errors raised (`@@error_count`).
    pub fn errors(&self) -> usize {
        self.errors
    }

    /// SHOW WARNINGS' rows (SHOW ERRORS': `errors_only`), `offset` and
    /// `limit` applied: Level, Code, Message.
    pub fn rows(&self, errors_only: bool, offset: usize, limit: Option<usize>) -> Vec<Vec<Value>> {
        self.conditions
            .iter()
            .filter(|condition| !errors_only || condition.level == Level::Error)
            .skip(offset)
            .take(limit.unwrap_or(usize::MAX))
            .map(|condition| {
                vec![
                    Value::from(condition.level.name()),
                    Value::UInt(condition.code as u64),
                    Value::from(condition.message.as_str()),
                ]
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_first_conditions_and_counts_them_all() {
        let mut diagnostics = Diagnostics::default();
        for n in 0..Diagnostics::KEPT + 6 {
            diagnostics.raise(Level::Warning, 1365, format!("Division by 0 ({n})"));
        }
        diagnostics.raise(Level::Error, 1062, "Duplicate entry");
        assert_eq!(diagnostics.count(), Diagnostics::KEPT + 7);
        assert_eq!(diagnostics.errors(), 1);
        assert_eq!(diagnostics.rows(false, 0, None).len(), Diagnostics::KEPT);
        // The error came after the 64 kept: SHOW ERRORS has no row for it.
        assert!(diagnostics.rows(true, 0, None).is_empty());
        let page = diagnostics.rows(false, 2, Some(1));
        assert_eq!(page[0][2], Value::from("Division by 0 (2)"));
        diagnostics.clear();
        assert_eq!(diagnostics.count(), 0);
        assert!(diagnostics.rows(false, 0, None).is_empty());
    }
}
