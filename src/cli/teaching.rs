//! The arguments of the teaching commands: lessons, scenarios, lesson 5's stores and lesson 6's keys.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};

use super::connection::{ConnectArgs, KeptSchemaArgs};

use crate::keys::{CrashPoint, DEFAULT_CRASH_AT, KeyKind};
use crate::limits::{self, duration};
use crate::race::DEFAULT_KEY;
use crate::race::engine::{Engine, Engines};

/// Which engines' demonstrations run: `--engine` on `lesson`, `tour` and
/// `scenario`.
#[derive(Debug, Clone, Args)]
pub struct EngineChoice {
    /// Only the demonstrations on these engines: postgres, mariadb, or
    /// both (postgres,mariadb) [default: every engine]. A scenario's
    /// expected figures are its own engine's, so the others are left out.
    #[arg(
        long,
        global = true,
        value_enum,
        value_delimiter = ',',
        value_name = "ENGINE"
    )]
    pub engine: Vec<Engine>,
}

impl EngineChoice {
    pub fn engines(&self) -> Engines {
        Engines::only(self.engine.clone())
    }
}

#[derive(Debug, Args)]
pub struct KeysArgs {
    /// How clients make their keys; every kind side by side if not given.
    #[arg(long, value_enum)]
    pub kind: Option<KeyKind>,

    /// Make the keys from a file's template instead (TOML: key = "..." over
    /// {operation}, {user_id}, {lesson}, {amount} and {random}).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["kind", "compare"])]
    pub key_file: Option<std::path::PathBuf>,

    /// Run every key kind and print them side by side (the default without --kind).
    #[arg(long)]
    pub compare: bool,

    /// Clients, each a different user, running at once.
    #[arg(long, default_value_t = limits::CLIENTS.default(), value_name = "N",
          allow_negative_numbers = true, value_parser = limits::CLIENTS.parser())]
    pub clients: u64,

    /// Distinct awards each client makes (one per lesson). Two or more show
    /// what a key derived from too few fields does.
    #[arg(long, default_value_t = limits::INTENTS.default(), value_name = "N",
          allow_negative_numbers = true, value_parser = limits::INTENTS.parser())]
    pub intents: u64,

    /// Retries after the first attempt; every attempt but the last crashes.
    #[arg(long, default_value_t = limits::RETRIES.default(), value_name = "R",
          allow_negative_numbers = true, value_parser = limits::RETRIES.parser())]
    pub retries: u64,

    /// Where each crashing attempt dies.
    #[arg(long, value_enum, default_value_t = DEFAULT_CRASH_AT)]
    pub crash_at: CrashPoint,

    /// The server checks no fingerprint: a merged intent is silently replayed, not rejected.
    #[arg(long)]
    pub no_fingerprint: bool,

    /// How long the server's work takes, in ms.
    #[arg(long, default_value_t = limits::KEYS_WORK_MS.default(), value_name = "MS",
          allow_negative_numbers = true, value_parser = limits::KEYS_WORK_MS.parser())]
    pub work_ms: u64,

    /// Print one JSON object per key kind.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Args)]
pub struct StoresArgs {
    /// Races per store for the claim race.
    #[arg(long, short = 'r', default_value_t = limits::STORES_RUNS.default(), value_name = "R",
          allow_negative_numbers = true, value_parser = limits::STORES_RUNS.parser())]
    pub runs: u64,

    /// Concurrent workers in the claim race.
    #[arg(long, short = 'w', default_value_t = limits::STORES_WORKERS.default(), value_name = "N",
          allow_negative_numbers = true, value_parser = limits::STORES_WORKERS.parser())]
    pub workers: u64,

    /// How long the work takes, in ms.
    #[arg(long, default_value_t = limits::STORES_WORK_MS.default(), value_name = "MS",
          allow_negative_numbers = true, value_parser = limits::STORES_WORK_MS.parser())]
    pub work_ms: u64,

    /// The cache store's entry limit; the eviction test writes a tenth more.
    #[arg(long, default_value_t = limits::STORES_CACHE_MAX_ENTRIES.default(), value_name = "N",
          allow_negative_numbers = true, value_parser = limits::STORES_CACHE_MAX_ENTRIES.parser())]
    pub cache_max_entries: u64,

    /// One JSON object per store.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// The key to look up.
    #[arg(long, short = 'k', default_value = DEFAULT_KEY, value_name = "KEY")]
    pub key: String,

    #[command(flatten)]
    pub kept: KeptSchemaArgs,

    /// Print the audit as JSON.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Args)]
pub struct ReapArgs {
    /// Delete completed keys older than this (e.g. 24h, 72h, 3d).
    #[arg(long, value_name = "DURATION", value_parser = duration, allow_hyphen_values = true)]
    pub older_than: Duration,

    /// Reap a kept schema; without it, idem seeds a fresh one with keys of
    /// several ages to show what the reaper takes.
    #[command(flatten)]
    pub kept: KeptSchemaArgs,

    /// Print what was reaped as JSON.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub connect: ConnectArgs,
}

/// `idem db`: a disposable cluster for a program of your own.
#[derive(Debug, Args)]
pub struct DbArgs {
    /// The command to run with DATABASE_URL and PGHOST, PGUSER, PGDATABASE
    /// set (after `--`); without one, idem prints them and waits for Ctrl-C.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,

    #[command(flatten)]
    pub cluster: super::connection::ClusterArgs,
}

/// `idem pooler`: what a pooler in transaction mode does to a session's state.
#[derive(Debug, Args)]
pub struct PoolerArgs {
    #[arg(long, short = 'r', value_name = "R", allow_negative_numbers = true,
          value_parser = crate::limits::POOLER_RUNS.parser(),
          help = crate::limits::POOLER_RUNS.help("Run each finding R times, each through a fresh PgBouncer."))]
    pub runs: Option<u64>,

    /// Print the findings as one JSON object and nothing else on stdout.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub cluster: super::connection::ClusterArgs,
}

#[derive(Debug, Args)]
pub struct ScenarioArgs {
    #[command(subcommand)]
    pub command: ScenarioCommand,

    #[command(flatten)]
    pub engine: EngineChoice,

    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Subcommand)]
pub enum ScenarioCommand {
    /// List the scenarios (the built-in ones, or those in the files, folders or names given).
    List { paths: Vec<PathBuf> },
    /// Run scenarios and compare each with its expectations; exits 1 if any differs.
    Run {
        /// Scenario files or folders, or built-in scenarios by name (e.g.
        /// 1-check-then-store); all the built-in ones if none.
        paths: Vec<PathBuf>,
        /// One JSON object per scenario.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct LessonArgs {
    /// The lesson, 1 to 11.
    #[arg(value_parser = limits::LESSON.parser())]
    pub number: u64,

    /// Do not wait for Enter between screens (also when stdin is not a terminal).
    #[arg(long)]
    pub no_pause: bool,

    /// Do not ask for predictions before the figures (never asked when
    /// stdin is not a terminal).
    #[arg(long)]
    pub no_ask: bool,

    #[command(flatten)]
    pub engine: EngineChoice,

    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Args)]
pub struct TourArgs {
    /// Do not wait for Enter between screens (also when stdin is not a terminal).
    #[arg(long)]
    pub no_pause: bool,

    /// Do not ask for predictions before the figures (never asked when
    /// stdin is not a terminal).
    #[arg(long)]
    pub no_ask: bool,

    /// Start the tour at lesson N, where you stopped.
    #[arg(long, value_name = "N", value_parser = limits::LESSON.parser())]
    pub from: Option<u64>,

    #[command(flatten)]
    pub engine: EngineChoice,

    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Args)]
pub struct ExerciseArgs {
    /// The lesson whose exercise to write.
    #[arg(value_parser = limits::LESSON.parser())]
    pub number: u64,

    /// Write the reference answer instead (N-name.solution.toml), beside yours.
    #[arg(long)]
    pub solution: bool,

    /// The engine the file is written for: PostgreSQL, or MariaDB
    /// (InnoDB) where the exercise has a file for it (`idem check` then
    /// races it there) [default: the exercise's own, PostgreSQL but for
    /// lesson 11's].
    #[arg(long, value_enum)]
    pub engine: Option<Engine>,

    /// The folder to write into (the current one unless given).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<std::path::PathBuf>,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The lesson whose cases judge the file.
    #[arg(value_parser = limits::LESSON.parser())]
    pub number: u64,

    /// The guard file to judge (the exercise's file in the current folder
    /// unless given).
    #[arg(value_name = "FILE")]
    pub file: Option<std::path::PathBuf>,

    #[command(flatten)]
    pub judge: super::wire_commands::ChallengeArgs,
}

#[derive(Debug, Args)]
pub struct HintArgs {
    /// The lesson whose exercise you want a hint for.
    #[arg(value_parser = limits::LESSON.parser())]
    pub number: u64,

    /// Show every hint seen so far again, instead of the next one.
    #[arg(long)]
    pub again: bool,
}

#[derive(Debug, Args)]
pub struct ProgressArgs {
    /// Forget the lessons read: remove the progress file.
    #[arg(long)]
    pub reset: bool,
}
