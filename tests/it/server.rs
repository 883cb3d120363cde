//! With --database-url: idem works in a schema of its own and touches nothing else.
//!
//! The "real server" is `common::server`: a cluster the test starts itself
//! through idem's library. What idem must never touch there is in `trust.rs`.

use predicates::prelude::*;

use crate::common::Sandbox;
use crate::common::server::Server;

/// Everything outside the system schemas: (schema, object) pairs.
fn objects(server: &Server) -> Vec<String> {
    server
        .psql(
            "SELECT n.nspname || '.' || coalesce(c.relname, '')
             FROM pg_namespace n LEFT JOIN pg_class c ON c.relnamespace = n.oid
             WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
             ORDER BY 1",
        )
        .lines()
        .map(str::to_string)
        .collect()
}

/// Runs a short race with --keep (and `extra` flags) on `server`, and
/// returns the kept schema.
fn race_and_keep(sandbox: &Sandbox, server: &Server, extra: &[&str]) -> String {
    let out = sandbox
        .idem()
        .args([
            "race",
            "--keep",
            "--work-ms",
            "1",
            "--database-url",
            &server.url(),
        ])
        .args(extra)
        .assert()
        .success();
    kept_schema(&out.get_output().stderr)
}

/// The schema a `--keep` run names on stderr.
fn kept_schema(stderr: &[u8]) -> String {
    let stderr = String::from_utf8_lossy(stderr);
    let schema = stderr
        .trim()
        .strip_prefix("kept schema ")
        .expect("the kept schema is named");
    assert!(schema.starts_with("idem_"), "{schema}");
    schema.to_string()
}

#[test]
fn a_race_on_a_server_leaves_it_as_it_was() {
    let server = Server::start();
    let before = objects(&server);
    let sandbox = Sandbox::new("server-race");
    let out = sandbox
        .idem()
        .args(["race", "--json", "--database-url", &server.url()])
        .assert()
        .success();
    let result: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(result["key_rows"], 1);
    assert_eq!(objects(&server), before);
    // No disposable cluster was started for it.
    assert_eq!(sandbox.leftovers(), Vec::<String>::new());
}

#[test]
fn keep_leaves_only_the_runs_own_schema() {
    let server = Server::start();
    let before = objects(&server);
    let schema = race_and_keep(&Sandbox::new("server-keep"), &server, &[]);
    assert!(schema.starts_with("idem_"));
    let added: Vec<String> = objects(&server)
        .into_iter()
        .filter(|o| !before.contains(o))
        .collect();
    assert!(!added.is_empty());
    assert!(
        added.iter().all(|o| o.starts_with(&format!("{schema}."))),
        "everything idem made is inside {schema}: {added:?}"
    );
    assert!(added.contains(&format!("{schema}.idempotency_keys")));
    assert!(added.contains(&format!("{schema}.experience_points")));
}

#[test]
fn database_url_is_read_from_the_environment() {
    let server = Server::start();
    Sandbox::new("server-env")
        .idem()
        .env("DATABASE_URL", server.url())
        .args(["doctor", "--json"])
        .assert()
        .success()
        .stdout(predicate::str::contains("\"backend\":\"server\""));
}

#[test]
fn bad_urls_give_one_clear_line_and_a_failure() {
    let server = Server::start();
    let bad_role = format!(
        "postgres://nobody@localhost/postgres?host={}",
        server.socket().display()
    );
    let cases = [
        ("not a url", "malformed database URL"),
        (
            "postgres://postgres:secret@127.0.0.1:1/idem",
            "Connection refused",
        ),
        (bad_role.as_str(), "role \"nobody\" does not exist"),
    ];
    for (url, expected) in cases {
        let out = Sandbox::new("server-bad")
            .idem()
            .args(["race", "--database-url", url])
            .assert()
            .code(1)
            .stderr(predicate::str::contains(expected));
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
        assert_eq!(stderr.lines().count(), 1, "{url}: {stderr}");
        assert!(
            !stderr.contains("secret"),
            "passwords are never printed: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn audit_and_reap_work_on_a_kept_schema_and_leave_it_in_place() {
    let server = Server::start();
    let sandbox = Sandbox::new("server-audit");
    let schema = race_and_keep(&sandbox, &server, &["-s", "claim-work-complete"]);
    let before = objects(&server);

    let out = sandbox
        .idem()
        .args([
            "audit",
            "--json",
            "--schema",
            &schema,
            "--database-url",
            &server.url(),
        ])
        .assert()
        .success();
    let audit: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(audit["table"]["status"], "completed");
    assert!(
        audit["table"]["worker"].as_i64().is_some(),
        "who claimed it"
    );

    let out = sandbox
        .idem()
        .args([
            "reap",
            "--json",
            "--older-than",
            "0s",
            "--schema",
            &schema,
            "--database-url",
            &server.url(),
        ])
        .assert()
        .success();
    let reaped: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(
        reaped["removed_hours"].as_array().unwrap().len(),
        1,
        "the one completed key"
    );
    // Neither command created or dropped anything: the schema is as it was.
    assert_eq!(objects(&server), before);

    sandbox
        .idem()
        .args([
            "audit",
            "--schema",
            "idem_ffffffff",
            "--database-url",
            &server.url(),
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("does not exist"));
}

#[test]
fn stores_measures_both_stores() {
    let out = Sandbox::new("stores")
        .idem()
        .args([
            "stores",
            "--json",
            "--runs",
            "5",
            "--cache-max-entries",
            "20",
        ])
        .assert()
        .success();
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&out.get_output().stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows[0]["store"], "table");
    assert_eq!(rows[0]["runs_with_duplicates"], 0);
    assert_eq!(rows[0]["survives_eviction"], true);
    assert_eq!(rows[1]["store"], "cache");
    assert_eq!(rows[1]["survives_eviction"], false);
    assert_eq!(rows[1]["xp_rows_after_retry"], 2);
}
