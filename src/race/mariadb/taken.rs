//! What a MariaDB race takes of a race's options so far, and the one-line refusal of the rest.

use anyhow::{Result, bail};
use serde_json::Value;

use crate::race::options::RaceInput;

/// The options a MariaDB race takes: each as the race's inputs name it,
/// and the flag a refusal lists for it (none for a key a flag of another
/// name sets, as `--no-fingerprint` sets `fingerprint`).
const TAKES: &[(&str, Option<&str>)] = &[
    ("workers", Some("--workers")),
    ("key", Some("--key")),
    ("strategy", None),
    ("pool_size", Some("--pool-size")),
    ("no_runner_connection", None),
    ("runner_connection", None),
    ("runner_holds_connection", None),
    ("work_ms", Some("--work-ms")),
    ("checkout_timeout_ms", Some("--checkout-timeout-ms")),
    ("transaction", Some("--transaction")),
    ("isolation", Some("--isolation")),
    ("read_back", Some("--read-back")),
    ("crash", Some("--crash")),
    ("recovery_retries", Some("--recovery-retries")),
    ("stale_after_ms", Some("--stale-after-ms")),
    ("fail_work", Some("--fail-work")),
    ("on_failure", Some("--on-failure")),
    ("heartbeat_ms", Some("--heartbeat-ms")),
    ("hang_up", Some("--hang-up")),
    ("on_hangup", Some("--on-hangup")),
    ("amounts", Some("--amounts")),
    ("lessons", Some("--lessons")),
    ("users", Some("--users")),
    ("fingerprint", Some("--no-fingerprint")),
    ("store", Some("--store")),
    ("strategy_file", Some("--strategy-file")),
    ("nodes", Some("--nodes")),
    ("spread", Some("--spread")),
    ("retry_at_once", Some("--retry-at-once")),
    ("retry_node", Some("--retry-node")),
    ("sync_wait", Some("--sync-wait")),
    ("retry_behind", Some("--retry-behind")),
    ("kill_node", Some("--kill-node")),
];

/// The flags a MariaDB race takes, as a refusal lists them.
fn taken_flags() -> String {
    let flags: Vec<&str> = TAKES.iter().filter_map(|(_, flag)| *flag).collect();
    format!("{}, --runs, --json", flags.join(", "))
}

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
            if TAKES.iter().any(|(key, _)| key == name) || default.get(name) == Some(value) {
                continue;
            }
            bail!(
                "--engine mariadb does not take --{} yet (it takes {})",
                name.replace('_', "-"),
                taken_flags()
            );
        }
    }
    Ok(())
}
