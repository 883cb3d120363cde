//! Claims in Redis (`--store redis`) on a real `redis-server` that idem starts: the claim holds with NX, and nothing of the server outlives a run, a normal end or a SIGKILL in the middle of the race.

use std::time::Duration;

use serde_json::Value;

use crate::common::user_redis::{PASSWORD, UserRedis};
use crate::common::{Sandbox, refused_in_one_line, refused_in_one_line_with};

/// `idem COMMAND --json` in `sandbox` (its words split at spaces), which
/// must succeed: each JSON line it printed (one per race).
fn json_lines(sandbox: &Sandbox, command: &str) -> Vec<Value> {
    let args: Vec<&str> = command.split_whitespace().collect();
    let out = sandbox.idem().args(&args).arg("--json").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {stderr}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// Nothing of the run left in `sandbox`: no server, no directory.
fn left_clean(sandbox: &Sandbox) {
    assert_eq!(
        sandbox.wait_clean(Duration::from_secs(10)),
        Vec::<String>::new()
    );
}

#[test]
fn a_claim_in_redis_holds_and_its_server_goes_with_the_run() {
    let sandbox = Sandbox::new("redis-race");
    let races = json_lines(&sandbox, "race -s claim-work-complete --store redis");
    let r = &races[0];
    assert_eq!(
        (r["xp_rows"].as_u64(), r["service_calls"].as_u64()),
        (Some(1), Some(1)),
        "{r}"
    );
    left_clean(&sandbox);
}

/// A run killed mid-race leaves no redis-server, with one server or a
/// primary and its replica.
#[test]
fn a_run_killed_mid_race_leaves_no_redis_server() {
    let sandbox = Sandbox::new("redis-kill");
    let race = ["race", "-s", "claim-work-complete", "--store", "redis"];
    let runs: [(&[&str], usize); 2] = [(&[], 1), (&["--redis-replica", "in-step"], 2)];
    for (more, servers) in runs {
        let args = [&race[..], more, &["--work-ms", "3000"]].concat();
        let caught = sandbox.killed_with_servers_up(&args, "redis-server", servers);
        assert!(
            caught,
            "idem {args:?} was not caught with its redis-servers up"
        );
        left_clean(&sandbox);
    }
}

#[test]
fn what_a_redis_claim_cannot_be_is_refused_in_one_line() {
    let sandbox = Sandbox::new("redis-refused");
    let cases: [(&[&str], &str); 10] = [
        (
            &["--store", "redis", "--redis-release", "del"],
            "add --fail-work",
        ),
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
        (
            &["--store", "redis", "--redis-failover", "after-claim"],
            "add --redis-replica",
        ),
        (
            &["--store", "redis", "--redis-wait-ms", "100"],
            "add --redis-replica",
        ),
        (
            &[
                "--store",
                "redis",
                "--redis-replica",
                "behind",
                "--redis-url",
                "redis://127.0.0.1:1/",
            ],
            "drop --redis-url",
        ),
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
    let runs = json_lines(
        &sandbox,
        "race -s claim-work-complete --store redis --redis-claim overwrite --redis-fence --runs 3",
    );
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
    left_clean(&sandbox);
}

/// A user's Redis (`--redis-url`, with a password): the race runs there,
/// the app's keys (one under another `idem:` prefix) are left as they
/// were, value and time to live, the run's own keys are gone when it
/// ends, and the password is printed nowhere.
#[test]
fn a_users_redis_keeps_its_own_keys_and_loses_the_runs() {
    let sandbox = Sandbox::new("redis-user");
    let Some(user) = UserRedis::start(&std::env::temp_dir()) else {
        crate::common::runnable("a user's Redis", false, "no redis-server here");
        return;
    };
    user.set("app:session", "hello");
    user.set("idem:0000beef:not-this-run", "keep");
    let before = user.keys();
    let out = sandbox
        .idem()
        .args(["race", "-s", "claim-work-complete", "--store", "redis"])
        .args(["--redis-fence", "--runs", "2", "--json", "--redis-url"])
        .arg(user.url())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    for line in stdout.lines() {
        let r: Value = serde_json::from_str(line).unwrap();
        assert_eq!(r["xp_rows"].as_u64(), Some(1), "{r}");
    }
    assert!(!stdout.contains(PASSWORD) && !stderr.contains(PASSWORD));
    assert_eq!(
        user.keys(),
        before,
        "only the app's keys are left, as they were"
    );
    // A wrong password is one line, without the password given.
    let wrong = user.url().replace(PASSWORD, "not-the-password");
    let err = refused_in_one_line(
        sandbox
            .idem()
            .args(["race", "-s", "claim-work-complete", "--store", "redis"])
            .args(["--redis-url", &wrong]),
    );
    assert!(err.contains("could not reach Redis"), "{err}");
    assert!(!err.contains("not-the-password"), "{err}");
    left_clean(&sandbox);
}

/// A run killed with SIGKILL cannot remove its keys from a user's Redis;
/// each of them has a time to live, so none stays for good.
#[test]
fn a_run_killed_on_a_users_redis_leaves_only_keys_that_expire() {
    let sandbox = Sandbox::new("redis-user-kill");
    let Some(user) = UserRedis::start(&std::env::temp_dir()) else {
        crate::common::runnable("a user's Redis", false, "no redis-server here");
        return;
    };
    let url = user.url();
    let mut idem = sandbox
        .idem_std()
        .args(["race", "-s", "claim-work-complete", "--store", "redis"])
        .args(["--redis-fence", "--work-ms", "3000", "--redis-url", &url])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Killed once its claim and fencing token are set, mid-work.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while user.keys().len() < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = idem.kill();
    idem.wait().unwrap();
    let left = user.keys();
    assert!(left.len() >= 2, "the run was not caught mid-work: {left:?}");
    for (key, _, ttl) in &left {
        assert!(key.starts_with("idem:"), "{key}");
        assert!(*ttl > 0, "{key} would stay for good");
    }
    left_clean(&sandbox);
}

/// `idem explore` over Redis's commands, the claim's time to live as the
/// clock: SET NX holds in every order of the steps; let the time to live
/// run out at any turn and some orders work twice; with the fencing token
/// no order leaves two XP rows, and the orders that call twice are still
/// there. Every verdict is on the whole tree, not on a sample of runs.
#[test]
fn exploring_a_redis_claim_finds_the_lapsed_lease_and_the_fence_keeps_one_row() {
    let sandbox = Sandbox::new("redis-explore");
    let explore = |extra: &[&str]| -> Value {
        let out = sandbox
            .idem()
            .args([
                "explore",
                "-s",
                "claim-work-complete",
                "--store",
                "redis",
                "--json",
            ])
            .args(extra)
            .output()
            .unwrap();
        let e: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(e["total"], e["interleavings"], "the whole tree: {e}");
        e
    };
    let steps_alone = explore(&[]);
    assert_eq!(steps_alone["failing"], 0, "{steps_alone}");
    let lapsing = explore(&["--clock"]);
    assert!(
        lapsing["kinds"]["duplicate_xp_rows"].as_u64() > Some(0),
        "{lapsing}"
    );
    assert_eq!(lapsing["failing_on_steps_alone"], 0, "{lapsing}");
    let fenced = explore(&["--clock", "--redis-fence"]);
    let rows = fenced["xp_rows"].as_object().unwrap();
    assert_eq!(rows.keys().collect::<Vec<_>>(), ["1"], "{fenced}");
    assert!(
        fenced["kinds"].get("duplicate_xp_rows").is_none(),
        "{fenced}"
    );
    assert!(
        fenced["kinds"]["duplicate_service_calls"].as_u64() > Some(0),
        "{fenced}"
    );
    left_clean(&sandbox);
}

/// A request dropped mid-work (its client hung up, `--on-hangup cancel`)
/// takes its heartbeat with it: the claim it can no longer complete lapses
/// within its time to live and a retry does the work, once. A heartbeat
/// that outlived its request would keep the claim alive for nobody, and
/// every retry would be told 409 until the client gave up: no XP row.
#[test]
fn a_dropped_request_stops_renewing_its_redis_claim() {
    let sandbox = Sandbox::new("redis-heartbeat-drop");
    let races = json_lines(
        &sandbox,
        "race -s claim-work-complete --store redis --redis-ttl-ms 100 --redis-heartbeat-ms 30 \
         --http --work-ms 600 --hang-up at=during-work --on-hangup cancel --runs 3",
    );
    for r in &races {
        assert_eq!(r["xp_rows"].as_u64(), Some(1), "{r}");
        assert_eq!(r["outcomes"]["hung_up"].as_u64(), Some(1), "{r}");
    }
    left_clean(&sandbox);
}

/// `idem compare --stores`: claim-work-complete with its claims in each
/// store, a row each, the Redis options on the Redis row alone; and a
/// walk that cannot see inside the cache store's claim is refused rather
/// than said to hold.
#[test]
fn compare_races_the_stores_side_by_side() {
    let sandbox = Sandbox::new("redis-compare");
    let races = json_lines(
        &sandbox,
        "compare --stores table,cache,redis --runs 2 --redis-ttl-ms 30000",
    );
    let stores: Vec<&str> = races.iter().map(|r| r["store"].as_str().unwrap()).collect();
    assert_eq!(
        stores,
        ["table", "table", "cache", "cache", "redis", "redis"]
    );
    for r in races.iter().filter(|r| r["store"] != "cache") {
        assert_eq!(r["xp_rows"].as_u64(), Some(1), "{r}");
    }
    assert_eq!(races[4]["redis"]["ttl_ms"], 30000);
    // Refused as a command line is (exit 2), before anything starts.
    let explore = ["explore", "-s", "claim-work-complete", "--store", "cache"];
    let err = refused_in_one_line_with(sandbox.idem().args(explore), 2);
    assert!(err.contains("race it instead"), "{err}");
    left_clean(&sandbox);
}

/// A replica beside idem's Redis, failed over right after the claim.
/// Behind (its link cut), it never had the claim: the new primary said OK
/// to the retry, and the work ran twice. In step, and with the owner's
/// `WAIT` hearing it, it kept the claim: once. Behind with `WAIT`, the
/// owner heard no replica and let its claim go without working. Each
/// verdict is read off what was measured in Redis (`WAIT`'s answer, the
/// new primary's `EXISTS`), in every run, the second with a new replica;
/// then nothing of either server is left.
#[test]
fn a_failover_loses_the_claim_the_replica_never_had_and_wait_says_so() {
    let sandbox = Sandbox::new("redis-failover");
    let race = "race -s claim-work-complete --store redis --workers 1 --http --work-ms 600 \
                --hang-up at=during-work --on-hangup finish --redis-failover after-claim --runs 2";
    let lost = json_lines(&sandbox, &format!("{race} --redis-replica behind"));
    let kept = json_lines(
        &sandbox,
        &format!("{race} --redis-replica in-step --redis-wait-ms 100"),
    );
    let unheard = json_lines(
        &sandbox,
        &format!("{race} --redis-replica behind --redis-wait-ms 100"),
    );
    for r in &lost {
        assert_eq!(r["redis"]["failed_over"]["claim_kept"], false, "{r}");
        assert_eq!(
            (r["xp_rows"].as_u64(), r["service_calls"].as_u64()),
            (Some(2), Some(2)),
            "{r}"
        );
    }
    for r in &kept {
        assert_eq!(r["redis"]["acknowledged"].as_u64(), Some(1), "{r}");
        assert_eq!(r["redis"]["failed_over"]["claim_kept"], true, "{r}");
        assert_eq!(
            (r["xp_rows"].as_u64(), r["service_calls"].as_u64()),
            (Some(1), Some(1)),
            "{r}"
        );
    }
    for r in &unheard {
        assert_eq!(r["redis"]["acknowledged"].as_u64(), Some(0), "{r}");
        assert_eq!(
            (r["xp_rows"].as_u64(), r["service_calls"].as_u64()),
            (Some(0), Some(0)),
            "{r}"
        );
        assert_eq!(r["outcomes"]["conflict"].as_u64(), Some(1), "{r}");
    }
    left_clean(&sandbox);
}

/// A failover whose request is dropped at its first await still ends: it
/// runs on a task of its own, so the kill of the primary is always
/// followed by the promotion of the replica, and the pair's commands go
/// to a primary that takes writes. Run inside the request, a drop between
/// the kill and the promotion would leave no primary at all.
#[tokio::test]
async fn a_failover_whose_request_is_dropped_still_leaves_a_primary() {
    use idem::db::redis_replica::ReplicaLink;
    use idem::db::redis_server::Redis;
    let redis = std::sync::Arc::new(Redis::start(Some(ReplicaLink::InStep)).await.unwrap());
    redis.ready().await.unwrap();
    let dropped = tokio::time::timeout(Duration::ZERO, redis.fail_over("idem:dropped"));
    assert!(
        dropped.await.is_err(),
        "the failover's request was not dropped"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut conn = redis.conn();
        let role: redis::RedisResult<String> = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut conn)
            .await;
        let written: redis::RedisResult<()> = redis::cmd("SET")
            .arg("idem:after-failover")
            .arg(1)
            .query_async(&mut conn)
            .await;
        if role.is_ok_and(|r| r.contains("role:master")) && written.is_ok() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no primary took a write within 10 s of the dropped failover"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
