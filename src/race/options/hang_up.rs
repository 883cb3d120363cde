//! Lesson 9: what the app does with a request whose client went away, and the client's retries after it hung up.

use std::time::Duration;

use clap::Args;
use serde::{Deserialize, Serialize};

use crate::http::app::OnHangup;
use crate::limits::help_with_default as with_default;
use crate::request::Outcome;

/// How often a client that hung up sends its request again while it is
/// answered 409.
const HANG_UP_RETRY_EVERY: Duration = Duration::from_millis(100);

/// A retry's report, on either engine: what the loop of a client that
/// hung up reads and marks.
pub(crate) trait Retried {
    fn outcome(&self) -> Outcome;
    fn did(&mut self) -> &mut String;
    fn mark_retry(&mut self);
}

/// The retry of a client that hung up: `send` sent again every
/// [`HANG_UP_RETRY_EVERY`] while it is answered 409, until it gets another
/// answer or `settle` has passed. Returns the last answer's report,
/// saying how many 409s came first.
pub(crate) async fn until_answered<R: Retried>(
    mut send: impl AsyncFnMut() -> R,
    settle: Duration,
) -> R {
    let began = std::time::Instant::now();
    let mut conflicts = 0;
    loop {
        let mut report = send().await;
        report.mark_retry();
        if report.outcome() != Outcome::Conflict {
            if conflicts > 0 {
                let did = format!("after {conflicts} × 409: {}", report.did());
                *report.did() = did;
            }
            return report;
        }
        conflicts += 1;
        if began.elapsed() >= settle {
            *report.did() = format!(
                "still 409 after {:.1} s ({conflicts} tries): the key is stuck",
                began.elapsed().as_secs_f64()
            );
            return report;
        }
        tokio::time::sleep(HANG_UP_RETRY_EVERY).await;
    }
}

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

/// How long a client that hung up keeps retrying: the claim's stale age
/// and the work, twice over; past that, the key is stuck.
pub(crate) fn settle(stale_after: Duration, work: Duration) -> Duration {
    2 * (stale_after + work) + HANG_UP_RETRY_EVERY
}
