//! The arguments of the commands that race: `race`, `compare`, `step` and `matrix`.

use clap::Args;

use super::connection::ConnectArgs;
use super::race_shape::{RaceFlags, StrategyFlag};
use crate::limits;
use crate::race::engine::Engine;
use crate::race::moves::Move;
use crate::race::options::{AppInput, ShapeInput, StandbyInput};
use crate::strategy::StrategyKind;

#[derive(Debug, Args)]
pub struct RaceArgs {
    #[command(flatten)]
    pub strategy: StrategyFlag,

    /// The database engine the race runs on: PostgreSQL, or MariaDB
    /// (InnoDB) in a disposable server of idem's own.
    #[arg(long, value_enum, default_value_t = Engine::Postgres)]
    pub engine: Engine,

    #[command(flatten)]
    pub race: RaceFlags,

    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The engines to compare the strategies on, row by row: postgres,
    /// mariadb, or both (`--engine postgres,mariadb`).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "postgres")]
    pub engine: Vec<Engine>,

    /// Compare the loser policies of claim-work-complete instead of the strategies.
    #[arg(long)]
    pub losers: bool,

    /// Compare where claim-work-complete keeps its claims instead of the
    /// strategies, a row per store: `--stores table,cache,redis` (lesson 5).
    /// The Redis options (--redis-ttl-ms, ...) apply to the redis row.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        value_name = "STORES",
        conflicts_with = "losers"
    )]
    pub stores: Vec<crate::store::StoreKind>,

    /// Explore every interleaving of each strategy's requests (two unless
    /// --workers says otherwise) instead of racing them: held in K of N.
    #[arg(long, conflicts_with_all = ["losers", "runs"])]
    pub explore: bool,

    #[command(flatten)]
    pub race: RaceFlags,

    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Args)]
pub struct StepArgs {
    #[command(flatten)]
    pub strategy: StrategyFlag,

    /// The engine the requests run on: PostgreSQL, or MariaDB (InnoDB) in
    /// a disposable server of idem's own.
    #[arg(long, value_enum, default_value_t = Engine::Postgres)]
    pub engine: Engine,

    /// The order of steps, one worker number per step (e.g. 1,2,1,2):
    /// replays an interleaving without asking. `clock` moves every pending
    /// claim past the stale-claim age; `crash2` kills worker 2's
    /// connection before its next step (lesson 7's crash).
    #[arg(long, value_name = "LIST", value_delimiter = ',',
          value_parser = Move::parse)]
    pub schedule: Option<Vec<Move>>,

    /// A puzzle: you are the scheduler, and the goal is to make the guard
    /// leave N XP rows. At the end idem says whether you did, and in how
    /// many of all the orders it can be done (exit 1 if you did not).
    #[arg(long, value_name = "N", allow_negative_numbers = true,
          value_parser = limits::GOAL_XP_ROWS.parser())]
    pub goal: Option<u64>,

    #[command(flatten)]
    pub race: RaceFlags,

    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Args)]
pub struct MatrixArgs {
    /// The engine the matrix races on: PostgreSQL, or MariaDB (InnoDB),
    /// where the same cells can answer otherwise.
    #[arg(long, value_enum, default_value_t = Engine::Postgres)]
    pub engine: Engine,

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

    #[command(flatten)]
    pub shape: ShapeInput,

    #[command(flatten)]
    pub app: AppInput,

    /// Print the matrix as one JSON object and nothing else on stdout.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub standby: StandbyInput,

    #[command(flatten)]
    pub connect: ConnectArgs,
}

/// `idem explore --workers`: it walks two requests unless told otherwise.
pub const EXPLORE_WORKERS_HELP: &str = "Concurrent workers, each one request with the same key: 2 to 5, and every added \
     worker multiplies the interleavings [default: 2]";

#[derive(Debug, Args)]
pub struct ExploreArgs {
    #[command(flatten)]
    pub strategy: StrategyFlag,

    /// The engine the requests run on: PostgreSQL, or MariaDB (InnoDB) in
    /// a disposable server of idem's own.
    #[arg(long, value_enum, default_value_t = Engine::Postgres)]
    pub engine: Engine,

    #[arg(long, value_name = "N", allow_negative_numbers = true,
          value_parser = limits::MAX_INTERLEAVINGS.parser(),
          help = limits::MAX_INTERLEAVINGS.help(
              "The most interleavings to run; past it the exploration stops and says how \
               many it ran, never that the guard holds in all."))]
    pub max_interleavings: Option<u64>,

    /// Also branch on crashes: at every turn, a worker's server process
    /// may be killed before its next step (once a run), and the crashed
    /// request is retried after the race, once its claim is stale.
    #[arg(long)]
    pub crashes: bool,

    /// Also branch on the clock: at every turn where a pending claim could
    /// go stale, it may (once a run), its time moved past the stale-claim
    /// age (--stale-after-ms) instead of waiting for it.
    #[arg(long)]
    pub clock: bool,

    /// Print the exploration as one JSON object and nothing else on stdout.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub input: crate::race::options::RaceInput,

    #[command(flatten)]
    pub connect: ConnectArgs,
}
