//! Effects counted in a MySQL-family server: a MariaDB of the test's own, counted through `mysql://` with a password that is never shown, read-only, bounded on the server, and left as it was.

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
        let burst = crate::common::burst_line(&stdout);
        assert_eq!(burst["effects"]["effects"], effects, "{flaw:?}: {stdout}");
        assert!(!stdout.contains(PASSWORD) && !stderr.contains(PASSWORD));
    }
    // What a count may not do is refused, and shown without the password:
    // by its form before anything is sent (2), or by the server (4).
    let (url, _) = flawed::start(Flaw::None, &sandbox.dir);
    let url = format!("{url}/pay");
    let outfile = sandbox.dir.join("leaked.txt");
    let refused = [
        (
            format!(
                "SELECT count(*) FROM effects INTO OUTFILE '{}'",
                outfile.display()
            ),
            2,
        ),
        (
            "SELECT count(*) FROM effects; DELETE FROM kept".to_string(),
            2,
        ),
        // Closing the derived table early to slip a second statement in.
        (
            "SELECT count(*) FROM effects) AS x; DELETE FROM kept; SELECT * FROM (SELECT 1"
                .to_string(),
            2,
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

/// A count whose text closes idem's derived table early and comments out
/// its close, run by a user who has the FILE privilege: refused in one
/// line before anything is sent (exit 2), and no file is written, however
/// the comment or the file clause is spelled.
#[test]
fn a_count_cannot_close_its_wrapper_even_for_a_user_with_file() {
    let sandbox = Sandbox::new("mysql-count-file");
    let db = server(&sandbox);
    db.sql(&format!(
        "CREATE USER 'filer'@'127.0.0.1' IDENTIFIED BY '{PASSWORD}'; \
         GRANT FILE ON *.* TO 'filer'@'127.0.0.1'; \
         GRANT SELECT ON app.* TO 'filer'@'127.0.0.1'"
    ))
    .unwrap();
    let count_url = format!("mysql://filer:{PASSWORD}@127.0.0.1:{}/app", db.port);
    let (url, _) = flawed::start(Flaw::None, &sandbox.dir);
    let dump = sandbox.dir.join("dumped.txt");
    let d = dump.display();
    let attacks = [
        format!("SELECT count(*) FROM effects) AS t INTO DUMPFILE '{d}' #"),
        format!("SELECT count(*) FROM effects) AS t INTO OUTFILE '{d}' -- x"),
        format!("SELECT count(*) FROM effects) AS t INTO DUMPFILE '{d}' /* x"),
        format!("SELECT count(*) FROM effects /*!) AS t INTO DUMPFILE '{d}' */"),
        format!("SELECT 'a\\' ) AS t INTO DUMPFILE '{d}' #'"),
    ];
    for sql in attacks {
        let out = sandbox
            .idem()
            .args(["probe", &format!("{url}/pay"), "-d", "{}"])
            .args(["--count-sql", &sql, "--count-database-url", &count_url])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{sql}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(stderr.contains("--count-sql may not hold"), "{stderr}");
        assert!(!stderr.contains(PASSWORD), "{stderr}");
    }
    assert!(!dump.exists(), "a count wrote a file");
    // The same user's plain count still counts.
    let out = sandbox
        .idem()
        .args(["probe", &format!("{url}/pay"), "-d", r#"{"amount": 10}"#])
        .args(["--count-sql", "SELECT count(*) FROM effects"])
        .args(["--count-database-url", &count_url])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(2), "{out:?}");
}

/// A file a MySQL URL names (`ssl-ca`, `ssl-cert`, `ssl-key`) is read as
/// every file idem reads: `/dev/zero` and a FIFO are refused at once, in
/// one line, with exit 2, never read whole or waited on.
#[test]
fn files_a_mysql_url_names_are_read_bounded() {
    let sandbox = Sandbox::new("mysql-count-files");
    let fifo = sandbox.dir.join("ca.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let big = sandbox.dir.join("big.pem");
    std::fs::write(&big, vec![b'A'; 2 * 1024 * 1024]).unwrap();
    for param in ["ssl-ca", "ssl-cert", "ssl-key"] {
        for (path, said) in [
            ("/dev/zero".to_string(), "not a regular file"),
            (fifo.display().to_string(), "not a regular file"),
            (big.display().to_string(), "over"),
        ] {
            let count_url =
                format!("mysql://u:{PASSWORD}@127.0.0.1:1/app?ssl-mode=required&{param}={path}");
            let started = std::time::Instant::now();
            let out = sandbox
                .idem()
                .args(["probe", "http://127.0.0.1:1/pay", "-d", "{}"])
                .args(["--count-sql", "SELECT count(*) FROM effects"])
                .args(["--count-database-url", &count_url])
                .timeout(std::time::Duration::from_secs(30))
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{param}={path}: {stderr}");
            assert!(started.elapsed().as_secs() < 10, "{param}={path}");
            assert!(stderr.contains(param) && stderr.contains(said), "{stderr}");
            assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
            assert!(!stderr.contains(PASSWORD), "{stderr}");
        }
    }
}
