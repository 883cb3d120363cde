//! Lesson 7: how the guard recovers: when a pending claim is stale, how often a running one is renewed, what failed work leaves.

use std::time::Duration;

use clap::Args;
use serde::{Deserialize, Serialize};

use crate::limits::{self, help_with_default as with_default};
use crate::strategy::guard::OnFailure;

/// What the guard does with failed work unless told otherwise (Stripe's way).
pub const DEFAULT_ON_FAILURE: OnFailure = OnFailure::Store;

/// `--lock-timeout-ms`, `--heartbeat-ms`, `--on-failure`.
#[derive(Debug, Clone, Default, Args, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct GuardInput {
    #[arg(help_heading = "Lesson 7: faults and recovery")]
    #[arg(long, value_name = "MS", allow_negative_numbers = true,
          value_parser = limits::LOCK_TIMEOUT_MS.parser(),
          help = limits::LOCK_TIMEOUT_MS.help(
              "The guard takes over a pending claim older than this, in ms."))]
    pub lock_timeout_ms: Option<u64>,

    #[arg(help_heading = "Lesson 7: faults and recovery")]
    #[arg(long, value_name = "MS", allow_negative_numbers = true,
          value_parser = limits::HEARTBEAT_MS.parser(),
          help = "The guard renews a running claim this often, in ms, so that only a \
                  silent owner's claim goes stale (at most half --lock-timeout-ms)")]
    pub heartbeat_ms: Option<u64>,

    #[arg(help_heading = "Lesson 7: faults and recovery")]
    #[arg(long, value_enum,
          help = with_default(
              "What the guard does when the work fails: store the 500 and replay it \
               (Stripe), or release the claim so a retry runs again (Powertools).",
              DEFAULT_ON_FAILURE.name()))]
    pub on_failure: Option<OnFailure>,
}

/// How the guard recovers.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recovery {
    lock_timeout: Duration,
    heartbeat: Option<Duration>,
    on_failure: OnFailure,
}

impl GuardInput {
    pub(super) fn resolve(&self) -> Recovery {
        Recovery {
            lock_timeout: Duration::from_millis(
                self.lock_timeout_ms
                    .unwrap_or(limits::LOCK_TIMEOUT_MS.default()),
            ),
            heartbeat: self.heartbeat_ms.map(Duration::from_millis),
            on_failure: self.on_failure.unwrap_or(DEFAULT_ON_FAILURE),
        }
    }
}

impl Recovery {
    /// The age past which a pending claim is taken over.
    pub fn lock_timeout(&self) -> Duration {
        self.lock_timeout
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
