//! The work every strategy guards: a slow service call, then one XP row.

use serde_json::{Value, json};

use tokio_postgres::types::Type;

use super::fingerprint::Params;
use crate::db::statements::{Sends, Sql};
use crate::request::Request;

/// The work's statement: one XP row.
pub static AWARD: Sql = Sql::new(
    "INSERT INTO experience_points (user_id, amount, lesson, worker)
     VALUES ($1, $2, $3, $4) RETURNING id",
    &[Type::INT8, Type::INT4, Type::INT4, Type::INT4],
);

/// Does the work: waits `work_ms` (the service call the row stands for, and
/// the race window it widens), then inserts the XP row. Returns its id.
pub async fn award_xp(conn: &impl Sends, req: &Request) -> Result<i64, tokio_postgres::Error> {
    service_call(req).await;
    insert_xp(conn, req).await
}

/// The XP row alone, without the service call before it.
pub async fn insert_xp(conn: &impl Sends, req: &Request) -> Result<i64, tokio_postgres::Error> {
    let row = conn
        .fetch_one(
            &AWARD,
            &[
                &req.params.user_id,
                &req.params.amount,
                &req.params.lesson,
                &req.worker_id(),
            ],
        )
        .await?;
    Ok(row.get(0))
}

/// The slow part of the work: a stand-in for the service call an award
/// makes. It holds the request's connection, as a real request would.
pub async fn service_call(req: &Request) {
    if let Some(service) = &req.service {
        service.call(&req.key, req.worker).await;
    }
    if !req.work.is_zero() {
        tokio::time::sleep(req.work).await;
    }
}

/// The response a successful award answers with, and the one a replay repeats.
pub fn response_body(xp_id: i64, p: &Params) -> Value {
    json!({ "xp_id": xp_id, "user_id": p.user_id, "amount": p.amount, "lesson": p.lesson })
}

/// The XP row id inside a stored response body, if there is one.
pub fn xp_id_of(body: &Value) -> Option<i64> {
    body.get("xp_id").and_then(Value::as_i64)
}

/// When a replayed response was made for other parameters than `req` asked
/// for, says how: the silent wrong answer lesson 4 warns about.
pub fn wrong_replay(req: &Request, body: Option<&Value>) -> Option<String> {
    let body = body?;
    let amount = body.get("amount").and_then(Value::as_i64)?;
    let lesson = body
        .get("lesson")
        .and_then(Value::as_i64)
        .unwrap_or(i64::from(req.params.lesson));
    let asked = (i64::from(req.params.amount), i64::from(req.params.lesson));
    (asked != (amount, lesson)).then(|| {
        format!(
            "asked for {}, told it succeeded, but {amount} XP for lesson {lesson} were awarded",
            req.params.describe()
        )
    })
}
