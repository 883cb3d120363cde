//! Exercise 7's case no burst settles: a claim taken over while its owner still works, and the owner's late completion, which must leave the taker's response stored.
//!
//! The order is fixed, so the case is the same every run: worker 1 claims
//! and works; the clock moves past the stale-claim age (`clock` in an
//! `idem step` schedule: the claim's time is set back, nobody sleeps);
//! worker 2 takes the claim over, works and completes; then worker 1
//! completes. A completion that checks only the claim's id overwrites the
//! taker's stored response with its own, so a later retry is replayed the
//! answer of a request that no longer owned the key.

use std::path::Path;

use anyhow::Result;
use serde_json::Value;

use crate::db::{Database, book};
use crate::probe::conformance::Check;
use crate::race::Race;
use crate::race::moves::Move;
use crate::race::options::RaceInput;
use crate::race::stepper::Controller;

const CASE: &str = "a claim taken over while its owner works";
const DEMANDS: &str = "when the owner completes after a takeover, the taker's response stays \
     stored (the owner's XP row stays too: in this shape the work commits before the completion)";

/// The schedule: 1 checks out, claims, works; the clock; 2 checks out,
/// claims (a takeover), works, completes; 1 completes.
fn schedule() -> Vec<Move> {
    let (one, two) = (Move::Step(1), Move::Step(2));
    vec![one, one, one, Move::Clock, two, two, two, two, one]
}

/// Runs the case on the guard file at `file`, whose stale-claim age is
/// `stale_after_ms`.
pub async fn owner_completes(db: &Database, file: &Path, stale_after_ms: u64) -> Result<Check> {
    let input = RaceInput::default().with(|r| {
        r.strategy.strategy_file = Some(file.to_path_buf());
        r.shape.workers = Some(2);
        r.shape.schedule = Some(schedule());
        r.app.work_ms = Some(0);
        r.guard.stale_after_ms = Some(stale_after_ms);
    });
    let settings = input.build_stepped()?;
    let key = settings.requests().key().to_string();
    let race = Race::prepare(db, settings).await?;
    let steps = schedule();
    let run = race
        .run_stepped(async |c: &mut Controller| c.follow(&steps, |_, _| Ok(())).await)
        .await;
    let r = match run {
        Ok(r) => r,
        Err(why) => {
            return Ok(Check::judged(
                CASE,
                DEMANDS,
                false,
                format!("the order could not be run: {why:#}"),
            ));
        }
    };
    let stored = stored_response(db, &key).await?;
    // Worker 2 took the claim over if it worked: it answered 201 with an
    // XP row of its own (which of the two is labelled the duplicate
    // depends on who answered first, not on who owned the claim).
    let taker = r
        .reports
        .iter()
        .find(|w| w.worker == 2 && w.status == 201 && w.made_xp.is_some());
    let saw = match (taker, &stored) {
        (None, _) => "worker 2 did not take the stale claim over".to_string(),
        (Some(t), Some(s)) if t.body.as_ref() == Some(s) => {
            "the taker's response is the one stored".to_string()
        }
        (Some(_), Some(_)) => "the owner's late completion overwrote the taker's response".into(),
        (Some(_), None) => "no response stored".into(),
    };
    let held = taker.is_some_and(|t| t.body.is_some() && t.body == stored);
    Ok(Check::judged(CASE, DEMANDS, held, saw))
}

/// The response stored with `key`, if any.
async fn stored_response(db: &Database, key: &str) -> Result<Option<Value>> {
    let mut tx = db.book().await?;
    let body: Option<Option<Value>> =
        book::query_scalar(&db.sql("SELECT response_body FROM idempotency_keys WHERE key = $1"))
            .bind(key)
            .fetch_optional(&mut *tx)
            .await?;
    tx.commit().await?;
    Ok(body.flatten())
}
