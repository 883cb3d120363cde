//! Whether a run on a real server is alive: a lock its connection holds, and a heartbeat it writes.
//!
//! A run killed with SIGKILL cannot drop its own schema, so later runs sweep
//! schemas whose run is gone. "Gone" must be proven, not guessed: a
//! connection can be lost while its run lives on (`idle_session_timeout`, a
//! pooler, a DBA's `pg_terminate_backend`). So a run shows it is alive in
//! two ways. It holds an advisory lock named after its schema, and every
//! [`HEARTBEAT`] it writes the time into its schema's mark. If its lock
//! connection is lost, the next beat reconnects and takes the lock again.
//! A sweeper drops a schema only while holding that lock itself *and* when
//! the last heartbeat is older than [`STALE`]: twelve missed beats.
//!
//! Both locks are transaction-scoped, never session locks. Through a
//! pooler in transaction mode a session lock stays on whichever server
//! connection took it, and that connection then serves other clients: the
//! lock would be "held" by nobody in particular and released by nobody. A
//! transaction that stays open is different: the pooler keeps its client on
//! one server connection until it ends. So the run's lock connection keeps a
//! transaction open that holds `pg_advisory_xact_lock`; each beat writes
//! the heartbeat, commits, and takes the lock again in a new transaction,
//! all in one message. Between that commit and the new lock a sweeper may
//! get the lock, but it then finds the heartbeat it just committed, fresh,
//! and leaves the schema alone. A sweeper tries the lock in a transaction
//! of its own (`pg_try_advisory_xact_lock`) and drops inside it, so the lock
//! ends exactly when its decision is committed. The lock connection pins
//! one server connection of the pooler for the run's length.

use std::time::Duration;

use anyhow::{Result, bail};
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool};
use sqlx::{Connection, Executor};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::book;
use super::run_schema::{self, Dropped};

/// The first key of idem's advisory locks (the second is the schema's hash).
const LOCK_CLASS: i32 = 0x1de3;

/// How often a live run writes its heartbeat.
pub const HEARTBEAT: Duration = Duration::from_secs(5);

/// How old a heartbeat must be before its run counts as gone.
pub const STALE: Duration = Duration::from_secs(60);

/// The statement that takes a run's lock, until its transaction ends.
fn lock_statement(schema: &str) -> Result<String> {
    // The name goes into the text (a simple query has no parameters), so
    // it must be a run schema's name and nothing else.
    if !run_schema::looks_like_run_schema(schema) {
        bail!("{schema:?} is not a run schema's name");
    }
    Ok(format!(
        "SELECT pg_advisory_xact_lock({LOCK_CLASS}, hashtext('{schema}'))"
    ))
}

/// Connects and takes the lock that says "this schema's run is alive", in
/// a transaction left open.
pub async fn hold(options: &PgConnectOptions, schema: &str) -> Result<PgConnection> {
    let mut conn =
        PgConnection::connect_with(&options.clone().application_name("idem-lifeline")).await?;
    let begin = format!("BEGIN; {}", lock_statement(schema)?);
    conn.execute(sqlx::raw_sql(&begin)).await?;
    Ok(conn)
}

/// Says the run is still alive: the heartbeat, committed, and the lock
/// taken again in a new transaction, in one message.
async fn beat(conn: &mut PgConnection, schema: &str) -> Result<()> {
    let beat = format!(
        "UPDATE \"{schema}\".{} SET heartbeat_at = now(); COMMIT; BEGIN; {}",
        run_schema::MARK_TABLE,
        lock_statement(schema)?
    );
    conn.execute(sqlx::raw_sql(&beat)).await?;
    Ok(())
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
                    Some(c) => beat(c, &schema).await.is_ok(),
                    None => false,
                };
                if !beaten {
                    // The connection is gone, and the lock with it: take both
                    // again. Until then the fresh heartbeat keeps sweepers off.
                    conn = None;
                    if let Ok(Ok(mut c)) =
                        tokio::time::timeout(HEARTBEAT, hold(&options, &schema)).await
                        && beat(&mut c, &schema).await.is_ok()
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
    let mut tx = meta.begin().await?;
    let candidates: Vec<String> = book::query_scalar(
        "SELECT nspname::text FROM pg_namespace WHERE nspname ~ '^idem_[0-9a-f]{8}$'",
    )
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    let mut swept = Vec::new();
    for schema in candidates {
        // Each schema in a transaction of its own: the lock is held from
        // the try to the commit of what was decided under it.
        let mut tx = meta.begin().await?;
        let locked: bool = book::query_scalar("SELECT pg_try_advisory_xact_lock($1, hashtext($2))")
            .bind(LOCK_CLASS)
            .bind(&schema)
            .fetch_one(&mut *tx)
            .await?;
        if !locked {
            tx.rollback().await?;
            continue; // its run holds the lock: alive
        }
        let conn: &mut PgConnection = &mut tx;
        let outcome = async {
            let Some(mark) = run_schema::prove(conn, &schema).await? else {
                return Ok(None); // not idem's: never touched
            };
            if mark.kept || mark.heartbeat_age_s < STALE.as_secs_f64() {
                return Ok(None);
            }
            let silent_s = mark.heartbeat_age_s as u64;
            Ok::<_, anyhow::Error>(Some(match run_schema::drop_own(conn, &schema).await? {
                Dropped::Yes => Swept::Dropped {
                    schema: schema.clone(),
                    silent_s,
                },
                Dropped::Left { blockers } => Swept::Left {
                    schema: schema.clone(),
                    blockers,
                },
            }))
        }
        .await;
        match outcome {
            Ok(outcome) => {
                tx.commit().await?;
                swept.extend(outcome);
            }
            Err(err) => {
                let _ = tx.rollback().await;
                return Err(err);
            }
        }
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
