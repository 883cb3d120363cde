//! The award service's ledger: each call it receives, written as a row on a connection of its own, where no request's rollback reaches it.
//!
//! The race counts service calls in memory ([`ServiceCalls`](super::service::ServiceCalls)),
//! which only idem can read. `idem serve` is probed from outside, by a
//! query: so each call is also written to the run's `award_calls` table,
//! as a payment provider keeps its own record of the charges it was asked
//! for. `idem probe --count-sql 'SELECT count(*) FROM <schema>.award_calls'`
//! then counts the times the work ran, which a guard that rolls its rows
//! back (a claim taken over mid-work) hides from a count of XP rows.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Result;
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::types::Type;

use crate::db::aside::{Aside, Sent, bounded};
use crate::db::pool::{Conn, Workers};
use crate::db::statements::{Sends, Sql};

/// Calls waiting to be written, at most; a caller past it waits, as it
/// would for a slow service.
const QUEUE: usize = 1024;

/// Calls written in one statement, at most.
const BATCH: usize = 64;

/// How many times a batch is tried, each on a connection opened again if
/// the last one was lost, before its calls count as not written.
const TRIES: usize = 3;

/// Writes a batch of calls.
static WRITE: Sql = Sql::new(
    "INSERT INTO award_calls (idempotency_key, worker)
     SELECT * FROM unnest($1::text[], $2::int4[])",
    &[Type::TEXT_ARRAY, Type::INT4_ARRAY],
);

/// One call, and who waits to hear whether it was written.
struct Call {
    key: String,
    worker: i32,
    written: oneshot::Sender<bool>,
}

/// Where the award service writes its calls.
#[derive(Debug, Clone)]
pub struct Ledger {
    calls: mpsc::Sender<Call>,
    /// Calls whose write failed.
    lost: Arc<AtomicU64>,
}

/// A call the ledger could not write: its connection was lost and could
/// not be opened again in time, or the server refused the write.
#[derive(Debug, thiserror::Error)]
#[error("the award service's call could not be written to its ledger")]
pub struct NotWritten;

impl Ledger {
    /// A ledger on a connection set aside from `workers`' pool, opened
    /// again whenever it is lost (see [`crate::db::aside`]); its writer
    /// ends when the last clone is dropped.
    pub async fn open(workers: &Workers) -> Result<Self> {
        let aside = Aside::new(workers.clone(), "the service's ledger");
        let conn = aside.open().await?;
        let (calls, queued) = mpsc::channel(QUEUE);
        let lost = Arc::new(AtomicU64::new(0));
        tokio::spawn(write(aside, conn, queued, lost.clone()));
        Ok(Self { calls, lost })
    }

    /// Calls that could not be written (`GET /counts` says how many).
    pub fn lost(&self) -> u64 {
        self.lost.load(Ordering::Relaxed)
    }

    /// Writes one call of `worker`'s under `key`, and returns once it is
    /// written, or could not be. Should the caller be dropped first (its
    /// client hung up), the call is written all the same: the service
    /// received it.
    pub async fn write(&self, key: &str, worker: usize) -> Result<(), NotWritten> {
        let (written, done) = oneshot::channel();
        let call = Call {
            key: key.to_owned(),
            worker: i32::try_from(worker).unwrap_or(i32::MAX),
            written,
        };
        if self.calls.send(call).await.is_err() {
            return Err(NotWritten);
        }
        match done.await {
            Ok(true) => Ok(()),
            _ => Err(NotWritten),
        }
    }
}

/// Writes what is queued, a batch at a time, until every ledger is gone.
/// A batch that could not be written in [`TRIES`] is counted as lost, and
/// its callers are told.
async fn write(aside: Aside, conn: Conn, mut queued: mpsc::Receiver<Call>, lost: Arc<AtomicU64>) {
    let mut conn = Some(conn);
    let mut batch = Vec::with_capacity(BATCH);
    while queued.recv_many(&mut batch, BATCH).await > 0 {
        let (keys, workers): (Vec<&str>, Vec<i32>) =
            batch.iter().map(|c| (c.key.as_str(), c.worker)).unzip();
        let mut written = false;
        for _ in 0..TRIES {
            if conn.is_none() {
                conn = aside.again().await;
            }
            let Some(open) = &conn else {
                continue;
            };
            match bounded(open, open.exec(&WRITE, &[&keys, &workers])).await {
                Sent::Done(_) => {
                    written = true;
                    break;
                }
                Sent::Failed => {}
                Sent::Lost => conn = None,
            }
        }
        if !written {
            lost.fetch_add(batch.len() as u64, Ordering::Relaxed);
        }
        for call in batch.drain(..) {
            let _ = call.written.send(written);
        }
    }
}
