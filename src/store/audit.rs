//! What each store can still tell about a key after the fact: the audit trail of lesson 5.

use anyhow::Result;
use serde::Serialize;

use super::cache::key_hash;
use crate::db::statements::qualified;
use crate::db::{Database, book};

/// The key table's row: who, when, with what, answered what, in how long.
#[derive(Debug, Clone, Serialize)]
pub struct TableAudit {
    pub worker: Option<i32>,
    pub status: String,
    pub fingerprint: Option<String>,
    pub response_code: Option<i32>,
    pub response_body: Option<String>,
    pub created_at: String,
    pub completed_at: Option<String>,
    /// From the claim to its completion, in ms.
    pub took_ms: Option<f64>,
}

/// The cache entry: a size, an opaque value and a creation time, if it is still there.
#[derive(Debug, Clone, Serialize)]
pub struct CacheAudit {
    pub byte_size: i32,
    /// The value's first bytes, in hex: to the cache it is a blob.
    pub value_prefix: String,
    pub created_at: String,
}

/// Both stores' answers for one key.
#[derive(Debug, Clone, Serialize)]
pub struct Audit {
    pub key: String,
    pub table: Option<TableAudit>,
    pub cache: Option<CacheAudit>,
}

impl Audit {
    /// How many facts the key table can give (non-empty fields).
    pub fn table_facts(&self) -> usize {
        self.table.as_ref().map_or(0, |t| {
            2 + [
                t.worker.is_some(),
                t.fingerprint.is_some(),
                t.response_code.is_some(),
                t.response_body.is_some(),
                t.completed_at.is_some(),
                t.took_ms.is_some(),
            ]
            .iter()
            .filter(|x| **x)
            .count()
        })
    }
}

const TIME: &str = "'YYYY-MM-DD HH24:MI:SS.MS'";

/// Reads what the run's schema holds about `key` in each store.
pub async fn audit(db: &Database, key: &str) -> Result<Audit> {
    type TableRow = (
        Option<i32>,
        String,
        Option<String>,
        Option<i32>,
        Option<String>,
        String,
        Option<String>,
        Option<f64>,
    );
    let read_table = qualified(
        &format!(
            "SELECT worker, status, request_fingerprint, response_code, response_body::text,
                    to_char(created_at, {TIME}), to_char(completed_at, {TIME}),
                    (EXTRACT(EPOCH FROM completed_at - locked_at) * 1000)::float8
             FROM idempotency_keys WHERE key = $1"
        ),
        &db.schema,
    );
    let read_cache = qualified(
        &format!(
            "SELECT byte_size, encode(substring(value FROM 1 FOR 24), 'hex'),
                    to_char(created_at, {TIME})
             FROM cache_entries WHERE key_hash = $1"
        ),
        &db.schema,
    );
    let mut tx = db.book().await?;
    let table: Option<TableRow> = book::query_as(&read_table)
        .bind(key)
        .fetch_optional(&mut *tx)
        .await?;
    let cache: Option<(i32, String, String)> = book::query_as(&read_cache)
        .bind(key_hash(key))
        .fetch_optional(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(Audit {
        key: key.to_string(),
        table: table.map(
            |(
                worker,
                status,
                fingerprint,
                response_code,
                response_body,
                created_at,
                completed_at,
                took_ms,
            )| {
                TableAudit {
                    worker,
                    status,
                    fingerprint,
                    response_code,
                    response_body,
                    created_at,
                    completed_at,
                    took_ms,
                }
            },
        ),
        cache: cache.map(|(byte_size, value_prefix, created_at)| CacheAudit {
            byte_size,
            value_prefix,
            created_at,
        }),
    })
}
