//! The request's transaction (`--transaction request`): one `BEGIN ... COMMIT` around a whole strategy, at an isolation level, retried on serialization failures.
//!
//! The question every learner asks after lesson 2 is "why not wrap it in a
//! transaction?". [`InTransaction`] is that wrapper, around any strategy
//! for which it means something. A statement that fails inside aborts the
//! whole transaction, so the request's rows are rolled back, but nothing
//! rolls back the work's service call: idem counts that apart, and the two
//! figures are the answer.

use serde::{Deserialize, Serialize};

use super::{Handled, Step, Strategy};
use crate::request::{Answer, DbError, Failure, Lease, Outcome, Request, Trace};

/// Whether a request's statements share one transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Transaction {
    /// Each statement commits on its own, as the course's Rails code.
    #[default]
    None,
    /// The whole request in one transaction.
    Request,
}

impl Transaction {
    pub fn name(self) -> &'static str {
        match self {
            Transaction::None => "none",
            Transaction::Request => "request",
        }
    }
}

/// The request transaction's isolation level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Isolation {
    /// PostgreSQL's default: each statement sees what was committed before it began.
    #[default]
    ReadCommitted,
    /// One snapshot for the whole transaction, taken at its first statement.
    RepeatableRead,
    /// Repeatable read that also fails transactions whose order cannot be serialised.
    Serializable,
}

impl Isolation {
    /// InnoDB's default, and so a request transaction's level on MariaDB
    /// unless told.
    pub const INNODB_DEFAULT: Isolation = Isolation::RepeatableRead;

    /// The level as MariaDB is told it, before the transaction's BEGIN.
    pub fn on_mariadb(self) -> crate::request::mariadb::Level {
        let set = match self {
            Isolation::ReadCommitted => "SET TRANSACTION ISOLATION LEVEL READ COMMITTED",
            Isolation::RepeatableRead => "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ",
            Isolation::Serializable => "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",
        };
        crate::request::mariadb::Level {
            set,
            name: self.name(),
        }
    }

    pub const ALL: [Isolation; 3] = [
        Isolation::ReadCommitted,
        Isolation::RepeatableRead,
        Isolation::Serializable,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Isolation::ReadCommitted => "read-committed",
            Isolation::RepeatableRead => "repeatable-read",
            Isolation::Serializable => "serializable",
        }
    }

    /// The statement that opens the request's transaction.
    pub fn begin(self) -> &'static str {
        match self {
            Isolation::ReadCommitted => "BEGIN ISOLATION LEVEL READ COMMITTED",
            Isolation::RepeatableRead => "BEGIN ISOLATION LEVEL REPEATABLE READ",
            Isolation::Serializable => "BEGIN ISOLATION LEVEL SERIALIZABLE",
        }
    }
}

/// Ends the request's transaction when nothing failed.
pub const COMMIT: &str = "COMMIT";

/// Ends it when a statement failed, or before a retry.
pub const ROLLBACK: &str = "ROLLBACK";

/// A strategy run inside one transaction per request.
pub struct InTransaction {
    pub inner: Box<dyn Strategy>,
    pub isolation: Isolation,
    /// How many times a request whose transaction failed to serialise
    /// (40001, or a deadlock, 40P01) is run again from `BEGIN`.
    pub retries: u32,
}

impl Strategy for InTransaction {
    fn handle<'a>(
        &'a self,
        lease: &'a mut Lease,
        req: &'a Request,
        trace: &'a mut Trace,
    ) -> Handled<'a> {
        Box::pin(async move {
            loop {
                let conn = lease.conn(trace).await?;
                let begin = self.isolation.begin();
                trace
                    .query(Step::Begin, begin, conn.batch_execute(begin))
                    .await?;
                trace.db_error = None;
                let handled = self.inner.handle(lease, req, trace).await;
                if let Err(Failure::Db(err)) = &handled {
                    trace.caught(err);
                }
                let failed = trace.db_error.clone();
                let ended = match failed {
                    None => end(lease, trace, COMMIT).await,
                    Some(_) => end(lease, trace, ROLLBACK).await,
                };
                // A serialisation failure can also come at COMMIT.
                let failed = match ended {
                    Ok(()) => failed,
                    Err(Failure::Db(err)) if failed.is_none() && err.code().is_some() => {
                        trace.caught(&err);
                        end(lease, trace, ROLLBACK).await?;
                        trace.db_error.clone()
                    }
                    Err(other) => return Err(other),
                };
                let Some(failed) = failed else {
                    return handled;
                };
                if failed.retryable && trace.retries < self.retries {
                    trace.retries += 1;
                    trace.note(format!("retry {} of {}", trace.retries, self.retries));
                    continue;
                }
                return Ok(rolled_back(handled, &failed, trace));
            }
        })
    }

    fn forget(&self) {
        self.inner.forget();
    }
}

/// Sends `COMMIT` or `ROLLBACK` as the request's last step. A connection
/// whose transaction could not be ended is not given back to the pool.
async fn end(lease: &mut Lease, trace: &mut Trace, sql: &'static str) -> Result<(), Failure> {
    let step = if sql == COMMIT {
        Step::Commit
    } else {
        Step::Rollback
    };
    let conn = lease.conn(trace).await?;
    let ended = trace.query(step, sql, conn.batch_execute(sql)).await;
    match ended {
        Ok(()) => {
            trace.note(if sql == COMMIT {
                "committed"
            } else {
                "rolled back"
            });
            Ok(())
        }
        Err(err) => {
            if err.code().is_none() {
                lease.discard();
            }
            Err(err.into())
        }
    }
}

/// What the client of a rolled-back request is told: a 500 naming the
/// error, whatever the strategy had made of it, and no XP row, for the
/// rollback took it away. The work it did is not taken back.
fn rolled_back(handled: Result<Answer, Failure>, failed: &DbError, trace: &Trace) -> Answer {
    let (saw, before) = match handled {
        Ok(answer) => (answer.saw, answer.did),
        Err(_) => {
            let step = trace
                .events
                .iter()
                .rev()
                .find(|e| !matches!(e.step, Step::Rollback | Step::Commit))
                .map_or("a statement", |e| e.step.name());
            ("database error".to_string(), format!("{step} failed"))
        }
    };
    let retried = match trace.retries {
        0 => String::new(),
        1 => " after 1 retry".to_string(),
        n => format!(" after {n} retries"),
    };
    Answer {
        replayed: false,
        outcome: Outcome::Error,
        saw,
        did: format!("{before}; rolled back on {}{retried}", failed.code),
        made_xp: None,
        body: None,
        waited: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_isolation_level_begins_its_own_transaction() {
        for level in Isolation::ALL {
            assert!(level.begin().starts_with("BEGIN ISOLATION LEVEL "));
        }
    }
}
