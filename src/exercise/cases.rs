//! What the guard-file exercises share: the base race, the runner of a list of cases, and the verdicts they reuse, each PASS or FAIL with what it saw, in the lesson's words.

use std::path::Path;

use anyhow::Result;

use crate::challenge::{self, Judge};
use crate::db::Database;
use crate::limits::Origin;
use crate::probe::conformance::Check;
use crate::race::options::RaceInput;
use crate::race::raced::{Raced, Reply};
use crate::race::told::{Counted, Fact, Told, Who, tell};
use crate::race::{Outcome, Race, RaceResult};
use crate::request::Step;

/// One race a lesson's file is put through, and how its result is judged
/// (on PostgreSQL unless `R` says).
pub type Case<R = RaceResult> = (RaceInput, Judge<R>);

/// The work each case's requests do: wide enough that five requests
/// started together overlap in every run.
const WORK_MS: u64 = 100;

/// Five requests racing the guard file at `file`, each with a connection
/// of its own (the widest race of five), working long enough to overlap.
pub fn base(file: &Path) -> RaceInput {
    RaceInput::default().with(|r| {
        r.strategy.strategy_file = Some(file.to_path_buf());
        r.app.pool_size = Some(6);
        r.app.work_ms = Some(WORK_MS);
        r.guard.stale_after_ms = Some(challenge::STALE_AFTER.as_millis() as u64);
    })
}

/// Races each case once, on fresh tables, and judges it.
pub async fn races(db: &Database, cases: Vec<Case>) -> Result<Vec<Check>> {
    let mut checks = Vec::new();
    for (input, verdict) in cases {
        let settings = input.build(Origin::Flags)?;
        let r = Race::prepare(db, settings).await?.run(1).await?;
        checks.push(verdict(&r));
    }
    Ok(checks)
}

/// "1 XP row, 1 service call; created 1, conflict 4": every figure a
/// fact, checked against the race (on either engine) before it is shown.
pub(super) fn rows_calls_statuses(r: &impl Raced) -> String {
    let mut told = crate::race::told::rows_and_calls(r.xp_rows(), r.service_calls());
    told.push("; ");
    told.append(crate::challenge::outcomes_told(r));
    r.finish(told)
}

/// One XP row and one call, and no request answered with an error.
pub(super) fn held_once(r: &impl Raced) -> bool {
    r.xp_rows() == 1 && r.service_calls() == 1 && r.answers().iter().all(|w| w.status < 500)
}

pub(super) fn one_call<R: Raced>(r: &R) -> Check {
    raced(
        r,
        "five at once",
        "1 XP row and 1 service call; the other four do no work and get no error",
        held_once(r),
        rows_calls_statuses(r),
    )
}

pub(super) fn one_call_of_twenty<R: Raced>(r: &R) -> Check {
    raced(
        r,
        "twenty at once",
        "the same with twenty requests, each with a connection of its own",
        held_once(r),
        rows_calls_statuses(r),
    )
}

pub(super) fn every_answer_201<R: Raced>(r: &R) -> Check {
    let all_201 = r.answers().iter().all(|w| w.status == 201);
    raced(
        r,
        "five in one transaction each",
        "1 XP row and 1 service call, and every request answered 201",
        r.xp_rows() == 1 && r.service_calls() == 1 && all_201,
        rows_calls_statuses(r),
    )
}

pub(super) fn dropped_then_retried<R: Raced>(r: &R) -> Check {
    let replies = r.answers();
    let retry = replies.iter().find(|w| w.retry).map(|w| w.status);
    hung_up(
        r,
        "request dropped mid-work",
        "the app drops the request; its claim is renewed no more, and the client's retry \
         takes it once stale: 201, 1 XP row, nothing pending",
        retry == Some(201) && r.xp_rows() == 1 && r.pending_key_rows() == 0,
        {
            let mut told = Told::new();
            tell!(
                told,
                "{}, {} pending",
                Counted(Fact::XpRows(r.xp_rows()), "XP row"),
                Fact::PendingKeyRows(r.pending_key_rows())
            );
            r.finish(told) + &retried(r)
        },
    )
}

/// "; the retry, worker 6, answered 201 created", or that none came.
fn retried(r: &impl Raced) -> String {
    let mut told = Told::new();
    match r.answers().into_iter().find(|w| w.retry) {
        Some(w) => {
            let worker = Fact::Worker(w.worker, Who::Ended(w.outcome));
            let answer = format!("{} {}", w.status, w.outcome.name());
            tell!(told, "; the retry, worker {}, answered {}", worker, answer);
        }
        None => told.push("; no retry came"),
    }
    r.finish(told)
}

pub(super) fn finished_then_replayed<R: Raced>(r: &R) -> Check {
    let replies = r.answers();
    let retry = replies.iter().find(|w| w.retry).map(|w| w.outcome);
    hung_up(
        r,
        "slow work, retried",
        "the client hangs up while the work outlasts the stale-claim age, the app finishes \
         the request, and the retry replays it: 1 XP row, 1 service call",
        retry == Some(Outcome::Replayed) && r.xp_rows() == 1 && r.service_calls() == 1,
        {
            let mut told = Told::new();
            tell!(
                told,
                "{}, {}",
                Counted(Fact::XpRows(r.xp_rows()), "XP row"),
                Counted(Fact::ServiceCalls(r.service_calls()), "service call")
            );
            r.finish(told) + &retried(r)
        },
    )
}

/// The case's verdict, given only if the race raced: a pass is "n/a" when
/// some request began its first statement after the first work had ended,
/// since the requests then did not meet where the lesson's flaw is.
pub(super) fn raced(
    r: &impl Raced,
    case: &'static str,
    demands: &'static str,
    passed: bool,
    saw: String,
) -> Check {
    held_in_a_race(r.first_steps(), (case, demands), passed, saw)
}

/// A pass counts only if the requests (each its steps) raced: every one
/// began before the first work ended. Otherwise the case is not judged.
pub(super) fn held_in_a_race(
    requests: Vec<&[crate::request::StepEvent]>,
    (case, demands): (&'static str, &'static str),
    passed: bool,
    saw: String,
) -> Check {
    let first_work_end = requests
        .iter()
        .flat_map(|steps| steps.iter())
        .filter(|e| e.step == Step::Work)
        .map(|e| e.end_ms)
        .fold(f64::INFINITY, f64::min);
    let met = requests
        .iter()
        .filter(|steps| {
            steps
                .iter()
                .find(|e| e.step != Step::Checkout)
                .is_none_or(|e| e.start_ms < first_work_end)
        })
        .count();
    if passed && met < requests.len() {
        return Check::not_applicable(
            case,
            demands,
            format!(
                "did not race: {met} of {} requests began before the first work ended; {saw}",
                requests.len()
            ),
        );
    }
    Check::judged(case, demands, passed, saw)
}

/// The case's verdict, given only if the client did hang up mid-work.
fn hung_up(
    r: &impl Raced,
    case: &'static str,
    demands: &'static str,
    passed: bool,
    saw: String,
) -> Check {
    // A retry is sent only after a hang-up; the hung-up request's own
    // outcome may since have become a duplicate.
    let hung_up = |w: &Reply| w.outcome == Outcome::HungUp || w.retry;
    if !r.answers().iter().any(hung_up) {
        return Check::not_applicable(
            case,
            demands,
            format!("the client never hung up mid-work; {saw}"),
        );
    }
    Check::judged(case, demands, passed, saw)
}
