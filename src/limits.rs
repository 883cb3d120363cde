//! The bounds and defaults of every number idem takes: one table for the flags and the scenario files alike.
//!
//! The command line checks these bounds as it parses (its value parsers are
//! [`Limit::parser`]s, and its help shows [`Limit::default`]), and the race
//! builder checks them again on what a scenario file gives, so a file cannot
//! ask for what a flag may not. A message names the setting as the user
//! wrote it: `--workers` on the command line, `race.workers` in a file.

use anyhow::{Result, bail};

/// Where settings came from. A message about a file's setting does not
/// name the file: whoever read the file puts its name in front.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The command line.
    Flags,
    /// A scenario file.
    File,
}

impl Origin {
    /// A setting's name where it came from: its flag or its file key.
    pub fn name(self, flag: &'static str, key: &'static str) -> &'static str {
        match self {
            Origin::Flags => flag,
            Origin::File => key,
        }
    }
}

/// One numeric setting: its flag, its key in a scenario file, its bounds,
/// and its default when it has one: the one place each is written.
#[derive(Debug, Clone, Copy)]
pub struct Limit {
    flag: &'static str,
    pub(crate) key: &'static str,
    min: u64,
    max: u64,
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

    /// Parses what the user typed on the command line, saying plainly what is wrong.
    pub fn parse(&self, text: &str) -> Result<u64, String> {
        let range = format!("a whole number from {} to {}", self.min, self.max);
        match text.trim().parse::<i128>() {
            Ok(n) if n < 0 => Err(format!("it is negative; give {range}")),
            Ok(n) if n < i128::from(self.min) || n > i128::from(self.max) => {
                Err(format!("give {range}"))
            }
            Ok(n) => Ok(n as u64),
            Err(_) => Err(format!("not a number; give {range}")),
        }
    }

    /// [`parse`](Self::parse) as a value parser for the command line.
    pub fn parser(self) -> impl Fn(&str) -> Result<u64, String> + Clone + Send + Sync + 'static {
        move |text| self.parse(text)
    }

    /// A flag's help line with this setting's default after it, as clap
    /// would show it, for flags whose default the builder applies.
    pub fn help(&self, text: &str) -> String {
        format!(
            "{} [default: {}]",
            text.trim_end_matches('.'),
            self.default()
        )
    }

    /// Fails with one line naming the setting and its bounds.
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
            Origin::File => Err(OutOfBounds {
                key: self.key,
                message: format!(
                    "{} = {value} is out of bounds: give a whole number from {min} to {max}",
                    self.key
                ),
            }
            .into()),
        }
    }
}

/// A file's key whose value is out of its bound: the key, so that the
/// file's reader can say where it stands, and the message.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct OutOfBounds {
    /// The key as a file writes it under its table (`race.heartbeat_ms`).
    pub key: &'static str,
    message: String,
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

/// A setting only the command line takes: its key is its flag.
const fn flag(flag: &'static str, min: u64, max: u64) -> Limit {
    limit(flag, flag, min, max)
}

/// A flag's help line with the default the builder applies, as clap shows
/// the defaults it applies itself.
pub fn help_with_default(text: &str, default: impl std::fmt::Display) -> String {
    format!("{} [default: {default}]", text.trim_end_matches('.'))
}

const fn with_default(limit: Limit, default: u64) -> Limit {
    Limit {
        default: Some(default),
        ..limit
    }
}

// A race: flags and scenario files alike.

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
pub const SINK_DELAY_MS: Limit = limit("--sink-delay-ms", "sink_delay_ms", 0, 60_000);
pub const WAIT_FOR_MS: Limit = limit("--wait-for-ms", "wait_for_ms", 1, 3_600_000);
pub const LESSONS: Limit = limit("--lessons", "race.lessons", 1, 1_000);
pub const USERS: Limit = limit("--users", "race.users", 1, 1_000_000_000);
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
    1000,
);
pub const CACHE_PRESSURE: Limit = with_default(
    limit("--cache-pressure", "race.cache_pressure", 0, 1_000_000),
    0,
);
pub const REDIS_TTL_MS: Limit = with_default(
    limit("--redis-ttl-ms", "race.redis_ttl_ms", 1, 86_400_000),
    60_000,
);
pub const REDIS_PRESSURE: Limit = with_default(
    limit("--redis-pressure", "race.redis_pressure", 0, 100_000),
    0,
);
pub const REDIS_HEARTBEAT_MS: Limit = limit(
    "--redis-heartbeat-ms",
    "race.redis_heartbeat_ms",
    1,
    3_600_000,
);
/// `WAIT`'s own time limit, below the 5 s every Redis command gets: 0,
/// which would wait for ever, is not taken.
pub const REDIS_WAIT_MS: Limit = limit("--redis-wait-ms", "race.redis_wait_ms", 1, 4_000);
pub const STALE_AFTER_MS: Limit = with_default(
    limit("--stale-after-ms", "race.stale_after_ms", 1, 3_600_000),
    1000,
);
pub const HEARTBEAT_MS: Limit = limit("--heartbeat-ms", "race.heartbeat_ms", 1, 1_800_000);
pub const FAIL_WORK: Limit = limit("--fail-work", "race.fail_work", 1, 100_000);
pub const CRASH_WORKER: Limit = limit("--crash worker=", "race.crash.worker", 1, 100_000);
pub const RECOVERY_RETRIES: Limit = with_default(
    limit("--recovery-retries", "race.recovery_retries", 1, 100),
    1,
);
pub const RETRY_SERIALIZATION: Limit = with_default(
    limit("--retry-serialization", "race.retry_serialization", 0, 100),
    0,
);
pub const REPLICA_DELAY_MS: Limit = with_default(
    limit("--replica-delay-ms", "race.replica_delay_ms", 0, 60_000),
    0,
);
/// The delay of the link a standby's WAL crosses: long enough, by
/// default, that a race is over before its WAL arrives.
pub const LINK_DELAY_MS: Limit = with_default(
    limit("--link-delay-ms", "race.link_delay_ms", 0, 60_000),
    500,
);
pub const REPLICAS: Limit = with_default(limit("--replicas", "race.replicas", 1, 16), 1);
/// The nodes of a Galera cluster a MariaDB race runs on: one is a plain
/// server; three is the course's cluster.
pub const NODES: Limit = with_default(limit("--nodes", "race.nodes", 1, 5), 1);
/// The node a race kills mid-burst: never node 1, which keeps the books.
pub const KILL_NODE: Limit = limit("--kill-node", "race.kill_node", 2, 5);
/// The old name of the stale-claim age, read with its bounds.
pub const LOCK_TIMEOUT_MS: Limit = limit(
    "--lock-timeout-ms",
    "race.lock_timeout_ms",
    STALE_AFTER_MS.min,
    STALE_AFTER_MS.max,
);

/// Every `[race]` key that takes a whole number, with its bound: the one
/// table the scenario reader checks a file's value against where it
/// stands, and the race builder checks whatever an input said (a flag's
/// own parser is the same [`Limit`]). A key whose value is no number is
/// listed as such by a test that holds every key to one of the two.
pub const RACE: [Limit; 28] = [
    WORKERS,
    POOL_SIZE,
    WORK_MS,
    CHECKOUT_TIMEOUT_MS,
    THREADS,
    AMOUNT,
    LESSONS,
    USERS,
    POLL_MS,
    WAIT_TIMEOUT_MS,
    CACHE_MAX_ENTRIES,
    CACHE_PRESSURE,
    REDIS_TTL_MS,
    REDIS_PRESSURE,
    REDIS_HEARTBEAT_MS,
    REDIS_WAIT_MS,
    STALE_AFTER_MS,
    LOCK_TIMEOUT_MS,
    HEARTBEAT_MS,
    FAIL_WORK,
    CRASH_WORKER,
    RECOVERY_RETRIES,
    RETRY_SERIALIZATION,
    REPLICA_DELAY_MS,
    LINK_DELAY_MS,
    REPLICAS,
    NODES,
    KILL_NODE,
];

/// The bound of `[race]` key `key` (`race.workers`, `race.crash.worker`).
pub fn race_limit(key: &str) -> Option<&'static Limit> {
    RACE.iter().find(|l| l.key == key)
}

/// Checks every whole number in `value`, said for the `[race]` key `key`
/// (`race.workers`), against its bound: in a list, each item; in a table
/// (`crash = { worker = 2 }`), each key under it.
pub fn check_race_value(key: &str, value: &toml::Value, origin: Origin) -> Result<()> {
    match value {
        toml::Value::Integer(n) => match race_limit(key) {
            Some(limit) => limit.check(u64::try_from(*n).unwrap_or(u64::MAX), origin),
            None => Ok(()),
        },
        toml::Value::Array(items) => items
            .iter()
            .try_for_each(|item| check_race_value(key, item, origin)),
        toml::Value::Table(table) => table
            .iter()
            .try_for_each(|(k, v)| check_race_value(&format!("{key}.{k}"), v, origin)),
        _ => Ok(()),
    }
}

// Lesson 6's clients: `idem keys` and a scenario's `[keys]`.

pub const POOLER_RUNS: Limit = with_default(flag("--runs", 1, 10_000), 1);
pub const MATRIX_RUNS: Limit = with_default(flag("--runs", 1, 100_000), 20);
pub const CLIENTS: Limit = with_default(limit("--clients", "keys.clients", 1, 1000), 1);
pub const INTENTS: Limit = with_default(limit("--intents", "keys.intents", 1, 100), 2);
pub const RETRIES: Limit = with_default(limit("--retries", "keys.retries", 1, 100), 2);

/// How long `idem keys`'s server works on each request.
pub const KEYS_WORK_MS: Limit = with_default(flag("--work-ms", 0, 60_000), 1);

// `idem stores`: its own race, smaller than `idem race`'s bounds.

pub const STORES_RUNS: Limit = with_default(flag("--runs", 1, 100_000), 20);
pub const STORES_WORKERS: Limit = with_default(flag("--workers", 2, 1000), 5);
pub const STORES_WORK_MS: Limit = with_default(flag("--work-ms", 0, 60_000), WORK_MS.default());
pub const STORES_CACHE_MAX_ENTRIES: Limit =
    with_default(flag("--cache-max-entries", 1, 1_000_000), 100);

// `idem step` and `idem lesson`.

/// A worker `idem step --schedule` may name, as a number: whether the race
/// has that worker (numbered from 1) is checked against its `--workers`.
pub const SCHEDULE_WORKER: Limit = flag("--schedule", 0, 100_000);
/// `idem step --goal`: the XP rows a puzzle asks the scheduler to make.
pub const GOAL_XP_ROWS: Limit = flag("--goal", 0, 5);
/// `idem explore`: the most interleavings one exploration runs.
pub const MAX_INTERLEAVINGS: Limit = with_default(flag("--max-interleavings", 1, 1_000_000), 5_000);
/// A lesson of the course.
pub const LESSON: Limit = flag("<NUMBER>", 1, 11);

// `idem serve`'s front door.

pub const READ_TIMEOUT_MS: Limit = with_default(flag("--read-timeout-ms", 1, 3_600_000), 10_000);
pub const IDLE_TIMEOUT_MS: Limit = with_default(flag("--idle-timeout-ms", 1, 3_600_000), 30_000);
pub const MAX_CONNECTIONS: Limit = with_default(flag("--max-connections", 1, 1_000_000), 1024);

// `idem probe` and `idem challenge --url`.

pub const PROBE_REQUESTS: Limit = with_default(flag("--requests", 1, 1000), 5);
pub const PROBE_RUNS: Limit = with_default(flag("--runs", 1, 100_000), 1);
pub const PROBE_TIMEOUT_MS: Limit = with_default(flag("--timeout-ms", 1, 3_600_000), 30_000);
pub const MAX_RESPONSE_BYTES: Limit =
    with_default(flag("--max-response-bytes", 1, 1_073_741_824), 1024 * 1024);
pub const COUNT_TIMEOUT_MS: Limit = with_default(flag("--count-timeout-ms", 1, 3_600_000), 15_000);
pub const IN_FLIGHT_MS: Limit = flag("--in-flight-ms", 0, 3_600_000);
pub const SETTLE_MS: Limit = with_default(flag("--settle-ms", 1, 3_600_000), 10_000);

/// Parses a duration: a whole number and a unit, ms, s, m, h, d or w (e.g.
/// 90s, 24h, 2w), for flags and scenario files alike.
pub fn duration(text: &str) -> Result<std::time::Duration, String> {
    use std::time::Duration;
    let text = text.trim();
    if text.starts_with('-') {
        return Err("a duration cannot be negative".into());
    }
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration; write e.g. 90s, 15m, 24h or 2w"))?;
    let secs = match unit {
        "ms" => return Ok(Duration::from_millis(number)),
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 604_800,
        _ => {
            return Err(format!(
                "{text:?} has no known unit; use ms, s, m, h, d or w"
            ));
        }
    };
    number
        .checked_mul(secs)
        .map(Duration::from_secs)
        .ok_or_else(|| format!("{text:?} is too long"))
}
