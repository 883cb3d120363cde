//! The award service's own record of its calls: kept in idem, where no transaction of a request can roll it back.
//!
//! A database rollback undoes a request's rows, not the call its work made
//! to a service (an email sent, a card charged). Every time a request's
//! work runs, the call is counted here, so a race reports the times the
//! work ran beside the XP rows that were committed.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Calls of the award service, shared by every request that counts into it.
#[derive(Debug, Clone, Default)]
pub struct ServiceCalls(Arc<AtomicU64>);

impl ServiceCalls {
    /// One call made.
    pub fn record(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }

    /// The calls so far.
    pub fn count(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}
