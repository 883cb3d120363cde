//! The one builder: a race as the user described it (flags or a scenario file) turned into checked settings.
//!
//! [`RaceInput`] holds what was given and nothing more; it knows neither
//! clap nor serde. The command line and scenario files each fill one in,
//! and [`RaceInput::build`] is the only place that applies the defaults,
//! checks the loser's timings against its policy, and validates the whole
//! against the one table of limits, naming settings as the user wrote them.

use std::time::Duration;

use anyhow::{Result, bail};

use super::limits::{self, Origin};
use super::settings::{CrashPlan, RaceSettings, Transport};
use crate::store::StoreKind;
use crate::strategy::guard::OnFailure;
use crate::strategy::{LoserKind, LoserPolicy, StrategyKind};

/// How often a polling loser re-reads the claim unless told otherwise.
pub const DEFAULT_POLL_MS: u64 = limits::POLL_MS.default();

/// How long a polling or blocking loser waits unless told otherwise.
pub const DEFAULT_WAIT_TIMEOUT_MS: u64 = limits::WAIT_TIMEOUT_MS.default();

/// What the user gave for one race; `None` takes the default.
#[derive(Debug, Clone, Default)]
pub struct RaceInput {
    pub strategy: Option<StrategyKind>,
    pub workers: Option<u64>,
    pub pool_size: Option<u64>,
    pub runner_holds_connection: Option<bool>,
    pub work_ms: Option<u64>,
    pub key: Option<String>,
    pub checkout_timeout_ms: Option<u64>,
    pub loser: Option<LoserKind>,
    pub poll_ms: Option<u64>,
    pub wait_timeout_ms: Option<u64>,
    pub amounts: Option<Vec<i32>>,
    pub fingerprint: Option<bool>,
    pub store: Option<StoreKind>,
    pub cache_max_entries: Option<u64>,
    pub cache_max_age: Option<Duration>,
    pub cache_pressure: Option<u64>,
    pub crash: Option<CrashPlan>,
    pub kill_connection: Option<bool>,
    pub lock_timeout_ms: Option<u64>,
    pub on_failure: Option<OnFailure>,
    pub fail_work: Option<u64>,
    pub recovery_retries: Option<u64>,
    pub http: Option<bool>,
    pub threads: Option<u64>,
}

impl RaceInput {
    /// The checked settings.
    pub fn build(&self, origin: Origin) -> Result<RaceSettings> {
        let loser = self.loser_policy(self.loser, true, origin)?;
        self.assemble(loser, origin)
    }

    /// The checked settings with `loser` in place of the given policy, as
    /// `compare --losers` runs each policy in turn: a timing given for
    /// another policy is then not an error, merely unused.
    pub fn build_with_loser(&self, loser: LoserKind, origin: Origin) -> Result<RaceSettings> {
        let loser = self.loser_policy(Some(loser), false, origin)?;
        self.assemble(loser, origin)
    }

    fn assemble(&self, loser: LoserPolicy, origin: Origin) -> Result<RaceSettings> {
        let d = RaceSettings::default();
        let ms = Duration::from_millis;
        let size = |n: Option<u64>, default: usize| n.map_or(default, |n| n as usize);
        let settings = RaceSettings {
            strategy: self.strategy.unwrap_or(d.strategy),
            workers: size(self.workers, d.workers),
            pool_size: size(self.pool_size, d.pool_size),
            runner_holds_connection: self
                .runner_holds_connection
                .unwrap_or(d.runner_holds_connection),
            work: self.work_ms.map_or(d.work, ms),
            key: self.key.clone().unwrap_or_else(|| d.key.clone()),
            checkout_timeout: self.checkout_timeout_ms.map_or(d.checkout_timeout, ms),
            amounts: self.amounts.clone().unwrap_or_default(),
            fingerprint: self.fingerprint.unwrap_or(d.fingerprint),
            loser,
            store: self.store.unwrap_or(d.store),
            cache: crate::store::cache::CacheLimits {
                max_entries: self.cache_max_entries.unwrap_or(d.cache.max_entries),
                max_age: self.cache_max_age.unwrap_or(d.cache.max_age),
            },
            cache_pressure: self.cache_pressure.unwrap_or(d.cache_pressure),
            crash: self.crash.or(d.crash),
            kill_connection: self.kill_connection.unwrap_or(d.kill_connection),
            lock_timeout: self.lock_timeout_ms.map_or(d.lock_timeout, ms),
            on_failure: self.on_failure.unwrap_or(d.on_failure),
            fail_work: self.fail_work.map(|w| w as usize).or(d.fail_work),
            recovery_retries: size(self.recovery_retries, d.recovery_retries),
            transport: match self.http {
                Some(true) => Transport::Http,
                _ => d.transport,
            },
            threads: size(self.threads, d.threads),
            ..d
        };
        settings.validate_from(origin)?;
        Ok(settings)
    }

    /// The loser's policy with its timings; with `strict`, a timing given
    /// for a policy that has none is an error.
    fn loser_policy(
        &self,
        kind: Option<LoserKind>,
        strict: bool,
        origin: Origin,
    ) -> Result<LoserPolicy> {
        let kind = kind.unwrap_or(LoserKind::FailFast);
        let poll_ms = origin.name("--poll-ms", "race.poll_ms");
        let wait_ms = origin.name("--wait-timeout-ms", "race.wait_timeout_ms");
        let (poll, poll_or_block) = match origin {
            Origin::Flags => ("--loser poll", "--loser poll or block"),
            Origin::File(_) => (
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
        limits::POLL_MS.check(every, origin)?;
        limits::WAIT_TIMEOUT_MS.check(give_up, origin)?;
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
