//! Learn by doing: a guard file per lesson with the lesson's flaw in it, the races that judge it, hints in stages.
//!
//! `idem exercise N` copies lesson N's file out, `idem check N` races the
//! learner's file with the lesson's [`cases`], and `idem hint N` gives the
//! [`Exercise::hints`] one at a time, then, after a pass, [`Exercise::why`].
//! The reference answers ship beside them (`exercises/solutions/`) and
//! must pass their own cases (the tests hold them to it).

pub mod cases;
pub mod claim_first;
pub mod explored;
pub mod fingerprint;
pub mod heartbeat;
pub mod key_design;
pub mod loser_choice;
pub mod on_mariadb;
pub mod one_call;
pub mod owner;
pub mod primaries;
pub mod scheduler;
pub mod spec;
pub mod stale_claim;
pub mod standby_choice;
pub mod store_choice;

use std::path::Path;

use anyhow::Result;

use crate::db::Database;
use crate::probe::conformance::Check;
pub use spec::Exercise;

/// Every exercise, in the order of the lessons: adding one is its file
/// (its [`Exercise`]: texts, reader and cases) and one line here.
pub const EXERCISES: &[Exercise] = &[
    scheduler::EXERCISE,
    claim_first::EXERCISE,
    loser_choice::EXERCISE,
    fingerprint::EXERCISE,
    store_choice::EXERCISE,
    key_design::EXERCISE,
    stale_claim::EXERCISE,
    one_call::EXERCISE,
    heartbeat::EXERCISE,
    standby_choice::EXERCISE,
    primaries::EXERCISE,
];

/// Reads lesson `lesson`'s kind of file at `path`, so that a broken one is
/// refused before any database starts.
pub fn read(lesson: u8, path: &Path) -> Result<()> {
    match for_lesson(lesson) {
        Some(e) => (e.read)(path),
        None => anyhow::bail!(none_for(lesson)),
    }
}

/// Judges the file at `path` with lesson `lesson`'s cases, on `db`.
pub async fn judge(db: &Database, lesson: u8, path: &Path) -> Result<Vec<Check>> {
    match for_lesson(lesson) {
        Some(e) => (e.judge)(db, path).await,
        None => anyhow::bail!(none_for(lesson)),
    }
}

/// Lesson `n`'s exercise, if it has one.
pub fn for_lesson(n: u8) -> Option<&'static Exercise> {
    EXERCISES.iter().find(|e| e.lesson == n)
}

/// Why a lesson has no exercise of its own, said where one is asked for.
pub fn none_for(n: u8) -> String {
    let lessons: Vec<String> = EXERCISES.iter().map(|e| e.lesson.to_string()).collect();
    format!(
        "lesson {n} has no exercise yet; lessons {} have one",
        lessons.join(", ")
    )
}
