//! The race itself: a warm pool, a runner holding one connection, and N workers released together.

use crate::strategy::claim_in_redis::ClaimInRedis;
use crate::strategy::redis_plan::RedisFigures;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use super::blocking::BlockWatch;
use super::clock::Clock;
use super::options::ReadFrom;
use super::options::{catch_up_limit, with_setting};
use super::over_http::{Wire, WireEnd, run_client};
use super::result::RaceResult;
use super::settings::{RaceSettings, Transport};
use super::standby::Beside;
use super::stepper::Controller;
use super::worker_report::{WorkerReport, mark_duplicates};
use crate::db::pool::{self, Conn, Workers, warm_pool};
use crate::db::standby;
use crate::db::via::Via;
use crate::db::{Backend, Database, guard_role, pgbouncer, pooled};
use crate::http::app::{App, Watch};
use crate::request::fault::{Fault, FaultKind, FaultPoint};
use crate::request::ledger::Ledger;
use crate::request::service::ServiceCalls;
use crate::request::{Lease, Request, StepHook, Trace};
use crate::strategy::{LoserPolicy, Strategy, respond};

/// One replica's app, its strategy (to forget between runs) and the
/// runner's connection it holds.
pub struct Replica {
    pub app: App,
    pub strategy: Arc<dyn Strategy>,
    pub held: Option<Conn>,
}

/// A race ready to run, as many times as asked, with fresh tables each time.
pub struct Race<'db> {
    db: &'db Database,
    pub(super) pool: Workers,
    /// `--standby`: the hot standby and what reads it (dropped before the
    /// database closes).
    standby: Option<Beside>,
    pub(super) strategy: Arc<dyn Strategy>,
    /// `--store redis`: the same strategy, for what it measured in Redis.
    redis: Option<Arc<ClaimInRedis>>,
    /// Over HTTP: the app the workers call.
    wire: Option<Wire>,
    /// The award service's calls, over every run of this race.
    service: ServiceCalls,
    /// Set once a failover has promoted the standby.
    promoted: AtomicBool,
    pub(crate) settings: RaceSettings,
}

impl<'db> Race<'db> {
    /// Checks the settings against the server and opens the workers' pool.
    pub async fn prepare(db: &'db Database, settings: RaceSettings) -> Result<Self> {
        let strategy: Arc<dyn Strategy> = match settings.store.kind() {
            // The claims live in a redis-server of the race's own, which
            // goes with the strategy when the race ends.
            crate::store::StoreKind::Redis => {
                let redis = match &settings.redis_url {
                    Some(url) => crate::db::redis_server::Redis::reach(url).await?,
                    None => {
                        crate::db::redis_server::Redis::start(settings.store.redis().replica)
                            .await?
                    }
                };
                let plan = settings.store.redis();
                if plan.pressure > 0 {
                    redis.limit_memory(plan.eviction).await?;
                }
                let claims = Arc::new(ClaimInRedis::new(Arc::new(redis), plan));
                let mut race = Self::prepare_with(db, settings, claims.clone()).await?;
                race.redis = Some(claims);
                return Ok(race);
            }
            _ => Arc::from(settings.build_strategy()),
        };
        Self::prepare_with(db, settings, strategy).await
    }

    /// The same with a strategy of the caller's own, such as a learner's
    /// guard (`idem::challenge`); `settings.app.strategy` then only names it.
    pub async fn prepare_with(
        db: &'db Database,
        settings: RaceSettings,
        strategy: Arc<dyn Strategy>,
    ) -> Result<Self> {
        if let Some(file) = settings.app.guard_file
            && file.engine != crate::strategy::guard_file::Dialect::Postgres
        {
            bail!(
                "{} is written for {} (its engine says so): race it with --engine mariadb",
                file.name,
                file.engine.server()
            );
        }
        if let Some(file) = settings.app.guard_file
            && !db.is_disposable()
        {
            bail!(
                "{} runs only on a disposable cluster of idem's: idem cannot prove what its \
                 statements touch on your server; drop --database-url (or give the URL `idem db` prints)",
                file.name
            );
        }
        // A guard file's statements are someone else's code: the workers
        // log in as the run's guard role (see `db::guard_role`).
        let role = match settings.app.guard_file {
            Some(file) => {
                let mut tx = db.book().await?;
                let role = guard_role::grant(&mut tx, &db.schema, &file.name).await?;
                tx.commit().await?;
                Some(role)
            }
            None => None,
        };
        let own = fits(db, &settings).await?;
        let standby = match settings.app.standby {
            Some(plan) => {
                let pool_size = settings.app.pool.size();
                Some(Beside::start(db, plan, pool_size, role.as_deref()).await?)
            }
            None => None,
        };
        let mut connect = db.workers_via(settings.app().pool.via()).await?;
        if let Some(role) = &role {
            connect.config.user(role);
        }
        if let Some(plan) = settings.app.standby
            && settings.app().pool.via() == Via::Direct
        {
            // How long the app's commits wait for the standby is the
            // sessions' own setting; the bookkeeping's never waits.
            // (PgBouncer passes no settings at start-up: through it the
            // sessions keep the server's, which waits for nobody.)
            connect.config = with_setting(
                connect.config,
                "synchronous_commit",
                plan.synchronous.setting(),
            );
        }
        let pool = warm_pool(&connect, own).await?;
        // Behind replicas this process sends, and each replica starts its own.
        if settings.app.replicas == 1 {
            strategy.start(&pool).await?;
        }
        let service = ServiceCalls::default();
        let wire = match settings.requests.transport() {
            Transport::Http if settings.app.replicas > 1 => {
                Some(Wire::replicas(db, &settings).await?)
            }
            Transport::Http => {
                let reader = standby
                    .as_ref()
                    .filter(|_| settings.app.read_from == ReadFrom::Standby)
                    .map(|b| b.reader.clone());
                let wire = Wire::open(pool.clone(), strategy.clone(), &settings, &service, reader);
                Some(wire.await?)
            }
            Transport::InProcess => None,
        };
        Ok(Self {
            db,
            pool,
            standby,
            strategy,
            redis: None,
            wire,
            service,
            promoted: AtomicBool::new(false),
            settings,
        })
    }

    /// `--read-from standby`: the standby's pool the finds read from.
    fn reader(&self) -> Option<Workers> {
        match self.settings.app.read_from {
            ReadFrom::Standby => self.standby.as_ref().map(|b| b.reader.clone()),
            ReadFrom::Primary => None,
        }
    }

    /// Whether a run promotes the race's standby (`--failover`): each run
    /// then needs a race of its own (see [`Race::again`]).
    pub fn promotes(&self) -> bool {
        self.settings
            .app
            .standby
            .is_some_and(|p| p.failover.is_some())
    }

    /// The race for run `run`: this one, or after a failover has promoted
    /// its standby, a new one with a new standby.
    pub async fn again(self, run: usize) -> Result<Self> {
        if run == 1 || !self.promotes() {
            return Ok(self);
        }
        let (db, settings, strategy) = (self.db, self.settings.clone(), self.strategy.clone());
        drop(self);
        Self::prepare_with(db, settings, strategy).await
    }

    /// The app's replicas, when the race runs through several.
    fn replicas(&self) -> Option<&super::replicas::Replicas> {
        self.wire.as_ref().and_then(|w| w.replicas.as_ref())
    }

    /// Runs one race on fresh tables and counts what it left behind.
    pub async fn run(&self, run: usize) -> Result<RaceResult> {
        if self.promotes()
            && self
                .promoted
                .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            bail!("this race's standby was promoted by its failover: prepare another race");
        }
        let started = self.start(None).await?;
        self.finish(run, started).await
    }

    /// Runs one race step by step: every worker pauses before each step
    /// until `drive` lets it move (see [`Controller`]).
    pub async fn run_stepped(
        &self,
        drive: impl AsyncFnOnce(&mut Controller) -> Result<()>,
    ) -> Result<RaceResult> {
        let (mut controller, hooks) = Controller::new(
            self.settings.requests.workers(),
            super::stepper::Watch::Postgres(self.db.meta.clone()),
        );
        controller.set_clock(self.clock());
        let started = self.start(Some(hooks)).await?;
        let driven = drive(&mut controller).await;
        // Whatever the driver did, let the rest run to the end.
        controller.run_free().await;
        let result = self.finish(1, started).await;
        driven.and(result)
    }

    /// Resets the tables and takes the runner's connection, if it holds one.
    pub(super) async fn start_app(&self) -> Result<Option<pool::Conn>> {
        let s = &self.settings;
        self.db.reset().await?;
        // A standby that still shows the last run's key would answer this
        // run's finds from it: the race starts once it has replayed the reset.
        if let (Some(plan), Some(beside)) = (s.app.standby, &self.standby) {
            standby::replayed(self.db, &beside.watch, catch_up_limit(plan)).await?;
        }
        // What the strategy keeps outside the tables goes with them.
        self.strategy.forget();
        if let Some(claims) = &self.redis {
            claims.redis.ready().await?;
        }
        if let Some(replicas) = self.replicas() {
            replicas.forget().await?;
        }
        if let Some((hang_ups, _)) = self.wire.as_ref().and_then(|w| w.end.hang_ups.as_ref()) {
            hang_ups.reset();
        }

        // The runner's own connection, held for the whole race as the app's
        // main thread holds one: the pool has one fewer for the workers.
        // Over replicas, each replica's runner holds its own.
        let held = match s.app.pool.runner_holds_connection() && s.app.replicas == 1 {
            true => Some(
                pool::checkout(&self.pool, s.app.pool.checkout_timeout())
                    .await
                    .map_err(|e| {
                        anyhow::anyhow!(
                            "the runner could not get a connection: {}",
                            pool::describe(&e)
                        )
                    })?,
            ),
            false => None,
        };

        Ok(held)
    }

    /// Resets the tables, takes the runner's connection, and releases the workers.
    async fn start(&self, hooks: Option<Vec<StepHook>>) -> Result<Started> {
        let s = &self.settings;
        let held = self.start_app().await?;
        let (gate, gate_rx) = watch::channel(None::<Instant>);
        let crew = Crew {
            pool: self.pool.clone(),
            strategy: self.strategy.clone(),
            gate: gate_rx,
            ready: Arc::new(Semaphore::new(0)),
            checkout_timeout: s.app.pool.checkout_timeout(),
            strike_delay: s.app.work / 2,
            wire: self.wire.as_ref().map(|w| w.end.clone()),
            reader: self.reader(),
        };
        let fired = Arc::new(AtomicBool::new(false));
        let stepped = hooks.is_some();
        // Hooks are handed out by worker number: worker 1's is last, popped first.
        let mut hooks = hooks.map(|mut h| {
            h.sort_by_key(|h| std::cmp::Reverse(h.worker));
            h
        });
        let calls_before = self.service.count();
        let mut workers = JoinSet::new();
        for worker in 1..=s.requests.workers() {
            let mut req = Request::new(
                worker,
                s.requests.key().to_string(),
                s.params(worker),
                s.app.fingerprint,
                s.app.work,
            );
            req.work_fails = s.faults.fail_work() == Some(worker);
            req.service = Some(self.service.for_request());
            // A fault fires once, for the first worker that reaches its point
            // (or only for the named worker).
            let fault = match (s.faults.crash(), s.faults.kill_connection()) {
                (Some(crash), _) if crash.worker.is_none_or(|w| w == worker) => Some(Fault::new(
                    crash.at,
                    FaultKind::Crash,
                    self.db.meta.clone(),
                    fired.clone(),
                )),
                (_, true) => Some(Fault::new(
                    FaultPoint::DuringWork,
                    FaultKind::Kill,
                    self.db.meta.clone(),
                    fired.clone(),
                )),
                _ => None,
            };
            let hook = hooks
                .as_mut()
                .and_then(|h| h.pop_if(|h| h.worker == worker));
            workers.spawn(run(crew.clone(), req, fault.map(Arc::new), hook));
        }
        // Open the gate only when every worker stands at it.
        crew.ready
            .acquire_many(u32::try_from(s.requests.workers()).context("too many workers")?)
            .await?
            .forget();
        // Blocking losers wait on locks: watch who waits for whom.
        let watch = matches!(s.app.loser, LoserPolicy::Block { .. })
            .then(|| BlockWatch::start(self.db.meta.clone()));
        let started = Instant::now();
        gate.send_replace(Some(started));
        Ok(Started {
            held,
            crew,
            workers,
            watch,
            started,
            calls_before,
            stepped,
        })
    }

    /// The clock of a stepped race: claims aged by the stale-claim age.
    fn clock(&self) -> Clock {
        if let Some(claims) = &self.redis {
            return Clock::on_redis(claims.redis.clone());
        }
        let recovery = &self.settings.app.recovery;
        self.db
            .clock(recovery.stale_after(), recovery.heartbeat().is_some())
    }

    /// Waits for the workers, has each option do what it does after the
    /// race, and counts the rows.
    async fn finish(&self, run: usize, st: Started) -> Result<RaceResult> {
        let s = &self.settings;
        let Started {
            held,
            crew,
            mut workers,
            watch,
            started,
            calls_before,
            stepped,
        } = st;
        let mut reports = Vec::with_capacity(s.requests.workers());
        let mut pids = Vec::new();
        while let Some(joined) = workers.join_next().await {
            let (report, pid) = joined.context("a worker panicked")?;
            if let Some(pid) = pid {
                pids.push((report.worker, pid));
            }
            reports.push(report);
        }
        let elapsed = started.elapsed();
        drop(held);
        reports.sort_by_key(|r| r.worker);
        if let Some(watch) = watch {
            attribute_blocking(&mut reports, &pids, &watch.finish().await);
        }
        // A stepped race keeps time by its schedule: its clock, not a sleep.
        let clock = stepped.then(|| self.clock());
        self.after_race(&crew, &mut reports, started, clock.as_ref())
            .await?;
        let counted = self.count(&crew, &mut reports, started).await?;
        let mut result = RaceResult::new(run, s, counted.counts, reports, elapsed);
        result.service_calls = match self.replicas() {
            Some(replicas) => replicas.calls().await?,
            None => self.service.count() - calls_before,
        };
        result.standby = counted.standby;
        result.failover = counted.failover;
        result.redis = self.redis.as_ref().map(|claims| RedisFigures {
            plan: claims.plan,
            pressed: claims.pressed(),
            acknowledged: claims.acknowledged(),
            failed_over: claims.failed_over(),
        });
        Ok(result)
    }

    /// Sends `count` retries of worker `of`'s request at once, as new
    /// workers numbered after the race's, and returns their reports.
    pub(super) async fn retries(
        &self,
        crew: &Crew,
        of: usize,
        count: usize,
    ) -> Result<Vec<WorkerReport>> {
        let s = &self.settings;
        let mut retries = JoinSet::new();
        for i in 1..=count {
            let mut req = Request::new(
                s.requests.workers() + i,
                s.requests.key().to_string(),
                s.params(of),
                s.app.fingerprint,
                s.app.work,
            );
            req.service = Some(self.service.for_request());
            retries.spawn(run(crew.clone(), req, None, None));
        }
        let mut reports = Vec::new();
        while let Some(joined) = retries.join_next().await {
            let (mut report, _) = joined.context("a retry panicked")?;
            report.retry = true;
            reports.push(report);
        }
        reports.sort_by_key(|r| r.worker);
        Ok(reports)
    }
}

/// The rows the race left, counted where they live after the standby's
/// step: on the primary, or, after a failover, on the new one.
struct Counted {
    counts: crate::db::RowCounts,
    standby: Option<super::result::StandbyFigures>,
    failover: Option<super::result::FailoverFigures>,
}

impl Race<'_> {
    /// The request of worker `of` sent once more, by a new worker.
    pub(super) async fn send_again(&self, crew: &Crew, of: usize) -> WorkerReport {
        let s = &self.settings;
        let mut req = Request::new(
            s.requests.workers() + 1,
            s.requests.key().to_string(),
            s.params(of),
            s.app.fingerprint,
            s.app.work,
        );
        req.service = Some(self.service.for_request());
        run(crew.clone(), req, None, None).await.0
    }

    /// Lesson 10's step after the race: the standby's lag (before a
    /// failover cuts it off), then the failover and its retry on the new
    /// primary if one is asked for; the rows counted where they are then.
    async fn count(
        &self,
        crew: &Crew,
        reports: &mut Vec<WorkerReport>,
        started: Instant,
    ) -> Result<Counted> {
        let (s, db) = (&self.settings, self.db);
        let standby = match (s.app.standby, &self.standby) {
            (Some(plan), Some(beside)) => Some(beside.figures(db, plan, s.app.read_from).await?),
            _ => None,
        };
        if s.app.standby.and_then(|p| p.failover).is_none() {
            let counts = db.counts(s.requests.key()).await?;
            mark_duplicates(reports, counts.kept_xp);
            let failover = None;
            return Ok(Counted {
                counts,
                standby,
                failover,
            });
        }
        let beside = self
            .standby
            .as_ref()
            .context("--failover needs the standby")?;
        let retry = async |pool: Workers, worker: usize| {
            let crew = crew.on(pool);
            let retried = self.retries(&crew, worker, 1).await?.pop();
            retried.context("the retry on the new primary did not run")
        };
        let (key, pool_size) = (s.requests.key(), s.app.pool.size());
        let (figures, retry, counts) = beside
            .fail_over(db, key, pool_size, reports, started, retry)
            .await?;
        reports.push(retry);
        let failover = Some(figures);
        Ok(Counted {
            counts,
            standby,
            failover,
        })
    }
}

/// Checks that the race fits the path to the server and the server's room
/// (a pooler where it must find each worker's process, connections, and
/// PgBouncer's clients); returns how many connections this process's pool
/// opens.
async fn fits(db: &Database, settings: &RaceSettings) -> Result<usize> {
    let free = db.free_connections().await?;
    // Over replicas each process has a pool of its own; this one needs
    // a connection only for its bookkeeping.
    // The guard's heartbeat, if it beats, has a connection of its own.
    let aside = usize::from(settings.app.recovery.heartbeat().is_some());
    let (own, wanted) = match settings.app.replicas {
        1 => (settings.app.pool.size(), settings.app.pool.size() + aside),
        n => (1, n * (settings.app.pool.size() + aside) + 1),
    };
    if let (Some(why), Backend::Server { .. }) = (settings.needs_own_process(), &db.backend) {
        let pooled = pooled::look(db.workers_config()).await;
        if pooled.lends_between_transactions() {
            bail!(
                "a pooler stands between idem and PostgreSQL ({}): {why}; give the URL \
                 of PostgreSQL itself",
                pooled.describe()
            );
        }
    }
    let via = settings.app().pool.via();
    // Through PgBouncer the pools are its clients; the server sees at
    // most PgBouncer's own pool.
    let server_side = match via {
        Via::Direct => wanted,
        Via::Pgbouncer => wanted.min(pgbouncer::POOL_SIZE as usize),
    };
    if server_side as u64 > free {
        bail!(
            "--pool-size {} {}is more than the {free} connections the server has free \
             (max_connections less those in use)",
            settings.app.pool.size(),
            match settings.app.replicas {
                1 => String::new(),
                n => format!("for each of {n} replicas "),
            }
        );
    }
    if via == Via::Pgbouncer && wanted > pgbouncer::MAX_CLIENTS {
        bail!(
            "--via pgbouncer takes {} client connections at most; this race's pools \
             need {wanted}",
            pgbouncer::MAX_CLIENTS
        );
    }
    Ok(own)
}

/// A race whose workers are on their way.
struct Started {
    held: Option<pool::Conn>,
    crew: Crew,
    workers: JoinSet<(WorkerReport, Option<i32>)>,
    watch: Option<BlockWatch>,
    started: Instant,
    /// The service's calls before this run's workers started.
    calls_before: u64,
    /// Whether a controller moves the workers one step at a time.
    stepped: bool,
}

/// What every worker of one race shares.
#[derive(Clone)]
pub(super) struct Crew {
    pool: Workers,
    strategy: Arc<dyn Strategy>,
    gate: watch::Receiver<Option<Instant>>,
    ready: Arc<Semaphore>,
    checkout_timeout: Duration,
    /// How far into its work a worker's connection is killed (`--kill-connection`).
    strike_delay: Duration,
    /// Over HTTP: where the app listens.
    wire: Option<Arc<WireEnd>>,
    /// `--read-from standby`: the standby's pool the finds read from.
    reader: Option<Workers>,
}

impl Crew {
    /// The same crew on another pool, which its finds read from too (a
    /// promoted standby, after a failover).
    fn on(&self, pool: Workers) -> Crew {
        Crew {
            pool,
            reader: None,
            ..self.clone()
        }
    }

    /// Over HTTP, what the app did with worker `worker`'s request after
    /// its client went away, if it went on; `None` in-process.
    pub(super) fn take_handled(&self, worker: usize) -> Option<Option<crate::http::app::Handled>> {
        self.wire.as_ref().map(|end| end.take_handled(worker))
    }
}

/// One worker, in-process or as an HTTP client, as the race's transport says.
async fn run(
    crew: Crew,
    req: Request,
    fault: Option<Arc<Fault>>,
    stepper: Option<StepHook>,
) -> (WorkerReport, Option<i32>) {
    match crew.wire.clone() {
        Some(end) => run_client(end, crew.gate, crew.ready, req).await,
        None => run_worker(crew, req, fault, stepper).await,
    }
}

/// One worker: wait at the gate, check out a connection, let the strategy
/// handle the request, give the connection back. A planned fault rides along
/// in its trace.
async fn run_worker(
    crew: Crew,
    req: Request,
    fault: Option<Arc<Fault>>,
    stepper: Option<StepHook>,
) -> (WorkerReport, Option<i32>) {
    let Crew {
        pool,
        strategy,
        mut gate,
        ready,
        checkout_timeout,
        strike_delay,
        wire: _,
        reader,
    } = crew;
    ready.add_permits(1);
    let opened = match gate.wait_for(Option::is_some).await {
        Ok(at) => at.unwrap_or_else(Instant::now),
        Err(_) => Instant::now(),
    };
    let mut trace = Trace::new(opened);
    trace.fault = fault;
    trace.service = req.service.clone();
    trace.strike_delay = strike_delay;
    trace.stepper = stepper;
    let mut lease = Lease::new(pool, checkout_timeout).reading_from(reader);
    let answer = respond(&*strategy, &mut lease, &req, &mut trace).await;
    if let Some(hook) = trace.stepper.take() {
        hook.finished();
    }
    let answer_ms = trace.now_ms();
    let pid = trace.backend_pid;
    let report = WorkerReport::new(req, answer, trace, lease.checkouts, answer_ms);
    (report, pid)
}

/// Names, for every worker that waited on a lock, the workers that held it.
/// A server pid may serve several workers in turn; the holder of a lock is
/// the one of them that won the claim, if any.
fn attribute_blocking(
    reports: &mut [WorkerReport],
    pids: &[(usize, i32)],
    pairs: &BTreeSet<(i32, i32)>,
) {
    let holder = |pid: i32, reports: &[WorkerReport]| -> Option<usize> {
        let users: Vec<usize> = pids
            .iter()
            .filter(|(_, p)| *p == pid)
            .map(|(w, _)| *w)
            .collect();
        users
            .iter()
            .copied()
            .find(|w| {
                reports
                    .iter()
                    .any(|r| r.worker == *w && r.made_xp.is_some())
            })
            .or_else(|| users.first().copied())
    };
    let waiters: Vec<(usize, usize)> = pairs
        .iter()
        .filter_map(|&(waiter, blocker)| {
            let blocker = holder(blocker, reports)?;
            let waiters: Vec<usize> = pids
                .iter()
                .filter(|(_, p)| *p == waiter)
                .map(|(w, _)| *w)
                .collect();
            // The waiter is the worker on that pid that waited, not the one that won.
            let waiter = waiters.iter().copied().find(|w| {
                reports
                    .iter()
                    .any(|r| r.worker == *w && r.made_xp.is_none())
            })?;
            Some((waiter, blocker))
        })
        .collect();
    for (waiter, blocker) in waiters {
        if let Some(report) = reports.iter_mut().find(|r| r.worker == waiter)
            && !report.blocked_by.contains(&blocker)
            && waiter != blocker
        {
            report.blocked_by.push(blocker);
        }
    }
}

impl Race<'_> {
    /// The course's app on this race's pool and strategy, on fresh tables,
    /// with the runner's connection held (if the settings say so) for as
    /// long as the returned connection lives: what `idem serve` serves.
    /// The app as one replica among several runs it: the tables are the
    /// parent's, so nothing is reset; the runner's connection, if it holds
    /// one, is held for as long as the replica lives.
    pub async fn replica_app(&self, number: usize, service: ServiceCalls) -> Result<Replica> {
        let s = &self.settings;
        let held = match s.app.pool.runner_holds_connection() {
            true => Some(
                pool::checkout(&self.pool, s.app.pool.checkout_timeout())
                    .await
                    .map_err(|e| anyhow::anyhow!("the replica's runner: {}", pool::describe(&e)))?,
            ),
            false => None,
        };
        let ledger = Ledger::open(&self.pool).await?;
        let app = App::new(
            self.pool.clone(),
            self.strategy.clone(),
            s.app_shape(),
            s.app.threads,
            None,
        )
        .counting(service.with_ledger(ledger))
        .replica(number);
        Ok(Replica {
            app,
            strategy: self.strategy.clone(),
            held,
        })
    }

    pub async fn open_app(&self, watch: Option<Watch>) -> Result<(App, Option<Conn>)> {
        let held = self.start_app().await?;
        let ledger = Ledger::open(&self.pool).await?;
        let app = App::new(
            self.pool.clone(),
            self.strategy.clone(),
            self.settings.app_shape(),
            self.settings.app.threads,
            watch,
        )
        .counting(ServiceCalls::default().with_ledger(ledger))
        .reading_from(self.reader());
        Ok((app, held))
    }
}
