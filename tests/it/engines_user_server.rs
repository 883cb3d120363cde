//! The races on a MariaDB of the user's own (`--database-url mysql://`): a database of the run's own, made and dropped, nothing else on the server changed, row for row and grant for grant, and the password never shown.

use crate::common::Sandbox;
use crate::common::mariadb::Mariadb;

const PASSWORD: &str = "r4cer-s3cret";

/// The user's server: someone's `app` database with rows, a user that may
/// make and drop `idem_...` databases (and read lock waits: PROCESS), and
/// a user that may do neither.
fn server(sandbox: &Sandbox) -> Mariadb {
    let db = Mariadb::start(&sandbox.dir);
    db.sql(&format!(
        "CREATE DATABASE app; CREATE TABLE app.kept (id INT PRIMARY KEY, note TEXT); \
         INSERT INTO app.kept VALUES (1, 'a'), (2, 'b'); \
         CREATE TABLE app.idempotency_keys (id INT PRIMARY KEY); \
         INSERT INTO app.idempotency_keys VALUES (7); \
         CREATE USER 'racer'@'127.0.0.1' IDENTIFIED BY '{PASSWORD}'; \
         GRANT ALL ON `idem\\_%`.* TO 'racer'@'127.0.0.1'; \
         GRANT PROCESS ON *.* TO 'racer'@'127.0.0.1'; \
         CREATE USER 'weak'@'127.0.0.1' IDENTIFIED BY '{PASSWORD}'; \
         GRANT SELECT ON app.* TO 'weak'@'127.0.0.1'"
    ))
    .unwrap();
    db
}

/// Everything on the server a run must leave as it was.
fn state(db: &Mariadb) -> String {
    [
        "SHOW DATABASES",
        "SELECT * FROM app.kept ORDER BY id",
        "SELECT * FROM app.idempotency_keys",
        "SELECT User, Host FROM mysql.user ORDER BY User, Host",
        "SHOW GRANTS FOR 'racer'@'127.0.0.1'",
        "SHOW GRANTS FOR 'weak'@'127.0.0.1'",
    ]
    .iter()
    .map(|sql| db.sql(sql).unwrap())
    .collect::<Vec<_>>()
    .join("\n--\n")
}

/// `idem ARGS` against `user`'s URL: exit code, stdout, stderr.
fn idem(sandbox: &Sandbox, db: &Mariadb, user: &str, args: &[&str]) -> (i32, String, String) {
    let url = format!("mysql://{user}:{PASSWORD}@127.0.0.1:{}/", db.port);
    let out = sandbox
        .idem()
        .args(args)
        .args(["--engine", "mariadb", "--database-url", &url])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(
        !stdout.contains(PASSWORD) && !stderr.contains(PASSWORD),
        "{args:?} showed the password: {stdout}{stderr}"
    );
    (out.status.code().unwrap_or(-1), stdout, stderr)
}

/// The course's strategies side by side on the user's server: one race
/// each, lesson 1's figure for check-then-store, one XP row for the claim.
fn compared_there(sandbox: &Sandbox, db: &Mariadb) {
    let (code, out, err) = idem(sandbox, db, "racer", &["compare", "--json"]);
    assert_eq!(code, 0, "{err}");
    let raced: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let xp_of = |strategy: &str| {
        raced
            .iter()
            .find(|r| r["strategy"] == strategy)
            .and_then(|r| r["xp_rows"].as_u64())
    };
    assert_eq!(xp_of("check-then-store"), Some(4), "{out}");
    assert_eq!(xp_of("claim-work-complete"), Some(1), "{out}");
}

#[test]
fn races_on_a_users_server_leave_it_as_it_was() {
    let sandbox = Sandbox::new("engines-user-server");
    let db = server(&sandbox);
    let before = state(&db);
    // Lesson 1's figure, in a database of the run's own.
    let (code, out, err) = idem(&sandbox, &db, "racer", &["race", "--json"]);
    assert_eq!(code, 0, "{err}");
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (r["key_rows"].as_u64(), r["xp_rows"].as_u64()),
        (Some(1), Some(4)),
        "{r}"
    );
    // Step by step, and every interleaving (a guard that fails exits 1).
    let (code, _, err) = idem(
        &sandbox,
        &db,
        "racer",
        &["explore", "-s", "check-then-store"],
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("the guard failed in 60 of 70 interleavings"),
        "{err}"
    );
    // Lesson 8's matrix, there and nowhere else: no PostgreSQL started.
    let (code, out, err) = idem(
        &sandbox,
        &db,
        "racer",
        &["matrix", "-s", "check-then-store", "--runs", "1", "--json"],
    );
    assert_eq!(code, 0, "{err}");
    let m: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(m["engine"], "mariadb", "{m}");
    assert!(!m["rows"].as_array().unwrap().is_empty(), "{m}");
    compared_there(&sandbox, &db);
    assert_eq!(state(&db), before, "a run changed the user's server");
    // A guard file is someone else's code: it runs only on a server idem
    // started, never on the user's, and the refusal leaves nothing.
    let (code, _, err) = idem(
        &sandbox,
        &db,
        "racer",
        &[
            "race",
            "--strategy-file",
            "examples/mariadb/claim-work-complete.toml",
        ],
    );
    assert_eq!((code, err.lines().count()), (1, 1), "{err}");
    assert!(
        err.contains("runs only on a MariaDB server idem started"),
        "{err}"
    );
    assert_eq!(
        state(&db),
        before,
        "a refused guard file changed the user's server"
    );

    // --keep keeps the run's database, and names it.
    let (code, _, err) = idem(&sandbox, &db, "racer", &["race", "--keep"]);
    assert_eq!(code, 0, "{err}");
    let kept = err
        .split_whitespace()
        .find(|w| w.starts_with("idem_"))
        .unwrap_or_else(|| panic!("no database named: {err}"));
    assert!(
        err.starts_with(&format!("kept database {kept} on mysql://racer:***@")),
        "{err}"
    );
    let tables = db.sql(&format!("SHOW TABLES FROM `{kept}`")).unwrap();
    assert!(tables.contains("experience_points"), "{tables}");
    db.sql(&format!("DROP DATABASE `{kept}`")).unwrap();
    assert_eq!(state(&db), before);
}

#[test]
fn a_user_who_may_not_race_there_is_told_in_one_line() {
    let sandbox = Sandbox::new("engines-user-refused");
    let db = server(&sandbox);
    let before = state(&db);
    // No right to make a database: refused before anything is made.
    let (code, _, err) = idem(&sandbox, &db, "weak", &["race"]);
    assert_eq!((code, err.lines().count()), (1, 1), "{err}");
    assert!(
        err.contains("create and drop databases named idem_"),
        "{err}"
    );
    // A wrong password: the server's refusal, without the password.
    let url = format!("mysql://racer:wrong-{PASSWORD}@127.0.0.1:{}/", db.port);
    let out = sandbox
        .idem()
        .args(["race", "--engine", "mariadb", "--database-url", &url])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        (out.status.code(), err.lines().count()),
        (Some(1), 1),
        "{err}"
    );
    assert!(err.contains("1045") && !err.contains(PASSWORD), "{err}");
    // A PostgreSQL URL names the other engine's server.
    let out = sandbox
        .idem()
        .args(["race", "--engine", "mariadb"])
        .args([
            "--database-url",
            &format!("postgres://u:{PASSWORD}@127.0.0.1/d"),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("needs a mysql:// or mariadb:// URL"), "{err}");
    assert!(!err.contains(PASSWORD), "{err}");
    assert_eq!(state(&db), before);
}

/// `idem serve --engine mariadb` on the user's server: the app's awards
/// decided in a database of the run's own there (201, the stored response
/// replayed, 422 for the key reused with another amount, one key, one XP
/// row, one call), the ready line naming the server without its password,
/// and after Ctrl-C the server as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_app_served_on_a_users_server_leaves_it_as_it_was() {
    use crate::common::app::{Served, award, json, send};
    let sandbox = Sandbox::new("engines-user-served");
    let db = server(&sandbox);
    let before = state(&db);
    let url = format!("mysql://racer:{PASSWORD}@127.0.0.1:{}/", db.port);
    let mut app = Served::start(
        "engines-user-served-app",
        &["--engine", "mariadb", "-s", "guard", "--database-url", &url],
    );
    assert!(!app.ready.to_string().contains(PASSWORD), "{}", app.ready);
    // Its database is the run's own, there, and named.
    let own = app.field("schema");
    assert!(own.starts_with("idem_"), "{}", app.ready);
    let databases = db.sql("SHOW DATABASES").unwrap();
    assert!(databases.contains(&own), "{databases}");
    let named = app.field("database_url");
    assert!(named.contains(&format!(":{}/", db.port)), "{named}");
    let body = r#"{"user_id": 42, "amount": 10}"#;
    let first = award(&app.endpoint(), Some("\"k1\""), body).await;
    assert_eq!(first.status, 201);
    let again = award(&app.endpoint(), Some("\"k1\""), body).await;
    assert_eq!((again.status, json(&again)), (201, json(&first)));
    let amount_20 = r#"{"user_id": 42, "amount": 20}"#;
    let other = award(&app.endpoint(), Some("\"k1\""), amount_20).await;
    assert_eq!(other.status, 422);
    let counts = format!("{}/counts", app.field("url"));
    let counted = send(hyper::Method::GET, &counts, &[], "").await;
    assert_eq!(
        json(&counted),
        serde_json::json!({ "key_rows": 1, "xp_rows": 1, "service_calls": 1 })
    );
    assert_eq!(app.stop(), Some(0));
    assert_eq!(
        state(&db),
        before,
        "the served app changed the user's server"
    );
}
