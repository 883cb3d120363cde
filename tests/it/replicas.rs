//! The app as several real processes (`--replicas`): the pool's arithmetic per process, the memory guard that holds on one and not on two, and nothing left behind.
//!
//! The figures depend on every request finding no key before the first
//! store, as lesson 1's do; they are asserted as rates over runs (measured
//! at 30 of 30 runs on an idle machine).

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use crate::common::{Sandbox, processes, processes_mentioning, signal, wait_for};

/// The races of `idem race ARGS --json`, one object per run.
fn races(sandbox: &Sandbox, args: &[&str]) -> Vec<Value> {
    let out = sandbox
        .idem()
        .args(["race", "--json"])
        .args(args)
        .assert()
        .success()
        .get_output()
        .clone();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn runs_with(results: &[Value], field: &str, value: u64) -> usize {
    results.iter().filter(|r| r[field] == value).count()
}

/// Which replica answered each worker.
fn replicas_of(race: &Value) -> Vec<u64> {
    race["reports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            w["replica"]
                .as_u64()
                .expect("every answer names its replica")
        })
        .collect()
}

/// Ten requests over two processes of pool five, each with a runner
/// holding one: four XP rows per process, eight in all.
#[test]
fn check_then_store_over_two_replicas_works_once_per_connection_in_each() {
    let sandbox = Sandbox::new("replicas-arithmetic");
    let results = races(
        &sandbox,
        &[
            "--http",
            "--replicas",
            "2",
            "--workers",
            "10",
            "--runner-connection",
            "--runs",
            "10",
        ],
    );
    assert_eq!(results.len(), 10);
    for r in &results {
        assert_eq!(r["replicas"], 2);
        assert_eq!(r["key_rows"], 1);
        assert_eq!(r["lesson_figure"], 8);
        let mut served = replicas_of(r);
        served.sort();
        assert_eq!(served, [1, 1, 1, 1, 1, 2, 2, 2, 2, 2], "in turn");
        // Each replica's own count of the calls, summed by the parent.
        assert_eq!(r["service_calls"], r["xp_rows"]);
    }
    let eight = runs_with(&results, "xp_rows", 8);
    assert!(eight >= 9, "8 XP rows in only {eight} of 10 runs");
    assert!(sandbox.leftovers().is_empty());
}

/// The memory guard holds on one app process and fails across two: one
/// claim per process that got a request.
#[test]
fn the_memory_guard_holds_on_one_replica_and_not_on_two() {
    let sandbox = Sandbox::new("replicas-memory");
    let one = races(&sandbox, &["--http", "-s", "memory", "--runs", "10"]);
    for r in &one {
        assert_eq!(
            (r["xp_rows"].as_u64(), r["service_calls"].as_u64()),
            (Some(1), Some(1))
        );
    }
    let two = races(
        &sandbox,
        &["--http", "--replicas", "2", "-s", "memory", "--runs", "10"],
    );
    let twice = runs_with(&two, "xp_rows", 2);
    assert!(twice >= 9, "2 XP rows in only {twice} of 10 runs");
    for r in &two {
        // Each process let its own first request in, whatever the other did.
        let created: Vec<u64> = r["reports"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|w| w["made_xp"].is_i64())
            .map(|w| w["replica"].as_u64().unwrap())
            .collect();
        assert!(created.len() <= 2 && !created.windows(2).any(|p| p[0] == p[1]));
    }
}

/// `serve --replicas 2` hands connections to the two processes in turn,
/// and SIGTERM stops them all with it.
#[test]
fn serve_with_replicas_answers_in_turn_and_stops_with_its_processes() {
    let sandbox = Sandbox::new("replicas-serve");
    let mut serve = sandbox
        .idem_std()
        .args([
            "serve",
            "--replicas",
            "2",
            "--listen",
            "127.0.0.1:0",
            "--json",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    BufReader::new(serve.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    let ready: Value = serde_json::from_str(&ready).unwrap();
    assert_eq!(ready["replicas"], 2);
    let endpoint = ready["endpoint"].as_str().unwrap().to_string();
    let mut answered = Vec::new();
    for key in ["a", "b", "c", "d"] {
        let out = std::process::Command::new("curl")
            .args(["-s", "-D", "-", "-o", "/dev/null", "-X", "POST", &endpoint])
            .args(["-H", &format!("Idempotency-Key: \"{key}\"")])
            .args(["-H", "content-type: application/json"])
            .args(["-d", r#"{"user_id": 42, "amount": 10}"#])
            .output()
            .unwrap();
        let headers = String::from_utf8_lossy(&out.stdout).to_lowercase();
        let replica = headers
            .lines()
            .find_map(|l| l.strip_prefix("idem-replica:"))
            .unwrap_or_else(|| panic!("{headers}"))
            .trim()
            .to_string();
        answered.push(replica);
    }
    assert_eq!(answered, ["1", "2", "1", "2"]);
    let replicas = replica_processes(&ready["schema"]);
    assert_eq!(replicas.len(), 2, "{replicas:?}");
    signal(serve.id(), libc::SIGTERM);
    assert!(wait_for(&mut serve, Duration::from_secs(10)).is_some());
    assert!(replica_processes(&ready["schema"]).is_empty());
    assert!(sandbox.wait_clean(Duration::from_secs(10)).is_empty());
}

/// kill -9 of the parent mid-race: its replicas die with it (the
/// parent-death signal), and the cluster and its directory go too.
#[test]
fn a_killed_race_over_replicas_leaves_no_replica_server_or_directory() {
    let sandbox = Sandbox::new("replicas-kill");
    let mut race = sandbox
        .idem_std()
        .args(["race", "--http", "--replicas", "2", "--runs", "100000"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = race.id();
    // Both replicas are up once a run has started.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while children_named(pid, "replica").len() < 2 {
        assert!(std::time::Instant::now() < deadline, "the replicas started");
        std::thread::sleep(Duration::from_millis(50));
    }
    let replicas = children_named(pid, "replica");
    std::thread::sleep(Duration::from_millis(300));
    signal(pid, libc::SIGKILL);
    let _ = race.wait();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while replicas.iter().any(|p| alive(*p)) {
        assert!(
            std::time::Instant::now() < deadline,
            "the replicas died with their parent"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(sandbox.wait_clean(Duration::from_secs(10)).is_empty());
    assert!(processes_mentioning(&sandbox.dir).is_empty());
}

/// The pids of `parent`'s children whose command line names `word`.
fn children_named(parent: u32, word: &str) -> Vec<u32> {
    processes()
        .into_iter()
        .filter(|p| p.ppid == Some(parent) && p.cmdline.split(' ').any(|w| w == word))
        .map(|p| p.pid)
        .collect()
}

fn alive(pid: u32) -> bool {
    processes().iter().any(|p| p.pid == pid)
}

/// The `idem replica` processes working in `schema`.
fn replica_processes(schema: &Value) -> Vec<u32> {
    let schema = schema.as_str().unwrap();
    processes()
        .into_iter()
        .filter(|p| p.cmdline.contains(" replica ") && p.cmdline.contains(schema))
        .map(|p| p.pid)
        .collect()
}

/// Replicas are processes of the app: over the wire only, and not with TLS.
#[test]
fn replicas_without_the_wire_or_with_tls_are_refused_in_one_line() {
    let sandbox = Sandbox::new("replicas-refused");
    for args in [
        &["race", "--replicas", "2"][..],
        &["race", "--http", "--replicas", "2", "--trace"][..],
        &[
            "serve",
            "--replicas",
            "2",
            "--tls-cert",
            "c.pem",
            "--tls-key",
            "k.pem",
        ][..],
    ] {
        let out = sandbox
            .idem()
            .args(args)
            .assert()
            .failure()
            .get_output()
            .clone();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains("--replicas"), "{args:?}: {stderr}");
    }
}
