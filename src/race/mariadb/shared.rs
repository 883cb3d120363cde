//! What every request of a MariaDB race shares, and one request's life: its checkout, its shape on its connection, and its answer.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::cluster;
use super::plan::{MariadbRace, Shaped};
use super::worker::EngineWorker;
use super::worker::report;
use crate::db::mariadb::Mariadb;
use crate::request::mariadb::{Answered, Asked, Crash, Ctx, ReadBack};
use crate::request::{Outcome, StepHook};
use crate::strategy::transaction::Isolation;

/// Connections the heartbeat's pool may open: one owner beats at a time,
/// two while a takeover's new owner starts.
const HEARTBEAT_CONNECTIONS: usize = 2;

/// How long a beat waits for one of them.
const BEAT_CHECKOUT: Duration = Duration::from_secs(5);

/// What every request of one race shares.
#[derive(Clone)]
pub(super) struct Shared {
    /// One pool per node the requests reach.
    pools: Vec<sqlx::MySqlPool>,
    cluster: cluster::Cluster,
    work: Duration,
    pub(super) calls: Arc<AtomicU64>,
    isolation: Option<crate::request::mariadb::Level>,
    own_level: crate::request::mariadb::Level,
    read_back: Option<ReadBack>,
    shape: Shaped,
    pub(super) stale_after: Duration,
    on_failure: crate::strategy::guard::OnFailure,
    /// `--heartbeat-ms`: how often, and the beats' own pool.
    heartbeat: Option<(Duration, sqlx::MySqlPool)>,
    crash: Option<Arc<Crash>>,
    /// `--hang-up`: who a request tells when its work begins.
    pub(super) hang_up: Option<Arc<crate::request::hang_up::HangUps>>,
}

impl Shared {
    /// The same, with the beats' own pool when the race has a heartbeat
    /// (see [`Pools`]).
    pub(super) fn with_heartbeat(
        race: &MariadbRace,
        pools: Vec<sqlx::MySqlPool>,
        beats: Option<sqlx::MySqlPool>,
        crash: Option<Arc<Crash>>,
    ) -> Self {
        let mut shared = Self::new(race, pools, crash);
        shared.heartbeat = race.settings.app().recovery.heartbeat().zip(beats);
        shared
    }

    pub(super) fn new(
        race: &MariadbRace,
        pools: Vec<sqlx::MySqlPool>,
        crash: Option<Arc<Crash>>,
    ) -> Self {
        let app = race.settings.app();
        Self {
            pools,
            cluster: race.cluster,
            work: app.work,
            calls: Arc::new(AtomicU64::new(0)),
            isolation: race.isolation.map(Isolation::on_mariadb),
            own_level: race
                .cache_isolation
                .unwrap_or(Isolation::INNODB_DEFAULT)
                .on_mariadb(),
            read_back: race.read_back,
            shape: race.shape,
            stale_after: app.recovery.stale_after(),
            on_failure: app.recovery.on_failure(),
            heartbeat: None,
            crash,
            hang_up: None,
        }
    }
}

/// One worker: its checkout, then the strategy's shape on its connection;
/// step by step when it has a hook.
pub(super) async fn one_request(
    s: Shared,
    asked: Asked,
    gate: Instant,
    mut hook: Option<StepHook>,
) -> EngineWorker {
    let Shared {
        pools,
        cluster,
        work,
        calls,
        isolation,
        own_level,
        read_back,
        shape,
        stale_after,
        on_failure,
        heartbeat,
        crash,
        hang_up,
    } = s;
    let worker = asked.worker;
    let since = |at: Instant| at.duration_since(gate).as_secs_f64() * 1000.0;
    // A retry is sent after the gate: its wait runs from its own sending.
    if let Some(hook) = hook.as_mut() {
        hook.pause(crate::request::Step::Checkout, None).await;
    }
    let sent = Instant::now();
    let pool = &pools[cluster.node_of(worker).min(pools.len() - 1)];
    let conn = pool.acquire().await;
    let checkout_wait_ms = sent.elapsed().as_secs_f64() * 1000.0;
    let conn = match conn {
        Ok(conn) => conn,
        Err(_) => {
            let answered = Answered::new(Outcome::CheckoutTimeout, "no connection", "503");
            return report(worker, checkout_wait_ms, answered, None, checkout_wait_ms);
        }
    };
    let mut ctx = Ctx::new(conn, asked, gate, work, calls, isolation, own_level);
    ctx.stale_after = stale_after;
    ctx.release_failed = on_failure == crate::strategy::guard::OnFailure::Release;
    ctx.heartbeat = heartbeat;
    ctx.read_back = read_back;
    ctx.hang_up = hang_up;
    ctx.on_cluster = cluster.is_cluster();
    let armed = async {
        if let Some(hook) = hook {
            ctx.stepped(hook).await?;
        }
        match crash {
            Some(crash) => ctx.arm(crash).await,
            None => Ok(()),
        }
    };
    if let Err(err) = armed.await {
        let answered = ctx.failed(&err, "—", None);
        return report(
            worker,
            checkout_wait_ms,
            answered,
            ctx.met(),
            since(Instant::now()),
        );
    }
    let mut answered = answer(&mut ctx, shape).await;
    if ctx.crashed {
        let when = ctx
            .steps
            .iter()
            .rfind(|e| e.step == crate::request::Step::Fault);
        let did = when.map_or("crashed".to_string(), |e| e.note.clone());
        answered = Answered::new(Outcome::Crashed, answered.saw, format!("{did}; no answer"));
    }
    ctx.release_held().await;
    let answer_ms = since(Instant::now());
    let mut r = report(worker, checkout_wait_ms, answered, ctx.met(), answer_ms);
    r.service_calls = ctx.service_calls;
    r.steps = std::mem::take(&mut ctx.steps);
    r
}

/// The shape's answer; in the request's transaction when it runs in one,
/// which a server error rolls back, as an app's transaction block does
/// when a statement raises (a 1062 caught by the shape included).
async fn answer(ctx: &mut Ctx, shape: Shaped) -> Answered {
    let Some(level) = ctx.transaction else {
        return shape.answer(ctx).await;
    };
    if let Err(err) = ctx.begin(level).await {
        return ctx.failed(&err, "—", None);
    }
    let answered = shape.answer(ctx).await;
    if ctx.error.is_none() && ctx.commit().await.is_ok() {
        ctx.note("committed");
        return answered;
    }
    ctx.rollback().await;
    ctx.note("rolled back");
    // 1213: refused at COMMIT, or aborted for a write of another node's
    // that the cluster ordered first (or, on one server, a deadlock's
    // victim). The shape may answer it.
    if ctx.error.as_ref().is_some_and(|e| e.number == 1213)
        && let Some(read) = shape.after_refused_commit(ctx).await
    {
        let did = format!("{}; rolled back (1213); {}", answered.did, read.did);
        return Answered { did, ..read };
    }
    let did = match (answered.outcome, &ctx.error) {
        (Outcome::Error, _) => format!("{}; rolled back", answered.did),
        (_, Some(e)) => format!("{}; {}: rolled back, 500", answered.did, e.shown()),
        (_, None) => format!("{}; rolled back, 500", answered.did),
    };
    Answered::new(Outcome::Error, answered.saw, did)
}

/// The longest one request may take before the race gives up on it; its
/// future is then dropped, and its connection closed, not pooled.
const REQUEST_LIMIT: Duration = Duration::from_secs(60);

/// A request given [`REQUEST_LIMIT`]: past it, its future is dropped.
pub(super) async fn bounded(
    request: impl std::future::Future<Output = EngineWorker>,
    worker: usize,
    gate: Instant,
) -> EngineWorker {
    match tokio::time::timeout(REQUEST_LIMIT, request).await {
        Ok(report) => report,
        Err(_) => gave_up(worker, gate),
    }
}

/// What worker `worker` asks for: the race's key, and its own parameters.
pub(super) fn asked(race: &MariadbRace, worker: usize) -> Asked {
    let p = race.settings.params(worker);
    Asked {
        key: race.settings.requests().key().to_string(),
        worker,
        user_id: p.user_id,
        amount: p.amount,
        lesson: p.lesson,
        fingerprint: race.settings.app().fingerprint.then(|| p.fingerprint()),
        work_fails: race.fail_work == Some(worker),
    }
}

fn gave_up(worker: usize, gate: Instant) -> EngineWorker {
    let limit = REQUEST_LIMIT.as_secs();
    let answered = Answered::new(Outcome::Error, "—", format!("no answer within {limit} s"));
    let at = gate.elapsed().as_secs_f64() * 1000.0;
    report(worker, 0.0, answered, None, at)
}

/// The race's pools: the workers' on one server (the guard user's, for a
/// guard file), or one on each node a cluster's requests reach, of the
/// same size, as each app server behind a balancer would have; and with a
/// heartbeat, the beats' own pool (a renewal must commit while the work's
/// transaction is open): the guard user's for a guard file, whose renew
/// step is the file's SQL, held to that user's rights and statement limit.
pub(super) struct Pools {
    pub(super) nodes: Vec<sqlx::MySqlPool>,
    pub(super) beats: Option<sqlx::MySqlPool>,
}

/// Opens the race's [`Pools`].
pub(super) async fn pools(db: &Mariadb, race: &MariadbRace) -> Result<Pools> {
    let app = race.settings.app();
    let checkout = app.pool.checkout_timeout();
    let sized = (race.pool_size, checkout);
    let nodes = race.cluster.nodes_used();
    let beats = app
        .recovery
        .heartbeat()
        .map(|_| (HEARTBEAT_CONNECTIONS, BEAT_CHECKOUT));
    match race.shape {
        Shaped::File(file) => {
            let stale_after = app.recovery.stale_after();
            let limit =
                crate::strategy::guard_file::step_limit(race.workers, app.work, stale_after);
            let session = race.cluster.session_with(file.0.sync_wait);
            let guard = db
                .guard_pools(nodes, sized, limit, (&file.name, session), beats)
                .await?;
            Ok(Pools {
                nodes: guard.nodes,
                beats: guard.beats,
            })
        }
        // A cluster takes no heartbeat (refused where the race is made).
        Shaped::Builtin(_) if race.cluster.is_cluster() => {
            let on = |node| db.workers_pool_on(node, sized, race.cluster.session());
            Ok(Pools {
                nodes: (0..nodes).map(on).collect(),
                beats: None,
            })
        }
        Shaped::Builtin(_) => Ok(Pools {
            nodes: vec![db.workers_pool(race.pool_size, checkout).await?],
            beats: match beats {
                Some((size, checkout)) => Some(db.workers_pool(size, checkout).await?),
                None => None,
            },
        }),
    }
}
