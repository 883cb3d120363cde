//! Effects counted in a MySQL-family server: a MariaDB of the test's own, counted through `mysql://` with a password that is never shown, read-only, bounded on the server, and left as it was.

use serde_json::Value;

use crate::common::Sandbox;
use crate::common::flawed::{self, Flaw};
use crate::common::mariadb::Mariadb;

const PASSWORD: &str = "pr0be-s3cret";

/// The server: the API's `effects` table, a `kept` table of someone
/// else's that nothing may change, and a user that may only read.
fn server(sandbox: &Sandbox) -> Mariadb {
    let db = Mariadb::start(&sandbox.dir);
    db.sql(&format!(
        "CREATE DATABASE app; CREATE TABLE app.effects (id INT AUTO_INCREMENT PRIMARY KEY); \
         CREATE TABLE app.kept (id INT PRIMARY KEY, note TEXT); \
         INSERT INTO app.kept VALUES (1, 'a'), (2, 'b'), (3, 'c'); \
         CREATE USER 'prober'@'127.0.0.1' IDENTIFIED BY '{PASSWORD}'; \
         GRANT SELECT ON app.* TO 'prober'@'127.0.0.1'"
    ))
    .unwrap();
    db
}

fn probe(sandbox: &Sandbox, url: &str, db: &Mariadb, sql: &str) -> std::process::Output {
    let count_url = format!("mysql://prober:{PASSWORD}@127.0.0.1:{}/app", db.port);
    sandbox
        .idem()
        .args(["probe", url, "-d", r#"{"amount": 10}"#, "--json"])
        .args(["--count-sql", sql, "--count-database-url", &count_url])
        .output()
        .unwrap()
}

#[test]
fn a_mariadb_count_judges_the_burst_and_leaves_the_server_as_it_was() {
    let sandbox = Sandbox::new("mysql-count");
    let db = server(&sandbox);
    let kept = db.sql("SELECT * FROM app.kept ORDER BY id").unwrap();
    let count = "SELECT count(*) FROM effects";
    for (flaw, code, effects) in [(Flaw::NoGuard, 1, 5), (Flaw::None, 0, 1)] {
        let (url, _) = flawed::start_running(flaw, &sandbox.dir, &db.insert_command());
        let out = probe(&sandbox, &format!("{url}/pay"), &db, count);
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert_eq!(
            out.status.code(),
            Some(code),
            "{flaw:?}: {stdout}\n{stderr}"
        );
        let burst: Value = stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v.get("shots").is_some())
            .expect("the burst's line");
        assert_eq!(burst["effects"]["effects"], effects, "{flaw:?}: {stdout}");
        assert!(!stdout.contains(PASSWORD) && !stderr.contains(PASSWORD));
    }
    // What a count may not do is refused, and shown without the password.
    let (url, _) = flawed::start(Flaw::None, &sandbox.dir);
    let url = format!("{url}/pay");
    let outfile = sandbox.dir.join("leaked.txt");
    let refused = [
        (
            format!(
                "SELECT count(*) FROM effects INTO OUTFILE '{}'",
                outfile.display()
            ),
            4,
        ),
        (
            "SELECT count(*) FROM effects; DELETE FROM kept".to_string(),
            4,
        ),
        // Closing the derived table early to slip a second statement in.
        (
            "SELECT count(*) FROM effects) AS x; DELETE FROM kept; SELECT * FROM (SELECT 1"
                .to_string(),
            4,
        ),
        ("DELETE FROM kept".to_string(), 2),
        ("SELECT note FROM kept".to_string(), 4),
    ];
    for (sql, code) in refused {
        let out = probe(&sandbox, &url, &db, &sql);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{sql}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(!stderr.contains(PASSWORD), "{stderr}");
    }
    assert!(!outfile.exists(), "a count wrote a file");
    // A count that will not end is stopped by the server.
    let out = sandbox
        .idem()
        .args(["probe", &url, "-d", "{}"])
        .args(["--count-sql", "SELECT sleep(30)"])
        .args([
            "--count-database-url",
            &format!("mysql://prober:{PASSWORD}@127.0.0.1:{}/app", db.port),
        ])
        .args(["--count-timeout-ms", "500"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    let running = db
        .sql("SELECT count(*) FROM information_schema.processlist WHERE info LIKE '%sleep(30)%' AND info NOT LIKE '%processlist%'")
        .unwrap();
    assert_eq!(running, "0", "the server still runs the count");
    assert_eq!(db.sql("SELECT * FROM app.kept ORDER BY id").unwrap(), kept);
}
