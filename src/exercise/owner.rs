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

use crate::db::mariadb::Mariadb;
use crate::db::{Database, book};
use crate::probe::conformance::Check;
use crate::race::Race;
use crate::race::mariadb::{self, MariadbRace};
use crate::race::moves::Move;
use crate::race::options::RaceInput;
use crate::race::raced::Raced;
use crate::race::stepper::Controller;
use crate::strategy::guard_file::{self, Dialect};
use crate::strategy::work::xp_id_of;

const CASE: &str = "a claim taken over while its owner works";
const DEMANDS: &str = "when the owner completes after a takeover, the taker's response stays \
     stored (the owner's XP row stays too: in this shape the work commits before the completion)";

/// The schedule: 1 checks out, claims, works; the clock; 2 checks out,
/// claims (a takeover), works, completes; 1 completes.
fn schedule() -> Vec<Move> {
    let (one, two) = (Move::Step(1), Move::Step(2));
    vec![one, one, one, Move::Clock, two, two, two, two, one]
}

/// What the order left: the XP row worker 2 made if it took the claim
/// over (it answered 201 with work of its own; which of the two is
/// labelled the duplicate depends on who answered first, not on who
/// owned the claim), and the XP row the stored response names.
struct Left {
    taker: Option<i64>,
    stored: Option<i64>,
}

/// Runs the case on the guard file at `file`, whose stale-claim age is
/// `stale_after_ms`, on the engine the file is written for.
pub async fn owner_completes(db: &Database, file: &Path, stale_after_ms: u64) -> Result<Check> {
    let input = RaceInput::default().with(|r| {
        r.strategy.strategy_file = Some(file.to_path_buf());
        r.shape.workers = Some(2);
        r.shape.schedule = Some(schedule());
        r.app.work_ms = Some(0);
        r.guard.stale_after_ms = Some(stale_after_ms);
    });
    let left = match guard_file::load(file)?.engine {
        Dialect::Mariadb => on_mariadb(db.mariadb().await?, &input).await?,
        Dialect::Postgres => on_postgres(db, &input).await?,
    };
    let left = match left {
        Ok(left) => left,
        Err(why) => {
            let saw = format!("the order could not be run: {why:#}");
            return Ok(Check::judged(CASE, DEMANDS, false, saw));
        }
    };
    let saw = match (left.taker, left.stored) {
        (None, _) => "worker 2 did not take the stale claim over",
        (Some(t), Some(s)) if t == s => "the taker's response is the one stored",
        (Some(_), Some(_)) => "the owner's late completion overwrote the taker's response",
        (Some(_), None) => "no response stored",
    };
    let held = left.taker.is_some() && left.taker == left.stored;
    Ok(Check::judged(CASE, DEMANDS, held, saw.to_string()))
}

/// The XP row worker 2 made, if it answered 201: the taker's.
fn taker(r: &impl Raced) -> Option<i64> {
    let replies = r.answers();
    let taker = replies.iter().find(|w| w.worker == 2 && w.status == 201);
    taker.and_then(|w| w.made_xp)
}

/// The order on PostgreSQL; an order that could not be run is the
/// inner error, a database that failed the outer.
async fn on_postgres(db: &Database, input: &RaceInput) -> Result<Result<Left>> {
    let settings = input.build_stepped()?;
    let key = settings.requests().key().to_string();
    let race = Race::prepare(db, settings).await?;
    let steps = schedule();
    let run = race
        .run_stepped(async |c: &mut Controller| c.follow(&steps, |_, _| Ok(())).await)
        .await;
    let r = match run {
        Ok(r) => r,
        Err(why) => return Ok(Err(why)),
    };
    let taker = taker(&r);
    let mut tx = db.book().await?;
    let body: Option<Option<serde_json::Value>> =
        book::query_scalar(&db.sql("SELECT response_body FROM idempotency_keys WHERE key = $1"))
            .bind(&key)
            .fetch_optional(&mut *tx)
            .await?;
    tx.commit().await?;
    let stored = body.flatten().as_ref().and_then(xp_id_of);
    Ok(Ok(Left { taker, stored }))
}

/// The same order on MariaDB.
async fn on_mariadb(db: &Mariadb, input: &RaceInput) -> Result<Result<Left>> {
    let race = MariadbRace::stepped_from_input(input)?;
    let steps = schedule();
    let run = mariadb::run_stepped(db, &race, async |c: &mut Controller| {
        c.follow(&steps, |_, _| Ok(())).await
    })
    .await;
    let r = match run {
        Ok(r) => r,
        Err(why) => return Ok(Err(why)),
    };
    let taker = taker(&r);
    let key = race.settings().requests().key();
    let body = mariadb::stored_response(&db.admin, key).await?;
    let stored = body
        .and_then(|b| serde_json::from_str(&b).ok())
        .as_ref()
        .and_then(xp_id_of);
    Ok(Ok(Left { taker, stored }))
}
