//! The scenario files in `scenarios/`, built into the binary so that
//! `idem lesson` works from anywhere; a test checks this list against the folder.

/// (file name, contents) of every scenario, in lesson order.
pub const SCENARIOS: &[(&str, &str)] = &[
    (
        "1-check-then-store-through-pgbouncer.toml",
        include_str!("../../scenarios/1-check-then-store-through-pgbouncer.toml"),
    ),
    (
        "1-check-then-store-two-replicas.toml",
        include_str!("../../scenarios/1-check-then-store-two-replicas.toml"),
    ),
    (
        "1-check-then-store.toml",
        include_str!("../../scenarios/1-check-then-store.toml"),
    ),
    (
        "1-insert-unique.toml",
        include_str!("../../scenarios/1-insert-unique.toml"),
    ),
    (
        "1-no-runner-connection.toml",
        include_str!("../../scenarios/1-no-runner-connection.toml"),
    ),
    (
        "1-pool-of-six.toml",
        include_str!("../../scenarios/1-pool-of-six.toml"),
    ),
    (
        "2-claim-work-complete.toml",
        include_str!("../../scenarios/2-claim-work-complete.toml"),
    ),
    (
        "2-schedule-claim-work-complete.toml",
        include_str!("../../scenarios/2-schedule-claim-work-complete.toml"),
    ),
    (
        "2-schedule-finds-before-stores.toml",
        include_str!("../../scenarios/2-schedule-finds-before-stores.toml"),
    ),
    (
        "2-schedule-store-before-find.toml",
        include_str!("../../scenarios/2-schedule-store-before-find.toml"),
    ),
    (
        "3-block-starves-the-pool.toml",
        include_str!("../../scenarios/3-block-starves-the-pool.toml"),
    ),
    (
        "3-block-through-pgbouncer.toml",
        include_str!("../../scenarios/3-block-through-pgbouncer.toml"),
    ),
    ("3-block.toml", include_str!("../../scenarios/3-block.toml")),
    (
        "3-fail-fast.toml",
        include_str!("../../scenarios/3-fail-fast.toml"),
    ),
    (
        "3-pgbouncer-setting-leaks.toml",
        include_str!("../../scenarios/3-pgbouncer-setting-leaks.toml"),
    ),
    ("3-poll.toml", include_str!("../../scenarios/3-poll.toml")),
    (
        "4-fingerprint.toml",
        include_str!("../../scenarios/4-fingerprint.toml"),
    ),
    (
        "4-no-fingerprint.toml",
        include_str!("../../scenarios/4-no-fingerprint.toml"),
    ),
    (
        "5-cache-claims-duplicate.toml",
        include_str!("../../scenarios/5-cache-claims-duplicate.toml"),
    ),
    (
        "5-cache-eviction.toml",
        include_str!("../../scenarios/5-cache-eviction.toml"),
    ),
    (
        "5-memory-one-process.toml",
        include_str!("../../scenarios/5-memory-one-process.toml"),
    ),
    (
        "5-memory-one-replica.toml",
        include_str!("../../scenarios/5-memory-one-replica.toml"),
    ),
    (
        "5-memory-two-replicas.toml",
        include_str!("../../scenarios/5-memory-two-replicas.toml"),
    ),
    (
        "5-table-survives-eviction.toml",
        include_str!("../../scenarios/5-table-survives-eviction.toml"),
    ),
    (
        "6-coarse-keys.toml",
        include_str!("../../scenarios/6-coarse-keys.toml"),
    ),
    (
        "6-derived-keys.toml",
        include_str!("../../scenarios/6-derived-keys.toml"),
    ),
    (
        "6-random-keys.toml",
        include_str!("../../scenarios/6-random-keys.toml"),
    ),
    (
        "7-check-then-store-crash.toml",
        include_str!("../../scenarios/7-check-then-store-crash.toml"),
    ),
    (
        "7-guard-crash-after-claim.toml",
        include_str!("../../scenarios/7-guard-crash-after-claim.toml"),
    ),
    (
        "7-guard-failure-released.toml",
        include_str!("../../scenarios/7-guard-failure-released.toml"),
    ),
    (
        "7-guard-kill-connection.toml",
        include_str!("../../scenarios/7-guard-kill-connection.toml"),
    ),
    (
        "7-guard-through-pgbouncer.toml",
        include_str!("../../scenarios/7-guard-through-pgbouncer.toml"),
    ),
    (
        "7-guard-two-takers.toml",
        include_str!("../../scenarios/7-guard-two-takers.toml"),
    ),
    (
        "7-pgbouncer-prepared-statement.toml",
        include_str!("../../scenarios/7-pgbouncer-prepared-statement.toml"),
    ),
    (
        "8-advisory-lock-rc.toml",
        include_str!("../../scenarios/8-advisory-lock-rc.toml"),
    ),
    (
        "8-advisory-lock-rr.toml",
        include_str!("../../scenarios/8-advisory-lock-rr.toml"),
    ),
    (
        "8-advisory-lock-ser-retry.toml",
        include_str!("../../scenarios/8-advisory-lock-ser-retry.toml"),
    ),
    (
        "8-advisory-lock-ser.toml",
        include_str!("../../scenarios/8-advisory-lock-ser.toml"),
    ),
    (
        "8-check-then-store-none.toml",
        include_str!("../../scenarios/8-check-then-store-none.toml"),
    ),
    (
        "8-check-then-store-rc.toml",
        include_str!("../../scenarios/8-check-then-store-rc.toml"),
    ),
    (
        "8-check-then-store-rr.toml",
        include_str!("../../scenarios/8-check-then-store-rr.toml"),
    ),
    (
        "8-check-then-store-ser-retry.toml",
        include_str!("../../scenarios/8-check-then-store-ser-retry.toml"),
    ),
    (
        "8-check-then-store-ser.toml",
        include_str!("../../scenarios/8-check-then-store-ser.toml"),
    ),
    (
        "8-claim-work-complete-none.toml",
        include_str!("../../scenarios/8-claim-work-complete-none.toml"),
    ),
    (
        "8-claim-work-complete-rc.toml",
        include_str!("../../scenarios/8-claim-work-complete-rc.toml"),
    ),
    (
        "8-claim-work-complete-rr.toml",
        include_str!("../../scenarios/8-claim-work-complete-rr.toml"),
    ),
    (
        "8-claim-work-complete-ser.toml",
        include_str!("../../scenarios/8-claim-work-complete-ser.toml"),
    ),
    (
        "8-find-for-update-rc.toml",
        include_str!("../../scenarios/8-find-for-update-rc.toml"),
    ),
    (
        "8-find-for-update-rr.toml",
        include_str!("../../scenarios/8-find-for-update-rr.toml"),
    ),
    (
        "8-find-for-update-ser.toml",
        include_str!("../../scenarios/8-find-for-update-ser.toml"),
    ),
    (
        "8-guard-none.toml",
        include_str!("../../scenarios/8-guard-none.toml"),
    ),
    (
        "8-insert-unique-none.toml",
        include_str!("../../scenarios/8-insert-unique-none.toml"),
    ),
    (
        "8-insert-unique-rc.toml",
        include_str!("../../scenarios/8-insert-unique-rc.toml"),
    ),
    (
        "8-insert-unique-rr.toml",
        include_str!("../../scenarios/8-insert-unique-rr.toml"),
    ),
    (
        "8-insert-unique-ser.toml",
        include_str!("../../scenarios/8-insert-unique-ser.toml"),
    ),
    (
        "8-pgbouncer-session-lock.toml",
        include_str!("../../scenarios/8-pgbouncer-session-lock.toml"),
    ),
    (
        "9-claim-expires-mid-work.toml",
        include_str!("../../scenarios/9-claim-expires-mid-work.toml"),
    ),
    (
        "9-hang-up-claim-work-complete-cancel.toml",
        include_str!("../../scenarios/9-hang-up-claim-work-complete-cancel.toml"),
    ),
    (
        "9-hang-up-claim-work-complete-finish.toml",
        include_str!("../../scenarios/9-hang-up-claim-work-complete-finish.toml"),
    ),
    (
        "9-hang-up-guard-cancel.toml",
        include_str!("../../scenarios/9-hang-up-guard-cancel.toml"),
    ),
    (
        "9-heartbeat.toml",
        include_str!("../../scenarios/9-heartbeat.toml"),
    ),
];

use anyhow::Result;

use super::file::{Scenario, parse};

/// Every built-in scenario, parsed.
pub fn all() -> Result<Vec<Scenario>> {
    SCENARIOS
        .iter()
        .map(|(name, text)| parse(std::path::Path::new(&format!("scenarios/{name}")), text))
        .collect()
}

/// The built-in scenarios of one lesson.
pub fn for_lesson(lesson: u8) -> Result<Vec<Scenario>> {
    Ok(all()?.into_iter().filter(|s| s.lesson == lesson).collect())
}

/// The built-in scenario `name` names: its file name with or without
/// `.toml`, or its path as `idem scenario list` shows it.
pub fn named(name: &str) -> Option<Result<Scenario>> {
    let bare = name.strip_prefix("scenarios/").unwrap_or(name);
    let bare = bare.strip_suffix(".toml").unwrap_or(bare);
    SCENARIOS
        .iter()
        .find(|(file, _)| file.strip_suffix(".toml") == Some(bare))
        .map(|(file, text)| parse(std::path::Path::new(&format!("scenarios/{file}")), text))
}
