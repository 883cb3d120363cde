//! Schemas left by killed runs: each run holds a lock on its schema while it
//! lives; a later run drops the schemas whose lock nobody holds any more.
//!
//! A run killed with SIGKILL cannot drop its own schema. So, before creating
//! it, a run takes a session-level advisory lock named after the schema, on a
//! connection it keeps until the end. When the process dies, so does the
//! connection, and the lock with it. Every later run on that server tries
//! each `idem_*` schema's lock: one it can take belongs to a dead run.
//! Schemas kept on purpose (`--keep`) are marked and never swept.

use anyhow::Result;
use sqlx::postgres::{PgConnection, PgPool};

/// The first key of idem's advisory locks (the second is the schema's hash).
const LOCK_CLASS: i32 = 0x1de3;

/// The comment that marks a schema kept on purpose.
pub const KEPT: &str = "kept by idem";

/// Takes the lock that says "this schema's run is alive", on `conn`.
pub async fn hold(conn: &mut PgConnection, schema: &str) -> Result<()> {
    sqlx::query("SELECT pg_advisory_lock($1, hashtext($2))")
        .bind(LOCK_CLASS)
        .bind(schema)
        .execute(conn)
        .await?;
    Ok(())
}

/// Drops every idem schema whose run has died; returns their names.
pub async fn sweep(meta: &PgPool) -> Result<Vec<String>> {
    let mut conn = meta.acquire().await?;
    let candidates: Vec<String> = sqlx::query_scalar(
        "SELECT nspname::text FROM pg_namespace
         WHERE nspname ~ '^idem_[0-9a-f]{8}$'
           AND coalesce(obj_description(oid, 'pg_namespace'), '') <> $1",
    )
    .bind(KEPT)
    .fetch_all(&mut *conn)
    .await?;
    let mut dropped = Vec::new();
    for schema in candidates {
        let orphan: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1, hashtext($2))")
            .bind(LOCK_CLASS)
            .bind(&schema)
            .fetch_one(&mut *conn)
            .await?;
        if !orphan {
            continue;
        }
        let gone = sqlx::query(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
            .execute(&mut *conn)
            .await;
        sqlx::query("SELECT pg_advisory_unlock($1, hashtext($2))")
            .bind(LOCK_CLASS)
            .bind(&schema)
            .execute(&mut *conn)
            .await?;
        if gone.is_ok() {
            dropped.push(schema);
        }
    }
    Ok(dropped)
}
