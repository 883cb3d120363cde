//! Exercises 7 and 9 on each engine they are written for: the case that catches a completion without its owner, and on MariaDB the takeover's stale condition and a renewal's fraction of a second.

use idem::db::{ConnectOptions, Database};
use idem::exercise::{EXERCISES, judge};

use crate::common::Sandbox;

/// Exercise 7's goal "only its owner completes it" is checked, on each
/// engine it is written for: the solution with its completion's
/// ownership taken out still passes the burst cases, and fails the case
/// where the claim is taken over while its owner works, in that order,
/// every time.
#[tokio::test]
async fn exercise_sevens_owner_case_fails_a_completion_that_checks_only_the_id() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let dir = Sandbox::new("exercise-owner");
    let e = EXERCISES.iter().find(|e| e.lesson == 7).unwrap();
    let on_mariadb = e.mariadb.files().expect("exercise 7 on MariaDB");
    let owned = "WHERE id = $claim_id AND worker = $worker AND status = 'pending'";
    for (engine, solution) in [("postgres", e.solution), ("mariadb", on_mariadb.solution)] {
        assert!(
            solution.contains(owned),
            "the solution's completion changed ({engine})"
        );
        let broken = dir.dir.join(format!("owner-broken-{engine}.toml"));
        std::fs::write(&broken, solution.replace(owned, "WHERE id = $claim_id")).unwrap();
        let case = "a claim taken over while its owner works";
        for _ in 0..2 {
            let checks = judge(&db, 7, &broken).await.unwrap();
            let owner = checks
                .iter()
                .find(|c| c.case == case)
                .expect("the owner case");
            assert!(!owner.passed(), "{engine}: {checks:?}");
            assert!(
                owner.saw.contains("overwrote the taker's response"),
                "{engine}: {owner:?}"
            );
            let others = checks
                .iter()
                .filter(|c| c.case != case && !c.passed())
                .count();
            assert_eq!(
                others, 0,
                "{engine}: only the owner case catches it: {checks:?}"
            );
        }
    }
    db.close().await.unwrap();
}

/// Exercise 7 on MariaDB: the solution with its stale condition left out
/// fails the five-worker race (every request takes the claim over from
/// the one before).
#[tokio::test]
async fn exercise_sevens_takeover_on_mariadb_needs_the_stale_condition() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let dir = Sandbox::new("exercise-takeover");
    let e = EXERCISES.iter().find(|e| e.lesson == 7).unwrap();
    let solution = e.mariadb.files().expect("exercise 7 on MariaDB").solution;
    let stale =
        "\n                AND locked_at < NOW(6) - INTERVAL $stale_after_ms * 1000 MICROSECOND,";
    assert!(solution.contains(stale), "the solution's takeover changed");
    let any = dir.dir.join("any-pending.toml");
    std::fs::write(&any, solution.replace(stale, ",")).unwrap();
    let checks = judge(&db, 7, &any).await.unwrap();
    let five = checks
        .iter()
        .find(|c| c.case == "five-worker race")
        .unwrap();
    assert!(!five.passed(), "{checks:?}");
    assert!(!five.saw.starts_with("1 XP row"), "{five:?}");
    db.close().await.unwrap();
}

/// Exercise 9 on MariaDB: a renewal to `NOW()`, which MariaDB gives in
/// whole seconds, sets the claim's time back by up to a second at every
/// beat, so against a 200 ms stale-claim age the retry finds it stale
/// while its owner works: the slow-work case fails, as no renewal at all
/// does.
#[tokio::test]
async fn exercise_nines_renewal_on_mariadb_needs_the_fraction_of_a_second() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let dir = Sandbox::new("exercise-renewal");
    let e = EXERCISES.iter().find(|e| e.lesson == 9).unwrap();
    let solution = e.mariadb.files().expect("exercise 9 on MariaDB").solution;
    let renewed = "SET locked_at = NOW(6)\nWHERE id = $claim_id";
    assert!(solution.contains(renewed), "the solution's renewal changed");
    let whole_seconds = dir.dir.join("whole-seconds.toml");
    let text = solution.replace(renewed, "SET locked_at = NOW()\nWHERE id = $claim_id");
    std::fs::write(&whole_seconds, text).unwrap();
    let checks = judge(&db, 9, &whole_seconds).await.unwrap();
    let slow = checks
        .iter()
        .find(|c| c.case == "slow work, retried")
        .unwrap();
    assert!(!slow.passed(), "{checks:?}");
    db.close().await.unwrap();
}

/// A guard file's renew step on MariaDB runs as the run's guard user, not
/// as the workers' (root): a renewal that holds only for the guard user
/// keeps the working claim (the slow-work case holds), and the same
/// renewal asked of root renews nothing, so the claim goes stale under
/// its owner and the retry works again (the case fails).
#[tokio::test]
async fn a_renew_step_on_mariadb_runs_as_the_guard_user() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let dir = Sandbox::new("exercise-renewal-user");
    let e = EXERCISES.iter().find(|e| e.lesson == 9).unwrap();
    let solution = e.mariadb.files().expect("exercise 9 on MariaDB").solution;
    let renewed = "WHERE id = $claim_id AND worker = $worker AND status = 'pending'\n'''\n\nreplay";
    assert!(solution.contains(renewed), "the solution's renewal changed");
    for (who, holds) in [(r"%\\_guard@localhost", true), ("root@%", false)] {
        let only_for = renewed.replacen(
            "'pending'\n",
            &format!("'pending'\n  AND CURRENT_USER() LIKE '{who}'\n"),
            1,
        );
        let file = dir.dir.join(format!("renew-{holds}.toml"));
        std::fs::write(&file, solution.replace(renewed, &only_for)).unwrap();
        let checks = judge(&db, 9, &file).await.unwrap();
        let slow = checks
            .iter()
            .find(|c| c.case == "slow work, retried")
            .unwrap();
        assert_eq!(slow.passed(), holds, "renewing only as {who}: {checks:?}");
    }
    db.close().await.unwrap();
}
