//! The disposable Redis idem starts for `--store redis`: a `redis-server` of the run's own on a Unix socket in a private directory, no TCP port, nothing written to disk, removed however the run ends.
//!
//! It runs under the same supervisor as idem's PostgreSQL and MariaDB (see
//! [`crate::db::supervised`]): when idem ends, in any way, `kill -9`
//! included, the supervisor kills the server and removes its directory;
//! a directory whose run is gone is swept by the next run. When idem runs
//! as root, the server runs as the `redis` user its package makes.
//!
//! The client is the `redis` crate, the one the Redis project lists for
//! Rust and the most used: its multiplexed async connection over the
//! socket serves every request of a race at once, and each command is
//! sent with a time limit of idem's.

use std::sync::{Arc, RwLock};

use anyhow::{Context, Result, bail};
use redis::aio::MultiplexedConnection;

pub use crate::db::redis_node::locate;
use crate::db::redis_replica::{self as replica, Nodes};
pub use crate::db::redis_replica::{FailoverSeen, RedisFailover, ReplicaLink};
pub use crate::db::redis_url::{RedisUrl, bounded};

/// The room a race with cache traffic (`--redis-pressure`) leaves above
/// what the server holds when the race starts.
const PRESSURE_ROOM: u64 = 1 << 20;

/// The size of each other key the cache traffic writes.
const OTHER_KEY_BYTES: usize = 1024;

/// How many of those keys go in one round trip.
const PIPELINE: u64 = 256;

/// What Redis drops once it holds `maxmemory` (its `maxmemory-policy`),
/// as Redis spells each.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    clap::ValueEnum,
)]
pub enum MaxmemoryPolicy {
    /// Drop nothing: a write that needs more memory is refused (OOM).
    #[default]
    #[value(name = "noeviction")]
    #[serde(rename = "noeviction")]
    NoEviction,
    /// Drop the least recently used key, whatever it is.
    #[value(name = "allkeys-lru")]
    #[serde(rename = "allkeys-lru")]
    AllkeysLru,
    /// Drop the least recently used key among those with a time to live,
    /// which every claim has.
    #[value(name = "volatile-lru")]
    #[serde(rename = "volatile-lru")]
    VolatileLru,
}

impl MaxmemoryPolicy {
    /// The policy as `CONFIG SET maxmemory-policy` takes it.
    pub fn name(self) -> &'static str {
        match self {
            MaxmemoryPolicy::NoEviction => "noeviction",
            MaxmemoryPolicy::AllkeysLru => "allkeys-lru",
            MaxmemoryPolicy::VolatileLru => "volatile-lru",
        }
    }
}

/// What the cache traffic did to a run's claim, measured in Redis.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PressureSeen {
    /// Other keys written while the claim's owner worked.
    pub written: u64,
    /// Writes Redis refused for want of memory (`noeviction`).
    pub refused: u64,
    /// Keys Redis evicted meanwhile (`INFO stats`, `evicted_keys`).
    pub evicted: u64,
    /// Whether the claim was still there once the traffic had passed.
    pub claim_kept: bool,
}

/// A running Redis and a connection to it: idem's own, killed and removed
/// when this is dropped, or a user's, whose run keys are removed then.
pub struct Redis {
    /// The connection every request of a race shares (multiplexed), to
    /// the primary: after a failover, the new one's.
    conn: RwLock<MultiplexedConnection>,
    /// Every key of this run starts with it: `idem:<8 hex digits>:`.
    pub prefix: String,
    /// Bumped for each race of the run: each race's keys are new ones,
    /// `<prefix><race>:...`.
    race: std::sync::atomic::AtomicU64,
    server: Server,
}

/// Whose Redis it is.
enum Server {
    /// idem's own, killed and removed when the run ends: one node, or a
    /// primary and its replica.
    Own(Box<tokio::sync::Mutex<Nodes>>),
    /// A user's (`--redis-url`): the run's keys are removed when it ends.
    User(Box<RedisUrl>),
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Server::Own(nodes) => nodes.fmt(f),
            Server::User(url) => url.fmt(f),
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let Server::User(url) = &self.server else {
            return;
        };
        // A blocking cleanup, bounded in time: the run is over, and its
        // keys must go before idem exits.
        if let Err(err) = url.remove_prefix(&self.prefix) {
            eprintln!(
                "idem: warning: could not remove the run's keys under {} from Redis at {} ({}); \
                 each expires on its own within a day",
                self.prefix,
                url.shown(),
                crate::controls::escaped(&crate::db::secret::scrub(&err.to_string()))
            );
        }
    }
}

impl std::fmt::Debug for Redis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redis")
            .field("prefix", &self.prefix)
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl Redis {
    /// Starts idem's own server, with a replica standing as `replica`
    /// says if it says, and connects to it.
    pub async fn start(replica: Option<ReplicaLink>) -> Result<Self> {
        let nodes = Nodes::start(replica).await?;
        Ok(Self {
            conn: RwLock::new(nodes.primary.conn.clone()),
            prefix: format!("idem:{}:", nodes.primary.hex()),
            race: Default::default(),
            server: Server::Own(Box::new(tokio::sync::Mutex::new(nodes))),
        })
    }

    /// A user's Redis: every key under a prefix drawn for this run.
    pub async fn reach(url: &RedisUrl) -> Result<Self> {
        let conn = url.connect().await?;
        let hex = uuid::Uuid::new_v4().simple().to_string();
        Ok(Self {
            conn: RwLock::new(conn),
            prefix: format!("idem:{}:", &hex[..8]),
            race: Default::default(),
            server: Server::User(Box::new(url.clone())),
        })
    }

    /// The shared connection to the primary.
    pub fn conn(&self) -> MultiplexedConnection {
        self.conn.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The prefix of the current race's keys.
    pub fn race_prefix(&self) -> String {
        let race = self.race.load(std::sync::atomic::Ordering::SeqCst);
        format!("{}{race}:", self.prefix)
    }

    /// Moves on to the next race's keys.
    pub fn next_race(&self) {
        self.race.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether this is idem's own server, whose settings it may change.
    pub fn is_own(&self) -> bool {
        matches!(self.server, Server::Own(_))
    }
}

impl Redis {
    /// Before each run: the replica, if there is one, as it should stand.
    pub async fn ready(&self) -> Result<()> {
        match &self.server {
            Server::Own(nodes) => nodes.lock().await.ready().await,
            Server::User(_) => Ok(()),
        }
    }

    /// A connection of its own to the primary, for a claim and its `WAIT`.
    pub async fn dedicated(&self) -> Result<MultiplexedConnection> {
        match &self.server {
            Server::Own(nodes) => nodes.lock().await.dedicated().await,
            Server::User(url) => url.connect().await,
        }
    }

    /// `WAIT 1 ms` on `conn`: whether the replica acknowledged what `conn`
    /// wrote (0 or 1).
    pub async fn wait_for_replica(&self, conn: &mut MultiplexedConnection, ms: u64) -> Result<u64> {
        replica::wait(conn, 1, ms).await
    }

    /// The failover (only ever of idem's own pair): the primary killed, the
    /// replica promoted; the requests' commands go to it from now on. It
    /// runs on a task of its own, so that the request that asked for it,
    /// dropped at any await, cannot stop it between the kill and the
    /// promotion and leave no primary at all.
    pub async fn fail_over(self: &Arc<Self>, claim: &str) -> Result<FailoverSeen> {
        let (this, claim) = (self.clone(), claim.to_string());
        let failing_over = tokio::spawn(async move {
            let Server::Own(nodes) = &this.server else {
                bail!("idem fails over no Redis it did not start");
            };
            let mut nodes = nodes.lock().await;
            let (seen, conn) = nodes.fail_over(&claim).await?;
            *this.conn.write().unwrap_or_else(|e| e.into_inner()) = conn;
            Ok(seen)
        });
        failing_over
            .await
            .map_err(|e| anyhow::anyhow!("the failover's task ended: {e}"))?
    }
}

impl Redis {
    /// Leaves [`PRESSURE_ROOM`] above what the server holds now, and tells
    /// it what to drop once that is full. Only ever on idem's own server.
    pub async fn limit_memory(&self, eviction: MaxmemoryPolicy) -> Result<()> {
        if !self.is_own() {
            bail!("idem changes no setting of a Redis it did not start");
        }
        let mut conn = self.conn();
        let used = info_number(&mut conn, "memory", "used_memory").await?;
        let config = |name: &str, value: String| {
            let mut cmd = redis::cmd("CONFIG");
            cmd.arg("SET").arg(name).arg(value);
            cmd
        };
        let room = config("maxmemory", (used + PRESSURE_ROOM).to_string());
        bounded(room.query_async::<()>(&mut conn), "CONFIG SET maxmemory").await?;
        let policy = config("maxmemory-policy", eviction.name().to_string());
        bounded(
            policy.query_async::<()>(&mut conn),
            "CONFIG SET maxmemory-policy",
        )
        .await
    }

    /// Other cache traffic while a claim is held: `n` keys of 1 KiB under
    /// `tag`, with no time to live. Then whether `claim` is still there, and
    /// the keys removed again (`DEL` is taken even when memory is full).
    pub async fn press(&self, tag: &str, n: u64, claim: &str) -> Result<PressureSeen> {
        if !self.is_own() {
            bail!("idem fills no Redis it did not start");
        }
        let mut conn = self.conn();
        let evicted_before = info_number(&mut conn, "stats", "evicted_keys").await?;
        let value = "x".repeat(OTHER_KEY_BYTES);
        let mut refused = 0;
        for first in (0..n).step_by(PIPELINE as usize) {
            let mut pipe = redis::pipe();
            pipe.ignore_errors();
            for i in first..n.min(first + PIPELINE) {
                pipe.cmd("SET").arg(format!("{tag}{i}")).arg(&value);
            }
            let said: Vec<redis::RedisResult<redis::Value>> =
                bounded(pipe.query_async(&mut conn), "SET").await?;
            for result in said {
                match result {
                    Err(err) if err.code() == Some("OOM") => refused += 1,
                    Err(err) => bail!(
                        "Redis refused SET: {}",
                        crate::controls::escaped(&err.to_string())
                    ),
                    Ok(_) => {}
                }
            }
        }
        let kept: bool = bounded(
            redis::cmd("EXISTS").arg(claim).query_async(&mut conn),
            "EXISTS",
        )
        .await?;
        let evicted = info_number(&mut conn, "stats", "evicted_keys")
            .await?
            .saturating_sub(evicted_before);
        for first in (0..n).step_by(PIPELINE as usize) {
            let mut del = redis::cmd("DEL");
            for i in first..n.min(first + PIPELINE) {
                del.arg(format!("{tag}{i}"));
            }
            bounded(del.query_async::<u64>(&mut conn), "DEL").await?;
        }
        Ok(PressureSeen {
            written: n - refused,
            refused,
            evicted,
            claim_kept: kept,
        })
    }
}

impl Redis {
    /// The stepped race's clock on Redis: every pending claim of the
    /// current race whose time to live has not run out yet. With `age`, each is given
    /// `PEXPIRE key 0`, which is its time to live running out now (Redis
    /// deletes a key whose expiry is not in the future). How many.
    pub async fn age_claims(&self, age: bool) -> Result<u64> {
        let mut conn = self.conn();
        let pattern = format!("{}*", self.race_prefix());
        let (mut cursor, mut aged) = (0u64, 0u64);
        loop {
            let mut scan = redis::cmd("SCAN");
            scan.arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000);
            let (next, keys): (u64, Vec<String>) =
                bounded(scan.query_async(&mut conn), "SCAN").await?;
            for key in keys {
                let held: Option<String> =
                    bounded(redis::cmd("GET").arg(&key).query_async(&mut conn), "GET")
                        .await
                        .unwrap_or(None);
                if !held.is_some_and(|v| v.contains("\"status\":\"pending\"")) {
                    continue;
                }
                aged += 1;
                if age {
                    let mut expire = redis::cmd("PEXPIRE");
                    expire.arg(&key).arg(0);
                    bounded(expire.query_async::<i64>(&mut conn), "PEXPIRE").await?;
                }
            }
            if next == 0 {
                return Ok(aged);
            }
            cursor = next;
        }
    }
}

/// One number from a section of `INFO`, as `name:value` lines give it.
async fn info_number(conn: &mut MultiplexedConnection, section: &str, name: &str) -> Result<u64> {
    let text: String = bounded(redis::cmd("INFO").arg(section).query_async(conn), "INFO").await?;
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|value| value.trim().parse().ok())
        .with_context(|| format!("Redis's INFO {section} has no {name}"))
}
