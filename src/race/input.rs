//! The one builder: a race as the user described it (flags or a scenario file) turned into checked settings.
//!
//! [`RaceInput`] holds what was given and nothing more: `None` is "not
//! said". The command line fills one in from its flags, and a scenario
//! file's `[race]` table is one, read by serde. [`RaceInput::build`] is the
//! only place that applies the defaults, checks the loser's timings against
//! its policy, and validates the whole against the one table of limits,
//! naming settings as the user wrote them; the [`RaceSettings`] it returns
//! cannot be made or changed anywhere else.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, bail};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::settings::{
    App, CrashPlan, Failover, Faults, RaceSettings, ReadFrom, Requests, StandbyPlan, Store,
    Synchronous, Transport,
};
use crate::db::via::Via;
use crate::http::app::OnHangup;
use crate::http::caller::KeyScope;
use crate::limits::{self, Origin};
use crate::store::StoreKind;
use crate::strategy::guard::OnFailure;
use crate::strategy::guard_file::{self, GuardRef};
use crate::strategy::orm::Orm;
use crate::strategy::transaction::{Isolation, Transaction};
use crate::strategy::{LoserKind, LoserPolicy, StrategyKind};

/// How often a polling loser re-reads the claim unless told otherwise.
pub const DEFAULT_POLL_MS: u64 = limits::POLL_MS.default();

/// How long a polling or blocking loser waits unless told otherwise.
pub const DEFAULT_WAIT_TIMEOUT_MS: u64 = limits::WAIT_TIMEOUT_MS.default();

/// The most workers `idem step` drives, and the fewest.
pub const STEPPED_WORKERS: std::ops::RangeInclusive<usize> = 2..=5;

/// What the user gave for one race; `None` takes the default. In a
/// scenario file it is the `[race]` table, and an unknown key is an error.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RaceInput {
    pub strategy: Option<StrategyKind>,
    /// A guard written as a file (`--strategy-file`), raced in place of
    /// `strategy`.
    pub strategy_file: Option<PathBuf>,
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
    /// Written as a duration in a file: `cache_max_age = "2w"`.
    #[serde(
        default,
        deserialize_with = "duration_text",
        serialize_with = "as_duration_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub cache_max_age: Option<Duration>,
    pub cache_pressure: Option<u64>,
    pub crash: Option<CrashPlan>,
    /// Over HTTP: a client hangs up mid-request, then retries.
    pub hang_up: Option<CrashPlan>,
    pub kill_connection: Option<bool>,
    pub lock_timeout_ms: Option<u64>,
    pub heartbeat_ms: Option<u64>,
    pub on_failure: Option<OnFailure>,
    pub fail_work: Option<u64>,
    pub recovery_retries: Option<u64>,
    /// Race over HTTP through the course's app (`idem race --http`).
    pub http: Option<bool>,
    /// Over HTTP: the app's threads.
    pub threads: Option<u64>,
    /// Run step by step in this order (worker numbers), as `idem step --schedule`.
    pub schedule: Option<Vec<u64>>,
    /// Whose statements check-then-store sends: idem's, or ActiveRecord's.
    pub orm: Option<Orm>,
    /// How the app's pool reaches PostgreSQL.
    pub via: Option<Via>,
    /// Whether each request runs in one transaction.
    pub transaction: Option<Transaction>,
    /// The request transaction's isolation level.
    pub isolation: Option<Isolation>,
    /// How many times a transaction that failed to serialise is run again.
    pub retry_serialization: Option<u64>,
    /// Over HTTP: how many processes of the app, behind one front door.
    pub replicas: Option<u64>,
    /// Over HTTP: whether a key is the caller's own or everyone's.
    pub key_scope: Option<KeyScope>,
    /// Over HTTP: what the app does with a request whose client left.
    pub on_hangup: Option<OnHangup>,
    /// A hot standby of the disposable cluster beside the race (lesson 10).
    pub standby: Option<bool>,
    /// Where the strategy's finds read: the primary or the standby.
    pub read_from: Option<ReadFrom>,
    /// The standby's `recovery_min_apply_delay`, in ms.
    pub replica_delay_ms: Option<u64>,
    /// How the app's commits wait for the standby.
    pub synchronous: Option<Synchronous>,
    /// The delay of the link the standby's WAL crosses, in ms.
    pub link_delay_ms: Option<u64>,
    /// When the standby is promoted.
    pub failover: Option<Failover>,
    /// The standby is the user's (`--standby-url`), which idem only reads;
    /// never from a file, which names no URL.
    #[serde(skip)]
    pub standby_yours: bool,
}

fn as_duration_text<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&format!("{}s", d.as_secs())),
        None => s.serialize_none(),
    }
}

fn duration_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let text = String::deserialize(d)?;
    limits::duration(&text)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

impl RaceInput {
    /// Nothing said but the strategy.
    pub fn with_strategy(strategy: StrategyKind) -> RaceInput {
        RaceInput {
            strategy: Some(strategy),
            ..RaceInput::default()
        }
    }

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

    /// The same input for `strategy`, as `compare` runs every strategy in
    /// turn: the loser's settings go to the strategies that have losers.
    pub fn for_strategy(&self, strategy: StrategyKind) -> RaceInput {
        let mut input = RaceInput {
            strategy: Some(strategy),
            ..self.clone()
        };
        if !strategy.has_losers() {
            (input.loser, input.poll_ms, input.wait_timeout_ms) = (None, None, None);
        }
        input
    }

    /// The checked settings of a race `idem step` drives from the command
    /// line: two to five workers, each with a connection of its own unless
    /// the pool size is given, and none of the faults, which need a race
    /// that runs by itself.
    pub fn build_stepped(&self) -> Result<RaceSettings> {
        let workers = self.workers.unwrap_or(limits::WORKERS.default());
        // Before the pool is sized from it, so that no message names a pool
        // the user never asked for.
        if !STEPPED_WORKERS.contains(&(workers as usize)) {
            bail!("idem step drives 2 to 5 workers; give --workers from 2 to 5, not {workers}");
        }
        if self.crash.is_some()
            || self.kill_connection == Some(true)
            || self.cache_pressure.is_some_and(|n| n > 0)
        {
            bail!("idem step drives one plain race; faults and cache pressure are for `idem race`");
        }
        if self.http == Some(true) {
            bail!(
                "idem step pauses workers inside idem, between statements; --http is for `idem race`"
            );
        }
        let input = RaceInput {
            pool_size: self
                .pool_size
                .or((workers + 1 > limits::POOL_SIZE.default()).then_some(workers + 1)),
            ..self.clone()
        };
        input.build(Origin::Flags)
    }

    fn assemble(&self, loser: LoserPolicy, origin: Origin) -> Result<RaceSettings> {
        let guard_file = self
            .strategy_file
            .as_deref()
            .map(guard_file::load)
            .transpose()?;
        if let Some(file) = guard_file {
            return self
                .with_guard_file(file, origin)?
                .assemble_with(loser, guard_file, origin);
        }
        self.assemble_with(loser, None, origin)
    }

    /// This input with what a guard file says of the app: its shape for
    /// the strategy, its request transaction where the flags say nothing.
    fn with_guard_file(&self, file: GuardRef, origin: Origin) -> Result<RaceInput> {
        if let Some(strategy) = self.strategy {
            bail!(
                "{} is the strategy; drop {} {strategy}",
                origin.name("--strategy-file", "race.strategy_file"),
                origin.name("--strategy", "race.strategy =")
            );
        }
        let agreed = |given: Option<&str>, said: Option<&str>, flag, key| match (given, said) {
            (Some(given), Some(said)) if given != said => bail!(
                "{} says {said}; {} {given} says otherwise",
                file.name,
                origin.name(flag, key)
            ),
            _ => Ok(()),
        };
        agreed(
            self.transaction.map(Transaction::name),
            file.transaction.map(Transaction::name),
            "--transaction",
            "race.transaction =",
        )?;
        agreed(
            self.isolation.map(Isolation::name),
            file.isolation.map(Isolation::name),
            "--isolation",
            "race.isolation =",
        )?;
        Ok(RaceInput {
            strategy: Some(file.shape.kind()),
            transaction: self.transaction.or(file.transaction),
            isolation: self.isolation.or(file.isolation),
            ..self.clone()
        })
    }

    fn assemble_with(
        &self,
        loser: LoserPolicy,
        guard_file: Option<GuardRef>,
        origin: Origin,
    ) -> Result<RaceSettings> {
        let strategy = self.strategy.unwrap_or(super::settings::DEFAULT_STRATEGY);
        if self.loser.is_some() && !strategy.has_losers() {
            bail!(
                "{} applies to claim-work-complete; with {strategy} no request loses a claim",
                origin.name("--loser", "race.loser")
            );
        }
        let size = |n: Option<u64>, limit: &limits::Limit| n.unwrap_or(limit.default()) as usize;
        let settings = RaceSettings {
            requests: Requests {
                workers: size(self.workers, &limits::WORKERS),
                key: self
                    .key
                    .clone()
                    .unwrap_or_else(|| super::settings::DEFAULT_KEY.to_string()),
                user_id: 42,
                amount: 10,
                amounts: self.amounts.clone().unwrap_or_default(),
                lesson: 1,
                transport: match self.http {
                    Some(true) => Transport::Http,
                    _ => Transport::InProcess,
                },
                schedule: self
                    .schedule
                    .as_ref()
                    .map(|s| s.iter().map(|&w| w as usize).collect()),
            },
            app: App {
                guard_file,
                ..self.app(strategy, loser, origin)?
            },
            store: Store {
                kind: self.store.unwrap_or(super::settings::DEFAULT_STORE),
                cache: crate::store::cache::CacheLimits {
                    max_entries: self
                        .cache_max_entries
                        .unwrap_or(limits::CACHE_MAX_ENTRIES.default()),
                    max_age: self
                        .cache_max_age
                        .unwrap_or(crate::store::cache::CacheLimits::default().max_age),
                },
                cache_pressure: self
                    .cache_pressure
                    .unwrap_or(limits::CACHE_PRESSURE.default()),
            },
            faults: Faults {
                fail_work: self.fail_work.map(|w| w as usize),
                crash: self.crash,
                kill_connection: self.kill_connection.unwrap_or(false),
                recovery_retries: size(self.recovery_retries, &limits::RECOVERY_RETRIES),
                hang_up: self.hang_up,
            },
        };
        settings.validate_from(origin)?;
        Ok(settings)
    }

    /// An app replica's settings: the app group it was sent, in a race over
    /// HTTP of one process, checked as any race's.
    pub fn replica(app: App) -> Result<RaceSettings> {
        let http = RaceInput {
            http: Some(true),
            ..RaceInput::default()
        };
        let settings = RaceSettings {
            app: App { replicas: 1, ..app },
            ..http.build(Origin::Flags)?
        };
        settings.validate_from(Origin::Flags)?;
        Ok(settings)
    }

    /// The app group: the strategy and what shapes it, its pool, its work,
    /// its threads and processes.
    fn app(&self, strategy: StrategyKind, loser: LoserPolicy, origin: Origin) -> Result<App> {
        let ms = Duration::from_millis;
        let size = |n: Option<u64>, limit: &limits::Limit| n.unwrap_or(limit.default()) as usize;
        Ok(App {
            strategy,
            guard_file: None,
            pool_size: size(self.pool_size, &limits::POOL_SIZE),
            // In-process, the course's test: its runner holds a connection.
            // Over HTTP, a Rails server on Puma: it holds none outside
            // requests (the boot connection goes back to the pool).
            runner_holds_connection: self
                .runner_holds_connection
                .unwrap_or(self.http != Some(true)),
            work: ms(self.work_ms.unwrap_or(limits::WORK_MS.default())),
            checkout_timeout: ms(self
                .checkout_timeout_ms
                .unwrap_or(limits::CHECKOUT_TIMEOUT_MS.default())),
            fingerprint: self.fingerprint.unwrap_or(true),
            loser,
            lock_timeout: ms(self
                .lock_timeout_ms
                .unwrap_or(limits::LOCK_TIMEOUT_MS.default())),
            heartbeat: self.heartbeat_ms.map(ms),
            on_failure: self
                .on_failure
                .unwrap_or(super::settings::DEFAULT_ON_FAILURE),
            orm: self.orm.unwrap_or_default(),
            via: self.via.unwrap_or_default(),
            transaction: self.transaction_for(strategy, origin)?,
            isolation: self.isolation.unwrap_or_default(),
            retry_serialization: self
                .retry_serialization
                .unwrap_or(limits::RETRY_SERIALIZATION.default())
                .min(u64::from(u32::MAX)) as u32,
            threads: size(self.threads, &limits::THREADS),
            replicas: size(self.replicas, &limits::REPLICAS),
            key_scope: self.key_scope.unwrap_or_default(),
            on_hangup: self.on_hangup.unwrap_or_default(),
            standby: self.standby_plan(origin)?,
            read_from: self.read_from.unwrap_or_default(),
        })
    }

    /// The standby the race starts, if any: `--replica-delay-ms` and
    /// `--read-from standby` need one.
    fn standby_plan(&self, origin: Origin) -> Result<Option<StandbyPlan>> {
        let standby = origin.name("--standby", "race.standby = true");
        if self.standby != Some(true) {
            if self.replica_delay_ms.is_some() {
                bail!(
                    "{} delays a standby; add {standby}",
                    limits::REPLICA_DELAY_MS.name(origin)
                );
            }
            if self.read_from == Some(ReadFrom::Standby) {
                bail!(
                    "{} reads from a standby; add {standby}",
                    origin.name("--read-from standby", "race.read_from = \"standby\"")
                );
            }
            let needs_one = [
                (
                    self.synchronous.is_some(),
                    origin.name("--synchronous", "race.synchronous"),
                ),
                (
                    self.link_delay_ms.is_some(),
                    limits::LINK_DELAY_MS.name(origin),
                ),
                (
                    self.failover.is_some(),
                    origin.name("--failover", "race.failover"),
                ),
            ];
            if let Some((_, name)) = needs_one.into_iter().find(|(given, _)| *given) {
                bail!("{name} is about a standby; add {standby}");
            }
            return Ok(None);
        }
        if let Some(ms) = self.replica_delay_ms {
            limits::REPLICA_DELAY_MS.check(ms, origin)?;
        }
        if self.standby_yours {
            let reconfigures = [
                (self.replica_delay_ms.is_some(), "--replica-delay-ms"),
                (self.link_delay_ms.is_some(), "--link-delay-ms"),
                (self.failover.is_some(), "--failover"),
                (
                    self.synchronous == Some(Synchronous::RemoteApply),
                    "--synchronous remote_apply",
                ),
            ];
            if let Some((_, name)) = reconfigures.into_iter().find(|(given, _)| *given) {
                bail!(
                    "{name} needs a standby of idem's own; idem only reads your \
                     --standby-url and never promotes, stops or reconfigures your servers"
                );
            }
        }
        if let Some(ms) = self.link_delay_ms {
            limits::LINK_DELAY_MS.check(ms, origin)?;
        }
        // A failover cuts the link between the servers: it needs one.
        let link_delay = match (self.link_delay_ms, self.failover) {
            (Some(ms), _) => Some(ms),
            (None, Some(_)) => Some(limits::LINK_DELAY_MS.default()),
            (None, None) => None,
        };
        Ok(Some(StandbyPlan {
            yours: self.standby_yours,
            apply_delay: Duration::from_millis(self.replica_delay_ms.unwrap_or(0)),
            synchronous: self.synchronous.unwrap_or_default(),
            link_delay: link_delay.map(Duration::from_millis),
            failover: self.failover,
        }))
    }

    /// The request's transaction: as given; else a transaction when an
    /// isolation level or retries are given, or when the strategy's lock
    /// needs one; else none, as the course's code.
    fn transaction_for(&self, strategy: StrategyKind, origin: Origin) -> Result<Transaction> {
        let implied = self.isolation.is_some()
            || self.retry_serialization.is_some_and(|n| n > 0)
            || strategy.needs_transaction();
        match (self.transaction, self.isolation) {
            (Some(Transaction::None), Some(_)) => bail!(
                "{} sets the request transaction's level; {} has none",
                origin.name("--isolation", "race.isolation"),
                origin.name("--transaction none", "race.transaction = \"none\"")
            ),
            (Some(given), _) => Ok(given),
            (None, _) if implied => Ok(Transaction::Request),
            (None, _) => Ok(Transaction::None),
        }
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
