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
];

/// Refuses, naming it, any option a MariaDB race does not take yet.
pub(super) fn refuse_untaken(input: &RaceInput) -> Result<()> {
    let defaults = RaceInput::default();
    let pairs = [
        (
            serde_json::to_value(&input.shape)?,
            serde_json::to_value(&defaults.shape)?,
        ),
        (
            serde_json::to_value(&input.wire)?,
            serde_json::to_value(&defaults.wire)?,
        ),
        (
            serde_json::to_value(&input.strategy)?,
            serde_json::to_value(&defaults.strategy)?,
        ),
        (
            serde_json::to_value(&input.app)?,
            serde_json::to_value(&defaults.app)?,
        ),
        (
            serde_json::to_value(&input.losers)?,
            serde_json::to_value(&defaults.losers)?,
        ),
        (
            serde_json::to_value(&input.amounts)?,
            serde_json::to_value(&defaults.amounts)?,
        ),
        (
            serde_json::to_value(&input.fingerprints)?,
            serde_json::to_value(&defaults.fingerprints)?,
        ),
        (
            serde_json::to_value(&input.store)?,
            serde_json::to_value(&defaults.store)?,
        ),
        (
            serde_json::to_value(&input.eviction)?,
            serde_json::to_value(&defaults.eviction)?,
        ),
        (
            serde_json::to_value(&input.guard)?,
            serde_json::to_value(&defaults.guard)?,
        ),
        (
            serde_json::to_value(&input.transaction)?,
            serde_json::to_value(&defaults.transaction)?,
        ),
        (
            serde_json::to_value(&input.standby)?,
            serde_json::to_value(&defaults.standby)?,
        ),
        (
            serde_json::to_value(&input.faults)?,
            serde_json::to_value(&defaults.faults)?,
        ),
        (
            serde_json::to_value(&input.hang_up)?,
            serde_json::to_value(&defaults.hang_up)?,
        ),
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
                 --no-fingerprint, --store, --strategy-file, --runs, --json)",
                name.replace('_', "-")
            );
        }
    }
    Ok(())
}
