//! What one interleaving came to: the guard held, or it failed, and how.
//!
//! A guard holds when its requests left exactly one effect: one XP row,
//! one call to the award service (a call no rollback undoes), no claim
//! left pending, and every answer one the guard means to give (201, a
//! replay, 409, 422), the crashed request's own call aside. A deadlock, a serialization failure or a unique
//! violation that reaches a client is an outcome of the interleaving,
//! counted here, not an error of idem's.

use serde::Serialize;

use crate::race::mariadb::{EngineResult, EngineWorker};
use crate::race::{Outcome, RaceResult};
use crate::request::Step;

/// How an interleaving broke the guard; one interleaving may break it
/// more than one way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Failure {
    /// More than one XP row for the key: the work done twice.
    DuplicateXpRows,
    /// More than one call to the award service.
    DuplicateServiceCalls,
    /// No XP row at all: every request answered, the work never done.
    NoEffect,
    /// A claim left pending: the key is stuck until its claim goes stale.
    KeyLeftStuck,
    /// A request answered with an error (500, 503).
    ErrorAnswered,
}

impl Failure {
    pub const ALL: [Failure; 5] = [
        Failure::DuplicateXpRows,
        Failure::DuplicateServiceCalls,
        Failure::NoEffect,
        Failure::KeyLeftStuck,
        Failure::ErrorAnswered,
    ];

    /// How a report names it.
    pub fn name(self) -> &'static str {
        match self {
            Failure::DuplicateXpRows => "duplicate XP rows",
            Failure::DuplicateServiceCalls => "duplicate service calls",
            Failure::NoEffect => "no effect",
            Failure::KeyLeftStuck => "a key left stuck",
            Failure::ErrorAnswered => "an error answered",
        }
    }
}

/// What a race left that its verdict reads, on either engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Left {
    pub xp_rows: u64,
    pub service_calls: u64,
    /// Requests cut off after their work began (a crash mid-work): each
    /// may have called the service, and no guard takes a call back.
    pub cut_off: u64,
    pub pending_key_rows: u64,
    /// Whether any request was answered with an error (500, 503).
    pub errors_answered: bool,
}

/// Whether `outcome` is an error answered to a client.
fn is_error(outcome: Outcome) -> bool {
    matches!(
        outcome,
        Outcome::Error | Outcome::Failed | Outcome::CheckoutTimeout
    )
}

impl Left {
    /// What a race on PostgreSQL left.
    pub fn of(result: &RaceResult) -> Left {
        Left {
            xp_rows: result.xp_rows,
            service_calls: result.service_calls,
            cut_off: result.cut_off_after_work(),
            pending_key_rows: result.pending_key_rows,
            errors_answered: result.outcomes.iter().any(|(o, n)| *n > 0 && is_error(*o)),
        }
    }

    /// What a race on MariaDB left.
    pub fn of_engine(result: &EngineResult) -> Left {
        let took = |w: &EngineWorker, step: Step| w.steps.iter().any(|e| e.step == step);
        Left {
            xp_rows: result.xp_rows,
            service_calls: result.service_calls,
            cut_off: result
                .reports
                .iter()
                .filter(|w| w.outcome == Outcome::Crashed && took(w, Step::Work))
                .count() as u64,
            pending_key_rows: result.pending_key_rows,
            errors_answered: result.reports.iter().any(|w| is_error(w.outcome)),
        }
    }
}

/// The ways a race that left `left` broke the guard; empty when it held.
/// A request that crashed after its work began may have called the
/// service before it died, and no guard takes a call back: each such call
/// is allowed.
pub fn judged(left: &Left) -> Vec<Failure> {
    let found = [
        (left.xp_rows > 1, Failure::DuplicateXpRows),
        (
            left.service_calls > 1 + left.cut_off,
            Failure::DuplicateServiceCalls,
        ),
        (left.xp_rows == 0, Failure::NoEffect),
        (left.pending_key_rows > 0, Failure::KeyLeftStuck),
        (left.errors_answered, Failure::ErrorAnswered),
    ];
    found
        .into_iter()
        .filter(|(broke, _)| *broke)
        .map(|(_, f)| f)
        .collect()
}
