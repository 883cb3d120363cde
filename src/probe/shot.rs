//! What one client of a probe got: its status, how long it took, whether it was a replay, and how its body compares with the first success's.

use std::time::Instant;

use anyhow::Result;
use bytes::Bytes;
use serde::Serialize;

use crate::http::message::Received;

/// What one client got.
#[derive(Debug, Clone, Serialize)]
pub struct Shot {
    pub request: usize,
    /// `None` when no response came.
    pub status: Option<u16>,
    /// From the gate to the last byte of the answer.
    pub latency_ms: f64,
    /// The response carried `Idempotent-Replayed: true`.
    pub replayed: bool,
    /// This request's success was the first to arrive.
    pub first_success: bool,
    /// For a success: whether its body equals the first success's byte for
    /// byte (`None` for any other answer, or without a success).
    pub same_as_first_success: Option<bool>,
    /// Why no response came.
    pub error: Option<String>,
    #[serde(skip)]
    pub body: Bytes,
    /// When the answer arrived (the first success is the earliest).
    #[serde(skip)]
    pub answered: Option<Instant>,
}

impl Shot {
    /// What a client got: the answer, or why none came.
    pub fn new(request: usize, opened: Instant, received: Result<Received>) -> Self {
        match received {
            Ok(r) => Self {
                request,
                status: Some(r.status),
                latency_ms: r.at.saturating_duration_since(opened).as_secs_f64() * 1000.0,
                replayed: r.replayed(),
                first_success: false,
                same_as_first_success: None,
                error: None,
                body: r.body,
                answered: Some(r.at),
            },
            Err(err) => Self {
                request,
                status: None,
                latency_ms: opened.elapsed().as_secs_f64() * 1000.0,
                replayed: false,
                first_success: false,
                same_as_first_success: None,
                error: Some(crate::db::secret::scrub(&format!("{err:#}"))),
                body: Bytes::new(),
                answered: None,
            },
        }
    }

    /// A 2xx answer.
    pub fn succeeded(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }
}
