//! The race: N concurrent workers, one key, one strategy, a real connection pool.

mod blocking;
pub mod fault;
mod lease;
pub mod limits;
mod outcome;
mod request;
mod result;
mod runner;
mod settings;
pub mod stepper;
mod trace;

pub use lease::{Failure, Lease};
pub use outcome::{Answer, Outcome, WorkerReport};
pub use request::Request;
pub use result::{EXPECTED_XP_ROWS, RaceResult};
pub use runner::Race;
pub use settings::{
    CrashPlan, DEFAULT_KEY, DEFAULT_LOCK_TIMEOUT_MS, DEFAULT_WORK_MS, MAX_KEY_LEN, RaceSettings,
};
pub use trace::{StepEvent, Trace};
