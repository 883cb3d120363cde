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
