//! What idem promises on someone's own server: it touches nothing it cannot prove it made,
//! cascades into nothing, keeps a live run's schema safe, and never prints a password.
//!
//! Every test runs the real binary against a real server holding a user's
//! objects (`common::server`), and compares the user's objects and rows
//! before and after.

use std::process::Stdio;
use std::time::Duration;

use predicates::prelude::*;

use crate::common;
use crate::common::server::{EVERY_COMMAND, LOOKALIKES, Server};
use crate::common::{Sandbox, signal};

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string()
}

#[test]
fn schemas_that_only_look_like_idems_are_never_touched() {
    let server = Server::with_user_objects();
    let before = server.user_state();
    let sandbox = Sandbox::new("trust-lookalikes");
    for args in [
        vec!["race", "--work-ms", "1"],
        vec!["doctor"],
        vec!["race", "-s", "guard", "--work-ms", "1", "--keep"],
    ] {
        let out = sandbox
            .idem()
            .args(&args)
            .args(["--database-url", &server.url()])
            .assert()
            .success();
        let stderr = stderr_of(out.get_output());
        assert!(!stderr.contains("dropped"), "{args:?}: {stderr}");
        for schema in LOOKALIKES {
            assert!(!stderr.contains(schema), "{args:?}: {stderr}");
        }
    }
    // The kept run's schema is idem's own; everything else is as it was.
    let kept = server.idem_schemas();
    assert_eq!(kept.len(), 1, "{kept:?}");
    let after: Vec<String> = server
        .user_state()
        .into_iter()
        .filter(|line| !line.contains(&kept[0]))
        .collect();
    assert_eq!(after, before);
}

#[test]
fn reap_and_audit_refuse_a_schema_idem_did_not_make_before_changing_anything() {
    let server = Server::with_user_objects();
    let before = server.user_state();
    let sandbox = Sandbox::new("trust-reap");
    for schema in LOOKALIKES {
        for command in [
            vec!["reap", "--older-than", "0s"],
            vec!["audit", "--key", "a"],
        ] {
            let out = sandbox
                .idem()
                .args(&command)
                .args(["--schema", schema, "--database-url", &server.url()])
                .assert()
                .code(1)
                .stderr(predicate::str::contains("was not made by idem"));
            assert_eq!(stderr_of(out.get_output()).lines().count(), 1);
        }
    }
    // The app, served and stopped as a user would, with awards in between.
    let mut app = common::app::Served::start(
        "trust-serve",
        &["-s", "guard", "--database-url", &server.url()],
    );
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let answer = runtime.block_on(common::app::award(
        &app.endpoint(),
        Some("\"k\""),
        r#"{"user_id": 1, "amount": 10}"#,
    ));
    assert_eq!(answer.status, 201);
    assert!(!app.ready.to_string().contains("badc0de"));
    assert_eq!(app.stop(), Some(0));
    assert_eq!(
        server.idem_schemas(),
        Vec::<String>::new(),
        "serve dropped its own"
    );
    assert_eq!(server.user_state(), before);
}

#[test]
fn reap_on_a_kept_schema_reports_what_it_deleted() {
    let server = Server::start();
    let sandbox = Sandbox::new("trust-reap-kept");
    sandbox
        .idem()
        .args([
            "race",
            "-s",
            "claim-work-complete",
            "--work-ms",
            "1",
            "--keep",
        ])
        .args(["--database-url", &server.url()])
        .assert()
        .success();
    let schema = server.idem_schemas().pop().expect("a kept schema");
    // One completed key stands to be reaped, one pending claim does not.
    server.psql(&format!(
        "UPDATE {schema}.idempotency_keys SET completed_at = now() - interval '3 days';
         INSERT INTO {schema}.idempotency_keys (key, operation, status)
         VALUES ('pending-one', 'award_xp', 'pending')"
    ));
    let out = sandbox
        .idem()
        .args(["reap", "--json", "--older-than", "1d", "--schema", &schema])
        .args(["--database-url", &server.url()])
        .assert()
        .success();
    let reaped: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(reaped["removed_hours"].as_array().unwrap().len(), 1);
    assert_eq!(reaped["pending_kept"], 1);
    assert_eq!(
        server.psql(&format!("SELECT count(*) FROM {schema}.idempotency_keys")),
        "1"
    );
}

/// Starts `idem race` with `args` on `server` and returns it with its
/// schema, once the schema's tables exist.
fn long_run(sandbox: &Sandbox, server: &Server, args: &[&str]) -> (std::process::Child, String) {
    let known = server.idem_schemas();
    let child = sandbox
        .idem_std()
        .args(["race", "--json"])
        .args(args)
        .args(["--database-url", &server.url()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let schema = server.wait_for_run_schema(&known, Duration::from_secs(10));
    (child, schema)
}

/// Races one after another until stopped.
const ENDLESS: &[&str] = &["--runs", "1000000", "--work-ms", "1"];

/// Another run on the server (a doctor), which sweeps as every run does first.
fn sweep(sandbox: &Sandbox, server: &Server) -> assert_cmd::assert::Assert {
    sandbox
        .idem()
        .args(["doctor", "--database-url", &server.url()])
        .assert()
        .success()
}

fn stderr_after_exit(child: &mut std::process::Child) -> String {
    let mut text = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut text).unwrap();
    text
}

#[test]
fn a_live_run_keeps_its_schema_when_its_lock_connection_is_lost() {
    let server = Server::start();
    let sandbox = Sandbox::new("trust-lifeline");
    let (mut child, schema) = long_run(&sandbox, &server, ENDLESS);
    // A DBA ends the session holding the run's lock.
    let ended = server.psql(
        "SELECT count(*) FROM pg_stat_activity, pg_terminate_backend(pid)
         WHERE application_name = 'idem-lifeline'",
    );
    assert_eq!(ended, "1");
    // Another run sweeps while the live run's lock is free.
    sweep(&sandbox, &server).stderr(predicate::str::contains(&schema).not());
    assert!(
        server.idem_schemas().contains(&schema),
        "the live run's schema is still there"
    );
    assert!(
        child.try_wait().unwrap().is_none(),
        "and the run still runs"
    );
    // The run takes its lock back at its next heartbeat (every 5 s).
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while server
        .psql("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'idem-lifeline'")
        != "1"
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the lock was not taken again"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    signal(child.id(), libc::SIGINT);
    assert_eq!(child.wait().unwrap().code(), Some(130));
    assert_eq!(
        server.idem_schemas(),
        Vec::<String>::new(),
        "dropped at its own end"
    );
}

#[test]
fn a_killed_runs_schema_is_swept_only_once_its_run_is_provably_gone() {
    let server = Server::with_user_objects();
    let before = server.user_state();
    let sandbox = Sandbox::new("trust-killed");
    let kept = {
        sandbox
            .idem()
            .args([
                "race",
                "--work-ms",
                "1",
                "--keep",
                "--database-url",
                &server.url(),
            ])
            .assert()
            .success();
        server.idem_schemas().pop().unwrap()
    };
    let (mut child, schema) = long_run(&sandbox, &server, ENDLESS);
    signal(child.id(), libc::SIGKILL);
    child.wait().unwrap();

    // Its lock is gone with its connection, but its heartbeat is fresh:
    // a run that merely lost its connection looks just like this.
    sweep(&sandbox, &server).stderr(predicate::str::contains(&schema).not());
    assert!(server.idem_schemas().contains(&schema));

    // A minute of silence later, the next run drops it, and only it.
    server.silence(&schema, 61);
    sweep(&sandbox, &server).stderr(predicate::str::contains(format!("dropped schema {schema}")));
    assert_eq!(server.idem_schemas(), vec![kept.clone()]);
    let after: Vec<String> = server
        .user_state()
        .into_iter()
        .filter(|line| !line.contains(&kept))
        .collect();
    assert_eq!(after, before);
}

/// A view, a function returning a row type and a foreign key: a user's
/// objects in `public` that depend on the run's tables.
fn depend_on(server: &Server, schema: &str) {
    server.psql(&format!(
        "CREATE VIEW public.my_xp AS SELECT id, amount FROM {schema}.experience_points;
         CREATE FUNCTION public.my_rows() RETURNS SETOF {schema}.experience_points
             LANGUAGE sql AS 'SELECT * FROM {schema}.experience_points';
         CREATE TABLE public.my_refs (key_id bigint REFERENCES {schema}.idempotency_keys (id));"
    ));
}

const DEPENDENTS: &str = "SELECT
    (SELECT count(*) FROM pg_views WHERE viewname = 'my_xp')
  + (SELECT count(*) FROM pg_proc WHERE proname = 'my_rows')
  + (SELECT count(*) FROM pg_constraint WHERE conrelid = 'public.my_refs'::regclass AND contype = 'f')";

#[test]
fn objects_of_others_that_depend_on_the_run_stop_its_drop_and_are_named() {
    let server = Server::with_user_objects();
    let sandbox = Sandbox::new("trust-dependents");
    // A normal exit, and a Ctrl-C.
    // One race whose work takes 3 s ends on its own; an endless run is stopped.
    for (args, code) in [(&["--work-ms", "3000"][..], 0), (ENDLESS, 130)] {
        let (mut child, schema) = long_run(&sandbox, &server, args);
        depend_on(&server, &schema);
        if code == 130 {
            signal(child.id(), libc::SIGINT);
        }
        assert_eq!(child.wait().unwrap().code(), Some(code));
        let stderr = stderr_after_exit(&mut child);
        assert!(
            stderr.contains(&format!("left schema {schema} in place")),
            "{stderr}"
        );
        assert!(
            stderr.contains("view public.my_xp"),
            "names the view: {stderr}"
        );
        assert!(
            stderr.contains("public.my_refs"),
            "names the foreign key: {stderr}"
        );
        assert!(
            stderr.contains(&format!("DROP SCHEMA {schema} CASCADE")),
            "{stderr}"
        );
        assert_eq!(
            server.psql(DEPENDENTS),
            "3",
            "the user's objects are all there"
        );
        assert!(server.idem_schemas().contains(&schema));
        server.psql(&format!(
            "DROP VIEW public.my_xp; DROP FUNCTION public.my_rows(); DROP TABLE public.my_refs;
             DROP SCHEMA {schema} CASCADE;"
        ));
    }
}

#[test]
fn a_sweep_leaves_a_schema_others_depend_on_and_says_why() {
    let server = Server::start();
    let sandbox = Sandbox::new("trust-sweep-dependents");
    let (mut child, schema) = long_run(&sandbox, &server, ENDLESS);
    signal(child.id(), libc::SIGKILL);
    child.wait().unwrap();
    depend_on(&server, &schema);
    server.silence(&schema, 3600);
    sweep(&sandbox, &server).stderr(predicate::str::contains(format!(
        "left schema {schema} in place"
    )));
    assert_eq!(server.psql(DEPENDENTS), "3");
    assert!(server.idem_schemas().contains(&schema));
}

#[test]
fn a_password_is_never_printed_in_any_form() {
    let server = Server::start();
    let sandbox = Sandbox::new("trust-secrets");
    let secret = "hunter2-Xy9";
    let socket = server.socket().display().to_string();
    let reachable = [
        format!("postgres://postgres:{secret}@localhost/postgres?host={socket}"),
        format!("postgres://postgres@localhost/postgres?host={socket}&password={secret}"),
        format!("postgres://postgres@localhost/postgres?password={secret}&host={socket}"),
        // libpq's key-value form: both drivers are made from the one reading.
        format!("host={socket} user=postgres password={secret}"),
        format!("host={socket} password = '{secret}' user=postgres"),
    ];
    for url in &reachable {
        for args in [vec!["doctor"], vec!["doctor", "--json"]] {
            let out = sandbox
                .idem()
                .args(&args)
                .args(["--database-url", url])
                .assert()
                .success();
            let all = format!("{:?}", out.get_output());
            assert!(!all.contains(secret), "{args:?} {url}: {all}");
            assert!(!all.contains("hunter2"), "{all}");
        }
    }
    let failing = [
        format!("postgres://postgres:{secret}@127.0.0.1:1/postgres"),
        format!("postgres://postgres@127.0.0.1:1/postgres?password={secret}"),
        format!("postgres://postgres@127.0.0.1:1/postgres?password={secret}&nonsense=1"),
        format!("postgres://nobody:{secret}@localhost/postgres?host={socket}"),
        format!("host={socket} user=nobody password={secret}"),
        format!("host=127.0.0.1 port=1 password = '{secret}' user=postgres"),
    ];
    for url in &failing {
        let out = sandbox
            .idem()
            .args(["race", "--database-url", url])
            .assert()
            .code(1);
        let all = format!("{:?}", out.get_output());
        assert!(!all.contains(secret), "{url}: {all}");
        assert_eq!(stderr_of(out.get_output()).lines().count(), 1, "{all}");
    }
}

#[test]
fn a_bad_url_names_what_is_wrong() {
    let server = Server::start();
    let sandbox = Sandbox::new("trust-bad-url");
    let unknown = format!("{}&nonsense=1", server.url());
    sandbox
        .idem()
        .args(["race", "--database-url", &unknown])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("unknown option `nonsense`"));
    sandbox
        .idem()
        .args(["race", "--database-url", ""])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("is empty"));
}

#[test]
fn an_error_from_the_database_is_said_once() {
    let server = Server::start();
    let out = Sandbox::new("trust-said-once")
        .idem()
        .args([
            "reap",
            "--older-than",
            "100000000w",
            "--database-url",
            &server.url(),
        ])
        .assert()
        .code(1);
    let stderr = stderr_of(out.get_output());
    assert_eq!(stderr.matches("out of range").count(), 1, "{stderr}");
}

#[test]
fn a_live_run_keeps_its_schema_when_its_lock_connection_is_ended() {
    let server = Server::start();
    // Every session left idle in a transaction on this server is ended
    // after a second: the run's lock connection, which keeps a transaction
    // open between heartbeats, keeps losing its lock.
    server.psql("ALTER DATABASE postgres SET idle_in_transaction_session_timeout = '1s'");
    let sandbox = Sandbox::new("trust-idle-timeout");
    let (mut child, schema) = long_run(&sandbox, &server, ENDLESS);
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while server.psql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'") != "0" {
        assert!(
            std::time::Instant::now() < deadline,
            "the lock was never lost"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    sweep(&sandbox, &server).stderr(predicate::str::contains(&schema).not());
    assert!(server.idem_schemas().contains(&schema));
    assert!(child.try_wait().unwrap().is_none(), "the run still runs");
    signal(child.id(), libc::SIGINT);
    assert_eq!(child.wait().unwrap().code(), Some(130));
    assert_eq!(server.idem_schemas(), Vec::<String>::new());
}

#[test]
fn idle_session_timeout_does_not_end_a_runs_lock() {
    let server = Server::start();
    // Idle sessions are ended after a second; the lock connection is never
    // idle outside a transaction, so it keeps its lock.
    server.psql("ALTER DATABASE postgres SET idle_session_timeout = '1s'");
    let sandbox = Sandbox::new("trust-idle-session");
    let (mut child, schema) = long_run(&sandbox, &server, ENDLESS);
    let lock = "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
                WHERE l.locktype = 'advisory' AND l.granted
                  AND a.application_name = 'idem-lifeline'";
    let pid = "SELECT pid FROM pg_stat_activity WHERE application_name = 'idem-lifeline'";
    let first = server.psql(pid);
    // Three idle timeouts later, the same server process holds the lock.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(server.psql(lock), "1");
    assert_eq!(server.psql(pid), first);
    // Idle in its transaction, it holds no transaction id and no snapshot:
    // no vacuum waits for it.
    let holds_nothing = "SELECT state = 'idle in transaction' AND backend_xid IS NULL
                                AND backend_xmin IS NULL
                         FROM pg_stat_activity WHERE application_name = 'idem-lifeline'";
    // (A beat is the one moment it holds both; a few looks see past it.)
    assert!((0..20).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        server.psql(holds_nothing) == "t"
    }));
    sweep(&sandbox, &server).stderr(predicate::str::contains(&schema).not());
    assert!(server.idem_schemas().contains(&schema));
    signal(child.id(), libc::SIGINT);
    assert_eq!(child.wait().unwrap().code(), Some(130));
    assert_eq!(server.idem_schemas(), Vec::<String>::new());
}

#[test]
fn every_command_leaves_a_users_objects_as_they_were() {
    let server = Server::with_user_objects();
    let before = server.user_state();
    let sandbox = Sandbox::new("trust-every-command");
    for args in EVERY_COMMAND {
        let out = sandbox
            .idem()
            .args(args)
            .args(["--database-url", &server.url()])
            .assert()
            .success();
        let stderr = stderr_of(out.get_output());
        for schema in LOOKALIKES {
            assert!(!stderr.contains(schema), "{args:?}: {stderr}");
        }
        assert_eq!(
            server.idem_schemas(),
            Vec::<String>::new(),
            "{args:?} dropped its own"
        );
    }
    assert_eq!(server.user_state(), before);
}
