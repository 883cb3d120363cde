//! `idem pooler`: a real PgBouncer in transaction mode in front of the disposable cluster, and what it does to a session's state.

use std::path::PathBuf;

use anyhow::{Result, bail};

use super::command::OnDatabase;
use crate::cli::teaching::PoolerArgs;
use crate::db::{Backend, ConnectOptions, Database, pgbouncer};
use crate::limits;
use crate::report::{self, Output};

pub struct Plan {
    /// The database it runs against.
    db: ConnectOptions,
    program: PathBuf,
    runs: u64,
    pub(crate) out: Output,
}

/// Finds PgBouncer before any cluster starts.
pub fn plan(args: &PoolerArgs) -> Result<Plan> {
    Ok(Plan {
        db: ConnectOptions {
            cluster: args.cluster.options(),
            ..ConnectOptions::default()
        },
        program: pgbouncer::locate(args.cluster.pgbouncer_bin.as_deref())?,
        runs: args.runs.unwrap_or(limits::POOLER_RUNS.default()),
        out: Output::from_json_flag(args.json),
    })
}

impl OnDatabase for Plan {
    fn database(&self) -> ConnectOptions {
        self.db.clone()
    }

    async fn run_on(self, db: &Database) -> Result<()> {
        let Backend::Embedded(cluster) = &db.backend else {
            bail!("idem pooler starts PgBouncer in front of its own disposable cluster");
        };
        let found = crate::pooler::run(&self.program, cluster, self.runs, None).await?;
        self.out.record(&found, report::pooler::render)
    }
}
