//! How the guard is set: its stale-claim timeout, what failed work leaves, its retries.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::heartbeat::Heartbeat;

/// What the guard does when the work itself fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnFailure {
    /// Complete the claim with the 500 and replay it to retries (Stripe).
    Store,
    /// Delete the claim, so that a retry runs the work again (Powertools).
    Release,
}

impl OnFailure {
    /// As `--on-failure` and scenario files spell it.
    pub fn name(self) -> &'static str {
        match self {
            OnFailure::Store => "store",
            OnFailure::Release => "release",
        }
    }
}

/// The complete guard.
#[derive(Debug, Clone)]
pub struct Guard {
    /// How old a pending claim must be before another request may take it over.
    pub stale_after: Duration,
    /// What a failed work leaves behind.
    pub on_failure: OnFailure,
    /// Retries after a transient failure, each after twice the last backoff
    /// (in idem's races; a service retries as its clients do).
    pub max_retries: u32,
    /// The first of those backoffs.
    pub first_backoff: Duration,
    /// Renews the claim while the work runs, so that a claim is stale only
    /// when its owner has gone silent; `None` lets every claim age.
    pub heartbeat: Option<Heartbeat>,
}

impl Default for Guard {
    fn default() -> Self {
        Self {
            stale_after: Duration::from_secs(1),
            on_failure: OnFailure::Store,
            max_retries: 3,
            first_backoff: Duration::from_millis(10),
            heartbeat: None,
        }
    }
}

/// How the guard recovers: the one carrier of its three settings, from the
/// command line or a file to the guard itself.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recovery {
    stale_after: Duration,
    heartbeat: Option<Duration>,
    on_failure: OnFailure,
}

impl Recovery {
    /// A recovery: the stale-claim age, the heartbeat if any, and what a
    /// failed work leaves.
    pub fn new(stale_after: Duration, heartbeat: Option<Duration>, on_failure: OnFailure) -> Self {
        Recovery {
            stale_after,
            heartbeat,
            on_failure,
        }
    }

    /// The age past which a pending claim is taken over.
    pub fn stale_after(&self) -> Duration {
        self.stale_after
    }

    /// How often a running claim is renewed, if it is.
    pub fn heartbeat(&self) -> Option<Duration> {
        self.heartbeat
    }

    /// What the guard does when the work fails.
    pub fn on_failure(&self) -> OnFailure {
        self.on_failure
    }
}
