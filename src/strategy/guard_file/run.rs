//! Racing a guard file: its statements sent in its shape's order, traced as the built-in shapes are.

use std::time::Duration;

use anyhow::{Result, bail};
use serde_json::Value;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};

use super::{GuardRef, Param, Shape, Statement, StepName};
use crate::db::pool::{Conn, Workers, checkout};
use crate::db::statements::Sends;
use crate::request::{Answer, Failure, Lease, Outcome, Request, Trace, bounded};
use crate::strategy::answers::{completed, mismatch, replay};
use crate::strategy::check_then_store::after_store;
use crate::strategy::claim_work_complete::{ClaimRead, lose};
use crate::strategy::guard::{ClaimPart, Heartbeat, Recovery, Renewal, beat_aside};
use crate::strategy::loser::LoserPolicy;
use crate::strategy::{Handled, OPERATION, Starting, Step, Strategy, fingerprint, work};

/// How long checking the file's statements waits for a connection.
const VERIFY_CHECKOUT: Duration = Duration::from_secs(5);

/// A guard file as a strategy.
pub struct FileGuard {
    file: GuardRef,
    /// What a loser of the claim does (fail-fast or poll).
    loser: LoserPolicy,
    /// The race's stale-claim timeout, given to the file as `$stale_after_ms`.
    stale_after: Duration,
    /// The file's renew step, sent for each running claim every
    /// `--heartbeat-ms`, when it has one and the race beats.
    heartbeat: Option<Heartbeat>,
    /// The most one of the file's statements may take (see [`step_limit`]).
    step_limit: Duration,
}

/// The least time a guard file's statement is given.
const STEP_FLOOR: Duration = Duration::from_secs(5);

/// The most one statement of a guard file may take in a race of `workers`
/// requests whose work takes `work` and whose claims go stale after
/// `stale_after`: enough to wait behind every other request's work once
/// and a stale claim's age, never less than five seconds. Past it the
/// statement is cancelled and its request fails naming the step.
pub fn step_limit(workers: usize, work: Duration, stale_after: Duration) -> Duration {
    let behind = work.saturating_mul(u32::try_from(workers).unwrap_or(u32::MAX));
    STEP_FLOOR
        .saturating_add(behind)
        .saturating_add(stale_after)
}

impl FileGuard {
    /// The file as a strategy; with a heartbeat in `recovery`, its renew
    /// step (if it has one) renews each won claim that often while its
    /// work runs.
    pub fn new(
        file: GuardRef,
        loser: LoserPolicy,
        recovery: Recovery,
        step_limit: Duration,
    ) -> Self {
        let (stale_after, beat_every) = (recovery.stale_after(), recovery.heartbeat());
        let file_ref: &'static super::GuardFile = file.0;
        let heartbeat =
            beat_every
                .zip(file_ref.statement(StepName::Renew))
                .map(|(every, renew)| {
                    Heartbeat::sending(every, Renewal::EachClaim(&renew.sql, parts(&renew.params)))
                });
        FileGuard {
            file,
            loser,
            stale_after,
            heartbeat,
            step_limit,
        }
    }

    /// `sent`, the file's `statement` on `conn`, within the step limit.
    async fn bounded<T>(
        &self,
        conn: &Conn,
        statement: &Statement,
        sent: impl Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> Result<T, Failure> {
        bounded(conn, self.step_limit, &self.file.place(statement), sent).await
    }
}

/// The renew step's parameters as the heartbeat knows a claim: it may
/// name only `$claim_id` and `$worker` (see [`StepName::params`]).
fn parts(params: &[Param]) -> &'static [ClaimPart] {
    use ClaimPart::{Id, Owner};
    match params {
        [Param::ClaimId] => &[Id],
        [Param::Worker] => &[Owner],
        [Param::ClaimId, Param::Worker] => &[Id, Owner],
        [Param::Worker, Param::ClaimId] => &[Owner, Id],
        _ => &[],
    }
}

/// What one request gives the file's statements, named as the file names it.
struct Values<'a> {
    req: &'a Request,
    /// The request's fingerprint: idem's, or what the file's fingerprint
    /// step computed from the request's fields.
    fingerprint: Option<String>,
    operation: &'static str,
    worker: i32,
    stale_after_ms: i64,
    xp_id: Option<i64>,
    response: Option<Value>,
    response_code: i32,
    claim_id: Option<i64>,
}

impl<'a> Values<'a> {
    fn new(req: &'a Request, stale_after: Duration) -> Self {
        Values {
            req,
            fingerprint: req.fingerprint.clone(),
            operation: OPERATION,
            worker: req.worker_id(),
            stale_after_ms: stale_after.as_millis().min(i64::MAX as u128) as i64,
            xp_id: None,
            response: None,
            response_code: 201,
            claim_id: None,
        }
    }

    fn get(&self, param: Param) -> &(dyn ToSql + Sync) {
        match param {
            Param::Key => &self.req.key,
            Param::Operation => &self.operation,
            Param::Fingerprint => &self.fingerprint,
            Param::UserId => &self.req.params.user_id,
            Param::Amount => &self.req.params.amount,
            Param::Lesson => &self.req.params.lesson,
            Param::Worker => &self.worker,
            Param::StaleAfterMs => &self.stale_after_ms,
            Param::XpId => &self.xp_id,
            Param::Response => &self.response,
            Param::ResponseCode => &self.response_code,
            Param::ClaimId => &self.claim_id,
        }
    }

    /// The values of `statement`'s parameters, in its order.
    fn bind(&self, statement: &Statement) -> Vec<&(dyn ToSql + Sync)> {
        statement.params.iter().map(|p| self.get(*p)).collect()
    }
}

impl Strategy for FileGuard {
    fn handle<'a>(
        &'a self,
        lease: &'a mut Lease,
        req: &'a Request,
        trace: &'a mut Trace,
    ) -> Handled<'a> {
        Box::pin(async move {
            let answer = match self.file.shape {
                Shape::FindThenStore => self.find_then_store(lease, req, trace).await,
                Shape::ClaimWorkComplete => self.claim_work_complete(lease, req, trace).await,
            };
            if let Err(Failure::Overran(_)) = &answer {
                // Its statement was cancelled mid-flight: the connection's
                // transaction, if any, is nobody's.
                lease.discard();
            }
            if let Err(Failure::Db(err)) = &answer
                && let Some(failed) = trace.events.last().map(|e| e.step)
                && let Some(statement) = self
                    .file
                    .statements
                    .iter()
                    .find(|s| s.step.step() == Some(failed))
                && err.as_db_error().is_some()
            {
                trace.note(format!("failed at {}", self.file.place(statement)));
            }
            answer
        })
    }

    /// Prepares every statement once before the race, so that a typo or
    /// an unknown column is one line naming the file's line, not a failed
    /// request per worker.
    fn start<'a>(&'a self, workers: &'a Workers) -> Starting<'a> {
        Box::pin(async move {
            let conn = checkout(workers, VERIFY_CHECKOUT).await?;
            let file: &'static super::GuardFile = self.file.0;
            for statement in &file.statements {
                self.verify(&conn, statement).await?;
            }
            drop(conn);
            if let Some(heartbeat) = &self.heartbeat {
                beat_aside(heartbeat, workers).await?;
            }
            Ok(())
        })
    }
}

impl FileGuard {
    /// The file's statement for `step`, which its shape makes sure it has.
    fn statement(&self, step: StepName) -> &'static Statement {
        let file: &'static super::GuardFile = self.file.0;
        file.statement(step)
            .expect("a guard file has every step its shape requires")
    }

    /// Find; if found, replay; else work, then store.
    async fn find_then_store(
        &self,
        lease: &mut Lease,
        req: &Request,
        trace: &mut Trace,
    ) -> Result<Answer, Failure> {
        let conn = lease.conn(trace).await?;
        let mut values = Values::new(req, self.stale_after);
        self.fingerprint(conn, &mut values, trace).await?;
        let file: &'static super::GuardFile = self.file.0;
        if let Some(lock) = file.statement(StepName::Lock) {
            let params = values.bind(lock);
            trace
                .query(
                    Step::Lock,
                    lock.written,
                    self.bounded(conn, lock, conn.exec(&lock.sql, &params)),
                )
                .await?;
            trace.note("locked");
        }
        let find = self.statement(StepName::Find);
        let params = values.bind(find);
        let reader = lease.read_conn(trace).await?;
        let found = trace
            .query(
                Step::Find,
                find.written,
                self.bounded(reader, find, reader.fetch_opt(&find.sql, &params)),
            )
            .await?;
        if let Some(row) = found {
            let body: Option<Value> = row.try_get("response_body").ok().flatten();
            let stored: Option<String> = row.try_get("request_fingerprint").ok().flatten();
            if self.file.fingerprint
                && fingerprint::differs(values.fingerprint.as_deref(), stored.as_deref())
            {
                trace.note("key found, other parameters");
                return Ok(mismatch(req));
            }
            trace.note("key found");
            return Ok(replay(body, "key found", None));
        }
        trace.note("no key");
        let conn = lease.conn(trace).await?;
        let (xp, body) = award(conn, req, trace, &mut values).await?;
        let store = self.statement(StepName::Store);
        let params = values.bind(store);
        let stored = trace
            .query(
                Step::Store,
                store.written,
                self.bounded(conn, store, conn.exec(&store.sql, &params)),
            )
            .await;
        let stored = match stored {
            Ok(rows) => Ok(rows),
            Err(Failure::Db(err)) => {
                trace.caught(&err);
                Err(err)
            }
            Err(other) => return Err(other),
        };
        after_store(stored, xp, body, trace)
    }

    /// Claim; the winner works and completes, a loser reads the claim.
    async fn claim_work_complete(
        &self,
        lease: &mut Lease,
        req: &Request,
        trace: &mut Trace,
    ) -> Result<Answer, Failure> {
        let mut values = Values::new(req, self.stale_after);
        let claim = self.statement(StepName::Claim);
        let conn = lease.conn(trace).await?;
        self.fingerprint(conn, &mut values, trace).await?;
        let params = values.bind(claim);
        let claimed = trace
            .query(
                Step::Claim,
                claim.written,
                self.bounded(conn, claim, conn.fetch_opt(&claim.sql, &params)),
            )
            .await;
        let won = match claimed {
            Ok(row) => row.map(|row| claim_id(&row)),
            // A plain INSERT loses to the unique index with an error.
            Err(Failure::Db(err)) if err.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
                trace.caught(&err);
                None
            }
            Err(err) => return Err(err),
        };
        let Some(claim_id) = won else {
            trace.note("claim taken");
            let replay = self.statement(StepName::Replay);
            let read = ClaimRead {
                sql: &replay.sql,
                shown: replay.written,
                params: values.bind(replay),
                asked: values
                    .fingerprint
                    .as_deref()
                    .filter(|_| self.file.fingerprint),
                limit: Some((self.step_limit, self.file.place(replay))),
            };
            return lose(lease, req, trace, self.loser, &read).await;
        };
        trace.note("claim won");
        let conn = lease.conn(trace).await?;
        values.claim_id = claim_id;
        // Renewed while the work runs, if the file beats: dropped with this
        // future, the claim ages from its last beat.
        let _renewing = self
            .heartbeat
            .as_ref()
            .zip(claim_id)
            .and_then(|(beats, id)| beats.renew(id, values.worker));
        if req.work_fails {
            return self.failed(conn, req, trace, &values).await;
        }
        let (xp, body) = award(conn, req, trace, &mut values).await?;
        // A renewal that failed while the work ran is this request's to
        // say: its claim was not renewed.
        let renew_failed = self
            .heartbeat
            .as_ref()
            .zip(self.file.0.statement(StepName::Renew))
            .and_then(|(heartbeat, renew)| {
                let failure = heartbeat.failure()?;
                Some(format!("{} failed: {failure}", self.file.place(renew)))
            });
        if let Some(failed) = &renew_failed {
            trace.note(failed.clone());
        }
        let complete = self.statement(StepName::Complete);
        let params = values.bind(complete);
        let rows = trace
            .query(
                Step::Complete,
                complete.written,
                self.bounded(conn, complete, conn.exec(&complete.sql, &params)),
            )
            .await?;
        trace.note(if rows == 0 {
            "completed no row: the claim was no longer this request's"
        } else {
            "completed"
        });
        let mut answer = completed(xp, body);
        if let Some(failed) = renew_failed {
            answer.did = format!("{}; {failed}", answer.did);
        }
        Ok(answer)
    }

    /// Runs the file's fingerprint step, if it has one and the race checks
    /// fingerprints: what it returns is the request's `$fingerprint`.
    async fn fingerprint(
        &self,
        conn: &Conn,
        values: &mut Values<'_>,
        trace: &mut Trace,
    ) -> Result<(), Failure> {
        let file: &'static super::GuardFile = self.file.0;
        let Some(step) = file.statement(StepName::Fingerprint) else {
            return Ok(());
        };
        if values.fingerprint.is_none() {
            return Ok(());
        }
        trace.queries += 1;
        let params = values.bind(step);
        let row = self
            .bounded(conn, step, conn.fetch_one(&step.sql, &params))
            .await;
        let computed: Option<String> = match row {
            Ok(row) => row.try_get(0).ok().flatten(),
            Err(err) => {
                if matches!(err, Failure::Db(_)) {
                    trace.note(format!("failed at {}", file.place(step)));
                }
                return Err(err);
            }
        };
        let shown: String = computed
            .as_deref()
            .unwrap_or("NULL")
            .chars()
            .take(16)
            .collect();
        trace.note(format!("fingerprint {shown}"));
        values.fingerprint = computed;
        Ok(())
    }

    /// The work failed (`--fail-work`): the service was called and errored.
    /// The file's release step, if it has one, lets the claim go; without
    /// one the claim stays pending. Answered 500.
    async fn failed(
        &self,
        conn: &Conn,
        req: &Request,
        trace: &mut Trace,
        values: &Values<'_>,
    ) -> Result<Answer, Failure> {
        trace.time(Step::Work, work::service_call(req)).await;
        trace.note("the award service failed");
        let file: &'static super::GuardFile = self.file.0;
        let released = match file.statement(StepName::Release) {
            Some(release) => {
                let params = values.bind(release);
                trace
                    .query(
                        Step::Complete,
                        release.written,
                        self.bounded(conn, release, conn.exec(&release.sql, &params)),
                    )
                    .await?;
                trace.note("released the claim");
                true
            }
            None => false,
        };
        Ok(Answer {
            replayed: false,
            outcome: Outcome::Failed,
            saw: "claim won".into(),
            did: match released {
                true => "work failed, released the claim".into(),
                false => "work failed, the claim left pending".into(),
            },
            made_xp: None,
            body: Some(serde_json::json!({ "error": "the award service failed" })),
            waited: None,
        })
    }

    /// Prepares `statement` on `conn` and checks it returns what its step reads.
    async fn verify(&self, conn: &Conn, statement: &'static Statement) -> Result<()> {
        let place = self.file.place(statement);
        let text = conn.text(&statement.sql);
        let prepared = conn
            .client()
            .prepare_typed(&text, statement.sql.types)
            .await
            .map_err(|err| {
                let message = err
                    .as_db_error()
                    .map_or_else(|| err.to_string(), |db| db.message().to_string());
                anyhow::anyhow!("{place}: {message}")
            })?;
        let columns: Vec<(&str, &Type)> = prepared
            .columns()
            .iter()
            .map(|c| (c.name(), c.type_()))
            .collect();
        let has = |name: &str| columns.iter().any(|(n, _)| *n == name);
        let wants: &[&str] = match statement.step {
            StepName::Find | StepName::Replay if self.file.fingerprint => {
                &["response_body", "request_fingerprint"]
            }
            StepName::Find => &["response_body"],
            _ => &[],
        };
        let wants: Vec<&str> = match statement.step {
            StepName::Replay => std::iter::once("status")
                .chain(wants.iter().copied())
                .collect(),
            _ => wants.to_vec(),
        };
        if let Some(missing) = wants.iter().find(|w| !has(w)) {
            bail!(
                "{place}: it must return a column {missing} (it returns {})",
                if columns.is_empty() {
                    "none".to_string()
                } else {
                    columns
                        .iter()
                        .map(|(n, _)| *n)
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            );
        }
        if statement.step == StepName::Fingerprint
            && !columns
                .first()
                .is_some_and(|(_, ty)| [Type::TEXT, Type::VARCHAR].contains(ty))
        {
            bail!(
                "{place}: it must return the fingerprint as text in its first column \
                 (e.g. SELECT md5(...)), computed from what the request asks"
            );
        }
        if statement.step == StepName::Claim
            && !columns
                .first()
                .is_some_and(|(_, ty)| [Type::INT8, Type::INT4].contains(ty))
        {
            bail!(
                "{place}: it must return the claim's id when it wins (RETURNING id), and no row when it loses"
            );
        }
        Ok(())
    }
}

/// The work, idem's own (the award service's call, then the XP row); what
/// it made is known to the statements after it.
async fn award(
    conn: &Conn,
    req: &Request,
    trace: &mut Trace,
    values: &mut Values<'_>,
) -> Result<(i64, Value), Failure> {
    let xp = trace
        .query(Step::Work, work::AWARD.text, work::award_xp(conn, req))
        .await?;
    trace.note(format!("made XP #{xp}"));
    let body = work::response_body(xp, &req.params);
    values.xp_id = Some(xp);
    values.response = Some(body.clone());
    Ok((xp, body))
}

/// The claim's id: its first column, a bigint or an integer.
fn claim_id(row: &tokio_postgres::Row) -> Option<i64> {
    row.try_get::<_, i64>(0)
        .or_else(|_| row.try_get::<_, i32>(0).map(i64::from))
        .ok()
}
