//! Races run from the library, for the tests that look inside a result: one race, or many on fresh tables.

use std::time::Duration;

use idem::db::Database;
use idem::race::options::RaceInput;
use idem::race::{Race, RaceResult, RaceSettings};
use idem::strategy::LoserPolicy;

/// A loser policy as the flags say it: fail-fast is the default, and says nothing.
pub fn loser_input(loser: LoserPolicy) -> RaceInput {
    let ms = |d: Duration| Some(d.as_millis() as u64);
    let (kind, poll_ms, wait_timeout_ms) = match loser {
        LoserPolicy::FailFast => (None, None, None),
        LoserPolicy::Poll {
            every,
            give_up_after,
        } => (Some(loser.kind()), ms(every), ms(give_up_after)),
        LoserPolicy::Block { give_up_after } => (Some(loser.kind()), None, ms(give_up_after)),
    };
    RaceInput::default().with(|r| {
        r.losers.loser = kind;
        r.losers.poll_ms = poll_ms;
        r.losers.wait_timeout_ms = wait_timeout_ms;
    })
}

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
