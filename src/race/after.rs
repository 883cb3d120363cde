//! What a race does once its workers are done, in this order: lesson 5's cache traffic and the retry it loses, lesson 7's retries after a crash or a failed work, lesson 9's client that hung up and retries. The options say whether and how; the race does it.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::clock::Clock;
use super::options::{Retried, until_answered};
use super::runner::{Crew, Race};
use super::worker_report::{WorkerReport, abandoned};
use crate::db::pool;
use crate::request::Outcome;
use crate::store::cache;

impl Race<'_> {
    /// Each step after the race, in order; their retries join `reports`.
    /// `clock`: a stepped race's, which keeps its time (no sleep).
    pub(super) async fn after_race(
        &self,
        crew: &Crew,
        reports: &mut Vec<WorkerReport>,
        started: Instant,
        clock: Option<&Clock>,
    ) -> Result<()> {
        self.press_the_cache(crew, reports).await?;
        self.recover(crew, reports, started, clock).await?;
        self.retry_after_hang_up(crew, reports).await;
        Ok(())
    }

    /// Lesson 5's eviction: other traffic fills the cache, then the same
    /// request comes again, and finds its response or not.
    async fn press_the_cache(&self, crew: &Crew, reports: &mut Vec<WorkerReport>) -> Result<()> {
        let store = &self.settings.store;
        if store.cache_pressure() == 0 {
            return Ok(());
        }
        let timeout = self.settings.app.pool.checkout_timeout();
        let conn = pool::checkout(&self.pool, timeout).await.map_err(|e| {
            anyhow::anyhow!(
                "could not get a connection for cache traffic: {}",
                pool::describe(&e)
            )
        })?;
        let entry = cache::Entry::new(
            crate::store::ClaimStatus::Completed,
            None,
            None,
            Duration::from_secs(3600),
        );
        for i in 0..store.cache_pressure() {
            cache::write(&conn, &format!("other-traffic-{i}"), &entry, store.cache())
                .await
                .context("cache traffic failed")?;
        }
        drop(conn);
        reports.extend(self.retries(crew, 1, 1).await?);
        Ok(())
    }

    /// Lesson 7's recovery: after a crash, the crashed request is sent
    /// again once its claim is stale (its clock moved, in a stepped race);
    /// after a failed work, at once.
    async fn recover(
        &self,
        crew: &Crew,
        reports: &mut Vec<WorkerReport>,
        started: Instant,
        clock: Option<&Clock>,
    ) -> Result<()> {
        let faults = &self.settings.faults;
        let crashed = reports
            .iter()
            .find(|w| w.outcome == Outcome::Crashed)
            .map(|w| (w.worker, w.answer_ms));
        let retried = match (crashed, faults.fail_work()) {
            (Some((worker, _)), _) if let Some(clock) = clock => {
                clock.jump(&[]).await?;
                worker
            }
            (Some((worker, crashed_at)), _) => {
                let stale_after = self.settings.app.recovery.stale_after();
                let due = started + Duration::from_secs_f64(crashed_at / 1000.0) + stale_after;
                tokio::time::sleep_until(due.into()).await;
                worker
            }
            (None, Some(worker)) => worker,
            (None, None) => return Ok(()),
        };
        let count = faults.recovery_retries();
        reports.extend(self.retries(crew, retried, count).await?);
        Ok(())
    }

    /// Lesson 9: a client that hung up retries until it gets a final
    /// answer or the settling time has passed, and its first request's
    /// report says what the app did with it (`--on-hangup`).
    async fn retry_after_hang_up(&self, crew: &Crew, reports: &mut Vec<WorkerReport>) {
        let s = &self.settings;
        let hung_up = reports
            .iter()
            .find(|w| w.outcome == Outcome::HungUp)
            .map(|w| w.worker);
        let Some(worker) = hung_up else {
            return;
        };
        let settle = super::options::settle(s.app.recovery.stale_after(), s.app.work);
        reports.push(self.retry_until_answered(crew, worker, settle).await);
        // What the app did with the abandoned request, if it went on.
        let handled = crew.take_handled(worker);
        if let (Some(handled), Some(report)) =
            (handled, reports.iter_mut().find(|w| w.worker == worker))
        {
            abandoned(report, handled, s.app.on_hangup);
        }
    }

    /// The retry of a client that hung up: worker `of`'s request from a
    /// new worker, until it is answered (see [`until_answered`]).
    async fn retry_until_answered(&self, crew: &Crew, of: usize, settle: Duration) -> WorkerReport {
        until_answered(async || self.send_again(crew, of).await, settle).await
    }
}

impl Retried for WorkerReport {
    fn outcome(&self) -> Outcome {
        self.outcome
    }

    fn did(&mut self) -> &mut String {
        &mut self.did
    }

    fn mark_retry(&mut self) {
        self.retry = true;
    }
}
