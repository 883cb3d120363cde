//! Whether a run on a real server is alive: a lock its connection holds, and a heartbeat it writes.
//!
//! A run killed with SIGKILL cannot drop its own schema, so later runs sweep
//! schemas whose run is gone. "Gone" must be proven, not guessed: a
//! connection can be lost while its run lives on (`idle_session_timeout`, a
//! pooler, a DBA's `pg_terminate_backend`). So a run shows it is alive in
//! two ways. It holds a session advisory lock named after its schema, and
//! every [`HEARTBEAT`] it writes the time into its schema's mark. If its lock
//! connection is lost, the next beat reconnects and takes the lock again.
//! A sweeper drops a schema only while holding that lock itself *and* when
//! the last heartbeat is older than [`STALE`]: twelve missed beats.

use std::time::Duration;

use anyhow::Result;
use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::run_schema::{self, Dropped};

/// The first key of idem's advisory locks (the second is the schema's hash).
const LOCK_CLASS: i32 = 0x1de3;

/// How often a live run writes its heartbeat.
pub const HEARTBEAT: Duration = Duration::from_secs(5);

/// How old a heartbeat must be before its run counts as gone.
pub const STALE: Duration = Duration::from_secs(60);

/// Connects and takes the lock that says "this schema's run is alive".
pub async fn hold(options: &PgConnectOptions, schema: &str) -> Result<PgConnection> {
    let mut conn =
        PgConnection::connect_with(&options.clone().application_name("idem-lifeline")).await?;
    sqlx::query("SELECT pg_advisory_lock($1, hashtext($2))")
        .bind(LOCK_CLASS)
        .bind(schema)
        .execute(&mut conn)
        .await?;
    Ok(conn)
}

/// A live run's heartbeat, beating on its lock connection in the background.
pub struct Lifeline {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for Lifeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Lifeline")
    }
}

impl Lifeline {
    /// Starts beating for `schema`, whose lock `conn` holds.
    pub fn start(options: PgConnectOptions, schema: String, conn: PgConnection) -> Self {
        let (stop, mut stopped) = oneshot::channel();
        let task = tokio::spawn(async move {
            let mut conn = Some(conn);
            loop {
                tokio::select! {
                    _ = &mut stopped => break,
                    _ = tokio::time::sleep(HEARTBEAT) => {}
                }
                let beaten = match conn.as_mut() {
                    Some(c) => run_schema::beat(c, &schema).await.is_ok(),
                    None => false,
                };
                if !beaten {
                    // The connection is gone, and the lock with it: take both
                    // again. Until then the fresh heartbeat keeps sweepers off.
                    conn = None;
                    if let Ok(Ok(mut c)) =
                        tokio::time::timeout(HEARTBEAT, hold(&options, &schema)).await
                        && run_schema::beat(&mut c, &schema).await.is_ok()
                    {
                        conn = Some(c);
                    }
                }
            }
            if let Some(conn) = conn {
                let _ = conn.close().await;
            }
        });
        Self { stop, task }
    }

    /// Stops the heartbeat and lets go of the lock.
    pub async fn end(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

/// What a sweep did with one schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Swept {
    Dropped { schema: String, silent_s: u64 },
    Left { schema: String, blockers: String },
}

/// Drops the schemas that are provably idem's and whose runs are provably
/// gone. Anything else, whatever its name, is left as it is.
pub async fn sweep(meta: &PgPool) -> Result<Vec<Swept>> {
    let mut conn = meta.acquire().await?;
    let candidates: Vec<String> = sqlx::query_scalar(
        "SELECT nspname::text FROM pg_namespace WHERE nspname ~ '^idem_[0-9a-f]{8}$'",
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut swept = Vec::new();
    for schema in candidates {
        let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1, hashtext($2))")
            .bind(LOCK_CLASS)
            .bind(&schema)
            .fetch_one(&mut *conn)
            .await?;
        if !locked {
            continue; // its run holds the lock: alive
        }
        let outcome = async {
            let Some(mark) = run_schema::prove(&mut conn, &schema).await? else {
                return Ok(None); // not idem's: never touched
            };
            if mark.kept || mark.heartbeat_age_s < STALE.as_secs_f64() {
                return Ok(None);
            }
            let silent_s = mark.heartbeat_age_s as u64;
            Ok::<_, anyhow::Error>(Some(
                match run_schema::drop_own(&mut conn, &schema).await? {
                    Dropped::Yes => Swept::Dropped {
                        schema: schema.clone(),
                        silent_s,
                    },
                    Dropped::Left { blockers } => Swept::Left {
                        schema: schema.clone(),
                        blockers,
                    },
                },
            ))
        }
        .await;
        sqlx::query("SELECT pg_advisory_unlock($1, hashtext($2))")
            .bind(LOCK_CLASS)
            .bind(&schema)
            .execute(&mut *conn)
            .await?;
        swept.extend(outcome?);
    }
    Ok(swept)
}

impl std::fmt::Display for Swept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Swept::Dropped { schema, silent_s } => write!(
                f,
                "dropped schema {schema}: idem made it, and its run has been gone for {silent_s} s"
            ),
            Swept::Left { schema, blockers } => {
                f.write_str(&run_schema::left_message(schema, blockers))
            }
        }
    }
}
