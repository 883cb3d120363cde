//! Connections set aside for helpers (the guard's heartbeat, the award service's ledger): opened again when they are lost, every wait bounded, and said on stderr when one goes and when it is back.
//!
//! A helper holds one connection for an app's whole life. A server
//! restart, an idle timeout or `pg_terminate_backend` ends it, and a
//! helper that never opens another stops for good: the heartbeat beats no
//! more (slow work is taken over and runs twice), the ledger writes no
//! more calls (a probe counts zero). So a helper opens its connection
//! through an [`Aside`], which opens a new one whenever asked after a
//! loss, within [`CONNECT_BOUND`], and says in one line when the helper
//! lost its connection and when it has one again; and it runs each
//! statement within [`STATEMENT_BOUND`] (see [`bounded`]), after which
//! the connection counts as lost and is closed.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::pool::{Conn, Workers};

/// How long opening a helper's connection may take.
pub const CONNECT_BOUND: Duration = Duration::from_secs(5);

/// How long one statement of a helper may take; past it the connection is
/// closed and counts as lost.
pub const STATEMENT_BOUND: Duration = Duration::from_secs(5);

/// Opens a helper's connection, again after each loss, and says so.
pub struct Aside {
    workers: Workers,
    /// The helper, as a line names it (`the heartbeat`).
    helper: &'static str,
    /// Whether the helper has had a first connection.
    opened: AtomicBool,
    /// Whether the helper has lost its connection and has none yet.
    lost: AtomicBool,
}

impl Aside {
    /// Connections for `helper`, made as `workers`' are.
    pub fn new(workers: Workers, helper: &'static str) -> Self {
        Self {
            workers,
            helper,
            opened: AtomicBool::new(false),
            lost: AtomicBool::new(false),
        }
    }

    /// The helper's connection: its first, or after a loss a new one.
    pub async fn open(&self) -> anyhow::Result<Conn> {
        if !self.opened.swap(true, Ordering::SeqCst) {
            return self.first().await;
        }
        self.again()
            .await
            .ok_or_else(|| anyhow::anyhow!("{} has no connection", self.helper))
    }

    /// The helper's first connection: an error here is the caller's to
    /// report (the app does not start).
    pub async fn first(&self) -> anyhow::Result<Conn> {
        tokio::time::timeout(CONNECT_BOUND, self.workers.aside())
            .await
            .map_err(|_| {
                anyhow::anyhow!(
                    "could not open {}'s connection within {} s",
                    self.helper,
                    CONNECT_BOUND.as_secs()
                )
            })?
    }

    /// A new connection, the helper having lost its last one; `None` (and
    /// the helper is said to be without one) if it cannot be had now.
    pub async fn again(&self) -> Option<Conn> {
        if !self.lost.swap(true, Ordering::SeqCst) {
            eprintln!("idem: {} lost its connection; opening another", self.helper);
        }
        match self.first().await {
            Ok(conn) => {
                self.lost.store(false, Ordering::SeqCst);
                eprintln!("idem: {} has a connection again", self.helper);
                Some(conn)
            }
            Err(_) => None,
        }
    }
}

/// What a helper's statement came to: done, failed on a live connection,
/// or the connection is lost (closed, or the statement outlasted
/// [`STATEMENT_BOUND`]) and must be opened again.
pub enum Sent<T> {
    Done(T),
    Failed,
    Lost,
}

/// Runs `statement` on `conn` within [`STATEMENT_BOUND`].
pub async fn bounded<T, E>(conn: &Conn, statement: impl Future<Output = Result<T, E>>) -> Sent<T> {
    match tokio::time::timeout(STATEMENT_BOUND, statement).await {
        Ok(Ok(done)) => Sent::Done(done),
        Ok(Err(_)) if !conn.is_closed() => Sent::Failed,
        _ => Sent::Lost,
    }
}
