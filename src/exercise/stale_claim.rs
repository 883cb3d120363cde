//! Exercise 7: the whole guard. The challenge's cases, a claim taken over while its owner works, and every interleaving of two.

use std::path::Path;

use anyhow::Result;

use super::cases::{base, races};
use super::spec::Exercise;
use crate::db::Database;
use crate::probe::conformance::Check;
use crate::strategy::guard_file::Dialect;

/// `idem challenge`'s four cases, the owner's late completion, and every
/// order of two requests' steps.
pub async fn judge(db: &Database, file: &Path) -> Result<Vec<Check>> {
    let mut checks = match crate::strategy::guard_file::load(file)?.engine {
        Dialect::Mariadb => {
            let cases = crate::challenge::cases(&base(file)).to_vec();
            super::on_mariadb::races(db.mariadb().await?, cases).await?
        }
        Dialect::Postgres => races(db, crate::challenge::cases(&base(file)).to_vec()).await?,
    };
    let stale_after = crate::challenge::STALE_AFTER.as_millis() as u64;
    checks.push(super::owner::owner_completes(db, file, stale_after).await?);
    checks.push(super::explored::every_interleaving(db, file).await?);
    Ok(checks)
}

/// Lesson 7's exercise.
pub const EXERCISE: Exercise = Exercise {
    lesson: 7,
    file: "7-stale-claim.toml",
    goal: "a stale claim is taken over once, a live one never, and only its owner completes it",
    try_it: super::spec::RACE_IT,
    start: include_str!("../../exercises/7-stale-claim.toml"),
    solution: include_str!("../../exercises/solutions/7-stale-claim.toml"),
    hints: [
        "The takeover's condition decides which pending claims may be taken. Which pending \
         claims should not be?",
        "Take over only a claim pending longer than the stale-claim age: on PostgreSQL add \
         idempotency_keys.locked_at < now() - $stale_after_ms * interval '1 millisecond' to \
         the WHERE; on MariaDB add locked_at < NOW(6) - INTERVAL $stale_after_ms * 1000 \
         MICROSECOND to the IF that changes `worker`. Then make complete update the row \
         only WHERE worker = $worker.",
        "One statement both tests and takes: two retries that arrive together queue on \
         the row's lock, and the second tests the row the first left, which is no longer \
         stale.",
    ],
    why: "ON CONFLICT DO UPDATE WHERE (on MariaDB, ON DUPLICATE KEY UPDATE with the test \
          inside its IF) is a test-and-set on the claim's row: the row lock makes the second \
          taker see the first taker's locked_at, so a stale claim changes hands once. The \
          owner check on completion keeps a request whose claim was taken from storing a \
          response over its successor's.",
    read: super::spec::read_guard_file,
    judge: |db, path| Box::pin(judge(db, path)),
    engine: crate::race::engine::Engine::Postgres,
    mariadb: super::spec::OnMariadb::Files(&super::spec::Starter {
        try_it: "idem race --engine mariadb --strategy-file {file} --pool-size 6",
        start: include_str!("../../exercises/mariadb/7-stale-claim.toml"),
        solution: include_str!("../../exercises/solutions/mariadb/7-stale-claim.toml"),
    }),
};
