//! The arguments of the commands that look at idem itself: `doctor` and `bench`.

use clap::{Args, ValueEnum};

use super::connection::ConnectArgs;

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Also start a hot standby of the disposable cluster (PostgreSQL's own
    /// streaming replication) and show how soon it replays a committed row.
    #[arg(long)]
    pub standby: bool,

    /// Print the findings as one JSON object.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// A small run (a few samples, 50 races per strategy) that proves the bench works.
    #[arg(long)]
    pub quick: bool,

    /// Measure only these sections (repeat the flag, or separate with commas).
    #[arg(long, value_enum, value_delimiter = ',', value_name = "SECTION")]
    pub only: Vec<BenchSection>,

    /// Print the whole report as one JSON object.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub connect: ConnectArgs,
}

/// The sections of `idem bench`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BenchSection {
    /// Start and stop of the disposable cluster.
    Cluster,
    /// Default races back to back.
    Races,
    /// Whole `idem race` processes, cluster included.
    Process,
    /// idem's request loop against pgbench and the bare driver, same statements.
    Client,
    /// Every guard against the raw statement, at two pool sizes.
    Throughput,
    /// The guard through `idem serve`'s app against in-process.
    Wire,
    /// The probe's release modes: arrival spread at a loopback server.
    Release,
    /// Every request on one key at once.
    HotKey,
    /// Thousands of workers on one key.
    Scale,
    /// A request's latency with a hot standby: asynchronous, then remote_apply.
    Replication,
    /// MariaDB beside PostgreSQL: server start and stop, whole races, lesson 1's figure.
    Engines,
    /// Claims in Redis beside the key table: whole races, and the claim's round trip.
    Stores,
}
