//! More than one database (lesson 10): a hot standby of the disposable cluster, on PostgreSQL's own streaming replication.

use std::time::Duration;

use idem::db::{ConnectOptions, Database};
use idem::limits::Origin;
use idem::race::options::RaceInput;
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

/// A signal while the standby is being made (its run directory is there,
/// the base backup or its start-up under way) ends `idem doctor --standby`
/// as it ends every command: 128 + the signal's number, and nothing left.
#[test]
fn a_signal_while_the_standby_starts_ends_the_doctor_as_any_command() {
    let sandbox = Sandbox::new("standby-doctor-signal");
    let mut doctor = sandbox
        .idem_std()
        .args(["doctor", "--standby"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The primary's run directory, then the standby's beside it.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::fs::read_dir(&sandbox.dir).unwrap().count() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "no standby was started"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    crate::common::signal(doctor.id(), libc::SIGTERM);
    let status = doctor.wait().unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM));
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
    let race = |strategy, read_from| {
        RaceInput::default().with(|r| {
            r.strategy.strategy = Some(strategy);
            r.standby.standby = true;
            r.standby.read_from = Some(read_from);
            r.standby.replica_delay_ms = Some(200);
        })
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
    killed_mid_race(&[]);
    // With the link a failover cuts: its socket goes with the standby's
    // run directory.
    killed_mid_race(&["--failover", "after-complete"]);
}

fn killed_mid_race(more: &[&str]) {
    let sandbox = Sandbox::new("standby-kill");
    let mut idem = sandbox
        .idem_std()
        .args(["race", "--standby", "--work-ms", "5000"])
        .args(more)
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

/// Runs a failover race of claim-work-complete and returns its JSON,
/// checked against the published schema.
fn failover(synchronous: &str) -> serde_json::Value {
    let sandbox = Sandbox::new("standby-failover");
    let out = sandbox
        .idem()
        .args(["race", "-s", "claim-work-complete", "--standby"])
        .args(["--failover", "after-complete", "--synchronous", synchronous])
        .arg("--json")
        .assert()
        .success();
    let race: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let validator = crate::json_contract::validator();
    let errors: Vec<String> = validator
        .iter_errors(&race)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}\n{race}");
    assert_eq!(
        sandbox.wait_clean(Duration::from_secs(10)),
        Vec::<String>::new()
    );
    race
}

/// Asynchronous replication and a failover: the request answered 201 had
/// its key and XP row only on the old primary; the link was cut with
/// that WAL on it, the promoted standby had neither, and the client's
/// retry did the work again: the new primary shows 1 XP row, the service
/// was called twice.
#[test]
fn an_asynchronous_failover_loses_the_acknowledged_key() {
    let race = failover("off");
    let f = &race["failover"];
    assert_eq!(f["acknowledged_key_lost"], true, "{f}");
    assert!(f["wal_lost_bytes"].as_u64().unwrap() > 0, "{f}");
    assert_eq!(f["old_primary"]["xp_rows"], 1, "{f}");
    assert_eq!(f["promoted"]["key_rows"], 0, "{f}");
    assert_eq!(f["promoted"]["xp_rows"], 0, "{f}");
    assert_eq!(f["new_primary"]["xp_rows"], 1, "{f}");
    assert_eq!(f["retry_status"], 201, "{f}");
    assert_eq!(race["xp_rows"], 1);
    assert_eq!(race["service_calls"], 2);
    let retry = race["reports"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(retry["outcome"], "created", "{retry}");
}

/// The same failover with `synchronous_commit = remote_apply`: the 201 was
/// sent only once the standby had applied the completion, so the
/// promoted standby has the key and the retry is answered from it; the
/// service was called once.
#[test]
fn a_synchronous_failover_keeps_the_acknowledged_key() {
    let race = failover("remote_apply");
    let f = &race["failover"];
    assert_eq!(f["acknowledged_key_lost"], false, "{f}");
    assert_eq!(f["promoted"]["key_rows"], 1, "{f}");
    assert_eq!(f["promoted"]["pending_key_rows"], 0, "{f}");
    assert_eq!(f["promoted"]["xp_rows"], 1, "{f}");
    assert_eq!(race["xp_rows"], 1);
    assert_eq!(race["service_calls"], 1);
    let retry = race["reports"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(retry["outcome"], "replayed", "{retry}");
    assert_eq!(race["standby"]["synchronous"], "remote_apply");
}

/// idem promotes only its own standby, and only the race's own pool
/// follows it to the new primary.
#[test]
fn a_failover_is_refused_where_it_cannot_run() {
    let sandbox = Sandbox::new("standby-failover-refused");
    for (args, says) in [
        (
            &[
                "--standby",
                "--failover",
                "after-complete",
                "--database-url",
                "postgres://someone@127.0.0.1:1/theirs",
            ][..],
            "idem never",
        ),
        (&["--failover", "after-complete"][..], "add --standby"),
        (
            &["--standby", "--failover", "after-complete", "--http"][..],
            "drop --http",
        ),
        (
            &[
                "--standby",
                "--failover",
                "after-complete",
                "--crash",
                "after-claim",
            ][..],
            "drop --crash",
        ),
        (&["--synchronous", "remote_apply"][..], "add --standby"),
    ] {
        let line = refused_in_one_line(sandbox.idem().arg("race").args(args));
        assert!(line.contains(says), "{args:?}: {line}");
    }
}

/// `--standby-url` reads from a standby of the user's: the finds of
/// check-then-store go there, its figures say whose standby it was, and
/// both servers hold the user's objects as before. Whatever would change
/// the user's standby (a delay, synchronous commits, a promotion) is
/// refused in one line.
#[tokio::test(flavor = "multi_thread")]
async fn a_users_standby_is_read_and_left_as_it_was() {
    let server = crate::common::server::Server::with_user_objects();
    let before = server.user_state();
    let standby = idem::db::standby::Standby::start(&server.cluster, Default::default())
        .await
        .unwrap();
    let sandbox = Sandbox::new("standby-url");
    let (primary_url, standby_url) = (server.url(), standby.url());
    let out = sandbox
        .idem()
        .args(["race", "-s", "check-then-store", "--read-from", "standby"])
        .args(["--work-ms", "1", "--json"])
        .args([
            "--database-url",
            &primary_url,
            "--standby-url",
            &standby_url,
        ])
        .assert()
        .success();
    let race: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(race["standby"]["yours"], true, "{race}");
    assert_eq!(race["standby"]["read_from"], "standby", "{race}");
    assert_eq!(race["standby"]["replay_lag_ms"], serde_json::Value::Null);
    let xp = race["xp_rows"].as_u64().unwrap();
    assert!((1..=5).contains(&xp), "{race}");
    for refused in [
        &["--failover", "after-complete"][..],
        &["--replica-delay-ms", "100"][..],
        &["--synchronous", "remote_apply"][..],
    ] {
        let line = refused_in_one_line(sandbox.idem().arg("race").args(refused).args([
            "--database-url",
            &primary_url,
            "--standby-url",
            &standby_url,
        ]));
        assert!(
            line.contains("idem only reads your --standby-url"),
            "{line}"
        );
    }
    // The user's primary is not a standby: said so in one line.
    let line = refused_in_one_line(
        sandbox
            .idem()
            .args(["race", "--read-from", "standby"])
            .args([
                "--database-url",
                &primary_url,
                "--standby-url",
                &primary_url,
            ]),
    );
    assert!(line.contains("not a standby"), "{line}");
    assert_eq!(server.user_state(), before);
    assert_eq!(server.idem_schemas(), Vec::<String>::new());
    drop(standby);
}

/// `idem matrix` and `idem compare` with their finds on a lagging standby
/// keep the rows that find by reading: check-then-store duplicates in every
/// run, claim-work-complete holds; the matrix's JSON says so under its schema.
#[test]
fn matrix_and_compare_read_a_lagging_standby() {
    let sandbox = Sandbox::new("standby-matrix");
    let out = sandbox
        .idem()
        .args(["matrix", "--json", "--runs", "2", "--standby"])
        .args(["--read-from", "standby", "--replica-delay-ms", "200"])
        .assert()
        .success();
    let matrix: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string("schemas/matrix.schema.json").unwrap())
            .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&matrix)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(matrix["standby"]["read_from"], "standby");
    let rows: Vec<(String, serde_json::Value)> = matrix["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["strategy"].as_str().unwrap().to_string(),
                r["xp_rows"].clone(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            (
                "check-then-store".to_string(),
                serde_json::json!({ "5": 2 })
            ),
            (
                "claim-work-complete".to_string(),
                serde_json::json!({ "1": 2 })
            ),
        ]
    );
    let out = sandbox
        .idem()
        .args(["compare", "--json", "--standby"])
        .args(["--read-from", "standby", "--replica-delay-ms", "200"])
        .assert()
        .success();
    let races: Vec<serde_json::Value> = String::from_utf8_lossy(&out.get_output().stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let seen: Vec<(String, u64)> = races
        .iter()
        .map(|r| {
            (
                r["strategy"].as_str().unwrap().to_string(),
                r["xp_rows"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            ("check-then-store".to_string(), 5),
            ("claim-work-complete".to_string(), 1)
        ]
    );
}

/// `idem serve --standby --read-from standby`: two requests with one key,
/// sent one after the other, both do the work when the find reads a
/// standby 300 ms behind; nothing raced. The ready line names the standby.
#[tokio::test(flavor = "multi_thread")]
async fn a_served_app_reading_a_lagging_standby_duplicates_without_a_race() {
    use crate::common::app::{Served, award, json};
    let app = Served::start(
        "standby-serve",
        &[
            "-s",
            "check-then-store",
            "--standby",
            "--read-from",
            "standby",
            "--replica-delay-ms",
            "300",
        ],
    );
    assert_eq!(
        app.ready["standby"]["read_from"], "standby",
        "{}",
        app.ready
    );
    let body = r#"{"user_id": 1, "amount": 10}"#;
    let first = award(&app.endpoint(), Some("\"k1\""), body).await;
    let second = award(&app.endpoint(), Some("\"k1\""), body).await;
    assert_eq!((first.status, second.status), (201, 201));
    assert_ne!(
        json(&first)["xp_id"],
        json(&second)["xp_id"],
        "the second request, sent after the first was answered, found no key"
    );
}
