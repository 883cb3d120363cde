//! Where the claim lives, and what it costs: a claim in Redis beside one in the key table, as whole `idem race` processes and as the claim's own round trip.
//!
//! The processes alternate, `--store table` then `--store redis`, so both
//! see the same machine; Redis's are the race plus a `redis-server` of its
//! own started and stopped. The round trip is the claim step as a request
//! takes it (`SET key value NX PX ttl` on the run's Redis, `INSERT ...
//! ON CONFLICT (key) DO NOTHING` on the key table), one request at a time
//! with no work, timed by the request's own trace.

use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};
use serde::Serialize;

use super::meter::median_ms;
use crate::db::Database;
use crate::limits::Origin;
use crate::race::options::RaceInput;
use crate::race::{Race, percentile};
use crate::request::Step;
use crate::store::StoreKind;
use crate::strategy::StrategyKind;

/// The two stores' figures side by side.
#[derive(Debug, Serialize)]
pub struct StoreFigures {
    /// Whole processes, each store's median.
    pub processes: usize,
    pub table_process_ms: f64,
    pub redis_process_ms: f64,
    /// Redis's median over the table's (the target: at most 1.5).
    pub process_ratio: f64,
    pub claims: Vec<ClaimTrip>,
}

/// One store's claim, one request at a time.
#[derive(Debug, Serialize)]
pub struct ClaimTrip {
    pub store: StoreKind,
    /// The claim as it is sent.
    pub claim: &'static str,
    pub requests: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// `processes` pairs of whole races, then `requests` claims on each store.
/// `None` when this machine has no `redis-server`.
pub async fn measure(
    db: &Database,
    processes: usize,
    requests: usize,
    tick: impl Fn(),
) -> Result<Option<StoreFigures>> {
    if crate::db::redis_server::locate().is_err() {
        return Ok(None);
    }
    let (table, redis) = tokio::task::spawn_blocking(move || alternate(processes)).await??;
    tick();
    let mut claims = Vec::new();
    for (store, claim) in [
        (StoreKind::Table, "INSERT ... ON CONFLICT (key) DO NOTHING"),
        (StoreKind::Redis, "SET key value NX PX ttl"),
    ] {
        let mut trips = claim_trips(db, store, requests).await?;
        claims.push(ClaimTrip {
            store,
            claim,
            requests,
            p50_ms: percentile(&mut trips, 0.5),
            p99_ms: percentile(&mut trips, 0.99),
        });
        tick();
    }
    let (table_ms, redis_ms) = (median_ms(&mut table.clone()), median_ms(&mut redis.clone()));
    Ok(Some(StoreFigures {
        processes,
        table_process_ms: table_ms,
        redis_process_ms: redis_ms,
        process_ratio: redis_ms / table_ms,
        claims,
    }))
}

/// Whole `idem race -s claim-work-complete` processes, table then Redis,
/// `pairs` times.
fn alternate(pairs: usize) -> Result<(Vec<Duration>, Vec<Duration>)> {
    let idem = std::env::current_exe().context("could not find idem's own binary")?;
    let (mut table, mut redis) = (Vec::new(), Vec::new());
    for _ in 0..pairs {
        for (store, times) in [("table", &mut table), ("redis", &mut redis)] {
            let mut race = Command::new(&idem);
            race.args(["race", "-s", "claim-work-complete", "--store", store]);
            times.push(super::process::timed(
                &mut race,
                &format!("idem race --store {store}"),
            )?);
        }
    }
    Ok((table, redis))
}

/// The claim step's time in each of `requests` one-request races.
async fn claim_trips(db: &Database, store: StoreKind, requests: usize) -> Result<Vec<f64>> {
    let settings = RaceInput::with_strategy(StrategyKind::ClaimWorkComplete)
        .with(|r| {
            r.shape.workers = Some(1);
            r.app.work_ms = Some(0);
            r.store.store = Some(store);
        })
        .build(Origin::Flags)?;
    let race = Race::prepare(db, settings).await?;
    let mut trips = Vec::with_capacity(requests);
    for run in 1..=requests {
        let result = race.run(run).await?;
        let claims = result.reports.iter().flat_map(|w| &w.steps);
        trips.extend(
            claims
                .filter(|e| e.step == Step::Claim)
                .map(|e| e.end_ms - e.start_ms),
        );
    }
    Ok(trips)
}
