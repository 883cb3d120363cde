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
//!           A claim's age runs from its claim, or from its owner's last
//!           beat if the guard has a [`Heartbeat`]: then only an owner that
//!           went silent loses its claim, however long the work takes.
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
//! deadpool-postgres one, sending each statement unnamed in one round trip
//! (so that a pooler in transaction mode passes it), and knows
//! nothing of idem's race harness, which watches the same code through an
//! observer for its races, faults and step-by-step runs.
//!
//! # Cancellation
//!
//! The future [`Guard::run`] returns may be dropped at any await (the
//! client hung up, its stream was reset, a timeout fired). What is left:
//!
//! - **while the claim is on its way**: the claim's `INSERT` commits on its
//!   own if it reached the server, and the key stays *pending*, owned by
//!   [`Key::owner`]. The same request's retry (the same owner) resumes it;
//!   anyone else gets [`Verdict::InFlight`] until
//!   [`stale_after`](Guard::stale_after) has passed, then takes it over.
//! - **during the work**: the guard queues a `ROLLBACK` on your client as
//!   its future is dropped, so the work's rows are rolled back and the
//!   client goes back to your pool outside any transaction (its next user
//!   sends nothing before that `ROLLBACK`). The claim stays pending, as
//!   above: never committed by whoever uses the connection next.
//! - **once the completion is sent**: the completion and its `COMMIT` are
//!   already on the wire, so the claim completes with the work's rows unless
//!   the server fails; a retry gets [`Verdict::Replay`].
//!
//! A client whose connection breaks is none of the above: the server rolls
//! back what was open, and the claim is pending.
//!
//! A handler that awards XP once per idempotency key (`examples/guard_award.rs`,
//! which `cargo test` builds):
//!
//! ```ignore
#![doc = include_str!("../../../examples/guard_award.rs")]
//! ```
#![deny(missing_docs)]

mod core;
mod harness;
mod heartbeat;
pub(crate) mod inputs;
pub(crate) mod on_mariadb;
mod open_transaction;
mod settings;
mod verdict;

use std::future::Future;

use crate::request::Unobserved;
pub(crate) use harness::SPEC;
pub(crate) use harness::beat_aside;
pub use heartbeat::{ClaimPart, Heartbeat, Renewal};
pub use inputs::{GuardClient, Key};
#[doc(hidden)]
pub use settings::Recovery;
pub use settings::{Guard, OnFailure};
pub use verdict::{ClaimState, Reply, Verdict, WorkFailed};

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
