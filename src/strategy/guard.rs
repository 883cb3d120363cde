//! The whole guard (lesson 7): claim, work, complete, and where every failure goes.
//!
//! ```text
//! claim     INSERT the key as pending (with the fingerprint); autocommit, so
//!           others see it. Losing it is not an error but the loser's path:
//!             other fingerprint           → 422, no work
//!             completed                   → replay the stored response
//!             pending, ours (a retry)     → resume it
//!             pending, older than timeout → take it over (one taker wins)
//!             pending                     → 409
//! work      in one transaction with complete: the XP row and the claim's
//! complete  completion commit together or not at all, and complete only
//!           matches while the claim is still ours.
//! rescue    the work failed: store the 500 and replay it (Stripe), or delete
//!           the claim so a retry runs again (Powertools).
//! retry     a serialization failure, a deadlock or a lost connection is
//!           retried with the same key after a bounded backoff; anything
//!           else surfaces.
//! ```
//!
//! The guard implements [`Strategy`], the same trait a learner's guard
//! implements for `idem challenge` (see `examples/challenge.rs`).

use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};

use super::answers::{self, mismatch};
use super::{Handled, Step, Strategy, claim, complete, fingerprint, work};
use crate::db::pool::Conn;
use crate::request::{Answer, Failure, Lease, Outcome, Request, Trace};
use crate::store::ClaimStatus;

/// What the guard does when the work itself fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnFailure {
    /// Complete the claim with the 500 and replay it to retries (Stripe).
    Store,
    /// Delete the claim, so that a retry runs the work again (Powertools).
    Release,
}

/// The complete guard.
#[derive(Debug, Clone)]
pub struct Guard {
    /// How old a pending claim must be before another request may take it over.
    pub lock_timeout: Duration,
    pub on_failure: OnFailure,
    /// Retries after a transient failure, each after twice the last backoff.
    pub max_retries: u32,
    pub first_backoff: Duration,
}

impl Default for Guard {
    fn default() -> Self {
        Self {
            lock_timeout: Duration::from_secs(1),
            on_failure: OnFailure::Store,
            max_retries: 3,
            first_backoff: Duration::from_millis(10),
        }
    }
}

impl Strategy for Guard {
    fn handle<'a>(
        &'a self,
        lease: &'a mut Lease,
        req: &'a Request,
        trace: &'a mut Trace,
    ) -> Handled<'a> {
        Box::pin(async move {
            let mut backoff = self.first_backoff;
            let mut retries = 0;
            loop {
                match self.attempt(lease, req, trace).await {
                    Err(failure) if failure.is_transient() && retries < self.max_retries => {
                        // The same key again, on a fresh connection.
                        retries += 1;
                        lease.discard();
                        trace.note(format!("transient failure, retry {retries}: {failure}"));
                        tokio::time::sleep(backoff).await;
                        backoff *= 2;
                    }
                    other => return other,
                }
            }
        })
    }
}

/// The claim as another request left it.
struct Claim {
    id: i64,
    status: ClaimStatus,
    fingerprint: Option<String>,
    response_code: Option<i32>,
    body: Option<Value>,
    owner: Option<i32>,
    stale: bool,
}

impl Guard {
    async fn attempt(
        &self,
        lease: &mut Lease,
        req: &Request,
        trace: &mut Trace,
    ) -> Result<Answer, Failure> {
        let conn = lease.conn(trace).await?;
        // 1. Claim.
        let claim_id = match claim(conn, req, trace).await? {
            Some(id) => id,
            None => match self.lost(conn, req, trace).await? {
                Ok(id) => id,
                Err(answer) => return Ok(answer),
            },
        };
        // 2 and 3. Work and complete, together.
        self.work_and_complete(conn, req, trace, claim_id).await
    }

    /// The loser's path. `Ok(id)` when this request may go on with the claim
    /// after all (its own, or a stale one it took over); `Err(answer)` otherwise.
    async fn lost(
        &self,
        conn: &Conn,
        req: &Request,
        trace: &mut Trace,
    ) -> Result<Result<i64, Answer>, Failure> {
        let read = conn
            .prepare_cached(
                "SELECT id, status, request_fingerprint, response_code, response_body, worker,
                        locked_at < now() - make_interval(secs => $2)
                 FROM idempotency_keys WHERE key = $1",
            )
            .await?;
        let timeout = self.lock_timeout.as_secs_f64();
        let Some(row) = trace
            .query(Step::Read, conn.query_opt(&read, &[&req.key, &timeout]))
            .await?
        else {
            trace.note("gone");
            return Ok(Err(answers::conflict(
                req,
                "claim gone",
                "answered 409",
                None,
            )));
        };
        let claim = Claim {
            id: row.get(0),
            status: ClaimStatus::parse(row.get(1)),
            fingerprint: row.get(2),
            response_code: row.get(3),
            body: row.get(4),
            owner: row.get(5),
            stale: row.get::<_, Option<bool>>(6).unwrap_or(false),
        };
        trace.note(claim.status.name());
        if fingerprint::differs(req.fingerprint.as_deref(), claim.fingerprint.as_deref()) {
            return Ok(Err(mismatch(req)));
        }
        if claim.status == ClaimStatus::Completed {
            return Ok(Err(replay(claim)));
        }
        let ours = claim.owner == Some(req.worker_id());
        if !ours && !claim.stale {
            return Ok(Err(answers::conflict(
                req,
                "claim pending",
                "answered 409",
                None,
            )));
        }
        // Resume our own claim, or take over a stale one. The condition is
        // checked again under the row's lock, so of two requests arriving
        // after the timeout only one gets the row.
        let take = conn
            .prepare_cached(
                "UPDATE idempotency_keys SET locked_at = now(), worker = $2
                 WHERE id = $1 AND status = 'pending'
                   AND (worker = $2 OR locked_at < now() - make_interval(secs => $3))
                 RETURNING id",
            )
            .await?;
        let taken = trace
            .query(
                Step::Claim,
                conn.query_opt(&take, &[&claim.id, &req.worker_id(), &timeout]),
            )
            .await?;
        match taken {
            Some(_) if ours => {
                trace.note("resumed own claim");
                Ok(Ok(claim.id))
            }
            Some(_) => {
                let from = claim.owner.map_or("?".into(), |w| w.to_string());
                trace.note(format!("took over a stale claim from worker {from}"));
                Ok(Ok(claim.id))
            }
            None => {
                trace.note("another request took it first");
                Ok(Err(answers::conflict(
                    req,
                    "stale claim taken by another",
                    "answered 409",
                    None,
                )))
            }
        }
    }

    async fn work_and_complete(
        &self,
        conn: &Conn,
        req: &Request,
        trace: &mut Trace,
        claim_id: i64,
    ) -> Result<Answer, Failure> {
        trace.queries += 1;
        conn.batch_execute("BEGIN").await?;
        let done = async {
            if req.work_fails {
                work::service_call(req).await;
                return Ok(None);
            }
            let xp = trace.query(Step::Work, work::award_xp(conn, req)).await?;
            trace.note(format!("made XP #{xp}"));
            let body = work::response_body(xp, &req.params);
            let complete = conn
                .prepare_cached(
                    "UPDATE idempotency_keys
                     SET status = 'completed', response_code = 201, response_body = $3, completed_at = now()
                     WHERE id = $1 AND worker = $2 AND status = 'pending'",
                )
                .await?;
            let completed = trace
                .query(Step::Complete, conn.execute(&complete, &[&claim_id, &req.worker_id(), &body]))
                .await?;
            Ok::<_, Failure>(Some((xp, body, completed == 1)))
        }
        .await;
        match done {
            Ok(Some((xp, body, true))) => {
                trace.queries += 1;
                conn.batch_execute("COMMIT").await?;
                trace.note("completed");
                Ok(Answer {
                    outcome: Outcome::Created,
                    saw: "claim won".into(),
                    did: format!("made XP #{xp}, completed"),
                    made_xp: Some(xp),
                    body: Some(body),
                    waited: None,
                })
            }
            Ok(Some((_, _, false))) => {
                // Someone took the claim over while we worked: our XP row goes.
                trace.queries += 1;
                conn.batch_execute("ROLLBACK").await?;
                trace.note("claim lost to a takeover; rolled back");
                Ok(answers::conflict(
                    req,
                    "claim taken over",
                    "rolled back its work, 409",
                    None,
                ))
            }
            Ok(None) => {
                trace.queries += 1;
                conn.batch_execute("ROLLBACK").await?;
                self.rescue(conn, trace, claim_id).await
            }
            Err(failure) => {
                let _ = conn.batch_execute("ROLLBACK").await;
                Err(failure)
            }
        }
    }

    /// The work failed: store the failure, or release the claim.
    async fn rescue(
        &self,
        conn: &Conn,
        trace: &mut Trace,
        claim_id: i64,
    ) -> Result<Answer, Failure> {
        let body =
            json!({ "error": { "type": "api_error", "message": "the award service failed" } });
        match self.on_failure {
            OnFailure::Store => {
                complete(conn, trace, claim_id, 500, &body).await?;
                trace.note("stored the 500");
                Ok(failed(body, "work failed, stored the 500"))
            }
            OnFailure::Release => {
                let release = conn
                    .prepare_cached("DELETE FROM idempotency_keys WHERE id = $1")
                    .await?;
                trace
                    .query(Step::Complete, conn.execute(&release, &[&claim_id]))
                    .await?;
                trace.note("released the claim");
                Ok(failed(body, "work failed, released the claim"))
            }
        }
    }
}

fn replay(claim: Claim) -> Answer {
    if claim.response_code == Some(500) {
        return Answer {
            outcome: Outcome::Failed,
            saw: "claim completed with 500".into(),
            did: "replayed the stored 500".into(),
            made_xp: None,
            body: claim.body,
            waited: None,
        };
    }
    answers::replay(claim.body, "claim completed", None)
}

fn failed(body: Value, did: &str) -> Answer {
    Answer {
        outcome: Outcome::Failed,
        saw: "claim won".into(),
        did: did.into(),
        made_xp: None,
        body: Some(body),
        waited: None,
    }
}
