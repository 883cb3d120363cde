//! `claim-work-complete` with the claim kept in the Solid-Cache-like store instead of the key table (lesson 5).
//!
//! The steps are the same; only where the reservation lives changes. The
//! claim is `write(unless_exist: true)`, which cannot lock a row that does
//! not exist yet, so concurrent first claims can all succeed.

use std::time::Duration;

use super::answers::{conflict, mismatch, replay};
use super::fingerprint;
use super::{Handled, Step, Strategy, work};
use crate::request::{Answer, Lease, Outcome, Request, Trace};
use crate::store::ClaimStatus;
use crate::store::cache::{self, CacheLimits, Entry};

/// Claim, work, complete, in the cache; a loser replays or answers 409.
pub struct ClaimInCache {
    pub limits: CacheLimits,
    /// How long a pending claim lives in the cache.
    pub claim_ttl: Duration,
    /// How long a completed response is kept (`expires_in`).
    pub keep_for: Duration,
}

impl Strategy for ClaimInCache {
    fn handle<'a>(
        &'a self,
        lease: &'a mut Lease,
        req: &'a Request,
        trace: &'a mut Trace,
    ) -> Handled<'a> {
        Box::pin(async move {
            let conn = lease.conn(trace).await?;
            // 1. Claim: write the pending entry unless one exists.
            let pending = Entry::new(
                ClaimStatus::Pending,
                req.fingerprint.clone(),
                None,
                self.claim_ttl,
            );
            let won = trace
                .query(
                    Step::Claim,
                    cache::LOCK.text,
                    cache::write_unless_exist(conn, &req.key, &pending, self.limits),
                )
                .await?;
            // BEGIN, SELECT ... FOR UPDATE, upsert, COMMIT, eviction.
            trace.queries += 4;
            if !won {
                trace.note("entry exists");
                let entry = trace
                    .query(Step::Read, cache::READ.text, cache::read(conn, &req.key))
                    .await?;
                let Some(entry) = entry else {
                    trace.note("gone");
                    return Ok(conflict(req, "entry vanished", "answered 409", None));
                };
                trace.note(entry.status.name());
                if fingerprint::differs(req.fingerprint.as_deref(), entry.fingerprint.as_deref()) {
                    return Ok(mismatch(req));
                }
                if entry.status == ClaimStatus::Completed {
                    return Ok(replay(entry.response, "entry completed", None));
                }
                return Ok(conflict(req, "entry pending", "answered 409", None));
            }
            trace.note("written: claim won");

            // 2. Work.
            let xp = trace
                .query(Step::Work, work::AWARD.text, work::award_xp(conn, req))
                .await?;
            trace.note(format!("made XP #{xp}"));
            let body = work::response_body(xp, &req.params);

            // 3. Complete: overwrite the entry with the response.
            let completed = Entry::new(
                ClaimStatus::Completed,
                req.fingerprint.clone(),
                Some(body.clone()),
                self.keep_for,
            );
            trace
                .query(
                    Step::Complete,
                    cache::UPSERT.text,
                    cache::write(conn, &req.key, &completed, self.limits),
                )
                .await?;
            trace.queries += 1;
            trace.note("completed");
            Ok(Answer {
                replayed: false,
                outcome: Outcome::Created,
                saw: "no live entry".into(),
                did: format!("made XP #{xp}, completed"),
                made_xp: Some(xp),
                body: Some(body),
                waited: None,
            })
        })
    }
}
