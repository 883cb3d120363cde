//! idem's own request loop against pgbench on the same statements, side by side in one run.
//!
//! On two cores the client and the server share the CPU: every microsecond
//! idem spends per request is taken from PostgreSQL. So idem's loop is
//! measured against PostgreSQL's own client, pgbench with prepared
//! statements, running the very statements idem sends, with as many
//! clients, on the same cluster, one after the other. The same statements
//! sent bare through tokio-postgres split the difference in two: what the
//! driver costs against libpq, and what idem's own code costs on top.

use std::sync::Arc;

use anyhow::Result;
use serde::Serialize;

use super::pgbench;
use super::script::Script;
use super::throughput::{Budget, Handler, Throughput, measure};
use crate::db::Database;
use crate::limits::Origin;
use crate::race::options::RaceInput;
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
    /// The lowest and highest of the rounds' own ratios: how much the
    /// machine moved the figure.
    pub ratio_spread: Option<(f64, f64)>,
    /// The client's own CPU per request, µs: idem's, and its reference's.
    pub idem_cpu_us: f64,
    pub against_cpu_us: Option<f64>,
}

/// The section's figures.
#[derive(Debug, Clone, Serialize)]
pub struct ClientFigures {
    pub clients: usize,
    /// How long each client (idem's loop, pgbench) runs in each round.
    pub seconds: u64,
    /// Interleaved rounds; every figure is the median over them.
    pub rounds: usize,
    pub rows: Vec<ClientRow>,
    /// Statements per request of every strategy, each a round trip.
    pub statements: Vec<Throughput>,
}

/// Measures the raw statement and claim-work-complete's three, bare and
/// through pgbench; claim-work-complete as idem runs it, against both; then
/// the guard against claim-work-complete. Each runs for `seconds`, in
/// `rounds` interleaved rounds (the machine's noise hits both sides of a
/// round alike; the report gives each figure's median over the rounds).
/// Then counts every strategy's statements per request.
pub async fn measure_all(
    db: &Database,
    clients: usize,
    seconds: u64,
    rounds: usize,
    tick: impl Fn(),
) -> Result<ClientFigures> {
    let strategy = |kind: StrategyKind| {
        let settings = RaceInput::with_strategy(kind).build(Origin::Flags)?;
        let handler =
            Handler::Strategy(Arc::from(settings.build_strategy()), kind.uses_key_table());
        Ok::<_, anyhow::Error>(handler)
    };
    let (cwc, guard) = (StrategyKind::ClaimWorkComplete, StrategyKind::Guard);
    let bare = |script: Script| Handler::Bare(script);
    let cwc_bare_name = format!("{}, bare", cwc.name());
    // idem's loop runs as long as pgbench does: a fixed count would give
    // the fast raw statement a fraction of pgbench's time, where a
    // connection's first statements weigh more.
    let budget = Budget::For(std::time::Duration::from_secs(seconds));
    let mut samples: [Vec<ClientRow>; 5] = Default::default();
    let mut last_cwc = None;
    let mut last_guard = None;
    let mut last_raw = None;
    for _ in 0..rounds.max(1) {
        let pgbench = async |script| {
            let figure = pgbench::measure(db, script, clients, seconds).await?;
            anyhow::Ok(figure.map(|p| (p.tps, p.cpu_us_per_request)))
        };
        let raw = measure(db, "raw", bare(Script::Raw), clients, clients, budget).await?;
        samples[0].push(row(&raw, "pgbench", pgbench(Script::Raw).await?));
        let cwc_bare = measure(
            db,
            &cwc_bare_name,
            bare(Script::ClaimWorkComplete),
            clients,
            clients,
            budget,
        )
        .await?;
        let cwc_pgbench = pgbench(Script::ClaimWorkComplete).await?;
        samples[1].push(row(&cwc_bare, "pgbench", cwc_pgbench));
        let idem_cwc = measure(db, cwc.name(), strategy(cwc)?, clients, clients, budget).await?;
        samples[2].push(row(&idem_cwc, "pgbench", cwc_pgbench));
        let reference = (cwc_bare.per_second, cwc_bare.cpu_us_per_request);
        samples[3].push(row(&idem_cwc, &cwc_bare_name, Some(reference)));
        let idem_guard =
            measure(db, guard.name(), strategy(guard)?, clients, clients, budget).await?;
        let reference = (idem_cwc.per_second, idem_cwc.cpu_us_per_request);
        samples[4].push(row(&idem_guard, cwc.name(), Some(reference)));
        (last_raw, last_cwc, last_guard) = (Some(raw), Some(idem_cwc), Some(idem_guard));
        tick();
    }
    let rows = samples.iter().map(|s| median_row(s)).collect();

    // Statements per request: a short run of each other strategy on fresh keys.
    let mut statements: Vec<Throughput> = last_raw.into_iter().collect();
    for kind in StrategyKind::course() {
        let counted = match kind {
            StrategyKind::ClaimWorkComplete => last_cwc.clone(),
            StrategyKind::Guard => last_guard.clone(),
            _ => None,
        };
        let counted = match counted {
            Some(counted) => counted,
            None => measure(db, kind.name(), strategy(kind)?, clients, clients, 500).await?,
        };
        statements.push(counted);
    }
    tick();
    Ok(ClientFigures {
        clients,
        seconds,
        rounds: rounds.max(1),
        rows,
        statements,
    })
}

/// Each figure's median over the rounds.
fn median_row(rounds: &[ClientRow]) -> ClientRow {
    let median = |f: &dyn Fn(&ClientRow) -> Option<f64>| {
        let mut values: Vec<f64> = rounds.iter().filter_map(f).collect();
        (!values.is_empty()).then(|| crate::race::percentile(&mut values, 0.5))
    };
    ClientRow {
        what: rounds[0].what.clone(),
        idem_per_second: median(&|r| Some(r.idem_per_second)).unwrap_or(0.0),
        against: rounds[0].against.clone(),
        against_per_second: median(&|r| r.against_per_second),
        ratio: median(&|r| r.ratio),
        ratio_spread: rounds
            .iter()
            .filter_map(|r| r.ratio)
            .fold(None, |spread, x| match spread {
                None => Some((x, x)),
                Some((low, high)) => Some((f64::min(low, x), f64::max(high, x))),
            }),
        idem_cpu_us: median(&|r| Some(r.idem_cpu_us)).unwrap_or(0.0),
        against_cpu_us: median(&|r| r.against_cpu_us),
    }
}

fn row(idem: &Throughput, against: &str, reference: Option<(f64, f64)>) -> ClientRow {
    ClientRow {
        what: idem.what.clone(),
        idem_per_second: idem.per_second,
        against: against.to_string(),
        against_per_second: reference.map(|r| r.0),
        ratio: reference.map(|r| idem.per_second / r.0),
        ratio_spread: None,
        idem_cpu_us: idem.cpu_us_per_request,
        against_cpu_us: reference.map(|r| r.1),
    }
}
