//! What a race's settings may not be as a whole (each option group checks its own in its file): each check refuses, in one line and before anything starts, a value or a combination no race can run with, naming each setting as the user wrote it (a flag or a scenario file's key).

use anyhow::{Result, bail};

use super::fault::FaultPoint;
use super::options::{HangUpPlan, MAX_CACHE_AGE, ReadFrom, Synchronous};
use super::settings::{MAX_HTTP_WORKERS, MAX_KEY_LEN, RaceSettings, Transport};
use crate::db::via::Via;
use crate::limits::{self, Limit, Origin};
use crate::request::key::{self, KeyError};
use crate::store::StoreKind;
use crate::strategy::orm::Orm;
use crate::strategy::redis_plan::{MaxmemoryPolicy, RedisPlan, RedisRelease};
use crate::strategy::spec::{Can, TransactionRule};
use crate::strategy::transaction::Transaction;
use crate::strategy::{LoserPolicy, StrategyKind};

impl RaceSettings {
    /// Rejects settings no race can run with, before anything starts,
    /// naming settings as `origin` wrote them.
    pub(super) fn validate_from(&self, origin: Origin) -> Result<()> {
        self.check_bounds(origin)?;
        self.check_key(origin)?;
        self.check_combinations(origin)
    }

    /// What the one table of bounds (checked where each number was said,
    /// see `RaceInput::check_said`) cannot see: how the numbers agree.
    fn check_bounds(&self, origin: Origin) -> Result<()> {
        self.requests
            .asks()
            .check(self.requests.workers(), origin)?;
        self.check_cache_bounds(origin)
    }

    /// A key every transport can carry: the one rule of [`key::check`].
    fn check_key(&self, origin: Origin) -> Result<()> {
        let name = origin.name("--key", "race.key");
        match key::check(self.requests.key()) {
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
        self.check_guard_file(origin)?;
        self.check_standby(origin)?;
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
        if self.app.pool.via() != Via::Pgbouncer {
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
        match (
            self.faults.crash(),
            self.faults.kill_connection(),
            self.requests.schedule(),
        ) {
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

    /// The pool, the workers and what is said of each worker.
    fn check_shape(&self, origin: Origin) -> Result<()> {
        let name = |limit: &Limit| limit.name(origin);
        if self.app.pool.runner_holds_connection() && self.app.pool.size() == 1 {
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
        Ok(())
    }

    /// A guard file sends its own statements, on the key table, and its
    /// losers read the claim (fail-fast) or read it again (poll).
    fn check_guard_file(&self, origin: Origin) -> Result<()> {
        let Some(file) = self.app.guard_file else {
            return Ok(());
        };
        let name = &file.name;
        if self.app.orm != Orm::Bare {
            bail!(
                "{} shapes the course's statements; {name} sends its own",
                origin.name("--orm", "race.orm")
            );
        }
        if self.store.kind() == StoreKind::Cache {
            bail!(
                "{name} keeps its claims in its own statements; drop {}",
                origin.name("--store cache", "race.store")
            );
        }
        if let LoserPolicy::Block { .. } = self.app.loser {
            bail!(
                "{} block runs the course's claim in a transaction of its own; {name}'s losers \
                 take fail-fast or poll",
                origin.name("--loser", "race.loser =")
            );
        }
        Ok(())
    }

    /// ActiveRecord's statements are check-then-store's, lesson 1's code.
    fn check_orm(&self, origin: Origin) -> Result<()> {
        if self.app.orm != Orm::Bare && !self.app.strategy.spec().can.orm {
            bail!(
                "{} {} shapes {}'s statements (lesson 1's code), not {}",
                origin.name("--orm", "race.orm ="),
                self.app.orm.name(),
                able(|c| c.orm),
                self.app.strategy
            );
        }
        Ok(())
    }

    /// What a race over the wire cannot do.
    fn check_http(&self, origin: Origin) -> Result<()> {
        let name = |limit: &Limit| limit.name(origin);
        if self.app.replicas > 1 && self.requests.transport() != Transport::Http {
            bail!(
                "{} are processes of the app; race them over the wire with {}",
                name(&limits::REPLICAS),
                origin.name("--http", "race.http = true")
            );
        }
        if self.app.replicas > 1
            && (self.faults.fail_work().is_some() || self.store.kind() == StoreKind::Cache)
        {
            bail!(
                "{} race the course's app as it serves; --fail-work and the cache store stay with one",
                name(&limits::REPLICAS)
            );
        }
        if self.requests.transport() == Transport::Http {
            let http = origin.name("--http", "race.http = true");
            if self.faults.crash().is_some() || self.faults.kill_connection() {
                bail!(
                    "{http} races requests on the wire; the crash and kill faults are in-process only"
                );
            }
            if self.requests.asks().one_lesson().is_none() {
                bail!(
                    "{http} sends every request to one URL, /lessons/N/complete; race {} in-process",
                    name(&limits::LESSONS)
                );
            }
            if self.store.cache_pressure() > 0 {
                bail!(
                    "{http} does not send the cache traffic of {}; race in-process",
                    name(&limits::CACHE_PRESSURE)
                );
            }
            if self.requests.workers() > MAX_HTTP_WORKERS {
                bail!(
                    "{http} opens one connection per worker, both ends in this process: \
                     at most {MAX_HTTP_WORKERS} workers"
                );
            }
        }
        Ok(())
    }

    /// The cache store's age, a duration the table of whole numbers has not.
    pub(super) fn check_cache_bounds(&self, origin: Origin) -> Result<()> {
        if self.store.cache().max_age > MAX_CACHE_AGE {
            bail!(
                "{} is longer than {} weeks (about 100 years), the longest age the cache store takes",
                origin.name("--cache-max-age", "race.cache_max_age"),
                MAX_CACHE_AGE.as_secs() / 604_800
            );
        }
        Ok(())
    }

    /// A replica beside Redis is idem's to start, and its failover and
    /// `WAIT` need one.
    fn check_redis_replica(&self, origin: Origin) -> Result<()> {
        let plan = self.store.redis();
        let name = |flag, key| origin.name(flag, key);
        if plan.failover.is_some() && plan.replica.is_none() {
            bail!(
                "{} promotes Redis's replica: add --redis-replica in-step (or behind)",
                name("--redis-failover", "race.redis_failover")
            );
        }
        if plan.wait_ms.is_some() && plan.replica.is_none() {
            bail!(
                "{} waits for Redis's replica to acknowledge the claim: add --redis-replica \
                 in-step (or behind)",
                name("--redis-wait-ms", "race.redis_wait_ms")
            );
        }
        if plan.replica.is_some() && self.redis_url.is_some() {
            bail!(
                "{} starts a replica beside a Redis of idem's own, and idem kills its primary \
                 to fail over: drop --redis-url",
                name("--redis-replica", "race.redis_replica")
            );
        }
        if plan.replica.is_some() && plan.pressure > 0 {
            bail!(
                "{} and {} are two lessons: a replica's memory is its own, and the traffic \
                 would fill one server of two; race them apart",
                name("--redis-replica", "race.redis_replica"),
                name("--redis-pressure", "race.redis_pressure")
            );
        }
        Ok(())
    }

    /// The cache store and Redis take claim-work-complete's fail-fast
    /// claims only, with no request transaction (Redis is no part of one),
    /// and Redis's settings need Redis.
    pub(super) fn check_store(&self, origin: Origin) -> Result<()> {
        let plan = self.store.redis();
        let said_redis = plan != RedisPlan::default();
        if said_redis && self.store.kind() != StoreKind::Redis {
            bail!(
                "--redis-claim, --redis-ttl-ms, --redis-fence, --redis-eviction, \
                 --redis-pressure, --redis-release, --redis-heartbeat-ms, --redis-replica, \
                 --redis-failover and --redis-wait-ms set the claim in Redis: add --store redis"
            );
        }
        if self.redis_url.is_some() && self.store.kind() != StoreKind::Redis {
            bail!("--redis-url names the Redis for the claims: add --store redis");
        }
        if self.redis_url.is_some() && plan.pressure > 0 {
            bail!(
                "{} fills Redis and sets its maxmemory, a change idem makes only to a Redis \
                 of its own: drop --redis-url",
                origin.name("--redis-pressure", "race.redis_pressure")
            );
        }
        if plan.release != RedisRelease::default() && self.faults.fail_work().is_none() {
            bail!(
                "{} is how an owner whose work failed lets its claim go: add --fail-work N",
                origin.name("--redis-release", "race.redis_release")
            );
        }
        self.check_redis_replica(origin)?;
        if plan.eviction != MaxmemoryPolicy::default() && plan.pressure == 0 {
            bail!(
                "{} decides what a full Redis drops, and nothing fills it: add --redis-pressure",
                origin.name("--redis-eviction", "race.redis_eviction")
            );
        }
        if self.store.kind() == StoreKind::Redis
            && (self.app.transaction.scope() != crate::strategy::transaction::Transaction::None
                || self.app.guard_file.is_some())
        {
            bail!(
                "{} redis keeps the claim outside the database: no request transaction takes \
                 it in, and a guard file's steps are SQL",
                origin.name("--store", "race.store")
            );
        }
        if self.store.kind() != StoreKind::Table {
            if self.app.strategy == crate::strategy::StrategyKind::Guard {
                bail!(
                    "{} applies to claim-work-complete; the guard's claim is a row of the key \
                     table, and its completion commits with its work in one transaction there. \
                     Its design with the claim in Redis is claim-work-complete --store redis \
                     --redis-fence (the owner check) --redis-heartbeat-ms MS (the heartbeat)",
                    origin.name("--store", "race.store")
                );
            }
            if !self.app.strategy.spec().can.cache_claims {
                bail!(
                    "{} applies to {}; {} keeps no claims",
                    origin.name("--store", "race.store"),
                    able(|c| c.cache_claims),
                    self.app.strategy
                );
            }
            if self.app.loser != LoserPolicy::FailFast {
                bail!(
                    "{} {} answers losers with 409 only (fail-fast): it has no lock to wait on",
                    origin.name("--store", "race.store"),
                    self.store.kind().name()
                );
            }
        }
        Ok(())
    }

    /// `--heartbeat-ms`: the guard's, and at least twice a stale-claim age.
    pub(super) fn check_heartbeat(&self, origin: Origin) -> Result<()> {
        let Some(every) = self.app.recovery.heartbeat() else {
            return Ok(());
        };
        let name = |limit: &Limit| limit.name(origin);
        let file_renews = self.app.guard_file.is_some_and(|f| {
            f.statement(crate::strategy::guard_file::StepName::Renew)
                .is_some()
        });
        if !self.app.strategy.spec().can.heartbeat && !file_renews {
            bail!(
                "{} needs {} {} (or a guard file with a renew step): only those renew a claim",
                name(&limits::HEARTBEAT_MS),
                origin.name("--strategy", "race.strategy ="),
                able(|c| c.heartbeat)
            );
        }
        let stale = self.app.recovery.stale_after();
        if every * 2 > stale {
            bail!(
                "{} {} is more than half {} {}: a claim could go stale between two beats",
                name(&limits::HEARTBEAT_MS),
                every.as_millis(),
                name(&limits::STALE_AFTER_MS),
                stale.as_millis()
            );
        }
        Ok(())
    }

    /// The request's transaction, where it means something, and the locks
    /// that mean something only inside it.
    pub(super) fn check_transaction(&self, origin: Origin) -> Result<()> {
        let transaction = origin.name("--transaction request", "race.transaction = \"request\"");
        let strategy = self.app.strategy;
        if self.app.transaction.scope() == Transaction::None {
            if strategy.needs_transaction() {
                bail!(
                    "{strategy} takes its lock inside the request's transaction; {} would release it \
                     as soon as its statement ends",
                    origin.name("--transaction none", "race.transaction = \"none\"")
                );
            }
            if self.app.transaction.retries() > 0 {
                bail!(
                    "{} retries the request's transaction; it needs {transaction}",
                    limits::RETRY_SERIALIZATION.name(origin)
                );
            }
            return Ok(());
        }
        if let TransactionRule::Refused(why) = strategy.spec().transaction {
            bail!("{transaction} is refused for {strategy}: {why}");
        }
        let loser = match self.app.loser {
            LoserPolicy::FailFast => None,
            LoserPolicy::Poll { .. } => Some("poll gives its connection back while it waits"),
            LoserPolicy::Block { .. } => {
                Some("block already runs the claim in its own transaction")
            }
        };
        if let (true, Some(why)) = (strategy.has_losers(), loser) {
            bail!("{transaction} takes fail-fast losers only: {why}");
        }
        if self.store.kind() == StoreKind::Cache {
            bail!(
                "{transaction} runs on the key table; drop {}",
                origin.name("--store cache", "race.store")
            );
        }
        if self.app.orm != Orm::Bare {
            bail!(
                "{transaction} and {} activerecord: ActiveRecord sends no BEGIN of its own inside a \
                 transaction, so the two would be the same race",
                origin.name("--orm", "race.orm =")
            );
        }
        if self.faults.crash().is_some() || self.faults.kill_connection() {
            bail!("the crash and kill faults are shown without {transaction}");
        }
        Ok(())
    }

    /// Faults name workers that exist, and one demonstration at a time.
    pub(super) fn check_faults(&self, origin: Origin) -> Result<()> {
        let workers = self.requests.workers();
        if let Some(worker) = self.faults.crash().and_then(|c| c.worker)
            && !(1..=workers).contains(&worker)
        {
            bail!(
                "{}{worker} is not one of the {workers} workers",
                limits::CRASH_WORKER.name(origin),
            );
        }
        if let Some(worker) = self.faults.fail_work() {
            self.check_fail_work(worker, origin)?;
        }
        if let Some(hang_up) = self.faults.hang_up() {
            self.check_hang_up(hang_up, origin)?;
        }
        self.check_heartbeat(origin)?;
        if let Some(bad) = self
            .requests
            .schedule()
            .into_iter()
            .flatten()
            .filter_map(|m| m.worker())
            .find(|w| !(1..=workers).contains(w))
        {
            bail!(
                "{} names worker {bad}, but its workers are numbered 1 to {workers}",
                origin.name("--schedule", "race.schedule"),
            );
        }
        if self.faults.crash().is_some() && self.faults.kill_connection() {
            bail!(
                "{} and {} are two demonstrations; choose one",
                origin.name("--crash", "race.crash"),
                origin.name("--kill-connection", "race.kill_connection")
            );
        }
        if (self.faults.crash().is_some() || self.faults.kill_connection())
            && self.store.kind() == StoreKind::Cache
        {
            bail!(
                "faults are shown on the key table; drop {} cache",
                origin.name("--store", "race.store =")
            );
        }
        Ok(())
    }

    /// `--fail-work N`: a worker of the race, and a guard that rescues it.
    fn check_fail_work(&self, worker: usize, origin: Origin) -> Result<()> {
        let name = |limit: &Limit| limit.name(origin);
        if !(1..=self.requests.workers()).contains(&worker) {
            bail!(
                "{} {worker} is not one of the {} workers",
                name(&limits::FAIL_WORK),
                self.requests.workers()
            );
        }
        let file_claims = self
            .app
            .guard_file
            .is_some_and(|f| f.shape == crate::strategy::guard_file::Shape::ClaimWorkComplete);
        let redis = self.store.kind() == StoreKind::Redis;
        if !self.app.strategy.spec().can.rescue && !file_claims && !redis {
            bail!(
                "{} needs {} {} (or a claim-work-complete guard file, whose release \
                 step lets the claim go, or --store redis): only those rescue failed work",
                name(&limits::FAIL_WORK),
                origin.name("--strategy", "race.strategy ="),
                able(|c| c.rescue)
            );
        }
        Ok(())
    }

    /// A hang-up is a client's, over the wire to the app in this process
    /// (which tells the client when the work begins), during the work.
    fn check_hang_up(&self, plan: HangUpPlan, origin: Origin) -> Result<()> {
        let name = origin.name("--hang-up", "race.hang_up");
        if self.requests.transport() != Transport::Http {
            bail!(
                "{name} closes a client's connection: race over the wire with {}",
                origin.name("--http", "race.http = true")
            );
        }
        if self.app.replicas > 1 {
            bail!(
                "{name} needs the app in this process, which tells the client when the work \
                 begins; drop {}",
                limits::REPLICAS.name(origin)
            );
        }
        if plan.at != FaultPoint::DuringWork {
            bail!(
                "{name} at={}: a client hangs up during-work only (it sees no other step)",
                plan.at.name()
            );
        }
        let workers = self.requests.workers();
        if let Some(worker) = plan.worker
            && !(1..=workers).contains(&worker)
        {
            bail!("{name} worker={worker} is not one of the {workers} workers");
        }
        Ok(())
    }

    /// A standby races in-process for now, and only finds that are plain
    /// reads go to it.
    pub(super) fn check_standby(&self, origin: Origin) -> Result<()> {
        let Some(plan) = self.app.standby else {
            return Ok(());
        };
        if plan.failover.is_some() {
            self.check_failover(origin)?;
        }
        let standby = origin.name("--standby", "race.standby");
        if self.app.replicas > 1 {
            bail!(
                "{standby} stands beside one app process for now; drop {}",
                origin.name("--replicas", "race.replicas")
            );
        }
        if self.app.pool.via() != Via::Direct && plan.synchronous == Synchronous::RemoteApply {
            bail!(
                "--synchronous remote_apply is each session's synchronous_commit, which \
                 PgBouncer does not pass at start-up; drop {}",
                origin.name("--via", "race.via")
            );
        }
        if plan.failover.is_some() && self.requests.transport() == Transport::Http {
            bail!(
                "{} points idem's own pool at the new primary, and an app over HTTP keeps its \
                 own: race in-process (drop {})",
                origin.name("--failover", "race.failover"),
                origin.name("--http", "race.http")
            );
        }
        if self.requests.schedule().is_some() {
            bail!("{standby} is for `idem race`; idem step drives one server");
        }
        self.check_reads_on_standby(origin)
    }

    /// `--read-from standby`: a plain find, outside a request transaction.
    fn check_reads_on_standby(&self, origin: Origin) -> Result<()> {
        if self.app.read_from != ReadFrom::Standby {
            return Ok(());
        }
        let reads = origin.name("--read-from standby", "race.read_from = \"standby\"");
        let plain_find = match self.app.guard_file {
            Some(_) => true,
            None => self.app.strategy.finds_by_reading(),
        };
        if !plain_find || self.app.orm != Orm::Bare {
            bail!(
                "{reads} sends check-then-store's find and claim-work-complete's read of the claim \
                 to the standby; {} has no plain find to send there",
                self.app.strategy
            );
        }
        if self.app.transaction.scope() == Transaction::Request {
            bail!(
                "{reads}: a find on the standby is outside the request's transaction; drop {}",
                origin.name("--transaction request", "race.transaction")
            );
        }
        Ok(())
    }

    /// A failover sends the completed request again to the new primary:
    /// another fault beside it would muddle whose retry is whose.
    fn check_failover(&self, origin: Origin) -> Result<()> {
        let failover = origin.name("--failover", "race.failover");
        let f = &self.faults;
        let other = [
            (f.crash().is_some(), origin.name("--crash", "race.crash")),
            (
                f.kill_connection(),
                origin.name("--kill-connection", "race.kill_connection"),
            ),
            (
                f.fail_work().is_some(),
                origin.name("--fail-work", "race.fail_work"),
            ),
            (
                f.hang_up().is_some(),
                origin.name("--hang-up", "race.hang_up"),
            ),
            (
                self.store.cache_pressure() > 0,
                origin.name("--cache-pressure", "race.cache_pressure"),
            ),
        ];
        if let Some((_, name)) = other.into_iter().find(|(given, _)| *given) {
            bail!("{failover} retries the completed request on the new primary; drop {name}");
        }
        Ok(())
    }
}

/// The strategies able to take an option (see [`Can`]), as its refusal
/// names them: `guard`, or `a or b`.
pub(super) fn able(can: fn(Can) -> bool) -> String {
    let names: Vec<&str> = StrategyKind::ALL
        .iter()
        .filter(|k| can(k.spec().can))
        .map(|k| k.name())
        .collect();
    names.join(" or ")
}
