//! A hot standby of the disposable cluster (lesson 10): PostgreSQL's own streaming replication, on one machine.
//!
//! `pg_basebackup -R` copies the running cluster over its socket and writes
//! the `standby.signal` and `primary_conninfo` that make the copy follow the
//! primary's WAL. The copy runs in a run directory of its own under idem's
//! supervisor, as the primary does, so it stops and is removed with idem
//! however idem ends.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Result, bail};

use super::book;
use super::child::output;
use super::cluster::{Cluster, runs_parent, server_settings};
use super::os_user::chown_tree;
use super::pool::Connect;
use super::sslmode::Tls;
use super::statements::Sending;
use super::supervised::Supervised;
use super::template::private_dir;
use super::url::DatabaseUrl;
use super::{Backend, Database};

/// How long the base backup of a fresh cluster may take.
const BASE_BACKUP_LIMIT: Duration = Duration::from_secs(60);

/// A running hot standby of a disposable cluster.
#[derive(Debug)]
pub struct Standby {
    server: Supervised,
}

impl Standby {
    /// Copies `primary` with `pg_basebackup` and starts the copy as a hot
    /// standby streaming from it; ready when it accepts read-only connections.
    /// `apply_delay` is its `recovery_min_apply_delay`: how long it waits
    /// before applying a commit it has received, so that its lag shows.
    pub fn start(primary: &Cluster, apply_delay: Option<Duration>) -> Result<Self> {
        let run_dir = private_dir(&runs_parent(), "idem")?;
        let copied = base_backup(primary, &run_dir);
        if let Err(err) = copied {
            let _ = std::fs::remove_dir_all(&run_dir);
            return Err(err);
        }
        let mut settings = server_settings();
        settings.extend(["-c".to_string(), "hot_standby=on".to_string()]);
        if let Some(delay) = apply_delay {
            settings.extend([
                "-c".to_string(),
                format!("recovery_min_apply_delay={}ms", delay.as_millis()),
            ]);
        }
        let server = Supervised::start(
            &primary.bins.postgres(),
            &run_dir,
            primary.user,
            &settings,
            // PostgreSQL 15 marks a hot standby that takes read-only
            // connections "ready" too.
            "ready",
        )?;
        Ok(Standby { server })
    }

    /// The directory holding the standby's unix socket.
    pub fn socket_dir(&self) -> &Path {
        &self.server.run_dir
    }

    /// The standby's URL: its socket, no TLS (nothing to encrypt there).
    pub fn url(&self) -> String {
        format!(
            "{}&sslmode=disable",
            super::socket_url(self.socket_dir(), None)
        )
    }

    /// Waits until the standby has replayed everything `primary` has
    /// written so far (its apply delay, and the time for the WAL to
    /// reach it), for at most `limit`.
    pub async fn caught_up(&self, primary: &Database, limit: Duration) -> Result<()> {
        let began = std::time::Instant::now();
        let mut tx = primary.book().await?;
        let target: String = book::query_scalar("SELECT pg_current_wal_lsn()::text")
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        loop {
            let mut tx = primary.book().await?;
            let behind: bool = book::query_scalar(
                "SELECT coalesce(bool_or(replay_lsn IS NULL OR replay_lsn < $1::pg_lsn), true)
                 FROM pg_stat_replication",
            )
            .bind(&target)
            .fetch_one(&mut *tx)
            .await?;
            tx.commit().await?;
            if !behind {
                return Ok(());
            }
            if began.elapsed() > limit {
                bail!(
                    "the standby did not replay the primary's writes within {} s",
                    limit.as_secs()
                );
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// How far behind the standby is, from `primary`'s
    /// `pg_stat_replication`: WAL not yet replayed, in bytes, and the
    /// `replay_lag` of its last replayed commit, in ms.
    pub async fn lag(&self, primary: &Database) -> Result<(i64, f64)> {
        let mut tx = primary.book().await?;
        let lag = book::query_as(
            "SELECT coalesce(max(pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)), 0)::bigint,
                    coalesce(max(extract(epoch FROM replay_lag) * 1000), 0)::float8
             FROM pg_stat_replication",
        )
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(lag)
    }

    /// A connection to the standby: read-only, as a reading role's is.
    pub async fn connect(&self) -> Result<tokio_postgres::Client> {
        let config = DatabaseUrl::parse(&self.url())?.for_workers();
        let (client, driver) = config
            .connect(tokio_postgres::NoTls)
            .await
            .map_err(|e| anyhow::anyhow!("could not connect to the standby: {e}"))?;
        tokio::spawn(driver);
        Ok(client)
    }
}

/// A hot standby of `db`'s disposable cluster (`--standby`), and settings
/// for connections that read from it, made as the workers' are. idem
/// never makes a standby of, or reconfigures, a user's server.
pub fn start_for(db: &Database, apply_delay: Duration) -> Result<(Standby, Connect)> {
    let Backend::Embedded(cluster) = &db.backend else {
        bail!(
            "--standby makes a hot standby of idem's own disposable cluster; idem never \
             reconfigures your server: drop --database-url"
        );
    };
    let delay = (!apply_delay.is_zero()).then_some(apply_delay);
    let standby = Standby::start(cluster, delay)?;
    let url = DatabaseUrl::parse(&standby.url())?;
    let connect = Connect {
        config: super::for_workers(url.for_workers()),
        tls: Tls::disabled().connector()?,
        schema: db.workers_config().schema.clone(),
        sending: Sending::Prepared,
    };
    Ok((standby, connect))
}

/// The primary's data, copied into `run_dir/data` as a standby's.
fn base_backup(primary: &Cluster, run_dir: &Path) -> Result<()> {
    if let Some(user) = primary.user {
        chown_tree(run_dir, user)?;
    }
    let mut cmd = Command::new(primary.bins.dir.join("pg_basebackup"));
    cmd.arg("-h")
        .arg(primary.socket_dir())
        .arg("-D")
        .arg(run_dir.join("data"))
        // -R: standby.signal and primary_conninfo; WAL streamed during the
        // copy; a fast checkpoint; no fsync, as the cluster has none.
        .args(["-R", "-X", "stream", "-c", "fast", "--no-sync"]);
    if let Some(user) = primary.user {
        use std::os::unix::process::CommandExt;
        cmd.uid(user.uid).gid(user.gid);
    }
    let out = output(&mut cmd, "pg_basebackup", BASE_BACKUP_LIMIT)?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stderr);
        bail!(
            "pg_basebackup could not copy the cluster: {}",
            said.lines()
                .rfind(|l| !l.trim().is_empty())
                .unwrap_or("no reason given")
                .trim()
        );
    }
    Ok(())
}
