//! What a strategy is, said once: the one description every strategy fills in, field by field.
//!
//! A strategy's file holds its `handle` and its [`Spec`]; the registry
//! (`registry.rs`) lists the specs, and everything else that needs to know
//! a strategy (the flag's help, the lesson's figure, the transaction rules,
//! the explanation, the Rails lines of `--sql`, the matrix's rows, the JSON
//! schema's enum) reads it from there. A `Spec` has no defaults: a new
//! strategy that leaves a field out does not compile.

use super::loser::LoserPolicy;
use super::orm::Orm;
use super::transaction::Isolation;
use super::{Step, Strategy};

/// Everything idem says and does about one strategy.
pub struct Spec {
    /// The name as `--strategy`, scenario files and the JSON spell it.
    pub(crate) name: &'static str,
    /// The flag's help line for this value.
    pub(crate) help: &'static str,
    /// The lesson that teaches it; the matrix shows shapes in this order.
    pub(crate) lesson: u8,
    /// One of the course's five, the shapes `compare` puts side by side.
    pub(crate) in_course: bool,
    /// Where it keeps its keys, which decides what the counts mean.
    pub(crate) keys: Keys,
    /// Whether it runs in the request's transaction, may, or must not.
    pub(crate) transaction: TransactionRule,
    /// Whether a request can lose a claim and have a `--loser` policy.
    pub(crate) losers: bool,
    /// The XP rows the course predicts when the race window is wide.
    pub(crate) figure: Figure,
    /// Which of the report's stories explains one of its races.
    pub(crate) story: Story,
    /// For the course's Rails shapes: the line of Rails code each step stands for.
    pub(crate) rails: &'static [RailsLine],
    /// Its rows in lesson 8's matrix; empty for none.
    pub(crate) matrix: &'static [MatrixCell],
    /// The options that need a strategy able to take them.
    pub(crate) can: Can,
    /// Makes it from the settings that shape a strategy.
    pub(crate) build: fn(&Options) -> Box<dyn Strategy>,
    /// Its shape on MariaDB (`--engine mariadb`), or why it has none there.
    pub(crate) on_mariadb: OnMariadb,
}

/// Whether a strategy runs on MariaDB: its shape there, its SQL in
/// InnoDB's dialect beside its PostgreSQL SQL in its own file; or the
/// reason it does not, said in one line when a race asks for it.
#[derive(Clone, Copy)]
pub enum OnMariadb {
    Runs(crate::request::mariadb::Shape),
    Refused(&'static str),
}

/// What a strategy can do beyond its race, for the options that need it:
/// a race's checks ask the spec, never a strategy's name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Can {
    /// Send ActiveRecord's statements (`--orm`): lesson 1's Rails code.
    pub(crate) orm: bool,
    /// Keep its claims in the cache store (`--store cache`, lesson 5).
    pub(crate) cache_claims: bool,
    /// Rescue work that failed (`--fail-work`, lesson 7).
    pub(crate) rescue: bool,
    /// Renew a running claim (`--heartbeat-ms`, lesson 9).
    pub(crate) heartbeat: bool,
}

impl Can {
    /// No option beyond the race.
    pub const NOTHING: Can = Can {
        orm: false,
        cache_claims: false,
        rescue: false,
        heartbeat: false,
    };
}

/// The settings a strategy is built from: the app's side of a race.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Whose statements check-then-store sends.
    pub orm: Orm,
    /// What a loser of the claim does.
    pub loser: LoserPolicy,
    /// How the guard recovers: its stale-claim age, its heartbeat, what
    /// failed work leaves.
    pub recovery: super::guard::Recovery,
}

/// Where a strategy keeps what it knows of a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keys {
    /// Nowhere: there is no key.
    Nowhere,
    /// The `idempotency_keys` table (or the cache store standing in for it).
    KeyTable,
    /// The XP row itself carries the key.
    XpTable,
    /// The app process's own memory.
    ProcessMemory,
}

/// How a strategy stands to the request's transaction (`--transaction`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransactionRule {
    /// Runs with or without one.
    Optional,
    /// Its lock means something only inside one, which it then takes by default.
    Needed,
    /// Refused in one, for the reason given.
    Refused(&'static str),
}

/// The XP rows the course predicts, as a rule over the race's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    /// Every worker does the work.
    EveryWorker,
    /// As many as got a connection at each app process before the first
    /// key was stored.
    PerConnection,
    /// One per app process that got a request.
    PerProcess,
    /// One.
    One,
}

/// The explanation a race of this strategy gets, told by the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Story {
    /// No key: every worker did the work.
    NoKey,
    /// The check and the store apart: who found no key before the first store.
    CheckThenStore,
    /// One claim wins before any work; what the losers did.
    ClaimFirst,
    /// The XP table's unique index decides at the insert.
    IndexAtInsert,
    /// The claim in one process's map.
    ProcessMap,
    /// The whole guard: takeovers, rescues, crashes.
    Guard,
    /// What the request's transaction saved and what it could not.
    RequestTransaction,
}

/// One line of the course's Rails code beside a step of `--sql`.
#[derive(Debug, Clone, Copy)]
pub struct RailsLine {
    pub step: Step,
    /// Which of the step's notes it stands for.
    pub when: Note,
    pub line: &'static str,
}

/// A step's note, as a Rails line is matched to it.
#[derive(Debug, Clone, Copy)]
pub enum Note {
    Any,
    StartsWith(&'static str),
    Contains(&'static str),
}

impl Note {
    pub fn matches(self, note: &str) -> bool {
        match self {
            Note::Any => true,
            Note::StartsWith(start) => note.starts_with(start),
            Note::Contains(part) => note.contains(part),
        }
    }
}

/// One row of lesson 8's matrix for a strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatrixCell {
    /// Each statement committing on its own.
    Plain,
    /// Inside the request's transaction at a level, rerun this many times
    /// after a serialization failure.
    Within(Isolation, u32),
}

impl MatrixCell {
    /// Within the request's transaction at each level.
    pub const EVERY_LEVEL: [MatrixCell; 3] = {
        let [a, b, c] = Isolation::ALL;
        [
            MatrixCell::Within(a, 0),
            MatrixCell::Within(b, 0),
            MatrixCell::Within(c, 0),
        ]
    };

    /// Without a transaction, then within one at each level.
    pub const PLAIN_AND_EVERY_LEVEL: [MatrixCell; 4] = {
        let [a, b, c] = MatrixCell::EVERY_LEVEL;
        [MatrixCell::Plain, a, b, c]
    };
}

/// The retries a serializable cell of the matrix with retries runs: enough
/// that every loser's retry finds the winner's key.
pub const SERIALIZABLE_RETRIES: u32 = 3;

impl Spec {
    /// The line of Rails code a step with this note stands for, if any.
    pub fn rails_line(&self, step: Step, note: &str) -> Option<&'static str> {
        self.rails
            .iter()
            .find(|r| r.step == step && r.when.matches(note))
            .map(|r| r.line)
    }
}
