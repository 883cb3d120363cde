//! More than one database (lesson 10): a hot standby of the disposable cluster, on PostgreSQL's own streaming replication.

use std::time::Duration;

use idem::db::{ConnectOptions, Database};
use idem::limits::Origin;
use idem::race::input::RaceInput;
use idem::race::{Race, ReadFrom};
use idem::strategy::StrategyKind;

use crate::common::{Sandbox, refused_in_one_line};

/// `idem doctor --standby` copies the cluster with pg_basebackup, starts
/// the copy as a hot standby, and reads on it a row committed on the
/// primary; both servers and their directories are gone at exit.
#[test]
fn a_hot_standby_streams_the_primary_and_goes_with_it() {
    let sandbox = Sandbox::new("standby-doctor");
    let out = sandbox
        .idem()
        .args(["doctor", "--standby", "--json"])
        .assert()
        .success();
    let found: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let standby = &found["standby"];
    let run_dir = standby["run_dir"].as_str().unwrap();
    assert!(
        run_dir.starts_with(sandbox.dir.to_str().unwrap()),
        "the standby's run directory is below TMPDIR: {run_dir}"
    );
    assert_ne!(run_dir, found["run_dir"].as_str().unwrap());
    // The row was read on the standby: replayed, in a measured time.
    assert!(standby["replayed_ms"].as_f64().unwrap() > 0.0, "{standby}");
    assert!(standby["lag_bytes"].as_i64().unwrap() >= 0, "{standby}");
    assert_eq!(
        sandbox.wait_clean(Duration::from_secs(10)),
        Vec::<String>::new()
    );
}

/// idem never makes a standby of, or reconfigures, a user's server.
#[test]
fn a_standby_of_a_users_server_is_refused() {
    let sandbox = Sandbox::new("standby-refused");
    let line = refused_in_one_line(sandbox.idem().args([
        "doctor",
        "--standby",
        "--database-url",
        "postgres://someone@127.0.0.1:1/theirs",
    ]));
    assert!(
        line.contains("idem never reconfigures your server"),
        "{line}"
    );
}

/// A find on a standby that applies commits 200 ms late misses the key the
/// primary already has: check-then-store makes 5 XP rows where reading
/// the primary makes at most 4 (the course's figure), and claim-work-complete,
/// whose claim is an INSERT on the primary, still makes 1.
#[tokio::test]
async fn a_find_on_a_lagging_standby_duplicates_where_the_primary_would_not() {
    let _timing = crate::common::TIMING.lock().await;
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let race = |strategy, read_from| RaceInput {
        strategy: Some(strategy),
        standby: Some(true),
        read_from: Some(read_from),
        replica_delay_ms: Some(200),
        ..RaceInput::default()
    };
    let mut seen = Vec::new();
    for (strategy, read_from) in [
        (StrategyKind::CheckThenStore, ReadFrom::Primary),
        (StrategyKind::CheckThenStore, ReadFrom::Standby),
        (StrategyKind::ClaimWorkComplete, ReadFrom::Standby),
    ] {
        let settings = race(strategy, read_from).build(Origin::Flags).unwrap();
        let race = Race::prepare(&db, settings).await.unwrap();
        for run in 1..=3 {
            let r = race.run(run).await.unwrap();
            let standby = r.standby.expect("the race reports its standby");
            assert_eq!(standby.apply_delay_ms, 200);
            assert_eq!(standby.read_from, read_from);
            seen.push((strategy, read_from, r.xp_rows));
        }
    }
    for (strategy, read_from, xp_rows) in &seen {
        match (strategy, read_from) {
            (StrategyKind::CheckThenStore, ReadFrom::Primary) => assert!(*xp_rows <= 4, "{seen:?}"),
            (StrategyKind::CheckThenStore, ReadFrom::Standby) => {
                assert_eq!(*xp_rows, 5, "{seen:?}")
            }
            _ => assert_eq!(*xp_rows, 1, "{seen:?}"),
        }
    }
    db.close().await.unwrap();
}

/// idem killed with SIGKILL mid-race leaves neither server running and no
/// directory: the standby's supervisor, like the primary's, reads the end
/// of its pipe.
#[test]
fn a_killed_race_leaves_neither_server_behind() {
    let sandbox = Sandbox::new("standby-kill");
    let mut idem = sandbox
        .idem_std()
        .args(["race", "--standby", "--work-ms", "5000"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Both servers up: two run directories whose server says it is ready.
    let ready = |dir: &std::path::Path| {
        std::fs::read_to_string(dir.join("data/postmaster.pid"))
            .is_ok_and(|pid| pid.lines().nth(7).map(str::trim) == Some("ready"))
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let both_up = || {
        std::fs::read_dir(&sandbox.dir)
            .unwrap()
            .flatten()
            .filter(|e| ready(&e.path()))
            .count()
            == 2
    };
    while !both_up() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        both_up(),
        "a primary and a standby started: {:?}",
        sandbox.leftovers()
    );
    crate::common::signal(idem.id(), libc::SIGKILL);
    idem.wait().unwrap();
    assert_eq!(
        sandbox.wait_clean(Duration::from_secs(15)),
        Vec::<String>::new()
    );
}
