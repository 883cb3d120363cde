//! The races on MariaDB (InnoDB), on a real `mariadbd` idem starts itself: lesson 1's figure, where InnoDB agrees with PostgreSQL, where it answers otherwise (the gap lock's 1213), and that nothing outlives a run.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{Sandbox, TIMING, refused_in_one_line, refused_in_one_line_with, signal};

/// `idem race --engine mariadb ARGS --json` in `sandbox`: its one result.
fn race(sandbox: &Sandbox, args: &[&str]) -> Value {
    let head = ["race", "--engine", "mariadb", "--json"];
    serde_json::from_str(&stdout_of(sandbox, &[&head[..], args].concat())).unwrap()
}

/// `idem ARGS` in `sandbox`, which must succeed: its stdout.
fn stdout_of(sandbox: &Sandbox, args: &[&str]) -> String {
    let out = sandbox.idem().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "idem {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The published schema at `path`, ready to check output against.
fn validator(path: &str) -> jsonschema::Validator {
    let text = std::fs::read_to_string(path).unwrap();
    let schema: Value = serde_json::from_str(&text).unwrap();
    jsonschema::validator_for(&schema).expect("a valid JSON Schema")
}

fn n(v: &Value, field: &str) -> u64 {
    v[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field} in {v}"))
}

/// The server errors a race met, by their `number (SQLSTATE, name)`.
fn errors(v: &Value) -> Vec<String> {
    v["errors"].as_object().unwrap().keys().cloned().collect()
}

#[test]
fn lesson_one_on_innodb_makes_one_xp_row_per_connection_as_on_postgres() {
    let sandbox = Sandbox::new("engines-lesson-one");
    let _serial = TIMING.blocking_lock();
    // The course's figure: a pool of five, the runner holds one.
    for (pool, xp) in [("4", 3), ("5", 4), ("6", 5)] {
        let r = race(&sandbox, &["-s", "check-then-store", "--pool-size", pool]);
        assert_eq!(r["engine"], "mariadb");
        assert_eq!(n(&r, "key_rows"), 1, "pool {pool}: {r}");
        assert_eq!(n(&r, "xp_rows"), xp, "pool {pool}: {r}");
        assert_eq!(n(&r, "lesson_figure"), xp, "pool {pool}");
        assert_eq!(n(&r, "service_calls"), xp, "pool {pool}: {r}");
        // The losers of the key store met 1062 and answered 201 anyway.
        assert_eq!(r["outcomes"]["duplicate"], xp - 1, "pool {pool}: {r}");
    }
    assert_eq!(
        sandbox.wait_clean(Duration::from_secs(10)),
        Vec::<String>::new()
    );
}

#[test]
fn a_claim_or_a_unique_insert_holds_on_innodb() {
    let sandbox = Sandbox::new("engines-claims");
    for strategy in ["claim-work-complete", "insert-unique", "advisory-lock"] {
        let r = race(
            &sandbox,
            &["-s", strategy, "--workers", "8", "--pool-size", "9"],
        );
        assert_eq!(n(&r, "xp_rows"), 1, "{strategy}: {r}");
        assert_eq!(errors(&r), Vec::<String>::new(), "{strategy}: {r}");
        let answered: u64 = r["outcomes"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        assert_eq!(answered, 8, "{strategy}: every request answered: {r}");
    }
    // The claim's losers were told 409 or the winner's response, never 201 created.
    let r = race(
        &sandbox,
        &[
            "-s",
            "claim-work-complete",
            "--workers",
            "8",
            "--pool-size",
            "9",
        ],
    );
    assert_eq!(r["outcomes"]["created"], 1, "{r}");
    assert_eq!(n(&r, "service_calls"), 1, "{r}");
}

#[test]
fn find_for_update_deadlocks_under_repeatable_read_and_meets_1062_under_read_committed() {
    let sandbox = Sandbox::new("engines-gap-lock");
    let _serial = TIMING.blocking_lock();
    // A wide window, so that every worker with a connection has locked
    // the missing key's gap before the first one inserts.
    let wide = ["-s", "find-for-update", "--work-ms", "100"];
    let rr = race(&sandbox, &wide);
    assert_eq!(rr["isolation"], "repeatable-read", "InnoDB's default");
    assert_eq!(errors(&rr), ["1213 (40001, ER_LOCK_DEADLOCK)"], "{rr}");
    let rc = race(
        &sandbox,
        &[&wide[..], &["--isolation", "read-committed"]].concat(),
    );
    assert_eq!(errors(&rc), ["1062 (23000, ER_DUP_ENTRY)"], "{rc}");
    for r in [&rr, &rc] {
        // Either way the rollbacks leave one XP row and one key.
        assert_eq!(n(r, "xp_rows"), 1, "{r}");
        assert_eq!(n(r, "key_rows"), 1, "{r}");
        // The work ran for every request that found no key: the four with
        // a connection at the gate, and under REPEATABLE READ sometimes a
        // fifth, whose gap lock (taken once a loser's rollback freed a
        // connection) blocks the winner's insert in turn.
        let found_none = r["reports"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|w| w["saw"] == "no key")
            .count() as u64;
        assert_eq!(n(r, "service_calls"), found_none, "{r}");
        assert!(found_none >= 4, "{r}");
        assert_eq!(r["outcomes"]["error"], found_none - 1, "{r}");
        // Each loser's error carries the server's number beside its SQLSTATE.
        let loser = r["reports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["outcome"] == "error")
            .unwrap();
        assert!(loser["error"]["number"].as_u64().is_some(), "{loser}");
        assert!(loser["error"]["sqlstate"].as_str().is_some(), "{loser}");
        assert_eq!(loser["status"], 500, "{loser}");
    }
}

#[test]
fn what_a_mariadb_race_does_not_take_is_refused_in_one_line() {
    let sandbox = Sandbox::new("engines-refused");
    for (args, says) in [
        (&["--http"][..], "--http"),
        (&["-s", "memory"][..], "memory on MariaDB"),
        (&["--loser", "poll"][..], "--loser"),
        (&["--timeline", "t.html"][..], "--timeline"),
        (
            &["--database-url", "postgres://u@h/d"][..],
            "needs a mysql:// or mariadb:// URL",
        ),
    ] {
        let mut race = sandbox.idem();
        race.args(["race", "--engine", "mariadb"]).args(args);
        let err = refused_in_one_line(&mut race);
        assert!(err.contains(says), "{args:?}: {err}");
    }
    assert_eq!(sandbox.leftovers(), Vec::<String>::new());
}

/// Starts a slow MariaDB race, signals it `after` its start (or, with
/// `server_up`, after its `mariadbd` is up), and says what was left.
fn signalled(sandbox: &Sandbox, sig: i32, server_up: bool, after: Duration) -> Vec<String> {
    let mut child = sandbox
        .idem_std()
        .args(["race", "--engine", "mariadb", "--work-ms", "2000"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while server_up
        && !crate::common::processes_mentioning(&sandbox.dir)
            .iter()
            .any(|p| p.contains("mariadbd"))
    {
        assert!(Instant::now() < deadline, "no mariadbd started");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(after);
    signal(child.id(), sig);
    child.wait().unwrap();
    match sig {
        // A run killed before its server's supervisor started may leave
        // its run directory (no process): the next run's sweep removes it.
        libc::SIGKILL => {
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let left = crate::common::processes_mentioning(&sandbox.dir);
                if left.is_empty() || Instant::now() > deadline {
                    return left;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        _ => sandbox.wait_clean(Duration::from_secs(10)),
    }
}

#[test]
fn no_mariadbd_or_run_directory_outlives_ctrl_c_sigterm_or_sigkill() {
    let sandbox = Sandbox::new("engines-signals");
    // Moments spread over the server's start (the first three), then
    // over the tables' migration and the race.
    let signals = [libc::SIGINT, libc::SIGTERM, libc::SIGKILL];
    for (i, sig) in signals.into_iter().cycle().take(9).enumerate() {
        let (server_up, after) = match i {
            0..3 => (false, Duration::from_millis(40 * i as u64)),
            _ => (true, Duration::from_millis(150 * (i as u64 - 3))),
        };
        let left = signalled(&sandbox, sig, server_up, after);
        assert_eq!(left, Vec::<String>::new(), "signal {sig} at moment {i}");
    }
    // The next run sweeps whatever directory a SIGKILL left.
    race(&sandbox, &["--work-ms", "1"]);
    assert_eq!(
        sandbox.wait_clean(Duration::from_secs(10)),
        Vec::<String>::new()
    );
}

#[test]
fn a_scenario_file_says_what_it_runs_on_and_checks_only_what_that_engine_shows() {
    let sandbox = Sandbox::new("engines-scenario-files");
    let file = sandbox.dir.join("s.toml");
    let head = "title = \"t\"\nlesson = 8\nexplain = \"e\"\n";
    for (body, says) in [
        // The server's error numbers are MariaDB's.
        (
            "[race]\nstrategy = \"find-for-update\"\n[expect]\nserver_errors = [1213]\n",
            "server_errors",
        ),
        // PostgreSQL's figures that a MariaDB race does not count yet.
        (
            "engine = \"mariadb\"\n[race]\nstrategy = \"check-then-store\"\n[expect]\nduplicates = 3\n",
            "duplicates",
        ),
        (
            "engine = \"mariadb\"\n[keys]\nkind = \"random\"\n[expect]\nxp_rows = 1\n",
            "[race] only",
        ),
        (
            "engine = \"mariadb\"\n[race]\nstrategy = \"memory\"\n[expect]\nxp_rows = 1\n",
            "memory on MariaDB",
        ),
        (
            "engine = \"oracle\"\n[race]\nstrategy = \"guard\"\n[expect]\nxp_rows = 1\n",
            "oracle",
        ),
        (
            "engine = \"mariadb\"\n[race]\nstrategy = \"guard\"\n[expect]\ncluster_after = { size = 2, status = \"Primary\" }\n",
            "a Galera cluster's",
        ),
    ] {
        std::fs::write(&file, format!("{head}{body}")).unwrap();
        let mut run = sandbox.idem();
        run.args(["scenario", "run"]).arg(&file);
        let err = refused_in_one_line_with(&mut run, 2);
        assert!(err.contains(says), "{body}: {err}");
    }
    std::fs::remove_file(&file).unwrap();
    assert_eq!(sandbox.leftovers(), Vec::<String>::new());
}

#[test]
fn compare_puts_each_strategy_on_each_engine_row_by_row() {
    let sandbox = Sandbox::new("engines-compare");
    let args = [
        "compare",
        "--engine",
        "postgres,mariadb",
        "--runs",
        "2",
        "--json",
    ];
    let out = stdout_of(&sandbox, &args);
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let on = |engine: &str, strategy: &str| -> Vec<&Value> {
        lines
            .iter()
            .filter(|l| l["strategy"] == strategy)
            // PostgreSQL's lines are idem race's, which name no engine.
            .filter(|l| l["engine"].as_str().unwrap_or("postgres") == engine)
            .collect()
    };
    for strategy in [
        "none",
        "check-then-store",
        "claim-work-complete",
        "insert-unique",
        "guard",
    ] {
        for engine in ["postgres", "mariadb"] {
            assert_eq!(on(engine, strategy).len(), 2, "{strategy} on {engine}");
        }
    }
    for engine in ["postgres", "mariadb"] {
        for r in on(engine, "claim-work-complete")
            .into_iter()
            .chain(on(engine, "guard"))
        {
            assert_eq!(
                (n(r, "xp_rows"), n(r, "service_calls")),
                (1, 1),
                "{engine}: {r}"
            );
        }
    }
    // One engine alone is a comparison too.
    let table = sandbox
        .idem()
        .args(["compare", "--engine", "mariadb", "--work-ms", "1"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("MariaDB") && !text.contains("PostgreSQL"),
        "{text}"
    );
    assert_eq!(
        sandbox.wait_clean(Duration::from_secs(10)),
        Vec::<String>::new()
    );
}

#[test]
fn a_mariadb_race_in_json_matches_its_published_schema() {
    let validator = validator("schemas/engine-race.schema.json");
    let sandbox = Sandbox::new("engines-schema");
    for args in [
        &["--runs", "2"][..],
        &["-s", "find-for-update"][..],
        &["-s", "claim-work-complete", "--transaction", "request"][..],
        &["-s", "advisory-lock", "--pool-size", "2"][..],
        &[
            "-s",
            "guard",
            "--crash",
            "at=during-work",
            "--stale-after-ms",
            "100",
        ][..],
        &["-s", "guard", "--workers", "1", "--fail-work", "1"][..],
    ] {
        let head = ["race", "--engine", "mariadb", "--json", "--work-ms", "1"];
        let out = stdout_of(&sandbox, &[&head[..], args].concat());
        for line in out.lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
            assert_eq!(errors, Vec::<String>::new(), "{args:?}: {line}");
        }
    }
}

/// A request on MariaDB dropped at an await in the middle of its work: its
/// connection is closed rather than pooled, so the server rolls back its
/// transaction and lets go of its GET_LOCK, and no one else inherits them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_dropped_mid_work_leaves_no_transaction_and_no_lock_to_the_pool() {
    use idem::db::mariadb::{Mariadb, MariadbOptions};
    use idem::limits::Origin;
    use idem::race::mariadb::{MariadbRace, one};
    use idem::race::options::RaceInput;
    use idem::strategy::{OPERATION, StrategyKind};

    let db = Mariadb::open(&MariadbOptions::default()).await.unwrap();
    let count = async |sql: &str| -> i64 {
        sqlx::query_scalar::<_, i64>(sql)
            .fetch_one(&db.admin)
            .await
            .unwrap()
    };
    for strategy in [StrategyKind::FindForUpdate, StrategyKind::AdvisoryLock] {
        // A key of its own: the other strategy's requests stored theirs.
        let key = format!("dropped-{}", strategy.name());
        let input = RaceInput::default().with(|r| {
            r.strategy.strategy = Some(strategy);
            r.shape.key = Some(key.clone());
            r.app.work_ms = Some(5_000);
        });
        let race = MariadbRace::from_input(&input, Origin::Flags).unwrap();
        let pool = db.workers_pool(2, Duration::from_secs(5)).await.unwrap();
        // Dropped 300 ms into a 5 s work: after BEGIN, the find's lock (and
        // GET_LOCK), before the XP row's insert.
        let dropped = tokio::time::timeout(Duration::from_millis(300), one(&race, pool.clone(), 1));
        assert!(
            dropped.await.is_err(),
            "{strategy:?} finished within 300 ms"
        );
        // Every connection the pool hands out now is outside any
        // transaction: the dropped one was closed, not pooled.
        let mut lent = Vec::new();
        for _ in 0..2 {
            let mut conn = pool.acquire().await.unwrap();
            let open: i64 = sqlx::query_scalar("SELECT CAST(@@in_transaction AS SIGNED)")
                .fetch_one(&mut *conn)
                .await
                .unwrap();
            assert_eq!(
                open, 0,
                "{strategy:?}: the pool lent a connection in a transaction"
            );
            lent.push(conn);
        }
        drop(lent);
        // And no live session holds a transaction or the key's GET_LOCK.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let open = count(
                "SELECT COUNT(*) FROM information_schema.INNODB_TRX t \
                 JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id",
            )
            .await;
            // GET_LOCK's name is the key and the operation.
            let name = format!("{key}:{OPERATION}");
            let held: i64 = sqlx::query_scalar("SELECT IS_USED_LOCK(?) IS NOT NULL")
                .bind(name)
                .fetch_one(&db.admin)
                .await
                .unwrap();
            if (open, held) == (0, 0) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{strategy:?}: {open} transactions, {held} user locks"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // The next request on the same pool starts clean and finishes.
        let next = input.clone().with(|r| r.app.work_ms = Some(1));
        let next = MariadbRace::from_input(&next, Origin::Flags).unwrap();
        let r = one(&next, pool.clone(), 2).await;
        assert_eq!(r.status, 201, "{strategy:?}: {r:?}");
        pool.close().await;
    }
    db.close().await.unwrap();
}

/// Lesson 8's matrix on InnoDB, where two cells answer otherwise than on
/// PostgreSQL: FOR UPDATE's gap locks deadlock (1213), and the advisory
/// lock at REPEATABLE READ keeps the work to one call.
#[test]
fn the_matrix_on_innodb_shows_the_gap_lock_and_the_later_snapshot() {
    let sandbox = Sandbox::new("engines-matrix");
    let args = [
        "matrix",
        "--engine",
        "mariadb",
        "--runs",
        "2",
        "--json",
        "--work-ms",
        "100",
    ];
    let strategies = ["-s", "find-for-update", "-s", "advisory-lock"];
    let m: Value =
        serde_json::from_str(&stdout_of(&sandbox, &[&args[..], &strategies].concat())).unwrap();
    let validator = validator("schemas/matrix.schema.json");
    let errors: Vec<String> = validator.iter_errors(&m).map(|e| e.to_string()).collect();
    assert_eq!(errors, Vec::<String>::new());
    assert_eq!(m["engine"], "mariadb");
    let row = |strategy: &str, isolation: &str| -> &Value {
        m["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["strategy"] == strategy && r["isolation"] == isolation)
            .unwrap_or_else(|| panic!("{strategy} at {isolation}: {m}"))
    };
    let rr = row("find-for-update", "repeatable-read");
    assert!(rr["told"]["500 1213"].as_u64().is_some(), "{rr}");
    assert_eq!(rr["xp_rows"], serde_json::json!({"1": 2}), "{rr}");
    let lock = row("advisory-lock", "repeatable-read");
    assert_eq!(lock["service_calls"], serde_json::json!({"1": 2}), "{lock}");
    // Hermitage's G2, read off the steps: at READ COMMITTED both requests
    // read no key and wrote it, and the unique key ended the loser (1062);
    // FOR UPDATE at REPEATABLE READ, a deadlock did (1213); behind the
    // advisory lock no two read no key.
    let rc = row("find-for-update", "read-committed");
    assert_eq!(rc["g2"]["runs_shown"], 2, "{rc}");
    assert!(
        rc["g2"]["ended"]["1062"].as_u64().is_some_and(|n| n > 0),
        "{rc}"
    );
    assert!(
        rr["g2"]["ended"]["1213"].as_u64().is_some_and(|n| n > 0),
        "{rr}"
    );
    assert_eq!(rr["g2"]["ended"]["committed"], Value::Null, "{rr}");
    assert_eq!(lock["g2"]["runs_that_read"], 2, "{lock}");
    assert_eq!(lock["g2"]["runs_shown"], 0, "{lock}");
    let text = stdout_of(
        &sandbox,
        &[
            "matrix",
            "--engine",
            "mariadb",
            "--runs",
            "1",
            "-s",
            "claim-work-complete",
        ],
    );
    assert!(text.contains("no read before the write"), "{text}");
    // A cell retried after 40001 has no row: MariaDB runs a request once.
    assert!(
        m["rows"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["retry_serialization"] == 0),
        "{m}"
    );
}

#[test]
fn trace_shows_every_step_and_the_deadlock_it_ended_in() {
    let sandbox = Sandbox::new("engines-trace");
    let _serial = TIMING.blocking_lock();
    let out = sandbox
        .idem()
        .args(["race", "--engine", "mariadb", "-s", "find-for-update"])
        .args(["--work-ms", "100", "--sql"])
        // Wide enough that no cell wraps.
        .env("COLUMNS", "250")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("every step, in the order they ended"),
        "{text}"
    );
    // The gap lock's find, the deadlock at the store, and the rollback.
    assert!(text.contains("FOR UPDATE"), "{text}");
    assert!(
        text.contains("error 1213 (40001, ER_LOCK_DEADLOCK)"),
        "{text}"
    );
    assert!(text.contains("rolled back"), "{text}");
}

/// Lesson 4 on InnoDB: a request whose parameters differ from the
/// winner's is told 422, one with the same parameters is not, and the
/// work runs once; without fingerprints no one is told 422.
#[test]
fn a_key_reused_with_other_parameters_is_told_422_on_innodb() {
    let sandbox = Sandbox::new("engines-fingerprints");
    let amounts = [10, 20, 10, 30, 10];
    for strategy in ["claim-work-complete", "guard"] {
        let asked = ["-s", strategy, "--amounts", "10,20,10,30,10", "--runs", "3"];
        for line in stdout_of(
            &sandbox,
            &[&["race", "--engine", "mariadb", "--json"][..], &asked].concat(),
        )
        .lines()
        {
            let r: Value = serde_json::from_str(line).unwrap();
            assert_eq!(n(&r, "xp_rows"), 1, "{strategy}: {r}");
            let reports = r["reports"].as_array().unwrap();
            let winner = reports.iter().find(|w| w["outcome"] == "created").unwrap();
            let amount_of = |w: &Value| amounts[w["worker"].as_u64().unwrap() as usize - 1];
            let won = amount_of(winner);
            for w in reports.iter().filter(|w| w["outcome"] != "created") {
                let other = amount_of(w) != won;
                assert_eq!(
                    w["status"] == 422,
                    other,
                    "{strategy}: {w} (the winner asked {won})"
                );
            }
        }
        let plain = [
            &["race", "--engine", "mariadb", "--json", "--no-fingerprint"][..],
            &asked[..4],
        ]
        .concat();
        let r: Value = serde_json::from_str(&stdout_of(&sandbox, &plain)).unwrap();
        assert_eq!(r["outcomes"].get("mismatch"), None, "{strategy}: {r}");
    }
}

#[test]
fn a_crash_that_never_struck_is_said() {
    let sandbox = Sandbox::new("engines-no-crash");
    let args = ["race", "--engine", "mariadb", "-s", "insert-unique"];
    let text = stdout_of(
        &sandbox,
        &[&args[..], &["--crash", "at=before-complete"]].concat(),
    );
    assert!(text.contains("the crash planned never struck"), "{text}");
    let guard = [
        "race",
        "--engine",
        "mariadb",
        "-s",
        "guard",
        "--stale-after-ms",
        "100",
    ];
    let text = stdout_of(
        &sandbox,
        &[&guard[..], &["--crash", "at=after-claim"]].concat(),
    );
    assert!(
        !text.contains("never struck") && text.contains("crashed"),
        "{text}"
    );
}

#[test]
fn find_or_create_reads_back_as_rails_met_it_on_innodb() {
    let sandbox = Sandbox::new("engines-read-back");
    let _serial = TIMING.blocking_lock();
    // Each file's figures are lesson 8's claims: a plain read back finds
    // nothing (500 twice), FOR UPDATE deadlocks (1213), a shared lock holds.
    for how in ["plain", "for-update", "share"] {
        let file = format!("scenarios/8-find-or-create-{how}-on-innodb.toml");
        let out = stdout_of(&sandbox, &["scenario", "run", &file]);
        assert!(
            out.contains("1 of 1 scenarios show their expected figures"),
            "{out}"
        );
    }
    // One loser has nobody to deadlock with: read back FOR UPDATE, it
    // meets its 1062 and replays.
    let two = race(
        &sandbox,
        &[
            "-s",
            "claim-work-complete",
            "-w",
            "2",
            "--transaction",
            "request",
            "--read-back",
            "for-update",
        ],
    );
    assert_eq!(errors(&two), ["1062 (23000, ER_DUP_ENTRY)"], "{two}");
    assert_eq!(two["outcomes"]["replayed"], 1, "{two}");
    // PostgreSQL has nothing to read back: a statement's error aborts the
    // whole transaction. And only claim-work-complete has this claim.
    let err = refused_in_one_line(sandbox.idem().args(["race", "--read-back", "share"]));
    assert!(err.contains("MariaDB only"), "{err}");
    let mut other = sandbox.idem();
    other.args([
        "race",
        "--engine",
        "mariadb",
        "-s",
        "guard",
        "--read-back",
        "share",
    ]);
    let err = refused_in_one_line(&mut other);
    assert!(err.contains("claim-work-complete's claim"), "{err}");
}

#[test]
fn claims_in_the_cache_hold_on_innodb_by_deadlock_and_not_at_read_committed() {
    let sandbox = Sandbox::new("engines-cache-store");
    let _serial = TIMING.blocking_lock();
    for file in [
        "scenarios/5-cache-claims-hold-on-innodb.toml",
        "scenarios/5-cache-claims-read-committed-on-innodb.toml",
    ] {
        let out = stdout_of(&sandbox, &["scenario", "run", file]);
        assert!(
            out.contains("1 of 1 scenarios show their expected figures"),
            "{out}"
        );
    }
    let cache = [
        "-s",
        "claim-work-complete",
        "--store",
        "cache",
        "--runs",
        "10",
    ];
    let runs = |isolation: &str| -> Vec<Value> {
        let mut args = cache.to_vec();
        args.extend(["--isolation", isolation]);
        let out = stdout_of(
            &sandbox,
            &[&["race", "--engine", "mariadb", "--json"], &args[..]].concat(),
        );
        out.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let schema = validator("schemas/engine-race.schema.json");
    // REPEATABLE READ: the writers' gap locks deadlock their inserts, the
    // failsafe swallows 1213, and each loser is told the entry exists.
    let held = runs("repeatable-read");
    assert_eq!(held.len(), 10);
    let mut deadlocks = 0;
    for r in &held {
        assert!(schema.is_valid(r), "{r}");
        assert_eq!((n(r, "xp_rows"), n(r, "service_calls")), (1, 1), "{r}");
        assert_eq!((n(r, "cache_entries"), n(r, "key_rows")), (1, 0), "{r}");
        // Each loser is answered, never failed: 409 while the winner works,
        // or its answer replayed once it is done.
        let answered =
            n(&r["outcomes"], "conflict") + r["outcomes"]["replayed"].as_u64().unwrap_or(0);
        assert_eq!((n(&r["outcomes"], "created"), answered), (1, 4), "{r}");
        deadlocks += r["errors"]["1213 (40001, ER_LOCK_DEADLOCK)"]
            .as_u64()
            .unwrap_or(0);
    }
    // 28 of 30 races met one here: two writes that never overlap do not.
    assert!(deadlocks > 0, "{held:?}");
    // READ COMMITTED: no gap lock, every writer wins, as on PostgreSQL.
    let lost = runs("read-committed");
    assert!(lost.iter().any(|r| n(r, "xp_rows") > 1), "{lost:?}");
    assert!(lost.iter().all(|r| errors(r).is_empty()), "{lost:?}");
    // PostgreSQL has no such level for the cache: the store runs outside
    // any request transaction there.
    let err = refused_in_one_line(sandbox.idem().args([
        "race",
        "-s",
        "claim-work-complete",
        "--store",
        "cache",
        "--isolation",
        "read-committed",
    ]));
    assert!(err.contains("--store cache"), "{err}");
}

/// Lesson 9 on InnoDB, its client in this process: a request dropped
/// mid-work inside the guard's transaction (`--on-hangup cancel`) hands
/// the pool nothing open. The one worker has a pool of one connection, so
/// the client's retry runs on whatever the pool holds; had the dropped
/// request's session come back inside its transaction, the retry's claim
/// and XP row would sit in that transaction, unseen by the count. The
/// retry takes the claim once stale and works: 1 XP row, 2 calls, nothing
/// pending; and the line is the published schema's.
#[test]
fn a_request_dropped_in_its_transaction_on_innodb_leaves_the_pool_nothing_open() {
    let sandbox = Sandbox::new("engines-hang-up");
    let dropped = [
        ["-s", "guard", "--workers", "1", "--pool-size", "2"],
        [
            "--work-ms",
            "200",
            "--stale-after-ms",
            "300",
            "--on-hangup",
            "cancel",
        ],
    ]
    .concat();
    let r = race(
        &sandbox,
        &[&dropped[..], &["--hang-up", "at=during-work"]].concat(),
    );
    assert_eq!(
        (
            n(&r, "xp_rows"),
            n(&r, "service_calls"),
            n(&r, "pending_key_rows")
        ),
        (1, 2, 0),
        "{r}"
    );
    assert_eq!(r["outcomes"]["hung_up"], 1, "{r}");
    assert_eq!(r["outcomes"]["created"], 1, "{r}");
    assert_eq!(
        r["reports"][0]["did"], "hung up; the app dropped its request",
        "{r}"
    );
    let schema = validator("schemas/engine-race.schema.json");
    let wrong: Vec<String> = schema.iter_errors(&r).map(|e| e.to_string()).collect();
    assert!(wrong.is_empty(), "{wrong:?}");
}
