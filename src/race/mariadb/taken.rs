//! What a MariaDB race takes of a race's options so far, and the one-line refusal of the rest.

use anyhow::{Result, bail};
use serde_json::Value;

use crate::race::options::RaceInput;

/// The options a MariaDB race takes, as the race's inputs name them.
const TAKES: &[&str] = &[
    "workers",
    "key",
    "strategy",
    "pool_size",
    "no_runner_connection",
    "runner_connection",
    "runner_holds_connection",
    "work_ms",
    "checkout_timeout_ms",
    "transaction",
    "isolation",
    "read_back",
    "crash",
    "recovery_retries",
    "stale_after_ms",
    "amounts",
    "lessons",
    "users",
    "fingerprint",
    "store",
    "strategy_file",
    "nodes",
    "spread",
    "retry_at_once",
    "sync_wait",
    "retry_behind",
    "kill_node",
];

/// A group as given and as it defaults, each as JSON.
fn pair<T: serde::Serialize>(given: &T, default: &T) -> Result<(Value, Value)> {
    Ok((serde_json::to_value(given)?, serde_json::to_value(default)?))
}

/// Refuses, naming it, any option a MariaDB race does not take yet.
pub(super) fn refuse_untaken(input: &RaceInput) -> Result<()> {
    let defaults = RaceInput::default();
    let pairs = [
        pair(&input.shape, &defaults.shape)?,
        pair(&input.wire, &defaults.wire)?,
        pair(&input.strategy, &defaults.strategy)?,
        pair(&input.app, &defaults.app)?,
        pair(&input.losers, &defaults.losers)?,
        pair(&input.amounts, &defaults.amounts)?,
        pair(&input.fingerprints, &defaults.fingerprints)?,
        pair(&input.store, &defaults.store)?,
        pair(&input.eviction, &defaults.eviction)?,
        pair(&input.guard, &defaults.guard)?,
        pair(&input.transaction, &defaults.transaction)?,
        pair(&input.standby, &defaults.standby)?,
        pair(&input.faults, &defaults.faults)?,
        pair(&input.hang_up, &defaults.hang_up)?,
        pair(&input.cluster, &defaults.cluster)?,
    ];
    for (given, default) in &pairs {
        let Value::Object(given) = given else {
            continue;
        };
        for (name, value) in given {
            if TAKES.contains(&name.as_str()) || default.get(name) == Some(value) {
                continue;
            }
            bail!(
                "--engine mariadb does not take --{} yet (it takes --workers, --key, --pool-size, \
                 --work-ms, --checkout-timeout-ms, --transaction, --isolation, --read-back, --crash, \
                 --recovery-retries, --stale-after-ms, --amounts, --lessons, --users, \
                 --no-fingerprint, --store, --strategy-file, --nodes, --spread, --retry-at-once, \
                 --sync-wait, --retry-behind, --kill-node, --runs, --json)",
                name.replace('_', "-")
            );
        }
    }
    Ok(())
}
