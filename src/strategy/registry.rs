//! Every strategy idem knows, one line each: the name a race carries, and the spec that says the rest.
//!
//! Adding a strategy is a file of its own (its `handle` and its `SPEC`) and
//! one line here; the flag's values, `compare`'s five, the matrix's rows
//! and the JSON's names all come from this list.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::spec::{Keys, MatrixCell, Spec, TransactionRule};

/// Lists the strategies: makes [`StrategyKind`] with one variant each and
/// ties every variant to its spec.
macro_rules! registry {
    ($($(#[$doc:meta])* $variant:ident => $spec:path,)*) => {
        /// A strategy by name, as a race, a flag and a scenario file carry
        /// it; [`StrategyKind::spec`] says everything else.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum StrategyKind {
            $($(#[$doc])* $variant,)*
        }

        impl StrategyKind {
            /// Every strategy, in the order help and listings show them.
            pub const ALL: &'static [StrategyKind] = &[$(StrategyKind::$variant),*];

            /// Every strategy's name, in the same order.
            pub const NAMES: &'static [&'static str] = &[$($spec.name),*];

            /// What idem says and does about this strategy.
            pub fn spec(self) -> &'static Spec {
                match self {
                    $(StrategyKind::$variant => &$spec,)*
                }
            }
        }
    };
}

registry! {
    /// The work with no key at all.
    None => super::none::SPEC,
    /// Find the key; if missing, do the work, then store the key (lesson 1).
    CheckThenStore => super::check_then_store::SPEC,
    /// Claim the key as pending, do the work, complete the claim (lesson 2).
    ClaimWorkComplete => super::claim_work_complete::SPEC,
    /// The work is one INSERT ... ON CONFLICT DO NOTHING on the XP table.
    InsertUnique => super::insert_unique::SPEC,
    /// The whole guard (lesson 7).
    Guard => super::guard::SPEC,
    /// Check-then-store whose find is `SELECT ... FOR UPDATE` (lesson 8).
    FindForUpdate => super::find_for_update::SPEC,
    /// Check-then-store behind `pg_advisory_xact_lock` (lesson 8).
    AdvisoryLock => super::advisory_lock::SPEC,
    /// The claim in the process's memory: one app process only.
    Memory => super::memory::SPEC,
}

impl StrategyKind {
    /// The shapes of the course, the ones `compare` puts side by side.
    pub fn course() -> impl Iterator<Item = StrategyKind> {
        Self::ALL.iter().copied().filter(|k| k.spec().in_course)
    }

    /// The strategy a name stands for, as the flag spells it.
    pub fn named(name: &str) -> Option<StrategyKind> {
        Self::ALL.iter().copied().find(|k| k.name() == name)
    }

    /// The name as the flag spells it.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// Whether a request can lose a claim and have to wait for the winner.
    pub fn has_losers(self) -> bool {
        self.spec().losers
    }

    /// Whether the strategy keeps its keys in `idempotency_keys`.
    pub fn uses_key_table(self) -> bool {
        self.spec().keys == Keys::KeyTable
    }

    /// Whether the strategy's decision starts with a plain read a standby
    /// could answer (check-then-store's find, claim-work-complete's read of
    /// the claim); the others decide by a write or a lock, on the primary.
    pub fn finds_by_reading(self) -> bool {
        matches!(
            self,
            StrategyKind::CheckThenStore | StrategyKind::ClaimWorkComplete
        )
    }

    /// Whether the strategy's lock only means something inside the
    /// request's transaction, which it then takes by default.
    pub fn needs_transaction(self) -> bool {
        self.spec().transaction == TransactionRule::Needed
    }

    /// The strategy's rows in lesson 8's matrix, shapes in the order the
    /// course teaches them.
    pub fn matrix() -> Vec<(StrategyKind, MatrixCell)> {
        let mut kinds = Self::ALL.to_vec();
        kinds.sort_by_key(|k| k.spec().lesson);
        kinds
            .into_iter()
            .flat_map(|k| k.spec().matrix.iter().map(move |cell| (k, *cell)))
            .collect()
    }
}

impl std::fmt::Display for StrategyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for StrategyKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for StrategyKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        StrategyKind::named(&name)
            .ok_or_else(|| serde::de::Error::unknown_variant(&name, StrategyKind::NAMES))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_its_own_and_reads_back() {
        let mut names: Vec<&str> = StrategyKind::NAMES.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(
            names.len(),
            StrategyKind::ALL.len(),
            "two strategies share a name"
        );
        for kind in StrategyKind::ALL {
            let json = serde_json::to_string(kind).unwrap();
            assert_eq!(json, format!("\"{}\"", kind.name()));
            assert_eq!(serde_json::from_str::<StrategyKind>(&json).unwrap(), *kind);
        }
    }

    #[test]
    fn an_unknown_name_lists_the_known_ones() {
        let err = serde_json::from_str::<StrategyKind>("\"check-and-store\"").unwrap_err();
        assert!(err.to_string().contains("`check-then-store`"), "{err}");
    }

    #[test]
    fn the_course_is_its_five_in_order() {
        let names: Vec<&str> = StrategyKind::course().map(StrategyKind::name).collect();
        assert_eq!(
            names,
            [
                "none",
                "check-then-store",
                "claim-work-complete",
                "insert-unique",
                "guard"
            ]
        );
    }
}
