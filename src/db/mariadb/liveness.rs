//! Whether a run on a user's MariaDB is alive, and the sweep of the databases of runs that are gone.
//!
//! A run killed with SIGKILL cannot drop its database, so later runs on the
//! same server sweep the databases whose run is gone, as on PostgreSQL
//! (`db/liveness.rs`), and "gone" is proven the same two ways. The run
//! holds a named lock (`GET_LOCK`) on a connection of its own, taken before
//! its database exists; and every [`HEARTBEAT`] it writes the time into its
//! database's mark (`idem_run`: the run id and a seal of it and the
//! database's name). MariaDB's named locks belong to the session, and no
//! pooler stands between idem and the server here, so the lock lasts
//! exactly as long as that connection: a killed run's ends with its socket.
//! A connection the server ends while the run lives (a DBA's `KILL`) is
//! made again at the next beat, and the lock taken again.
//!
//! A sweeper drops a database only when its mark proves idem made it, it
//! was not kept (`--keep`), the sweeper holds its lock *and* its last
//! heartbeat is older than [`STALE`]. It drops the tables of idem's own
//! migrations by name, then the database if nothing else is in it;
//! whatever someone else put there stays, with the database, and is said.

use std::time::Duration;

use anyhow::{Result, bail};
use sqlx::mysql::{MySqlConnectOptions, MySqlConnection};
use sqlx::{ConnectOptions, Connection, Executor};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use uuid::Uuid;

pub use crate::db::liveness::{HEARTBEAT, STALE};
use crate::db::run_schema::{looks_like_run_schema, seal_of};

/// The table of a run database's mark.
pub const MARK_TABLE: &str = "idem_run";

/// The name of the lock that says "this database's run is alive".
fn lock_name(database: &str) -> String {
    format!("idem run {database}")
}

/// The lock's session is never ended for idling (a year, MariaDB's most).
const NEVER_IDLE: &str = "SET SESSION wait_timeout = 31536000";

/// Connects (to the server, in no database) and takes `database`'s lock.
async fn locked(server: &MySqlConnectOptions, database: &str) -> Result<MySqlConnection> {
    let mut conn = server.connect().await?;
    conn.execute(NEVER_IDLE).await?;
    let got: Option<i64> = sqlx::query_scalar("SELECT GET_LOCK(?, 0)")
        .bind(lock_name(database))
        .fetch_one(&mut conn)
        .await?;
    if got != Some(1) {
        bail!("the lock of {database} is held by another session");
    }
    Ok(conn)
}

/// A live run's lock and heartbeat, until [`Life::end`].
#[derive(Debug)]
pub struct Life {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

/// Takes the run's lock before its database is made: a sweeper that sees
/// the database's mark always finds the lock held while the run lives.
pub async fn hold(server: &MySqlConnectOptions, database: &str) -> Result<MySqlConnection> {
    locked(server, database).await
}

/// Makes `database`'s mark: its run id, the seal, whether it is kept, and
/// the first heartbeat.
pub async fn mark(
    conn: &mut MySqlConnection,
    database: &str,
    run_id: Uuid,
    kept: bool,
) -> Result<()> {
    sqlx::raw_sql(&format!(
        "CREATE TABLE `{database}`.`{MARK_TABLE}` (
             run_id   CHAR(36)    NOT NULL PRIMARY KEY,
             seal     CHAR(64)    NOT NULL,
             kept     BOOLEAN     NOT NULL,
             beat_at  DATETIME(6) NOT NULL
         ) ENGINE = InnoDB"
    ))
    .execute(&mut *conn)
    .await?;
    sqlx::query(&format!(
        "INSERT INTO `{database}`.`{MARK_TABLE}` VALUES (?, ?, ?, NOW(6))"
    ))
    .bind(run_id.to_string())
    .bind(seal_of("database", run_id, database))
    .bind(kept)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Beats every [`HEARTBEAT`] on `conn` (which holds the lock) until ended;
/// a lost connection is made again and the lock taken again.
pub fn beat(server: MySqlConnectOptions, database: String, conn: MySqlConnection) -> Life {
    let (stop, mut stopped) = oneshot::channel();
    let task = tokio::spawn(async move {
        let mut conn = Some(conn);
        loop {
            tokio::select! {
                _ = &mut stopped => break,
                () = tokio::time::sleep(HEARTBEAT) => {}
            }
            if conn.is_none() {
                conn = relocked(&server, &database).await;
            }
            let Some(c) = conn.as_mut() else { continue };
            if !written(c, &database).await {
                conn = None;
            }
        }
        if let Some(conn) = conn {
            let _ = conn.close().await;
        }
    });
    Life { stop, task }
}

/// The lock taken again on a new connection, if it can be now. (Boxed,
/// as the beat's task must be `Send` whatever the connection borrows.)
fn relocked<'a>(
    server: &'a MySqlConnectOptions,
    database: &'a str,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<MySqlConnection>> + Send + 'a>> {
    Box::pin(async move { locked(server, database).await.ok() })
}

/// One heartbeat written; false if the connection failed.
fn written<'a>(
    conn: &'a mut MySqlConnection,
    database: &'a str,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send + 'a>> {
    Box::pin(async move {
        let beat = format!("UPDATE `{database}`.`{MARK_TABLE}` SET beat_at = NOW(6)");
        conn.execute(beat.as_str()).await.is_ok()
    })
}

impl Life {
    /// Stops the heartbeat and lets the lock go with its connection.
    pub async fn end(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

/// What a sweep did with one database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Swept {
    Dropped { database: String, silent_s: u64 },
    Left { database: String, why: String },
}

/// A database's mark, if it proves idem made the database: (kept, seconds
/// since its last heartbeat).
async fn proven(conn: &mut MySqlConnection, database: &str) -> Option<(bool, u64)> {
    let rows: Vec<(String, String, bool, i64)> = sqlx::query_as(&format!(
        "SELECT run_id, seal, kept, TIMESTAMPDIFF(SECOND, beat_at, NOW(6)) \
         FROM `{database}`.`{MARK_TABLE}`"
    ))
    .fetch_all(&mut *conn)
    .await
    .ok()?;
    let [(run_id, seal, kept, silent)] = rows.as_slice() else {
        return None;
    };
    let run_id = Uuid::parse_str(run_id).ok()?;
    (*seal == seal_of("database", run_id, database)).then_some((*kept, (*silent).max(0) as u64))
}

/// Drops the databases on the server that are provably idem's and whose
/// runs are provably gone; `own` is the tables idem's migrations make, the
/// only ones it drops there.
pub async fn sweep(conn: &mut MySqlConnection, own: &[String]) -> Result<Vec<Swept>> {
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE 'idem\\_%'",
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut swept = Vec::new();
    for database in names.into_iter().filter(|n| looks_like_run_schema(n)) {
        let got: Option<i64> = sqlx::query_scalar("SELECT GET_LOCK(?, 0)")
            .bind(lock_name(&database))
            .fetch_one(&mut *conn)
            .await?;
        if got != Some(1) {
            continue; // its run holds the lock: alive
        }
        // Read under the lock: a run that beat a moment ago is alive.
        let outcome = match proven(conn, &database).await {
            Some((false, silent_s)) if silent_s >= STALE.as_secs() => {
                Some(drop_gone(conn, &database, own, silent_s).await)
            }
            _ => None, // not idem's, kept, or heard from lately
        };
        sqlx::query("SELECT RELEASE_LOCK(?)")
            .bind(lock_name(&database))
            .execute(&mut *conn)
            .await?;
        swept.extend(outcome.transpose()?);
    }
    Ok(swept)
}

/// Drops a gone run's tables by name, then its database if nothing else
/// is in it.
async fn drop_gone(
    conn: &mut MySqlConnection,
    database: &str,
    own: &[String],
    silent_s: u64,
) -> Result<Swept> {
    let database = database.to_string();
    Ok(match drop_own(conn, &database, own).await? {
        Dropped::Yes => Swept::Dropped { database, silent_s },
        Dropped::Left(why) => Swept::Left { database, why },
    })
}

/// What became of a run's database.
pub enum Dropped {
    Yes,
    /// Left in place, and why.
    Left(String),
}

/// Drops idem's `tables` in `database` by name, then the database if
/// nothing else is in it: what someone else made there is left, and said.
pub async fn drop_own(
    conn: &mut MySqlConnection,
    database: &str,
    tables: &[String],
) -> Result<Dropped> {
    for table in tables {
        let sql = format!("DROP TABLE IF EXISTS `{database}`.`{table}`");
        if let Err(e) = sqlx::raw_sql(&sql).execute(&mut *conn).await {
            let said = crate::db::secret::scrub(&crate::controls::escaped(&e.to_string()));
            return Ok(Dropped::Left(format!("table {table}: {said}")));
        }
    }
    let others: i64 = sqlx::query_scalar(OTHERS_IN_DATABASE)
        .bind(database)
        .bind(database)
        .bind(database)
        .bind(database)
        .fetch_one(&mut *conn)
        .await?;
    if others > 0 {
        return Ok(Dropped::Left(format!("{others} objects idem did not make")));
    }
    sqlx::raw_sql(&format!("DROP DATABASE `{database}`"))
        .execute(&mut *conn)
        .await?;
    Ok(Dropped::Yes)
}

impl std::fmt::Display for Swept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Swept::Dropped { database, silent_s } => write!(
                f,
                "dropped database {database}: idem made it, and its run has been gone for {silent_s} s"
            ),
            Swept::Left { database, why } => write!(
                f,
                "left database {database} of a run that is gone ({why}); idem drops nothing it \
                 did not make. `DROP DATABASE {database}` removes it and all it holds"
            ),
        }
    }
}

/// What a database holds besides tables idem dropped: tables and views,
/// routines, events and triggers.
pub const OTHERS_IN_DATABASE: &str = "SELECT \
    (SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?) + \
    (SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = ?) + \
    (SELECT COUNT(*) FROM information_schema.EVENTS WHERE EVENT_SCHEMA = ?) + \
    (SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ?)";

/// How long a sweep may take before the run goes on without it.
pub const SWEEP_LIMIT: Duration = Duration::from_secs(30);
