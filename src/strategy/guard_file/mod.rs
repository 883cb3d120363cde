//! A strategy written as a file: one of the course's shapes, with the SQL of each step in TOML.
//!
//! A learner's exercise and a practitioner's own guard are the same thing:
//! a shape (find-then-store, or claim-work-complete) and the statement each
//! of its steps sends, with named parameters (`$key`, `$fingerprint`, ...).
//! idem races it as it races its own strategies: the same tables, the
//! same trace with the file's SQL beside each step, the same JSON.
//!
//! The work itself (the service call and the XP row) stays idem's: what a
//! file says is how the key is found, claimed, stored and completed.
//!
//! A file is read once per process and kept for the process's life, so its
//! statements are `'static` as the course's are, and the trace, the
//! statement cache and the schema's qualified texts take them alike.

mod named;
mod read;
mod run;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use anyhow::Result;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::StrategyKind;
use super::transaction::{Isolation, Transaction};
use crate::db::statements::Sql;
use crate::request::Step;

pub use named::Param;
pub use run::FileGuard;

/// The most a guard file may hold.
pub const MAX_GUARD_FILE_BYTES: u64 = 64 * 1024;

/// The course's shapes a file can take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Shape {
    /// Find the key; if missing, do the work, then store it (lesson 1).
    FindThenStore,
    /// Claim the key, do the work, complete the claim (lesson 2).
    ClaimWorkComplete,
}

impl Shape {
    pub fn name(self) -> &'static str {
        match self {
            Shape::FindThenStore => "find-then-store",
            Shape::ClaimWorkComplete => "claim-work-complete",
        }
    }

    /// The built-in strategy of the same shape: its figure, its story and
    /// its rules are the file's.
    pub fn kind(self) -> StrategyKind {
        match self {
            Shape::FindThenStore => StrategyKind::CheckThenStore,
            Shape::ClaimWorkComplete => StrategyKind::ClaimWorkComplete,
        }
    }

    /// The steps a file of this shape gives, the required ones first.
    pub fn steps(self) -> (&'static [StepName], &'static [StepName]) {
        match self {
            Shape::FindThenStore => (&[StepName::Find, StepName::Store], &[StepName::Lock]),
            Shape::ClaimWorkComplete => (
                &[StepName::Claim, StepName::Replay, StepName::Complete],
                &[],
            ),
        }
    }
}

/// A step a file writes the SQL of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StepName {
    /// Before the find: a lock on the key (held to the transaction's end).
    Lock,
    /// Looks the key up; a row means it was stored.
    Find,
    /// Stores the key after the work.
    Store,
    /// Inserts the claim; a row back (its id) means this request won it.
    Claim,
    /// A loser reads the claim it lost to (status, response, fingerprint).
    Replay,
    /// Completes the won claim with the response.
    Complete,
}

impl StepName {
    pub const ALL: [StepName; 6] = [
        StepName::Lock,
        StepName::Find,
        StepName::Store,
        StepName::Claim,
        StepName::Replay,
        StepName::Complete,
    ];

    pub fn name(self) -> &'static str {
        match self {
            StepName::Lock => "lock",
            StepName::Find => "find",
            StepName::Store => "store",
            StepName::Claim => "claim",
            StepName::Replay => "replay",
            StepName::Complete => "complete",
        }
    }

    /// The step of the trace it is shown as.
    pub fn step(self) -> Step {
        match self {
            StepName::Lock => Step::Lock,
            StepName::Find => Step::Find,
            StepName::Store => Step::Store,
            StepName::Claim => Step::Claim,
            StepName::Replay => Step::Read,
            StepName::Complete => Step::Complete,
        }
    }

    /// The parameters its statement may name: what the request knows at
    /// that point. [`Param::ALL`] lists them in the order they become
    /// known: what the request asks, then what the work made, then the claim.
    pub fn params(self) -> &'static [Param] {
        let known = match self {
            StepName::Lock | StepName::Find | StepName::Claim | StepName::Replay => Param::ASKED,
            StepName::Store => Param::WORKED,
            StepName::Complete => Param::ALL.len(),
        };
        &Param::ALL[..known]
    }

    fn named(name: &str) -> Option<StepName> {
        StepName::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// One step's statement, ready to send.
#[derive(Debug)]
pub struct Statement {
    pub step: StepName,
    /// The statement as the file writes it, named parameters and all: what
    /// the trace shows beside the step.
    pub written: &'static str,
    /// The text with `$1, $2, ...` for the names, and their types.
    pub sql: Sql,
    /// The parameter each `$n` stands for, in order.
    pub params: Vec<Param>,
    /// The file's line the statement begins on.
    pub line: usize,
}

/// A guard file, read and checked.
#[derive(Debug)]
pub struct GuardFile {
    /// The path as the user gave it, to name the file in messages.
    pub name: String,
    /// Its text, sent to an app replica, which reads it again.
    source: String,
    pub shape: Shape,
    /// Whether a found key's stored fingerprint is compared with the
    /// request's (422 when they differ).
    pub fingerprint: bool,
    /// The request's transaction, if the file asks for one.
    pub transaction: Option<Transaction>,
    pub isolation: Option<Isolation>,
    pub statements: Vec<Statement>,
}

impl GuardFile {
    /// The statement of `step`, if the file gives one.
    pub fn statement(&self, step: StepName) -> Option<&Statement> {
        self.statements.iter().find(|s| s.step == step)
    }

    /// Where a statement is, for a message: `guard.toml line 9, step claim`.
    pub fn place(&self, statement: &Statement) -> String {
        format!(
            "{} line {}, step {}",
            self.name,
            statement.line,
            statement.step.name()
        )
    }
}

/// The guard file at `path`, read once per process: a second call for the
/// same path returns the first's.
pub fn load(path: &Path) -> Result<GuardRef> {
    static LOADED: OnceLock<Mutex<HashMap<PathBuf, GuardRef>>> = OnceLock::new();
    let loaded = LOADED.get_or_init(Default::default);
    if let Some(file) = loaded.lock().unwrap_or_else(|e| e.into_inner()).get(path) {
        return Ok(*file);
    }
    let bytes = crate::files::read_regular(path, MAX_GUARD_FILE_BYTES, "guard file")?;
    let name = path.display().to_string();
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("guard file {name} is not UTF-8 text"))?;
    let file = GuardRef(Box::leak(Box::new(read::parse(&name, &text)?)));
    loaded
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(path.to_path_buf(), file);
    Ok(file)
}

/// A guard file read for this process, as the race's settings carry it.
/// An app replica is sent its name and text, and reads it again.
#[derive(Debug, Clone, Copy)]
pub struct GuardRef(pub &'static GuardFile);

impl std::ops::Deref for GuardRef {
    type Target = GuardFile;
    fn deref(&self) -> &GuardFile {
        self.0
    }
}

#[derive(Serialize, Deserialize)]
struct Sent {
    name: String,
    source: String,
}

impl Serialize for GuardRef {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Sent {
            name: self.name.clone(),
            source: self.source.clone(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for GuardRef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let sent = Sent::deserialize(d)?;
        let file = read::parse(&sent.name, &sent.source).map_err(serde::de::Error::custom)?;
        Ok(GuardRef(Box::leak(Box::new(file))))
    }
}
