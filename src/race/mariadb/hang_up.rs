//! Lesson 9's client that gives up, on MariaDB: halfway through its request's work it stops waiting, the app finishes the request or drops its future at its next await (`--on-hangup`), and after the burst the client sends it again until it is answered.
//!
//! On PostgreSQL the client is over HTTP and closes its socket. A MariaDB
//! race runs its requests in this process, with no socket between client
//! and app: the client is the task that waits for the request's answer,
//! and giving up is that task no longer waiting. What the server sees is
//! the same: a request that runs to its end with nobody to answer, or one
//! whose connection the app lets go of mid-request (closed if it was
//! inside a transaction, so that no one else inherits it).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::plan::MariadbRace;
use super::shared::{Shared, asked, bounded, one_request};
use super::worker::{EngineWorker, report};
use crate::http::app::OnHangup;
use crate::race::options::{Retried, settle, until_answered};
use crate::request::Outcome;
use crate::request::hang_up::HangUps;
use crate::request::mariadb::{Answered, Asked};

/// A request the app went on with after its client gave up.
type GoingOn = tokio::task::JoinHandle<EngineWorker>;

/// One race's client that gives up, and the request the app went on with.
#[derive(Clone)]
pub(super) struct Client {
    hang_ups: Arc<HangUps>,
    on: OnHangup,
    /// How far into the work it gives up: halfway.
    after: Duration,
    going_on: Arc<Mutex<Option<GoingOn>>>,
}

impl Client {
    /// The race's client that gives up, if it has one.
    pub(super) fn of(race: &MariadbRace) -> Option<Self> {
        let plan = race.hang_up?;
        Some(Self {
            hang_ups: Arc::new(HangUps::new(plan.worker)),
            on: race.on_hangup.unwrap_or_default(),
            after: race.settings.app().work / 2,
            going_on: Arc::default(),
        })
    }

    /// What a request tells when its work begins.
    pub(super) fn hang_ups(&self) -> Arc<HangUps> {
        self.hang_ups.clone()
    }

    /// Worker `worker`'s request as its client waits for it: its answer,
    /// or, if this client is the one, given up on halfway through its work.
    pub(super) async fn waits(
        &self,
        request: impl Future<Output = EngineWorker> + Send + 'static,
        worker: usize,
        gate: Instant,
    ) -> EngineWorker {
        let Some(told) = self.hang_ups.listen(worker) else {
            return bounded(request, worker, gate).await;
        };
        let mut running = tokio::spawn(bounded(request, worker, gate));
        let after = self.after;
        let gives_up = async move {
            match told.await {
                Ok(()) => tokio::time::sleep(after).await,
                // Never told: this client is not the one.
                Err(_) => std::future::pending().await,
            }
        };
        tokio::select! {
            done = &mut running => done.unwrap_or_else(|_| {
                ended(worker, gate, Outcome::Error, "its task ended without an answer")
            }),
            () = gives_up => {
                match self.on {
                    // The app drops the request's future at its next await.
                    OnHangup::Cancel => running.abort(),
                    OnHangup::Finish => *self.lock() = Some(running),
                }
                hung_up(worker, gate)
            }
        }
    }

    /// After the burst: the client that gave up sends its request again
    /// until it is answered (see [`until_answered`]); then its first
    /// request's report says what the app did with it.
    pub(super) async fn retry(
        &self,
        race: &MariadbRace,
        shared: &Shared,
        reports: &mut Vec<EngineWorker>,
        gate: Instant,
    ) {
        let Some(first) = reports.iter().position(|w| w.outcome == Outcome::HungUp) else {
            return;
        };
        let of = reports[first].worker;
        let app = race.settings.app();
        let again = Asked {
            worker: race.workers + 1,
            work_fails: false,
            ..asked(race, of)
        };
        let send = async || {
            let sent = one_request(shared.clone(), again.clone(), gate, None);
            bounded(sent, again.worker, gate).await
        };
        reports.push(until_answered(send, settle(app.recovery.stale_after(), app.work)).await);
        let going_on = self.lock().take();
        let went_on = match going_on {
            Some(task) => task.await.ok(),
            None => None,
        };
        abandoned(&mut reports[first], went_on, self.on);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<GoingOn>> {
        self.going_on.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The report of a client that gave up: no answer; what the app did with
/// its request is joined after the retry, if the app finished it.
fn hung_up(worker: usize, gate: Instant) -> EngineWorker {
    ended(worker, gate, Outcome::HungUp, "hung up during its work")
}

/// A report with no answer from the request, made now.
fn ended(worker: usize, gate: Instant, outcome: Outcome, did: &str) -> EngineWorker {
    let at = gate.elapsed().as_secs_f64() * 1000.0;
    report(worker, 0.0, Answered::new(outcome, "—", did), None, at)
}

/// What the app did with the request whose client gave up: finished (its
/// steps, its XP row and its calls joined to the client's report), or
/// dropped.
fn abandoned(report: &mut EngineWorker, went_on: Option<EngineWorker>, on: OnHangup) {
    match went_on {
        Some(finished) => {
            report.saw = finished.saw;
            report.did = format!("hung up; the app went on: {}", finished.did);
            report.made_xp = finished.made_xp;
            report.service_calls = finished.service_calls;
            report.steps = finished.steps;
            report.error = finished.error;
        }
        None => {
            report.did = match on {
                OnHangup::Cancel => "hung up; the app dropped its request".into(),
                OnHangup::Finish => "hung up; the app had not finished it".into(),
            };
        }
    }
}

impl Retried for EngineWorker {
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
