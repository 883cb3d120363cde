//! Races measured back to back, all on one key at once, and at scale: how fast idem runs the course's races.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::Result;

use super::meter::GUARDS;
use super::{HotKey, RaceRate, ScaleFigure};
use crate::db::Database;
use crate::limits::Origin;
use crate::race::options::RaceInput;
use crate::race::{Outcome, Race, percentile};
use crate::strategy::StrategyKind;

/// `races` default races of every strategy back to back, with no work time.
pub async fn race_rate(db: &Database, races: usize, tick: impl Fn()) -> Result<Vec<RaceRate>> {
    let mut race_rate = Vec::new();
    for strategy in StrategyKind::course() {
        let settings = RaceInput::with_strategy(strategy)
            .with(|r| r.app.work_ms = Some(0))
            .build(Origin::Flags)?;
        let race = Race::prepare(db, settings).await?;
        let mut xp_rows = BTreeMap::new();
        let began = Instant::now();
        for run in 1..=races {
            *xp_rows.entry(race.run(run).await?.xp_rows).or_default() += 1;
            tick();
        }
        let total = began.elapsed().as_secs_f64();
        race_rate.push(RaceRate {
            strategy,
            races,
            total_s: total,
            races_per_s: races as f64 / total,
            ms_per_race: total * 1000.0 / races as f64,
            xp_rows,
        });
    }
    Ok(race_rate)
}

/// `requests` requests on one key at once, pool 50, for each guard.
pub async fn hot_key(db: &Database, requests: usize, tick: impl Fn()) -> Result<Vec<HotKey>> {
    let mut hot_key = Vec::new();
    for strategy in GUARDS {
        let settings = RaceInput::with_strategy(strategy)
            .with(|r| {
                r.shape.workers = Some(requests as u64);
                r.app.pool_size = Some(50);
                r.app.work_ms = Some(0);
            })
            .build(Origin::Flags)?;
        let result = Race::prepare(db, settings).await?.run(1).await?;
        let mut latencies: Vec<f64> = result.reports.iter().map(|w| w.answer_ms).collect();
        hot_key.push(HotKey {
            strategy,
            requests,
            pool_size: 50,
            p50_ms: percentile(&mut latencies, 0.5),
            p99_ms: percentile(&mut latencies, 0.99),
            xp_rows: result.xp_rows,
        });
        tick();
    }
    Ok(hot_key)
}

/// One race of `workers` on a pool of `pool_size`, per shape and strategy.
pub async fn scale(
    db: &Database,
    shapes: &[(usize, usize)],
    tick: impl Fn(),
) -> Result<Vec<ScaleFigure>> {
    let mut scale = Vec::new();
    for &(workers, pool_size) in shapes {
        for strategy in [
            StrategyKind::None,
            StrategyKind::ClaimWorkComplete,
            StrategyKind::InsertUnique,
        ] {
            let settings = RaceInput::with_strategy(strategy)
                .with(|r| {
                    r.shape.workers = Some(workers as u64);
                    r.app.pool_size = Some(pool_size as u64);
                    r.app.work_ms = Some(0);
                })
                .build(Origin::Flags)?;
            let race = Race::prepare(db, settings).await?;
            let began = Instant::now();
            let result = race.run(1).await?;
            scale.push(ScaleFigure {
                strategy,
                workers,
                pool_size,
                wall_ms: began.elapsed().as_secs_f64() * 1000.0,
                xp_rows: result.xp_rows,
                expected_xp_rows: race.settings.lesson_figure(),
                checkout_timeouts: result.count(Outcome::CheckoutTimeout),
            });
            tick();
        }
    }
    Ok(scale)
}
