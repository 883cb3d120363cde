//! Guard throughput: many distinct keys through a pool, against the raw single-statement floor.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::Serialize;

use super::meter::{self, GUARDS};
use super::script::{Prepared, Script};
use crate::db::Database;
use crate::db::pool::{Workers, checkout, warm_pool};
use crate::limits::Origin;
use crate::race::options::RaceInput;
use crate::race::{Lease, Request, Trace};
use crate::strategy::fingerprint::Params;
use crate::strategy::{OPERATION, Strategy, StrategyKind};

/// Requests per second for one way of handling requests.
#[derive(Debug, Clone, Serialize)]
pub struct Throughput {
    /// `raw` for the floor, a strategy's name, or a script's name with
    /// `, bare` for its statements sent bare.
    pub what: String,
    pub workers: usize,
    pub pool_size: usize,
    /// Requests sent, every one of them answered.
    pub requests: usize,
    pub per_second: f64,
    /// Statements sent per request, BEGIN and COMMIT included (the guard
    /// sends those two in the round trips of the statements beside them).
    pub statements_per_request: f64,
    /// idem's own CPU time (user and system, every thread) per request, µs.
    pub cpu_us_per_request: f64,
    /// `per_second` over the raw floor's on the same pool.
    pub ratio_to_raw: Option<f64>,
}

/// The client's threads, as many as pgbench's (`-j 2`).
pub const CLIENT_THREADS: usize = 2;

/// What one request does.
pub enum Handler {
    /// A script's statements, bare: prepared once per connection, sent
    /// straight through tokio-postgres with nothing of idem's around them.
    /// `Bare(Script::Raw)` is the raw floor.
    Bare(Script),
    /// A strategy, and whether its requests carry fingerprints.
    Strategy(Arc<dyn Strategy>, bool),
}

/// How much a measurement sends.
#[derive(Debug, Clone, Copy)]
pub enum Budget {
    /// This many requests.
    Requests(usize),
    /// As many requests as fit in this time, as pgbench's `-T` does.
    For(Duration),
}

/// Sends requests with distinct keys through `workers` tasks sharing a
/// pool of `pool_size`, as many as `budget` allows, and measures requests
/// per second.
pub async fn measure(
    db: &Database,
    what: &str,
    handler: Handler,
    workers: usize,
    pool_size: usize,
    budget: impl Into<Budget>,
) -> Result<Throughput> {
    let budget = budget.into();
    let total = match budget {
        Budget::Requests(n) => n,
        Budget::For(_) => usize::MAX,
    };
    db.truncate().await?;
    // The loop is a client process like pgbench: CLIENT_THREADS threads,
    // each an event loop of its own (a one-thread runtime) with its share
    // of the workers and of the pool, so that its tasks wake each other
    // without crossing threads.
    let config = db.workers_config().clone();
    let handler = Arc::new(handler);
    let threads = CLIENT_THREADS.min(workers).min(pool_size).max(1);
    let (requests, statements, elapsed, cpu) = tokio::task::spawn_blocking(move || {
        let next = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let ready = Arc::new(std::sync::Barrier::new(threads + 1));
        let mut loops = Vec::with_capacity(threads);
        for t in 0..threads {
            let share = |n: usize| n / threads + usize::from(t < n % threads);
            let slice = Slice {
                first: (0..t).map(share).sum::<usize>() + 1,
                count: share(workers),
                pool_size: share(pool_size).max(1),
            };
            let shared = Shared {
                config: config.clone(),
                handler: handler.clone(),
                next: next.clone(),
                stop: stop.clone(),
                ready: ready.clone(),
                total,
            };
            loops.push(std::thread::spawn(move || client_loop(slice, shared)));
        }
        ready.wait();
        let cpu = meter::cpu_us(meter::Who::Me);
        let began = Instant::now();
        if let Budget::For(time) = budget {
            std::thread::sleep(time);
            stop.store(true, Ordering::Relaxed);
        }
        let mut statements = 0u64;
        for handle in loops {
            statements += handle
                .join()
                .map_err(|_| anyhow::anyhow!("a bench thread panicked"))??;
        }
        let elapsed = began.elapsed().as_secs_f64();
        // Every request handed out below `total` was sent.
        let requests = next.load(Ordering::Relaxed).min(total);
        anyhow::Ok((
            requests,
            statements,
            elapsed,
            meter::cpu_us(meter::Who::Me) - cpu,
        ))
    })
    .await??;
    Ok(Throughput {
        what: what.to_string(),
        workers,
        pool_size,
        requests,
        per_second: requests as f64 / elapsed,
        statements_per_request: statements as f64 / requests.max(1) as f64,
        cpu_us_per_request: cpu / requests.max(1) as f64,
        ratio_to_raw: None,
    })
}

/// One client thread's workers and pool: workers `first..first + count`.
struct Slice {
    first: usize,
    count: usize,
    pool_size: usize,
}

/// What every client thread shares: the handed-out request count, the
/// stop flag, the start line.
struct Shared {
    config: crate::db::pool::Connect,
    handler: Arc<Handler>,
    next: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    ready: Arc<std::sync::Barrier>,
    total: usize,
}

/// One client thread: an event loop of its own with its slice of the
/// workers and of the pool. Returns the statements its workers sent.
fn client_loop(slice: Slice, shared: Shared) -> Result<u64> {
    let Shared {
        config,
        handler,
        next,
        stop,
        ready,
        total,
    } = shared;
    // I/O and timers only: with signals and processes too, each park would
    // also look for orphaned child processes.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build();
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(err) => {
            // Still at the start line, so that no one waits for us.
            ready.wait();
            return Err(err.into());
        }
    };
    runtime.block_on(async move {
        let pool = warm_pool(&config, slice.pool_size).await;
        ready.wait();
        let pool = pool?;
        let mut tasks = tokio::task::JoinSet::new();
        for worker in slice.first..slice.first + slice.count {
            tasks.spawn(run(
                worker,
                pool.clone(),
                handler.clone(),
                (next.clone(), stop.clone()),
                total,
            ));
        }
        let mut statements = 0u64;
        while let Some(done) = tasks.join_next().await {
            statements += done.context("a bench worker panicked")??;
        }
        Ok(statements)
    })
}

async fn run(
    worker: usize,
    pool: Workers,
    handler: Arc<Handler>,
    (next, stop): (Arc<AtomicUsize>, Arc<AtomicBool>),
    total: usize,
) -> Result<u64> {
    let mut statements = 0;
    // Each client keeps its connection for the whole run, as pgbench's do:
    // what is measured is the request, not the pool's checkout. A bare
    // script prepares its statements once.
    if let Handler::Strategy(strategy, _) = handler.as_ref() {
        strategy.start(&pool).await?;
    }
    let mut held = Some(checkout(&pool, Duration::from_secs(30)).await?);
    let bare: Option<Prepared> = match (handler.as_ref(), &held) {
        (Handler::Bare(script), Some(conn)) => Some(script.prepare(conn).await?),
        _ => None,
    };
    let mut key = String::with_capacity(24);
    loop {
        // The time is up: stop before taking a number, so that every
        // number taken below `total` is a request sent.
        if stop.load(Ordering::Relaxed) {
            return Ok(statements);
        }
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= total {
            return Ok(statements);
        }
        match handler.as_ref() {
            Handler::Bare(_) => {
                let (Some(conn), Some(bare)) = (&held, &bare) else {
                    unreachable!("a bare script holds its connection and statements");
                };
                statements += u64::from(bare.send(conn, i, worker as i32, &mut key).await?);
            }
            Handler::Strategy(strategy, fingerprint) => {
                let params = Params {
                    operation: OPERATION,
                    user_id: i as i64,
                    amount: 10,
                    lesson: 1,
                };
                // Only the strategies that keep a key table check fingerprints.
                let req = Request::new(
                    worker,
                    format!("k{i}"),
                    params,
                    *fingerprint,
                    Duration::ZERO,
                );
                let mut trace = Trace::counting();
                let wait = Duration::from_secs(30);
                let mut lease = match held.take() {
                    Some(conn) => Lease::holding(pool.clone(), wait, conn),
                    None => Lease::new(pool.clone(), wait),
                };
                lease.conn(&mut trace).await?;
                strategy.handle(&mut lease, &req, &mut trace).await?;
                statements += u64::from(trace.queries);
                held = lease.into_conn();
            }
        }
    }
}

/// For each shape (workers, pool), the raw statement and then every guard,
/// each with its ratio to the raw floor on the same pool.
pub async fn against_raw(
    db: &Database,
    shapes: &[(usize, usize)],
    requests: usize,
    tick: impl Fn(),
) -> Result<Vec<Throughput>> {
    let mut throughput = Vec::new();
    for &(workers, pool) in shapes {
        let raw = measure(
            db,
            "raw",
            Handler::Bare(Script::Raw),
            workers,
            pool,
            requests,
        )
        .await?;
        tick();
        let first = throughput.len();
        for (what, input) in guards() {
            let settings = input.build(Origin::Flags)?;
            let strategy = settings.strategy();
            let handler = Handler::Strategy(
                Arc::from(settings.build_strategy()),
                strategy.uses_key_table(),
            );
            let mut figure = measure(db, &what, handler, workers, pool, requests).await?;
            figure.ratio_to_raw = Some(figure.per_second / raw.per_second);
            throughput.push(figure);
            tick();
        }
        throughput.insert(first, raw);
    }
    Ok(throughput)
}

/// Every guard as it is raced by default, and the guard again with its
/// heartbeat: what renewing running claims costs beside the guard as it is.
pub fn guards() -> Vec<(String, RaceInput)> {
    let mut guards: Vec<(String, RaceInput)> = GUARDS
        .into_iter()
        .map(|strategy| {
            (
                strategy.name().to_string(),
                RaceInput::with_strategy(strategy),
            )
        })
        .collect();
    guards.push((
        format!("{}, heartbeat", StrategyKind::Guard.name()),
        RaceInput::with_strategy(StrategyKind::Guard)
            .with(|r| r.guard.heartbeat_ms = Some(HEARTBEAT_MS)),
    ));
    guards
}

/// The heartbeat's interval in the throughput bench: a third of the
/// default stale-claim timeout.
const HEARTBEAT_MS: u64 = 333;

impl From<usize> for Budget {
    fn from(requests: usize) -> Self {
        Budget::Requests(requests)
    }
}
