//! What a request does when it loses the claim while the winner is still working (lesson 3).

use std::time::Duration;

use serde::Serialize;

/// The loser policies, as `--loser` spells them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LoserKind {
    /// Answer 409 Conflict at once (Stripe, the IETF draft).
    FailFast,
    /// Give the connection back, re-read the claim every --poll-ms until it completes.
    Poll,
    /// Wait on the winner's lock, holding a connection, until it commits.
    Block,
}

impl LoserKind {
    pub const ALL: [LoserKind; 3] = [LoserKind::FailFast, LoserKind::Poll, LoserKind::Block];

    pub fn name(self) -> &'static str {
        match self {
            LoserKind::FailFast => "fail-fast",
            LoserKind::Poll => "poll",
            LoserKind::Block => "block",
        }
    }
}

/// A loser policy with its timings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub enum LoserPolicy {
    FailFast,
    Poll {
        every: Duration,
        give_up_after: Duration,
    },
    Block {
        give_up_after: Duration,
    },
}

impl LoserPolicy {
    pub fn kind(self) -> LoserKind {
        match self {
            LoserPolicy::FailFast => LoserKind::FailFast,
            LoserPolicy::Poll { .. } => LoserKind::Poll,
            LoserPolicy::Block { .. } => LoserKind::Block,
        }
    }
}

/// The 409 body, in the shape of Stripe's error: a code a client can match
/// on, and the hint that the same key may be sent again later.
pub fn conflict_body(key: &str, retry_after_ms: u64) -> serde_json::Value {
    serde_json::json!({
        "error": {
            "type": "idempotency_error",
            "code": "idempotency_key_in_use",
            "message": format!(
                "a request with key {key:?} is still in progress; retry with the same key later"
            ),
            "retry_after_ms": retry_after_ms,
        }
    })
}
