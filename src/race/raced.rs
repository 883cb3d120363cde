//! What a lesson's case reads from a race, on either engine: its XP rows, its service calls and each request's answer, so that one judge serves a race on PostgreSQL and one on MariaDB.

use super::mariadb::EngineResult;
use super::told::Told;
use super::{Outcome, RaceResult, StepEvent};

/// One request's answer, as a case judges it.
#[derive(Debug, Clone)]
pub struct Reply {
    pub worker: usize,
    /// A client's retry after its first request crashed.
    pub retry: bool,
    pub outcome: Outcome,
    pub status: u16,
    /// The XP amount it asked for.
    pub amount: i32,
    /// What it did, in the race's words.
    pub did: String,
    /// The XP row it made, if it made one.
    pub made_xp: Option<i64>,
    /// The server's error in its own terms (`SQLSTATE 23505,
    /// unique_violation`, `error 1062 (23000, ER_DUP_ENTRY)`), if one ended it.
    pub error: Option<String>,
}

/// A race as a case judges it.
pub trait Raced {
    fn xp_rows(&self) -> u64;
    fn service_calls(&self) -> u64;
    /// Claims left pending at the end.
    fn pending_key_rows(&self) -> u64;
    /// The steps of each first request (no retry), in worker order.
    fn first_steps(&self) -> Vec<&[StepEvent]>;
    /// Every request's reply, first requests and retries.
    fn answers(&self) -> Vec<Reply>;
    /// A narrative made of this race's facts, checked against it.
    fn finish(&self, told: Told) -> String;

    /// Requests replayed a response made for other parameters.
    fn wrong_replays(&self) -> u64 {
        let replies = self.answers();
        let made = replies.iter().find(|a| a.outcome == Outcome::Created);
        let replayed = replies.iter().filter(|a| a.outcome == Outcome::Replayed);
        replayed
            .filter(|a| made.is_some_and(|m| m.amount != a.amount))
            .count() as u64
    }

    /// How many requests ended with `outcome`.
    fn count(&self, outcome: Outcome) -> u64 {
        self.answers()
            .iter()
            .filter(|a| a.outcome == outcome)
            .count() as u64
    }
}

impl Raced for RaceResult {
    fn xp_rows(&self) -> u64 {
        self.xp_rows
    }

    fn service_calls(&self) -> u64 {
        self.service_calls
    }

    fn pending_key_rows(&self) -> u64 {
        self.pending_key_rows
    }

    fn first_steps(&self) -> Vec<&[StepEvent]> {
        let first = self.reports.iter().filter(|w| !w.retry);
        first.map(|w| &w.steps[..]).collect()
    }

    fn answers(&self) -> Vec<Reply> {
        self.reports
            .iter()
            .map(|w| Reply {
                worker: w.worker,
                retry: w.retry,
                outcome: w.outcome,
                status: w.status,
                amount: w.params.amount,
                did: w.did.clone(),
                made_xp: w.made_xp,
                error: w
                    .error
                    .as_ref()
                    .map(|e| format!("SQLSTATE {}, {}", e.code, e.name)),
            })
            .collect()
    }

    fn finish(&self, told: Told) -> String {
        told.finish(self)
    }

    fn count(&self, outcome: Outcome) -> u64 {
        RaceResult::count(self, outcome)
    }

    fn wrong_replays(&self) -> u64 {
        self.wrong_replays
    }
}

impl Raced for EngineResult {
    fn xp_rows(&self) -> u64 {
        self.xp_rows
    }

    fn service_calls(&self) -> u64 {
        self.service_calls
    }

    fn pending_key_rows(&self) -> u64 {
        self.pending_key_rows
    }

    fn first_steps(&self) -> Vec<&[StepEvent]> {
        let first = self.reports.iter().filter(|w| !w.retry);
        first.map(|w| &w.steps[..]).collect()
    }

    fn answers(&self) -> Vec<Reply> {
        self.reports
            .iter()
            .map(|w| Reply {
                worker: w.worker,
                retry: w.retry,
                outcome: w.outcome,
                status: w.status,
                amount: self.race.settings().params(w.worker).amount,
                did: w.did.clone(),
                made_xp: w.made_xp,
                error: w.error.as_ref().map(|e| format!("error {}", e.shown())),
            })
            .collect()
    }

    fn finish(&self, told: Told) -> String {
        told.finish_on_engine(self)
    }
}
