//! `idem explore`: a guard judged on every interleaving of its requests' steps, on the real database; the counts the tests work out themselves, the same every run.

use std::process::Stdio;
use std::time::Duration;

use idem::db::{ConnectOptions, Database};
use idem::explore::{self, Exploration, Failure};
use idem::race::moves::Move;
use idem::race::options::RaceInput;
use idem::strategy::StrategyKind;

use crate::common::{Sandbox, TIMING, signal};

async fn open() -> Database {
    Database::open(&ConnectOptions::default()).await.unwrap()
}

/// The plain schedule of these worker numbers.
fn steps(workers: &[usize]) -> Vec<Move> {
    workers.iter().map(|&w| Move::Step(w)).collect()
}

/// Two workers of `strategy`, explored up to `bound` interleavings.
async fn explored(db: &Database, input: RaceInput, bound: u64) -> Exploration {
    let walking = explore::Walking {
        bound,
        ..explore::Walking::steps("idem step")
    };
    walked(db, &input, &walking).await
}

/// `input`'s race explored as `walking` says (the other explore tests' way in).
pub(crate) async fn walked(
    db: &Database,
    input: &RaceInput,
    walking: &explore::Walking,
) -> Exploration {
    let settings = explore::settings(input).unwrap();
    explore::explore(db, settings, walking, |_| {})
        .await
        .unwrap()
}

/// Every order of two sequences of four steps (checkout, find, work,
/// store), as the positions each worker's steps take.
fn interleavings_of_two(steps: usize) -> Vec<Vec<usize>> {
    let mut all = Vec::new();
    let total = 2 * steps;
    for mask in 0u32..(1 << total) {
        if mask.count_ones() as usize == steps {
            all.push((0..total).map(|i| 1 + ((mask >> i) & 1) as usize).collect());
        }
    }
    all
}

/// How many of `orders` have each worker's find (its `find`-th step)
/// before the other's store (its `store`-th step): the orders in which
/// check-then-store does the work twice.
fn both_find_first(orders: &[Vec<usize>], find: usize, store: usize) -> u64 {
    orders
        .iter()
        .filter(|order| {
            // The k-th step of worker w is at the position of w's k-th entry.
            let at = |w: usize, k: usize| {
                order
                    .iter()
                    .enumerate()
                    .filter(|(_, x)| **x == w)
                    .nth(k)
                    .unwrap()
                    .0
            };
            at(1, find) < at(2, store) && at(2, find) < at(1, store)
        })
        .count() as u64
}

/// Lesson 2's claim, counted on every order: check-then-store does the
/// work twice exactly when each find comes before the other's store. The
/// test counts those orders itself and the explorer must agree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_then_store_fails_in_exactly_the_orders_where_both_finds_precede_both_stores() {
    let _serial = TIMING.lock().await;
    let orders = interleavings_of_two(4);
    let expected = both_find_first(&orders, 1, 3);
    assert_eq!(expected, 60, "the test's own count");
    let db = open().await;
    let e = explored(
        &db,
        RaceInput::with_strategy(StrategyKind::CheckThenStore),
        5000,
    )
    .await;
    db.close().await.unwrap();
    assert_eq!(e.total, Some(orders.len() as u64));
    assert_eq!(e.interleavings, 70);
    assert_eq!(e.failing, expected);
    assert_eq!(e.held, 70 - expected);
    assert_eq!(e.kinds.get(&Failure::DuplicateXpRows), Some(&expected));
    // The shortest: all steps are 8 long, so the fewest switches: worker 1
    // checks out, finds and works, worker 2 runs whole, worker 1 stores.
    assert_eq!(e.shortest, Some(steps(&[1, 1, 1, 2, 2, 2, 2, 1])));
}

/// Lesson 2's other claim, on every order: claim-work-complete never
/// makes more than one XP row. And three walks give the same counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claim_work_complete_holds_in_every_interleaving_the_same_every_time() {
    let _serial = TIMING.lock().await;
    let db = open().await;
    let mut seen = Vec::new();
    for _ in 0..3 {
        let e = explored(
            &db,
            RaceInput::with_strategy(StrategyKind::ClaimWorkComplete),
            5000,
        )
        .await;
        seen.push((e.interleavings, e.total, e.held, e.failing));
    }
    db.close().await.unwrap();
    let (n, total, held, failing) = seen[0];
    assert!(n > 1 && total == Some(n), "{seen:?}");
    assert_eq!((held, failing), (n, 0), "{seen:?}");
    assert!(seen.iter().all(|s| *s == seen[0]), "{seen:?}");
}

/// A strategy whose steps wait on each other's locks is walked too: a
/// waiting worker is not free, the others move, and nothing hangs. Its
/// space (hundreds of orders) is past a bound of 100, so it is walked
/// reduced, whole; with a bound of 5 even that stops, and the report says
/// the space was not walked whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_strategy_is_explored_without_hanging_and_a_bound_is_said() {
    let _serial = TIMING.lock().await;
    let db = open().await;
    let whole = explored(
        &db,
        RaceInput::with_strategy(StrategyKind::FindForUpdate),
        100,
    )
    .await;
    let cut = explored(
        &db,
        RaceInput::with_strategy(StrategyKind::FindForUpdate),
        5,
    )
    .await;
    db.close().await.unwrap();
    assert!(whole.reduced, "{whole:?}");
    assert_eq!(whole.total, Some(whole.interleavings), "{whole:?}");
    assert_eq!(whole.held + whole.failing, whole.interleavings);
    // FOR UPDATE locks no row that is not there: both find nothing, both
    // call the service, and the loser's store fails on the unique index.
    assert!(
        whole.kinds.contains_key(&Failure::DuplicateServiceCalls),
        "{whole:?}"
    );
    assert_eq!(cut.interleavings, 5);
    assert_eq!(
        cut.total, None,
        "the bound stopped the walk: no total is claimed"
    );
}

/// A claim that takes a *completed* key over: in a burst the second
/// request meets a pending claim and is told 409; only the plain order
/// "one request runs to its end, then the other" does the work twice.
const TAKES_OVER_COMPLETED: &str = r#"
shape = "claim-work-complete"

[steps]
claim = '''
INSERT INTO idempotency_keys (key, operation, status, worker, locked_at)
VALUES ($key, $operation, 'pending', $worker, now())
ON CONFLICT (key) DO UPDATE SET status = 'pending', worker = $worker, locked_at = now()
WHERE idempotency_keys.status = 'completed'
RETURNING id
'''

replay = '''
SELECT status, response_body FROM idempotency_keys WHERE key = $key
'''

complete = '''
UPDATE idempotency_keys
SET status = 'completed', response_code = $response_code, response_body = $response,
    completed_at = now()
WHERE id = $claim_id
'''
"#;

/// The explorer finds a flaw that lies in one narrow order, every time,
/// and the schedule it shows, replayed by `idem step`, shows the same.
#[test]
fn a_flaw_in_one_narrow_order_is_found_and_its_schedule_replays_it() {
    let sandbox = Sandbox::new("explore-narrow");
    let file = sandbox.dir.join("takes-over.toml");
    std::fs::write(&file, TAKES_OVER_COMPLETED).unwrap();
    let file = file.to_str().unwrap();
    let out = sandbox
        .idem()
        .args(["explore", "--strategy-file", file, "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "a failing guard exits 1");
    let e: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(e["failing"].as_u64().unwrap() > 0, "{e}");
    assert_eq!(e["total"], e["interleavings"], "{e}");
    let schedule: Vec<String> = e["shortest"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.to_string())
        .collect();
    let replay = e["replay"].as_str().unwrap();
    assert!(replay.starts_with("idem step --strategy-file"), "{replay}");
    let stepped = sandbox
        .idem()
        .args(["step", "--strategy-file", file, "--workers", "2", "--json"])
        .args(["--schedule", &schedule.join(",")])
        .output()
        .unwrap();
    let r: serde_json::Value = serde_json::from_slice(&stepped.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&stepped.stderr)));
    assert_eq!(
        r["xp_rows"], 2,
        "the replay makes the same two XP rows: {r}"
    );
    std::fs::remove_file(file).unwrap();
    assert_eq!(
        sandbox.wait_clean(Duration::from_secs(10)),
        Vec::<String>::new()
    );
}

/// `--json` is one object, as schemas/explore.schema.json publishes it.
#[test]
fn the_json_matches_its_published_schema() {
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string("schemas/explore.schema.json").unwrap())
            .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let sandbox = Sandbox::new("explore-json");
    for strategy in ["claim-work-complete", "insert-unique"] {
        let out = sandbox
            .idem()
            .args(["explore", "-s", strategy, "--json"])
            .output()
            .unwrap();
        let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&value)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{strategy}: {errors:?}\n{value}");
    }
}

/// Ctrl-C in the middle of a walk ends it calmly and leaves nothing: no
/// server, no directory.
#[test]
fn ctrl_c_mid_exploration_leaves_nothing_behind() {
    let sandbox = Sandbox::new("explore-ctrl-c");
    let mut idem = sandbox
        .idem_std()
        .args(["explore", "-s", "find-for-update", "--json"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        sandbox
            .wait_for_ready_cluster(Duration::from_secs(30))
            .is_some()
    );
    // The walk of find-for-update takes tens of seconds: it is under way.
    std::thread::sleep(Duration::from_millis(1500));
    signal(idem.id(), libc::SIGINT);
    assert_eq!(idem.wait().unwrap().code(), Some(130));
    assert_eq!(
        sandbox.wait_clean(Duration::from_secs(10)),
        Vec::<String>::new()
    );
}

/// `idem check 2` judges the claim on every interleaving too: the claim
/// that takes a completed key over fails there, with its shortest order,
/// the plain "one request to its end, then the other".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lesson_twos_check_fails_a_claim_that_only_an_order_breaks() {
    let _serial = TIMING.lock().await;
    let sandbox = Sandbox::new("explore-check");
    let file = sandbox.dir.join("takes-over.toml");
    std::fs::write(&file, TAKES_OVER_COMPLETED).unwrap();
    let db = open().await;
    let checks = idem::exercise::judge(&db, 2, &file).await.unwrap();
    db.close().await.unwrap();
    let explored = checks
        .iter()
        .find(|c| c.case == "every interleaving of two requests")
        .expect("lesson 2 has the case");
    assert!(!explored.passed(), "{explored:?}");
    assert!(
        explored.saw.contains("--schedule 1,1,1,1,2,2,2,2"),
        "{explored:?}"
    );
}

/// A space larger than the bound is walked reduced: steps that touch no
/// row another request uses (checkout, work) are taken at once, and every
/// order of the rest is run. For check-then-store's two requests that is
/// every order of two finds and two stores, which the test counts itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_space_past_the_bound_is_walked_reduced_and_agrees_with_the_finds_and_stores() {
    let _serial = TIMING.lock().await;
    let orders = interleavings_of_two(2);
    let failing = both_find_first(&orders, 0, 1);
    let db = open().await;
    let e = explored(
        &db,
        RaceInput::with_strategy(StrategyKind::CheckThenStore),
        10,
    )
    .await;
    let three = explored(
        &db,
        RaceInput::with_strategy(StrategyKind::ClaimWorkComplete)
            .with(|r| r.shape.workers = Some(3)),
        5000,
    )
    .await;
    db.close().await.unwrap();
    assert!(e.reduced, "{e:?}");
    assert_eq!(e.total, Some(orders.len() as u64), "{e:?}");
    assert_eq!(
        (e.failing, e.held),
        (failing, orders.len() as u64 - failing)
    );
    assert!(three.reduced && three.total.is_some(), "{three:?}");
    assert_eq!(three.failing, 0, "{three:?}");
}

/// `idem step --goal`: the scheduler as a game, on each engine. An order
/// that makes check-then-store leave 2 XP rows reaches the goal; one that
/// runs the requests one after the other does not, exits 1, and is told
/// how many of all the orders would have.
#[test]
fn the_scheduler_puzzle_says_whether_the_goal_was_reached_and_how_often_it_can_be() {
    let sandbox = Sandbox::new("explore-puzzle");
    for engine in ["postgres", "mariadb"] {
        let step = |schedule: &str| {
            sandbox
                .idem()
                .args(["step", "--engine", engine, "-s", "check-then-store"])
                .args(["--workers", "2", "--goal", "2", "--schedule", schedule])
                .output()
                .unwrap()
        };
        let reached = step("1,1,1,2,2,2,2,1");
        let text = String::from_utf8_lossy(&reached.stdout);
        assert_eq!(reached.status.code(), Some(0), "{engine}: {text}");
        assert!(
            text.contains("Goal reached: 2 XP rows after 8 steps."),
            "{engine}: {text}"
        );
        assert!(text.contains("60 of all 70 orders"), "{engine}: {text}");
        let missed = step("1,1,1,1,2,2,2,2");
        let text = String::from_utf8_lossy(&missed.stdout);
        assert_eq!(missed.status.code(), Some(1), "{engine}: {text}");
        assert!(
            text.contains("Not yet: this order left 1 XP row."),
            "{engine}: {text}"
        );
        assert!(text.contains("60 of all 70 orders"), "{engine}: {text}");
    }
    assert_eq!(
        sandbox.wait_clean(Duration::from_secs(10)),
        Vec::<String>::new()
    );
}
