//! A run on a user's MariaDB killed with SIGKILL leaves its database; a later run sweeps it once its run is proven gone (its lock free, its heartbeat a minute old), and never a live run's, a kept one's, or a look-alike it cannot prove it made.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::Sandbox;
use crate::common::mariadb::Mariadb;

const PASSWORD: &str = "sw33per-s3cret";

/// `racer`'s URL on `db`.
fn url(db: &Mariadb) -> String {
    format!("mysql://racer:{PASSWORD}@127.0.0.1:{}/", db.port)
}

/// The run databases on the server now.
fn run_databases(db: &Mariadb) -> Vec<String> {
    let listed = db.sql("SHOW DATABASES LIKE 'idem\\_%'").unwrap();
    listed.lines().map(str::to_string).collect()
}

/// A long race on `db` in the background, once its database is there:
/// the process and its database.
#[allow(
    clippy::zombie_processes,
    reason = "the caller waits for the race it is handed"
)]
fn long_race(sandbox: &Sandbox, db: &Mariadb) -> (std::process::Child, String) {
    let before = run_databases(db);
    let mut child = sandbox
        .idem_std()
        .args(["race", "--engine", "mariadb", "--work-ms", "20000"])
        .args(["--database-url", &url(db)])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let new = run_databases(db).into_iter().find(|d| !before.contains(d));
        // Its mark is made with it: wait for its tables too.
        if let Some(name) = new
            && db
                .sql(&format!("SELECT COUNT(*) FROM `{name}`.experience_points"))
                .is_ok()
        {
            return (child, name);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("no run database in 30 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Makes `name`'s last heartbeat two minutes old, as a silent run's is.
fn silent(db: &Mariadb, name: &str) {
    db.sql(&format!(
        "UPDATE `{name}`.idem_run SET beat_at = NOW(6) - INTERVAL 2 MINUTE"
    ))
    .unwrap();
}

#[test]
fn a_killed_runs_database_is_swept_and_no_other() {
    let sandbox = Sandbox::new("engines-sweep");
    let db = Mariadb::start(&sandbox.dir);
    db.sql(&format!(
        "CREATE USER 'racer'@'127.0.0.1' IDENTIFIED BY '{PASSWORD}'; \
         GRANT ALL ON `idem\\_%`.* TO 'racer'@'127.0.0.1'; \
         CREATE DATABASE idem_0badc0de; \
         CREATE TABLE idem_0badc0de.idem_run (run_id CHAR(36), seal CHAR(64), \
             kept BOOLEAN, beat_at DATETIME(6)); \
         INSERT INTO idem_0badc0de.idem_run VALUES \
             ('00000000-0000-0000-0000-000000000000', REPEAT('0', 64), 0, \
              NOW(6) - INTERVAL 1 DAY)"
    ))
    .unwrap();
    // A run killed mid-race leaves its database behind.
    let (mut killed, gone) = long_race(&sandbox, &db);
    killed.kill().unwrap();
    killed.wait().unwrap();
    assert!(run_databases(&db).contains(&gone));
    // The server lets its lock go once it has seen the connection close.
    let deadline = Instant::now() + Duration::from_secs(10);
    let free = format!("SELECT IS_FREE_LOCK('idem run {gone}')");
    while db.sql(&free).unwrap() != "1" {
        assert!(
            Instant::now() < deadline,
            "the killed run's lock is still held"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // A live run, silent as long (as if its beats were late): its lock
    // still holds it.
    let (mut live, alive) = long_race(&sandbox, &db);
    silent(&db, &gone);
    silent(&db, &alive);
    // A fresh one sweeps what is provably a gone run's.
    let out = sandbox
        .idem()
        .args(["race", "--engine", "mariadb", "--database-url", &url(&db)])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("dropped database {gone}")),
        "{stderr}"
    );
    assert!(!stderr.contains(PASSWORD));
    let left = run_databases(&db);
    assert!(!left.contains(&gone), "{left:?}");
    assert!(left.contains(&alive), "a live run's database was swept");
    assert!(
        left.contains(&"idem_0badc0de".to_string()),
        "a look-alike was swept"
    );
    // The live run, stopped, drops its own database, and only its own.
    crate::common::signal(live.id(), libc::SIGTERM);
    assert!(live.wait().unwrap().code().is_some());
    let left = run_databases(&db);
    assert_eq!(left, vec!["idem_0badc0de".to_string()]);
}
