//! Guard throughput: many distinct keys through a pool, against the raw single-statement floor.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use deadpool_postgres::Pool;
use serde::Serialize;

use super::GUARDS;
use crate::db::Database;
use crate::db::pool::{checkout, warm_pool};
use crate::race::RaceSettings;
use crate::race::{Lease, Request, Trace};
use crate::strategy::fingerprint::Params;
use crate::strategy::{OPERATION, Strategy};

/// The floor: the very statement insert-unique sends, one prepared
/// statement per request with nothing of idem's around it.
pub const RAW_INSERT: &str =
    "INSERT INTO experience_points (user_id, amount, lesson, idempotency_key, worker)
     VALUES ($1, 10, 1, $2, $3) ON CONFLICT (idempotency_key) DO NOTHING";

/// Requests per second for one way of handling requests.
#[derive(Debug, Clone, Serialize)]
pub struct Throughput {
    /// `raw` for the floor, else the strategy's name.
    pub what: String,
    pub workers: usize,
    pub pool_size: usize,
    pub requests: usize,
    pub per_second: f64,
    /// Statements sent per request, each its own round trip (BEGIN and
    /// COMMIT included).
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
    /// The floor: one `INSERT ... ON CONFLICT DO NOTHING`.
    Raw,
    /// A strategy, and whether its requests carry fingerprints.
    Strategy(Arc<dyn Strategy>, bool),
}

/// Sends `requests` requests with distinct keys through `workers` tasks
/// sharing a pool of `pool_size`, and measures requests per second.
pub async fn measure(
    db: &Database,
    what: &str,
    handler: Handler,
    workers: usize,
    pool_size: usize,
    requests: usize,
) -> Result<Throughput> {
    db.truncate().await?;
    // The loop is a client process like pgbench: CLIENT_THREADS threads,
    // each an event loop of its own (a one-thread runtime) with its share
    // of the workers and of the pool, so that its tasks wake each other
    // without crossing threads.
    let config = db.workers_config().clone();
    let handler = Arc::new(handler);
    let threads = CLIENT_THREADS.min(workers).min(pool_size).max(1);
    let (statements, elapsed, cpu) = tokio::task::spawn_blocking(move || {
        let next = Arc::new(AtomicUsize::new(0));
        let ready = Arc::new(std::sync::Barrier::new(threads + 1));
        let mut loops = Vec::with_capacity(threads);
        for t in 0..threads {
            let share = |n: usize| n / threads + usize::from(t < n % threads);
            let (config, handler, next, ready) =
                (config.clone(), handler.clone(), next.clone(), ready.clone());
            let (first, count, pool_share) = (
                (0..t).map(share).sum::<usize>() + 1,
                share(workers),
                share(pool_size).max(1),
            );
            loops.push(std::thread::spawn(move || -> Result<u64> {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
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
                    let pool = warm_pool(&config, pool_share).await;
                    ready.wait();
                    let pool = pool?;
                    let mut tasks = tokio::task::JoinSet::new();
                    for worker in first..first + count {
                        tasks.spawn(run(
                            worker,
                            pool.clone(),
                            handler.clone(),
                            next.clone(),
                            requests,
                        ));
                    }
                    let mut statements = 0u64;
                    while let Some(done) = tasks.join_next().await {
                        statements += done.context("a bench worker panicked")??;
                    }
                    Ok(statements)
                })
            }));
        }
        ready.wait();
        let cpu = super::cpu_us(super::Who::Me);
        let began = Instant::now();
        let mut statements = 0u64;
        for handle in loops {
            statements += handle
                .join()
                .map_err(|_| anyhow::anyhow!("a bench thread panicked"))??;
        }
        let elapsed = began.elapsed().as_secs_f64();
        anyhow::Ok((statements, elapsed, super::cpu_us(super::Who::Me) - cpu))
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

async fn run(
    worker: usize,
    pool: Pool,
    handler: Arc<Handler>,
    next: Arc<AtomicUsize>,
    total: usize,
) -> Result<u64> {
    let mut statements = 0;
    // Each client keeps its connection for the whole run, as pgbench's do:
    // what is measured is the request, not the pool's checkout. The floor
    // prepares its one statement once.
    let mut held = Some(checkout(&pool, Duration::from_secs(30)).await?);
    let insert = match (handler.as_ref(), &held) {
        (Handler::Raw, Some(conn)) => Some(conn.prepare(RAW_INSERT).await?),
        _ => None,
    };
    let mut key = String::with_capacity(24);
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= total {
            return Ok(statements);
        }
        match handler.as_ref() {
            Handler::Raw => {
                let (Some(conn), Some(insert)) = (&held, &insert) else {
                    unreachable!("the floor holds its connection and statement");
                };
                key.clear();
                let _ = std::fmt::Write::write_fmt(&mut key, format_args!("k{i}"));
                conn.execute(insert, &[&(i as i64), &key, &(worker as i32)])
                    .await?;
                statements += 1;
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
                let mut trace = Trace::new(Instant::now());
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
        let raw = measure(db, "raw", Handler::Raw, workers, pool, requests).await?;
        tick();
        for strategy in GUARDS {
            let settings = RaceSettings {
                strategy,
                ..RaceSettings::default()
            };
            let handler = Handler::Strategy(
                Arc::from(settings.build_strategy()),
                strategy.uses_key_table(),
            );
            let mut figure = measure(db, strategy.name(), handler, workers, pool, requests).await?;
            figure.ratio_to_raw = Some(figure.per_second / raw.per_second);
            throughput.push(figure);
            tick();
        }
        throughput.insert(throughput.len() - GUARDS.len(), raw);
    }
    Ok(throughput)
}
