//! Lesson 5: where the reservation lives. The key table against a Solid-Cache-like store.

use std::time::Duration;

use idem::db::{ConnectOptions, Database};
use idem::race::options::RaceInput;
use idem::race::{Outcome, Race, RaceResult, RaceSettings};
use idem::store::StoreKind;
use idem::store::audit::audit;
use idem::store::reap::{reap, seed};
use idem::strategy::StrategyKind;

use crate::common::Built;

fn settings(store: StoreKind) -> RaceInput {
    RaceInput::default().with(|r| {
        r.strategy.strategy = Some(StrategyKind::ClaimWorkComplete);
        r.store.store = Some(store);
        r.store.cache_max_entries = Some(50);
    })
}

async fn races(db: &Database, s: RaceSettings, runs: usize) -> Vec<RaceResult> {
    let race = Race::prepare(db, s).await.unwrap();
    let mut out = Vec::new();
    for run in 1..=runs {
        out.push(race.run(run).await.unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_table_store_makes_one_xp_row_with_and_without_cache_pressure() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    for pressure in [0, 60] {
        let s = settings(StoreKind::Table).with(|r| r.eviction.cache_pressure = Some(pressure));
        for r in races(&db, s.built(), 10).await {
            assert_eq!(r.xp_rows, 1, "pressure {pressure}");
            if pressure > 0 {
                let retry = r
                    .reports
                    .iter()
                    .find(|w| w.retry)
                    .expect("a retry after the pressure");
                assert_eq!(
                    (retry.status, retry.outcome),
                    (201, Outcome::Replayed),
                    "the table store replays the retry"
                );
            }
        }
    }
    db.close().await.unwrap();
}

/// Probabilistic: write(unless_exist) has nothing to lock while the entry is
/// missing. Over 20 races of 5 workers the rate of races with duplicates is
/// reported; the assertion is only that it is not zero (it is near 100% here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_in_the_cache_store_duplicate_when_the_entry_is_absent() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let results = races(&db, settings(StoreKind::Cache).built(), 20).await;
    let table = races(&db, settings(StoreKind::Table).built(), 20).await;
    db.close().await.unwrap();
    let duplicated = results.iter().filter(|r| r.xp_rows > 1).count();
    eprintln!("cache store: {duplicated} of 20 races made more than one XP row");
    assert!(duplicated > 0);
    assert!(
        table.iter().all(|r| r.xp_rows == 1),
        "the table store never duplicates"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_makes_the_retry_do_the_work_again_on_the_cache_store() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let s = settings(StoreKind::Cache).with(|r| {
        r.shape.workers = Some(1);
        r.eviction.cache_pressure = Some(60);
    });
    let r = races(&db, s.built(), 1).await.remove(0);
    db.close().await.unwrap();
    // 2 XP rows: scenarios/5-cache-eviction.toml. Here, who made the second.
    let retry = r.reports.iter().find(|w| w.retry).unwrap();
    assert!(retry.made_xp.is_some());
    assert_eq!(retry.outcome.name(), "duplicate");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_table_keeps_an_audit_trail_and_the_cache_an_opaque_value() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let table = races(&db, settings(StoreKind::Table).built(), 1)
        .await
        .remove(0);
    let table_audit = audit(&db, &table.key).await.unwrap();
    let cache = races(&db, settings(StoreKind::Cache).built(), 1)
        .await
        .remove(0);
    let cache_audit = audit(&db, &cache.key).await.unwrap();
    db.close().await.unwrap();

    let row = table_audit.table.expect("the claim's row");
    let winner = table
        .reports
        .iter()
        .find(|w| w.outcome == Outcome::Created)
        .unwrap();
    assert_eq!(row.worker, Some(winner.worker as i32), "who claimed it");
    assert_eq!(row.status, "completed");
    assert_eq!(
        row.fingerprint, winner.fingerprint,
        "with which fingerprint"
    );
    assert_eq!(row.response_code, Some(201));
    assert!(
        row.took_ms.unwrap() >= 20.0,
        "how long the work took (20 ms of work)"
    );
    assert!(table_audit.cache.is_none());

    assert!(
        cache_audit.table.is_none(),
        "the cache store keeps nothing in the key table"
    );
    let entry = cache_audit.cache.expect("the entry is still there");
    assert!(entry.byte_size > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reap_deletes_exactly_the_completed_keys_older_than_the_cutoff() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    db.reset().await.unwrap();
    let ages = [1.0, 23.0, 25.0, 71.0, 73.0, 96.0];
    seed(&db, &ages, 2).await.unwrap();
    let reaped = reap(&db, Duration::from_secs(72 * 3600)).await.unwrap();
    let again = reap(&db, Duration::from_secs(24 * 3600)).await.unwrap();
    db.close().await.unwrap();
    let rounded = |v: &[f64]| v.iter().map(|h| h.round() as i64).collect::<Vec<_>>();
    assert_eq!(rounded(&reaped.removed_hours), [73, 96]);
    assert_eq!(rounded(&reaped.kept_hours), [1, 23, 25, 71]);
    assert_eq!(reaped.pending_kept, 2, "pending claims are not reaped");
    assert_eq!(rounded(&again.removed_hours), [25, 71]);
    assert_eq!(rounded(&again.kept_hours), [1, 23]);
}
