//! Lesson 9: what the app does with a request whose client went away, and the client's retries after it hung up.

use std::time::Duration;

use clap::Args;
use serde::{Deserialize, Serialize};

use crate::http::app::OnHangup;
use crate::limits::help_with_default as with_default;

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

/// How long a client that hung up keeps retrying: the claim's stale age
/// and the work, twice over; past that, the key is stuck.
pub(crate) fn settle(stale_after: Duration, work: Duration) -> Duration {
    2 * (stale_after + work) + HANG_UP_RETRY_EVERY
}
