//! A race's settings, typed and checked once; the runner never looks at raw flags.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::fault::FaultPoint;
use crate::db::via::Via;
use crate::http::app::OnHangup;
use crate::http::caller::KeyScope;
use crate::store::StoreKind;
use crate::store::cache::CacheLimits;
use crate::strategy::fingerprint::Params;
use crate::strategy::guard::OnFailure;
use crate::strategy::guard_file::{FileGuard, GuardRef};
use crate::strategy::orm::Orm;
use crate::strategy::spec::{Figure, Options};
use crate::strategy::transaction::{InTransaction, Isolation, Transaction};
use crate::strategy::{ClaimInCache, LoserKind, LoserPolicy, OPERATION, Strategy, StrategyKind};

/// The key every worker sends unless `--key` says otherwise.
pub const DEFAULT_KEY: &str = "award-xp-lesson-1";

/// The guard shape `idem race` runs unless told otherwise: lesson 1's.
pub const DEFAULT_STRATEGY: StrategyKind = StrategyKind::CheckThenStore;

/// Where claims live unless told otherwise.
pub const DEFAULT_STORE: StoreKind = StoreKind::Table;

/// What the guard does with failed work unless told otherwise (Stripe's way).
pub const DEFAULT_ON_FAILURE: OnFailure = OnFailure::Store;

pub use crate::request::MAX_KEY_LEN;

/// The longest `--cache-max-age`: about a hundred years, far from where the
/// store's `now() - max_age` would leave PostgreSQL's timestamp range.
pub const MAX_CACHE_AGE: Duration = Duration::from_secs(5218 * 604_800);

/// Everything one race needs to know, checked, in its groups: only
/// [`RaceInput::build`] makes one (and an app replica, from the app group
/// it is sent), and nothing changes it after.
///
/// [`RaceInput::build`]: super::input::RaceInput::build
#[derive(Debug, Clone)]
pub struct RaceSettings {
    pub(super) requests: Requests,
    pub(super) app: App,
    pub(super) store: Store,
    pub(super) faults: Faults,
}

/// The race's requests: how many workers send one, what each asks for,
/// and how they reach the app.
#[derive(Debug, Clone)]
pub struct Requests {
    pub workers: usize,
    pub key: String,
    pub user_id: i64,
    /// The XP every worker asks for, unless `amounts` says otherwise.
    pub amount: i32,
    /// `--amounts`: worker i asks for the i-th amount (all on one key).
    pub amounts: Vec<i32>,
    /// The lesson the award is for.
    pub lesson: i32,
    /// How the workers' requests reach the strategy.
    pub transport: Transport,
    /// A stepped race's order of steps, one worker number each.
    pub schedule: Option<Vec<usize>>,
}

/// The app the workers call: its strategy and everything that shapes it,
/// its pool, its work, its threads and processes. An app replica is sent
/// this group as it is.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct App {
    /// The strategy's shape; with a guard file, the built-in of its shape.
    pub strategy: StrategyKind,
    /// `--strategy-file`: the guard written as a file, raced in place of
    /// the built-in strategy of its shape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guard_file: Option<GuardRef>,
    pub pool_size: usize,
    /// The runner checks out one connection before the race and holds it.
    pub runner_holds_connection: bool,
    /// How long the work takes.
    pub work: Duration,
    /// How long a request waits for a pooled connection.
    pub checkout_timeout: Duration,
    /// Whether the guard stores and checks request fingerprints (lesson 4).
    pub fingerprint: bool,
    /// What a request that loses the claim does (claim-work-complete).
    pub loser: LoserPolicy,
    /// The guard's stale-claim timeout.
    pub lock_timeout: Duration,
    /// How often the guard renews a running claim (`--heartbeat-ms`).
    pub heartbeat: Option<Duration>,
    /// What the guard does when the work fails.
    pub on_failure: OnFailure,
    /// Whose statements check-then-store sends (`--orm`).
    pub orm: Orm,
    /// How the app's pool reaches PostgreSQL (`--via`).
    pub via: Via,
    /// Whether each request runs in one transaction (`--transaction`).
    pub transaction: Transaction,
    /// The request transaction's isolation level (`--isolation`).
    pub isolation: Isolation,
    /// How many times a request whose transaction failed to serialise is
    /// run again (`--retry-serialization`).
    pub retry_serialization: u32,
    /// Over HTTP: how many requests the app handles at once (its threads).
    pub threads: usize,
    /// Over HTTP: how many processes of the app, each with its own pool.
    pub replicas: usize,
    /// Over HTTP: whether a key is the caller's own or everyone's.
    pub key_scope: KeyScope,
    /// Over HTTP: what the app does with a request whose client left.
    pub on_hangup: OnHangup,
    /// A hot standby of the disposable cluster beside the race (lesson 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standby: Option<StandbyPlan>,
    /// Where the strategy's finds read.
    #[serde(default)]
    pub read_from: ReadFrom,
}

/// The hot standby a race starts (`--standby`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StandbyPlan {
    /// The user's standby (`--standby-url`), which idem only reads; else
    /// one idem starts.
    #[serde(default)]
    pub yours: bool,
    /// Its `recovery_min_apply_delay` (`--replica-delay-ms`).
    pub apply_delay: Duration,
    /// How long a commit waits for it (`--synchronous`).
    #[serde(default)]
    pub synchronous: Synchronous,
    /// The delay of the link its WAL crosses, if it crosses one
    /// (`--link-delay-ms`; `--failover` needs one to cut).
    #[serde(default)]
    pub link_delay: Option<Duration>,
    /// When the standby is promoted, if it is (`--failover`).
    #[serde(default)]
    pub failover: Option<Failover>,
}

/// How the app's commits wait for the standby (`--synchronous`): the
/// `synchronous_commit` of the workers' sessions, with the standby named
/// in the primary's `synchronous_standby_names` for `remote_apply`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Synchronous {
    /// Asynchronous replication, PostgreSQL's default: a commit waits for
    /// the primary alone (`synchronous_commit = local`).
    #[default]
    Off,
    /// A commit waits until the standby has applied it, so that a read
    /// there sees it (`synchronous_commit = remote_apply`).
    #[value(name = "remote_apply")]
    RemoteApply,
}

impl Synchronous {
    /// The workers' `synchronous_commit`.
    pub fn setting(self) -> &'static str {
        match self {
            Synchronous::Off => "local",
            Synchronous::RemoteApply => "remote_apply",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Synchronous::Off => "off",
            Synchronous::RemoteApply => "remote_apply",
        }
    }
}

/// When the standby is promoted (`--failover`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Failover {
    /// Once the race's requests are answered: the link is cut, the standby
    /// promoted, and the completed request sent again to it.
    AfterComplete,
}

/// Where a strategy's finds read (`--read-from`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum ReadFrom {
    /// The primary, where the writes go.
    #[default]
    Primary,
    /// The hot standby: what it has replayed so far.
    Standby,
}

impl ReadFrom {
    pub fn name(self) -> &'static str {
        match self {
            ReadFrom::Primary => "primary",
            ReadFrom::Standby => "standby",
        }
    }
}

/// Lesson 5: where claim-work-complete keeps its claims, and the cache
/// traffic after the race.
#[derive(Debug, Clone, Copy)]
pub struct Store {
    pub kind: StoreKind,
    /// The cache store's limits.
    pub cache: CacheLimits,
    /// After the race: this many writes of other keys to the cache, then
    /// one retry of the same request (lesson 5's eviction demonstration).
    pub cache_pressure: u64,
}

/// Lesson 7: faults on purpose, and the retries that recover from them.
#[derive(Debug, Clone, Copy)]
pub struct Faults {
    /// `--fail-work N`: worker N's work fails.
    pub fail_work: Option<usize>,
    /// `--crash [worker=N,]at=POINT`: a worker's connection dies at POINT,
    /// and the worker with it; after the lock timeout its request is retried.
    pub crash: Option<CrashPlan>,
    /// `--kill-connection`: another session terminates the connection of
    /// the first worker to start its work; the worker lives on.
    pub kill_connection: bool,
    /// How many retries of a crashed (or failed) request are sent at once.
    pub recovery_retries: usize,
    /// `--hang-up [worker=N,]at=during-work`: a client closes its
    /// connection halfway through its request's work, then retries.
    pub hang_up: Option<HangUpPlan>,
}

/// How a race's requests reach the strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// Each worker is a task calling the strategy directly.
    #[default]
    InProcess,
    /// Each worker is an HTTP client with its own connection to the app
    /// (`idem serve`, started in-process on a loopback port).
    Http,
}

/// The most workers a race over HTTP opens connections for: both ends of
/// every connection live in this process, two file descriptors each.
pub const MAX_HTTP_WORKERS: usize = 2000;

/// A client that hangs up mid-request (`--hang-up`), then retries: the
/// same shape as a crash, on the client's side of the wire.
pub type HangUpPlan = CrashPlan;

/// A crash planned for one worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CrashPlan {
    /// The worker to crash; `None`: whichever reaches the point first.
    pub worker: Option<usize>,
    pub at: FaultPoint,
}

impl RaceSettings {
    /// What worker `worker` (from 1) asks for.
    pub fn params(&self, worker: usize) -> Params {
        Params {
            operation: OPERATION,
            user_id: self.requests.user_id,
            amount: self
                .requests
                .amounts
                .get(worker - 1)
                .copied()
                .unwrap_or(self.requests.amount),
            lesson: self.requests.lesson,
        }
    }

    /// The connections the workers can get: the pool less the runner's.
    pub fn worker_connections(&self) -> usize {
        self.app.pool_size - usize::from(self.app.runner_holds_connection)
    }

    /// The XP rows the course predicts for these settings, when the race
    /// window is wide: the figure a run is compared with.
    pub fn lesson_figure(&self) -> u64 {
        // Round robin: replica i gets every replicas-th request.
        let at = |i: usize| {
            self.requests.workers / self.app.replicas
                + usize::from(i < self.requests.workers % self.app.replicas)
        };
        let figure = match self.app.strategy.spec().figure {
            Figure::EveryWorker => self.requests.workers,
            // The request's transaction rolls the losers' rows back.
            _ if self.app.transaction == Transaction::Request => 1,
            // Per replica, as many as got a connection there.
            Figure::PerConnection => (0..self.app.replicas)
                .map(|i| at(i).min(self.worker_connections()))
                .sum(),
            // One claim per replica that got a request.
            Figure::PerProcess => self.app.replicas.min(self.requests.workers),
            Figure::One => 1,
        };
        figure as u64
    }

    pub fn work_ms(&self) -> u64 {
        self.app.work.as_millis() as u64
    }

    /// The strategy itself, with its claims in the chosen store.
    /// The one place a strategy is made: every setting that shapes it
    /// (store, loser, lock timeout, on-failure) is honoured here.
    pub fn build_strategy(&self) -> Box<dyn Strategy> {
        if self.store.kind == StoreKind::Cache {
            return Box::new(ClaimInCache {
                limits: self.store.cache,
                claim_ttl: Duration::from_secs(60),
                keep_for: Duration::from_secs(24 * 3600),
            });
        }
        let strategy = match self.app.guard_file {
            Some(file) => Box::new(FileGuard {
                file,
                loser: self.app.loser,
                lock_timeout: self.app.lock_timeout,
            }),
            None => (self.app.strategy.spec().build)(&Options {
                orm: self.app.orm,
                loser: self.app.loser,
                lock_timeout: self.app.lock_timeout,
                heartbeat: self.app.heartbeat,
                on_failure: self.app.on_failure,
            }),
        };
        match self.app.transaction {
            Transaction::None => strategy,
            Transaction::Request => Box::new(InTransaction {
                inner: strategy,
                isolation: self.app.isolation,
                retries: self.app.retry_serialization,
            }),
        }
    }

    /// The loser policy's name, for strategies that have losers.
    pub fn loser_kind(&self) -> Option<LoserKind> {
        self.app
            .strategy
            .has_losers()
            .then(|| self.app.loser.kind())
    }
}

/// What the settings say, group by group.
impl RaceSettings {
    /// The workers and what they ask for.
    pub fn requests(&self) -> &Requests {
        &self.requests
    }

    /// The app the workers call.
    pub fn app(&self) -> &App {
        &self.app
    }

    /// The strategy every worker runs.
    pub fn strategy(&self) -> StrategyKind {
        self.app.strategy
    }
}
