//! The case no race can settle: a lesson's guard file run under every interleaving of two requests' steps, FAIL with the shortest order that breaks it.

use std::path::Path;

use anyhow::Result;

use crate::db::Database;
use crate::db::mariadb::Mariadb;
use crate::explore;
use crate::probe::conformance::Check;
use crate::race::mariadb::MariadbRace;
use crate::race::options::RaceInput;
use crate::strategy::guard_file::Dialect;

const CASE: &str = "every interleaving of two requests";
const DEMANDS: &str =
    "the guard holds in every order of the two requests' steps, not only in a burst";

/// The file at `file`, explored with two requests on the engine it is
/// written for.
pub async fn every_interleaving(db: &Database, file: &Path) -> Result<Check> {
    if crate::strategy::guard_file::load(file)?.engine == Dialect::Mariadb {
        return on_mariadb(db.mariadb().await?, file).await;
    }
    let input = RaceInput::default().with(|r| r.strategy.strategy_file = Some(file.to_path_buf()));
    let settings = explore::settings(&input)?;
    let replay = explore::replay_for(&format!("--strategy-file {}", file.display()), &settings);
    let e = explore::explore(db, settings, &explore::Walking::steps(&replay), |_| {}).await?;
    judged(&e)
}

/// The file explored with two requests on MariaDB (`engine = "mariadb"`).
pub async fn on_mariadb(db: &Mariadb, file: &Path) -> Result<Check> {
    let input = RaceInput::default().with(|r| r.strategy.strategy_file = Some(file.to_path_buf()));
    let race = MariadbRace::stepped_from_input(&explore::input_of(&input))?;
    let guard = format!("--engine mariadb --strategy-file {}", file.display());
    let replay = explore::replay_for(&guard, race.settings());
    let e = explore::explore_mariadb(db, &race, &explore::Walking::steps(&replay), |_| {}).await?;
    judged(&e)
}

/// The case's verdict on an exploration of a guard file, on any engine.
pub fn judged(e: &explore::Exploration) -> Result<Check> {
    // Its counts are said only if they bear each other out, as the
    // explorer's own verdict is.
    let wrong = e.disagreements();
    if !wrong.is_empty() {
        anyhow::bail!("the exploration's counts disagree: {}", wrong.join("; "));
    }
    let saw = match (&e.shortest, e.total) {
        (Some(schedule), _) => format!(
            "failed in {} of {}; the shortest: --schedule {} ({}); replay it with idem step",
            e.failing,
            e.interleavings,
            explore::joined(schedule),
            e.shortest_failures
                .iter()
                .map(|f| f.name())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        (None, Some(total)) => format!("held in all {total}"),
        (None, None) => {
            return Ok(Check::not_applicable(
                CASE,
                DEMANDS,
                format!(
                    "held in the {} run; the bound stopped the walk",
                    e.interleavings
                ),
            ));
        }
    };
    Ok(Check::judged(CASE, DEMANDS, e.failing == 0, saw))
}
