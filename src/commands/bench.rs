//! `idem bench`: what the cluster, the races and the guards cost, against the database's own floor.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::bench::throughput::{self, Handler};
use crate::bench::{self as measure, BenchReport, HotKey, RaceRate, ScaleFigure, peak_rss_mb};
use crate::cli::BenchArgs;
use crate::db::{ClusterOptions, Database};
use crate::race::Outcome;
use crate::race::{Race, RaceSettings};
use crate::report::losers::percentile;
use crate::report::{self, Output};
use crate::strategy::StrategyKind;

/// How much work each section does.
pub struct Plan {
    pub out: Output,
    pub quick: bool,
    pub cluster: ClusterOptions,
    pub cold_samples: usize,
    pub warm_samples: usize,
    pub races: usize,
    /// (workers, pool size) pairs for the throughput section.
    pub throughput: Vec<(usize, usize)>,
    pub requests: usize,
    pub hot_key_requests: usize,
    pub pgbench_seconds: u64,
    /// (workers, pool size) for the scale section.
    pub scale: Vec<(usize, usize)>,
}

pub fn plan(args: &BenchArgs) -> Result<Plan> {
    let quick = args.quick;
    Ok(Plan {
        out: Output::from_json_flag(args.json),
        quick,
        cluster: args.connect.options().cluster,
        cold_samples: if quick { 1 } else { 3 },
        warm_samples: if quick { 3 } else { 10 },
        races: if quick { 50 } else { 1000 },
        throughput: vec![(5, 5), (50, 50)],
        requests: if quick { 1000 } else { 20_000 },
        hot_key_requests: if quick { 200 } else { 1000 },
        pgbench_seconds: if quick { 1 } else { 5 },
        scale: if quick {
            vec![(1000, 50)]
        } else {
            vec![(1000, 50), (10_000, 90)]
        },
    })
}

/// The strategies whose cost per request is measured.
const GUARDS: [StrategyKind; 3] = [
    StrategyKind::InsertUnique,
    StrategyKind::ClaimWorkComplete,
    StrategyKind::Guard,
];

pub async fn execute(plan: Plan, db: &Database) -> Result<()> {
    let steps = (plan.cold_samples + plan.warm_samples) as u64
        + (StrategyKind::ALL.len() * plan.races) as u64
        + (plan.throughput.len() * (GUARDS.len() + 1)) as u64
        + GUARDS.len() as u64
        + 3 * plan.scale.len() as u64;
    let progress = plan.out.progress(steps, "steps");

    // 1. The disposable cluster.
    let cluster = {
        let opts = plan.cluster.clone();
        let (cold, warm, bar) = (plan.cold_samples, plan.warm_samples, progress.clone());
        tokio::task::spawn_blocking(move || {
            measure::cluster::measure(&opts, cold, warm, || bar.inc(1))
        })
        .await??
    };

    // 2. Default races back to back.
    let mut race_rate = Vec::new();
    for strategy in StrategyKind::ALL {
        let settings = RaceSettings {
            strategy,
            work: Duration::ZERO,
            ..RaceSettings::default()
        };
        let race = Race::prepare(db, settings).await?;
        let mut xp_rows = BTreeMap::new();
        let began = Instant::now();
        for run in 1..=plan.races {
            *xp_rows.entry(race.run(run).await?.xp_rows).or_default() += 1;
            progress.inc(1);
        }
        let total = began.elapsed().as_secs_f64();
        race_rate.push(RaceRate {
            strategy,
            races: plan.races,
            total_s: total,
            races_per_s: plan.races as f64 / total,
            ms_per_race: total * 1000.0 / plan.races as f64,
            xp_rows,
        });
    }

    // 3. Throughput on distinct keys, each against the raw floor on the same pool.
    let mut throughput = Vec::new();
    for &(workers, pool) in &plan.throughput {
        let raw =
            throughput::measure(db, "raw", Handler::Raw, workers, pool, plan.requests).await?;
        progress.inc(1);
        for strategy in GUARDS {
            let settings = RaceSettings {
                strategy,
                ..RaceSettings::default()
            };
            let handler = Handler::Strategy(
                Arc::from(settings.build_strategy()),
                strategy.uses_key_table(),
            );
            let mut figure =
                throughput::measure(db, strategy.name(), handler, workers, pool, plan.requests)
                    .await?;
            figure.ratio_to_raw = Some(figure.per_second / raw.per_second);
            throughput.push(figure);
            progress.inc(1);
        }
        throughput.insert(throughput.len() - GUARDS.len(), raw);
    }
    let pgbench = measure::pgbench::measure(db, 5, plan.pgbench_seconds).await?;

    // 4. Hot key: every request on one key.
    let mut hot_key = Vec::new();
    for strategy in GUARDS {
        let settings = RaceSettings {
            strategy,
            workers: plan.hot_key_requests,
            pool_size: 50,
            work: Duration::ZERO,
            ..RaceSettings::default()
        };
        let result = Race::prepare(db, settings).await?.run(1).await?;
        let mut latencies: Vec<f64> = result.reports.iter().map(|w| w.answer_ms).collect();
        hot_key.push(HotKey {
            strategy,
            requests: plan.hot_key_requests,
            pool_size: 50,
            p50_ms: percentile(&mut latencies, 0.5),
            p99_ms: percentile(&mut latencies, 0.99),
            xp_rows: result.xp_rows,
        });
        progress.inc(1);
    }

    // 5. Scale: thousands of workers on one key.
    let mut scale = Vec::new();
    for &(workers, pool_size) in &plan.scale {
        for strategy in [
            StrategyKind::None,
            StrategyKind::ClaimWorkComplete,
            StrategyKind::InsertUnique,
        ] {
            let settings = RaceSettings {
                strategy,
                workers,
                pool_size,
                work: Duration::ZERO,
                ..RaceSettings::default()
            };
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
            progress.inc(1);
        }
    }
    progress.finish_and_clear();

    let bench = BenchReport {
        quick: plan.quick,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        postgres: db.server_version().await?,
        cluster,
        race_rate,
        throughput,
        pgbench,
        hot_key,
        scale,
        peak_rss_mb: peak_rss_mb(),
    };
    plan.out.record(&bench, report::bench::render)
}
