//! The race: N concurrent workers, one key, one strategy, a real connection pool.

mod blocking;
pub mod input;
pub mod limits;
mod result;
mod runner;
mod settings;
pub mod stepper;
pub mod stores;
mod worker_report;

/// The request contract, as the harness's users name it.
pub use crate::request::fault;
pub use crate::request::{Answer, Failure, Lease, Outcome, Request, StepEvent, Trace};
pub use result::{EXPECTED_XP_ROWS, RaceResult, histogram, outcome_totals, percentile};
pub use runner::Race;
pub use settings::{
    CrashPlan, DEFAULT_KEY, DEFAULT_LOCK_TIMEOUT_MS, DEFAULT_WORK_MS, MAX_KEY_LEN, RaceSettings,
};
pub use worker_report::WorkerReport;
