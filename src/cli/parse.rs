//! The value parsers that are more than a number within a limit: crash plans and XP amounts (durations are the limits table's).

use clap::ValueEnum;

use crate::limits;
use crate::race::CrashPlan;
use crate::race::fault::FaultPoint;

/// Parses `worker=N,at=POINT`.
pub fn crash_plan(text: &str) -> Result<CrashPlan, String> {
    worker_at(text, "crash")
}

/// Parses `--hang-up`'s `worker=N,at=during-work`.
pub fn hang_up_plan(text: &str) -> Result<CrashPlan, String> {
    let plan = worker_at(text, "hang-up")?;
    match plan.at {
        FaultPoint::DuringWork => Ok(plan),
        other => Err(format!(
            "a client hangs up during-work only (it sees no other step), not {}",
            other.name()
        )),
    }
}

/// Parses `worker=N,at=POINT` for a fault called `what`.
fn worker_at(text: &str, what: &str) -> Result<CrashPlan, String> {
    let point = |name: &str| {
        FaultPoint::from_str(name.trim(), true).map_err(|_| {
            format!(
                "unknown {what} point {name:?}; use after-claim, during-work or before-complete"
            )
        })
    };
    let (mut worker, mut at) = (None, None);
    for part in text.split(',') {
        match part.trim().split_once('=') {
            Some(("worker", _)) if worker.is_some() => {
                return Err("worker= is given twice; name one worker".into());
            }
            Some(("worker", n)) => worker = Some(limits::CRASH_WORKER.parse(n)? as usize),
            Some(("at", _)) if at.is_some() => {
                return Err(format!("the {what} point is given twice; name one"));
            }
            None if at.is_some() && point(part).is_ok() => {
                return Err(format!("the {what} point is given twice; name one"));
            }
            Some(("at", name)) => at = Some(point(name)?),
            // A bare word is a point: say which points there are.
            None => at = Some(point(part)?),
            _ => return Err(format!("{part:?} is not worker=N or at=POINT")),
        }
    }
    match at {
        Some(at) => Ok(CrashPlan { worker, at }),
        None => Err("say where, e.g. at=after-claim or worker=2,at=during-work".into()),
    }
}

/// Parses one XP amount within its limit.
pub fn amount(text: &str) -> Result<i32, String> {
    limits::AMOUNT.parse(text).map(|n| n as i32)
}
