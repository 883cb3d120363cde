//! A race's settings, typed and checked once; the runner never looks at raw flags.

use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use super::options::{CrashPlan, DEFAULT_KEY, Transport};
use super::options::{Faults, Pool, ReadFrom, Requests, StandbyPlan, Store, TransactionPlan};
use crate::http::app::OnHangup;
use crate::http::caller::KeyScope;
use crate::store::StoreKind;
use crate::strategy::fingerprint::Params;
use crate::strategy::guard::Recovery;
use crate::strategy::guard_file::{FileGuard, GuardRef};
use crate::strategy::orm::Orm;
use crate::strategy::spec::{Figure, Options};
use crate::strategy::transaction::{InTransaction, Transaction};
use crate::strategy::{ClaimInCache, LoserKind, LoserPolicy, OPERATION, Strategy, StrategyKind};

/// The guard shape `idem race` runs unless told otherwise: lesson 1's.
pub const DEFAULT_STRATEGY: StrategyKind = StrategyKind::CheckThenStore;

pub use crate::request::MAX_KEY_LEN;

/// Everything one race needs to know, checked, in its groups: only
/// [`RaceInput::build`] makes one (and an app replica, from the app group
/// it is sent), and nothing changes it after.
///
/// [`RaceInput::build`]: super::options::RaceInput::build
#[derive(Debug, Clone)]
pub struct RaceSettings {
    pub(super) requests: Requests,
    pub(super) app: App,
    pub(super) store: Store,
    /// `--redis-url`: the user's Redis for `--store redis`, never printed.
    pub(super) redis_url: Option<crate::db::redis_url::RedisUrl>,
    pub(super) faults: Faults,
}

/// The app the workers call: its strategy and everything that shapes it,
/// its pool, its work, its threads and processes, group by group. An app
/// replica is sent this record as it is.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct App {
    /// The strategy's shape; with a guard file, the built-in of its shape.
    pub strategy: StrategyKind,
    /// `--strategy-file`: the guard written as a file, raced in place of
    /// the built-in strategy of its shape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guard_file: Option<GuardRef>,
    /// The app's connection pool.
    pub pool: Pool,
    /// How long the work takes.
    pub work: Duration,
    /// Whose statements check-then-store sends (`--orm`).
    pub orm: Orm,
    /// Over HTTP: how many requests the app handles at once (its threads).
    pub threads: usize,
    /// Over HTTP: how many processes of the app, each with its own pool.
    pub replicas: usize,
    /// Whether the guard stores and checks request fingerprints (lesson 4).
    pub fingerprint: bool,
    /// What a request that loses the claim does (claim-work-complete).
    pub loser: LoserPolicy,
    /// How the guard recovers (lesson 7).
    pub recovery: Recovery,
    /// The request's transaction (lesson 8).
    pub transaction: TransactionPlan,
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

/// The most workers a race over HTTP opens connections for: both ends of
/// every connection live in this process, two file descriptors each.
pub const MAX_HTTP_WORKERS: usize = 2000;

impl RaceSettings {
    /// What worker `worker` (from 1) asks for.
    pub fn params(&self, worker: usize) -> Params {
        Params {
            operation: OPERATION,
            user_id: self.requests.asks().user_of(worker),
            amount: self.requests.asks().amount_of(worker),
            lesson: self.requests.asks().lesson_of(worker),
        }
    }

    /// The connections the workers can get: the pool less the runner's.
    pub fn worker_connections(&self) -> usize {
        self.app.pool.for_workers()
    }

    /// The XP rows the course predicts for these settings, when the race
    /// window is wide: the figure a run is compared with.
    pub fn lesson_figure(&self) -> u64 {
        // Round robin: replica i gets every replicas-th request.
        let at = |i: usize| {
            self.requests.workers() / self.app.replicas
                + usize::from(i < self.requests.workers() % self.app.replicas)
        };
        let figure = match self.app.strategy.spec().figure {
            Figure::EveryWorker => self.requests.workers(),
            // The request's transaction rolls the losers' rows back.
            _ if self.app.transaction.scope() == Transaction::Request => 1,
            // Per replica, as many as got a connection there.
            Figure::PerConnection => (0..self.app.replicas)
                .map(|i| at(i).min(self.worker_connections()))
                .sum(),
            // One claim per replica that got a request.
            Figure::PerProcess => self.app.replicas.min(self.requests.workers()),
            Figure::One => 1,
        };
        figure as u64
    }

    pub fn work_ms(&self) -> u64 {
        self.app.work.as_millis() as u64
    }

    /// The strategy itself, with its claims in the chosen store.
    /// The one place a strategy is made: every setting that shapes it
    /// (store, loser, stale-claim age, on-failure) is honoured here.
    pub fn build_strategy(&self) -> Box<dyn Strategy> {
        if self.store.kind() == StoreKind::Cache {
            return Box::new(ClaimInCache {
                limits: self.store.cache(),
                claim_ttl: Duration::from_secs(60),
                keep_for: Duration::from_secs(24 * 3600),
            });
        }
        let strategy = match self.app.guard_file {
            Some(file) => Box::new(FileGuard::new(
                file,
                self.app.loser,
                self.app.recovery,
                crate::strategy::guard_file::step_limit(
                    self.requests.workers(),
                    self.app.work,
                    self.app.recovery.stale_after(),
                ),
            )),
            None => (self.app.strategy.spec().build)(&Options {
                orm: self.app.orm,
                loser: self.app.loser,
                recovery: self.app.recovery,
            }),
        };
        match self.app.transaction.scope() {
            Transaction::None => strategy,
            Transaction::Request => Box::new(InTransaction {
                inner: strategy,
                isolation: self.app.transaction.isolation(),
                retries: self.app.transaction.retries(),
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

    /// Faults on purpose, and the retries that recover from them.
    pub fn faults(&self) -> &super::options::Faults {
        &self.faults
    }

    /// The strategy every worker runs.
    /// Where the claims live.
    pub fn store_kind(&self) -> crate::store::StoreKind {
        self.store.kind()
    }

    pub fn strategy(&self) -> StrategyKind {
        self.app.strategy
    }
}
