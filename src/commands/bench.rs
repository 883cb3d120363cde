//! `idem bench`: what the disposable cluster and the races cost, as figures to rerun, not timed tests.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Result;
use serde::Serialize;

use crate::cli::BenchArgs;
use crate::db::template::private_dir;
use crate::db::{Cluster, ClusterOptions, Database};
use crate::race::{Race, RaceSettings};
use crate::report::{self, emit, emit_json};
use crate::strategy::StrategyKind;

/// How much work each section does.
pub struct Plan {
    pub json: bool,
    pub quick: bool,
    pub cluster: ClusterOptions,
    pub cold_samples: usize,
    pub warm_samples: usize,
    pub races: usize,
    /// (workers, pool size) for the scale section.
    pub scale: Vec<(usize, usize)>,
}

pub fn plan(args: &BenchArgs) -> Result<Plan> {
    let connect = args.connect.options();
    Ok(Plan {
        json: args.json,
        quick: args.quick,
        cluster: connect.cluster,
        cold_samples: if args.quick { 1 } else { 3 },
        warm_samples: if args.quick { 3 } else { 10 },
        races: if args.quick { 50 } else { 1000 },
        scale: if args.quick {
            vec![(1000, 50)]
        } else {
            vec![(1000, 50), (10_000, 90)]
        },
    })
}

/// Every figure one `idem bench` run measured.
#[derive(Debug, Serialize)]
pub struct BenchReport {
    pub quick: bool,
    pub cores: usize,
    pub postgres: String,
    pub cluster: Option<ClusterFigures>,
    pub race_rate: Vec<RaceRate>,
    pub scale: Vec<ScaleFigure>,
    /// The idem process's peak resident memory over the whole benchmark.
    pub peak_rss_mb: f64,
}

/// Start and stop of a disposable cluster, medians in ms.
#[derive(Debug, Serialize)]
pub struct ClusterFigures {
    /// A start with no template: initdb, copy, start, ready.
    pub cold_start_ms: f64,
    /// A start from the cached template: copy, start, ready.
    pub warm_start_ms: f64,
    pub stop_ms: f64,
    pub cold_samples: usize,
    pub warm_samples: usize,
}

/// Default races, back to back, with `--work-ms 0`.
#[derive(Debug, Serialize)]
pub struct RaceRate {
    pub strategy: StrategyKind,
    pub races: usize,
    pub total_s: f64,
    pub races_per_s: f64,
    /// Including the table reset and the counts.
    pub ms_per_race: f64,
    pub xp_rows: BTreeMap<u64, u64>,
}

/// Many workers on one key.
#[derive(Debug, Serialize)]
pub struct ScaleFigure {
    pub strategy: StrategyKind,
    pub workers: usize,
    pub pool_size: usize,
    pub wall_ms: f64,
    pub xp_rows: u64,
    pub expected_xp_rows: u64,
    pub checkout_timeouts: u64,
}

pub async fn execute(plan: Plan, db: &Database) -> Result<()> {
    let steps = (plan.cold_samples + plan.warm_samples) as u64
        + 4 * plan.races as u64
        + 3 * plan.scale.len() as u64;
    let progress = report::progress::bar(steps, plan.json, "steps");

    let cluster = {
        let opts = plan.cluster.clone();
        let (cold, warm, bar) = (plan.cold_samples, plan.warm_samples, progress.clone());
        tokio::task::spawn_blocking(move || cluster_figures(&opts, cold, warm, || bar.inc(1)))
            .await??
    };

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
            let result = race.run(run).await?;
            *xp_rows.entry(result.xp_rows).or_default() += 1;
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
                checkout_timeouts: result.count("checkout_timeout"),
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
        scale,
        peak_rss_mb: peak_rss_mb(),
    };
    if plan.json {
        emit_json(&bench)
    } else {
        emit(&report::bench::render(&bench))
    }
}

/// Starts and stops clusters: cold ones from an empty template cache, warm
/// ones from the cached template. `None` when there are no server binaries.
fn cluster_figures(
    opts: &ClusterOptions,
    cold_samples: usize,
    warm_samples: usize,
    tick: impl Fn(),
) -> Result<Option<ClusterFigures>> {
    if crate::db::binaries::PgBinaries::locate(opts.pg_bin.as_deref()).is_err() {
        return Ok(None);
    }
    let scratch = private_dir(&std::env::temp_dir(), "idem-bench")?;
    let measured = (|| -> Result<ClusterFigures> {
        let mut cold = Vec::new();
        let mut stops = Vec::new();
        for sample in 0..cold_samples {
            let opts = ClusterOptions {
                template_cache: Some(scratch.join(format!("cache-{sample}"))),
                ..opts.clone()
            };
            let began = Instant::now();
            let cluster = Cluster::start(&opts)?;
            cold.push(began.elapsed());
            stops.push(cluster.stop()?);
            tick();
        }
        let mut warm = Vec::new();
        for _ in 0..warm_samples {
            let began = Instant::now();
            let cluster = Cluster::start(opts)?;
            warm.push(began.elapsed());
            stops.push(cluster.stop()?);
            tick();
        }
        Ok(ClusterFigures {
            cold_start_ms: median_ms(&mut cold),
            warm_start_ms: median_ms(&mut warm),
            stop_ms: median_ms(&mut stops),
            cold_samples,
            warm_samples,
        })
    })();
    let _ = std::fs::remove_dir_all(&scratch);
    measured.map(Some)
}

fn median_ms(samples: &mut [Duration]) -> f64 {
    samples.sort();
    samples
        .get(samples.len() / 2)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// The process's peak resident set size so far, in MB.
fn peak_rss_mb() -> f64 {
    // SAFETY: an all-zero rusage is valid for getrusage to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0.0;
    }
    // Linux reports kilobytes.
    usage.ru_maxrss as f64 / 1024.0
}
