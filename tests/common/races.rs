//! Races run from the library, for the tests that look inside a result: one race, or many on fresh tables.

use idem::db::Database;
use idem::race::{Race, RaceResult, RaceSettings};

/// One race with these settings.
pub async fn race(db: &Database, settings: RaceSettings) -> RaceResult {
    Race::prepare(db, settings)
        .await
        .unwrap()
        .run(1)
        .await
        .unwrap()
}

/// `runs` races with these settings, each on fresh tables.
pub async fn races(db: &Database, settings: RaceSettings, runs: usize) -> Vec<RaceResult> {
    let race = Race::prepare(db, settings).await.unwrap();
    let mut results = Vec::with_capacity(runs);
    for run in 1..=runs {
        results.push(race.run(run).await.unwrap());
    }
    results
}
