//! What synchronous replication costs a request: claim-work-complete with a hot standby, its commits waiting for the primary alone, then until the standby has applied them.

use anyhow::Result;
use serde::Serialize;

use crate::db::{Backend, Database};
use crate::limits::Origin;
use crate::race::options::RaceInput;
use crate::race::{Race, Synchronous, percentile};
use crate::strategy::StrategyKind;

/// One request at a time under each replication mode.
#[derive(Debug, Serialize)]
pub struct ReplicationFigure {
    pub synchronous: Synchronous,
    /// Requests measured, one race of one worker each.
    pub requests: usize,
    /// From the request's start to its answer: a claim and a completion,
    /// each a commit.
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// `requests` requests of claim-work-complete with no work, one at a time,
/// under `synchronous = off` and then `remote_apply`; with the ratio of
/// their medians, the price of a 201 the standby is sure to have. Only on
/// idem's own cluster, which it may give a standby: empty on a user's server.
pub async fn measure(
    db: &Database,
    requests: usize,
    tick: impl Fn(),
) -> Result<Vec<ReplicationFigure>> {
    if !matches!(db.backend, Backend::Embedded(_)) {
        return Ok(Vec::new());
    }
    let mut figures = Vec::new();
    for synchronous in [Synchronous::Off, Synchronous::RemoteApply] {
        let settings = RaceInput::with_strategy(StrategyKind::ClaimWorkComplete)
            .with(|r| {
                r.shape.workers = Some(1);
                r.app.work_ms = Some(0);
                r.standby.standby = true;
                r.standby.synchronous = Some(synchronous);
            })
            .build(Origin::Flags)?;
        let race = Race::prepare(db, settings).await?;
        let mut latencies = Vec::with_capacity(requests);
        for run in 1..=requests {
            let result = race.run(run).await?;
            latencies.extend(result.reports.iter().map(|w| w.answer_ms));
            if run % 10 == 0 {
                tick();
            }
        }
        figures.push(ReplicationFigure {
            synchronous,
            requests,
            p50_ms: percentile(&mut latencies, 0.5),
            p99_ms: percentile(&mut latencies, 0.99),
        });
    }
    Ok(figures)
}
