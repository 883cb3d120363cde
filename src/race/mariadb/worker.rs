//! What a MariaDB race tells of each request, and of the tables while a person steps: a worker's row, made from its answer.

use anyhow::Result;
use serde::Serialize;

use crate::db::mariadb::Mariadb;
use crate::request::mariadb::{Answered, ServerError};
use crate::request::{Outcome, StepEvent};

/// One worker's request, as the workers' table shows it.
#[derive(Debug, Clone, Serialize)]
pub struct EngineWorker {
    pub worker: usize,
    pub checkout_wait_ms: f64,
    pub saw: String,
    pub did: String,
    pub outcome: Outcome,
    pub status: u16,
    /// The server's error, by its number and SQLSTATE.
    pub error: Option<ServerError>,
    pub made_xp: Option<i64>,
    pub service_calls: u32,
    pub answer_ms: f64,
    /// A client's retry after its first request crashed.
    pub retry: bool,
    pub steps: Vec<StepEvent>,
    /// On a cluster, the node (1-based) the request reached.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<usize>,
}

/// What the tables hold now, for a person stepping: each key row's key,
/// status and worker, and each XP row's id, amount and worker.
pub async fn rows_now(db: &Mariadb) -> Result<(Vec<KeyRow>, Vec<XpRow>)> {
    let keys = sqlx::query_as("SELECT `key`, status, worker FROM idempotency_keys ORDER BY id")
        .fetch_all(&db.admin)
        .await?;
    let xp = sqlx::query_as("SELECT id, amount, worker FROM experience_points ORDER BY id")
        .fetch_all(&db.admin)
        .await?;
    Ok((keys, xp))
}

/// The key rows and the XP rows now.
pub async fn rows_counted(admin: &sqlx::MySqlPool) -> Result<(i64, i64)> {
    use sqlx::Row;
    let row = sqlx::query(
        "SELECT (SELECT count(*) FROM idempotency_keys), (SELECT count(*) FROM experience_points)",
    )
    .fetch_one(admin)
    .await?;
    Ok((row.try_get(0)?, row.try_get(1)?))
}

/// The response stored with `key`, if any: what a later retry is replayed.
pub async fn stored_response(admin: &sqlx::MySqlPool, key: &str) -> Result<Option<String>> {
    use sqlx::Row;
    let row = sqlx::query("SELECT response_body FROM idempotency_keys WHERE `key` = ?")
        .bind(key)
        .fetch_optional(admin)
        .await?;
    // The column is JSON, which MariaDB sends as a BLOB of its text.
    Ok(row.and_then(|r| r.try_get_unchecked::<Option<String>, _>(0).ok().flatten()))
}

/// A key row as a person stepping sees it: key, status, worker.
pub type KeyRow = (String, String, Option<i32>);
/// An XP row as a person stepping sees it: id, amount, worker.
pub type XpRow = (i64, i32, Option<i32>);

/// A worker's row, from its answer: no service call or step counted yet.
pub(super) fn report(
    worker: usize,
    checkout_wait_ms: f64,
    a: Answered,
    error: Option<ServerError>,
    answer_ms: f64,
) -> EngineWorker {
    EngineWorker {
        worker,
        checkout_wait_ms,
        saw: a.saw,
        did: a.did,
        status: a.outcome.status(),
        outcome: a.outcome,
        // The error the request met, whether the shape answered past it
        // (check-then-store's lost store) or not, as PostgreSQL's reports keep it.
        error,
        made_xp: a.made_xp,
        service_calls: 0,
        answer_ms,
        retry: false,
        steps: Vec::new(),
        node: None,
    }
}
