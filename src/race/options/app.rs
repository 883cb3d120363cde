//! The app the workers call: which guard it runs, and its connection pool, its work and its threads.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde::{Deserialize, Serialize};

use super::said;
use crate::db::via::Via;
use crate::limits;
use crate::limits::help_with_default as with_default;
use crate::strategy::StrategyKind;
use crate::strategy::orm::Orm;

/// The guard: a built-in strategy or a file, and whose statements it sends.
#[derive(Debug, Clone, Default, Args, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct StrategyInput {
    /// The built-in strategy; its flag (`-s`) is the command's own, as
    /// `compare` runs every strategy.
    #[arg(skip)]
    pub strategy: Option<StrategyKind>,

    /// A guard written as a file (TOML: a shape, and the SQL of each step),
    /// raced in place of --strategy. `idem exercise` writes one to start from.
    #[arg(long, value_name = "FILE")]
    pub strategy_file: Option<PathBuf>,

    #[arg(long, value_enum, value_name = "SHAPE",
          help = with_default(
              "Whose statements check-then-store sends: idem's, one per step, or what \
               ActiveRecord 6.1 makes of the course's code (SELECT 1 on checkout, each \
               create! in BEGIN ... COMMIT).",
              Orm::Bare.name()))]
    pub orm: Option<Orm>,
}

/// The app's pool, its work and its threads.
#[derive(Debug, Clone, Default, Args, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct AppInput {
    #[arg(long, short = 'p', value_name = "P", allow_negative_numbers = true,
          value_parser = limits::POOL_SIZE.parser(),
          help = limits::POOL_SIZE.help(
              "Connections in the pool the workers share (the app's connection pool)."))]
    pub pool_size: Option<u64>,

    #[arg(long, value_enum, value_name = "PATH",
          help = with_default(
              "How the app's pool reaches PostgreSQL: directly, or through a real PgBouncer \
               in transaction mode that idem starts in front of the disposable cluster \
               (for your own PgBouncer, give its URL as --database-url).",
              Via::Direct.name()))]
    pub via: Option<Via>,

    /// Do not let the runner hold a connection during the race (in-process
    /// it holds one by default, as the course's test runner does).
    #[arg(long, conflicts_with = "runner_connection")]
    #[serde(skip)]
    pub no_runner_connection: bool,

    /// Let the runner hold a connection during the race, as the course's
    /// test runner does: the course's figure of 4 XP rows over HTTP too. An
    /// app server holds none, so `--http` and `serve` do not by default.
    #[arg(long)]
    #[serde(skip)]
    pub runner_connection: bool,

    /// The two switches above, as a scenario file says it.
    #[arg(skip)]
    pub runner_holds_connection: Option<bool>,

    #[arg(long, value_name = "MS", allow_negative_numbers = true,
          value_parser = limits::WORK_MS.parser(),
          help = limits::WORK_MS.help(
              "How long the work takes, in ms: the service call behind the XP row, \
               which keeps the race window open. 0 shows the bare race."))]
    pub work_ms: Option<u64>,

    #[arg(long, value_name = "MS", allow_negative_numbers = true,
          value_parser = limits::CHECKOUT_TIMEOUT_MS.parser(),
          help = limits::CHECKOUT_TIMEOUT_MS.help(
              "How long a worker waits for a free connection before giving up (503)."))]
    pub checkout_timeout_ms: Option<u64>,

    #[arg(long, value_name = "T", allow_negative_numbers = true,
          value_parser = limits::THREADS.parser(),
          help = limits::THREADS.help(
              "Over HTTP: how many requests the app handles at once, as an app \
               server's threads do (the course's app has five)."))]
    pub threads: Option<u64>,
}

/// The app's connection pool: the workers' pool of `deadpool-postgres`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pool {
    size: usize,
    runner_holds_connection: bool,
    checkout_timeout: Duration,
    via: Via,
}

impl AppInput {
    /// The pool. In-process the runner holds a connection, as the course's
    /// test runner does; over HTTP, as a Rails server on Puma, it holds
    /// none outside requests (the boot connection goes back to the pool).
    pub(super) fn pool(&self, http: bool) -> Pool {
        let holds = said(self.no_runner_connection, false)
            .or(said(self.runner_connection, true))
            .or(self.runner_holds_connection);
        Pool {
            size: self.pool_size.unwrap_or(limits::POOL_SIZE.default()) as usize,
            runner_holds_connection: holds.unwrap_or(!http),
            checkout_timeout: Duration::from_millis(
                self.checkout_timeout_ms
                    .unwrap_or(limits::CHECKOUT_TIMEOUT_MS.default()),
            ),
            via: self.via.unwrap_or_default(),
        }
    }

    /// How long the work takes.
    pub(super) fn work(&self) -> Duration {
        Duration::from_millis(self.work_ms.unwrap_or(limits::WORK_MS.default()))
    }

    /// Over HTTP: how many requests the app handles at once.
    pub(super) fn threads(&self) -> usize {
        self.threads.unwrap_or(limits::THREADS.default()) as usize
    }
}

impl Pool {
    /// Connections in the pool.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Whether the runner checks out one connection before the race and
    /// holds it.
    pub fn runner_holds_connection(&self) -> bool {
        self.runner_holds_connection
    }

    /// How long a request waits for a pooled connection.
    pub fn checkout_timeout(&self) -> Duration {
        self.checkout_timeout
    }

    /// How the pool reaches PostgreSQL.
    pub fn via(&self) -> Via {
        self.via
    }

    /// The connections the workers can get: the pool less the runner's.
    pub fn for_workers(&self) -> usize {
        self.size - usize::from(self.runner_holds_connection)
    }

    /// The same pool going to its server directly: an app replica is
    /// handed PgBouncer's address as its database when there is one.
    pub fn direct(self) -> Pool {
        Pool {
            via: Via::Direct,
            ..self
        }
    }
}
