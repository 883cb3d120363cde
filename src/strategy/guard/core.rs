//! The guard's algorithm, once: on any client, watched by any observer.

use std::future::Future;
use std::task::Poll;

use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;

use serde_json::{Value, json};

use super::inputs::{GuardClient, Key};
use super::open_transaction::OpenTransaction;
use super::settings::{Guard, OnFailure};
use super::verdict::{ClaimState, Reply, Verdict, WorkFailed};
use crate::db::statements::Sql;
use crate::request::{Observer, Step};
use crate::store::ClaimStatus;
use crate::strategy::claims::{claim, complete};
use crate::strategy::fingerprint;

type Result<T> = std::result::Result<T, tokio_postgres::Error>;

/// A loser reads the claim, and whether it is stale.
static READ: Sql = Sql::new(
    "SELECT id, status, request_fingerprint, response_code, response_body, worker,
        locked_at < now() - make_interval(secs => $2)
     FROM idempotency_keys WHERE key = $1",
    &[Type::TEXT, Type::FLOAT8],
);

/// Resume one's own claim or take over a stale one, checked again under the row's lock.
static TAKE_OVER: Sql = Sql::new(
    "UPDATE idempotency_keys SET locked_at = now(), worker = $2
     WHERE id = $1 AND status = 'pending'
       AND (worker = $2 OR locked_at < now() - make_interval(secs => $3))
     RETURNING id",
    &[Type::INT8, Type::INT4, Type::FLOAT8],
);

/// What the trace shows for the caller's work, whose statements the guard
/// does not see. BEGIN goes out in the same round trip as the work's first
/// statement.
const WORK: &str = "BEGIN; -- then the work's own statements, in this transaction";

/// Complete the claim only while it is still ours; if it is not (taken over
/// while we worked), fail with division by zero, so that the transaction
/// is aborted and the COMMIT sent right behind it in the same round trip
/// rolls back instead.
const COMPLETE_OWN: &str = "WITH completed AS (
       UPDATE idempotency_keys
       SET status = 'completed', response_code = $3, response_body = $4, completed_at = now()
       WHERE id = $1 AND worker = $2 AND status = 'pending'
       RETURNING 1)
     SELECT 1 / (SELECT count(*)::int FROM completed); COMMIT";

/// The completion alone, as it is sent (COMMIT goes as its own message).
static COMPLETE_SQL: Sql = Sql::new(
    "WITH completed AS (
       UPDATE idempotency_keys
       SET status = 'completed', response_code = $3, response_body = $4, completed_at = now()
       WHERE id = $1 AND worker = $2 AND status = 'pending'
       RETURNING 1)
     SELECT 1 / (SELECT count(*)::int FROM completed)",
    &[Type::INT8, Type::INT4, Type::INT4, Type::JSONB],
);

/// What COMPLETE_OWN answers when the claim is no longer ours.
const NOT_OURS: SqlState = SqlState::DIVISION_BY_ZERO;

/// Release the claim so that a retry runs the work again (Powertools).
static RELEASE: Sql = Sql::new("DELETE FROM idempotency_keys WHERE id = $1", &[Type::INT8]);

/// One attempt at the whole request: claim, then the loser's path or the
/// work and its completion.
pub(crate) async fn attempt<'c, C, W, Fut, O>(
    guard: &Guard,
    client: &'c C,
    key: &Key<'_>,
    work: W,
    obs: &mut O,
) -> Result<Verdict>
where
    C: GuardClient,
    W: FnOnce(&'c C) -> Fut,
    Fut: Future<Output = std::result::Result<Reply, WorkFailed>> + Send,
    O: Observer,
{
    let claim_id = match claim(client, key, obs).await? {
        Some(id) => id,
        None => match lost(guard, client, key, obs).await? {
            Ok(id) => id,
            Err(verdict) => return Ok(verdict),
        },
    };
    work_and_complete(guard, client, key, work, obs, claim_id).await
}

/// The claim as another request left it.
struct Held {
    id: i64,
    status: ClaimStatus,
    fingerprint: Option<String>,
    response_code: Option<i32>,
    body: Option<Value>,
    owner: Option<i32>,
    stale: bool,
}

impl Held {
    /// The claim as the read returned it.
    fn of(row: &tokio_postgres::Row) -> Self {
        Held {
            id: row.get(0),
            status: ClaimStatus::parse(row.get(1)),
            fingerprint: row.get(2),
            response_code: row.get(3),
            body: row.get(4),
            owner: row.get(5),
            stale: row.get::<_, Option<bool>>(6).unwrap_or(false),
        }
    }

    /// A completed claim's stored answer; a stored code outside HTTP's
    /// range was not stored by a guard, and replays as 200.
    fn reply(self) -> Reply {
        let status = self
            .response_code
            .and_then(|c| u16::try_from(c).ok())
            .unwrap_or(200);
        Reply {
            status,
            body: self.body.unwrap_or(Value::Null),
        }
    }
}

/// The loser's path. `Ok(id)` when this request may go on with the claim
/// after all (its own, or a stale one it took over); `Err(verdict)` otherwise.
async fn lost<C: GuardClient, O: Observer>(
    guard: &Guard,
    client: &C,
    key: &Key<'_>,
    obs: &mut O,
) -> Result<std::result::Result<i64, Verdict>> {
    let timeout = guard.stale_after.as_secs_f64();
    let row = obs
        .step(
            Step::Read,
            READ.text,
            client.fetch_opt(&READ, &[&key.key, &timeout]),
        )
        .await?;
    let Some(row) = row else {
        obs.note("gone");
        return Ok(Err(Verdict::InFlight {
            why: ClaimState::Gone,
        }));
    };
    let held = Held::of(&row);
    obs.note(held.status.name());
    if fingerprint::differs(key.fingerprint, held.fingerprint.as_deref()) {
        return Ok(Err(Verdict::Reused));
    }
    if held.status == ClaimStatus::Completed {
        return Ok(Err(Verdict::Replay(held.reply())));
    }
    let ours = held.owner == Some(key.owner);
    if !ours && !held.stale {
        return Ok(Err(Verdict::InFlight {
            why: ClaimState::Pending,
        }));
    }
    // Resume our own claim, or take over a stale one. The condition is
    // checked again under the row's lock, so of two requests arriving
    // after the timeout only one gets the row.
    let taken = obs
        .step(
            Step::Claim,
            TAKE_OVER.text,
            client.fetch_opt(&TAKE_OVER, &[&held.id, &key.owner, &timeout]),
        )
        .await?;
    match taken {
        Some(_) if ours => {
            obs.note("resumed own claim");
            Ok(Ok(held.id))
        }
        Some(_) => {
            let from = held.owner.map_or("?".into(), |w| w.to_string());
            obs.note(&format!("took over a stale claim from worker {from}"));
            Ok(Ok(held.id))
        }
        None => {
            obs.note("another request took it first");
            Ok(Err(Verdict::InFlight {
                why: ClaimState::TakenByAnother,
            }))
        }
    }
}

/// The work and the completion in one transaction; the completion matches
/// only while the claim is still ours. Should this future be dropped
/// before the transaction ends, the transaction is rolled back
/// ([`OpenTransaction`]) and the claim stays pending, ours.
async fn work_and_complete<'c, C, W, Fut, O>(
    guard: &Guard,
    client: &'c C,
    key: &Key<'_>,
    work: W,
    obs: &mut O,
    claim_id: i64,
) -> Result<Verdict>
where
    C: GuardClient,
    W: FnOnce(&'c C) -> Fut,
    Fut: Future<Output = std::result::Result<Reply, WorkFailed>> + Send,
    O: Observer,
{
    // Renewed while the work runs, if the guard beats: dropped with this
    // future, the claim ages from its last beat.
    let _renewing = guard
        .heartbeat
        .as_ref()
        .and_then(|beats| beats.renew(claim_id, key.owner));
    let open = OpenTransaction::begin(client.client());
    // Every way out of this call has ended the transaction, or tried to.
    let verdict = in_transaction(guard, client, key, work, obs, claim_id).await;
    open.ended();
    verdict
}

/// [`work_and_complete`] from its BEGIN to its COMMIT or ROLLBACK.
async fn in_transaction<'c, C, W, Fut, O>(
    guard: &Guard,
    client: &'c C,
    key: &Key<'_>,
    work: W,
    obs: &mut O,
    claim_id: i64,
) -> Result<Verdict>
where
    C: GuardClient,
    W: FnOnce(&'c C) -> Fut,
    Fut: Future<Output = std::result::Result<Reply, WorkFailed>> + Send,
    O: Observer,
{
    obs.sent();
    // BEGIN, then the work's first statement right behind it: one round trip.
    let begun_and_worked = in_order(client.client().batch_execute("BEGIN"), work(client));
    let (begun, worked) = obs.step(Step::Work, WORK, begun_and_worked).await;
    if let Err(err) = begun {
        let _ = client.client().batch_execute("ROLLBACK").await;
        return Err(err);
    }
    let reply = match worked {
        Ok(reply) => reply,
        Err(WorkFailed::Service(message)) => {
            obs.sent();
            client.client().batch_execute("ROLLBACK").await?;
            return rescue(guard, client, obs, claim_id, service_failed(&message)).await;
        }
        Err(WorkFailed::Replied(reply)) => {
            obs.sent();
            client.client().batch_execute("ROLLBACK").await?;
            return rescue(guard, client, obs, claim_id, reply).await;
        }
        Err(WorkFailed::Database(err)) => {
            let _ = client.client().batch_execute("ROLLBACK").await;
            return Err(err);
        }
    };
    obs.worked(&reply.body);
    // Prepared first, where the connection prepares by name: the completion
    // must go out on its future's first poll, ahead of the COMMIT.
    if let Err(err) = client.prepared(&COMPLETE_SQL).await {
        let _ = client.client().batch_execute("ROLLBACK").await;
        return Err(err);
    }
    obs.sent();
    // The completion, then the COMMIT right behind it: one round trip. A
    // completion that fails aborts the transaction, and the COMMIT then
    // rolls it back.
    let code = i32::from(reply.status);
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
        [&claim_id, &key.owner, &code, &reply.body];
    let completed_and_committed = in_order(
        client.exec(&COMPLETE_SQL, &params),
        client.client().batch_execute("COMMIT"),
    );
    let (completed, committed) = obs
        .step(Step::Complete, COMPLETE_OWN, completed_and_committed)
        .await;
    settle(client, obs, completed, committed, reply).await
}

/// What the completion and its COMMIT came to: done, a claim lost to a
/// takeover (the COMMIT rolled our rows back), or an error.
async fn settle<C: GuardClient, O: Observer>(
    client: &C,
    obs: &mut O,
    completed: Result<u64>,
    committed: Result<()>,
    reply: Reply,
) -> Result<Verdict> {
    match (completed, committed) {
        (Ok(_), Ok(())) => {
            obs.note("completed");
            Ok(Verdict::Done(reply))
        }
        (Err(err), Ok(())) if err.code() == Some(&NOT_OURS) => {
            // Someone took the claim over while we worked: the COMMIT
            // rolled our rows back.
            obs.note("claim lost to a takeover; rolled back");
            Ok(Verdict::InFlight {
                why: ClaimState::TakenOver,
            })
        }
        (Err(err), _) | (Ok(_), Err(err)) => {
            let _ = client.client().batch_execute("ROLLBACK").await;
            Err(err)
        }
    }
}

/// Runs two requests together, `first`'s sent before `second`'s:
/// tokio-postgres sends a request on its future's first poll, and the
/// connection answers in the order it was asked, so the two share one
/// round trip, in this order.
async fn in_order<A: Future, B: Future>(first: A, second: B) -> (A::Output, B::Output) {
    let mut first = std::pin::pin!(first);
    let sent = std::future::poll_fn(|cx| Poll::Ready(first.as_mut().poll(cx))).await;
    let first = async {
        match sent {
            Poll::Ready(done) => done,
            Poll::Pending => first.await,
        }
    };
    tokio::join!(first, second)
}

/// The reply for a service that failed with `message`: a 500, in the
/// shape Stripe gives its API errors.
fn service_failed(message: &str) -> Reply {
    Reply {
        status: 500,
        body: json!({ "error": { "type": "api_error", "message": message } }),
    }
}

/// The work failed with `reply`: store it, or release the claim.
async fn rescue<C: GuardClient, O: Observer>(
    guard: &Guard,
    client: &C,
    obs: &mut O,
    claim_id: i64,
    reply: Reply,
) -> Result<Verdict> {
    match guard.on_failure {
        OnFailure::Store => {
            complete(client, obs, claim_id, i32::from(reply.status), &reply.body).await?;
            obs.note("stored the 500");
            Ok(Verdict::Failed {
                reply,
                released: false,
            })
        }
        OnFailure::Release => {
            obs.step(
                Step::Complete,
                RELEASE.text,
                client.exec(&RELEASE, &[&claim_id]),
            )
            .await?;
            obs.note("released the claim");
            Ok(Verdict::Failed {
                reply,
                released: true,
            })
        }
    }
}
