//! The heartbeat: a claim's owner renews it while its work runs, so that only a silent owner's claim goes stale.
//!
//! The stale-claim rule (take over a pending claim older than
//! [`stale_after`](super::Guard::stale_after)) cannot tell an owner that
//! died from one whose work is slow: with work longer than the timeout, a
//! retry takes over a live claim and the work runs twice (AWS Powertools'
//! in-progress expiry). With a heartbeat, the claim's `locked_at` is moved
//! to `now()` every [`interval`](Heartbeat::interval) while its work runs,
//! so it only ages once its owner has stopped: crashed, hung up and
//! dropped, or lost its connection.
//!
//! The renewal must commit while the work's own transaction is open, so it
//! cannot go on the work's connection: all of a process's beats go on one
//! connection of their own, one `UPDATE` for every live claim each
//! interval. What it costs is that connection and that statement. A guard
//! file's `renew` step is sent instead, once for each live claim
//! ([`Renewal::EachClaim`]).

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::OnceCell;
use tokio_postgres::types::Type;

use super::inputs::GuardClient;
use crate::db::statements::Sql;

/// Moves every live claim's `locked_at` to now, while it is still pending
/// and still its owner's.
static RENEW: Sql = Sql::new(
    "UPDATE idempotency_keys AS k SET locked_at = now()
     FROM unnest($1::int8[], $2::int4[]) AS live(id, worker)
     WHERE k.id = live.id AND k.worker = live.worker AND k.status = 'pending'",
    &[Type::INT8_ARRAY, Type::INT4_ARRAY],
);

/// The claims whose work is running: claim id → owner.
type Live = Mutex<HashMap<i64, i32>>;

/// What a beat sends.
#[derive(Debug, Clone, Copy)]
pub enum Renewal {
    /// The guard's own: one statement renews every live claim.
    AllAtOnce,
    /// A statement of someone else's (a guard file's `renew` step), sent
    /// once for each live claim; each parameter is the claim's id or its
    /// owner.
    EachClaim(&'static Sql, &'static [ClaimPart]),
}

pub use crate::request::ClaimPart;

/// Renews the claims of running work, every `interval`, from one
/// connection of its own. Clones share the same beats; they stop when the
/// last clone is dropped.
#[derive(Debug, Clone)]
pub struct Heartbeat {
    interval: Duration,
    renewal: Renewal,
    live: Arc<Live>,
    started: Arc<OnceCell<()>>,
    /// What the last renewal that failed said, for the requests whose
    /// claims it did not renew to show.
    failed: Arc<Mutex<Option<String>>>,
}

impl Heartbeat {
    /// A heartbeat that will renew claims every `interval`, once
    /// [`start`](Self::start)ed. Give it less than half the guard's
    /// `stale_after`, so that a renewal that is late by one round trip
    /// still comes before the claim is stale.
    pub fn every(interval: Duration) -> Self {
        Self::sending(interval, Renewal::AllAtOnce)
    }

    /// A heartbeat whose beats send `renewal`.
    pub fn sending(interval: Duration, renewal: Renewal) -> Self {
        Self {
            interval,
            renewal,
            live: Arc::default(),
            started: Arc::default(),
            failed: Arc::default(),
        }
    }

    /// What the last renewal that failed said, if one did: the server's
    /// message, or that it ran past [`RENEW_BOUND`].
    pub fn failure(&self) -> Option<String> {
        self.failed
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// How often it renews.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// Starts the beats on the connection `connect` makes, the first time
    /// it is called; later calls return at once. The connection must see
    /// the guard's `idempotency_keys`, and should be nobody else's. When
    /// it is lost (closed by the server, or a renewal that outlasts
    /// [`RENEW_BOUND`]), `connect` is called again for the next beat: a
    /// restart or an idle timeout does not stop the heartbeat for good.
    pub async fn start<C, E, F, Fut>(&self, connect: F) -> Result<(), E>
    where
        C: GuardClient + 'static,
        E: Send + 'static,
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<C, E>> + Send + 'static,
    {
        self.started
            .get_or_try_init(|| async {
                let client = connect().await?;
                let beats = Beats {
                    connect,
                    live: Arc::downgrade(&self.live),
                    interval: self.interval,
                    renewal: self.renewal,
                    failed: self.failed.clone(),
                };
                tokio::spawn(beats.run(client));
                Ok(())
            })
            .await
            .map(|_| ())
    }

    /// Renews claim `id` of `owner` until the returned value is dropped,
    /// if the beats have started.
    pub(crate) fn renew(&self, id: i64, owner: i32) -> Option<Renewing> {
        self.started.get()?;
        lock(&self.live).insert(id, owner);
        Some(Renewing {
            live: self.live.clone(),
            id,
        })
    }
}

/// A claim being renewed; dropped (the work ended, or its future was
/// dropped), the claim is renewed no more and ages from its last beat.
pub(crate) struct Renewing {
    live: Arc<Live>,
    id: i64,
}

impl Drop for Renewing {
    fn drop(&mut self) {
        lock(&self.live).remove(&self.id);
    }
}

/// The live claims, even if a holder panicked: the map holds plain data.
fn lock(live: &Live) -> std::sync::MutexGuard<'_, HashMap<i64, i32>> {
    live.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// How long one renewal may take before its connection counts as lost.
pub const RENEW_BOUND: Duration = Duration::from_secs(2);

/// The beats: where they open their connection, the claims they renew,
/// and how often.
struct Beats<F> {
    connect: F,
    live: Weak<Live>,
    interval: Duration,
    renewal: Renewal,
    failed: Arc<Mutex<Option<String>>>,
}

impl<F> Beats<F> {
    /// Every `interval`, one statement renews every live claim; ends when
    /// the heartbeat is gone. A renewal that fails is not retried: its
    /// claims age, as a silent owner's do. A connection that is lost is
    /// opened again for the next beat that has claims to renew.
    async fn run<C, E, Fut>(self, first: C)
    where
        C: GuardClient,
        F: Fn() -> Fut,
        Fut: Future<Output = Result<C, E>>,
    {
        let mut client = Some(first);
        let mut ticks = tokio::time::interval(self.interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let Some(live) = self.live.upgrade() else {
                return;
            };
            let (ids, owners): (Vec<i64>, Vec<i32>) =
                lock(&live).iter().map(|(id, owner)| (*id, *owner)).unzip();
            drop(live);
            if ids.is_empty() {
                continue;
            }
            if client.is_none() {
                client = (self.connect)().await.ok();
            }
            let Some(open) = &client else {
                continue;
            };
            let beat = renew(open, self.renewal, &ids, &owners);
            // A statement the server refused leaves the connection usable;
            // one that ran past its bound, or a lost connection, does not.
            let (said, usable) = match tokio::time::timeout(RENEW_BOUND, beat).await {
                Ok(Ok(())) => continue,
                Ok(Err(err)) => {
                    let said = err
                        .as_db_error()
                        .map_or_else(|| err.to_string(), |db| db.message().to_owned());
                    (said, !open.client().is_closed())
                }
                Err(_) => (format!("it ran past {} ms", RENEW_BOUND.as_millis()), false),
            };
            *self
                .failed
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()) =
                Some(crate::controls::escaped(&said).into_owned());
            if !usable {
                client = None;
            }
        }
    }
}

/// One beat: the claims `ids` of `owners` renewed on `client`.
async fn renew<C: GuardClient>(
    client: &C,
    renewal: Renewal,
    ids: &[i64],
    owners: &[i32],
) -> Result<(), tokio_postgres::Error> {
    type Param<'p> = &'p (dyn tokio_postgres::types::ToSql + Sync);
    match renewal {
        Renewal::AllAtOnce => {
            let params: [Param; 2] = [&ids, &owners];
            client.exec(&RENEW, &params).await?;
        }
        Renewal::EachClaim(sql, parts) => {
            for (id, owner) in ids.iter().zip(owners) {
                let params: Vec<Param> = parts
                    .iter()
                    .map(|part| -> Param {
                        match part {
                            ClaimPart::Id => id,
                            ClaimPart::Owner => owner,
                        }
                    })
                    .collect();
                client.exec(sql, &params).await?;
            }
        }
    }
    Ok(())
}
