//! The bounds of every number a race takes: one table for the flags and the scenario files alike.
//!
//! The command line checks these bounds as it parses (clap's value parsers
//! are built from this table), and [`RaceSettings::validate`] checks them
//! again on whatever built the settings, so a scenario file cannot ask for
//! what a flag may not. A message names the setting as the user wrote it:
//! `--workers` on the command line, `race.workers` in a file.
//!
//! [`RaceSettings::validate`]: super::RaceSettings::validate

use anyhow::{Result, bail};

/// Where settings came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin<'a> {
    /// The command line.
    Flags,
    /// A scenario file, by its path.
    File(&'a str),
}

impl Origin<'_> {
    /// A setting's name where it came from: its flag or its file key.
    pub fn name(self, flag: &'static str, key: &'static str) -> &'static str {
        match self {
            Origin::Flags => flag,
            Origin::File(_) => key,
        }
    }
}

/// One numeric setting: its flag, its key in a scenario file, its bounds,
/// and its default when it has one: the one place each is written.
#[derive(Debug, Clone, Copy)]
pub struct Limit {
    pub flag: &'static str,
    pub key: &'static str,
    pub min: u64,
    pub max: u64,
    default: Option<u64>,
}

impl Limit {
    /// The value taken when neither a flag nor a file gives one.
    pub const fn default(&self) -> u64 {
        match self.default {
            Some(value) => value,
            None => panic!("this setting has no default"),
        }
    }

    /// The setting's name where it came from.
    pub fn name(&self, origin: Origin) -> &'static str {
        origin.name(self.flag, self.key)
    }

    /// Fails with one line naming the file (if any), the setting and its bounds.
    pub fn check(&self, value: u64, origin: Origin) -> Result<()> {
        if (self.min..=self.max).contains(&value) {
            return Ok(());
        }
        let (min, max) = (self.min, self.max);
        match origin {
            Origin::Flags => {
                bail!(
                    "{} {value}: give a whole number from {min} to {max}",
                    self.flag
                )
            }
            Origin::File(file) => bail!(
                "{file}: {} = {value} is out of bounds: give a whole number from {min} to {max}",
                self.key
            ),
        }
    }
}

const fn limit(flag: &'static str, key: &'static str, min: u64, max: u64) -> Limit {
    Limit {
        flag,
        key,
        min,
        max,
        default: None,
    }
}

const fn with_default(limit: Limit, default: u64) -> Limit {
    Limit {
        default: Some(default),
        ..limit
    }
}

pub const WORKERS: Limit = with_default(limit("--workers", "race.workers", 1, 100_000), 5);
pub const POOL_SIZE: Limit = with_default(limit("--pool-size", "race.pool_size", 1, 10_000), 5);
pub const WORK_MS: Limit = with_default(limit("--work-ms", "race.work_ms", 0, 3_600_000), 20);
pub const CHECKOUT_TIMEOUT_MS: Limit = with_default(
    limit(
        "--checkout-timeout-ms",
        "race.checkout_timeout_ms",
        1,
        3_600_000,
    ),
    30_000,
);
pub const THREADS: Limit = with_default(limit("--threads", "race.threads", 1, 10_000), 5);
pub const RUNS: Limit = with_default(limit("--runs", "expect.runs", 1, 1_000_000), 1);
pub const AMOUNT: Limit = limit("--amounts", "race.amounts", 1, 1_000_000);
pub const POLL_MS: Limit = with_default(limit("--poll-ms", "race.poll_ms", 1, 3_600_000), 5);
pub const WAIT_TIMEOUT_MS: Limit = with_default(
    limit("--wait-timeout-ms", "race.wait_timeout_ms", 1, 3_600_000),
    2000,
);
pub const CACHE_MAX_ENTRIES: Limit = with_default(
    limit(
        "--cache-max-entries",
        "race.cache_max_entries",
        1,
        100_000_000,
    ),
    crate::store::cache::DEFAULT_MAX_ENTRIES,
);
pub const CACHE_PRESSURE: Limit = with_default(
    limit("--cache-pressure", "race.cache_pressure", 0, 1_000_000),
    0,
);
pub const LOCK_TIMEOUT_MS: Limit = with_default(
    limit("--lock-timeout-ms", "race.lock_timeout_ms", 1, 3_600_000),
    1000,
);
pub const FAIL_WORK: Limit = limit("--fail-work", "race.fail_work", 1, 100_000);
pub const CRASH_WORKER: Limit = limit("--crash worker=", "race.crash.worker", 1, 100_000);
pub const RECOVERY_RETRIES: Limit = with_default(
    limit("--recovery-retries", "race.recovery_retries", 1, 100),
    1,
);
pub const CLIENTS: Limit = with_default(limit("--clients", "keys.clients", 1, 1000), 1);
pub const INTENTS: Limit = with_default(limit("--intents", "keys.intents", 1, 100), 2);
pub const RETRIES: Limit = with_default(limit("--retries", "keys.retries", 1, 100), 2);
