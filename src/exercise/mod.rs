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
pub mod one_call;
pub mod owner;
pub mod scheduler;
pub mod stale_claim;
pub mod standby_choice;
pub mod store_choice;

use std::future::Future;
use std::path::Path;
use std::pin::Pin;

use anyhow::Result;

use crate::db::Database;
use crate::probe::conformance::Check;

/// One lesson's exercise.
#[derive(Debug)]
pub struct Exercise {
    pub lesson: u8,
    /// The file's name, as `idem exercise` writes it.
    pub file: &'static str,
    /// What to achieve, in one line.
    pub goal: &'static str,
    /// How to see what the file does, `{file}` standing for its path.
    pub try_it: &'static str,
    /// The file to start from, with the lesson's flaw in it.
    pub start: &'static str,
    /// A reference answer.
    pub solution: &'static str,
    /// A nudge, then the statement to change, then the answer's idea.
    pub hints: [&'static str; 3],
    /// Why the answer works, for after a pass.
    pub why: &'static str,
    /// Reads the learner's file (a guard file, an orders, loser, store,
    /// key or standby file), so that a broken one is refused before any
    /// database starts.
    pub read: fn(&Path) -> Result<()>,
    /// Races the file through the lesson's cases.
    pub judge: for<'a> fn(&'a Database, &'a Path) -> Judging<'a>,
}

/// What an exercise's judge returns: its cases' verdicts, once raced.
pub type Judging<'a> = Pin<Box<dyn Future<Output = Result<Vec<Check>>> + 'a>>;

impl Exercise {
    /// The name the solution is written under, beside the learner's file.
    pub fn solution_file(&self) -> String {
        self.file.replace(".toml", ".solution.toml")
    }
}

/// How a guard file is seen in action: lesson 1's race.
const RACE_IT: &str = "idem race --strategy-file {file} --pool-size 6";

/// Every exercise, by lesson.
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
];

/// Reads the guard file at `path`, as most exercises' readers do.
fn read_guard_file(path: &Path) -> Result<()> {
    crate::strategy::guard_file::load(path).map(drop)
}

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
