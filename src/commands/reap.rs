//! `idem reap`: the key table's expiry is a job someone has to run.

use anyhow::Result;

use crate::cli::teaching::ReapArgs;
use crate::db::{ConnectOptions, Database};
use crate::report::{Output, stores::render_reap};
use crate::store::reap::{reap, seed};

/// Ages (hours) of the completed keys seeded into a fresh database: either
/// side of the common 24 h and 72 h retentions.
pub const SEEDED_AGES: [f64; 11] = [
    1.0, 6.0, 12.0, 23.0, 25.0, 36.0, 48.0, 71.0, 73.0, 96.0, 120.0,
];

pub fn connect(args: &ReapArgs) -> ConnectOptions {
    ConnectOptions {
        schema: args.kept.schema.clone(),
        ..args.connect.options()
    }
}

pub async fn execute(args: &ReapArgs, out: Output, db: &Database) -> Result<()> {
    let seeded = args.kept.schema.is_none();
    if seeded {
        seed(db, &SEEDED_AGES, 2).await?;
    }
    let reaped = reap(db, args.older_than).await?;
    out.record(&reaped, |r| render_reap(r, seeded))
}
