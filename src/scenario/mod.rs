//! Scenario files: each demonstration as data, with the figures it must show.
//!
//! A scenario names its lesson, explains itself, gives the race's settings
//! (or a key-design simulation's), and says what to expect: row counts and
//! outcomes, or for a probabilistic figure the share of runs that must show
//! it. `idem scenario run` compares, in the spirit of PostgreSQL's isolation
//! tester and its expected files.

pub mod builtin;
mod check;
mod file;

#[cfg(feature = "internals")]
pub use check::Check;
pub use check::{Verdict, run};
#[cfg(feature = "internals")]
pub use file::{Expect, KeysSpec};
pub use file::{Scenario, parse};
