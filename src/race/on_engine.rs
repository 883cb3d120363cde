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
        Self::made(engine, input, false)
    }

    /// The stepped race `input` asks for, on `engine` (`idem explore`'s
    /// defaults already in `input`).
    pub fn stepped(
        engine: Engine,
        input: &crate::race::options::RaceInput,
    ) -> anyhow::Result<Self> {
        Self::made(engine, input, true)
    }

    fn made(
        engine: Engine,
        input: &crate::race::options::RaceInput,
        stepped: bool,
    ) -> anyhow::Result<Self> {
        use crate::limits::Origin;
        use crate::race::mariadb::MariadbRace;
        use crate::strategy::spec::OnMariadb;
        let strategy = input
            .strategy
            .strategy
            .unwrap_or(crate::race::DEFAULT_STRATEGY);
        Ok(match (engine, strategy.spec().on_mariadb) {
            (Engine::Postgres, _) => Self::Postgres(Box::new(match stepped {
                true => input.build_stepped()?,
                false => input.build(Origin::Flags)?,
            })),
            (Engine::Mariadb, OnMariadb::Refused(why)) => Self::Left(why),
            (Engine::Mariadb, OnMariadb::Runs(_)) => Self::Mariadb(Box::new(match stepped {
                true => MariadbRace::stepped_from_input(input)?,
                false => MariadbRace::from_input(input, Origin::Flags)?,
            })),
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
