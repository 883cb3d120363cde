//! A race on MariaDB: N workers, each with its own connection from a pool of the race's size, one key, one strategy's MariaDB shape; then the rows.
//!
//! It keeps the PostgreSQL race's rules: fresh tables for each race, every
//! pooled connection opened before the gate (so the race measures
//! checkouts, not connects), the runner holding one connection as the
//! course's test runner does, and every worker released at one gate.

pub mod behind;
pub mod cluster;
mod hang_up;
mod plan;
mod served;
mod shared;
mod taken;
pub mod two_nodes;

pub use plan::MariadbRace;
use plan::Shaped;
pub use served::Served;
use shared::{Shared, asked, bounded, one_request, pools};

pub use worker::{EngineWorker, KeyRow, XpRow, rows_now, stored_response};
mod worker;

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use anyhow::Result;
use serde::Serialize;
use sqlx::Row;

use crate::db::clock::Clock;
use crate::db::mariadb::Mariadb;
use crate::race::engine::Engine;
use crate::race::stepper::{Controller, Watch};
use crate::request::mariadb::{Asked, Crash};
use crate::request::{Outcome, StepHook};
use crate::strategy::guard_file::{self};

/// One race's figures on an engine: one line of `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct EngineResult {
    pub engine: Engine,
    /// The server's version: `10.11.19-MariaDB-0+deb12u1`.
    pub server_version: String,
    pub run: usize,
    #[serde(flatten)]
    pub race: MariadbRace,
    pub key_rows: u64,
    /// Of those, the claims left pending: keys stuck until they go stale.
    pub pending_key_rows: u64,
    pub xp_rows: u64,
    /// Entries in the Solid-Cache-shaped store (`--store cache`).
    pub cache_entries: u64,
    /// Times the work's service call was made, whatever was rolled back.
    pub service_calls: u64,
    pub outcomes: BTreeMap<&'static str, usize>,
    /// Server errors met, by `number (SQLSTATE, name)`.
    pub errors: BTreeMap<String, usize>,
    pub lesson_figure: u64,
    pub elapsed_ms: f64,
    pub reports: Vec<EngineWorker>,
    /// On a cluster: what certification refused during the race, summed
    /// over its nodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_counters: Option<cluster::Counters>,
    /// On a cluster: its size and status as node 1 saw them after the race.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_after: Option<cluster::After>,
    /// `--retry-behind`: how the hold on the retry's node ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_node_held: Option<behind::Held>,
}

/// Runs one race on fresh tables.
pub async fn run(db: &Mariadb, race: &MariadbRace, run: usize) -> Result<EngineResult> {
    let started = start(db, race, None).await?;
    finish(db, race, run, started, None).await
}

/// Runs one race step by step: every worker pauses before each step until
/// `drive` lets it move (see [`Controller`]); whatever `drive` did, the
/// rest then run to the end.
pub async fn run_stepped(
    db: &Mariadb,
    race: &MariadbRace,
    drive: impl AsyncFnOnce(&mut Controller) -> Result<()>,
) -> Result<EngineResult> {
    crate::db::mariadb::watch::can_watch(&db.admin).await?;
    let nodes = db.node_watchers();
    let watch = Watch::Mariadb {
        admin: db.admin.clone(),
        lock: format!(
            "{}:{}",
            race.settings.requests().key(),
            crate::strategy::OPERATION
        ),
        nodes: nodes.clone(),
        node_of: (1..=race.workers)
            .map(|w| race.cluster.node_of(w))
            .collect(),
    };
    let (mut controller, hooks) = Controller::new(race.workers, watch);
    let recovery = &race.settings.app().recovery;
    let beats = recovery.heartbeat().is_some();
    let others = nodes.iter().skip(1).cloned().collect();
    let clock = Clock::on_mariadb((db.admin.clone(), others), recovery.stale_after(), beats);
    controller.set_clock(clock.clone());
    let started = start(db, race, Some(hooks)).await?;
    let driven = drive(&mut controller).await;
    controller.run_free().await;
    let result = finish(db, race, 1, started, Some(&clock)).await;
    driven.and(result)
}

/// A race under way: its workers released, its pool and the runner's
/// connection held until it ends.
struct Started {
    tasks: Vec<tokio::task::JoinHandle<EngineWorker>>,
    shared: Shared,
    /// One pool per node the requests reach.
    pools: Vec<sqlx::MySqlPool>,
    runner: Option<Option<sqlx::pool::PoolConnection<sqlx::MySql>>>,
    gate: Arc<OnceLock<Instant>>,
    began: Instant,
    /// On a cluster, its counters before the race.
    counted: Option<cluster::Counters>,
    /// `--kill-node`: the task that kills the node halfway through the work.
    killer: Option<tokio::task::JoinHandle<()>>,
    /// `--retry-behind`: node 2, held behind since before the burst.
    held: Option<sqlx::MySqlConnection>,
    /// `--hang-up`: the client that gives up, then retries.
    client: Option<hang_up::Client>,
}

/// Empties the tables, opens the pool, takes the runner's connection, and
/// sends the workers (each on its hook, when stepped).
async fn start(db: &Mariadb, race: &MariadbRace, hooks: Option<Vec<StepHook>>) -> Result<Started> {
    for table in ["idempotency_keys", "experience_points", "cache_entries"] {
        sqlx::raw_sql(&format!("TRUNCATE TABLE {table}"))
            .execute(&db.admin)
            .await?;
    }
    let shared::Pools {
        nodes: pools,
        beats,
    } = pools(db, race).await?;
    let counted = match race.cluster.is_cluster() {
        true => Some(cluster::Counters::read_all(&pools, race.cluster.kill_node).await?),
        false => None,
    };
    let mut opened = Vec::new();
    for pool in &pools {
        for _ in 0..race.pool_size {
            opened.push(pool.acquire().await?);
        }
    }
    if let (Shaped::File(file), Some(conn)) = (race.shape, opened.first_mut()) {
        guard_file::on_mariadb::verify(file, conn).await?;
    }
    // The runner keeps one of node 1's; the rest go back to their pools, open.
    let runner = race.runner_holds_connection.then(|| {
        let first = opened.drain(..race.pool_size).collect::<Vec<_>>();
        let mut first = first.into_iter();
        let held = first.next();
        drop(first);
        held
    });
    drop(opened);

    let held = match race.cluster.retry_behind {
        true => Some(behind::hold(db.node_admin(2).await?).await?),
        false => None,
    };
    let crash = race
        .crash
        .map(|plan| Crash::new(plan.at, plan.worker, db.admin.clone()));
    let mut shared = Shared::with_heartbeat(race, pools.clone(), beats, crash);
    let client = hang_up::Client::of(race);
    shared.hang_up = client.as_ref().map(hang_up::Client::hang_ups);
    let gate = Arc::new(OnceLock::new());
    let began = Instant::now();
    let tasks = send_workers(race, &shared, client.as_ref(), hooks, &gate);
    let killer = race
        .cluster
        .kill_node
        .and_then(|n| db.node_pid(n))
        .map(|pid| {
            let half = race.settings.app().work / 2;
            tokio::spawn(cluster::kill_halfway(pid, gate.clone(), half))
        });
    Ok(Started {
        tasks,
        shared,
        pools,
        runner,
        gate,
        began,
        counted,
        killer,
        held,
        client,
    })
}

/// Sends every worker, each through its gate at once, on its hook when
/// stepped, and through the client that gives up when there is one.
fn send_workers(
    race: &MariadbRace,
    shared: &Shared,
    client: Option<&hang_up::Client>,
    hooks: Option<Vec<StepHook>>,
    gate: &Arc<OnceLock<Instant>>,
) -> Vec<tokio::task::JoinHandle<EngineWorker>> {
    let barrier = Arc::new(tokio::sync::Barrier::new(race.workers));
    let mut hooks: BTreeMap<usize, StepHook> =
        hooks.into_iter().flatten().map(|h| (h.worker, h)).collect();
    let mut tasks = Vec::new();
    for worker in 1..=race.workers {
        let (shared, gate, barrier) = (shared.clone(), gate.clone(), barrier.clone());
        let asked = asked(race, worker);
        let hook = hooks.remove(&worker);
        let client = client.cloned();
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let gate = *gate.get_or_init(Instant::now);
            match hook {
                // Step by step, a person may take minutes: no limit, and
                // the controller is told when the worker is done.
                Some(hook) => {
                    let _done = hook.finisher();
                    one_request(shared, asked, gate, Some(hook)).await
                }
                None => {
                    let request = one_request(shared, asked, gate, None);
                    match client {
                        Some(client) => client.waits(request, worker, gate).await,
                        None => bounded(request, worker, gate).await,
                    }
                }
            }
        }));
    }
    tasks
}

/// Waits for every worker, retries a crashed request as lesson 7's client
/// does (at once after the `clock` ages its claim, in a stepped race), and
/// counts the rows.
async fn finish(
    db: &Mariadb,
    race: &MariadbRace,
    run: usize,
    started: Started,
    clock: Option<&Clock>,
) -> Result<EngineResult> {
    let Started {
        tasks,
        shared,
        pools,
        runner,
        gate,
        began,
        counted,
        killer,
        held,
        client,
    } = started;
    if let Some(killer) = killer {
        killer.await?;
    }
    let mut reports = Vec::new();
    for task in tasks {
        reports.push(task.await?);
    }
    let gate = gate.get().copied().unwrap_or(began);
    if let Some(client) = &client {
        client.retry(race, &shared, &mut reports, gate).await;
    }
    let again = recover(race, &shared, &reports, gate, clock);
    let (retries, retry_behind) = match held {
        Some(mut node2) => match behind::not_behind(db, &mut node2).await? {
            Some(not) => {
                behind::release(&mut node2).await?;
                (again.await?, Some(not))
            }
            None => {
                let (retries, held) = behind::held_while(node2, &db.database, again).await?;
                (retries?, Some(held))
            }
        },
        None => (again.await?, None),
    };
    reports.extend(retries);
    let elapsed_ms = began.elapsed().as_secs_f64() * 1000.0;
    drop(runner);
    let counters = match counted {
        Some(before) => {
            let after = cluster::Counters::read_all(&pools, race.cluster.kill_node).await?;
            Some(after.since(before))
        }
        None => None,
    };
    for pool in &pools {
        pool.close().await;
    }
    if race.cluster.is_cluster() {
        for r in &mut reports {
            r.node = Some(race.cluster.node_of(r.worker) + 1);
        }
    }
    let mut result = figures(db, race, run, reports, shared.calls, elapsed_ms).await?;
    result.cluster_counters = counters;
    result.retry_node_held = retry_behind;
    if race.cluster.is_cluster() {
        result.cluster_after = Some(cluster::After::read(&db.admin).await?);
    }
    Ok(result)
}

/// Lesson 7's recovery: once a crashed request's claim is older than the
/// stale-claim age, its client sends it again (`--recovery-retries` at once),
/// as new workers numbered after the race's; a request whose work failed
/// (`--fail-work`), at once. A stepped race's `clock` ages the claim
/// instead of waiting for it.
async fn recover(
    race: &MariadbRace,
    shared: &Shared,
    reports: &[EngineWorker],
    gate: Instant,
    clock: Option<&Clock>,
) -> Result<Vec<EngineWorker>> {
    if race.cluster.retry_at_once {
        return retried_at_once(race, shared, reports, gate).await;
    }
    let Some(crashed) = reports.iter().find(|w| w.outcome == Outcome::Crashed) else {
        let failed = race
            .fail_work
            .and_then(|n| reports.iter().find(|w| w.worker == n));
        let Some(failed) = failed.filter(|w| w.outcome == Outcome::Failed) else {
            return Ok(Vec::new());
        };
        return sent_again(shared, retries_of(race, failed.worker), gate).await;
    };
    match clock {
        Some(clock) => {
            clock.jump(&[]).await?;
        }
        None => {
            let since = Duration::from_secs_f64(crashed.answer_ms / 1000.0);
            tokio::time::sleep_until((gate + since + shared.stale_after).into()).await;
        }
    }
    sent_again(shared, retries_of(race, crashed.worker), gate).await
}

/// Worker `of`'s request sent again by its client (`--recovery-retries`
/// at once), as new workers numbered after the race's; a retry's work
/// does not fail.
fn retries_of(race: &MariadbRace, of: usize) -> Vec<Asked> {
    (1..=race.recovery_retries)
        .map(|i| Asked {
            worker: race.workers + i,
            work_fails: false,
            ..asked(race, of)
        })
        .collect()
}

/// Sends each of `asks` as a client's retry, at once, and waits for them.
async fn sent_again(shared: &Shared, asks: Vec<Asked>, gate: Instant) -> Result<Vec<EngineWorker>> {
    let mut tasks = Vec::new();
    for asked in asks {
        let worker = asked.worker;
        let sent = bounded(one_request(shared.clone(), asked, gate, None), worker, gate);
        tasks.push(tokio::spawn(sent));
    }
    let mut retries = Vec::new();
    for task in tasks {
        let mut report = task.await?;
        report.retry = true;
        retries.push(report);
    }
    Ok(retries)
}

/// `--retry-at-once`: every client sends its request again as soon as
/// the burst is answered, each retry numbered after the burst (so that a
/// round-robin spread sends it to the next node).
async fn retried_at_once(
    race: &MariadbRace,
    shared: &Shared,
    reports: &[EngineWorker],
    gate: Instant,
) -> Result<Vec<EngineWorker>> {
    let asks = reports.iter().map(|first| Asked {
        worker: race.workers + first.worker,
        ..asked(race, first.worker)
    });
    sent_again(shared, asks.collect(), gate).await
}

/// Worker `worker`'s request alone, on `pool`, with its gate now: what a
/// test drops on purpose at an await, to see what the pool gets back.
#[cfg(feature = "internals")]
pub async fn one(race: &MariadbRace, pool: sqlx::MySqlPool, worker: usize) -> EngineWorker {
    let shared = Shared::new(race, vec![pool], None);
    one_request(shared, asked(race, worker), Instant::now(), None).await
}

/// The rows the race left, beside what each worker was told.
async fn figures(
    db: &Mariadb,
    race: &MariadbRace,
    run: usize,
    reports: Vec<EngineWorker>,
    calls: Arc<AtomicU64>,
    elapsed_ms: f64,
) -> Result<EngineResult> {
    let count = |sql: &'static str| {
        let admin = db.admin.clone();
        async move {
            let row = sqlx::query(sql).fetch_one(&admin).await?;
            Ok::<u64, sqlx::Error>(row.try_get::<i64, _>(0)? as u64)
        }
    };
    let mut outcomes = BTreeMap::new();
    let mut errors = BTreeMap::new();
    for r in &reports {
        *outcomes.entry(r.outcome.name()).or_insert(0) += 1;
        if let Some(e) = &r.error {
            *errors.entry(e.shown()).or_insert(0) += 1;
        }
    }
    Ok(EngineResult {
        engine: Engine::Mariadb,
        server_version: db.version().to_string(),
        run,
        key_rows: count("SELECT COUNT(*) FROM idempotency_keys").await?,
        pending_key_rows: count("SELECT COUNT(*) FROM idempotency_keys WHERE status = 'pending'")
            .await?,
        xp_rows: count("SELECT COUNT(*) FROM experience_points").await?,
        cache_entries: count("SELECT COUNT(*) FROM cache_entries").await?,
        service_calls: calls.load(std::sync::atomic::Ordering::SeqCst),
        outcomes,
        errors,
        lesson_figure: race.lesson_figure(),
        elapsed_ms,
        reports,
        race: race.clone(),
        cluster_counters: None,
        cluster_after: None,
        retry_node_held: None,
    })
}
