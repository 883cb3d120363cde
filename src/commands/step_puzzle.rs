//! `idem step --goal N`: the scheduler as a game. The learner moves the workers one step at a time to make a flawed guard leave N XP rows; idem says whether the goal was reached, and in how many of all the orders it can be.

use anyhow::{Result, bail};

use crate::db::Database;
use crate::db::mariadb::Mariadb;
use crate::explore;
use crate::race::mariadb::{EngineResult, MariadbRace};
use crate::race::{RaceResult, RaceSettings};
use crate::report::Output;
use crate::report::style::{bad, good, strong};

/// The puzzle as it is set, before the first step.
pub fn told(settings: &RaceSettings, goal: u64) -> String {
    format!(
        "{}\nYou are the scheduler: each turn you choose which request takes its next \
         step. Find an order of steps that leaves {goal} XP row{}.\n",
        strong(format!(
            "Puzzle: make {} ({}) leave {goal} XP row{}",
            settings.strategy().name(),
            plural(settings.requests().workers() as u64, "request"),
            if goal == 1 { "" } else { "s" }
        )),
        if goal == 1 { "" } else { "s" }
    )
}

/// Whether the run reached the goal, and in how many of every order of
/// these requests' steps it can be reached (walked after the run). Fails,
/// for the exit status, when it was not reached.
pub async fn judged(
    db: &Database,
    settings: RaceSettings,
    goal: u64,
    result: &RaceResult,
    out: Output,
) -> Result<()> {
    let steps: usize = result.reports.iter().map(|w| w.steps.len()).sum();
    let found =
        explore::explore(db, settings, &explore::Walking::steps("idem step"), |_| {}).await?;
    judged_by(&found, goal, (result.xp_rows, steps), out)
}

/// The same on MariaDB: the orders walked there.
pub async fn judged_on_mariadb(
    db: &Mariadb,
    race: &MariadbRace,
    goal: u64,
    result: &EngineResult,
    out: Output,
) -> Result<()> {
    // A request's checkout on MariaDB is a move of its own that its report
    // keeps no step for: one more move each.
    let steps: usize = result.reports.iter().map(|w| w.steps.len() + 1).sum();
    let walking = explore::Walking::steps("idem step --engine mariadb");
    let found = explore::explore_mariadb(db, race, &walking, |_| {}).await?;
    judged_by(&found, goal, (result.xp_rows, steps), out)
}

/// The verdict on one order that left `made` XP rows in `steps` steps,
/// beside the exploration of every order.
fn judged_by(
    found: &explore::Exploration,
    goal: u64,
    (made, steps): (u64, usize),
    out: Output,
) -> Result<()> {
    let reach = found.xp_rows.get(&goal).copied().unwrap_or(0);
    let orders = match found.total {
        Some(total) if found.reduced => format!("{reach} of the {total} orders explored"),
        Some(total) => format!("{reach} of all {total} orders"),
        None => format!("{reach} of the first {} orders", found.interleavings),
    };
    if made == goal {
        out.text(|| {
            format!(
                "\n{} {orders} of these steps do it.\n",
                good(format!(
                    "Goal reached: {} after {steps} steps.",
                    plural(goal, "XP row")
                ))
            )
        })?;
        return Ok(());
    }
    out.text(|| {
        format!(
            "\n{} {orders} of these steps leave {}.\n",
            bad(format!(
                "Not yet: this order left {}.",
                plural(made, "XP row")
            )),
            plural(goal, "XP row")
        )
    })?;
    bail!(
        "the goal was {}; this order left {}",
        plural(goal, "XP row"),
        made
    )
}

fn plural(n: u64, what: &str) -> String {
    match n {
        1 => format!("1 {what}"),
        n => format!("{n} {what}s"),
    }
}
