//! The award service's own record of its calls: kept in idem, where no transaction of a request can roll it back.
//!
//! A database rollback undoes a request's rows, not the call its work made
//! to a service (an email sent, a card charged). Every time a request's
//! work runs, the call is counted here, so a race reports the times the
//! work ran beside the XP rows that were committed. A worker that crashed
//! on purpose calls nothing more: its process is gone, even though idem's
//! code for it still runs to its end.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Calls of the award service, shared by every request that counts into
/// it; each request's handle can be silenced on its own.
#[derive(Debug, Clone)]
pub struct ServiceCalls {
    calls: Arc<AtomicU64>,
    /// False once this handle's request has crashed.
    alive: Arc<AtomicBool>,
}

impl Default for ServiceCalls {
    fn default() -> Self {
        Self {
            calls: Arc::default(),
            alive: Arc::new(AtomicBool::new(true)),
        }
    }
}

impl ServiceCalls {
    /// A handle for one more request, counting into the same calls.
    pub fn for_request(&self) -> Self {
        Self {
            calls: self.calls.clone(),
            alive: Arc::new(AtomicBool::new(true)),
        }
    }

    /// One call made, unless this request has crashed.
    pub fn record(&self) {
        if self.alive.load(Ordering::SeqCst) {
            self.calls.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// This request crashed: whatever its code still does calls nothing.
    pub fn silence(&self) {
        self.alive.store(false, Ordering::SeqCst);
    }

    /// The calls so far.
    pub fn count(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }
}
