//! MariaDB (InnoDB) as a place a race runs on: a disposable server of idem's own, a database of the run's own in it, and the tables of `migrations/mariadb/`.
//!
//! sqlx plays both parts here: the bookkeeping connection (databases,
//! tables, counts) and, for the workers, a `MySqlPool` of the race's pool
//! size, which stands for the app's pool as deadpool-postgres does on
//! PostgreSQL. No query macros: nothing here needs a server to build.

pub mod galera;
mod guard_user;
pub mod liveness;
pub mod server;
pub mod url;
pub mod watch;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};
use sqlx::{ConnectOptions, Connection};

use server::MariadbServer;

/// How long bookkeeping waits for a connection.
pub(super) const ADMIN_ACQUIRE: Duration = Duration::from_secs(10);

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
    /// `--database-url mysql://...`: a server of the user's, where idem
    /// works in a database of the run's own instead of starting one.
    pub url: Option<url::MysqlUrl>,
    /// `--keep`: on a user's server, keep the run's database.
    pub keep: bool,
    /// `--nodes`: more than one makes a Galera cluster of idem's own.
    pub nodes: usize,
}

/// A disposable MariaDB (or a user's server) and the run's database in it.
#[derive(Debug)]
pub struct Mariadb {
    server: Option<MariadbServer>,
    /// Bookkeeping: the run's tables and counts.
    pub admin: MySqlPool,
    workers: MySqlConnectOptions,
    /// The run's own database: `idem_` and 8 hex digits.
    pub database: String,
    version: String,
    /// Set on a user's server: what the run's end does there.
    user: Option<UserServer>,
    /// The tables idem made in the run's database.
    made: Vec<String>,
    /// On a user's server: the lock and heartbeat that say the run lives.
    life: Option<liveness::Life>,
    /// A cluster's nodes after the first, which `server` is.
    others: Vec<MariadbServer>,
    /// Each node's way in to the run's database (one on a single server).
    node_workers: Vec<MySqlConnectOptions>,
}

/// A user's server, as the run's end treats it.
#[derive(Debug)]
struct UserServer {
    /// Its URL, password hidden.
    shown: String,
    keep: bool,
}

impl Mariadb {
    /// The run's end on a user's server: with `--keep`, the run's database
    /// is kept and named. Otherwise the tables idem made in it are dropped,
    /// then the database, if nothing is left in it: whatever someone else
    /// made there is left, with the database, and said.
    async fn finish_database(&self, user: &UserServer) -> Result<()> {
        let (db, on) = (&self.database, &user.shown);
        if user.keep {
            eprintln!("kept database {db} on {on}");
            return Ok(());
        }
        let mut conn = self.admin.acquire().await?;
        if let liveness::Dropped::Left(why) = liveness::drop_own(&mut conn, db, &self.made).await? {
            eprintln!("{}", left_message(db, on, &why));
        }
        Ok(())
    }
}

/// The stepped race's clock on MariaDB (see [`crate::db::clock`]): the
/// pending claims no transaction holds locked, on `admin`'s node or on any
/// of the `others` of a cluster, but for those of the `beating` workers
/// still running (their heartbeat renews them); moved back `by`, when
/// given, as that much time passing would. How many.
///
/// On a cluster the ageing is a write on node 1 that every node applies:
/// had it touched a row that a transaction on another node holds, it
/// would abort that transaction there, which time passing never does.
pub async fn age_claims(
    (admin, others): (&MySqlPool, &[MySqlPool]),
    by: Option<Duration>,
    beating: Option<&[usize]>,
) -> sqlx::Result<u64> {
    let mut held_elsewhere = std::collections::BTreeSet::new();
    for node in others {
        held_elsewhere.extend(locked_claims(node).await?);
    }
    let mut tx = admin.begin().await?;
    let pending: Vec<(i64, Option<i32>)> = sqlx::query_as(
        "SELECT id, worker FROM idempotency_keys WHERE status = 'pending' FOR UPDATE SKIP LOCKED",
    )
    .fetch_all(&mut *tx)
    .await?;
    // A running owner's heartbeat would have renewed its claim meanwhile.
    let renewed = |worker: Option<i32>| {
        beating.is_some_and(|running| {
            worker.is_some_and(|w| running.iter().any(|r| *r as i64 == i64::from(w)))
        })
    };
    let ids: Vec<i64> = pending
        .into_iter()
        .filter(|(id, worker)| !renewed(*worker) && !held_elsewhere.contains(id))
        .map(|(id, _)| id)
        .collect();
    let Some(by) = by else {
        tx.rollback().await?;
        return Ok(ids.len() as u64);
    };
    let mut aged = 0;
    for id in &ids {
        aged += sqlx::query(
            "UPDATE idempotency_keys SET locked_at = locked_at - INTERVAL ? MICROSECOND \
             WHERE id = ?",
        )
        .bind(by.as_micros() as i64)
        .bind(id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    }
    tx.commit().await?;
    Ok(aged)
}

/// The pending claims a transaction holds locked on `node`: those a
/// locking read that skips locked rows does not return. The read's own
/// locks go with its rollback, and a read is not replicated.
async fn locked_claims(node: &MySqlPool) -> sqlx::Result<Vec<i64>> {
    const PENDING: &str = "SELECT id FROM idempotency_keys WHERE status = 'pending'";
    let mut tx = node.begin().await?;
    let all: Vec<i64> = sqlx::query_scalar(PENDING).fetch_all(&mut *tx).await?;
    let free: Vec<i64> = sqlx::query_scalar(&format!("{PENDING} FOR UPDATE SKIP LOCKED"))
        .fetch_all(&mut *tx)
        .await?;
    tx.rollback().await?;
    Ok(all.into_iter().filter(|id| !free.contains(id)).collect())
}

/// Clears away the databases of gone runs on the server, saying what it
/// did; a sweep that fails or takes too long is said and left for a later
/// run. Its connection goes with it, so no named lock it took outlives it.
async fn sweep(conn: &mut sqlx::MySqlConnection, own: &[String]) {
    match tokio::time::timeout(liveness::SWEEP_LIMIT, liveness::sweep(conn, own)).await {
        Ok(Ok(swept)) => swept.iter().for_each(|s| eprintln!("{s}")),
        Ok(Err(e)) => eprintln!("warning: could not sweep the databases of gone runs: {e:#}"),
        Err(_) => eprintln!(
            "warning: the sweep of gone runs' databases took too long; left for a later run"
        ),
    }
}

/// Why the run's database was left on a user's server, and how to remove it.
fn left_message(db: &str, on: &str, why: &str) -> String {
    format!(
        "left database {db} on {on} in place ({why}); idem drops nothing it did not make. \
         When you no longer need it, `DROP DATABASE {db}` removes it and all it holds"
    )
}

/// How long idem waits for a user's server to let it in and make the
/// run's database.
const CONNECT_LIMIT: Duration = Duration::from_secs(15);

/// A server's error in one line, with any password it quotes removed.
fn said(err: &sqlx::Error) -> String {
    crate::db::secret::scrub(&crate::controls::escaped(&err.to_string()))
}

impl Mariadb {
    /// Starts the server (or, given a URL, reaches the user's) and makes
    /// the run's database and tables.
    pub async fn open(options: &MariadbOptions) -> Result<Self> {
        if let Some(url) = &options.url {
            if options.nodes > 1 {
                anyhow::bail!(
                    "--nodes starts a Galera cluster of idem's own; on your server, leave it out"
                );
            }
            return Self::open_at(url, options.keep).await;
        }
        if options.nodes > 1 {
            return Self::open_cluster(options).await;
        }
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
        let version = server.bins.version.clone();
        let mut db = Self::made_in(root, None).await?;
        db.server = Some(server);
        db.version = version;
        Ok(db)
    }

    /// The run's database on the user's server `url`: made, used, and
    /// dropped at the end unless `keep`.
    async fn open_at(url: &url::MysqlUrl, keep: bool) -> Result<Self> {
        let user = UserServer {
            shown: url.shown.clone(),
            keep,
        };
        let reach = Self::made_in(url.options.clone(), Some(user));
        let mut db = tokio::time::timeout(CONNECT_LIMIT, reach)
            .await
            .map_err(|_| {
                anyhow::anyhow!(
                    "{} did not answer within {} s",
                    url.shown,
                    CONNECT_LIMIT.as_secs()
                )
            })??;
        db.version = sqlx::query_scalar("SELECT VERSION()")
            .fetch_one(&db.admin)
            .await?;
        Ok(db)
    }

    /// A database of the run's own (`idem_` and 8 hex digits) made as
    /// `options` says, and its tables.
    async fn made_in(options: MySqlConnectOptions, user: Option<UserServer>) -> Result<Self> {
        let run_id = uuid::Uuid::new_v4();
        let database = format!("idem_{}", &run_id.simple().to_string()[..8]);
        let shown = user
            .as_ref()
            .map_or("MariaDB", |u| u.shown.as_str())
            .to_string();
        let reach = |e: anyhow::Error| anyhow::anyhow!("could not reach {shown}: {e:#}");
        // On a user's server the run is marked alive before its database
        // exists, so that no sweep ever takes it for a gone run's.
        let held = match user {
            Some(_) => Some(liveness::hold(&options, &database).await.map_err(reach)?),
            None => None,
        };
        let mut conn = options
            .connect()
            .await
            .map_err(|e| anyhow::anyhow!("could not reach {shown}: {}", said(&e)))?;
        // CREATE, not CREATE IF NOT EXISTS: a database that is there
        // already is someone else's, and idem never works in it.
        sqlx::raw_sql(&format!("CREATE DATABASE `{database}`"))
            .execute(&mut conn)
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "could not make the run's database {database} on {shown}: {} (idem needs \
                     the right to create and drop databases named idem_...)",
                    said(&e)
                )
            })?;
        if let Some(user) = &user {
            liveness::mark(&mut conn, &database, run_id, user.keep).await?;
        }
        let in_run = options.clone().database(&database);
        let admin = MySqlPoolOptions::new()
            .max_connections(2)
            .acquire_timeout(ADMIN_ACQUIRE)
            .connect_with(in_run.clone())
            .await?;
        let mut db = Self {
            server: None,
            admin,
            workers: in_run.clone(),
            database,
            version: String::new(),
            user,
            made: Vec::new(),
            life: None,
            others: Vec::new(),
            node_workers: vec![in_run.clone()],
        };
        let mut admin = db.admin.acquire().await?;
        crate::db::migrations::apply_mariadb(&mut admin).await?;
        drop(admin);
        // What the migrations made, in a database made a moment ago: the
        // tables the run's end may drop.
        db.made = sqlx::query_scalar(
            "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?",
        )
        .bind(&db.database)
        .fetch_all(&db.admin)
        .await?;
        if let Some(held) = held {
            db.life = Some(liveness::beat(options, db.database.clone(), held));
            sweep(&mut conn, &db.made).await;
        }
        conn.close().await?;
        Ok(db)
    }

    /// A pool for the workers: `size` connections at most, each waiting
    /// at most `checkout` for one.
    pub async fn workers_pool(&self, size: usize, checkout: Duration) -> Result<MySqlPool> {
        Ok(self.pool_with(self.workers.clone(), size, checkout))
    }

    /// The process id of node `node` (1-based) of a disposable server or cluster.
    pub fn node_pid(&self, node: usize) -> Option<u32> {
        match node {
            1 => self.server.as_ref().map(MariadbServer::pid),
            n => self.others.get(n - 2).map(MariadbServer::pid),
        }
    }

    /// The nodes a race can reach: 1, or a cluster's.
    pub fn nodes(&self) -> usize {
        self.node_workers.len()
    }

    /// The same on node `node` (0-based) of a cluster, each connection
    /// also set by `session` when given.
    pub fn workers_pool_on(
        &self,
        node: usize,
        (size, checkout): (usize, Duration),
        session: Option<&'static str>,
    ) -> MySqlPool {
        self.pool_setting(self.node_workers[node].clone(), (size, checkout), session)
    }

    /// The workers' pool, logging in with `options`.
    fn pool_with(
        &self,
        options: MySqlConnectOptions,
        size: usize,
        checkout: Duration,
    ) -> MySqlPool {
        self.pool_setting(options, (size, checkout), None)
    }

    /// The same, each connection also set by `session` (a cluster's causal
    /// reads) when given.
    fn pool_setting(
        &self,
        options: MySqlConnectOptions,
        (size, checkout): (usize, Duration),
        session: Option<&'static str>,
    ) -> MySqlPool {
        MySqlPoolOptions::new()
            .max_connections(size as u32)
            .min_connections(0)
            .acquire_timeout(checkout)
            // A pooled connection is not pinged before each checkout: the
            // race measures the request's statements, not the pool's.
            .test_before_acquire(false)
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    use sqlx::Executor;
                    conn.execute(LOCK_WAIT).await?;
                    if let Some(session) = session {
                        conn.execute(session).await?;
                    }
                    Ok(())
                })
            })
            .connect_lazy_with(options)
    }

    /// The run's database as another program reaches it: on idem's own
    /// server, root over its socket (in a directory only idem's user may
    /// enter); on a user's, the user's URL, its password hidden, and the
    /// database named beside it.
    pub fn shown_url(&self) -> String {
        match (&self.user, &self.server) {
            (Some(user), _) => format!("{} (database {})", user.shown, self.database),
            (None, Some(server)) => format!(
                "mysql://root@localhost/{}?socket={}",
                self.database,
                server.socket.display()
            ),
            (None, None) => self.database.clone(),
        }
    }

    /// The server's version, as `mariadbd --version` (or, on a user's
    /// server, `VERSION()`) says it.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Closes the pools and stops the server; how long the stop took. On
    /// a user's server, drops the run's database unless `--keep`.
    pub async fn close(mut self) -> Result<Option<Duration>> {
        if let Some(user) = self.user.take() {
            let finished = self.finish_database(&user).await;
            self.admin.close().await;
            if let Some(life) = self.life.take() {
                life.end().await;
            }
            return finished.map(|()| None);
        }
        self.admin.close().await;
        for node in std::mem::take(&mut self.others) {
            tokio::task::spawn_blocking(move || node.stop()).await??;
        }
        match self.server.take() {
            Some(server) => Ok(Some(
                tokio::task::spawn_blocking(move || server.stop()).await??,
            )),
            None => Ok(None),
        }
    }
}
