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

use super::ledger::Ledger;

/// Calls of the award service, shared by every request that counts into
/// it; each request's handle can be silenced on its own.
#[derive(Debug, Clone)]
pub struct ServiceCalls {
    calls: Arc<AtomicU64>,
    /// False once this handle's request has crashed.
    alive: Arc<AtomicBool>,
    /// True once a call of this handle's request could not be written to
    /// the ledger: its answer must not pretend the call was recorded.
    unwritten: Arc<AtomicBool>,
    /// Where the service also writes each call, for a query to count.
    ledger: Option<Ledger>,
}

impl Default for ServiceCalls {
    fn default() -> Self {
        Self {
            calls: Arc::default(),
            alive: Arc::new(AtomicBool::new(true)),
            unwritten: Arc::default(),
            ledger: None,
        }
    }
}

impl ServiceCalls {
    /// A handle for one more request, counting into the same calls.
    pub fn for_request(&self) -> Self {
        Self {
            calls: self.calls.clone(),
            alive: Arc::new(AtomicBool::new(true)),
            unwritten: Arc::default(),
            ledger: self.ledger.clone(),
        }
    }

    /// Writes every call to `ledger` too.
    pub fn with_ledger(self, ledger: Ledger) -> Self {
        Self {
            ledger: Some(ledger),
            ..self
        }
    }

    /// The ledger the calls are written to, if any.
    pub fn ledger(&self) -> Option<&Ledger> {
        self.ledger.as_ref()
    }

    /// One call made under `key` by `worker`, unless this request has
    /// crashed: counted, and written to the ledger if there is one.
    pub async fn call(&self, key: &str, worker: usize) {
        if !self.alive.load(Ordering::SeqCst) {
            return;
        }
        self.calls.fetch_add(1, Ordering::SeqCst);
        if let Some(ledger) = &self.ledger
            && ledger.write(key, worker).await.is_err()
        {
            self.unwritten.store(true, Ordering::SeqCst);
        }
    }

    /// Whether a call of this request's could not be written to the ledger.
    pub fn unwritten(&self) -> bool {
        self.unwritten.load(Ordering::SeqCst)
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
