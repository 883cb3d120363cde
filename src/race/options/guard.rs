//! Lesson 7: how the guard recovers: when a pending claim is stale, how often a running one is renewed, what failed work leaves.

use std::sync::Once;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::Args;
use serde::{Deserialize, Serialize};

use crate::limits::{self, Origin, help_with_default as with_default};
use crate::strategy::guard::{OnFailure, Recovery};

/// What the guard does with failed work unless told otherwise (Stripe's way).
pub const DEFAULT_ON_FAILURE: OnFailure = OnFailure::Store;

/// `--stale-after-ms`, `--heartbeat-ms`, `--on-failure`.
#[derive(Debug, Clone, Default, Args, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct GuardInput {
    #[arg(help_heading = "Lesson 7: faults and recovery")]
    #[arg(long, value_name = "MS", allow_negative_numbers = true,
          value_parser = limits::STALE_AFTER_MS.parser(),
          help = limits::STALE_AFTER_MS.help(
              "The stale-claim age: the guard lets another request take over a pending \
               claim older than this, in ms (not PostgreSQL's lock_timeout, which bounds \
               a blocking loser's wait: --wait-timeout-ms)."))]
    pub stale_after_ms: Option<u64>,

    /// The old name of --stale-after-ms, still read; it says so.
    #[arg(long, hide = true, value_name = "MS", allow_negative_numbers = true,
          value_parser = limits::STALE_AFTER_MS.parser())]
    pub lock_timeout_ms: Option<u64>,

    #[arg(help_heading = "Lesson 7: faults and recovery")]
    #[arg(long, value_name = "MS", allow_negative_numbers = true,
          value_parser = limits::HEARTBEAT_MS.parser(),
          help = "The guard renews a running claim this often, in ms, so that only a \
                  silent owner's claim goes stale (at most half --stale-after-ms)")]
    pub heartbeat_ms: Option<u64>,

    #[arg(help_heading = "Lesson 7: faults and recovery")]
    #[arg(long, value_enum,
          help = with_default(
              "What the guard does when the work fails: store the 500 and replay it \
               (Stripe), or release the claim so a retry runs again (Powertools).",
              DEFAULT_ON_FAILURE.name()))]
    pub on_failure: Option<OnFailure>,
}

impl GuardInput {
    /// The recovery this says; the stale-claim age may come by its old
    /// name (`--lock-timeout-ms`, `lock_timeout_ms`), with a note, never
    /// beside its new one.
    pub(super) fn resolve(&self, origin: Origin) -> Result<Recovery> {
        let (new, old) = (
            origin.name("--stale-after-ms", "race.stale_after_ms"),
            origin.name("--lock-timeout-ms", "race.lock_timeout_ms"),
        );
        let stale_after = match (self.stale_after_ms, self.lock_timeout_ms) {
            (Some(_), Some(_)) => bail!("{old} is the old name of {new}: give {new} alone"),
            (None, Some(ms)) => {
                static SAID: Once = Once::new();
                SAID.call_once(|| {
                    eprintln!(
                        "note: {old} is the old name of {new} (the stale-claim age); it still works"
                    );
                });
                Some(ms)
            }
            (ms, None) => ms,
        };
        Ok(Recovery::new(
            Duration::from_millis(stale_after.unwrap_or(limits::STALE_AFTER_MS.default())),
            self.heartbeat_ms.map(Duration::from_millis),
            self.on_failure.unwrap_or(DEFAULT_ON_FAILURE),
        ))
    }
}
