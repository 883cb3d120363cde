//! The guard shapes the course compares, one file each behind one trait.
//!
//! Every strategy handles one request on one pooled connection and reports
//! the same step names ([`Step`]), so that their traces line up side by side.

pub mod answers;
mod check_then_store;
mod claim_in_cache;
mod claim_work_complete;
pub mod claims;
pub mod fingerprint;
pub mod guard;
mod insert_unique;
pub mod loser;
mod memory;
mod none;
pub mod orm;
mod respond;
pub mod transaction;
pub mod work;

use std::future::Future;
use std::pin::Pin;

use serde::Serialize;

pub use crate::request::Step;
use crate::request::{Answer, Failure, Lease, Request, Trace};

pub use check_then_store::{CheckThenStore, FindLock};
pub use claim_in_cache::ClaimInCache;
pub use claim_work_complete::ClaimWorkComplete;
pub use insert_unique::InsertUnique;
pub use loser::{LoserKind, LoserPolicy};
pub use memory::Memory;
pub use none::NoGuard;
pub use respond::respond;

/// The operation every request performs; stored beside each key.
pub const OPERATION: &str = "award_xp";

/// What a strategy's `handle` returns: the answer, or a database error.
pub type Handled<'a> = Pin<Box<dyn Future<Output = Result<Answer, Failure>> + Send + 'a>>;

/// One guard shape.
pub trait Strategy: Send + Sync {
    /// Handles one request. The worker already holds a connection in
    /// `lease`; a strategy may give it back while it waits and take one
    /// again. Every step it takes is recorded in `trace`.
    fn handle<'a>(
        &'a self,
        lease: &'a mut Lease,
        req: &'a Request,
        trace: &'a mut Trace,
    ) -> Handled<'a>;

    /// Forgets what the strategy keeps outside the database, when the race
    /// empties the tables for its next run (the memory guard's map).
    fn forget(&self) {}
}

/// The strategies by name, as `--strategy` spells them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StrategyKind {
    /// The work with no key at all.
    None,
    /// Find the key; if missing, do the work, then store the key (lesson 1).
    CheckThenStore,
    /// Claim the key as pending, do the work, complete the claim (lesson 2).
    ClaimWorkComplete,
    /// The work is one INSERT ... ON CONFLICT DO NOTHING on the XP table.
    InsertUnique,
    /// The whole guard: claim-work-complete with stale-claim takeover,
    /// rescue of failed work and retry of transient failures (lesson 7).
    Guard,
    /// Check-then-store whose find is `SELECT ... FOR UPDATE`, in the
    /// request's transaction (lesson 8).
    FindForUpdate,
    /// Check-then-store behind `pg_advisory_xact_lock` on the key, in the
    /// request's transaction (lesson 8).
    AdvisoryLock,
    /// The claim in the process's memory, a map behind a mutex, as
    /// in-memory middleware keeps it: it holds on one app process only.
    Memory,
}

impl StrategyKind {
    /// The five shapes of the course, the ones `compare` puts side by side.
    pub const COURSE: [StrategyKind; 5] = [
        StrategyKind::None,
        StrategyKind::CheckThenStore,
        StrategyKind::ClaimWorkComplete,
        StrategyKind::InsertUnique,
        StrategyKind::Guard,
    ];

    /// The name as the flag spells it.
    pub fn name(self) -> &'static str {
        match self {
            StrategyKind::None => "none",
            StrategyKind::CheckThenStore => "check-then-store",
            StrategyKind::ClaimWorkComplete => "claim-work-complete",
            StrategyKind::InsertUnique => "insert-unique",
            StrategyKind::Guard => "guard",
            StrategyKind::FindForUpdate => "find-for-update",
            StrategyKind::AdvisoryLock => "advisory-lock",
            StrategyKind::Memory => "memory",
        }
    }

    /// Whether a request can lose a claim and have to wait for the winner.
    pub fn has_losers(self) -> bool {
        matches!(self, StrategyKind::ClaimWorkComplete)
    }

    /// Whether the strategy keeps its keys in `idempotency_keys`.
    pub fn uses_key_table(self) -> bool {
        matches!(
            self,
            StrategyKind::CheckThenStore
                | StrategyKind::ClaimWorkComplete
                | StrategyKind::Guard
                | StrategyKind::FindForUpdate
                | StrategyKind::AdvisoryLock
        )
    }

    /// Whether the strategy's lock only means something inside the
    /// request's transaction, which it then takes by default.
    pub fn needs_transaction(self) -> bool {
        matches!(
            self,
            StrategyKind::FindForUpdate | StrategyKind::AdvisoryLock
        )
    }
}

impl std::fmt::Display for StrategyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
