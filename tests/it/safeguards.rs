//! Every safeguard the guard claims, pinned by a test that fails when that safeguard alone is removed.
//!
//! Where timing would decide, the interleaving is a step-by-step schedule
//! (the machinery of `idem step`), so the same steps meet in the same order
//! every run. Each test names the safeguard it pins; docs/tests.md lists
//! them, and `cargo mutants` checks that they bite.

use std::time::Duration;

use idem::db::{ConnectOptions, Database};
use idem::race::options::RaceInput;
use idem::race::stepper::{Controller, Standing};
use idem::race::{Outcome, Race, RaceResult, RaceSettings, WorkerReport};
use idem::store::StoreKind;
use idem::strategy::{LoserPolicy, Step, StrategyKind};

use crate::common::Built;

/// The guard's stale-claim timeout in these tests.
const STALE_AFTER: Duration = Duration::from_millis(300);

/// A claim older than the timeout, with a margin for the server's clock
/// reading: waiting this long is what makes a claim stale, by definition.
const PAST_THE_TIMEOUT: Duration = Duration::from_millis(400);

fn guard(workers: usize) -> RaceInput {
    RaceInput::default().with(|r| {
        r.strategy.strategy = Some(StrategyKind::Guard);
        r.shape.workers = Some(workers as u64);
        r.app.pool_size = Some((workers + 1) as u64);
        r.app.work_ms = Some(0);
        r.guard.stale_after_ms = Some(STALE_AFTER.as_millis() as u64);
    })
}

/// Every shape that keeps a claim: the guard, and claim-work-complete in both stores.
const CLAIM_SHAPES: [(StrategyKind, StoreKind); 3] = [
    (StrategyKind::Guard, StoreKind::Table),
    (StrategyKind::ClaimWorkComplete, StoreKind::Table),
    (StrategyKind::ClaimWorkComplete, StoreKind::Cache),
];

async fn stepped(
    db: &Database,
    settings: RaceSettings,
    drive: impl AsyncFnOnce(&mut Controller) -> anyhow::Result<()>,
) -> RaceResult {
    Race::prepare(db, settings)
        .await
        .unwrap()
        .run_stepped(drive)
        .await
        .unwrap()
}

/// Moves `worker` on until it is paused before `step`.
async fn until_before(c: &mut Controller, worker: usize, step: Step) -> anyhow::Result<()> {
    c.settle_all().await;
    while c.standing[&worker] != Standing::Before(step) {
        if c.standing[&worker] == Standing::Finished {
            anyhow::bail!("worker {worker} finished before reaching {}", step.name());
        }
        c.advance(worker).await.map_err(anyhow::Error::msg)?;
    }
    Ok(())
}

/// Moves `worker` on until it has answered.
async fn until_finished(c: &mut Controller, worker: usize) -> anyhow::Result<()> {
    c.settle_all().await;
    while c.standing[&worker] != Standing::Finished {
        c.advance(worker).await.map_err(anyhow::Error::msg)?;
    }
    Ok(())
}

fn report(r: &RaceResult, worker: usize) -> &WorkerReport {
    r.reports
        .iter()
        .find(|w| w.worker == worker && !w.retry)
        .unwrap()
}

fn notes(w: &WorkerReport) -> Vec<&str> {
    w.steps.iter().map(|e| e.note.as_str()).collect()
}

fn did_work(w: &WorkerReport) -> bool {
    w.steps.iter().any(|e| e.step == Step::Work)
}

async fn xp_rows(db: &Database) -> i64 {
    sqlx::query_scalar(&db.sql("SELECT count(*) FROM experience_points"))
        .fetch_one(&db.meta)
        .await
        .unwrap()
}

/// Safeguard: claim uniqueness. Two requests that claim in lockstep: the
/// unique index lets one claim, and the other does no work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_claims_in_lockstep_the_database_lets_one_through() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let r = stepped(&db, guard(2).built(), async |c| {
        until_before(c, 1, Step::Claim).await?;
        until_before(c, 2, Step::Claim).await?;
        c.advance(1).await.map_err(anyhow::Error::msg)?;
        c.advance(2).await.map_err(anyhow::Error::msg)?;
        until_finished(c, 2).await?;
        until_finished(c, 1).await
    })
    .await;
    db.close().await.unwrap();
    assert_eq!((r.key_rows, r.xp_rows), (1, 1));
    assert_eq!(report(&r, 1).outcome, Outcome::Created);
    let loser = report(&r, 2);
    assert_eq!(loser.status, 409, "{:?}", notes(loser));
    assert!(!did_work(loser));
}

/// Safeguard: 409 while the first request is in flight (Stripe's
/// `idempotency_key_in_use`), for the claim shapes with fail-fast losers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_arriving_while_the_claim_is_pending_gets_409_and_does_no_work() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    for (strategy, store) in CLAIM_SHAPES {
        let r = stepped(
            &db,
            guard(2)
                .with(|r| {
                    r.strategy.strategy = Some(strategy);
                    r.store.store = Some(store);
                })
                .built(),
            async |c| {
                until_before(c, 1, Step::Work).await?;
                until_finished(c, 2).await?;
                until_finished(c, 1).await
            },
        )
        .await;
        let loser = report(&r, 2);
        assert_eq!(
            loser.status,
            409,
            "{strategy} ({store:?}): {:?}",
            notes(loser)
        );
        assert_eq!(
            loser.body.as_ref().unwrap()["error"]["code"],
            "idempotency_key_in_use"
        );
        assert!(!did_work(loser), "{strategy} ({store:?})");
        assert_eq!(report(&r, 1).status, 201, "{strategy} ({store:?})");
        assert_eq!(r.xp_rows, 1, "{strategy} ({store:?})");
    }
    db.close().await.unwrap();
}

/// Safeguard: the replay. A request after completion gets the stored
/// response, byte for byte, and makes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_after_completion_replays_the_stored_response() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    for (strategy, store) in CLAIM_SHAPES {
        let r = stepped(
            &db,
            guard(2)
                .with(|r| {
                    r.strategy.strategy = Some(strategy);
                    r.store.store = Some(store);
                })
                .built(),
            async |c| {
                until_finished(c, 1).await?;
                until_finished(c, 2).await
            },
        )
        .await;
        let (first, replay) = (report(&r, 1), report(&r, 2));
        assert_eq!(
            (first.status, replay.status),
            (201, 201),
            "{strategy} ({store:?})"
        );
        assert_eq!(replay.outcome, Outcome::Replayed);
        assert_eq!(
            serde_json::to_string(&first.body).unwrap(),
            serde_json::to_string(&replay.body).unwrap(),
            "{strategy} ({store:?}): the same body"
        );
        assert_eq!((replay.made_xp, did_work(replay)), (None, false));
        assert_eq!(r.xp_rows, 1);
    }
    db.close().await.unwrap();
}

/// Safeguard: 422 before any work, on every loser path and in both stores:
/// the same key with another amount is refused, never replayed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reused_key_with_other_parameters_gets_422_before_any_work_on_every_path() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let wait = Duration::from_secs(5);
    let cases = [
        (
            "table, fail-fast",
            StrategyKind::ClaimWorkComplete,
            StoreKind::Table,
            LoserPolicy::FailFast,
        ),
        (
            "table, poll",
            StrategyKind::ClaimWorkComplete,
            StoreKind::Table,
            LoserPolicy::Poll {
                every: Duration::from_millis(5),
                give_up_after: wait,
            },
        ),
        (
            "table, block",
            StrategyKind::ClaimWorkComplete,
            StoreKind::Table,
            LoserPolicy::Block {
                give_up_after: wait,
            },
        ),
        (
            "cache",
            StrategyKind::ClaimWorkComplete,
            StoreKind::Cache,
            LoserPolicy::FailFast,
        ),
        (
            "guard",
            StrategyKind::Guard,
            StoreKind::Table,
            LoserPolicy::FailFast,
        ),
    ];
    for (what, strategy, store, loser) in cases {
        for (order, winner) in [
            ("before completion", Step::Work),
            ("after completion", Step::Checkout),
        ] {
            let loser = crate::common::races::loser_input(loser);
            let settings = guard(2).with(|r| {
                r.strategy.strategy = Some(strategy);
                r.store.store = Some(store);
                r.losers = loser.losers.clone();
                r.amounts.amounts = Some(vec![10, 20]);
            });
            let r = stepped(&db, settings.built(), async |c| {
                if winner == Step::Work {
                    until_before(c, 1, Step::Work).await?;
                } else {
                    until_finished(c, 1).await?;
                }
                // The loser runs free: block waits on the winner's claim.
                c.run_free().await;
                Ok(())
            })
            .await;
            let reused = report(&r, 2);
            assert_eq!(
                reused.outcome,
                Outcome::Mismatch,
                "{what}, {order}: {} {:?}",
                reused.status,
                notes(reused)
            );
            assert_eq!(reused.status, 422);
            assert!(!did_work(reused), "{what}, {order}: before any work");
            assert_eq!(r.wrong_replays, 0, "{what}, {order}");
            assert_eq!(r.xp_rows, 1, "{what}, {order}");
        }
    }
    db.close().await.unwrap();
}

/// Safeguard: a stale claim is taken over by exactly one taker, and the
/// database decides which. Two takers read the claim as stale; the first
/// UPDATE takes it, and the second, re-checked under the row lock, is told
/// it was taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_takers_of_a_stale_claim_exactly_one_takes_it() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let r = stepped(&db, guard(3).built(), async |c| {
        // Worker 1 claims, then stalls as a crashed request would.
        until_before(c, 1, Step::Work).await?;
        tokio::time::sleep(PAST_THE_TIMEOUT).await;
        // Both takers read the claim: stale for each of them.
        until_before(c, 2, Step::Read).await?;
        until_before(c, 3, Step::Read).await?;
        c.advance(2).await.map_err(anyhow::Error::msg)?;
        c.advance(3).await.map_err(anyhow::Error::msg)?;
        // Both try to take it over, one after the other.
        c.advance(2).await.map_err(anyhow::Error::msg)?;
        c.advance(3).await.map_err(anyhow::Error::msg)?;
        until_finished(c, 3).await?;
        until_finished(c, 2).await?;
        until_finished(c, 1).await
    })
    .await;
    db.close().await.unwrap();
    let took = |w: &WorkerReport| {
        notes(w)
            .iter()
            .any(|n| n.starts_with("took over a stale claim"))
    };
    let (taker, late) = (report(&r, 2), report(&r, 3));
    assert!(took(taker), "{:?}", notes(taker));
    assert!(
        !took(late),
        "the second taker did not take it: {:?}",
        notes(late)
    );
    assert!(notes(late).contains(&"another request took it first"));
    assert_eq!((taker.status, late.status), (201, 409));
    assert_eq!(r.xp_rows, 1);
}

/// Safeguard: only the claim's current owner completes it. A slow winner
/// whose claim was taken over mid-work cannot complete, and its XP row is
/// rolled back with its failed completion; in either order of completion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_winner_whose_claim_was_taken_over_cannot_complete() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    for taker_first in [true, false] {
        let r = stepped(&db, guard(2).built(), async |c| {
            until_before(c, 1, Step::Work).await?;
            tokio::time::sleep(PAST_THE_TIMEOUT).await;
            until_before(c, 2, Step::Work).await?; // worker 2 took the claim over
            if taker_first {
                until_finished(c, 2).await?;
                until_finished(c, 1).await
            } else {
                until_finished(c, 1).await?;
                until_finished(c, 2).await
            }
        })
        .await;
        let (slow, taker) = (report(&r, 1), report(&r, 2));
        let order = if taker_first {
            "taker completes first"
        } else {
            "slow winner completes first"
        };
        assert!(did_work(slow), "{order}: the slow winner worked");
        assert_eq!(slow.status, 409, "{order}: {:?}", notes(slow));
        assert!(notes(slow).contains(&"claim lost to a takeover; rolled back"));
        assert_eq!(
            (taker.status, taker.outcome),
            (201, Outcome::Created),
            "{order}: {:?}",
            notes(taker)
        );
        assert_eq!(r.xp_rows, 1, "{order}");
    }
    db.close().await.unwrap();
}

/// Safeguard: the work and the completion commit together. Between them,
/// no other session sees the XP row; after, it sees both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_work_is_invisible_until_the_completion_commits_with_it() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let mut seen = Vec::new();
    let r = stepped(&db, guard(1).built(), async |c| {
        until_before(c, 1, Step::Complete).await?; // the XP row is written
        seen.push(xp_rows(&db).await);
        until_finished(c, 1).await?;
        seen.push(xp_rows(&db).await);
        Ok(())
    })
    .await;
    db.close().await.unwrap();
    assert_eq!(report(&r, 1).status, 201);
    assert_eq!(
        seen,
        vec![0, 1],
        "XP rows seen before and after the completion"
    );
}

/// Safeguard: the same, under a real crash: a connection that dies between
/// the work and the completion takes its XP row with it, every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_before_the_completion_never_leaves_its_xp_row() {
    use idem::race::CrashPlan;
    use idem::race::fault::FaultPoint;
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let race = Race::prepare(
        &db,
        guard(1)
            .with(|r| {
                r.shape.workers = Some(1);
                r.app.pool_size = Some(3);
                r.faults.crash = Some(CrashPlan {
                    worker: Some(1),
                    at: FaultPoint::BeforeComplete,
                });
            })
            .built(),
    )
    .await
    .unwrap();
    for run in 1..=10 {
        let r = race.run(run).await.unwrap();
        assert_eq!(r.count(Outcome::Crashed), 1, "run {run}");
        assert_eq!(r.xp_rows, 1, "run {run}: only the retry's XP row");
        let retry = r.reports.iter().find(|w| w.retry).unwrap();
        assert_eq!(retry.status, 201, "run {run}");
    }
    db.close().await.unwrap();
}
