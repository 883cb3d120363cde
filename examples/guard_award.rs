//! The guard library's handler, as its documentation shows it (`idem::guard`):
//! an award of XP that runs once per idempotency key. Built by `cargo test`,
//! so the documentation's example always compiles; not meant to be run.

use idem::guard::{Guard, Key, Reply, Verdict, WorkFailed};
use serde_json::json;

async fn award(
    db: &tokio_postgres::Client,
    idempotency_key: &str,
    fingerprint: &str,
) -> Result<(u16, serde_json::Value), tokio_postgres::Error> {
    let key = Key {
        key: idempotency_key,
        operation: "award_xp",
        fingerprint: Some(fingerprint),
        owner: 1, // this request; a retry that presents it again resumes its claim
    };
    let verdict = Guard::default()
        .run(db, &key, |tx| async move {
            // Runs inside the transaction that completes the claim.
            let row = tx
                .query_one(
                    "INSERT INTO experience_points (user_id, amount) VALUES (42, 10) RETURNING id",
                    &[],
                )
                .await
                .map_err(WorkFailed::Database)?;
            let id: i64 = row.get(0);
            Ok(Reply {
                status: 201,
                body: json!({ "xp_id": id }),
            })
        })
        .await?;
    Ok(match verdict {
        Verdict::Done(reply) | Verdict::Replay(reply) => (reply.status, reply.body),
        Verdict::Failed { reply, .. } => (reply.status, reply.body),
        Verdict::InFlight { .. } => (409, json!({ "code": "idempotency_key_in_use" })),
        Verdict::Reused => (422, json!({ "code": "idempotency_key_reused" })),
    })
}

fn main() {
    // A handler to read, not a program: `award` needs a connection to a
    // database holding idem's tables.
    let _ = award;
}
