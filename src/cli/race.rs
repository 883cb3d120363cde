//! The arguments of the commands that race: `race`, `compare` and `step`.

use clap::Args;

use super::connection::ConnectArgs;
use super::race_shape::RaceFlags;
use super::values::with_default;
use crate::limits;
use crate::race::DEFAULT_STRATEGY;
use crate::strategy::StrategyKind;

#[derive(Debug, Args)]
pub struct RaceArgs {
    #[arg(long, short = 's', value_enum,
          help = with_default("The guard shape every worker runs.", DEFAULT_STRATEGY))]
    pub strategy: Option<StrategyKind>,

    #[command(flatten)]
    pub race: RaceFlags,

    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Compare the loser policies of claim-work-complete instead of the strategies.
    #[arg(long)]
    pub losers: bool,

    #[command(flatten)]
    pub race: RaceFlags,

    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Args)]
pub struct StepArgs {
    #[arg(long, short = 's', value_enum,
          help = with_default("The guard shape every worker runs.", DEFAULT_STRATEGY))]
    pub strategy: Option<StrategyKind>,

    /// The order of steps, one worker number per step (e.g. 1,2,1,2):
    /// replays an interleaving without asking.
    #[arg(long, value_name = "LIST", value_delimiter = ',',
          value_parser = limits::SCHEDULE_WORKER.parser())]
    pub schedule: Option<Vec<u64>>,

    #[command(flatten)]
    pub race: RaceFlags,

    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Args)]
pub struct MatrixArgs {
    #[arg(long, short = 'r', value_name = "R", allow_negative_numbers = true,
          value_parser = limits::MATRIX_RUNS.parser(),
          help = limits::MATRIX_RUNS.help("Races per cell, on fresh tables each."))]
    pub runs: Option<u64>,

    /// Only the rows of these strategies (e.g. -s check-then-store,advisory-lock).
    #[arg(
        long,
        short = 's',
        value_enum,
        value_delimiter = ',',
        value_name = "STRATEGY"
    )]
    pub strategy: Vec<StrategyKind>,

    /// A guard written as a file: its rows, the ones of the built-in
    /// strategy of its shape (with -s, beside the rows of those named).
    #[arg(long, value_name = "FILE")]
    pub strategy_file: Option<std::path::PathBuf>,

    #[arg(long, short = 'w', value_name = "N", allow_negative_numbers = true,
          value_parser = limits::WORKERS.parser(),
          help = limits::WORKERS.help("Concurrent workers, each one request with the same key."))]
    pub workers: Option<u64>,

    #[arg(long, short = 'p', value_name = "P", allow_negative_numbers = true,
          value_parser = limits::POOL_SIZE.parser(),
          help = limits::POOL_SIZE.help("Connections in the pool the workers share."))]
    pub pool_size: Option<u64>,

    #[arg(long, value_name = "MS", allow_negative_numbers = true,
          value_parser = limits::WORK_MS.parser(),
          help = limits::WORK_MS.help("How long the work takes, in ms (the service call)."))]
    pub work_ms: Option<u64>,

    #[arg(long, value_enum, value_name = "PATH",
          help = with_default(
              "How the app's pool reaches PostgreSQL: directly, or through a real PgBouncer \
               in transaction mode in front of the disposable cluster.",
              crate::db::via::Via::Direct.name()))]
    pub via: Option<crate::db::via::Via>,

    /// Print the matrix as one JSON object and nothing else on stdout.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub standby: super::race_shape::StandbyFlags,

    #[command(flatten)]
    pub connect: ConnectArgs,
}
