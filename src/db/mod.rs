//! The database a run works in: a disposable cluster or a real server, and the run's own schema.
//!
//! Two drivers, each with one job. sqlx does the bookkeeping: it creates the
//! run's schema, applies the migrations, resets and counts the tables. The
//! workers talk through deadpool-postgres, which stands for the application's
//! connection pool (see [`pool`]).

pub mod binaries;
pub mod cluster;
pub mod leftovers;
pub mod migrations;
pub mod os_user;
pub mod pool;
pub mod sweep;
pub mod template;

use std::str::FromStr;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};

pub use cluster::{Cluster, ClusterOptions};

/// How long a connection attempt may take before idem gives up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How to reach a database, as the user gave it.
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    /// `--database-url` / `DATABASE_URL`; the disposable cluster when `None`.
    pub database_url: Option<String>,
    /// Where the disposable cluster comes from.
    pub cluster: ClusterOptions,
    /// `--keep`: leave the run's schema on the server and print its name.
    pub keep: bool,
    /// `--schema`: work in a schema an earlier run kept, instead of a new one.
    /// It is neither migrated nor dropped.
    pub schema: Option<String>,
}

/// Where the run's tables live.
#[derive(Debug)]
pub enum Backend {
    /// A cluster idem started and will remove.
    Embedded(Box<Cluster>),
    /// A server the user named; `url` has any password hidden.
    Server { url: String },
}

/// An open database with the run's schema migrated and ready.
#[derive(Debug)]
pub struct Database {
    pub backend: Backend,
    /// The run's schema, `idem_<run id>`: every table idem makes lives here.
    pub schema: String,
    /// sqlx's pool for bookkeeping: schema, migrations, resets and counts.
    pub meta: PgPool,
    /// The workers' connection settings (search_path pinned to the schema).
    workers_config: tokio_postgres::Config,
    keep: bool,
    /// The schema came from `--schema`: an earlier run's, left as it was found.
    existing: bool,
    /// On a server: the connection holding the lock that marks this run's
    /// schema as alive (see [`sweep`]).
    holder: Option<PgConnection>,
}

impl Database {
    /// Opens the database: starts a disposable cluster or connects to the
    /// server, creates the run's schema and applies the migrations.
    pub async fn open(opts: &ConnectOptions) -> Result<Self> {
        let existing = opts.schema.clone();
        if let Some(schema) = &existing {
            if opts.database_url.is_none() {
                bail!("--schema needs --database-url: a disposable cluster has no kept schemas");
            }
            let valid = schema.len() == 13
                && schema.starts_with("idem_")
                && schema[5..]
                    .chars()
                    .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase());
            if !valid {
                bail!("--schema {schema:?} is not an idem schema (idem_ and 8 hex digits)");
            }
        }
        let schema = existing
            .clone()
            .unwrap_or_else(|| format!("idem_{}", &uuid::Uuid::new_v4().simple().to_string()[..8]));
        let (backend, sqlx_opts, pg_config) = match &opts.database_url {
            Some(url) => {
                let sqlx_opts = PgConnectOptions::from_str(url)
                    .map_err(|e| anyhow::anyhow!("malformed database URL: {}", first_line(&e)))?;
                let pg_config = tokio_postgres::Config::from_str(url)
                    .map_err(|e| anyhow::anyhow!("malformed database URL: {e}"))?;
                let url = redact(url);
                (Backend::Server { url }, sqlx_opts, pg_config)
            }
            None => {
                if opts.keep {
                    bail!("--keep needs --database-url: the disposable cluster is always removed");
                }
                let cluster_opts = opts.cluster.clone();
                let cluster = tokio::task::spawn_blocking(move || Cluster::start(&cluster_opts))
                    .await
                    .context("the cluster start-up was interrupted")??;
                let dir = cluster.socket_dir().to_path_buf();
                let sqlx_opts = PgConnectOptions::new()
                    .socket(&dir)
                    .username("postgres")
                    .database("postgres");
                let mut pg_config = tokio_postgres::Config::new();
                pg_config
                    .host_path(&dir)
                    .user("postgres")
                    .dbname("postgres");
                (Backend::Embedded(Box::new(cluster)), sqlx_opts, pg_config)
            }
        };

        let holder_options = sqlx_opts.clone();
        let sqlx_opts = sqlx_opts.options([("search_path", schema.as_str())]);
        // One connection first, so a refused or rejected connection is
        // reported as what it is rather than as a pool timing out.
        let probe =
            tokio::time::timeout(CONNECT_TIMEOUT, PgConnection::connect_with(&sqlx_opts)).await;
        match probe {
            Ok(Ok(conn)) => drop(conn.close().await),
            Ok(Err(e)) => bail!(
                "could not connect to {}: {}",
                backend.describe(),
                first_line(&e)
            ),
            Err(_) => bail!(
                "could not connect to {}: no answer within {} s",
                backend.describe(),
                CONNECT_TIMEOUT.as_secs()
            ),
        }
        let meta = PgPoolOptions::new()
            .max_connections(2)
            .acquire_timeout(CONNECT_TIMEOUT)
            .connect_lazy_with(sqlx_opts);

        let mut workers_config = pg_config;
        workers_config
            .options(format!("-c search_path={schema}"))
            .application_name("idem-worker")
            .connect_timeout(CONNECT_TIMEOUT);

        let db = Database {
            backend,
            schema,
            meta,
            workers_config,
            keep: opts.keep,
            existing: existing.is_some(),
            holder: None,
        };
        let mut db = db;
        if existing.is_some() {
            let found: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = current_schema())",
            )
            .fetch_one(&db.meta)
            .await?;
            if !found {
                let name = db.schema.clone();
                let _ = db.close().await;
                bail!("schema {name} does not exist on that server");
            }
            return Ok(db);
        }
        if let Backend::Server { .. } = db.backend {
            // Mark this run alive before its schema exists, then clear away
            // the schemas of runs that were killed.
            let mut holder = PgConnection::connect_with(&holder_options).await?;
            sweep::hold(&mut holder, &db.schema).await?;
            db.holder = Some(holder);
            for schema in sweep::sweep(&db.meta).await? {
                eprintln!("dropped schema {schema}, left by an idem run that was killed");
            }
        }
        sqlx::query(&format!("CREATE SCHEMA {}", db.schema))
            .execute(&db.meta)
            .await
            .with_context(|| format!("could not create schema {}", db.schema))?;
        if let Err(err) = migrations::migrator().run(&db.meta).await {
            let _ = db.close().await;
            return Err(err).context("could not apply the migrations");
        }
        Ok(db)
    }

    /// Empties the race tables and restarts their ids, so every race starts
    /// from nothing and its first XP row is #1. DELETE on a handful of rows
    /// costs a fraction of TRUNCATE, which swaps every table file.
    pub async fn reset(&self) -> Result<()> {
        sqlx::raw_sql(
            "DELETE FROM idempotency_keys;
             DELETE FROM experience_points;
             DELETE FROM cache_entries;
             ALTER SEQUENCE idempotency_keys_id_seq RESTART;
             ALTER SEQUENCE experience_points_id_seq RESTART;
             ALTER SEQUENCE cache_entries_id_seq RESTART;",
        )
        .execute(&self.meta)
        .await
        .context("could not reset the tables")?;
        Ok(())
    }

    /// Empties the tables with TRUNCATE: slower than [`reset`](Self::reset)
    /// for a few rows, but it leaves no dead rows behind, so a benchmark
    /// after thousands of inserts starts from clean tables and indexes.
    pub async fn truncate(&self) -> Result<()> {
        sqlx::query("TRUNCATE idempotency_keys, experience_points, cache_entries RESTART IDENTITY")
            .execute(&self.meta)
            .await
            .context("could not truncate the tables")?;
        Ok(())
    }

    /// Counts the rows the course talks about, and finds the XP row the key
    /// stands for: the one in the key's stored response, else the one
    /// carrying the key, else the first one made.
    pub async fn counts(&self, key: &str) -> Result<RowCounts> {
        let (key_rows, xp_rows, kept_xp): (i64, i64, Option<i64>) = sqlx::query_as(
            "SELECT (SELECT count(*) FROM idempotency_keys),
                    (SELECT count(*) FROM experience_points),
                    COALESCE(
                        (SELECT (response_body->>'xp_id')::bigint FROM idempotency_keys WHERE key = $1),
                        (SELECT id FROM experience_points WHERE idempotency_key = $1),
                        (SELECT min(id) FROM experience_points))",
        )
        .bind(key)
        .fetch_one(&self.meta)
        .await
        .context("could not count the rows")?;
        Ok(RowCounts {
            key_rows: key_rows as u64,
            xp_rows: xp_rows as u64,
            kept_xp,
        })
    }

    /// How many more connections the server accepts right now.
    pub async fn free_connections(&self) -> Result<u64> {
        let free: i64 = sqlx::query_scalar(
            "SELECT current_setting('max_connections')::int
                  - current_setting('superuser_reserved_connections')::int
                  - (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')",
        )
        .fetch_one(&self.meta)
        .await?;
        Ok(free.max(0) as u64)
    }

    /// The server's version string, e.g. `15.18 (Debian 15.18-0+deb12u1)`.
    pub async fn server_version(&self) -> Result<String> {
        Ok(sqlx::query_scalar("SHOW server_version")
            .fetch_one(&self.meta)
            .await?)
    }

    /// Settings for the workers' connections.
    pub fn workers_config(&self) -> &tokio_postgres::Config {
        &self.workers_config
    }

    /// Drops the run's schema (unless kept) and stops the cluster.
    /// Returns how long stopping the cluster took, if there was one.
    pub async fn close(self) -> Result<Option<Duration>> {
        let Database {
            backend,
            schema,
            meta,
            keep,
            existing,
            holder,
            ..
        } = self;
        let dropped = match &backend {
            Backend::Server { .. } if existing => Ok(()),
            Backend::Server { .. } if keep => {
                eprintln!("kept schema {schema}");
                sqlx::query(&format!("COMMENT ON SCHEMA {schema} IS '{}'", sweep::KEPT))
                    .execute(&meta)
                    .await
                    .map(drop)
                    .with_context(|| format!("could not mark schema {schema} as kept"))
            }
            Backend::Server { .. } => {
                sqlx::query(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                    .execute(&meta)
                    .await
                    .map(drop)
                    .with_context(|| format!("could not drop schema {schema}"))
            }
            // The whole cluster goes; its schema goes with it.
            Backend::Embedded(_) => Ok(()),
        };
        meta.close().await;
        if let Some(holder) = holder {
            let _ = holder.close().await;
        }
        let stopped = match backend {
            Backend::Embedded(cluster) => {
                Some(tokio::task::spawn_blocking(move || cluster.stop()).await??)
            }
            Backend::Server { .. } => None,
        };
        dropped.map(|()| stopped)
    }
}

impl Backend {
    /// A short description for messages: which database this is.
    pub fn describe(&self) -> String {
        match self {
            Backend::Embedded(cluster) => format!(
                "disposable PostgreSQL {} in {}",
                cluster.bins.version,
                cluster.run_dir.display()
            ),
            Backend::Server { url } => format!("the server at {url}"),
        }
    }
}

/// Row counts of the two tables after a race.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowCounts {
    pub key_rows: u64,
    pub xp_rows: u64,
    /// The XP row the key stands for, if any row was made.
    pub kept_xp: Option<i64>,
}

/// The URL with its password replaced, safe to print.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (authority, tail) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

/// An error's first line, so one failure prints as one line.
fn first_line(err: &dyn std::fmt::Display) -> String {
    err.to_string()
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}
