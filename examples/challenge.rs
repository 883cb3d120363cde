//! Lesson 7's challenge: build your own idempotency guard, and let idem judge it.
//!
//! Run it with
//!
//!     cargo run --example challenge
//!
//! It starts a disposable PostgreSQL (or uses DATABASE_URL), puts `MyGuard`
//! through four races and prints PASS or FAIL for each:
//!
//! 1. five-worker race: five requests with one key at once must make 1 XP row;
//! 2. fingerprint: the same key with other amounts must get 422, no work;
//! 3. crash after claim: the first worker to claim dies before working; a retry
//!    sent after the stale-claim age must finish the work (201) or replay it (200);
//! 4. stale claim, two takers: two such retries at once must still make 1 row.
//!
//! The starting point below is the course's check-then-store: find the key,
//! do the work, store the key. It fails case 1 (and more). Change `handle`
//! until all four pass. Hints, in the order the lessons give them:
//!
//! - Claim before you work: `INSERT ... ON CONFLICT (key) DO NOTHING RETURNING id`
//!   with status 'pending' lets the unique index pick one winner (lesson 2).
//! - A loser reads the claim: completed → replay the stored response; pending
//!   → 409 (lesson 3).
//! - Store `req.fingerprint` with the claim; a loser whose fingerprint differs
//!   answers 422 (`Outcome::Mismatch`) and does no work (lesson 4).
//! - Do the work and the completion in one transaction, so a crash leaves no
//!   XP row behind, and let a later request take over a pending claim whose
//!   `locked_at` is older than `idem::challenge::STALE_AFTER` — with a single
//!   `UPDATE ... WHERE locked_at < now() - interval ...`, so that of two
//!   takers only one wins (lesson 7).
//!
//! Record every statement with `trace.query(Step::..., SQL.text, future)`: that
//! is how idem draws your steps, and where the crash case strikes. A statement
//! is a `Sql`: its text, naming the tables `idempotency_keys` and
//! `experience_points` (see migrations/) bare, and its parameters' types; the
//! connection writes the run's schema into it and sends it unnamed, with
//! `fetch_opt`, `fetch_one`, `fetch_all` or `exec`.

use std::sync::Arc;

use idem::db::statements::{Sends, Sql};
use idem::db::{ConnectOptions, Database};
use idem::race::{Answer, Lease, Outcome, Request, Trace};
use idem::strategy::work::{AWARD, award_xp, response_body};
use idem::strategy::{Handled, OPERATION, Step, Strategy};
use tokio_postgres::types::Type;

/// Your guard. It starts as check-then-store.
struct MyGuard;

impl Strategy for MyGuard {
    fn handle<'a>(
        &'a self,
        lease: &'a mut Lease,
        req: &'a Request,
        trace: &'a mut Trace,
    ) -> Handled<'a> {
        Box::pin(async move {
            let conn = lease.conn(trace).await?;

            // Check: has anyone stored this key?
            if let Some(row) = trace
                .query(Step::Find, FIND.text, conn.fetch_opt(&FIND, &[&req.key]))
                .await?
            {
                return Ok(Answer {
                    outcome: Outcome::Replayed,
                    replayed: true,
                    saw: "key found".into(),
                    did: "replayed".into(),
                    made_xp: None,
                    body: row.get(0),
                    waited: None,
                });
            }

            // Work: nothing stops four other requests from being right here too.
            let xp = trace
                .query(Step::Work, AWARD.text, award_xp(conn, req))
                .await?;
            let body = response_body(xp, &req.params);

            // Store: too late to stop anyone.
            trace
                .query(
                    Step::Store,
                    STORE.text,
                    conn.exec(&STORE, &[&req.key, &OPERATION, &body, &req.worker_id()]),
                )
                .await?;
            Ok(Answer {
                outcome: Outcome::Created,
                replayed: false,
                saw: "no key".into(),
                did: format!("made XP #{xp}"),
                made_xp: Some(xp),
                body: Some(body),
                waited: None,
            })
        })
    }
}

/// Check: has anyone stored this key?
static FIND: Sql = Sql::new(
    "SELECT response_body FROM idempotency_keys WHERE key = $1",
    &[Type::TEXT],
);

/// Store, after the work.
static STORE: Sql = Sql::new(
    "INSERT INTO idempotency_keys (key, operation, status, response_code, response_body, worker)
     VALUES ($1, $2, 'completed', 201, $3, $4) ON CONFLICT (key) DO NOTHING",
    &[Type::TEXT, Type::TEXT, Type::JSONB, Type::INT4],
);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let options = ConnectOptions {
        database_url: std::env::var("DATABASE_URL").ok(),
        ..ConnectOptions::default()
    };
    let db = Database::open(&options).await?;
    let judged = idem::challenge::judge(&db, Arc::new(MyGuard)).await;
    db.close().await?;
    let cases = judged?;
    print!(
        "{}",
        idem::report::challenge::render("MyGuard (examples/challenge.rs)", &cases)
    );
    if cases.iter().all(|c| c.passed()) {
        println!("All four hold. Compare your guard with src/strategy/guard/.");
        Ok(())
    } else {
        std::process::exit(1);
    }
}
