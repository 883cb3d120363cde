//! What an exercise is: its texts, the reader of its file and its judge. Each exercise's file holds one, and [`super::EXERCISES`] lists them.

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
    pub(crate) goal: &'static str,
    /// How to see what the file does, `{file}` standing for its path.
    pub try_it: &'static str,
    /// The file to start from, with the lesson's flaw in it.
    pub start: &'static str,
    /// A reference answer.
    pub solution: &'static str,
    /// A nudge, then the statement to change, then the answer's idea.
    pub(crate) hints: [&'static str; 3],
    /// Why the answer works, for after a pass.
    pub(crate) why: &'static str,
    /// Reads the learner's file (a guard file, an orders, loser, store,
    /// key or standby file), so that a broken one is refused before any
    /// database starts.
    pub(crate) read: fn(&Path) -> Result<()>,
    /// Races the file through the lesson's cases.
    pub(crate) judge: for<'a> fn(&'a Database, &'a Path) -> Judging<'a>,
    /// The engine its own files are written for, and its cases race on.
    pub engine: crate::race::engine::Engine,
    /// The same exercise on MariaDB (InnoDB), where it has one (the judge
    /// races a file that says `engine = "mariadb"` there), or why not.
    pub mariadb: OnMariadb,
}

/// An exercise on MariaDB.
#[derive(Debug)]
pub enum OnMariadb {
    /// Its files there.
    Files(&'static Starter),
    /// Why it has none, said where one is asked for.
    Left(&'static str),
    /// MariaDB is its own engine.
    Own,
}

impl OnMariadb {
    /// Its files on MariaDB, if it has them there.
    #[cfg(feature = "internals")]
    pub fn files(&self) -> Option<&'static Starter> {
        match self {
            OnMariadb::Files(starter) => Some(starter),
            OnMariadb::Left(_) | OnMariadb::Own => None,
        }
    }
}

/// Why an exercise whose cases race on PostgreSQL has no files for
/// MariaDB yet, when nothing more is to be said.
pub const NOT_YET: OnMariadb = OnMariadb::Left("its cases race on PostgreSQL only so far");

/// An exercise's files on another engine.
#[derive(Debug)]
pub struct Starter {
    /// How to see what the file does there, `{file}` standing for its path.
    pub try_it: &'static str,
    /// The file to start from, with the lesson's flaw in it.
    pub start: &'static str,
    /// A reference answer.
    pub solution: &'static str,
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
pub const RACE_IT: &str = "idem race --strategy-file {file} --pool-size 6";

/// Reads the guard file at `path`, as most exercises' readers do.
pub fn read_guard_file(path: &Path) -> Result<()> {
    crate::strategy::guard_file::load(path).map(drop)
}
