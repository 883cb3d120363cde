//! One simulated request: who asks for how much XP, under which key.

use std::time::Duration;

use serde::Serialize;

/// A request one worker sends.
#[derive(Debug, Clone, Serialize)]
pub struct Request {
    /// The worker's number, from 1.
    pub worker: usize,
    /// The idempotency key the client sent.
    pub key: String,
    pub user_id: i64,
    pub amount: i32,
    /// How long the work takes (`--work-ms`).
    #[serde(skip)]
    pub work: Duration,
}

impl Request {
    /// The worker number as the database stores it.
    pub fn worker_id(&self) -> i32 {
        i32::try_from(self.worker).unwrap_or(i32::MAX)
    }
}
