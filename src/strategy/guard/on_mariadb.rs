//! The whole guard on MariaDB (InnoDB): the same claim, takeover and owner-checked completion as `core.rs`, in InnoDB's SQL.
//!
//! The claim commits on its own (`INSERT IGNORE`, so others see it). A
//! loser reads the claim: a completed one is replayed, a pending one older
//! than the stale-claim age is taken over by one conditional `UPDATE` (of
//! two takers, the row's lock lets one through), any other answers 409.
//! The owner then works and completes in one transaction, the completion
//! matching only while the claim is still its own; if it was taken over
//! meanwhile, the transaction rolls back, the XP row with it. A claim
//! first used with other parameters answers 422. Work that failed
//! (`--fail-work`) is rescued as on PostgreSQL: its 500 stored as the
//! key's response, or the claim deleted so that a retry works again
//! (`--on-failure`). With `--heartbeat-ms` the owner renews its claim's
//! `locked_at` while it works, from the beats' own connection (the
//! renewal must commit while the work's transaction is open), so that only
//! a silent owner's claim goes stale.

use std::future::Future;
use std::pin::Pin;

use sqlx::Row;

use crate::request::mariadb::{Answered, Bind, Ctx};
use crate::request::{ClaimPart, Outcome, Step};
use crate::strategy::OPERATION;
use crate::strategy::answers::{body_of, other_parameters, replayed, stored_xp};

pub const CLAIM: &str = "INSERT IGNORE INTO idempotency_keys \
    (`key`, operation, status, request_fingerprint, worker, locked_at) \
    VALUES (?, ?, 'pending', ?, ?, NOW(6))";

/// A loser reads the claim, and whether it is older than the stale-claim
/// age (in microseconds).
pub const READ: &str = "SELECT id, status, worker, response_body, \
    locked_at < NOW(6) - INTERVAL ? MICROSECOND, request_fingerprint, response_code \
    FROM idempotency_keys WHERE `key` = ?";

/// Take over a stale claim (or resume one's own), checked again under the
/// row's lock.
pub const TAKE_OVER: &str = "UPDATE idempotency_keys SET locked_at = NOW(6), worker = ? \
    WHERE id = ? AND status = 'pending' \
      AND (worker = ? OR locked_at < NOW(6) - INTERVAL ? MICROSECOND)";

/// Complete the claim only while it is still ours.
pub const COMPLETE_OWN: &str = "UPDATE idempotency_keys SET status = 'completed', \
    response_code = 201, response_body = ?, completed_at = NOW(6) \
    WHERE id = ? AND worker = ? AND status = 'pending'";

/// Failed work's 500, stored as the key's response while the claim is
/// still ours (`--on-failure store`, Stripe's way).
pub const STORE_FAILURE: &str = "UPDATE idempotency_keys SET status = 'completed', \
    response_code = 500, response_body = ?, completed_at = NOW(6) \
    WHERE id = ? AND worker = ? AND status = 'pending'";

/// The claim of failed work deleted while it is still ours, so that a
/// retry may work again (`--on-failure release`, Powertools' way).
pub const RELEASE_OWN: &str = "DELETE FROM idempotency_keys \
    WHERE id = ? AND worker = ? AND status = 'pending'";

/// Renews the claim's `locked_at` while it is still pending and ours.
pub const RENEW: &str = "UPDATE idempotency_keys SET locked_at = NOW(6) \
    WHERE id = ? AND worker = ? AND status = 'pending'";

/// The guard's shape on MariaDB.
pub fn shape(ctx: &mut Ctx) -> Pin<Box<dyn Future<Output = Answered> + Send + '_>> {
    Box::pin(async move {
        let key = ctx.asked.key.clone();
        let me = ctx.asked.worker as i64;
        let print = ctx.asked.fingerprint.clone();
        let claim = [
            Bind::Text(&key),
            Bind::Text(OPERATION),
            Bind::OptText(print.as_deref()),
            Bind::Int(me),
        ];
        let (id, saw) = match ctx.exec(Step::Claim, CLAIM, &claim).await {
            Ok(done) if done.rows_affected() == 1 => {
                ctx.note("claimed");
                (done.last_insert_id() as i64, "claimed".to_string())
            }
            Ok(_) => {
                ctx.note("key taken");
                match lost(ctx, &key).await {
                    Ok(taken) => taken,
                    Err(answered) => return answered,
                }
            }
            Err(err) => return ctx.failed(&err, "—", None),
        };
        work_and_complete(ctx, id, &saw).await
    })
}

/// The loser's path: `Ok((id, what it saw))` when it took a stale claim
/// over, else its answer.
async fn lost(ctx: &mut Ctx, key: &str) -> Result<(i64, String), Answered> {
    let stale_us = ctx.stale_after.as_micros() as i64;
    let on = [Bind::Int(stale_us), Bind::Text(key)];
    let row = match ctx.fetch_opt(Step::Read, READ, &on).await {
        Ok(Some(row)) => row,
        Ok(None) => {
            ctx.note("gone");
            return Err(Answered::new(
                Outcome::Conflict,
                "claim gone",
                "answered 409",
            ));
        }
        Err(err) => return Err(ctx.failed(&err, "key taken", None)),
    };
    let id: i64 = row.try_get(0).unwrap_or_default();
    let status: String = row.try_get(1).unwrap_or_default();
    let owner: Option<i64> = row
        .try_get::<Option<i32>, _>(2)
        .ok()
        .flatten()
        .map(i64::from);
    let stale = row.try_get::<Option<i64>, _>(4).ok().flatten() == Some(1);
    let stored: Option<String> = row.try_get(5).ok().flatten();
    if let Some(answered) = other_parameters(ctx, stored.as_deref()) {
        return Err(answered);
    }
    ctx.note(status.clone());
    let code: Option<i32> = row.try_get(6).ok().flatten();
    if status == "completed" && code == Some(500) {
        return Err(Answered::new(
            Outcome::Failed,
            "claim completed with 500",
            "replayed the stored 500",
        ));
    }
    if status == "completed" {
        let did = replayed(stored_xp(&row, 3));
        return Err(Answered::new(Outcome::Replayed, "claim completed", did));
    }
    let me = ctx.asked.worker as i64;
    if !stale && owner != Some(me) {
        return Err(Answered::new(
            Outcome::Conflict,
            "claim pending",
            "answered 409 at once",
        ));
    }
    let take = [
        Bind::Int(me),
        Bind::Int(id),
        Bind::Int(me),
        Bind::Int(stale_us),
    ];
    match ctx.exec(Step::Claim, TAKE_OVER, &take).await {
        Ok(done) if done.rows_affected() == 1 => {
            let from = owner.map_or("?".into(), |w| w.to_string());
            ctx.note(format!("took over a stale claim from worker {from}"));
            Ok((id, format!("worker {from}'s stale claim, taken over")))
        }
        Ok(_) => {
            ctx.note("another request took it first");
            Err(Answered::new(
                Outcome::Conflict,
                "claim stale",
                "another took it over: 409",
            ))
        }
        Err(err) => Err(ctx.failed(&err, "claim stale", None)),
    }
}

/// The work and the completion in one transaction, at InnoDB's default
/// level; the completion matches only while the claim is still ours.
async fn work_and_complete(ctx: &mut Ctx, id: i64, saw: &str) -> Answered {
    let _beating = ctx.beat(RENEW, &[ClaimPart::Id, ClaimPart::Owner], id);
    if ctx.asked.work_fails {
        return rescue(ctx, id, saw).await;
    }
    let level = crate::strategy::transaction::Isolation::INNODB_DEFAULT.on_mariadb();
    if let Err(err) = ctx.begin(level).await {
        return ctx.failed(&err, saw, None);
    }
    let xp = match ctx.work().await {
        Ok(xp) => xp,
        Err(err) => {
            let answered = ctx.failed(&err, saw, None);
            ctx.rollback().await;
            return answered;
        }
    };
    let body = body_of(&ctx.asked, xp);
    let a = &ctx.asked;
    let me = a.worker as i64;
    let complete = [Bind::Text(&body), Bind::Int(id), Bind::Int(me)];
    let completed = ctx.exec(Step::Complete, COMPLETE_OWN, &complete).await;
    match completed {
        Ok(done) if done.rows_affected() == 1 => match ctx.commit().await {
            Ok(()) => {
                ctx.note("completed, committed");
                let did = format!("made XP #{xp}, completed");
                Answered {
                    made_xp: Some(xp),
                    ..Answered::new(Outcome::Created, saw, did)
                }
            }
            Err(err) => ctx.failed(&err, saw, None),
        },
        Ok(_) => {
            ctx.rollback().await;
            ctx.note("not ours any more: rolled back");
            let did = format!("made XP #{xp}, rolled back: its claim was taken over");
            Answered::new(Outcome::Conflict, saw, did)
        }
        Err(err) => {
            let answered = ctx.failed(&err, saw, None);
            ctx.rollback().await;
            answered
        }
    }
}

/// The work failed (`--fail-work`): the service call was made and failed,
/// and nothing was written. The 500 is stored as the key's response, or
/// the claim deleted, each only while the claim is still ours.
async fn rescue(ctx: &mut Ctx, id: i64, saw: &str) -> Answered {
    if let Err(err) = ctx.failed_call().await {
        return ctx.failed(&err, saw, None);
    }
    let me = ctx.asked.worker as i64;
    let body = serde_json::json!({
        "error": { "type": "api_error", "message": "the award service failed" }
    })
    .to_string();
    let binds = [Bind::Text(&body), Bind::Int(id), Bind::Int(me)];
    let (sql, binds, did) = match ctx.release_failed {
        false => (STORE_FAILURE, &binds[..], "work failed, stored the 500"),
        true => (RELEASE_OWN, &binds[1..], "work failed, released the claim"),
    };
    let done = ctx.exec(Step::Complete, sql, binds).await;
    match done {
        Ok(done) if done.rows_affected() == 1 => {
            ctx.note(did);
            Answered::new(Outcome::Failed, saw, did)
        }
        Ok(_) => {
            ctx.note("not ours any more: left as it is");
            let did = "work failed; its claim was taken over meanwhile";
            Answered::new(Outcome::Failed, saw, did)
        }
        Err(err) => ctx.failed(&err, saw, None),
    }
}
