//! What a client sends and gets back, whatever carries it (HTTP/1.1 or HTTP/2): the request, the response as it arrived, and a response too long to read.

use std::time::Instant;

use bytes::Bytes;
use hyper::Method;
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use super::contract::REPLAYED_HEADER;

/// A request to send: a method, a path, headers and a body.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub method: Method,
    pub path: String,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub body: Bytes,
}

/// A response as it arrived.
#[derive(Debug, Clone)]
pub struct Received {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// When the last byte of the body arrived.
    pub(crate) at: Instant,
}

impl Received {
    /// Whether the response says it is a replay (`Idempotent-Replayed: true`).
    pub fn replayed(&self) -> bool {
        self.headers
            .get(REPLAYED_HEADER)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
    }

    /// The body as JSON, if it is JSON.
    pub fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }
}

/// A response whose body was longer than the client reads.
#[derive(Debug, thiserror::Error)]
#[error(
    "{place} answered {status} with a body over {limit} bytes; it was not read further (--max-response-bytes)"
)]
pub struct BodyTooLarge {
    pub place: String,
    pub status: u16,
    pub limit: usize,
}
