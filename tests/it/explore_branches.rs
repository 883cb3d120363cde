//! `idem explore --crashes --clock`: lesson 7's crash and lessons 7 and 9's stale claim as branches of the walk, on the real database, so the takeover guards are judged on every order too.

use std::collections::BTreeMap;
use std::time::Duration;

use idem::db::{ConnectOptions, Database};
use idem::explore::{self, Branches, Exploration, Failure};
use idem::race::moves::Move;
use idem::race::options::RaceInput;
use idem::strategy::StrategyKind;

use crate::common::Sandbox;

/// Two workers of `strategy` whose work takes no time, explored whole on
/// `branches`.
async fn explored(db: &Database, input: RaceInput, branches: Branches) -> Exploration {
    let walking = explore::Walking {
        branches,
        ..explore::Walking::steps("idem step")
    };
    let input = input.with(|r| r.app.work_ms = Some(0));
    crate::explore::walked(db, &input, &walking).await
}

fn strategy(s: StrategyKind) -> RaceInput {
    RaceInput::default().with(|r| r.strategy.strategy = Some(s))
}

const CLOCK: Branches = Branches {
    crashes: false,
    clock: true,
};
const CRASHES: Branches = Branches {
    crashes: true,
    clock: false,
};

/// Lesson 9's claim that expires mid-work, on every order: without a
/// heartbeat the guard fails only where the clock jumps while the owner
/// still works (the service called twice, the database still one row);
/// with one, a working owner's claim never ages and the guard holds in
/// every order. The same counts twice over.
#[tokio::test]
async fn the_clock_breaks_the_guard_only_where_it_jumps_and_a_heartbeat_keeps_it() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let plain = explored(&db, strategy(StrategyKind::Guard), Branches::default()).await;
    assert_eq!(plain.failing, 0, "{plain:?}");
    let clocked = explored(&db, strategy(StrategyKind::Guard), CLOCK).await;
    assert_eq!(clocked.total, Some(clocked.interleavings));
    assert!(clocked.interleavings > plain.interleavings, "{clocked:?}");
    assert!(clocked.failing > 0, "{clocked:?}");
    assert_eq!(clocked.failing_on_steps_alone, 0, "{clocked:?}");
    assert_eq!(
        clocked.kinds,
        BTreeMap::from([(Failure::DuplicateServiceCalls, clocked.failing)]),
        "the database keeps one row: the owner's completion finds its claim taken over"
    );
    assert_eq!(clocked.xp_rows.keys().copied().collect::<Vec<_>>(), vec![1]);
    let shortest = clocked.shortest.clone().unwrap();
    assert!(shortest.contains(&Move::Clock), "{shortest:?}");
    let again = explored(&db, strategy(StrategyKind::Guard), CLOCK).await;
    assert_eq!(
        (again.interleavings, again.failing, again.shortest),
        (clocked.interleavings, clocked.failing, Some(shortest))
    );
    let beating = strategy(StrategyKind::Guard).with(|r| r.guard.heartbeat_ms = Some(50));
    let kept = explored(&db, beating, CLOCK).await;
    assert_eq!(
        (kept.failing, kept.total),
        (0, Some(kept.interleavings)),
        "{kept:?}"
    );
    db.close().await.unwrap();
}

/// Lesson 7's crash, before every step of either request: claim, work,
/// complete leaves the crashed request's claim pending for good (and, when
/// the crash came before the work, no XP row at all), while the guard's
/// takeover of a stale claim recovers in every order. No crash, no
/// failure: steps alone break neither.
#[tokio::test]
async fn crashes_leave_claim_work_completes_key_stuck_and_the_guard_recovers() {
    let db = Database::open(&ConnectOptions::default()).await.unwrap();
    let stuck = explored(&db, strategy(StrategyKind::ClaimWorkComplete), CRASHES).await;
    assert_eq!(stuck.total, Some(stuck.interleavings));
    assert!(stuck.failing > 0, "{stuck:?}");
    assert_eq!(stuck.failing_on_steps_alone, 0, "{stuck:?}");
    assert_eq!(
        stuck.kinds.get(&Failure::KeyLeftStuck),
        Some(&stuck.failing),
        "every failure leaves the crashed claim pending: {stuck:?}"
    );
    assert!(
        stuck
            .shortest
            .as_ref()
            .unwrap()
            .iter()
            .any(|m| matches!(m, Move::Crash(_))),
        "{stuck:?}"
    );
    let guard = explored(&db, strategy(StrategyKind::Guard), CRASHES).await;
    assert!(
        guard.interleavings > 44,
        "crashes branch the walk: {guard:?}"
    );
    assert_eq!((guard.failing, guard.total), (0, Some(guard.interleavings)));
    db.close().await.unwrap();
}

/// The shortest crash that breaks claim, work, complete, as `--json`
/// says it, with the schema's moves, replays through `idem step` to the
/// same stuck key; nothing is left behind.
#[test]
fn a_crashing_schedule_replays_through_idem_step() {
    let sandbox = Sandbox::new("explore-crash");
    let out = sandbox
        .idem()
        .args([
            "explore",
            "-s",
            "claim-work-complete",
            "--crashes",
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "a failing guard exits 1");
    let e: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string("schemas/explore.schema.json").unwrap())
            .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    assert!(validator.is_valid(&e), "{e}");
    assert_eq!(e["branches"]["crashes"], true);
    let schedule: Vec<String> = e["shortest"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().map_or_else(|| m.to_string(), str::to_string))
        .collect();
    assert!(schedule.iter().any(|m| m.starts_with("crash")), "{e}");
    let replay = e["replay"].as_str().unwrap();
    assert!(
        !replay.contains("--crashes"),
        "step takes the crash from the schedule: {replay}"
    );
    let stepped = sandbox
        .idem()
        .args(["step", "-s", "claim-work-complete", "--workers", "2"])
        .args([
            "--work-ms",
            "0",
            "--json",
            "--schedule",
            &schedule.join(","),
        ])
        .output()
        .unwrap();
    let r: serde_json::Value = serde_json::from_slice(&stepped.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&stepped.stderr)));
    assert_eq!(
        r["pending_key_rows"], 1,
        "the replay leaves the claim stuck: {r}"
    );
    assert_eq!(
        sandbox.wait_clean(Duration::from_secs(10)),
        Vec::<String>::new()
    );
}

/// A move that is not one is refused in one line, naming it.
#[test]
fn a_schedule_with_an_unknown_move_is_refused() {
    let sandbox = Sandbox::new("explore-bad-move");
    let out = sandbox
        .idem()
        .args(["step", "-s", "guard", "--schedule", "1,tick,2"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`tick` is not a move"), "{err}");
}
