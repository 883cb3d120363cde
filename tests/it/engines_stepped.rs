//! The races on MariaDB step by step, on a real `mariadbd`: `idem step --engine mariadb` replays a schedule, a lock wait read off InnoDB and a deadlock shown as a step's outcome; `idem explore --engine mariadb` walks every interleaving, and its verdicts are the server's, not the clock's.

use std::time::Duration;

use serde_json::Value;

use crate::common::{Sandbox, refused_in_one_line_with};

/// `idem ARGS` in `sandbox`: its exit code and stdout.
fn run(sandbox: &Sandbox, args: &[&str]) -> (Option<i32>, String) {
    let out = sandbox.idem().args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// `idem ARGS --json` in `sandbox`: its one JSON object.
fn json(sandbox: &Sandbox, args: &[&str]) -> Value {
    let (code, out) = run(sandbox, &[args, &["--json"]].concat());
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("idem {args:?} ({code:?}): {e}: {out}"))
}

fn n(v: &Value, field: &str) -> u64 {
    v[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field} in {v}"))
}

/// Both requests find the missing key before either stores it.
const BOTH_FIND_FIRST: &str = "1,1,2,2,1,2,1,2,1,2";

/// `idem step --engine mariadb -s find-for-update` in a request
/// transaction, two workers, `BOTH_FIND_FIRST`, plus `more`.
fn both_find_first(more: &[&str]) -> Vec<String> {
    let head = [
        "step",
        "--engine",
        "mariadb",
        "-s",
        "find-for-update",
        "--transaction",
        "request",
        "-w",
        "2",
        "--work-ms",
        "0",
        "--schedule",
        BOTH_FIND_FIRST,
    ];
    [&head[..], more]
        .concat()
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// What worker `w` of a MariaDB race said at its `step` step.
fn note_at(r: &Value, w: u64, step: &str) -> String {
    let report = r["reports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["worker"] == w)
        .unwrap_or_else(|| panic!("worker {w} in {r}"));
    report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|e| e["step"] == step)
        .map(|e| e["note"].as_str().unwrap().to_string())
        .unwrap_or_else(|| panic!("worker {w}'s {step} step in {report}"))
}

#[test]
fn a_schedule_on_innodb_shows_the_gap_lock_wait_and_the_deadlock_it_ends_in() {
    let sandbox = Sandbox::new("stepped-gap-lock");
    let args = both_find_first(&[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // REPEATABLE READ: both FOR UPDATEs of the missing key took its gap;
    // the first insert waits on the other's gap lock, the second closes
    // the circle, and InnoDB rolls one back.
    let (code, text) = run(&sandbox, &args);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("9. worker 1: store <waiting for worker 2>"),
        "{text}"
    );
    assert!(
        text.contains("10. worker 2: deadlock: InnoDB chose this transaction to roll back"),
        "{text}"
    );
    let rr = json(&sandbox, &args);
    assert_eq!(rr["isolation"], "repeatable-read", "{rr}");
    let errors: Vec<&String> = rr["errors"].as_object().unwrap().keys().collect();
    assert_eq!(errors, ["1213 (40001, ER_LOCK_DEADLOCK)"], "{rr}");
    assert!(note_at(&rr, 2, "store").contains("deadlock"), "{rr}");
    assert_eq!(note_at(&rr, 1, "store"), "key stored", "{rr}");
    assert_eq!((n(&rr, "xp_rows"), n(&rr, "service_calls")), (1, 2), "{rr}");

    // READ COMMITTED: no gap lock. The first insert goes through; the
    // second waits on the first's uncommitted key, then meets 1062.
    let rc_args = both_find_first(&["--isolation", "read-committed"]);
    let rc_args: Vec<&str> = rc_args.iter().map(String::as_str).collect();
    let (code, text) = run(&sandbox, &rc_args);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("9. worker 1: key stored"), "{text}");
    assert!(
        text.contains("10. worker 2: store <waiting for worker 1>"),
        "{text}"
    );
    let rc = json(&sandbox, &rc_args);
    let errors: Vec<&String> = rc["errors"].as_object().unwrap().keys().collect();
    assert_eq!(errors, ["1062 (23000, ER_DUP_ENTRY)"], "{rc}");
    assert_eq!((n(&rc, "xp_rows"), n(&rc, "service_calls")), (1, 2), "{rc}");
    assert_eq!(sandbox.leftovers(), Vec::<String>::new());
}

#[test]
fn explore_on_innodb_gives_postgres_verdicts_and_its_shortest_failure_replays() {
    let sandbox = Sandbox::new("stepped-explore");
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string("schemas/explore.schema.json").unwrap())
            .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    for (strategy, fails) in [("check-then-store", true), ("claim-work-complete", false)] {
        let on = |engine: &str| json(&sandbox, &["explore", "--engine", engine, "-s", strategy]);
        let (pg, maria) = (on("postgres"), on("mariadb"));
        assert_eq!(maria["engine"], "mariadb");
        assert!(validator.is_valid(&maria), "{maria}");
        // The same steps, the same orders, the same verdict in each.
        for field in ["total", "held", "failing"] {
            assert_eq!(
                pg[field], maria[field],
                "{strategy} {field}: {pg} / {maria}"
            );
        }
        assert_eq!(n(&maria, "failing") > 0, fails, "{strategy}: {maria}");
    }
    // The shortest failing order, replayed step by step on MariaDB, does
    // what the walk said it did: two XP rows.
    let found = json(
        &sandbox,
        &["explore", "--engine", "mariadb", "-s", "check-then-store"],
    );
    let replay = found["replay"].as_str().unwrap();
    assert!(replay.contains("--engine mariadb"), "{replay}");
    let words: Vec<&str> = replay.split_whitespace().skip(1).collect();
    let replayed = json(&sandbox, &words);
    assert_eq!(n(&replayed, "xp_rows"), 2, "{replay}: {replayed}");
    assert_eq!(sandbox.leftovers(), Vec::<String>::new());
}

#[test]
fn find_for_update_explored_on_innodb_keeps_one_xp_row_and_fails_by_its_errors() {
    let sandbox = Sandbox::new("stepped-find-for-update");
    let found = json(
        &sandbox,
        &[
            "explore",
            "--engine",
            "mariadb",
            "-s",
            "find-for-update",
            "--transaction",
            "request",
            "--max-interleavings",
            "100",
        ],
    );
    // Too many orders to run whole under this bound: the reduced walk.
    assert_eq!(found["reduced"], true, "{found}");
    let runs = n(&found, "interleavings");
    // Every order leaves one XP row: a loser's error rolls its row back.
    assert_eq!(
        found["xp_rows"],
        serde_json::json!({ "1": runs }),
        "{found}"
    );
    // Where both found the key missing, both called the service and one
    // was told an error (the deadlock, or 1062): held nowhere else.
    let failing = n(&found, "failing");
    assert!(failing > 0 && failing < runs, "{found}");
    assert_eq!(found["kinds"]["error_answered"], failing, "{found}");
    assert_eq!(
        found["kinds"]["duplicate_service_calls"], failing,
        "{found}"
    );
}

#[test]
fn what_step_and_explore_do_not_take_on_mariadb_is_refused_in_one_line() {
    let sandbox = Sandbox::new("stepped-refused");
    let cases: [(&[&str], &str); 3] = [
        (
            &["explore", "--database-url", "postgres://u@h/d"],
            "needs a mysql:// or mariadb:// URL",
        ),
        (
            &["step", "--schedule", "1,2", "--timeline", "t.html"],
            "--timeline",
        ),
        (&["step", "--schedule", "1,2", "--http"], "--http"),
    ];
    for (args, says) in cases {
        let mut idem = sandbox.idem();
        idem.args(&args[..1])
            .args(["--engine", "mariadb"])
            .args(&args[1..]);
        // A wrong command line of step or explore exits 2: their 1 is a
        // guard's verdict.
        let err = refused_in_one_line_with(&mut idem, 2);
        assert!(err.contains(says), "{args:?}: {err}");
    }
    assert_eq!(sandbox.leftovers(), Vec::<String>::new());
}

#[test]
fn crashes_and_the_clock_are_walked_on_innodb_as_on_postgres() {
    let sandbox = Sandbox::new("stepped-crashes");
    let on = |engine: &str| {
        json(
            &sandbox,
            &[
                "explore",
                "--engine",
                engine,
                "-s",
                "check-then-store",
                "--crashes",
                "--clock",
            ],
        )
    };
    let (pg, maria) = (on("postgres"), on("mariadb"));
    assert_eq!(
        maria["branches"],
        serde_json::json!({"crashes": true, "clock": true})
    );
    // A crash kills the worker's session (KILL CONNECTION on InnoDB), its
    // request is retried once the clock has aged its claim: every order
    // of it, on both engines, with the same verdicts.
    for field in [
        "total",
        "held",
        "failing",
        "failing_on_steps_alone",
        "kinds",
        "xp_rows",
    ] {
        assert_eq!(pg[field], maria[field], "{field}: {pg} / {maria}");
    }
    assert!(
        n(&maria, "interleavings") > 70,
        "the crashes add orders: {maria}"
    );
}

#[test]
fn compare_explores_each_strategy_on_each_engine() {
    let sandbox = Sandbox::new("stepped-compare");
    let (code, out) = run(
        &sandbox,
        &[
            "compare",
            "--explore",
            "--engine",
            "postgres,mariadb",
            "--json",
        ],
    );
    assert_eq!(code, Some(0), "{out}");
    let rows: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let find = |strategy: &str, engine: &str| {
        rows.iter()
            .find(|r| r["strategy"] == strategy && r["engine"] == engine)
            .unwrap_or_else(|| panic!("{strategy} on {engine} in {out}"))
    };
    for strategy in ["check-then-store", "claim-work-complete", "insert-unique"] {
        let (pg, maria) = (find(strategy, "postgres"), find(strategy, "mariadb"));
        for field in ["total", "held", "failing", "kinds"] {
            assert_eq!(pg[field], maria[field], "{strategy} {field}");
        }
    }
    // The guard holds in every order on both, though its InnoDB claim
    // takes more steps.
    for engine in ["postgres", "mariadb"] {
        let guard = find("guard", engine);
        assert_eq!(n(guard, "failing"), 0, "{guard}");
        assert_eq!(guard["held"], guard["total"], "{guard}");
    }
}

/// Lesson 9 on InnoDB: the clock jumps while the guard's owner still
/// works. Without a heartbeat the other request takes the claim over and
/// calls the service again; with one, the owner's claim is renewed from
/// the beats' own connection, the clock ages no running owner's claim,
/// and the guard holds in every order of its steps and the clock (with
/// crashes too, 766 orders: left to docs/engines.md, for its 40 s).
#[test]
fn a_heartbeat_keeps_the_guard_on_innodb_whole_in_every_order() {
    let sandbox = Sandbox::new("stepped-heartbeat");
    let takeover = |extra: &[&str]| {
        let head = [
            "step",
            "--engine",
            "mariadb",
            "-s",
            "guard",
            "--workers",
            "2",
        ];
        let schedule = ["--schedule", "1,1,clock,2,2,2,2,2"];
        json(&sandbox, &[&head[..], &schedule[..], extra].concat())
    };
    let (silent, beating) = (takeover(&[]), takeover(&["--heartbeat-ms", "50"]));
    assert_eq!(n(&silent, "service_calls"), 2, "{silent}");
    assert_eq!(n(&beating, "service_calls"), 1, "{beating}");
    let walked = json(
        &sandbox,
        &[
            "explore",
            "--engine",
            "mariadb",
            "-s",
            "guard",
            "--clock",
            "--heartbeat-ms",
            "50",
        ],
    );
    assert_eq!(walked["total"], walked["interleavings"], "{walked}");
    assert_eq!(n(&walked, "failing"), 0, "{walked}");
    assert_eq!(
        walked["branches"],
        serde_json::json!({"crashes": false, "clock": true})
    );
    assert_eq!(
        sandbox.wait_clean(Duration::from_secs(10)),
        Vec::<String>::new()
    );
}
