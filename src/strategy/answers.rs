//! The answers a guard gives besides "created": replay, 409, 422. One place, so every strategy words them alike.

use serde_json::Value;

use super::fingerprint::mismatch_body;
use super::loser::conflict_body;
use super::work;
use crate::request::{Answer, Outcome, Request, Waited};

/// The claim's winner did the work and completed the claim (201).
pub fn completed(xp: i64, body: Value) -> Answer {
    Answer {
        replayed: false,
        outcome: Outcome::Created,
        saw: "claim won".into(),
        did: format!("made XP #{xp}, completed"),
        made_xp: Some(xp),
        body: Some(body),
        waited: None,
    }
}

/// The stored response of the request that did the work, repeated (201).
pub fn replay(body: Option<Value>, saw: &str, waited: Option<Waited>) -> Answer {
    let xp = body.as_ref().and_then(work::xp_id_of);
    Answer {
        replayed: true,
        outcome: Outcome::Replayed,
        saw: saw.into(),
        did: xp.map_or("replayed".into(), |xp| format!("replayed XP #{xp}")),
        made_xp: None,
        body,
        waited,
    }
}

/// 409: another request holds the key and has not finished.
pub fn conflict(req: &Request, saw: &str, did: &str, waited: Option<Waited>) -> Answer {
    Answer {
        replayed: false,
        outcome: Outcome::Conflict,
        saw: saw.into(),
        did: did.into(),
        made_xp: None,
        body: Some(conflict_body(&req.key, req.work.as_millis() as u64)),
        waited,
    }
}

/// 422: the key was first used with other parameters; no work is done.
pub fn mismatch(req: &Request) -> Answer {
    Answer {
        replayed: false,
        outcome: Outcome::Mismatch,
        saw: "key used for other parameters".into(),
        did: "answered 422, no work".into(),
        made_xp: None,
        body: Some(mismatch_body(&req.key)),
        waited: None,
    }
}

/// The XP row a stored response names (`response_body`'s `xp_id`), read
/// from column `col`. MariaDB's JSON is LONGTEXT under a binary collation,
/// which sqlx reports as a blob: it is read as the text it is.
pub fn stored_xp(row: &sqlx::mysql::MySqlRow, col: usize) -> Option<i64> {
    use sqlx::Row;
    let body: Option<String> = row.try_get_unchecked(col).ok().flatten();
    let body: serde_json::Value = serde_json::from_str(&body?).ok()?;
    super::work::xp_id_of(&body)
}

/// "replayed XP #4", or "replayed" when the stored response names none.
pub fn replayed(xp: Option<i64>) -> String {
    xp.map_or("replayed".into(), |xp| format!("replayed XP #{xp}"))
}

/// A MariaDB request whose key was first used with other parameters: 422,
/// and no work (lesson 4).
pub fn other_parameters(
    ctx: &mut crate::request::mariadb::Ctx,
    stored: Option<&str>,
) -> Option<crate::request::mariadb::Answered> {
    if !super::fingerprint::differs(ctx.asked.fingerprint.as_deref(), stored) {
        return None;
    }
    ctx.note("other parameters");
    Some(crate::request::mariadb::Answered::new(
        crate::request::Outcome::Mismatch,
        "key used for other parameters",
        "answered 422",
    ))
}

/// The response a MariaDB request stores for XP row `xp`: the same body
/// as on PostgreSQL, as the JSON text InnoDB keeps.
pub fn body_of(asked: &crate::request::mariadb::Asked, xp: i64) -> String {
    response_of(asked, xp).to_string()
}

/// The same response as a JSON value, as a cache entry keeps it.
pub fn response_of(asked: &crate::request::mariadb::Asked, xp: i64) -> serde_json::Value {
    let params = super::fingerprint::Params {
        operation: super::OPERATION,
        user_id: asked.user_id,
        amount: asked.amount,
        lesson: asked.lesson,
    };
    super::work::response_body(xp, &params)
}
