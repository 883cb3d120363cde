//! The whole guard (lesson 7), as a library for your own service: claim, work, complete, and where every failure goes.
//!
//! ```text
//! claim     INSERT the key as pending (with the fingerprint); autocommit, so
//!           others see it. Losing it is not an error but the loser's path:
//!             other fingerprint           → Reused (422), no work
//!             completed                   → Replay of the stored response
//!             pending, ours (a retry)     → resume it
//!             pending, older than timeout → take it over (one taker wins)
//!             pending                     → InFlight (409)
//! work      in one transaction with complete: your work's rows and the
//! complete  claim's completion commit together or not at all, and complete
//!           only matches while the claim is still ours.
//! rescue    the work failed: store the 500 and replay it (Stripe), or delete
//!           the claim so a retry runs again (Powertools).
//! ```
//!
//! The guard needs the `idempotency_keys` table of idem's first migration
//! (`migrations/0001_idempotency_keys.sql`) on the connection's search path.
//! It runs on a plain tokio-postgres [`Client`](tokio_postgres::Client) or on a
//! deadpool-postgres one (whose statement cache it then uses), and knows
//! nothing of idem's race harness, which watches the same code through an
//! observer for its races, faults and step-by-step runs.
//!
//! A handler that awards XP once per idempotency key:
//!
//! ```no_run
//! use idem::guard::{Guard, Key, Reply, Verdict, WorkFailed};
//! use serde_json::json;
//!
//! async fn award(
//!     db: &tokio_postgres::Client,
//!     idempotency_key: &str,
//!     fingerprint: &str,
//! ) -> Result<(u16, serde_json::Value), tokio_postgres::Error> {
//!     let key = Key {
//!         key: idempotency_key,
//!         operation: "award_xp",
//!         fingerprint: Some(fingerprint),
//!         owner: 1, // this request; a retry that presents it again resumes its claim
//!     };
//!     let verdict = Guard::default()
//!         .run(db, &key, |tx| async move {
//!             // Runs inside the transaction that completes the claim.
//!             let row = tx
//!                 .query_one(
//!                     "INSERT INTO experience_points (user_id, amount) VALUES (42, 10) RETURNING id",
//!                     &[],
//!                 )
//!                 .await
//!                 .map_err(WorkFailed::Database)?;
//!             let id: i64 = row.get(0);
//!             Ok(Reply { status: 201, body: json!({ "xp_id": id }) })
//!         })
//!         .await?;
//!     Ok(match verdict {
//!         Verdict::Done(reply) | Verdict::Replay(reply) => (reply.status, reply.body),
//!         Verdict::Failed { reply, .. } => (reply.status, reply.body),
//!         Verdict::InFlight { .. } => (409, json!({ "code": "idempotency_key_in_use" })),
//!         Verdict::Reused => (422, json!({ "code": "idempotency_key_reused" })),
//!     })
//! }
//! ```
#![deny(missing_docs)]

pub(crate) mod client;
mod core;
mod harness;
#[doc(hidden)]
use std::future::Future;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::request::Unobserved;
pub use client::{GuardClient, Key};

/// What the guard does when the work itself fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnFailure {
    /// Complete the claim with the 500 and replay it to retries (Stripe).
    Store,
    /// Delete the claim, so that a retry runs the work again (Powertools).
    Release,
}

impl OnFailure {
    /// As `--on-failure` and scenario files spell it.
    pub fn name(self) -> &'static str {
        match self {
            OnFailure::Store => "store",
            OnFailure::Release => "release",
        }
    }
}

/// The complete guard.
#[derive(Debug, Clone)]
pub struct Guard {
    /// How old a pending claim must be before another request may take it over.
    pub lock_timeout: Duration,
    /// What a failed work leaves behind.
    pub on_failure: OnFailure,
    /// Retries after a transient failure, each after twice the last backoff
    /// (in idem's races; a service retries as its clients do).
    pub max_retries: u32,
    /// The first of those backoffs.
    pub first_backoff: Duration,
}

impl Default for Guard {
    fn default() -> Self {
        Self {
            lock_timeout: Duration::from_secs(1),
            on_failure: OnFailure::Store,
            max_retries: 3,
            first_backoff: Duration::from_millis(10),
        }
    }
}

/// A response: the status and body the client gets, and retries replay.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// The JSON body.
    pub body: Value,
}

/// Why the work did not produce a reply.
#[derive(Debug)]
pub enum WorkFailed {
    /// The work itself failed (a service errored): the guard rescues it as
    /// [`OnFailure`] says, with a 500 whose body carries this message.
    Service(String),
    /// The work failed, and this is the reply its client gets (and, with
    /// [`OnFailure::Store`], every retry): the caller's own status and body.
    Replied(Reply),
    /// The database failed under the work: nothing is kept, and the error is
    /// returned, to be retried with the same key if it is transient.
    Database(tokio_postgres::Error),
}

/// What the guard answers.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// This request did the work; its reply is stored for retries.
    Done(Reply),
    /// The key was completed before: the stored reply, byte for byte.
    Replay(Reply),
    /// Another request holds the claim (409): `why` says how it stands.
    InFlight {
        /// How this request found, or lost, the claim.
        why: ClaimState,
    },
    /// The key was first used with other parameters (422); no work was done.
    Reused,
    /// The work failed: the stored 500, or the claim released for a retry.
    Failed {
        /// The failure the client gets.
        reply: Reply,
        /// The claim was deleted ([`OnFailure::Release`]).
        released: bool,
    },
}

/// Why a request answers 409: the claim is someone else's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimState {
    /// Another request holds it, and is working.
    Pending,
    /// It was there, and was gone (released) by the time it was read again.
    Gone,
    /// It was stale, and another request took it over first.
    TakenByAnother,
    /// This request held it, and lost it to a takeover while it worked: its
    /// work was rolled back with the completion.
    TakenOver,
}

impl ClaimState {
    /// In a few words: `claim pending`, `claim taken over`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimState::Pending => "claim pending",
            ClaimState::Gone => "claim gone",
            ClaimState::TakenByAnother => "stale claim taken by another",
            ClaimState::TakenOver => "claim taken over",
        }
    }
}

impl Guard {
    /// Guards one request on `client`: claims `key`, runs `work` in the
    /// transaction that completes the claim, and answers. One attempt: an
    /// `Err` is a database error, and a transient one (a lost connection,
    /// a serialization failure) may be retried with the same key.
    pub async fn run<'c, C, W, Fut>(
        &self,
        client: &'c C,
        key: &Key<'_>,
        work: W,
    ) -> Result<Verdict, tokio_postgres::Error>
    where
        C: GuardClient,
        W: FnOnce(&'c C) -> Fut,
        Fut: Future<Output = Result<Reply, WorkFailed>> + Send,
    {
        core::attempt(self, client, key, work, &mut Unobserved).await
    }
}
