//! Watching a stepped race on MariaDB: which session waits for which (InnoDB's lock waits, `GET_LOCK`'s holder), and a session killed as a crash.
//!
//! The step controller asks these through the admin pool, never through a
//! worker's connection: a worker paused at a step must not be woken by
//! the watcher's own statements.

use std::time::{Duration, Instant};

use sqlx::Row;

/// The sessions session `id` waits for: waiting in `GET_LOCK`, the holder
/// of the named lock `lock` (`IS_USED_LOCK`); waiting on an InnoDB row or
/// gap lock, the holders InnoDB's lock-wait views name.
///
/// Whether it waits is read from `SHOW ENGINE INNODB STATUS`, made when
/// asked, and not from those views: InnoDB fills them again only when they
/// were last read over 0.1 s ago, so a watcher that looks every 10 ms
/// reads the same stale rows for ever (a wait that began since is never
/// seen). When the views do not name the holder yet, every other session
/// holding InnoDB locks is named: the one a two-request walk waits for.
pub async fn blockers_of(
    admin: &sqlx::MySqlPool,
    id: i32,
    lock: &str,
) -> Result<Vec<i32>, sqlx::Error> {
    let state: Option<Option<String>> =
        sqlx::query_scalar("SELECT STATE FROM information_schema.PROCESSLIST WHERE ID = ?")
            .bind(id)
            .fetch_optional(admin)
            .await?;
    if state.flatten().as_deref() == Some("User lock") {
        let holder: Option<i64> = sqlx::query_scalar("SELECT CAST(IS_USED_LOCK(?) AS SIGNED)")
            .bind(lock)
            .fetch_one(admin)
            .await?;
        return Ok(holder
            .and_then(|h| i32::try_from(h).ok())
            .into_iter()
            .collect());
    }
    let status: String = sqlx::query("SHOW ENGINE INNODB STATUS")
        .fetch_one(admin)
        .await?
        .try_get(2)?;
    let sessions = innodb_sessions(&status);
    if !sessions.iter().any(|s| s.id == id && s.waits) {
        return Ok(Vec::new());
    }
    let named: Vec<i64> = sqlx::query_scalar(
        "SELECT CAST(b.trx_mysql_thread_id AS SIGNED) \
         FROM information_schema.INNODB_LOCK_WAITS w \
         JOIN information_schema.INNODB_TRX r ON r.trx_id = w.requesting_trx_id \
         JOIN information_schema.INNODB_TRX b ON b.trx_id = w.blocking_trx_id \
         WHERE r.trx_mysql_thread_id = ?",
    )
    .bind(id)
    .fetch_all(admin)
    .await?;
    let named: Vec<i32> = named
        .into_iter()
        .filter_map(|b| i32::try_from(b).ok())
        .filter(|b| sessions.iter().any(|s| s.id == *b && s.locks))
        .collect();
    if !named.is_empty() {
        return Ok(named);
    }
    Ok(sessions
        .iter()
        .filter(|s| s.id != id && s.locks)
        .map(|s| s.id)
        .collect())
}

/// Checks that lock waits can be read on this server: `SHOW ENGINE
/// INNODB STATUS` needs the PROCESS privilege, and without it every wait
/// would look like a step still running, until InnoDB gave up (1205).
pub async fn can_watch(admin: &sqlx::MySqlPool) -> anyhow::Result<()> {
    match sqlx::query("SHOW ENGINE INNODB STATUS")
        .fetch_one(admin)
        .await
    {
        Ok(_) => Ok(()),
        Err(e) => anyhow::bail!(
            "idem reads the steps' lock waits from SHOW ENGINE INNODB STATUS, and this server \
             refused it ({}): grant the user PROCESS, or step on a MariaDB of idem's own (no \
             --database-url)",
            crate::db::secret::scrub(&crate::controls::escaped(&e.to_string()))
        ),
    }
}

/// A session's transaction, as `SHOW ENGINE INNODB STATUS` lists it.
#[derive(Debug, PartialEq, Eq)]
struct Session {
    id: i32,
    /// `LOCK WAIT`: waiting for a lock to be granted.
    waits: bool,
    /// Holding (or waiting for) at least one InnoDB lock.
    locks: bool,
}

/// The sessions with a transaction in the status's list of transactions.
fn innodb_sessions(status: &str) -> Vec<Session> {
    status
        .split("---TRANSACTION ")
        .skip(1)
        .filter_map(|trx| {
            let id = trx
                .split_once("MariaDB thread id ")?
                .1
                .split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()?;
            let structs = trx
                .lines()
                .find_map(|l| l.split_once(" lock struct(s)"))
                .and_then(|(before, _)| before.rsplit(' ').next()?.parse::<u64>().ok());
            Some(Session {
                id,
                waits: trx.lines().any(|l| l.starts_with("LOCK WAIT ")),
                locks: structs.is_some_and(|n| n > 0),
            })
        })
        .collect()
}

/// Kills session `id` (`KILL CONNECTION`), then waits, up to 5 s, until
/// the server has let it go: its transaction rolled back, its locks free.
pub async fn kill(admin: &sqlx::MySqlPool, id: i32) -> Result<(), sqlx::Error> {
    sqlx::query(&format!("KILL CONNECTION {id}"))
        .execute(admin)
        .await?;
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        let left: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?")
                .bind(id)
                .fetch_one(admin)
                .await?;
        if left == 0 {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Err(sqlx::Error::Protocol(format!(
        "session {id} was still there 5 s after it was killed"
    )))
}

/// The cluster's commits the node `conn` is on has applied
/// (`wsrep_last_committed`).
pub async fn last_committed(conn: &mut sqlx::MySqlConnection) -> anyhow::Result<i64> {
    let (_, value): (String, String) =
        sqlx::query_as("SHOW GLOBAL STATUS LIKE 'wsrep_last_committed'")
            .fetch_one(conn)
            .await?;
    Ok(value.parse()?)
}

/// How long the step controller waits for a cluster's nodes to apply each
/// other's commits after a step.
const APPLIED_LIMIT: Duration = Duration::from_secs(10);

/// Waits until every node of a cluster (`nodes`, one pool each) has
/// applied the same commits (`wsrep_last_committed`): the walk's steps then
/// meet the same rows whichever node they run on, as the appliers'
/// speed would otherwise decide. Says which node lagged past the limit.
pub async fn all_applied(nodes: &[sqlx::MySqlPool]) -> Result<(), String> {
    let began = Instant::now();
    loop {
        let mut applied = Vec::new();
        for node in nodes {
            let mut conn = node.acquire().await.map_err(|e| e.to_string())?;
            applied.push(
                last_committed(&mut conn)
                    .await
                    .map_err(|e| format!("{e:#}"))?,
            );
        }
        let most = applied.iter().copied().max().unwrap_or(0);
        let Some(behind) = applied.iter().position(|&a| a < most) else {
            return Ok(());
        };
        if began.elapsed() > APPLIED_LIMIT {
            return Err(format!(
                "node {} had applied {} of the cluster's {most} commits after {} s",
                behind + 1,
                applied[behind],
                APPLIED_LIMIT.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_innodb_status_says_which_session_waits_and_which_hold_locks() {
        let status = "LIST OF TRANSACTIONS FOR EACH SESSION:\n\
            ---TRANSACTION 23, ACTIVE 1 sec inserting\n\
            mysql tables in use 1, locked 1\n\
            LOCK WAIT 2 lock struct(s), heap size 1128, 1 row lock(s), undo log entries 1\n\
            MariaDB thread id 9, OS thread handle 1, query id 19 localhost root Update\n\
            insert into t.k(k) values('b')\n\
            ------- TRX HAS BEEN WAITING 503556 us FOR THIS LOCK TO BE GRANTED:\n\
            ---TRANSACTION 22, ACTIVE 1 sec\n\
            2 lock struct(s), heap size 1128, 1 row lock(s)\n\
            MariaDB thread id 8, OS thread handle 2, query id 18 localhost root User sleep\n\
            ---TRANSACTION (0x7f45c01c0b80), ACTIVE 0 sec\n\
            0 lock struct(s), heap size 1128, 0 row lock(s)\n\
            MariaDB thread id 14, OS thread handle 3, query id 38 localhost root starting\n\
            --------\nFILE I/O\n";
        assert_eq!(
            innodb_sessions(status),
            vec![
                Session {
                    id: 9,
                    waits: true,
                    locks: true
                },
                Session {
                    id: 8,
                    waits: false,
                    locks: true
                },
                Session {
                    id: 14,
                    waits: false,
                    locks: false
                },
            ]
        );
    }
}
