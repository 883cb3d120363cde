//! Lesson 3: what a request that loses the claim does, and what each policy costs.
//!
//! The work is made much longer than a loser's first look at the claim, so
//! that the losers find the claim pending: that is the situation the lesson
//! is about, not a timing tuned to pass.

use std::time::Duration;

use idem::db::{ConnectOptions, Database};
use idem::race::{Race, RaceResult, RaceSettings};
use idem::strategy::{LoserPolicy, StrategyKind};

const WORK: Duration = Duration::from_millis(300);
const LONGER: Duration = Duration::from_secs(5);
const SHORTER: Duration = Duration::from_millis(50);

fn settings(loser: LoserPolicy) -> RaceSettings {
    RaceSettings {
        strategy: StrategyKind::ClaimWorkComplete,
        work: WORK,
        loser,
        ..RaceSettings::default()
    }
}

async fn race(db: &Database, s: RaceSettings) -> RaceResult {
    Race::prepare(db, s).await.unwrap().run(1).await.unwrap()
}

fn winners_body(r: &RaceResult) -> serde_json::Value {
    let winner = r
        .reports
        .iter()
        .find(|w| w.status == 201)
        .expect("one winner");
    winner.body.clone().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_fast_answers_409_with_stripes_code_and_makes_one_xp_row() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let r = race(&db, settings(LoserPolicy::FailFast)).await;
    db.close().await.unwrap();
    assert_eq!(r.xp_rows, 1);
    assert_eq!((r.count("created"), r.count("conflict")), (1, 4));
    for w in r.reports.iter().filter(|w| w.status == 409) {
        let error = &w.body.as_ref().unwrap()["error"];
        assert_eq!(error["code"], "idempotency_key_in_use");
        assert!(error["message"].as_str().unwrap().contains("retry"));
        assert!(w.waited.is_none(), "fail-fast does not wait");
    }
    assert_eq!(r.loser_policy, Some("fail-fast"));
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
        let r = race(&db, settings(policy)).await;
        assert_eq!(r.xp_rows, 1, "{policy:?}");
        assert_eq!(
            (r.count("created"), r.count("replayed")),
            (1, 4),
            "{policy:?}"
        );
        let body = winners_body(&r);
        for w in r.reports.iter().filter(|w| w.status == 200) {
            assert_eq!(
                w.body.as_ref(),
                Some(&body),
                "{policy:?}: every replay carries the winner's body"
            );
        }
        let waiters: Vec<_> = r.reports.iter().filter_map(|w| w.waited).collect();
        assert!(!waiters.is_empty(), "{policy:?}: losers waited");
        match policy {
            LoserPolicy::Poll { .. } => {
                assert!(waiters.iter().all(|w| !w.held_connection && w.reads >= 2));
            }
            _ => {
                assert!(waiters.iter().all(|w| w.held_connection && w.reads == 0));
                // The losers that waited on the claim's lock name the winner as the holder.
                let winner = r.reports.iter().find(|w| w.status == 201).unwrap().worker;
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
        let r = race(&db, settings(policy)).await;
        assert_eq!(r.xp_rows, 1, "{policy:?}");
        assert_eq!(
            (r.count("created"), r.count("conflict")),
            (1, 4),
            "{policy:?}"
        );
    }
    db.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocked_losers_starve_the_pool_and_checkouts_time_out() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let s = RaceSettings {
        workers: 20,
        pool_size: 5,
        checkout_timeout: Duration::from_millis(100),
        ..settings(LoserPolicy::Block {
            give_up_after: LONGER,
        })
    };
    let r = race(&db, s).await;
    db.close().await.unwrap();
    assert_eq!(r.xp_rows, 1);
    assert_eq!(r.duplicates, 0);
    // Four connections: the winner and three blocked losers hold them all
    // for the whole work; the other sixteen give up waiting for one.
    assert_eq!(r.count("checkout_timeout"), 16);
    assert_eq!((r.count("created"), r.count("replayed")), (1, 3));
}
