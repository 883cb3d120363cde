//! idem's own request loop against pgbench on the same statements, side by side in one run.
//!
//! On two cores the client and the server share the CPU: every microsecond
//! idem spends per request is taken from PostgreSQL. So idem's loop is
//! measured against PostgreSQL's own client, pgbench with prepared
//! statements, running the very statements idem sends, with as many
//! clients, on the same cluster, one after the other.

use std::sync::Arc;

use anyhow::Result;
use serde::Serialize;

use super::pgbench::{self, Script};
use super::throughput::{Handler, Throughput, measure};
use crate::db::Database;
use crate::race::RaceSettings;
use crate::strategy::StrategyKind;

/// The target: idem's loop at least this share of its reference.
pub const TARGET: f64 = 0.9;

/// One comparison.
#[derive(Debug, Clone, Serialize)]
pub struct ClientRow {
    /// What idem sent: `raw`, or a strategy's name.
    pub what: String,
    pub idem_per_second: f64,
    /// What it is held against: `pgbench` (the same statements) or a strategy.
    pub against: String,
    pub against_per_second: Option<f64>,
    pub ratio: Option<f64>,
}

/// The section's figures.
#[derive(Debug, Clone, Serialize)]
pub struct ClientFigures {
    pub clients: usize,
    pub requests: usize,
    pub pgbench_seconds: u64,
    pub rows: Vec<ClientRow>,
    /// Statements per request of every strategy, each a round trip.
    pub statements: Vec<Throughput>,
}

/// Measures idem's loop and pgbench on the raw statement and on
/// claim-work-complete's three, then the guard against claim-work-complete,
/// then counts every strategy's statements per request.
pub async fn measure_all(
    db: &Database,
    clients: usize,
    requests: usize,
    seconds: u64,
    tick: impl Fn(),
) -> Result<ClientFigures> {
    let strategy = |kind: StrategyKind| {
        let settings = RaceSettings {
            strategy: kind,
            ..RaceSettings::default()
        };
        Handler::Strategy(Arc::from(settings.build_strategy()), kind.uses_key_table())
    };
    let mut rows = Vec::new();
    let raw = measure(db, "raw", Handler::Raw, clients, clients, requests).await?;
    tick();
    let raw_pgbench = pgbench::measure(db, Script::Raw, clients, seconds).await?;
    tick();
    rows.push(row(&raw, "pgbench", raw_pgbench.map(|p| p.tps)));
    let cwc = StrategyKind::ClaimWorkComplete;
    let idem_cwc = measure(db, cwc.name(), strategy(cwc), clients, clients, requests).await?;
    tick();
    let cwc_pgbench = pgbench::measure(db, Script::ClaimWorkComplete, clients, seconds).await?;
    tick();
    rows.push(row(&idem_cwc, "pgbench", cwc_pgbench.map(|p| p.tps)));
    let guard = StrategyKind::Guard;
    let idem_guard = measure(db, guard.name(), strategy(guard), clients, clients, requests).await?;
    tick();
    rows.push(row(&idem_guard, cwc.name(), Some(idem_cwc.per_second)));

    // Statements per request: a short run of each strategy on fresh keys.
    let mut statements = vec![raw];
    for kind in StrategyKind::ALL {
        let counted = match kind {
            StrategyKind::ClaimWorkComplete => idem_cwc.clone(),
            StrategyKind::Guard => idem_guard.clone(),
            _ => measure(db, kind.name(), strategy(kind), clients, clients, 500).await?,
        };
        statements.push(counted);
    }
    tick();
    Ok(ClientFigures {
        clients,
        requests,
        pgbench_seconds: seconds,
        rows,
        statements,
    })
}

fn row(idem: &Throughput, against: &str, reference: Option<f64>) -> ClientRow {
    ClientRow {
        what: idem.what.clone(),
        idem_per_second: idem.per_second,
        against: against.to_string(),
        against_per_second: reference,
        ratio: reference.map(|r| idem.per_second / r),
    }
}
