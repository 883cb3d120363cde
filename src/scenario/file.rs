//! The TOML shape of a scenario file, parsed strictly: an unknown key is an error.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{Result, bail};
use serde::Deserialize;

use crate::keys::{CrashPoint, DEFAULT_CRASH_AT, DEFAULT_KEYS_WORK_MS, KeyKind, KeysSettings};
use crate::limits::{self, Origin};
use crate::race::Outcome;
use crate::race::options::RaceInput;

/// One demonstration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub title: String,
    pub lesson: u8,
    /// The engine its race runs on: PostgreSQL unless it says `mariadb`.
    #[serde(default)]
    pub engine: crate::race::engine::Engine,
    /// What it shows, in a few sentences.
    pub explain: String,
    /// A race (most lessons)...
    pub race: Option<RaceInput>,
    /// ...or clients with a key design (lesson 6)...
    pub keys: Option<KeysSpec>,
    /// ...or two clients through a real PgBouncer (`idem pooler`'s findings)...
    pub pooler: Option<PoolerSpec>,
    /// ...or a race's requests under every interleaving of their steps
    /// (`idem explore`): the `[race]` keys, two workers unless it says.
    pub explore: Option<RaceInput>,
    pub expect: Expect,
    /// The file it came from, for messages.
    #[serde(skip)]
    pub source: String,
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

/// One of `idem pooler`'s findings, by name (`setting`, `advisory_lock`,
/// `prepared_statement`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolerSpec {
    pub finding: String,
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
    /// Times the work called the award service, retries included.
    pub service_calls: Option<u64>,
    /// For a probabilistic call count: the least, or the most, share of runs
    /// whose service calls must equal `service_calls`.
    pub service_calls_min_rate: Option<f64>,
    pub service_calls_max_rate: Option<f64>,
    /// On MariaDB: the server errors every run meets, by number (1213,
    /// 1062), and no other.
    pub server_errors: Option<Vec<u16>>,
    /// On a Galera cluster: its size and status after every run, as node 1
    /// sees them (`{ size = 2, status = "Primary" }` once a node is killed).
    pub cluster_after: Option<crate::race::mariadb::cluster::After>,
    /// Lesson 10: whether the failover lost the key a 201 was answered for.
    pub acknowledged_key_lost: Option<bool>,
    /// Key-design simulations.
    pub keys_used: Option<usize>,
    pub merged_intents: Option<u64>,
    /// Pooler findings: the runs in which the client through PgBouncer saw
    /// other than the client straight to PostgreSQL.
    pub broken_runs: Option<u64>,
    /// Explorations: how many interleavings there are, and in how many the
    /// guard held and failed.
    pub interleavings: Option<u64>,
    pub held: Option<u64>,
    pub failing: Option<u64>,
}

/// The most of a TOML error's message shown: it may quote the value it
/// refused, which can be as long as the file.
const MAX_MESSAGE_CHARS: usize = 200;

/// `text`, cut to `most` characters with an ellipsis if it is longer.
fn cut(text: &str, most: usize) -> String {
    match text.char_indices().nth(most) {
        Some((at, _)) => format!("{}… (cut)", &text[..at]),
        None => text.to_owned(),
    }
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
            cut(&err.message().trim().replace('\n', " "), MAX_MESSAGE_CHARS)
        )
    })?;
    scenario.source = name.clone();
    beside_the_file(&mut scenario, path);
    one_section(&scenario, &name)?;
    if !(1..=11).contains(&scenario.lesson) {
        bail!("{name}: lesson must be 1 to 11, not {}", scenario.lesson);
    }
    let e = &scenario.expect;
    let rates = [
        e.min_rate,
        e.max_rate,
        e.service_calls_min_rate,
        e.service_calls_max_rate,
    ];
    if rates
        .into_iter()
        .flatten()
        .any(|r| !(0.0..=1.0).contains(&r))
    {
        bail!("{name}: the rates of expect (min_rate, max_rate, ...) must be between 0 and 1");
    }
    // A number out of its bound is named where it stands in the file.
    let in_file = |err: anyhow::Error| {
        let at = err
            .downcast_ref::<limits::OutOfBounds>()
            .and_then(|o| place(text, o.key.rsplit('.').next().unwrap_or(o.key)));
        anyhow::anyhow!("{name}{}: {err}", at.unwrap_or_default())
    };
    if let Some(runs) = scenario.expect.runs {
        limits::RUNS.check(runs, Origin::File).map_err(in_file)?;
    }
    match (&scenario.race, scenario.engine) {
        (Some(race), crate::race::engine::Engine::Postgres) => {
            race.build(Origin::File).map_err(in_file)?;
        }
        (Some(race), crate::race::engine::Engine::Mariadb) => {
            let race = crate::race::mariadb::MariadbRace::from_input(race, Origin::File);
            if race.map_err(in_file)?.cluster.nodes < 2 && scenario.expect.cluster_after.is_some() {
                bail!(
                    "{name}{}: expect.cluster_after is a Galera cluster's; give race.nodes = 3",
                    place(text, "cluster_after").unwrap_or_default()
                );
            }
        }
        (None, crate::race::engine::Engine::Mariadb) => {
            bail!("{name}: engine = \"mariadb\" runs a [race] only, so far")
        }
        (None, crate::race::engine::Engine::Postgres) => {}
    }
    if let Some(keys) = &scenario.keys {
        keys.checked(Origin::File).map_err(in_file)?;
    }
    if let Some(explore) = &scenario.explore {
        crate::explore::settings(explore).map_err(in_file)?;
    }
    if let Some(pooler) = &scenario.pooler
        && !crate::pooler::FINDINGS.contains(&pooler.finding.as_str())
    {
        bail!(
            "{name}{}: pooler.finding {:?} is none of idem pooler's findings; use {}",
            place(text, "finding").unwrap_or_default(),
            pooler.finding,
            crate::pooler::FINDINGS.join(", ")
        );
    }
    check_expectations(&scenario, &name, text)?;
    Ok(scenario)
}

/// A guard file the scenario names sits beside it, wherever it is run from.
fn beside_the_file(scenario: &mut Scenario, path: &Path) {
    for race in [&mut scenario.race, &mut scenario.explore]
        .into_iter()
        .flatten()
    {
        if let Some(file) = &race.strategy.strategy_file
            && file.is_relative()
        {
            let beside = path.parent().unwrap_or(Path::new(""));
            race.strategy.strategy_file = Some(beside.join(file));
        }
    }
}

/// A scenario has one section of [race], [keys], [pooler] and [explore].
fn one_section(scenario: &Scenario, name: &str) -> Result<()> {
    let sections = [
        scenario.race.is_some(),
        scenario.keys.is_some(),
        scenario.pooler.is_some(),
        scenario.explore.is_some(),
    ];
    match sections.iter().filter(|s| **s).count() {
        0 => {
            bail!("{name}: a scenario needs a [race], a [keys], a [pooler] or an [explore] section")
        }
        1 => Ok(()),
        _ => {
            bail!("{name}: a scenario has one of [race], [keys], [pooler] and [explore], not more")
        }
    }
}

/// The figures a `[race]` scenario produces.
const RACE_FIGURES: &[&str] = &[
    "runs",
    "key_rows",
    "xp_rows",
    "duplicates",
    "min_rate",
    "max_rate",
    "outcomes",
    "wrong_replays",
    "service_calls",
    "service_calls_min_rate",
    "service_calls_max_rate",
];

/// The figures a `[race]` on MariaDB produces.
const MARIADB_RACE_FIGURES: &[&str] = &[
    "runs",
    "key_rows",
    "xp_rows",
    "min_rate",
    "max_rate",
    "outcomes",
    "service_calls",
    "service_calls_min_rate",
    "service_calls_max_rate",
    "server_errors",
    "cluster_after",
];

/// The figures a `[keys]` simulation produces.
const KEYS_FIGURES: &[&str] = &["xp_rows", "duplicates", "keys_used", "merged_intents"];

/// The figures a `[pooler]` finding produces.
const POOLER_FIGURES: &[&str] = &["runs", "broken_runs"];

/// The figures an `[explore]` produces: none depends on timing, so there
/// are no runs and no rates.
const EXPLORE_FIGURES: &[&str] = &["interleavings", "held", "failing"];

/// Settings of a run rather than figures it checks.
const NOT_CHECKS: &[&str] = &[
    "runs",
    "min_rate",
    "max_rate",
    "service_calls_min_rate",
    "service_calls_max_rate",
];

impl Expect {
    /// Every key given, in the order of the struct; an empty outcome table
    /// is given but checks nothing.
    fn given(&self) -> Vec<&'static str> {
        [
            ("runs", self.runs.is_some()),
            ("key_rows", self.key_rows.is_some()),
            ("xp_rows", self.xp_rows.is_some()),
            ("min_rate", self.min_rate.is_some()),
            ("max_rate", self.max_rate.is_some()),
            ("duplicates", self.duplicates.is_some()),
            ("outcomes", self.outcomes.is_some()),
            ("wrong_replays", self.wrong_replays.is_some()),
            ("service_calls", self.service_calls.is_some()),
            (
                "service_calls_min_rate",
                self.service_calls_min_rate.is_some(),
            ),
            (
                "service_calls_max_rate",
                self.service_calls_max_rate.is_some(),
            ),
            ("keys_used", self.keys_used.is_some()),
            ("merged_intents", self.merged_intents.is_some()),
            ("broken_runs", self.broken_runs.is_some()),
            ("interleavings", self.interleavings.is_some()),
            ("held", self.held.is_some()),
            ("failing", self.failing.is_some()),
            ("server_errors", self.server_errors.is_some()),
            ("cluster_after", self.cluster_after.is_some()),
        ]
        .into_iter()
        .filter_map(|(key, given)| given.then_some(key))
        .collect()
    }

    /// Whether any given key checks a figure.
    fn checks_something(&self) -> bool {
        let empty_outcomes = self.outcomes.as_ref().is_some_and(|o| o.is_empty());
        self.given()
            .iter()
            .any(|key| !NOT_CHECKS.contains(key) && (*key != "outcomes" || !empty_outcomes))
    }
}

impl Scenario {
    /// The scenario's kind as its file names it, and the figures it produces.
    fn kind_and_figures(&self) -> (&'static str, &'static [&'static str]) {
        match (&self.pooler, &self.keys, &self.explore) {
            (Some(_), ..) => ("[pooler]", POOLER_FIGURES),
            (None, Some(_), _) => ("[keys]", KEYS_FIGURES),
            (None, None, Some(_)) => ("[explore]", EXPLORE_FIGURES),
            (None, None, None) if self.engine == crate::race::engine::Engine::Mariadb => {
                ("[race] on MariaDB", MARIADB_RACE_FIGURES)
            }
            (None, None, None) => ("[race]", RACE_FIGURES),
        }
    }
}

/// Refuses an `[expect]` that checks nothing, names an outcome idem does
/// not have, or asks for a figure this kind of scenario does not produce.
fn check_expectations(scenario: &Scenario, name: &str, text: &str) -> Result<()> {
    let e = &scenario.expect;
    let at = |key: &str| place(text, key).unwrap_or_default();
    if !e.checks_something() {
        bail!(
            "{name}{}: [expect] checks nothing; give at least one figure (xp_rows, key_rows, ...)",
            place(text, "[expect]").unwrap_or_default()
        );
    }
    let known = || Outcome::ALL.iter().map(|o| o.name()).collect::<Vec<_>>();
    if let Some(outcome) = e
        .outcomes
        .iter()
        .flat_map(|o| o.keys())
        .find(|o| !known().contains(&o.as_str()))
    {
        bail!(
            "{name}{}: expect.outcomes names {outcome:?}, which is no outcome; use {}",
            at(outcome),
            known().join(", ")
        );
    }
    let (kind, figures) = scenario.kind_and_figures();
    if let Some(key) = e.given().into_iter().find(|key| !figures.contains(key)) {
        bail!(
            "{name}{}: expect.{key} does not apply to a {kind} scenario",
            at(key)
        );
    }
    if let Some(rate) = ["min_rate", "max_rate"]
        .into_iter()
        .find(|r| e.given().contains(r))
        && e.xp_rows.is_none()
    {
        bail!(
            "{name}{}: a rate is the share of runs with `xp_rows` XP rows; give xp_rows too",
            at(rate)
        );
    }
    let calls_rated = e.service_calls_min_rate.is_some() || e.service_calls_max_rate.is_some();
    if calls_rated && e.service_calls.is_none() {
        bail!(
            "{name}{}: a service-call rate is the share of runs with `service_calls` calls; \
             give service_calls too",
            at("service_calls_")
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
            template: None,
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
