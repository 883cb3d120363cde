//! The guard shapes the course compares, one file each behind one trait, each described by one spec.
//!
//! Every strategy handles one request on one pooled connection and reports
//! the same step names ([`Step`]), so that their traces line up side by side.

mod advisory_lock;
pub mod answers;
mod check_then_store;
mod claim_in_cache;
pub mod claim_in_redis;
mod claim_work_complete;
pub mod claims;
mod find_for_update;
pub mod fingerprint;
pub mod guard;
pub mod guard_file;
mod insert_unique;
pub mod loser;
mod memory;
mod none;
pub mod orm;
mod redis_fence;
pub mod redis_plan;
mod registry;
mod respond;
pub mod spec;
pub mod transaction;
pub mod work;

use std::future::Future;
use std::pin::Pin;

use crate::db::pool::Workers;
pub use crate::request::Step;
use crate::request::{Answer, Failure, Lease, Request, Trace};

pub use claim_in_cache::ClaimInCache;
pub use claim_in_cache::on_mariadb as cache_on_mariadb;
pub use loser::{LoserKind, LoserPolicy};
pub use registry::StrategyKind;
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

    /// Opens what the strategy needs beside the requests' pool before the
    /// first request (the guard's heartbeat connection); most need nothing.
    fn start<'a>(&'a self, _workers: &'a Workers) -> Starting<'a> {
        Box::pin(async { Ok(()) })
    }
}

/// What [`Strategy::start`] returns.
pub type Starting<'a> = Pin<Box<dyn Future<Output = anyhow::Result<()>> + Send + 'a>>;
