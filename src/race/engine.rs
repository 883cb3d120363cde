//! The database engines a race runs on: PostgreSQL, idem's first, and MariaDB (InnoDB), where the same guard can give other answers.
//!
//! An engine is a row of [`ENGINES`]: what it is called, which isolation
//! level a request's transaction gets when none is asked for (each
//! engine's own default), and the word for the server in sentences. A
//! strategy says in its spec whether it runs on MariaDB
//! ([`crate::strategy::spec::OnMariadb`]), so the list of what runs where
//! is the strategies' list, not a match here.

use serde::{Deserialize, Serialize};

use crate::strategy::transaction::Isolation;

/// An engine, as `--engine` and the JSON name it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Engine {
    /// PostgreSQL: a disposable cluster, or --database-url.
    #[default]
    Postgres,
    /// MariaDB with InnoDB: a disposable server of idem's own.
    Mariadb,
}

/// What idem says and does about one engine.
pub struct EngineSpec {
    pub engine: Engine,
    /// The server, as a sentence names it.
    pub server: &'static str,
    /// The isolation level a request's transaction gets unless told.
    pub default_isolation: Isolation,
}

/// Every engine, in the order help and tables show them.
pub const ENGINES: &[EngineSpec] = &[
    EngineSpec {
        engine: Engine::Postgres,
        server: "PostgreSQL",
        default_isolation: Isolation::ReadCommitted,
    },
    EngineSpec {
        engine: Engine::Mariadb,
        server: "MariaDB",
        default_isolation: Isolation::INNODB_DEFAULT,
    },
];

impl Engine {
    /// This engine's row of [`ENGINES`].
    pub fn spec(self) -> &'static EngineSpec {
        ENGINES
            .iter()
            .find(|s| s.engine == self)
            .expect("every engine has a row in ENGINES")
    }
}

/// The engines whose demonstrations a lesson or a scenario run shows
/// (`--engine`): every engine unless some are named.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Engines {
    /// The engines named; none names them all.
    named: Vec<Engine>,
}

impl Engines {
    pub fn only(named: Vec<Engine>) -> Self {
        Engines { named }
    }

    /// Whether a demonstration on `engine` runs.
    pub fn takes(&self, engine: Engine) -> bool {
        self.named.is_empty() || self.named.contains(&engine)
    }

    /// Whether the learner chose the engines (`--engine` given).
    pub fn chosen(&self) -> bool {
        !self.named.is_empty()
    }

    /// The engines named, as a sentence names them ("MariaDB"), or "every
    /// engine".
    pub fn said(&self) -> String {
        match self.named.as_slice() {
            [] => "every engine".to_string(),
            named => named
                .iter()
                .map(|e| e.spec().server)
                .collect::<Vec<_>>()
                .join(" and "),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_engine_named_takes_every_engine_and_one_named_takes_only_it() {
        for spec in ENGINES {
            assert!(Engines::default().takes(spec.engine));
        }
        let mariadb = Engines::only(vec![Engine::Mariadb]);
        assert!(mariadb.takes(Engine::Mariadb) && !mariadb.takes(Engine::Postgres));
        assert_eq!(mariadb.said(), "MariaDB");
        assert!(!Engines::default().chosen() && mariadb.chosen());
    }
}
