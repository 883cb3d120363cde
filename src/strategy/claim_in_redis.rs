//! `claim-work-complete` with the claim in Redis (lesson 5, `--store redis`): the lock most teams write by hand, `SET key value NX PX ttl`, its work in PostgreSQL.
//!
//! The claim is a Redis key of the run's own: `SET ... NX` sets it only
//! when it is not there, so one request gets `OK` and the others nothing;
//! `PX` gives it a time to live, after which Redis forgets it whatever the
//! owner is doing. The completion overwrites it with the response, kept
//! for a day. `--redis-claim overwrite` leaves `NX` out, as a store that
//! overwrites a claim instead of refusing it: every request gets `OK`.
//! `--redis-fence` hands out a fencing token with the claim, which
//! PostgreSQL checks (see [`super::redis_fence`]); `--redis-pressure`
//! writes other keys while the first claim is held, to see what Redis's
//! eviction does to it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::MultiplexedConnection;

use serde_json::Value;

use super::answers::{completed, conflict, mismatch, replay};
use super::claim_work_complete::READ;
use super::redis_fence;
use super::redis_plan::{FailoverSeen, PressureSeen, RedisClaim, RedisPlan, RedisRelease};
use super::{Handled, Step, Strategy, fingerprint, work};
use crate::db::redis_server::{Redis, bounded};
use crate::db::statements::Sends;
use crate::request::{Answer, Failure, Lease, Outcome, Request, Trace};

/// The claim and its fencing token in one step: `SET`, then `INCR` of the
/// key's token only if the `SET` said OK. `ARGV[3]` is `NX` or empty;
/// the token lives as long as a completed response (`ARGV[4]` ms), as
/// every key idem writes has a time to live.
const CLAIM_WITH_TOKEN: &str = "\
local set
if ARGV[3] == 'NX' then
  set = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
else
  set = redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
if not set then return false end
local token = redis.call('INCR', KEYS[2])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return token";

/// What a request whose token the store refused saw: a newer owner's.
pub const FENCED_OUT: &str = "a newer owner's token";

/// What such a request did, when it had already worked.
pub const WORKED_FOR_NOTHING: &str = "worked, but the store refused its token: wrote nothing";

/// What an owner whose `WAIT` heard no replica saw.
pub const NOT_REPLICATED: &str = "its claim on the primary only";

/// What it did then.
pub const LET_GO_UNREPLICATED: &str = "let its claim go without working, answered 409";

/// Claim in Redis, work in PostgreSQL, complete in Redis.
pub struct ClaimInRedis {
    pub redis: Arc<Redis>,
    pub plan: RedisPlan,
    /// How long a completed response is kept.
    pub keep_for: Duration,
    /// Set by the first claim won in a run: the one the cache traffic
    /// presses on and the failover follows.
    first_won: AtomicBool,
    /// What the last run measured in Redis.
    seen: Arc<Mutex<Seen>>,
}

/// What a run measured in Redis, for its result.
#[derive(Debug, Clone, Copy, Default)]
struct Seen {
    pressed: Option<PressureSeen>,
    acknowledged: Option<u64>,
    failed_over: Option<FailoverSeen>,
}

/// What a key holds: its status, the request's fingerprint, the response,
/// and while pending, which request's claim it is.
#[derive(serde::Serialize, serde::Deserialize)]
struct Held {
    status: String,
    fingerprint: Option<String>,
    response: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    owner: Option<String>,
}

/// Deletes the key only while it holds `ARGV[1]`, this owner's claim as
/// it was set: compare and delete in one step.
const RELEASE_OWN: &str = "\
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0";

/// Renews the key's time to live (`ARGV[2]` ms) only while it holds
/// `ARGV[1]`, this owner's claim: a heartbeat that cannot revive a claim
/// another request holds now.
const RENEW_OWN: &str = "\
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0";

/// The owner's heartbeat, stopped when the work ends, however it ends
/// (the request's future dropped included).
type Heartbeat = crate::tasks::AbortOnDrop;

/// A claim Redis said OK to: the value it set, and its fencing token if
/// one was asked for.
struct Won {
    value: String,
    token: Option<i64>,
}

impl ClaimInRedis {
    pub fn new(redis: Arc<Redis>, plan: RedisPlan) -> Self {
        Self {
            redis,
            plan,
            keep_for: Duration::from_secs(24 * 3600),
            first_won: AtomicBool::new(false),
            seen: Arc::default(),
        }
    }

    /// What the last run measured in Redis.
    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What the cache traffic did in the last run, if it ran.
    pub fn pressed(&self) -> Option<PressureSeen> {
        self.seen().pressed
    }

    /// How many replicas acknowledged the last run's first claim, if its
    /// owner asked (`WAIT`).
    pub fn acknowledged(&self) -> Option<u64> {
        self.seen().acknowledged
    }

    /// What the last run's failover did to the claim it followed.
    pub fn failed_over(&self) -> Option<FailoverSeen> {
        self.seen().failed_over
    }

    /// The Redis key of `key` in this race, or of one of its companions
    /// (`token:`, `other:`).
    fn key(&self, kind: &str, key: &str) -> String {
        format!("{}{kind}{key}", self.redis.race_prefix())
    }

    /// `SET key value [NX] PX ms`: whether Redis said OK.
    async fn set(&self, key: &str, held: &Held, nx: bool, ttl: Duration) -> Result<bool, Failure> {
        let value = serde_json::to_string(held).unwrap_or_default();
        set_value(&mut self.redis.conn(), key, &value, nx, ttl).await
    }

    /// The claim: `SET`, or with a fence the script that also hands out
    /// the key's next token. `None`: Redis said nothing (the key is set).
    async fn claim(
        &self,
        conn: &mut MultiplexedConnection,
        key: &str,
        req: &Request,
    ) -> Result<Option<Won>, Failure> {
        let pending = Held {
            status: "pending".into(),
            fingerprint: req.fingerprint.clone(),
            response: None,
            owner: Some(format!(
                "worker {} {}",
                req.worker,
                uuid::Uuid::new_v4().simple()
            )),
        };
        let value = serde_json::to_string(&pending).unwrap_or_default();
        let nx = self.plan.claim == RedisClaim::Nx;
        if !self.plan.fence {
            let won = set_value(conn, key, &value, nx, self.plan.ttl()).await?;
            return Ok(won.then_some(Won { value, token: None }));
        }
        let mut script = redis::cmd("EVAL");
        script
            .arg(CLAIM_WITH_TOKEN)
            .arg(2)
            .arg(key)
            .arg(self.key("token:", &req.key))
            .arg(&value)
            .arg(self.plan.ttl_ms.max(1))
            .arg(if nx { "NX" } else { "" })
            .arg(self.keep_for.as_millis() as u64);
        let token: Option<i64> = bounded(script.query_async(conn), "EVAL")
            .await
            .map_err(|e| Failure::Store(e.to_string()))?;
        Ok(token.map(|token| Won {
            value,
            token: Some(token),
        }))
    }

    /// `GET key`, read as what a key holds.
    async fn get(&self, key: &str) -> Result<Option<Held>, Failure> {
        let mut conn = self.redis.conn();
        let text: Option<String> =
            bounded(redis::cmd("GET").arg(key).query_async(&mut conn), "GET")
                .await
                .map_err(|e| Failure::Store(e.to_string()))?;
        Ok(text.and_then(|t| serde_json::from_str(&t).ok()))
    }

    /// With `--redis-heartbeat-ms`: renews the owner's claim every so often
    /// until the returned guard is dropped.
    fn beat(&self, key: &str, won: &Won) -> Heartbeat {
        let Some(every) = self.plan.heartbeat_ms else {
            return Heartbeat::none();
        };
        let (mut conn, key, value) = (self.redis.conn(), key.to_string(), won.value.clone());
        let ttl = self.plan.ttl_ms.max(1);
        Heartbeat::spawn(async move {
            let mut ticks = tokio::time::interval(Duration::from_millis(every));
            ticks.tick().await;
            loop {
                ticks.tick().await;
                let mut renew = redis::cmd("EVAL");
                renew.arg(RENEW_OWN).arg(1).arg(&key).arg(&value).arg(ttl);
                // A beat that fails is a beat missed, as a real one would be.
                let _ = bounded(renew.query_async::<i64>(&mut conn), "the heartbeat").await;
            }
        })
    }

    /// The first claim of a run with `--redis-pressure` sets the other
    /// traffic going, on a task of its own, so that it runs to its end (its
    /// keys removed) whatever becomes of the request; the owner waits for
    /// it before its work. So the traffic passes while the claim is held
    /// and is over before any retry comes: a retry never meets a Redis
    /// still full, and what it finds is the eviction's doing alone.
    fn press_once(&self, first: bool, claim: &str) -> Option<tokio::task::JoinHandle<()>> {
        if self.plan.pressure == 0 || !first {
            return None;
        }
        let (redis, seen) = (self.redis.clone(), self.seen.clone());
        let (tag, claim, n) = (
            self.key("other:", ""),
            claim.to_string(),
            self.plan.pressure,
        );
        Some(tokio::spawn(async move {
            // An error leaves `seen` empty: the result then says nothing
            // was measured rather than guess.
            if let Ok(pressed) = redis.press(&tag, n, &claim).await {
                seen.lock().unwrap_or_else(|e| e.into_inner()).pressed = Some(pressed);
            }
        }))
    }

    /// A request Redis said nothing to: what the key holds decides.
    async fn lost(&self, key: &str, req: &Request, trace: &mut Trace) -> Result<Answer, Failure> {
        trace.note("key set: claim taken");
        let held = trace.query(Step::Read, "GET key", self.get(key)).await?;
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
        Ok(conflict(req, "claim pending", "answered 409", None))
    }

    /// The work and its rows, without a fence: the XP row goes in whatever
    /// became of the claim meanwhile.
    async fn work(
        &self,
        lease: &mut Lease,
        req: &Request,
        trace: &mut Trace,
    ) -> Result<i64, Failure> {
        let conn = lease.conn(trace).await?;
        let xp = trace
            .query(Step::Work, work::AWARD.text, work::award_xp(conn, req))
            .await?;
        trace.note(format!("made XP #{xp}"));
        Ok(xp)
    }

    /// The work with a fence: the token shown to PostgreSQL first, then
    /// the service call, then the XP row and the completion in one
    /// statement that goes in only while the key still holds the token.
    async fn fenced_work(
        &self,
        lease: &mut Lease,
        req: &Request,
        token: i64,
        trace: &mut Trace,
    ) -> Result<Result<i64, Answer>, Failure> {
        let conn = lease.conn(trace).await?;
        let announce = redis_fence::announce(conn, req, token);
        let shown = redis_fence::ANNOUNCE.text;
        if !trace.query(Step::Claim, shown, announce).await? {
            trace.note("the key holds a newer token, or is done");
            return Ok(Err(stored(conn, req, trace).await?));
        }
        trace.note(format!("token {token} shown"));
        // No statement: the service call alone (where a hang-up or a crash
        // "during the work" strikes).
        trace.query(Step::Work, "", work::service_call(req)).await;
        let complete = redis_fence::complete(conn, req, token);
        let text = redis_fence::COMPLETE.text;
        match trace.query(Step::Complete, text, complete).await? {
            Some(xp) => {
                trace.note(format!("made XP #{xp}, completed"));
                Ok(Ok(xp))
            }
            None => {
                trace.note("a newer token: nothing written");
                let did = WORKED_FOR_NOTHING;
                Ok(Err(conflict(req, FENCED_OUT, did, None)))
            }
        }
    }
}

impl ClaimInRedis {
    /// The work failed (`--fail-work`): the service call was made and
    /// failed, and the owner lets its claim go so that a retry may work
    /// again: by a plain `DEL`, or only while the claim is still its own.
    async fn fail(
        &self,
        key: &str,
        won: &Won,
        req: &Request,
        trace: &mut Trace,
    ) -> Result<Answer, Failure> {
        trace.query(Step::Work, "", work::service_call(req)).await;
        trace.note("the award service failed");
        self.release(key, won, self.plan.release, trace).await?;
        Ok(Answer {
            replayed: false,
            outcome: Outcome::Failed,
            saw: "claim won".into(),
            did: "work failed, released the claim".into(),
            made_xp: None,
            body: Some(serde_json::json!({
                "error": { "type": "api_error", "message": "the award service failed" }
            })),
            waited: None,
        })
    }
}

/// `SET key value [NX] PX ms` on `conn`: whether Redis said OK.
async fn set_value(
    conn: &mut MultiplexedConnection,
    key: &str,
    value: &str,
    nx: bool,
    ttl: Duration,
) -> Result<bool, Failure> {
    let mut cmd = redis::cmd("SET");
    cmd.arg(key).arg(value);
    if nx {
        cmd.arg("NX");
    }
    cmd.arg("PX").arg(ttl.as_millis().max(1) as u64);
    let said: Option<String> = bounded(cmd.query_async(conn), "SET")
        .await
        .map_err(|e| Failure::Store(e.to_string()))?;
    Ok(said.is_some())
}

impl ClaimInRedis {
    /// The owner lets its claim go: by a plain `DEL`, or only while the
    /// claim is still its own.
    async fn release(
        &self,
        key: &str,
        won: &Won,
        release: RedisRelease,
        trace: &mut Trace,
    ) -> Result<(), Failure> {
        let mut conn = self.redis.conn();
        let mut cmd = match release {
            RedisRelease::Del => redis::cmd("DEL"),
            RedisRelease::OwnerChecked => redis::cmd("EVAL"),
        };
        match release {
            RedisRelease::Del => cmd.arg(key),
            RedisRelease::OwnerChecked => cmd.arg(RELEASE_OWN).arg(1).arg(key).arg(&won.value),
        };
        let deleted = bounded(cmd.query_async::<u64>(&mut conn), "the release");
        let deleted = trace.query(Step::Complete, release.shown(), deleted).await;
        let deleted = deleted.map_err(|e| Failure::Store(e.to_string()))?;
        trace.note(match deleted {
            0 => "nothing deleted: the key was not this claim any more",
            _ => "the key deleted",
        });
        Ok(())
    }

    /// With a replica, after a claim won on `conn`: its `WAIT`, if asked,
    /// then after the run's first claim its failover, if asked. An answer
    /// if the owner must not work: `WAIT` heard no replica, so the claim is
    /// on the primary alone, and the owner lets it go and answers 409.
    async fn replicate(
        &self,
        conn: &mut MultiplexedConnection,
        first: bool,
        key: &str,
        won: &Won,
        req: &Request,
        trace: &mut Trace,
    ) -> Result<Option<Answer>, Failure> {
        let store = |e: anyhow::Error| Failure::Store(e.to_string());
        let mut acknowledged = None;
        if let Some(ms) = self.plan.wait_ms {
            let waited = self.redis.wait_for_replica(conn, ms);
            let waited = trace.query(Step::Claim, "WAIT 1 ms", waited);
            let n = waited.await.map_err(store)?;
            trace.note(format!("{n} of 1 replica acknowledged the claim"));
            acknowledged = Some(n);
            if first {
                self.seen().acknowledged = Some(n);
            }
        }
        if first && self.plan.failover.is_some() {
            let text = "the primary killed (SIGKILL), then REPLICAOF NO ONE on the replica";
            let seen = trace.query(Step::Claim, text, self.redis.fail_over(key));
            let seen = seen.await.map_err(store)?;
            trace.note(match seen.claim_kept {
                true => "failed over: the new primary holds the claim",
                false => "failed over: the new primary has no claim",
            });
            self.seen().failed_over = Some(seen);
        }
        if acknowledged != Some(0) {
            return Ok(None);
        }
        self.release(key, won, RedisRelease::OwnerChecked, trace)
            .await?;
        Ok(Some(conflict(
            req,
            NOT_REPLICATED,
            LET_GO_UNREPLICATED,
            None,
        )))
    }
}

/// What the store of record holds for a key whose token was refused
/// before the work: the completed response, or 409.
async fn stored(
    conn: &crate::db::pool::Conn,
    req: &Request,
    trace: &mut Trace,
) -> Result<Answer, Failure> {
    let row = trace
        .query(Step::Read, READ.text, conn.fetch_opt(&READ, &[&req.key]))
        .await?;
    let Some(row) = row else {
        return Ok(conflict(req, "no key row", "answered 409", None));
    };
    let (status, body, print): (String, Option<Value>, Option<String>) =
        (row.get(0), row.get(1), row.get(2));
    if fingerprint::differs(req.fingerprint.as_deref(), print.as_deref()) {
        return Ok(mismatch(req));
    }
    if status == "completed" {
        return Ok(replay(body, "key completed", None));
    }
    Ok(conflict(req, FENCED_OUT, "answered 409", None))
}

impl Strategy for ClaimInRedis {
    fn forget(&self) {
        self.redis.next_race();
        self.first_won.store(false, Ordering::SeqCst);
        *self.seen() = Seen::default();
    }

    fn handle<'a>(
        &'a self,
        lease: &'a mut Lease,
        req: &'a Request,
        trace: &'a mut Trace,
    ) -> Handled<'a> {
        Box::pin(async move {
            let key = self.key("", &req.key);
            // `WAIT` counts what its own connection wrote, and blocks it.
            let mut conn = match self.plan.wait_ms {
                Some(_) => self
                    .redis
                    .dedicated()
                    .await
                    .map_err(|e| Failure::Store(e.to_string()))?,
                None => self.redis.conn(),
            };
            let claim = self.claim(&mut conn, &key, req);
            let shown = match self.plan.fence {
                true => "SET key pending NX PX ttl, then INCR token (one script)",
                false => self.plan.claim.shown(),
            };
            let Some(won) = trace.query(Step::Claim, shown, claim).await? else {
                return self.lost(&key, req, trace).await;
            };
            trace.note(match won.token {
                Some(token) => format!("OK: claim won, token {token}"),
                None => "OK: claim won".into(),
            });
            let first = !self.first_won.swap(true, Ordering::SeqCst);
            let replicated = self.replicate(&mut conn, first, &key, &won, req, trace);
            if let Some(answer) = replicated.await? {
                return Ok(answer);
            }
            if req.work_fails {
                return self.fail(&key, &won, req, trace).await;
            }
            if let Some(traffic) = self.press_once(first, &key) {
                let _ = traffic.await;
            }
            let beating = self.beat(&key, &won);
            let xp = match won.token {
                Some(token) => self.fenced_work(lease, req, token, trace).await?,
                None => Ok(self.work(lease, req, trace).await?),
            };
            drop(beating);
            let xp = match xp {
                Ok(xp) => xp,
                Err(answer) => return Ok(answer),
            };
            let body = work::response_body(xp, &req.params);
            let done = Held {
                status: "completed".into(),
                fingerprint: req.fingerprint.clone(),
                response: Some(body.clone()),
                owner: None,
            };
            let complete = self.set(&key, &done, false, self.keep_for);
            trace
                .query(Step::Complete, "SET key completed PX keep", complete)
                .await?;
            trace.note("completed");
            Ok(completed(xp, body))
        })
    }
}
