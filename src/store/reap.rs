//! The key table does not forget by itself: a reaper deletes completed keys past their retention.
//!
//! Stripe may prune keys after 24 hours; a Stripe-like design in Postgres
//! commonly reaps after about 72. Pending claims are never reaped here: a
//! stale claim is recovered, not deleted.

use std::time::Duration;

use anyhow::Result;
use serde::Serialize;

use crate::db::{Database, book};

/// What one reap did.
#[derive(Debug, Clone, Serialize)]
pub struct Reaped {
    pub older_than_s: u64,
    /// Ages, in hours, of the keys deleted and of the completed keys kept.
    pub removed_hours: Vec<f64>,
    pub kept_hours: Vec<f64>,
    pub pending_kept: u64,
}

/// Deletes completed keys whose completion is older than `older_than`. The
/// database has made sure the schema is idem's before this runs (see
/// `db::run_schema::prove`).
pub async fn reap(db: &Database, older_than: Duration) -> Result<Reaped> {
    let secs = older_than.as_secs_f64();
    let mut tx = db.book().await?;
    let removed: Vec<f64> = book::query_scalar(&db.sql(
        "DELETE FROM idempotency_keys
         WHERE status = 'completed' AND completed_at IS NOT NULL
           AND completed_at < now() - make_interval(secs => $1)
         RETURNING (EXTRACT(EPOCH FROM now() - completed_at) / 3600)::float8",
    ))
    .bind(secs)
    .fetch_all(&mut *tx)
    .await?;
    let kept: Vec<f64> = book::query_scalar(&db.sql(
        "SELECT (EXTRACT(EPOCH FROM now() - completed_at) / 3600)::float8
         FROM idempotency_keys WHERE status = 'completed' AND completed_at IS NOT NULL
         ORDER BY completed_at DESC",
    ))
    .fetch_all(&mut *tx)
    .await?;
    let pending: i64 = book::query_scalar(
        &db.sql("SELECT count(*) FROM idempotency_keys WHERE status = 'pending'"),
    )
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    let mut removed = removed;
    removed.sort_by(f64::total_cmp);
    Ok(Reaped {
        older_than_s: older_than.as_secs(),
        removed_hours: removed,
        kept_hours: kept,
        pending_kept: pending as u64,
    })
}

/// Seeds completed keys of the given ages (hours) and a few pending claims,
/// for a demonstration on a fresh database.
pub async fn seed(db: &Database, ages_hours: &[f64], pending: usize) -> Result<()> {
    let mut tx = db.book().await?;
    for (i, age) in ages_hours.iter().enumerate() {
        book::query(&db.sql(
            "INSERT INTO idempotency_keys (key, operation, status, response_code, response_body,
                                           created_at, locked_at, completed_at)
             VALUES ($1, 'award_xp', 'completed', 201, '{}',
                     now() - make_interval(secs => $2), now() - make_interval(secs => $2),
                     now() - make_interval(secs => $2))",
        ))
        .bind(format!("seeded-{i}"))
        .bind(age * 3600.0)
        .execute(&mut *tx)
        .await?;
    }
    for i in 0..pending {
        book::query(&db.sql(
            "INSERT INTO idempotency_keys (key, operation, status, created_at, locked_at)
             VALUES ($1, 'award_xp', 'pending', now() - interval '100 hours', now() - interval '100 hours')",
        ))
        .bind(format!("seeded-pending-{i}"))
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(())
}
