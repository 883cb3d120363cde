//! What one worker did in a race: its request, its answer, and every step it took.

use serde::Serialize;
use serde_json::Value;

use crate::http::app::{Handled, OnHangup};
use crate::request::{Answer, DbError, Outcome, Params, Request, Step, StepEvent, Trace, Waited};
use crate::strategy::work;

/// Everything one worker did in one race.
#[derive(Debug, Clone, Serialize)]
pub struct WorkerReport {
    pub worker: usize,
    /// What the request asked for, and its fingerprint (if the guard checks them).
    pub params: Params,
    pub fingerprint: Option<String>,
    pub outcome: Outcome,
    pub status: u16,
    /// Milliseconds spent waiting for a pooled connection.
    pub checkout_wait_ms: f64,
    pub saw: String,
    pub did: String,
    pub made_xp: Option<i64>,
    pub body: Option<Value>,
    /// Milliseconds from the start gate to the answer.
    pub answer_ms: f64,
    /// Statements sent and connections checked out for this request.
    pub queries: u32,
    pub checkouts: u32,
    /// What waiting for the winner cost (a loser that waited).
    pub waited: Option<Waited>,
    /// Set when the request got a replay made for other parameters: the
    /// silent wrong answer of an unchecked key (lesson 4).
    pub wrong_replay: Option<String>,
    /// Over `--replicas`: which replica answered.
    pub replica: Option<usize>,
    /// The client's retry after the race (the eviction demonstration).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub retry: bool,
    /// The workers whose locks this one waited on, seen with pg_blocking_pids.
    pub blocked_by: Vec<usize>,
    /// The last database error the request met, caught by the strategy or
    /// not: the loser's 23505, 40001 or 55P03.
    pub error: Option<DbError>,
    /// Times the request's transaction was run again after a serialization failure.
    pub retries: u32,
    /// Milliseconds the request held a pooled connection: from its first
    /// checkout to its answer, less the time it had given it back.
    pub held_ms: f64,
    pub steps: Vec<StepEvent>,
}

impl WorkerReport {
    /// Whether the request took `step` at all.
    pub fn took(&self, step: crate::request::Step) -> bool {
        self.steps.iter().any(|e| e.step == step)
    }

    /// The report of a request `answer`ed after `answer_ms`, from its trace.
    pub fn new(req: Request, answer: Answer, trace: Trace, checkouts: u32, answer_ms: f64) -> Self {
        let checkout_wait_ms = trace
            .events
            .iter()
            .filter(|e| e.step == Step::Checkout)
            .map(|e| e.end_ms - e.start_ms)
            .sum::<f64>()
            + 0.0; // an empty sum is -0.0
        let held_ms = held_ms(&trace, answer_ms);
        let wrong_replay = match answer.outcome {
            Outcome::Replayed => work::wrong_replay(&req, answer.body.as_ref()),
            _ => None,
        };
        Self {
            worker: req.worker,
            params: req.params,
            fingerprint: req.fingerprint,
            outcome: answer.outcome,
            status: answer.outcome.status(),
            checkout_wait_ms,
            saw: answer.saw,
            did: answer.did,
            made_xp: answer.made_xp,
            body: answer.body,
            answer_ms,
            queries: trace.queries,
            checkouts,
            waited: answer.waited,
            wrong_replay,
            replica: None,
            retry: false,
            blocked_by: Vec::new(),
            error: trace.db_error,
            retries: trace.retries,
            held_ms,
            steps: trace.events,
        }
    }
}

/// How long a request held a pooled connection: from the end of its first
/// checkout to its answer, less later checkouts and the waits between polls,
/// when it held none.
fn held_ms(trace: &Trace, answer_ms: f64) -> f64 {
    let Some(first) = trace.events.iter().find(|e| e.step == Step::Checkout) else {
        return 0.0;
    };
    let away: f64 = trace
        .events
        .iter()
        .filter(|e| {
            e.step == Step::Wait || (e.step == Step::Checkout && e.start_ms > first.start_ms)
        })
        .map(|e| e.end_ms - e.start_ms)
        .sum();
    (answer_ms - first.end_ms - away).max(0.0)
}

/// What the app did with a request whose client hung up: under `finish`
/// it ran on, and what it found, did and made is the worker's (its steps
/// stay on the app's clock, so the timeline leaves them out); under
/// `cancel` it was dropped at its next await, and told nothing.
pub(super) fn abandoned(report: &mut WorkerReport, handled: Option<Handled>, on_hangup: OnHangup) {
    match handled {
        Some(h) => {
            report.saw = h.answer.saw;
            report.did = format!("hung up; the app went on: {}", h.answer.did);
            report.made_xp = h.answer.made_xp;
        }
        None => {
            report.did = match on_hangup {
                OnHangup::Cancel => "hung up; the app dropped its request".into(),
                OnHangup::Finish => "hung up; the app had not finished it".into(),
            };
        }
    }
}

/// Every XP row but the one the key kept is duplicate work: marks the
/// workers that made those rows, whatever they believed.
pub(super) fn mark_duplicates(reports: &mut [WorkerReport], kept_xp: Option<i64>) {
    for report in reports {
        if let Some(xp) = report.made_xp
            && Some(xp) != kept_xp
        {
            report.outcome = Outcome::Duplicate;
            report.status = Outcome::Duplicate.status();
        }
    }
}
