//! What one interleaving came to: the guard held, or it failed, and how.
//!
//! A guard holds when its requests left exactly one effect: one XP row,
//! one call to the award service (a call no rollback undoes), no claim
//! left pending, and every answer one the guard means to give (201, a
//! replay, 409, 422), the crashed request's own call aside. A deadlock, a serialization failure or a unique
//! violation that reaches a client is an outcome of the interleaving,
//! counted here, not an error of idem's.

use serde::Serialize;

use crate::race::{Outcome, RaceResult};

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

/// The ways `result` broke the guard; empty when it held. A request
/// that crashed after its work began may have called the service before
/// it died, and no guard takes a call back: each such call is allowed.
pub fn failures(result: &RaceResult) -> Vec<Failure> {
    let cut_off = result.cut_off_after_work();
    let errors = result
        .outcomes
        .iter()
        .filter(|(o, n)| {
            **n > 0
                && matches!(
                    o,
                    Outcome::Error | Outcome::Failed | Outcome::CheckoutTimeout
                )
        })
        .count();
    let found = [
        (result.xp_rows > 1, Failure::DuplicateXpRows),
        (
            result.service_calls > 1 + cut_off,
            Failure::DuplicateServiceCalls,
        ),
        (result.xp_rows == 0, Failure::NoEffect),
        (result.pending_key_rows > 0, Failure::KeyLeftStuck),
        (errors > 0, Failure::ErrorAnswered),
    ];
    found
        .into_iter()
        .filter(|(broke, _)| *broke)
        .map(|(_, f)| f)
        .collect()
}
