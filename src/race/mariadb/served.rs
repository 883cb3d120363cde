//! `idem serve --engine mariadb`: the course's app with its awards decided on MariaDB. Each request lives as a race's worker does (its checkout from the app's pool, its strategy's shape, its answer); the edges stay the HTTP app's.

use std::sync::atomic::Ordering;
use std::time::Instant;

use anyhow::Result;

use super::plan::{MariadbRace, Shaped};
use super::shared::{Shared, bounded, one_request, pools};
use super::worker::stored_response;
use crate::db::mariadb::Mariadb;
use crate::http::app::{Counting, Deciding, OnEngine};
use crate::request::mariadb::Asked;
use crate::request::{Answer, Outcome, Request, Trace};
use crate::strategy::answers::response_of;

/// The app's side on MariaDB: what every request shares, and the server.
pub struct Served {
    shared: Shared,
    /// The award's work: a loser is told to come back after it.
    work: std::time::Duration,
    /// The run's database, for the counts and the stored responses.
    admin: sqlx::MySqlPool,
}

impl Served {
    /// Empties the run's tables and opens the app's pool (a guard file's
    /// statements checked on it first, as before a race).
    pub async fn open(db: &Mariadb, race: &MariadbRace) -> Result<Self> {
        for table in ["idempotency_keys", "experience_points", "cache_entries"] {
            sqlx::raw_sql(&format!("TRUNCATE TABLE {table}"))
                .execute(&db.admin)
                .await?;
        }
        let super::shared::Pools {
            nodes: pools,
            beats,
        } = pools(db, race).await?;
        if let (Shaped::File(file), Some(pool)) = (race.shape, pools.first()) {
            let mut conn = pool.acquire().await?;
            crate::strategy::guard_file::on_mariadb::verify(file, &mut conn).await?;
        }
        let shared = Shared::with_heartbeat(race, pools, beats, None);
        let admin = db.admin.clone();
        let work = race.settings().app().work;
        Ok(Self {
            shared,
            admin,
            work,
        })
    }

    /// The answer a request's report says, with the body a client gets:
    /// a new award's response, or the stored one it replays.
    async fn answer_of(&self, asked: &Asked, outcome: Outcome, made_xp: Option<i64>) -> Answer {
        let body = match (outcome, made_xp) {
            (Outcome::Created | Outcome::Duplicate, Some(xp)) => Some(response_of(asked, xp)),
            (Outcome::Replayed, _) => stored_response(&self.admin, &asked.key)
                .await
                .ok()
                .flatten()
                .and_then(|b| serde_json::from_str(&b).ok()),
            (Outcome::Failed, _) => Some(serde_json::json!({
                "error": { "type": "api_error", "message": "the award service failed" }
            })),
            (Outcome::Conflict, _) => {
                let retry_after = self.work.as_millis() as u64;
                Some(crate::strategy::loser::conflict_body(
                    &asked.key,
                    retry_after,
                ))
            }
            (Outcome::Mismatch, _) => Some(crate::strategy::fingerprint::mismatch_body(&asked.key)),
            _ => None,
        };
        Answer {
            replayed: outcome == Outcome::Replayed,
            outcome,
            saw: String::new(),
            did: String::new(),
            made_xp,
            body,
            waited: None,
        }
    }
}

impl OnEngine for Served {
    fn decide<'a>(&'a self, req: &'a Request, trace: &'a mut Trace) -> Deciding<'a> {
        Box::pin(async move {
            let asked = Asked {
                key: req.key.clone(),
                worker: req.worker,
                user_id: req.params.user_id,
                amount: req.params.amount,
                lesson: req.params.lesson,
                fingerprint: req.fingerprint.clone(),
                work_fails: req.work_fails,
            };
            // Each request's steps are timed from its own arrival.
            let arrived = Instant::now();
            let sent = one_request(self.shared.clone(), asked.clone(), arrived, None);
            let w = bounded(sent, req.worker, arrived).await;
            let mut answer = self.answer_of(&asked, w.outcome, w.made_xp).await;
            answer.saw = w.saw;
            answer.did = w.did;
            trace.events = w.steps;
            (answer, 1)
        })
    }

    fn counts(&self) -> Counting<'_> {
        Box::pin(async move {
            let (keys, xp) = super::worker::rows_counted(&self.admin).await?;
            let calls = self.shared.calls.load(Ordering::SeqCst);
            Ok((keys, xp, calls as i64))
        })
    }
}
