//! The user a guard file's statements run as on MariaDB: a login of the run's own that can read and write the run's tables and nothing else.
//!
//! A guard file is someone else's code. On MariaDB, as on PostgreSQL (see
//! [`crate::db::guard_role`]), its statements go on connections that log
//! in as a user made for the run, never as root:
//! - `SELECT, INSERT, UPDATE, DELETE` on the run's database, and no other
//!   right: no `FILE` (no `LOAD_FILE`, no `INTO OUTFILE`), no `SUPER`, no
//!   `PROCESS`, no `CREATE`, nothing on `mysql` or any other database;
//! - `MAX_STATEMENT_TIME`: a statement past the step limit is stopped by
//!   the server itself (1969), and a guard file cannot send the `SET` that
//!   would lift it (a step is one SELECT, INSERT, UPDATE, DELETE or WITH,
//!   and a prepared statement is one statement);
//! - `MAX_USER_CONNECTIONS`: the race's pool and no more;
//! - a random password, never printed, for a login over the server's own
//!   Unix socket.
//!
//! The user is made only on a server idem started: on a user's server,
//! guard files do not run. It goes with the server when the run ends.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use sqlx::mysql::MySqlPool;

use super::Mariadb;

/// How long the last run's sessions of the guard user may take to end.
const SESSIONS_GONE_LIMIT: Duration = Duration::from_secs(5);

/// The pools a guard file's statements run on, all as the run's guard
/// user: one per node the requests reach, and the heartbeat's, whose renew
/// step is the file's too.
pub struct GuardPools {
    pub nodes: Vec<MySqlPool>,
    pub beats: Option<MySqlPool>,
}

impl Mariadb {
    /// Waits until no session of `user` is left on the server, at most
    /// [`SESSIONS_GONE_LIMIT`]. The last run closed its pool, but the
    /// server ends each closed session in its own time, and until then
    /// counts it against the user's connection cap, which the next run's
    /// pool fills again (seen once under the whole suite's load: error
    /// 1226, the cap exceeded). Past the limit the next run is let try.
    async fn sessions_gone(&self, user: &str) -> Result<()> {
        let deadline = std::time::Instant::now() + SESSIONS_GONE_LIMIT;
        loop {
            let left: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = ?",
            )
            .bind(user)
            .fetch_one(&self.admin)
            .await
            .map_err(|e| anyhow::anyhow!("{}", super::said(&e)))?;
            if left == 0 || std::time::Instant::now() > deadline {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// A pool on each of the first `nodes` nodes (one for a single
    /// server) of `size` connections at most, each waiting at most
    /// `checkout` and set by `session` when given, logged in as the run's
    /// guard user, whose statements the server stops after `step_limit`;
    /// `name` is the guard file's, for a message. One user serves every
    /// node: a cluster replicates `CREATE USER` and `GRANT`. Refused on a
    /// user's server.
    pub async fn guard_pools(
        &self,
        nodes: usize,
        (size, checkout): (usize, Duration),
        step_limit: Duration,
        (name, session): (&str, Option<&'static str>),
        beats: Option<(usize, Duration)>,
    ) -> Result<GuardPools> {
        if self.user.is_some() {
            bail!(
                "{name} runs only on a MariaDB server idem started: idem cannot prove what its \
                 statements touch on your server; drop --database-url"
            );
        }
        let user = format!("{}_guard", self.database);
        self.sessions_gone(&user).await?;
        let password = uuid::Uuid::new_v4().simple().to_string();
        let made = format!(
            "CREATE OR REPLACE USER '{user}'@'localhost' IDENTIFIED BY '{password}' \
             WITH MAX_USER_CONNECTIONS {connections} MAX_STATEMENT_TIME {seconds:.3}; \
             GRANT SELECT, INSERT, UPDATE, DELETE ON `{db}`.* TO '{user}'@'localhost'",
            connections = size + 1 + beats.map_or(0, |(n, _)| n),
            seconds = step_limit.as_secs_f64(),
            db = self.database,
        );
        sqlx::raw_sql(&made)
            .execute(&self.admin)
            .await
            .map_err(|e| anyhow::anyhow!("{}", super::said(&e)))
            .with_context(|| format!("could not make the user {name} runs as"))?;
        for node in 1..nodes {
            self.user_seen_on(node, &user).await?;
        }
        let as_guard = |node: usize| {
            self.node_workers[node]
                .clone()
                .username(&user)
                .password(&password)
        };
        Ok(GuardPools {
            nodes: (0..nodes)
                .map(|node| self.pool_setting(as_guard(node), (size, checkout), session))
                .collect(),
            beats: beats.map(|sized| self.pool_setting(as_guard(0), sized, session)),
        })
    }

    /// Waits until node `node` (0-based) of the cluster has applied the
    /// guard user `user` made on node 1: a causal read of `mysql.user`
    /// there, which waits for everything certified before it.
    async fn user_seen_on(&self, node: usize, user: &str) -> Result<()> {
        use sqlx::ConnectOptions;
        let mut conn = self.node_workers[node].connect().await?;
        sqlx::raw_sql("SET SESSION wsrep_sync_wait = 1")
            .execute(&mut conn)
            .await?;
        let seen: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM mysql.user WHERE User = ?")
            .bind(user)
            .fetch_one(&mut conn)
            .await?;
        if seen == 0 {
            bail!(
                "node {} of the cluster has not got the run's guard user",
                node + 1
            );
        }
        Ok(())
    }
}
