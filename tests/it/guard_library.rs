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

/// Where a guard's future is dropped in [`a_guard_dropped_at_any_await_leaves_no_transaction_and_a_key_a_retry_finishes`].
#[derive(Debug, Clone, Copy)]
enum DroppedAt {
    /// Waiting for its claim's answer (another transaction holds the key).
    Claim,
    /// Inside its work, after the work's own INSERT.
    Work,
    /// With its completion and COMMIT sent, waiting for their answer.
    Completion,
}

/// A deadpool pool of one connection, as a service's pool would be, with
/// its tables on the search path.
fn pool_of_one(db: &Database) -> deadpool_postgres::Pool {
    let workers = db.workers_config();
    let mut config = workers.config.clone();
    config.options(format!("-c search_path={}", db.schema));
    config.application_name("guard-dropped");
    let manager = deadpool_postgres::Manager::from_config(
        config,
        workers.tls.clone(),
        deadpool_postgres::ManagerConfig {
            recycling_method: deadpool_postgres::RecyclingMethod::Fast,
        },
    );
    deadpool_postgres::Pool::builder(manager)
        .max_size(1)
        .build()
        .unwrap()
}

/// Waits (at most 10 s) until server process `pid` waits for a lock.
async fn waits_for_a_lock(observer: &tokio_postgres::Client, pid: i32) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let row = observer
            .query_one(
                "SELECT coalesce(wait_event_type, '') FROM pg_stat_activity WHERE pid = $1",
                &[&pid],
            )
            .await
            .unwrap();
        if row.get::<_, String>(0) == "Lock" {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "process {pid} never waited for its lock"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Drops one guard's future at `at`, and returns the server process of
/// the pool's one connection.
async fn drop_guard_at(
    at: DroppedAt,
    pool: &deadpool_postgres::Pool,
    blocker: &mut tokio_postgres::Client,
    observer: &tokio_postgres::Client,
    key_name: &str,
) -> i32 {
    let conn = pool.get().await.unwrap();
    let pid: i32 = conn
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    let (worked_tx, worked) = tokio::sync::oneshot::channel::<()>();
    let (go, go_rx) = tokio::sync::oneshot::channel::<()>();
    let guard = Guard::default();
    let k = key(key_name, "fp-10", 1);
    let conn_ref: &tokio_postgres::Client = &conn;
    let mut running = Box::pin(guard.run(conn_ref, &k, move |tx| async move {
        let reply = award(tx, 10).await?;
        let _ = worked_tx.send(());
        match at {
            // The work never ends: the request is dropped inside it.
            DroppedAt::Work => std::future::pending::<()>().await,
            _ => {
                let _ = go_rx.await;
            }
        }
        Ok(reply)
    }));
    let tx = match at {
        DroppedAt::Claim => {
            // Another transaction inserts the same key and holds it, so
            // the guard's claim waits for its answer.
            let tx = blocker.transaction().await.unwrap();
            tx.execute(
                "INSERT INTO idempotency_keys (key, operation) VALUES ($1, 'award_xp')",
                &[&key_name],
            )
            .await
            .unwrap();
            tokio::select! {
                done = &mut running => panic!("the claim did not wait: {done:?}"),
                () = waits_for_a_lock(observer, pid) => {}
            }
            Some(tx)
        }
        DroppedAt::Work => {
            tokio::select! {
                done = &mut running => panic!("the work did not start: {done:?}"),
                _ = worked => {}
            }
            None
        }
        DroppedAt::Completion => {
            tokio::select! {
                done = &mut running => panic!("the work did not start: {done:?}"),
                _ = worked => {}
            }
            // The claim's row locked by another transaction: the
            // completion, once sent, waits for it.
            let tx = blocker.transaction().await.unwrap();
            tx.execute(
                "SELECT 1 FROM idempotency_keys WHERE key = $1 FOR UPDATE",
                &[&key_name],
            )
            .await
            .unwrap();
            let _ = go.send(());
            tokio::select! {
                done = &mut running => panic!("the completion did not wait: {done:?}"),
                () = waits_for_a_lock(observer, pid) => {}
            }
            Some(tx)
        }
    };
    drop(running);
    drop(conn);
    // The other transaction lets go: what the dropped future had sent runs.
    if let Some(tx) = tx {
        match at {
            DroppedAt::Claim => tx.rollback().await.unwrap(),
            _ => tx.commit().await.unwrap(),
        }
    }
    pid
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_dropped_at_any_await_leaves_no_transaction_and_a_key_a_retry_finishes() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let pool = pool_of_one(&db);
    let mut blocker = client(&db).await;
    let observer = client(&db).await;
    for (i, at) in [DroppedAt::Claim, DroppedAt::Work, DroppedAt::Completion]
        .into_iter()
        .enumerate()
    {
        let key_name = format!("dropped-{i}");
        let xp_before = xp_rows(&db).await;
        let pid = drop_guard_at(at, &pool, &mut blocker, &observer, &key_name).await;
        the_connection_comes_back_clean(&pool, &observer, pid, at).await;
        the_key_is_as_documented(&db, &pool, &observer, &key_name, at, xp_before).await;
    }
    drop(pool);
    db.close().await.unwrap();
}

/// The pool's next user of a dropped guard's connection gets it outside
/// any transaction, and none is left idle in one.
async fn the_connection_comes_back_clean(
    pool: &deadpool_postgres::Pool,
    observer: &tokio_postgres::Client,
    pid: i32,
    at: DroppedAt,
) {
    // It gets the same connection, outside any
    // transaction: its statement is the first of a transaction of its own.
    let next = pool.get().await.unwrap();
    // (One simple query: its transaction starts with it, so now() is
    // its own start unless an older transaction is still open.)
    let said = next
        .simple_query("SELECT pg_backend_pid(), now() = statement_timestamp()")
        .await
        .unwrap();
    let row = said
        .iter()
        .find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(row) => Some(row),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{at:?}: one row: {said:?}"));
    assert_eq!(
        row.get(0),
        Some(pid.to_string().as_str()),
        "{at:?}: the pool's one connection"
    );
    assert!(
        row.get(1) == Some("t"),
        "{at:?}: the next user of the connection is inside the dropped request's transaction"
    );
    drop(next);
    let idle_in_transaction: i64 = observer
        .query_one(
            "SELECT count(*) FROM pg_stat_activity
             WHERE application_name = 'guard-dropped' AND state LIKE 'idle in transaction%'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(idle_in_transaction, 0, "{at:?}");
}

/// The key's row after the drop, as the guard's documentation says; then
/// another caller is told the key is in flight, and the same request's
/// retry (its owner) finishes it or replays what was finished: one XP row.
async fn the_key_is_as_documented(
    db: &Database,
    pool: &deadpool_postgres::Pool,
    observer: &tokio_postgres::Client,
    key_name: &str,
    at: DroppedAt,
    xp_before: i64,
) {
    // The key's row, as the guard's documentation says.
    let status: String = observer
        .query_one(
            &format!(
                "SELECT status FROM {}.idempotency_keys WHERE key = $1",
                db.schema
            ),
            &[&key_name],
        )
        .await
        .unwrap()
        .get(0);
    let xp_left = xp_rows(db).await - xp_before;
    match at {
        DroppedAt::Claim | DroppedAt::Work => {
            assert_eq!(status, "pending", "{at:?}: the claim stays, ours");
            assert_eq!(xp_left, 0, "{at:?}: the work was rolled back");
        }
        DroppedAt::Completion => {
            assert_eq!(
                status, "completed",
                "{at:?}: completion and COMMIT were sent"
            );
            assert_eq!(xp_left, 1, "{at:?}");
        }
    }
    // Another caller is told the key is in flight; the same request's
    // retry (its owner) finishes it, or replays what was finished.
    let conn = pool.get().await.unwrap();
    let other = Guard::default()
        .run(&**conn, &key(key_name, "fp-10", 2), |tx| award(tx, 10))
        .await
        .unwrap();
    let retry = Guard::default()
        .run(&**conn, &key(key_name, "fp-10", 1), |tx| award(tx, 10))
        .await
        .unwrap();
    match at {
        DroppedAt::Claim | DroppedAt::Work => {
            assert!(
                matches!(other, Verdict::InFlight { .. }),
                "{at:?}: {other:?}"
            );
            assert!(
                matches!(&retry, Verdict::Done(reply) if reply.status == 201),
                "{at:?}: {retry:?}"
            );
        }
        DroppedAt::Completion => {
            assert!(matches!(other, Verdict::Replay(_)), "{at:?}: {other:?}");
            assert!(matches!(retry, Verdict::Replay(_)), "{at:?}: {retry:?}");
        }
    }
    assert_eq!(
        xp_rows(db).await - xp_before,
        1,
        "{at:?}: one XP row in the end"
    );
}
