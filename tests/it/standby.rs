//! More than one database (lesson 10): a hot standby of the disposable cluster, on PostgreSQL's own streaming replication.

use std::time::Duration;

use crate::common::{Sandbox, refused_in_one_line};

/// `idem doctor --standby` copies the cluster with pg_basebackup, starts
/// the copy as a hot standby, and reads on it a row committed on the
/// primary; both servers and their directories are gone at exit.
#[test]
fn a_hot_standby_streams_the_primary_and_goes_with_it() {
    let sandbox = Sandbox::new("standby-doctor");
    let out = sandbox
        .idem()
        .args(["doctor", "--standby", "--json"])
        .assert()
        .success();
    let found: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let standby = &found["standby"];
    let run_dir = standby["run_dir"].as_str().unwrap();
    assert!(
        run_dir.starts_with(sandbox.dir.to_str().unwrap()),
        "the standby's run directory is below TMPDIR: {run_dir}"
    );
    assert_ne!(run_dir, found["run_dir"].as_str().unwrap());
    // The row was read on the standby: replayed, in a measured time.
    assert!(standby["replayed_ms"].as_f64().unwrap() > 0.0, "{standby}");
    assert!(standby["lag_bytes"].as_i64().unwrap() >= 0, "{standby}");
    assert_eq!(
        sandbox.wait_clean(Duration::from_secs(10)),
        Vec::<String>::new()
    );
}

/// idem never makes a standby of, or reconfigures, a user's server.
#[test]
fn a_standby_of_a_users_server_is_refused() {
    let sandbox = Sandbox::new("standby-refused");
    let line = refused_in_one_line(sandbox.idem().args([
        "doctor",
        "--standby",
        "--database-url",
        "postgres://someone@127.0.0.1:1/theirs",
    ]));
    assert!(
        line.contains("idem never reconfigures your server"),
        "{line}"
    );
}
