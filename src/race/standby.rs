//! The hot standby beside a race (lesson 10, `--standby`, `--standby-url`): its start and what reads it, its lag once the workers are done, and the failover that promotes it.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::options::{CATCH_UP_SLACK, ReadFrom, StandbyPlan, Synchronous, catch_up_limit};
use super::result::{FailoverFigures, StandbyFigures};
use super::worker_report::WorkerReport;
use crate::db::Database;
use crate::db::pool::{self, Workers, warm_pool};
use crate::db::standby::{self, Standby, StandbyShape};
use crate::request::Outcome;

/// The hot standby beside a race (`--standby`, `--standby-url`), and what reads it.
pub(crate) struct Beside {
    /// idem's own standby; `None` for the user's, which idem only reads.
    standby: Option<Standby>,
    /// The pool the finds read from with `--read-from standby`.
    pub(crate) reader: Workers,
    /// How the app's connections reach the standby: after a failover, the
    /// new primary's pool is made with it.
    connect: pool::Connect,
    /// A connection that asks the standby how far it has replayed.
    pub(crate) watch: pool::Conn,
    /// How the app's commits wait for it.
    synchronous: Synchronous,
}

impl Beside {
    /// Starts idem's standby (a second or so of pg_basebackup and
    /// start-up, before the race), or finds the user's, and opens what
    /// reads it.
    pub(crate) async fn start(
        db: &Database,
        plan: StandbyPlan,
        pool_size: usize,
        role: Option<&str>,
    ) -> Result<Self> {
        let (standby, mut connect) = match db.standby_config()? {
            Some(connect) => (None, connect),
            None => {
                let shape = StandbyShape {
                    apply_delay: (!plan.apply_delay.is_zero()).then_some(plan.apply_delay),
                    link_delay: plan.link_delay,
                };
                let (standby, connect) = standby::start_for(db, shape).await?;
                (Some(standby), connect)
            }
        };
        if plan.synchronous == Synchronous::RemoteApply {
            standby::make_synchronous(db, true, catch_up_limit(plan)).await?;
        }
        // idem watches the standby as the superuser; the app's finds read
        // it as the guard file's role, if there is one.
        let watch = pool::checkout(&warm_pool(&connect, 1).await?, Duration::from_secs(10))
            .await
            .map_err(|e| anyhow::anyhow!("could not watch the standby: {}", pool::describe(&e)))?;
        if let Some(role) = role {
            connect.config.user(role);
        }
        let reader = warm_pool(&connect, pool_size)
            .await
            .context("the standby")?;
        if standby.is_none() {
            standby::follows(db, &watch, catch_up_limit(plan)).await?;
        }
        Ok(Beside {
            standby,
            reader,
            connect,
            watch,
            synchronous: plan.synchronous,
        })
    }

    /// idem's own standby, which a failover promotes.
    /// The standby's lag (lesson 10) once the workers are done, before a
    /// failover cuts it off.
    pub(crate) async fn figures(
        &self,
        db: &Database,
        plan: StandbyPlan,
        read_from: ReadFrom,
    ) -> Result<StandbyFigures> {
        let lag_bytes = standby::behind(db, &self.watch).await?;
        // The primary's own view of the lag needs rights on it that a
        // user's role may not have: only on idem's cluster.
        let replay_lag_ms = match &self.standby {
            Some(own) => Some(own.lag(db).await?.1),
            None => None,
        };
        Ok(StandbyFigures {
            yours: plan.yours,
            apply_delay_ms: plan.apply_delay.as_millis() as u64,
            read_from,
            lag_bytes,
            replay_lag_ms,
            synchronous: plan.synchronous,
            link_delay_ms: plan.link_delay.map(|d| d.as_millis() as u64),
        })
    }

    /// Lesson 10's failover: cuts the link to the standby (the WAL still
    /// on it is lost, as in a network partition), counts what the old
    /// primary has, promotes the standby, points a new pool at it (as a
    /// proxy or a DNS switch would) and has `retry` send the first
    /// completed request's worker again there. Returns the figures, the
    /// retry's report, and the new primary's counts after it.
    pub(crate) async fn fail_over(
        &self,
        db: &Database,
        key: &str,
        pool_size: usize,
        reports: &[WorkerReport],
        started: Instant,
        retry: impl AsyncFnOnce(Workers, usize) -> Result<WorkerReport>,
    ) -> Result<(FailoverFigures, WorkerReport, crate::db::RowCounts)> {
        let link = self
            .own()?
            .link()
            .context("--failover needs the link it cuts")?;
        // The request whose 201 came first: the acknowledged key.
        let Some(acknowledged) = reports
            .iter()
            .filter(|w| w.outcome == Outcome::Created)
            .min_by(|a, b| a.answer_ms.total_cmp(&b.answer_ms))
        else {
            bail!(
                "no request was answered 201, so there was no acknowledged key to lose; \
                 the failover did not run"
            );
        };
        let cut_after = started.elapsed();
        let wal_lost_bytes = link.cut().await;
        let old = db.counts(key).await?;
        let promote = self.own()?.promote().await?;
        let new_primary = self.own()?.connect().await?;
        let promoted = db.counts_on(&new_primary, key).await?;
        let pool = warm_pool(&self.connect, pool_size).await?;
        let mut retry = retry(pool, acknowledged.worker).await?;
        retry.did = format!("on the new primary: {}", retry.did);
        let after = db.counts_on(&new_primary, key).await?;
        if self.synchronous == Synchronous::RemoteApply {
            // The old primary no longer waits for the standby it lost.
            standby::make_synchronous(db, false, CATCH_UP_SLACK).await?;
        }
        let kept = |c: &crate::db::RowCounts| (c.key_rows - c.pending_key_rows, c.xp_rows);
        let (old_keys, old_xp) = kept(&old);
        let (survived_keys, survived_xp) = kept(&promoted);
        let figures = FailoverFigures {
            cut_after_ms: cut_after.as_secs_f64() * 1000.0,
            wal_lost_bytes,
            promote_ms: promote.as_secs_f64() * 1000.0,
            old_primary: (&old).into(),
            promoted: (&promoted).into(),
            new_primary: (&after).into(),
            retried_worker: acknowledged.worker,
            retry_status: retry.status,
            acknowledged_key_lost: survived_keys < old_keys || survived_xp < old_xp,
        };
        Ok((figures, retry, after))
    }

    pub(crate) fn own(&self) -> Result<&Standby> {
        self.standby
            .as_ref()
            .context("idem promotes only a standby of its own")
    }
}
