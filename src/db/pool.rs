//! The workers' connection pool: deadpool-postgres, standing for the application's pool.
//!
//! Its size is the lesson's lever. In the course, a pool of five with one
//! connection held by the runner's main thread left four for five threads:
//! the fifth waited, and that wait is why the figure is four, not five.

use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use deadpool_postgres::{
    Manager, ManagerConfig, Object, Pool, PoolError, RecyclingMethod, Runtime, Timeouts,
};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::statements::{Schema, Sending, Sends, Sql, Text};

/// A pooled connection, as a worker holds it, and the run's schema its
/// statements name.
pub struct Conn {
    object: Object,
    schema: Arc<Schema>,
    sending: Sending,
    /// How a cancel request reaches the server, as the connection did.
    tls: MakeRustlsConnect,
}

impl Conn {
    /// Closes the connection instead of giving it back to the pool.
    pub fn discard(self) {
        let _ = Object::take(self.object);
    }

    /// Asks the server, on a connection of its own, to cancel the
    /// statement this connection is running (PostgreSQL's cancel
    /// request); the statement then fails with 57014. Whether the server
    /// heard is not waited for past the connect.
    pub async fn cancel(&self) {
        let token = self.object.cancel_token();
        let asked = token.cancel_query(self.tls.clone());
        let _ = tokio::time::timeout(Duration::from_secs(2), asked).await;
    }
}

impl Deref for Conn {
    type Target = tokio_postgres::Client;
    fn deref(&self) -> &tokio_postgres::Client {
        &self.object
    }
}

impl Sends for Conn {
    fn client(&self) -> &tokio_postgres::Client {
        &self.object
    }
    fn text(&self, sql: &'static Sql) -> Text {
        Text::Qualified(self.schema.qualify(sql.text))
    }
    fn cache(&self) -> Option<&deadpool_postgres::ClientWrapper> {
        (self.sending == Sending::Prepared).then_some(&*self.object)
    }
}

/// The workers' pool, the run's schema its connections work in, and how
/// they send their statements.
#[derive(Clone)]
pub struct Workers {
    pool: Pool,
    schema: Arc<Schema>,
    sending: Sending,
    /// How the pool's connections were made, for a connection set aside.
    connect: Connect,
}

/// How the workers' connections reach the server: tokio-postgres's settings,
/// the TLS connector that checks what the URL's `sslmode` asks, the run's
/// schema, and how statements go (prepared by name only where nothing
/// can stand between idem and the server).
#[derive(Clone)]
pub struct Connect {
    pub config: tokio_postgres::Config,
    pub tls: MakeRustlsConnect,
    pub schema: Arc<Schema>,
    pub sending: Sending,
}

impl std::fmt::Debug for Connect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connect")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Builds a pool of at most `size` connections and opens them all, as a warm
/// application pool would be by the time requests arrive.
pub async fn warm_pool(connect: &Connect, size: usize) -> Result<Workers> {
    let manager = Manager::from_config(
        connect.config.clone(),
        connect.tls.clone(),
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    let pool = Pool::builder(manager)
        .max_size(size)
        .runtime(Runtime::Tokio1)
        .create_timeout(Some(Duration::from_secs(10)))
        .build()
        .context("could not build the workers' pool")?;
    // Open them all at once (the server starts a process for each, and
    // two cores start two at a time), each held until all are open, so
    // that none is handed out twice.
    let mut opening = tokio::task::JoinSet::new();
    for _ in 0..size {
        let pool = pool.clone();
        opening.spawn(async move { open_one(&pool).await });
    }
    let mut opened = Vec::with_capacity(size);
    while let Some(conn) = opening.join_next().await {
        let conn = conn
            .context("opening a connection panicked")?
            .map_err(|e| {
                anyhow::anyhow!("could not open the workers' connections: {}", describe(&e))
            })?;
        opened.push(conn);
    }
    drop(opened);
    Ok(Workers {
        pool,
        schema: connect.schema.clone(),
        sending: connect.sending,
        connect: connect.clone(),
    })
}

impl Workers {
    /// A connection made as the pool's are, but outside the pool, for a
    /// helper that must not wait behind the requests nor take a
    /// connection from them: the guard's heartbeat, the award service's
    /// record of its calls. It closes when dropped.
    pub async fn aside(&self) -> Result<Conn> {
        let own = warm_pool(&self.connect, 1).await?;
        checkout(&own, Duration::from_secs(10))
            .await
            .map_err(|e| anyhow::anyhow!("could not open a connection aside: {}", describe(&e)))
    }
}

/// How many times a connection refused for a full listen queue is tried.
const FULL_QUEUE_TRIES: u32 = 10;

/// Opens one connection of the pool. A unix socket whose listen queue is
/// full refuses a non-blocking connect at once (`EAGAIN`) instead of
/// waiting, as a single-threaded PgBouncer's can be when a whole pool
/// connects at once on a busy machine: a connect that failed before any
/// server spoke is tried again, a few times with a growing pause (under a
/// second in all); what a server refused is said at once.
async fn open_one(pool: &Pool) -> Result<Object, PoolError> {
    let mut tries = 1;
    loop {
        match pool.get().await {
            Err(PoolError::Backend(err)) if tries < FULL_QUEUE_TRIES && queue_full(&err) => {
                tokio::time::sleep(Duration::from_millis(20 * u64::from(tries))).await;
                tries += 1;
            }
            got => return got,
        }
    }
}

/// Whether a connect failed before any server spoke (the listen queue was
/// full, say), rather than being refused by the server itself.
fn queue_full(err: &tokio_postgres::Error) -> bool {
    let at_connect =
        err.as_db_error().is_none() && err.to_string().starts_with("error connecting to server");
    let full = std::error::Error::source(err)
        .and_then(|e| e.downcast_ref::<std::io::Error>())
        .is_some_and(|e| e.kind() == std::io::ErrorKind::WouldBlock);
    full || at_connect
}

/// Checks out a connection, waiting at most `wait` for a free one.
pub async fn checkout(workers: &Workers, wait: Duration) -> Result<Conn, PoolError> {
    let mut timeouts = Timeouts::new();
    timeouts.wait = Some(wait);
    let object = workers.pool.timeout_get(&timeouts).await?;
    Ok(Conn {
        object,
        schema: workers.schema.clone(),
        sending: workers.sending,
        tls: workers.connect.tls.clone(),
    })
}

/// A pool error in one line.
pub fn describe(err: &PoolError) -> String {
    match err {
        PoolError::Timeout(_) => "timed out waiting for a connection".to_string(),
        PoolError::Backend(e) => e
            .as_db_error()
            .map_or_else(|| e.to_string(), |db| db.message().to_string()),
        other => other.to_string(),
    }
}
