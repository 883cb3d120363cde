//! Lesson 3: what a request that loses the claim does, and what each policy costs.
//!
//! The work is made much longer than a loser's first look at the claim, so
//! that the losers find the claim pending: that is the situation the lesson
//! is about, not a timing tuned to pass.

use std::time::Duration;

use idem::db::{ConnectOptions, Database};
use idem::race::options::RaceInput;
use idem::race::{Outcome, Race, RaceResult, RaceSettings};
use idem::strategy::{LoserPolicy, StrategyKind};

use crate::common::Built;
use crate::common::races::race;

const WORK: Duration = Duration::from_millis(300);
const LONGER: Duration = Duration::from_secs(5);
const SHORTER: Duration = Duration::from_millis(50);

fn settings(loser: LoserPolicy) -> RaceInput {
    crate::common::races::loser_input(loser).with(|r| {
        r.strategy.strategy = Some(StrategyKind::ClaimWorkComplete);
        r.app.work_ms = Some(WORK.as_millis() as u64);
    })
}

/// Runs a race while another session watches the server, and returns the
/// most workers it saw waiting on a lock at once: a connection held while
/// waiting, as PostgreSQL itself reports it.
async fn race_watching_locks(db: &Database, s: RaceSettings) -> (RaceResult, i64) {
    let prepared = Race::prepare(db, s).await.unwrap();
    let done = std::sync::atomic::AtomicBool::new(false);
    let run = async {
        let r = prepared.run(1).await.unwrap();
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        r
    };
    let watch = async {
        let mut most = 0;
        while !done.load(std::sync::atomic::Ordering::SeqCst) {
            let waiting: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE application_name = 'idem-worker' AND wait_event_type = 'Lock'",
            )
            .fetch_one(&db.meta)
            .await
            .unwrap();
            most = most.max(waiting);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        most
    };
    tokio::join!(run, watch)
}

fn winners_body(r: &RaceResult) -> serde_json::Value {
    let winner = r
        .reports
        .iter()
        .find(|w| w.outcome == Outcome::Created)
        .expect("one winner");
    winner.body.clone().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_fast_answers_409_with_stripes_code_and_makes_one_xp_row() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let r = race(&db, settings(LoserPolicy::FailFast).built()).await;
    db.close().await.unwrap();
    assert_eq!(r.xp_rows, 1);
    assert_eq!(
        (r.count(Outcome::Created), r.count(Outcome::Conflict)),
        (1, 4)
    );
    for w in r.reports.iter().filter(|w| w.status == 409) {
        let error = &w.body.as_ref().unwrap()["error"];
        assert_eq!(error["code"], "idempotency_key_in_use");
        assert!(error["message"].as_str().unwrap().contains("retry"));
    }
    // Measured, not declared: every 409 was sent while the winner still worked.
    let winner = r
        .reports
        .iter()
        .find(|w| w.outcome == Outcome::Created)
        .unwrap();
    assert!(winner.answer_ms >= WORK.as_secs_f64() * 1000.0);
    for w in r.reports.iter().filter(|w| w.status == 409) {
        assert!(
            w.answer_ms < winner.answer_ms,
            "worker {} answered at {:.1} ms, the winner at {:.1} ms",
            w.worker,
            w.answer_ms,
            winner.answer_ms
        );
    }
    assert_eq!(r.loser_policy, Some(idem::strategy::LoserKind::FailFast));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poll_and_block_with_a_long_enough_wait_replay_the_winners_response() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let policies = [
        LoserPolicy::Poll {
            every: Duration::from_millis(5),
            give_up_after: LONGER,
        },
        LoserPolicy::Block {
            give_up_after: LONGER,
        },
    ];
    for policy in policies {
        let (r, most_waiting_on_a_lock) = race_watching_locks(&db, settings(policy).built()).await;
        // The counts are scenarios/3-poll.toml's and 3-block.toml's; here,
        // what the replays carry and what waiting held.
        let body = winners_body(&r);
        for w in r.reports.iter().filter(|w| w.outcome == Outcome::Replayed) {
            assert_eq!(
                w.body.as_ref(),
                Some(&body),
                "{policy:?}: every replay carries the winner's body"
            );
        }
        let waiters: Vec<_> = r.reports.iter().filter(|w| w.waited.is_some()).collect();
        assert!(!waiters.is_empty(), "{policy:?}: losers waited");
        match policy {
            LoserPolicy::Poll { .. } => {
                // Nobody waits on a lock, and each waiting loser gave its
                // connection back to the pool and took one again to re-read.
                assert_eq!(most_waiting_on_a_lock, 0, "poll holds no lock");
                for w in &waiters {
                    assert!(
                        w.checkouts >= 2,
                        "worker {}: {} checkouts",
                        w.worker,
                        w.checkouts
                    );
                    assert!(w.waited.unwrap().reads >= 2);
                }
            }
            _ => {
                // The server saw losers waiting on the winner's lock, each on
                // the one connection it checked out.
                assert!(most_waiting_on_a_lock >= 1, "block waits on a lock");
                assert!(waiters.iter().all(|w| w.checkouts == 1));
                // The losers that waited on the claim's lock name the winner as the holder.
                let winner = r
                    .reports
                    .iter()
                    .find(|w| w.outcome == Outcome::Created)
                    .unwrap()
                    .worker;
                let blocked: Vec<_> = r
                    .reports
                    .iter()
                    .filter(|w| !w.blocked_by.is_empty())
                    .collect();
                assert!(
                    !blocked.is_empty(),
                    "pg_blocking_pids saw the blocked losers"
                );
                assert!(blocked.iter().all(|w| w.blocked_by == vec![winner]));
            }
        }
    }
    db.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poll_and_block_with_a_shorter_wait_end_in_409_and_still_one_xp_row() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let policies = [
        LoserPolicy::Poll {
            every: Duration::from_millis(5),
            give_up_after: SHORTER,
        },
        LoserPolicy::Block {
            give_up_after: SHORTER,
        },
    ];
    for policy in policies {
        let r = race(&db, settings(policy).built()).await;
        assert_eq!(r.xp_rows, 1, "{policy:?}");
        assert_eq!(
            (r.count(Outcome::Created), r.count(Outcome::Conflict)),
            (1, 4),
            "{policy:?}"
        );
    }
    db.close().await.unwrap();
}

/// A waiting loser gives up when its wait runs out: not at once, and not
/// only when the winner is done. Measured from the answers, for both policies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_loser_gives_up_when_its_wait_runs_out() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let wait = Duration::from_millis(150);
    let work = Duration::from_millis(600);
    for policy in [
        LoserPolicy::Poll {
            every: Duration::from_millis(5),
            give_up_after: wait,
        },
        LoserPolicy::Block {
            give_up_after: wait,
        },
    ] {
        let r = race(
            &db,
            settings(policy)
                .with(|r| {
                    r.app.pool_size = Some(6);
                    r.app.work_ms = Some(work.as_millis() as u64);
                })
                .built(),
        )
        .await;
        let winner = r
            .reports
            .iter()
            .find(|w| w.outcome == Outcome::Created)
            .unwrap();
        let gave_up: Vec<_> = r.reports.iter().filter(|w| w.status == 409).collect();
        assert_eq!(gave_up.len(), 4, "{policy:?}");
        // Poll gives up when its next read would come after the wait, so at
        // the wait less one poll interval at the earliest; block at the wait.
        let earliest = (wait - Duration::from_millis(5)).as_secs_f64() * 1000.0;
        for w in gave_up {
            let waited = w.answer_ms - w.checkout_wait_ms;
            assert!(
                waited >= earliest,
                "{policy:?}: worker {} gave up after {waited:.0} ms",
                w.worker
            );
            assert!(
                w.answer_ms < winner.answer_ms,
                "{policy:?}: worker {} waited for the winner ({:.0} ms ≥ {:.0} ms)",
                w.worker,
                w.answer_ms,
                winner.answer_ms
            );
        }
    }
    db.close().await.unwrap();
}
