//! The race: N concurrent workers, one key, one strategy, a real connection pool.

mod after;
mod blocking;
mod checks;
pub mod engine;
pub mod mariadb;
pub mod on_engine;
pub use crate::db::clock;
pub mod moves;
pub mod options;
mod over_http;
pub mod raced;
pub mod replicas;
mod result;
mod runner;
mod settings;
mod standby;
pub mod stepper;
pub mod stores;
pub mod told;
mod worker_report;

/// The request contract, as the harness's users name it.
pub use crate::request::fault;
#[cfg(feature = "internals")]
pub use crate::request::{Answer, Failure};
pub use crate::request::{Lease, Outcome, Request, StepEvent, Trace};
pub use options::{ReadFrom, Synchronous};
#[cfg(feature = "internals")]
pub use result::EXPECTED_XP_ROWS;
pub use result::{
    FailoverFigures, RaceResult, ServerCounts, StandbyFigures, histogram, outcome_totals,
    percentile, xp_rows,
};
pub use runner::Race;
#[cfg(feature = "internals")]
pub use settings::MAX_KEY_LEN;
pub use settings::{App, CrashPlan, DEFAULT_KEY, DEFAULT_STRATEGY, RaceSettings, Transport};
pub use worker_report::WorkerReport;
