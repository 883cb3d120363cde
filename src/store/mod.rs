//! Where the reservation lives (lesson 5): the key table or a Solid-Cache-like store, and what each keeps.

pub mod audit;
pub mod cache;
pub mod reap;

use serde::Serialize;

/// Where a claim stands, in either store: taken and being worked on, or
/// done with its response stored. The key table's `status` column and the
/// cache entry's value spell it `pending` / `completed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClaimStatus {
    Pending,
    Completed,
}

impl ClaimStatus {
    pub fn name(self) -> &'static str {
        match self {
            ClaimStatus::Pending => "pending",
            ClaimStatus::Completed => "completed",
        }
    }

    /// The status a stored value spells; the table's CHECK constraint
    /// allows no other, so anything else reads as still pending.
    pub fn parse(stored: &str) -> Self {
        match stored {
            "completed" => ClaimStatus::Completed,
            _ => ClaimStatus::Pending,
        }
    }
}

/// The stores a claim can live in, as `--store` spells them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StoreKind {
    /// The `idempotency_keys` table with its unique index.
    Table,
    /// The `cache_entries` table, used as Solid Cache is.
    Cache,
    /// A Redis key, `SET NX PX`, on a disposable `redis-server` of idem's.
    Redis,
}

impl StoreKind {
    pub fn name(self) -> &'static str {
        match self {
            StoreKind::Table => "table",
            StoreKind::Cache => "cache",
            StoreKind::Redis => "redis",
        }
    }
}
