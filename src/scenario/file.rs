//! The TOML shape of a scenario file, parsed strictly: an unknown key is an error.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{Result, bail};
use serde::Deserialize;

use crate::keys::{CrashPoint, DEFAULT_CRASH_AT, DEFAULT_KEYS_WORK_MS, KeyKind, KeysSettings};
use crate::race::Outcome;
use crate::race::fault::FaultPoint;
use crate::race::input::RaceInput;
use crate::race::limits::{self, Origin};
use crate::race::{CrashPlan, RaceSettings};
use crate::store::StoreKind;
use crate::strategy::guard::OnFailure;
use crate::strategy::{LoserKind, StrategyKind};

/// One demonstration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub title: String,
    pub lesson: u8,
    /// What it shows, in a few sentences.
    pub explain: String,
    /// A race (most lessons)...
    pub race: Option<RaceSpec>,
    /// ...or clients with a key design (lesson 6).
    pub keys: Option<KeysSpec>,
    pub expect: Expect,
    /// The file it came from, for messages.
    #[serde(skip)]
    pub source: String,
}

/// A race's settings; anything left out takes `idem race`'s default.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RaceSpec {
    pub strategy: Option<StrategyKind>,
    pub workers: Option<usize>,
    pub pool_size: Option<usize>,
    pub runner_holds_connection: Option<bool>,
    pub work_ms: Option<u64>,
    pub key: Option<String>,
    pub checkout_timeout_ms: Option<u64>,
    pub loser: Option<LoserKind>,
    pub poll_ms: Option<u64>,
    pub wait_timeout_ms: Option<u64>,
    pub store: Option<StoreKind>,
    pub cache_max_entries: Option<u64>,
    pub cache_pressure: Option<u64>,
    pub amounts: Option<Vec<i32>>,
    pub fingerprint: Option<bool>,
    pub crash: Option<CrashSpec>,
    pub kill_connection: Option<bool>,
    pub lock_timeout_ms: Option<u64>,
    pub on_failure: Option<OnFailure>,
    pub fail_work: Option<usize>,
    pub recovery_retries: Option<usize>,
    /// Race over HTTP through the course's app (`idem race --http`).
    pub http: Option<bool>,
    /// Over HTTP: the app's threads.
    pub threads: Option<usize>,
    /// Run step by step in this order (worker numbers), as `idem step --schedule`.
    pub schedule: Option<Vec<usize>>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CrashSpec {
    pub worker: Option<usize>,
    pub at: FaultPoint,
}

/// A key-design simulation's settings (`idem keys`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeysSpec {
    pub kind: KeyKind,
    pub clients: Option<usize>,
    pub intents: Option<usize>,
    pub retries: Option<usize>,
    pub crash_at: Option<CrashPoint>,
    pub fingerprint: Option<bool>,
}

/// What the scenario must show.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// How many times to run it (default 1).
    pub runs: Option<u64>,
    pub key_rows: Option<u64>,
    pub xp_rows: Option<u64>,
    /// For a probabilistic figure: the least share of runs whose XP rows
    /// must equal `xp_rows`. Without it, every run must.
    pub min_rate: Option<f64>,
    /// For a figure that a broken guard shows only sometimes: the most
    /// share of runs whose XP rows may equal `xp_rows`.
    pub max_rate: Option<f64>,
    pub duplicates: Option<u64>,
    /// Outcome name → count, e.g. { created = 1, conflict = 4 }.
    pub outcomes: Option<BTreeMap<String, u64>>,
    pub wrong_replays: Option<u64>,
    /// Key-design simulations.
    pub keys_used: Option<usize>,
    pub merged_intents: Option<u64>,
}

/// Reads and checks one scenario file. Errors name the file, and for bad
/// TOML or an unknown key the line and column.
pub fn parse(path: &Path, text: &str) -> Result<Scenario> {
    let name = path.display().to_string();
    let mut scenario: Scenario = toml::from_str(text).map_err(|err| {
        let place = err.span().map(|span| {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            format!(":{line}:{column}")
        });
        anyhow::anyhow!(
            "{name}{}: {}",
            place.unwrap_or_default(),
            err.message().trim().replace('\n', " ")
        )
    })?;
    scenario.source = name.clone();
    match (&scenario.race, &scenario.keys) {
        (Some(_), Some(_)) => bail!("{name}: a scenario has [race] or [keys], not both"),
        (None, None) => bail!("{name}: a scenario needs a [race] or a [keys] section"),
        _ => {}
    }
    if !(1..=7).contains(&scenario.lesson) {
        bail!("{name}: lesson must be 1 to 7, not {}", scenario.lesson);
    }
    for rate in [scenario.expect.min_rate, scenario.expect.max_rate]
        .into_iter()
        .flatten()
    {
        if !(0.0..=1.0).contains(&rate) {
            bail!("{name}: expect.min_rate and expect.max_rate must be between 0 and 1");
        }
    }
    let origin = Origin::File(&name);
    if let Some(runs) = scenario.expect.runs {
        limits::RUNS.check(runs, origin)?;
    }
    if let Some(race) = &scenario.race {
        race.settings_from(origin).map_err(|e| in_file(&name, e))?;
    }
    if let Some(keys) = &scenario.keys {
        keys.checked(origin)?;
    }
    check_expectations(&scenario, &name, text)?;
    Ok(scenario)
}

/// Refuses an `[expect]` that checks nothing, names an outcome idem does
/// not have, or asks for a figure this kind of scenario does not produce.
fn check_expectations(scenario: &Scenario, name: &str, text: &str) -> Result<()> {
    let e = &scenario.expect;
    let at = |key: &str| place(text, key).unwrap_or_default();
    let checks_something = [
        e.key_rows.is_some(),
        e.xp_rows.is_some(),
        e.duplicates.is_some(),
        e.outcomes.as_ref().is_some_and(|o| !o.is_empty()),
        e.wrong_replays.is_some(),
        e.keys_used.is_some(),
        e.merged_intents.is_some(),
    ];
    if !checks_something.contains(&true) {
        bail!(
            "{name}{}: [expect] checks nothing; give at least one figure (xp_rows, key_rows, ...)",
            place(text, "[expect]").unwrap_or_default()
        );
    }
    if let Some(outcomes) = &e.outcomes {
        for outcome in outcomes.keys() {
            if !Outcome::ALL.iter().any(|o| o.name() == outcome) {
                let known: Vec<&str> = Outcome::ALL.iter().map(|o| o.name()).collect();
                bail!(
                    "{name}{}: expect.outcomes names {outcome:?}, which is no outcome; use {}",
                    at(outcome),
                    known.join(", ")
                );
            }
        }
    }
    let (kind, inapplicable): (&str, &[(&str, bool)]) = if scenario.keys.is_some() {
        (
            "[keys]",
            &[
                ("runs", e.runs.is_some()),
                ("key_rows", e.key_rows.is_some()),
                ("min_rate", e.min_rate.is_some()),
                ("max_rate", e.max_rate.is_some()),
                ("outcomes", e.outcomes.is_some()),
                ("wrong_replays", e.wrong_replays.is_some()),
            ],
        )
    } else {
        (
            "[race]",
            &[
                ("keys_used", e.keys_used.is_some()),
                ("merged_intents", e.merged_intents.is_some()),
            ],
        )
    };
    if let Some((key, _)) = inapplicable.iter().find(|(_, given)| *given) {
        bail!(
            "{name}{}: expect.{key} does not apply to a {kind} scenario",
            at(key)
        );
    }
    if (e.min_rate.is_some() || e.max_rate.is_some()) && e.xp_rows.is_none() {
        bail!(
            "{name}{}: a rate is the share of runs with `xp_rows` XP rows; give xp_rows too",
            at(if e.min_rate.is_some() {
                "min_rate"
            } else {
                "max_rate"
            })
        );
    }
    Ok(())
}

/// `:line:column` of the first place `key` is set (`key =`), or of a
/// section header when `key` is one, for messages.
fn place(text: &str, key: &str) -> Option<String> {
    for (number, line) in text.lines().enumerate() {
        let found = if key.starts_with('[') {
            line.find(key)
        } else {
            line.match_indices(key).map(|(i, _)| i).find(|&i| {
                let before = line[..i].chars().next_back();
                let after = line[i + key.len()..].trim_start();
                !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '"')
                    && after.starts_with('=')
            })
        };
        if let Some(column) = found {
            return Some(format!(
                ":{}:{}",
                number + 1,
                line[..column].chars().count() + 1
            ));
        }
    }
    None
}

/// Prefixes an error with the file it is about, unless it names it already.
fn in_file(name: &str, err: anyhow::Error) -> anyhow::Error {
    if err.to_string().starts_with(name) {
        err
    } else {
        anyhow::anyhow!("{name}: {err}")
    }
}

impl RaceSpec {
    /// The race settings, checked as `idem race` checks its flags.
    pub fn settings(&self) -> Result<RaceSettings> {
        self.settings_from(Origin::File("scenario"))
    }

    /// What the file says, for the one builder.
    pub fn input(&self) -> RaceInput {
        RaceInput {
            strategy: self.strategy,
            workers: self.workers.map(|n| n as u64),
            pool_size: self.pool_size.map(|n| n as u64),
            runner_holds_connection: self.runner_holds_connection,
            work_ms: self.work_ms,
            key: self.key.clone(),
            checkout_timeout_ms: self.checkout_timeout_ms,
            loser: self.loser,
            poll_ms: self.poll_ms,
            wait_timeout_ms: self.wait_timeout_ms,
            amounts: self.amounts.clone(),
            fingerprint: self.fingerprint,
            store: self.store,
            cache_max_entries: self.cache_max_entries,
            cache_max_age: None,
            cache_pressure: self.cache_pressure,
            crash: self.crash.map(|c| CrashPlan {
                worker: c.worker,
                at: c.at,
            }),
            kill_connection: self.kill_connection,
            lock_timeout_ms: self.lock_timeout_ms,
            on_failure: self.on_failure,
            fail_work: self.fail_work.map(|n| n as u64),
            recovery_retries: self.recovery_retries.map(|n| n as u64),
            http: self.http,
            threads: self.threads.map(|n| n as u64),
        }
    }

    /// The race settings, with messages naming the file's keys.
    pub fn settings_from(&self, origin: Origin) -> Result<RaceSettings> {
        let settings = self.input().build(origin)?;
        if let Some(schedule) = &self.schedule
            && schedule.iter().any(|w| !(1..=settings.workers).contains(w))
        {
            bail!("schedule names a worker that does not exist");
        }
        Ok(settings)
    }
}

impl KeysSpec {
    /// Checks the numbers against the bounds `idem keys` puts on its flags.
    pub fn checked(&self, origin: Origin) -> Result<()> {
        let given = [
            (&limits::CLIENTS, self.clients),
            (&limits::INTENTS, self.intents),
            (&limits::RETRIES, self.retries),
        ];
        for (limit, value) in given {
            if let Some(value) = value {
                limit.check(value as u64, origin)?;
            }
        }
        Ok(())
    }

    pub fn settings(&self) -> KeysSettings {
        KeysSettings {
            kind: self.kind,
            clients: self.clients.unwrap_or(limits::CLIENTS.default() as usize),
            intents: self.intents.unwrap_or(limits::INTENTS.default() as usize),
            retries: self.retries.unwrap_or(limits::RETRIES.default() as usize),
            crash_at: self.crash_at.unwrap_or(DEFAULT_CRASH_AT),
            fingerprint: self.fingerprint.unwrap_or(true),
            work: Duration::from_millis(DEFAULT_KEYS_WORK_MS),
        }
    }
}
