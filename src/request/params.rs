//! One request: what it asks for (its parameters), under which key, and its fingerprint.

use std::time::Duration;

use serde::Serialize;
use sha2::{Digest, Sha256};

/// The longest key accepted (in characters), as Stripe allows; the same
/// limit holds for `--key` and for the `Idempotency-Key` header.
pub const MAX_KEY_LEN: usize = 255;

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
    /// Where the award service counts this request's calls; `None` counts
    /// nothing (a benchmark's requests).
    #[serde(skip)]
    pub service: Option<super::service::ServiceCalls>,
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
            service: None,
        }
    }

    /// The worker number as the database stores it.
    pub fn worker_id(&self) -> i32 {
        i32::try_from(self.worker).unwrap_or(i32::MAX)
    }
}

/// What a request asks for. The fields are in a fixed order, so their
/// encoding, and so the fingerprint, is the same wherever it is made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Params {
    pub operation: &'static str,
    pub user_id: i64,
    pub amount: i32,
    pub lesson: i32,
}

impl Params {
    /// The canonical encoding: JSON with the fields in declaration order.
    pub fn canonical(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// SHA-256 of the canonical encoding, in hex.
    pub fn fingerprint(&self) -> String {
        sha256_hex(self.canonical().as_bytes())
    }

    /// A fingerprint that also covers the request's query string: the
    /// same body under `?dry_run=1` is another request.
    pub fn fingerprint_with_query(fingerprint: &str, query: &str) -> String {
        sha256_hex(format!("{fingerprint}?{query}").as_bytes())
    }

    /// "10 XP for lesson 1", for messages.
    pub fn describe(&self) -> String {
        format!("{} XP for lesson {}", self.amount, self.lesson)
    }
}

/// SHA-256 of `bytes`, in hex.
fn sha256_hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(bytes);
    let mut hex = String::with_capacity(64);
    for byte in digest {
        hex.push(char::from(HEX[usize::from(byte >> 4)]));
        hex.push(char::from(HEX[usize::from(byte & 0xf)]));
    }
    hex
}
