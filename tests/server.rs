//! With --database-url: idem works in a schema of its own and touches nothing else.
//!
//! The "real server" here is a cluster the test starts itself through idem's
//! library, so the test needs nothing but PostgreSQL's binaries.

mod common;

use common::Sandbox;
use idem::db::{Cluster, ClusterOptions};
use predicates::prelude::*;
use std::process::Command;

fn server() -> Cluster {
    Cluster::start(&ClusterOptions::default()).unwrap()
}

fn url(cluster: &Cluster) -> String {
    format!(
        "postgres://postgres@localhost/postgres?host={}",
        cluster.socket_dir().display()
    )
}

/// Everything outside the system schemas: (schema, object) pairs.
fn objects(cluster: &Cluster) -> Vec<String> {
    let out = Command::new(cluster.bins.dir.join("psql"))
        .args(["-X", "-A", "-t", "-h"])
        .arg(cluster.socket_dir())
        .args(["-U", "postgres", "-d", "postgres", "-c"])
        .arg(
            "SELECT n.nspname || '.' || coalesce(c.relname, '')
             FROM pg_namespace n LEFT JOIN pg_class c ON c.relnamespace = n.oid
             WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
             ORDER BY 1",
        )
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// Runs a short race with --keep (and `extra` flags) on `cluster`, and
/// returns the kept schema.
fn race_and_keep(sandbox: &Sandbox, cluster: &Cluster, extra: &[&str]) -> String {
    let out = sandbox
        .idem()
        .args([
            "race",
            "--keep",
            "--work-ms",
            "1",
            "--database-url",
            &url(cluster),
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
    let cluster = server();
    let before = objects(&cluster);
    let sandbox = Sandbox::new("server-race");
    let out = sandbox
        .idem()
        .args(["race", "--json", "--database-url", &url(&cluster)])
        .assert()
        .success();
    let result: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(result["key_rows"], 1);
    assert_eq!(objects(&cluster), before);
    // No disposable cluster was started for it.
    assert_eq!(sandbox.leftovers(), Vec::<String>::new());
}

#[test]
fn keep_leaves_only_the_runs_own_schema() {
    let cluster = server();
    let before = objects(&cluster);
    let schema = race_and_keep(&Sandbox::new("server-keep"), &cluster, &[]);
    assert!(schema.starts_with("idem_"));
    let added: Vec<String> = objects(&cluster)
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
    let cluster = server();
    Sandbox::new("server-env")
        .idem()
        .env("DATABASE_URL", url(&cluster))
        .args(["doctor", "--json"])
        .assert()
        .success()
        .stdout(predicate::str::contains("\"backend\":\"server\""));
}

#[test]
fn bad_urls_give_one_clear_line_and_a_failure() {
    let cluster = server();
    let bad_role = format!(
        "postgres://nobody@localhost/postgres?host={}",
        cluster.socket_dir().display()
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
    let cluster = server();
    let sandbox = Sandbox::new("server-audit");
    let schema = race_and_keep(&sandbox, &cluster, &["-s", "claim-work-complete"]);
    let before = objects(&cluster);

    let out = sandbox
        .idem()
        .args([
            "audit",
            "--json",
            "--schema",
            &schema,
            "--database-url",
            &url(&cluster),
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
            &url(&cluster),
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
    assert_eq!(objects(&cluster), before);

    sandbox
        .idem()
        .args([
            "audit",
            "--schema",
            "idem_ffffffff",
            "--database-url",
            &url(&cluster),
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

#[test]
fn a_killed_runs_schema_is_dropped_by_the_next_run_and_kept_schemas_stay() {
    let cluster = server();
    let before = objects(&cluster);
    let sandbox = Sandbox::new("server-killed");
    // A schema kept on purpose must survive the sweep.
    let kept = race_and_keep(&sandbox, &cluster, &[]);

    let mut child = sandbox
        .idem_std()
        .args([
            "race",
            "--runs",
            "100000",
            "--work-ms",
            "1",
            "--json",
            "--database-url",
            &url(&cluster),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut first,
    )
    .unwrap();
    assert!(first.contains("xp_rows"), "a race ran before the kill");
    common::signal(child.id(), libc::SIGKILL);
    child.wait().unwrap();
    let left: Vec<String> = objects(&cluster)
        .into_iter()
        .filter(|o| !before.contains(o))
        .collect();
    assert!(
        left.iter().any(|o| !o.starts_with(&format!("{kept}."))),
        "the killed run left its schema: {left:?}"
    );

    sandbox
        .idem()
        .args(["doctor", "--database-url", &url(&cluster)])
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "left by an idem run that was killed",
        ));
    let left: Vec<String> = objects(&cluster)
        .into_iter()
        .filter(|o| !before.contains(o))
        .collect();
    assert!(
        !left.is_empty() && left.iter().all(|o| o.starts_with(&format!("{kept}."))),
        "only the kept schema remains: {left:?}"
    );
}
