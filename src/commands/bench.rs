//! `idem bench`: what the cluster, the races and the guards cost, against the database's own floor.

use anyhow::Result;

use crate::bench::throughput::{self};
use crate::bench::{self as measure, BenchReport, GUARDS, peak_rss_mb};
use crate::cli::BenchArgs;
use crate::db::{ClusterOptions, Database};
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

pub async fn execute(plan: Plan, db: &Database) -> Result<()> {
    let steps = (plan.cold_samples + plan.warm_samples) as u64
        + (StrategyKind::ALL.len() * plan.races) as u64
        + (plan.throughput.len() * (GUARDS.len() + 1)) as u64
        + GUARDS.len() as u64
        + 1
        + 3 * plan.scale.len() as u64;
    let progress = plan.out.progress(steps, "steps");
    let tick = || progress.inc(1);

    let cluster = {
        let opts = plan.cluster.clone();
        let (cold, warm, bar) = (plan.cold_samples, plan.warm_samples, progress.clone());
        tokio::task::spawn_blocking(move || {
            measure::cluster::measure(&opts, cold, warm, || bar.inc(1))
        })
        .await??
    };

    let race_rate = measure::races::race_rate(db, plan.races, tick).await?;
    let throughput = throughput::against_raw(db, &plan.throughput, plan.requests, tick).await?;
    let pgbench = measure::pgbench::measure(db, 5, plan.pgbench_seconds).await?;
    let over_http = measure::wire::guard_over_http(db, 5, 5, plan.requests).await?;
    tick();
    let hot_key = measure::races::hot_key(db, plan.hot_key_requests, tick).await?;
    let scale = measure::races::scale(db, &plan.scale, tick).await?;
    progress.finish_and_clear();

    let bench = BenchReport {
        quick: plan.quick,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        postgres: db.server_version().await?,
        cluster,
        race_rate,
        throughput,
        pgbench,
        over_http,
        hot_key,
        scale,
        peak_rss_mb: peak_rss_mb(),
    };
    plan.out.record(&bench, report::bench::render)
}
