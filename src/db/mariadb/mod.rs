//! MariaDB (InnoDB) as a place a race runs on: a disposable server of idem's own, a database of the run's own in it, and the tables of `migrations/mariadb/`.
//!
//! sqlx plays both parts here: the bookkeeping connection (databases,
//! tables, counts) and, for the workers, a `MySqlPool` of the race's pool
//! size, which stands for the app's pool as deadpool-postgres does on
//! PostgreSQL. No query macros: nothing here needs a server to build.

pub mod server;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};
use sqlx::{ConnectOptions, Connection};

use server::MariadbServer;

/// How long bookkeeping waits for a connection.
const ADMIN_ACQUIRE: Duration = Duration::from_secs(10);

/// How long a worker's statement may wait for a row lock before InnoDB
/// gives up with 1205 (its default is 50 s): no race here waits for more
/// than its work, and a stuck one ends in seconds.
const LOCK_WAIT: &str = "SET SESSION innodb_lock_wait_timeout = 10";

/// How to start the disposable server.
#[derive(Debug, Clone, Default)]
pub struct MariadbOptions {
    /// `--mariadb-bin`: where `mariadbd` and `mariadb-install-db` are.
    pub bin: Option<PathBuf>,
    /// Where the template is cached; the user's cache directory if `None`.
    pub template_cache: Option<PathBuf>,
}

/// A disposable MariaDB and the run's database in it.
#[derive(Debug)]
pub struct Mariadb {
    server: Option<MariadbServer>,
    /// Bookkeeping: the run's tables and counts.
    pub admin: MySqlPool,
    workers: MySqlConnectOptions,
}

impl Mariadb {
    /// Starts the server and makes the run's database and tables.
    pub async fn open(options: &MariadbOptions) -> Result<Self> {
        let opts = options.clone();
        let server = tokio::task::spawn_blocking(move || {
            MariadbServer::start(opts.bin.as_deref(), opts.template_cache.as_deref())
        })
        .await
        .context("the MariaDB start-up was interrupted")??;
        let root = MySqlConnectOptions::new()
            .socket(&server.socket)
            .username("root")
            .disable_statement_logging();
        let database = format!("idem_{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
        let mut conn = root.connect().await.context("could not reach MariaDB")?;
        sqlx::raw_sql(&format!("CREATE DATABASE `{database}`"))
            .execute(&mut conn)
            .await?;
        conn.close().await?;
        let in_run = root.clone().database(&database);
        let admin = MySqlPoolOptions::new()
            .max_connections(2)
            .acquire_timeout(ADMIN_ACQUIRE)
            .connect_with(in_run.clone())
            .await?;
        let mut conn = admin.acquire().await?;
        crate::db::migrations::apply_mariadb(&mut conn).await?;
        drop(conn);
        Ok(Self {
            server: Some(server),
            admin,
            workers: in_run,
        })
    }

    /// A pool for the workers: `size` connections at most, each waiting
    /// at most `checkout` for one.
    pub async fn workers_pool(&self, size: usize, checkout: Duration) -> Result<MySqlPool> {
        let pool = MySqlPoolOptions::new()
            .max_connections(size as u32)
            .min_connections(0)
            .acquire_timeout(checkout)
            // A pooled connection is not pinged before each checkout: the
            // race measures the request's statements, not the pool's.
            .test_before_acquire(false)
            .after_connect(|conn, _| {
                Box::pin(async move {
                    use sqlx::Executor;
                    conn.execute(LOCK_WAIT).await.map(drop)
                })
            })
            .connect_lazy_with(self.workers.clone());
        Ok(pool)
    }

    /// The server's version, as `mariadbd --version` says it.
    pub fn version(&self) -> &str {
        self.server.as_ref().map_or("", |s| s.bins.version.as_str())
    }

    /// Closes the pools and stops the server; how long the stop took.
    pub async fn close(mut self) -> Result<Option<Duration>> {
        self.admin.close().await;
        match self.server.take() {
            Some(server) => Ok(Some(
                tokio::task::spawn_blocking(move || server.stop()).await??,
            )),
            None => Ok(None),
        }
    }
}
