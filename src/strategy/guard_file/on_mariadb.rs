//! Racing a guard file on MariaDB: its statements, written for MariaDB, sent in its shape's order through a request's [`Ctx`], as the built-in shapes' are.
//!
//! A file for MariaDB says `engine = "mariadb"` and writes MySQL's SQL: a
//! claim that wins returns its id (`INSERT IGNORE ... RETURNING id`, which
//! MariaDB has), and one that loses returns no row or meets 1062. The
//! statements go on connections of the run's guard user (see
//! `db::mariadb::guard_user`), never root's.

use anyhow::{Result, bail};
use sqlx::mysql::MySqlRow;
use sqlx::{Column, Executor, Row, Statement as _, TypeInfo};

use super::{GuardRef, Param, Shape, Statement, StepName};
use crate::request::mariadb::{Answered, Bind, Ctx, number};
use crate::request::{ClaimPart, Outcome, Step};
use crate::strategy::OPERATION;
use crate::strategy::answers::{body_of, replayed, stored_xp};

/// What the file's statements are given, by name.
struct Values {
    /// What the request asks (a copy: the binds borrow it while the
    /// request's context sends them).
    asked: crate::request::mariadb::Asked,
    stale_after_ms: i64,
    xp_id: Option<i64>,
    response: Option<String>,
    claim_id: Option<i64>,
}

impl Values {
    /// What a request's statements are given before any of them ran.
    fn of(ctx: &Ctx) -> Self {
        Values {
            asked: ctx.asked.clone(),
            stale_after_ms: ctx.stale_after.as_millis().min(i64::MAX as u128) as i64,
            xp_id: None,
            response: None,
            claim_id: None,
        }
    }

    fn binds<'a>(&'a self, statement: &Statement) -> Vec<Bind<'a>> {
        let a = &self.asked;
        let params = statement.on_mariadb.as_ref().map_or(&[][..], |(_, p)| p);
        params
            .iter()
            .map(|p| match p {
                Param::Key => Bind::Text(&a.key),
                Param::Operation => Bind::Text(OPERATION),
                Param::Fingerprint => Bind::OptText(a.fingerprint.as_deref()),
                Param::UserId => Bind::Int(a.user_id),
                Param::Amount => Bind::Int(a.amount.into()),
                Param::Lesson => Bind::Int(a.lesson.into()),
                Param::Worker => Bind::Int(a.worker as i64),
                Param::StaleAfterMs => Bind::Int(self.stale_after_ms),
                Param::XpId => Bind::OptInt(self.xp_id),
                Param::Response => Bind::OptText(self.response.as_deref()),
                Param::ResponseCode => Bind::Int(201),
                Param::ClaimId => Bind::OptInt(self.claim_id),
            })
            .collect()
    }
}

/// The MySQL text of `statement`.
fn text(statement: &'static Statement) -> &'static str {
    statement.on_mariadb.as_ref().map_or("", |(text, _)| *text)
}

/// One request, as the file's shape goes.
pub async fn answer(file: GuardRef, ctx: &mut Ctx) -> Answered {
    let mut values = Values::of(ctx);
    let file: &'static super::GuardFile = file.0;
    let answered = match file.shape {
        Shape::FindThenStore => find_then_store(file, ctx, &mut values).await,
        Shape::ClaimWorkComplete => claim_work_complete(file, ctx, &mut values).await,
    };
    if answered.outcome == Outcome::Error
        && let Some((step, said)) = ctx.steps.last().map(|e| (e.step, e.note.clone()))
        && let Some(statement) = file.statements.iter().find(|s| s.step.step() == Some(step))
    {
        ctx.note(format!("{said}; failed at {}", file.place(statement)));
    }
    answered
}

/// The file's statement for `step`, which its shape makes sure it has.
fn required(file: &'static super::GuardFile, step: StepName) -> &'static Statement {
    file.statement(step)
        .expect("a guard file has every step its shape requires")
}

/// Lock (if the file has one); find; if found, replay; else work, store.
async fn find_then_store(
    file: &'static super::GuardFile,
    ctx: &mut Ctx,
    values: &mut Values,
) -> Answered {
    if let Some(lock) = file.statement(StepName::Lock) {
        // A lock the session takes (GET_LOCK) would outlive the request in
        // a pooled connection: the connection is closed after it instead.
        ctx.close_when_done();
        let binds = values.binds(lock);
        if let Err(err) = ctx.fetch_opt(Step::Lock, text(lock), &binds).await {
            return ctx.failed(&err, "—", None);
        }
        ctx.note("locked");
    }
    let find = required(file, StepName::Find);
    let binds = values.binds(find);
    match ctx.fetch_opt(Step::Find, text(find), &binds).await {
        Err(err) => return ctx.failed(&err, "—", None),
        Ok(Some(row)) => return found(file, ctx, &row, "key found"),
        Ok(None) => ctx.note("no key"),
    }
    let xp = match ctx.work().await {
        Ok(xp) => xp,
        Err(err) => return ctx.failed(&err, "no key", None),
    };
    values.xp_id = Some(xp);
    values.response = Some(body_of(&ctx.asked, xp));
    let store = required(file, StepName::Store);
    let binds = values.binds(store);
    let made = |outcome, did: String| Answered {
        made_xp: Some(xp),
        ..Answered::new(outcome, "no key", did)
    };
    match ctx.exec(Step::Store, text(store), &binds).await {
        Ok(_) => {
            ctx.note("key stored");
            made(Outcome::Created, format!("made XP #{xp}, stored key"))
        }
        Err(err) if number(&err) == Some(1062) => {
            ctx.note("key store lost (1062)");
            made(Outcome::Duplicate, format!("made XP #{xp}, key store lost"))
        }
        Err(err) if refused_alone(file, ctx, &err) => {
            ctx.caught();
            ctx.note("key store refused at COMMIT (1213), read as lost");
            made(Outcome::Duplicate, format!("made XP #{xp}, key store lost"))
        }
        Err(err) => ctx.failed(&err, "no key", Some(xp)),
    }
}

/// Claim; the winner works and completes, a loser reads the claim once.
async fn claim_work_complete(
    file: &'static super::GuardFile,
    ctx: &mut Ctx,
    values: &mut Values,
) -> Answered {
    let claim = required(file, StepName::Claim);
    let binds = values.binds(claim);
    let won = match ctx.fetch_opt(Step::Claim, text(claim), &binds).await {
        Ok(row) => row.and_then(|row| claim_id(&row)),
        // A plain INSERT loses to the unique key with an error.
        Err(err) if number(&err) == Some(1062) => {
            ctx.caught();
            None
        }
        // A claim that commits alone on a Galera cluster, refused at its
        // COMMIT because another node's claim of the key was certified
        // first: lost as surely as to the unique key, and before any work,
        // when the file reads it so.
        Err(err) if refused_alone(file, ctx, &err) => {
            ctx.caught();
            ctx.note("claim refused at COMMIT (1213), read as lost");
            None
        }
        Err(err) => return ctx.failed(&err, "—", None),
    };
    let Some(id) = won else {
        if ctx.steps.last().is_none_or(|e| e.note.is_empty()) {
            ctx.note("claim taken");
        }
        let replay = required(file, StepName::Replay);
        let binds = values.binds(replay);
        return match ctx.fetch_opt(Step::Read, text(replay), &binds).await {
            Ok(Some(row)) => found(file, ctx, &row, "claim"),
            Ok(None) => {
                ctx.note("gone");
                Answered::new(Outcome::Conflict, "claim vanished", "answered 409")
            }
            Err(err) => ctx.failed(&err, "claim taken", None),
        };
    };
    ctx.note("claim won");
    values.claim_id = Some(id);
    // Renewed while the work runs, if the file beats: dropped with this
    // request, however it ends.
    let _beating = file
        .statement(StepName::Renew)
        .map(|renew| ctx.beat(text(renew), &claim_parts(renew), id));
    if ctx.asked.work_fails {
        return failed(file, ctx, values).await;
    }
    let xp = match ctx.work().await {
        Ok(xp) => xp,
        Err(err) => return ctx.failed(&err, "claim won", None),
    };
    values.xp_id = Some(xp);
    values.response = Some(body_of(&ctx.asked, xp));
    let complete = required(file, StepName::Complete);
    let binds = values.binds(complete);
    match ctx.exec(Step::Complete, text(complete), &binds).await {
        Ok(done) => {
            ctx.note(match done.rows_affected() {
                0 => "completed no row: the claim was no longer this request's",
                _ => "completed",
            });
            Answered {
                made_xp: Some(xp),
                ..Answered::new(
                    Outcome::Created,
                    "claim won",
                    format!("made XP #{xp}, completed"),
                )
            }
        }
        Err(err) => ctx.failed(&err, "claim won", Some(xp)),
    }
}

/// Whether `err` is a statement's own COMMIT refused by a Galera cluster
/// (1213, outside a request's transaction) that the file reads as lost.
fn refused_alone(file: &super::GuardFile, ctx: &Ctx, err: &sqlx::Error) -> bool {
    number(err) == Some(1213)
        && ctx.transaction.is_none()
        && file.refused_commit == super::RefusedCommit::Read
}

/// The request's transaction was refused at its COMMIT (1213) and rolled
/// back: with `refused_commit = "read"`, the key is read as a loser reads
/// it (on the file's replay step, or its find step), and answered from
/// what is there; otherwise nothing, and the request's 500 stands.
pub async fn after_refused_commit(file: GuardRef, ctx: &mut Ctx) -> Option<Answered> {
    let file: &'static super::GuardFile = file.0;
    if file.refused_commit != super::RefusedCommit::Read {
        return None;
    }
    ctx.caught();
    let read = match file.shape {
        Shape::ClaimWorkComplete => required(file, StepName::Replay),
        Shape::FindThenStore => required(file, StepName::Find),
    };
    let values = Values::of(ctx);
    let binds = values.binds(read);
    let saw = "COMMIT refused";
    Some(match ctx.fetch_opt(Step::Read, text(read), &binds).await {
        Ok(Some(row)) => found(file, ctx, &row, saw),
        Ok(None) => {
            ctx.note("no key yet");
            Answered::new(Outcome::Conflict, saw, "answered 409")
        }
        Err(err) => ctx.failed(&err, saw, None),
    })
}

/// The work failed (`--fail-work`): the service was called and errored.
/// The file's release step, if it has one, lets the claim go; without one
/// the claim stays pending. Answered 500.
async fn failed(file: &'static super::GuardFile, ctx: &mut Ctx, values: &Values) -> Answered {
    if let Err(err) = ctx.failed_call().await {
        return ctx.failed(&err, "claim won", None);
    }
    let Some(release) = file.statement(StepName::Release) else {
        return Answered::new(
            Outcome::Failed,
            "claim won",
            "work failed, the claim left pending",
        );
    };
    let binds = values.binds(release);
    match ctx.exec(Step::Complete, text(release), &binds).await {
        Ok(_) => {
            ctx.note("released the claim");
            Answered::new(
                Outcome::Failed,
                "claim won",
                "work failed, released the claim",
            )
        }
        Err(err) => ctx.failed(&err, "claim won", None),
    }
}

/// What the renew step's `?`s stand for, in order: the claim's id or its
/// owner (the only names a renew step may use).
fn claim_parts(renew: &Statement) -> Vec<ClaimPart> {
    let params = renew.on_mariadb.as_ref().map_or(&[][..], |(_, p)| p);
    params
        .iter()
        .filter_map(|p| match p {
            Param::ClaimId => Some(ClaimPart::Id),
            Param::Worker => Some(ClaimPart::Owner),
            _ => None,
        })
        .collect()
}

/// A found key or a lost claim's row: other parameters 422 (when the file
/// checks fingerprints), a finished one replayed, a pending one 409.
fn found(file: &super::GuardFile, ctx: &mut Ctx, row: &MySqlRow, saw: &str) -> Answered {
    let stored: Option<String> = row.try_get("request_fingerprint").ok().flatten();
    if file.fingerprint
        && crate::strategy::fingerprint::differs(
            ctx.asked.fingerprint.as_deref(),
            stored.as_deref(),
        )
    {
        ctx.note("other parameters");
        return Answered::new(
            Outcome::Mismatch,
            format!("{saw}, other parameters"),
            "answered 422",
        );
    }
    let column = row
        .columns()
        .iter()
        .position(|c| c.name() == "response_body");
    let xp = column.and_then(|at| stored_xp(row, at));
    let status: Option<String> = row.try_get("status").ok().flatten();
    match status.as_deref() {
        None | Some("completed") => {
            ctx.note(format!("{saw}: completed"));
            Answered::new(Outcome::Replayed, format!("{saw} completed"), replayed(xp))
        }
        Some(other) => {
            ctx.note(other.to_string());
            Answered::new(
                Outcome::Conflict,
                format!("{saw} {other}"),
                "answered 409 at once",
            )
        }
    }
}

/// The claim's id: its first column, any integer.
fn claim_id(row: &MySqlRow) -> Option<i64> {
    row.try_get::<i64, _>(0)
        .ok()
        .or_else(|| {
            row.try_get::<u64, _>(0)
                .ok()
                .and_then(|n| i64::try_from(n).ok())
        })
        .or_else(|| row.try_get::<i32, _>(0).ok().map(i64::from))
}

/// Prepares every statement of `file` on `conn` (the guard user's) before
/// the race, and checks each returns what its step reads: a typo or a
/// table it may not touch is one line naming the file's line.
pub async fn verify(file: GuardRef, conn: &mut sqlx::MySqlConnection) -> Result<()> {
    let file: &'static super::GuardFile = file.0;
    for statement in &file.statements {
        let place = file.place(statement);
        let prepared = conn.prepare(text(statement)).await.map_err(|e| {
            let said = e
                .as_database_error()
                .map_or_else(|| e.to_string(), |db| db.message().to_string());
            anyhow::anyhow!("{place}: {}", crate::controls::escaped(&said))
        })?;
        let columns: Vec<(String, String)> = prepared
            .columns()
            .iter()
            .map(|c| (c.name().to_string(), c.type_info().name().to_string()))
            .collect();
        let has = |name: &str| columns.iter().any(|(n, _)| n == name);
        let wants: &[&str] = match statement.step {
            StepName::Find => &["response_body"],
            StepName::Replay => &["status", "response_body"],
            _ => &[],
        };
        if let Some(missing) = wants.iter().find(|w| !has(w)) {
            let returns: Vec<&str> = columns.iter().map(|(n, _)| n.as_str()).collect();
            bail!(
                "{place}: it must return a column {missing} (it returns {})",
                if returns.is_empty() {
                    "none".to_string()
                } else {
                    returns.join(", ")
                }
            );
        }
        // MariaDB describes no columns for an `INSERT ... RETURNING` until
        // it runs: such a claim is taken at its word, and any other must
        // return an integer first.
        let returning =
            columns.is_empty() && text(statement).to_ascii_uppercase().contains("RETURNING");
        if statement.step == StepName::Claim
            && !returning
            && !columns.first().is_some_and(|(_, ty)| ty.contains("INT"))
        {
            bail!(
                "{place}: it must return the claim's id when it wins (INSERT IGNORE ... \
                 RETURNING id), and no row when it loses"
            );
        }
    }
    Ok(())
}
