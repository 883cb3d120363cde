//! The database error a request met, by its SQLSTATE: what a loser was told in the database's own words.

use serde::Serialize;
use tokio_postgres::error::SqlState;

/// One error the database answered a request's statement with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DbError {
    /// The SQLSTATE, e.g. `23505`.
    pub code: String,
    /// PostgreSQL's condition name for it, e.g. `unique_violation`, where
    /// idem knows it.
    pub name: &'static str,
    /// Whether an app runs the whole transaction again on it, as the
    /// PostgreSQL manual advises for serialization failures and deadlocks.
    #[serde(skip)]
    pub retryable: bool,
}

/// The conditions a race's requests meet, by SQLSTATE.
const NAMES: [(SqlState, &str); 8] = [
    (SqlState::UNIQUE_VIOLATION, "unique_violation"),
    (SqlState::T_R_SERIALIZATION_FAILURE, "serialization_failure"),
    (SqlState::T_R_DEADLOCK_DETECTED, "deadlock_detected"),
    (SqlState::LOCK_NOT_AVAILABLE, "lock_not_available"),
    (
        SqlState::IN_FAILED_SQL_TRANSACTION,
        "in_failed_sql_transaction",
    ),
    (SqlState::QUERY_CANCELED, "query_canceled"),
    (SqlState::ADMIN_SHUTDOWN, "admin_shutdown"),
    (
        SqlState::IDLE_IN_TRANSACTION_SESSION_TIMEOUT,
        "idle_in_transaction_session_timeout",
    ),
];

impl DbError {
    /// The error `err` carries, if the server sent one (a closed
    /// connection carries none).
    pub fn of(err: &tokio_postgres::Error) -> Option<Self> {
        err.code().map(Self::from_code)
    }

    pub fn from_code(code: &SqlState) -> Self {
        let name = NAMES
            .iter()
            .find(|(known, _)| known == code)
            .map_or("", |(_, name)| name);
        Self {
            code: code.code().to_string(),
            name,
            retryable: *code == SqlState::T_R_SERIALIZATION_FAILURE
                || *code == SqlState::T_R_DEADLOCK_DETECTED,
        }
    }

    /// `23505 unique_violation`, or the code alone.
    pub fn label(&self) -> String {
        if self.name.is_empty() {
            self.code.clone()
        } else {
            format!("{} {}", self.code, self.name)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialization_failures_and_deadlocks_are_retried_nothing_else() {
        let retried = |code: SqlState| DbError::from_code(&code).retryable;
        assert!(retried(SqlState::T_R_SERIALIZATION_FAILURE));
        assert!(retried(SqlState::T_R_DEADLOCK_DETECTED));
        assert!(!retried(SqlState::UNIQUE_VIOLATION));
        assert!(!retried(SqlState::LOCK_NOT_AVAILABLE));
    }

    #[test]
    fn a_known_code_is_labelled_with_its_name() {
        assert_eq!(
            DbError::from_code(&SqlState::UNIQUE_VIOLATION).label(),
            "23505 unique_violation"
        );
        assert_eq!(DbError::from_code(&SqlState::SYNTAX_ERROR).label(), "42601");
    }
}
