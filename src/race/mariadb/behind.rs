//! A retry on a node that is behind, made certain: lesson 11's causal read, judged without a race against the node's applier.
//!
//! On a Galera cluster a COMMIT returns once every node has certified the
//! transaction; each node applies it in its own time. A retry that lands on
//! another node a moment later reads there before or after that node
//! applied the first request's completion, and which one is luck (a few
//! runs in a hundred). Here it is no luck: node 2's applier is held
//! (`BACKUP STAGE BLOCK_COMMIT`, which desyncs the node and pauses its
//! applying) from the moment node 2 has the first request's claim until
//! the retry has either answered or sat in one statement for
//! [`WAITING_AFTER`]. A read that does not ask for causality answers at
//! once from node 2's stale rows; a causal one (`wsrep_sync_wait`) waits
//! for the node, and is let go by releasing it.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use sqlx::MySqlConnection;
use tokio::sync::oneshot;

use crate::db::mariadb::Mariadb;

/// How long the retry's statement runs on the held node before it is
/// taken to wait for the node, not to read: a point read or an ignored
/// insert on an idle node answers in a millisecond or two.
pub const WAITING_AFTER: Duration = Duration::from_millis(500);

/// The longest node 2 is held; past it the retry is let go and the run
/// says so.
const HOLD_LIMIT: Duration = Duration::from_secs(20);

/// What the hold on node 2 came to.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Held {
    /// The retry's statement waited on the held node (a causal read), and
    /// was let go by releasing the node.
    Waited,
    /// The retry answered while node 2 was held: it read node 2's rows as
    /// they were, without waiting.
    Answered,
    /// The run could not put node 2 behind the first request; why.
    NotMade(String),
}

/// Node 2, held: its applier paused from now until [`release`].
pub async fn hold(mut node2: MySqlConnection) -> Result<MySqlConnection> {
    sqlx::raw_sql("BACKUP STAGE START; BACKUP STAGE BLOCK_COMMIT")
        .execute(&mut node2)
        .await?;
    Ok(node2)
}

/// Why node 2 is not behind node 1, when it is not: [`Held::NotMade`].
pub async fn not_behind(db: &Mariadb, node2: &mut MySqlConnection) -> Result<Option<Held>> {
    let (first, second) = (committed_on_node_1(db).await?, committed(node2).await?);
    Ok((second >= first).then(|| {
        Held::NotMade(format!(
            "node 2 had applied every commit ({second}) before the retry; it was not behind"
        ))
    }))
}

/// Runs `retry` while node 2 is held, letting the node go once a
/// statement of the run's has waited there (or `retry` is done); what
/// `retry` came to, and how the hold ended.
pub async fn held_while<T>(
    node2: MySqlConnection,
    database: &str,
    retry: impl std::future::Future<Output = T>,
) -> Result<(T, Held)> {
    let (stop, stopped) = oneshot::channel();
    let retry = async {
        let out = retry.await;
        let _ = stop.send(());
        out
    };
    let (out, held) = tokio::join!(retry, watch(node2, database, stopped));
    Ok((out, held?))
}

/// The cluster's commits node `conn` has applied.
async fn committed(conn: &mut MySqlConnection) -> Result<i64> {
    crate::db::mariadb::watch::last_committed(conn).await
}

/// The same on node 1.
pub async fn committed_on_node_1(db: &Mariadb) -> Result<i64> {
    committed(&mut *db.admin.acquire().await?).await
}

/// Waits until node 2 has applied all node 1 has committed (the claim).
pub async fn caught_up(db: &Mariadb, node2: &mut MySqlConnection) -> Result<()> {
    let target = committed_on_node_1(db).await?;
    let deadline = Instant::now() + HOLD_LIMIT;
    while committed(node2).await? < target {
        if Instant::now() > deadline {
            bail!(
                "node 2 did not apply node 1's commits within {} s",
                HOLD_LIMIT.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

/// Lets node 2 apply again.
pub async fn release(node2: &mut MySqlConnection) -> Result<()> {
    sqlx::raw_sql("BACKUP STAGE END").execute(node2).await?;
    Ok(())
}

/// Holds node 2 until a statement of the run's sessions there has run
/// [`WAITING_AFTER`] (released: [`Held::Waited`]), or the retry is done
/// (`stopped`: [`Held::Answered`]), or [`HOLD_LIMIT`] passed.
async fn watch(
    mut node2: MySqlConnection,
    database: &str,
    mut stopped: oneshot::Receiver<()>,
) -> Result<Held> {
    let waiting_ms = WAITING_AFTER.as_millis() as f64;
    let began = Instant::now();
    let held = loop {
        if stopped.try_recv().is_ok() {
            break Held::Answered;
        }
        let waiting: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
             WHERE DB = ? AND ID <> CONNECTION_ID() AND USER <> 'system user' \
             AND COMMAND NOT IN ('Sleep', 'Daemon') AND TIME_MS >= ?",
        )
        .bind(database)
        .bind(waiting_ms)
        .fetch_one(&mut node2)
        .await?;
        if waiting > 0 {
            break Held::Waited;
        }
        if began.elapsed() > HOLD_LIMIT {
            let seen: Vec<(Option<String>, String, Option<String>)> = sqlx::query_as(
                "SELECT DB, COMMAND, STATE FROM information_schema.PROCESSLIST \
                 WHERE ID <> CONNECTION_ID() AND USER <> 'system user'",
            )
            .fetch_all(&mut node2)
            .await?;
            release(&mut node2).await?;
            bail!(
                "the retry neither answered nor waited on node 2 within {} s (its sessions: {})",
                HOLD_LIMIT.as_secs(),
                crate::controls::escaped(&format!("{seen:?}"))
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    release(&mut node2).await?;
    Ok(held)
}
