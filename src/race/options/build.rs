//! The one builder: a race as the user described it (flags or a scenario file) turned into checked settings.
//!
//! [`RaceInput::build`] is the only place that asks each option group to
//! resolve itself (its defaults and its own checks) and then validates the
//! whole, naming settings as the user wrote them; the [`RaceSettings`] it
//! returns cannot be made or changed anywhere else.

use anyhow::{Result, bail};

use super::super::settings::{App, DEFAULT_STRATEGY, RaceSettings};
use super::{RaceInput, STEPPED_WORKERS, Synchronous};
use crate::limits::{self, Origin};
use crate::strategy::guard_file::{self, GuardRef};
use crate::strategy::transaction::{Isolation, Transaction};
use crate::strategy::{LoserKind, LoserPolicy, StrategyKind};

impl RaceInput {
    /// The checked settings.
    pub fn build(&self, origin: Origin) -> Result<RaceSettings> {
        self.refuse_read_back(origin)?;
        self.check_said(origin)?;
        let loser = self.losers.resolve(None, true, origin)?;
        self.assemble(loser, origin)
    }

    /// `--read-back` is InnoDB's: on PostgreSQL a statement's error aborts
    /// its whole transaction, so there is nothing to read back in it. A
    /// MariaDB race takes it before it builds the rest.
    fn refuse_read_back(&self, origin: Origin) -> Result<()> {
        if self.cluster.said() {
            bail!(
                "{} are for a race on a Galera cluster of MariaDB nodes: add --engine mariadb",
                origin.name("--nodes and --spread", "race.nodes and race.spread")
            );
        }
        if self.transaction.read_back.is_some() {
            bail!(
                "{} runs on MariaDB only (--engine mariadb): on PostgreSQL a unique violation \
                 aborts the whole transaction, and nothing is read back in it",
                origin.name("--read-back", "race.read_back")
            );
        }
        Ok(())
    }

    /// The checked settings with `loser` in place of the given policy, as
    /// `compare --losers` runs each policy in turn: a timing given for
    /// another policy is then not an error, merely unused.
    pub fn build_with_loser(&self, loser: LoserKind, origin: Origin) -> Result<RaceSettings> {
        self.check_said(origin)?;
        let loser = self.losers.resolve(Some(loser), false, origin)?;
        self.assemble(loser, origin)
    }

    /// The same input for `strategy`, as `compare` runs every strategy in
    /// turn: the loser's settings go to the strategies that have losers.
    pub fn for_strategy(&self, strategy: StrategyKind) -> RaceInput {
        self.clone().with(|r| {
            r.strategy.strategy = Some(strategy);
            if !strategy.has_losers() {
                r.losers = super::LoserInput::default();
            }
        })
    }

    /// The checked settings of a race `idem step` drives from the command
    /// line: two to five workers, each with a connection of its own unless
    /// the pool size is given, and none of the faults, which need a race
    /// that runs by itself.
    pub fn build_stepped(&self) -> Result<RaceSettings> {
        let workers = self.shape.workers.unwrap_or(limits::WORKERS.default());
        // Before the pool is sized from it, so that no message names a pool
        // the user never asked for.
        if !STEPPED_WORKERS.contains(&(workers as usize)) {
            bail!(
                "idem step and idem explore drive 2 to 5 workers; give --workers from 2 to 5, \
                 not {workers}"
            );
        }
        if self.faults.any() || self.eviction.cache_pressure.is_some_and(|n| n > 0) {
            bail!(
                "idem step and idem explore drive one plain race; faults and cache pressure are \
                 for `idem race`"
            );
        }
        let store = &self.store;
        if store.redis_replica.is_some() || store.redis_pressure.is_some_and(|n| n > 0) {
            bail!(
                "idem step and idem explore drive one plain race; Redis's replica, its failover \
                 and cache pressure are for `idem race`"
            );
        }
        if self.wire.http {
            bail!(
                "idem step and idem explore pause workers inside idem, between statements; \
                 --http is for `idem race`"
            );
        }
        let own_connections = workers + 1 > limits::POOL_SIZE.default();
        self.clone()
            .with(|r| {
                r.app.pool_size = r.app.pool_size.or(own_connections.then_some(workers + 1));
            })
            .build(Origin::Flags)
    }

    fn assemble(&self, loser: LoserPolicy, origin: Origin) -> Result<RaceSettings> {
        let Some(path) = self.strategy.strategy_file.as_deref() else {
            return self.assemble_with(loser, None, origin);
        };
        let file = guard_file::load(path)?;
        self.with_guard_file(file, origin)?
            .assemble_with(loser, Some(file), origin)
    }

    /// Every whole number said, in any group, checked against its bound in
    /// the one table ([`limits::RACE`]): a flag's was checked as it was
    /// parsed and a file's where it stands, and this holds what neither
    /// read (a learner's loser file, an input built in code) to the same.
    fn check_said(&self, origin: Origin) -> Result<()> {
        fn check<G: serde::Serialize>(group: &G, origin: Origin) -> Result<()> {
            let said = toml::Table::try_from(group)?;
            said.iter().try_for_each(|(key, value)| {
                limits::check_race_value(&format!("race.{key}"), value, origin)
            })
        }
        check(&self.shape, origin)?;
        check(&self.wire, origin)?;
        check(&self.strategy, origin)?;
        check(&self.app, origin)?;
        check(&self.losers, origin)?;
        check(&self.amounts, origin)?;
        check(&self.fingerprints, origin)?;
        check(&self.store, origin)?;
        check(&self.eviction, origin)?;
        check(&self.guard, origin)?;
        check(&self.transaction, origin)?;
        check(&self.standby, origin)?;
        check(&self.faults, origin)?;
        check(&self.hang_up, origin)
    }

    /// This input with what a guard file says of the app: its shape for
    /// the strategy, its request transaction where the flags say nothing.
    fn with_guard_file(&self, file: GuardRef, origin: Origin) -> Result<RaceInput> {
        if let Some(strategy) = self.strategy.strategy {
            bail!(
                "{} is the strategy; drop {} {strategy}",
                origin.name("--strategy-file", "race.strategy_file"),
                origin.name("--strategy", "race.strategy =")
            );
        }
        let t = &self.transaction;
        let agreed = |given: Option<&str>, said: Option<&str>, flag, key| match (given, said) {
            (Some(given), Some(said)) if given != said => bail!(
                "{} says {said}; {} {given} says otherwise",
                file.name,
                origin.name(flag, key)
            ),
            _ => Ok(()),
        };
        agreed(
            t.transaction.map(Transaction::name),
            file.transaction.map(Transaction::name),
            "--transaction",
            "race.transaction =",
        )?;
        agreed(
            t.isolation.map(Isolation::name),
            file.isolation.map(Isolation::name),
            "--isolation",
            "race.isolation =",
        )?;
        agreed(
            self.standby.synchronous.map(Synchronous::name),
            file.synchronous.as_deref().filter(|_| self.standby.standby),
            "--synchronous",
            "race.synchronous =",
        )?;
        // What the file's commits wait for, beside a standby only: a race
        // with none has nothing to wait for.
        let synchronous = file
            .synchronous
            .as_deref()
            .filter(|_| self.standby.standby)
            .and_then(|s| <Synchronous as clap::ValueEnum>::from_str(s, false).ok());
        Ok(self.clone().with(|r| {
            r.strategy.strategy = Some(file.shape.kind());
            r.transaction.transaction = r.transaction.transaction.or(file.transaction);
            r.transaction.isolation = r.transaction.isolation.or(file.isolation);
            r.standby.synchronous = r.standby.synchronous.or(synchronous);
        }))
    }

    fn assemble_with(
        &self,
        loser: LoserPolicy,
        guard_file: Option<GuardRef>,
        origin: Origin,
    ) -> Result<RaceSettings> {
        let strategy = self.strategy.strategy.unwrap_or(DEFAULT_STRATEGY);
        if self.losers.loser.is_some() && !strategy.has_losers() {
            bail!(
                "{} applies to claim-work-complete; with {strategy} no request loses a claim",
                origin.name("--loser", "race.loser")
            );
        }
        let settings = RaceSettings {
            requests: self.shape.resolve(&self.wire, self.amounts.asks()),
            app: App {
                strategy,
                guard_file,
                pool: self.app.pool(self.wire.http),
                work: self.app.work(),
                orm: self.strategy.orm.unwrap_or_default(),
                threads: self.app.threads(),
                replicas: self.wire.replicas.unwrap_or(limits::REPLICAS.default()) as usize,
                fingerprint: self.fingerprints.fingerprint(),
                loser,
                recovery: self.guard.resolve(origin)?,
                transaction: self.transaction.resolve(strategy, origin)?,
                key_scope: self.shape.key_scope.unwrap_or_default(),
                on_hangup: self.hang_up.on_hangup.unwrap_or_default(),
                standby: self.standby.resolve(origin)?,
                read_from: self.standby.read_from(),
            },
            store: self.store.resolve(&self.eviction),
            redis_url: self.store.redis_url()?,
            faults: self.faults.resolve(),
        };
        settings.validate_from(origin)?;
        Ok(settings)
    }

    /// An app replica's settings: the app group it was sent, in a race over
    /// HTTP of one process, checked as any race's.
    pub fn replica(app: App) -> Result<RaceSettings> {
        let http = RaceInput::default().with(|r| r.wire.http = true);
        let settings = RaceSettings {
            app: App { replicas: 1, ..app },
            ..http.build(Origin::Flags)?
        };
        settings.validate_from(Origin::Flags)?;
        Ok(settings)
    }
}
