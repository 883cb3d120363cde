//! `idem::guard` used as a library: plain tokio-postgres clients, the caller's own work, no harness types.

use std::time::Duration;

use idem::db::{ConnectOptions, Database};
use idem::guard::{Guard, Key, OnFailure, Reply, Verdict, WorkFailed};
use serde_json::json;

/// A plain client, as a service would hold one.
async fn client(db: &Database) -> tokio_postgres::Client {
    // A service's tables are on its search path.
    let workers = db.workers_config();
    let mut config = workers.config.clone();
    config.options(format!("-c search_path={}", db.schema));
    let (client, connection) = config.connect(workers.tls.clone()).await.unwrap();
    tokio::spawn(connection);
    client
}

fn key<'a>(key: &'a str, fingerprint: &'a str, owner: i32) -> Key<'a> {
    Key {
        key,
        operation: "award_xp",
        fingerprint: Some(fingerprint),
        owner,
    }
}

/// The caller's work: one XP row, in the guard's transaction.
async fn award(tx: &tokio_postgres::Client, amount: i32) -> Result<Reply, WorkFailed> {
    let row = tx
        .query_one(
            "INSERT INTO experience_points (user_id, amount) VALUES (42, $1) RETURNING id",
            &[&amount],
        )
        .await
        .map_err(WorkFailed::Database)?;
    let id: i64 = row.get(0);
    Ok(Reply {
        status: 201,
        body: json!({ "xp_id": id, "amount": amount }),
    })
}

async fn xp_rows(db: &Database) -> i64 {
    sqlx::query_scalar(&db.sql("SELECT count(*) FROM experience_points"))
        .fetch_one(&db.meta)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_gets_done_then_replay_then_422_with_one_xp_row() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let c = client(&db).await;
    let guard = Guard::default();
    let first = guard
        .run(&c, &key("k-1", "fp-10", 1), |tx| award(tx, 10))
        .await
        .unwrap();
    let Verdict::Done(reply) = first else {
        panic!("{first:?}")
    };
    assert_eq!(reply.status, 201);
    let again = guard
        .run(&c, &key("k-1", "fp-10", 2), |tx| award(tx, 10))
        .await
        .unwrap();
    assert_eq!(again, Verdict::Replay(reply), "the stored reply, as it was");
    let other = guard
        .run(&c, &key("k-1", "fp-20", 3), |tx| award(tx, 20))
        .await
        .unwrap();
    assert_eq!(other, Verdict::Reused);
    assert_eq!(xp_rows(&db).await, 1);
    db.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_clients_at_once_with_one_key_make_one_xp_row() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let guard = std::sync::Arc::new(Guard::default());
    let gate = std::sync::Arc::new(tokio::sync::Barrier::new(5));
    let mut requests = tokio::task::JoinSet::new();
    for owner in 1..=5 {
        let (c, guard, gate) = (client(&db).await, guard.clone(), gate.clone());
        requests.spawn(async move {
            gate.wait().await;
            guard
                .run(&c, &key("k-race", "fp", owner), |tx| async move {
                    // A slow service call holds the claim open while the others arrive.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    award(tx, 10).await
                })
                .await
                .unwrap()
        });
    }
    let verdicts = requests.join_all().await;
    let done = verdicts
        .iter()
        .filter(|v| matches!(v, Verdict::Done(_)))
        .count();
    let waiting = verdicts
        .iter()
        .filter(|v| matches!(v, Verdict::InFlight { .. } | Verdict::Replay(_)))
        .count();
    assert_eq!((done, waiting), (1, 4), "{verdicts:?}");
    assert_eq!(xp_rows(&db).await, 1);
    db.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_work_keeps_nothing_and_is_stored_or_released() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let c = client(&db).await;
    for (on_failure, released, retry_works) in [
        (OnFailure::Store, false, false),
        (OnFailure::Release, true, true),
    ] {
        let guard = Guard {
            on_failure,
            ..Guard::default()
        };
        let k = format!("k-fail-{released}");
        let failed = guard
            .run(&c, &key(&k, "fp", 1), |tx| async move {
                // The row is written, then the service fails: the row must go.
                award(tx, 10).await?;
                Err(WorkFailed::Service("the award service failed".into()))
            })
            .await
            .unwrap();
        assert!(
            matches!(&failed, Verdict::Failed { reply, released: r } if reply.status == 500 && *r == released),
            "{failed:?}"
        );
        assert_eq!(
            xp_rows(&db).await,
            0,
            "{on_failure:?}: the failed work left nothing"
        );
        let retry = guard
            .run(&c, &key(&k, "fp", 2), |tx| award(tx, 10))
            .await
            .unwrap();
        assert_eq!(matches!(retry, Verdict::Done(_)), retry_works, "{retry:?}");
        db.reset().await.unwrap();
    }
    db.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_caller_chooses_the_failure_reply_and_a_retry_gets_it_back() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let c = client(&db).await;
    let guard = Guard::default();
    // The service's own message is passed through in the stored 500.
    let failed = guard
        .run(&c, &key("k-message", "fp", 1), |_| async {
            Err(WorkFailed::Service("the payment gateway timed out".into()))
        })
        .await
        .unwrap();
    let Verdict::Failed { reply, .. } = failed else {
        panic!("{failed:?}");
    };
    assert_eq!(reply.status, 500);
    assert_eq!(
        reply.body["error"]["message"],
        "the payment gateway timed out"
    );
    // A reply of the caller's own: stored, and replayed to the retry.
    let chosen = Reply {
        status: 502,
        body: json!({ "code": "upstream_failed" }),
    };
    let failed = guard
        .run(&c, &key("k-chosen", "fp", 1), |_| {
            let chosen = chosen.clone();
            async move { Err(WorkFailed::Replied(chosen)) }
        })
        .await
        .unwrap();
    assert_eq!(
        failed,
        Verdict::Failed {
            reply: chosen.clone(),
            released: false
        }
    );
    let retry = guard
        .run(&c, &key("k-chosen", "fp", 2), |tx| award(tx, 10))
        .await
        .unwrap();
    assert_eq!(retry, Verdict::Replay(chosen));
    assert_eq!(xp_rows(&db).await, 0, "no work was kept");
    db.close().await.unwrap();
}
