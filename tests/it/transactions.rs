//! Lesson 8 against a real PostgreSQL: the request's transaction saves the rows and not the work, the locks people add, and the matrix.
//!
//! The call counts are probabilistic in the way lesson 1's XP rows are (the
//! losers must find no key before the first store); where a test asserts
//! one it asserts a rate over runs, measured at 100% of 200 runs on an idle
//! machine (docs/transactions.md).

use idem::db::{ConnectOptions, Database};
use idem::race::options::RaceInput;
use idem::race::{Outcome, RaceResult};
use idem::strategy::Step;
use idem::strategy::StrategyKind;
use idem::strategy::transaction::{Isolation, Transaction};
use serde_json::Value;

use crate::common::races::races;
use crate::common::{Built, Sandbox, TIMING};

async fn open() -> Database {
    Database::open(&ConnectOptions::default()).await.unwrap()
}

fn within(strategy: StrategyKind, isolation: Isolation, retries: u64) -> RaceInput {
    RaceInput::default().with(|r| {
        r.strategy.strategy = Some(strategy);
        r.transaction.transaction = Some(Transaction::Request);
        r.transaction.isolation = Some(isolation);
        r.transaction.retry_serialization = Some(retries);
    })
}

/// The SQLSTATEs the requests that did not create the row met.
fn codes(r: &RaceResult) -> Vec<String> {
    let mut codes: Vec<String> = r
        .reports
        .iter()
        .filter_map(|w| w.error.as_ref().map(|e| e.code.clone()))
        .collect();
    codes.sort();
    codes.dedup();
    codes
}

/// Runs where the award service was called `calls` times.
fn runs_with_calls(results: &[RaceResult], calls: u64) -> usize {
    results.iter().filter(|r| r.service_calls == calls).count()
}

/// The heart of lesson 8: the losers' rollback takes their XP rows, and
/// the calls their work made stay counted, one per request that worked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_transaction_rolls_back_the_rows_and_not_the_service_calls() {
    let _serial = TIMING.lock().await;
    let db = open().await;
    let input = within(StrategyKind::CheckThenStore, Isolation::ReadCommitted, 0);
    let results = races(&db, input.built(), 50).await;
    db.close().await.unwrap();
    for r in &results {
        assert_eq!((r.key_rows, r.xp_rows), (1, 1), "one key, one XP row");
        let worked = r
            .reports
            .iter()
            .filter(|w| w.steps.iter().any(|e| e.step == Step::Work))
            .count() as u64;
        assert_eq!(r.service_calls, worked, "a call per request that worked");
        let rolled: Vec<_> = r
            .reports
            .iter()
            .filter(|w| w.steps.iter().any(|e| e.step == Step::Rollback))
            .collect();
        assert_eq!(rolled.len() as u64, worked - 1, "every loser that worked");
        for w in rolled {
            assert_eq!((w.outcome, w.status), (Outcome::Error, 500));
            assert_eq!(w.error.as_ref().unwrap().code, "23505");
            assert_eq!(w.made_xp, None, "its XP row went with the rollback");
        }
    }
    let four = runs_with_calls(&results, 4);
    assert!(four >= 45, "4 calls in only {four} of 50 runs");
}

/// SERIALIZABLE fails the losers with 40001; retried, they replay, and
/// their first attempts' calls stand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serializable_losers_fail_with_40001_and_retried_they_replay() {
    let _serial = TIMING.lock().await;
    let db = open().await;
    let bare = races(
        &db,
        within(StrategyKind::CheckThenStore, Isolation::Serializable, 0).built(),
        20,
    )
    .await;
    let retried = races(
        &db,
        within(StrategyKind::CheckThenStore, Isolation::Serializable, 3).built(),
        20,
    )
    .await;
    db.close().await.unwrap();
    for r in &bare {
        assert_eq!(r.xp_rows, 1);
        assert_eq!(r.count(Outcome::Created), 1);
        if r.service_calls > 1 {
            assert_eq!(codes(r), ["40001"], "{:?}", r.reports);
        }
    }
    for r in &retried {
        assert_eq!(r.xp_rows, 1);
        assert_eq!(r.count(Outcome::Created), 1);
        assert_eq!(r.count(Outcome::Replayed), 4, "every retry found the key");
        let retries: u32 = r.reports.iter().map(|w| w.retries).sum();
        assert_eq!(u64::from(retries) + 1, r.service_calls);
    }
    assert!(runs_with_calls(&retried, 4) >= 18);
}

/// find-for-update locks nothing before the first store: check-then-store's
/// figures in a transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_for_update_locks_nothing_that_does_not_exist_yet() {
    let _serial = TIMING.lock().await;
    let db = open().await;
    let input = RaceInput::with_strategy(StrategyKind::FindForUpdate);
    let results = races(&db, input.built(), 20).await;
    db.close().await.unwrap();
    assert!(results.iter().all(|r| r.xp_rows == 1 && r.key_rows == 1));
    assert!(
        results
            .iter()
            .all(|r| r.transaction == Transaction::Request)
    );
    let four = runs_with_calls(&results, 4);
    assert!(four >= 18, "4 calls in only {four} of 20 runs");
    let typical = results.iter().find(|r| r.service_calls == 4).unwrap();
    assert_eq!(codes(typical), ["23505"]);
}

/// The advisory lock serialises at READ COMMITTED (one call, the waiters
/// replay) and fails at REPEATABLE READ, whose snapshot predates the wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_advisory_lock_holds_at_read_committed_and_not_at_repeatable_read() {
    let _serial = TIMING.lock().await;
    let db = open().await;
    let rc = races(
        &db,
        RaceInput::with_strategy(StrategyKind::AdvisoryLock).built(),
        20,
    )
    .await;
    let rr = races(
        &db,
        within(StrategyKind::AdvisoryLock, Isolation::RepeatableRead, 0).built(),
        20,
    )
    .await;
    db.close().await.unwrap();
    for r in &rc {
        assert_eq!((r.xp_rows, r.service_calls), (1, 1));
        assert_eq!(r.count(Outcome::Replayed), 4);
        let waited = r
            .reports
            .iter()
            .filter(|w| w.steps.iter().any(|e| e.step == Step::Lock))
            .count();
        assert_eq!(waited, 5, "every request took the lock");
    }
    assert!(rr.iter().all(|r| r.xp_rows == 1));
    let four = runs_with_calls(&rr, 4);
    assert!(four >= 18, "4 calls in only {four} of 20 runs");
    assert_eq!(
        codes(rr.iter().find(|r| r.service_calls == 4).unwrap()),
        ["23505"]
    );
}

/// Claim-work-complete keeps its one call inside a transaction: its losers
/// wait and replay at READ COMMITTED, and fail with 40001 above it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claim_work_complete_calls_once_at_every_isolation_level() {
    let _serial = TIMING.lock().await;
    let db = open().await;
    for level in Isolation::ALL {
        let input = within(StrategyKind::ClaimWorkComplete, level, 0);
        for r in races(&db, input.built(), 10).await {
            assert_eq!((r.xp_rows, r.service_calls), (1, 1), "{level:?}");
            match level {
                Isolation::ReadCommitted => assert_eq!(r.count(Outcome::Replayed), 4),
                _ => assert!(codes(&r).iter().all(|c| c == "40001"), "{level:?}"),
            }
        }
    }
    db.close().await.unwrap();
}

/// Settings a transaction means nothing for are refused in one line.
#[test]
fn a_transaction_where_it_means_nothing_is_refused_in_one_line() {
    let sandbox = Sandbox::new("transactions-refused");
    let refused: [(&[&str], &str); 5] = [
        (
            &["-s", "guard", "--transaction", "request"],
            "commits its claim",
        ),
        (&["-s", "none", "--isolation", "serializable"], "no key"),
        (
            &["-s", "advisory-lock", "--transaction", "none"],
            "release it",
        ),
        (
            &["--retry-serialization", "2", "--transaction", "none"],
            "needs",
        ),
        (
            &[
                "-s",
                "claim-work-complete",
                "--loser",
                "poll",
                "--isolation",
                "serializable",
            ],
            "gives its connection back",
        ),
    ];
    for (args, reason) in refused {
        let stderr = crate::common::refused_in_one_line(sandbox.idem().arg("race").args(args));
        assert!(stderr.contains(reason), "{args:?}: {stderr}");
    }
    assert!(sandbox.leftovers().is_empty());
}

/// `idem step --transaction request`: the loser's store waits on the
/// winner's uncommitted key, then fails with 23505.
#[test]
fn step_shows_the_loser_waiting_on_the_uncommitted_key_then_23505() {
    let sandbox = Sandbox::new("transactions-step");
    let out = sandbox
        .idem()
        .env("COLUMNS", "200")
        .args(["step", "--transaction", "request", "--workers", "2"])
        .args(["--schedule", "1,1,1,1,1,2,2,2,2,2,1,2"])
        .assert()
        .success()
        .get_output()
        .clone();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("worker 2: store <waiting for worker 1>"),
        "{text}"
    );
    // Each step says what it found, and the schedule has no step too many.
    assert!(text.contains("worker 1: no key; next: work"), "{text}");
    assert!(!text.contains("skipped"), "{text}");
    let loser = text
        .lines()
        .find(|l| l.contains("key store lost"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(loser.contains("rolled back on 23505") && loser.contains("500"));
}

/// `idem matrix --json` against its published schema, every row measured.
#[test]
fn the_matrix_json_matches_its_schema() {
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string("schemas/matrix.schema.json").unwrap())
            .unwrap();
    let validator = jsonschema::validator_for(&schema).expect("a valid JSON Schema");
    let out = Sandbox::new("transactions-matrix")
        .idem()
        .args(["matrix", "--json", "--runs", "2"])
        .assert()
        .success()
        .get_output()
        .clone();
    let matrix: Value = serde_json::from_slice(&out.stdout).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&matrix)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    let rows = matrix["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 21);
    for row in rows {
        assert_eq!(row["runs"], 2);
        // Every row with a request transaction held for the rows.
        if row["transaction"] == "request" {
            assert_eq!(row["xp_rows"], serde_json::json!({ "1": 2 }), "{row}");
        }
    }
    let calls = |strategy: &str, isolation: Value| {
        rows.iter()
            .find(|r| r["strategy"] == strategy && r["isolation"] == isolation)
            .map(|r| r["service_calls"].clone())
            .unwrap()
    };
    assert_eq!(
        calls("advisory-lock", "read-committed".into()),
        serde_json::json!({ "1": 2 })
    );
    assert_eq!(
        calls("claim-work-complete", Value::Null),
        serde_json::json!({ "1": 2 })
    );
}
