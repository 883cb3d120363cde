//! `memory`: the claim kept in the process's own memory, a map behind a mutex, as in-memory idempotency middleware keeps it.
//!
//! On one process it holds: the map's mutex lets one request claim the key,
//! the others see the claim and answer 409, or replay the stored response.
//! Across app replicas it cannot: each process has a map of its own, so each
//! replica that gets a request lets one in. Lesson 5's question, where the
//! claim lives, one level up.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::Value;

use super::answers::{completed, conflict, mismatch, replay};
use super::fingerprint;
use super::spec::{Can, Figure, Keys, OnMariadb, Spec, Story, TransactionRule};
use super::{Handled, Step, Strategy, work};
use crate::request::{Answer, Lease, Request, Trace};

/// What the process remembers of a key.
#[derive(Debug, Clone)]
enum Claim {
    /// A request of this process claimed it and is working.
    Pending { fingerprint: Option<String> },
    /// The response to replay.
    Completed {
        fingerprint: Option<String>,
        body: Value,
    },
}

/// The claims of one process: the app's, for as long as it runs.
#[derive(Debug, Default)]
pub struct Memory {
    claims: Mutex<HashMap<String, Claim>>,
}

impl Memory {
    /// Claims `key` for this request, or says what the process already knows.
    fn claim(&self, req: &Request) -> Option<Claim> {
        let mut claims = self.claims.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(known) = claims.get(&req.key) {
            return Some(known.clone());
        }
        let fingerprint = req.fingerprint.clone();
        claims.insert(req.key.clone(), Claim::Pending { fingerprint });
        None
    }

    fn settle(&self, req: &Request, body: Option<Value>) {
        let mut claims = self.claims.lock().unwrap_or_else(|e| e.into_inner());
        match body {
            Some(body) => {
                let fingerprint = req.fingerprint.clone();
                claims.insert(req.key.clone(), Claim::Completed { fingerprint, body });
            }
            // The work failed: let a retry run it again.
            None => {
                claims.remove(&req.key);
            }
        }
    }
}

impl Strategy for Memory {
    fn handle<'a>(
        &'a self,
        lease: &'a mut Lease,
        req: &'a Request,
        trace: &'a mut Trace,
    ) -> Handled<'a> {
        Box::pin(async move {
            // 1. Claim, in memory: no statement, so the step is timed alone.
            let known = trace.time(Step::Claim, async { self.claim(req) }).await;
            if let Some(known) = known {
                return Ok(lose(known, req, trace));
            }
            trace.note("claim won (in memory)");
            // 2. Work.
            let conn = lease.conn(trace).await?;
            let made = trace
                .query(Step::Work, work::AWARD.text, work::award_xp(conn, req))
                .await;
            let xp = match made {
                Ok(xp) => xp,
                Err(err) => {
                    self.settle(req, None);
                    return Err(err.into());
                }
            };
            trace.note(format!("made XP #{xp}"));
            let body = work::response_body(xp, &req.params);
            // 3. Complete, in memory.
            trace
                .time(Step::Complete, async {
                    self.settle(req, Some(body.clone()))
                })
                .await;
            trace.note("completed (in memory)");
            Ok(completed(xp, body))
        })
    }

    fn forget(&self) {
        self.claims
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

/// A request that found the key in the process's memory.
fn lose(known: Claim, req: &Request, trace: &mut Trace) -> Answer {
    let (stored, body) = match &known {
        Claim::Pending { fingerprint } => (fingerprint, None),
        Claim::Completed { fingerprint, body } => (fingerprint, Some(body.clone())),
    };
    if fingerprint::differs(req.fingerprint.as_deref(), stored.as_deref()) {
        trace.note("claimed for other parameters");
        return mismatch(req);
    }
    match body {
        Some(body) => {
            trace.note("completed");
            replay(Some(body), "claim completed (in memory)", None)
        }
        None => {
            trace.note("claim pending");
            conflict(
                req,
                "claim pending (in memory)",
                "answered 409 at once",
                None,
            )
        }
    }
}

/// `memory`: the claim in one process's map.
pub const SPEC: Spec = Spec {
    name: "memory",
    help: "The claim in the app process's memory, a map behind a mutex: holds on one process only",
    lesson: 5,
    in_course: false,
    keys: Keys::ProcessMemory,
    transaction: TransactionRule::Refused("memory keeps its claims outside the database"),
    losers: false,
    figure: Figure::PerProcess,
    story: Story::ProcessMap,
    rails: &[],
    matrix: &[],
    can: Can::NOTHING,
    build: |_| Box::new(Memory::default()),
    on_mariadb: OnMariadb::Refused(
        "its claim lives in the app's memory, not in the database, so the engine changes nothing",
    ),
};
