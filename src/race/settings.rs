//! A race's settings, typed and checked once; the runner never looks at raw flags.

use std::time::Duration;

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use super::fault::FaultPoint;
use crate::db::via::Via;
use crate::limits::{self, Limit, Origin};
use crate::request::key::{self, KeyError};
use crate::store::StoreKind;
use crate::store::cache::CacheLimits;
use crate::strategy::fingerprint::Params;
use crate::strategy::guard::OnFailure;
use crate::strategy::orm::Orm;
use crate::strategy::spec::{Figure, Options, TransactionRule};
use crate::strategy::transaction::{InTransaction, Isolation, Transaction};
use crate::strategy::{ClaimInCache, LoserKind, LoserPolicy, OPERATION, Strategy, StrategyKind};

/// The key every worker sends unless `--key` says otherwise.
pub const DEFAULT_KEY: &str = "award-xp-lesson-1";

/// How long the work takes unless `--work-ms` says otherwise. See the README:
/// a real award calls services and renders a response; 20 ms is a modest
/// stand-in that keeps the race window open as it is in an application.
pub const DEFAULT_WORK_MS: u64 = limits::WORK_MS.default();

/// The guard's stale-claim timeout unless `--lock-timeout-ms` says otherwise:
/// short, so a demonstration does not wait for Stripe-like 90 seconds.
pub const DEFAULT_LOCK_TIMEOUT_MS: u64 = limits::LOCK_TIMEOUT_MS.default();

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

/// Everything one race needs to know, checked: only [`RaceInput::build`]
/// makes one, and nothing changes it after.
///
/// [`RaceInput::build`]: super::input::RaceInput::build
#[derive(Debug, Clone, Serialize)]
pub struct RaceSettings {
    pub(super) strategy: StrategyKind,
    pub(super) workers: usize,
    pub(super) pool_size: usize,
    /// The runner checks out one connection before the race and holds it.
    pub(super) runner_holds_connection: bool,
    #[serde(serialize_with = "as_millis")]
    pub(super) work: Duration,
    pub(super) key: String,
    #[serde(serialize_with = "as_millis")]
    pub(super) checkout_timeout: Duration,
    pub(super) user_id: i64,
    /// The XP every worker asks for, unless `amounts` says otherwise.
    pub(super) amount: i32,
    /// `--amounts`: worker i asks for the i-th amount (all on one key).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) amounts: Vec<i32>,
    /// The lesson the award is for.
    pub(super) lesson: i32,
    /// Whether the guard stores and checks request fingerprints (lesson 4).
    pub(super) fingerprint: bool,
    /// What a request that loses the claim does (claim-work-complete).
    #[serde(skip)]
    pub(super) loser: LoserPolicy,
    /// Where claim-work-complete keeps its claims (lesson 5).
    pub(super) store: StoreKind,
    /// The cache store's limits.
    pub(super) cache: CacheLimits,
    /// After the race: this many writes of other keys to the cache, then
    /// one retry of the same request (lesson 5's eviction demonstration).
    pub(super) cache_pressure: u64,
    /// The guard's stale-claim timeout.
    #[serde(serialize_with = "as_millis")]
    pub(super) lock_timeout: Duration,
    /// What the guard does when the work fails.
    pub(super) on_failure: OnFailure,
    /// `--fail-work N`: worker N's work fails.
    pub(super) fail_work: Option<usize>,
    /// `--crash [worker=N,]at=POINT`: a worker's connection dies at POINT,
    /// and the worker with it; after the lock timeout its request is retried.
    pub(super) crash: Option<CrashPlan>,
    /// `--kill-connection`: another session terminates the connection of
    /// the first worker to start its work; the worker lives on.
    pub(super) kill_connection: bool,
    /// How many retries of a crashed (or failed) request are sent at once.
    pub(super) recovery_retries: usize,
    /// How the workers' requests reach the strategy.
    pub(super) transport: Transport,
    /// Over HTTP: how many requests the app handles at once (its threads).
    pub(super) threads: usize,
    /// Over HTTP: how many processes of the app, each with its own pool.
    pub(super) replicas: usize,
    /// A stepped race's order of steps, one worker number each.
    #[serde(skip)]
    pub(super) schedule: Option<Vec<usize>>,
    /// Whose statements check-then-store sends (`--orm`).
    #[serde(skip)]
    pub(super) orm: Orm,
    /// How the app's pool reaches PostgreSQL (`--via`).
    pub(super) via: Via,
    /// Whether each request runs in one transaction (`--transaction`).
    pub(super) transaction: Transaction,
    /// The request transaction's isolation level (`--isolation`).
    pub(super) isolation: Isolation,
    /// How many times a request whose transaction failed to serialise is
    /// run again (`--retry-serialization`).
    pub(super) retry_serialization: u32,
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

/// A crash planned for one worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CrashPlan {
    /// The worker to crash; `None`: whichever reaches the point first.
    pub worker: Option<usize>,
    pub at: FaultPoint,
}

impl RaceSettings {
    /// What no flag or file changes, and a placeholder for the rest, which
    /// the builder fills in.
    pub(super) fn fixed() -> Self {
        Self {
            strategy: DEFAULT_STRATEGY,
            workers: limits::WORKERS.default() as usize,
            pool_size: limits::POOL_SIZE.default() as usize,
            runner_holds_connection: true,
            work: Duration::from_millis(DEFAULT_WORK_MS),
            key: DEFAULT_KEY.to_string(),
            checkout_timeout: Duration::from_millis(limits::CHECKOUT_TIMEOUT_MS.default()),
            user_id: 42,
            amount: 10,
            amounts: Vec::new(),
            lesson: 1,
            fingerprint: true,
            loser: LoserPolicy::FailFast,
            store: DEFAULT_STORE,
            cache: CacheLimits::default(),
            cache_pressure: limits::CACHE_PRESSURE.default(),
            lock_timeout: Duration::from_millis(DEFAULT_LOCK_TIMEOUT_MS),
            on_failure: DEFAULT_ON_FAILURE,
            fail_work: None,
            crash: None,
            kill_connection: false,
            recovery_retries: limits::RECOVERY_RETRIES.default() as usize,
            transport: Transport::InProcess,
            threads: limits::THREADS.default() as usize,
            replicas: 1,
            schedule: None,
            orm: Orm::Bare,
            via: Via::Direct,
            transaction: Transaction::None,
            isolation: Isolation::ReadCommitted,
            retry_serialization: 0,
        }
    }
}

impl RaceSettings {
    /// Rejects settings no race can run with, before anything starts,
    /// naming settings as `origin` wrote them.
    pub(super) fn validate_from(&self, origin: Origin) -> Result<()> {
        self.check_bounds(origin)?;
        self.check_key(origin)?;
        self.check_combinations(origin)
    }

    /// Every number within the one table of limits.
    fn check_bounds(&self, origin: Origin) -> Result<()> {
        let ms = |d: Duration| d.as_millis().min(u128::from(u64::MAX)) as u64;
        limits::WORKERS.check(self.workers as u64, origin)?;
        limits::POOL_SIZE.check(self.pool_size as u64, origin)?;
        limits::WORK_MS.check(ms(self.work), origin)?;
        limits::CHECKOUT_TIMEOUT_MS.check(ms(self.checkout_timeout), origin)?;
        for amount in &self.amounts {
            limits::AMOUNT.check(u64::try_from(*amount).unwrap_or(0), origin)?;
        }
        match self.loser {
            LoserPolicy::FailFast => {}
            LoserPolicy::Poll {
                every,
                give_up_after,
            } => {
                limits::POLL_MS.check(ms(every), origin)?;
                limits::WAIT_TIMEOUT_MS.check(ms(give_up_after), origin)?;
            }
            LoserPolicy::Block { give_up_after } => {
                limits::WAIT_TIMEOUT_MS.check(ms(give_up_after), origin)?;
            }
        }
        limits::CACHE_MAX_ENTRIES.check(self.cache.max_entries, origin)?;
        if self.cache.max_age > MAX_CACHE_AGE {
            bail!(
                "{} is longer than {} weeks (about 100 years), the longest age the cache store takes",
                origin.name("--cache-max-age", "race.cache_max_age"),
                MAX_CACHE_AGE.as_secs() / 604_800
            );
        }
        limits::CACHE_PRESSURE.check(self.cache_pressure, origin)?;
        limits::LOCK_TIMEOUT_MS.check(ms(self.lock_timeout), origin)?;
        limits::RECOVERY_RETRIES.check(self.recovery_retries as u64, origin)?;
        limits::THREADS.check(self.threads as u64, origin)?;
        limits::REPLICAS.check(self.replicas as u64, origin)?;
        limits::RETRY_SERIALIZATION.check(u64::from(self.retry_serialization), origin)?;
        if let Some(worker) = self.fail_work {
            limits::FAIL_WORK.check(worker as u64, origin)?;
        }
        if let Some(worker) = self.crash.and_then(|c| c.worker) {
            limits::CRASH_WORKER.check(worker as u64, origin)?;
        }
        Ok(())
    }

    /// A key every transport can carry: the one rule of [`key::check`].
    fn check_key(&self, origin: Origin) -> Result<()> {
        let name = origin.name("--key", "race.key");
        match key::check(&self.key) {
            Ok(()) => Ok(()),
            Err(KeyError::Empty) => bail!("{name} must not be empty"),
            Err(KeyError::TooLong(n)) => {
                bail!("{name} is {n} characters long; at most {MAX_KEY_LEN} are allowed")
            }
            Err(_) => bail!(
                "{name} may hold printable ASCII only (an Idempotency-Key is a structured-field string)"
            ),
        }
    }

    /// Settings that make sense alone but not together.
    fn check_combinations(&self, origin: Origin) -> Result<()> {
        self.check_shape(origin)?;
        self.check_store(origin)?;
        self.check_faults(origin)?;
        self.check_orm(origin)?;
        self.check_transaction(origin)?;
        self.check_via(origin)?;
        self.check_http(origin)
    }

    /// Through a pooler in transaction mode a worker's server process is
    /// its own only inside a transaction: what finds a worker by its
    /// process (`pg_backend_pid()` at checkout) would find someone else.
    fn check_via(&self, origin: Origin) -> Result<()> {
        if self.via != Via::Pgbouncer {
            return Ok(());
        }
        let via = origin.name("--via pgbouncer", "race.via = \"pgbouncer\"");
        if let Some(why) = self.needs_own_process() {
            bail!("{via} is refused here: {why}");
        }
        Ok(())
    }

    /// Why this race must reach each worker's own server process, if it
    /// must: what a pooler that lends server processes between
    /// transactions takes away.
    pub fn needs_own_process(&self) -> Option<&'static str> {
        match (self.crash, self.kill_connection, &self.schedule) {
            (Some(_), ..) | (_, true, _) => Some(
                "a fault ends the worker's server process, found by pg_backend_pid() at \
                 checkout, which through a pooler serves whichever client is in a transaction",
            ),
            (.., Some(_)) => Some(
                "a stepped race sees a worker's lock waits by its server process, which \
                 through a pooler is the worker's only inside a transaction",
            ),
            _ => None,
        }
    }

    /// How the app's pool reaches PostgreSQL.
    pub fn via(&self) -> Via {
        self.via
    }

    /// The pool, the workers and what is said of each worker.
    fn check_shape(&self, origin: Origin) -> Result<()> {
        let name = |limit: &Limit| limit.name(origin);
        if self.runner_holds_connection && self.pool_size == 1 {
            bail!(
                "{} 1 leaves no connection for the workers while the runner holds one; \
                 use a larger pool or {}",
                name(&limits::POOL_SIZE),
                origin.name(
                    "--no-runner-connection",
                    "race.runner_holds_connection = false"
                )
            );
        }
        if !self.amounts.is_empty() && self.amounts.len() != self.workers {
            bail!(
                "{} has {} values for {} workers; give one amount per worker",
                name(&limits::AMOUNT),
                self.amounts.len(),
                self.workers
            );
        }
        Ok(())
    }

    /// ActiveRecord's statements are check-then-store's, lesson 1's code.
    fn check_orm(&self, origin: Origin) -> Result<()> {
        if self.orm != Orm::Bare && self.strategy != StrategyKind::CheckThenStore {
            bail!(
                "{} {} shapes check-then-store's statements (lesson 1's code), not {}",
                origin.name("--orm", "race.orm ="),
                self.orm.name(),
                self.strategy
            );
        }
        Ok(())
    }

    /// The request's transaction, where it means something, and the locks
    /// that mean something only inside it.
    fn check_transaction(&self, origin: Origin) -> Result<()> {
        let transaction = origin.name("--transaction request", "race.transaction = \"request\"");
        if self.transaction == Transaction::None {
            if self.strategy.needs_transaction() {
                bail!(
                    "{} takes its lock inside the request's transaction; {} would release it \
                     as soon as its statement ends",
                    self.strategy,
                    origin.name("--transaction none", "race.transaction = \"none\"")
                );
            }
            if self.retry_serialization > 0 {
                bail!(
                    "{} retries the request's transaction; it needs {transaction}",
                    limits::RETRY_SERIALIZATION.name(origin)
                );
            }
            return Ok(());
        }
        let refused = match self.strategy.spec().transaction {
            TransactionRule::Refused(why) => Some(why),
            TransactionRule::Optional | TransactionRule::Needed => None,
        };
        if let Some(why) = refused {
            bail!("{transaction} is refused for {}: {why}", self.strategy);
        }
        let loser = match self.loser {
            LoserPolicy::FailFast => None,
            LoserPolicy::Poll { .. } => Some("poll gives its connection back while it waits"),
            LoserPolicy::Block { .. } => {
                Some("block already runs the claim in its own transaction")
            }
        };
        if let (true, Some(why)) = (self.strategy.has_losers(), loser) {
            bail!("{transaction} takes fail-fast losers only: {why}");
        }
        if self.store == StoreKind::Cache {
            bail!(
                "{transaction} runs on the key table; drop {}",
                origin.name("--store cache", "race.store")
            );
        }
        if self.orm != Orm::Bare {
            bail!(
                "{transaction} and {} activerecord: ActiveRecord sends no BEGIN of its own inside a \
                 transaction, so the two would be the same race",
                origin.name("--orm", "race.orm =")
            );
        }
        if self.crash.is_some() || self.kill_connection {
            bail!("the crash and kill faults are shown without {transaction}");
        }
        Ok(())
    }

    /// The cache store takes claim-work-complete's fail-fast claims only.
    fn check_store(&self, origin: Origin) -> Result<()> {
        if self.store == StoreKind::Cache {
            if self.strategy != StrategyKind::ClaimWorkComplete {
                bail!(
                    "{} applies to claim-work-complete; {} keeps no claims",
                    origin.name("--store", "race.store"),
                    self.strategy
                );
            }
            if self.loser != LoserPolicy::FailFast {
                bail!(
                    "{} cache answers losers with 409 only (fail-fast): it has no lock to wait on",
                    origin.name("--store", "race.store")
                );
            }
        }
        Ok(())
    }

    /// Faults name workers that exist, and one demonstration at a time.
    fn check_faults(&self, origin: Origin) -> Result<()> {
        let name = |limit: &Limit| limit.name(origin);
        if let Some(worker) = self.crash.and_then(|c| c.worker)
            && !(1..=self.workers).contains(&worker)
        {
            bail!(
                "{}{worker} is not one of the {} workers",
                name(&limits::CRASH_WORKER),
                self.workers
            );
        }
        if let Some(worker) = self.fail_work {
            if !(1..=self.workers).contains(&worker) {
                bail!(
                    "{} {worker} is not one of the {} workers",
                    name(&limits::FAIL_WORK),
                    self.workers
                );
            }
            if self.strategy != StrategyKind::Guard {
                bail!(
                    "{} needs {} guard: only the whole guard rescues failed work",
                    name(&limits::FAIL_WORK),
                    origin.name("--strategy", "race.strategy =")
                );
            }
        }
        if let Some(bad) = self
            .schedule
            .iter()
            .flatten()
            .find(|w| !(1..=self.workers).contains(*w))
        {
            bail!(
                "{} names worker {bad}, but there are {} workers",
                origin.name("--schedule", "race.schedule"),
                self.workers
            );
        }
        if self.crash.is_some() && self.kill_connection {
            bail!(
                "{} and {} are two demonstrations; choose one",
                origin.name("--crash", "race.crash"),
                origin.name("--kill-connection", "race.kill_connection")
            );
        }
        if (self.crash.is_some() || self.kill_connection) && self.store == StoreKind::Cache {
            bail!(
                "faults are shown on the key table; drop {} cache",
                origin.name("--store", "race.store =")
            );
        }
        Ok(())
    }

    /// What a race over the wire cannot do.
    fn check_http(&self, origin: Origin) -> Result<()> {
        let name = |limit: &Limit| limit.name(origin);
        if self.replicas > 1 && self.transport != Transport::Http {
            bail!(
                "{} are processes of the app; race them over the wire with {}",
                name(&limits::REPLICAS),
                origin.name("--http", "race.http = true")
            );
        }
        if self.replicas > 1 && (self.fail_work.is_some() || self.store == StoreKind::Cache) {
            bail!(
                "{} race the course's app as it serves; --fail-work and the cache store stay with one",
                name(&limits::REPLICAS)
            );
        }
        if self.transport == Transport::Http {
            let http = origin.name("--http", "race.http = true");
            if self.crash.is_some() || self.kill_connection {
                bail!(
                    "{http} races requests on the wire; the crash and kill faults are in-process only"
                );
            }
            if self.cache_pressure > 0 {
                bail!(
                    "{http} does not send the cache traffic of {}; race in-process",
                    name(&limits::CACHE_PRESSURE)
                );
            }
            if self.workers > MAX_HTTP_WORKERS {
                bail!(
                    "{http} opens one connection per worker, both ends in this process: \
                     at most {MAX_HTTP_WORKERS} workers"
                );
            }
        }
        Ok(())
    }

    /// What worker `worker` (from 1) asks for.
    pub fn params(&self, worker: usize) -> Params {
        Params {
            operation: OPERATION,
            user_id: self.user_id,
            amount: self.amounts.get(worker - 1).copied().unwrap_or(self.amount),
            lesson: self.lesson,
        }
    }

    /// The connections the workers can get: the pool less the runner's.
    pub fn worker_connections(&self) -> usize {
        self.pool_size - usize::from(self.runner_holds_connection)
    }

    /// The XP rows the course predicts for these settings, when the race
    /// window is wide: the figure a run is compared with.
    pub fn lesson_figure(&self) -> u64 {
        // Round robin: replica i gets every replicas-th request.
        let at =
            |i: usize| self.workers / self.replicas + usize::from(i < self.workers % self.replicas);
        let figure = match self.strategy.spec().figure {
            Figure::EveryWorker => self.workers,
            // The request's transaction rolls the losers' rows back.
            _ if self.transaction == Transaction::Request => 1,
            // Per replica, as many as got a connection there.
            Figure::PerConnection => (0..self.replicas)
                .map(|i| at(i).min(self.worker_connections()))
                .sum(),
            // One claim per replica that got a request.
            Figure::PerProcess => self.replicas.min(self.workers),
            Figure::One => 1,
        };
        figure as u64
    }

    pub fn work_ms(&self) -> u64 {
        self.work.as_millis() as u64
    }

    /// The strategy itself, with its claims in the chosen store.
    /// The one place a strategy is made: every setting that shapes it
    /// (store, loser, lock timeout, on-failure) is honoured here.
    pub fn build_strategy(&self) -> Box<dyn Strategy> {
        if self.store == StoreKind::Cache {
            return Box::new(ClaimInCache {
                limits: self.cache,
                claim_ttl: Duration::from_secs(60),
                keep_for: Duration::from_secs(24 * 3600),
            });
        }
        let strategy = (self.strategy.spec().build)(&Options {
            orm: self.orm,
            loser: self.loser,
            lock_timeout: self.lock_timeout,
            on_failure: self.on_failure,
        });
        match self.transaction {
            Transaction::None => strategy,
            Transaction::Request => Box::new(InTransaction {
                inner: strategy,
                isolation: self.isolation,
                retries: self.retry_serialization,
            }),
        }
    }

    /// The loser policy's name, for strategies that have losers.
    pub fn loser_kind(&self) -> Option<LoserKind> {
        self.strategy.has_losers().then(|| self.loser.kind())
    }
}

/// What the settings say, one reader per setting (some only idem's tests read).
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
impl RaceSettings {
    pub fn strategy(&self) -> StrategyKind {
        self.strategy
    }

    pub fn workers(&self) -> usize {
        self.workers
    }

    pub fn pool_size(&self) -> usize {
        self.pool_size
    }

    pub fn runner_holds_connection(&self) -> bool {
        self.runner_holds_connection
    }

    pub fn work(&self) -> Duration {
        self.work
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    pub fn checkout_timeout(&self) -> Duration {
        self.checkout_timeout
    }

    pub fn user_id(&self) -> i64 {
        self.user_id
    }

    pub fn amount(&self) -> i32 {
        self.amount
    }

    pub fn amounts(&self) -> &[i32] {
        &self.amounts
    }

    pub fn lesson(&self) -> i32 {
        self.lesson
    }

    pub fn fingerprint(&self) -> bool {
        self.fingerprint
    }

    pub fn loser(&self) -> LoserPolicy {
        self.loser
    }

    pub fn store(&self) -> StoreKind {
        self.store
    }

    pub fn cache(&self) -> CacheLimits {
        self.cache
    }

    pub fn cache_pressure(&self) -> u64 {
        self.cache_pressure
    }

    pub fn lock_timeout(&self) -> Duration {
        self.lock_timeout
    }

    pub fn on_failure(&self) -> OnFailure {
        self.on_failure
    }

    pub fn fail_work(&self) -> Option<usize> {
        self.fail_work
    }

    pub fn crash(&self) -> Option<CrashPlan> {
        self.crash
    }

    pub fn kill_connection(&self) -> bool {
        self.kill_connection
    }

    pub fn recovery_retries(&self) -> usize {
        self.recovery_retries
    }

    pub fn transport(&self) -> Transport {
        self.transport
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    pub fn replicas(&self) -> usize {
        self.replicas
    }

    pub fn orm(&self) -> Orm {
        self.orm
    }

    pub fn transaction(&self) -> Transaction {
        self.transaction
    }

    pub fn isolation(&self) -> Isolation {
        self.isolation
    }

    pub fn retry_serialization(&self) -> u32 {
        self.retry_serialization
    }

    pub fn schedule(&self) -> Option<&[usize]> {
        self.schedule.as_deref()
    }
}

fn as_millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}
