//! A guard file is someone else's code: its statements run as a role that reaches the run's tables and nothing else, and only on a cluster idem proves its own.

use std::path::{Path, PathBuf};

use idem::db::{ConnectOptions, Database};
use idem::limits::Origin;
use idem::race::options::RaceInput;

use crate::common::server::Server;
use crate::common::{Sandbox, refused_in_one_line};
use idem::race::Race;

/// The store step every attack below shares: lesson 1's.
const STORE: &str = "INSERT INTO idempotency_keys
    (key, operation, status, response_code, response_body, worker, completed_at)
VALUES ($key, $operation, 'completed', $response_code, $response, $worker, now())";

/// A find-then-store file whose find step is `find` and store `store`.
fn guard_file(dir: &Path, name: &str, find: &str, store: &str) -> PathBuf {
    let path = dir.join(name);
    let text = format!(
        "shape = \"find-then-store\"\n\n[steps]\nfind = '''\n{find}\n'''\n\nstore = '''\n{store}\n'''\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// Races `file` once, two workers, on `db`; returns what each worker did,
/// or the one line the race was refused with when the server refused a
/// statement as the file's statements are checked before the race.
async fn raced(db: &Database, file: PathBuf) -> Vec<String> {
    let settings = RaceInput::default()
        .with(|r| {
            r.strategy.strategy_file = Some(file);
            r.shape.workers = Some(2);
            r.app.work_ms = Some(0);
        })
        .build(Origin::Flags)
        .unwrap();
    match Race::prepare(db, settings).await {
        Ok(prepared) => {
            let r = prepared.run(1).await.unwrap();
            r.reports.iter().map(|w| w.did.clone()).collect()
        }
        Err(refused) => vec![refused.to_string()],
    }
}

/// Another PostgreSQL run by the same operating-system user as idem's
/// cluster: a guard file's find step cannot read its files, and its store
/// step cannot write into its data directory, by any of the ways a
/// superuser could. (`COPY ... PROGRAM` and `COPY ... TO` a file are
/// refused already when the file is read: a step is one SELECT, INSERT,
/// UPDATE, DELETE or WITH statement.)
#[tokio::test]
async fn a_guard_file_reaches_no_other_servers_files() {
    let dir = Sandbox::new("guard-least-privilege");
    let other = Server::start();
    let data = other.cluster.run_dir.join("data");
    let planted = data.join("planted-by-a-guard");
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let lesson_find = "SELECT response_body FROM idempotency_keys
        WHERE key = $key AND operation = $operation";
    let attacks = [
        (
            "read.toml",
            format!(
                "SELECT pg_read_file('{}')::jsonb AS response_body",
                data.join("PG_VERSION").display()
            ),
            STORE.to_string(),
        ),
        (
            "lo-export.toml",
            lesson_find.to_string(),
            format!(
                "SELECT lo_export(lo_from_bytea(0, 'x'), '{}')",
                planted.display()
            ),
        ),
        (
            "other-schema.toml",
            "SELECT to_jsonb(r) AS response_body FROM pg_catalog.pg_authid r LIMIT 1".to_string(),
            STORE.to_string(),
        ),
        (
            "another-schema.toml",
            lesson_find.to_string(),
            "DELETE FROM someone_else.secrets".to_string(),
        ),
    ];
    // Another schema in the same cluster, as another run's would be.
    sqlx::raw_sql(
        "CREATE SCHEMA someone_else;
         CREATE TABLE someone_else.secrets (id int);
         INSERT INTO someone_else.secrets VALUES (1), (2);",
    )
    .execute(&db.meta)
    .await
    .unwrap();
    for (name, find, store) in attacks {
        let did = raced(&db, guard_file(&dir.dir, name, &find, &store)).await;
        assert!(
            did.iter().all(|d| d.contains("permission denied")),
            "{name}: every worker was refused: {did:?}"
        );
    }
    assert!(
        !planted.exists(),
        "nothing was written into the other server"
    );
    let left: i64 = idem::db::book::query_scalar("SELECT count(*) FROM someone_else.secrets")
        .fetch_one(&db.meta)
        .await
        .unwrap();
    assert_eq!(left, 2, "another schema's rows stay");
    // And the lesson's own file still does its work, as that role.
    let lesson = guard_file(&dir.dir, "lesson.toml", lesson_find, STORE);
    let did = raced(&db, lesson).await;
    assert!(did.iter().any(|d| d.contains("made XP")), "{did:?}");
    db.close().await.unwrap();
}

/// A server idem did not start, reached through a socket directory named
/// like idem's run directories, with a cluster's data beside it: a guard
/// file is refused in one line and the user's rows stay, whether idem was
/// handed no token, or one the server's data directory does not hold.
#[test]
fn a_server_named_like_idems_is_not_trusted_with_a_guard_file() {
    let sandbox = Sandbox::new("guard-lookalike");
    let server = Server::start();
    assert!(
        server
            .socket()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("idem-"),
        "the socket directory is named like idem's"
    );
    server.psql(
        "CREATE TABLE public.users (id int);
         INSERT INTO public.users SELECT generate_series(1, 10);",
    );
    let wipe = guard_file(
        &sandbox.dir,
        "wipe.toml",
        "SELECT NULL::jsonb AS response_body FROM idempotency_keys WHERE key = $key",
        "DELETE FROM public.users",
    );
    // The test's server is a cluster idem's library made, with a token of
    // its own in its data directory; no idem process was handed it.
    let planted = server
        .cluster
        .run_dir
        .join("data")
        .join("idem-cluster-token");
    std::fs::write(&planted, "0123456789abcdef0123456789abcdef").unwrap();
    for handed in [None, Some("fedcba9876543210fedcba9876543210")] {
        let mut idem = sandbox.idem();
        idem.args([
            "race",
            "--database-url",
            &server.url(),
            "--strategy-file",
            wipe.to_str().unwrap(),
        ]);
        if let Some(token) = handed {
            idem.env("IDEM_CLUSTER_TOKEN", token);
        }
        let line = refused_in_one_line(&mut idem);
        assert!(
            line.contains("runs only on a disposable cluster of idem's"),
            "{handed:?}: {line}"
        );
        assert_eq!(
            server.psql("SELECT count(*) FROM public.users"),
            "10",
            "{handed:?}"
        );
    }
}

/// The same file on a cluster `idem db` made, reached by the URL it hands
/// out: proven idem's by its token, and raced.
#[test]
fn a_cluster_idem_db_made_is_proven_by_its_token() {
    let sandbox = Sandbox::new("guard-idem-db");
    let file = guard_file(
        &sandbox.dir,
        "lesson.toml",
        "SELECT response_body FROM idempotency_keys WHERE key = $key AND operation = $operation",
        STORE,
    );
    let idem = assert_cmd::cargo::cargo_bin("idem");
    let out = crate::common::succeeded(
        sandbox
            .idem()
            .args(["db", "--"])
            .arg(&idem)
            .args(["race", "--json", "--workers", "2", "--strategy-file"])
            .arg(&file),
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["key_rows"], 1);
    std::fs::remove_file(&file).unwrap();
    let left = sandbox.wait_clean(std::time::Duration::from_secs(10));
    assert!(left.is_empty(), "{left:?}");
}

/// A guard file's statement that never ends (`pg_sleep(3600)` as its
/// fingerprint step) is cancelled past the step limit: every request fails
/// naming the step, the race ends, and the server runs it no more.
#[tokio::test]
async fn a_step_that_never_ends_is_cancelled_and_named() {
    let dir = Sandbox::new("guard-step-limit");
    let solution = std::fs::read_to_string("exercises/solutions/4-fingerprint.toml").unwrap();
    let sleepy = solution.replace(
        "SELECT md5(concat_ws('|', $operation, $user_id, $amount, $lesson))",
        "SELECT pg_sleep(3600)::text || $operation",
    );
    assert_ne!(sleepy, solution);
    let file = dir.dir.join("sleepy.toml");
    std::fs::write(&file, sleepy).unwrap();
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let started = std::time::Instant::now();
    let did = raced(&db, file).await;
    assert!(started.elapsed().as_secs() < 60, "the race ended");
    assert_eq!(did.len(), 2, "{did:?}");
    for d in &did {
        assert!(
            d.contains("sleepy.toml line")
                && d.contains("step fingerprint ran past the step limit"),
            "{did:?}"
        );
    }
    let sleeping = || async {
        idem::db::book::query_scalar::<i64>(
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(3600)%' \
             AND state = 'active' AND pid <> pg_backend_pid()",
        )
        .fetch_one(&db.meta)
        .await
        .unwrap()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while sleeping().await > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the server still sleeps"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    db.close().await.unwrap();
}

/// A renew step the server refuses while the work runs is shown in the
/// winner's answer, never dropped in silence.
#[tokio::test]
async fn a_renew_step_that_fails_is_shown() {
    let dir = Sandbox::new("guard-renew-error");
    let solution = std::fs::read_to_string("exercises/solutions/9-heartbeat.toml").unwrap();
    let failing = solution.replace(
        "WHERE id = $claim_id AND worker = $worker AND status = 'pending'\n'''\n\nreplay",
        "WHERE id = $claim_id AND 1 / ($worker - $worker) = 1\n'''\n\nreplay",
    );
    assert_ne!(failing, solution);
    let file = dir.dir.join("failing-renew.toml");
    std::fs::write(&file, failing).unwrap();
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let settings = RaceInput::default()
        .with(|r| {
            r.strategy.strategy_file = Some(file);
            r.shape.workers = Some(2);
            r.app.work_ms = Some(200);
            r.guard.heartbeat_ms = Some(20);
            r.guard.stale_after_ms = Some(100);
        })
        .build(Origin::Flags)
        .unwrap();
    let r = Race::prepare(&db, settings)
        .await
        .unwrap()
        .run(1)
        .await
        .unwrap();
    let did: Vec<String> = r.reports.iter().map(|w| w.did.clone()).collect();
    assert!(
        did.iter()
            .any(|d| d.contains("step renew failed: division by zero")),
        "{did:?}"
    );
    db.close().await.unwrap();
}

/// On a cluster `idem db` made, a learner's app puts a `SECURITY DEFINER`
/// function in schema `public`; a guard file that calls it, by its
/// qualified name or by search path, is refused before the race and
/// stores nothing of what it returns.
#[test]
fn a_guard_reaches_nothing_in_public() {
    let sandbox = Sandbox::new("guard-public");
    let files = [
        (
            "qualified.toml",
            "public.app_secret()",
            "permission denied for schema public",
        ),
        ("searched.toml", "app_secret()", "does not exist"),
    ];
    let idem = assert_cmd::cargo::cargo_bin("idem");
    for (name, call, refused) in files {
        let file = guard_file(
            &sandbox.dir,
            name,
            &format!("SELECT to_jsonb({call}) AS response_body"),
            STORE,
        );
        let script = format!(
            "psql -q -v ON_ERROR_STOP=1 -c \"CREATE FUNCTION public.app_secret() RETURNS text \
             SECURITY DEFINER LANGUAGE sql AS \\$\\$ SELECT 'APP-SECRET-42' \\$\\$\" \
             && exec '{}' race --json --workers 2 --strategy-file '{}'",
            idem.display(),
            file.display()
        );
        let out = sandbox
            .idem()
            .args(["db", "--", "sh", "-c", &script])
            .output()
            .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert_eq!(out.status.code(), Some(1), "{name}: {stdout}\n{stderr}");
        assert!(stderr.contains(refused), "{name}: {stderr}");
        assert!(
            !stdout.contains("APP-SECRET") && !stderr.contains("APP-SECRET"),
            "{name}: {stdout}\n{stderr}"
        );
        std::fs::remove_file(&file).unwrap();
    }
    let left = sandbox.wait_clean(std::time::Duration::from_secs(10));
    assert!(left.is_empty(), "{left:?}");
}
