//! Exercise 2: the claim. A check-then-store guard file made to claim the key before its work: five at once, twenty at once, and every interleaving of two.

use std::path::Path;

use anyhow::Result;

use super::cases::{Case, base, one_call, one_call_of_twenty, races};
use super::spec::Exercise;
use crate::db::Database;
use crate::probe::conformance::Check;
use crate::race::raced::Raced;
use crate::strategy::guard_file::Dialect;

/// Five at once, twenty at once (each with a connection of its own), then
/// every order of two requests' steps: on the engine the file is written
/// for.
pub async fn judge(db: &Database, file: &Path) -> Result<Vec<Check>> {
    let mut checks = match crate::strategy::guard_file::load(file)?.engine {
        Dialect::Mariadb => super::on_mariadb::races(db.mariadb().await?, cases(file)).await?,
        Dialect::Postgres => races(db, cases(file)).await?,
    };
    checks.push(super::explored::every_interleaving(db, file).await?);
    Ok(checks)
}

/// The races, on either engine.
fn cases<R: Raced>(file: &Path) -> Vec<Case<R>> {
    let five = base(file);
    let twenty = five.clone().with(|r| {
        r.shape.workers = Some(20);
        r.app.pool_size = Some(21);
    });
    vec![(five, one_call), (twenty, one_call_of_twenty)]
}

/// Lesson 2's exercise.
pub const EXERCISE: Exercise = Exercise {
    lesson: 2,
    file: "2-claim-first.toml",
    goal: "one XP row when five requests with one key arrive at once, and no work for the other four",
    try_it: super::spec::RACE_IT,
    start: include_str!("../../exercises/2-claim-first.toml"),
    solution: include_str!("../../exercises/solutions/2-claim-first.toml"),
    hints: [
        "The find and the store are two statements with the work between them. Every \
         request that finds nothing before the first store goes on to work. What could \
         be written before the work instead of after it?",
        "Change the shape to claim-work-complete. Its claim is an INSERT of the key as \
         'pending' that returns the row's id (RETURNING id) when it gets in, and nothing \
         when the key is already there (ON CONFLICT (key) DO NOTHING on PostgreSQL, \
         INSERT IGNORE on MariaDB).",
        "The unique index on idempotency_keys.key decides at the claim, before any work: \
         one INSERT gets in, the others get no row back, read the claim (replay) and \
         answer 409 or the stored response.",
    ],
    why: "The decision moved from the store (after the work) to the claim (before it). \
          The unique index lets one INSERT in however the requests interleave, so \
          exactly one of them ever reaches the work.",
    read: super::spec::read_guard_file,
    judge: |db, path| Box::pin(judge(db, path)),
    engine: crate::race::engine::Engine::Postgres,
    mariadb: super::spec::OnMariadb::Files(&super::spec::Starter {
        try_it: "idem race --engine mariadb --strategy-file {file} --pool-size 6",
        start: include_str!("../../exercises/mariadb/2-claim-first.toml"),
        solution: include_str!("../../exercises/solutions/mariadb/2-claim-first.toml"),
    }),
};
