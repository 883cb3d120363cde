//! Lesson 3: what a request that loses the claim does, and how long it waits.

use std::time::Duration;

use anyhow::{Result, bail};
use clap::Args;
use serde::{Deserialize, Serialize};

use crate::limits::help_with_default as with_default;
use crate::limits::{self, Origin};
use crate::strategy::{LoserKind, LoserPolicy};

/// How often a polling loser re-reads the claim unless told otherwise.
pub const DEFAULT_POLL_MS: u64 = limits::POLL_MS.default();

/// How long a polling or blocking loser waits unless told otherwise.
pub const DEFAULT_WAIT_TIMEOUT_MS: u64 = limits::WAIT_TIMEOUT_MS.default();

/// The loser's policy and its timings (`--loser`, `--poll-ms`, `--wait-timeout-ms`).
#[derive(Debug, Clone, Default, Args, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct LoserInput {
    #[arg(help_heading = "Lesson 3: the loser")]
    #[arg(long, value_enum, value_name = "POLICY",
          help = with_default(
              "What a request that loses the claim does while the winner works \
               (claim-work-complete only).",
              LoserKind::FailFast.name()))]
    pub loser: Option<LoserKind>,

    #[arg(help_heading = "Lesson 3: the loser")]
    #[arg(long, value_name = "MS", allow_negative_numbers = true,
          value_parser = limits::POLL_MS.parser(),
          help = limits::POLL_MS.help("With --loser poll: how often a loser re-reads the claim."))]
    pub poll_ms: Option<u64>,

    #[arg(help_heading = "Lesson 3: the loser")]
    #[arg(long, value_name = "MS", allow_negative_numbers = true,
          value_parser = limits::WAIT_TIMEOUT_MS.parser(),
          help = limits::WAIT_TIMEOUT_MS.help(
              "With --loser poll or block: how long a loser waits for the winner before answering 409."))]
    pub wait_timeout_ms: Option<u64>,
}

impl LoserInput {
    /// The policy `kind` (or the one given) with its timings; with
    /// `strict`, a timing given for a policy that has none is an error.
    pub(super) fn resolve(
        &self,
        kind: Option<LoserKind>,
        strict: bool,
        origin: Origin,
    ) -> Result<LoserPolicy> {
        let kind = kind.or(self.loser).unwrap_or(LoserKind::FailFast);
        let poll_ms = origin.name("--poll-ms", "race.poll_ms");
        let wait_ms = origin.name("--wait-timeout-ms", "race.wait_timeout_ms");
        let (poll, poll_or_block) = match origin {
            Origin::Flags => ("--loser poll", "--loser poll or block"),
            Origin::File => (
                "race.loser = \"poll\"",
                "race.loser = \"poll\" or \"block\"",
            ),
        };
        if strict && self.poll_ms.is_some() && kind != LoserKind::Poll {
            bail!("{poll_ms} applies to {poll} only");
        }
        if strict && self.wait_timeout_ms.is_some() && kind == LoserKind::FailFast {
            bail!("{wait_ms} applies to {poll_or_block}; fail-fast does not wait");
        }
        let every = self.poll_ms.unwrap_or(DEFAULT_POLL_MS);
        let give_up = self.wait_timeout_ms.unwrap_or(DEFAULT_WAIT_TIMEOUT_MS);
        let (every, give_up_after) = (Duration::from_millis(every), Duration::from_millis(give_up));
        Ok(match kind {
            LoserKind::FailFast => LoserPolicy::FailFast,
            LoserKind::Poll if every > give_up_after => bail!(
                "{poll_ms} {} is longer than the wait ({} ms): a loser would give up before its second read",
                every.as_millis(),
                give_up_after.as_millis()
            ),
            LoserKind::Poll => LoserPolicy::Poll {
                every,
                give_up_after,
            },
            LoserKind::Block => LoserPolicy::Block { give_up_after },
        })
    }
}
