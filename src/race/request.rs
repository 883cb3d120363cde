//! One simulated request: what it asks for, under which key, and its fingerprint.

use std::time::Duration;

use serde::Serialize;

use crate::strategy::fingerprint::Params;

/// A request one worker sends.
#[derive(Debug, Clone, Serialize)]
pub struct Request {
    /// The worker's number, from 1.
    pub worker: usize,
    /// The idempotency key the client sent.
    pub key: String,
    /// What it asks for.
    pub params: Params,
    /// The fingerprint of `params`; `None` when the guard does not check
    /// fingerprints (`--no-fingerprint`).
    pub fingerprint: Option<String>,
    /// How long the work takes (`--work-ms`).
    #[serde(skip)]
    pub work: Duration,
    /// The work fails (the service errors) for this request (`--fail-work`).
    pub work_fails: bool,
}

impl Request {
    /// A request for `params` under `key`, fingerprinted unless `fingerprint` is false.
    pub fn new(
        worker: usize,
        key: String,
        params: Params,
        fingerprint: bool,
        work: Duration,
    ) -> Self {
        let fingerprint = fingerprint.then(|| params.fingerprint());
        Self {
            worker,
            key,
            params,
            fingerprint,
            work,
            work_fails: false,
        }
    }

    /// The worker number as the database stores it.
    pub fn worker_id(&self) -> i32 {
        i32::try_from(self.worker).unwrap_or(i32::MAX)
    }
}
