//! Lesson 5: where claim-work-complete keeps its claims, what the store remembers, and the cache traffic after the race.

use std::time::Duration;

use anyhow::Result;
use clap::Args;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::limits::{self, help_with_default as with_default};
use crate::store::StoreKind;
use crate::store::cache::CacheLimits;
use crate::strategy::redis_plan::{
    MaxmemoryPolicy, RedisClaim, RedisFailover, RedisPlan, RedisRelease, ReplicaLink,
};

/// Where claims live unless told otherwise.
pub const DEFAULT_STORE: StoreKind = StoreKind::Table;

/// The longest `--cache-max-age`: about a hundred years, far from where the
/// store's `now() - max_age` would leave PostgreSQL's timestamp range.
pub const MAX_CACHE_AGE: Duration = Duration::from_secs(5218 * 604_800);

/// `--store` and the cache store's limits.
#[derive(Debug, Clone, Default, Args, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreInput {
    #[arg(help_heading = "Lesson 5: where claims live")]
    #[arg(long, value_enum,
          help = with_default(
              "Where claim-work-complete keeps its claims: the key table, a \
               Solid-Cache-like store, or Redis (lesson 5).",
              DEFAULT_STORE.name()))]
    pub store: Option<StoreKind>,

    #[arg(help_heading = "Lesson 5: where claims live")]
    #[arg(long, value_name = "N", allow_negative_numbers = true,
          value_parser = limits::CACHE_MAX_ENTRIES.parser(),
          help = limits::CACHE_MAX_ENTRIES.help(
              "The cache store's entry limit; past it the oldest entries are evicted."))]
    pub cache_max_entries: Option<u64>,

    /// The cache store's age limit (e.g. 90s, 24h, 2w) [default: 2w].
    #[arg(help_heading = "Lesson 5: where claims live")]
    #[arg(long, value_name = "DURATION", value_parser = limits::duration, allow_hyphen_values = true)]
    #[serde(
        deserialize_with = "duration_text",
        serialize_with = "as_duration_text"
    )]
    pub cache_max_age: Option<Duration>,

    /// With --store redis: how the claim is set, `SET key value NX PX
    /// ttl`, or without NX, as a store that overwrites a claim instead of
    /// refusing it [default: nx].
    #[arg(help_heading = "Lesson 5: where claims live")]
    #[arg(long, value_enum, value_name = "HOW")]
    pub redis_claim: Option<RedisClaim>,

    #[arg(help_heading = "Lesson 5: where claims live")]
    #[arg(long, value_name = "MS", allow_negative_numbers = true,
          value_parser = limits::REDIS_TTL_MS.parser(),
          help = limits::REDIS_TTL_MS.help(
              "With --store redis: the claim's time to live (PX), after which Redis forgets \
               it whatever its owner is doing."))]
    pub redis_ttl_ms: Option<u64>,

    /// With --store redis: the claim also hands out a fencing token
    /// (`INCR`), and PostgreSQL writes the work's rows only while the key
    /// holds the newest token it was shown.
    #[arg(help_heading = "Lesson 5: where claims live")]
    #[arg(long)]
    pub redis_fence: bool,

    /// With --store redis and --redis-pressure: what Redis drops once its
    /// memory is full (its maxmemory-policy) [default: noeviction].
    #[arg(help_heading = "Lesson 5: where claims live")]
    #[arg(long, value_enum, value_name = "POLICY")]
    pub redis_eviction: Option<MaxmemoryPolicy>,

    #[arg(help_heading = "Lesson 5: where claims live")]
    #[arg(long, value_name = "MS", allow_negative_numbers = true,
          value_parser = limits::REDIS_HEARTBEAT_MS.parser(),
          help = "With --store redis: while it works, the owner renews its claim's time to \
                  live this often, in ms, by a script that renews only its own claim (PEXPIRE)")]
    pub redis_heartbeat_ms: Option<u64>,

    /// With --store redis and --fail-work: how the owner whose work failed
    /// lets its claim go, by a script that deletes it only while it is
    /// still the owner's, or by a plain DEL [default: owner-checked].
    #[arg(help_heading = "Lesson 5: where claims live")]
    #[arg(long, value_enum, value_name = "HOW")]
    pub redis_release: Option<RedisRelease>,

    #[arg(help_heading = "Lesson 5: where claims live")]
    #[arg(long, value_name = "N", allow_negative_numbers = true,
          value_parser = limits::REDIS_PRESSURE.parser(),
          help = limits::REDIS_PRESSURE.help(
              "With --store redis: while the first claim's owner works, write N other keys \
               (1 KiB each, no time to live) to a Redis left 1 MiB of room: is the claim \
               evicted?"))]
    pub redis_pressure: Option<u64>,

    /// With --store redis: start a replica beside idem's Redis, in step
    /// with it (each write sent as it is made) or behind it (its link cut
    /// before each run, so that it gets none of the run's writes).
    #[arg(help_heading = "Lesson 5: where claims live")]
    #[arg(long, value_enum, value_name = "WHERE")]
    pub redis_replica: Option<ReplicaLink>,

    /// With --redis-replica: right after the first claim (and its WAIT),
    /// kill the primary and promote the replica (REPLICAOF NO ONE); every
    /// command after it goes to the new primary.
    #[arg(help_heading = "Lesson 5: where claims live")]
    #[arg(long, value_enum, value_name = "WHEN")]
    pub redis_failover: Option<RedisFailover>,

    #[arg(help_heading = "Lesson 5: where claims live")]
    #[arg(long, value_name = "MS", allow_negative_numbers = true,
          value_parser = limits::REDIS_WAIT_MS.parser(),
          help = "With --redis-replica: after its claim the owner sends WAIT 1 MS, and works \
                  only if the replica acknowledged the claim; else it lets the claim go and \
                  answers 409")]
    pub redis_wait_ms: Option<u64>,

    /// With --store redis: a Redis of yours (redis://, rediss:// for TLS,
    /// redis+unix://) instead of one idem starts. idem touches only keys
    /// under the run's own prefix (idem:<hex>:), each with a time to live,
    /// and removes them when the run ends; it changes no setting there.
    /// Never read from a file.
    #[arg(help_heading = "Lesson 5: where claims live")]
    #[arg(long, value_name = "URL")]
    #[serde(skip)]
    pub redis_url: Option<String>,
}

/// What the race does to the store afterwards, and what it shows.
#[derive(Debug, Clone, Default, Args, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct EvictionInput {
    #[arg(help_heading = "Lesson 5: where claims live")]
    #[arg(long, value_name = "N", allow_negative_numbers = true,
          value_parser = limits::CACHE_PRESSURE.parser(),
          help = limits::CACHE_PRESSURE.help(
              "After the race, write N other keys to the cache, then retry the same \
               request: does its claim survive eviction?"))]
    pub cache_pressure: Option<u64>,

    /// After the race, show what each store can still tell about the key.
    #[arg(help_heading = "Lesson 5: where claims live")]
    #[arg(long)]
    #[serde(skip)]
    pub audit: bool,
}

/// A duration written as text in a file: `cache_max_age = "2w"`.
fn duration_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let text = String::deserialize(d)?;
    limits::duration(&text)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

/// A duration as a file may write it, in milliseconds: `"90000ms"`.
fn as_duration_text<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&format!("{}ms", d.as_millis())),
        None => s.serialize_none(),
    }
}

/// Where claim-work-complete keeps its claims, and the cache traffic
/// after the race.
#[derive(Debug, Clone, Copy)]
pub struct Store {
    kind: StoreKind,
    cache: CacheLimits,
    /// After the race: this many writes of other keys to the cache, then
    /// one retry of the same request (lesson 5's eviction demonstration).
    cache_pressure: u64,
    /// With `--store redis`: how the claims are set and pressed on.
    redis: RedisPlan,
}

impl StoreInput {
    /// `--redis-url`, read.
    pub(super) fn redis_url(&self) -> Result<Option<crate::db::redis_url::RedisUrl>> {
        self.redis_url
            .as_deref()
            .map(crate::db::redis_url::RedisUrl::parse)
            .transpose()
    }

    /// The store, with the eviction after the race.
    pub(super) fn resolve(&self, eviction: &EvictionInput) -> Store {
        Store {
            kind: self.store.unwrap_or(DEFAULT_STORE),
            cache: CacheLimits {
                max_entries: self
                    .cache_max_entries
                    .unwrap_or(limits::CACHE_MAX_ENTRIES.default()),
                max_age: self.cache_max_age.unwrap_or(CacheLimits::default().max_age),
            },
            cache_pressure: eviction
                .cache_pressure
                .unwrap_or(limits::CACHE_PRESSURE.default()),
            redis: RedisPlan {
                claim: self.redis_claim.unwrap_or_default(),
                ttl_ms: self.redis_ttl_ms.unwrap_or(limits::REDIS_TTL_MS.default()),
                fence: self.redis_fence,
                eviction: self.redis_eviction.unwrap_or_default(),
                pressure: self
                    .redis_pressure
                    .unwrap_or(limits::REDIS_PRESSURE.default()),
                release: self.redis_release.unwrap_or_default(),
                heartbeat_ms: self.redis_heartbeat_ms,
                replica: self.redis_replica,
                failover: self.redis_failover,
                wait_ms: self.redis_wait_ms,
            },
        }
    }
}

impl Store {
    /// With `--store redis`: how the claims are set and pressed on.
    pub fn redis(&self) -> RedisPlan {
        self.redis
    }

    /// Where the claims live.
    pub fn kind(&self) -> StoreKind {
        self.kind
    }

    /// The cache store's limits.
    pub fn cache(&self) -> CacheLimits {
        self.cache
    }

    /// How many other keys are written to the cache after the race.
    pub fn cache_pressure(&self) -> u64 {
        self.cache_pressure
    }
}
