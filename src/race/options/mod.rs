//! A race's options, one file per group: each holds its flags and scenario keys (one definition), its defaults and its checks. Options are only input: what runs after the race is the race's own (`race/after.rs`, `race/standby.rs`).
//!
//! An option group is one struct that clap fills from the command line and
//! serde fills from a scenario file's `[race]` table, so a flag and its key
//! are one field. [`RaceInput`] is the groups side by side; `None` is "not
//! said". [`RaceInput::build`] (in `build.rs`) asks each group to resolve
//! itself into its part of the [`RaceSettings`], with its defaults, then
//! checks the whole. Adding an option touches its group's file and, for a
//! new group, one field here.
//!
//! [`RaceSettings`]: super::RaceSettings

mod app;
mod build;
mod cluster;
mod faults;
mod fingerprints;
mod guard;
mod hang_up;
mod losers;
mod shape;
mod standby;
mod store;
mod table;
mod transaction;

use std::sync::OnceLock;

use clap::Args;
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

pub(crate) use app::Pool;
pub use app::{AppInput, StrategyInput};
pub use cluster::{ClusterInput, RetryNode, Spread};
pub(crate) use faults::Faults;
pub use faults::{CrashPlan, FaultInput, HangUpPlan};
pub use fingerprints::{AmountInput, FingerprintInput};
pub use guard::GuardInput;
pub use hang_up::HangUpInput;
pub(crate) use hang_up::{Retried, settle, until_answered};
pub use losers::LoserInput;
pub use shape::{DEFAULT_KEY, Requests, STEPPED_WORKERS, ShapeInput, Transport, WireInput};
pub(crate) use standby::{CATCH_UP_SLACK, catch_up_limit, with_setting};
pub use standby::{Failover, ReadFrom, StandbyInput, StandbyPlan, Synchronous};
pub(crate) use store::Store;
pub use store::{EvictionInput, MAX_CACHE_AGE, StoreInput};
pub use transaction::TransactionInput;
pub(crate) use transaction::TransactionPlan;

/// What the user gave for one race, group by group; `None` takes the
/// default. On the command line every group is a set of flags; in a
/// scenario file, the `[race]` table's keys, each read by its group.
#[derive(Debug, Clone, Default, Args)]
pub struct RaceInput {
    #[command(flatten)]
    pub shape: ShapeInput,
    #[command(flatten)]
    pub wire: WireInput,
    #[command(flatten)]
    pub strategy: StrategyInput,
    #[command(flatten)]
    pub app: AppInput,
    #[command(flatten)]
    pub losers: LoserInput,
    #[command(flatten)]
    pub amounts: AmountInput,
    #[command(flatten)]
    pub fingerprints: FingerprintInput,
    #[command(flatten)]
    pub store: StoreInput,
    #[command(flatten)]
    pub eviction: EvictionInput,
    #[command(flatten)]
    pub guard: GuardInput,
    #[command(flatten)]
    pub transaction: TransactionInput,
    #[command(flatten)]
    pub standby: StandbyInput,
    #[command(flatten)]
    pub faults: FaultInput,
    #[command(flatten)]
    pub hang_up: HangUpInput,
    #[command(flatten)]
    pub cluster: ClusterInput,
}

impl RaceInput {
    /// Nothing said but the strategy.
    pub fn with_strategy(strategy: crate::strategy::StrategyKind) -> RaceInput {
        RaceInput::default().with(|r| r.strategy.strategy = Some(strategy))
    }

    /// This input with `change` made to it: `input.with(|r| r.app.pool_size = Some(6))`.
    pub fn with(mut self, change: impl FnOnce(&mut RaceInput)) -> RaceInput {
        change(&mut self);
        self
    }
}

/// A switch as the builder takes it: given, or not said.
pub(crate) fn said(switch: bool, meaning: bool) -> Option<bool> {
    switch.then_some(meaning)
}

/// The groups as the `[race]` table reads them, in the order of
/// [`RaceInput`]'s fields.
fn groups<'de, A: MapAccess<'de>>() -> [table::Group<A, A::Error>; 15] {
    use table::Group;
    [
        Group::of::<ShapeInput>(),
        Group::of::<WireInput>(),
        Group::of::<StrategyInput>(),
        Group::of::<AppInput>(),
        Group::of::<LoserInput>(),
        Group::of::<AmountInput>(),
        Group::of::<FingerprintInput>(),
        Group::of::<StoreInput>(),
        Group::of::<EvictionInput>(),
        Group::of::<GuardInput>(),
        Group::of::<TransactionInput>(),
        Group::of::<StandbyInput>(),
        Group::of::<FaultInput>(),
        Group::of::<HangUpInput>(),
        Group::of::<ClusterInput>(),
    ]
}

impl<'de> Deserialize<'de> for RaceInput {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(RaceTable)
    }
}

/// One group from the values it claims, each tried in it as it was read.
fn group<G: serde::de::DeserializeOwned, E: serde::de::Error>(values: toml::Table) -> Result<G, E> {
    values.try_into().map_err(E::custom)
}

/// Reads the `[race]` table (see `table.rs`).
struct RaceTable;

impl<'de> Visitor<'de> for RaceTable {
    type Value = RaceInput;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a [race] table")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RaceInput, A::Error> {
        static KEYS: OnceLock<Vec<&'static str>> = OnceLock::new();
        let groups = groups::<A>();
        let every_key = table::all_keys(&KEYS, &groups);
        let tables = table::split(map, &groups, every_key)?;
        let mut tables = tables.into_iter();
        let mut next = || tables.next().unwrap_or_default();
        Ok(RaceInput {
            shape: group(next())?,
            wire: group(next())?,
            strategy: group(next())?,
            app: group(next())?,
            losers: group(next())?,
            amounts: group(next())?,
            fingerprints: group(next())?,
            store: group(next())?,
            eviction: group(next())?,
            guard: group(next())?,
            transaction: group(next())?,
            standby: group(next())?,
            faults: group(next())?,
            hang_up: group(next())?,
            cluster: group(next())?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::groups;
    use crate::limits::{RACE, race_limit};

    /// The `[race]` keys whose values are not whole numbers (names,
    /// switches, lists of moves, durations written with their unit).
    const NOT_NUMBERS: &[&str] = &[
        "race.key",
        "race.schedule",
        "race.key_scope",
        "race.http",
        "race.strategy",
        "race.strategy_file",
        "race.orm",
        "race.via",
        "race.no_runner_connection",
        "race.runner_connection",
        "race.runner_holds_connection",
        "race.loser",
        "race.no_fingerprint",
        "race.fingerprint",
        "race.store",
        "race.redis_claim",
        "race.redis_fence",
        "race.redis_eviction",
        "race.redis_release",
        "race.redis_replica",
        "race.redis_failover",
        "race.cache_max_age",
        "race.audit",
        "race.on_failure",
        "race.transaction",
        "race.isolation",
        "race.read_back",
        "race.standby",
        "race.spread",
        "race.retry_at_once",
        "race.retry_node",
        "race.sync_wait",
        "race.retry_behind",
        "race.read_from",
        "race.synchronous",
        "race.standby_url",
        "race.failover",
        "race.crash",
        "race.hang_up",
        "race.kill_connection",
        "race.on_hangup",
    ];

    /// Every key a group reads has its bound in the one table, or is said
    /// here to take no number; a new key must be put in one or the other,
    /// and every bound in the table is a key some group reads.
    #[test]
    fn every_race_key_has_its_bound_or_takes_no_number() {
        let keys: Vec<String> = groups::<
            serde::de::value::MapDeserializer<
                'static,
                std::vec::IntoIter<(String, String)>,
                serde::de::value::Error,
            >,
        >()
        .iter()
        .flat_map(|g| g.keys.iter().map(|k| format!("race.{k}")))
        .collect();
        for key in &keys {
            let bounded = race_limit(key).is_some();
            let named = NOT_NUMBERS.contains(&key.as_str());
            assert!(
                bounded != named,
                "{key}: give it its bound in limits::RACE or name it in NOT_NUMBERS, not both"
            );
        }
        for limit in RACE {
            let top = limit.key.split('.').take(2).collect::<Vec<_>>().join(".");
            assert!(keys.contains(&top), "{} is no key of [race]", limit.key);
        }
    }
}
