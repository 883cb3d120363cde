//! What a guard file says, read and checked: its shape, its steps and their statements.

use super::named::Param;
use crate::db::statements::Sql;
use crate::request::Step;
use crate::strategy::StrategyKind;
use crate::strategy::transaction::{Isolation, Transaction};
use serde::{Deserialize, Serialize};

/// The server a file's SQL is written for: `engine = "mariadb"` in the
/// file, PostgreSQL unless it says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dialect {
    #[default]
    Postgres,
    Mariadb,
}

impl Dialect {
    pub fn server(self) -> &'static str {
        match self {
            Dialect::Postgres => "PostgreSQL",
            Dialect::Mariadb => "MariaDB",
        }
    }
}

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
            Shape::FindThenStore => (
                &[StepName::Find, StepName::Store],
                &[StepName::Lock, StepName::Fingerprint],
            ),
            Shape::ClaimWorkComplete => (
                &[StepName::Claim, StepName::Replay, StepName::Complete],
                &[StepName::Release, StepName::Fingerprint, StepName::Renew],
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
    /// After the work failed: lets the claim go, so that a retry can work.
    Release,
    /// Before anything else: the request's fingerprint, computed from what
    /// it asks (`$user_id`, `$amount`, `$lesson`); what it returns is
    /// `$fingerprint` in the other steps (lesson 4).
    Fingerprint,
    /// While the work runs, from the heartbeat's own connection every
    /// `--heartbeat-ms`: keeps the won claim from going stale (lesson 9).
    Renew,
}

impl StepName {
    pub const ALL: [StepName; 9] = [
        StepName::Lock,
        StepName::Find,
        StepName::Store,
        StepName::Claim,
        StepName::Replay,
        StepName::Complete,
        StepName::Release,
        StepName::Fingerprint,
        StepName::Renew,
    ];

    pub fn name(self) -> &'static str {
        match self {
            StepName::Lock => "lock",
            StepName::Find => "find",
            StepName::Store => "store",
            StepName::Claim => "claim",
            StepName::Replay => "replay",
            StepName::Complete => "complete",
            StepName::Release => "release",
            StepName::Fingerprint => "fingerprint",
            StepName::Renew => "renew",
        }
    }

    /// The step of the trace it is shown as; the fingerprint is a note
    /// on the request's first step, and a renewal is the heartbeat's, not
    /// the request's.
    pub fn step(self) -> Option<Step> {
        Some(match self {
            StepName::Lock => Step::Lock,
            StepName::Find => Step::Find,
            StepName::Store => Step::Store,
            StepName::Claim => Step::Claim,
            StepName::Replay => Step::Read,
            // The claim's last word either way: shown where a completion is.
            StepName::Complete | StepName::Release => Step::Complete,
            StepName::Fingerprint | StepName::Renew => return None,
        })
    }

    /// The parameters its statement may name: what the request knows at
    /// that point. [`Param::ALL`] lists them in the order they become
    /// known: what the request asks, then what the work made, then the claim.
    /// A release comes after failed work: what the work would have made is
    /// NULL there.
    pub fn params(self) -> &'static [Param] {
        let known = match self {
            // What the request asks, and nothing of idem's own fingerprint.
            StepName::Fingerprint => return &Param::ASKS,
            // The heartbeat knows a claim by its id and its owner alone.
            StepName::Renew => return &[Param::ClaimId, Param::Worker],
            StepName::Lock | StepName::Find | StepName::Claim | StepName::Replay => Param::ASKED,
            StepName::Store => Param::WORKED,
            StepName::Complete | StepName::Release => Param::ALL.len(),
        };
        &Param::ALL[..known]
    }

    pub(super) fn named(name: &str) -> Option<StepName> {
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
    /// In a file for MariaDB: the text with a `?` for each name, and what
    /// each `?` stands for, in order (a name used twice is bound twice).
    pub on_mariadb: Option<(&'static str, Vec<Param>)>,
    /// The file's line the statement begins on.
    pub line: usize,
}

/// A guard file, read and checked.
#[derive(Debug)]
pub struct GuardFile {
    /// The path as the user gave it, to name the file in messages.
    pub(crate) name: String,
    /// Its text, sent to an app replica, which reads it again.
    pub(super) source: String,
    pub(crate) shape: Shape,
    /// The server its SQL is written for.
    pub(crate) engine: Dialect,
    /// Whether a found key's stored fingerprint is compared with the
    /// request's (422 when they differ): `fingerprint = true`, or a
    /// fingerprint step of the file's own.
    pub(crate) fingerprint: bool,
    /// The request's transaction, if the file asks for one.
    pub(crate) transaction: Option<Transaction>,
    pub(crate) isolation: Option<Isolation>,
    /// What the workers' commits wait for beside a standby (`off` or
    /// `remote_apply`), if the file says.
    pub(crate) synchronous: Option<String>,
    /// Whether the request's reads on a Galera cluster wait until their
    /// node has applied what the cluster certified before them
    /// (`wsrep_sync_wait = 1`): `sync_wait = true`.
    pub(crate) sync_wait: bool,
    /// What a request answers when a Galera cluster refuses a COMMIT of
    /// its (1213): `refused_commit`.
    pub(crate) refused_commit: RefusedCommit,
    pub(crate) statements: Vec<Statement>,
}

/// What a request answers when a Galera cluster refuses one of its
/// COMMITs (1213) because another node's write of the same row was
/// certified first: the claim's own COMMIT, or the request's after its
/// work. A file for MariaDB chooses with `refused_commit`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RefusedCommit {
    /// The error goes up, as in an app that does not catch it: 500.
    #[default]
    Error,
    /// Taken as the key lost to another request: the request reads the
    /// key as a loser does (the stored response, or 409 while pending).
    Read,
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
