//! The settings every race takes, for `race`, `compare` and `step` alike, in the groups the help shows.
//!
//! A flag not given is `None` (a switch not given is `None` too), so the
//! one builder can tell "not given" from "given as the default" and a
//! scenario file's values mean the same as the flags'.

use std::time::Duration;

use clap::Args;

use super::output::ShowFlags;
use super::parse::{amount, crash_plan, hang_up_plan};
use super::values::with_default;
use crate::db::via::Via;
use crate::http::app::OnHangup;
use crate::limits::{self, duration};
use crate::race::input::RaceInput;
use crate::race::{CrashPlan, DEFAULT_KEY, DEFAULT_ON_FAILURE, DEFAULT_STORE};
use crate::store::StoreKind;
use crate::strategy::guard::OnFailure;
use crate::strategy::orm::Orm;
use crate::strategy::transaction::{Isolation, Transaction};
use crate::strategy::{LoserKind, StrategyKind};

/// Every group of a race's flags.
#[derive(Debug, Clone, Args)]
pub struct RaceFlags {
    #[command(flatten)]
    pub shape: ShapeFlags,

    #[command(flatten)]
    pub app: AppFlags,

    #[command(flatten)]
    pub losers: LoserFlags,

    #[command(flatten)]
    pub amounts: AmountFlags,

    #[command(flatten)]
    pub fingerprints: FingerprintFlags,

    #[command(flatten)]
    pub stores: StoreFlags,

    #[command(flatten)]
    pub eviction: EvictionFlags,

    #[command(flatten)]
    pub guard: GuardFlags,

    #[command(flatten)]
    pub transactions: TransactionFlags,

    #[command(flatten)]
    pub standby: StandbyFlags,

    #[command(flatten)]
    pub faults: FaultFlags,

    #[command(flatten)]
    pub hangups: HangUpFlags,

    #[command(flatten)]
    pub show: ShowFlags,
}

/// Lesson 9: what the app does when its client goes away.
#[derive(Debug, Clone, Args)]
pub struct HangUpFlags {
    #[arg(help_heading = "Lesson 9: a request's life")]
    #[arg(long, value_enum, value_name = "WAY",
          help = with_default(
              "What the app does with a request whose client goes away: drop it at its \
               next await, as hyper does, or run it to its end, as Puma and Node do. \
               With finish, at most as many requests as connections allowed (serve's \
               --max-connections) run at once, their clients there or gone; past it a \
               request is answered 503 at once.",
              OnHangup::Cancel.name()))]
    pub on_hangup: Option<OnHangup>,
}

/// The race's shape: how many workers, which key, how many runs, which transport.
#[derive(Debug, Clone, Args)]
pub struct ShapeFlags {
    #[arg(long, short = 'w', value_name = "N", allow_negative_numbers = true,
          value_parser = limits::WORKERS.parser(),
          help = limits::WORKERS.help("Concurrent workers, each one request with the same key."))]
    pub workers: Option<u64>,

    #[arg(long, short = 'k', value_name = "KEY",
          help = with_default("The idempotency key every worker sends.", DEFAULT_KEY))]
    pub key: Option<String>,

    #[arg(long, short = 'r', value_name = "R", allow_negative_numbers = true,
          value_parser = limits::RUNS.parser(),
          help = limits::RUNS.help("Repeat the race R times on fresh tables and show the distribution."))]
    pub runs: Option<u64>,

    /// Race over the wire: start the course's app (`idem serve`) on a
    /// loopback port and send each worker's request as a real HTTP client
    /// on its own connection. The outcomes are the statuses on the wire.
    #[arg(long)]
    pub http: bool,

    #[arg(long, value_name = "N", allow_negative_numbers = true,
          value_parser = limits::REPLICAS.parser(),
          help = limits::REPLICAS.help(
              "With --http: run the app as N processes, each with its own pool and \
               threads, behind one port that hands each connection to the next in turn."))]
    pub replicas: Option<u64>,
}

/// The app the workers call: its connection pool, its work, its threads.
#[derive(Debug, Clone, Args)]
pub struct AppFlags {
    /// A guard written as a file (TOML: a shape, and the SQL of each step),
    /// raced in place of --strategy. `idem exercise` writes one to start from.
    #[arg(long, value_name = "FILE")]
    pub strategy_file: Option<std::path::PathBuf>,

    #[arg(long, short = 'p', value_name = "P", allow_negative_numbers = true,
          value_parser = limits::POOL_SIZE.parser(),
          help = limits::POOL_SIZE.help(
              "Connections in the pool the workers share (the app's connection pool)."))]
    pub pool_size: Option<u64>,

    #[arg(long, value_enum, value_name = "SHAPE",
          help = with_default(
              "Whose statements check-then-store sends: idem's, one per step, or what \
               ActiveRecord 6.1 makes of the course's code (SELECT 1 on checkout, each \
               create! in BEGIN ... COMMIT).",
              Orm::Bare.name()))]
    pub orm: Option<Orm>,

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
    pub no_runner_connection: bool,

    /// Let the runner hold a connection during the race, as the course's
    /// test runner does: the course's figure of 4 XP rows over HTTP too. An
    /// app server holds none, so `--http` and `serve` do not by default.
    #[arg(long)]
    pub runner_connection: bool,

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

/// Lesson 3: what a request that loses the claim does.
#[derive(Debug, Clone, Args)]
pub struct LoserFlags {
    #[arg(help_heading = "Lesson 3: the loser")]
    #[arg(long, value_enum, value_name = "POLICY",
          help = with_default(
              "What a request that loses the claim does while the winner works \
               (claim-work-complete only).",
              LoserKind::FailFast.name()))]
    pub loser: Option<LoserKind>,

    #[arg(help_heading = "Lesson 3: the loser")]
    #[arg(long, value_name = "MS", allow_negative_numbers = true,
          value_parser = limits::POLL_MS.parser(),
          help = limits::POLL_MS.help("With --loser poll: how often a loser re-reads the claim."))]
    pub poll_ms: Option<u64>,

    #[arg(help_heading = "Lesson 3: the loser")]
    #[arg(long, value_name = "MS", allow_negative_numbers = true,
          value_parser = limits::WAIT_TIMEOUT_MS.parser(),
          help = limits::WAIT_TIMEOUT_MS.help(
              "With --loser poll or block: how long a loser waits for the winner before answering 409."))]
    pub wait_timeout_ms: Option<u64>,
}

/// Lesson 4: what the workers ask for.
#[derive(Debug, Clone, Args)]
pub struct AmountFlags {
    /// Per-worker XP amounts, all on one key: worker i asks for the i-th (e.g. 10,20,10,30,10).
    #[arg(help_heading = "Lesson 4: fingerprints")]
    #[arg(long, value_name = "LIST", value_delimiter = ',', allow_negative_numbers = true,
          value_parser = amount)]
    pub amounts: Option<Vec<i32>>,
}

/// Lesson 4: whether the guard checks what a request asks for.
#[derive(Debug, Clone, Args)]
pub struct FingerprintFlags {
    /// Store no request fingerprint and check none: a reused key silently
    /// replays the first request's result (the wrong answer of lesson 4).
    #[arg(help_heading = "Lesson 4: fingerprints")]
    #[arg(long)]
    pub no_fingerprint: bool,
}

/// Lesson 5: where the claims live, and what the store remembers.
#[derive(Debug, Clone, Args)]
pub struct StoreFlags {
    #[arg(help_heading = "Lesson 5: where claims live")]
    #[arg(long, value_enum,
          help = with_default(
              "Where claim-work-complete keeps its claims: the key table, or a \
               Solid-Cache-like store (lesson 5).",
              DEFAULT_STORE.name()))]
    pub store: Option<StoreKind>,

    #[arg(help_heading = "Lesson 5: where claims live")]
    #[arg(long, value_name = "N", allow_negative_numbers = true,
          value_parser = limits::CACHE_MAX_ENTRIES.parser(),
          help = limits::CACHE_MAX_ENTRIES.help(
              "The cache store's entry limit; past it the oldest entries are evicted."))]
    pub cache_max_entries: Option<u64>,

    /// The cache store's age limit (e.g. 90s, 24h, 2w) [default: 2w].
    #[arg(help_heading = "Lesson 5: where claims live")]
    #[arg(long, value_name = "DURATION", value_parser = duration, allow_hyphen_values = true)]
    pub cache_max_age: Option<Duration>,
}

/// Lesson 5: what the race does to the store afterwards, and what it shows.
#[derive(Debug, Clone, Args)]
pub struct EvictionFlags {
    #[arg(help_heading = "Lesson 5: where claims live")]
    #[arg(long, value_name = "N", allow_negative_numbers = true,
          value_parser = limits::CACHE_PRESSURE.parser(),
          help = limits::CACHE_PRESSURE.help(
              "After the race, write N other keys to the cache, then retry the same \
               request: does its claim survive eviction?"))]
    pub cache_pressure: Option<u64>,

    /// After the race, show what each store can still tell about the key.
    #[arg(help_heading = "Lesson 5: where claims live")]
    #[arg(long)]
    pub audit: bool,
}

/// Lesson 7: how the guard recovers.
#[derive(Debug, Clone, Args)]
pub struct GuardFlags {
    #[arg(help_heading = "Lesson 7: faults and recovery")]
    #[arg(long, value_name = "MS", allow_negative_numbers = true,
          value_parser = limits::LOCK_TIMEOUT_MS.parser(),
          help = limits::LOCK_TIMEOUT_MS.help(
              "The guard takes over a pending claim older than this, in ms."))]
    pub lock_timeout_ms: Option<u64>,

    #[arg(help_heading = "Lesson 7: faults and recovery")]
    #[arg(long, value_name = "MS", allow_negative_numbers = true,
          value_parser = limits::HEARTBEAT_MS.parser(),
          help = "The guard renews a running claim this often, in ms, so that only a \
                  silent owner's claim goes stale (at most half --lock-timeout-ms)")]
    pub heartbeat_ms: Option<u64>,

    #[arg(help_heading = "Lesson 7: faults and recovery")]
    #[arg(long, value_enum,
          help = with_default(
              "What the guard does when the work fails: store the 500 and replay it \
               (Stripe), or release the claim so a retry runs again (Powertools).",
              DEFAULT_ON_FAILURE.name()))]
    pub on_failure: Option<OnFailure>,
}

/// Lesson 8: the request's transaction and its isolation level.
#[derive(Debug, Clone, Args)]
pub struct TransactionFlags {
    #[arg(help_heading = "Lesson 8: transactions and locks")]
    #[arg(
        long,
        value_enum,
        value_name = "SCOPE",
        help = "Whether each request runs in one transaction: none (each statement \
                  commits alone, as the course's code) or request. [default: none; request \
                  for find-for-update and advisory-lock, or with --isolation]"
    )]
    pub transaction: Option<Transaction>,

    #[arg(help_heading = "Lesson 8: transactions and locks")]
    #[arg(long, value_enum, value_name = "LEVEL",
          help = with_default(
              "The request transaction's isolation level (implies --transaction request).",
              Isolation::ReadCommitted.name()))]
    pub isolation: Option<Isolation>,

    #[arg(help_heading = "Lesson 8: transactions and locks")]
    #[arg(long, value_name = "N", allow_negative_numbers = true,
          value_parser = limits::RETRY_SERIALIZATION.parser(),
          help = limits::RETRY_SERIALIZATION.help(
              "Run a request's transaction again, up to N times, when it fails to \
               serialise (40001) or deadlocks (40P01), as apps do at serializable."))]
    pub retry_serialization: Option<u64>,
}

/// Lesson 10: a hot standby of the disposable cluster, and reads from it.
#[derive(Debug, Clone, Args)]
pub struct StandbyFlags {
    /// Start a hot standby of the disposable cluster (pg_basebackup and
    /// streaming replication) beside it for the race.
    #[arg(help_heading = "Lesson 10: more than one database")]
    #[arg(long)]
    pub standby: bool,

    #[arg(help_heading = "Lesson 10: more than one database")]
    #[arg(long, value_enum, value_name = "SERVER",
          help = with_default(
              "Where the strategy's finds read: the primary, or the standby (as an app \
               with a reading role does); writes go to the primary.",
              crate::race::ReadFrom::Primary.name()))]
    pub read_from: Option<crate::race::ReadFrom>,

    #[arg(help_heading = "Lesson 10: more than one database")]
    #[arg(long, value_name = "MS", allow_negative_numbers = true,
          value_parser = limits::REPLICA_DELAY_MS.parser(),
          help = limits::REPLICA_DELAY_MS.help(
              "The standby's recovery_min_apply_delay: how long it waits before applying \
               a commit, so that its lag shows."))]
    pub replica_delay_ms: Option<u64>,

    #[arg(help_heading = "Lesson 10: more than one database")]
    #[arg(long, value_enum, value_name = "MODE",
          help = with_default(
              "How the app's commits wait for the standby: off (asynchronous replication, \
               PostgreSQL's default) or remote_apply (until the standby has applied them).",
              crate::race::Synchronous::Off.name()))]
    pub synchronous: Option<crate::race::Synchronous>,

    #[arg(help_heading = "Lesson 10: more than one database")]
    #[arg(long, value_name = "MS", allow_negative_numbers = true,
          value_parser = limits::LINK_DELAY_MS.parser(),
          help = limits::LINK_DELAY_MS.help(
              "The standby's WAL crosses a relay of idem's that holds it this long, as a \
               link between two sites would; --failover cuts it."))]
    pub link_delay_ms: Option<u64>,

    /// A hot standby of the --database-url server, which idem only reads
    /// (with --read-from standby, the finds go there); never promoted,
    /// stopped or reconfigured.
    #[arg(help_heading = "Lesson 10: more than one database")]
    #[arg(long, value_name = "URL", hide_env_values = true)]
    pub standby_url: Option<String>,

    /// Promote the standby: once the race's requests are answered, cut the
    /// link between the servers (the WAL still on it is lost), promote the
    /// standby with pg_promote(), and send the completed request again to it.
    #[arg(help_heading = "Lesson 10: more than one database")]
    #[arg(long, value_enum, value_name = "WHEN")]
    pub failover: Option<crate::race::Failover>,
}

impl StandbyFlags {
    /// Where the tables live, with the user's standby if one is named;
    /// refuses a standby idem would have to make of a user's server.
    pub fn connect(
        &self,
        connect: &super::connection::ConnectArgs,
    ) -> anyhow::Result<crate::db::ConnectOptions> {
        if self.standby && connect.database_url.is_some() {
            anyhow::bail!(
                "--standby starts a standby of idem's own disposable cluster; idem never \
                 promotes, stops or reconfigures your server: drop --database-url, or name \
                 your standby with --standby-url"
            );
        }
        Ok(crate::db::ConnectOptions {
            standby_url: self.standby_url.clone(),
            ..connect.options()
        })
    }

    /// `input` with what these flags say.
    pub fn input(&self, input: RaceInput) -> RaceInput {
        RaceInput {
            standby: said(self.standby || self.standby_url.is_some(), true),
            standby_yours: self.standby_url.is_some(),
            read_from: self.read_from,
            replica_delay_ms: self.replica_delay_ms,
            synchronous: self.synchronous,
            link_delay_ms: self.link_delay_ms,
            failover: self.failover,
            ..input
        }
    }
}

/// Lesson 7: faults on purpose.
#[derive(Debug, Clone, Args)]
pub struct FaultFlags {
    /// Crash on purpose: the connection of the first worker to reach POINT
    /// (or of worker N only) dies, and the worker with it; after the lock
    /// timeout its request is retried. POINT: after-claim, during-work,
    /// before-complete. E.g. --crash after-claim, --crash worker=2,at=during-work.
    #[arg(help_heading = "Lesson 7: faults and recovery")]
    #[arg(long, value_name = "[worker=N,]at=POINT", value_parser = crash_plan)]
    pub crash: Option<CrashPlan>,

    /// Over --http: the client of the first worker to start its work (or
    /// of worker N) closes its connection halfway through the work, as a
    /// client whose timeout fired, then retries while it is answered 409.
    /// What the app does with the abandoned request is --on-hangup's.
    /// E.g. --hang-up worker=2,at=during-work.
    #[arg(help_heading = "Lesson 9: a request's life")]
    #[arg(long, value_name = "[worker=N,]at=during-work", value_parser = hang_up_plan)]
    pub hang_up: Option<CrashPlan>,

    /// Have another session terminate the connection of the first worker to
    /// start its work, halfway through it; the worker itself lives on.
    #[arg(help_heading = "Lesson 7: faults and recovery")]
    #[arg(long)]
    pub kill_connection: bool,

    /// Make worker N's work fail (the award service errors), then retry it.
    #[arg(help_heading = "Lesson 7: faults and recovery")]
    #[arg(long, value_name = "N", allow_negative_numbers = true,
          value_parser = limits::FAIL_WORK.parser())]
    pub fail_work: Option<u64>,

    #[arg(help_heading = "Lesson 7: faults and recovery")]
    #[arg(long, value_name = "N", allow_negative_numbers = true,
          value_parser = limits::RECOVERY_RETRIES.parser(),
          help = limits::RECOVERY_RETRIES.help(
              "How many retries of a crashed or failed request are sent at once."))]
    pub recovery_retries: Option<u64>,
}

/// A switch as the builder takes it: given, or not said.
fn said(switch: bool, meaning: bool) -> Option<bool> {
    switch.then_some(meaning)
}

impl RaceFlags {
    /// What the flags say, for the one builder; `strategy` is the one the
    /// command runs (`compare` runs each in turn).
    pub fn input(&self, strategy: Option<StrategyKind>) -> RaceInput {
        RaceInput {
            workers: self.shape.workers,
            key: self.shape.key.clone(),
            http: said(self.shape.http, true),
            replicas: self.shape.replicas,
            amounts: self.amounts.amounts.clone(),
            cache_pressure: self.eviction.cache_pressure,
            crash: self.faults.crash,
            kill_connection: said(self.faults.kill_connection, true),
            fail_work: self.faults.fail_work,
            recovery_retries: self.faults.recovery_retries,
            hang_up: self.faults.hang_up,
            on_hangup: self.hangups.on_hangup,
            ..self.standby.input(app_input(
                strategy,
                &self.app,
                &self.losers,
                &self.fingerprints,
                &self.stores,
                &self.guard,
                &self.transactions,
            ))
        }
    }

    /// How many times to run the race.
    pub fn runs(&self) -> u64 {
        self.shape.runs.unwrap_or(limits::RUNS.default())
    }
}

/// What the flags that shape the app say: everything but the clients and the faults.
pub fn app_input(
    strategy: Option<StrategyKind>,
    app: &AppFlags,
    losers: &LoserFlags,
    fingerprints: &FingerprintFlags,
    stores: &StoreFlags,
    guard: &GuardFlags,
    transactions: &TransactionFlags,
) -> RaceInput {
    RaceInput {
        strategy,
        strategy_file: app.strategy_file.clone(),
        pool_size: app.pool_size,
        runner_holds_connection: said(app.no_runner_connection, false)
            .or(said(app.runner_connection, true)),
        work_ms: app.work_ms,
        checkout_timeout_ms: app.checkout_timeout_ms,
        threads: app.threads,
        orm: app.orm,
        via: app.via,
        loser: losers.loser,
        poll_ms: losers.poll_ms,
        wait_timeout_ms: losers.wait_timeout_ms,
        fingerprint: said(fingerprints.no_fingerprint, false),
        store: stores.store,
        cache_max_entries: stores.cache_max_entries,
        cache_max_age: stores.cache_max_age,
        lock_timeout_ms: guard.lock_timeout_ms,
        heartbeat_ms: guard.heartbeat_ms,
        on_failure: guard.on_failure,
        transaction: transactions.transaction,
        isolation: transactions.isolation,
        retry_serialization: transactions.retry_serialization,
        ..RaceInput::default()
    }
}
