//! `claim-work-complete`: claim the key as pending, do the work, complete the claim (lesson 2).
//!
//! The same three steps as check-then-store in a new order. The claim is an
//! insert, so the unique index decides who owns the key before any work runs;
//! a request that loses the claim never reaches the work.

use serde_json::Value;

use super::{Handled, OPERATION, Step, Strategy, work};
use crate::db::pool::Conn;
use crate::race::{Answer, Outcome, Request, Trace};

/// Claim, work, complete; a loser replays a completed claim or answers 409.
pub struct ClaimWorkComplete;

impl Strategy for ClaimWorkComplete {
    fn handle<'a>(&'a self, conn: &'a Conn, req: &'a Request, trace: &'a mut Trace) -> Handled<'a> {
        Box::pin(async move {
            // 1. Claim: insert the key as pending; the unique index picks one winner.
            let claim = conn
                .prepare_cached(
                    "INSERT INTO idempotency_keys (key, operation, status, worker, locked_at)
                     VALUES ($1, $2, 'pending', $3, now())
                     ON CONFLICT (key) DO NOTHING
                     RETURNING id",
                )
                .await?;
            let won = trace
                .time(
                    Step::Claim,
                    conn.query_opt(&claim, &[&req.key, &OPERATION, &req.worker_id()]),
                )
                .await?;

            let Some(won) = won else {
                trace.note("claim taken");
                return lose(conn, req, trace).await;
            };
            trace.note("claim won");
            let claim_id: i64 = won.get(0);

            // 2. Work: only the claim's owner gets here.
            let xp = trace.time(Step::Work, work::award_xp(conn, req)).await?;
            trace.note(format!("made XP #{xp}"));
            let body = work::response_body(req, xp);

            // 3. Complete: store the response for the requests that come later.
            let complete = conn
                .prepare_cached(
                    "UPDATE idempotency_keys
                     SET status = 'completed', response_code = 201, response_body = $2,
                         completed_at = now()
                     WHERE id = $1",
                )
                .await?;
            trace
                .time(Step::Complete, conn.execute(&complete, &[&claim_id, &body]))
                .await?;
            trace.note("completed");
            Ok(Answer {
                outcome: Outcome::Created,
                saw: "claim won".into(),
                did: format!("made XP #{xp}, completed"),
                made_xp: Some(xp),
                body: Some(body),
            })
        })
    }
}

/// The loser's path: read the claim; replay it if completed, else 409.
async fn lose(
    conn: &Conn,
    req: &Request,
    trace: &mut Trace,
) -> Result<Answer, tokio_postgres::Error> {
    let read = conn
        .prepare_cached("SELECT status, response_body FROM idempotency_keys WHERE key = $1")
        .await?;
    let row = trace
        .time(Step::Read, conn.query_opt(&read, &[&req.key]))
        .await?;
    let (status, body): (String, Option<Value>) = match row {
        Some(row) => (row.get(0), row.get(1)),
        // The claim vanished between our insert and our read; treat it as in progress.
        None => ("missing".into(), None),
    };
    if status == "completed" {
        let xp = body.as_ref().and_then(work::xp_id_of);
        trace.note("completed");
        return Ok(Answer {
            outcome: Outcome::Replayed,
            saw: "claim completed".into(),
            did: xp.map_or("replayed".into(), |xp| format!("replayed XP #{xp}")),
            made_xp: None,
            body,
        });
    }
    trace.note("pending");
    Ok(Answer {
        outcome: Outcome::Conflict,
        saw: "claim pending".into(),
        did: "answered 409".into(),
        made_xp: None,
        body: Some(serde_json::json!({
            "error": { "code": "idempotency_key_in_use",
                       "message": "another request with this key is in progress; retry later" }
        })),
    })
}
