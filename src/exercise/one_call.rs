//! Exercise 8: one call. A guard file in one transaction per request that must keep the award service to one call, every request answered 201.

use std::path::Path;

use anyhow::Result;

use super::cases::{Case, base, every_answer_201, races};
use super::spec::Exercise;
use crate::db::Database;
use crate::probe::conformance::Check;
use crate::race::raced::Raced;
use crate::strategy::guard_file::Dialect;

/// Five requests, each in one transaction, on the engine the file is
/// written for.
pub async fn judge(db: &Database, file: &Path) -> Result<Vec<Check>> {
    match crate::strategy::guard_file::load(file)?.engine {
        Dialect::Mariadb => super::on_mariadb::races(db.mariadb().await?, cases(file)).await,
        Dialect::Postgres => races(db, cases(file)).await,
    }
}

fn cases<R: Raced>(file: &Path) -> Vec<Case<R>> {
    vec![(base(file), every_answer_201)]
}

/// Lesson 8's exercise.
pub const EXERCISE: Exercise = Exercise {
    lesson: 8,
    file: "8-one-call.toml",
    goal: "one award service call and one XP row, the other requests answered 201 from the stored key",
    try_it: super::spec::RACE_IT,
    start: include_str!("../../exercises/8-one-call.toml"),
    solution: include_str!("../../exercises/solutions/8-one-call.toml"),
    hints: [
        "SERIALIZABLE rolls the losers back after their work, when the service has already \
         been called. What would make them wait before the work instead?",
        "Add a lock step, which runs before the find: SELECT \
         pg_advisory_xact_lock(hashtextextended($key, 0)) on PostgreSQL, SELECT \
         GET_LOCK(CONCAT($operation, ':', $key), 10) on MariaDB. Then think about which \
         isolation level lets the find after the wait see the key stored meanwhile.",
        "The lock makes requests with one key take turns until each transaction ends. At \
         read-committed each statement sees what committed before it began, so the \
         second request's find sees the first's key.",
    ],
    why: "A transaction undoes rows, not calls: only making the requests wait before the \
          work saves the service. The advisory lock is that wait; READ COMMITTED lets the \
          find after it see the stored key, where a snapshot taken at the lock would not.",
    read: super::spec::read_guard_file,
    judge: |db, path| Box::pin(judge(db, path)),
    engine: crate::race::engine::Engine::Postgres,
    mariadb: super::spec::OnMariadb::Files(&super::spec::Starter {
        try_it: "idem race --engine mariadb --strategy-file {file} --pool-size 6",
        start: include_str!("../../exercises/mariadb/8-one-call.toml"),
        solution: include_str!("../../exercises/solutions/mariadb/8-one-call.toml"),
    }),
};
