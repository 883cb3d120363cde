//! What watches a strategy that knows nothing of its watcher: each step as it runs, and what it found.
//!
//! The guard is a library ([`crate::guard`]) that runs in someone's own
//! service with no one watching ([`Unobserved`]). The race harness watches
//! through its [`Trace`]: it times each step, counts the statements, pauses
//! a worker before its step when a race goes step by step, and strikes the
//! faults it planned. The guard's code is the same either way.

use std::future::Future;

use super::{Step, Trace};

/// Watches the steps of one request.
pub trait Observer: Send {
    /// Runs `fut`, the statement `sql` (or the work) of `step`.
    fn step<F>(
        &mut self,
        step: Step,
        sql: &'static str,
        fut: F,
    ) -> impl Future<Output = F::Output> + Send
    where
        F: Future + Send,
        F::Output: Send;

    /// What the last step found or did, in a few words.
    fn note(&mut self, note: &str);

    /// A statement sent outside any step (`BEGIN`, `COMMIT`, `ROLLBACK`).
    fn sent(&mut self) {}

    /// The work succeeded with this response body (the harness notes the XP row).
    fn worked(&mut self, _body: &serde_json::Value) {}
}

/// No one watching: the steps just run.
#[derive(Debug, Clone, Copy, Default)]
pub struct Unobserved;

impl Observer for Unobserved {
    async fn step<F>(&mut self, _step: Step, _sql: &'static str, fut: F) -> F::Output
    where
        F: Future + Send,
        F::Output: Send,
    {
        fut.await
    }

    fn note(&mut self, _note: &str) {}
}

impl Observer for Trace {
    async fn step<F>(&mut self, step: Step, sql: &'static str, fut: F) -> F::Output
    where
        F: Future + Send,
        F::Output: Send,
    {
        self.query(step, sql, fut).await
    }

    fn note(&mut self, note: &str) {
        Trace::note(self, note);
    }

    fn sent(&mut self) {
        self.queries += 1;
    }

    fn worked(&mut self, body: &serde_json::Value) {
        if let Some(xp) = body.get("xp_id").and_then(serde_json::Value::as_i64) {
            Trace::note(self, format!("made XP #{xp}"));
        }
    }
}
