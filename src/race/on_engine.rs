//! One race as the engine asked for runs it: what `compare` and `matrix` hold for each row before they race it.

use super::engine::Engine;

/// One race as an engine runs it: PostgreSQL's settings, MariaDB's race,
/// or why the strategy has no shape on that engine.
pub enum OnEngine {
    Postgres(Box<crate::race::RaceSettings>),
    Mariadb(Box<crate::race::mariadb::MariadbRace>),
    Left(&'static str),
}

impl OnEngine {
    /// The race `input` asks for, on `engine`.
    pub fn of(engine: Engine, input: &crate::race::options::RaceInput) -> anyhow::Result<Self> {
        use crate::limits::Origin;
        use crate::strategy::spec::OnMariadb;
        let strategy = input
            .strategy
            .strategy
            .unwrap_or(crate::race::DEFAULT_STRATEGY);
        Ok(match (engine, strategy.spec().on_mariadb) {
            (Engine::Postgres, _) => Self::Postgres(Box::new(input.build(Origin::Flags)?)),
            (Engine::Mariadb, OnMariadb::Refused(why)) => Self::Left(why),
            (Engine::Mariadb, OnMariadb::Runs(_)) => Self::Mariadb(Box::new(
                crate::race::mariadb::MariadbRace::from_input(input, Origin::Flags)?,
            )),
        })
    }

    /// The stepped race `input` asks for, on `engine` (`idem explore`'s
    /// defaults already in `input`).
    pub fn stepped(
        engine: Engine,
        input: &crate::race::options::RaceInput,
    ) -> anyhow::Result<Self> {
        use crate::strategy::spec::OnMariadb;
        let strategy = input
            .strategy
            .strategy
            .unwrap_or(crate::race::DEFAULT_STRATEGY);
        Ok(match (engine, strategy.spec().on_mariadb) {
            (Engine::Postgres, _) => Self::Postgres(Box::new(input.build_stepped()?)),
            (Engine::Mariadb, OnMariadb::Refused(why)) => Self::Left(why),
            (Engine::Mariadb, OnMariadb::Runs(_)) => Self::Mariadb(Box::new(
                crate::race::mariadb::MariadbRace::stepped_from_input(input)?,
            )),
        })
    }

    /// The race's settings, on either engine; `None` when it has none there.
    pub fn settings(&self) -> Option<&crate::race::RaceSettings> {
        match self {
            Self::Postgres(settings) => Some(settings),
            Self::Mariadb(race) => Some(race.settings()),
            Self::Left(_) => None,
        }
    }
}
