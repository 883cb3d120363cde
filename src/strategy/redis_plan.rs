//! How a race sets its claims in Redis (`--redis-*`), and what it measured there: one struct the options build, the strategy follows and `--json` shows.

use serde::{Deserialize, Serialize};

pub use crate::db::redis_server::{
    FailoverSeen, MaxmemoryPolicy, PressureSeen, RedisFailover, ReplicaLink,
};

/// How an owner whose work failed lets its claim go, so that a retry may
/// work again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum RedisRelease {
    /// A script that deletes the key only while it still holds this
    /// owner's claim (compare, then delete, in one step).
    #[default]
    OwnerChecked,
    /// `DEL key`, whoever holds it now.
    Del,
}

impl RedisRelease {
    /// The release as the trace shows it.
    pub fn shown(self) -> &'static str {
        match self {
            RedisRelease::OwnerChecked => "if GET key = my claim then DEL key (one script)",
            RedisRelease::Del => "DEL key",
        }
    }
}

/// How the claim is set: as it should be, or as a store that overwrites.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum RedisClaim {
    /// `SET key value NX PX ttl`: set only when the key is not there.
    #[default]
    Nx,
    /// `SET key value PX ttl`: set whatever is there (every request wins).
    Overwrite,
}

impl RedisClaim {
    /// The claim as the trace shows it.
    pub fn shown(self) -> &'static str {
        match self {
            RedisClaim::Nx => "SET key pending NX PX ttl",
            RedisClaim::Overwrite => "SET key pending PX ttl",
        }
    }
}

/// Everything `--store redis` is told about its claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RedisPlan {
    /// `nx` or `overwrite`.
    pub claim: RedisClaim,
    /// The claim's time to live (`PX`), in milliseconds.
    pub ttl_ms: u64,
    /// Whether the claim hands out a fencing token that PostgreSQL checks
    /// before the work's rows go in.
    pub fence: bool,
    /// What Redis drops once full, with `pressure`.
    pub eviction: MaxmemoryPolicy,
    /// Other keys (1 KiB each, no time to live) written while the first
    /// claim's owner works, into a Redis with 1 MiB to spare.
    pub pressure: u64,
    /// How an owner whose work failed (`--fail-work`) lets its claim go.
    pub release: RedisRelease,
    /// While it works, the owner renews its claim's time to live this
    /// often (ms), by a script that renews it only while it is its own.
    pub heartbeat_ms: Option<u64>,
    /// A replica beside idem's Redis, and where it stands when a run
    /// starts: in step, or behind (its link cut).
    pub replica: Option<ReplicaLink>,
    /// When the replica is promoted and the primary killed.
    pub failover: Option<RedisFailover>,
    /// After its claim, the owner asks `WAIT 1 ms` and works only if the
    /// replica acknowledged the claim.
    pub wait_ms: Option<u64>,
}

impl Default for RedisPlan {
    fn default() -> Self {
        Self {
            claim: RedisClaim::default(),
            ttl_ms: crate::limits::REDIS_TTL_MS.default(),
            fence: false,
            eviction: MaxmemoryPolicy::default(),
            pressure: crate::limits::REDIS_PRESSURE.default(),
            release: RedisRelease::default(),
            heartbeat_ms: None,
            replica: None,
            failover: None,
            wait_ms: None,
        }
    }
}

impl RedisPlan {
    /// The claim's time to live.
    pub fn ttl(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.ttl_ms)
    }
}

/// `--store redis` in a race's result: how the claims were set, and what
/// the cache traffic did to them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RedisFigures {
    #[serde(flatten)]
    pub plan: RedisPlan,
    /// With `pressure`: what it did in this run; `null` if no claim was
    /// set for it to press on.
    pub pressed: Option<PressureSeen>,
    /// With `wait_ms`: how many replicas acknowledged the run's first
    /// claim (`WAIT`'s answer).
    pub acknowledged: Option<u64>,
    /// With `failover`: what it did to the claim it followed; `null` if no
    /// claim was won for it to follow.
    pub failed_over: Option<FailoverSeen>,
}
