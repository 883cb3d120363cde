//! `insert-unique`: the work itself is one `INSERT ... ON CONFLICT DO NOTHING` (the app's real award service).
//!
//! No key table at all: the XP row carries the key, and the XP table's unique
//! index decides at the very moment the work is recorded.

use tokio_postgres::types::Type;

use super::fingerprint::Params;
use super::spec::{Can, Figure, Keys, MatrixCell, OnMariadb, Spec, Story, TransactionRule};
use super::{Handled, Step, Strategy, work};
use crate::db::statements::{Sends, Sql};
use crate::request::{Answer, Lease, Outcome, Request, Trace};

/// The whole guard: the work as one insert the unique index decides
/// (Rails: `insert ... unique_by: :idempotency_key`).
pub static INSERT: Sql = Sql::new(
    "INSERT INTO experience_points (user_id, amount, lesson, idempotency_key, worker)
     VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (idempotency_key) DO NOTHING
     RETURNING id",
    &[Type::INT8, Type::INT4, Type::INT4, Type::TEXT, Type::INT4],
);

/// The row the key already made, for the replay.
pub static FIND: Sql = Sql::new(
    "SELECT id, amount, lesson FROM experience_points WHERE idempotency_key = $1",
    &[Type::TEXT],
);

/// The single-statement guard.
pub struct InsertUnique;

impl Strategy for InsertUnique {
    fn handle<'a>(
        &'a self,
        lease: &'a mut Lease,
        req: &'a Request,
        trace: &'a mut Trace,
    ) -> Handled<'a> {
        Box::pin(async move {
            let conn = lease.conn(trace).await?;
            let made = trace
                .query(Step::Work, INSERT.text, async {
                    work::service_call(req).await;
                    conn.fetch_opt(
                        &INSERT,
                        &[
                            &req.params.user_id,
                            &req.params.amount,
                            &req.params.lesson,
                            &req.key,
                            &req.worker_id(),
                        ],
                    )
                    .await
                })
                .await?;
            if let Some(row) = made {
                let xp: i64 = row.get(0);
                trace.note(format!("made XP #{xp}"));
                return Ok(Answer {
                    replayed: false,
                    outcome: Outcome::Created,
                    saw: "no XP row for the key".into(),
                    did: format!("made XP #{xp}"),
                    made_xp: Some(xp),
                    body: Some(work::response_body(xp, &req.params)),
                    waited: None,
                });
            }
            trace.note("key taken");
            let row = trace
                .query(Step::Read, FIND.text, conn.fetch_one(&FIND, &[&req.key]))
                .await?;
            let xp: i64 = row.get(0);
            trace.note(format!("XP #{xp}"));
            // The response is rebuilt from the row that was made, not from this request.
            let made = Params {
                amount: row.get(1),
                lesson: row.get::<_, Option<i32>>(2).unwrap_or(req.params.lesson),
                ..req.params.clone()
            };
            Ok(Answer {
                replayed: true,
                outcome: Outcome::Replayed,
                saw: "XP row exists".into(),
                did: format!("replayed XP #{xp}"),
                made_xp: None,
                body: Some(work::response_body(xp, &made)),
                waited: None,
            })
        })
    }
}

/// `insert-unique`: the key on the XP row.
pub const SPEC: Spec = Spec {
    name: "insert-unique",
    help: "The work is one INSERT ... ON CONFLICT DO NOTHING on the XP table",
    lesson: 1,
    in_course: true,
    keys: Keys::XpTable,
    transaction: TransactionRule::Optional,
    losers: false,
    figure: Figure::One,
    story: Story::IndexAtInsert,
    rails: &[],
    matrix: &MatrixCell::PLAIN_AND_EVERY_LEVEL,
    can: Can::NOTHING,
    build: |_| Box::new(InsertUnique),
    on_mariadb: OnMariadb::Runs(on_mariadb::shape),
};

/// insert-unique on MariaDB (InnoDB): `INSERT IGNORE` on the XP table's
/// unique key, MySQL's `ON CONFLICT DO NOTHING`; 0 rows means the key's
/// row was there, and the request replays it.
pub mod on_mariadb {
    use std::future::Future;
    use std::pin::Pin;

    use sqlx::Row;

    use crate::request::mariadb::{Answered, Bind, Ctx};
    use crate::request::{Outcome, Step};
    use crate::strategy::answers::replayed;

    pub const INSERT: &str = "INSERT IGNORE INTO experience_points \
        (user_id, amount, lesson, idempotency_key, worker) VALUES (?, ?, ?, ?, ?)";
    pub const FIND: &str = "SELECT id FROM experience_points WHERE idempotency_key = ?";

    pub fn shape(ctx: &mut Ctx) -> Pin<Box<dyn Future<Output = Answered> + Send + '_>> {
        Box::pin(async move {
            let a = ctx.asked.clone();
            let binds = [
                Bind::Int(a.user_id),
                Bind::Int(a.amount.into()),
                Bind::Int(a.lesson.into()),
                Bind::Text(&a.key),
                Bind::Int(a.worker as i64),
            ];
            match ctx.work_with(INSERT, &binds).await {
                Ok(done) if done.rows_affected() == 1 => {
                    let xp = done.last_insert_id() as i64;
                    ctx.note(format!("made XP #{xp}"));
                    return Answered {
                        made_xp: Some(xp),
                        ..Answered::new(
                            Outcome::Created,
                            "no XP row for the key",
                            format!("made XP #{xp}"),
                        )
                    };
                }
                Ok(_) => ctx.note("key taken"),
                Err(err) => return ctx.failed(&err, "—", None),
            }
            match ctx.fetch_opt(Step::Read, FIND, &[Bind::Text(&a.key)]).await {
                Ok(row) => {
                    let xp: Option<i64> = row.and_then(|r| r.try_get(0).ok());
                    let did = replayed(xp);
                    ctx.note(did.clone());
                    Answered::new(Outcome::Replayed, "XP row exists", did)
                }
                Err(err) => ctx.failed(&err, "XP row exists", None),
            }
        })
    }
}
