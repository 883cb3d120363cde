//! Who waits for whom: samples `pg_blocking_pids` while a race runs, as PostgreSQL's isolation tester does.

use std::collections::BTreeSet;
use std::time::Duration;

use sqlx::PgPool;

use crate::db::book;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// How often the watch looks.
const EVERY: Duration = Duration::from_millis(2);

/// A background sampler of lock waits among idem's workers.
pub struct BlockWatch {
    stop: oneshot::Sender<()>,
    task: JoinHandle<BTreeSet<(i32, i32)>>,
}

/// Who waits on a lock now, and who holds it.
async fn sample(meta: &PgPool) -> sqlx::Result<Vec<(i32, Vec<i32>)>> {
    let mut tx = meta.begin().await?;
    let rows = book::query_as(
        "SELECT pid, pg_blocking_pids(pid) FROM pg_stat_activity
         WHERE application_name = 'idem-worker' AND wait_event_type = 'Lock'",
    )
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(rows)
}

impl BlockWatch {
    /// Starts sampling on the bookkeeping pool (not the workers' pool).
    pub fn start(meta: PgPool) -> Self {
        let (stop, mut stopped) = oneshot::channel();
        let task = tokio::spawn(async move {
            let mut seen = BTreeSet::new();
            loop {
                let rows = sample(&meta).await.unwrap_or_default();
                for (waiter, blockers) in rows {
                    seen.extend(blockers.into_iter().map(|blocker| (waiter, blocker)));
                }
                tokio::select! {
                    _ = &mut stopped => return seen,
                    _ = tokio::time::sleep(EVERY) => {}
                }
            }
        });
        Self { stop, task }
    }

    /// Stops sampling; returns every (waiting pid, blocking pid) pair seen.
    pub async fn finish(self) -> BTreeSet<(i32, i32)> {
        let _ = self.stop.send(());
        self.task.await.unwrap_or_default()
    }
}
