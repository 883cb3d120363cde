//! `claim-work-complete` with the claim in Redis (lesson 5, `--store redis`): the lock most teams write by hand, `SET key value NX PX ttl`, its work in PostgreSQL.
//!
//! The claim is a Redis key of the run's own: `SET ... NX` sets it only
//! when it is not there, so one request gets `OK` and the others nothing;
//! `PX` gives it a time to live, after which Redis forgets it whatever the
//! owner is doing. The completion overwrites it with the response, kept
//! for a day. `--redis-claim overwrite` leaves `NX` out, as a store that
//! overwrites a claim instead of refusing it: every request gets `OK`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::Value;

use super::answers::{conflict, mismatch, replay};
use super::fingerprint;
use super::{Handled, Step, Strategy, work};
use crate::db::redis_server::{Redis, bounded};
use crate::request::{Answer, Failure, Lease, Outcome, Request};

/// How the claim is set: as it should be, or as a store that overwrites.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum RedisClaim {
    /// `SET key value NX PX ttl`: set only when the key is not there.
    #[default]
    Nx,
    /// `SET key value PX ttl`: set whatever is there (every request wins).
    Overwrite,
}

impl RedisClaim {
    /// The claim as the trace shows it.
    fn shown(self) -> &'static str {
        match self {
            RedisClaim::Nx => "SET key pending NX PX ttl",
            RedisClaim::Overwrite => "SET key pending PX ttl",
        }
    }
}

/// Claim in Redis, work in PostgreSQL, complete in Redis.
pub struct ClaimInRedis {
    pub redis: Arc<Redis>,
    pub claim: RedisClaim,
    /// The claim's time to live (`PX`).
    pub claim_ttl: Duration,
    /// How long a completed response is kept.
    pub keep_for: Duration,
    /// Bumped by [`Strategy::forget`]: each race's keys are new ones.
    generation: AtomicU64,
}

/// What a key holds: its status, the request's fingerprint, the response.
#[derive(serde::Serialize, serde::Deserialize)]
struct Held {
    status: String,
    fingerprint: Option<String>,
    response: Option<Value>,
}

impl ClaimInRedis {
    pub fn new(redis: Arc<Redis>, claim: RedisClaim, claim_ttl: Duration) -> Self {
        Self {
            redis,
            claim,
            claim_ttl,
            keep_for: Duration::from_secs(24 * 3600),
            generation: AtomicU64::new(0),
        }
    }

    /// The Redis key of `key` in this race.
    fn key(&self, key: &str) -> String {
        let generation = self.generation.load(Ordering::SeqCst);
        format!("{}{generation}:{key}", self.redis.prefix)
    }

    /// `SET key value [NX] PX ms`: whether Redis said OK.
    async fn set(&self, key: &str, held: &Held, nx: bool, ttl: Duration) -> Result<bool, Failure> {
        let mut conn = self.redis.conn.clone();
        let value = serde_json::to_string(held).unwrap_or_default();
        let mut cmd = redis::cmd("SET");
        cmd.arg(key).arg(value);
        if nx {
            cmd.arg("NX");
        }
        cmd.arg("PX").arg(ttl.as_millis().max(1) as u64);
        let said: Option<String> = bounded(cmd.query_async(&mut conn), "SET")
            .await
            .map_err(|e| Failure::Store(e.to_string()))?;
        Ok(said.is_some())
    }

    /// `GET key`, read as what a key holds.
    async fn get(&self, key: &str) -> Result<Option<Held>, Failure> {
        let mut conn = self.redis.conn.clone();
        let text: Option<String> =
            bounded(redis::cmd("GET").arg(key).query_async(&mut conn), "GET")
                .await
                .map_err(|e| Failure::Store(e.to_string()))?;
        Ok(text.and_then(|t| serde_json::from_str(&t).ok()))
    }
}

impl Strategy for ClaimInRedis {
    fn forget(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    fn handle<'a>(
        &'a self,
        lease: &'a mut Lease,
        req: &'a Request,
        trace: &'a mut crate::request::Trace,
    ) -> Handled<'a> {
        Box::pin(async move {
            let key = self.key(&req.key);
            let pending = Held {
                status: "pending".into(),
                fingerprint: req.fingerprint.clone(),
                response: None,
            };
            let nx = self.claim == RedisClaim::Nx;
            let claim = self.set(&key, &pending, nx, self.claim_ttl);
            let won = trace.query(Step::Claim, self.claim.shown(), claim).await?;
            if !won {
                trace.note("key set: claim taken");
                let held = trace.query(Step::Read, "GET key", self.get(&key)).await?;
                let Some(held) = held else {
                    trace.note("gone");
                    return Ok(conflict(req, "claim gone", "answered 409", None));
                };
                trace.note(held.status.clone());
                if fingerprint::differs(req.fingerprint.as_deref(), held.fingerprint.as_deref()) {
                    return Ok(mismatch(req));
                }
                if held.status == "completed" {
                    return Ok(replay(held.response, "claim completed", None));
                }
                return Ok(conflict(req, "claim pending", "answered 409", None));
            }
            trace.note("OK: claim won");
            let conn = lease.conn(trace).await?;
            let xp = trace
                .query(Step::Work, work::AWARD.text, work::award_xp(conn, req))
                .await?;
            trace.note(format!("made XP #{xp}"));
            let body = work::response_body(xp, &req.params);
            let completed = Held {
                status: "completed".into(),
                fingerprint: req.fingerprint.clone(),
                response: Some(body.clone()),
            };
            let complete = self.set(&key, &completed, false, self.keep_for);
            trace
                .query(Step::Complete, "SET key completed PX keep", complete)
                .await?;
            trace.note("completed");
            Ok(Answer {
                replayed: false,
                outcome: Outcome::Created,
                saw: "no key in Redis".into(),
                did: format!("made XP #{xp}, completed"),
                made_xp: Some(xp),
                body: Some(body),
                waited: None,
            })
        })
    }
}
