//! Claims in Redis (`--store redis`) on a real `redis-server` that idem starts: the claim holds with NX, and nothing of the server outlives a run, a normal end or a SIGKILL in the middle of the race.

use std::time::Duration;

use serde_json::Value;

use crate::common::{Sandbox, refused_in_one_line};

#[test]
fn a_claim_in_redis_holds_and_its_server_goes_with_the_run() {
    let sandbox = Sandbox::new("redis-race");
    let out = sandbox
        .idem()
        .args([
            "race",
            "-s",
            "claim-work-complete",
            "--store",
            "redis",
            "--json",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (r["xp_rows"].as_u64(), r["service_calls"].as_u64()),
        (Some(1), Some(1)),
        "{r}"
    );
    assert_eq!(
        sandbox.wait_clean(Duration::from_secs(10)),
        Vec::<String>::new()
    );
}

#[test]
fn a_run_killed_mid_race_leaves_no_redis_server() {
    let sandbox = Sandbox::new("redis-kill");
    let caught = sandbox.killed_with_servers_up(
        &[
            "race",
            "-s",
            "claim-work-complete",
            "--store",
            "redis",
            "--work-ms",
            "3000",
        ],
        "redis-server",
        1,
    );
    assert!(caught, "idem was not caught with its redis-server up");
    assert_eq!(
        sandbox.wait_clean(Duration::from_secs(10)),
        Vec::<String>::new()
    );
}

#[test]
fn what_a_redis_claim_cannot_be_is_refused_in_one_line() {
    let sandbox = Sandbox::new("redis-refused");
    let cases: [(&[&str], &str); 6] = [
        (&["--redis-ttl-ms", "100"], "add --store redis"),
        (&["--redis-fence"], "add --store redis"),
        (
            &["--store", "redis", "--redis-eviction", "allkeys-lru"],
            "add --redis-pressure",
        ),
        (
            &["--store", "redis", "--transaction", "request"],
            "outside the database",
        ),
        (
            &["--store", "redis", "--engine", "mariadb"],
            "drop --engine mariadb",
        ),
        (&["--store", "redis", "--loser", "block"], "fail-fast"),
    ];
    for (args, says) in cases {
        let err = refused_in_one_line(
            sandbox
                .idem()
                .args(["race", "-s", "claim-work-complete"])
                .args(args),
        );
        assert!(err.contains(says), "{args:?}: {err}");
    }
    assert_eq!(sandbox.leftovers(), Vec::<String>::new());
}

/// Claims that overwrite one another let every request work; with a
/// fencing token PostgreSQL writes the rows of one owner only, the newest
/// it was shown, in every run, whatever the others' service calls did.
#[test]
fn a_fencing_token_keeps_the_store_of_record_right_when_every_claim_wins() {
    let sandbox = Sandbox::new("redis-fence");
    let out = sandbox
        .idem()
        .args(["race", "-s", "claim-work-complete", "--store", "redis"])
        .args([
            "--redis-claim",
            "overwrite",
            "--redis-fence",
            "--runs",
            "3",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let runs: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(runs.len(), 3);
    for r in &runs {
        assert_eq!(
            (r["xp_rows"].as_u64(), r["key_rows"].as_u64()),
            (Some(1), Some(1)),
            "{r}"
        );
        assert_eq!(r["redis"]["fence"], true, "{r}");
        // One owner wrote; each other one met a newer token (before or
        // after its work) or, coming after the write, replayed it.
        let outcomes = &r["outcomes"];
        assert_eq!(
            (outcomes["created"].as_u64(), outcomes["duplicate"].as_u64()),
            (Some(1), Some(0)),
            "{r}"
        );
    }
    assert_eq!(
        sandbox.wait_clean(Duration::from_secs(10)),
        Vec::<String>::new()
    );
}
