//! The exercises judged on MariaDB (InnoDB): a guard file that says `engine = "mariadb"`, raced and explored on a disposable MariaDB by the same cases as on PostgreSQL.

use std::path::Path;

use anyhow::Result;

use super::cases::{base, held_in_a_race};
use crate::db::mariadb::Mariadb;
use crate::explore;
use crate::limits::Origin;
use crate::probe::conformance::Check;
use crate::race::Outcome;
use crate::race::mariadb::{self, EngineResult, MariadbRace};
use crate::race::options::RaceInput;
use crate::race::told::{Fact, Who, tell};

/// Exercise 2 on MariaDB: five at once, twenty at once (each with a
/// connection of its own), then every order of two requests' steps.
pub async fn claim_first(db: &Mariadb, file: &Path) -> Result<Vec<Check>> {
    let five = base(file);
    let twenty = five.clone().with(|r| {
        r.shape.workers = Some(20);
        r.app.pool_size = Some(21);
    });
    let cases = [
        (
            five,
            "five at once",
            "1 XP row and 1 service call; the other four do no work and get no error",
        ),
        (
            twenty,
            "twenty at once",
            "the same with twenty requests, each with a connection of its own",
        ),
    ];
    let mut checks = Vec::new();
    for (input, case, demands) in cases {
        let r = mariadb::run(db, &MariadbRace::from_input(&input, Origin::Flags)?, 1).await?;
        let requests = r.reports.iter().filter(|w| !w.retry).map(|w| &w.steps[..]);
        let passed = held_once(&r);
        checks.push(held_in_a_race(
            requests.collect(),
            (case, demands),
            passed,
            said(&r),
        ));
    }
    checks.push(every_interleaving(db, file).await?);
    Ok(checks)
}

/// One XP row and one call, and no request answered with an error.
fn held_once(r: &EngineResult) -> bool {
    r.xp_rows == 1 && r.service_calls == 1 && r.reports.iter().all(|w| w.status < 500)
}

/// "1 XP row, 1 service call; created 1, conflict 4", each figure a fact
/// checked against the race before it is shown, the server's error (its
/// number and SQLSTATE) beside a request that failed.
fn said(r: &EngineResult) -> String {
    let mut told = crate::race::told::rows_and_calls(r.xp_rows, r.service_calls);
    told.push("; ");
    let count = |o: Outcome| r.reports.iter().filter(|w| w.outcome == o).count() as u64;
    told.append(crate::race::told::outcomes(count));
    if let Some(w) = r.reports.iter().find(|w| w.outcome == Outcome::Error) {
        let code = match &w.error {
            Some(e) => format!(" (error {})", e.shown()),
            None => String::new(),
        };
        let worker = Fact::Worker(w.worker, Who::Ended(Outcome::Error));
        tell!(told, " (worker {}: {}{})", worker, w.did.clone(), code);
    }
    told.finish_on_engine(r)
}

/// The file explored with two requests on MariaDB.
async fn every_interleaving(db: &Mariadb, file: &Path) -> Result<Check> {
    let input = RaceInput::default().with(|r| r.strategy.strategy_file = Some(file.to_path_buf()));
    let race = MariadbRace::stepped_from_input(&explore::input_of(&input))?;
    let guard = format!("--engine mariadb --strategy-file {}", file.display());
    let replay = explore::replay_for(&guard, race.settings());
    let e = explore::explore_mariadb(db, &race, &explore::Walking::steps(&replay), |_| {}).await?;
    super::explored::judged(&e)
}
