//! Races on a Galera cluster of three MariaDB nodes that idem starts (`--engine mariadb --nodes 3`): each request reaches the node it was spread to, a claim inside the request's transaction is refused only at COMMIT (after its work) where on one node it waits, and nothing of the cluster outlives a run, a SIGKILL in the middle of its start included.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{Sandbox, refused_in_one_line_with};

/// `idem race --engine mariadb --nodes 3 --json ARGS`: one object per run.
/// Twice now under the whole suite's load a connection to a node was
/// closed in the middle of a run ("expected to read 4 bytes, got 0 bytes
/// at EOF"), not reproduced alone or under CPU load, and not yet
/// understood (the error now names the node when it is a counter's read).
/// That one end, and only that one, is raced again once, on a new cluster;
/// any other fails here, and every figure is asserted on the race that
/// ran to its end.
fn races(sandbox: &Sandbox, args: &[&str]) -> Vec<Value> {
    let run = || {
        sandbox
            .idem()
            .args(["race", "--engine", "mariadb", "--nodes", "3", "--json"])
            .args(args)
            .output()
            .unwrap()
    };
    let mut out = run();
    if String::from_utf8_lossy(&out.stderr).contains("got 0 bytes at EOF") {
        eprintln!("{args:?}: a node closed a connection; raced again once");
        out = run();
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {stderr}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn n(v: &Value, field: &str) -> u64 {
    v[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field} in {v}"))
}

/// Whether a run's requests met the server's 1213.
fn met_1213(r: &Value) -> bool {
    r["reports"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w["error"]["number"] == 1213)
}

#[test]
fn a_claim_inside_the_request_is_refused_across_nodes_only_at_commit() {
    let sandbox = Sandbox::new("galera-claims");
    let schema = {
        let text = std::fs::read_to_string("schemas/engine-race.schema.json").unwrap();
        jsonschema::validator_for(&serde_json::from_str(&text).unwrap()).unwrap()
    };
    let in_request = ["-s", "claim-work-complete", "--transaction", "request"];
    // Spread over three primaries: one row, always (certification lets one
    // COMMIT in), but the work of more than one request before it.
    let spread = races(&sandbox, &[&in_request[..], &["--runs", "5"]].concat());
    let mut worked_twice = 0;
    for r in &spread {
        assert!(schema.is_valid(r), "{r}");
        assert_eq!((n(r, "key_rows"), n(r, "xp_rows")), (1, 1), "{r}");
        assert!(r["cluster_counters"].is_object(), "{r}");
        let nodes: Vec<u64> = r["reports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| n(w, "node"))
            .collect();
        assert_eq!(nodes, [1, 2, 3, 1, 2], "{r}");
        if n(r, "service_calls") > 1 {
            worked_twice += 1;
            assert!(met_1213(r), "more than one call, and no 1213: {r}");
        }
    }
    // A rate, not a certainty: two claims are under way on two nodes
    // unless the first COMMIT reached the others before they began (10 of
    // 10 runs here made 3 or 4 calls).
    assert!(worked_twice >= 4, "{worked_twice} of 5 runs worked twice");
    // On one node the unique index makes the second claim wait for the
    // first's COMMIT: one call, in every run.
    let one_node = races(
        &sandbox,
        &[&in_request[..], &["--spread", "one-node", "--runs", "3"]].concat(),
    );
    for r in &one_node {
        assert_eq!((n(r, "xp_rows"), n(r, "service_calls")), (1, 1), "{r}");
    }
    assert_eq!(
        sandbox.wait_clean(Duration::from_secs(20)),
        Vec::<String>::new()
    );
}

#[test]
fn a_run_killed_while_its_cluster_starts_leaves_nothing() {
    let sandbox = Sandbox::new("galera-kill");
    // Once a joiner is up (a second node's server), kill idem itself.
    let caught = sandbox.killed_with_servers_up(
        &["race", "--engine", "mariadb", "--nodes", "3"],
        "--wsrep-node-name=node",
        2,
    );
    assert!(caught, "idem was not caught while its cluster started");
    // Every node's supervisor stops its server, the state transfer's
    // scripts with it; a node whose directory was still being copied when
    // idem died had no supervisor yet, and the next run sweeps it.
    let deadline = Instant::now() + Duration::from_secs(30);
    let processes = || -> Vec<String> {
        let left = sandbox.leftovers();
        left.into_iter()
            .filter(|l| l.starts_with("process"))
            .collect()
    };
    while !processes().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(processes(), Vec::<String>::new());
    sandbox
        .idem()
        .args(["race", "--engine", "mariadb", "--work-ms", "1"])
        .assert()
        .success();
    assert_eq!(
        sandbox.wait_clean(Duration::from_secs(30)),
        Vec::<String>::new()
    );
}

#[test]
fn what_a_cluster_race_does_not_take_is_refused_in_one_line() {
    let sandbox = Sandbox::new("galera-refused");
    let cases: [(&[&str], &str); 6] = [
        (
            &[
                "race",
                "--engine",
                "mariadb",
                "--nodes",
                "3",
                "--retry-behind",
            ],
            "add --retry-at-once and --workers 1",
        ),
        (&["race", "--nodes", "3"], "add --engine mariadb"),
        (
            &["race", "--engine", "mariadb", "--spread", "one-node"],
            "add --nodes 3",
        ),
        (
            &[
                "race",
                "--engine",
                "mariadb",
                "--nodes",
                "3",
                "--crash",
                "after-claim",
            ],
            "--crash",
        ),
        (
            &[
                "race",
                "--engine",
                "mariadb",
                "--nodes",
                "3",
                "--retry-node",
                "same",
            ],
            "add --retry-at-once",
        ),
        (
            &[
                "race",
                "--engine",
                "mariadb",
                "--nodes",
                "3",
                "-w",
                "1",
                "--retry-at-once",
                "--retry-behind",
                "--retry-node",
                "same",
            ],
            "it stays on its first node",
        ),
    ];
    for (args, says) in cases {
        // A wrong command line of step exits 2 (its 1 is a verdict); race's is 1.
        let code = if args[0] == "step" { 2 } else { 1 };
        let err = refused_in_one_line_with(sandbox.idem().args(args), code);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// A node killed halfway through a burst: its request is told its
/// connection broke, the two nodes left keep a Primary component and the
/// key, and the writes under way wait until the cluster has let the dead
/// node go.
#[test]
fn a_node_killed_mid_burst_leaves_two_primaries_and_the_key() {
    let sandbox = Sandbox::new("galera-node-kill");
    let args = [
        "-s",
        "check-then-store",
        "--kill-node",
        "3",
        "--work-ms",
        "200",
    ];
    let runs = races(&sandbox, &args);
    let r = &runs[0];
    assert_eq!(r["cluster_after"]["size"], 2, "{r}");
    assert_eq!(r["cluster_after"]["status"], "Primary", "{r}");
    assert_eq!(n(r, "key_rows"), 1, "{r}");
    let reports = r["reports"].as_array().unwrap();
    // Worker 3 reached node 3, mid-work when it died: no answer but an error.
    let on_three = reports.iter().find(|w| w["node"] == 3).unwrap();
    assert_eq!(on_three["outcome"], "error", "{r}");
    // Every request called the service before it knew; the dead node's
    // row went with it.
    assert_eq!(n(r, "service_calls"), 5, "{r}");
    assert!(n(r, "xp_rows") < 5, "{r}");
    assert_eq!(
        sandbox.wait_clean(Duration::from_secs(20)),
        Vec::<String>::new()
    );
}

/// `idem explore` walks two requests on two nodes of a cluster. The nodes
/// apply each other's commits in their own time, outside the walk, so its
/// counts can differ from one walk to the next (5 walks of 5 held in all
/// 44 here; one other, under load, answered a loser an error in 1 of 42):
/// what holds in every walk is asserted. The claim that commits alone never
/// makes a second row or call; the claim inside the request's transaction
/// makes a second call in some order, the work done before certification
/// refused its COMMIT.
#[test]
fn explore_walks_two_requests_on_two_nodes() {
    let sandbox = Sandbox::new("galera-explore");
    let explore = |more: &[&str]| {
        explore_on_a_cluster(&sandbox, &[&["-s", "claim-work-complete"], more].concat())
    };
    let alone = explore(&[]);
    assert_eq!(alone["nodes"], 3, "{alone}");
    assert_eq!(alone["held"], alone["interleavings"], "{alone}");
    assert_eq!(n(&alone, "failing"), 0, "{alone}");
    let rows: Vec<&String> = alone["xp_rows"].as_object().unwrap().keys().collect();
    assert_eq!(rows, ["1"], "{alone}");
    let inside = explore(&["--transaction", "request"]);
    assert_eq!(inside["total"], inside["interleavings"], "{inside}");
    assert!(
        n(&inside["kinds"], "duplicate_service_calls") > 0,
        "{inside}"
    );
    assert_eq!(
        sandbox.wait_clean(Duration::from_secs(20)),
        Vec::<String>::new()
    );
}

/// `idem explore --engine mariadb --nodes 3 --json ARGS`: its exploration.
/// After each step every node has applied the others' commits, so a
/// replayed order answers as before and every walk ends in a verdict.
/// Once, under the whole suite's load, a node closed a connection in the
/// middle of a walk ("expected to read 4 bytes, got 0 bytes at EOF"), not
/// yet understood: that one end, and only that one, is walked again once,
/// on a new cluster; any other end fails here.
fn explore_on_a_cluster(sandbox: &Sandbox, args: &[&str]) -> Value {
    let mut tries = 0;
    loop {
        tries += 1;
        let out = sandbox
            .idem()
            .args(["explore", "--engine", "mariadb", "--nodes", "3", "--json"])
            .args(args)
            .output()
            .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        let closed = stdout.trim().is_empty() && stderr.contains("got 0 bytes at EOF");
        if closed && tries == 1 {
            continue;
        }
        break serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}{stderr}"));
    }
}

/// A walk on a cluster branches on crashes and on the clock too. A crash
/// (the worker's session killed on its own node) leaves claim-work-
/// complete's key stuck, as on one server, and only with a crash in the
/// order. The clock ages only claims no transaction holds on any node, as
/// time passing would; what it shows then is the cluster's own: the
/// guard's takeover on node 1 is not held back by the owner's row lock on
/// node 2, so certification aborts the owner's finished transaction
/// (an error answered, after its service call), where on one server the
/// taker waits for the owner and replays its answer.
#[test]
fn a_cluster_walk_branches_on_crashes_and_the_clock() {
    let sandbox = Sandbox::new("galera-explore-faults");
    let crashed = explore_on_a_cluster(&sandbox, &["-s", "claim-work-complete", "--crashes"]);
    assert_eq!(crashed["total"], crashed["interleavings"], "{crashed}");
    assert!(n(&crashed["kinds"], "key_left_stuck") > 0, "{crashed}");
    assert_eq!(n(&crashed, "failing_on_steps_alone"), 0, "{crashed}");
    // The shortest failing order replays with idem step, crash and all.
    let replay = crashed["replay"].as_str().unwrap();
    let args: Vec<&str> = replay.split_whitespace().skip(1).collect();
    let out = sandbox.idem().args(&args).arg("--json").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stepped: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stepped["outcomes"]["crashed"], 1, "{stepped}");
    let aged = explore_on_a_cluster(
        &sandbox,
        &["-s", "guard", "--clock", "--max-interleavings", "300"],
    );
    assert_eq!(aged["total"], aged["interleavings"], "{aged}");
    assert_eq!(n(&aged, "failing_on_steps_alone"), 0, "{aged}");
    assert!(n(&aged["kinds"], "error_answered") > 0, "{aged}");
    // One such order, fixed: the clock ages worker 2's claim, worker 2
    // completes on node 2 (its row locked there), worker 1 takes the claim
    // over on node 1 and commits; worker 2's COMMIT is refused after its
    // service call. Two calls, one XP row.
    let out = sandbox
        .idem()
        .args(["step", "--engine", "mariadb", "--nodes", "3", "-s", "guard"])
        .args(["--workers", "2", "--work-ms", "0", "--json", "--sql"])
        .args(["--schedule", "2,2,2,2,clock,2,1,1,1,1,1,1,1,2"])
        .output()
        .unwrap();
    let taken: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(taken["service_calls"], 2, "{taken}");
    assert_eq!(taken["xp_rows"], 1, "{taken}");
    let owner = taken["reports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["worker"] == 2)
        .unwrap();
    assert_eq!(owner["error"]["number"], 1213, "{taken}");
    let commit = owner["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == "commit")
        .unwrap();
    assert!(
        commit["note"]
            .as_str()
            .unwrap()
            .contains("refused by the cluster"),
        "{taken}"
    );
    assert_eq!(
        sandbox.wait_clean(Duration::from_secs(20)),
        Vec::<String>::new()
    );
}

/// A client's retry goes to the next node (`--retry-node other`, the
/// default) or back to its first request's (`same`). On its first node the
/// retry always finds the key: a node has applied its own commit before
/// the COMMIT returns.
#[test]
fn a_retry_goes_to_the_node_retry_node_names() {
    let sandbox = Sandbox::new("galera-retry-node");
    for (which, node) in [("other", 2), ("same", 1)] {
        let args = [
            "-s",
            "check-then-store",
            "-w",
            "1",
            "--retry-at-once",
            "--retry-node",
            which,
            "--runs",
            "3",
        ];
        for r in races(&sandbox, &args) {
            let retry = r["reports"]
                .as_array()
                .unwrap()
                .iter()
                .find(|w| w["worker"] == 2);
            assert_eq!(retry.unwrap()["node"], node, "{which}: {r}");
            if which == "same" {
                assert_eq!(n(&r, "xp_rows"), 1, "{r}");
            }
        }
    }
}

/// Ctrl-C and SIGTERM at moments spread over a cluster's races, node 2
/// held behind in most of them (`--retry-behind`): idem stops, and no
/// node, data directory or socket outlives it.
#[test]
fn no_node_outlives_ctrl_c_or_sigterm_in_the_middle_of_the_races() {
    let sandbox = Sandbox::new("galera-signals");
    for (i, sig) in [libc::SIGINT, libc::SIGTERM].into_iter().enumerate() {
        let mut idem = sandbox
            .idem_std()
            .args([
                "race",
                "--engine",
                "mariadb",
                "--nodes",
                "3",
                "--workers",
                "1",
            ])
            .args([
                "--retry-at-once",
                "--retry-behind",
                "--sync-wait",
                "--runs",
                "30",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let nodes = || {
            sandbox
                .leftovers()
                .iter()
                .filter(|l| l.starts_with("process") && l.contains("--wsrep-node-name=node"))
                .count()
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while nodes() < 3 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        // Somewhere in the races: each takes half a second or more.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        std::thread::sleep(Duration::from_millis(1_000 + u64::from(nanos % 4_000)));
        assert!(
            idem.try_wait().unwrap().is_none(),
            "idem ended before signal {i}"
        );
        crate::common::signal(idem.id(), sig);
        let stopped = Instant::now() + Duration::from_secs(30);
        while idem.try_wait().unwrap().is_none() && Instant::now() < stopped {
            std::thread::sleep(Duration::from_millis(20));
        }
        let status = idem.try_wait().unwrap();
        let _ = idem.kill();
        assert!(status.is_some(), "idem still ran 30 s after signal {sig}");
        assert_eq!(
            sandbox.wait_clean(Duration::from_secs(30)),
            Vec::<String>::new(),
            "after signal {sig}"
        );
    }
}
