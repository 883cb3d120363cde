//! Lesson 4 (the key means the request: fingerprints and 422) and lesson 6 (random versus derived keys).

use std::time::Duration;

use idem::db::{ConnectOptions, Database};
use idem::keys::{CrashPoint, KeyKind, KeysSettings, simulate};
use idem::race::options::RaceInput;
use idem::race::{Outcome, RaceResult};
use idem::strategy::StrategyKind;

use crate::common::Built;
use crate::common::races::race;

const AMOUNTS: [i32; 5] = [10, 20, 10, 30, 10];

fn winner_amount(r: &RaceResult) -> i32 {
    r.reports
        .iter()
        .find(|w| w.outcome == Outcome::Created)
        .expect("one winner")
        .params
        .amount
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_reused_with_other_amounts_gets_422_and_no_work() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    for strategy in [
        StrategyKind::ClaimWorkComplete,
        StrategyKind::CheckThenStore,
    ] {
        // claim-work-complete: a wide window, every loser sees the pending claim.
        // check-then-store: one worker at a time (pool 2), so it cannot duplicate.
        let s = RaceInput::default().with(|r| {
            r.strategy.strategy = Some(strategy);
            r.amounts.amounts = Some(AMOUNTS.to_vec());
            r.app.work_ms = Some(200);
            r.app.pool_size = Some(if strategy == StrategyKind::CheckThenStore {
                2
            } else {
                5
            });
        });
        let r = race(&db, s.built()).await;
        assert_eq!(r.xp_rows, 1, "{strategy}");
        let winner = winner_amount(&r);
        for w in &r.reports {
            if w.params.amount != winner {
                assert_eq!(
                    w.status, 422,
                    "{strategy}: worker {} asked {}",
                    w.worker, w.params.amount
                );
                assert_eq!(
                    w.body.as_ref().unwrap()["error"]["code"],
                    "idempotency_key_reused"
                );
                assert!(w.made_xp.is_none());
            } else {
                assert!([201, 409].contains(&w.status), "{strategy}: {}", w.status);
            }
        }
        assert_eq!(r.wrong_replays, 0);
    }
    db.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_fingerprints_a_reused_key_silently_replays_the_wrong_result() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let s = RaceInput::default().with(|r| {
        r.strategy.strategy = Some(StrategyKind::ClaimWorkComplete);
        r.amounts.amounts = Some(AMOUNTS.to_vec());
        r.fingerprints.fingerprint = Some(false);
        r.app.work_ms = Some(200);
        r.losers.loser = Some(idem::strategy::LoserKind::Poll);
        r.losers.poll_ms = Some(5);
        r.losers.wait_timeout_ms = Some(5000);
    });
    let r = race(&db, s.built()).await;
    db.close().await.unwrap();
    assert_eq!(r.xp_rows, 1);
    assert_eq!(
        r.count(Outcome::Mismatch),
        0,
        "nothing checks the parameters"
    );
    let winner = winner_amount(&r);
    let differing = r
        .reports
        .iter()
        .filter(|w| w.params.amount != winner)
        .count() as u64;
    // Counted from what the clients got back, not from idem's own tally: a
    // replayed 201 whose body awards another amount than the request asked for.
    let told_wrong = r
        .reports
        .iter()
        .filter(|w| w.outcome == Outcome::Replayed)
        .filter(|w| w.body.as_ref().unwrap()["amount"] != w.params.amount)
        .count() as u64;
    assert_eq!(
        told_wrong, differing,
        "every differing request was replayed"
    );
    assert_eq!(r.wrong_replays, told_wrong);
    for w in r.reports.iter().filter(|w| w.params.amount != winner) {
        assert_eq!(
            (w.status, w.outcome),
            (201, Outcome::Replayed),
            "told it succeeded"
        );
        assert_eq!(
            w.body.as_ref().unwrap()["amount"],
            winner,
            "with the winner's amount"
        );
        assert!(
            w.wrong_replay
                .as_ref()
                .unwrap()
                .contains(&format!("asked for {} XP", w.params.amount))
        );
    }
}

/// insert-unique checks no parameters either: its replay must tell the
/// truth about the row that was made, not echo what the request asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insert_unique_replays_the_row_that_was_made_not_the_request() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let r = race(
        &db,
        RaceInput::default()
            .with(|r| {
                r.strategy.strategy = Some(StrategyKind::InsertUnique);
                r.amounts.amounts = Some(AMOUNTS.to_vec());
            })
            .built(),
    )
    .await;
    let made: i32 = sqlx::query_scalar(&db.sql("SELECT amount FROM experience_points"))
        .fetch_one(&db.meta)
        .await
        .unwrap();
    db.close().await.unwrap();
    for w in r.reports.iter().filter(|w| w.outcome == Outcome::Replayed) {
        assert_eq!(
            w.body.as_ref().unwrap()["amount"],
            made,
            "worker {} asked for {}",
            w.worker,
            w.params.amount
        );
    }
    let differing = r
        .reports
        .iter()
        .filter(|w| w.outcome == Outcome::Replayed && w.params.amount != made)
        .count() as u64;
    assert_eq!(r.wrong_replays, differing);
}

fn keys(kind: KeyKind, intents: usize, fingerprint: bool) -> KeysSettings {
    KeysSettings {
        template: None,
        kind,
        clients: 1,
        intents,
        retries: 2,
        crash_at: CrashPoint::AfterWork,
        fingerprint,
        work: Duration::from_millis(1),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_attempt_is_sent_and_a_derived_key_replays_the_retries() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let random = simulate(&db, &keys(KeyKind::Random, 1, true))
        .await
        .unwrap();
    let derived = simulate(&db, &keys(KeyKind::Derived, 1, true))
        .await
        .unwrap();
    db.close().await.unwrap();
    // The row figures (3 and 1) are scenarios/6-random-keys.toml's and
    // 6-derived-keys.toml's; here, what each attempt was answered.
    assert_eq!((random.attempts_sent, derived.attempts_sent), (3, 3));
    let answers = |r: &idem::keys::KeysResult| -> Vec<(u16, Outcome)> {
        r.attempts
            .iter()
            .map(|a| (a.status.unwrap(), a.outcome.unwrap()))
            .collect()
    };
    assert_eq!(
        answers(&random),
        [(201, Outcome::Created); 3],
        "every new key does the work"
    );
    assert_eq!(
        answers(&derived),
        [
            (201, Outcome::Created),
            (201, Outcome::Replayed),
            (201, Outcome::Replayed)
        ],
        "the retries are replayed: the stored 201"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_derived_from_too_few_fields_merges_two_intents() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let derived = simulate(&db, &keys(KeyKind::Derived, 2, true))
        .await
        .unwrap();
    let checked = simulate(&db, &keys(KeyKind::DerivedCoarse, 2, true))
        .await
        .unwrap();
    let unchecked = simulate(&db, &keys(KeyKind::DerivedCoarse, 2, false))
        .await
        .unwrap();
    let crashed_before_send = simulate(
        &db,
        &KeysSettings {
            crash_at: CrashPoint::BeforeSend,
            ..keys(KeyKind::Random, 1, true)
        },
    )
    .await
    .unwrap();
    db.close().await.unwrap();

    assert_eq!((derived.xp_rows, derived.merged_intents), (2, 0));
    // One key for two awards (scenarios/6-coarse-keys.toml: 1 key, 1 XP row,
    // 1 merged intent). With fingerprints the second award is rejected (422), loudly...
    assert!(
        checked
            .attempts
            .iter()
            .filter(|a| a.lesson == 2)
            .all(|a| a.status == Some(422))
    );
    // ...without them it is told it succeeded, with the first award's result.
    assert_eq!((unchecked.xp_rows, unchecked.merged_intents), (1, 1));
    assert!(
        unchecked
            .attempts
            .iter()
            .filter(|a| a.lesson == 2)
            .all(|a| a.status == Some(201) && a.outcome == Some(Outcome::Replayed))
    );
    // A crash before sending reaches no server: one request, one row.
    assert_eq!(
        (
            crashed_before_send.attempts_sent,
            crashed_before_send.xp_rows
        ),
        (1, 1)
    );
}

/// Lesson 6's "try it" crashes before the requests leave, where random
/// keys cannot go wrong: the report says why they look right there, and
/// says nothing of the kind after the work, where they fail.
#[test]
fn a_crash_before_send_is_said_to_be_why_random_keys_look_right() {
    let sandbox = crate::common::Sandbox::new("keys-before-send");
    let run = |crash_at: &str| {
        let out = sandbox
            .idem()
            .args(["keys", "--crash-at", crash_at])
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let before = run("before-send");
    assert!(before.contains("Random keys look right here"), "{before}");
    let after = run("after-work");
    assert!(!after.contains("Random keys look right here"), "{after}");
}
