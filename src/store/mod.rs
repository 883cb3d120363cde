//! Where the reservation lives (lesson 5): the key table or a Solid-Cache-like store, and what each keeps.

pub mod audit;
pub mod cache;
pub mod reap;

use serde::Serialize;

/// The stores a claim can live in, as `--store` spells them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StoreKind {
    /// The `idempotency_keys` table with its unique index.
    Table,
    /// The `cache_entries` table, used as Solid Cache is.
    Cache,
}

impl StoreKind {
    pub fn name(self) -> &'static str {
        match self {
            StoreKind::Table => "table",
            StoreKind::Cache => "cache",
        }
    }
}
