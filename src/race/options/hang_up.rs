//! Lesson 9: what the app does with a request whose client went away, and the client's retries after it hung up.

use std::time::{Duration, Instant};

use clap::Args;
use serde::{Deserialize, Serialize};

use super::super::worker_report::{WorkerReport, abandoned};
use crate::http::app::Handled;
use crate::http::app::OnHangup;
use crate::limits::help_with_default as with_default;
use crate::request::Outcome;

/// How often a client that hung up sends its request again while it is
/// answered 409.
const HANG_UP_RETRY_EVERY: Duration = Duration::from_millis(100);

/// `--on-hangup` (the client's `--hang-up` is a fault's).
#[derive(Debug, Clone, Default, Args, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct HangUpInput {
    #[arg(help_heading = "Lesson 9: a request's life")]
    #[arg(long, value_enum, value_name = "WAY",
          help = with_default(
              "What the app does with a request whose client goes away: drop it at its \
               next await, as hyper does, or run it to its end, as Puma and Node do. \
               With finish, at most as many requests as connections allowed (serve's \
               --max-connections) run at once, their clients there or gone; past it a \
               request is answered 503 at once.",
              OnHangup::Cancel.name()))]
    pub on_hangup: Option<OnHangup>,
}

/// After the race: a client that hung up retries (`send_again`) until it
/// gets a final answer or `settle` has passed, and its first request's
/// report says what the app (`on_hangup`) did with it, as `take_handled`
/// tells.
pub(crate) async fn retry_after_hang_up(
    on_hangup: OnHangup,
    settle: Duration,
    reports: &mut Vec<WorkerReport>,
    send_again: impl AsyncFn(usize) -> WorkerReport,
    take_handled: impl FnOnce(usize) -> Option<Option<Handled>>,
) {
    let hung_up = reports
        .iter()
        .find(|w| w.outcome == Outcome::HungUp)
        .map(|w| w.worker);
    let Some(worker) = hung_up else {
        return;
    };
    reports.push(retry_until_answered(settle, async || send_again(worker).await).await);
    // What the app did with the abandoned request, if it went on.
    if let (Some(handled), Some(report)) = (
        take_handled(worker),
        reports.iter_mut().find(|w| w.worker == worker),
    ) {
        abandoned(report, handled, on_hangup);
    }
}

/// How long a client that hung up keeps retrying: the claim's stale age
/// and the work, twice over; past that, the key is stuck.
pub(crate) fn settle(stale_after: Duration, work: Duration) -> Duration {
    2 * (stale_after + work) + HANG_UP_RETRY_EVERY
}

/// The retry of a client that hung up: the same request from a new
/// worker, sent again every [`HANG_UP_RETRY_EVERY`] while it is answered
/// 409, until it gets another answer or `settle` has passed. Returns the
/// last answer's report, saying how many 409s came before it.
async fn retry_until_answered(
    settle: Duration,
    send: impl AsyncFn() -> WorkerReport,
) -> WorkerReport {
    let began = Instant::now();
    let mut conflicts = 0;
    loop {
        let mut report = send().await;
        report.retry = true;
        if report.outcome != Outcome::Conflict {
            if conflicts > 0 {
                report.did = format!("after {conflicts} × 409: {}", report.did);
            }
            return report;
        }
        conflicts += 1;
        if began.elapsed() >= settle {
            report.did = format!(
                "still 409 after {:.1} s ({conflicts} tries): the key is stuck",
                began.elapsed().as_secs_f64()
            );
            return report;
        }
        tokio::time::sleep(HANG_UP_RETRY_EVERY).await;
    }
}
