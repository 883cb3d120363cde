//! Faults on purpose (lesson 7): a worker's connection dies at a chosen step.
//!
//! The fault is fired from outside the strategy, as a real crash would be:
//! another session runs `pg_terminate_backend` on the worker's server process
//! and waits until it is gone. Strategies only record their steps through
//! [`Trace::query`](super::Trace::query); that is where the fault hooks in, so
//! a learner's own guard meets the same faults.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use sqlx::PgPool;

use crate::db::book;

use super::Step;

/// Where in a request the connection dies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultPoint {
    /// After the claim (or the find), as the work is about to start.
    AfterClaim,
    /// Halfway through the work, before its XP row is written.
    DuringWork,
    /// After the work, as the claim is about to be completed (or the key stored).
    BeforeComplete,
}

impl FaultPoint {
    pub fn name(self) -> &'static str {
        match self {
            FaultPoint::AfterClaim => "after-claim",
            FaultPoint::DuringWork => "during-work",
            FaultPoint::BeforeComplete => "before-complete",
        }
    }
}

/// What the fault does to the worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// The worker dies with its connection: it answers nothing, ever.
    Crash,
    /// Only the connection dies: the worker lives on and may retry.
    Kill,
}

/// A fault planned for one request.
#[derive(Debug)]
pub struct Fault {
    pub(crate) at: FaultPoint,
    pub(crate) kind: FaultKind,
    meta: PgPool,
    fired: Arc<AtomicBool>,
}

impl Fault {
    /// A fault that fires once; `fired` may be shared so that one fault
    /// among several armed workers fires only for the first to get there.
    pub fn new(at: FaultPoint, kind: FaultKind, meta: PgPool, fired: Arc<AtomicBool>) -> Self {
        Self {
            at,
            kind,
            meta,
            fired,
        }
    }

    /// Whether this fault should fire before `step` starts. Both points are
    /// only reached by a request that does the work, so a loser is never hit.
    pub fn before(&self, step: Step) -> bool {
        match self.at {
            FaultPoint::AfterClaim => step == Step::Work,
            FaultPoint::BeforeComplete => matches!(step, Step::Complete | Step::Store),
            FaultPoint::DuringWork => false,
        }
    }

    /// Whether it fires while `step` runs.
    pub fn during(&self, step: Step) -> bool {
        self.at == FaultPoint::DuringWork && step == Step::Work
    }

    /// Claims the right to fire; false if it already fired.
    pub fn arm(&self) -> bool {
        !self.fired.swap(true, Ordering::SeqCst)
    }

    /// Terminates `pid` and waits (up to 5 s) until it is gone.
    pub async fn fire(&self, pid: i32, delay: Duration) {
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let _ = terminate(&self.meta, pid).await;
    }
}

/// Ends server process `pid` from another session, as its client's crash
/// would, and waits (up to 5 s) until it is gone: its transaction rolled
/// back and its locks released. pg_terminate_backend's own wait looks every
/// 100 ms; this looks every 2, as an exploration kills a process a run.
pub async fn terminate(meta: &PgPool, pid: i32) -> sqlx::Result<()> {
    let mut tx = meta.begin().await?;
    book::query("SELECT pg_terminate_backend($1)")
        .bind(pid)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    let deadline = Instant::now() + Duration::from_secs(5);
    // A transaction of its own each look: pg_stat_activity is read once
    // a transaction. The backend leaves it after its transaction aborted.
    while Instant::now() < deadline {
        let mut tx = meta.begin().await?;
        let alive: bool =
            book::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)")
                .bind(pid)
                .fetch_one(&mut *tx)
                .await?;
        tx.commit().await?;
        if !alive {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    Ok(())
}
