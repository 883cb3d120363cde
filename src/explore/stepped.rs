//! A race the explorer can run step by step, on either engine, and what one of its runs left.

use anyhow::Result;

use super::verdict::{self, Failure, Left};
use crate::db::mariadb::Mariadb;
use crate::race::mariadb::{self, EngineResult, MariadbRace};
use crate::race::stepper::Controller;
use crate::race::{Race, RaceResult};

/// One stepped run's result, as its engine reported it.
#[derive(Debug, Clone)]
pub enum Ran {
    Postgres(Box<RaceResult>),
    Mariadb(Box<EngineResult>),
}

impl Ran {
    /// What the run left that a verdict reads.
    pub fn left(&self) -> Left {
        match self {
            Ran::Postgres(r) => Left::of(r),
            Ran::Mariadb(r) => Left::of_engine(r),
        }
    }

    /// The ways it broke the guard; empty when it held.
    pub fn failures(&self) -> Vec<Failure> {
        verdict::judged(&self.left())
    }
}

/// A race that runs step by step: `drive` moves its workers.
pub(super) trait Stepped {
    async fn stepped(&self, drive: impl AsyncFnOnce(&mut Controller) -> Result<()>) -> Result<Ran>;
}

impl Stepped for Race<'_> {
    async fn stepped(&self, drive: impl AsyncFnOnce(&mut Controller) -> Result<()>) -> Result<Ran> {
        Ok(Ran::Postgres(Box::new(self.run_stepped(drive).await?)))
    }
}

/// A MariaDB race on its server.
pub(super) struct OnMariadb<'a> {
    pub db: &'a Mariadb,
    pub race: &'a MariadbRace,
}

impl Stepped for OnMariadb<'_> {
    async fn stepped(&self, drive: impl AsyncFnOnce(&mut Controller) -> Result<()>) -> Result<Ran> {
        let result = mariadb::run_stepped(self.db, self.race, drive).await?;
        Ok(Ran::Mariadb(Box::new(result)))
    }
}
