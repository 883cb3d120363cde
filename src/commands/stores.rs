//! `idem stores`: the key table and the Solid-Cache-like store, measured side by side (lesson 5).

use std::time::Duration;

use anyhow::Result;

use super::command::OnDatabase;
use crate::cli::teaching::StoresArgs;
use crate::db::{ConnectOptions, Database};
use crate::race::stores::{StoresPlan, measure};
use crate::report::{self, Output};
use crate::store::cache::CacheLimits;

pub struct Plan {
    /// The database it runs against.
    db: ConnectOptions,
    runs: u64,
    workers: usize,
    work: Duration,
    cache: CacheLimits,
    pub(crate) out: Output,
}

pub fn plan(args: &StoresArgs) -> Result<Plan> {
    Ok(Plan {
        db: args.connect.options(),
        runs: args.runs,
        workers: args.workers as usize,
        work: Duration::from_millis(args.work_ms),
        cache: CacheLimits {
            max_entries: args.cache_max_entries,
            ..CacheLimits::default()
        },
        out: Output::from_json_flag(args.json),
    })
}

impl OnDatabase for Plan {
    fn database(&self) -> ConnectOptions {
        self.db.clone()
    }

    async fn run_on(self, db: &Database) -> Result<()> {
        let measured = StoresPlan {
            runs: self.runs,
            workers: self.workers,
            work: self.work,
            cache: self.cache,
        };
        let progress = self.out.progress(measured.races(), "races");
        let rows = measure(db, measured, || progress.inc(1)).await?;
        progress.finish_and_clear();
        for row in &rows {
            self.out.record(row, |_| String::new())?;
        }
        self.out.text(|| report::stores::render_stores(&rows))
    }
}
