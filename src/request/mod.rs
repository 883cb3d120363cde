//! The contract every strategy speaks: one request, the steps it takes, the connection it leases, the answer it gives.
//!
//! This layer sits beneath the strategies and the race harness alike. A
//! strategy handles a [`Request`] on a [`Lease`] of a pooled connection,
//! records each [`Step`] in a [`Trace`], and returns an [`Answer`]. The
//! harness watches through the trace: timings and statement counts, the
//! faults it plants ([`fault`]) and the step-by-step control ([`StepHook`]).
//! Nothing here knows which strategy runs or who drives the race.

mod answer;
mod db_error;
pub mod fault;
pub mod hang_up;
mod hook;
pub mod key;
mod lease;
pub mod ledger;
pub mod mariadb;
mod observer;
mod params;
pub mod service;
mod step;
mod trace;

pub use answer::{Answer, Outcome, Waited};
pub use db_error::DbError;
pub use hook::{Go, StepHook, TurnEvent};
pub use lease::{Failure, Lease, bounded};
pub use observer::{Observer, Unobserved};
pub use params::{MAX_KEY_LEN, Params, Request};
pub use step::Step;

/// What a parameter of a per-claim renewal stands for, on either engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimPart {
    /// The claim's id (`$claim_id`).
    Id,
    /// Its owner, the worker that won it (`$worker`).
    Owner,
}
pub use trace::{StepEvent, Trace};
