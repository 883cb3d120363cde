//! A worker's hold on a pooled connection: taken, given back while it waits, taken again.

use std::time::Duration;

use deadpool_postgres::PoolError;

use super::{Step, Trace};
use crate::db::pool::{self, Conn, Workers};

/// Why a request could not be answered normally.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    #[error("{}", db_message(.0))]
    Db(#[from] tokio_postgres::Error),
    #[error("{}", pool::describe(.0))]
    Checkout(#[from] PoolError),
    /// The worker crashed on purpose (a fault): it answers nothing more.
    #[error("the worker crashed")]
    Crashed,
    /// A statement of someone else's (a guard file's step) ran past its
    /// time: idem asked the server to cancel it, and closes its connection.
    #[error("{0}")]
    Overran(String),
    /// The claim store outside the database (`--store redis`) refused a
    /// command or did not answer in time.
    #[error("{0}")]
    Store(String),
}

impl Failure {
    /// Whether a retry with the same key may succeed: a serialization
    /// failure, a deadlock, or a lost connection. Anything else surfaces.
    pub fn is_transient(&self) -> bool {
        use tokio_postgres::error::SqlState;
        match self {
            Failure::Db(err) => {
                err.is_closed()
                    || matches!(
                        err.code(),
                        Some(&SqlState::T_R_SERIALIZATION_FAILURE)
                            | Some(&SqlState::T_R_DEADLOCK_DETECTED)
                            | Some(&SqlState::ADMIN_SHUTDOWN)
                    )
                    || err.as_db_error().is_none()
            }
            Failure::Checkout(PoolError::Backend(_)) => true,
            Failure::Checkout(_) | Failure::Crashed | Failure::Overran(_) | Failure::Store(_) => {
                false
            }
        }
    }
}

/// The connection a worker holds, if any, and the pool it comes from.
///
/// A lease is cancellation-safe: one dropped while it still holds its
/// connection (the request's future dropped at an await: the client hung
/// up, its stream was reset, a timeout fired) closes that connection
/// instead of giving it back, since it may be inside a transaction, or
/// waiting for a statement's answer, that nobody will finish. The server
/// then rolls the transaction back, so no claim it made is ever committed
/// by the next request on that connection. A request that ended gives its
/// connection back first ([`Lease::release`], [`Lease::into_conn`]).
pub struct Lease {
    pool: Workers,
    wait: Duration,
    conn: Option<Conn>,
    /// A hot standby's pool the strategy's finds read from
    /// (`--read-from standby`), and the connection held from it.
    reader: Option<Workers>,
    read: Option<Conn>,
    /// How many times this request checked a connection out.
    pub(crate) checkouts: u32,
}

impl Lease {
    pub fn new(pool: Workers, wait: Duration) -> Self {
        Self {
            pool,
            wait,
            conn: None,
            reader: None,
            read: None,
            checkouts: 0,
        }
    }

    /// The same lease, whose finds read from `reader` (a hot standby's
    /// pool) when one is given, as an app with a reading role does.
    pub fn reading_from(mut self, reader: Option<Workers>) -> Self {
        self.reader = reader;
        self
    }

    /// The connection a find reads on: the standby's, checked out on first
    /// use and held like the lease's own, or else the lease's own.
    pub async fn read_conn(&mut self, trace: &mut Trace) -> Result<&Conn, Failure> {
        let Some(reader) = &self.reader else {
            return self.conn(trace).await;
        };
        if trace.crashed() {
            return Err(Failure::Crashed);
        }
        let read = match self.read.take() {
            Some(read) => read,
            None => pool::checkout(reader, self.wait).await?,
        };
        Ok(self.read.insert(read))
    }

    /// A lease that already holds `conn`: a client that keeps its
    /// connection across requests (the benchmark's loop, like pgbench's).
    pub fn holding(pool: Workers, wait: Duration, conn: Conn) -> Self {
        let mut lease = Self::new(pool, wait);
        lease.conn = Some(conn);
        lease
    }

    /// The connection still held, if any, to hand to the next lease.
    pub fn into_conn(mut self) -> Option<Conn> {
        self.conn.take()
    }

    /// How long a checkout waits for a free connection before it gives up.
    pub fn wait(&self) -> std::time::Duration {
        self.wait
    }

    /// The held connection, checking one out first (a traced `checkout`
    /// step, waiting up to the checkout timeout) if none is held.
    pub async fn conn(&mut self, trace: &mut Trace) -> Result<&Conn, Failure> {
        if trace.crashed() {
            // A crashed worker checks nothing out any more.
            return Err(Failure::Crashed);
        }
        let conn = match self.conn.take() {
            Some(conn) => conn,
            None => {
                let conn = trace
                    .time(Step::Checkout, pool::checkout(&self.pool, self.wait))
                    .await?;
                trace.note("got a connection");
                self.checkouts += 1;
                // A planned fault needs to know which server process to end.
                // So does the step-by-step controller, to see lock waits.
                if (trace.fault.is_some() && trace.faulted.is_none()) || trace.stepper.is_some() {
                    let row = conn.query_typed_one("SELECT pg_backend_pid()", &[]).await?;
                    let pid: i32 = row.get(0);
                    trace.backend_pid = Some(pid);
                    trace.queries += 1;
                    if let Some(hook) = &trace.stepper {
                        hook.pid(pid);
                    }
                }
                conn
            }
        };
        Ok(self.conn.insert(conn))
    }

    /// Gives the connection back to the pool, e.g. while waiting between polls.
    pub fn release(&mut self) {
        self.conn = None;
        self.read = None;
    }

    /// Ends the lease's connection for good: it is closed, not returned (a crash).
    pub fn discard(&mut self) {
        for conn in [self.conn.take(), self.read.take()].into_iter().flatten() {
            conn.discard();
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.discard();
    }
}

/// `sent`, a statement of someone else's sent on `conn`, given at most
/// `limit`: past it idem asks the server to cancel the statement and the
/// request fails, naming `place` (a guard file's step and line). The
/// caller's lease must then discard the connection ([`Lease::discard`]):
/// the statement's transaction is nobody's any more.
pub async fn bounded<T>(
    conn: &Conn,
    limit: Duration,
    place: &str,
    sent: impl Future<Output = Result<T, tokio_postgres::Error>>,
) -> Result<T, Failure> {
    let sent = std::pin::pin!(sent);
    match tokio::time::timeout(limit, sent).await {
        Ok(done) => Ok(done?),
        Err(_) => {
            conn.cancel().await;
            Err(Failure::Overran(format!(
                "{place} ran past the step limit ({} ms); idem cancelled it",
                limit.as_millis()
            )))
        }
    }
}

/// The server's message, which may quote a guard file's statement: its
/// control characters written out (see [`crate::controls`]).
fn db_message(err: &tokio_postgres::Error) -> String {
    let message = err
        .as_db_error()
        .map_or_else(|| err.to_string(), |db| db.message().to_string());
    crate::controls::escaped(&message).into_owned()
}
