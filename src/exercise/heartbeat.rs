//! Exercise 9: the heartbeat. Work three times the stale-claim age, over HTTP: a client that hangs up and retries while the owner works, a request the app drops, and five at once.

use std::path::Path;

use anyhow::Result;

use super::cases::{Case, base, dropped_then_retried, finished_then_replayed, one_call, races};
use super::spec::Exercise;
use crate::db::Database;
use crate::http::app::OnHangup;
use crate::probe::conformance::Check;
use crate::race::CrashPlan;
use crate::race::fault::FaultPoint;
use crate::race::raced::Raced;
use crate::strategy::guard_file::{Dialect, StepName};

/// Only a renewed claim outlives work three times its age; the heartbeat
/// beats only where there is a renew step to send. On the engine the file
/// is written for: over HTTP on PostgreSQL, in this process on MariaDB
/// (whose client gives up by no longer waiting).
pub async fn judge(db: &Database, file: &Path) -> Result<Vec<Check>> {
    let guard = crate::strategy::guard_file::load(file)?;
    let renews = guard.statement(StepName::Renew).is_some();
    match guard.engine {
        Dialect::Mariadb => {
            let cases = cases(file, renews, false);
            super::on_mariadb::races(db.mariadb().await?, cases).await
        }
        Dialect::Postgres => races(db, cases(file, renews, true)).await,
    }
}

/// A client that hangs up while the work outlasts the stale-claim age,
/// the app finishing its request and then dropping it, and five at once.
fn cases<R: Raced>(file: &Path, renews: bool, http: bool) -> Vec<Case<R>> {
    let slow = base(file).with(|r| {
        r.wire.http = http;
        r.app.work_ms = Some(600);
        r.guard.stale_after_ms = Some(200);
        r.guard.heartbeat_ms = renews.then_some(50);
    });
    let hang_up = |on_hangup| {
        slow.clone().with(|r| {
            r.faults.hang_up = Some(CrashPlan {
                worker: None,
                at: FaultPoint::DuringWork,
            });
            r.hang_up.on_hangup = Some(on_hangup);
        })
    };
    vec![
        (hang_up(OnHangup::Finish), finished_then_replayed),
        (hang_up(OnHangup::Cancel), dropped_then_retried),
        (slow, one_call),
    ]
}

/// Lesson 9's exercise.
pub const EXERCISE: Exercise = Exercise {
    lesson: 9,
    file: "9-heartbeat.toml",
    goal: "a claim whose work outlasts the stale-claim age is never taken over while it works, and still goes stale once its request is dropped",
    try_it: "idem race --strategy-file {file} --http --work-ms 600 --stale-after-ms 200 \
             --hang-up at=during-work --on-hangup finish",
    start: include_str!("../../exercises/9-heartbeat.toml"),
    solution: include_str!("../../exercises/solutions/9-heartbeat.toml"),
    hints: [
        "Race it with --trace: the retry took over a claim whose owner was still \
         working. What did the claim look like to the retry, and what would have \
         made it look alive?",
        "Its locked_at was older than the stale-claim age. Add a renew step that \
         moves it forward while the work runs, and race with --heartbeat-ms 50: \
         UPDATE idempotency_keys SET locked_at = now() WHERE id = $claim_id ... \
         (NOW(6) on MariaDB, whose NOW() drops the fraction of a second).",
        "Renew only what is still this owner's and still pending: WHERE id = \
         $claim_id AND worker = $worker AND status = 'pending'. A renewal of a \
         claim that changed hands would keep the new owner's claim alive for the old.",
    ],
    why: "A stale-claim age is a guess at the longest work; a heartbeat replaces the \
          guess with a sign of life. The renewal comes from a connection of its own, so \
          it commits while the work's connection is busy, and it stops when the request \
          is dropped, so only a silent owner's claim ages. The age can then be short: a \
          few beats, not the slowest work.",
    read: super::spec::read_guard_file,
    judge: |db, path| Box::pin(judge(db, path)),
    engine: crate::race::engine::Engine::Postgres,
    mariadb: super::spec::OnMariadb::Files(&super::spec::Starter {
        try_it: "idem race --engine mariadb --strategy-file {file} --work-ms 600 \
                 --stale-after-ms 200 --hang-up at=during-work --on-hangup finish",
        start: include_str!("../../exercises/mariadb/9-heartbeat.toml"),
        solution: include_str!("../../exercises/solutions/mariadb/9-heartbeat.toml"),
    }),
};
