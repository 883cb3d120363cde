//! `claim-work-complete`: claim the key as pending, do the work, complete the claim (lessons 2 and 3).
//!
//! The same three steps as check-then-store in a new order. The claim is an
//! insert, so the unique index decides who owns the key before any work runs;
//! a request that loses the claim never reaches the work. What the loser does
//! instead is its [`LoserPolicy`]: answer 409 at once, poll, or block.

use std::time::Duration;

use serde_json::Value;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};

use super::answers::{completed, conflict, mismatch, replay};
use super::claims::{claim, complete, key_of};
use super::fingerprint;
use super::loser::LoserPolicy;
use super::spec::{
    Can, Figure, Keys, MatrixCell, Note, OnMariadb, RailsLine, Spec, Story, TransactionRule,
};
use super::{Handled, OPERATION, Step, Strategy, work};
use crate::db::pool::Conn;
use crate::db::statements::{Sends, Sql};
use crate::request::{Answer, Failure, Lease, Request, Trace, Waited};
use crate::store::ClaimStatus;

/// Claim, work, complete; a loser follows its policy.
pub struct ClaimWorkComplete {
    pub loser: LoserPolicy,
}

impl Strategy for ClaimWorkComplete {
    fn handle<'a>(
        &'a self,
        lease: &'a mut Lease,
        req: &'a Request,
        trace: &'a mut Trace,
    ) -> Handled<'a> {
        Box::pin(async move {
            if let LoserPolicy::Block { give_up_after } = self.loser {
                return claim_blocking(lease, req, trace, give_up_after).await;
            }
            let conn = lease.conn(trace).await?;
            // 1. Claim: insert the key as pending; the unique index picks one winner.
            match claim(conn, &key_of(req, OPERATION), trace).await? {
                Some(claim_id) => {
                    let answer = work_and_complete(conn, req, trace, claim_id).await?;
                    Ok(answer)
                }
                None => lose(lease, req, trace, self.loser, &ClaimRead::course(req)).await,
            }
        })
    }
}

/// The winner's path: 2. work, 3. complete with the response for later requests.
async fn work_and_complete(
    conn: &Conn,
    req: &Request,
    trace: &mut Trace,
    claim_id: i64,
) -> Result<Answer, Failure> {
    let xp = trace
        .query(Step::Work, work::AWARD.text, work::award_xp(conn, req))
        .await?;
    trace.note(format!("made XP #{xp}"));
    let body = work::response_body(xp, &req.params);
    complete(conn, trace, claim_id, 201, &body).await?;
    trace.note("completed");
    Ok(completed(xp, body))
}

/// A loser reads the claim another request owns.
pub static READ: Sql = Sql::new(
    "SELECT status, response_body, request_fingerprint FROM idempotency_keys WHERE key = $1",
    &[Type::TEXT],
);

/// How a loser reads the claim it lost to: the statement, its parameters,
/// and the request's fingerprint to compare the stored one with (none:
/// nothing is compared). The course's read, or a guard file's replay step.
pub(super) struct ClaimRead<'r> {
    pub(crate) sql: &'static Sql,
    pub(crate) shown: &'static str,
    pub(crate) params: Vec<&'r (dyn ToSql + Sync)>,
    pub(crate) asked: Option<&'r str>,
    /// For a statement of someone else's: the most it may take, and its
    /// place in its file (see [`crate::request::bounded`]).
    pub(crate) limit: Option<(Duration, String)>,
}

impl<'r> ClaimRead<'r> {
    /// The course's read: the key's row, by key.
    fn course(req: &'r Request) -> Self {
        ClaimRead {
            sql: &READ,
            shown: READ.text,
            params: vec![&req.key],
            asked: req.fingerprint.as_deref(),
            limit: None,
        }
    }
}

/// The claim as a loser reads it.
struct Claim {
    /// `None`: the claim is gone (released between our insert and our read).
    status: Option<ClaimStatus>,
    body: Option<Value>,
    fingerprint: Option<String>,
}

impl Claim {
    fn status_name(&self) -> &'static str {
        self.status.map_or("missing", ClaimStatus::name)
    }
}

/// Reads the claim another request owns, its columns by name (a column
/// the statement does not return reads as nothing).
async fn read_claim(
    conn: &Conn,
    read: &ClaimRead<'_>,
    trace: &mut Trace,
) -> Result<Claim, Failure> {
    let sent = conn.fetch_opt(read.sql, &read.params);
    let row = match &read.limit {
        Some((limit, place)) => {
            let bounded = crate::request::bounded(conn, *limit, place, sent);
            trace.query(Step::Read, read.shown, bounded).await?
        }
        None => trace.query(Step::Read, read.shown, sent).await?,
    };
    let claim = match row {
        Some(row) => Claim {
            status: row
                .try_get::<_, Option<String>>("status")
                .ok()
                .flatten()
                .as_deref()
                .map(ClaimStatus::parse),
            body: row.try_get("response_body").ok().flatten(),
            fingerprint: if read.asked.is_some() {
                row.try_get("request_fingerprint").ok().flatten()
            } else {
                None
            },
        },
        // Gone between our insert and our read: as good as still in progress.
        None => Claim {
            status: None,
            body: None,
            fingerprint: None,
        },
    };
    trace.note(claim.status_name());
    Ok(claim)
}

/// True when the claim was made for other parameters than the request
/// asks, as the fingerprint `read` compares says.
fn other_parameters(read: &ClaimRead<'_>, claim: &Claim, trace: &mut Trace) -> bool {
    let differs = fingerprint::differs(read.asked, claim.fingerprint.as_deref());
    if differs {
        trace.note(format!("{}, other parameters", claim.status_name()));
    }
    differs
}

/// The loser's path for fail-fast and poll: read the claim; replay it if
/// completed; else answer 409 now (fail-fast) or give the connection back,
/// wait, and read again until it completes or the wait runs out (poll).
pub(super) async fn lose(
    lease: &mut Lease,
    req: &Request,
    trace: &mut Trace,
    policy: LoserPolicy,
    read: &ClaimRead<'_>,
) -> Result<Answer, Failure> {
    let began = trace.now_ms();
    let mut reads = 0;
    loop {
        let conn = lease.read_conn(trace).await?;
        let claim = read_claim(conn, read, trace).await?;
        reads += 1;
        // The key means the request: other parameters get 422 whatever the claim's state.
        if other_parameters(read, &claim, trace) {
            return Ok(mismatch(req));
        }
        let waited = match policy {
            LoserPolicy::Poll { .. } => Some(Waited {
                ms: trace.now_ms() - began,
                reads,
                held_connection: false,
            }),
            _ => None,
        };
        if claim.status == Some(ClaimStatus::Completed) {
            return Ok(replay(claim.body, "claim completed", waited));
        }
        let LoserPolicy::Poll {
            every,
            give_up_after,
        } = policy
        else {
            return Ok(conflict(
                req,
                "claim pending",
                "answered 409 at once",
                waited,
            ));
        };
        if trace.now_ms() - began + every.as_secs_f64() * 1000.0
            > give_up_after.as_secs_f64() * 1000.0
        {
            let did = format!("gave up after {reads} reads, 409");
            return Ok(conflict(req, "claim pending", &did, waited));
        }
        // Waiting costs no connection: it goes back to the pool meanwhile.
        lease.release();
        trace.time(Step::Wait, tokio::time::sleep(every)).await;
    }
}

/// The whole request in one transaction, so a loser's claim insert waits on
/// the winner's uncommitted claim row (the unique index's lock) until the
/// winner commits, holding its connection all the while. `lock_timeout`
/// bounds the wait.
async fn claim_blocking(
    lease: &mut Lease,
    req: &Request,
    trace: &mut Trace,
    give_up_after: Duration,
) -> Result<Answer, Failure> {
    let conn = lease.conn(trace).await?;
    conn.batch_execute(&format!(
        "BEGIN; SET LOCAL lock_timeout = '{}ms'",
        give_up_after.as_millis().max(1)
    ))
    .await?;
    // Asked inside the transaction: through a pooler the server process
    // is this request's only from BEGIN to the end.
    let pid = conn.query_typed_one("SELECT pg_backend_pid()", &[]).await?;
    trace.backend_pid = Some(pid.get(0));
    trace.queries += 2;
    let claimed = claim(conn, &key_of(req, OPERATION), trace).await;
    let blocked = trace.events.last().map_or(0.0, |e| e.end_ms - e.start_ms);
    let waited = Some(Waited {
        ms: blocked,
        reads: 0,
        held_connection: true,
    });
    match claimed {
        Ok(Some(claim_id)) => {
            let answer = work_and_complete(conn, req, trace, claim_id).await;
            trace.queries += 1;
            let finish = if answer.is_ok() { "COMMIT" } else { "ROLLBACK" };
            conn.batch_execute(finish).await?;
            answer
        }
        Ok(None) => {
            // The winner committed: its claim is complete.
            trace.queries += 1;
            conn.batch_execute("COMMIT").await?;
            let read = ClaimRead::course(req);
            let claim = read_claim(conn, &read, trace).await?;
            if other_parameters(&read, &claim, trace) {
                Ok(mismatch(req))
            } else if claim.status == Some(ClaimStatus::Completed) {
                Ok(replay(claim.body, "claim completed", waited))
            } else {
                Ok(conflict(req, "claim pending", "answered 409", waited))
            }
        }
        Err(err) if err.code() == Some(&SqlState::LOCK_NOT_AVAILABLE) => {
            trace.caught(&err);
            trace.note("gave up waiting");
            trace.queries += 1;
            conn.batch_execute("ROLLBACK").await?;
            let did = format!("blocked {blocked:.0} ms, gave up, 409");
            Ok(conflict(req, "claim locked", &did, waited))
        }
        Err(err) => {
            let _ = conn.batch_execute("ROLLBACK").await;
            Err(err.into())
        }
    }
}

/// `claim-work-complete`: lesson 2's shape.
pub const SPEC: Spec = Spec {
    name: "claim-work-complete",
    help: "Claim the key as pending, do the work, complete the claim (lesson 2)",
    lesson: 2,
    in_course: true,
    keys: Keys::KeyTable,
    transaction: TransactionRule::Optional,
    losers: true,
    figure: Figure::One,
    story: Story::ClaimFirst,
    rails: &[
        RailsLine {
            step: Step::Claim,
            when: Note::Any,
            line: "claim = IdempotencyKey.insert({ key:, operation: \"award_xp\", status: \"pending\" }, unique_by: :key, returning: :id)",
        },
        RailsLine {
            step: Step::Read,
            when: Note::Any,
            line: "existing = IdempotencyKey.find_by(key: idempotency_key)  # someone else's claim",
        },
        super::check_then_store::RAILS_WORK,
        RailsLine {
            step: Step::Complete,
            when: Note::Any,
            line: "IdempotencyKey.where(id: claim).update_all(status: \"completed\", response_body: { id: xp.id })",
        },
    ],
    matrix: &MatrixCell::PLAIN_AND_EVERY_LEVEL,
    can: Can {
        cache_claims: true,
        ..Can::NOTHING
    },
    on_mariadb: OnMariadb::Runs(on_mariadb::shape),
    build: |options| {
        Box::new(ClaimWorkComplete {
            loser: options.loser,
        })
    },
};

/// Claim, work, complete on MariaDB (InnoDB). `INSERT IGNORE` stands for
/// `ON CONFLICT DO NOTHING`: a claim that meets the key's unique index
/// inserts nothing (0 rows), and nothing else here could be ignored, since
/// every value fits its column. A loser answers 409 at once, as the
/// course's default loser does.
pub mod on_mariadb {
    use std::future::Future;
    use std::pin::Pin;

    use sqlx::Row;

    use crate::request::mariadb::{Answered, Bind, Ctx, ReadBack, number};
    use crate::request::{Outcome, Step};
    use crate::strategy::OPERATION;
    use crate::strategy::answers::{body_of, other_parameters, replayed, stored_xp};

    pub const CLAIM: &str = "INSERT IGNORE INTO idempotency_keys \
        (`key`, operation, status, request_fingerprint, worker, locked_at) \
        VALUES (?, ?, 'pending', ?, ?, NOW(6))";
    pub const READ: &str = "SELECT status, response_body, request_fingerprint \
        FROM idempotency_keys WHERE `key` = ?";
    pub const COMPLETE: &str = "UPDATE idempotency_keys SET status = 'completed', \
        response_code = 201, response_body = ?, completed_at = NOW(6) \
        WHERE `key` = ? AND worker = ?";

    /// The claim as Rails writes find-or-create (`--read-back`): a plain
    /// find, a plain INSERT, and on 1062 the row read back.
    pub const CREATE: &str = "INSERT INTO idempotency_keys \
        (`key`, operation, status, request_fingerprint, worker, locked_at) \
        VALUES (?, ?, 'pending', ?, ?, NOW(6))";
    pub const READ_SHARE: &str = "SELECT status, response_body, request_fingerprint \
        FROM idempotency_keys WHERE `key` = ? LOCK IN SHARE MODE";
    pub const READ_FOR_UPDATE: &str = "SELECT status, response_body, request_fingerprint \
        FROM idempotency_keys WHERE `key` = ? FOR UPDATE";

    pub fn shape(ctx: &mut Ctx) -> Pin<Box<dyn Future<Output = Answered> + Send + '_>> {
        Box::pin(async move {
            let key = ctx.asked.key.clone();
            let worker = ctx.asked.worker as i64;
            let claimed = match ctx.read_back {
                Some(read_back) => find_or_create(ctx, &key, read_back).await,
                None => claim(ctx, &key).await,
            };
            if let Err(answered) = claimed {
                return answered;
            }
            let xp = match ctx.work().await {
                Ok(xp) => xp,
                Err(err) => return ctx.failed(&err, "claimed", None),
            };
            let body = body_of(&ctx.asked, xp);
            let complete = [Bind::Text(&body), Bind::Text(&key), Bind::Int(worker)];
            match ctx.exec(Step::Complete, COMPLETE, &complete).await {
                Ok(_) => {
                    ctx.note("completed");
                    Answered {
                        made_xp: Some(xp),
                        ..Answered::new(
                            Outcome::Created,
                            "claimed",
                            format!("made XP #{xp}, completed"),
                        )
                    }
                }
                Err(err) => ctx.failed(&err, "claimed", Some(xp)),
            }
        })
    }

    /// What a claim's INSERT binds: the key, the operation, the request's
    /// fingerprint and its worker.
    fn claim_binds<'a>(key: &'a str, print: Option<&'a str>, worker: i64) -> [Bind<'a>; 4] {
        [
            Bind::Text(key),
            Bind::Text(OPERATION),
            Bind::OptText(print),
            Bind::Int(worker),
        ]
    }

    /// The claim's INSERT, as the course writes it (`INSERT IGNORE`); a
    /// loser's answer when another request holds the key.
    async fn claim(ctx: &mut Ctx, key: &str) -> Result<(), Answered> {
        let (print, worker) = (ctx.asked.fingerprint.clone(), ctx.asked.worker as i64);
        let claim = claim_binds(key, print.as_deref(), worker);
        match ctx.exec(Step::Claim, CLAIM, &claim).await {
            Ok(done) if done.rows_affected() == 1 => {
                ctx.note("claimed");
                Ok(())
            }
            Ok(_) => {
                ctx.note("key taken");
                Err(lose(ctx, key).await)
            }
            Err(err) => Err(ctx.failed(&err, "—", None)),
        }
    }

    /// The claim as find-or-create: a plain find (which, in a transaction,
    /// takes its snapshot), a plain INSERT, and on 1062, caught as Rails
    /// rescues it, the row read back as `read_back` says. A 1062 leaves a
    /// shared lock on the row; `FOR UPDATE` then needs the exclusive one,
    /// which two such losers wait for from each other (1213), and a plain
    /// read sees the snapshot, taken before the winner committed: nothing.
    async fn find_or_create(ctx: &mut Ctx, key: &str, read_back: ReadBack) -> Result<(), Answered> {
        match ctx.fetch_opt(Step::Find, READ, &[Bind::Text(key)]).await {
            Ok(Some(row)) => return Err(judged(ctx, Some(row), "found: claim")),
            Ok(None) => ctx.note("no key"),
            Err(err) => return Err(ctx.failed(&err, "—", None)),
        }
        let (print, worker) = (ctx.asked.fingerprint.clone(), ctx.asked.worker as i64);
        let create = claim_binds(key, print.as_deref(), worker);
        match ctx.exec(Step::Claim, CREATE, &create).await {
            Ok(_) => {
                ctx.note("claimed");
                return Ok(());
            }
            Err(err) if number(&err) == Some(1062) => {
                ctx.caught();
                ctx.note("key taken: 1062, caught");
            }
            Err(err) => return Err(ctx.failed(&err, "no key", None)),
        }
        let sql = match read_back {
            ReadBack::Plain => READ,
            ReadBack::Share => READ_SHARE,
            ReadBack::ForUpdate => READ_FOR_UPDATE,
        };
        match ctx.fetch_opt(Step::Read, sql, &[Bind::Text(key)]).await {
            Ok(None) => {
                ctx.note("nothing: its snapshot is older than the winner's commit");
                Err(Answered::new(
                    Outcome::Error,
                    "key taken (1062)",
                    "read the key back and found nothing, 500",
                ))
            }
            Ok(row) => Err(judged(ctx, row, "1062, read back: claim")),
            Err(err) => Err(ctx.failed(&err, "key taken (1062)", None)),
        }
    }

    /// A loser reads the claim once: a finished one is replayed, a pending
    /// one answered 409.
    async fn lose(ctx: &mut Ctx, key: &str) -> Answered {
        match ctx.fetch_opt(Step::Read, READ, &[Bind::Text(key)]).await {
            Ok(row) => judged(ctx, row, "claim"),
            Err(err) => ctx.failed(&err, "key taken", None),
        }
    }

    /// The answer to a request that found the claim `row` holds (`saw`
    /// says how: "claim", then its status): a finished claim replayed, a
    /// pending one answered 409, other parameters 422.
    fn judged(ctx: &mut Ctx, row: Option<sqlx::mysql::MySqlRow>, saw: &str) -> Answered {
        let stored: Option<String> = row.as_ref().and_then(|r| r.try_get(2).ok()).flatten();
        if let Some(answered) = other_parameters(ctx, stored.as_deref()) {
            return answered;
        }
        let status: Option<String> = row.as_ref().and_then(|r| r.try_get(0).ok());
        let status = status.unwrap_or_else(|| "missing".into());
        ctx.note(status.clone());
        if status == "completed" {
            let did = replayed(row.as_ref().and_then(|r| stored_xp(r, 1)));
            return Answered::new(Outcome::Replayed, format!("{saw} completed"), did);
        }
        Answered::new(
            Outcome::Conflict,
            format!("{saw} {status}"),
            "answered 409 at once",
        )
    }
}
