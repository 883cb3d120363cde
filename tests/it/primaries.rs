//! Lesson 11's exercise on a real three-node Galera cluster: each of its two ideas is needed, and each wrong answer fails the case that shows it.

use idem::db::{ConnectOptions, Database};
use idem::exercise::judge;

use crate::common::Sandbox;

/// Exercise 11 needs both of lesson 11's ideas, each failing the case
/// that shows it: a claim that commits with the work fails the burst and
/// the two claims on two nodes (a second service call), and reads without
/// causality fail the retry on a node held behind (told 409 from the
/// pending claim, where the stored response was due).
#[tokio::test]
async fn exercise_elevens_wrong_answers_fail_the_case_that_shows_them() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let dir = Sandbox::new("exercise-primaries");
    let e = idem::exercise::for_lesson(11).unwrap();
    let cases = [
        (
            ("transaction = \"none\"", "transaction = \"request\""),
            [
                "five at once, over three primaries",
                "two claims on two nodes, then the work",
            ],
            "a retry on a node that is behind",
        ),
        (
            ("sync_wait = true", "sync_wait = false"),
            [
                "a retry on a node that is behind",
                "a retry on a node that is behind",
            ],
            "two claims on two nodes, then the work",
        ),
    ];
    for (i, ((from, to), fails, holds)) in cases.into_iter().enumerate() {
        assert!(e.solution.contains(from));
        let file = dir.dir.join(format!("11-wrong-{i}.toml"));
        std::fs::write(&file, e.solution.replace(from, to)).unwrap();
        let checks = judge(&db, 11, &file).await.unwrap();
        for case in fails {
            let check = checks.iter().find(|c| c.case == case).unwrap();
            assert!(!check.passed(), "{to}: {case} held: {checks:?}");
        }
        let check = checks.iter().find(|c| c.case == holds).unwrap();
        assert!(check.passed(), "{to}: {holds} failed: {checks:?}");
    }
    db.close().await.unwrap();
}
