//! The measurements behind `idem bench`: rerunnable figures, never timed tests.

pub mod arrival;
pub mod cluster;
pub mod engines;
pub mod guard_over_http;
pub mod meter;
pub mod pgbench;
pub mod process;
pub mod races;
pub mod release;
pub mod replication;
pub mod script;
pub mod stores;
pub mod throughput;
pub mod versus_pgbench;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::strategy::StrategyKind;

pub use cluster::ClusterFigures;
pub use throughput::Throughput;

/// Every figure one `idem bench` run measured.
#[derive(Debug, Serialize)]
pub struct BenchReport {
    pub quick: bool,
    pub cores: usize,
    pub postgres: String,
    /// The sections measured (all, unless `--only` named some); a section
    /// not measured is `null` or empty.
    pub sections: Vec<String>,
    pub cluster: Option<ClusterFigures>,
    pub race_rate: Vec<RaceRate>,
    /// Whole `idem race` processes, the disposable cluster included.
    pub process: Option<process::ProcessFigure>,
    /// idem's request loop against pgbench on the same statements.
    pub client: Option<versus_pgbench::ClientFigures>,
    pub throughput: Vec<Throughput>,
    /// The guard through `idem serve`'s app against the guard in-process.
    pub over_http: Option<guard_over_http::WireFigure>,
    /// How tightly the probe's requests reach a server, per release mode.
    pub release: Vec<release::ReleaseFigure>,
    pub hot_key: Vec<HotKey>,
    pub scale: Vec<ScaleFigure>,
    /// One request at a time with a hot standby, asynchronous and
    /// `remote_apply` (on idem's own cluster only).
    pub replication: Vec<replication::ReplicationFigure>,
    /// MariaDB beside PostgreSQL (`null` without a `mariadbd` here).
    pub engines: Option<engines::EngineFigures>,
    /// Claims in Redis beside claims in the key table (`null` without a
    /// `redis-server` here).
    pub stores: Option<stores::StoreFigures>,
    /// The idem process's peak resident memory over the whole benchmark.
    pub peak_rss_mb: f64,
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

/// All requests on one key at once.
#[derive(Debug, Serialize)]
pub struct HotKey {
    pub strategy: StrategyKind,
    pub requests: usize,
    pub pool_size: usize,
    /// From arrival to answer, including the wait for a connection.
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub xp_rows: u64,
}

/// Many workers on one key, one race.
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
