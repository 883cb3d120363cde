//! `check-then-store`: find the key; if missing, do the work, then store the key (lesson 1).
//!
//! The shape that passes every test that calls it once. Under concurrency,
//! every request that finds nothing before the first store does the work; the
//! unique index on the key only decides, afterwards, whose key row survives.

use std::future::Future;

use serde_json::Value;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};

use super::answers::mismatch;
use super::fingerprint;
use super::orm::{Orm, VERIFY};
use super::spec::{
    Can, Figure, Keys, MatrixCell, Note, OnMariadb, RailsLine, SERIALIZABLE_RETRIES, Spec, Story,
    TransactionRule,
};
use super::transaction::Isolation;
use super::{Handled, OPERATION, Step, Strategy, work};
use crate::db::pool::Conn;
use crate::db::statements::{Sends, Sql};
use crate::request::{Answer, Failure, Lease, Outcome, Request, Trace};

/// 1. Check: `IdempotencyKey.find_by(key:, operation:)`.
pub static FIND: Sql = Sql::new(
    "SELECT response_body, request_fingerprint FROM idempotency_keys
     WHERE key = $1 AND operation = $2",
    &[Type::TEXT, Type::TEXT],
);

/// find-for-update's check: the same find, locking the row it finds. A key
/// no one has stored yet has no row, so the first requests lock nothing.
pub static FIND_FOR_UPDATE: Sql = Sql::new(
    "SELECT response_body, request_fingerprint FROM idempotency_keys
     WHERE key = $1 AND operation = $2 FOR UPDATE",
    &[Type::TEXT, Type::TEXT],
);

/// advisory-lock's first step: a lock on the key's hash, held until the
/// request's transaction ends, so that requests with one key take turns.
pub static ADVISORY_LOCK: Sql = Sql::new(
    "SELECT pg_advisory_xact_lock(hashtextextended($1 || ':' || $2, 0))",
    &[Type::TEXT, Type::TEXT],
);

/// 3. Store, after the work: `IdempotencyKey.create!(...)`.
pub static STORE: Sql = Sql::new(
    "INSERT INTO idempotency_keys (key, operation, status, request_fingerprint,
                                   response_code, response_body, worker, completed_at)
     VALUES ($1, $2, 'completed', $3, 201, $4, $5, now())",
    &[Type::TEXT, Type::TEXT, Type::TEXT, Type::JSONB, Type::INT4],
);

/// Check, work, store, in the statements of `orm`, with the lock people
/// add to it.
#[derive(Debug, Clone, Copy, Default)]
pub struct CheckThenStore {
    pub(crate) orm: Orm,
    pub(crate) lock: FindLock,
}

/// The lock a check-then-store takes to make its check safe (the guards
/// people write after lesson 1), held until the request's transaction ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FindLock {
    /// The course's code: no lock.
    #[default]
    None,
    /// `SELECT ... FOR UPDATE` as the find (find-for-update).
    ForUpdate,
    /// `pg_advisory_xact_lock` on the key before the find (advisory-lock).
    Advisory,
}

impl Strategy for CheckThenStore {
    fn handle<'a>(
        &'a self,
        lease: &'a mut Lease,
        req: &'a Request,
        trace: &'a mut Trace,
    ) -> Handled<'a> {
        Box::pin(async move {
            let conn = lease.conn(trace).await?;
            if self.orm == Orm::Activerecord {
                // ActiveRecord verifies the connection it checked out.
                trace
                    .query(Step::Checkout, VERIFY, conn.simple_query(VERIFY))
                    .await?;
                trace.note("verified (SELECT 1)");
            }
            if self.lock == FindLock::Advisory {
                trace
                    .query(
                        Step::Lock,
                        ADVISORY_LOCK.text,
                        conn.fetch_one(&ADVISORY_LOCK, &[&req.key, &OPERATION]),
                    )
                    .await?;
                trace.note("key locked");
            }
            // 1. Check: has anyone stored this key yet? (On a standby, with
            // --read-from standby: what it has replayed so far.)
            let find = match self.lock {
                FindLock::ForUpdate => &FIND_FOR_UPDATE,
                FindLock::None | FindLock::Advisory => &FIND,
            };
            let reader = lease.read_conn(trace).await?;
            let found = trace
                .query(
                    Step::Find,
                    find.text,
                    reader.fetch_opt(find, &[&req.key, &OPERATION]),
                )
                .await?;
            if let Some(row) = found {
                return Ok(replay(&row, req, trace));
            }
            trace.note("no key");
            let conn = lease.conn(trace).await?;

            // 2. Work: nothing above stops another request doing the same.
            let xp = trace
                .query(Step::Work, work::AWARD.text, self.award(conn, req))
                .await?;
            trace.note(format!("made XP #{xp}"));
            let body = work::response_body(xp, &req.params);

            // 3. Store: only now does the unique index get a say.
            let worker = req.worker_id();
            let params: [&(dyn ToSql + Sync); 5] =
                [&req.key, &OPERATION, &req.fingerprint, &body, &worker];
            let insert = conn.exec(&STORE, &params);
            let stored = trace
                .query(Step::Store, STORE.text, self.created(conn, insert))
                .await;
            if let Err(err) = &stored {
                trace.caught(err);
            }
            after_store(stored, xp, body, trace)
        })
    }
}

impl CheckThenStore {
    /// The work: the service call, then the XP row (`ExperiencePoint.create!`).
    async fn award(&self, conn: &Conn, req: &Request) -> Result<i64, tokio_postgres::Error> {
        work::service_call(req).await;
        self.created(conn, work::insert_xp(conn, req)).await
    }

    /// One `create!`: the insert alone, or ActiveRecord's transaction
    /// around it (rolled back when the insert fails, as Rails does).
    async fn created<T>(
        &self,
        conn: &Conn,
        insert: impl Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> Result<T, tokio_postgres::Error> {
        if self.orm == Orm::Bare {
            return insert.await;
        }
        conn.batch_execute("BEGIN").await?;
        match insert.await {
            Ok(done) => conn.batch_execute("COMMIT").await.map(|()| done),
            Err(err) => {
                let _ = conn.batch_execute("ROLLBACK").await;
                Err(err)
            }
        }
    }
}

/// A stored key: its response replayed, unless the request asks for
/// something else than the one that stored it.
fn replay(row: &tokio_postgres::Row, req: &Request, trace: &mut Trace) -> Answer {
    let body: Option<Value> = row.get(0);
    let stored: Option<String> = row.get(1);
    if fingerprint::differs(req.fingerprint.as_deref(), stored.as_deref()) {
        trace.note("key found, other parameters");
        return mismatch(req);
    }
    let xp = body.as_ref().and_then(work::xp_id_of);
    trace.note("key found");
    Answer {
        replayed: true,
        outcome: Outcome::Replayed,
        saw: "key found".into(),
        did: xp.map_or("replayed".into(), |xp| format!("replayed XP #{xp}")),
        made_xp: None,
        body,
        waited: None,
    }
}

/// What the store's outcome makes of the request: created, or a
/// duplicate when another request stored the key first.
pub(super) fn after_store(
    stored: Result<u64, tokio_postgres::Error>,
    xp: i64,
    body: Value,
    trace: &mut Trace,
) -> Result<Answer, Failure> {
    match stored {
        Ok(_) => {
            trace.note("key stored");
            Ok(Answer {
                replayed: false,
                outcome: Outcome::Created,
                saw: "no key".into(),
                did: format!("made XP #{xp}, stored key"),
                made_xp: Some(xp),
                body: Some(body),
                waited: None,
            })
        }
        // The rescue the course describes: it catches that this
        // request lost the key store, and can do nothing about the
        // XP row it already made.
        Err(err) if err.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
            trace.note("key store lost");
            Ok(Answer {
                replayed: false,
                outcome: Outcome::Duplicate,
                saw: "no key".into(),
                did: format!("made XP #{xp}, key store lost"),
                made_xp: Some(xp),
                body: Some(body),
                waited: None,
            })
        }
        Err(err) => Err(err.into()),
    }
}

/// `check-then-store`: lesson 1's shape, the course's code.
pub const SPEC: Spec = Spec {
    name: "check-then-store",
    help: "Find the key; if missing, do the work, then store the key (lesson 1)",
    lesson: 1,
    in_course: true,
    keys: Keys::KeyTable,
    transaction: TransactionRule::Optional,
    losers: false,
    figure: Figure::PerConnection,
    story: Story::CheckThenStore,
    rails: &[
        RailsLine {
            step: Step::Find,
            when: Note::StartsWith("key found"),
            line: "return existing_result if IdempotencyKey.find_by(key: idempotency_key, operation: \"award_xp\")",
        },
        RailsLine {
            step: Step::Find,
            when: Note::Any,
            line: "existing = IdempotencyKey.find_by(key: idempotency_key, operation: \"award_xp\")  # nil",
        },
        RAILS_WORK,
        RailsLine {
            step: Step::Store,
            when: Note::Contains("lost"),
            line: "IdempotencyKey.create!(...) rescue ActiveRecord::RecordNotUnique  # the XP row stays",
        },
        RailsLine {
            step: Step::Store,
            when: Note::Any,
            line: "IdempotencyKey.create!(key: idempotency_key, operation: \"award_xp\", response_body: { id: xp.id })",
        },
    ],
    matrix: &[
        MatrixCell::Plain,
        MatrixCell::Within(Isolation::ReadCommitted, 0),
        MatrixCell::Within(Isolation::RepeatableRead, 0),
        MatrixCell::Within(Isolation::Serializable, 0),
        MatrixCell::Within(Isolation::Serializable, SERIALIZABLE_RETRIES),
    ],
    can: Can {
        orm: true,
        ..Can::NOTHING
    },
    on_mariadb: OnMariadb::Runs(on_mariadb::plain),
    build: |options| {
        Box::new(CheckThenStore {
            orm: options.orm,
            lock: FindLock::None,
        })
    },
};

/// The work's line of Rails, the same in lesson 1's code and lesson 2's.
pub const RAILS_WORK: RailsLine = RailsLine {
    step: Step::Work,
    when: Note::Any,
    line: "xp = ExperiencePoint.create!(user:, amount:)  # the work",
};

/// Check, work, store on MariaDB (InnoDB): the same steps in MySQL's SQL.
/// What differs is the server: InnoDB's `FOR UPDATE` of a missing key
/// takes a gap lock under REPEATABLE READ, where PostgreSQL locks nothing,
/// and its advisory lock (`GET_LOCK`) belongs to the session, not the
/// transaction, so it is released by hand.
pub mod on_mariadb {
    use std::future::Future;
    use std::pin::Pin;

    use sqlx::Row;

    use super::FindLock;
    use crate::request::mariadb::{Answered, Bind, Ctx};
    use crate::request::{Outcome, Step};
    use crate::strategy::OPERATION;
    use crate::strategy::answers::{body_of, other_parameters, replayed, stored_xp};

    pub const FIND: &str = "SELECT response_body, request_fingerprint FROM idempotency_keys \
        WHERE `key` = ? AND operation = ?";
    pub const FIND_FOR_UPDATE: &str = "SELECT response_body, request_fingerprint \
        FROM idempotency_keys WHERE `key` = ? AND operation = ? FOR UPDATE";
    /// The lock on the key's name, waiting at most 10 s for it.
    pub const GET_LOCK: &str = "SELECT GET_LOCK(CONCAT(?, ':', ?), 10)";
    pub const RELEASE_LOCK: &str = "SELECT RELEASE_LOCK(CONCAT(?, ':', ?))";
    pub const STORE: &str = "INSERT INTO idempotency_keys (`key`, operation, status, \
        request_fingerprint, response_code, response_body, worker, completed_at) \
        VALUES (?, ?, 'completed', ?, 201, ?, ?, NOW(6))";

    type Shaped<'a> = Pin<Box<dyn Future<Output = Answered> + Send + 'a>>;

    pub fn plain(ctx: &mut Ctx) -> Shaped<'_> {
        Box::pin(checked(ctx, FindLock::None))
    }

    pub fn for_update(ctx: &mut Ctx) -> Shaped<'_> {
        Box::pin(checked(ctx, FindLock::ForUpdate))
    }

    /// `pg_advisory_xact_lock`'s counterpart. `GET_LOCK` belongs to the
    /// session, so the request's end releases it ([`Ctx::hold_until_end`]):
    /// after its transaction's COMMIT, never before. Released before the
    /// COMMIT, the next request would get the lock, find no key (the
    /// winner's is not committed yet), work, and meet 1062 at its store.
    pub fn advisory(ctx: &mut Ctx) -> Shaped<'_> {
        Box::pin(async move {
            let key = ctx.asked.key.clone();
            let on = [Bind::Text(&key), Bind::Text(OPERATION)];
            match ctx.fetch_opt(Step::Lock, GET_LOCK, &on).await {
                Ok(Some(row)) if row.try_get::<Option<i64>, _>(0).ok().flatten() == Some(1) => {
                    ctx.note("key locked");
                    ctx.hold_until_end(RELEASE_LOCK, [key.clone(), OPERATION.to_string()]);
                }
                Ok(_) => return Answered::new(Outcome::Error, "—", "GET_LOCK timed out, 500"),
                Err(err) => return ctx.failed(&err, "—", None),
            }
            checked(ctx, FindLock::Advisory).await
        })
    }

    async fn checked(ctx: &mut Ctx, lock: FindLock) -> Answered {
        let key = ctx.asked.key.clone();
        let find = match lock {
            FindLock::ForUpdate => FIND_FOR_UPDATE,
            FindLock::None | FindLock::Advisory => FIND,
        };
        let on = [Bind::Text(&key), Bind::Text(OPERATION)];
        match ctx.fetch_opt(Step::Find, find, &on).await {
            Err(err) => return ctx.failed(&err, "—", None),
            Ok(Some(row)) => {
                let stored: Option<String> = row.try_get(1).ok().flatten();
                if let Some(answered) = other_parameters(ctx, stored.as_deref()) {
                    return answered;
                }
                ctx.note("key found");
                let did = replayed(stored_xp(&row, 0));
                return Answered::new(Outcome::Replayed, "key found", did);
            }
            Ok(None) => ctx.note("no key"),
        }
        let xp = match ctx.work().await {
            Ok(xp) => xp,
            Err(err) => return ctx.failed(&err, "no key", None),
        };
        let body = body_of(&ctx.asked, xp);
        let a = &ctx.asked;
        let worker = a.worker as i64;
        let print = ctx.asked.fingerprint.clone();
        let binds = [
            Bind::Text(&key),
            Bind::Text(OPERATION),
            Bind::OptText(print.as_deref()),
            Bind::Text(&body),
            Bind::Int(worker),
        ];
        let made = |outcome, did: String| Answered {
            made_xp: Some(xp),
            ..Answered::new(outcome, "no key", did)
        };
        match ctx.exec(Step::Store, STORE, &binds).await {
            Ok(_) => {
                ctx.note("key stored");
                made(Outcome::Created, format!("made XP #{xp}, stored key"))
            }
            // The course's rescue: this request lost the key store, and can
            // do nothing about the XP row it made (1062 is MySQL's 23505).
            Err(err) if crate::request::mariadb::number(&err) == Some(1062) => {
                ctx.note("key store lost (1062)");
                made(Outcome::Duplicate, format!("made XP #{xp}, key store lost"))
            }
            Err(err) => ctx.failed(&err, "no key", Some(xp)),
        }
    }
}
