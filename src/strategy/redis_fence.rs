//! The fencing token (`--redis-fence`): the store of record, PostgreSQL, refuses a Redis claim's owner once a newer owner has shown it a newer token.
//!
//! A time to live is a guess: past it Redis hands the key to the next
//! request while the first may still be working. Redis cannot tell the
//! first it lost; only the store both write to can. So the claim hands out
//! an increasing number with the key (`INCR`), and every write to the key
//! in PostgreSQL carries it: the owner shows its token before the work
//! ([`ANNOUNCE`]), and the XP row and the completion go in only while the
//! key's row still holds that token ([`COMPLETE`]), in one statement. An
//! owner whose lease lapsed finds a newer token there and writes nothing.
//! What it did outside PostgreSQL (the service call) stays done: a token
//! fences writes the store checks, not the world.

use serde_json::Value;
use tokio_postgres::types::Type;

use super::OPERATION;
use super::work;
use crate::db::statements::{Sends, Sql};
use crate::request::Request;

/// The owner shows its token before it works: a new key row, or a pending
/// row whose token is older. A completed row, or a newer token, is left.
pub static ANNOUNCE: Sql = Sql::new(
    "INSERT INTO idempotency_keys AS k
            (key, operation, request_fingerprint, worker, locked_at, fencing_token)
     VALUES ($1, $2, $3, $4, now(), $5)
     ON CONFLICT (key) DO UPDATE
        SET fencing_token = EXCLUDED.fencing_token, worker = EXCLUDED.worker,
            locked_at = EXCLUDED.locked_at
      WHERE k.status = 'pending' AND k.fencing_token < EXCLUDED.fencing_token
     RETURNING id",
    &[Type::TEXT, Type::TEXT, Type::TEXT, Type::INT4, Type::INT8],
);

/// The XP row and the completion, in one statement, only while the key's
/// row still holds this token: the row is locked first, so a newer owner's
/// announce waits for this statement and then finds the key completed.
/// `$7` is the response without its XP id, which the statement adds.
pub static COMPLETE: Sql = Sql::new(
    "WITH fence AS (
         SELECT id FROM idempotency_keys
          WHERE key = $1 AND fencing_token = $2 AND status = 'pending'
          FOR UPDATE
     ), xp AS (
         INSERT INTO experience_points (user_id, amount, lesson, worker)
         SELECT $3, $4, $5, $6 FROM fence RETURNING id
     )
     UPDATE idempotency_keys AS k
        SET status = 'completed', completed_at = now(), response_code = 201,
            response_body = $7 || jsonb_build_object('xp_id', xp.id)
       FROM fence, xp
      WHERE k.id = fence.id
     RETURNING xp.id",
    &[
        Type::TEXT,
        Type::INT8,
        Type::INT8,
        Type::INT4,
        Type::INT4,
        Type::INT4,
        Type::JSONB,
    ],
);

/// Shows `token` to the store of record: whether the key is now this
/// owner's to write.
pub async fn announce(
    conn: &impl Sends,
    req: &Request,
    token: i64,
) -> Result<bool, tokio_postgres::Error> {
    let row = conn
        .fetch_opt(
            &ANNOUNCE,
            &[
                &req.key,
                &OPERATION,
                &req.fingerprint,
                &req.worker_id(),
                &token,
            ],
        )
        .await?;
    Ok(row.is_some())
}

/// Writes the XP row and completes the key if the key still holds `token`:
/// the XP row's id, or `None` when a newer owner's token is there.
pub async fn complete(
    conn: &impl Sends,
    req: &Request,
    token: i64,
) -> Result<Option<i64>, tokio_postgres::Error> {
    let p = &req.params;
    let mut body: Value = work::response_body(0, p);
    if let Some(fields) = body.as_object_mut() {
        fields.remove("xp_id");
    }
    let row = conn
        .fetch_opt(
            &COMPLETE,
            &[
                &req.key,
                &token,
                &p.user_id,
                &p.amount,
                &p.lesson,
                &req.worker_id(),
                &body,
            ],
        )
        .await?;
    Ok(row.map(|r| r.get(0)))
}
