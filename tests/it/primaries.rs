//! Lesson 11's exercise on a real three-node Galera cluster: each of its two ideas is needed, and each wrong answer fails the case that shows it.

use idem::db::{ConnectOptions, Database};
use idem::exercise::judge;

use crate::common::Sandbox;

/// A change to the answer (from, to), the cases it fails, and the cases it
/// still holds.
type Mutation = (
    (&'static str, &'static str),
    &'static [&'static str],
    &'static [&'static str],
);

/// Exercise 11 needs each of lesson 11's ideas, each failing the case
/// that shows it: a claim that commits with the work fails the burst and
/// the two claims on two nodes (a second service call); a claim refused
/// at its COMMIT (1213) let go up as a 500 fails the refusal made certain
/// (node 2 held behind request 1's claim); and reads without causality
/// fail the retry on a node held behind (told 409 from the pending claim,
/// where the stored response was due).
#[tokio::test]
async fn exercise_elevens_wrong_answers_fail_the_case_that_shows_them() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let dir = Sandbox::new("exercise-primaries");
    let e = idem::exercise::for_lesson(11).unwrap();
    let cases: [Mutation; 3] = [
        (
            ("transaction = \"none\"", "transaction = \"request\""),
            &[
                "five at once, over three primaries",
                "two claims on two nodes, then the work",
                "a claim refused at its COMMIT",
            ],
            &[],
        ),
        (
            ("refused_commit = \"read\"", "refused_commit = \"error\""),
            &["a claim refused at its COMMIT"],
            &[
                "two claims on two nodes, then the work",
                "a retry on a node that is behind",
            ],
        ),
        (
            ("sync_wait = true", "sync_wait = false"),
            &["a retry on a node that is behind"],
            &[
                "two claims on two nodes, then the work",
                "a claim refused at its COMMIT",
            ],
        ),
    ];
    for (i, ((from, to), fails, holds)) in cases.into_iter().enumerate() {
        assert!(e.solution.contains(from));
        let file = dir.dir.join(format!("11-wrong-{i}.toml"));
        std::fs::write(&file, e.solution.replace(from, to)).unwrap();
        let checks = judge(&db, 11, &file).await.unwrap();
        let case = |name: &str| checks.iter().find(|c| c.case == name).unwrap();
        for name in fails {
            assert!(!case(name).passed(), "{to}: {name} held: {checks:?}");
        }
        for name in holds {
            assert!(case(name).passed(), "{to}: {name} failed: {checks:?}");
        }
    }
    db.close().await.unwrap();
}

/// A race dropped while it holds the retry's node behind lets the node
/// go: the connection that holds it closes with the race's future, and
/// the server ends its backup stage, so node 2 applies again and is
/// Synced. Dropped on purpose at the moment node 2 is seen desynced.
#[tokio::test]
async fn a_race_dropped_while_it_holds_a_node_behind_lets_the_node_go() {
    use std::time::{Duration, Instant};

    use idem::db::mariadb::{Mariadb, MariadbOptions};
    use idem::limits::Origin;
    use idem::race::mariadb::{MariadbRace, run};
    use idem::race::options::RaceInput;

    let options = MariadbOptions {
        nodes: 3,
        ..MariadbOptions::default()
    };
    let db = Mariadb::open(&options).await.unwrap();
    let mut node2 = db.node_admin(2).await.unwrap();
    let state = async |conn: &mut sqlx::MySqlConnection| -> String {
        let (_, value): (String, String) =
            sqlx::query_as("SHOW GLOBAL STATUS LIKE 'wsrep_local_state_comment'")
                .fetch_one(conn)
                .await
                .unwrap();
        value
    };
    assert_eq!(state(&mut node2).await, "Synced");
    let input = RaceInput::default().with(|r| {
        r.shape.workers = Some(1);
        r.cluster.nodes = Some(3);
        r.cluster.retry_at_once = true;
        r.cluster.retry_behind = true;
        r.cluster.sync_wait = true;
    });
    let race = MariadbRace::from_input(&input, Origin::Flags).unwrap();
    let desynced = async {
        while state(&mut node2).await != "Donor/Desynced" {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    };
    tokio::select! {
        r = run(&db, &race, 1) => panic!("the race ended before node 2 was held: {:?}", r.map(|r| r.xp_rows)),
        () = desynced => {}
    }
    let began = Instant::now();
    loop {
        let now = state(&mut node2).await;
        if now == "Synced" {
            break;
        }
        assert!(
            began.elapsed() < Duration::from_secs(15),
            "node 2 still {now} 15 s after the race was dropped"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(node2);
    db.close().await.unwrap();
}
