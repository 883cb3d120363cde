//! The work every strategy guards: a slow service call, then one XP row.

use serde_json::{Value, json};

use crate::db::pool::Conn;
use crate::race::Request;

/// Does the work: waits `work_ms` (the service call the row stands for, and
/// the race window it widens), then inserts the XP row. Returns its id.
pub async fn award_xp(conn: &Conn, req: &Request) -> Result<i64, tokio_postgres::Error> {
    service_call(req).await;
    let insert = conn
        .prepare_cached(
            "INSERT INTO experience_points (user_id, amount, worker) VALUES ($1, $2, $3) RETURNING id",
        )
        .await?;
    let row = conn
        .query_one(&insert, &[&req.user_id, &req.amount, &req.worker_id()])
        .await?;
    Ok(row.get(0))
}

/// The slow part of the work: a stand-in for the service call an award
/// makes. It holds the request's connection, as a real request would.
pub async fn service_call(req: &Request) {
    if !req.work.is_zero() {
        tokio::time::sleep(req.work).await;
    }
}

/// The response a successful award answers with, and the one a replay repeats.
pub fn response_body(req: &Request, xp_id: i64) -> Value {
    json!({ "xp_id": xp_id, "user_id": req.user_id, "amount": req.amount })
}

/// The XP row id inside a stored response body, if there is one.
pub fn xp_id_of(body: &Value) -> Option<i64> {
    body.get("xp_id").and_then(Value::as_i64)
}
