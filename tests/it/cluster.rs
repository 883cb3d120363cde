//! The disposable cluster: it starts, answers, and leaves nothing behind however the run ends.

use std::process::Stdio;
use std::time::Duration;

use predicates::prelude::*;

use crate::common;
use crate::common::{Sandbox, first_line_then_drain, is_root, runnable, signal};

#[test]
fn doctor_starts_a_cluster_that_answers_and_leaves_nothing() {
    let sandbox = Sandbox::new("doctor");
    let out = sandbox.idem().args(["doctor", "--json"]).assert().success();
    let findings: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(findings["backend"], "disposable");
    // The version comes from the server itself, so it answered a query.
    assert!(
        findings["server_version"]
            .as_str()
            .unwrap()
            .starts_with(char::is_numeric)
    );
    assert!(
        findings["run_dir"]
            .as_str()
            .unwrap()
            .starts_with(sandbox.dir.to_str().unwrap())
    );
    assert_eq!(sandbox.leftovers(), Vec::<String>::new());
}

#[test]
fn a_race_leaves_nothing_after_a_normal_exit() {
    let sandbox = Sandbox::new("normal-exit");
    sandbox
        .idem()
        .args(["race", "--work-ms", "1"])
        .assert()
        .success();
    assert_eq!(sandbox.leftovers(), Vec::<String>::new());
}

#[test]
fn an_error_after_start_up_leaves_nothing() {
    let sandbox = Sandbox::new("error-exit");
    // The cluster allows 200 connections: the pool check fails after it started.
    sandbox
        .idem()
        .args(["race", "--pool-size", "5000"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("connections the server has free"));
    assert_eq!(sandbox.leftovers(), Vec::<String>::new());
}

/// Starts a long race, waits until its cluster is ready and the race is under
/// way, then sends `sig`; returns the exit code and what was left behind.
fn interrupt_mid_run(name: &str, sig: i32) -> (Option<i32>, Vec<String>) {
    let sandbox = Sandbox::new(name);
    let mut child = sandbox
        .idem_std()
        .args(["race", "--runs", "100000", "--work-ms", "1", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The first JSON line proves that a race ran on a live cluster.
    let first = first_line_then_drain(&mut child);
    assert!(first.contains("\"xp_rows\""), "no race output: {first:?}");
    assert!(
        sandbox
            .wait_for_ready_cluster(Duration::from_secs(5))
            .is_some()
    );
    signal(child.id(), sig);
    let status = child.wait().unwrap();
    // SIGKILL gives idem no chance: its supervisor cleans up on its own.
    let left = sandbox.wait_clean(Duration::from_secs(10));
    (status.code(), left)
}

#[test]
fn sigint_mid_run_stops_cleanly_and_leaves_nothing() {
    let (code, left) = interrupt_mid_run("sigint", libc::SIGINT);
    assert_eq!(code, Some(130));
    assert_eq!(left, Vec::<String>::new());
}

#[test]
fn sigterm_mid_run_stops_cleanly_and_leaves_nothing() {
    let (code, left) = interrupt_mid_run("sigterm", libc::SIGTERM);
    assert_eq!(code, Some(143));
    assert_eq!(left, Vec::<String>::new());
}

#[test]
fn sigkill_mid_run_still_leaves_nothing() {
    let (code, left) = interrupt_mid_run("sigkill", libc::SIGKILL);
    assert_eq!(code, None, "killed by a signal, so no exit code");
    assert_eq!(left, Vec::<String>::new());
}

#[test]
fn missing_binaries_give_one_clear_line() {
    let sandbox = Sandbox::new("no-binaries");
    let empty = sandbox.dir.join("empty-bin");
    std::fs::create_dir(&empty).unwrap();
    let out = sandbox
        .idem()
        .args(["race", "--pg-bin"])
        .arg(&empty)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("no PostgreSQL server binaries"))
        .stderr(predicate::str::contains("apt-get install postgresql"))
        .stderr(predicate::str::contains("--database-url"));
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert_eq!(stderr.lines().count(), 1, "one line, got: {stderr}");
    std::fs::remove_dir(&empty).unwrap();
    assert_eq!(sandbox.leftovers(), Vec::<String>::new());
}

#[test]
fn two_runs_at_once_each_get_their_own_cluster() {
    let sandbox = Sandbox::new("two-at-once");
    let spawn = || {
        sandbox
            .idem_std()
            .args(["doctor", "--json"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert!(a.status.success() && b.status.success());
    let dir =
        |out: &[u8]| serde_json::from_slice::<serde_json::Value>(out).unwrap()["run_dir"].clone();
    assert_ne!(dir(&a.stdout), dir(&b.stdout));
    assert_eq!(sandbox.leftovers(), Vec::<String>::new());
}

#[test]
fn as_root_the_cluster_runs_as_an_unprivileged_user() {
    let test = "as_root_the_cluster_runs_as_an_unprivileged_user";
    if !runnable(test, is_root(), "needs root") {
        return;
    }
    let sandbox = Sandbox::new("root");
    let mut child = sandbox
        .idem_std()
        .args(["race", "--runs", "100000", "--work-ms", "1", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    first_line_then_drain(&mut child);
    let run_dir = sandbox
        .wait_for_ready_cluster(Duration::from_secs(5))
        .unwrap();
    let pid_text = std::fs::read_to_string(run_dir.join("data/postmaster.pid")).unwrap();
    let pid = pid_text.lines().next().unwrap().trim().to_string();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let uid_line = status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .unwrap()
        .to_string();
    signal(child.id(), libc::SIGINT);
    child.wait().unwrap();
    let uid: u32 = uid_line.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert_ne!(uid, 0, "postgres must not run as root");
    assert_eq!(
        sandbox.wait_clean(Duration::from_secs(10)),
        Vec::<String>::new()
    );
}

#[test]
fn directories_of_killed_runs_are_swept_by_the_next_run() {
    let sandbox = Sandbox::new("sweep");
    // As a first run killed during initdb, or a run whose supervisor died, leaves them.
    let dead = ["idem-999999-0a1b2c3d", "idem-initdb-999999-0a1b2c3d"];
    for name in dead {
        std::fs::create_dir_all(sandbox.dir.join(name).join("data")).unwrap();
    }
    sandbox.idem().arg("doctor").assert().success();
    assert_eq!(sandbox.leftovers(), Vec::<String>::new());
}

/// Run by an ordinary user, idem runs initdb and postgres as that user.
/// (Exercised from root through runuser, as CI runs as root.)
#[test]
fn as_an_ordinary_user_the_cluster_runs_as_that_user() {
    let test = "as_an_ordinary_user_the_cluster_runs_as_that_user";
    let runuser = std::path::Path::new("/usr/sbin/runuser");
    if !runnable(test, is_root(), "needs root, to switch to an ordinary user")
        || !runnable(
            test,
            runuser.exists(),
            "needs /usr/sbin/runuser (util-linux)",
        )
    {
        return;
    }
    let sandbox = Sandbox::new("ordinary-user");
    // The checkout may live where that user cannot reach (under /root, say):
    // a copy of the binary in the sandbox is within its reach.
    let idem = sandbox.dir.join("idem");
    std::fs::copy(assert_cmd::cargo::cargo_bin("idem"), &idem).unwrap();
    let cache = sandbox.dir.join("cache");
    std::fs::create_dir(&cache).unwrap();
    common::chown_to_postgres(&cache);
    let out = std::process::Command::new("/usr/sbin/runuser")
        .args(["-u", "postgres", "--", "env"])
        .arg(format!("TMPDIR={}", sandbox.dir.display()))
        .arg(format!("IDEM_CACHE_DIR={}", cache.display()))
        .arg("NO_COLOR=1")
        .arg(&idem)
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let findings: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(findings["backend"], "disposable");
    assert_eq!(
        findings["template_made_now"], true,
        "initdb ran as the ordinary user"
    );
    std::fs::remove_dir_all(&cache).unwrap();
    std::fs::remove_file(&idem).unwrap();
    assert_eq!(sandbox.leftovers(), Vec::<String>::new());
}

#[test]
fn root_is_refused_as_the_clusters_user() {
    if !runnable(
        "root_is_refused_as_the_clusters_user",
        is_root(),
        "needs root",
    ) {
        return;
    }
    let sandbox = Sandbox::new("pg-user-root");
    sandbox
        .idem()
        .args(["doctor", "--pg-user", "root"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "PostgreSQL refuses to run as root",
        ));
    sandbox
        .idem()
        .args(["doctor", "--pg-user", "no-such-user-here"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("no such user"));
    assert_eq!(sandbox.leftovers(), Vec::<String>::new());
}
