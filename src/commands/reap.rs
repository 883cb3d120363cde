//! `idem reap`: the key table's expiry is a job someone has to run.

use std::time::Duration;

use anyhow::Result;

use super::command::OnDatabase;
use crate::cli::teaching::ReapArgs;
use crate::db::{ConnectOptions, Database};
use crate::report::{Output, stores::render_reap};
use crate::store::reap::{reap, seed};

/// Ages (hours) of the completed keys seeded into a fresh database: either
/// side of the common 24 h and 72 h retentions.
pub const SEEDED_AGES: [f64; 11] = [
    1.0, 6.0, 12.0, 23.0, 25.0, 36.0, 48.0, 71.0, 73.0, 96.0, 120.0,
];

/// A reap of the key table: a kept schema's, or a fresh one seeded with
/// keys of [`SEEDED_AGES`].
pub struct Plan {
    older_than: Duration,
    /// Whether the keys are idem's own, seeded into a fresh schema.
    seeded: bool,
    pub(crate) out: Output,
    db: ConnectOptions,
}

pub fn plan(args: &ReapArgs) -> Plan {
    Plan {
        older_than: args.older_than,
        seeded: args.kept.schema.is_none(),
        out: Output::from_json_flag(args.json),
        db: args.kept.options(&args.connect),
    }
}

impl OnDatabase for Plan {
    fn database(&self) -> ConnectOptions {
        self.db.clone()
    }

    async fn run_on(self, db: &Database) -> Result<()> {
        if self.seeded {
            seed(db, &SEEDED_AGES, 2).await?;
        }
        let reaped = reap(db, self.older_than).await?;
        self.out.record(&reaped, |r| render_reap(r, self.seeded))
    }
}
