//! A replica beside idem's own Redis (`--redis-replica`), and the failover that promotes it (`--redis-failover`): Redis replicates asynchronously, and a write that had not reached the replica when its primary died is gone.
//!
//! Both servers are idem's own, as its single Redis is: each under the
//! supervisor in a private directory, with a Unix socket of its own. Redis
//! replicates over TCP only, so in a pair each also listens on a loopback
//! port, and both ask a password drawn for the run, written in each one's
//! settings file (never on a command line, where `ps` would show it).
//!
//! `behind` cuts the link before each run: the replica's password for its
//! primary is made wrong and its link closed, so that it keeps trying and
//! is refused, as a replica cut off by a partition, or still in its first
//! sync, is. A claim then never reaches it, for certain, rather than by a
//! race of microseconds. A failover is SIGKILL for the primary, as a
//! machine lost, then `REPLICAOF NO ONE` on the replica; every command
//! after it goes to the new primary, and the next run starts a new
//! replica of that one.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use redis::aio::MultiplexedConnection;
use serde::{Deserialize, Serialize};

use crate::db::ports::free_port;
use crate::db::redis_node::{self, Node, PairSettings};
use crate::db::redis_url::bounded;

/// How long a replica may take to be in step with its primary, or to
/// notice its link is cut.
const LINK_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the first write's `WAIT` may take: a replica acknowledges
/// once a second on its own, and this stays below every Redis command's
/// limit.
const FIRST_ACK_MS: u64 = 4000;

/// Where a race's replica stands when each run starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum ReplicaLink {
    /// Its link up: each write is sent to it as it is made.
    InStep,
    /// Its link cut before the run: it gets none of the run's writes.
    Behind,
}

/// When the replica is promoted, if it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum RedisFailover {
    /// Right after the first claim of a run is answered (and its `WAIT`,
    /// if asked), before its owner works.
    AfterClaim,
}

/// What a failover did to the claim it followed, measured on the new
/// primary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FailoverSeen {
    /// Whether the new primary held the claim (`EXISTS`) once promoted.
    pub claim_kept: bool,
}

/// idem's own Redis: one node, or a primary and its replica.
pub struct Nodes {
    /// The node the requests write to.
    pub primary: Node,
    /// The replica, until a failover promotes it.
    replica: Option<Node>,
    /// With a replica: where it stands when a run starts, and the password
    /// every node of the pair asks.
    pair: Option<(ReplicaLink, String)>,
}

impl std::fmt::Debug for Nodes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nodes")
            .field("primary", &self.primary.server)
            .field("replica", &self.replica.as_ref().map(|r| &r.server))
            .field("link", &self.pair.as_ref().map(|(link, _)| link))
            .finish()
    }
}

impl Nodes {
    /// One node, or with `link` a primary and a replica standing so.
    pub async fn start(link: Option<ReplicaLink>) -> Result<Self> {
        let Some(link) = link else {
            let primary = redis_node::start(None).await?;
            return Ok(Self {
                primary,
                replica: None,
                pair: None,
            });
        };
        let password = uuid::Uuid::new_v4().simple().to_string();
        let settings = PairSettings {
            port: free_port()?,
            password: &password,
            replica_of: None,
        };
        let primary = redis_node::start(Some(&settings)).await?;
        let mut nodes = Self {
            primary,
            replica: None,
            pair: Some((link, password)),
        };
        nodes.ready().await?;
        Ok(nodes)
    }

    /// Before each run, with a replica: one in step with the primary (a
    /// new one if the last run's failover promoted the old), its link then
    /// cut if it is to stand behind.
    pub async fn ready(&mut self) -> Result<()> {
        let Some((link, password)) = &self.pair else {
            return Ok(());
        };
        if self.replica.is_none() {
            let settings = PairSettings {
                port: free_port()?,
                password,
                replica_of: self.primary.port,
            };
            self.replica = Some(redis_node::start(Some(&settings)).await?);
        }
        let replica = self.replica.as_mut().context("no replica")?;
        // The last run may have cut the link: mend it first.
        let mut auth = redis::cmd("CONFIG");
        auth.arg("SET").arg("masterauth").arg(password);
        bounded(
            auth.query_async::<()>(&mut replica.conn),
            "CONFIG SET masterauth",
        )
        .await?;
        link_is(&mut replica.conn, true).await?;
        acknowledging(&mut self.primary.conn).await?;
        if *link == ReplicaLink::Behind {
            cut(&mut self.primary.conn, &mut replica.conn).await?;
        }
        Ok(())
    }

    /// The failover: the primary killed (SIGKILL), the replica promoted,
    /// and whether it holds `claim`. The new primary's connection.
    pub async fn fail_over(
        &mut self,
        claim: &str,
    ) -> Result<(FailoverSeen, MultiplexedConnection)> {
        let Some(replica) = self.replica.as_mut() else {
            bail!("this Redis has no replica to promote");
        };
        crate::db::mariadb::server::kill_now(self.primary.server.pid());
        promote(&mut replica.conn).await?;
        let promoted = self.replica.take().expect("the replica checked above");
        let old = std::mem::replace(&mut self.primary, promoted);
        // Its supervisor removes its directory; waiting for it blocks.
        let _ = tokio::task::spawn_blocking(move || drop(old)).await;
        let mut conn = self.primary.conn.clone();
        let kept: bool = bounded(
            redis::cmd("EXISTS").arg(claim).query_async(&mut conn),
            "EXISTS",
        )
        .await?;
        Ok((FailoverSeen { claim_kept: kept }, conn))
    }

    /// A connection of its own to the primary (`WAIT` counts what the
    /// connection it is sent on wrote, and blocks it meanwhile).
    pub async fn dedicated(&self) -> Result<MultiplexedConnection> {
        let connecting = crate::db::redis_url::open(&self.primary.client);
        match tokio::time::timeout(crate::db::redis_url::COMMAND_LIMIT, connecting).await {
            Ok(conn) => Ok(conn?),
            Err(_) => bail!("Redis did not take a new connection within the time limit"),
        }
    }
}

/// One line of `INFO replication`, as `name:value` gives it.
async fn replication(conn: &mut MultiplexedConnection, name: &str) -> Result<String> {
    let text: String = bounded(
        redis::cmd("INFO").arg("replication").query_async(conn),
        "INFO replication",
    )
    .await?;
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .map(|value| value.trim().to_string())
        .with_context(|| format!("Redis's INFO replication has no {name}"))
}

/// Waits until `replica`'s link to its primary is `up` (or `down`).
pub async fn link_is(replica: &mut MultiplexedConnection, up: bool) -> Result<()> {
    let want = if up { "up" } else { "down" };
    let deadline = Instant::now() + LINK_TIMEOUT;
    loop {
        crate::db::child::check_stop()?;
        if replication(replica, "master_link_status").await? == want {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "Redis's replica did not have its link {want} within {} s",
                LINK_TIMEOUT.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits until the replica acknowledges a write: a `SET` of a key of its
/// own (one second to live), then `WAIT`. After a sync over the socket
/// (diskless) a primary lists its replica online at once but streams it
/// nothing until the replica's first acknowledgement, which comes once a
/// second: a claim's `WAIT` before then would hear no replica, however in
/// step it is.
async fn acknowledging(primary: &mut MultiplexedConnection) -> Result<()> {
    let probe = format!("idem:ready:{}", uuid::Uuid::new_v4().simple());
    let mut set = redis::cmd("SET");
    set.arg(&probe).arg(1).arg("PX").arg(1000);
    bounded(set.query_async::<()>(primary), "SET").await?;
    let heard = wait(primary, 1, FIRST_ACK_MS).await?;
    let _ = bounded(
        redis::cmd("DEL").arg(&probe).query_async::<u64>(primary),
        "DEL",
    )
    .await;
    if heard == 0 {
        bail!(
            "Redis's replica did not acknowledge a write within {} s",
            FIRST_ACK_MS / 1000
        );
    }
    Ok(())
}

/// Cuts the link between `primary` and `replica` and keeps it cut: the
/// replica's password for its primary made wrong, its connection closed,
/// then waited for until both sides see it gone.
pub async fn cut(
    primary: &mut MultiplexedConnection,
    replica: &mut MultiplexedConnection,
) -> Result<()> {
    let wrong = format!("cut-{}", uuid::Uuid::new_v4().simple());
    let mut auth = redis::cmd("CONFIG");
    auth.arg("SET").arg("masterauth").arg(wrong);
    bounded(auth.query_async::<()>(replica), "CONFIG SET masterauth").await?;
    let mut kill = redis::cmd("CLIENT");
    kill.arg("KILL").arg("TYPE").arg("replica");
    bounded(kill.query_async::<u64>(primary), "CLIENT KILL TYPE replica").await?;
    link_is(replica, false).await?;
    let deadline = Instant::now() + LINK_TIMEOUT;
    while replication(primary, "connected_slaves").await? != "0" {
        if Instant::now() > deadline {
            bail!("Redis's primary still listed its replica after the link was cut");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

/// `REPLICAOF NO ONE`: the replica takes writes as a primary of its own.
pub async fn promote(replica: &mut MultiplexedConnection) -> Result<()> {
    let mut cmd = redis::cmd("REPLICAOF");
    cmd.arg("NO").arg("ONE");
    bounded(cmd.query_async::<()>(replica), "REPLICAOF NO ONE").await
}

/// `WAIT replicas ms` on the connection that wrote: how many replicas
/// acknowledged every write it had sent.
pub async fn wait(conn: &mut MultiplexedConnection, replicas: u64, ms: u64) -> Result<u64> {
    let mut cmd = redis::cmd("WAIT");
    cmd.arg(replicas).arg(ms);
    bounded(cmd.query_async(conn), "WAIT").await
}
