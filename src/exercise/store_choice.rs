//! Lesson 5's exercise: where the claims live, judged by the cache traffic that follows an award.

use std::path::Path;

use anyhow::{Result, bail};
use serde::Deserialize;

use super::spec::Exercise;
use crate::challenge::Judge;
use crate::db::Database;
use crate::limits::Origin;
use crate::probe::conformance::Check;
use crate::race::options::RaceInput;
use crate::race::told::{Counted, Fact, Setting, Told, tell};
use crate::race::{Outcome, Race, RaceResult};
use crate::store::StoreKind;
use crate::strategy::StrategyKind;

/// The most a store file may hold.
pub const MAX_STORE_FILE_BYTES: u64 = 64 * 1024;

/// The largest cache the exercise takes: a real one has a memory budget,
/// and the check writes past whatever size is chosen.
pub const MAX_ENTRIES: u64 = 10_000;

/// The traffic of lesson 5's demonstration: sixty other writes.
const LESSON_PRESSURE: u64 = 60;

/// The cache the learner measures, lesson 5's: fifty entries.
const MEASURED_ENTRIES: u64 = 50;

/// Where the learner keeps the claims, and why: the figure that shows
/// what the cache does to a claim.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreChoice {
    pub store: StoreKind,
    pub cache_max_entries: Option<u64>,
    /// The fewest other cache writes after an award at which a cache of
    /// fifty entries has evicted the claim (the retry works again).
    pub cache_evicts_after: Option<u64>,
}

impl StoreChoice {
    /// The store file at `path`.
    pub fn load(path: &Path) -> Result<Self> {
        let name = path.display().to_string();
        let text = crate::files::read_text(path, MAX_STORE_FILE_BYTES, "store file")?;
        let choice: StoreChoice = crate::files::parse_toml(&name, &text)?;
        match (choice.store, choice.cache_max_entries) {
            (StoreKind::Table, Some(_)) => {
                bail!("{name}: cache_max_entries sizes a cache; the key table has no size")
            }
            (StoreKind::Cache, Some(n)) if !(1..=MAX_ENTRIES).contains(&n) => {
                bail!("{name}: cache_max_entries must be 1 to {MAX_ENTRIES}, not {n}")
            }
            _ if choice.cache_evicts_after.is_some_and(|n| n > MAX_ENTRIES) => {
                bail!("{name}: cache_evicts_after must be 0 to {MAX_ENTRIES}")
            }
            _ => Ok(choice),
        }
    }

    /// The cache's size: as chosen, or lesson 5's fifty.
    fn entries(&self) -> u64 {
        self.cache_max_entries.unwrap_or(50)
    }

    /// One award, then `pressure` other cache writes, then the retry.
    fn race(&self, pressure: u64) -> RaceInput {
        traffic(self.store, self.entries(), pressure)
    }
}

/// One award with its claim in `store` (a cache of `entries`), then
/// `pressure` other cache writes, then the client's retry.
fn traffic(store: StoreKind, entries: u64, pressure: u64) -> RaceInput {
    RaceInput::with_strategy(StrategyKind::ClaimWorkComplete).with(|r| {
        r.shape.workers = Some(1);
        r.store.store = Some(store);
        r.store.cache_max_entries = (store == StoreKind::Cache).then_some(entries);
        r.eviction.cache_pressure = Some(pressure);
    })
}

/// Runs the store file at `file` through lesson 5's traffic, then through
/// more traffic than its cache holds.
pub async fn judge(db: &Database, file: &Path) -> Result<Vec<Check>> {
    let choice = StoreChoice::load(file)?;
    let cases: [(u64, Judge); 2] = [
        (LESSON_PRESSURE, lesson_traffic),
        (choice.entries() + LESSON_PRESSURE, more_traffic),
    ];
    let mut checks = Vec::new();
    for (pressure, verdict) in cases {
        let settings = choice.race(pressure).build(Origin::Flags)?;
        let r = Race::prepare(db, settings).await?.run(1).await?;
        checks.push(verdict(&r));
    }
    checks.push(why(db, choice.cache_evicts_after).await?);
    Ok(checks)
}

/// The learner's figure for the cache: at `n` other writes a fifty-entry
/// cache has evicted the claim (the retry works again), and at one fewer
/// it has not (the retry replays). Two races, measured, not looked up.
async fn why(db: &Database, said: Option<u64>) -> Result<Check> {
    const CASE: &str = "why: the cache's eviction figure";
    const DEMANDS: &str = "cache_evicts_after: the fewest other writes after which a \
                           50-entry cache has lost the claim (at one fewer, the retry replays)";
    let Some(n) = said else {
        return Ok(Check::judged(
            CASE,
            DEMANDS,
            false,
            "no cache_evicts_after in the file".into(),
        ));
    };
    let mut runs = Vec::new();
    for pressure in [n.saturating_sub(1), n] {
        let settings =
            traffic(StoreKind::Cache, MEASURED_ENTRIES, pressure).build(Origin::Flags)?;
        runs.push(Race::prepare(db, settings).await?.run(1).await?);
    }
    let kept_before = n > 0 && replayed(&runs[0]);
    let lost_at = !replayed(&runs[1]);
    Ok(Check::judged(
        CASE,
        DEMANDS,
        kept_before && lost_at,
        format!(
            "after {} writes the retry {}; after {n}, it {}",
            n.saturating_sub(1),
            if replayed(&runs[0]) {
                "replayed"
            } else {
                "worked again"
            },
            if lost_at { "worked again" } else { "replayed" }
        ),
    ))
}

/// The retry was replayed: the claim was still there.
fn replayed(r: &RaceResult) -> bool {
    r.xp_rows == 1 && r.outcomes.get(&Outcome::Replayed) == Some(&1)
}

fn saw(r: &RaceResult) -> String {
    let mut told = Told::new();
    tell!(
        told,
        "{} other writes; {}; ",
        Fact::Setting(Setting::CachePressure, r.cache_pressure),
        Counted(Fact::XpRows(r.xp_rows), "XP row")
    );
    told.append(crate::challenge::outcomes_told(r));
    told.finish(r)
}

fn lesson_traffic(r: &RaceResult) -> Check {
    Check::judged(
        "the lesson's traffic",
        "one award, sixty other cache writes, then the retry: replayed, 1 XP row",
        replayed(r),
        saw(r),
    )
}

fn more_traffic(r: &RaceResult) -> Check {
    Check::judged(
        "more traffic than you sized for",
        "the same with more writes than the cache holds: the retry still replayed",
        replayed(r),
        saw(r),
    )
}

/// Lesson 5's exercise.
pub const EXERCISE: Exercise = Exercise {
    lesson: 5,
    file: "5-the-store.toml",
    goal: "the client's retry is replayed after an award, whatever cache traffic the rest of the app sends",
    try_it: "idem race -s claim-work-complete --workers 1 --store cache \
             --cache-max-entries 50 --cache-pressure 60",
    start: include_str!("../../exercises/5-the-store.toml"),
    solution: include_str!("../../exercises/solutions/5-the-store.toml"),
    hints: [
        "Race it with --json and look at the retry: it found no claim. Who removed it?",
        "The cache evicted it to make room for other entries. Race it again with \
         --cache-pressure at 40, then nearer 50: the claim goes once the other writes fill \
         the cache's entries. A bigger cache_max_entries passes the lesson's sixty writes; \
         try the check's second case with it.",
        "Any size is a bet on the traffic. store = \"table\" keeps claims in the key \
         table, which evicts nothing.",
    ],
    why: "A cache is allowed to forget, and what it forgets depends on traffic the guard \
          does not control, so a claim kept there is lost when the cache is busy. The key \
          table keeps a claim until a reaper deletes it, after a retention you chose.",
    read: |path| StoreChoice::load(path).map(drop),
    judge: |db, path| Box::pin(judge(db, path)),
    engine: crate::race::engine::Engine::Postgres,
    mariadb: super::spec::NOT_YET,
};
