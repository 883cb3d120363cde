//! A cache store modelled on Rails' Solid Cache (v1.0), kept faithful to its weak spots.
//!
//! - `write` is an upsert on `key_hash`: the last write wins, and an
//!   overwrite keeps the row's id and created_at (its place in eviction order).
//! - `write_unless_exist` locks the existing row with `SELECT ... FOR UPDATE`
//!   and writes only if it is missing or expired. When the row does not exist
//!   yet there is nothing to lock: two callers both see "missing", both
//!   write, and both are told they won.
//! - The expiry lives inside the value and is checked on read.
//! - Eviction is first-in first-out by id, over `max_entries` or past
//!   `max_age`, whatever the entries' own expiry.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::ClaimStatus;
use serde_json::Value;
use sha2::{Digest, Sha256};

use tokio_postgres::types::Type;

use crate::db::pool::Conn;
use crate::db::statements::{Sends, Sql};

/// How many entries one eviction pass deletes at most.
const EVICTION_BATCH: i64 = 100;

/// The cache's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CacheLimits {
    pub max_entries: u64,
    #[serde(serialize_with = "as_secs")]
    pub max_age: Duration,
}

/// How many entries the cache keeps unless told otherwise.
pub const DEFAULT_MAX_ENTRIES: u64 = crate::limits::CACHE_MAX_ENTRIES.default();

impl Default for CacheLimits {
    fn default() -> Self {
        Self {
            max_entries: DEFAULT_MAX_ENTRIES,
            // Solid Cache's default max_age: two weeks.
            max_age: Duration::from_secs(14 * 24 * 3600),
        }
    }
}

fn as_secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_secs())
}

/// What idem keeps in a cache entry for a claim: an opaque blob to the cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub status: ClaimStatus,
    pub fingerprint: Option<String>,
    pub response: Option<Value>,
    /// Milliseconds since the epoch after which a read treats the entry as absent.
    pub expires_at_ms: u64,
}

impl Entry {
    pub fn new(
        status: ClaimStatus,
        fingerprint: Option<String>,
        response: Option<Value>,
        expires_in: Duration,
    ) -> Self {
        Self {
            status,
            fingerprint,
            response,
            expires_at_ms: now_ms() + expires_in.as_millis() as u64,
        }
    }

    fn expired(&self) -> bool {
        self.expires_at_ms <= now_ms()
    }
}

/// The first 8 bytes of SHA-256 of the key, as Solid Cache computes `key_hash`.
pub fn key_hash(key: &str) -> i64 {
    let digest = Sha256::digest(key.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(first)
}

/// Reading an entry.
pub static READ: Sql = Sql::new(
    "SELECT value FROM cache_entries WHERE key_hash = $1",
    &[Type::INT8],
);

/// `unless_exist`'s look under a lock, which locks nothing when the row is missing.
pub static LOCK: Sql = Sql::new(
    "SELECT value FROM cache_entries WHERE key_hash = $1 FOR UPDATE",
    &[Type::INT8],
);

/// A write: upsert on the key hash, last write wins.
pub static UPSERT: Sql = Sql::new(
    "INSERT INTO cache_entries (key, value, key_hash, byte_size) VALUES ($1, $2, $3, $4)
     ON CONFLICT (key_hash) DO UPDATE
     SET key = excluded.key, value = excluded.value, byte_size = excluded.byte_size",
    &[Type::BYTEA, Type::BYTEA, Type::INT8, Type::INT4],
);

/// Eviction: the oldest entries beyond the limit, and those past the age.
static EVICT: Sql = Sql::new(
    "DELETE FROM cache_entries WHERE id IN (
         SELECT id FROM cache_entries
         WHERE id <= (SELECT id FROM cache_entries ORDER BY id DESC OFFSET $1 LIMIT 1)
            OR created_at < now() - make_interval(secs => $2)
         ORDER BY id LIMIT $3)",
    &[Type::INT8, Type::FLOAT8, Type::INT8],
);

/// Reads an entry; an expired or unreadable one counts as absent.
pub async fn read(conn: &Conn, key: &str) -> Result<Option<Entry>, tokio_postgres::Error> {
    let row = conn.fetch_opt(&READ, &[&key_hash(key)]).await?;
    Ok(row.and_then(|row| live(row.get::<_, &[u8]>(0))))
}

/// The entry a stored value holds, unless it has expired or cannot be
/// read: what a read of either engine's store sees.
pub fn live(value: &[u8]) -> Option<Entry> {
    serde_json::from_slice::<Entry>(value)
        .ok()
        .filter(|entry| !entry.expired())
}

/// The value a write stores for `entry`, and its `byte_size` beside `key`.
pub fn stored(key: &str, entry: &Entry) -> (Vec<u8>, i32) {
    let value = serde_json::to_vec(entry).unwrap_or_default();
    let size = (key.len() + value.len()) as i32;
    (value, size)
}

/// A plain write: upsert on key_hash, last write wins; then evict.
pub async fn write(
    conn: &Conn,
    key: &str,
    entry: &Entry,
    limits: CacheLimits,
) -> Result<(), tokio_postgres::Error> {
    upsert(conn, key, entry).await?;
    evict(conn, limits).await
}

/// `write(..., unless_exist: true)`: writes only if the entry is missing or
/// expired, and says whether it wrote. Not atomic when the row is missing.
pub async fn write_unless_exist(
    conn: &Conn,
    key: &str,
    entry: &Entry,
    limits: CacheLimits,
) -> Result<bool, tokio_postgres::Error> {
    conn.batch_execute("BEGIN").await?;
    let written = async {
        let existing = conn.fetch_opt(&LOCK, &[&key_hash(key)]).await?;
        if existing.is_some_and(|row| live(row.get::<_, &[u8]>(0)).is_some()) {
            return Ok(false);
        }
        // Nothing was there to lock: a concurrent caller may be right here too.
        upsert(conn, key, entry).await?;
        Ok(true)
    }
    .await;
    match written {
        Ok(written) => {
            conn.batch_execute("COMMIT").await?;
            evict(conn, limits).await?;
            Ok(written)
        }
        Err(err) => {
            let _ = conn.batch_execute("ROLLBACK").await;
            Err(err)
        }
    }
}

async fn upsert(conn: &Conn, key: &str, entry: &Entry) -> Result<(), tokio_postgres::Error> {
    let (value, size) = stored(key, entry);
    conn.exec(&UPSERT, &[&key.as_bytes(), &value, &key_hash(key), &size])
        .await?;
    Ok(())
}

/// Deletes the oldest entries (by id) beyond `max_entries`, and those older
/// than `max_age`, at most one batch at a time, whatever their expiry.
pub async fn evict(conn: &Conn, limits: CacheLimits) -> Result<(), tokio_postgres::Error> {
    let max_entries = limits.max_entries as i64;
    let max_age = limits.max_age.as_secs_f64();
    conn.exec(&EVICT, &[&max_entries, &max_age, &EVICTION_BATCH])
        .await?;
    Ok(())
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_hash_is_the_first_eight_bytes_of_sha256() {
        // SHA-256("a") starts ca978112ca1bbdca.
        assert_eq!(
            key_hash("a"),
            i64::from_be_bytes([0xca, 0x97, 0x81, 0x12, 0xca, 0x1b, 0xbd, 0xca])
        );
    }
}
