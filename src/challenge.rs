//! The build-it-yourself challenge of lesson 7: judge any guard with the course's races.
//!
//! A guard is anything that implements [`Strategy`]. [`judge`] puts it
//! through four cases against the real database and says, for each, whether
//! it held and with what figures. `examples/challenge.rs` is a learner's
//! starting point; `idem challenge` judges idem's own [`Guard`](crate::strategy::guard::Guard).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;

use crate::db::Database;
use crate::limits::Origin;
use crate::probe::conformance::Check;
use crate::race::fault::FaultPoint;
use crate::race::options::RaceInput;
use crate::race::raced::Raced;
use crate::race::told::{Counted, Fact, Told, Who, tell};
use crate::race::{CrashPlan, Outcome, Race, RaceResult};
use crate::strategy::{Strategy, StrategyKind};

/// The stale-claim age the crash cases wait out before retrying: a guard that
/// takes over stale claims should use this one.
pub const STALE_AFTER: Duration = Duration::from_millis(500);

/// Runs the four cases against `guard`.
pub async fn judge(db: &Database, guard: Arc<dyn Strategy>) -> Result<Vec<Check>> {
    let base = RaceInput::with_strategy(StrategyKind::Guard)
        .with(|r| r.guard.stale_after_ms = Some(STALE_AFTER.as_millis() as u64));
    let mut checks = Vec::new();
    for (input, verdict) in cases(&base) {
        let settings = input.build(Origin::Flags)?;
        let r = Race::prepare_with(db, settings, guard.clone())
            .await?
            .run(1)
            .await?;
        checks.push(verdict(&r));
    }
    Ok(checks)
}

/// How a case judges the race it ran (on PostgreSQL unless `R` says).
pub type Judge<R = RaceResult> = fn(&R) -> Check;

/// Each case: the race it runs on top of `base` (which names the guard
/// and sets [`STALE_AFTER`]), and how its result is judged, on either
/// engine's race.
pub fn cases<R: Raced>(base: &RaceInput) -> [(RaceInput, Judge<R>); 4] {
    let crash = base.clone().with(|r| {
        r.faults.crash = Some(CrashPlan {
            worker: None,
            at: FaultPoint::AfterClaim,
        });
        r.app.pool_size = Some(6);
    });
    [
        // 1. Lesson 1's race: five workers, one key, four connections.
        (base.clone(), five_workers),
        // 2. Lesson 4: the same key with other amounts.
        (
            base.clone().with(|r| {
                r.amounts.amounts = Some(vec![10, 20, 10, 30, 10]);
                r.app.pool_size = Some(6);
            }),
            fingerprint,
        ),
        // 3. Lesson 7: the winner crashes after claiming; a retry comes after the stale-claim age.
        (crash.clone(), crash_after_claim),
        // 4. Two retries race for the same stale claim.
        (
            crash.with(|r| r.faults.recovery_retries = Some(2)),
            two_takers,
        ),
    ]
}

/// The XP rows and every status, as the cases show what they saw.
pub fn rows_and_statuses(r: &impl Raced) -> String {
    let mut told = Told::new();
    tell!(told, "{}; ", Counted(Fact::XpRows(r.xp_rows()), "XP row"));
    told.append(outcomes_told(r));
    r.finish(told)
}

/// "1 XP row, 1 service call", each a fact checked against the race.
pub fn rows_and_calls(r: &RaceResult) -> String {
    crate::race::told::rows_and_calls(r.xp_rows, r.service_calls).finish(r)
}

/// Every outcome counted, and what the first request that failed with an
/// error was told (a guard file's step that failed or ran past its limit,
/// named by its line), so that "error 5" never stands alone: a narrative
/// whose every count and worker is a fact.
pub fn outcomes_told(r: &impl Raced) -> Told {
    let mut told = crate::race::told::outcomes(|o| r.count(o));
    let replies = r.answers();
    if let Some(w) = replies.iter().find(|w| w.outcome == Outcome::Error) {
        // The server's own code beside its words, where it said one.
        let code = match &w.error {
            Some(e) => format!(" ({e})"),
            None => String::new(),
        };
        let worker = Fact::Worker(w.worker, Who::Ended(Outcome::Error));
        tell!(told, " (worker {}: {}{})", worker, w.did.clone(), code);
    }
    told
}

fn five_workers<R: Raced>(r: &R) -> Check {
    Check::judged(
        "five-worker race",
        "exactly 1 XP row when five requests with one key arrive at once",
        r.xp_rows() == 1,
        rows_and_statuses(r),
    )
}

/// Lesson 4's case: the same key with other amounts.
pub fn fingerprint<R: Raced>(r: &R) -> Check {
    let replies = r.answers();
    let winner = replies
        .iter()
        .find(|w| w.outcome == Outcome::Created)
        .map(|w| w.amount);
    let others_rejected = replies
        .iter()
        .filter(|w| Some(w.amount) != winner)
        .all(|w| w.status == 422);
    Check::judged(
        "fingerprint",
        "1 XP row, and 422 for every request whose amount differs from the first",
        r.xp_rows() == 1 && winner.is_some() && others_rejected && r.wrong_replays() == 0,
        rows_and_statuses(r),
    )
}

fn crash_after_claim<R: Raced>(r: &R) -> Check {
    let replies = r.answers();
    let retry = replies.iter().find(|w| w.retry);
    Check::judged(
        "crash after claim",
        "after the stale-claim age, the retry answers 201 and there is exactly 1 XP row",
        r.xp_rows() == 1 && retry.is_some_and(|w| w.status == 201),
        rows_and_retries(r),
    )
}

fn two_takers<R: Raced>(r: &R) -> Check {
    let replies = r.answers();
    // Doing the work is making an XP row: a retry that came late enough to
    // be replayed the first's response is answered 201 too, and did none.
    let did_work = |o: Outcome| matches!(o, Outcome::Created | Outcome::Duplicate);
    let worked = replies.iter().filter(|w| w.retry && did_work(w.outcome));
    Check::judged(
        "stale claim, two takers",
        "two retries after the stale-claim age: still exactly 1 XP row, and one of them does the work",
        r.xp_rows() == 1 && worked.count() == 1,
        rows_and_retries(r),
    )
}

/// "1 XP row; the retry (worker 6) answered 201 created", each retry
/// named and its answer checked against its report.
pub fn rows_and_retries(r: &impl Raced) -> String {
    let mut told = Told::new();
    tell!(told, "{}", Counted(Fact::XpRows(r.xp_rows()), "XP row"));
    let retries: Vec<_> = r.answers().into_iter().filter(|w| w.retry).collect();
    if retries.is_empty() {
        told.push("; no retry was sent");
    }
    for (i, w) in retries.iter().enumerate() {
        let (lead, which) = match (i, retries.len()) {
            (0, 1) => ("; ", "the retry, "),
            (0, _) => ("; ", "the retries: "),
            _ => (", ", ""),
        };
        let worker = Fact::Worker(w.worker, Who::Ended(w.outcome));
        let answer = format!("{} {}", w.status, w.outcome.name());
        tell!(told, "{lead}{which}worker {}, answered {}", worker, answer);
    }
    r.finish(told)
}
