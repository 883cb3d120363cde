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

use anyhow::{Context, Result, bail};

use super::book;
use super::child::output;
use super::cluster::{Cluster, runs_parent, server_settings};
use super::link::Link;
use super::os_user::chown_tree;
use super::pool::Connect;
use super::sslmode::Tls;
use super::statements::Sending;
use super::supervised::Supervised;
use super::template::private_dir;
use super::url::DatabaseUrl;
use super::{Backend, Database};
use tokio_postgres::Client;

/// How long the base backup of a fresh cluster may take.
const BASE_BACKUP_LIMIT: Duration = Duration::from_secs(60);

/// A running hot standby of a disposable cluster.
#[derive(Debug)]
pub struct Standby {
    server: Supervised,
    /// The relay its WAL crosses, when it has one (`--link-delay-ms`,
    /// `--failover`); dropped after the server, which it feeds.
    link: Option<Link>,
}

/// How a standby is made: when it applies what it receives, and whether
/// its WAL crosses a link idem can cut.
#[derive(Debug, Clone, Copy, Default)]
pub struct StandbyShape {
    /// Its `recovery_min_apply_delay`: how long it waits before applying a
    /// commit it has received, so that its lag shows.
    pub apply_delay: Option<Duration>,
    /// The link's delay, if the WAL crosses one (see [`Link`]).
    pub link_delay: Option<Duration>,
}

impl Standby {
    /// Copies `primary` with `pg_basebackup` and starts the copy as a hot
    /// standby streaming from it; ready when it accepts read-only connections.
    pub async fn start(primary: &Cluster, shape: StandbyShape) -> Result<Self> {
        let run_dir = private_dir(&runs_parent(), "idem")?;
        let (primary_socket, postgres, user) = (
            primary
                .socket_dir()
                .join(format!(".s.PGSQL.{}", super::cluster::PORT)),
            primary.bins.postgres(),
            primary.user,
        );
        let copied = base_backup(primary, &run_dir);
        if let Err(err) = copied {
            let _ = std::fs::remove_dir_all(&run_dir);
            return Err(err);
        }
        let mut settings = server_settings();
        settings.extend(["-c".to_string(), "hot_standby=on".to_string()]);
        // When its primary is gone (a cut link), the standby waits this long
        // between tries, and a promotion may wait one out: 5 s by default.
        settings.extend([
            "-c".to_string(),
            "wal_retrieve_retry_interval=100ms".to_string(),
        ]);
        if let Some(delay) = shape.apply_delay {
            settings.extend([
                "-c".to_string(),
                format!("recovery_min_apply_delay={}ms", delay.as_millis()),
            ]);
        }
        let link = match shape.link_delay {
            Some(delay) => match Link::open(&primary_socket, &run_dir.join("link"), delay, user) {
                Ok(link) => Some(link),
                Err(err) => {
                    let _ = std::fs::remove_dir_all(&run_dir);
                    return Err(err);
                }
            },
            None => None,
        };
        if let Some(link) = &link {
            // The command line wins over what pg_basebackup -R wrote.
            settings.extend([
                "-c".to_string(),
                format!(
                    "primary_conninfo=host={} port={} user=postgres application_name=idem-standby",
                    link.dir().display(),
                    super::cluster::PORT
                ),
            ]);
        }
        // Waiting for the standby blocks; the link's relay runs meanwhile.
        let server = tokio::task::spawn_blocking(move || {
            Supervised::start(
                &postgres, &run_dir, user, &settings,
                // PostgreSQL 15 marks a hot standby that takes read-only
                // connections "ready" too.
                "ready",
            )
        })
        .await
        .context("starting the standby panicked")??;
        Ok(Standby { server, link })
    }

    /// The link the standby's WAL crosses, if it has one.
    pub fn link(&self) -> Option<&Link> {
        self.link.as_ref()
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

    /// Promotes the standby to a primary with `pg_promote()`, as a failover
    /// does, waiting until it takes writes; returns how long that took.
    pub async fn promote(&self) -> Result<Duration> {
        let began = std::time::Instant::now();
        let client = self.connect().await?;
        let promoted: bool = client
            .query_one(
                "SELECT pg_promote(true, $1)",
                &[&(PROMOTE_LIMIT.as_secs() as i32)],
            )
            .await
            .map_err(|e| anyhow::anyhow!("could not promote the standby: {e}"))?
            .get(0);
        if !promoted {
            bail!(
                "the standby was not promoted within {} s: {}",
                PROMOTE_LIMIT.as_secs(),
                self.server.log_tail()
            );
        }
        Ok(began.elapsed())
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

/// How long a promotion may take.
const PROMOTE_LIMIT: Duration = Duration::from_secs(60);

/// Waits until `standby` has replayed everything `primary` has written so
/// far (its apply delay, and the time for the WAL to reach it), for at most
/// `limit`. Asks the standby (`pg_last_wal_replay_lsn()`), so it works on a
/// standby of the user's as on idem's own.
pub async fn replayed(primary: &Database, standby: &Client, limit: Duration) -> Result<()> {
    let began = std::time::Instant::now();
    let target = current_lsn(primary).await?;
    loop {
        let caught_up: bool = standby
            .query_one(
                "SELECT coalesce(pg_last_wal_replay_lsn() >= $1::text::pg_lsn, false)",
                &[&target],
            )
            .await
            .map_err(|e| anyhow::anyhow!("could not ask the standby how far it has replayed: {e}"))?
            .get(0);
        if caught_up {
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

/// Checks that `standby` is a hot standby of `primary`: in recovery, and
/// holding the run's schema once it has replayed what the primary wrote.
/// For the user's `--standby-url`, which idem only reads.
pub async fn follows(primary: &Database, standby: &Client, limit: Duration) -> Result<()> {
    let in_recovery: bool = standby
        .query_one("SELECT pg_is_in_recovery()", &[])
        .await
        .map_err(|e| anyhow::anyhow!("--standby-url: {}", super::secret::scrub(&e.to_string())))?
        .get(0);
    if !in_recovery {
        bail!("--standby-url names a server that is not a standby: pg_is_in_recovery() is false");
    }
    replayed(primary, standby, limit).await.map_err(|_| {
        anyhow::anyhow!(
            "--standby-url did not replay the --database-url server's writes within {} s: \
             is it a standby of that server?",
            limit.as_secs()
        )
    })?;
    let has_schema: bool = standby
        .query_one("SELECT to_regnamespace($1) IS NOT NULL", &[&primary.schema])
        .await
        .map_err(|e| anyhow::anyhow!("--standby-url: {}", super::secret::scrub(&e.to_string())))?
        .get(0);
    if !has_schema {
        bail!(
            "--standby-url does not have the run's schema: it is not a standby of the --database-url server"
        );
    }
    Ok(())
}

/// WAL `primary` has written that `standby` has not replayed, in bytes.
pub async fn behind(primary: &Database, standby: &Client) -> Result<i64> {
    let target = current_lsn(primary).await?;
    let row = standby
        .query_one(
            "SELECT coalesce(pg_wal_lsn_diff($1::text::pg_lsn, pg_last_wal_replay_lsn()), 0)::bigint",
            &[&target],
        )
        .await
        .map_err(|e| anyhow::anyhow!("could not ask the standby how far it has replayed: {e}"))?;
    Ok(row.get::<_, i64>(0).max(0))
}

async fn current_lsn(primary: &Database) -> Result<String> {
    let mut tx = primary.book().await?;
    let lsn: String = book::query_scalar("SELECT pg_current_wal_lsn()::text")
        .fetch_one(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(lsn)
}

/// Makes the primary wait for its standby at commit
/// (`synchronous_standby_names = '*'`), or no longer (`wanted` false), and
/// waits until the standby is counted so. A session then chooses how long it waits with
/// `synchronous_commit` (`remote_apply`: until the standby has applied the
/// commit). Only ever on idem's own cluster.
pub async fn make_synchronous(primary: &Database, wanted: bool, limit: Duration) -> Result<()> {
    let Backend::Embedded(_) = &primary.backend else {
        bail!("idem changes the replication settings of its own disposable cluster only");
    };
    // ALTER SYSTEM runs outside a transaction: one simple query each.
    let names = match wanted {
        true => "ALTER SYSTEM SET synchronous_standby_names = '*'",
        false => "ALTER SYSTEM RESET synchronous_standby_names",
    };
    sqlx::raw_sql(names)
        .execute(&primary.meta)
        .await
        .context("could not set synchronous_standby_names")?;
    sqlx::raw_sql("SELECT pg_reload_conf()")
        .execute(&primary.meta)
        .await?;
    let began = std::time::Instant::now();
    loop {
        let mut tx = primary.book().await?;
        let synchronous: bool = book::query_scalar(
            "SELECT coalesce(bool_or(sync_state IN ('sync', 'quorum')), false) FROM pg_stat_replication",
        )
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        if synchronous == wanted {
            return Ok(());
        }
        if began.elapsed() > limit {
            bail!(
                "the standby was not counted as synchronous within {} s",
                limit.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A hot standby of `db`'s disposable cluster (`--standby`), and settings
/// for connections that read from it, made as the workers' are. idem
/// never makes a standby of, or reconfigures, a user's server.
pub async fn start_for(db: &Database, shape: StandbyShape) -> Result<(Standby, Connect)> {
    let Backend::Embedded(cluster) = &db.backend else {
        bail!(
            "--standby makes a hot standby of idem's own disposable cluster; idem never \
             reconfigures your server: drop --database-url"
        );
    };
    let standby = Standby::start(cluster, shape).await?;
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
