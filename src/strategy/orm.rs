//! Whose statements the course's code sends: idem's bare ones, or what ActiveRecord 6.1 makes of the same Ruby.
//!
//! The Ruby of lesson 1 (`find_by`, then `create!` twice) reaches
//! PostgreSQL as one statement each from idem. From ActiveRecord 6.1 each
//! `create!` is `BEGIN`, the `INSERT`, `COMMIT`, and a connection checked
//! out of the pool is first verified with `SELECT 1`. With work that takes
//! no time, those round trips are most of the race window, which is why a
//! bare race at `--work-ms 0` shows the course's figure less often than a
//! Rails app does.

use serde::{Deserialize, Serialize};

/// The statement shape of check-then-store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Orm {
    /// One statement per step, as idem writes them.
    #[default]
    Bare,
    /// ActiveRecord 6.1's: `SELECT 1` on checkout, each `create!` in its
    /// own transaction.
    Activerecord,
}

impl Orm {
    /// As `--orm` and scenario files spell it.
    pub fn name(self) -> &'static str {
        match self {
            Orm::Bare => "bare",
            Orm::Activerecord => "activerecord",
        }
    }
}

/// ActiveRecord's check that a connection checked out still works.
pub const VERIFY: &str = "SELECT 1";
