//! `idem bench`: what the cluster, the races and the guards cost, against the database's own floor.

use anyhow::{Result, bail};

use super::command::OnDatabase;
use crate::bench::meter::{GUARDS, peak_rss_mb};
use crate::bench::throughput::{self};
use crate::bench::{self as measure, BenchReport, races};
use clap::ValueEnum;

use crate::cli::measure::{BenchArgs, BenchSection};
use crate::db::{Backend, ClusterOptions, ConnectOptions, Database, pooled};
use crate::report::{self, Output};
use crate::strategy::StrategyKind;

/// A section's figures if it is `on`; its future is not polled otherwise.
async fn when<T>(on: bool, measure: impl Future<Output = Result<T>>) -> Result<Option<T>> {
    match on {
        true => measure.await.map(Some),
        false => Ok(None),
    }
}

/// `measure`, then a step of the progress bar.
async fn ticking<T>(tick: impl Fn(), measure: impl Future<Output = Result<T>>) -> Result<T> {
    let figures = measure.await?;
    tick();
    Ok(figures)
}

/// The floors are PostgreSQL's own cheapest paths (statements prepared
/// once per connection, pgbench with a search_path), which a pooler in
/// transaction mode does not pass, and a pooler would be measured too.
async fn refuse_a_pooler(db: &Database) -> Result<()> {
    if let Backend::Server { .. } = &db.backend {
        let pooled = pooled::look(db.workers_config()).await;
        if pooled.seen() {
            bail!(
                "idem bench measures PostgreSQL itself, and a pooler stands in front of this \
                 server ({}): give the URL of PostgreSQL itself",
                pooled.describe()
            );
        }
    }
    Ok(())
}

/// How much work each section does.
pub struct Plan {
    /// The database it runs against.
    db: ConnectOptions,
    pub(crate) out: Output,
    quick: bool,
    /// The sections to measure.
    sections: Vec<BenchSection>,
    cluster: ClusterOptions,
    cold_samples: usize,
    warm_samples: usize,
    races: usize,
    /// Whole `idem race` processes timed.
    processes: usize,
    /// Interleaved rounds of the client section.
    client_rounds: usize,
    /// (workers, pool size) pairs for the throughput section.
    throughput: Vec<(usize, usize)>,
    requests: usize,
    hot_key_requests: usize,
    pgbench_seconds: u64,
    /// (workers, pool size) for the scale section.
    scale: Vec<(usize, usize)>,
    /// Requests per replication mode.
    replicated: usize,
    /// The engines section's samples.
    engines: measure::engines::Samples,
    mariadb_bin: Option<std::path::PathBuf>,
}

/// Every section, in the order the report shows them.
const ALL: [BenchSection; 12] = [
    BenchSection::Cluster,
    BenchSection::Races,
    BenchSection::Process,
    BenchSection::Client,
    BenchSection::Throughput,
    BenchSection::Wire,
    BenchSection::Release,
    BenchSection::HotKey,
    BenchSection::Scale,
    BenchSection::Replication,
    BenchSection::Engines,
    BenchSection::Stores,
];

pub fn plan(args: &BenchArgs) -> Result<Plan> {
    let quick = args.quick;
    let sections = match args.only.is_empty() {
        true => ALL.to_vec(),
        false => ALL.into_iter().filter(|s| args.only.contains(s)).collect(),
    };
    Ok(Plan {
        db: args.connect.options(),
        out: Output::from_json_flag(args.json),
        quick,
        sections,
        cluster: args.connect.options().cluster,
        cold_samples: if quick { 1 } else { 3 },
        warm_samples: if quick { 3 } else { 10 },
        races: if quick { 50 } else { 1000 },
        processes: if quick { 3 } else { 15 },
        client_rounds: if quick { 1 } else { 5 },
        throughput: vec![(5, 5), (50, 50)],
        requests: if quick { 1000 } else { 20_000 },
        hot_key_requests: if quick { 200 } else { 1000 },
        pgbench_seconds: if quick { 1 } else { 2 },
        scale: if quick {
            vec![(1000, 50)]
        } else {
            vec![(1000, 50), (10_000, 90)]
        },
        replicated: if quick { 50 } else { 500 },
        engines: measure::engines::Samples {
            cold: if quick { 1 } else { 3 },
            warm: if quick { 3 } else { 10 },
            processes: if quick { 3 } else { 15 },
            figure_runs: if quick { 20 } else { 200 },
            cluster: if quick { 1 } else { 3 },
        },
        mariadb_bin: args.connect.cluster.mariadb_bin.clone(),
    })
}

/// How many steps the progress bar counts for the chosen sections.
fn steps(plan: &Plan) -> u64 {
    [
        (
            BenchSection::Cluster,
            (plan.cold_samples + plan.warm_samples) as u64,
        ),
        (
            BenchSection::Races,
            (StrategyKind::course().count() * plan.races) as u64,
        ),
        (BenchSection::Process, plan.processes as u64),
        (BenchSection::Client, plan.client_rounds as u64 + 1),
        (
            BenchSection::Throughput,
            (plan.throughput.len() * (crate::bench::throughput::guards().len() + 1)) as u64,
        ),
        (BenchSection::Wire, 1),
        (BenchSection::Release, 1),
        (BenchSection::HotKey, GUARDS.len() as u64),
        (BenchSection::Scale, 3 * plan.scale.len() as u64),
        (BenchSection::Replication, 2 * plan.replicated as u64 / 10),
        (BenchSection::Engines, {
            let e = &plan.engines;
            (e.cold + e.warm + 2 * e.processes + 2) as u64
        }),
        (BenchSection::Stores, 3),
    ]
    .iter()
    .filter(|(s, _)| plan.sections.contains(s))
    .map(|(_, n)| n)
    .sum()
}

/// The disposable cluster's cold and warm starts, off the runtime's threads.
async fn cluster_section(
    plan: &Plan,
    progress: &indicatif::ProgressBar,
) -> Result<Option<measure::cluster::ClusterFigures>> {
    let opts = plan.cluster.clone();
    let (cold, warm, bar) = (plan.cold_samples, plan.warm_samples, progress.clone());
    tokio::task::spawn_blocking(move || measure::cluster::measure(&opts, cold, warm, || bar.inc(1)))
        .await?
}

/// The engines side by side, off the runtime's threads.
async fn engines_section(
    plan: &Plan,
    progress: &indicatif::ProgressBar,
) -> Result<Option<measure::engines::EngineFigures>> {
    let bar = progress.clone();
    let samples = plan.engines;
    let bin = plan.mariadb_bin.clone();
    tokio::task::spawn_blocking(move || {
        measure::engines::measure(bin.as_deref(), &samples, || bar.inc(1))
    })
    .await?
}

/// Whole `idem race` processes, off the runtime's threads.
async fn process_section(
    plan: &Plan,
    progress: &indicatif::ProgressBar,
) -> Result<measure::process::ProcessFigure> {
    let (opts, runs, bar) = (plan.cluster.clone(), plan.processes, progress.clone());
    tokio::task::spawn_blocking(move || measure::process::measure(&opts, runs, || bar.inc(1)))
        .await?
}

impl OnDatabase for Plan {
    fn database(&self) -> ConnectOptions {
        self.db.clone()
    }

    async fn run_on(self, db: &Database) -> Result<()> {
        use BenchSection as S;
        refuse_a_pooler(db).await?;
        let on = |s: S| self.sections.contains(&s);
        let progress = self.out.progress(steps(&self), "steps");
        let tick = || progress.inc(1);
        let (requests, rounds) = (self.requests, self.client_rounds);

        let cluster = when(on(S::Cluster), cluster_section(&self, &progress)).await?;
        let race_rate = when(on(S::Races), races::race_rate(db, self.races, tick)).await?;
        let process = when(on(S::Process), process_section(&self, &progress)).await?;
        let client =
            measure::versus_pgbench::measure_all(db, 5, self.pgbench_seconds, rounds, tick);
        let client = when(on(S::Client), client).await?;
        let throughput = throughput::against_raw(db, &self.throughput, requests, tick);
        let throughput = when(on(S::Throughput), throughput).await?;
        let over_http = ticking(
            tick,
            measure::guard_over_http::against_in_process(db, 5, 5, requests),
        );
        let over_http = when(on(S::Wire), over_http).await?;
        let release = ticking(tick, measure::release::measure(self.quick));
        let release = when(on(S::Release), release).await?;
        let hot_key = when(
            on(S::HotKey),
            races::hot_key(db, self.hot_key_requests, tick),
        )
        .await?;
        let scale = when(on(S::Scale), races::scale(db, &self.scale, tick)).await?;
        let replication = measure::replication::measure(db, self.replicated, tick);
        let replication = when(on(S::Replication), replication).await?;
        let engines = when(on(S::Engines), engines_section(&self, &progress)).await?;
        let stores = measure::stores::measure(db, self.processes, self.hot_key_requests, tick);
        let stores = when(on(S::Stores), stores).await?;
        progress.finish_and_clear();

        let bench = BenchReport {
            quick: self.quick,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            postgres: db.server_version().await?,
            sections: self
                .sections
                .iter()
                .filter_map(|s| s.to_possible_value().map(|v| v.get_name().to_string()))
                .collect(),
            cluster: cluster.flatten(),
            race_rate: race_rate.unwrap_or_default(),
            process,
            client,
            throughput: throughput.unwrap_or_default(),
            over_http,
            release: release.unwrap_or_default(),
            hot_key: hot_key.unwrap_or_default(),
            scale: scale.unwrap_or_default(),
            replication: replication.unwrap_or_default(),
            engines: engines.flatten(),
            stores: stores.flatten(),
            peak_rss_mb: peak_rss_mb(),
        };
        self.out.record(&bench, report::bench::render)
    }
}
