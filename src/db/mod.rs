//! The database a run works in: a disposable cluster or a real server, and the run's own schema.
//!
//! Two drivers, each with one job. sqlx does the bookkeeping: it creates the
//! run's schema, applies the migrations, resets and counts the tables. The
//! workers talk through deadpool-postgres, which stands for the application's
//! connection pool (see [`pool`]).

pub mod aside;
pub mod binaries;
pub mod book;
pub mod cache_dir;
pub mod child;
pub mod clock;
pub mod cluster;
pub mod guard_role;
pub mod leftovers;
pub mod link;
pub mod liveness;
pub mod mariadb;
pub mod migrations;
pub mod os_user;
pub mod ownership;
pub mod pgbouncer;
pub mod pool;
pub mod pooled;
pub mod ports;
pub mod redis_node;
pub mod redis_replica;
pub mod redis_server;
pub mod redis_url;
pub mod run_schema;
pub mod said;
pub mod secret;
pub mod sslmode;
pub mod standby;
pub mod statements;
pub mod supervised;
mod tables;
pub mod template;
pub mod url;
pub mod via;

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sslmode::Tls;
use url::DatabaseUrl;
use via::Via;

pub use cluster::{Cluster, ClusterOptions};

use liveness::Lifeline;
use run_schema::Dropped;
use said::{chain, first_line};

pub use binaries::MIN_SERVER_VERSION;

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
    /// `--standby-url`: a hot standby of the `--database-url` server, which
    /// idem only reads (lesson 10).
    pub standby_url: Option<String>,
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
    pub(crate) backend: Backend,
    /// The run's schema, `idem_<run id>`: every table idem makes lives here.
    pub schema: String,
    /// sqlx's pool for bookkeeping: schema, migrations, resets and counts.
    pub meta: PgPool,
    /// The workers' connection settings.
    workers_config: pool::Connect,
    keep: bool,
    /// The schema came from `--schema`: an earlier run's, left as it was found.
    existing: bool,
    /// On a server: the heartbeat and lock that say this run's schema is
    /// alive (see [`liveness`]).
    lifeline: Option<Lifeline>,
    /// How another idem process reaches this database (an app replica):
    /// the user's URL as given, password and all, so never printed.
    reach: DatabaseUrl,
    /// `--standby-url`: the user's standby, password and all, never printed.
    standby: Option<DatabaseUrl>,
    /// PgBouncer in front of the disposable cluster, started by the first
    /// race that goes through it (`--via pgbouncer`), stopped at close.
    bouncer: tokio::sync::OnceCell<pgbouncer::Bouncer>,
    /// Where PgBouncer is (`--pgbouncer-bin`).
    pgbouncer_bin: Option<std::path::PathBuf>,
    /// A disposable MariaDB beside the cluster, started by the first
    /// scenario on that engine, stopped at close.
    mariadb: tokio::sync::OnceCell<crate::db::mariadb::Mariadb>,
    /// A Galera cluster beside it, started on first use.
    galera: tokio::sync::OnceCell<crate::db::mariadb::Mariadb>,
    /// Where MariaDB is (`--mariadb-bin`).
    mariadb_bin: Option<std::path::PathBuf>,
    /// A server reached by URL proven a disposable cluster of idem's by
    /// this token (see [`ownership`]).
    proven_own: Option<String>,
}

impl Database {
    /// Whether the database is a disposable cluster of idem's: this run's
    /// (its server is idem's own child), or one `idem db` started, reached
    /// by its URL and proven idem's by the token in its data directory
    /// (see [`ownership`]), never by a path's name.
    pub fn is_disposable(&self) -> bool {
        match &self.backend {
            Backend::Embedded(_) => true,
            Backend::Server { .. } => self.proven_own.is_some(),
        }
    }

    /// The token that proves the database a disposable cluster of idem's,
    /// for a process idem starts on it (see [`ownership`]); `None` on a
    /// server of the user's.
    pub fn cluster_token(&self) -> Option<&str> {
        match &self.backend {
            Backend::Embedded(cluster) => Some(&cluster.token),
            Backend::Server { .. } => self.proven_own.as_deref(),
        }
    }

    /// Opens the database: starts a disposable cluster or connects to the
    /// server, creates the run's schema and applies the migrations.
    pub async fn open(opts: &ConnectOptions) -> Result<Self> {
        let existing = opts.schema.clone();
        if let Some(schema) = &existing {
            if opts.database_url.is_none() {
                bail!("--schema needs --database-url: a disposable cluster has no kept schemas");
            }
            if !run_schema::looks_like_run_schema(schema) {
                bail!("--schema {schema:?} is not an idem schema (idem_ and 8 hex digits)");
            }
        }
        let (run_id, schema) = match &existing {
            Some(schema) => (uuid::Uuid::nil(), schema.clone()),
            None => run_schema::new_run(),
        };
        // One URL, read once: the user's, or the disposable cluster's
        // socket. Both drivers are made from it.
        let (backend, url) = match opts.database_url.as_deref() {
            Some(text) => {
                let url = DatabaseUrl::parse(text)?;
                let shown = url.shown().to_owned();
                (Backend::Server { url: shown }, url)
            }
            None if opts.keep => {
                bail!("--keep needs --database-url: the disposable cluster is always removed")
            }
            None => embedded(&opts.cluster).await?,
        };
        let standby = match (&opts.standby_url, &backend) {
            (Some(text), Backend::Server { .. }) => Some(DatabaseUrl::parse(text)?),
            (Some(_), Backend::Embedded(_)) => bail!(
                "--standby-url is a standby of your server: give --database-url too \
                 (idem makes a standby of its own cluster with --standby)"
            ),
            (None, _) => None,
        };
        let sqlx_opts = startup(url.for_bookkeeping()?);
        let pg_config = url.for_workers();

        // No search_path either: the bookkeeping names the run's schema too.
        let holder_options = sqlx_opts.clone();
        // idem's own cluster was seen ready a moment ago; a server is tried
        // once first, so that a refusal reads as what it is.
        if let Backend::Server { .. } = backend {
            probe(&backend, &sqlx_opts).await?;
        }
        let meta = PgPoolOptions::new()
            .max_connections(2)
            .acquire_timeout(CONNECT_TIMEOUT)
            .connect_lazy_with(sqlx_opts);

        // No search_path for the workers: their statements name the run's
        // schema themselves (see `statements`), so a pooler can pass them.
        let config = for_workers(pg_config);
        // Prepared by name only on idem's own cluster: behind a URL a pooler
        // may stand unseen, and a name would then reach another client's
        // server connection.
        let sending = match backend {
            Backend::Embedded(_) => statements::Sending::Prepared,
            Backend::Server { .. } => statements::Sending::Unnamed,
        };
        let workers_config = pool::Connect {
            config,
            tls: url.tls().connector()?,
            schema: Arc::new(statements::Schema::new(&schema)),
            sending,
        };

        let mut db = Database {
            backend,
            schema,
            meta,
            workers_config,
            keep: opts.keep,
            existing: existing.is_some(),
            lifeline: None,
            reach: url,
            standby,
            bouncer: tokio::sync::OnceCell::new(),
            pgbouncer_bin: opts.cluster.pgbouncer_bin.clone(),
            mariadb: tokio::sync::OnceCell::new(),
            galera: tokio::sync::OnceCell::new(),
            mariadb_bin: opts.cluster.mariadb_bin.clone(),
            proven_own: None,
        };
        let opened = db.make_ready(run_id, &holder_options).await;
        match opened {
            Ok(()) => Ok(db),
            Err(err) => {
                let _ = db.close().await;
                Err(err)
            }
        }
    }

    /// Checks the server's version, then makes the run's schema ready: on a
    /// server, proves a `--schema` is idem's, or marks this run alive, sweeps
    /// the schemas of runs that are gone and creates its own.
    async fn make_ready(
        &mut self,
        run_id: uuid::Uuid,
        holder_options: &PgConnectOptions,
    ) -> Result<()> {
        let mut tx = self.book().await?;
        let version: i32 = book::query_scalar("SELECT current_setting('server_version_num')::int")
            .fetch_one(&mut *tx)
            .await
            .context("could not read the server's version")?;
        tx.commit().await?;
        if let (Backend::Server { .. }, Some(socket), Some(token)) = (
            &self.backend,
            self.reach.idem_run_socket(),
            ownership::handed(),
        ) {
            let mut tx = self.book().await?;
            if ownership::prove(&mut tx, &socket, &token).await {
                self.proven_own = Some(token);
            }
        }
        if (version / 10000) < MIN_SERVER_VERSION as i32 {
            bail!(
                "{} runs PostgreSQL {}.{}; idem needs {MIN_SERVER_VERSION} or newer",
                self.backend.describe(),
                version / 10000,
                version % 10000 / 100,
            );
        }
        if self.existing {
            let mut tx = self.book().await?;
            let found: bool =
                book::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)")
                    .bind(&self.schema)
                    .fetch_one(&mut *tx)
                    .await?;
            if !found {
                bail!("schema {} does not exist on that server", self.schema);
            }
            let proven = run_schema::prove(&mut tx, &self.schema).await?;
            tx.commit().await?;
            if proven.is_none() {
                bail!(
                    "schema {} was not made by idem (it has no idem mark): idem reads and changes \
                     only the schemas it can prove it made",
                    self.schema
                );
            }
            return Ok(());
        }
        if let Backend::Server { .. } = self.backend {
            // Mark this run alive before its schema exists, then clear away
            // the schemas of runs that are gone.
            let holder = liveness::hold(holder_options, &self.schema).await?;
            for swept in liveness::sweep(&self.meta).await? {
                eprintln!("{swept}");
            }
            let mut tx = self.book().await?;
            run_schema::create(&mut tx, run_id, &self.schema).await?;
            tx.commit().await?;
            self.lifeline = Some(Lifeline::start(
                holder_options.clone(),
                self.schema.clone(),
                holder,
            ));
        } else {
            // Marked as on a server, so that an app replica (`--replicas`)
            // can prove the schema is this run's before it works in it.
            let mut tx = self.book().await?;
            run_schema::create(&mut tx, run_id, &self.schema).await?;
            tx.commit().await?;
        }
        let mut tx = self.book().await?;
        migrations::apply(&mut tx, &self.schema)
            .await
            .context("could not apply the migrations")?;
        tx.commit().await?;
        Ok(())
    }

    /// A transaction for bookkeeping (see [`book`]): the statements run in
    /// it stay on one server connection, even through a pooler.
    pub async fn book(&self) -> Result<sqlx::Transaction<'static, sqlx::Postgres>> {
        Ok(self.meta.begin().await?)
    }

    /// `text` with idem's tables named in the run's schema, as every
    /// statement idem sends names them (see [`statements`]).
    pub fn sql(&self, text: &'static str) -> Arc<str> {
        self.workers_config.schema.qualify(text)
    }

    /// Counts the rows the course talks about, and finds the XP row the key
    /// stands for: the one in the key's stored response, else the one
    /// carrying the key, else the first one made.
    pub async fn counts(&self, key: &str) -> Result<RowCounts> {
        let mut tx = self.book().await?;
        let (key_rows, pending, xp_rows, kept_xp): (i64, i64, i64, Option<i64>) =
            book::query_as(&self.sql(COUNTS))
                .bind(key)
                .fetch_one(&mut *tx)
                .await
                .context("could not count the rows")?;
        tx.commit().await?;
        Ok(RowCounts::from_columns(key_rows, pending, xp_rows, kept_xp))
    }

    /// The same counts on another server that has the run's tables, such as
    /// a standby promoted in a failover.
    pub async fn counts_on(&self, server: &tokio_postgres::Client, key: &str) -> Result<RowCounts> {
        let row = server
            .query_one(&*self.sql(COUNTS), &[&key])
            .await
            .map_err(|e| anyhow::anyhow!("could not count the rows: {e}"))?;
        Ok(RowCounts::from_columns(
            row.get(0),
            row.get(1),
            row.get(2),
            row.get(3),
        ))
    }

    /// How many more connections the server accepts right now.
    pub async fn free_connections(&self) -> Result<u64> {
        let mut tx = self.book().await?;
        let free: i64 = book::query_scalar(
            "SELECT current_setting('max_connections')::int
                  - current_setting('superuser_reserved_connections')::int
                  - (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')",
        )
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(free.max(0) as u64)
    }

    /// The server's version string, e.g. `15.18 (Debian 15.18-0+deb12u1)`.
    pub async fn server_version(&self) -> Result<String> {
        let mut tx = self.book().await?;
        let version = book::query_scalar("SHOW server_version")
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(version)
    }

    /// A URL another program can use to reach this database, safe to print:
    /// the disposable cluster's socket, or the user's URL with its password hidden.
    /// The URL an app replica of this run connects with.
    pub fn url_for_replicas(&self) -> &str {
        self.reach.given()
    }

    pub fn shown_url(&self) -> String {
        use tokio_postgres::config::Host;
        match &self.backend {
            Backend::Server { url } => url.clone(),
            Backend::Embedded(_) => {
                let c = &self.workers_config.config;
                let host = match c.get_hosts().first() {
                    Some(Host::Unix(dir)) => dir.display().to_string(),
                    Some(Host::Tcp(host)) => host.clone(),
                    None => String::new(),
                };
                let port = match c.get_ports().first() {
                    Some(&p) if p != 5432 => format!("&port={p}"),
                    _ => String::new(),
                };
                format!(
                    "postgresql:///{}?host={host}{port}&user={}",
                    c.get_dbname().unwrap_or("postgres"),
                    c.get_user().unwrap_or("postgres"),
                )
            }
        }
    }

    /// How the bookkeeping connection (sqlx) and a workers' connection
    /// (tokio-postgres) reach the server: encrypted or not, and how.
    pub async fn encryption(&self) -> Result<(Encryption, Encryption)> {
        const ASK: &str =
            "SELECT ssl, version, cipher FROM pg_stat_ssl WHERE pid = pg_backend_pid()";
        let mut tx = self.book().await?;
        let row: (bool, Option<String>, Option<String>) =
            book::query_as(ASK).fetch_one(&mut *tx).await?;
        tx.commit().await?;
        let bookkeeping = Encryption::from_row(row);
        let pool = pool::warm_pool(&self.workers_config, 1).await?;
        let conn = pool::checkout(&pool, CONNECT_TIMEOUT).await.map_err(|e| {
            anyhow::anyhow!(
                "could not open a workers' connection: {}",
                pool::describe(&e)
            )
        })?;
        let row = conn.query_typed_one(ASK, &[]).await?;
        let workers = Encryption::from_row((row.get(0), row.get(1), row.get(2)));
        Ok((bookkeeping, workers))
    }

    /// Settings for the workers' connections.
    pub fn workers_config(&self) -> &pool::Connect {
        &self.workers_config
    }

    /// Settings for connections to the user's standby (`--standby-url`),
    /// made as the workers' are; `None` without one.
    pub fn standby_config(&self) -> Result<Option<pool::Connect>> {
        let Some(url) = &self.standby else {
            return Ok(None);
        };
        Ok(Some(pool::Connect {
            config: for_workers(url.for_workers()),
            tls: url.tls().connector()?,
            schema: self.workers_config.schema.clone(),
            sending: statements::Sending::Unnamed,
        }))
    }

    /// Settings for the workers' connections when they reach PostgreSQL
    /// `via` a path: directly, or through PgBouncer, started in front of the
    /// disposable cluster on first use.
    pub async fn workers_via(&self, via: Via) -> Result<pool::Connect> {
        let Via::Pgbouncer = via else {
            return Ok(self.workers_config.clone());
        };
        let bouncer = self.bouncer().await?;
        Ok(pool::Connect {
            config: for_workers(bouncer.client_config()),
            tls: Tls::disabled().connector()?,
            schema: self.workers_config.schema.clone(),
            sending: statements::Sending::Unnamed,
        })
    }

    /// The URL of the PgBouncer in front of the disposable cluster (started
    /// now if it is not yet), for an app replica that goes through it.
    pub async fn pgbouncer_url(&self) -> Result<String> {
        let bouncer = self.bouncer().await?;
        Ok(socket_url(&bouncer.dir, Some(pgbouncer::PORT)))
    }

    /// What a PgBouncer in front of this database needs: its program, and
    /// idem's own cluster to stand in front of. An error says why there is
    /// none (PgBouncer not installed, or a server of the user's).
    pub fn pgbouncer_front(&self) -> Result<(std::path::PathBuf, &Cluster)> {
        let Backend::Embedded(cluster) = &self.backend else {
            bail!(
                "--via pgbouncer starts a PgBouncer in front of idem's disposable cluster; \
                 to go through a PgBouncer of your own, give its URL as --database-url"
            );
        };
        Ok((pgbouncer::locate(self.pgbouncer_bin.as_deref())?, cluster))
    }

    /// A disposable MariaDB beside the cluster, started on first use (a
    /// scenario on `engine = "mariadb"`).
    pub async fn mariadb(&self) -> Result<&crate::db::mariadb::Mariadb> {
        let options = crate::db::mariadb::MariadbOptions {
            bin: self.mariadb_bin.clone(),
            ..Default::default()
        };
        self.mariadb
            .get_or_try_init(|| crate::db::mariadb::Mariadb::open(&options))
            .await
    }

    /// The disposable MariaDB of `nodes`: the single server, or a Galera cluster (one per run).
    pub async fn mariadb_on(&self, nodes: usize) -> Result<&crate::db::mariadb::Mariadb> {
        if nodes <= 1 {
            return self.mariadb().await;
        }
        let open = || self.mariadb_alone(nodes);
        let cluster = self.galera.get_or_try_init(open).await?;
        match cluster.nodes() == nodes {
            true => Ok(cluster),
            false => bail!(
                "this run's Galera cluster has {} nodes, not {nodes}",
                cluster.nodes()
            ),
        }
    }

    /// A disposable MariaDB of `nodes` for one use, not shared with the
    /// run's other scenarios (a race that kills a node leaves a cluster no
    /// other race should meet): the caller closes it, and dropping it stops
    /// its servers.
    pub async fn mariadb_alone(&self, nodes: usize) -> Result<crate::db::mariadb::Mariadb> {
        let options = crate::db::mariadb::MariadbOptions {
            bin: self.mariadb_bin.clone(),
            nodes,
            ..Default::default()
        };
        crate::db::mariadb::Mariadb::open(&options).await
    }

    /// The PgBouncer in front of the disposable cluster, started on first use.
    async fn bouncer(&self) -> Result<&pgbouncer::Bouncer> {
        let (program, cluster) = self.pgbouncer_front()?;
        self.bouncer
            .get_or_try_init(|| async {
                tokio::task::block_in_place(|| {
                    let guard = guard_role::role(&self.schema);
                    let front = cluster.front();
                    pgbouncer::Bouncer::start(&program, front, pgbouncer::POOL_SIZE, Some(&guard))
                })
            })
            .await
    }

    /// The clock of a stepped race on this run's tables: pending claims
    /// aged past `stale_after` by setting their time, never by sleeping.
    pub fn clock(&self, stale_after: Duration, heartbeat: bool) -> clock::Clock {
        clock::Clock::new(self.meta.clone(), &self.schema, stale_after, heartbeat)
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
            lifeline,
            bouncer,
            mariadb,
            galera,
            ..
        } = self;
        for mariadb in [mariadb.into_inner(), galera.into_inner()]
            .into_iter()
            .flatten()
        {
            let _ = mariadb.close().await;
        }
        // Only a schema this run made (and so marked) is kept or dropped.
        let dropped = match (&backend, &lifeline) {
            (Backend::Server { .. }, Some(_)) if !existing => {
                finish_schema(&meta, &schema, keep).await
            }
            // The whole cluster goes; its schema goes with it.
            _ => Ok(()),
        };
        if let Some(lifeline) = lifeline {
            lifeline.end().await;
        }
        meta.close().await;
        // PgBouncer goes before the server it stands in front of.
        if let Some(bouncer) = bouncer.into_inner() {
            tokio::task::block_in_place(|| drop(bouncer));
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

/// A workers' connection's settings: named in `pg_stat_activity` (the
/// lock-wait views find them so), and bounded in time.
fn for_workers(mut config: tokio_postgres::Config) -> tokio_postgres::Config {
    config
        .application_name("idem-worker")
        .connect_timeout(CONNECT_TIMEOUT);
    config
}

/// The URL of the `postgres` database as its user, on the unix socket in
/// `dir` (at `port`, else the default): idem's cluster, or its PgBouncer.
fn socket_url(dir: &std::path::Path, port: Option<u16>) -> String {
    let port = port.map_or(String::new(), |p| format!("&port={p}"));
    format!(
        "postgresql:///postgres?host={}{port}&user=postgres",
        dir.display()
    )
}

/// Keeps (and says so) or drops the run's own schema at its end.
async fn finish_schema(meta: &PgPool, schema: &str, keep: bool) -> Result<()> {
    let mut tx = meta.begin().await?;
    if keep {
        run_schema::keep(&mut tx, schema).await?;
        tx.commit().await?;
        eprintln!("kept schema {schema}");
        return Ok(());
    }
    let dropped = run_schema::drop_own(&mut tx, schema).await?;
    tx.commit().await?;
    if let Dropped::Left { blockers } = dropped {
        eprintln!("{}", run_schema::left_message(schema, &blockers));
    }
    Ok(())
}

/// sqlx's connection settings as a pooler takes them: sqlx asks for
/// `extra_float_digits` at start-up by default, and PgBouncer refuses a
/// start-up parameter it was not told to ignore ("unsupported startup
/// parameter"). idem reads no floating-point column through sqlx, and
/// since PostgreSQL 12 the server's default prints floats exactly anyway.
///
/// And no statement cache: every bookkeeping statement is unnamed (see
/// [`book`]), so a cache would hold nothing but a trap.
fn startup(options: PgConnectOptions) -> PgConnectOptions {
    options.extra_float_digits(None).statement_cache_capacity(0)
}

/// Starts a disposable cluster and says how to reach it: its unix socket,
/// where TLS has no place.
async fn embedded(opts: &ClusterOptions) -> Result<(Backend, DatabaseUrl)> {
    let cluster_opts = opts.clone();
    let cluster = tokio::task::spawn_blocking(move || Cluster::start(&cluster_opts))
        .await
        .context("the cluster start-up was interrupted")??;
    let url = format!("{}&sslmode=disable", socket_url(cluster.socket_dir(), None));
    Ok((
        Backend::Embedded(Box::new(cluster)),
        DatabaseUrl::parse(&url)?,
    ))
}

/// What a pooler's refusal of a start-up parameter means. idem itself
/// sends none a pooler refuses; one in the URL (`options=...`) is the
/// user's to take out, or to let through.
const POOLER_HINT: &str = " (a connection pooler such as PgBouncer refuses a start-up parameter it \
     was not told to ignore: take it out of the URL, or add it to the pooler's \
     ignore_startup_parameters)";

/// One connection first, so a refused or rejected connection is reported
/// as what it is rather than as a pool timing out.
async fn probe(backend: &Backend, options: &PgConnectOptions) -> Result<()> {
    match tokio::time::timeout(CONNECT_TIMEOUT, PgConnection::connect_with(options)).await {
        Ok(Ok(conn)) => {
            drop(conn.close().await);
            Ok(())
        }
        Ok(Err(e)) => {
            let said = first_line(&chain(&e));
            let hint = match said.contains("unsupported startup parameter") {
                true => POOLER_HINT,
                false => sslmode::hint_for(&said),
            };
            bail!("could not connect to {}: {said}{hint}", backend.describe())
        }
        Err(_) => bail!(
            "could not connect to {}: no answer within {} s",
            backend.describe(),
            CONNECT_TIMEOUT.as_secs()
        ),
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

/// Whether a connection is encrypted, as the server sees it (`pg_stat_ssl`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Encryption {
    pub encrypted: bool,
    /// `TLSv1.3` and the like.
    pub version: Option<String>,
    pub cipher: Option<String>,
}

impl Encryption {
    fn from_row((encrypted, version, cipher): (bool, Option<String>, Option<String>)) -> Self {
        Self {
            encrypted,
            version,
            cipher,
        }
    }

    /// `TLSv1.3 (TLS_AES_256_GCM_SHA384)`, or `not encrypted`.
    pub fn describe(&self) -> String {
        match (self.encrypted, &self.version, &self.cipher) {
            (true, Some(version), Some(cipher)) => format!("{version} ({cipher})"),
            (true, Some(version), None) => version.clone(),
            (true, None, _) => "encrypted".into(),
            (false, ..) => "not encrypted".into(),
        }
    }
}

/// Row counts of the two tables after a race.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowCounts {
    pub key_rows: u64,
    /// Key rows still pending: claims nobody completed.
    pub pending_key_rows: u64,
    pub xp_rows: u64,
    /// The XP row the key stands for, if any row was made.
    pub kept_xp: Option<i64>,
}

impl RowCounts {
    fn from_columns(key_rows: i64, pending: i64, xp_rows: i64, kept_xp: Option<i64>) -> Self {
        RowCounts {
            key_rows: key_rows as u64,
            pending_key_rows: pending as u64,
            xp_rows: xp_rows as u64,
            kept_xp,
        }
    }
}

/// The race's figures in one statement: key rows, pending ones, XP rows,
/// and the XP row the key stands for.
const COUNTS: &str = "SELECT (SELECT count(*) FROM idempotency_keys),
        (SELECT count(*) FROM idempotency_keys WHERE status = 'pending'),
        (SELECT count(*) FROM experience_points),
        COALESCE(
            (SELECT (response_body->>'xp_id')::bigint FROM idempotency_keys WHERE key = $1),
            (SELECT id FROM experience_points WHERE idempotency_key = $1),
            (SELECT min(id) FROM experience_points))";
