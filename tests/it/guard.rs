//! Lesson 7: the whole guard under faults on purpose, the shapes without
//! recovery under the same faults, and the build-it-yourself challenge.

use std::sync::Arc;
use std::time::Duration;

use idem::db::{ConnectOptions, Database};
use idem::guard::{Guard, OnFailure};
use idem::race::fault::FaultPoint;
use idem::race::options::RaceInput;
use idem::race::{CrashPlan, Outcome};
use idem::request::Step;
use idem::strategy::StrategyKind;

use crate::common::Built;
use crate::common::races::race;

const STALE_AFTER: Duration = Duration::from_millis(300);

fn crash(strategy: StrategyKind, at: FaultPoint) -> RaceInput {
    RaceInput::default().with(|r| {
        r.strategy.strategy = Some(strategy);
        r.app.pool_size = Some(6);
        r.guard.stale_after_ms = Some(STALE_AFTER.as_millis() as u64);
        r.faults.crash = Some(CrashPlan { worker: None, at });
    })
}

async fn key_status(db: &Database) -> String {
    sqlx::query_scalar(&db.sql("SELECT status FROM idempotency_keys"))
        .fetch_one(&db.meta)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_crash_at_any_point_the_retry_finishes_with_one_xp_row() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    // After the claim: scenarios/7-guard-crash-after-claim.toml.
    for at in [FaultPoint::DuringWork, FaultPoint::BeforeComplete] {
        let r = race(&db, crash(StrategyKind::Guard, at).built()).await;
        assert_eq!(r.count(Outcome::Crashed), 1, "{at:?}: one worker crashed");
        assert_eq!(r.xp_rows, 1, "{at:?}");
        let retry = r.reports.iter().find(|w| w.retry).unwrap();
        assert_eq!(
            (retry.status, retry.outcome),
            (201, Outcome::Created),
            "{at:?}: the retry took the stale claim over and did the work"
        );
        assert_eq!(key_status(&db).await, "completed", "{at:?}: never stuck");
        // Every client that got an answer got the same response.
        let bodies: Vec<_> = r
            .reports
            .iter()
            .filter(|w| matches!(w.status, 200 | 201))
            .map(|w| &w.body)
            .collect();
        assert!(bodies.windows(2).all(|b| b[0] == b[1]), "{at:?}");
    }
    db.close().await.unwrap();
}

/// The heartbeat renews a claim only while its owner's work runs: a worker
/// that crashed mid-work beats no more, its claim goes stale, and the
/// retry takes it over as it does without a heartbeat.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_owner_stops_beating_and_its_claim_is_taken_over() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let input = crash(StrategyKind::Guard, FaultPoint::DuringWork)
        .with(|r| r.guard.heartbeat_ms = Some(STALE_AFTER.as_millis() as u64 / 3));
    let r = race(&db, input.built()).await;
    assert_eq!(r.count(Outcome::Crashed), 1);
    assert_eq!(r.xp_rows, 1);
    let retry = r.reports.iter().find(|w| w.retry).unwrap();
    assert_eq!((retry.status, retry.outcome), (201, Outcome::Created));
    assert_eq!(key_status(&db).await, "completed");
    db.close().await.unwrap();
}

/// `--heartbeat-ms` belongs to the guard, and must beat at least twice
/// within the stale-claim timeout.
#[test]
fn a_heartbeat_is_the_guards_and_faster_than_half_its_timeout() {
    let refused = |input: RaceInput| {
        input
            .build(idem::limits::Origin::Flags)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let slow = refused(RaceInput::default().with(|r| {
        r.strategy.strategy = Some(StrategyKind::Guard);
        r.guard.stale_after_ms = Some(100);
        r.guard.heartbeat_ms = Some(60);
    }));
    assert!(
        slow.contains("more than half --stale-after-ms 100"),
        "{slow}"
    );
    let other = refused(RaceInput::default().with(|r| {
        r.strategy.strategy = Some(StrategyKind::ClaimWorkComplete);
        r.guard.heartbeat_ms = Some(60);
    }));
    assert!(
        other.contains("--heartbeat-ms needs --strategy guard"),
        "{other}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_retries_racing_for_a_stale_claim_still_make_one_xp_row() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    for _ in 0..5 {
        let r = race(
            &db,
            crash(StrategyKind::Guard, FaultPoint::AfterClaim)
                .with(|r| r.faults.recovery_retries = Some(2))
                .built(),
        )
        .await;
        assert_eq!(r.xp_rows, 1);
        let retries = r.retry_statuses();
        assert_eq!(retries.len(), 2);
        // One taker wins and makes the XP row. The other is told 409, or,
        // once the winner completed, the stored 201 replayed: a 201 is no
        // sign of work (under the suite's load both were 201 once).
        let made: Vec<_> = r
            .reports
            .iter()
            .filter(|w| w.retry && w.made_xp.is_some())
            .collect();
        assert_eq!(made.len(), 1, "one taker wins: {retries:?}");
        assert!(
            r.reports
                .iter()
                .filter(|w| w.retry && w.made_xp.is_none())
                .all(|w| matches!(w.outcome, Outcome::Conflict | Outcome::Replayed)),
            "the other is told 409 or replayed: {retries:?}"
        );
    }
    db.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_connection_mid_work_is_retried_and_the_claim_ends_completed() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let r = race(
        &db,
        RaceInput::default()
            .with(|r| {
                r.strategy.strategy = Some(StrategyKind::Guard);
                r.app.pool_size = Some(6);
                r.faults.kill_connection = true;
            })
            .built(),
    )
    .await;
    // 1 XP row, no duplicate: scenarios/7-guard-kill-connection.toml.
    assert_eq!(key_status(&db).await, "completed");
    let killed = r
        .reports
        .iter()
        .find(|w| w.steps.iter().any(|e| e.note.contains("connection killed")))
        .expect("one worker's connection was killed");
    assert_eq!(
        (killed.status, killed.outcome),
        (201, Outcome::Created),
        "it retried with the same key and finished"
    );
    db.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_guard_the_same_crashes_go_wrong() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    // check-then-store under the same crash: scenarios/7-check-then-store-crash.toml.
    // claim-work-complete: the claim stays pending for good, and the retry gets 409.
    let r = race(
        &db,
        crash(StrategyKind::ClaimWorkComplete, FaultPoint::AfterClaim).built(),
    )
    .await;
    assert_eq!(r.xp_rows, 0, "the claim's owner died before the work");
    assert_eq!(key_status(&db).await, "pending");
    assert_eq!(
        r.reports.iter().find(|w| w.retry).unwrap().outcome,
        Outcome::Conflict
    );
    db.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_work_is_stored_and_replayed_or_released_and_run_again() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let failing = |on_failure| {
        RaceInput::default().with(|r| {
            r.strategy.strategy = Some(StrategyKind::Guard);
            r.shape.workers = Some(1);
            r.faults.fail_work = Some(1);
            r.guard.on_failure = Some(on_failure);
        })
    };
    let stored = race(&db, failing(OnFailure::Store).built()).await;
    assert_eq!(stored.xp_rows, 0);
    let (first, retry) = (&stored.reports[0], &stored.reports[1]);
    assert_eq!(
        (first.status, retry.status),
        (500, 500),
        "Stripe: the 500 is replayed"
    );
    assert_eq!(first.body, retry.body);
    // Released, the retry does the work (1 XP row: scenarios/7-guard-failure-released.toml).
    let released = race(&db, failing(OnFailure::Release).built()).await;
    assert_eq!(
        (released.reports[0].status, released.reports[1].status),
        (500, 201),
        "Powertools: runs again"
    );
    db.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idems_own_guard_passes_every_challenge_case() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let guard = Guard {
        stale_after: idem::challenge::STALE_AFTER,
        ..Guard::default()
    };
    let cases = idem::challenge::judge(&db, Arc::new(guard)).await.unwrap();
    db.close().await.unwrap();
    assert_eq!(cases.len(), 4);
    for case in cases {
        assert!(case.passed(), "{}: {}", case.case, case.saw);
    }
}

/// The learner's starting point, examples/challenge.rs, is the naive
/// check-then-store: it must fail the first case.
#[test]
fn the_naive_starting_point_fails_the_five_worker_race() {
    let example = crate::common::example("challenge");
    let out = std::process::Command::new(example)
        .env_remove("DATABASE_URL")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let first = stdout
        .lines()
        .find(|l| l.contains("five-worker race"))
        .unwrap();
    assert!(first.contains("FAIL"), "{first}");
}

/// What docs/guard.md says of each crash point, and what the trace of the
/// crashed worker shows, must agree: the fault comes where the page puts
/// it, and after it the worker takes no step and answers nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_crash_trace_says_what_the_readme_says_of_every_crash_point() {
    let readme = std::fs::read_to_string("docs/guard.md").unwrap();
    let said = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    let promises = [
        (
            FaultPoint::AfterClaim,
            "`after-claim` (before its work starts)",
        ),
        (FaultPoint::DuringWork, "`during-work` (halfway through it)"),
        (FaultPoint::BeforeComplete, "`before-complete`"),
    ];
    assert!(
        said.contains("The worker answers nothing"),
        "the page's promise"
    );
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    for strategy in [StrategyKind::Guard, StrategyKind::CheckThenStore] {
        for (at, words) in promises {
            assert!(
                said.contains(words),
                "docs/guard.md describes {at:?} as {words}"
            );
            let r = race(&db, crash(strategy, at).built()).await;
            let crashed = r
                .reports
                .iter()
                .find(|w| w.outcome == Outcome::Crashed)
                .unwrap_or_else(|| panic!("{strategy} {at:?}: a worker crashed"));
            let what = format!("{strategy} {at:?}: {:?}", crashed.steps);
            let fault = crashed
                .steps
                .iter()
                .position(|e| e.step == Step::Fault)
                .expect(&what);
            assert_eq!(
                fault,
                crashed.steps.len() - 1,
                "no step after the crash: {what}"
            );
            assert_eq!(
                crashed.status, 0,
                "a crashed worker answers nothing: {what}"
            );
            let before: Vec<Step> = crashed.steps[..fault].iter().map(|e| e.step).collect();
            let worked = before.contains(&Step::Work);
            let completed = before
                .iter()
                .any(|s| matches!(s, Step::Complete | Step::Store));
            match at {
                FaultPoint::AfterClaim => assert!(!worked, "before its work starts: {what}"),
                FaultPoint::DuringWork | FaultPoint::BeforeComplete => {
                    assert!(worked, "its work had started: {what}")
                }
            }
            assert!(!completed, "it never completed: {what}");
        }
    }
    db.close().await.unwrap();
}

/// Lesson 7's released failure: the first call failed, the claim was
/// released, and the retry called again. Two calls are what the
/// demonstration intends, so they are not marked as duplicate work.
#[test]
fn a_released_failures_second_call_is_said_as_intended_not_marked() {
    let sandbox = crate::common::Sandbox::new("released-failure");
    let out = sandbox
        .idem()
        .args(["race", "-s", "guard", "--workers", "1", "--fail-work", "1"])
        .args(["--on-failure", "release"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("service calls         2  as it must"),
        "{text}"
    );
    assert!(!text.contains("✗"), "{text}");
}

/// The stale-claim age has its own name (`--stale-after-ms`,
/// `stale_after_ms`, `$stale_after_ms`), and its old one, which said "lock
/// timeout" like PostgreSQL's `lock_timeout`, still works and says it is
/// the old name; given beside the new one it is refused.
#[test]
fn the_stale_claim_age_keeps_its_old_names_and_says_so() {
    let sandbox = crate::common::Sandbox::new("stale-after-old-name");
    let old = sandbox
        .idem()
        .args(["race", "-s", "guard", "--lock-timeout-ms", "300"])
        .args(["--crash", "after-claim", "--pool-size", "6", "--json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&old.stderr);
    assert!(old.status.success(), "{err}");
    assert!(
        err.contains("note: --lock-timeout-ms is the old name of --stale-after-ms"),
        "{err}"
    );
    let r: serde_json::Value = serde_json::from_slice(&old.stdout).unwrap();
    assert_eq!(r["xp_rows"], 1, "{r}");
    let both = sandbox
        .idem()
        .args(["race", "-s", "guard", "--lock-timeout-ms", "300"])
        .args(["--stale-after-ms", "300"])
        .output()
        .unwrap();
    assert!(!both.status.success());
    let err = String::from_utf8_lossy(&both.stderr);
    assert!(err.contains("give --stale-after-ms alone"), "{err}");
    // A guard file that names the age the old way still reads.
    let e = idem::exercise::EXERCISES
        .iter()
        .find(|e| e.lesson == 7)
        .unwrap();
    assert!(e.solution.contains("$stale_after_ms"));
    let file = sandbox.dir.join("old-param.toml");
    std::fs::write(
        &file,
        e.solution.replace("$stale_after_ms", "$lock_timeout_ms"),
    )
    .unwrap();
    let raced = sandbox
        .idem()
        .args(["race", "--strategy-file", file.to_str().unwrap()])
        .args([
            "--stale-after-ms",
            "300",
            "--crash",
            "after-claim",
            "--pool-size",
            "6",
        ])
        .arg("--json")
        .output()
        .unwrap();
    let r: serde_json::Value = serde_json::from_slice(&raced.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&raced.stderr)));
    assert_eq!(
        r["xp_rows"], 1,
        "the old parameter still carries the age: {r}"
    );
}
