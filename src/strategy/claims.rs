//! The key table's claim and completion: one insert decides the winner, one update stores the response.
//!
//! Claim-work-complete (lesson 2) and the whole guard (lesson 7) claim and
//! complete the same way, on any [`GuardClient`], watched by any [`Observer`].

use serde_json::Value;

use tokio_postgres::types::Type;

use super::guard::inputs::Key;
use crate::db::statements::{Sends, Sql};
use crate::request::{Observer, Request, Step};

/// The request as the key table sees it.
pub fn key_of<'a>(req: &'a Request, operation: &'a str) -> Key<'a> {
    Key {
        key: &req.key,
        operation,
        fingerprint: req.fingerprint.as_deref(),
        owner: req.worker_id(),
    }
}

/// The claim: a pending row the unique index lets in once.
pub static CLAIM: Sql = Sql::new(
    "INSERT INTO idempotency_keys (key, operation, status, request_fingerprint, worker, locked_at)
     VALUES ($1, $2, 'pending', $3, $4, now())
     ON CONFLICT (key) DO NOTHING
     RETURNING id",
    &[Type::TEXT, Type::TEXT, Type::TEXT, Type::INT4],
);

/// The completion: the response stored for later requests to replay.
pub static COMPLETE: Sql = Sql::new(
    "UPDATE idempotency_keys
     SET status = 'completed', response_code = $2, response_body = $3, completed_at = now()
     WHERE id = $1",
    &[Type::INT8, Type::INT4, Type::JSONB],
);

/// Inserts the pending claim, with the fingerprint; `Some(id)` if this
/// request won it.
pub async fn claim<C: Sends, O: Observer>(
    client: &C,
    key: &Key<'_>,
    obs: &mut O,
) -> Result<Option<i64>, tokio_postgres::Error> {
    let won = obs
        .step(
            Step::Claim,
            CLAIM.text,
            client.fetch_opt(
                &CLAIM,
                &[&key.key, &key.operation, &key.fingerprint, &key.owner],
            ),
        )
        .await?;
    obs.note(if won.is_some() {
        "claim won"
    } else {
        "claim taken"
    });
    Ok(won.map(|row| row.get(0)))
}

/// Completes the claim with the response later requests will replay.
pub async fn complete<C: Sends, O: Observer>(
    client: &C,
    obs: &mut O,
    claim_id: i64,
    code: i32,
    body: &Value,
) -> Result<(), tokio_postgres::Error> {
    obs.step(
        Step::Complete,
        COMPLETE.text,
        client.exec(&COMPLETE, &[&claim_id, &code, body]),
    )
    .await?;
    Ok(())
}
