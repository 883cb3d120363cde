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

/// The same claim in the same store on MariaDB, as Solid Cache writes it
/// on MySQL: `write(unless_exist: true)` is a transaction that looks for
/// the entry `FOR UPDATE` and, when it is missing, upserts it (`INSERT ...
/// ON DUPLICATE KEY UPDATE`); a plain write is the upsert alone. InnoDB
/// answers otherwise than PostgreSQL here: at REPEATABLE READ, the
/// server's default, the look for a missing key takes a gap lock, two
/// such gap locks block each other's inserts, and all but one writer are
/// rolled back (1213). Solid Cache's failsafe swallows that error and
/// `write` returns false: the claim holds, by deadlock. At READ
/// COMMITTED there is no gap lock, and every writer wins, as on
/// PostgreSQL. Eviction is not run here: no race comes near the store's
/// limits, and `--cache-max-entries` is refused on MariaDB.
pub mod on_mariadb {
    use std::future::Future;
    use std::pin::Pin;
    use std::time::Duration;

    use sqlx::Row;

    use crate::request::mariadb::{Answered, Bind, Ctx, number};
    use crate::request::{Outcome, Step};
    use crate::store::ClaimStatus;
    use crate::store::cache::{self, Entry};
    use crate::strategy::answers::{other_parameters, replayed, response_of};
    use crate::strategy::work::xp_id_of;

    pub const LOOK: &str = "SELECT value FROM cache_entries WHERE key_hash = ? FOR UPDATE";
    pub const READ: &str = "SELECT value FROM cache_entries WHERE key_hash = ?";
    pub const UPSERT: &str = "INSERT INTO cache_entries (`key`, value, key_hash, byte_size) \
        VALUES (?, ?, ?, ?) ON DUPLICATE KEY UPDATE \
        `key` = VALUES(`key`), value = VALUES(value), byte_size = VALUES(byte_size)";

    /// How long a pending claim lives, and a completed answer is kept, as
    /// on PostgreSQL's store.
    const CLAIM_TTL: Duration = Duration::from_secs(60);
    const KEEP_FOR: Duration = Duration::from_secs(24 * 3600);

    /// The errors Solid Cache's failsafe swallows among those a race
    /// meets: a deadlock (1213) and a lock wait given up (1205).
    const SWALLOWED: [u16; 2] = [1213, 1205];

    pub fn shape(ctx: &mut Ctx) -> Pin<Box<dyn Future<Output = Answered> + Send + '_>> {
        Box::pin(async move {
            let key = ctx.asked.key.clone();
            let pending = Entry::new(
                ClaimStatus::Pending,
                ctx.asked.fingerprint.clone(),
                None,
                CLAIM_TTL,
            );
            match write_unless_exist(ctx, &key, &pending).await {
                Ok(true) => ctx.note("written: claim won"),
                Ok(false) => return lose(ctx, &key).await,
                Err(err) => return ctx.failed(&err, "—", None),
            }
            let xp = match ctx.work().await {
                Ok(xp) => xp,
                Err(err) => return ctx.failed(&err, "no live entry", None),
            };
            let completed = Entry::new(
                ClaimStatus::Completed,
                ctx.asked.fingerprint.clone(),
                Some(response_of(&ctx.asked, xp)),
                KEEP_FOR,
            );
            match upsert(ctx, Step::Complete, &key, &completed).await {
                Ok(()) => {
                    ctx.note("completed");
                    Answered {
                        made_xp: Some(xp),
                        ..Answered::new(
                            Outcome::Created,
                            "no live entry",
                            format!("made XP #{xp}, completed"),
                        )
                    }
                }
                Err(err) => ctx.failed(&err, "no live entry", Some(xp)),
            }
        })
    }

    /// `write(unless_exist: true)`: in the store's own transaction, the
    /// look under a lock, then the upsert if no live entry was there.
    /// Whether it wrote; a deadlock or lock timeout is swallowed, as Solid
    /// Cache's failsafe does, and reads as "not written".
    async fn write_unless_exist(
        ctx: &mut Ctx,
        key: &str,
        entry: &Entry,
    ) -> Result<bool, sqlx::Error> {
        ctx.begin(ctx.own_level).await?;
        let hash = cache::key_hash(key);
        let written = async {
            let found = ctx.fetch_opt(Step::Find, LOOK, &[Bind::Int(hash)]).await?;
            if found.is_some_and(|row| {
                row.try_get::<Vec<u8>, _>(0)
                    .ok()
                    .and_then(|v| cache::live(&v))
                    .is_some()
            }) {
                ctx.note("live entry");
                return Ok(false);
            }
            ctx.note("no live entry");
            upsert(ctx, Step::Claim, key, entry).await?;
            Ok(true)
        }
        .await;
        match written {
            Ok(written) => {
                ctx.commit().await?;
                Ok(written)
            }
            Err(err) => {
                ctx.rollback().await;
                match number(&err) {
                    Some(n) if SWALLOWED.contains(&n) => {
                        ctx.caught();
                        ctx.note(format!(
                            "{n}, swallowed by the failsafe: write returned false"
                        ));
                        Ok(false)
                    }
                    _ => Err(err),
                }
            }
        }
    }

    /// A plain write: the upsert on `key_hash`, last write wins.
    async fn upsert(
        ctx: &mut Ctx,
        step: Step,
        key: &str,
        entry: &Entry,
    ) -> Result<(), sqlx::Error> {
        let (value, size) = cache::stored(key, entry);
        let binds = [
            Bind::Bytes(key.as_bytes()),
            Bind::Bytes(&value),
            Bind::Int(cache::key_hash(key)),
            Bind::Int(size.into()),
        ];
        ctx.exec(step, UPSERT, &binds).await.map(drop)
    }

    /// A request whose write was refused reads the entry once: a finished
    /// one is replayed, a pending or vanished one answered 409.
    async fn lose(ctx: &mut Ctx, key: &str) -> Answered {
        let hash = cache::key_hash(key);
        let row = match ctx.fetch_opt(Step::Read, READ, &[Bind::Int(hash)]).await {
            Ok(row) => row,
            Err(err) => return ctx.failed(&err, "entry exists", None),
        };
        let entry = row
            .and_then(|r| r.try_get::<Vec<u8>, _>(0).ok())
            .and_then(|v| cache::live(&v));
        let Some(entry) = entry else {
            ctx.note("gone");
            return Answered::new(Outcome::Conflict, "entry vanished", "answered 409");
        };
        ctx.note(entry.status.name());
        if let Some(answered) = other_parameters(ctx, entry.fingerprint.as_deref()) {
            return answered;
        }
        if entry.status == ClaimStatus::Completed {
            let did = replayed(entry.response.as_ref().and_then(xp_id_of));
            return Answered::new(Outcome::Replayed, "entry completed", did);
        }
        Answered::new(Outcome::Conflict, "entry pending", "answered 409 at once")
    }
}
