//! Lesson 5 measured: the same claim race on the key table and on the Solid-Cache-like store, side by side.

use std::time::Duration;

use anyhow::{Context, Result};
use serde::Serialize;

use super::Race;
use super::options::RaceInput;
use crate::db::Database;
use crate::limits::Origin;
use crate::store::StoreKind;
use crate::store::audit::audit;
use crate::store::cache::CacheLimits;
use crate::strategy::StrategyKind;

/// One store's measured figures.
#[derive(Debug, Clone, Serialize)]
pub struct StoreFigures {
    pub store: &'static str,
    pub workers: usize,
    pub runs: u64,
    pub cache_max_entries: u64,
    /// Races of `workers` on one key that made more than one XP row.
    pub runs_with_duplicates: u64,
    /// The retry after enough other cache writes to evict the claim.
    pub retry_answer: String,
    pub xp_rows_after_retry: u64,
    pub survives_eviction: bool,
    /// What an audit of the key finds.
    pub audit: String,
    pub expiry: &'static str,
    /// Mean time to answer one uncontended request (claim, work, complete).
    pub ms_per_request: f64,
}

/// What `measure` runs: the claim race's shape and the cache's limits.
#[derive(Debug, Clone, Copy)]
pub struct StoresPlan {
    pub(crate) runs: u64,
    pub(crate) workers: usize,
    pub(crate) work: Duration,
    pub(crate) cache: CacheLimits,
}

impl StoresPlan {
    /// How many races `measure` runs, for a progress bar.
    pub fn races(&self) -> u64 {
        2 * (self.runs + 51)
    }
}

/// Runs the four measurements on each store in turn, calling `tick` after
/// every race.
pub async fn measure(
    db: &Database,
    plan: StoresPlan,
    tick: impl Fn(),
) -> Result<Vec<StoreFigures>> {
    // Both stores race the strategy whose claims the cache can keep.
    let claims = StrategyKind::ALL
        .iter()
        .copied()
        .find(|k| k.spec().can.cache_claims)
        .context("no strategy keeps its claims in the cache")?;
    let mut rows = Vec::new();
    for store in [StoreKind::Table, StoreKind::Cache] {
        let input = RaceInput::with_strategy(claims).with(|r| {
            r.shape.workers = Some(plan.workers as u64);
            r.app.work_ms = Some(plan.work.as_millis() as u64);
            r.store.store = Some(store);
            r.store.cache_max_entries = Some(plan.cache.max_entries);
            r.store.cache_max_age = Some(plan.cache.max_age);
        });
        let settings = input.build(Origin::Flags)?;

        // 1. The claim race, many times.
        let race = Race::prepare(db, settings.clone()).await?;
        let mut runs_with_duplicates = 0;
        for run in 1..=plan.runs as usize {
            runs_with_duplicates += u64::from(race.run(run).await?.duplicates > 0);
            tick();
        }
        // 2. What is left to audit after the last race.
        let audit = what_is_left(db, store, settings.requests().key()).await?;

        // 3. Other traffic past the cache's limit, then the client's retry.
        let pressed = input
            .clone()
            .with(|r| {
                r.shape.workers = Some(1);
                r.eviction.cache_pressure =
                    Some(plan.cache.max_entries + plan.cache.max_entries / 10 + 1);
            })
            .build(Origin::Flags)?;
        let result = Race::prepare(db, pressed).await?.run(1).await?;
        tick();
        let retry = result.reports.iter().find(|w| w.retry).map(|w| w.outcome);
        let retry_answer = retry.map_or("—".into(), |o| format!("{} {}", o.status(), o.name()));

        // 4. The cost of one uncontended request.
        let ms_per_request = uncontended_ms(db, &input, &tick).await?;

        rows.push(StoreFigures {
            store: store.name(),
            workers: plan.workers,
            runs: plan.runs,
            cache_max_entries: plan.cache.max_entries,
            runs_with_duplicates,
            survives_eviction: result.xp_rows == 1,
            retry_answer,
            xp_rows_after_retry: result.xp_rows,
            audit,
            expiry: match store {
                StoreKind::Table => "kept until reaped (idem reap)",
                StoreKind::Cache => "in the value, read-time; FIFO eviction anyway",
                StoreKind::Redis => "a time to live on the key (PX); Redis forgets it",
            },
            ms_per_request,
        });
    }
    Ok(rows)
}

/// What an audit can still tell of `key` in `store` after the races.
async fn what_is_left(db: &Database, store: StoreKind, key: &str) -> Result<String> {
    let found = audit(db, key).await?;
    Ok(match store {
        StoreKind::Table => format!(
            "{} facts: who, when, fingerprint, response, time",
            found.table_facts()
        ),
        StoreKind::Cache => match &found.cache {
            Some(c) => format!("an opaque {}-byte value", c.byte_size),
            None => "nothing".into(),
        },
        StoreKind::Redis => "nothing in the database: the claim lived in Redis".into(),
    })
}

/// The mean time of one request alone, its checkout left out, over 50 races.
async fn uncontended_ms(db: &Database, input: &RaceInput, tick: &impl Fn()) -> Result<f64> {
    let alone = input.clone().with(|r| {
        r.shape.workers = Some(1);
        r.app.work_ms = Some(0);
    });
    let race = Race::prepare(db, alone.build(Origin::Flags)?).await?;
    let mut total = 0.0;
    for run in 1..=50 {
        let result = race.run(run).await?;
        total += result
            .reports
            .iter()
            .map(|w| w.answer_ms - w.checkout_wait_ms)
            .sum::<f64>();
        tick();
    }
    Ok(total / 50.0)
}
