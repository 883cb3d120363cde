//! Lesson 7's faults on purpose (and lesson 9's hang-up, a client's fault), their checks, and the retries that recover from them.

use anyhow::Result;
use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};

use super::super::fault::FaultPoint;
use crate::limits::{self};

/// A crash planned for one worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CrashPlan {
    /// The worker to crash; `None`: whichever reaches the point first.
    pub worker: Option<usize>,
    pub at: FaultPoint,
}

/// A client that hangs up mid-request (`--hang-up`), then retries: the
/// same shape as a crash, on the client's side of the wire.
pub type HangUpPlan = CrashPlan;

/// `--crash`, `--hang-up`, `--kill-connection`, `--fail-work`, `--recovery-retries`.
#[derive(Debug, Clone, Default, Args, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct FaultInput {
    /// Crash on purpose: the connection of the first worker to reach POINT
    /// (or of worker N only) dies, and the worker with it; once its claim
    /// is older than the stale-claim age its request is retried. POINT: after-claim, during-work,
    /// before-complete. E.g. --crash after-claim, --crash worker=2,at=during-work.
    #[arg(help_heading = "Lesson 7: faults and recovery")]
    #[arg(long, value_name = "[worker=N,]at=POINT", value_parser = crash_plan)]
    pub crash: Option<CrashPlan>,

    /// Over --http: the client of the first worker to start its work (or
    /// of worker N) closes its connection halfway through the work, as a
    /// client whose timeout fired, then retries while it is answered 409.
    /// What the app does with the abandoned request is --on-hangup's.
    /// E.g. --hang-up worker=2,at=during-work.
    #[arg(help_heading = "Lesson 9: a request's life")]
    #[arg(long, value_name = "[worker=N,]at=during-work", value_parser = hang_up_plan)]
    pub hang_up: Option<CrashPlan>,

    /// Have another session terminate the connection of the first worker to
    /// start its work, halfway through it; the worker itself lives on.
    #[arg(help_heading = "Lesson 7: faults and recovery")]
    #[arg(long)]
    pub kill_connection: bool,

    /// Make worker N's work fail (the award service errors), then retry it.
    #[arg(help_heading = "Lesson 7: faults and recovery")]
    #[arg(long, value_name = "N", allow_negative_numbers = true,
          value_parser = limits::FAIL_WORK.parser())]
    pub fail_work: Option<u64>,

    #[arg(help_heading = "Lesson 7: faults and recovery")]
    #[arg(long, value_name = "N", allow_negative_numbers = true,
          value_parser = limits::RECOVERY_RETRIES.parser(),
          help = limits::RECOVERY_RETRIES.help(
              "How many retries of a crashed or failed request are sent at once."))]
    pub recovery_retries: Option<u64>,
}

/// Faults on purpose, and the retries that recover from them.
#[derive(Debug, Clone, Copy)]
pub struct Faults {
    fail_work: Option<usize>,
    crash: Option<CrashPlan>,
    kill_connection: bool,
    recovery_retries: usize,
    hang_up: Option<HangUpPlan>,
}

impl FaultInput {
    pub(super) fn resolve(&self) -> Faults {
        Faults {
            fail_work: self.fail_work.map(|w| w as usize),
            crash: self.crash,
            kill_connection: self.kill_connection,
            recovery_retries: self
                .recovery_retries
                .unwrap_or(limits::RECOVERY_RETRIES.default())
                as usize,
            hang_up: self.hang_up,
        }
    }

    /// Whether a fault or a kill is asked for (which `idem step` refuses).
    pub(super) fn any(&self) -> bool {
        self.crash.is_some() || self.kill_connection
    }
}

impl Faults {
    /// `--fail-work N`: worker N's work fails.
    pub fn fail_work(&self) -> Option<usize> {
        self.fail_work
    }

    /// `--crash`: a worker's connection dies at a point, and the worker with it.
    pub fn crash(&self) -> Option<CrashPlan> {
        self.crash
    }

    /// How many retries of a crashed (or failed) request are sent at once.
    pub fn recovery_retries(&self) -> usize {
        self.recovery_retries
    }

    /// `--kill-connection`: another session terminates a worker's connection.
    pub fn kill_connection(&self) -> bool {
        self.kill_connection
    }

    /// `--hang-up`: a client closes its connection mid-work, then retries.
    pub fn hang_up(&self) -> Option<HangUpPlan> {
        self.hang_up
    }
}

/// Parses `--crash`'s `[worker=N,]at=POINT`.
fn crash_plan(text: &str) -> Result<CrashPlan, String> {
    worker_at(text, "crash")
}

/// Parses `--hang-up`'s `[worker=N,]at=during-work`.
fn hang_up_plan(text: &str) -> Result<CrashPlan, String> {
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
